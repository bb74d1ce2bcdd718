"""The LLM part of a row (``llm-bench``): what was asked, what the engine enforced, and every metric
over the repeats -- each process's value, the median and an interval of the median.

Repeats are processes, not tokens: a process's decode tok/s is one number (the engine's figure for
its decode turn), so the spread that matters is between processes -- other cores, caches, clock
states and neighbours -- and that is what the interval describes.

**The interval** (``Spread``) is the distribution-free confidence interval of the median from
order statistics: with n values and B ~ Binomial(n, 1/2) the count below the true median,
[x_(k), x_(n-k+1)] covers it with probability 1 - 2 P(B <= k-1) (the sign-test interval; Conover,
*Practical Nonparametric Statistics*, 3rd ed., sec. 3.2). The largest k reaching 95 % is used;
below 6 repeats none does, and the interval is [min, max] at the level it has (3 repeats: 75 %,
5: 93.8 %), which ``level`` states. No normality is assumed: three processes cannot show it.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from edgebench.core.latency import binom_cdf
from edgebench.rows._json import _f, _freeze, _i

CI_LEVEL = 0.95
# The per-process figures of an llm-bench row (row["repeats"][i] keys), in display order; the
# registry's LLM metrics read their medians (``LlmPart.spread``).
LLM_METRICS = ("ttft_ms", "prefill_tok_s", "decode_tok_s", "init_ms", "peak_rss_bytes")
# --memory-phases: resident memory per phase (Engine/Session API), per process: the peak and the steady
PHASES = ("init", "prefill", "decode")
PHASE_METRICS = tuple(f"{p}_{k}_bytes" for p in PHASES for k in ("peak", "steady"))


def median_interval(values: Sequence[float], level: float = CI_LEVEL) -> tuple[float, float, float] | None:
    """(lo, hi, achieved level) of the order-statistic interval of the median (module docstring)."""
    xs = sorted(float(v) for v in values)
    n = len(xs)
    if n == 0:
        return None
    if n == 1:
        return xs[0], xs[0], 0.0
    cdf = binom_cdf(n, 0.5)                        # cdf[j] = P(B <= j)
    best = 1
    for k in range(1, n // 2 + 1):
        if 1.0 - 2.0 * float(cdf[k - 1]) >= level:
            best = k
    achieved = 1.0 - 2.0 * float(cdf[best - 1])
    return xs[best - 1], xs[n - best], achieved


@dataclass(frozen=True)
class Spread:
    """One metric over the repeats: each process's value, their median, the median's interval."""

    values: tuple[float, ...]
    median: float | None
    lo: float | None
    hi: float | None
    level: float | None            # the interval's achieved confidence (0.75 for 3 repeats)

    @classmethod
    def of(cls, values: Sequence[float | None]) -> "Spread | None":
        vals = tuple(float(v) for v in values if v is not None and math.isfinite(float(v)))
        if not vals:
            return None
        lo, hi, level = median_interval(vals) or (None, None, None)
        return cls(vals, float(statistics.median(vals)), lo, hi, level)

    @property
    def rel_width(self) -> float | None:
        """(hi - lo) / median: how far apart the processes were."""
        if self.median in (None, 0) or self.lo is None or self.hi is None:
            return None
        return (self.hi - self.lo) / abs(self.median)

    def to_dict(self) -> dict[str, Any]:
        return {"median": self.median, "lo": self.lo, "hi": self.hi, "level": self.level, "values": list(self.values)}

    @classmethod
    def from_dict(cls, d: Any) -> "Spread | None":
        if not isinstance(d, Mapping):
            return None
        vals = tuple(x for x in (_f(v) for v in d.get("values") or ()) if x is not None)
        return cls(vals, _f(d.get("median")), _f(d.get("lo")), _f(d.get("hi")), _f(d.get("level")))


@dataclass(frozen=True)
class Agreement:
    """Greedy decoding of one prompt by this bundle against a reference bundle (the fp32 one):
    the LLM analogue of top-1 agreement. Tokens are compared position by position as the engine
    streamed them (one piece per decode step)."""

    reference: str                  # the reference row's model name / precision
    prompt_tokens: int | None
    compared: int                   # positions compared (the shorter output)
    same_prefix: int                # tokens identical from the start
    first_divergence: int | None    # 0-based position of the first differing token; None: none differ
    agree: int                      # positions with the same token (after a divergence too)
    lengths: tuple[int, int]        # tokens generated (reference, this)

    @property
    def rate(self) -> float | None:
        return None if not self.compared else self.agree / self.compared

    def to_dict(self) -> dict[str, Any]:
        return {"reference": self.reference, "prompt_tokens": self.prompt_tokens, "compared": self.compared,
                "same_prefix": self.same_prefix, "first_divergence": self.first_divergence, "agree": self.agree,
                "agreement": self.rate, "lengths": list(self.lengths)}

    @classmethod
    def from_dict(cls, d: Any) -> "Agreement | None":
        if not isinstance(d, Mapping):
            return None
        lengths = [(_i(x) or 0) for x in (d.get("lengths") or (0, 0))][:2] + [0, 0]
        return cls(str(d.get("reference") or ""), _i(d.get("prompt_tokens")), _i(d.get("compared")) or 0,
                   _i(d.get("same_prefix")) or 0, _i(d.get("first_divergence")), _i(d.get("agree")) or 0,
                   (lengths[0], lengths[1]))

    @classmethod
    def between(cls, reference: str, ref_tokens: Sequence[str], tokens: Sequence[str],
                prompt_tokens: int | None = None) -> "Agreement":
        n = min(len(ref_tokens), len(tokens))
        same = [ref_tokens[i] == tokens[i] for i in range(n)]
        first = next((i for i, s in enumerate(same) if not s), None)
        if first is None and len(ref_tokens) != len(tokens):
            first = n                                  # one stopped early: they differ from there
        return cls(reference, prompt_tokens, n, n if first is None else min(first, n), first, sum(same),
                   (len(ref_tokens), len(tokens)))


@dataclass(frozen=True)
class TaskScore:
    """``row.llm.task_score``: a small exact-match task set greedily decoded by this row's bundle
    (``llm.tasks``): how many answers were right, of how many, and each item's prompt, answer and
    output, so a stored score can be read item by item. On a random-weight test bundle it checks
    the machinery (prompts, greedy decoding, scoring, storage, compare), not a model."""

    correct: int
    total: int
    task_set: str                       # what the items are: "generated: 10 copy + 10 addition, seed 47" | a file
    items: tuple[Mapping[str, Any], ...] = ()   # {"kind", "prompt", "answer", "output", "correct"}

    @property
    def fraction(self) -> float | None:
        return None if not self.total else self.correct / self.total

    @property
    def cell(self) -> str:
        """``3/20 (15 %)``, as every renderer prints it."""
        return f"{self.correct}/{self.total}" + ("" if not self.total else f" ({100 * self.correct / self.total:.0f} %)")

    def to_dict(self) -> dict[str, Any]:
        return {"correct": self.correct, "total": self.total, "fraction": self.fraction, "task_set": self.task_set,
                "items": [dict(i) for i in self.items]}

    @classmethod
    def from_dict(cls, d: Any) -> "TaskScore | None":
        if not isinstance(d, Mapping):
            return None
        items = tuple(_freeze(dict(i)) for i in (d.get("items") or ()) if isinstance(i, Mapping))
        return cls(_i(d.get("correct")) or 0, _i(d.get("total")) or 0, str(d.get("task_set") or ""), items)


@dataclass(frozen=True)
class LlmPart:
    """``row.llm``: the shape asked for, what the engine enforced, and each metric's spread."""

    prefill_tokens: int | None
    decode_tokens: int | None
    context_tokens: int | None          # the context the engine enforces (the bundle's, or a smaller --max-num-tokens)
    bundle_context_tokens: int | None   # LlmMetadata.max_num_tokens of the bundle
    max_num_tokens: int | None          # --max-num-tokens as given (None: the bundle's)
    backend: str | None                 # "cpu"
    activation: str | None              # activation data type asked for ("fp32" ...), None: the engine's default
    weight_cache: str | None            # "none" | "disk": XNNPACK's packed weights cached between processes
    warmup: int = 0                     # warm-up generations per process, not measured
    source: str | None = None           # "litert_lm python api" | "litert_lm_advanced_main" | ...
    stats: Mapping[str, Spread] = field(default_factory=dict)
    warmup_stats: Mapping[str, Spread] = field(default_factory=dict)   # the first warm-up per process
    agreement: Agreement | None = None
    model_type: str | None = None
    bundle_version: str | None = None
    engine_version: str | None = None   # the engine's release (litert-lm-api on the host): configuration identity
    task_score: TaskScore | None = None   # --task-score: exact-match answers of a small task set (llm.tasks)
    speculative: bool | None = None     # --speculative: enable_speculative_decoding asked for; None: the engine's
    option_agreement: Agreement | None = None   # an engine-option axis: greedy tokens vs its first value
    memory_phases: bool | None = None   # --memory-phases (True; None: not asked): it changes what peak mem holds

    def spread(self, key: str) -> Spread | None:
        return self.stats.get(key)

    def median(self, key: str) -> float | None:
        s = self.stats.get(key)
        return None if s is None else s.median

    @property
    def shape(self) -> str:
        return f"{self.prefill_tokens}+{self.decode_tokens}"

    _PLAIN = ("prefill_tokens", "decode_tokens", "context_tokens", "bundle_context_tokens", "max_num_tokens",
              "backend", "activation", "weight_cache", "warmup", "source", "model_type", "bundle_version",
              "engine_version", "speculative", "memory_phases")

    @property
    def options(self) -> str:
        """``activation fp16, speculative on`` -- the engine options this row asked for ('engine defaults')."""
        parts = [f"activation {self.activation}" if self.activation else "",
                 "" if self.speculative is None else f"speculative {'on' if self.speculative else 'off'}"]
        return ", ".join(p for p in parts if p) or "engine defaults"

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {k: getattr(self, k) for k in self._PLAIN}
        out["stats"] = {k: s.to_dict() for k, s in self.stats.items()}
        out["warmup_stats"] = {k: s.to_dict() for k, s in self.warmup_stats.items()}
        out["agreement"] = None if self.agreement is None else self.agreement.to_dict()
        out["task_score"] = None if self.task_score is None else self.task_score.to_dict()
        if self.option_agreement is not None:
            out["option_agreement"] = self.option_agreement.to_dict()
        return out

    @classmethod
    def from_dict(cls, d: Any) -> "LlmPart | None":
        if not isinstance(d, Mapping):
            return None
        kw: dict[str, Any] = {k: d.get(k) for k in cls._PLAIN}
        for k in ("prefill_tokens", "decode_tokens", "context_tokens", "bundle_context_tokens", "max_num_tokens"):
            kw[k] = _i(kw[k])
        kw["warmup"] = _i(kw["warmup"]) or 0
        for k in ("stats", "warmup_stats"):
            raw = d.get(k) if isinstance(d.get(k), Mapping) else {}
            kw[k] = _freeze({name: s for name, s in ((n, Spread.from_dict(v)) for n, v in raw.items()) if s})
        kw["agreement"] = Agreement.from_dict(d.get("agreement"))
        kw["task_score"] = TaskScore.from_dict(d.get("task_score"))
        kw["option_agreement"] = Agreement.from_dict(d.get("option_agreement"))
        kw["speculative"] = d.get("speculative") if isinstance(d.get("speculative"), bool) else None
        kw["memory_phases"] = True if d.get("memory_phases") is True else None
        return cls(**kw)
