"""Sustained, paced and cold-start runs and energy on this host (real worker, real LiteRT)."""

from __future__ import annotations

import glob
import json

import pytest

from edgebench.targets.energy import EnergySettings
from edgebench.core.errors import BadInput
from edgebench.targets.base import Schedule
from edgebench.targets.host import HostTarget
from conftest import make_job

pytest_plugins = ["conftest_bench"]

FAST = dict(warmup_runs=3, min_runs=60, min_time_s=0.1)
HOST_HAS_THERMAL = bool(glob.glob("/sys/class/thermal/thermal_zone*"))


def test_paced_run_keeps_the_period_and_records_lag(bench_models):
    res = HostTarget().run(make_job(bench_models["fp32"], schedule=Schedule(period_ms=3.0), **FAST))
    p = res.extra["paced"]
    assert p["period_ms"] == 3.0 and len(res.samples_ns) >= 60
    assert p["achieved_period_ms"] >= 3.0 * 0.99             # a sleep never wakes early
    assert res.extra["lag_ns"].shape == res.samples_ns.shape and (res.extra["lag_ns"] >= 0).all()
    assert isinstance(p["late_starts"], int)
    span = res.extra["timed_span_boottime_s"]
    assert span[1] - span[0] >= 59 * 3.0 / 1e3               # 60 invokes 3 ms apart


def test_period_shorter_than_the_inference_is_bad_input_that_says_so(bench_models):
    with pytest.raises(BadInput, match=r"--period-ms 1e-06 is shorter than one inference .* use a --period-ms above"):
        HostTarget().run(make_job(bench_models["fp32"], schedule=Schedule(period_ms=1e-6), **FAST))


def test_sustained_run_is_closed_into_windows(bench_models):
    from edgebench.bench.sustain import timeline

    job = make_job(bench_models["fp32"], schedule=Schedule(duration_s=1.5, report_every_s=0.5), **FAST)
    res = HostTarget().run(job)
    tl = res.extra["timeline"]
    assert res.extra["stop_reason"] == "duration" and len(tl["windows"]) == 3
    ends = [w["end_index"] for w in tl["windows"]]
    assert ends == sorted(ends) and ends[-1] == res.samples_ns.size
    assert [round(w["t_end_s"], 1) for w in tl["windows"]] == [0.5, 1.0, 1.5]
    wins, summary = timeline(res, "conv")
    assert sum(w.samples for w in wins) == res.samples_ns.size
    assert summary.steady_state_ratio == pytest.approx(wins[-1].latency.p50 / wins[0].latency.p50)
    if HOST_HAS_THERMAL:
        assert all(w.thermal is not None for w in wins)
    else:                                                      # this project's VMs: say why, never a number
        assert all(w.thermal is None and "thermal zones" in w.thermal_reason for w in wins)


def test_cold_starts_fresh_processes(bench_models):
    res = HostTarget().run_load(make_job(bench_models["fp32"]), {"mode": "cold_start", "count": 2})
    cs = res.extra["cold_start"]
    assert cs["count"] == 2 and len(cs["starts"]) == 2 and cs["cache_bytes"] is None
    for st in cs["starts"]:
        assert st["kind"] == "interpreter" and st["runtime"].endswith("Interpreter")
        assert st["total_ms"] > st["process_start_ms"] > 0 and st["init_ms"] > 0 and st["first_inference_ms"] > 0
        assert st["total_ms"] >= st["process_start_ms"] + st["init_ms"] + st["first_inference_ms"]
        # issue 24.14: what no phase holds has a column of its own, so the phases add up
        assert st["other_ms"] >= 0
        parts = st["process_start_ms"] + st["init_ms"] + st["first_inference_ms"] + st["other_ms"]
        assert parts == pytest.approx(st["total_ms"], abs=1e-6)
    from edgebench.bench.sustain import cold_start

    summary = cold_start(res, "fp32")
    assert summary.other_ms is not None and summary.other_ms.samples == 2
    assert res.samples_ns.size == 0


