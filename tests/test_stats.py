"""Significance and step detection on synthetic samples with known answers."""

from __future__ import annotations

import numpy as np
import pytest

from edgebench.stats import (ALPHA, MIN_RATIO, classify, compare_runs, detect_steps, history_with_steps,
                             mann_whitney)


def _lat(rng, n, scale_ms):
    """Latency-like samples: lognormal around scale_ms, in ms."""
    return scale_ms * rng.lognormal(0.0, 0.05, n)


def test_mann_whitney_exact_known_value():
    # Complete separation of 3 vs 3: U = 0 and exact two-sided p = 2 / C(6,3) = 0.1.
    u, p = mann_whitney([1, 2, 3], [4, 5, 6])
    assert u == 0.0
    assert p == pytest.approx(0.1)
    # 7 vs 7 separated: p = 2 / C(14,7) = 2/3432.
    u, p = mann_whitney(range(7), range(10, 17))
    assert p == pytest.approx(2 / 3432)


def test_mann_whitney_identical_and_empty():
    assert mann_whitney([5, 5, 5], [5, 5, 5])[1] == 1.0
    assert np.isnan(mann_whitney([], [1, 2])[1])


def test_asv_rule_constants():
    assert MIN_RATIO == 1.1 and ALPHA == 0.002


def test_large_and_significant_slowdown_is_worse():
    rng = np.random.default_rng(1)
    a, b = _lat(rng, 1000, 1.0), _lat(rng, 1000, 1.25)
    ch = classify("p50", float(np.median(a)), float(np.median(b)), higher_is_better=False,
                  samples_a=a, samples_b=b)
    assert ch.verdict == "worse"
    assert ch.ratio == pytest.approx(1.25, rel=0.02)
    assert ch.p_value < 1e-10


def test_speedup_is_better_and_qps_direction():
    rng = np.random.default_rng(2)
    a, b = _lat(rng, 800, 2.0), _lat(rng, 800, 1.5)
    assert classify("p50", np.median(a), np.median(b), higher_is_better=False,
                    samples_a=a, samples_b=b).verdict == "better"
    # QPS up by 1/0.75 with the same samples -> better as well
    assert classify("qps", 1 / np.mean(a), 1 / np.mean(b), higher_is_better=True,
                    samples_a=a, samples_b=b, inverse=True).verdict == "better"


def test_small_but_significant_change_is_same():
    # 5% slower with 20000 samples: p is tiny, but 1.05x < 1.1x -> not a change (asv rule).
    rng = np.random.default_rng(3)
    a, b = _lat(rng, 20000, 1.0), _lat(rng, 20000, 1.05)
    ch = classify("p50", np.median(a), np.median(b), higher_is_better=False, samples_a=a, samples_b=b)
    assert ch.p_value < ALPHA
    assert ch.verdict == "same"


def test_large_but_insignificant_change_is_not_significant():
    # 5 vs 5 samples fully separated: smallest possible p = 2/252 = 0.0079 >= 0.002.
    a = np.array([1.0, 1.01, 1.02, 1.03, 1.04])
    b = a * 1.3
    ch = classify("p50", np.median(a), np.median(b), higher_is_better=False, samples_a=a, samples_b=b)
    assert ch.p_value == pytest.approx(2 / 252)
    assert ch.verdict == "not significant"


def test_same_distribution_is_same():
    rng = np.random.default_rng(4)
    a, b = _lat(rng, 2000, 1.0), _lat(rng, 2000, 1.0)
    ch = classify("p99", np.percentile(a, 99), np.percentile(b, 99), higher_is_better=False,
                  samples_a=a, samples_b=b)
    assert ch.verdict == "same"


def test_deterministic_metric_uses_ratio_only():
    assert classify("size", 1000, 1200, higher_is_better=False).verdict == "worse"
    assert classify("size", 1000, 1050, higher_is_better=False).verdict == "same"
    ch = classify("top1", 0.9, None, higher_is_better=True)
    assert ch.verdict == "n/a"


