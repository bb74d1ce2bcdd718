"""The arm64 board: the simulated adb device running an emulated arm64 userland (qemu-user).

Twins of the plain simulated-device tests, against a device whose shell is mksh, whose
commands are toybox, which runs commands as uid 2000 inside its own namespaces, and whose
python3 + LiteRT are the aarch64 builds: nothing here equals the host by construction.
Sample counts stay tiny (emulated digits FP32 is ~10 ms per inference).
"""

from __future__ import annotations

import hashlib
import json
import shutil

import numpy as np
import pytest

from edgebench.core.errors import InfraError
from edgebench.core.fingerprint import sha256_file
from edgebench.targets.adb import AdbDevice, AdbTarget, RemoteCommand, ThermalPolicy
from conftest import make_job

pytest_plugins = ["conftest_adb"]
pytestmark = pytest.mark.board

NO_COOL = ThermalPolicy(cooldown_below_c=None, sample_every_s=0.2)
FEW = dict(warmup_runs=1, min_runs=10, runs=10, min_time_s=0.0, max_time_s=20.0)


def test_board_shell_is_android_flavoured(make_board, adbh, adb_server):
    dev = make_board()
    r = adbh.adb(adb_server, "-s", dev.serial, "shell",
                 "id; uname -m; readlink /system/bin/sh; readlink /system/bin/ls; echo $PATH; "
                 "command -v tr awk dd expr || echo missing")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith("uid=2000(shell) gid=2000(shell)")
    assert lines[1] == "aarch64"
    assert lines[2].endswith("mksh") and lines[3].endswith("toybox")
    assert lines[4] == "/system/bin:/system/xbin"
    assert lines[-1] == "missing"          # Debian's toybox has no tr, awk, dd, expr
    # toybox timeout gives the exit codes edgebench's deadline relies on, in the form edgebench uses
    # (RemoteCommand: `timeout -k G S sh -c SCRIPT`). A bare applet name (`timeout 5 true`) is not
    # that form and under emulation + load it returned a silent 127 in ~6 % of shells (measured).
    r = adbh.adb(adb_server, "-s", dev.serial, "shell",
                 "timeout -k 1 1 sh -c 'sleep 5'; echo $?; timeout 5 sh -c 'exit 3'; echo $?; "
                 "timeout 5 sh -c 'exit 0'; echo $?")
    assert r.stdout.split() == ["124", "3", "0"]


def test_devices_shows_the_board_as_arm64_with_its_emulated_cpu(run_cli, make_board):
    dev = make_board()
    code, out, err = run_cli("devices", "--json", "-", "--props")
    assert code == 0, err
    row = {r["serial"]: r for r in json.loads(out)["rows"]}[dev.serial]
    assert row["state"] == "device" and row["abi"] == "arm64-v8a"
    assert row["model"] == "arm64 board (qemu cortex-a76) (emulated)" and row["soc"] == "QEMU cortex-a76 (emulated)"
    assert row["emulated"] is True
    assert row["emulation"] == "ro.kernel.qemu=1, ro.boot.qemu=1, ro.hardware=qemu-cortex-a76"
    assert row["cpu_cores"] == 4 and row["hardware"] == "qemu-cortex-a76"
    assert row["has_python_runtime"] is True and row["tflite_runtime"].startswith("ai_edge_litert ")
    assert row["python3"] == "/system/bin/python3" and row["timeout_tool"] == "/system/bin/timeout"
    code, out, err = run_cli("devices")
    assert code == 0 and "arm64 board" in out and "cortex-a76" in out


