"""Energy arithmetic, timeline summaries, ranking changes, rows and renderers (pure parts of issue 17)."""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time

import numpy as np
import pytest

from edgebench.targets.energy import PowerReading, battery_energy, detect_units, rapl_energy, unwrap_counter
from edgebench.rows import Document, InferenceRow, Latency
from edgebench.bench.sustain import THROTTLE_RATIO, ranking_changes, timeline
from edgebench.targets.base import RunResult
from edgebench.targets.host_sensors import HostSampler, rapl_zones


@pytest.mark.parametrize("cur,volt,want", [
    ([-350_000, -420_000], [3_850_000, 3_800_000], ("uA", "uV", False)),      # Pixel: uA, negative
    ([350, 420], [3850, 3800], ("mA", "mV", False)),                          # older kernels: mA/mV
    ([8_000, 9_000], [3_850_000], ("uA", "uV", True)),                        # ambiguous: follows uV
    ([8_000, 9_000], [3850], ("mA", "mV", True)),
    ([300_000], [12.0], (None, None, False)),                                 # voltage fits no unit
])
def test_units_are_detected_and_ambiguity_is_said(cur, volt, want):
    u = detect_units(cur, volt)
    assert (u["current"], u["voltage"], u["assumed"]) == want
    if want[2] or want[0] is None:
        assert u["note"]


def _readings(idle_ma=100.0, run_ma=500.0, v_uv=3_900_000, period=0.25, idle=(0.0, 5.0), run=(6.0, 16.0),
              sign=-1.0, status="Discharging", external=False):
    out = []
    for t in np.arange(0.0, 17.0, period):
        ma = run_ma if run[0] <= t <= run[1] else idle_ma
        out.append(PowerReading(t=float(t), current=sign * ma * 1000, voltage=v_uv, status=status,
                                external_online=external))
    return out


def test_battery_energy_is_run_minus_idle_per_inference():
    e = battery_energy(_readings(), (0.0, 5.0), (6.0, 16.0), inferences=2000)
    # run 0.5 A x 3.9 V for 10 s = 19.5 J; idle 0.1 A x 3.9 V = 0.39 W -> 3.9 J over the span
    assert e["valid"] is True and e["invalid_reasons"] == []
    assert e["gross_joules"] == pytest.approx(19.5, rel=1e-3)
    assert e["idle_power_w"] == pytest.approx(0.39, rel=1e-3)
    assert e["joules"] == pytest.approx(15.6, rel=1e-3)
    assert e["mj_per_inference"] == pytest.approx(7.8, rel=1e-3)
    assert e["inferences_per_j"] == pytest.approx(2000 / 15.6, rel=1e-3)
    assert e["units"] == {"current": "uA", "voltage": "uV", "assumed": False}
    assert e["samples"] == {"run": 41, "idle": 21}


def test_battery_energy_validity_rules_each_fire():
    charging = battery_energy(_readings(status="Charging"), (0.0, 5.0), (6.0, 16.0), 100)
    assert not charging["valid"] and any("charging" in r for r in charging["invalid_reasons"])
    usb = battery_energy(_readings(external=True), (0.0, 5.0), (6.0, 16.0), 100)
    assert any("external supply" in r for r in usb["invalid_reasons"])
    assert battery_energy(_readings(external=True), (0.0, 5.0), (6.0, 16.0), 100,
                          facts={"input_suspended": True})["valid"]
    few = battery_energy(_readings(period=2.0), (0.0, 5.0), (6.0, 16.0), 100)
    assert any("readings during the run" in r for r in few["invalid_reasons"])
    flip = _readings()
    flip = [PowerReading(r.t, -r.current if i % 3 == 0 else r.current, r.voltage, r.status) for i, r in enumerate(flip)]
    assert any("changed sign" in r for r in battery_energy(flip, (0.0, 5.0), (6.0, 16.0), 100)["invalid_reasons"])
    flat = battery_energy(_readings(run_ma=100.0), (0.0, 5.0), (6.0, 16.0), 100)
    assert not flat["valid"] and flat["mj_per_inference"] is None
    assert any("no more than the idle" in r for r in flat["invalid_reasons"])


