"""One generation's figures, wherever they came from, and the one judge of whether they are real.

The engine's two traps (issue 36): a failed generation is not an error -- ``Benchmark.run`` and the
``litert-lm benchmark`` CLI return normally and report 0 tokens at 0.00 tokens/s -- and the context
the engine enforces is the graph's KV cache, not the ``max_num_tokens`` it is given. So every
generation, from the host worker or from a device's log, goes through ``judge``: zero or missing
tokens, fewer tokens than asked, and the engine's own error lines become a failure that says why
(with the exit code of docs/exit-codes.md), never a row of zeros. ``check_shape`` refuses a shape the
context cannot hold before anything runs.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Mapping

_ALLOWED = re.compile(r"maximum number of tokens allowed: (\d+) >= (\d+)")
REEXPORT = ("re-export it with litert-torch's ExportConfig(mask_as_input=True, "
            "kvcache_layout=kv_cache.KV_LAYOUT_TRANSPOSED), the layout LiteRT-LM's engine reads")


@dataclass(frozen=True)
class Generation:
    """One generation's engine figures (``BenchmarkInfo``) and what the engine said about it."""

    init_ms: float | None = None
    ttft_ms: float | None = None
    prefill_tokens: int | None = None
    prefill_tok_s: float | None = None
    decode_tokens: int | None = None
    decode_tok_s: float | None = None
    engine_errors: tuple[Mapping[str, str], ...] = ()
    engine_context_limit: int | None = None     # "the static model supports (N)" when the engine logs it
    exception: str | None = None
    facts: Mapping[str, Any] = field(default_factory=dict)
    engine_check: str | None = None             # the engine's first failed RET_CHECK, when it logged one

    @classmethod
    def from_worker(cls, d: Mapping[str, Any]) -> "Generation":
        def ms(key: str) -> float | None:
            v = d.get(key)
            return None if v is None else float(v) * 1e3
        return cls(init_ms=ms("init_s"), ttft_ms=ms("ttft_s"), prefill_tokens=d.get("prefill_tokens"),
                   prefill_tok_s=d.get("prefill_tok_s"), decode_tokens=d.get("decode_tokens"),
                   decode_tok_s=d.get("decode_tok_s"), engine_errors=tuple(d.get("engine_errors") or ()),
                   engine_context_limit=d.get("engine_context_limit"), exception=d.get("exception"),
                   engine_check=d.get("engine_check"),
                   facts={"wall_ms": None if d.get("wall_s") is None else float(d["wall_s"]) * 1e3})

    def to_record(self) -> dict[str, Any]:
        """The per-process figures a row keeps (``row["repeats"][i]``)."""
        return {"init_ms": self.init_ms, "ttft_ms": self.ttft_ms, "prefill_tokens": self.prefill_tokens,
                "prefill_tok_s": self.prefill_tok_s, "decode_tokens": self.decode_tokens,
                "decode_tok_s": self.decode_tok_s, **{k: v for k, v in self.facts.items() if v is not None}}


@dataclass(frozen=True)
class Failure:
    message: str
    exit_code: int            # 2: the bundle or the shape asked for (the user can fix it); 3: the engine/infra


def check_shape(prefill: int, decode: int, context: int | None, *, limit_from: str = "the bundle's context") -> str | None:
    """Why ``prefill`` + ``decode`` tokens cannot run in ``context`` (None: they can, or no context is known).

    LiteRT-LM refuses a prompt of ``context`` tokens or more ("Input token ids are too long ...: 256 >= 256")
    and silently stops decoding when the context is full, so both limits are checked before a run."""
    if context is None:
        return None
    if prefill > context:
        return f"prefill {prefill} tokens > {limit_from} {context}"
    if prefill == context:
        return f"prefill {prefill} tokens = {limit_from} {context}: the engine needs room for the first decode step"
    if prefill + decode > context:
        return (f"prefill {prefill} + decode {decode} = {prefill + decode} tokens > {limit_from} {context}: the "
                f"engine would stop decoding after {context - prefill} tokens")
    return None


def _finite_positive(v: Any) -> bool:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return False
    return math.isfinite(f) and f > 0


def judge(gen: Generation, *, prefill: int, decode: int, context: int | None, bundle: str,
          speculative: bool | None = None) -> Failure | None:
    """None when ``gen`` is a real measurement of the shape asked for, else why it is not."""
    if speculative and gen.engine_errors and gen.engine_errors[0].get("what") == "create engine":
        err = gen.engine_errors[0]
        check = f" (its check: {gen.engine_check})" if gen.engine_check else ""
        return Failure(f"--speculative on: the engine cannot create a speculative-decoding engine for {bundle}: "
                       f"{err.get('code') or 'UNKNOWN'}{check}; speculative decoding needs a bundle exported for it "
                       "(with a drafter) -- measure this one with --speculative off", 2)
    if gen.engine_errors:
        err = gen.engine_errors[0]
        code, msg = str(err.get("code") or "UNKNOWN"), str(err.get("message") or "").strip()
        text = f"the engine refused the generation: {code}: {msg}"
        m = _ALLOWED.search(msg)
        seen = gen.engine_context_limit or (int(m.group(2)) if m else None)
        if seen is not None and context is not None and seen < context:
            return Failure(f"{text} -- the engine reads a context of {seen} token(s) where {bundle}'s metadata "
                           f"declares {context}: its KV cache is not laid out the way the engine expects; "
                           f"{REEXPORT}", 2)
        if m and context is not None and int(m.group(1)) >= int(m.group(2)):
            return Failure(f"{text} (prefill {m.group(1)} tokens, context {m.group(2)}); ask for at most "
                           f"{int(m.group(2)) - 1} prefill tokens", 2)
        return Failure(f"{text} ({bundle})", 2 if code in ("INVALID_ARGUMENT", "NOT_FOUND", "FAILED_PRECONDITION",
                                                             "UNIMPLEMENTED", "OUT_OF_RANGE") else 3)
    if gen.exception:
        return Failure(f"the engine failed on {bundle}: {gen.exception}", 3)
    if not gen.prefill_tokens or not gen.decode_tokens:
        return Failure(f"the engine produced {gen.prefill_tokens or 0} prefill and {gen.decode_tokens or 0} decode "
                       f"tokens and reported {gen.decode_tok_s or 0:.2f} tokens/s without an error message "
                       f"({bundle}): a failed generation, not a measurement; run it once with the engine's log "
                       "(EDGEBENCH_DEBUG=1) to see why", 3)
    if gen.prefill_tokens != prefill:
        return Failure(f"the engine prefilled {gen.prefill_tokens} tokens, not the {prefill} asked ({bundle})", 3)
    if gen.decode_tokens < decode:
        why = (f"; the context is {context} tokens, so at most {context - prefill} fit after the prompt"
               if context is not None and prefill + decode > context else "")
        return Failure(f"the engine stopped decoding after {gen.decode_tokens} of {decode} tokens ({bundle}){why}", 2)
    for name, v in (("prefill tok/s", gen.prefill_tok_s), ("decode tok/s", gen.decode_tok_s),
                    ("time to first token", gen.ttft_ms)):
        if not _finite_positive(v):
            return Failure(f"the engine reported {name} = {v} for {gen.prefill_tokens}+{gen.decode_tokens} tokens "
                           f"({bundle}): not a measurement", 3)
    return None
