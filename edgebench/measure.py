"""Latency statistics from raw per-inference samples: percentiles, validity, CI, warnings, QPS.

The pure functions and constants; ``edgebench.rows.Latency.from_samples`` (the one latency type, the
``latency_ms`` object of every row) calls them.

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
* ``p99_valid`` means exactly "n >= 662": the run holds enough samples for LoadGen's early
  stopping to state a p99 bound at all. It is not a statement about the interpolated ``p99``.
* ``p90_early_stopping`` / ``p99_early_stopping``: MLPerf LoadGen's conservative estimate
  (loadgen/results.cc, ``PerformanceSummary::EarlyStopping``, tolerance 0, confidence 0.99): the
  t-th largest sample, t the largest count with P(Binomial(n, 1-p) <= t) <= 1%. It is a one-sided
  99% upper confidence bound of the percentile and is ``None`` below the minimum sample count.
* The p99 confidence interval is distribution-free: order statistics [x_(l), x_(u)] chosen
  from Binomial(n_eff, 0.99) so the interval holds the true p99 with >= 95% probability (an end is
  ``None`` when n is too small to bound it on that side). The binomial argument assumes
  independent samples; consecutive inferences are not (caches, clocks, background load), so the
  interval uses the effective sample size n_eff = n / tau, tau the integrated autocorrelation time
  of the exceedance indicator 1[x_i > p99] (Geyer's initial positive sequence), which widens it
  when exceedances cluster. It still assumes the run is stationary (see the drift warning).
* Spread: ``cv`` = std / mean (pyperf's stability measure) and, beside it, the robust ``mad`` =
  median(|x - median|) in ms and ``rmad`` = 1.4826 * mad / median (equals the CV for normal data,
  but a few outliers cannot inflate it). Stability is judged on the median itself: "unstable" when
  the robust spread of the medians of 10 consecutive windows of the run is >= 5 % of the median
  (``window_median_spread``); the CV of raw samples is reported, not judged.
* Drift: warned when the first and last thirds' medians differ by >= 10% of the median, or when
  the Theil-Sen slope fitted to the medians of ``TREND_BINS`` consecutive blocks of the run
  changes the latency by >= 10% of the median from the first to the last sample (a linear
  slowdown that the thirds alone can miss).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from edgebench.errors import BadInput

PERCENTILES = {"p50": 50.0, "p90": 90.0, "p95": 95.0, "p99": 99.0, "p999": 99.9}
PERCENTILE_METHOD = "numpy linear (type 7)"
P99_CI_METHOD = ("binomial order statistics at the effective sample size n/tau "
                 "(tau: autocorrelation time of x > p99); assumes a stationary run")


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


# 64 / 662: MLPerf LoadGen early-stopping minimums for p90 / p99 at 99% confidence (derived here,
# the one place; tests/test_measure.py checks the derivation gives LoadGen's published numbers)
MIN_SAMPLES = {name: early_stopping_min_samples(p) for name, p in PERCENTILES.items()}

CV_WARN = 0.10            # pyperf's 10 %: for the spread of per-process values, not raw samples (below)
# "unstable" means the median itself moved: the robust spread (MAD_TO_SD * MAD) of the medians of
# MEDIAN_WINDOWS consecutive windows of the run, over the overall median, >= MEDIAN_WARN. The CV of
# raw per-inference samples is not used: for a 10-30 us model a few interrupts set it (22-31 % on
# an idle 2-core machine while every window's median agreed within 0.2 %), so it fired on every row.
MEDIAN_WINDOWS = 10
MEDIAN_WARN = 0.05
DRIFT_WARN = 0.10         # first vs last third medians differing by >= 10% of the overall median
DRIFT_MIN_SAMPLES = 30    # each third needs >= 10 samples for the drift check to mean anything
CI_CONFIDENCE = 0.95
EARLY_STOPPING_CONFIDENCE = 0.99   # LoadGen's early-stopping confidence (loadgen/results.cc)
TREND_BINS = 30           # block medians the Theil-Sen trend is fitted to (robust to single spikes)
MAD_TO_SD = 1.4826        # 1 / Phi^-1(3/4): MAD of a normal distribution -> its standard deviation


def binom_cdf(n: int, p: float) -> np.ndarray:
    """P(B <= k) for k = 0..n, B ~ Binomial(n, p), in numpy: the pmf by its ratio recursion
    pmf(k+1) / pmf(k) = (n-k)/(k+1) * p/(1-p) in log space, normalised to sum 1 (scipy.stats gives
    the same values; importing it costs ~0.8 s of every command that prints a latency)."""
    n = int(n)
    if n < 0:
        raise ValueError(f"binomial n must be >= 0, got {n}")
    if p <= 0.0 or p >= 1.0:
        return np.ones(n + 1) if p <= 0.0 else np.concatenate([np.zeros(n), [1.0]])
    k = np.arange(n, dtype=np.float64)
    logpmf = np.empty(n + 1)
    logpmf[0] = n * math.log1p(-p)
    logpmf[1:] = logpmf[0] + np.cumsum(np.log((n - k) / (k + 1.0)) + math.log(p / (1.0 - p)))
    pmf = np.exp(logpmf - logpmf.max())
    cdf = np.cumsum(pmf)
    return np.minimum(cdf / cdf[-1], 1.0)


def early_stopping_estimate(sorted_ms: np.ndarray, percentile: float,
                            confidence: float = EARLY_STOPPING_CONFIDENCE) -> float | None:
    """LoadGen's early-stopping percentile estimate (single stream, tolerance 0).

    The t-th largest sample, with t the largest count such that P(Binomial(n, 1-p) <= t) <=
    1 - confidence: the true percentile lies at or below it with >= ``confidence`` probability.
    ``None`` when even t = 1 is not reached (n below ``early_stopping_min_samples``).
    """
    n = len(sorted_ms)
    if n == 0:
        return None
    q = 1.0 - percentile / 100.0
    ts = np.arange(1, n + 1)
    ok = np.nonzero(binom_cdf(n, q)[1:] <= 1.0 - confidence)[0]
    if ok.size == 0:
        return None
    t = int(ts[ok[-1]])
    return float(sorted_ms[n - t])


def autocorrelation_time(x: np.ndarray) -> float:
    """Integrated autocorrelation time tau >= 1 of a series (Geyer's initial positive sequence).

    tau = -1 + 2 * sum_m (rho_2m + rho_2m+1), summed while the pair sums stay positive; 1 for
    independent samples, larger when values cluster in time. n / tau is the effective sample size.
    """
    y = np.asarray(x, dtype=np.float64).ravel()
    n = y.size
    if n < 4:
        return 1.0
    y = y - y.mean()
    var = float(y @ y)
    if var == 0:
        return 1.0
    size = 1 << (2 * n - 1).bit_length()
    f = np.fft.rfft(y, size)
    acov = np.fft.irfft(f * np.conj(f), size)[:n]
    rho = acov / var
    tau = -1.0
    for m in range(n // 2):
        pair = rho[2 * m] + rho[2 * m + 1]
        if pair <= 0:
            break
        tau += 2.0 * pair
    return float(min(max(tau, 1.0), n))


def window_median_spread(ms: Any, windows: int = MEDIAN_WINDOWS) -> float | None:
    """Robust spread of the medians of ``windows`` consecutive windows of a run, relative to the
    overall median (MAD_TO_SD * MAD of the window medians / median); None when a window would
    hold fewer samples than a valid median needs (MIN_SAMPLES["p50"])."""
    y = np.asarray(ms, dtype=np.float64).ravel()
    if y.size < windows * MIN_SAMPLES["p50"]:
        return None
    meds = np.array([np.median(w) for w in np.array_split(y, windows)])
    med = float(np.median(y))
    return MAD_TO_SD * float(np.median(np.abs(meds - np.median(meds)))) / med if med > 0 else None


def trend_change(ms: np.ndarray, bins: int = TREND_BINS) -> float | None:
    """Relative latency change over a run from a Theil-Sen fit (robust, order-aware).

    The run (in time order) is cut into ``bins`` blocks; the Theil-Sen slope of the block
    medians against the block centres, times the run length, divided by the overall median.
    ``None`` below ``DRIFT_MIN_SAMPLES`` samples.
    """
    y = np.asarray(ms, dtype=np.float64).ravel()
    n = y.size
    if n < DRIFT_MIN_SAMPLES:
        return None
    k = min(bins, n // 10)
    edges = np.linspace(0, n, k + 1).astype(int)
    centres = np.array([(lo + hi - 1) / 2 for lo, hi in zip(edges[:-1], edges[1:])])
    meds = np.array([np.median(y[lo:hi]) for lo, hi in zip(edges[:-1], edges[1:])])
    i, j = np.triu_indices(k, 1)
    slope = float(np.median((meds[j] - meds[i]) / (centres[j] - centres[i])))
    med = float(np.median(y))
    return slope * (n - 1) / med if med > 0 else None


def order_stat_ci(sorted_ms: np.ndarray, percentile: float,
                  confidence: float = CI_CONFIDENCE, n_eff: float | None = None
                  ) -> tuple[float | None, float | None]:
    """Distribution-free CI for a percentile from sorted samples (binomial order statistics).

    The number B of samples below the true quantile is Binomial(n, p); with ranks (1-based)
    l = max{k : P(B <= k-1) <= a/2} and u = min{k : P(B <= k-1) >= 1-a/2},
    P(x_(l) <= q_p <= x_(u)) >= 1 - a. Ends that fall outside 1..n are ``None``.
    With ``n_eff`` < n (autocorrelated samples), the ranks are chosen from Binomial(n_eff, p)
    and scaled back to 1..n, which widens the interval.
    """
    n = len(sorted_ms)
    if n == 0:
        return None, None
    p = percentile / 100.0
    a = 1.0 - confidence
    m = n if n_eff is None else max(1, min(n, int(math.floor(n_eff))))
    cdf = binom_cdf(m, p)[:m]                     # cdf[k-1] = P(B <= k-1) for ranks k = 1..m
    below = np.nonzero(cdf <= a / 2)[0]
    above = np.nonzero(cdf >= 1 - a / 2)[0]
    lo_rank = int(below[-1]) + 1 if below.size else None
    hi_rank = int(above[0]) + 1 if above.size else None
    if m != n:   # rank fractions of the effective sample, mapped outward onto the real one
        lo_rank = None if lo_rank is None else max(1, int(math.floor(lo_rank * n / m)))
        hi_rank = None if hi_rank is None else min(n, int(math.ceil(hi_rank * n / m)))
    lo = float(sorted_ms[lo_rank - 1]) if lo_rank is not None else None
    hi = float(sorted_ms[hi_rank - 1]) if hi_rank is not None else None
    return lo, hi



def validated_ms(samples_ns: Any, what: str = "run") -> np.ndarray:
    """Raw per-inference latencies in nanoseconds (run order) -> float64 milliseconds, or BadInput."""
    ns = np.asarray(samples_ns, dtype=np.float64).ravel()
    if ns.size == 0:
        raise BadInput(f"{what} produced no timed samples; raise --max-time or --runs")
    if not np.all(np.isfinite(ns)) or np.any(ns < 0):
        raise BadInput(f"{what}: latency samples must be finite and >= 0")
    return ns / 1e6


def thirds_medians(ms: np.ndarray) -> tuple[float | None, float | None]:
    """Medians of the first and the last third of a run; None below ``DRIFT_MIN_SAMPLES``."""
    n = int(ms.size)
    if n < DRIFT_MIN_SAMPLES:
        return None, None
    third = n // 3
    return float(np.median(ms[:third])), float(np.median(ms[-third:]))


def latency_warnings(n: int, median: float, spread: float | None, first: float | None, last: float | None,
                     trend: float | None, what: str = "run") -> list[str]:
    """The warnings of a run, each saying what to do: too few samples for p99 / p90 (MIN_SAMPLES),
    an unstable median (``window_median_spread`` >= MEDIAN_WARN), drift (thirds or trend >= DRIFT_WARN).
    A drift warning starts with "drift:" (``Latency.drifting`` reads that)."""
    warnings: list[str] = []
    if n < MIN_SAMPLES["p99"]:
        warnings.append(
            f"p99 from {n} samples is not valid: it needs >= {MIN_SAMPLES['p99']} "
            f"(MLPerf LoadGen minimum at 99% confidence); run at least {MIN_SAMPLES['p99']} "
            "inferences (drop --runs or raise --min-runs/--max-time)")
    if n < MIN_SAMPLES["p90"]:
        warnings.append(f"p90 from {n} samples is not valid either: it needs >= {MIN_SAMPLES['p90']}")
    if spread is not None and spread >= MEDIAN_WARN:
        warnings.append(
            f"unstable: the median moved between windows of the run (robust spread {spread:.0%} of "
            f"{MEDIAN_WINDOWS} window medians >= {MEDIAN_WARN:.0%}); close other programs, pin threads "
            "(--threads), add --warmup-time, or run longer (--min-time)")
    if first is not None and last is not None:
        thirds = median > 0 and abs(last - first) / median >= DRIFT_WARN
        sloped = trend is not None and abs(trend) >= DRIFT_WARN
        if thirds or sloped:
            up = (last > first) if thirds else (trend > 0)
            warnings.append(
                f"drift: the {what} got {'slower' if up else 'faster'} as it ran (median of the last "
                f"third {last:.4g} vs first {first:.4g} ms; fitted trend {trend or 0:+.0%} over the "
                "run); heat, frequency scaling or background load changed during the run; add "
                "--warmup-time, let the machine cool, or rerun")
    return warnings
