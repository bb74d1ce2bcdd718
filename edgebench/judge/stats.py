"""Honest change detection between stored results.

**A change between two runs** counts only when it is large, significant *and* beyond the noise:
the ratio of the metric is >= ``MIN_RATIO`` (1.1x) in either direction, the evidence gives p <
``ALPHA`` (0.002; asv's ``--factor 1.1`` and ``p < 0.002``), and -- as criterion's noise threshold
-- the interval of the ratio for a *rerun* lies wholly beyond the measured run-to-run spread
(``noise_band``: a rerun moves the ratio within [1/band, band] in 95 % of reruns, band =
exp(1.96 sigma sqrt 2), sigma the run-to-run noise of one run's log value). Accuracy and drift
(top-1, PSNR, cosine) are judged by an *absolute* change in their own unit -- percentage points
(on whole sample counts for top-1), dB, 1 - cosine -- above a threshold (``metrics.REGISTRY``: 1
pp, 3 dB, 0.001; for top-1, B's own gate threshold when it had one; ``results compare
--accuracy-pp/--psnr-db/--cosine``); "same" means no change at all, a change up to the threshold is
"within threshold", and a threshold of 0 counts any lost sample. Other deterministic metrics
(size, memory) have no noise, so the ratio alone decides and ``p`` is None. For latency metrics the
evidence has two parts, and the larger p decides:

* *within a run* (``p_samples``), a test of the metric itself on the raw per-inference samples:
  the median (p50) uses the two-sided Mann-Whitney U test; the mean and QPS use Welch's t-test (a
  test of means: 3 % of samples 3 ms slower moves the mean 9x and leaves the median, and the
  rank test, unmoved); percentile metrics
  (p90, p99) use the two-sample quantile test (Mood's median test generalised to the q-th
  quantile: the counts of each side above the pooled q-quantile, Fisher's exact test), because a
  p99 that doubled under an unchanged body moves the ranks of only 1% of the samples and the
  Mann-Whitney U test cannot see it. A percentile is only compared when both sides have enough
  samples for it to be valid (662 for p99, 64 for p90: MLPerf LoadGen's minimums); otherwise the
  verdict is "n/a".
* *between runs* (``p_runs``): per-inference samples of one run are not replicates of the run --
  a second process lands on other cores, caches and clock states, so two runs of the same model
  differ by more than their samples suggest. The run-to-run noise comes from
  - ``repeats``: both rows hold >= ``MIN_REPEATS`` worker processes (``bench --repeats N``,
    interleaved across rows): Student's t-test (pooled variance) on the log of the per-process
    values of the metric; the rerun interval is a hierarchical bootstrap (processes, then samples
    within them: ``measure.rerun_interval``). With 3 processes a side and 5% run-to-run noise only
    changes of ~1.35x and more reach p < 0.002; 5 a side reach ~1.15x; or else
  - ``history``: >= ``HISTORY_MIN_RUNS`` earlier stored runs of exactly the same configuration
    (``identity.series_key``): sigma = pooled standard deviation of their log values around the
    mean of their own level (the history is cut at its level shifts), and t = |log ratio| /
    (sigma * sqrt(2)) with runs - levels degrees of freedom; the rerun interval is the ratio times
    exp(+-t_0.975 sigma sqrt 2). With both (``repeats+history``) both must agree: the larger p and
    noise band, the hull of the two intervals -- the history sees load that changed between runs,
    which no run's replicates can; or else
  - ``samples``: neither exists. Then the run-to-run noise is unknown: the interval is a
    *within-run* bootstrap of the samples (``ci_basis`` "within-run"), judged widened by an assumed
    run-to-run noise (``undecided.ASSUMED_RUN_NOISE``); a change near the threshold is "cannot
    judge" (reason "within-run only", with what to rerun). Processes that ran back to back (less
    than ``undecided.SPREAD_MIN_S`` apart) count as one run, not as replicates.
  Each pair reports which ``basis`` it used; no interval is narrower than the timer's resolution.
  ``undecided.decide`` turns ratio, p and interval into better / same / worse / cannot judge.

**Load** (``stalls_rule``): load only makes a figure worse. A mean, QPS or tail percentile that moved
while the p50 did not, with the load signal (``measure.load_signal``) on its *slower* side, is
"cannot judge" (reason "load on A"/"load on B"/"load on both"): the p50 is immune to preemption, the
mean is set by a few 10-100 ms stalls. With the load on the faster side a "worse" stands -- the
quiet side's figure is the model's -- and "same" is refused.

**Change points in a history**: ``edgebench.judge.changepoints`` (Apache Otava's E-divisive means when the
``changepoints`` extra is installed, else edgebench's binary segmentation), re-exported here.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace
from fractions import Fraction
from typing import Any, Sequence

import numpy as np

from edgebench.core.fingerprint import diff_fingerprints
from edgebench.core.latency import (
    MIN_SAMPLES,
    STALL_FACTOR,
    load_signal,
    rerun_interval,
    resolution,
    widen_to_resolution,
)
from edgebench.judge.changepoints import (  # noqa: F401 -- re-exported
    STEP_ALPHA,
    STEP_MIN_RUNS,
    Step,
    detect_steps,
    history_series,
    history_with_steps,
)
from edgebench.judge.stats_rows import (  # noqa: F401
    PERCENTILE_OF,
    REPEAT_KEY,
    loaded_side,
    process_groups,
    process_span,
    repeat_values,
    samples_ms,
    stall_rate,
    top1_counts,
)
from edgebench.judge.undecided import (  # noqa: F401
    ASSUMED_RUN_NOISE,
    CI_BASES,
    CI_LEVEL,
    HISTORY_MIN_RUNS,
    MIN_REPEATS,
    REASONS,
    SPREAD_MIN_S,
    VERDICTS,
    Z_CI,
    ComparisonGate,
    beyond,
    comparison_gate,
    decide,
    within_run_band,
)
from edgebench.rows import sample_class_of
from edgebench.rows.identity import headline, series_key
from edgebench.rows.metrics import BY_KEY, REGISTRY

MIN_RATIO = 1.1          # asv --factor default
ALPHA = 0.002            # asv's significance level
HISTORY_MAX_RUNS = 20    # ... the most recent this many

# Metrics compared by ``compare_runs`` (the registry's, ``metrics.REGISTRY``): (row column, label,
# higher_is_better, kind) with kind "location" | "percentile" | "deterministic" (see the module
# docstring for the tests; the registry's "ratio" test is "deterministic" here).
METRICS: tuple[tuple[str, str, bool, str], ...] = tuple(
    (m.key, m.label, m.higher_is_better,
     m.test if m.test in ("location", "mean", "percentile", "absolute", "repeats") else "deterministic")
    for m in REGISTRY if m.compared)
LATENCY_TESTS = ("location", "mean", "percentile")
NOISY_TESTS = LATENCY_TESTS + ("repeats",)   # metrics judged against the run-to-run noise
CI_RESAMPLES = 400
CI_MAX_SAMPLES = 20000   # per side: a larger run is subsampled (evenly) for the bootstrap
# the per-repeat summary key of each latency metric (``bench --repeats``: row["repeats"])
TESTS = {"location": "Mann-Whitney U", "mean": "Welch t-test (means)", "percentile": "quantile test (Fisher)",
         "deterministic": "ratio only (deterministic)", "absolute": "absolute change (own units)",
         "repeats": "per-process values (no per-inference samples)"}


def welch(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray) -> tuple[float, bool | None]:
    """Welch's two-sample t-test of the means: (two-sided p, B's mean larger?). A test of means
    sees a slower tail that moves the mean, which a rank test of the median does not."""
    from scipy.stats import ttest_ind

    x = np.asarray(a, dtype=np.float64).ravel()
    y = np.asarray(b, dtype=np.float64).ravel()
    if x.size < 2 or y.size < 2:
        return float("nan"), None
    diff = float(y.mean() - x.mean())
    if np.ptp(x) == 0 and np.ptp(y) == 0:
        return (0.0 if diff else 1.0), (None if diff == 0 else diff > 0)
    return float(ttest_ind(y, x, equal_var=False).pvalue), (None if diff == 0 else diff > 0)


def ratio_interval(a: np.ndarray, b: np.ndarray, kind: str, percentile: float | None = None,
                   inverse: bool = False) -> tuple[float, float] | None:
    """A ``CI_LEVEL`` bootstrap interval of B's statistic over A's (median, mean or percentile;
    ``inverse``: of A's over B's, for QPS from latency samples), resampling each side's samples
    (fixed seed: the same runs give the same interval). A *within-run* interval: it knows nothing of
    how a second run would differ (``measure.rerun_interval`` does, from replicate processes). Never
    narrower than the samples' timer resolution (``measure.widen_to_resolution``)."""
    x = np.asarray(a, dtype=np.float64).ravel()
    y = np.asarray(b, dtype=np.float64).ravel()
    if x.size < 2 or y.size < 2:
        return None
    x = x[np.linspace(0, x.size - 1, min(x.size, CI_MAX_SAMPLES)).astype(int)]
    y = y[np.linspace(0, y.size - 1, min(y.size, CI_MAX_SAMPLES)).astype(int)]
    rng = np.random.default_rng(0)

    def stat(v: np.ndarray) -> np.ndarray:
        if kind == "mean":
            return v.mean(axis=1)
        return np.percentile(v, 50.0 if kind == "location" else float(percentile or 50.0), axis=1)

    ra = stat(x[rng.integers(0, x.size, (CI_RESAMPLES, x.size))])
    rb = stat(y[rng.integers(0, y.size, (CI_RESAMPLES, y.size))])
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = ra / rb if inverse else rb / ra
    ratios = ratios[np.isfinite(ratios)]
    if ratios.size < CI_RESAMPLES // 2:
        return None
    tail = (1 - CI_LEVEL) / 2 * 100
    lo, hi = np.percentile(ratios, [tail, 100 - tail])
    pa, pb = float(stat(x[None, :])[0]), float(stat(y[None, :])[0])
    if pa <= 0 or pb <= 0:
        return float(lo), float(hi)
    rel = resolution(x) / pa + resolution(y) / pb
    return widen_to_resolution((float(lo), float(hi)), pa / pb if inverse else pb / pa, rel)


