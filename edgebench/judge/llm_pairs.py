"""Precisions of one LLM side by side: the speed-up of each bundle over the reference (the fp32 one),
shape by shape, with an interval, its size, and its greedy token agreement -- computed from typed
``llm-bench`` rows, so every renderer and the result document draw the same numbers.

Speed-up reads "how many times faster than the reference": candidate / reference for tok/s,
reference / candidate for TTFT and init. Its interval is a Student-t interval of the ratio of the
geometric means of each side's per-process values (``stats.replicate_interval``, pooled variance of
their logs; the processes, not tokens, are the replicates) at ``stats.CI_LEVEL`` (95 %), stated
beside it everywhere; fewer than two processes a side give no interval. (A bootstrap of three
values a side only ever spans [min/max, max/min] at no stated level.)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from edgebench.rows import Agreement, InferenceRow
from edgebench.judge.stats import CI_LEVEL, replicate_interval

# (metric, label, higher is better) -- the figures compared between precisions
SPEEDUP_METRICS = (("decode_tok_s", "decode", True), ("prefill_tok_s", "prefill", True), ("ttft_ms", "TTFT", False),
                   ("init_ms", "init", False))


@dataclass(frozen=True)
class Speedup:
    metric: str
    ratio: float
    lo: float | None
    hi: float | None
    level: float | None = None          # the interval's confidence (CI_LEVEL), None without one
    processes: tuple[int, int] = (0, 0)   # reference, candidate

    def to_dict(self) -> dict[str, Any]:
        return {"metric": self.metric, "ratio": self.ratio, "lo": self.lo, "hi": self.hi, "level": self.level,
                "processes": list(self.processes),
                "interval": None if self.level is None else
                f"{self.level:.0%} Student-t on log per-process values, {self.processes[0]} vs {self.processes[1]}"}

    @property
    def cell(self) -> str:
        """``1.98x [1.90-2.06] 95%`` (``1.98x (1 process: no interval)``), as every renderer prints it."""
        if self.lo is None or self.hi is None or self.level is None:
            return f"{self.ratio:.2f}x (no interval: {min(self.processes)} process)"
        return f"{self.ratio:.2f}x [{self.lo:.2f}-{self.hi:.2f}] {self.level:.0%}"


@dataclass(frozen=True)
class PrecisionPair:
    """One bundle against the reference bundle of the same model, at one shape."""

    model: str
    reference: str                  # precision of the reference row (fp32)
    candidate: str                  # precision of the compared row
    prefill: int | None
    decode: int | None
    size_ratio: float | None        # reference size / candidate size ("2.1x smaller")
    speedups: tuple[Speedup, ...]
    agreement: Agreement | None

    def speedup(self, metric: str) -> Speedup | None:
        return next((s for s in self.speedups if s.metric == metric), None)

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.model, "reference": self.reference, "candidate": self.candidate,
                "prefill_tokens": self.prefill, "decode_tokens": self.decode, "size_ratio": self.size_ratio,
                "speedups": [s.to_dict() for s in self.speedups],
                "agreement": None if self.agreement is None else self.agreement.to_dict()}


def reference_row(rows: Sequence[InferenceRow]) -> InferenceRow | None:
    """The row the others are compared with: an fp32 one, else the first."""
    return next((r for r in rows if r.precision == "fp32"), rows[0] if rows else None)


def _speedup(key: str, higher: bool, ref: InferenceRow, cand: InferenceRow) -> Speedup | None:
    a, b = ref.llm.spread(key), cand.llm.spread(key)
    if a is None or b is None or not a.median or not b.median:
        return None
    ratio = b.median / a.median if higher else a.median / b.median
    va, vb = [v for v in a.values if v > 0], [v for v in b.values if v > 0]
    ci = replicate_interval(va, vb) if len(va) >= 2 and len(vb) >= 2 else None
    if ci is not None and not higher:
        ci = (1.0 / ci[1], 1.0 / ci[0])
    return Speedup(key, ratio, None if ci is None else ci[0], None if ci is None else ci[1],
                   None if ci is None else CI_LEVEL, (len(a.values), len(b.values)))


def precision_pairs(rows: Sequence[Any]) -> list[PrecisionPair]:
    """Every (reference, candidate) pair among llm-bench rows of one model, target and shape whose
    bundles differ (by sha256); failed rows pair too (speed-ups empty) so a failure stays visible."""
    llm_rows = [r for r in rows if isinstance(r, InferenceRow) and r.llm is not None]
    groups: dict[tuple, list[InferenceRow]] = {}
    for r in llm_rows:
        groups.setdefault((r.model, r.target, r.llm.prefill_tokens, r.llm.decode_tokens, r.llm.activation,
                           r.llm.speculative), []).append(r)     # precisions pair under the same engine options
    out = []
    for (model, _target, prefill, decode, _act, _spec), members in groups.items():
        ref = reference_row(members)
        if ref is None:
            continue
        for cand in members:
            if cand is ref or cand.model_sha256 == ref.model_sha256:
                continue
            speedups = () if not (ref.ok and cand.ok) else tuple(
                s for s in (_speedup(k, hib, ref, cand) for k, _label, hib in SPEEDUP_METRICS) if s is not None)
            size = (ref.size_bytes / cand.size_bytes) if ref.size_bytes and cand.size_bytes else None
            out.append(PrecisionPair(str(model), str(ref.precision), str(cand.precision), prefill, decode, size,
                                     speedups, cand.llm.agreement))
    return out


def option_pairs(rows: Sequence[Any]) -> list[PrecisionPair]:
    """An engine-option axis side by side: each bundle's rows at one shape under every other option
    (activation type, speculative decoding) against its row under the first one run (the axis's
    first value); ``reference``/``candidate`` are the options' labels (``activation fp16``) and the
    agreement is the greedy tokens against the first option's (``llm.option_agreement``)."""
    llm_rows = [r for r in rows if isinstance(r, InferenceRow) and r.llm is not None]
    groups: dict[tuple, list[InferenceRow]] = {}
    for r in llm_rows:
        groups.setdefault((r.model, r.model_sha256, r.target, r.llm.prefill_tokens, r.llm.decode_tokens), []).append(r)
    out = []
    for (model, _sha, _target, prefill, decode), members in groups.items():
        ref = members[0]
        for cand in members[1:]:
            if cand.llm.options == ref.llm.options:
                continue
            speedups = () if not (ref.ok and cand.ok) else tuple(
                s for s in (_speedup(k, hib, ref, cand) for k, _label, hib in SPEEDUP_METRICS) if s is not None)
            out.append(PrecisionPair(f"{model} {cand.precision}", ref.llm.options, cand.llm.options, prefill, decode,
                                     None, speedups, cand.llm.option_agreement))
    return out