def test_an_emulated_device_is_never_valid_and_says_why():
    """Perfect readings from an emulator (what it reports: ro.kernel.qemu=1) are a model of a battery:
    the figure is kept, never valid; the same readings from a device that reports no emulator are."""
    emu = battery_energy(_readings(), (0.0, 5.0), (6.0, 16.0), 2000, emulation="ro.kernel.qemu=1")
    assert emu["valid"] is False and emu["invalid_reasons"] == [
        "emulated device (ro.kernel.qemu=1): its battery counters are modelled, not measured, so the figure "
        "says nothing about a real phone's draw; measure energy on a physical device"]
    assert emu["mj_per_inference"] == pytest.approx(7.8, rel=1e-3)          # reported, not trusted
    assert battery_energy(_readings(), (0.0, 5.0), (6.0, 16.0), 2000, emulation=None)["valid"] is True


def test_rapl_counter_wraps_and_energy():
    assert list(unwrap_counter([90, 95, 3, 10], 100)) == [90, 95, 103, 110]
    t = np.arange(0.0, 12.01, 0.5)
    # 10 W idle until t=6, 30 W from 6 to 12; uJ counter wrapping at 2**32
    e_uj = np.where(t < 6, 10 * t, 60 + 30 * (t - 6)) * 1e6
    wrapped = np.mod(e_uj + 2 ** 32 - 5e7, 2 ** 32)
    r = rapl_energy(t, {"package-0": wrapped}, {"package-0": 2.0 ** 32}, (0.0, 5.0), (7.0, 11.0), inferences=400)
    assert r["gross_joules"] == pytest.approx(120.0) and r["idle_power_w"] == pytest.approx(10.0)
    assert r["joules"] == pytest.approx(80.0) and r["mj_per_inference"] == pytest.approx(200.0)
    assert r["valid"] and r["zones"] == ["package-0"]


def test_rapl_zones_and_sampler_on_a_powercap_tree(tmp_path):
    """A powercap tree laid out as the kernel does (packages intel-rapl:N, sub-domains
    intel-rapl:N:M), its counters advanced by a writer thread while the sampler reads it."""
    for z, name in (("intel-rapl:0", "package-0"), ("intel-rapl:0:0", "core"), ("intel-rapl:1", "package-1")):
        d = tmp_path / z
        d.mkdir()
        (d / "name").write_text(name + "\n")
        (d / "energy_uj").write_text("0\n")
        (d / "max_energy_range_uj").write_text("262143328850\n")
    zones, reason = rapl_zones(str(tmp_path))
    assert reason is None and sorted(zones) == ["package-0", "package-1"]     # sub-domain not double counted
    stop = threading.Event()

    def writer():
        t0 = time.monotonic()
        while not stop.is_set():
            uj = int((time.monotonic() - t0) * 5e6)          # 5 W per package
            for z in ("intel-rapl:0", "intel-rapl:1"):       # atomically, as sysfs reads are
                (tmp_path / z / "energy_uj.tmp").write_text(f"{uj}\n")
                os.replace(tmp_path / z / "energy_uj.tmp", tmp_path / z / "energy_uj")
            time.sleep(0.01)

    th = threading.Thread(target=writer, daemon=True)
    th.start()
    s = HostSampler(period_s=0.05, thermal=False, rapl=True, powercap_root=str(tmp_path)).start()
    time.sleep(0.6)
    readings = s.stop()
    stop.set()
    th.join()
    t = [r["t"] for r in readings]
    res = rapl_energy(t, {z: [r["rapl"][z] for r in readings] for z in zones}, s.rapl_max_range_uj,
                      (t[0], t[0] + 0.2), (t[0] + 0.25, t[-1]), inferences=10)
    assert res["idle_power_w"] == pytest.approx(10.0, rel=0.25)       # two 5 W packages
    assert "no RAPL package zones" in rapl_zones(str(tmp_path / "none"))[1]