def mann_whitney(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray) -> tuple[float, float]:
    """Two-sided Mann-Whitney U test: (U statistic of ``a``, p-value). NaN p when either is empty."""
    from scipy.stats import mannwhitneyu

    x = np.asarray(a, dtype=np.float64).ravel()
    y = np.asarray(b, dtype=np.float64).ravel()
    if x.size == 0 or y.size == 0:
        return float("nan"), float("nan")
    if np.all(x == x[0]) and np.all(y == y[0]) and x[0] == y[0]:
        return float(x.size * y.size / 2), 1.0  # identical constants: no evidence of a change
    res = mannwhitneyu(x, y, alternative="two-sided", method="auto")
    return float(res.statistic), float(res.pvalue)


def quantile_test(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray,
                  percentile: float) -> tuple[float, bool | None]:
    """Two-sample test of the ``percentile``-th quantile: (two-sided p, B's tail heavier?).

    Counts each side's samples above the pooled quantile and tests the 2x2 table with Fisher's
    exact test (Mood's median test generalised to any quantile; Conover, *Practical
    Nonparametric Statistics*, 3rd ed., sec. 4.3). NaN p when either side is empty.
    """
    from scipy.stats import fisher_exact

    x = np.asarray(a, dtype=np.float64).ravel()
    y = np.asarray(b, dtype=np.float64).ravel()
    if x.size == 0 or y.size == 0:
        return float("nan"), None
    q = float(np.percentile(np.concatenate([x, y]), percentile))
    ax, ay = int((x > q).sum()), int((y > q).sum())
    if ax == 0 and ay == 0:
        return 1.0, None
    p = float(fisher_exact([[ax, x.size - ax], [ay, y.size - ay]]).pvalue)
    fx, fy = ax / x.size, ay / y.size
    return min(p, 1.0), (None if fx == fy else fy > fx)


