"""The one latency type (``rows.Latency.from_samples``, statistics in ``edgebench.core.latency``) against
hand-computed values, LoadGen validity, the p99 CI, the warnings, and the ``latency_ms`` JSON frozen
before ``measure.LatencyStats`` and ``rows.Latency`` became one type."""

from __future__ import annotations

import json
import math
from dataclasses import fields, replace
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import binom

from edgebench.core.errors import BadInput
from edgebench.core.latency import (MIN_SAMPLES, autocorrelation_time, early_stopping_estimate, early_stopping_min_samples,
                               order_stat_ci, trend_change, window_median_spread)
from edgebench.rows import Latency

MS = 1_000_000  # ns per ms


def test_percentiles_match_hand_computed_linear_interpolation():
    # sorted x = 10, 20, 30, 40 ms; h = (n-1) p / 100; value = x[floor h] + frac(h) * gap
    s = Latency.from_samples([40 * MS, 10 * MS, 30 * MS, 20 * MS])
    assert s.p50 == pytest.approx(25.0)        # h = 1.5
    assert s.p90 == pytest.approx(37.0)        # h = 2.7  -> 30 + 0.7 * 10
    assert s.p95 == pytest.approx(38.5)        # h = 2.85
    assert s.p99 == pytest.approx(39.7)        # h = 2.97
    assert s.p999 == pytest.approx(39.97)      # h = 2.997
    assert s.mean == pytest.approx(25.0)
    assert s.std == pytest.approx(math.sqrt(500 / 3))  # ddof = 1: sum sq dev 500 / 3
    assert (s.min, s.max, s.samples) == (10.0, 40.0, 4)
    assert s.qps == pytest.approx(40.0)        # 1000 ms / 25 ms
    assert s.cv == pytest.approx(math.sqrt(500 / 3) / 25.0)


def test_one_to_hundred():
    s = Latency.from_samples(np.arange(1, 101) * MS)
    assert (s.p50, s.p90, s.p99) == pytest.approx((50.5, 90.1, 99.01))
    assert s.std == pytest.approx(29.011491975882016)


def test_loadgen_minimums():
    assert early_stopping_min_samples(90) == 64
    assert early_stopping_min_samples(99) == 662
    assert MIN_SAMPLES["p99"] == 662 and MIN_SAMPLES["p90"] == 64


@pytest.mark.parametrize("n,p90_ok,p99_ok", [(63, False, False), (64, True, False), (661, True, False), (662, True, True)])
def test_validity_boundaries(n, p90_ok, p99_ok):
    s = Latency.from_samples(np.full(n, 2 * MS))
    assert s.valid["p90"] is p90_ok and s.p90_valid is p90_ok
    assert s.valid["p99"] is p99_ok and s.p99_valid is p99_ok
    d = s.to_dict()
    assert d["p99_valid"] is p99_ok
    msgs = " ".join(s.warnings)
    if not p99_ok:
        assert f"p99 from {n} samples is not valid" in msgs and "662" in msgs
    else:
        assert "not valid" not in msgs


def test_p99_ci_order_statistics():
    srt = np.arange(1, 1001, dtype=float)
    lo, hi = order_stat_ci(srt, 99.0)
    assert (lo, hi) == (983.0, 997.0)
    # the chosen ranks really give >= 95% coverage: P(l <= B < u), B ~ Bin(1000, 0.99)
    cover = binom.cdf(hi - 1, 1000, 0.99) - binom.cdf(lo - 1, 1000, 0.99)
    assert cover >= 0.95
    # 100 samples cannot bound the p99 from above
    assert order_stat_ci(np.arange(1, 101, dtype=float), 99.0)[1] is None


