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
                                                       activation=settings.activation, warmup=0, prompt=settings.prompt,
                                                       speculative=settings.speculative_one))
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


# Below this share of greedy tokens agreeing with the axis's first value, an engine option is said to
# have collapsed the output (fp16 activations "decoding to token soup", LiteRT-LM#2992).
COLLAPSE_BELOW = 0.5


def compare_options(rows: list[InferenceRow], bundles: Sequence[BundleInfo], runner: Any, variants: Sequence[Any],
                    progress: Callable[[str], None] | None = None) -> tuple[list[InferenceRow], dict[str, Any]]:
    """An engine-option axis (``--activation fp32,fp16``, ``--speculative off,on``): each bundle greedily
    decodes the agreement prompt under every option and is compared token by token with its own
    output under the first (``llm.option_agreement``); under COLLAPSE_BELOW agreement its rows get a
    warning. (rows, the document's ``engine_options``)."""
    first = variants[0]
    tokens = max(first.decode)
    found: dict[tuple[str, int], Agreement] = {}
    notes: list[str] = []
    if not first.agreement:
        notes.append("token agreement between engine options not measured (--no-agreement)")
    elif runner.name != "host":
        notes.append(f"token agreement between engine options is measured on the host; this run's target is "
                     f"{runner.name}")
    else:
        for b in bundles:
            pieces: list[list[str] | None] = []
            for v in variants:
                label = _label(v)
                mine = [r for r in rows if r.model_sha256 == b.sha256 and r.llm is not None
                        and (r.llm.activation, r.llm.speculative) == (v.activation, v.speculative_one)]
                if mine and not any(r.ok for r in mine):
                    pieces.append(None)
                    notes.append(f"{b.name} with {label}: token agreement not measured: its rows failed (above)")
                    continue
                if progress:
                    progress(f"greedy decoding of {b.name} with {label} ({tokens} tokens) for the option agreement")
                try:
                    got, _n = runner.greedy(LmJob(bundle=b.path, prefill_tokens=0, decode_tokens=tokens,
                                                  threads=v.threads, max_num_tokens=v.max_num_tokens,
                                                  activation=v.activation, warmup=0, prompt=v.prompt,
                                                  speculative=v.speculative_one))
                    pieces.append(got)
                except EdgebenchError as err:
                    pieces.append(None)
                    notes.append(f"{b.name} with {label}: token agreement not measured: {err}")
            if pieces[0] is None:
                continue
            for k, v in enumerate(variants[1:], 1):
                if pieces[k] is not None:
                    found[b.sha256, k] = Agreement.between(f"{b.name} ({_label(first)})", pieces[0], pieces[k])
    keys = [(v.activation, v.speculative_one) for v in variants]
    out = []
    for r in rows:
        k = keys.index((r.llm.activation, r.llm.speculative)) if r.llm is not None and (
            r.llm.activation, r.llm.speculative) in keys else None
        ag = found.get((r.model_sha256, k)) if k else None
        if ag is None:
            out.append(r)
            continue
        warn = collapse_warning(ag, _label(variants[k]), _label(first))
        out.append(r.replace(llm=replace(r.llm, option_agreement=ag), warnings=(*r.warnings, *warn)))
    doc = {"reference": _label(first), "values": [_label(v) for v in variants], "agreement_tokens": tokens,
           "prompt": first.prompt, "collapse_below": COLLAPSE_BELOW, "notes": notes,
           "agreement": [{"bundle": b.name, "options": _label(variants[k]), **found[b.sha256, k].to_dict()}
                         for b in bundles for k in range(1, len(variants)) if (b.sha256, k) in found]}
    return out, doc


def collapse_warning(ag: Agreement, label: str, first: str) -> tuple[str, ...]:
    """The row warning when fewer than COLLAPSE_BELOW of the greedy tokens under ``label`` agree with
    those under the axis's first value ``first`` (none otherwise)."""
    if ag.rate is None or ag.rate >= COLLAPSE_BELOW:
        return ()
    return (f"{label} collapses the output: {ag.agree} of {ag.compared} greedy tokens agree with {first} (first "
            f"divergence at token {ag.first_divergence}); its speed is not a speed of the same answers -- check "
            f"the bundle with {first}, or do not use {label}",)


def _label(v: Any) -> str:
    spec = v.speculative_one
    parts = [f"activation {v.activation}" if v.activation else "",
             "" if spec is None else f"speculative {'on' if spec else 'off'}"]
    return ", ".join(p for p in parts if p) or "engine defaults"
