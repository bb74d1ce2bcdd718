"""SIGTERM in the middle of `matrix run` (issue 26): the cells stored before it stay, the exit is
143 and says SIGTERM, and --resume runs exactly the rest."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

pytest_plugins = ["conftest_bench"]
ROOT = Path(__file__).resolve().parents[2]


def test_sigterm_mid_matrix_keeps_stored_cells_and_exits_143(tmp_path, bench_models):
    db = tmp_path / "r.db"
    mfile = tmp_path / "m.yaml"
    mfile.write_text(f"models: ['{bench_models['fp32']}']\ntargets: [host]\nthreads: [1, 2, 3, 4]\n"
                     "delegates: [xnnpack, none]\nruns: 300\nmin_time_s: 0\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "EDGEBENCH_DATA_DIR": str(tmp_path / "data")}
    cli = [sys.executable, "-m", "edgebench", "matrix", "run", str(mfile), "--db", str(db)]
    p = subprocess.Popen(cli, env=env, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)

    def stored() -> int:
        try:
            con = sqlite3.connect(db, timeout=5)
            try:
                return con.execute("select count(*) from runs").fetchone()[0]
            finally:
                con.close()
        except sqlite3.OperationalError:
            return 0

    t0 = time.monotonic()
    while stored() < 2 and p.poll() is None and time.monotonic() - t0 < 240:
        time.sleep(0.05)
    assert p.poll() is None, "the matrix ended before the signal"
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=120)
    assert p.returncode == 143, err[-2000:]
    assert "SIGTERM" in err and "Traceback" not in err, err[-2000:]
    k = stored()
    assert 2 <= k < 8
    r = subprocess.run([*cli, "--resume", "--json", "-"], env=env, cwd=tmp_path, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    assert json.loads(r.stdout)["counts"] == {"resumed": k, "ok": 8 - k}
