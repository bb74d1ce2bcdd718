"""Where a history shifted: change points of a metric over stored runs, and the run that did it.

``change_points(values)`` finds the runs where a series (one value per run, oldest first) moved to
a new level. With the optional extra installed (``pip install 'edgebench[changepoints]'``) it is
Apache Otava's detector (``otava.analysis.compute_change_points``: E-divisive means, Matteson &
James 2014, split over sliding windows and merged by Student's t-test as in Fleming et al.,
"Hunter: Using Change Point Detection to Hunt for Performance Regressions", ICPE 2023), run with
``max_pvalue`` ``OTAVA_MAX_PVALUE`` and ``min_magnitude`` MIN_RATIO - 1 (a level shift of at least
1.1x either way, the rule every edgebench change follows). Without it, edgebench's own binary
segmentation (``detect_steps``) answers and the result says so (``method``, ``note``: the install
command). Both give :class:`Step` records; ``history_series`` gives ``results history``, the HTML
report's history charts and their JSON one series per configuration with its change points.

``detect_steps`` (the built-in detector, also what ``stats.run_noise`` cuts a history at, so a
``results compare`` verdict never depends on an optional extra): binary segmentation on the L1 cost
(sum of absolute deviations from each segment's median), the cost asv's step detector minimises,
searching only admissible splits (>= ``STEP_MIN_RUNS`` runs on each side, so one outlier run at
either end cannot hide a clean step). A split is a step when the segment medians differ by >=
``MIN_RATIO`` and the two segments differ by a Mann-Whitney U test at ``STEP_ALPHA`` (with 4 runs a
side the smallest possible p is 0.029, hence 4 and 0.05).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any, Sequence

import numpy as np

from edgebench.core.latency import MIN_SAMPLES
from edgebench.rows.metrics import metric as metric_of

MIN_RATIO = 1.1          # asv --factor default (stats.MIN_RATIO)
STEP_MIN_RUNS = 4        # runs needed on each side of a step (see module docstring)
STEP_ALPHA = 0.05        # significance of a step between two segments of runs
# Otava's default max_pvalue is 0.001; with the short histories of a benchmark store (10-30 runs)
# its windowed split then misses a clean two-step series (5, 7, 5 over 8 runs each, 1 % noise), which
# 0.01 finds; min_magnitude keeps only shifts of MIN_RATIO or more.
OTAVA_MAX_PVALUE = 0.01
OTAVA_WINDOW = 50        # Otava's default window
EXTRA = "changepoints"
INSTALL = f"pip install 'edgebench[{EXTRA}]'"
BUILTIN = "edgebench binary segmentation (L1 cost, Mann-Whitney U)"
OTAVA = "Apache Otava E-divisive means"


@dataclass(frozen=True)
class Step:
    """One change point: the series moved from ``before`` to ``after`` at run ``index``."""
    index: int            # first run of the new level (index into the series)
    before: float         # the level before (median of the segment; Otava: its mean)
    after: float          # the level after
    ratio: float          # after / before
    p_value: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _otava():
    """Otava's detector, or None when the optional extra is not installed."""
    try:
        from otava.analysis import compute_change_points
    except ImportError:
        return None
    return compute_change_points


def change_points(values: Sequence[float], *, min_ratio: float = MIN_RATIO) -> tuple[list[Step], str, str | None]:
    """(steps, method, note) for a series, oldest first (see the module docstring); ``note`` names the
    install command when the built-in detector stood in for Otava."""
    y = [float(v) for v in values]
    otava = _otava()
    if otava is None:
        return (detect_steps(y, min_ratio=min_ratio), BUILTIN,
                f"change points by edgebench's built-in detector (>= {STEP_MIN_RUNS} runs a side); for Apache "
                f"Otava's E-divisive means: {INSTALL}")
    if len(y) < 3:
        return [], OTAVA, None
    found, _weak = otava(y, window_len=OTAVA_WINDOW, max_pvalue=OTAVA_MAX_PVALUE, min_magnitude=min_ratio - 1.0)
    steps = []
    for cp in found:
        before, after = float(cp.stats.mean_before()), float(cp.stats.mean_after())
        if before == 0:
            continue
        steps.append(Step(int(cp.index), before, after, after / before, float(cp.stats.pvalue)))
    return sorted(steps, key=lambda s: s.index), OTAVA, None


def _l1(x: np.ndarray) -> float:
    return float(np.abs(x - np.median(x)).sum()) if x.size else 0.0


