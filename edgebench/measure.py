"""Latency statistics from raw per-inference samples: percentiles, validity, CI, warnings, QPS.

Definitions (written once, used by every latency number edgebench prints):

* Percentiles use numpy's default ``method="linear"`` (Hyndman & Fan type 7): for sorted
  samples x[0..n-1], p-th percentile = x[k] + (h - k) * (x[k+1] - x[k]) with h = (n-1)*p/100.
* ``std`` is the sample standard deviation (ddof=1); ``cv = std / mean``.
* ``qps`` (single stream) = 1000 / mean_ms.
* A percentile is *valid* when the run has at least the MLPerf LoadGen early-stopping minimum
  number of samples for it: the smallest n with P(Binomial(n, 1-p) <= 1) <= 1% (99%
  confidence). This rule gives LoadGen's published floors, 64 for p90 and 662 for p99
  (mlcommons/inference loadgen/early_stopping.cc; mlcommons/endpoints#417 checks the same
  values), and 11 / 130 / 6636 for p50 / p95 / p99.9.
* The p99 confidence interval is distribution-free: order statistics [x_(l), x_(u)] chosen
  from Binomial(n, 0.99) so the interval holds the true p99 with >= 95% probability (an end is
  ``None`` when n is too small to bound it on that side).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from edgebench.errors import BadInput

PERCENTILES = {"p50": 50.0, "p90": 90.0, "p95": 95.0, "p99": 99.0, "p999": 99.9}


def early_stopping_min_samples(percentile: float, confidence: float = 0.99) -> int:
    """Smallest n with P(Binomial(n, 1 - q) <= 1) <= 1 - confidence, q = percentile/100.

    With confidence 0.99 this reproduces MLPerf LoadGen's floors: 64 (p90), 662 (p99).
    """
    q = 1.0 - percentile / 100.0
    alpha = 1.0 - confidence
    n = 2
    # P(X <= 1) = (1-q)^n + n q (1-q)^(n-1), decreasing in n; closed form, no scipy needed.
    while (1 - q) ** n + n * q * (1 - q) ** (n - 1) > alpha:
        n += 1
    return n


# 64 / 662: MLPerf LoadGen early-stopping minimums for p90 / p99 at 99% confidence.
MIN_SAMPLES = {name: early_stopping_min_samples(p) for name, p in PERCENTILES.items()}
assert MIN_SAMPLES["p90"] == 64 and MIN_SAMPLES["p99"] == 662

CV_WARN = 0.10            # pyperf warns at a coefficient of variation >= 10%
DRIFT_WARN = 0.10         # first vs last third medians differing by >= 10% of the overall median
DRIFT_MIN_SAMPLES = 30    # each third needs >= 10 samples for the drift check to mean anything
CI_CONFIDENCE = 0.95


def order_stat_ci(sorted_ms: np.ndarray, percentile: float,
                  confidence: float = CI_CONFIDENCE) -> tuple[float | None, float | None]:
    """Distribution-free CI for a percentile from sorted samples (binomial order statistics).

    The number B of samples below the true quantile is Binomial(n, p); with ranks (1-based)
    l = max{k : P(B <= k-1) <= a/2} and u = min{k : P(B <= k-1) >= 1-a/2},
    P(x_(l) <= q_p <= x_(u)) >= 1 - a. Ends that fall outside 1..n are ``None``.
    """
    n = len(sorted_ms)
    if n == 0:
        return None, None
    from scipy.stats import binom  # noqa: PLC0415 -- only needed here

    p = percentile / 100.0
    a = 1.0 - confidence
    cdf = binom.cdf(np.arange(n), n, p)           # cdf[k-1] = P(B <= k-1) for ranks k = 1..n
    below = np.nonzero(cdf <= a / 2)[0]
    above = np.nonzero(cdf >= 1 - a / 2)[0]
    lo_rank = int(below[-1]) + 1 if below.size else None
    hi_rank = int(above[0]) + 1 if above.size else None
    lo = float(sorted_ms[lo_rank - 1]) if lo_rank is not None else None
    hi = float(sorted_ms[hi_rank - 1]) if hi_rank is not None else None
    return lo, hi


@dataclass(frozen=True)
class LatencyStats:
    """Summary of per-inference latencies in milliseconds; keeps its sample count and warnings."""

    samples: int
    mean: float
    std: float
    min: float
    max: float
    p50: float
    p90: float
    p95: float
    p99: float
    p999: float
    cv: float
    qps: float | None
    valid: dict[str, bool]
    p99_ci: tuple[float | None, float | None]
    first_third_p50: float | None = None
    last_third_p50: float | None = None
    warnings: tuple[str, ...] = field(default_factory=tuple)

    @property
    def p99_valid(self) -> bool:
        return self.valid["p99"]

    @property
    def p90_valid(self) -> bool:
        return self.valid["p90"]

    @classmethod
    def from_samples(cls, samples_ns: Any, *, what: str = "run") -> "LatencyStats":
        """Derive the statistics from raw per-inference latencies in nanoseconds (run order)."""
        ns = np.asarray(samples_ns, dtype=np.float64).ravel()
        if ns.size == 0:
            raise BadInput(f"{what} produced no timed samples; raise --max-time or --runs")
        if not np.all(np.isfinite(ns)) or np.any(ns < 0):
            raise BadInput(f"{what}: latency samples must be finite and >= 0")
        ms = ns / 1e6
        n = int(ms.size)
        srt = np.sort(ms)
        pct = {name: float(np.percentile(srt, p)) for name, p in PERCENTILES.items()}
        mean = float(ms.mean())
        std = float(ms.std(ddof=1)) if n > 1 else 0.0
        cv = std / mean if mean > 0 else 0.0
        valid = {name: n >= MIN_SAMPLES[name] for name in PERCENTILES}
        ci = order_stat_ci(srt, PERCENTILES["p99"])

        warnings: list[str] = []
        if not valid["p99"]:
            warnings.append(
                f"p99 from {n} samples is not valid: it needs >= {MIN_SAMPLES['p99']} "
                f"(MLPerf LoadGen minimum at 99% confidence); run at least {MIN_SAMPLES['p99']} "
                "inferences (drop --runs or raise --min-runs/--max-time)")
        if not valid["p90"]:
            warnings.append(f"p90 from {n} samples is not valid either: it needs >= {MIN_SAMPLES['p90']}")
        if cv >= CV_WARN and n > 1:
            warnings.append(
                f"unstable: CV {cv:.0%} >= {CV_WARN:.0%}; close other programs, pin threads "
                "(--threads), add --warmup-time, or run longer (--min-time)")
        first = last = None
        if n >= DRIFT_MIN_SAMPLES:
            third = n // 3
            first = float(np.median(ms[:third]))
            last = float(np.median(ms[-third:]))
            med = pct["p50"]
            if med > 0 and abs(last - first) / med >= DRIFT_WARN:
                trend = "slower" if last > first else "faster"
                warnings.append(
                    f"drift: the last third of the {what} is {trend} than the first "
                    f"(median {last:.4g} vs {first:.4g} ms); heat, frequency scaling or background "
                    "load changed during the run; add --warmup-time, let the machine cool, or rerun")
        return cls(
            samples=n, mean=mean, std=std, min=float(srt[0]), max=float(srt[-1]),
            p50=pct["p50"], p90=pct["p90"], p95=pct["p95"], p99=pct["p99"], p999=pct["p999"],
            cv=cv, qps=(1000.0 / mean) if mean > 0 else None, valid=valid, p99_ci=ci,
            first_third_p50=first, last_third_p50=last, warnings=tuple(warnings),
        )

    def to_dict(self) -> dict[str, Any]:
        """The ``latency_ms`` JSON object (ARCHITECTURE.md contract keys first)."""
        return {
            "mean": self.mean, "std": self.std, "min": self.min, "max": self.max,
            "p50": self.p50, "p90": self.p90, "p95": self.p95, "p99": self.p99, "p999": self.p999,
            "samples": self.samples,
            "p99_valid": self.valid["p99"],
            "p90_valid": self.valid["p90"],
            "valid": dict(self.valid),
            "min_samples": dict(MIN_SAMPLES),
            "p99_ci": list(self.p99_ci),
            "p99_ci_confidence": CI_CONFIDENCE,
            "cv": self.cv,
            "qps": self.qps,
            "first_third_p50": self.first_third_p50,
            "last_third_p50": self.last_third_p50,
            "percentile_method": "numpy linear (type 7)",
            "warnings": list(self.warnings),
        }