def replicate_test(a: Sequence[float], b: Sequence[float]) -> tuple[float, bool | None]:
    """Student's two-sample t-test on the log of per-process values: (two-sided p, B larger?).

    Pooled variance: both sides are the same benchmark on the same kind of machine, so their
    run-to-run noise (of log latency) is taken as equal, which gives 2k - 2 degrees of freedom.
    """
    from scipy.stats import ttest_ind

    x = np.log(np.asarray(a, dtype=np.float64))
    y = np.log(np.asarray(b, dtype=np.float64))
    diff = float(y.mean() - x.mean())
    if np.ptp(x) == 0 and np.ptp(y) == 0:       # no spread at all: any difference is real
        return (0.0 if diff else 1.0), (None if diff == 0 else diff > 0)
    p = float(ttest_ind(y, x, equal_var=True).pvalue)
    return p, (None if diff == 0 else diff > 0)


def noise_test(ratio: float, sigma: float, df: int) -> float:
    """Two-sided p of a log ratio between two runs against a run-to-run noise ``sigma`` (standard
    deviation of one run's log value, estimated with ``df`` degrees of freedom)."""
    from scipy.stats import t as student_t

    d = abs(math.log(ratio)) if ratio > 0 else math.inf
    if sigma <= 0:
        return 0.0 if d > 0 else 1.0
    return float(2 * student_t.sf(d / (sigma * math.sqrt(2)), df=max(df, 1)))


def run_noise(values: Sequence[float]) -> tuple[float, int, int] | None:
    """Run-to-run noise of a metric from its history (oldest first): (sigma, runs, df) or None.

    The history is cut at its level shifts (``detect_steps``) so a step does not count as
    noise; sigma is the pooled standard deviation of the log values around their segment's
    mean, with df = runs - segments. None when df < ``HISTORY_MIN_RUNS`` - 1.
    """
    v = np.asarray([x for x in values if x is not None and x > 0], dtype=np.float64)
    if v.size < HISTORY_MIN_RUNS:
        return None
    cuts = [0] + [s.index for s in detect_steps(v)] + [v.size]
    logs = np.log(v)
    ss = sum(float(((logs[a:b] - logs[a:b].mean()) ** 2).sum()) for a, b in zip(cuts[:-1], cuts[1:]))
    df = int(v.size) - (len(cuts) - 1)
    if df < HISTORY_MIN_RUNS - 1:
        return None
    return math.sqrt(ss / df), int(v.size), df


@dataclass(frozen=True)
class Change:
    """One metric compared between run A (before) and run B (after)."""
    metric: str
    a: float | None
    b: float | None
    ratio: float | None               # b / a
    p_value: float | None             # the p that decided (max of p_samples, p_runs); None: deterministic
    verdict: str                      # see VERDICTS
    higher_is_better: bool = False
    note: str = ""
    test: str = ""                    # the within-run test (see TESTS)
    basis: str = "samples"            # "repeats" | "history" | "repeats+history" | "samples" | "deterministic"
    #                                   | "absolute"
    p_samples: float | None = None    # within-run test on the raw samples
    p_runs: float | None = None       # between-run test (replicates or history noise)
    ci: tuple[float, float] | None = None   # CI_LEVEL interval of the ratio (see ``ci_basis``)
    change: float | None = None       # "absolute" tests: B - A in the metric's change unit
    unit: str = ""                    # ... that unit (pp, dB, 1 - cosine)
    ci_basis: str = ""                # what ``ci`` is an interval for (CI_BASES)
    noise_band: float | None = None   # the measured run-to-run spread: a rerun moves the ratio within
    #                                   [1/band, band] in CI_LEVEL of reruns (repeats or history)
    reason: str = ""                  # "cannot judge": why (one of REASONS' keys); "" otherwise
    ci_level: float = CI_LEVEL        # the level of ``ci`` (every output states it)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def rerun_interval(self) -> bool:
        """True when ``ci`` is an interval for a rerun (replicate processes or stored history), printed
        with the verdict; False when it is a within-run or load-bound one (printed apart)."""
        return self.ci is not None and self.ci_basis in ("processes", "history", "processes+history")