def _doc(run_id, scale, rng, fp, n=1000, size=1000):
    s = (_lat(rng, n, scale) * 1e6).astype(np.int64)
    ms = s / 1e6
    return {"run_id": run_id, "kind": "bench", "fingerprint": fp,
            "rows": [{"model": "m", "precision": "int8", "target": "host", "status": "ok",
                      "size_bytes": size,
                      "latency_ms": {"p50": float(np.median(ms)), "p99": float(np.percentile(ms, 99)),
                                     "mean": float(ms.mean()), "qps": float(1e3 / ms.mean())},
                      "samples_ns": s.tolist()}]}


def test_compare_runs_fingerprint_first_and_regression():
    rng = np.random.default_rng(5)
    a = _doc("a", 1.0, rng, {"tensorflow": "2.20", "cpu_model": "x"})
    b = _doc("b", 1.3, rng, {"tensorflow": "2.21", "cpu_model": "x"})
    rep = compare_runs(a, b)
    assert rep["fingerprint_diff"] == [{"field": "tensorflow", "a": "2.20", "b": "2.21"}]
    (pair,) = rep["pairs"]
    verdicts = {c.metric: c.verdict for c in pair["changes"]}
    assert verdicts["p50 ms"] == "worse"
    assert verdicts["QPS"] == "worse"
    assert verdicts["size bytes"] == "same"
    assert rep["regressions"] >= 2


def test_detect_single_step():
    rng = np.random.default_rng(6)
    y = np.r_[10 + rng.normal(0, 0.1, 10), 12 + rng.normal(0, 0.1, 8)]
    (s,) = detect_steps(y)
    assert s.index == 10
    assert s.ratio == pytest.approx(1.2, rel=0.02)


def test_detect_two_steps_and_none_in_noise():
    rng = np.random.default_rng(7)
    y = np.r_[5 + rng.normal(0, 0.05, 8), 7 + rng.normal(0, 0.05, 8), 5 + rng.normal(0, 0.05, 8)]
    assert [s.index for s in detect_steps(y)] == [8, 16]
    flat = 5 + rng.normal(0, 0.2, 40)
    assert detect_steps(flat) == []
    # a 5% shift is below the 1.1x rule
    assert detect_steps(np.r_[np.full(10, 5.0), np.full(10, 5.25)]) == []


def test_step_needs_enough_runs_after():
    y = np.r_[np.full(10, 1.0) + np.linspace(0, 0.01, 10), [2.0, 2.01, 2.02]]
    assert detect_steps(y) == []  # only 3 runs after: not yet confirmed
    y = np.r_[y, 2.03]
    assert [s.index for s in detect_steps(y)] == [10]


def test_history_with_steps_marks_run():
    series = [{"created": f"t{i}", "run_id": f"r{i}", "value": v}
              for i, v in enumerate([1.0, 1.01, 0.99, 1.0, 1.02, 1.5, 1.49, 1.51, 1.5])]
    h = history_with_steps(series)
    assert [p["step"] for p in h["points"]].index(True) == 5
    assert h["steps"][0]["run_id"] == "r5"


def test_ratio_against_rank_direction_is_not_a_change():
    # B: most samples 30% slower, but A has a few huge outliers -> A's mean is higher.
    rng = np.random.default_rng(8)
    a = np.r_[_lat(rng, 990, 1.0), np.full(10, 100.0)]
    b = _lat(rng, 1000, 1.3)
    assert np.mean(b) / np.mean(a) < 1 / 1.1
    ch = classify("mean", np.mean(a), np.mean(b), higher_is_better=False, samples_a=a, samples_b=b)
    assert ch.p_value < ALPHA and ch.verdict == "not significant" and "opposite" in ch.note
    # QPS (inverse of latency) rising while the samples got slower is not "better" either
    ch = classify("qps", 1 / np.mean(a), 1 / np.mean(b), higher_is_better=True, samples_a=a, samples_b=b,
                  inverse=True)
    assert ch.verdict == "not significant"
    # ... and p50 going the same way as the ranks is "worse"
    assert classify("p50", np.median(a), np.median(b), higher_is_better=False,
                    samples_a=a, samples_b=b).verdict == "worse"
