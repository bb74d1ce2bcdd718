"""The simulated device against the REAL adb server and the real adb command-line client."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys

import pytest

pytest_plugins = ["conftest_adb"]


@pytest.fixture()
def h(adbh):
    return adbh


def test_connect_and_devices_lists_model(h, adb_server, make_sim):
    dev = make_sim(model="Galaxy S24", name="e1qxx", device="e1q")
    out = h.adb(adb_server, "devices", "-l").stdout
    line = next(ln for ln in out.splitlines() if ln.startswith(dev.serial))
    assert " device " in line and "model:Galaxy_S24" in line and "product:e1qxx" in line and "device:e1q" in line
    feats = h.adb(adb_server, "-s", dev.serial, "features").stdout.split()
    assert set(feats) >= {"cmd", "fixed_push_mkdir", "shell_v2"}
    assert "sendrecv_v2" not in feats and "stat_v2" not in feats


def test_shell_v2_exit_codes_and_separate_streams(h, adb_server, make_sim):
    dev = make_sim()
    r = h.adb(adb_server, "-s", dev.serial, "shell", "echo out; echo err >&2; exit 7")
    assert r.returncode == 7
    assert r.stdout == "out\n" and r.stderr == "err\n"
    r = h.adb(adb_server, "-s", dev.serial, "shell", "getprop ro.product.model; getprop ro.build.version.sdk")
    assert r.returncode == 0 and r.stdout.splitlines() == ["Pixel 8", "34"]
    # it says it is an emulator, as Android's emulator does (Android <= 11, and 12+)
    r = h.adb(adb_server, "-s", dev.serial, "shell", "getprop ro.kernel.qemu; getprop ro.boot.qemu")
    assert r.returncode == 0 and r.stdout.splitlines() == ["1", "1"]
    # shell runs with the device's own PATH: no python unless configured
    assert h.adb(adb_server, "-s", dev.serial, "shell", "command -v python3").returncode != 0


def test_push_pull_multi_mb_byte_exact(h, adb_server, make_sim, tmp_path):
    dev = make_sim()
    data = os.urandom(3 * 1024 * 1024 + 12345)   # crosses many WRTE and sync-DATA boundaries
    src = tmp_path / "big.bin"
    src.write_bytes(data)
    r = h.adb(adb_server, "-s", dev.serial, "push", str(src), "/data/local/tmp/new/deep/big.bin")
    assert r.returncode == 0, r.stderr
    # fixed_push_mkdir: the daemon made the parent folders; the file is in the sandbox
    assert (dev.root / "data/local/tmp/new/deep/big.bin").read_bytes() == data
    r = h.adb(adb_server, "-s", dev.serial, "shell", "sha256sum /data/local/tmp/new/deep/big.bin")
    assert r.stdout.split()[0] == hashlib.sha256(data).hexdigest()
    back = tmp_path / "back.bin"
    r = h.adb(adb_server, "-s", dev.serial, "pull", "/data/local/tmp/new/deep/big.bin", str(back))
    assert r.returncode == 0, r.stderr
    assert back.read_bytes() == data


def test_sync_paths_stay_inside_the_sandbox(h, adb_server, make_sim, tmp_path):
    dev = make_sim()
    src = tmp_path / "x.txt"
    src.write_text("x")
    r = h.adb(adb_server, "-s", dev.serial, "push", str(src), "/../../../../tmp/escape-attempt.txt")
    assert r.returncode == 0, r.stderr
    assert (dev.root / "tmp/escape-attempt.txt").read_text() == "x"


def test_storage_full_push_fails_with_enospc(h, adb_server, make_sim, tmp_path):
    dev = make_sim(storage_free_bytes=1000)
    src = tmp_path / "f.bin"
    src.write_bytes(b"\0" * 5000)
    r = h.adb(adb_server, "-s", dev.serial, "push", str(src), "/data/local/tmp/f.bin")
    assert r.returncode != 0
    assert "No space left on device" in r.stdout + r.stderr
    assert not (dev.root / "data/local/tmp/f.bin").exists()


def test_unauthorized_and_offline_states(h, adb_server, make_sim):
    un = make_sim(auth="unauthorized", wait_for="unauthorized")
    off = make_sim(auth="offline", wait_for="offline")
    states = h.adb_states(adb_server)
    assert states[un.serial] == "unauthorized" and states[off.serial] == "offline"
    r = h.adb(adb_server, "-s", un.serial, "shell", "echo hi")
    assert r.returncode != 0 and "unauthorized" in r.stderr


def test_kill_switch_drops_the_device(h, adb_server, make_sim):
    dev = make_sim()
    dev.kill()
    assert h.wait_state(adb_server, dev.serial, "offline") in ("offline", None)
    r = h.adb(adb_server, "-s", dev.serial, "shell", "echo hi")
    assert r.returncode != 0


def test_module_entry_point(h, adb_server, tmp_path):
    """``python -m edgebench.targets.sim.adbd`` as a user would start it."""
    proc = subprocess.Popen([sys.executable, "-m", "edgebench.targets.sim.adbd", "--port", "0", "--sandbox",
                             str(tmp_path / "phone"), "--model", "Pixel 7", "--python"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    serial = None
    try:
        line = proc.stdout.readline()
        assert "listening on 127.0.0.1:" in line, line + proc.stderr.read()
        serial = line.split("listening on ", 1)[1].split(";", 1)[0]
        assert "it says it is an emulator (ro.kernel.qemu=1)" in line
        h.adb(adb_server, "connect", serial)
        assert h.wait_state(adb_server, serial, "device") == "device"
        r = h.adb(adb_server, "-s", serial, "shell", "getprop ro.product.model; python3 -c 'print(6*7)'")
        assert r.stdout.splitlines() == ["Pixel 7", "42"]
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        if serial:
            h.adb(adb_server, "disconnect", serial)


# ---------------------------------------------------------------- confinement (audit S1)
def test_push_through_a_symlink_never_writes_the_host_file(h, adb_server, make_sim, tmp_path):
    """A device command links into the host; a push to the link (or through a linked folder)
    stays inside the sandbox, a pull through it reads nothing from the host."""
    dev = make_sim()
    host_file = tmp_path / "host-file"
    host_file.write_text("original")
    host_dir = tmp_path / "host-dir"
    host_dir.mkdir()
    r = h.adb(adb_server, "-s", dev.serial, "shell",
              f"ln -s {host_file} /data/local/tmp/f && ln -s {host_dir} /data/local/tmp/d")
    assert r.returncode == 0, r.stderr
    assert os.readlink(dev.root / "data/local/tmp/f") == str(host_file)   # plain mode: a real host link
    src = tmp_path / "payload"
    src.write_text("payload")
    assert h.adb(adb_server, "-s", dev.serial, "push", str(src), "/data/local/tmp/f").returncode == 0
    assert h.adb(adb_server, "-s", dev.serial, "push", str(src), "/data/local/tmp/d/new").returncode == 0
    assert host_file.read_text() == "original" and not (host_dir / "new").exists()
    assert (dev.root / "data/local/tmp/f").read_text() == "payload"          # the link was replaced
    assert (dev.root / str(host_dir).lstrip("/") / "new").read_text() == "payload"   # re-rooted
    h.adb(adb_server, "-s", dev.serial, "shell", "ln -s /etc/hostname /data/local/tmp/g")
    r = h.adb(adb_server, "-s", dev.serial, "pull", "/data/local/tmp/g", str(tmp_path / "got"))
    assert r.returncode != 0 and not (tmp_path / "got").exists()


def test_system_bin_holds_copies_not_links_to_host_tools(h, adb_server, make_sim, tmp_path):
    dev = make_sim()
    cat = dev.root / "system/bin/cat"
    assert cat.is_file() and not cat.is_symlink()
    before = hashlib.sha256(open("/bin/cat", "rb").read()).hexdigest()
    src = tmp_path / "evil"
    src.write_bytes(b"#!/bin/sh\necho pwned\n")
    assert h.adb(adb_server, "-s", dev.serial, "push", str(src), "/system/bin/cat").returncode == 0
    assert cat.read_bytes() == src.read_bytes()
    assert hashlib.sha256(open("/bin/cat", "rb").read()).hexdigest() == before


def test_simulator_files_are_replaced_not_written_through(h, adb_server, make_sim, tmp_path):
    dev = make_sim(thermal_zones={"cpu-big": 40.0})
    host_file = tmp_path / "host-file"
    host_file.write_text("original")
    temp = dev.root / "sys/class/thermal/thermal_zone0/temp"
    temp.unlink()
    temp.symlink_to(host_file)                     # as a device command could in plain mode
    dev.set_temperature("cpu-big", 55.0)
    assert host_file.read_text() == "original" and temp.read_text() == "55000\n"


def test_listens_on_loopback_only_unless_unsafe(h, tmp_path):
    from edgebench.targets.sim.adbd import SimDevice

    with pytest.raises(ValueError, match="loopback only.*--unsafe-listen"):
        SimDevice(tmp_path / "a", host="0.0.0.0")
    r = subprocess.run([sys.executable, "-m", "edgebench.targets.sim.adbd", "--port", "0", "--host", "0.0.0.0",
                        "--sandbox", str(tmp_path / "b")], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "--unsafe-listen" in r.stderr and "Traceback" not in r.stderr
    dev = SimDevice(tmp_path / "c", host="0.0.0.0", unsafe_listen=True).start()
    try:
        assert dev.serial.startswith("0.0.0.0:")
    finally:
        dev.kill()
    assert SimDevice(tmp_path / "d", host="::1").host == "::1"


def _sim_import_graph() -> dict[str, set[str]]:
    """Which edgebench.targets.sim modules each one imports: every import statement, at top level, inside
    functions and under TYPE_CHECKING (a cycle hidden in a function is still a cycle)."""
    import ast
    from pathlib import Path

    import edgebench.targets.sim

    folder = Path(edgebench.targets.sim.__file__).parent
    mods = {("edgebench.targets.sim" if p.stem == "__init__" else f"edgebench.targets.sim.{p.stem}"): p for p in folder.glob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in mods.items():
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                deps |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module:
                assert node.level == 0, f"{path.name}: relative import"
                deps |= {f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in mods else node.module
                         for a in node.names}
        graph[name] = {d for d in deps if d in mods and d != name}
    return graph


def test_no_import_cycle_among_the_simulator_modules():
    graph = _sim_import_graph()
    assert "edgebench.targets.sim.streams" in graph["edgebench.targets.sim.adbd"]
    assert "edgebench.targets.sim.adbd" not in graph["edgebench.targets.sim.streams"]          # streams see a Transport protocol

    def reaches(start: str, node: str, seen: set[str]) -> bool:
        for d in graph[node]:
            if d == start or (d not in seen and reaches(start, d, seen | {d})):
                return True
        return False

    assert [m for m in sorted(graph) if reaches(m, m, {m})] == []