def test_edgebench_runner_on_board_is_arm_and_close_to_host(make_board, tiny_tflite, tmp_path):
    from edgebench.targets.host import HostTarget

    dev = make_board()
    x = np.random.default_rng(3).uniform(-1, 1, (5, 6)).astype(np.float32)
    npz = tmp_path / "inputs.npz"
    np.savez(npz, x=x)
    job = make_job(str(tiny_tflite), inputs_npz=str(npz), save_outputs=True, **FEW)
    r = AdbTarget(dev.serial, thermal=NO_COOL).run(job)
    h = HostTarget().run(job)
    assert r.status == "ok" and len(r.samples_ns) == 10 and (r.samples_ns > 0).all()
    assert "aarch64" in r.extra["platform"] and "x86_64" not in r.extra["platform"]
    assert r.runtime.startswith("ai_edge_litert") and r.fingerprint["abi"] == "arm64-v8a"
    assert "cortex-a76" in r.fingerprint["soc"]
    for k in h.outputs:
        np.testing.assert_allclose(r.outputs[k], h.outputs[k], rtol=0, atol=1e-5)
    base = dev.root / "data/local/tmp/edgebench"
    assert not list(base.glob("run-*"))
    assert (base / "files" / (sha256_file(tiny_tflite) + ".tflite")).stat().st_uid == 2000   # pushed as the shell user
    th = r.extra["thermal"]
    assert th["before"]["zones_c"]["cpu-big"] == 38.0 and len(th["after"]["cpus"]) == 4


def test_hostile_file_name_through_mksh(make_board, tiny_tflite, tmp_path):
    dev = make_board()
    name = "we ird \"q\" 'x'; touch PWNED $(touch PWNED2) `touch PWNED3` & x.tflite"
    model = tmp_path / name
    shutil.copy(tiny_tflite, model)
    r = AdbTarget(dev.serial, thermal=NO_COOL).run(make_job(str(model), **FEW))
    assert len(r.samples_ns) == 10
    # device files are named by content: only a plain suffix of the user's name reaches the device
    assert (dev.root / "data/local/tmp/edgebench/files" / (sha256_file(model) + ".tflite")).read_bytes() \
        == model.read_bytes()
    assert not list(dev.root.rglob("PWNED*"))
    out = AdbDevice(dev.serial).check(RemoteCommand.join(["printf", "%s", name]), what="echo").stdout
    assert out == name


def test_device_side_deadline_and_loss_mid_run(make_board, tiny_tflite):
    dev = make_board()
    with pytest.raises(InfraError, match=r"deadline of 1 s and was killed \(exit 124\)"):
        AdbDevice(dev.serial).check("sleep 600", what="a hung command", deadline_s=1)
    assert dev.running() == 0
    lost = make_board(die_on=r"\.py job\.json")
    with pytest.raises(InfraError) as ei:
        AdbTarget(lost.serial, thermal=NO_COOL).run(make_job(str(tiny_tflite), **FEW))
    assert f"adb device {lost.serial}" in str(ei.value) and "was lost" in str(ei.value)


def test_thermal_cool_down_polls_the_boards_sysfs(make_board):
    dev = make_board()
    t = AdbTarget(dev.serial, thermal=ThermalPolicy(cooldown_below_c=45.0, poll_s=0.01, cooldown_timeout_s=60))
    dev.config.thermal_script = {"cpu-big": [61.0, 52.0, 44.0, 90.0]}
    cd = t.cool_down()
    assert cd["reached"] is True and cd["polls"] == 3 and cd["hottest_c"] == [61.0, 52.0, 44.0]
    dev.config.freq_script = {1: [900000]}
    s = t.device.thermal_sample()
    assert [c["cur_khz"] for c in s["cpus"]] == [2000000, 900000, 2000000, 2000000]


def test_benchmark_model_standin_runs_on_the_board_python(make_board, tiny_tflite, tmp_path):
    """No arm64 benchmark_model ELF ships in any package here: the stand-in script runs under
    the board's aarch64 python (by absolute path: this board has no python3 on PATH)."""
    from edgebench.targets.sim import benchmark_model_standin as standin
    from edgebench.targets.host import HostTarget

    dev = make_board(has_python=False)
    binary = standin.install(str(tmp_path / "benchmark_model"), "/usr/bin/python3")
    x = np.random.default_rng(5).uniform(-1, 1, (2, 6)).astype(np.float32)
    npz = tmp_path / "inputs.npz"
    np.savez(npz, x=x)
    job = make_job(str(tiny_tflite), inputs_npz=str(npz), save_outputs=True, runs=2, warmup_runs=1)
    t = AdbTarget(dev.serial, benchmark_binary=binary, thermal=NO_COOL)
    assert t.choose_runner() == "benchmark_model"
    r = t.run(job)
    h = HostTarget().run(job)
    assert len(r.samples_ns) == 2 and r.extra["delegates_applied"] == ["XNNPACK"]
    for k in h.outputs:
        np.testing.assert_allclose(r.outputs[k], h.outputs[k], rtol=0, atol=1e-5)


