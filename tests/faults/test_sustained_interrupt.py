"""Ctrl-C / SIGTERM during `bench --duration` (issue 26.5): the finished windows are a result.
They are kept, stored and written, the row says it was interrupted, the exit code is the signal's."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import default_sigint

pytest_plugins = ["conftest_bench"]
ROOT = Path(__file__).resolve().parents[2]


def _worker_started(pid: int) -> bool:
    """The sustained worker (runner.py) is a child of the CLI process and has loaded LiteRT."""
    for child in Path("/proc").iterdir():
        if not child.name.isdigit():
            continue
        try:
            stat = (child / "stat").read_text()
            cmd = (child / "cmdline").read_bytes()
        except OSError:
            continue
        if b"runner.py" in cmd and int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            try:
                return "litert" in (child / "maps").read_text().lower()
            except OSError:
                return False
    return False


@pytest.mark.parametrize("sig,code,name", [(signal.SIGINT, 130, "Ctrl-C"), (signal.SIGTERM, 143, "SIGTERM")])
def test_interrupted_sustained_run_keeps_its_finished_windows(tmp_path, bench_models, sig, code, name):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "EDGEBENCH_DATA_DIR": str(tmp_path / "data")}
    db, out = tmp_path / "r.db", tmp_path / "r.json"
    p = subprocess.Popen([sys.executable, "-m", "edgebench", "bench", str(bench_models["fp32"]), "--duration", "30",
                          "--report-every", "1", "--warmup-runs", "2", "--db", str(db), "--json", str(out)],
                         env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         preexec_fn=default_sigint)
    t0 = time.monotonic()
    while not _worker_started(p.pid) and p.poll() is None and time.monotonic() - t0 < 60:
        time.sleep(0.1)
    time.sleep(3.6)              # three finished 1-s windows and part of the fourth
    p.send_signal(sig)
    stdout, stderr = p.communicate(timeout=60)
    assert p.returncode == code, stderr[-2000:]
    assert f"interrupted ({name}): 1 of 1 rows were measured and kept" in stderr, stderr[-2000:]
    doc = json.loads(out.read_text())
    row = doc["rows"][0]
    assert doc["interrupted"] is True and row["status"] == "ok" and row["stop_reason"] == "interrupted"
    windows = row["timeline"]
    assert len(windows) >= 3, windows                        # the finished windows, not the unfinished one
    assert sum(w["latency_ms"]["samples"] if isinstance(w.get("latency_ms"), dict) else w.get("samples", 0)
               for w in windows) == len(row["samples_ns"])
    assert any("finished window" in w for w in row["warnings"])
    listed = subprocess.run([sys.executable, "-m", "edgebench", "results", "list", "--db", str(db), "--json", "-"],
                            env=env, capture_output=True, text=True)
    assert listed.returncode == 0 and len(json.loads(listed.stdout)["rows"]) == 1      # stored
