"""Sustained, paced, cold-start and energy runs on the simulated device (real adb server, real
LiteRT in the device's python3), end to end through ``edgebench bench``."""

from __future__ import annotations

import json

import pytest

from edgebench.targets.energy import EnergySettings
from edgebench.core.errors import BadInput
from edgebench.targets.adb import AdbTarget, ThermalPolicy
from edgebench.targets.base import Schedule
from conftest import make_job

pytest_plugins = ["conftest_adb"]

FAST = ["--warmup-runs", "2", "--min-runs", "50", "--min-time", "0.1", "--no-store", "--json", "-"]
NO_COOL = ThermalPolicy(cooldown_below_c=None, sample_every_s=0.2)


def _bench(run_cli, *args):
    code, out, err = run_cli("bench", *args)
    return code, (json.loads(out) if out.strip().startswith("{") else None), err


def test_sustained_timeline_has_windows_thermal_and_throttle(run_cli, make_sim, tiny_tflite):
    # each shell command advances the scripts one step: the thermal sampler heats the device up,
    # and Android's thermal status reaches "light" part-way through
    # (it starts below the 42 °C cool-down threshold, so the run does not wait out the 180-s cool-down)
    sim = make_sim(has_python=True, thermal_script={"cpu-big": [30.0 + 0.1 * i for i in range(400)]},
                   thermal_status_script=[0] * 8 + [1] * 400)
    code, doc, err = _bench(run_cli, str(tiny_tflite), "--targets", f"adb:{sim.serial}", "--duration", "3",
                            "--report-every", "1", *FAST)
    assert code == 0, err
    row = doc["rows"][0]
    tl = row["timeline"]
    assert len(tl) == 3 and [w["index"] for w in tl] == [0, 1, 2]
    assert sum(w["samples"] for w in tl) == row["latency_ms"]["samples"]
    assert all(w["latency_ms"]["p50"] > 0 and w["latency_ms"]["samples"] == w["samples"] for w in tl)
    assert all(w["thermal"] is not None and "cpu-big" in w["thermal"]["zones_c"] for w in tl)
    assert tl[-1]["thermal"]["hottest_c"] > tl[0]["thermal"]["hottest_c"]      # the script heated it
    assert len(tl[0]["thermal"]["cpu_cur_khz"]) == 9
    assert tl[-1]["thermal"]["thermal_status"] == 1
    s = row["sustained"]
    assert s["duration_s"] == 3 and s["windows"] == 3
    assert s["steady_state_ratio"] == pytest.approx(tl[-1]["latency_ms"]["p50"] / tl[0]["latency_ms"]["p50"])
    assert s["time_to_throttle_s"] is not None and s["throttle_reason"]
    assert s["max_thermal_status"] == 1


def test_paced_and_cold_starts_on_device(run_cli, make_sim, tiny_tflite):
    sim = make_sim(has_python=True)
    code, doc, err = _bench(run_cli, str(tiny_tflite), "--targets", f"adb:{sim.serial}", "--period-ms", "2",
                            "--cold-starts", "2", *FAST)
    assert code == 0, err
    row = doc["rows"][0]
    assert row["period_ms"] == 2 and "paced" in row["method"]
    p = row["paced"]
    assert p["period_ms"] == 2 and p["achieved_period_ms"] >= 2 * 0.99      # sleep never wakes early
    assert p["back_to_back_ms"]["samples"] >= 50 and p["p50_ratio"] > 0
    c = row["cold_start"]
    assert c["count"] == 2 and c["xnnpack_cache"] is False
    assert c["process_start_ms"]["samples"] == 2 and c["init_ms"]["samples"] == 2
    assert c["runtime"].endswith("Interpreter") and len(c["starts"]) == 2
    assert all(st["total_ms"] > st["process_start_ms"] > 0 for st in c["starts"])
    # the cold-start children ran on the device: the run folder is gone afterwards
    assert not list((sim.root / "data/local/tmp/edgebench").glob("run-*"))