def test_board_files_stay_the_boards(make_board, adbh, adb_server, tmp_path, board_rootfs):
    """uid 2000 cannot change the board's (hard-linked, shared) files; a push replaces instead
    of writing through; links are resolved inside the board, never on the host."""
    dev = make_board()
    toybox = board_rootfs / "usr/bin/toybox"
    before = hashlib.sha256(toybox.read_bytes()).hexdigest()
    r = adbh.adb(adb_server, "-s", dev.serial, "shell", "echo x >> /usr/bin/toybox; chmod 777 /usr/bin/toybox")
    assert r.returncode != 0
    src = tmp_path / "evil"
    src.write_bytes(b"evil")
    r = adbh.adb(adb_server, "-s", dev.serial, "push", str(src), "/system/bin/sh")
    assert r.returncode != 0 and "Permission denied" in r.stdout + r.stderr
    # a link the device makes to a host path names the board's path, and a push replaces the link
    host_file = tmp_path / "host-secret"
    host_file.write_text("keep me")
    adbh.adb(adb_server, "-s", dev.serial, "shell", f"ln -s {host_file} /data/local/tmp/l")
    r = adbh.adb(adb_server, "-s", dev.serial, "pull", "/data/local/tmp/l", str(tmp_path / "got"))
    assert r.returncode != 0 and not (tmp_path / "got").exists()
    r = adbh.adb(adb_server, "-s", dev.serial, "push", str(src), "/data/local/tmp/l")
    assert r.returncode == 0, r.stderr
    assert host_file.read_text() == "keep me" and (dev.root / "data/local/tmp/l").read_bytes() == b"evil"
    assert hashlib.sha256(toybox.read_bytes()).hexdigest() == before
    # the device has no network
    r = adbh.adb(adb_server, "-s", dev.serial, "shell", "ifconfig -a")
    assert "eth" not in r.stdout and "ens" not in r.stdout


# ---------------------------------------------------------------- the pipeline on the board
def _rows(out: str) -> dict:
    return {(r["precision"], r["target"]): r for r in json.loads(out)["rows"]}


def test_convert_and_compare_reports_real_arm_drift(run_cli, make_board, tmp_path, digits_model):
    """ARM kernels vs the x86 host, same LiteRT release and inputs: FP32/FP16/dynamic differ by
    summation order (tiny, non-zero); INT8 through XNNPACK is bit-identical."""
    dev = make_board()
    board = f"adb:{dev.serial}"
    code, out, err = run_cli("convert-and-compare", "digits", "--targets", f"host,{board}", "--samples", "96",
                             "--runs", "5", "--out", str(tmp_path), "--json", "-", "--no-store")
    assert code == 0, err
    rows = _rows(out)
    for prec in ("fp32", "fp16", "int8", "dynamic"):
        r = rows[(prec, board)]
        assert r["status"] == "ok", r.get("error")
        assert r["fingerprint"]["abi"] == "arm64-v8a" and "aarch64" in r["extra"]["platform"]
        d = next(iter(r["drift_vs_host"].values()))
        if prec == "int8":
            assert d["max_abs"] == 0.0 and r["worst_vs_host"]["psnr_db"] == "inf"
        else:
            assert 0.0 < d["max_abs"] < 1e-4, (prec, d)          # not zero by construction any more
        assert r["accuracy"]["top1"] == rows[(prec, "host")]["accuracy"]["top1"]


