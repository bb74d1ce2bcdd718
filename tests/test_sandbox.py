"""The sandbox (issue 42.1; edgebench/core/confine.py, edgebench/__main__.py): a command that opens a
model file runs confined, so what the model's code does is bounded by the kernel, not by what the
checks expected its loader to do -- even with ``--trust-model``, which lifts the consent checks only.

Real commands (``python -m edgebench``, the console script's path) on models built here with the real
packages: a SavedModel whose op writes into the user's home, and a Keras 3 ``.keras`` whose Lambda
reads a secret from the home, connects to a server on loopback and writes beside the model. Each runs
with ``--trust-model``: confined, nothing of it reaches the host; with ``--no-sandbox`` too (the
control: the same model does reach it, so the test can fail)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from edgebench.core.confine import Sandbox, available, plan

pytestmark = pytest.mark.skipif(not available()[0], reason=f"no sandbox here: {available()[1]}")

ROOT = Path(__file__).resolve().parent.parent

PROBE = '''
def probe(t):
    import socket
    said = []
    try:
        said.append("read:" + open({secret!r}).read())
    except Exception as e:
        said.append("read:" + type(e).__name__)
    try:
        socket.create_connection(("127.0.0.1", {port}), timeout=3).close()
        said.append("net:connected")
    except Exception as e:
        said.append("net:" + type(e).__name__)
    for path in {outside!r}:
        try:
            open(path, "w").write("written")
        except Exception:
            pass
    open({report!r}, "w").write("|".join(said))
    return t * 2.0
'''


class Listener:
    """A TCP server on loopback that counts the connections it accepted."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            conn.close()


def _edgebench(*args: str, home: Path, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    full = {**os.environ, "HOME": str(home), "PYTHONPATH": str(ROOT), **(env or {})}
    full.pop("EDGEBENCH_CONFINED", None)
    return subprocess.run([sys.executable, "-m", "edgebench", *args], cwd=cwd, env=full, capture_output=True,
                          text=True, timeout=600)


@pytest.fixture()
def home(tmp_path) -> Path:
    h = tmp_path / "home"
    h.mkdir()
    (h / "secret.txt").write_text("the-users-secret")
    return h


def _writer_savedmodel(path: Path, target: Path) -> Path:
    import tensorflow as tf

    class Writer(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([1, 4], tf.float32, name="x")])
        def f(self, x):
            tf.io.write_file(str(target), "written by the model")
            return {"y": x * 2.0}

    m = Writer()
    tf.saved_model.save(m, str(path), signatures={"serving_default": m.f})
    return path


@pytest.mark.parametrize("sandboxed", [True, False], ids=["confined", "control-no-sandbox"])
def test_an_op_that_writes_into_home_is_stopped_even_with_trust_model(tmp_path, home, sandboxed):
    marker = home / "PWNED-by-op"
    model = _writer_savedmodel(tmp_path / "writer", marker)
    args = ["convert-and-compare", str(model), "-p", "fp32", "--data", "synthetic", "-n", "2", "--runs", "3",
            "--no-store", "--trust-model", "--out", str(tmp_path / "out")]
    p = _edgebench(*args, *([] if sandboxed else ["--no-sandbox"]), home=home, cwd=tmp_path)
    assert "Traceback" not in p.stderr, p.stderr[-3000:]
    if sandboxed:
        assert not marker.exists(), "the model's WriteFile reached the user's home through the sandbox"
        assert (tmp_path / "out").is_dir()          # the command itself wrote its output folder
    else:
        assert marker.exists(), p.stderr[-2000:]     # the control: without the sandbox it does


def _probe_keras(d: Path, *, secret: Path, port: int, outside: list[Path], report: Path) -> Path:
    import keras

    ns: dict = {}
    exec(PROBE.format(secret=str(secret), port=port, outside=[str(p) for p in outside],  # noqa: S102
                      report=str(report)), ns)
    fn = ns["probe"]
    fn.__name__ = "<lambda>"            # saved as bytecode, the way Keras saves a lambda, not by name
    inp = keras.Input((4,), name="x")
    out = keras.layers.Dense(2, name="d")(keras.layers.Lambda(fn, name="probe")(inp))
    keras.Model(inp, out).save(d / "probe.keras")
    for p in (*outside, report):
        if p.exists():
            p.unlink()                                  # building the model called it once, as its author did
    return d / "probe.keras"


