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
* Load (``load_signal``): ``stall_share`` = the share of the run's timed wall time spent in samples
  more than ``STALL_FACTOR`` (3) times the median -- stalls, when other work preempted the model;
  ``mean_over_p50`` and ``p99_over_p50`` beside it. The signal fires when the stall share reaches
  ``STALL_SHARE_WARN`` (10 %), p99/p50 ``P99_OVER_P50_WARN`` (10) or, in a run whose level held
  (no drift between its thirds), mean/p50 ``MEAN_OVER_P50_WARN`` (1.25): the tail, the mean and the
  QPS then reflect other work on the machine; the median does not. When the worker counted its
  preemptions, slow samples without them are the model's own (``load_signal``).
* The answer rule (``quantile_answered``, the adaptive stop of every timed loop): a quantile is
  answered when its order-statistic interval at the *effective* sample size (autocorrelation of the
  exceedances, as for ``p99_ci``) spans at most the answer width, the quantile of the window's
  first half and of its second half agree within that width (a second window confirms it, so a
  run does not stop because its tail happened to be compact lately), and -- for a tail quantile --
  the load signal is silent (a tail of stalls is the machine's, never "answered").
* Intervals for a rerun (``rerun_interval``): with several worker processes per side, a
  hierarchical bootstrap -- processes resampled, then samples within each -- of the ratio of a
  statistic, with Student-t quantiles for the few processes; never narrower than the timer's
  resolution (``resolution``) allows.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from edgebench.core.errors import BadInput

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
# The load signal (``load_signal``). A sample more than STALL_FACTOR times the median is a stall:
# the model's own spread (caches, interrupts) stays well below it on every trace measured here
# (scripts/bench_stability_rule.py: p99/p50 1.3-2.5 on runs without stalls), while a preemption by
# another process costs milliseconds, 50-500x a 10-20 us inference. A stall share of 10 % inflates
# the mean (and deflates QPS) by 1 / (1 - 0.10) = 1.11x: as much as a change must reach to count
# (stats.MIN_RATIO 1.1), so from there the mean/QPS are not the model's.
STALL_FACTOR = 3.0
STALL_SHARE_WARN = 0.10
MEAN_OVER_P50_WARN = 1.25   # the mean a quarter above the median in a run whose level held (thirds'
#                             medians within DRIFT_WARN: a run that went from 1 to 2 ms has mean/p50
#                             1.33 and no other work): a tail the model itself rarely has
P99_OVER_P50_WARN = 10.0    # 1 % of the samples 10x the median: stalls, not the model's tail
LOAD_MIN_SAMPLES = 30       # fewer samples: no signal (as the drift check, DRIFT_MIN_SAMPLES)
PREEMPTIONS_PER_STALL = 10  # stalls with fewer than 1 preemption per 10 of them are not other work's


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
                     trend: float | None, what: str = "run", load: dict[str, Any] | None = None) -> list[str]:
    """The warnings of a run, each saying what to do: too few samples for p99 / p90 (MIN_SAMPLES),
    an unstable median (``window_median_spread`` >= MEDIAN_WARN), drift (thirds or trend >= DRIFT_WARN),
    other work on the machine (``load``: ``load_signal``'s result, when it fired).
    A drift warning starts with "drift:" (``Latency.drifting`` reads that), a load warning with "load:"."""
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
    loaded = load_warning(load, what)
    if loaded:
        warnings.append(loaded)
    return warnings


# ------------------------------------------------------------------------------------------
# other work on the machine


