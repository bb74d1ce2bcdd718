"""AdbTarget, device listing and target resolution: real adb server + simulated devices."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from edgebench.core.errors import BadInput, InfraError
from edgebench.core.fingerprint import sha256_file
from edgebench.targets.adb import (
    REMOTE_FILES,
    AdbDevice,
    AdbTarget,
    RemoteCommand,
    ThermalPolicy,
    detect_throttle,
    resolve_adb_targets,
    run_lanes,
)
from conftest import make_job
from edgebench.targets.base import RunOptions
from edgebench.targets.host import WORKER_FILES

pytest_plugins = ["conftest_adb"]

FAST = dict(warmup_runs=2, min_runs=40, min_time_s=0.05, max_time_s=5.0)
NO_COOL = ThermalPolicy(cooldown_below_c=None, sample_every_s=0.05)


@pytest.fixture()
def phone(make_sim):
    return make_sim(has_python=True)


def test_devices_json_lists_props(run_cli, make_sim, monkeypatch):
    a = make_sim(has_python=True)
    # b says nothing of an emulator (advertise_emulator off): the real-phone path
    b = make_sim(model="Galaxy S23", name="dm1qxx", board="kalama", hardware="qcom", soc_manufacturer="QTI",
                 soc_model="SM8550", cpu_max_khz=(2016000,) * 3 + (2803000,) * 4 + (3360000,),
                 mem_total_kb=8 * 1024 * 1024, release="13", sdk=33, thermal_zones={"cpuss-0": 41.5},
                 advertise_emulator=False)
    code, out, err = run_cli("devices", "--json", "-", "--props")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["kind"] == "devices" and doc["schema_version"] >= 1
    rows = {r["serial"]: r for r in doc["rows"]}
    ra, rb = rows[a.serial], rows[b.serial]
    assert ra["state"] == "device" and ra["soc"] == "Google Tensor G3"
    # the simulator says it is an emulator (ro.kernel.qemu=1, ro.boot.qemu=1), so its identity says so
    assert ra["model"] == "Pixel 8 (emulated)" and ra["product_model"] == "Pixel 8"
    assert ra["emulated"] is True and ra["emulation"] == "ro.kernel.qemu=1, ro.boot.qemu=1"
    assert ra["board"] == "zuma" and ra["abi"] == "arm64-v8a"
    assert ra["android_version"] == "14" and ra["sdk"] == 34
    assert ra["cpu_cores"] == 9 and ra["cpu_max_khz"] == [1704000] * 4 + [2367000] * 4 + [2913000]
    assert ra["ram_bytes"] == 8 * 1024 ** 3 and ra["governor"] == "schedutil"
    assert ra["thermal_c"] == {"cpu-big": 38.0, "battery": 30.0}
    assert ra["battery"] == {"level_pct": 80, "temp_c": 29.5, "status": "Discharging"}
    assert ra["has_python_runtime"] is True and ra["tflite_runtime"].startswith("ai_edge_litert ")
    assert ra["props"]["ro.build.version.sdk"] == "34"
    assert rb["model"] == "Galaxy S23" and rb["soc"] == "QTI SM8550" and rb["sdk"] == 33
    assert rb["emulated"] is False and rb["emulation"] is None and "ro.kernel.qemu" not in rb["props"]
    assert rb["cpu_cores"] == 8 and rb["thermal_c"] == {"cpuss-0": 41.5}
    assert rb["has_python_runtime"] is False and rb["python3"] is None
    monkeypatch.setenv("COLUMNS", "260")      # one line per device: the table's cells are not folded
    code, out, err = run_cli("devices")
    assert code == 0 and "benchmark_model" in out
    assert "Pixel 8 (emulated)" in out and "Galaxy S23 " in out and "Galaxy S23 (emulated)" not in out


def test_run_through_edgebench_runner_equals_host(phone, tiny_tflite, tmp_path):
    from edgebench.targets.host import HostTarget

    x = np.random.default_rng(3).uniform(-1, 1, (5, 6)).astype(np.float32)
    npz = tmp_path / "inputs.npz"
    np.savez(npz, x=x)
    job = make_job(str(tiny_tflite), inputs_npz=str(npz), save_outputs=True, **FAST)
    r = AdbTarget(phone.serial, thermal=ThermalPolicy(sample_every_s=0.05)).run(job)
    h = HostTarget().run(job)
    assert r.target == f"adb:{phone.serial}" and r.status == "ok"
    assert r.samples_ns.dtype == np.int64 and len(r.samples_ns) >= 40 and (r.samples_ns > 0).all()
    assert len(r.warmup_ns) == 2
    assert set(r.outputs) == set(h.outputs) and r.outputs
    for k in h.outputs:
        assert r.outputs[k].shape == (5, 3)
        np.testing.assert_array_equal(r.outputs[k], h.outputs[k])
    assert r.model_sha256 == h.model_sha256
    assert r.runtime.startswith("ai_edge_litert")
    assert r.extra["runner"] == "edgebench" and r.extra["input_source"] == "npz"
    worker = {p.stem for p in WORKER_FILES}
    assert r.extra["pushed"] == {**dict.fromkeys(worker, True), "model": True, "inputs": True}
    fp = r.fingerprint
    assert fp["device_model"] == "Pixel 8 (emulated)" and fp["soc"] == "Google Tensor G3"
    assert fp["os"] == "Android 14 (SDK 34)" and fp["emulated"] is True and "ro.kernel.qemu=1" in fp["emulation"]
    th = r.extra["thermal"]
    assert th["cooldown"]["reached"] is True and th["before"]["zones_c"]["cpu-big"] == 38.0
    assert th["after"]["cpus"][8]["max_khz"] == 2913000
    assert all(s["zones_c"]["cpu-big"] == 38.0 and len(s["cpus"]) == 9 for s in th["during"])
    # the simulated frequencies never move; a latency trend on a busy host may still be flagged
    assert not {"freq_cap", "freq_drop"} & set(th["throttle_reasons"])
    assert th["throttled"] == bool(th["throttle_reasons"]) == r.extra["throttled"]
    # the per-run folder is gone; cached files stay for the next run
    base = phone.root / "data/local/tmp/edgebench"
    assert not list(base.glob("run-*"))
    assert (base / "files" / (sha256_file(tiny_tflite) + ".tflite")).read_bytes() == tiny_tflite.read_bytes()
    # second run: nothing re-pushed (remote sha256 matched)
    r2 = AdbTarget(phone.serial, thermal=NO_COOL).run(job)
    assert r2.extra["pushed"] == {**dict.fromkeys(worker, False), "model": False, "inputs": False}


def test_hostile_file_name_reaches_device_intact(phone, tiny_tflite, tmp_path):
    name = "we ird \"q\" 'x'; touch PWNED $(touch PWNED2) `touch PWNED3` & x.tflite"
    model = tmp_path / name
    shutil.copy(tiny_tflite, model)
    r = AdbTarget(phone.serial, thermal=NO_COOL).run(make_job(str(model), **FAST))
    assert len(r.samples_ns) >= 40
    # device files are named by content: only a plain suffix of the user's name reaches the device
    assert (phone.root / "data/local/tmp/edgebench/files" / (sha256_file(model) + ".tflite")).read_bytes() \
        == model.read_bytes()
    assert not list(phone.root.rglob("PWNED*"))
    # the quoting helper round-trips through the device shell byte for byte
    out = AdbDevice(phone.serial).check(RemoteCommand.join(["printf", "%s", name]), what="echo").stdout
    assert out == name


def test_push_skipped_when_sha_matches_redone_when_same_size_content_changes(phone, tmp_path):
    dev = AdbDevice(phone.serial)
    f = tmp_path / "blob.bin"
    f.write_bytes(b"a" * 70000)
    remote = f"{REMOTE_FILES}/blob.bin"
    def pushes():     # uploads go to a unique temporary name beside the file, then are renamed over it
        return sum(1 for p in phone.pushes if p.startswith(f"{REMOTE_FILES}/.tmp-") and p.endswith("-blob.bin"))

    assert dev.push_if_changed(f, remote) is True
    assert dev.push_if_changed(f, remote) is False
    assert pushes() == 1
    f.write_bytes(b"a" * 69999 + b"b")           # same size, different content
    assert dev.push_if_changed(f, remote) is True
    assert pushes() == 2
    assert not list((phone.root / REMOTE_FILES.lstrip("/")).glob(".tmp-*"))
    assert (phone.root / remote.lstrip("/")).read_bytes() == f.read_bytes()


def test_device_side_deadline_kills_hung_command(phone):
    dev = AdbDevice(phone.serial)
    with pytest.raises(InfraError, match=r"deadline of 1 s and was killed \(exit 124\)") as ei:
        dev.check("sleep 600", what="a hung command", deadline_s=1)
    assert phone.serial in str(ei.value)
    # the call came back because nothing on the device still holds the command's output open
    assert phone.running() == 0
    with pytest.raises(InfraError, match="over the 32768 bytes adb carries"):
        dev.shell("echo " + "x" * 40000)


def test_daemon_killed_mid_run_is_infra_error_naming_serial(make_sim, tiny_tflite):
    dev = make_sim(has_python=True, die_on=r"\.py job\.json")
    with pytest.raises(InfraError) as ei:
        AdbTarget(dev.serial, thermal=NO_COOL).run(make_job(str(tiny_tflite), **FAST))
    msg = str(ei.value)
    assert f"adb device {dev.serial}" in msg and "the run of tiny.tflite" in msg
    assert "was lost" in msg and "reconnect it" in msg


def test_storage_full_is_a_clear_error(make_sim, tiny_tflite):
    dev = make_sim(has_python=True, storage_free_bytes=2000)
    with pytest.raises(InfraError) as ei:
        AdbTarget(dev.serial, thermal=NO_COOL).run(make_job(str(tiny_tflite), **FAST))
    msg = str(ei.value)
    assert f"adb device {dev.serial} storage is full" in msg and "No space left on device" in msg
    assert "rm -rf /data/local/tmp/edgebench" in msg


def test_resolve_targets_messages(adbh, adb_server, make_sim):
    assert adbh.adb_states(adb_server) == {}, "a previous test left a device attached"
    with pytest.raises(BadInput, match="no adb device found.*edgebench.targets.sim.adbd"):
        resolve_adb_targets("adb:all")
    a = make_sim()
    assert [t.serial for t in resolve_adb_targets("host,adb")] == [a.serial]
    b = make_sim()
    with pytest.raises(BadInput, match="several adb devices are attached.*adb:all"):
        resolve_adb_targets("adb")
    assert {t.serial for t in resolve_adb_targets("adb:all")} == {a.serial, b.serial}
    assert [t.name for t in resolve_adb_targets(f"host,adb:{b.serial}")] == [f"adb:{b.serial}"]
    with pytest.raises(BadInput, match="not attached"):
        resolve_adb_targets("adb:NOPE123")
    un = make_sim(auth="unauthorized", wait_for="unauthorized")
    with pytest.raises(BadInput, match="unauthorized: unlock it and accept 'Allow USB debugging"):
        resolve_adb_targets(f"adb:{un.serial}")
    off = make_sim(auth="offline", wait_for="offline")
    with pytest.raises(BadInput, match="offline: replug it or run 'adb reconnect offline'"):
        resolve_adb_targets(f"adb:{off.serial}")
    # adb:all takes the usable devices only
    assert {t.serial for t in resolve_adb_targets("adb:all")} == {a.serial, b.serial}


def test_lanes_lost_device_fails_only_its_own_rows(make_sim, tiny_tflite):
    good = make_sim(has_python=True)
    bad = make_sim(has_python=True, die_on=r"\.py job\.json")
    targets = resolve_adb_targets(f"adb:{good.serial},adb:{bad.serial}", thermal=NO_COOL)
    job = make_job(str(tiny_tflite), **FAST)
    out = {o.target.serial: o for o in run_lanes(targets, lambda t: t.run(job))}
    assert out[good.serial].error is None and len(out[good.serial].value.samples_ns) >= 40
    err = out[bad.serial].error
    assert isinstance(err, InfraError) and bad.serial in str(err) and out[bad.serial].value is None


def test_cool_down_polls_until_below_threshold(phone):
    t = AdbTarget(phone.serial, thermal=ThermalPolicy(cooldown_below_c=45.0, poll_s=0.01, cooldown_timeout_s=60))
    phone.config.thermal_script = {"cpu-big": [61.0, 55.5, 47.0, 44.0, 90.0]}
    cd = t.cool_down()
    assert cd["reached"] is True and cd["polls"] == 4 and cd["hottest_c"] == [61.0, 55.5, 47.0, 44.0]
    phone.config.thermal_script = {"cpu-big": [80.0] * 5}
    t.thermal.cooldown_timeout_s = 0.0
    cd = t.cool_down()
    assert cd["reached"] is False and cd["hottest_c"] == [80.0]


def test_detect_throttle_rules():
    def sample(caps, curs):
        return {"cpus": [{"cpu": i, "cap_khz": c, "cur_khz": u} for i, (c, u) in enumerate(zip(caps, curs))]}

    before = sample([2000, 3000], [500, 600])
    steady = [sample([2000, 3000], [2000, 3000])] * 3
    flat = np.full(60, 1000, np.int64)
    assert detect_throttle(before, steady, steady[-1], flat)["throttled"] is False
    capped = steady + [sample([2000, 2400], [2000, 2400])]
    v = detect_throttle(before, capped, None, flat)
    assert v["throttled"] and "freq_cap" in v["throttle_reasons"] and "cpu1 cap 3000 -> 2400" in v["freq_cap"]
    dropped = steady + [sample([2000, 3000], [1000, 2000])]
    assert detect_throttle(before, dropped, None, flat)["throttle_reasons"] == ["freq_drop"]
    rising = np.concatenate([np.full(20, 1000), np.full(20, 1100), np.full(20, 1300)]).astype(np.int64)
    v = detect_throttle(before, steady, None, rising)
    assert v["throttle_reasons"] == ["latency_trend"] and v["latency_last_over_first"] == 1.3


def test_detect_throttle_sees_a_linear_slowdown():
    # Audit W9: +15% spread evenly over the run; the thirds' medians differ by only ~9.8%.
    ramp = np.linspace(1000, 1150, 300).astype(np.int64)
    v = detect_throttle(None, [], None, ramp)
    assert v["latency_last_over_first"] < 1.10
    assert v["throttle_reasons"] == ["latency_trend"] and v["latency_trend_fit"] > 0.10


# ---------------------------------------------------------------- the benchmark_model runner
@pytest.fixture(scope="module")
def standin_binary(tmp_path_factory):
    """The stand-in benchmark_model (LiteRT underneath, the real output format)."""
    import sys

    from edgebench.targets.sim import benchmark_model_standin as standin

    return standin.install(str(tmp_path_factory.mktemp("bm") / "benchmark_model"), sys.executable)


def test_benchmark_model_runner_samples_and_outputs_equal_host(make_sim, tiny_tflite, standin_binary, tmp_path):
    from edgebench.targets.host import HostTarget

    dev = make_sim(has_python=False)
    x = np.random.default_rng(5).uniform(-1, 1, (3, 6)).astype(np.float32)
    npz = tmp_path / "inputs.npz"
    np.savez(npz, x=x)
    job = make_job(str(tiny_tflite), inputs_npz=str(npz), save_outputs=True, runs=5, warmup_runs=1)
    t = AdbTarget(dev.serial, benchmark_binary=standin_binary, thermal=NO_COOL)
    assert t.choose_runner() == "benchmark_model"
    r = t.run(job)
    h = HostTarget().run(job)
    assert r.samples_ns.dtype == np.int64 and len(r.samples_ns) == 5 and (r.samples_ns > 0).all()
    assert "repeated 5 times in one device-side sh loop" in r.method and r.extra["runner"] == "benchmark_model"
    for k in h.outputs:
        assert r.outputs[k].shape == (3, 3)
        np.testing.assert_array_equal(r.outputs[k], h.outputs[k])
    flags = r.extra["benchmark_model_flags"]
    assert flags["use_xnnpack"] == "true" and flags["num_runs"] == "1"
    assert r.extra["delegates_applied"] == ["XNNPACK"] and r.init_ms is not None
    assert r.extra["pushed"] == {"binary": True, "model": True}
    assert not list((dev.root / "data/local/tmp/edgebench").glob("run-*"))


def test_benchmark_model_missing_or_wrong_abi(make_sim, tiny_tflite, tmp_path, monkeypatch):
    monkeypatch.delenv("EDGEBENCH_BENCHMARK_MODEL", raising=False)
    dev = make_sim(has_python=False)
    job = make_job(str(tiny_tflite), runs=3)
    with pytest.raises(BadInput, match="no benchmark_model binary given.*android_aarch64_benchmark_model"):
        AdbTarget(dev.serial, thermal=NO_COOL).run(job)
    x86 = tmp_path / "benchmark_model_x86_64"
    shutil.copy(shutil.which("true"), x86)          # a real x86-64 ELF; the device says arm64-v8a
    with pytest.raises(BadInput, match="is a x86_64 binary but .* runs arm64-v8a"):
        AdbTarget(dev.serial, benchmark_binary=str(x86), thermal=NO_COOL).run(job)
    assert dev.pushes == []


def test_bench_adb_all_both_runners_and_a_lost_device(make_sim, tiny_tflite, standin_binary, monkeypatch):
    from edgebench.bench.run import BenchSettings, raise_for_failures, run_bench

    monkeypatch.setenv("EDGEBENCH_BENCHMARK_MODEL", standin_binary)
    py = make_sim(has_python=True)
    stock = make_sim(has_python=False, model="Galaxy S24")
    lost = make_sim(has_python=True, model="Pixel 7", die_on=r"\.py job\.json")
    from edgebench.targets.base import RunControl

    doc = run_bench(BenchSettings(models=(str(tiny_tflite),), targets="adb:all", run=RunOptions(control=RunControl(runs=8, min_runs=8, warmup_runs=1, min_time_s=0.0))))
    rows = {r["target"]: r for r in doc.to_dict()["rows"]}
    assert set(rows) == {f"adb:{d.serial}" for d in (py, stock, lost)}
    assert rows[f"adb:{py.serial}"]["status"] == "ok" and rows[f"adb:{py.serial}"]["latency_ms"]["samples"] == 8
    assert rows[f"adb:{stock.serial}"]["status"] == "ok"
    assert rows[f"adb:{stock.serial}"]["fingerprint"]["device_model"] == "Galaxy S24 (emulated)"
    assert rows[f"adb:{stock.serial}"]["runtime"] == "benchmark_model"
    bad = rows[f"adb:{lost.serial}"]
    assert bad["status"] == "failed" and bad["exit_code"] == 3 and lost.serial in bad["error"]
    with pytest.raises(InfraError, match=lost.serial):
        raise_for_failures(doc)


def test_parse_probe_tolerates_real_phone_quirks():
    from edgebench.targets.adb import parse_probe

    text = "\n".join([
        "@@props", "[ro.product.model]: [SM-S918B]", "[ro.board.platform]: [kalama]",
        "[ro.build.version.release]: [14]", "[ro.build.version.sdk]: [34]", "[ro.product.cpu.abi]: [arm64-v8a]",
        "[persist.sys.weird]: [a]: [b]",
        "@@cpuinfo", "processor\t: 0", "processor\t: 1", "Hardware\t: Qualcomm Technologies, Inc KALAMA",
        "@@meminfo", "MemTotal:        7573024 kB",
        "@@cpufreq", "cpu0 2016000 1804800 614400 walt", "cpu1 - - - -",
        "@@thermal", "thermal_zone0 41200 cpu-0-0-0", "thermal_zone1 - gpuss-0", "thermal_zone2 -273000 bogus",
        "thermal_zone3 38 skin-therm", "thermal_zone4 39000 cpu-0-0-0",
        "@@battery", "capacity 57", "temp 301", "status Charging",
        "@@python", "@@timeout", "/system/bin/timeout", "@@end",
    ])
    f = parse_probe(text)
    assert f["model"] == "SM-S918B" and f["soc"] == "kalama" and f["board"] == "kalama"
    assert f["cpu_cores"] == 2 and f["cpu_max_khz"] == [2016000, None] and f["governor"] == "walt"
    assert f["ram_bytes"] == 7573024 * 1024
    assert f["thermal_c"] == {"cpu-0-0-0": 41.2, "skin-therm": 38.0, "cpu-0-0-0#thermal_zone4": 39.0}
    assert f["battery"] == {"level_pct": 57, "temp_c": 30.1, "status": "Charging"}
    assert f["has_python_runtime"] is False and f["timeout_tool"] == "/system/bin/timeout"
    assert f["probe_complete"] is True
    assert parse_probe(text.replace("@@end", ""))["probe_complete"] is False
    # a phone reports none of the emulator's properties: it is what it says it is
    assert f["emulated"] is False and f["emulation"] is None


@pytest.mark.parametrize("props, cpuinfo, evidence", [
    # Android's emulator on Android 12+: ro.boot.qemu and the ranchu kernel (no ro.kernel.qemu)
    ({"ro.boot.qemu": "1", "ro.hardware": "ranchu"}, "Hardware\t: ranchu", "ro.boot.qemu=1, ro.hardware=ranchu, "
     "/proc/cpuinfo Hardware ranchu"),
    # an older emulator image: ro.kernel.qemu and goldfish
    ({"ro.kernel.qemu": "1", "ro.hardware": "goldfish"}, "model name\t: Intel Xeon", "ro.kernel.qemu=1, "
     "ro.hardware=goldfish"),
    # a board under qemu names it in its hardware
    ({"ro.hardware": "qemu-cortex-a76"}, "", "ro.hardware=qemu-cortex-a76"),
    # what a phone reports: nothing of it (ro.kernel.qemu=0 is not 1)
    ({"ro.kernel.qemu": "0", "ro.hardware": "qcom", "ro.boot.hardware": "qcom"}, "Hardware\t: Qualcomm", None),
])
def test_probe_tells_emulators_by_what_they_report(props, cpuinfo, evidence):
    from edgebench.targets.adb import parse_probe

    text = "\n".join(["@@props", "[ro.product.model]: [sdk_gphone64_x86_64]",
                      *(f"[{k}]: [{v}]" for k, v in props.items()), "@@cpuinfo", cpuinfo, "@@end"])
    f = parse_probe(text)
    assert f["emulation"] == evidence and f["emulated"] is (evidence is not None)
    assert f["product_model"] == "sdk_gphone64_x86_64"
    assert f["model"] == ("sdk_gphone64_x86_64 (emulated)" if evidence else "sdk_gphone64_x86_64")


def test_matching_profile_sets_threads_and_affinity_and_devices_shows_it(run_cli, make_sim, tiny_tflite, tmp_path):
    """A device that matches a profile (the sim is a 'Pixel 8') runs with the profile's recommended
    threads and cores when the user sets none, and says so; an explicit --threads wins; an unknown
    device gets a generated profile the user can save."""
    pixel = make_sim(has_python=True)
    odd = make_sim(has_python=True, model="Frobnicator X1", name="frob", device="frob", board="frob",
                   cpu_max_khz=(1800000,) * 4 + (2400000,) * 2)
    r = AdbTarget(pixel.serial, thermal=NO_COOL).run(make_job(tiny_tflite, **FAST))
    assert r.extra["profile"] == "pixel_8" and r.extra["threads_source"] == "profile pixel_8"
    assert r.extra["threads"] == 4 and r.fingerprint["device_profile"] == "pixel_8"
    # the profile's cores (f0 = cpus 4-7) were applied, or the runner says why not (this host may
    # have fewer cores than a Pixel 8): never silently ignored
    assert r.extra.get("cpu_affinity") == [4, 5, 6, 7] or "cannot pin" in r.extra["cpu_affinity_error"]
    mine = AdbTarget(pixel.serial, thermal=NO_COOL).run(make_job(tiny_tflite, threads=1, **FAST))
    assert mine.extra["threads"] == 1 and mine.extra["threads_source"] == "user"
    assert "cpu_affinity" not in mine.extra and "cpu_affinity_error" not in mine.extra
    code, out, err = run_cli("devices", "--json", "-", "--save-profiles", str(tmp_path / "profiles"))
    assert code == 0, err
    rows = {x["serial"]: x for x in json.loads(out)["rows"]}
    assert rows[pixel.serial]["profile"]["id"] == "pixel_8" and rows[pixel.serial]["profile"]["threads"] == 4
    gen = rows[odd.serial]["profile"]
    assert gen["generated"] is True and gen["threads"] == 2 and gen["affinity_mask"] == "30"
    (saved,) = (tmp_path / "profiles").glob("*.yaml")
    from edgebench.targets.device_profiles import load_profile_file

    assert load_profile_file(saved).threads == 2
    code, out, _ = run_cli("devices")
    assert "pixel_8:" in out and "suggested" in out      # (the cell may wrap at word boundaries)


# ---------------------------------------------------------------- where the time goes on devices (issue 15)
def test_device_rows_carry_delegation_and_op_profiles(make_sim, standin_binary, session_tmp):
    """Both device runners: the edgebench runner (python3 on the device) reports the interpreter's
    execution plan and a LiteRT profile; benchmark_model reports its "Replacing N out of M nodes"
    line and its --enable_op_profiling table (the stand-in prints LiteRT's real summary)."""
    from conftest_profile import build_prelu_models

    from edgebench.targets.op_profile import by_op_type

    from edgebench.targets.row_parts import runtime_row_parts
    models = build_prelu_models(session_tmp / "prelu_adb")
    py = make_sim(has_python=True)
    stock = make_sim(has_python=False)
    job = make_job(str(models["int8"]), runs=30, warmup_runs=2, op_profile=True)
    for t in (AdbTarget(py.serial, thermal=NO_COOL), AdbTarget(stock.serial, benchmark_binary=standin_binary,
                                                               thermal=NO_COOL)):
        r = t.run(job)
        d = r.extra["delegation"]
        assert (d["nodes_delegated"], d["nodes_total"], d["partitions"], d["undelegated"]) == (6, 8, 3, {"PRELU": 2})
        parts, warnings = runtime_row_parts(r.extra, None, f"int8 on {t.name}")
        prelu = [e for e in parts["op_profile"] if e.op == "PRELU"]
        assert len(prelu) == 2 and all(not e.delegated and e.ms > 0 for e in prelu), parts["op_profile"]
        assert by_op_type(parts["op_profile"])["PReLU"]["cpu_ms"] > 0
        assert any("PRELU x2" in w for w in warnings)
    assert "benchmark_model" in parts["op_profile_info"]["source"]


def test_benchmark_model_runtime_info_names_the_undelegated_ops_without_op_profiling(make_sim, standin_binary,
                                                                                     session_tmp, tmp_path):
    """The probe asks benchmark_model for --model_runtime_info_output_file: every node of the graph,
    so a plain run (no --op-profile) names the ops XNNPACK left out. A build without the flag logs
    it as unconsumed and writes nothing: the row falls back to the log's counts and says why."""
    import sys

    from conftest_profile import build_prelu_models

    from edgebench.targets.sim import benchmark_model_standin as standin

    models = build_prelu_models(session_tmp / "prelu_adb")
    stock = make_sim(has_python=False)
    job = make_job(str(models["int8"]), runs=5, warmup_runs=1)
    r = AdbTarget(stock.serial, benchmark_binary=standin_binary, thermal=NO_COOL).run(job)
    d = r.extra["delegation"]
    assert (d["nodes_delegated"], d["nodes_total"], d["partitions"], d["undelegated"]) == (6, 8, 3, {"PRELU": 2})
    assert d["source"] == "benchmark_model --model_runtime_info_output_file" and r.extra["model_runtime_info"] == {"read": True}
    assert "model_runtime_info_output_file" not in r.extra["benchmark_model_flags"]  # the probe's, not the loop's
    old = standin.install(str(tmp_path / "benchmark_model"), sys.executable,
                          without_flags=("model_runtime_info_output_file",))
    r = AdbTarget(stock.serial, benchmark_binary=old, thermal=NO_COOL).run(job)
    d = r.extra["delegation"]
    assert (d["nodes_delegated"], d["nodes_total"], d["partitions"]) == (6, 8, 3) and d["source"] == "benchmark_model log"
    assert "wrote no model runtime info" in r.extra["model_runtime_info"]["error"]


def test_benchmark_model_compiled_runtime_flags_and_missing_npu(make_sim, tiny_tflite, standin_binary):
    """--runtime compiled on a device without Python goes through LiteRT's CompiledModel tool flags;
    an NPU the device does not have is bad input naming what is there (exit 2), not a crash."""
    from edgebench.targets.benchmark_model.argv import build_argv

    argv = build_argv("bm", "m.tflite", accelerator="gpu", gpu_precision="fp16")
    assert "--use_gpu=true" in argv and "--gpu-precision=fp16" in argv and "--require_full_delegation=false" in argv
    with pytest.raises(BadInput, match="do not mix"):
        build_argv("bm", "m.tflite", accelerator="cpu", use_gpu=True)
    dev = make_sim(has_python=False)
    t = AdbTarget(dev.serial, benchmark_binary=standin_binary, thermal=NO_COOL)
    r = t.run(make_job(str(tiny_tflite), runs=4, warmup_runs=1, runtime_api="compiled", accelerator="cpu"))
    flags = r.extra["benchmark_model_flags"]
    assert flags["use_cpu"] == "true" and flags["use_npu"] == "false" and "use_xnnpack" not in flags
    assert r.extra["runtime_api"] == "compiled" and len(r.samples_ns) == 4
    with pytest.raises(BadInput, match="accelerator 'npu' is not available .* available there: cpu"):
        t.run(make_job(str(tiny_tflite), runs=2, warmup_runs=1, runtime_api="compiled", accelerator="npu"))


# ---------------------------------------------------------------- audit (issue 12): W7, R5, R6, C-items
def _tiny_model(path, seed: int):
    """Another tiny real model (same architecture as tiny_tflite, other weights) at PATH."""
    import keras
    import tensorflow as tf

    keras.utils.set_random_seed(seed)
    inp = keras.Input(shape=(6,), name="x")
    out = keras.layers.Dense(3, activation="softmax", name="probs")(keras.layers.Dense(8, activation="relu")(inp))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(tf.lite.TFLiteConverter.from_keras_model(keras.Model(inp, out)).convert())
    return path


def test_device_files_are_cached_by_content_not_by_name(phone, tiny_tflite, tmp_path):
    """W7: two jobs whose models share a basename never share a device file."""
    import threading

    from edgebench.targets.host import HostTarget

    other = _tiny_model(tmp_path / "b" / "tiny.tflite", seed=7)
    assert other.name == tiny_tflite.name and other.read_bytes() != tiny_tflite.read_bytes()
    t = AdbTarget(phone.serial, thermal=NO_COOL)
    pushed: dict = {}
    name_a = t._stage(tiny_tflite, pushed, "a")
    name_b = t._stage(other, pushed, "b")
    files = phone.root / "data/local/tmp/edgebench/files"
    assert name_a != name_b and name_a.endswith(".tflite")
    assert (files / name_a).read_bytes() == tiny_tflite.read_bytes()      # b did not overwrite a
    assert (files / name_b).read_bytes() == other.read_bytes()

    # two jobs at once on one phone: each measures (and reports outputs of) its own model
    x = np.random.default_rng(3).uniform(-1, 1, (4, 6)).astype(np.float32)
    npz = tmp_path / "inputs.npz"
    np.savez(npz, x=x)
    jobs = {m: make_job(str(m), inputs_npz=str(npz), save_outputs=True, **FAST) for m in (tiny_tflite, other)}
    got: dict = {}

    def run(m):
        got[m] = AdbTarget(phone.serial, thermal=NO_COOL).run(jobs[m])

    threads = [threading.Thread(target=run, args=(m,)) for m in jobs]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    for m, job in jobs.items():
        host = HostTarget().run(job)
        assert got[m].model_sha256 == sha256_file(m)
        for k in host.outputs:
            np.testing.assert_array_equal(got[m].outputs[k], host.outputs[k])


def test_rm_rf_normalises_before_its_prefix_check():
    from edgebench.targets.adb import REMOTE_ROOT

    assert RemoteCommand.rm_rf(f"{REMOTE_ROOT}/run-1/./x/..") == f"rm -rf {REMOTE_ROOT}/run-1"
    for bad in (f"{REMOTE_ROOT}/run-1/../..", f"{REMOTE_ROOT}/..", f"{REMOTE_ROOT}/../../../../system",
                REMOTE_ROOT, f"{REMOTE_ROOT}/", "data/local/tmp/edgebench/x", "/"):
        with pytest.raises(ValueError, match="refusing to remove"):
            RemoteCommand.rm_rf(bad)


def test_thermal_sample_starts_no_process(tmp_path):
    """One thermal sample runs on shell builtins alone: with an empty PATH (no cat, no anything)
    it still reads every zone and CPU; a missing file reads as '-'."""
    import subprocess

    from edgebench.targets.adb.facts import _sections, parse_cpufreq, parse_thermal

    sysfs = tmp_path / "sys"
    z0 = sysfs / "class/thermal/thermal_zone0"
    z0.mkdir(parents=True)
    (z0 / "temp").write_text("41500\n")
    (z0 / "type").write_text("cpu-big\n")
    (sysfs / "class/thermal/thermal_zone1").mkdir()        # a zone whose files are unreadable
    c0 = sysfs / "devices/system/cpu/cpu0/cpufreq"
    c0.mkdir(parents=True)
    for f, v in (("cpuinfo_max_freq", 2913000), ("scaling_max_freq", 2400000), ("scaling_cur_freq", 1800000),
                 ("scaling_governor", "schedutil")):
        (c0 / f).write_text(f"{v}\n")
    (sysfs / "devices/system/cpu/cpu1").mkdir()              # an offline core: no cpufreq
    script = RemoteCommand.THERMAL.replace("/sys/", f"{sysfs}/")
    p = subprocess.run(["/bin/sh", "-c", script], env={"PATH": str(tmp_path / "empty")}, capture_output=True,
                       text=True, timeout=30, check=False)
    assert p.returncode == 0 and p.stderr == "", p.stderr
    s = _sections(p.stdout)
    assert "end" in s
    assert parse_thermal(s["thermal"]) == {"cpu-big": 41.5}
    from edgebench.targets.adb.facts import parse_uptime

    assert parse_uptime(s["uptime"]) > 0                  # /proc/uptime read without cat
    assert p.stdout.count("thermal_zone1 - ") == 1
    assert parse_cpufreq(s["cpufreq"]) == [
        {"cpu": 0, "max_khz": 2913000, "cap_khz": 2400000, "cur_khz": 1800000, "governor": "schedutil"},
        {"cpu": 1, "max_khz": None, "cap_khz": None, "cur_khz": None, "governor": None}]


def test_device_without_shell_v2_fails_clearly(make_sim, run_cli):
    """R6: adbutils would fall back to shell v1 silently (stdout empty); edgebench refuses."""
    dev = make_sim(has_python=True, features="cmd,fixed_push_mkdir")
    with pytest.raises(InfraError, match=r"does not offer the adb shell protocol v2.*missing shell_v2.*Android 7"):
        AdbDevice(dev.serial).probe()
    code, out, err = run_cli("devices", "--json", "-")
    row = next(r for r in json.loads(out)["rows"] if r["serial"] == dev.serial)
    assert "shell protocol v2" in row["error"]


_HOSTILE_RUNNER = '''
import json, os, sys, zipfile
import numpy as np
job = json.load(open(sys.argv[-1]))
out = os.path.dirname(os.path.abspath(sys.argv[-1]))
mode = os.environ.get("HOSTILE_MODE") or open(os.path.join(os.path.dirname(__file__), "mode")).read().strip()
json.dump({"status": "ok", "runtime": "hostile 1"}, open(os.path.join(out, "result.json"), "w"))
npz = os.path.join(out, "result.npz")
if mode == "many_samples":
    np.savez(npz, samples_ns=np.ones(100000, np.int64))
elif mode == "float_samples":
    np.savez(npz, samples_ns=np.ones(5, np.float64))
elif mode == "lying_header":       # the header claims 8 GB, the member holds a few bytes
    with zipfile.ZipFile(npz, "w") as zf:
        hdr = "{'descr': '<i8', 'fortran_order': False, 'shape': (1000000000,), }"
        hdr = hdr + " " * (63 - (10 + len(hdr)) % 64) + "\\n"
        zf.writestr("samples_ns.npy", b"\\x93NUMPY\\x01\\x00" + len(hdr).to_bytes(2, "little") + hdr.encode() + b"\\0" * 64)
elif mode == "big_file":
    np.savez(npz, samples_ns=np.ones(5, np.int64), **{"out::probs": np.zeros((2 ** 20,), np.float32)})
'''


@pytest.mark.parametrize("mode,pattern", [
    ("many_samples", r"'samples_ns' has shape \(100000,\).*at most \d+ int64 samples"),
    ("float_samples", r"'samples_ns' has shape \(5,\) and dtype float64"),
    ("lying_header", r"declares shape \(1000000000,\)"),
    ("big_file", r"result.npz is \d+ bytes, more than the \d+ bytes this run can produce; refusing to pull"),
])
def test_device_result_files_are_bounded_before_loading(make_sim, tiny_tflite, tmp_path, monkeypatch, mode, pattern):
    """R5: what a device sends back is checked against the job before the host allocates it."""
    import sys

    from edgebench.targets.adb import returned

    fake = tmp_path / "device-python"
    (tmp_path / "hostile.py").write_text(_HOSTILE_RUNNER)
    (tmp_path / "mode").write_text(mode)
    fake.write_text(f"#!/bin/sh\nif [ \"$1\" = -c ]; then exec {sys.executable} \"$@\"; fi\n"
                    f"exec {sys.executable} {tmp_path / 'hostile.py'} \"$@\"\n")
    fake.chmod(0o755)
    if mode == "big_file":
        monkeypatch.setattr(returned, "OUTPUTS_MAX_BYTES", 1024 * 1024)
    dev = make_sim(has_python=True, python=str(fake))
    with pytest.raises(InfraError, match=pattern) as ei:
        AdbTarget(dev.serial, thermal=NO_COOL).run(make_job(str(tiny_tflite), runs=5, warmup_runs=1))
    assert dev.serial in str(ei.value)


def test_benchmark_model_samples_get_the_jobs_warmup_and_say_what_they_are(make_sim, tiny_tflite, standin_binary):
    """W1: every invocation runs the job's warm-up (--warmup-runs/--warmup-time), and the row says
    its samples are per-process ones."""
    dev = make_sim(has_python=False)
    job = make_job(str(tiny_tflite), runs=3, warmup_runs=7, warmup_time_s=0.05)
    r = AdbTarget(dev.serial, benchmark_binary=standin_binary, thermal=NO_COOL).run(job)
    flags = r.extra["benchmark_model_flags"]
    assert flags["warmup_runs"] == "7" and flags["warmup_min_secs"] == "0.05" and flags["num_runs"] == "1"
    assert r.sample_class == "per-process" and len(r.samples_ns) == 3
    assert "--warmup_runs=7" in r.method and "0.05 s of warm-up" in r.method and "not steady-state" in r.method
    # the stand-in echoes the warm-up it ran: at least 7 runs in every invocation
    cmds = [c for c in dev.commands if "EDGEBENCH_SAMPLE_BEGIN" in c]
    assert cmds and all("--warmup_runs=7" in c and "--warmup_min_secs=0.05" in c for c in cmds)


def test_benchmark_model_loop_obeys_max_time_with_a_probe_derived_deadline(make_sim, tiny_tflite, standin_binary):
    """R2: a --runs the device cannot finish in --max-time stops at --max-time (kept, flagged)
    instead of running into a fixed deadline and losing everything."""
    dev = make_sim(has_python=False)
    job = make_job(str(tiny_tflite), runs=100000, warmup_runs=1, max_time_s=2.0)
    r = AdbTarget(dev.serial, benchmark_binary=standin_binary, thermal=NO_COOL).run(job)
    assert r.extra["stop_reason"] == "max_time" and 1 <= len(r.samples_ns) < 100000
    probe = r.extra["probe_wall_s"]
    assert probe > 0 and r.extra["loop_deadline_s"] == pytest.approx(2.0 + 1.0 + 4.0 * probe + 30.0, abs=0.1)
    # the same rule as every other target: --min-runs and --min-time, then stop
    job = make_job(str(tiny_tflite), warmup_runs=1, min_runs=2, min_time_s=1.0, max_time_s=30.0)
    r = AdbTarget(dev.serial, benchmark_binary=standin_binary, thermal=NO_COOL).run(job)
    assert r.extra["stop_reason"] == "min_runs_and_min_time" and len(r.samples_ns) >= 2
