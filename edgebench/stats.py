"""Honest change detection between stored results.

Two rules, both from asv (airspeed velocity), which most benchmark suites copy:

* **A change between two runs** counts only when it is large *and* significant: the ratio of
  the metric is >= ``MIN_RATIO`` (1.1x) in either direction *and* a two-sided Mann-Whitney U test
  on the raw per-inference samples gives p < ``ALPHA`` (0.002). asv uses exactly these defaults
  (``--factor 1.1``, ``mann_whitney_u`` at ``p < 0.002``). Metrics without raw samples (size,
  accuracy) are deterministic, so the ratio alone decides and ``p`` is reported as None.
* **Step detection in a history** (one value per run) uses binary segmentation on the L1 cost
  (sum of absolute deviations from each segment's median), the same cost asv's step detector
  minimises. A split is a step when each side has >= ``STEP_MIN_RUNS`` runs, the segment medians
  differ by >= ``MIN_RATIO`` and the two segments differ by a Mann-Whitney U test at
  ``STEP_ALPHA`` (with 4 runs a side the smallest possible p is 0.029, hence 4 and 0.05).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Sequence

import numpy as np

MIN_RATIO = 1.1          # asv --factor default
ALPHA = 0.002            # asv's significance level for Mann-Whitney U on raw samples
STEP_MIN_RUNS = 4        # runs needed on each side of a step (see module docstring)
STEP_ALPHA = 0.05        # significance of a step between two segments of runs

# Metrics compared by ``compare_runs``: (row column, label, higher_is_better, has raw samples).
METRICS: tuple[tuple[str, str, bool, bool], ...] = (
    ("p50_ms", "p50 ms", False, True),
    ("p90_ms", "p90 ms", False, True),
    ("p99_ms", "p99 ms", False, True),
    ("mean_ms", "mean ms", False, True),
    ("qps", "QPS", True, True),
    ("size_bytes", "size bytes", False, False),
    ("top1", "top-1", True, False),
    ("psnr_db", "PSNR dB (worst)", True, False),
    ("cosine", "cosine (worst)", True, False),
    ("examples_per_s", "examples/s", True, False),
    ("step_time_p50_ms", "step p50 ms", False, False),
)


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


@dataclass(frozen=True)
class Change:
    """One metric compared between run A (before) and run B (after)."""

    metric: str
    a: float | None
    b: float | None
    ratio: float | None               # b / a
    p_value: float | None             # None: no raw samples on both sides
    verdict: str                      # "better" | "worse" | "same" | "not significant" | "n/a"
    higher_is_better: bool = False
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def classify(metric: str, a: float | None, b: float | None, *, higher_is_better: bool,
             samples_a: np.ndarray | None = None, samples_b: np.ndarray | None = None,
             min_ratio: float = MIN_RATIO, alpha: float = ALPHA, inverse: bool = False) -> Change:
    """Apply the asv rule to one metric (see module docstring).

    ``inverse``: the metric falls when the samples rise (QPS from latency samples). A change also
    needs the rank test to point the same way as the ratio: a mean pulled down by a few outliers
    while most samples got slower is not "better".
    """
    if a is None or b is None or not np.isfinite(a) or not np.isfinite(b):
        return Change(metric, a, b, None, None, "n/a", higher_is_better, "missing on one side")
    if a == 0:
        ratio = 1.0 if b == 0 else math.inf
    else:
        ratio = b / a
    p = None
    note = ""
    b_larger = None
    if samples_a is not None and samples_b is not None and len(samples_a) and len(samples_b):
        u, p = mann_whitney(samples_a, samples_b)
        half = len(samples_a) * len(samples_b) / 2
        b_larger = None if u == half else u < half   # U of A small -> B's samples tend larger
    big = ratio >= min_ratio or (ratio > 0 and ratio <= 1.0 / min_ratio) or (ratio < 0)
    metric_up = ratio > 1
    agrees = b_larger is None or (metric_up == (b_larger != inverse))
    if not big:
        verdict = "same"
    elif p is not None and not (p < alpha):
        verdict = "not significant"
        note = f"ratio {ratio:.3g}x but p = {p:.3g} >= {alpha}"
    elif p is not None and not agrees:
        verdict = "not significant"
        note = "ratio and rank test point opposite ways (driven by the tail or outliers)"
    else:
        up = ratio > 1
        verdict = "better" if up == higher_is_better else "worse"
        if p is None:
            note = "deterministic metric: ratio alone decides"
    return Change(metric, float(a), float(b), float(ratio), p, verdict, higher_is_better, note)


def _row_key(row: dict[str, Any], i: int) -> tuple:
    k = (row.get("model"), row.get("precision"), row.get("target"), row.get("batch_size"))
    return k if any(v is not None for v in k) else ("row", i)


def _samples_ms(row: dict[str, Any]) -> np.ndarray | None:
    s = row.get("samples_ns")
    if s is None or len(s) == 0:
        return None
    return np.asarray(s, dtype=np.float64) / 1e6


def compare_runs(doc_a: dict[str, Any], doc_b: dict[str, Any], *, min_ratio: float = MIN_RATIO,
                 alpha: float = ALPHA) -> dict[str, Any]:
    """Compare two stored result documents (from ``Store.get``).

    Returns ``{"a", "b", "fingerprint_diff": [{field, a, b}], "pairs": [{key, changes: [Change]}],
    "unmatched_a", "unmatched_b", "regressions"}``; rows are paired by (model, precision, target,
    batch size). The fingerprint differences come first: a ratio between different environments
    is not a regression of the model.
    """
    from edgebench.fingerprint import diff_fingerprints
    from edgebench.store import headline

    fa, fb = doc_a.get("fingerprint") or {}, doc_b.get("fingerprint") or {}
    fdiff = [{"field": f, "a": va, "b": vb} for f, va, vb in diff_fingerprints(fa, fb)]
    rows_a = {_row_key(r, i): r for i, r in enumerate(doc_a.get("rows", []))}
    rows_b = {_row_key(r, i): r for i, r in enumerate(doc_b.get("rows", []))}
    pairs = []
    regressions = 0
    for key, ra in rows_a.items():
        rb = rows_b.get(key)
        if rb is None:
            continue
        # Row-level fingerprints (device rows) add their own differences.
        row_fdiff = [{"field": f, "a": va, "b": vb}
                     for f, va, vb in diff_fingerprints(ra.get("fingerprint") or {}, rb.get("fingerprint") or {})]
        ha, hb = headline(ra), headline(rb)
        sa_ms, sb_ms = _samples_ms(ra), _samples_ms(rb)
        changes = []
        for col, label, hib, has_samples in METRICS:
            if ha.get(col) is None and hb.get(col) is None:
                continue
            if has_samples and col == "qps":
                # QPS = 1/latency: test the same samples (a faster distribution is higher QPS).
                ch = classify(label, ha[col], hb[col], higher_is_better=hib, samples_a=sa_ms,
                              samples_b=sb_ms, min_ratio=min_ratio, alpha=alpha, inverse=True)
            else:
                ch = classify(label, ha.get(col), hb.get(col), higher_is_better=hib,
                              samples_a=sa_ms if has_samples else None,
                              samples_b=sb_ms if has_samples else None,
                              min_ratio=min_ratio, alpha=alpha)
            changes.append(ch)
            regressions += ch.verdict == "worse"
        pairs.append({"key": [k for k in key if k is not None], "status": [ha["status"], hb["status"]],
                      "n_samples": [0 if sa_ms is None else int(sa_ms.size),
                                    0 if sb_ms is None else int(sb_ms.size)],
                      "fingerprint_diff": row_fdiff, "changes": changes})
    return {
        "a": doc_a.get("run_id"), "b": doc_b.get("run_id"),
        "fingerprint_diff": fdiff,
        "pairs": pairs,
        "unmatched_a": [list(k) for k in rows_a if k not in rows_b],
        "unmatched_b": [list(k) for k in rows_b if k not in rows_a],
        "regressions": regressions,
        "rule": {"min_ratio": min_ratio, "alpha": alpha, "test": "Mann-Whitney U, two-sided"},
    }


# ------------------------------------------------------------------------------------------
# step detection over a history


@dataclass(frozen=True)
class Step:
    index: int            # first run of the new level (index into the series)
    before: float         # median of the segment before
    after: float          # median of the segment after
    ratio: float          # after / before
    p_value: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _l1(x: np.ndarray) -> float:
    return float(np.abs(x - np.median(x)).sum()) if x.size else 0.0


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
        # Search every split point; a best split with too few runs on one side is not (yet) a
        # confirmed step -- forcing it inward would name the wrong run.
        for i in range(1, n):
            gain = base - _l1(seg[:i]) - _l1(seg[i:])
            if gain > best:
                best, best_i = gain, i
        if best_i is None or best_i < min_runs or n - best_i < min_runs:
            return
        left, right = seg[:best_i], seg[best_i:]
        m0, m1 = float(np.median(left)), float(np.median(right))
        if m0 == 0:
            return
        ratio = m1 / m0
        _, p = mann_whitney(left, right)
        if (ratio >= min_ratio or ratio <= 1.0 / min_ratio) and p < alpha:
            steps.append(Step(lo + best_i, m0, m1, ratio, p))
            segment(lo, lo + best_i)
            segment(lo + best_i, hi)

    segment(0, y.size)
    return sorted(steps, key=lambda s: s.index)


def history_with_steps(series: list[dict[str, Any]], **kw: Any) -> dict[str, Any]:
    """``Store.history`` output -> {"points": [...with "step": bool], "steps": [Step + run_id]}."""
    values = [p["value"] for p in series]
    steps = detect_steps(values, **kw)
    at = {s.index: s for s in steps}
    points = [dict(p, step=i in at) for i, p in enumerate(series)]
    return {
        "points": points,
        "steps": [dict(s.to_dict(), run_id=series[s.index]["run_id"], created=series[s.index]["created"])
                  for s in steps],
    }