def _res(windows_ms: list[list[float]], readings=(), reason=None, t0=100.0) -> RunResult:
    samples, wins, end = [], [], 0
    for k, w in enumerate(windows_ms):
        samples += [int(x * 1e6) for x in w]
        end += len(w)
        wins.append({"end_index": end, "t_end_s": float(k + 1), "boottime_end_s": t0 + k + 1})
    return RunResult(target="adb:x", model_path="m", model_sha256="", samples_ns=np.asarray(samples, np.int64),
                     extra={"timeline": {"duration_s": len(wins), "report_every_s": 1.0, "start_boottime_s": t0,
                                         "windows": wins}, "sensor_readings": list(readings),
                            "thermal_reason": reason})


def test_timeline_windows_and_throttle_by_latency_cap_or_status():
    flat = [[1.0] * 40, [1.0] * 40, [1.0] * 40]
    wins, s = timeline(_res([[1.0] * 40, [1.05] * 40, [1.5] * 40]), "x")
    assert [w.samples for w in wins] == [40, 40, 40] and wins[2].latency.p50 == pytest.approx(1.5)
    assert s.steady_state_ratio == pytest.approx(1.5) and s.time_to_throttle_s == 3.0
    assert str(THROTTLE_RATIO) in s.throttle_reason
    cpus = lambda cap: [{"cpu": 0, "cur_khz": cap, "cap_khz": cap}]  # noqa: E731
    readings = [{"t": 100.5, "zones_c": {"cpu": 40.0}, "cpus": cpus(2000)},
                {"t": 101.5, "zones_c": {"cpu": 44.0}, "cpus": cpus(1500)},
                {"t": 102.5, "zones_c": {"cpu": 47.0}, "cpus": cpus(1500), "thermal_status": 2}]
    wins, s = timeline(_res(flat, readings), "x")
    assert [w.thermal["hottest_c"] for w in wins] == [40.0, 44.0, 47.0]
    assert s.time_to_throttle_s == 2.0 and "cap" in s.throttle_reason
    assert s.details["hottest_c"] == {"first": 40.0, "last": 47.0, "max": 47.0}
    wins, s = timeline(_res(flat, [dict(r, cpus=cpus(2000)) for r in readings]), "x")
    assert s.time_to_throttle_s == 3.0 and "thermal status 2" in s.throttle_reason
    wins, s = timeline(_res(flat, reason="no zones here"), "x")
    assert all(w.thermal is None and w.thermal_reason == "no zones here" for w in wins)
    assert s.time_to_throttle_s is None


def test_ranking_change_between_first_and_last_window_warns():
    a_wins, a = timeline(_res([[1.0] * 40, [3.0] * 40]), "a")      # fast, then throttles
    b_wins, b = timeline(_res([[2.0] * 40, [2.0] * 40]), "b")      # steady
    rows = [InferenceRow(target="adb:A", model="m", timeline=a_wins, sustained=a),
            InferenceRow(target="adb:B", model="m", timeline=b_wins, sustained=b)]
    out = ranking_changes(rows)
    assert all(any("ranking changed" in w and "adb:A < adb:B" in w for w in r.warnings) for r in out)
    steady = ranking_changes([rows[1], rows[1].replace(target="adb:C")])
    assert not any(r.warnings for r in steady)