@pytest.mark.parametrize("sandboxed", [True, False], ids=["confined", "control-no-sandbox"])
def test_a_lambda_reads_no_home_reaches_no_network_and_writes_only_its_output(tmp_path, home, sandboxed):
    listener = Listener()
    out = tmp_path / "out"
    report = out / "probe-report.txt"                   # inside the output folder: the one place it may write
    beside = tmp_path / "models" / "beside-the-model.txt"
    in_home = home / "PWNED-by-lambda"
    (tmp_path / "models").mkdir()
    out.mkdir()
    model = _probe_keras(tmp_path / "models", secret=home / "secret.txt", port=listener.port,
                         outside=[beside, in_home], report=report)
    deadline = time.monotonic() + 10
    while not listener.accepted and time.monotonic() < deadline:
        time.sleep(0.05)                                # building it connected once, in this process
    listener.accepted = 0
    args = ["convert", str(model), "-p", "fp32", "--data", "synthetic", "--trust-model", "--out", str(out)]
    p = _edgebench(*args, *([] if sandboxed else ["--no-sandbox"]), home=home, cwd=tmp_path)
    assert p.returncode == 0, p.stderr[-3000:]
    said = report.read_text()                           # its code ran: consent was given
    if sandboxed:
        assert "the-users-secret" not in said and said.startswith("read:"), said
        assert "net:connected" not in said and listener.accepted == 0, said
        assert not beside.exists() and not in_home.exists()
    else:
        assert "read:the-users-secret" in said and "net:connected" in said and listener.accepted >= 1
        assert beside.exists() and in_home.exists()


def test_without_bubblewrap_one_line_says_so_and_the_checks_still_refuse(tmp_path, home):
    model = _writer_savedmodel(tmp_path / "writer", home / "never")
    empty = tmp_path / "bin"
    empty.mkdir()
    p = _edgebench("convert", str(model), "-p", "fp32", "--data", "synthetic", "--out", str(tmp_path / "o"),
                   home=home, cwd=tmp_path, env={"PATH": str(empty)})
    assert p.returncode == 2, p.stderr
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(lines) == 2, p.stderr
    assert lines[0].startswith("warning: convert runs without a sandbox: bubblewrap is not installed"), lines[0]
    assert "WriteFile" in lines[1] and "--trust-model" in lines[1], lines[1]


def test_the_sandbox_binds_what_the_command_names_and_hides_the_rest(tmp_path, monkeypatch):
    from edgebench.__main__ import network_reason, sandbox_for

    home = tmp_path / "h"
    (home / "models").mkdir(parents=True)
    (home / "models" / "m.keras").write_text("x")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(tmp_path)
    args = ["convert-and-compare", str(home / "models" / "m.keras"), "--json", str(home / "r" / "x.json"),
            "--out", str(tmp_path / "o")]
    box = sandbox_for(args, {"HOME": str(home)})
    argv = plan(["true"], box)
    pairs = {(argv[i], argv[i + 1]) for i in range(len(argv) - 1)}
    assert ("--tmpfs", str(home.resolve())) in pairs and ("--tmpfs", "/tmp") in pairs
    assert ("--ro-bind", str((home / "models" / "m.keras").resolve())) in pairs
    assert ("--bind", str((tmp_path / "o").resolve())) in pairs
    assert "--unshare-net" in argv and not box.network
    assert ("--ro-bind", str(home.resolve())) not in pairs          # never the whole home
    assert network_reason(["convert-and-compare", "m", "--pushgateway", "http://pgw:9091"], {}) == "--pushgateway"
    assert network_reason(["convert-and-compare", "m", "--db", "postgresql://u@h/db"], {})
    assert network_reason(["convert-and-compare", "m", "--targets", "host,adb:all"], {})
    assert network_reason(["convert-and-compare", "m", "--db", str(tmp_path / "r.db")], {}) is None
    assert network_reason(["convert", "m"], {"EDGEBENCH_DB": "postgresql://u@h/db"})
    assert "--unshare-net" not in plan(["true"], Sandbox(network=True))


def test_the_confined_command_runs_under_bubblewrap_and_others_do_not(tmp_path, home):
    from edgebench.__main__ import CONFINED_COMMANDS

    assert {"convert", "convert-and-compare", "diagnose", "compare", "readiness", "matrix"} <= CONFINED_COMMANDS
    probe = tmp_path / "probe.py"
    probe.write_text("import os, sys\nprint('confined=' + os.environ.get('EDGEBENCH_CONFINED', 'no'), file=sys.stderr)\n")
    model = _writer_savedmodel(tmp_path / "writer", home / "never")
    p = _edgebench("convert", str(model), "-p", "fp32", "--data", "synthetic", "--out", str(tmp_path / "o"),
                   "--import", str(probe), home=home, cwd=tmp_path)
    assert "confined=bubblewrap" in p.stderr, p.stderr
    assert p.returncode == 2 and "WriteFile" in p.stderr        # confined, and still refused without consent