def test_unstable_only_when_the_median_moves():
    """Issue 24.6: interrupts that set a high CV on a 10-30 us model (a few samples 30x slower) do
    not make a run "unstable"; a median that moves between windows of the run does."""
    rng = np.random.default_rng(0)
    base = rng.normal(20_000, 200, 20_000)                      # 20 us, tight
    spiky = np.where(rng.random(base.size) < 0.01, base * 30, base)
    s = Latency.from_samples(spiky)
    assert s.cv > 0.25 and not any(w.startswith("unstable") for w in s.warnings)
    quiet = Latency.from_samples(np.full(700, 5 * MS) + np.arange(700) % 3)
    assert not any(w.startswith("unstable") for w in quiet.warnings)
    # the median jumps between windows (a busy neighbour every other stretch of the run)
    moving = np.concatenate([np.full(100, (1.0 if k % 2 else 1.3) * MS) for k in range(10)])
    m = Latency.from_samples(moving)
    assert any(w.startswith("unstable: the median moved") and "--threads" in w for w in m.warnings)
    assert window_median_spread(moving / MS) == pytest.approx(1.4826 * 0.15 / 1.15, rel=1e-6)
    assert window_median_spread(np.ones(100)) is None             # windows too small for a median


def test_drift_warning_first_vs_last_third():
    drift = Latency.from_samples(np.concatenate([np.full(300, 1 * MS), np.full(300, 1 * MS), np.full(300, 2 * MS)]))
    assert any(w.startswith("drift: the run got slower") for w in drift.warnings)
    assert drift.first_third_p50 == 1.0 and drift.last_third_p50 == 2.0
    flat = Latency.from_samples(np.full(900, 1 * MS))
    assert not any(w.startswith("drift") for w in flat.warnings)


def test_to_dict_contract_keys():
    d = Latency.from_samples(np.arange(1, 700) * 1000).to_dict()
    for k in ("mean", "std", "min", "max", "p50", "p90", "p95", "p99", "p999", "samples", "p99_valid", "qps"):
        assert k in d
    assert d["samples"] == 699 and d["p99_valid"] is True


def test_frozen():
    s = Latency.from_samples([MS])
    with pytest.raises(AttributeError):
        s.p99 = 0.0  # type: ignore[misc]


@pytest.mark.parametrize("bad", [[], [float("nan")], [-5]])
def test_bad_samples(bad):
    with pytest.raises(BadInput):
        Latency.from_samples(bad)


def test_linear_slowdown_is_a_drift():
    # Audit W9: a linear +15% slowdown over the run; the thirds' medians differ by only ~9.3%.
    rng = np.random.default_rng(0)
    n = 3000
    ms = np.linspace(1.0, 1.15, n) * rng.lognormal(0, 0.01, n)
    s = Latency.from_samples(ms * MS)
    assert abs(s.last_third_p50 - s.first_third_p50) / s.p50 < 0.10   # the old rule alone misses it
    assert s.trend == pytest.approx(0.15 / 1.075, abs=0.02)
    assert any(w.startswith("drift: the run got slower") for w in s.warnings)
    assert s.to_dict()["trend"] == s.trend
    flat = Latency.from_samples(rng.lognormal(0, 0.05, n) * MS)
    assert abs(flat.trend) < 0.02 and not flat.drifting
    assert trend_change(np.ones(10)) is None


def test_mad_beside_cv():
    ms = np.r_[np.full(990, 1.0), np.full(10, 100.0)] + np.tile([0.0, 0.01], 500)
    s = Latency.from_samples(ms * MS)
    assert s.cv > 1.0                                 # ten outliers blow up the CV ...
    assert s.mad == pytest.approx(0.01, abs=1e-6)     # ... not the median absolute deviation
    assert s.rmad == pytest.approx(1.4826 * 0.01 / s.p50, rel=1e-3)
    d = s.to_dict()
    assert d["mad"] == s.mad and d["rmad"] == s.rmad


def test_loadgen_early_stopping_estimate_matches_loadgen():
    # LoadGen SingleStream summaries: "Processed at least 64 queries (2048). Would discard 172
    # highest latency queries." (t - 1 = 172) and 2116 queries -> 178 discarded.
    for n, discard in ((2048, 172), (2116, 178)):
        srt = np.arange(1, n + 1, dtype=float)
        assert early_stopping_estimate(srt, 90.0) == n - discard
    assert early_stopping_estimate(np.arange(1, 662, dtype=float), 99.0) is None
    assert early_stopping_estimate(np.arange(1, 663, dtype=float), 99.0) == 662.0
    d = Latency.from_samples(np.arange(1, 2001) * MS).to_dict()
    assert d["p99_early_stopping"] >= d["p99"] and d["p90_early_stopping"] >= d["p90"]
    assert d["p99_valid"] is True and d["early_stopping_confidence"] == 0.99
    small = Latency.from_samples(np.arange(1, 201) * MS).to_dict()
    assert small["p99_early_stopping"] is None and small["p99_valid"] is False


