"""edgebench worker, its stop rule: when a timed loop ends, and what the kernel counted meanwhile.

Standalone like ``runner.py`` (stdlib + numpy; no edgebench import); pushed next to it. The rule
mirrors ``targets.base.RunControl.stop_reason`` and ``measure.quantile_answered`` (the worker cannot
import them; tests/test_runner_host.py keeps them equal).
"""

from __future__ import annotations

import math

import numpy as np

# Run-control fallbacks for a job that omits them (the parent always sends RunControl's values;
# the worker cannot import edgebench, so these mirror targets/base.RunControl's defaults). The p99
# minimum is the one copy of measure.MIN_SAMPLES["p99"] outside measure.py, pinned equal to it by
# tests/test_typed_renderers.py (the worker alone may not import it).
DEFAULT_MIN_RUNS, DEFAULT_MIN_TIME_S, DEFAULT_MAX_TIME_S = 662, 1.0, 60.0


class StopRule:
    """The timed loops' stop rule from a job, in nanoseconds -- the same rule, in the same order,
    as ``RunControl.stop_reason`` in the parent: ``--runs`` (still capped by max_time), else
    min_runs and min_time both met, and never past max_time."""

    def __init__(self, job: dict):
        runs = job.get("runs")
        self.cap = int(runs) if runs is not None else None
        self.min_runs = int(job.get("min_runs", DEFAULT_MIN_RUNS))
        self.min_ns = float(job.get("min_time_s", DEFAULT_MIN_TIME_S)) * 1e9
        self.max_ns = float(job.get("max_time_s", DEFAULT_MAX_TIME_S)) * 1e9
        aw = job.get("answer_width")          # absent (an older parent): time-based only
        self.answer_width = float(aw) if aw is not None else None

    def reason(self, n: int, elapsed_ns: float, samples=None) -> str | None:
        """Why the loop stops after ``n`` runs and ``elapsed_ns`` (None: go on)."""
        if self.cap is not None:
            if n >= self.cap:
                return "runs"
        elif n >= self.min_runs and elapsed_ns >= self.min_ns:
            return "min_runs_and_min_time"
        elif (self.answer_width is not None and samples is not None and n >= self.min_runs
              and answer_checkpoint(n, self.min_runs) and elapsed_ns >= ANSWER_MIN_TIME_S * 1e9
              and p99_answered(samples[:n], self.answer_width)):
            return "answer_valid"
        if elapsed_ns >= self.max_ns:   # also caps a forced --runs, so the parent's deadline stays meaningful
            return "max_time"
        return None


# targets/base.py's answer rule (measure.quantile_answered), mirrored: the worker cannot import
# edgebench; a parity test keeps them equal. The p99's 95 % order-statistic interval at the
# effective sample size (n / tau, tau the autocorrelation time of the exceedances) within ``width``
# of the p99, and the p99s of the window's two halves within ``width`` of each other; checked at
# min_runs and then each time the count grows by ANSWER_CHECK_GROWTH.
ANSWER_CHECK_GROWTH = 1.25
ANSWER_CONFIDENCE = 0.95
ANSWER_MIN_TIME_S = 0.25
# the load signal (measure.load_signal): a tail quantile is not answered while it fires
STALL_FACTOR, STALL_SHARE_WARN, MEAN_OVER_P50_WARN, P99_OVER_P50_WARN, LOAD_MIN_SAMPLES = 3.0, 0.10, 1.25, 10.0, 30


def answer_checkpoint(n: int, min_runs: int) -> bool:
    c = max(int(min_runs), 1)
    while c < n:
        c = int(math.ceil(c * ANSWER_CHECK_GROWTH))
    return c == n


def next_checkpoint(c: int) -> int:
    return int(math.ceil(c * ANSWER_CHECK_GROWTH))