def classify(metric: str, a: float | None, b: float | None, *, higher_is_better: bool,
             samples_a: np.ndarray | None = None, samples_b: np.ndarray | None = None,
             min_ratio: float = MIN_RATIO, alpha: float = ALPHA, inverse: bool = False,
             kind: str | None = None, percentile: float | None = None,
             repeats_a: Sequence[float] | None = None, repeats_b: Sequence[float] | None = None,
             noise: tuple[float, int, int] | None = None, threshold: float | None = None,
             unit: str = "", scale: float = 1.0, per_process: int | None = None,
             groups_a: Sequence[np.ndarray] | None = None, groups_b: Sequence[np.ndarray] | None = None,
             counts: tuple[int, int, int, int] | None = None, resamples: dict | None = None,
             spread_s: float | None = None) -> Change:
    """Apply the rule of the module docstring to one metric.

    ``kind`` defaults to "location" when samples are given, else "deterministic";
    "percentile" needs ``percentile``; "absolute" compares B - A (times ``scale``, in ``unit``)
    with ``threshold`` -- on whole sample ``counts`` (correct A, samples A, correct B, samples B)
    when given (top-1). ``repeats_a``/``repeats_b``: the metric per worker process, ``groups_a``/
    ``groups_b`` each process's samples (the rerun interval); ``noise``: (sigma, runs, df) from
    ``run_noise``; ``resamples``: a dict the metrics of one pair share their bootstrap resamples in.
    ``spread_s``: the seconds the processes of the less spread side ran over (their rerun interval
    counts as one only from SPREAD_MIN_S). ``inverse``: the metric falls when the samples rise (QPS
    from latency samples). A
    change also needs the within-run test to point the same way as the ratio: a mean pulled down by
    a few outliers while most samples got slower is not "better".
    """

    have_samples = samples_a is not None and samples_b is not None and len(samples_a) and len(samples_b)
    if kind is None:
        kind = "location" if have_samples else "deterministic"
    if kind not in ("deterministic", "absolute") and not have_samples:
        kind = "deterministic" if repeats_a is None else kind
    test = TESTS[kind]
    if a is None or b is None or not np.isfinite(a) or not np.isfinite(b):
        return Change(metric, a, b, None, None, "n/a", higher_is_better, "missing on one side", test,
                      "deterministic" if kind == "deterministic" else "samples")
    if a == 0:
        ratio = 1.0 if b == 0 else math.inf
    else:
        ratio = b / a
    if kind == "absolute":
        return _absolute(metric, float(a), float(b), float(ratio), higher_is_better, test, threshold, unit, scale,
                         counts)
    big = ratio >= min_ratio or (ratio > 0 and ratio <= 1.0 / min_ratio) or (ratio < 0)
    if kind == "repeats":
        return _classify_repeats(metric, float(a), float(b), float(ratio), big, higher_is_better, alpha,
                                 repeats_a, repeats_b, noise, min_ratio, spread_s)
    if kind == "deterministic":
        verdict = "same" if not big else ("better" if (ratio > 1) == higher_is_better else "worse")
        note = "" if not big else "deterministic metric: ratio alone decides"
        return Change(metric, float(a), float(b), float(ratio), None, verdict, higher_is_better, note,
                      test, "deterministic")

    # -- within the runs: a test of this metric on the raw samples
    if kind == "percentile":
        name = f"p{percentile:g}"
        need = MIN_SAMPLES.get(name, 0)
        short = [n for n in (len(samples_a), len(samples_b)) if n < need]
        if not short and per_process is not None and per_process < need and repeats_a is None:
            return Change(metric, float(a), float(b), float(ratio), None, "n/a", higher_is_better,
                          f"{name} cannot be judged: each worker process had {per_process} samples, fewer than "
                          f"the {need} a valid {name} needs, so the processes' {name}s are not replicates; raise "
                          f"--runs to {need} or more per process", test, "samples")
        if short:
            return Change(metric, float(a), float(b), float(ratio), None, "n/a", higher_is_better,
                          f"{name} from {min(short)} samples is not valid (needs >= {need} per side, MLPerf "
                          f"LoadGen minimum); rerun with more inferences (--min-runs {need} or more)",
                          test, "samples")
        p_samples, b_larger = quantile_test(samples_a, samples_b, percentile)
    elif kind == "mean":
        p_samples, b_larger = welch(samples_a, samples_b)
    else:
        u, p_samples = mann_whitney(samples_a, samples_b)
        half = len(samples_a) * len(samples_b) / 2
        b_larger = None if u == half else u < half   # U of A small -> B's samples tend larger

    # -- between runs: replicates, else the stored history's run-to-run noise, else unknown
    basis, p_runs, runs_note, band, ci, ci_basis = _between_runs(
        ratio, kind, percentile, inverse, repeats_a, repeats_b, groups_a, groups_b, noise, resamples, spread_s)
    if ci is None:
        ci, ci_basis = ratio_interval(samples_a, samples_b, kind, percentile, inverse), "within-run"
    p = p_samples if p_runs is None else max(p_samples, p_runs)
    metric_up = ratio > 1
    agrees = b_larger is None or (metric_up == (b_larger != inverse))
    verdict, reason, note = decide(ratio, p, ci, ci_basis, band, big=big, agrees=agrees, alpha=alpha,
                                   min_ratio=min_ratio, higher_is_better=higher_is_better,
                                   replicates=basis.startswith("repeats"), runs_note=runs_note,
                                   p_samples=p_samples)
    return Change(metric, float(a), float(b), float(ratio), p, verdict, higher_is_better, note, test, basis,
                  p_samples, p_runs, ci, ci_basis=ci_basis, noise_band=band, reason=reason)


def _between_runs(ratio: float, kind: str, percentile: float | None, inverse: bool, repeats_a, repeats_b,
                  groups_a, groups_b, noise: tuple[float, int, int] | None, resamples: dict | None,
                  spread_s: float | None) -> tuple[str, float | None, str, float | None, Any, str]:
    """``classify``'s test between runs: replicates, else the stored history's run-to-run noise, else
    unknown; each gives the run-to-run spread (the noise band) and an interval for a rerun. Returns
    (basis, p between runs, its note, the noise band, the interval, the interval's basis)."""
    basis, p_runs, runs_note, band = "samples", None, "", None
    ci, ci_basis = None, "within-run"
    ra = [x for x in (repeats_a or []) if x is not None and x > 0]
    rb = [x for x in (repeats_b or []) if x is not None and x > 0]
    if len(ra) >= MIN_REPEATS and len(rb) >= MIN_REPEATS:
        basis = "repeats"
        p_runs, _ = replicate_test(ra, rb)
        sigma = replicate_sigma(ra, rb)
        band = math.exp(Z_CI * sigma * math.sqrt(2.0))
        runs_note = f"t-test on log per-process values, {len(ra)} vs {len(rb)} processes"
        ci = (rerun_interval(list(groups_a), list(groups_b), kind, percentile, inverse, cache=resamples)
              if groups_a is not None and groups_b is not None else None)
        ci = ci or replicate_interval(ra, rb)
        ci_basis = "processes"
    if noise is not None:
        # the stored history sees what replicates of one run cannot: load that changed between runs
        # (scripts/stats_power.py: 3 processes covered a second run's p50 in 87-100 % of run pairs, the
        # history in all). With both, both must agree: the larger p and band, the hull of the intervals.
        h_p = noise_test(ratio, noise[0], noise[2])
        h_band = math.exp(Z_CI * noise[0] * math.sqrt(2.0))
        h_note = f"run-to-run noise {noise[0]:.1%} from {noise[1]} stored runs of this configuration"
        h_ci = history_interval(ratio, noise[0], noise[2])
        if basis == "repeats":
            basis, p_runs, band = "repeats+history", max(p_runs, h_p), max(band, h_band)
            runs_note = f"{runs_note}; {h_note}"
            ci = ci if h_ci is None else (h_ci if ci is None else (min(ci[0], h_ci[0]), max(ci[1], h_ci[1])))
            ci_basis = "processes+history"
        else:
            basis, p_runs, band, runs_note, ci, ci_basis = "history", h_p, h_band, h_note, h_ci, "history"
    if ci_basis == "processes" and not (spread_s is not None and spread_s >= SPREAD_MIN_S):
        # processes run back to back are one run: their interval sees none of the shifts between runs
        ci_basis = "within-run"
        runs_note += (f"; the processes ran within {spread_s:.0f} s" if spread_s is not None else
                      "; when the processes ran is not recorded") + f" (< {SPREAD_MIN_S:g} s apart: one run)"
    return basis, p_runs, runs_note, band, ci, ci_basis