def test_p99_ci_widens_with_autocorrelated_samples():
    rng = np.random.default_rng(3)
    n = 20000
    iid = rng.lognormal(0, 0.1, n)
    assert autocorrelation_time(iid > np.percentile(iid, 99)) < 1.3
    # the same values, but slow inferences come in bursts of 20 (e.g. a background job)
    bursty = np.sort(iid)
    order = rng.permutation(n // 20)
    bursty = bursty.reshape(-1, 20)[order].ravel()
    tau = autocorrelation_time(bursty > np.percentile(bursty, 99))
    assert tau > 5
    a = Latency.from_samples(iid * MS)
    b = Latency.from_samples(bursty * MS)
    assert a.p99 == pytest.approx(b.p99)            # same values, same point estimate ...
    wa = a.p99_ci[1] - a.p99_ci[0]
    wb = b.p99_ci[1] - b.p99_ci[0]
    assert wb > 1.5 * wa                            # ... but a wider interval when they cluster
    assert b.p99_ci_n_eff < n / 5 and a.p99_ci_n_eff > n / 1.3
    # the widened ranks still bracket the estimate
    assert b.p99_ci[0] <= b.p99 <= b.p99_ci[1]


# --- one type, one field list: the JSON of today's latency_ms, byte for byte ----------------------

FROZEN = json.loads((Path(__file__).parent / "fixtures" / "latency" / "latency_ms.json").read_text(encoding="utf-8"))
LOAD_KEYS = ("stall_share", "mean_over_p50", "p99_over_p50", "preemptions", "loaded")


@pytest.mark.parametrize("case", FROZEN["cases"], ids=[c["name"] for c in FROZEN["cases"]])
def test_latency_ms_json_is_byte_identical_to_the_two_type_code(case):
    """tests/fixtures/latency/record.py froze, before the merge, what ``Latency.from_samples(x).to_dict()``
    (the rows' ``latency_ms``) and ``LatencyStats.from_samples(x).to_dict()`` wrote for ten sample
    arrays (n = 1, 4, 100, 662, 5000, constant, zeros, outliers, drift, bursty). The rows' object is
    matched byte for byte; the old ``LatencyStats`` one (concurrency/server ``latency_ms``) had the same
    keys and values with ``qps`` in the middle: now it is last there too."""
    lat = Latency.from_samples(case["samples_ns"])
    # issue 35 added the load signal: its keys, and its warning where it fires (a 10x tail: "outliers");
    # every key and warning the frozen code wrote is still written, unchanged and in its place
    frozen = {k: v for k, v in lat.to_dict().items() if k not in LOAD_KEYS}
    frozen["warnings"] = [w for w in frozen["warnings"] if not w.startswith("load:")]
    assert list(frozen) == list(case["latency_row"])
    _same(frozen, case["latency_row"])
    _same(frozen, case["latency_stats"])
    assert [k for k in case["latency_stats"] if k != "qps"] == [k for k in frozen if k != "qps"]
    assert lat.loaded == (case["name"] == "outliers") or lat.loaded is None
    again = Latency.from_dict(json.loads(json.dumps(lat.to_dict())))
    assert again == lat and json.dumps(again.to_dict()) == json.dumps(lat.to_dict())

def _same(got, want, where="latency_ms"):
    """Equal values, floats to 1e-12 relative: the autocorrelation time behind ``p99_ci`` goes through
    numpy's FFT, whose last bits depend on the CPU's SIMD path (seen: ...568 vs ...589 in the 14th
    digit between two x86-64 machines); everything else is exact."""
    if isinstance(want, dict):
        assert isinstance(got, dict) and set(got) == set(want), where
        for k in want:
            _same(got[k], want[k], f"{where}.{k}")
    elif isinstance(want, list):
        assert isinstance(got, list) and len(got) == len(want), where
        for i, (g, w) in enumerate(zip(got, want)):
            _same(g, w, f"{where}[{i}]")
    elif isinstance(want, float) and not isinstance(want, bool):
        assert got == pytest.approx(want, rel=1e-12, abs=0), where
    else:
        assert got == want, where


@pytest.mark.parametrize("doc", FROZEN["documents"], ids=[d["name"] for d in FROZEN["documents"]])
def test_stored_documents_round_trip_with_unknown_keys(doc):
    """Documents the samples did not produce here (benchmark_model summary with p5/source/p99_note, a
    training step_time_ms with steps_per_s, a store row with sorted keys, a minimal hand-made one):
    every key and value comes back; keys no field knows sit in ``extra``, before ``qps``. The order is
    the field order (a sorted or foreign document comes back in the order a measurement writes)."""
    lat = Latency.from_dict(doc["input"])
    out = lat.to_dict()
    assert out == doc["to_dict"] and set(out) >= set(doc["input"])
    assert set(lat.extra) == set(doc["input"]) - {f.name for f in fields(Latency)}
    assert list(out)[-1] == "qps"
    assert Latency.from_dict(out).to_dict() == out
    if doc["name"] in ("train_step_time", "hand_made"):
        assert json.dumps(out) == json.dumps(doc["to_dict"])


def test_typed_fields_and_absent_keys():
    d = FROZEN["documents"][0]["input"]                     # benchmark_model summary: no valid map, no CI
    lat = Latency.from_dict(d)
    assert lat.p90_valid is False and lat.valid is None and lat.p99_ci is None and lat.cv == d["cv"]
    assert "valid" not in lat.to_dict() and "p99_ci" not in lat.details and lat.details["source"] == d["source"]
    only_map = Latency.from_dict({"p50": 1.0, "valid": {"p90": True, "p99": False}})
    assert only_map.p90_valid is True and "p90_valid" not in only_map.to_dict()
    s = Latency.from_samples(np.arange(1, 101) * MS)
    assert s.p99_ci == tuple(s.to_dict()["p99_ci"]) and s.min_samples["p99"] == 662 and s.valid["p50"] is True
    assert s.details["p99_ci"] == list(s.p99_ci) and "qps" not in s.details and "p99_valid" not in s.details
    assert replace(s, warnings=("w",)).to_dict()["warnings"] == ["w"]


def test_binom_cdf_matches_scipy_and_so_do_the_intervals():
    """measure.binom_cdf (numpy; importing scipy.stats cost ~0.8 s of every latency printed) gives
    scipy's values, and the LoadGen estimate and order-statistic CI built on it pick the same
    samples as scipy's CDF would."""
    import math

    from scipy.stats import binom

    from edgebench.core.latency import binom_cdf, early_stopping_estimate, order_stat_ci

    for n in (1, 2, 10, 64, 662, 2023, 15085, 30000):
        for p in (0.01, 0.5, 0.9, 0.99, 0.999):
            assert np.max(np.abs(binom_cdf(n, p) - binom.cdf(np.arange(n + 1), n, p))) < 1e-9
    assert binom_cdf(3, 0.0).tolist() == [1.0] * 4 and binom_cdf(3, 1.0).tolist() == [0, 0, 0, 1.0]
    rng = np.random.default_rng(1)
    for n in (5, 63, 64, 661, 662, 1000, 5003):
        s = np.sort(rng.lognormal(size=n))
        for perc in (50.0, 90.0, 99.0, 99.9):
            q = 1 - perc / 100
            ok = np.nonzero(binom.cdf(np.arange(1, n + 1), n, q) <= 0.01)[0]
            assert early_stopping_estimate(s, perc) == (None if ok.size == 0 else float(s[n - 1 - ok[-1]]))
            cdf = binom.cdf(np.arange(n), n, perc / 100)
            below, above = np.nonzero(cdf <= 0.025)[0], np.nonzero(cdf >= 0.975)[0]
            want = (float(s[below[-1]]) if below.size else None, float(s[above[0]]) if above.size else None)
            assert order_stat_ci(s, perc) == want
    assert math.isclose(binom_cdf(662, 0.01)[1], binom.cdf(1, 662, 0.01), rel_tol=1e-9)