def load_signal(ms: Any, preemptions: int | None = None) -> dict[str, Any] | None:
    """Whether other work on the machine shaped the run: ``{"stall_share", "mean_over_p50",
    "p99_over_p50", "stalls", "preemptions", "fired"}`` (definitions in the module docstring); None
    below LOAD_MIN_SAMPLES samples or for a zero median.

    ``preemptions``: the involuntary context switches of the worker during its timed loop (the
    kernel's count, ``getrusage``), when known. A stall by other work is a preemption (one switch
    per stalled sample, measured here: 96-145 switches for 112-217 stalls), so slow samples with
    fewer than one switch per PREEMPTIONS_PER_STALL of them are the model's own tail (a slow path,
    a page fault), not other work, and the signal stays silent. A hypervisor's steal of the whole
    virtual CPU is no switch the guest sees: on such a VM only the samples speak."""
    y = np.asarray(ms, dtype=np.float64).ravel()
    if y.size < LOAD_MIN_SAMPLES:
        return None
    med = float(np.median(y))
    total = float(y.sum())
    if med <= 0 or total <= 0:
        return None
    far = y > STALL_FACTOR * med
    share = float(y[far].sum()) / total
    mean_over = float(y.mean()) / med
    p99_over = float(np.percentile(y, 99.0)) / med
    first, last = thirds_medians(y)
    level = first is None or abs(last - first) < DRIFT_WARN * med     # no level shift explains a skew
    fired = share >= STALL_SHARE_WARN or p99_over >= P99_OVER_P50_WARN or (mean_over >= MEAN_OVER_P50_WARN
                                                                           and level)
    stalls = int(far.sum())
    if preemptions is not None and preemptions * PREEMPTIONS_PER_STALL < stalls:
        fired = False
    return {"stall_share": share, "mean_over_p50": mean_over, "p99_over_p50": p99_over, "stalls": stalls,
            "preemptions": preemptions, "fired": bool(fired)}


def load_warning(sig: dict[str, Any] | None, what: str = "run") -> str | None:
    """The load signal's warning (it starts with "load:"), or None when it did not fire."""
    if not sig or not sig.get("fired"):
        return None
    return (f"load: stalls (samples over {STALL_FACTOR:g}x the median) took {sig['stall_share']:.0%} of the timed "
            f"wall time of the {what} (mean/p50 {sig['mean_over_p50']:.2f}, p99/p50 {sig['p99_over_p50']:.3g}): "
            "the tail, mean and QPS reflect other work on this machine, the p50 is the model's; close other "
            "programs or compare p50s (results compare says \"stalls\" for such changes)")


# ------------------------------------------------------------------------------------------
# the answer rule: is a quantile known yet?


def quantile_answered(samples: Any, q: float, width: float, confidence: float = CI_CONFIDENCE) -> bool:
    """True when the ``q`` quantile (0 < q < 1) of ``samples`` (run order) is known to within
    ``width`` (relative, full interval). Both must hold:

    1. the ``confidence`` order-statistic interval (``order_stat_ci``) at the effective sample size
       n / tau -- tau the autocorrelation time of the exceedances x > quantile, so clustered
       stalls count as few observations -- exists on both sides and spans <= width x the quantile;
    2. the quantile of the first half of the window and that of its second half differ by <=
       width x the quantile: a second window confirms the first, so a run whose tail was compact
       only lately (where the first check alone stops early and biases the tail low) goes on;
    3. for a tail quantile (q > 0.5), the load signal is silent (``load_signal``): a tail made of
       stalls by other work is the machine's, not the model's, and is never "answered".
    """
    x = np.asarray(samples, dtype=np.float64).ravel()
    n = x.size
    if n < 4:
        return False
    srt = np.sort(x)
    v = float(np.percentile(srt, q * 100.0))
    if not v > 0:
        return False
    if q > 0.5:
        sig = load_signal(x)
        if sig is not None and sig["fired"]:
            return False
    tau = autocorrelation_time(x > v)
    lo, hi = order_stat_ci(srt, q * 100.0, confidence, n_eff=n / tau)
    if lo is None or hi is None or hi - lo > width * v:
        return False
    h = n // 2
    first, second = np.percentile(x[:h], q * 100.0), np.percentile(x[h:], q * 100.0)
    return bool(abs(float(second) - float(first)) <= width * v)


# ------------------------------------------------------------------------------------------
# intervals for a rerun


def resolution(ms: Any) -> float:
    """The timer's quantum in a run's samples: the smallest positive gap between distinct sample
    values (0 for fewer than two distinct values). Samples read from a microsecond log, or a
    coarse clock, sit on a grid; an interval narrower than that grid is not a measurement."""
    u = np.unique(np.asarray(ms, dtype=np.float64).ravel())
    if u.size < 2:
        return 0.0
    gaps = np.diff(u)
    gaps = gaps[gaps > 0]
    return float(gaps.min()) if gaps.size else 0.0


def statistic(v: np.ndarray, kind: str, percentile: float | None = None) -> np.ndarray:
    """Per-row statistic of a 2-D array of resampled runs: "mean", "location" (the median) or a
    ``percentile``."""
    if kind == "mean":
        return v.mean(axis=-1)
    return np.percentile(v, 50.0 if kind == "location" else float(percentile or 50.0), axis=-1)