def replicate_sigma(a: Sequence[float], b: Sequence[float]) -> float:
    """Pooled standard deviation of the log per-process values of both sides (the run-to-run noise
    of one process, as ``replicate_test`` assumes it)."""
    x, y = np.log(np.asarray(a, np.float64)), np.log(np.asarray(b, np.float64))
    ss = float(((x - x.mean()) ** 2).sum() + ((y - y.mean()) ** 2).sum())
    return math.sqrt(ss / max(x.size + y.size - 2, 1))


def replicate_interval(a: Sequence[float], b: Sequence[float]) -> tuple[float, float]:
    """CI_LEVEL interval of the ratio of the geometric means of per-process values (Student's t,
    pooled variance): the rerun interval of a row whose per-process samples are not at hand."""
    from scipy.stats import t as student_t

    x, y = np.log(np.asarray(a, np.float64)), np.log(np.asarray(b, np.float64))
    d = float(y.mean() - x.mean())
    half = float(student_t.ppf(0.5 + CI_LEVEL / 2, x.size + y.size - 2)) * replicate_sigma(a, b) * math.sqrt(
        1.0 / x.size + 1.0 / y.size)
    return math.exp(d - half), math.exp(d + half)


def history_interval(ratio: float, sigma: float, df: int) -> tuple[float, float] | None:
    """CI_LEVEL interval of a ratio between two single runs whose run-to-run noise is ``sigma`` (sd of
    one run's log value, from the stored history with ``df`` degrees of freedom)."""
    from scipy.stats import t as student_t

    if not ratio > 0 or not math.isfinite(ratio):
        return None
    half = float(student_t.ppf(0.5 + CI_LEVEL / 2, max(df, 1))) * sigma * math.sqrt(2.0)
    return ratio * math.exp(-half), ratio * math.exp(half)


def _absolute(metric: str, a: float, b: float, ratio: float, higher_is_better: bool, test: str,
              threshold: float | None, unit: str, scale: float,
              counts: tuple[int, int, int, int] | None) -> Change:
    """Accuracy and drift: a change in the metric's own unit, not a ratio (98.33 % -> 90 % top-1 is a
    0.92x ratio: "same" by the latency rule, though a CI gate would fail it). A change counts when it
    is larger than the threshold (a drop of exactly the threshold passes, as the gate's ``drop <= max``
    does); "same" means no change at all, and a change up to the threshold is "within threshold".
    With sample ``counts`` (top-1), the comparison is on whole samples, exactly: a threshold of 0
    means any sample lost, and float rounding of a percentage never decides."""

    th = Fraction(str(threshold)) if threshold is not None else Fraction(0)
    change = (b - a) * scale
    if unit == "1 - cosine":          # shown as the change of 1 - cosine: positive = further from the reference
        change = -change
    extra = ""
    if counts is not None and all(isinstance(c, int) for c in counts) and counts[1] > 0 and counts[3] > 0:
        ca, na, cb, nb = counts
        # B - A in units of 1/(na*nb) of a sample share; a percentage point is scale/100 of it
        diff = Fraction(cb * na - ca * nb, na * nb) * Fraction(str(scale))
        size, up, zero = abs(diff), diff > 0, diff == 0
        change = float(diff)
        extra = (f" ({cb - ca:+d} of {na} samples)" if na == nb
                 else f" ({cb}/{nb} vs {ca}/{na} samples)")
    else:
        if math.isinf(a) and math.isinf(b):
            change = 0.0
        size, up, zero = Fraction(abs(change)), b > a, change == 0
    if zero:
        verdict = "same"
    elif size <= th:
        verdict = "within threshold"
    else:
        verdict = "better" if up == higher_is_better else "worse"
    note = f"{change:+.4g} {unit}{extra} (a change counts above {float(th):g} {unit})"
    return Change(metric, a, b, ratio, None, verdict, higher_is_better, note, test, "absolute",
                  change=change, unit=unit)