def test_int8_builtin_kernels_differ_from_x86_by_rounding(run_cli, make_board, tmp_path, digits_model):
    """--delegate none: ARM's optimized INT8 kernels round the requantization once, x86's (like
    TFLite's reference) twice; a few outputs differ by a few LSB (scripts/board_int8_rounding.py
    shows it op by op)."""
    dev = make_board()
    board = f"adb:{dev.serial}"
    code, out, err = run_cli("convert-and-compare", "digits", "-p", "int8", "--targets", f"host,{board}",
                             "--delegate", "none", "--runs", "5", "--out", str(tmp_path), "--json", "-",
                             "--no-store")
    assert code == 0, err
    r = _rows(out)[("int8", board)]
    assert r["extra"]["delegate"] == "none"
    d = next(iter(r["drift_vs_host"].values()))
    assert 0.0 < d["max_abs"] <= 16 / 256          # softmax output step is 1/256
    assert r["accuracy"]["top1"] >= 0.95


def test_bench_cli_on_host_and_board(run_cli, make_board, tmp_path, digits_model):
    code, out, err = run_cli("convert", "digits", "-p", "int8", "--out", str(tmp_path), "--json", "-")
    model = json.loads(out)["variants"]["int8"]["path"]
    dev = make_board()
    code, out, err = run_cli("bench", model, "--targets", f"host,adb:{dev.serial}", "--runs", "8", "--min-time", "0",
                             "--json", "-", "--no-store")
    assert code == 0, err
    rows = {r["target"]: r for r in json.loads(out)["rows"]}
    assert rows[f"adb:{dev.serial}"]["status"] == "ok" and rows[f"adb:{dev.serial}"]["latency_ms"]["samples"] == 8
    assert rows[f"adb:{dev.serial}"]["fingerprint"]["soc"] == "QEMU cortex-a76 (emulated)"


def test_module_entry_point_with_rootfs(adbh, adb_server, tmp_path, board_rootfs):
    """``python -m edgebench.targets.sim.adbd --rootfs ROOT`` as a user starts the board."""
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-m", "edgebench.targets.sim.adbd", "--port", "0", "--sandbox",
                             str(tmp_path / "board"), "--rootfs", str(board_rootfs), "--qemu-cpu", "neoverse-n1"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    serial = None
    try:
        line = proc.stdout.readline()
        assert "arm64 board (qemu neoverse-n1)" in line, line + proc.stderr.read()
        serial = line.split("listening on ", 1)[1].split(";", 1)[0]
        adbh.adb(adb_server, "connect", serial)
        assert adbh.wait_state(adb_server, serial, "device") == "device"
        r = adbh.adb(adb_server, "-s", serial, "shell", "getprop ro.product.cpu.abi; uname -m; grep -c 0xd0c /proc/cpuinfo")
        assert r.stdout.split() == ["arm64-v8a", "aarch64", "4"]
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        if serial:
            adbh.adb(adb_server, "disconnect", serial)


def test_sustained_energy_run_on_board(run_cli, make_board, tiny_tflite):
    """Sustained windows + the battery sampler (a mksh loop reading sysfs and /proc/uptime,
    dumpsys unplug/reset through toybox) on the board; emulated, a reading takes ~0.4 s, so the
    run is long enough for the 10 readings an energy figure needs."""
    dev = make_board(thermal_status_script=[0] * 6 + [1] * 400)
    code, out, err = run_cli("bench", str(tiny_tflite), "--targets", f"adb:{dev.serial}", "--duration", "5",
                             "--report-every", "1", "--energy", "--energy-idle", "2", "--warmup-runs", "2",
                             "--min-runs", "10", "--min-time", "0.1", "--no-store", "--json", "-")
    assert code == 0, err
    row = json.loads(out)["rows"][0]
    assert len(row["timeline"]) == 5 and row["sustained"]["max_thermal_status"] == 1
    e = row["energy"]
    assert e is not None, row.get("energy_reason")
    # the board is emulated (it says so): its battery is modelled, so the figure is never valid; every
    # other rule (readings, units, discharging, net > idle) passed
    assert e["valid"] is False and len(e["invalid_reasons"]) == 1, e["invalid_reasons"]
    assert e["invalid_reasons"][0].startswith("emulated device (ro.kernel.qemu=1, ro.boot.qemu=1, ro.hardware=qemu-")
    assert e["samples"]["run"] >= 5 and e["run_power_w"] > 0
    assert e["battery"]["unplugged"] is True and e["battery"]["reset"] is True
    assert not (dev.root / ".sim" / "battery_unplugged").exists()