def _autocorrelation_time(x) -> float:
    """measure.autocorrelation_time: Geyer's initial positive sequence, tau >= 1."""
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
    rho = np.fft.irfft(f * np.conj(f), size)[:n] / var
    tau = -1.0
    for m in range(n // 2):
        pair = rho[2 * m] + rho[2 * m + 1]
        if pair <= 0:
            break
        tau += 2.0 * pair
    return float(min(max(tau, 1.0), n))


def _binom_cdf(n: int, p: float):
    """measure.binom_cdf: P(B <= k), k = 0..n, B ~ Binomial(n, p)."""
    k = np.arange(n, dtype=np.float64)
    logpmf = np.empty(n + 1)
    logpmf[0] = n * math.log1p(-p)
    logpmf[1:] = logpmf[0] + np.cumsum(np.log((n - k) / (k + 1.0)) + math.log(p / (1.0 - p)))
    pmf = np.exp(logpmf - logpmf.max())
    cdf = np.cumsum(pmf)
    return np.minimum(cdf / cdf[-1], 1.0)


def _order_stat_ci(srt, q: float, n_eff: float):
    """measure.order_stat_ci at ANSWER_CONFIDENCE: (lo, hi), an end None when it cannot be bounded."""
    n = len(srt)
    a = 1.0 - ANSWER_CONFIDENCE
    m = max(1, min(n, int(math.floor(n_eff))))
    cdf = _binom_cdf(m, q)[:m]
    below = np.nonzero(cdf <= a / 2)[0]
    above = np.nonzero(cdf >= 1 - a / 2)[0]
    lo_rank = int(below[-1]) + 1 if below.size else None
    hi_rank = int(above[0]) + 1 if above.size else None
    if m != n:
        lo_rank = None if lo_rank is None else max(1, int(math.floor(lo_rank * n / m)))
        hi_rank = None if hi_rank is None else min(n, int(math.ceil(hi_rank * n / m)))
    return (None if lo_rank is None else float(srt[lo_rank - 1]),
            None if hi_rank is None else float(srt[hi_rank - 1]))


def _load_fired(x) -> bool:
    """measure.load_signal(x)["fired"]."""
    if x.size < LOAD_MIN_SAMPLES:
        return False
    med = float(np.median(x))
    total = float(x.sum())
    if med <= 0 or total <= 0:
        return False
    level = True
    if x.size >= 30:                           # measure.thirds_medians / DRIFT_WARN
        third = x.size // 3
        level = abs(float(np.median(x[-third:])) - float(np.median(x[:third]))) < 0.10 * med
    return (float(x[x > STALL_FACTOR * med].sum()) / total >= STALL_SHARE_WARN
            or float(np.percentile(x, 99.0)) / med >= P99_OVER_P50_WARN
            or (float(x.mean()) / med >= MEAN_OVER_P50_WARN and level))


def quantile_answered(samples, q: float, width: float) -> bool:
    """measure.quantile_answered (see there)."""
    x = np.asarray(samples, dtype=np.float64).ravel()
    n = x.size
    if n < 4:
        return False
    srt = np.sort(x)
    v = float(np.percentile(srt, q * 100.0))
    if not v > 0:
        return False
    if q > 0.5 and _load_fired(x):
        return False
    tau = _autocorrelation_time(x > v)
    lo, hi = _order_stat_ci(srt, q, n / tau)
    if lo is None or hi is None or hi - lo > width * v:
        return False
    h = n // 2
    first, second = np.percentile(x[:h], q * 100.0), np.percentile(x[h:], q * 100.0)
    return bool(abs(float(second) - float(first)) <= width * v)


def p99_answered(samples, width: float) -> bool:
    return quantile_answered(samples, 0.99, width)


def rusage():
    """The process's CPU time and context switches so far (all its threads), or None where the
    ``resource`` module is missing."""
    try:
        import resource
        r = resource.getrusage(resource.RUSAGE_SELF)
    except (ImportError, OSError):
        return None
    return {"cpu_s": r.ru_utime + r.ru_stime, "involuntary_switches": int(r.ru_nivcsw),
            "voluntary_switches": int(r.ru_nvcsw)}


def rusage_delta(before, after):
    """What the kernel counted between two ``rusage()`` reads: ``timed_rusage`` in result.json
    (involuntary switches = preemptions: the load signal's evidence of other work)."""
    if before is None or after is None:
        return None
    return {k: after[k] - before[k] for k in before}