def _classify_repeats(metric: str, a: float, b: float, ratio: float, big: bool, higher_is_better: bool,
                      alpha: float, repeats_a: Sequence[float] | None, repeats_b: Sequence[float] | None,
                      noise: tuple[float, int, int] | None, min_ratio: float = MIN_RATIO,
                      spread_s: float | None = None) -> Change:
    """A metric measured once per worker process (``llm-bench``): the latency rule without its
    within-run half, which has no samples to work on -- the processes (t-test on their logs, a
    Student-t interval of the ratio of their geometric means), else the stored history's noise,
    else none (``decide``)."""
    test = TESTS["repeats"]
    ra = [x for x in (repeats_a or []) if x is not None and x > 0]
    rb = [x for x in (repeats_b or []) if x is not None and x > 0]
    basis, p_runs, runs_note, band, ci, ci_basis = "samples", None, "", None, None, "within-run"
    if len(ra) >= 2 and len(rb) >= 2:
        ci = replicate_interval(ra, rb)
        ci_basis = "processes" if spread_s is not None and spread_s >= SPREAD_MIN_S else "within-run"
    if len(ra) >= MIN_REPEATS and len(rb) >= MIN_REPEATS:
        basis = "repeats"
        p_runs, _ = replicate_test(ra, rb)
        band = math.exp(Z_CI * replicate_sigma(ra, rb) * math.sqrt(2.0))
        runs_note = f"t-test on log per-process values, {len(ra)} vs {len(rb)} processes" + (
            "" if ci_basis == "processes" else f" (run within {spread_s:.0f} s: one run)" if spread_s is not None
            else " (when they ran is not recorded: one run)")
    if noise is not None:
        h_p = noise_test(ratio, noise[0], noise[2])
        h_band = math.exp(Z_CI * noise[0] * math.sqrt(2.0))
        h_ci = history_interval(ratio, noise[0], noise[2])
        h_note = f"run-to-run noise {noise[0]:.1%} from {noise[1]} stored runs of this configuration"
        if basis == "repeats":
            basis, p_runs, band = "repeats+history", max(p_runs, h_p), max(band, h_band)
            runs_note = f"{runs_note}; {h_note}"
            ci = h_ci if ci is None or h_ci is None else (min(ci[0], h_ci[0]), max(ci[1], h_ci[1]))
            ci_basis = "processes+history"
        else:
            basis, p_runs, band, runs_note, ci, ci_basis = "history", h_p, h_band, h_note, h_ci, "history"
    verdict, reason, note = decide(ratio, p_runs, ci, ci_basis, band, big=big, agrees=True, alpha=alpha,
                                   min_ratio=min_ratio, higher_is_better=higher_is_better,
                                   replicates=basis.startswith("repeats"), runs_note=runs_note)
    return Change(metric, a, b, ratio, p_runs, verdict, higher_is_better, note, test, basis, None, p_runs, ci,
                  ci_basis=ci_basis, noise_band=band, reason=reason)


def _row_key(row: dict[str, Any], i: int) -> tuple:
    llm = row.get("llm") if isinstance(row.get("llm"), dict) else {}
    k = (row.get("model"), row.get("precision"), row.get("target"), row.get("batch_size"))
    if llm.get("prefill_tokens") is not None or llm.get("decode_tokens") is not None:
        k += (llm.get("prefill_tokens"), llm.get("decode_tokens"))      # an llm-bench row's shape
    return k if any(v is not None for v in k) else ("row", i)


def _keyed(rows: list[dict[str, Any]]) -> dict[tuple, dict[str, Any]]:
    """Rows by ``_row_key``; rows of one run that share a key (an llm-bench engine-option axis: the
    same bundle and shape under --activation fp32,fp16) are told apart by their engine options."""
    keys = [_row_key(r, i) for i, r in enumerate(rows)]
    seen: dict[tuple, int] = {}
    for k in keys:
        seen[k] = seen.get(k, 0) + 1
    out = {}
    for k, r in zip(keys, rows):
        llm = r.get("llm") if isinstance(r.get("llm"), dict) else {}
        out[k + (llm.get("activation"), llm.get("speculative")) if seen[k] > 1 and llm else k] = r
    return out


def _pair_rows(rows_a: dict[tuple, dict[str, Any]], rows_b: dict[tuple, dict[str, Any]]) -> list[tuple[tuple, tuple]]:
    """(key in A, key in B) of every pair: the same key, then -- for rows left over on both sides --
    the same key but the precision, when that is unique on each side (an fp32 run against an int8
    run of the same model and shape: the precision shows as a configuration difference)."""
    pairs = [(k, k) for k in rows_a if k in rows_b]
    left_a = [k for k in rows_a if k not in rows_b]
    left_b = [k for k in rows_b if k not in rows_a]

    def loose(k: tuple) -> tuple:
        return k[:1] + k[2:] if len(k) > 2 and k[0] != "row" else k

    by_a: dict[tuple, list[tuple]] = {}
    by_b: dict[tuple, list[tuple]] = {}
    for k in left_a:
        by_a.setdefault(loose(k), []).append(k)
    for k in left_b:
        by_b.setdefault(loose(k), []).append(k)
    for lk, ka in by_a.items():
        kb = by_b.get(lk)
        if len(ka) == 1 and kb is not None and len(kb) == 1 and lk != ka[0]:
            pairs.append((ka[0], kb[0]))
    return pairs


def _threshold(col: str, row_b: dict[str, Any], doc_b: dict[str, Any], given: dict[str, float] | None) -> float | None:
    """The change that counts for an "absolute" metric: the command line's, else for top-1 the
    accuracy-drop threshold B's own gate applied to this row, else the registry's default."""
    m = BY_KEY[col]
    if m.test != "absolute":
        return None
    if given and given.get(col) is not None:
        return float(given[col])
    if col == "top1":
        for c in ((doc_b.get("gate") or {}).get("checks") or ()):
            if (isinstance(c, dict) and c.get("metric") == "accuracy_drop_pp" and c.get("threshold") is not None
                    and c.get("precision") == row_b.get("precision") and c.get("target") == row_b.get("target")):
                return float(c["threshold"])
    return m.threshold