def _mann_whitney_p(a: np.ndarray, b: np.ndarray) -> float:
    from scipy.stats import mannwhitneyu

    if np.all(a == a[0]) and np.all(b == b[0]) and a[0] == b[0]:
        return 1.0
    return float(mannwhitneyu(a, b, alternative="two-sided", method="auto").pvalue)


def detect_steps(values: Sequence[float], *, min_ratio: float = MIN_RATIO,
                 min_runs: int = STEP_MIN_RUNS, alpha: float = STEP_ALPHA) -> list[Step]:
    """Level shifts in a series (oldest first); each Step names the run where the new level began."""
    y = np.asarray(values, dtype=np.float64)
    steps: list[Step] = []

    def segment(lo: int, hi: int) -> None:
        n = hi - lo
        if n < 2 * min_runs:
            return
        seg = y[lo:hi]
        base = _l1(seg)
        best, best_i = 0.0, None
        # Only admissible splits (>= min_runs on each side): an outlier run at either end would
        # otherwise win the search and hide a clean step further in.
        for i in range(min_runs, n - min_runs + 1):
            gain = base - _l1(seg[:i]) - _l1(seg[i:])
            if gain > best:
                best, best_i = gain, i
        if best_i is None:
            return
        left, right = seg[:best_i], seg[best_i:]
        m0, m1 = float(np.median(left)), float(np.median(right))
        if m0 == 0:
            return
        ratio = m1 / m0
        # The runs either side of the split must sit on their own side of the midpoint; else the
        # real step lies closer to an end than min_runs allows (not yet confirmed) and this
        # split would name the wrong run.
        mid = (m0 + m1) / 2
        if (left[-1] - mid) * (m1 - m0) > 0 or (right[0] - mid) * (m1 - m0) < 0:
            return
        p = _mann_whitney_p(left, right)
        if (ratio >= min_ratio or ratio <= 1.0 / min_ratio) and p < alpha:
            steps.append(Step(lo + best_i, m0, m1, ratio, p))
            segment(lo, lo + best_i)
            segment(lo + best_i, hi)

    segment(0, y.size)
    return sorted(steps, key=lambda s: s.index)


def history_with_steps(series: list[dict[str, Any]], **kw: Any) -> dict[str, Any]:
    """``Store.history`` output -> {"points": [...with "step": bool], "steps": [Step + run_id,
    created], "method", "note"}: the change points and the run that began each new level."""
    values = [p["value"] for p in series]
    steps, method, note = change_points(values, **kw)
    at = {s.index: s for s in steps}
    points = [dict(p, step=i in at) for i, p in enumerate(series)]
    return {
        "points": points,
        "steps": [dict(s.to_dict(), run_id=series[s.index]["run_id"], created=series[s.index]["created"])
                  for s in steps],
        "method": method, "note": note,
    }


def history_series(store: Any, metric: str, *, model: str, precision: str | None = None,
                   target: str | None = None, kind: str | None = None,
                   min_ratio: float = MIN_RATIO) -> list[dict[str, Any]]:
    """A metric's history for one model, one series per configuration (``identity.series_key``:
    precision, target, device, batch, threads, delegate, runtime, method, strategy, ...), each
    with its change points. Percentile values from too few samples to be valid are left out of a
    series (counted in ``left_out``), so a 200-sample p99 never sits on a line of valid ones."""

    col = metric_of(metric).key
    need = MIN_SAMPLES.get(col[:-3]) if col in ("p50_ms", "p90_ms", "p99_ms") else None
    groups: dict[str, list[dict[str, Any]]] = {}
    left_out: dict[str, int] = {}
    for p in store.history(metric, model=model, precision=precision, target=target, kind=kind):
        sid = json.dumps(p["series"], sort_keys=True, default=str)
        invalid = need is not None and (
            (p.get("n_samples") is not None and p["n_samples"] < need)
            or (col == "p99_ms" and p.get("p99_valid") is False))
        if invalid:
            left_out[sid] = left_out.get(sid, 0) + 1
            groups.setdefault(sid, [])
            continue
        groups.setdefault(sid, []).append(p)
    out = []
    for sid, pts in groups.items():
        series = json.loads(sid)
        h = (history_with_steps(pts, min_ratio=min_ratio) if pts
             else {"points": [], "steps": [], "method": None, "note": None})
        out.append({"model": model, "metric": metric, "precision": series.get("precision"),
                    "target": series.get("target"), "batch_size": series.get("batch_size"),
                    "series": series, "left_out": left_out.get(sid, 0),
                    "left_out_reason": (f"{col[:-3]} from fewer than {need} samples is not valid"
                                        if left_out.get(sid) else None), **h})
    return out