def test_simulated_phone_says_so_everywhere_and_its_energy_is_never_valid(run_cli, make_sim, tiny_tflite,
                                                                          tmp_path):
    """The simulator reports ro.kernel.qemu=1 like Android's emulator; edgebench reads that and
    labels the device, every output and the store 'emulated', and never calls its modelled battery
    energy valid (every other energy rule still ran and passed)."""
    sim = make_sim(has_python=True)
    db, out_json = str(tmp_path / "r.db"), tmp_path / "r.json"
    code, out, err = run_cli("bench", str(tiny_tflite), "--targets", f"adb:{sim.serial}", "--duration", "3",
                             "--report-every", "1", "--energy", "--energy-idle", "2", "--warmup-runs", "2",
                             "--min-runs", "50", "--min-time", "0.1", "--db", db, "--json", str(out_json))
    assert code == 0, err
    doc = json.loads(out_json.read_text())
    row = doc["rows"][0]
    e = row["energy"]
    assert e is not None, row.get("energy_reason")
    assert e["valid"] is False
    assert e["invalid_reasons"] == [
        "emulated device (ro.kernel.qemu=1, ro.boot.qemu=1): its battery counters are modelled, not measured, so "
        "the figure says nothing about a real phone's draw; measure energy on a physical device"]
    assert e["source"] == "battery" and e["units"] == {"current": "uA", "voltage": "uV", "assumed": False}
    assert e["samples"]["run"] >= 10 and e["samples"]["idle"] >= 5
    # the simulated gauge follows the real CPU load of the runner: the run draws more than idle
    assert e["run_power_w"] > e["idle_power_w"] > 0
    assert e["mj_per_inference"] == pytest.approx(e["joules"] * 1e3 / e["inferences"])
    assert e["inferences"] == row["latency_ms"]["samples"]
    assert e["battery"]["unplugged"] is True and e["battery"]["reset"] is True
    assert not (sim.root / ".sim" / "battery_unplugged").exists()        # reset undid the unplug
    # the identity: JSON row and fingerprint, a row warning the terminal table prints
    fp = row["fingerprint"]
    assert row["device_model"] == fp["device_model"] == "Pixel 8 (emulated)"
    assert fp["emulated"] is True and fp["emulation"] == "ro.kernel.qemu=1, ro.boot.qemu=1"
    assert any(w.startswith("emulated device (ro.kernel.qemu=1, ro.boot.qemu=1): its latency is the host CPU's")
               for w in row["warnings"])
    flat = " ".join(out.split())
    assert "emulated device (ro.kernel.qemu=1, ro.boot.qemu=1): its latency" in flat
    assert "not valid" in flat and "modelled, not measured" in flat
    # the store and every report built from it
    import sqlite3

    with sqlite3.connect(db) as con:
        assert con.execute("SELECT device_model FROM results").fetchall() == [("Pixel 8 (emulated)",)]
    code, shown, err = run_cli("results", "show", doc["run_id"], "--db", db, "--json", "-")
    assert code == 0 and json.loads(shown)["rows"][0]["fingerprint"]["emulated"] is True, err
    code, md, err = run_cli("report", "--latest", "--db", db, "--markdown", "-")
    assert code == 0 and "Pixel 8 (emulated)" in md, err
    code, _, err = run_cli("report", "--latest", "--db", db, "--html", str(tmp_path / "r.html"))
    assert code == 0 and "Pixel 8 (emulated)" in (tmp_path / "r.html").read_text(), err
    code, prom, err = run_cli("export", "prometheus", "--latest", "--db", db)
    assert code == 0 and 'device_model="Pixel 8 (emulated)"' in prom, err
    assert 'device_model="Pixel 8"' not in prom


def test_a_phone_that_reports_no_emulator_can_be_valid(make_sim, tiny_tflite):
    """The rule reads what the device reports, it is not "the simulator is never valid": with the
    emulator properties off the same modelled battery passes as a phone's, and its energy is valid."""
    sim = make_sim(has_python=True, advertise_emulator=False)
    job = make_job(str(tiny_tflite), warmup_runs=2, schedule=Schedule(duration_s=3.0, report_every_s=1.0),
                   energy=EnergySettings(idle_s=2.0))
    res = AdbTarget(sim.serial, thermal=NO_COOL).run(job)
    e = res.extra["energy"]
    assert res.fingerprint["device_model"] == "Pixel 8" and res.fingerprint["emulated"] is False
    assert e["valid"] is True, e["invalid_reasons"]
    assert e["run_power_w"] > e["idle_power_w"] > 0