def stalls_rule(changes: list[Change], loaded: tuple[bool, bool], rates: tuple[float, float],
                min_ratio: float) -> list[Change]:
    """Load, by direction. A mean, QPS or tail percentile is shaped by stalls from other work (the
    inferences right after a preemption run on cold caches too, so a p90 or p99 moves with the load
    even where stalls are fewer than (100 - p) % of the samples: measured, a p99 1.64x, a p90
    1.24-1.37x, stalls under 1 %, p50 1.00x). Load only ever makes a figure worse, so a loaded
    side's true figure is at most what was measured (``loaded``: the load signal fired on A / B, its
    stalls covered by the worker's preemptions: ``measure.load_signal``):

    * the loaded side is the slower one: the change may be all stalls -- "cannot judge" (reason
      "load on A"/"load on B"), never "worse" and never a pass;
    * the loaded side is the faster one: the true change is at least the measured one, so a
      "worse"/"better" stands (the quiet side's tail is the model's); a "same" cannot be claimed
      ("load on A, the faster side");
    * both loaded: "cannot judge" ("load on both"); the p50 -- immune to preemption -- still decides
      its own verdict.

    The p50 itself is never touched. Its interval is then one of these runs' load (``ci_basis``
    "loaded"). ``rates``: each side's share of samples that are stalls (in the note)."""
    if not any(loaded):
        return changes
    out = []
    for c in changes:
        pct = next((PERCENTILE_OF[m.key] for m in REGISTRY if m.label == c.metric and m.key in PERCENTILE_OF), None)
        shaped = c.test == TESTS["mean"] or (pct is not None and pct > 50)
        if not shaped or c.ratio is None or c.verdict == "n/a":
            out.append(c)
            continue
        b_slower = (c.ratio > 1) != c.higher_is_better if c.ratio != 1 else None
        stalls = f"stalls {rates[0]:.2%} of A's samples, {rates[1]:.2%} of B's"
        if all(loaded):
            why = "load on both"
        elif b_slower is None:
            why = f"load on {'A' if loaded[0] else 'B'}, the faster side"
        else:
            slower_loaded = loaded[1] if b_slower else loaded[0]
            side = "A" if loaded[0] else "B"
            why = f"load on {side}" if slower_loaded else f"load on {side}, the faster side"
        if why.endswith("the faster side") and c.verdict in ("worse", "better"):
            out.append(replace(c, note=f"{c.note}; load on {'A' if loaded[0] else 'B'} (the faster side): the "
                                       f"true change is at least this ({stalls})", ci_basis="loaded"))
            continue
        out.append(replace(c, verdict="cannot judge", reason=why, ci_basis="loaded",
                           note=f"{c.metric} {c.ratio:.3g}x under load ({stalls}): {REASONS[why]}"
                                + (f"; before the load rule: {c.verdict}" + (f" ({c.reason})" if c.reason else "")
                                   if c.verdict != "cannot judge" else "")))
    return out


def _per_process(ra: dict[str, Any], rb: dict[str, Any]) -> int | None:
    """The fewest samples any worker process had on either side (None: one process each)."""
    counts = [r.get("samples") for row in (ra, rb) for r in (row.get("repeats") or ()) if isinstance(r, dict)]
    counts = [int(c) for c in counts if isinstance(c, (int, float))]
    return min(counts) if counts else None


