"""The precision comparison of ``llm-bench``: greedy decoding of one prompt by every bundle, the token
agreement of each with the reference bundle (``rows.llm.Agreement``: first divergence, identical
prefix), attached to the compared bundle's rows, and the side-by-side speed-ups (``llm_pairs``)
written into the document.

Greedy (top-k 1) decoding of the same prompt is deterministic for a bundle, so two bundles of one
model produce the same tokens until their numbers differ enough to change an argmax: the position
where they first part is the LLM analogue of top-1 agreement. It runs on the host (the Python API
streams one piece per decode step); a device target's rows get no agreement and the document says so.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable, Sequence

from edgebench.core.errors import EdgebenchError
from edgebench.model.litertlm_file import BundleInfo
from edgebench.judge.llm_pairs import precision_pairs
from edgebench.rows import Agreement, InferenceRow
from edgebench.targets.litert_lm.host import LmJob


def _reference(bundles: Sequence[BundleInfo]) -> BundleInfo:
    return next((b for b in bundles if b.precision == "fp32"), bundles[0])


def compare_precisions(rows: list[InferenceRow], bundles: Sequence[BundleInfo], runner: Any, settings: Any,
                       progress: Callable[[str], None] | None = None) -> tuple[list[InferenceRow], dict[str, Any]]:
    """(rows with ``llm.agreement`` on each compared bundle's rows, the document's ``comparison``)."""
    ref = _reference(bundles)
    note = None
    tokens = max(settings.decode)
    agreements: dict[str, Agreement] = {}
    if not settings.agreement:
        note = "token agreement not measured (--no-agreement)"
    elif runner.name != "host":
        note = ("token agreement is measured on the host (the Python API streams each decode step); this run's "
                f"target is {runner.name}")
    else:
        try:
            pieces: dict[str, tuple[list[str], int | None]] = {}
            for b in bundles:
                if progress:
                    progress(f"greedy decoding of {b.name} ({tokens} tokens) for the token agreement")
                pieces[b.sha256] = runner.greedy(LmJob(bundle=b.path, prefill_tokens=0, decode_tokens=tokens,
                                                       threads=settings.threads, max_num_tokens=settings.max_num_tokens,
                                                       activation=settings.activation, warmup=0, prompt=settings.prompt))
            ref_pieces, n_prompt = pieces[ref.sha256]
            for b in bundles:
                if b.sha256 != ref.sha256:
                    agreements[b.sha256] = Agreement.between(f"{ref.name} ({ref.precision})", ref_pieces,
                                                             pieces[b.sha256][0], n_prompt)
        except EdgebenchError as err:
            note = f"token agreement not measured: {err}"
    out = [r.replace(llm=replace(r.llm, agreement=agreements[r.model_sha256]))
           if r.llm is not None and r.model_sha256 in agreements else r for r in rows]
    comparison = {"reference": {"bundle": ref.path, "precision": ref.precision, "sha256": ref.sha256,
                                "size_bytes": ref.size_bytes},
                  "prompt": settings.prompt, "agreement_tokens": tokens, "agreement_note": note,
                  "pairs": [p.to_dict() for p in precision_pairs(out)]}
    return out, comparison