def test_energy_mA_units_and_positive_discharge_are_detected(make_sim, tiny_tflite):
    sim = make_sim(has_python=True, battery={"units": "mA", "negative_discharge": False})
    job = make_job(str(tiny_tflite), warmup_runs=2, schedule=Schedule(duration_s=3.0, report_every_s=1.0),
                   energy=EnergySettings(idle_s=2.0))
    res = AdbTarget(sim.serial, thermal=NO_COOL).run(job)
    e = res.extra["energy"]
    assert e["units"]["current"] == "mA" and e["units"]["voltage"] == "mV"
    assert e["valid"] is False and len(e["invalid_reasons"]) == 1, e["invalid_reasons"]
    assert e["invalid_reasons"][0].startswith("emulated device (ro.kernel.qemu=1")   # the units rule passed


def test_charging_over_usb_is_invalid_even_after_unplug(make_sim, tiny_tflite):
    sim = make_sim(has_python=True, battery={"usb_online": True})       # a user build: no suspend_input
    job = make_job(str(tiny_tflite), warmup_runs=2, schedule=Schedule(duration_s=2.0, report_every_s=1.0),
                   energy=EnergySettings(idle_s=1.0))
    res = AdbTarget(sim.serial, thermal=NO_COOL).run(job)
    e = res.extra["energy"]
    assert e["valid"] is False and any("charging" in r for r in e["invalid_reasons"])
    assert e["battery"]["unplugged"] is True                              # unplug worked, the charger did not stop
    assert e["battery"]["input_suspended"] is False
    assert "SecurityException" in e["battery"]["suspend_input_error"]
    assert e["battery"]["reset"] is True


def test_suspend_input_on_a_debuggable_build_clears_the_charging_reason(make_sim, tiny_tflite):
    sim = make_sim(has_python=True, battery={"usb_online": True, "debuggable": True})
    job = make_job(str(tiny_tflite), warmup_runs=2, schedule=Schedule(duration_s=3.0, report_every_s=1.0),
                   energy=EnergySettings(idle_s=2.0))
    res = AdbTarget(sim.serial, thermal=NO_COOL).run(job)
    e = res.extra["energy"]
    assert e["battery"]["input_suspended"] is True
    # suspending charging made the charging rule pass: only the emulation is left
    assert e["valid"] is False and len(e["invalid_reasons"]) == 1, e["invalid_reasons"]
    assert e["invalid_reasons"][0].startswith("emulated device (ro.kernel.qemu=1")
    assert not (sim.root / ".sim" / "battery_input_suspended").exists()   # charging resumed afterwards


def test_closed_sysfs_current_falls_back_to_dumpsys_without_unplug(make_sim, tiny_tflite):
    sim = make_sim(has_python=True, battery={"sysfs_current": False})
    job = make_job(str(tiny_tflite), warmup_runs=2, schedule=Schedule(duration_s=3.0, report_every_s=1.0),
                   energy=EnergySettings(idle_s=2.0, sample_every_s=0.25))
    res = AdbTarget(sim.serial, thermal=NO_COOL).run(job)
    e = res.extra["energy"]
    assert e["battery"]["sources"]["current"] == "dumpsys" and "unplugged" not in e["battery"]
    assert e["units"]["current"] == "uA" and e["samples"]["run"] >= 5


def test_no_current_anywhere_is_null_with_the_reason(make_sim, tiny_tflite):
    sim = make_sim(has_python=True, battery={"sysfs_current": False, "dumpsys_current": False})
    job = make_job(str(tiny_tflite), warmup_runs=2, min_runs=20, min_time_s=0.05, energy=EnergySettings(idle_s=1.0))
    res = AdbTarget(sim.serial, thermal=NO_COOL).run(job)
    assert res.extra["energy"] is None and "current" in res.extra["energy_reason"]


def test_benchmark_model_runner_refuses_sustained_and_paced(make_sim, tiny_tflite):
    sim = make_sim(has_python=False)
    t = AdbTarget(sim.serial, thermal=NO_COOL, benchmark_binary="/nonexistent")
    with pytest.raises(BadInput, match="edgebench runner"):
        t.run(make_job(str(tiny_tflite), schedule=Schedule(period_ms=5.0)))
    with pytest.raises(BadInput, match="--cold-starts"):
        t.run_load(make_job(str(tiny_tflite)), {"mode": "cold_start", "count": 1})