def _full_row() -> InferenceRow:
    from edgebench.rows import ColdStart, Energy, Paced

    wins, s = timeline(_res([[1.0] * 40, [1.2] * 40], [{"t": 100.9, "zones_c": {"cpu-big": 41.0}, "cpus": [],
                                                         "thermal_status": 0}]), "x")
    lat = Latency.from_samples(np.full(50, 2_000_000))
    return InferenceRow(
        target="adb:S1", model="m<x>", latency=lat, timeline=wins, sustained=s, period_ms=5.0,
        paced=Paced(period_ms=5.0, achieved_period_ms=5.1, late_starts=2, p50_ratio=1.4,
                    back_to_back_ms=Latency.from_samples(np.full(50, 1_400_000))),
        cold_start=ColdStart(count=3, xnnpack_cache=True, init_ms=lat, process_start_ms=lat, first_inference_ms=lat,
                             total_ms=lat, details={"runtime": "ai_edge_litert 2.3.0 CompiledModel",
                                                    "warm_cache": {"init_ms": lat.to_dict()}}),
        energy=Energy(source="battery", valid=False, mj_per_inference=2.5, inferences_per_j=400.0, joules=1.0,
                      invalid_reasons=("the battery was <charging>",), details={"run_power_w": 2.0}))


def test_rows_round_trip_every_regime_and_old_rows_still_load():
    row = _full_row()
    d = row.to_dict()
    assert {"timeline", "sustained", "period_ms", "paced", "cold_start", "energy", "energy_reason"} <= set(d)
    assert d["timeline"][0]["latency_ms"]["p50"] == 1.0 and d["paced"]["back_to_back_ms"]["p50"] == 1.4
    back = InferenceRow.from_dict(d)
    assert back == row and back.to_dict() == d and back.energy.invalid_reasons == ("the battery was <charging>",)
    null = InferenceRow(target="host", energy_reason="no RAPL").to_dict()
    assert null["energy"] is None and null["energy_reason"] == "no RAPL"
    old = InferenceRow.from_dict({"target": "host", "status": "ok"})
    assert old.timeline is None and old.energy is None and old.to_dict()["timeline"] is None   # every key, null


def test_renderers_show_every_regime_and_escape():
    from rich.console import Console

    from edgebench.report.html import render_html
    from edgebench.report.prometheus import render_prometheus
    from edgebench.report.terminal.bench import render_bench

    doc = Document.new("bench", [_full_row()], {"hostname": "h"})
    con = Console(width=200, record=True)
    for part in render_bench(doc):
        con.print(part)
    text = con.export_text()
    for needle in ("sustained 2 s", "steady-state ratio", "paced every 5 ms", "1.40x", "cold starts",
                   "warm cache", "mJ/inference", "NOT VALID", "<charging>"):
        assert needle in text, needle
    page = render_html(doc)
    assert 'id="sustained"' in page and "latency per window" in page and "temperature per window" in page
    assert "m&lt;x&gt;" in page and "<charging>" not in page and "&lt;charging&gt;" in page
    prom = render_prometheus(doc)
    for needle in ('edgebench_energy_joules_per_inference{', 'edgebench_energy_valid{', 'source="battery"',
                   'edgebench_timeline_latency_seconds{', 'window="2"', 'edgebench_timeline_hottest_celsius{',
                   'edgebench_sustained_steady_state_ratio{', 'edgebench_paced_p50_ratio{',
                   'edgebench_cold_start_seconds{'):
        assert needle in prom, needle
    assert "edgebench_energy_joules_per_inference{" in prom and " 0.0025\n" in prom
    promtool = shutil.which("promtool")
    if promtool:
        r = subprocess.run([promtool, "check", "metrics"], input=prom, capture_output=True, text=True, check=False)
        assert r.returncode == 0, r.stdout + r.stderr


def test_store_keeps_every_regime_and_the_report_rebuilds_from_it(tmp_path):
    from edgebench.report.html import render_html
    from edgebench.store.db import Store

    doc = Document.new("bench", [_full_row()], {"hostname": "h"})
    with Store(str(tmp_path / "r.db")) as st:
        run_id = st.save(doc)
        back = Document.from_dict(st.get(run_id))
    row = back.rows[0]
    assert row.timeline == _full_row().timeline and row.energy == _full_row().energy
    assert row.cold_start.details["warm_cache"]["init_ms"]["p50"] == 2.0 and row.paced.p50_ratio == 1.4
    assert "temperature per window" in render_html(back)