def compare_runs(doc_a: dict[str, Any], doc_b: dict[str, Any], *, min_ratio: float = MIN_RATIO,
                 alpha: float = ALPHA, noise: dict[tuple, tuple[float, int, int]] | None = None,
                 thresholds: dict[str, float] | None = None) -> dict[str, Any]:
    """Compare two stored result documents (from ``Store.get``).

    Returns ``{"a", "b", "fingerprint_diff": [{field, a, b}], "pairs": [{key, basis, changes:
    [Change]}], "unmatched_a", "unmatched_b", "regressions", "mixed_methods", "rule"}``; rows are
    paired by (model, precision, target, batch size). The fingerprint differences come first: a
    ratio between different environments is not a regression of the model. ``noise`` maps
    (row key, column) to the history's run-to-run noise (``compare_stored`` fills it). Latency
    samples of different classes (steady-state vs per-process, ``targets.base.SAMPLE_CLASSES``)
    are never judged against each other: those metrics get verdict "n/a" and the pair is marked
    ``mixed_methods``.
    """

    noise = noise or {}
    fa, fb = doc_a.get("fingerprint") or {}, doc_b.get("fingerprint") or {}
    fdiff = [{"field": f, "a": va, "b": vb} for f, va, vb in diff_fingerprints(fa, fb)]
    rows_a, rows_b = _keyed(doc_a.get("rows", [])), _keyed(doc_b.get("rows", []))
    pairs = []
    regressions = undecided = 0
    matched = _pair_rows(rows_a, rows_b)
    for key, key_b in matched:
        ra, rb = rows_a[key], rows_b[key_b]
        # Row-level fingerprints (device rows) add their own differences.
        row_fdiff = [{"field": f, "a": va, "b": vb}
                     for f, va, vb in diff_fingerprints(ra.get("fingerprint") or {}, rb.get("fingerprint") or {})]
        ha, hb = headline(ra), headline(rb)
        sa_ms, sb_ms = samples_ms(ra), samples_ms(rb)
        classes = [sample_class_of(ra), sample_class_of(rb)]
        mixed = classes[0] != classes[1] and None not in classes
        changes = []
        groups = (process_groups(ra, sa_ms), process_groups(rb, sb_ms))
        shared: dict = {}                          # one set of bootstrap resamples for this pair's metrics
        ca, cb = top1_counts(ra), top1_counts(rb)
        spans = (process_span(ra), process_span(rb))
        spread = None if None in spans else min(spans)      # the less spread side decides
        for col, label, hib, kind in METRICS:
            if ha.get(col) is None and hb.get(col) is None:
                continue
            latency = kind in LATENCY_TESTS
            noisy = kind in NOISY_TESTS
            if latency and mixed:
                # a change of method, not of the model: no ratio, no verdict (targets.base.SAMPLE_CLASSES)
                changes.append(Change(label, ha.get(col), hb.get(col), None, None, "n/a", hib,
                                      f"not compared: A's samples are {classes[0]}, B's are {classes[1]}",
                                      basis="samples"))
                continue
            ch = classify(label, ha.get(col), hb.get(col), higher_is_better=hib,
                          samples_a=sa_ms if latency else None, samples_b=sb_ms if latency else None,
                          min_ratio=min_ratio, alpha=alpha, inverse=col == "qps",
                          kind=("absolute" if kind == "absolute" else "repeats" if kind == "repeats" else
                                kind if latency and sa_ms is not None and sb_ms is not None else None),
                          percentile=PERCENTILE_OF.get(col),
                          repeats_a=repeat_values(ra, col) if noisy else None,
                          repeats_b=repeat_values(rb, col) if noisy else None,
                          noise=noise.get((key_b, col)) if noisy else None,
                          threshold=_threshold(col, rb, doc_b, thresholds), unit=BY_KEY[col].change_unit,
                          scale=BY_KEY[col].change_scale, per_process=_per_process(ra, rb),
                          groups_a=groups[0] if latency else None, groups_b=groups[1] if latency else None,
                          counts=(*ca, *cb) if col == "top1" and ca and cb else None, resamples=shared,
                          spread_s=spread)
            changes.append(ch)
        loaded = (loaded_side(ra, sa_ms), loaded_side(rb, sb_ms))
        if not mixed:
            changes = stalls_rule(changes, loaded, (stall_rate(sa_ms), stall_rate(sb_ms)), min_ratio)
        regressions += sum(c.verdict == "worse" for c in changes)
        undecided += sum(c.verdict == "cannot judge" for c in changes)
        bases = sorted({c.basis for c in changes if c.basis != "deterministic" and c.verdict != "n/a"})
        reps = [len(ra.get("repeats") or []) or 1, len(rb.get("repeats") or []) or 1]
        ka, kb = series_key(ra), series_key(rb)   # the configuration identity (identity.SERIES_FIELDS)
        config_diff = [{"field": f, "a": ka[f], "b": kb[f]} for f in ka if ka[f] != kb[f]]
        pairs.append({"key": [k for k in (key if key == key_b else key_b) if k is not None],
                      "status": [ha["status"], hb["status"]],
                      "config_diff": config_diff,
                      "sample_class": classes, "mixed_methods": mixed,
                      "n_samples": [0 if sa_ms is None else int(sa_ms.size),
                                    0 if sb_ms is None else int(sb_ms.size)],
                      "repeats": reps, "basis": bases, "loaded": list(loaded), "process_span_s": list(spans),
                      "fingerprint_diff": row_fdiff, "changes": changes})
    return {
        "a": doc_a.get("run_id"), "b": doc_b.get("run_id"),
        "fingerprint_diff": fdiff,
        "pairs": pairs,
        "unmatched_a": [list(k) for k in rows_a if k not in {ka for ka, _ in matched}],
        "unmatched_b": [list(k) for k in rows_b if k not in {kb for _, kb in matched}],
        "regressions": regressions,
        "undecided": undecided,
        "mixed_methods": sum(1 for p in pairs if p["mixed_methods"]),
        "rule": _rule(min_ratio, alpha, thresholds),
    }


def _rule(min_ratio: float, alpha: float, thresholds: dict[str, float] | None) -> dict[str, Any]:
    """The comparison's ``rule``: the thresholds and tests every verdict of ``compare_runs`` follows."""
    return {"min_ratio": min_ratio, "alpha": alpha,
            "test": "p50: Mann-Whitney U; mean/QPS: Welch t-test; p90/p99: quantile test (Fisher); "
                    "run-to-run noise: processes spread in time, else stored history, else within-run only "
                    "(widened by an assumed run-to-run noise); worse/better: beyond the ratio, significant, "
                    "the interval clear of the run-to-run spread; same: the interval inside the threshold; "
                    "else cannot judge (with the reason); a mean/QPS/tail under load on its slower side: "
                    "cannot judge; top-1 (whole samples)/PSNR/cosine: an absolute change in pp/dB/1 - "
                    "cosine above the threshold",
            "thresholds": {m.key: _threshold(m.key, {}, {}, thresholds) for m in REGISTRY
                           if m.test == "absolute"},
            "min_repeats": MIN_REPEATS, "history_min_runs": HISTORY_MIN_RUNS, "ci_level": CI_LEVEL,
            "spread_min_s": SPREAD_MIN_S, "assumed_run_noise": ASSUMED_RUN_NOISE,
            "verdicts": list(VERDICTS), "reasons": REASONS}


def compare_stored(store: Any, run_a: str, run_b: str, *, min_ratio: float = MIN_RATIO,
                   alpha: float = ALPHA, thresholds: dict[str, float] | None = None) -> dict[str, Any]:
    """``compare_runs`` on two stored runs, with the run-to-run noise of each paired row taken
    from the store's history of exactly that configuration (runs A and B left out)."""
    doc_a, doc_b = store.get(run_a), store.get(run_b)
    noise: dict[tuple, tuple[float, int, int]] = {}
    rows_a, rows_b = _keyed(doc_a.get("rows", [])), _keyed(doc_b.get("rows", []))
    paired_b = {kb for _, kb in _pair_rows(rows_a, rows_b)}
    for i, rb in enumerate(doc_b.get("rows", [])):
        key = _row_key(rb, i)
        if key not in paired_b or rb.get("model") is None:
            continue
        for col, _label, _hib, kind in METRICS:
            if kind not in NOISY_TESTS:
                continue
            pts = store.series_history(rb, col, kind=doc_b.get("kind"), before=doc_b.get("created"),
                                       exclude=(doc_a["run_id"], doc_b["run_id"]))
            est = run_noise([p["value"] for p in pts][-HISTORY_MAX_RUNS:])
            if est is not None:
                noise[(key, col)] = est
    return compare_runs(doc_a, doc_b, min_ratio=min_ratio, alpha=alpha, noise=noise, thresholds=thresholds)