def test_xnnpack_weight_cache_first_start_writes_it_later_ones_load_it(bench_models):
    from edgebench.bench.sustain import cold_start

    res = HostTarget().run_load(make_job(bench_models["fp32"]), {"mode": "cold_start", "count": 2,
                                                                 "xnnpack_cache": True})
    cs = res.extra["cold_start"]
    assert [(s["kind"], s["cache"]) for s in cs["starts"]] == [("no_cache", None), ("cache", "build"),
                                                                ("no_cache", None), ("cache", "warm")]
    assert cs["cache_bytes"] > 0 and all("CompiledModel" in s["runtime"] for s in cs["starts"])
    c = cold_start(res, "conv")
    assert c.xnnpack_cache and c.init_ms.samples == 2 and c.details["cache_build"]["init_ms"] > 0
    assert c.details["warm_cache"]["init_ms"]["samples"] == 1
    with pytest.raises(BadInput, match="XNNPACK delegate"):
        HostTarget(delegate="none").run_load(make_job(bench_models["fp32"]),
                                             {"mode": "cold_start", "count": 1, "xnnpack_cache": True})


def test_bench_cli_sustained_paced_cold_energy_json(run_cli, bench_models, tmp_path):
    code, out, err = run_cli("bench", str(bench_models["fp32"]), "--duration", "1", "--report-every", "0.5",
                             "--period-ms", "2", "--cold-starts", "1", "--energy", "--energy-idle", "0.5",
                             "--warmup-runs", "2", "--min-runs", "30", "--min-time", "0.05",
                             "--no-store", "--json", "-")
    assert code == 0, err
    doc = json.loads(out)
    row = doc["rows"][0]
    assert len(row["timeline"]) == 2 and row["sustained"]["duration_s"] == 1.0
    assert row["period_ms"] == 2.0 and row["paced"]["back_to_back_ms"]["samples"] >= 30
    # issue 24.5: the paced row's QPS is the achieved rate (about 500/s at 2 ms), not 1/mean (capacity)
    ach = row["paced"]["achieved_period_ms"]
    assert row["latency_ms"]["qps"] == pytest.approx(1000.0 / ach) and row["latency_ms"]["qps"] <= 500.0 * 1.01
    # issue 37.9: capacity is 1 / the back-to-back mean, as the README says (was: the paced mean)
    assert row["paced"]["capacity_qps"] == pytest.approx(1000.0 / row["paced"]["back_to_back_ms"]["mean"])
    assert row["cold_start"]["count"] == 1 and row["cold_start"]["total_ms"]["samples"] == 1
    assert doc["settings"]["duration_s"] == 1.0 and doc["settings"]["energy"] == {"idle_s": 0.5, "sample_every_s": 0.25}
    if not glob.glob("/sys/class/powercap/intel-rapl:*"):
        assert row["energy"] is None and "RAPL" in row["energy_reason"]
    else:                                                      # a host with RAPL: a figure with its validity
        assert (row["energy"] is not None and row["energy"]["source"] == "rapl") or "root" in row["energy_reason"]
    code, out, err = run_cli("bench", str(bench_models["fp32"]), "--duration", "1", "--report-every", "0.5",
                             "--warmup-runs", "2", "--no-store")
    assert code == 0 and "steady-state ratio" in out and "window" in out


@pytest.mark.parametrize("args,message", [
    (["--xnnpack-cache"], "--xnnpack-cache applies to cold starts"),
    (["--duration", "2", "--report-every", "5"], "--report-every 5 with --duration 2 gives 0 windows"),
    (["--period-ms", "0"], "--period-ms 0: must be > 0"),
    (["--duration", "-1"], "--duration -1: must be > 0"),
    (["--cold-starts", "-1"], "--cold-starts -1: must be >= 0"),
    (["--energy", "--energy-idle", "0"], "--energy-idle 0: must be > 0"),
])
def test_bad_regime_options_are_exit_2_with_the_fix(run_cli, bench_models, args, message):
    code, out, err = run_cli("bench", str(bench_models["fp32"]), *args, "--no-store")
    assert code == 2 and message in err and "Traceback" not in err


def test_energy_settings_reach_the_worker_deadline(bench_models):
    job = make_job(bench_models["fp32"], schedule=Schedule(duration_s=30.0), energy=EnergySettings(idle_s=7.0))
    assert job.deadline_s == job.control.deadline_s() + 37.0
    assert job.worker_spec()["timeline"] == {"duration_s": 30.0, "report_every_s": 10.0}
    assert job.worker_spec()["period_ms"] is None
