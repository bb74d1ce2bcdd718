"""adb fixtures: a real adb server on a free non-default port and simulated devices.

``adb_server`` starts ``adb -P PORT start-server`` once per session and sets
ANDROID_ADB_SERVER_PORT (before anything starts a server on the default port); it kills that
server at the end. ``make_sim(**config)`` starts a simulated device (edgebench.targets.sim.adbd) in a
fresh sandbox, ``adb connect``s it through the real server and waits until ``adb devices``
shows it as ``device`` (``adb connect`` exits 0 even when it failed); it disconnects and stops
every device it started. ``make_board(**config)`` does the same for a device running inside
the cached arm64 board (``board_rootfs``). Import with ``pytest_plugins = ["conftest_adb"]``.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

ADB = shutil.which("adb")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def adb(port: int, *args: str, timeout: float = 30) -> subprocess.CompletedProcess:
    return subprocess.run([ADB, "-P", str(port), *args], capture_output=True, text=True, timeout=timeout,
                          check=False, stdin=subprocess.DEVNULL)


def adb_states(port: int) -> dict[str, str]:
    out = adb(port, "devices").stdout
    rows = [ln.split() for ln in out.splitlines()[1:] if ln.strip()]
    return {r[0]: r[1] for r in rows if len(r) >= 2}


def wait_state(port: int, serial: str, want: str | None, limit_s: float = 20.0) -> str | None:
    """Poll ``adb devices`` until SERIAL has state WANT (None: until it is gone). Bounded."""
    end = time.monotonic() + limit_s
    state = None
    while time.monotonic() < end:
        state = adb_states(port).get(serial)
        if state == want:
            return state
        time.sleep(0.05)
    return state


@pytest.fixture(scope="session")
def adbh():
    """These helpers (adb, adb_states, wait_state, free_port) without importing a conftest."""
    return sys.modules[__name__]


@pytest.fixture(scope="session")
def adb_server():
    if ADB is None:
        pytest.fail("adb is not installed; scripts/test installs the Debian package 'adb'")
    port = free_port()
    old = os.environ.get("ANDROID_ADB_SERVER_PORT")
    os.environ["ANDROID_ADB_SERVER_PORT"] = str(port)
    r = adb(port, "start-server")
    assert r.returncode == 0, r.stderr
    try:
        yield port
    finally:
        adb(port, "kill-server")
        if old is None:
            os.environ.pop("ANDROID_ADB_SERVER_PORT", None)
        else:
            os.environ["ANDROID_ADB_SERVER_PORT"] = old


def _device_factory(adb_server, tmp_path, make_config):
    """Start devices (SimConfig from ``make_config(**config)``), connect them, stop them after."""
    from edgebench.targets.sim.adbd import SimDevice

    started: list = []

    def _make(connect: bool = True, wait_for: str | None = "device", **config):
        sandbox = tmp_path / f"sim{len(started)}"
        dev = SimDevice(sandbox, make_config(**config)).start()
        started.append(dev)
        if connect:
            try:
                # an offline device never answers CNXN: adb connect waits ~10 s for it; the
                # server keeps the transport when the client gives up earlier
                adb(adb_server, "connect", dev.serial, timeout=1.5 if config.get("auth") == "offline" else 30)
            except subprocess.TimeoutExpired:
                pass
            if wait_for is not None:
                state = wait_state(adb_server, dev.serial, wait_for)
                assert state == wait_for, f"{dev.serial} is {state!r}, wanted {wait_for!r}"
        return dev

    return _make, started


def _stop_all(adb_server, started) -> None:
    for dev in started:
        dev.kill()
        adb(adb_server, "disconnect", dev.serial)
    for dev in started:
        wait_state(adb_server, dev.serial, None, limit_s=5)


@pytest.fixture()
def make_sim(adb_server, tmp_path):
    """Factory: make_sim(connect=True, wait_for="device", **SimConfig fields) -> SimDevice."""
    from edgebench.targets.sim.adbd import SimConfig

    make, started = _device_factory(adb_server, tmp_path, SimConfig)
    yield make
    _stop_all(adb_server, started)


@pytest.fixture(scope="session")
def board_rootfs() -> Path:
    """The cached arm64 board (built on first use: ~10-60 s; see edgebench.targets.sim.board).

    Skipped only when this machine cannot run arm64 programs or chroot (the reason says which
    and the fix); under scripts/test ($EDGEBENCH_REQUIRE_BOARD=1) that is a failure instead."""
    from edgebench.targets.sim import board

    reason = board.unavailable_reason()
    if reason:
        if os.environ.get("EDGEBENCH_REQUIRE_BOARD") == "1":
            pytest.fail(f"EDGEBENCH_REQUIRE_BOARD=1 but {reason}")
        pytest.skip(reason)
    return board.ensure(log=lambda m: print(f"[board] {m}", file=sys.stderr, flush=True))


@pytest.fixture()
def make_board(adb_server, tmp_path, board_rootfs):
    """Factory: make_board(**SimConfig fields) -> a simulated device running inside a clone of
    the arm64 board (mksh + toybox, uid 2000, the board's python3 + aarch64 LiteRT, emulated)."""
    from edgebench.targets.sim.adbd import SimConfig

    make, started = _device_factory(adb_server, tmp_path, lambda **c: SimConfig.for_board(board_rootfs, **c))
    yield make
    _stop_all(adb_server, started)


@pytest.fixture(scope="session")
def tiny_tflite(tmp_path_factory) -> Path:
    """A tiny real float model (Dense 6 -> 3, softmax), converted with real TF."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import keras
    import tensorflow as tf

    keras.utils.set_random_seed(0)
    inp = keras.Input(shape=(6,), name="x")
    out = keras.layers.Dense(3, activation="softmax", name="probs")(keras.layers.Dense(8, activation="relu")(inp))
    m = keras.Model(inp, out)
    path = tmp_path_factory.mktemp("adbmodels") / "tiny.tflite"
    path.write_bytes(tf.lite.TFLiteConverter.from_keras_model(m).convert())
    return path