def widen_to_resolution(interval: tuple[float, float], ratio: float, rel: float) -> tuple[float, float]:
    """An interval of a ratio at least ``rel`` (the sides' relative timer resolution, summed) either
    side of the ratio: never a zero-width interval from quantized samples."""
    lo, hi = interval
    return min(lo, ratio * (1.0 - rel)), max(hi, ratio * (1.0 + rel))


def rerun_interval(groups_a: list[np.ndarray], groups_b: list[np.ndarray], kind: str,
                   percentile: float | None = None, inverse: bool = False, resamples: int = 400,
                   confidence: float = CI_CONFIDENCE, per_process: int = 1000,
                   seed: int = 0, cache: dict | None = None) -> tuple[float, float] | None:
    """A ``confidence`` interval of B's statistic over A's (``inverse``: A's over B's, for QPS) for
    a *rerun*: a hierarchical bootstrap over each side's worker processes (``groups_*``: one array of
    samples per process), resampling processes with replacement, then ``per_process`` samples with
    replacement within each chosen process (each process weighs the same: it is one replicate),
    then the statistic of the pooled resample (Davison & Hinkley, *Bootstrap Methods and their
    Application*, 1997, sec. 3.8: resampling the top stage carries the between-process variance):
    the percentile interval, widened where a Student-t interval on the bootstrap's standard error
    is wider (few processes: see below). Never narrower than the timer's resolution allows
    (``widen_to_resolution``). None without two processes of two samples a side. ``cache``: a dict
    kept across the statistics of one pair of rows, so they share one set of resamples."""
    ga = [np.asarray(g, np.float64).ravel() for g in groups_a if len(g) >= 2]
    gb = [np.asarray(g, np.float64).ravel() for g in groups_b if len(g) >= 2]
    if len(ga) < 2 or len(gb) < 2:
        return None
    rng = np.random.default_rng(seed)

    def draws(groups: list[np.ndarray], side: str) -> np.ndarray:
        if cache is not None and side in cache:
            return statistic(cache[side], kind, percentile)
        k = len(groups)
        m = min(per_process, max(g.size for g in groups))
        pick = rng.integers(0, k, (resamples, k))                       # stage 1: processes
        sizes = np.array([g.size for g in groups])
        offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]])
        pooled = np.concatenate(groups)
        within = (rng.random((resamples, k, m)) * sizes[pick][:, :, None]).astype(np.int64)   # stage 2
        idx = offsets[pick][:, :, None] + within
        values = pooled[idx.reshape(resamples, k * m)]
        if cache is not None:
            cache[side] = values
        return statistic(values, kind, percentile)

    sa, sb = draws(ga, "a"), draws(gb, "b")
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = sa / sb if inverse else sb / sa
    ratios = ratios[np.isfinite(ratios)]
    if ratios.size < resamples // 2:
        return None
    tail = (1 - confidence) / 2 * 100
    lo, hi = np.percentile(ratios, [tail, 100 - tail])
    pa, pb = np.concatenate(ga), np.concatenate(gb)
    point_a = float(statistic(pa[None, :], kind, percentile)[0])
    point_b = float(statistic(pb[None, :], kind, percentile)[0])
    if point_a <= 0 or point_b <= 0 or lo <= 0:
        return float(lo), float(hi)
    ratio = point_a / point_b if inverse else point_b / point_a
    # Few processes: resampling k of them with replacement gives (k - 1) / k of their variance
    # (Davison & Hinkley, sec. 2.3), and with so few clusters normal-theory quantiles are too narrow:
    # Cameron, Gelbach & Miller (2008, "Bootstrap-based improvements for inference with clustered
    # errors") use Student's t with G - 1 degrees of freedom. So the interval is also the ratio times
    # exp(+-t_df * se), se the bootstrap's sd of the log ratio stretched by sqrt(k / (k - 1)), df =
    # processes - 2 (as the replicate t-test); the wider of the two decides each end.
    from scipy.stats import t as student_t

    k = min(len(ga), len(gb))
    se = float(np.std(np.log(ratios), ddof=1)) * math.sqrt(k / (k - 1.0))
    half = float(student_t.ppf(0.5 + confidence / 2, len(ga) + len(gb) - 2)) * se
    lo, hi = min(float(lo), ratio * math.exp(-half)), max(float(hi), ratio * math.exp(half))
    rel = resolution(pa) / point_a + resolution(pb) / point_b
    return widen_to_resolution((lo, hi), ratio, rel)
