#!/usr/bin/env python3
"""``matrix run`` on the local executor against ``--executor ray``, A/B alternated (issue 48).

One matrix of ``--cells`` cells (a real .tflite x N thread counts x 2 devices) on two simulated adb
phones (``edgebench.targets.sim``: each one a sandbox behind a real adb server on a private port,
running the host's LiteRT through edgebench's device runner). Each round runs the matrix once per
executor, in alternating order, as the user would (``edgebench matrix run FILE --db NEW.db``, a fresh
store each time), and times the whole command: Python start, the Ray cluster's start and stop, every
cell. The local executor runs cells one after another; Ray runs one cell per phone at a time, so the
two phones work side by side. After each Ray run the script checks from the report that no two cells
overlapped on one phone.

Usage:
    scripts/bench_matrix_executors.py [--rounds 3] [--cells 8] [--runs N] [--min-time S]

Prints each round's seconds, the medians and the ratio local / ray (> 1: Ray is faster).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
ROOT = Path(__file__).resolve().parents[1]
CLI = "import sys; from edgebench.cli import main; sys.exit(main(sys.argv[1:]))"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def adb(port: int, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["adb", "-P", str(port), *args], capture_output=True, text=True, timeout=60, check=False)


def tiny_model(path: Path) -> Path:
    """A small real float model (Dense 64 -> 256 -> 256 -> 10), converted with real TF."""
    import keras
    import tensorflow as tf

    keras.utils.set_random_seed(0)
    inp = keras.Input(shape=(64,), name="x")
    h = keras.layers.Dense(256, activation="relu")(inp)
    h = keras.layers.Dense(256, activation="relu")(h)
    out = keras.layers.Dense(10, activation="softmax", name="probs")(h)
    path.write_bytes(tf.lite.TFLiteConverter.from_keras_model(keras.Model(inp, out)).convert())
    return path


def overlaps(cells: list[dict]) -> int:
    by_dev: dict[str, list[dict]] = {}
    for c in cells:
        by_dev.setdefault(c["params"]["target"], []).append(c["worker"])
    n = 0
    for ws in by_dev.values():
        ws.sort(key=lambda w: w["started"])
        n += sum(b["started"] < a["ended"] for a, b in zip(ws, ws[1:]))
    return n


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--cells", type=int, default=8, help="cells in the matrix (even: 2 devices x cells/2 thread counts)")
    ap.add_argument("--runs", type=int, help="timed inferences per cell (default: edgebench's stop rule, as a user runs it)")
    ap.add_argument("--min-time", type=float, help="seconds each cell measures at least (default: edgebench's, 1 s)")
    ap.add_argument("--keep", action="store_true", help="keep the work folder (reports, stores) and print its path")
    ap.add_argument("--model", help="a .tflite to run (default: a small Dense model built here)")
    a = ap.parse_args()
    if a.cells < 2 or a.cells % 2:
        ap.error("--cells must be an even number >= 2")
    if shutil.which("adb") is None:
        print("adb is not installed (Debian package 'adb'); scripts/test installs it", file=sys.stderr)
        return 2
    sys.path.insert(0, str(ROOT))
    from edgebench.targets.sim.adbd import SimConfig, SimDevice

    work = Path(tempfile.mkdtemp(prefix="ebmx", dir="/tmp"))    # short: Ray's unix sockets live under TMPDIR
    port = free_port()
    env = dict(os.environ, ANDROID_ADB_SERVER_PORT=str(port), TMPDIR=str(work), COLUMNS="200",
               PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    os.environ["ANDROID_ADB_SERVER_PORT"] = str(port)
    devices = []
    try:
        adb(port, "start-server")
        for i in range(2):
            dev = SimDevice(work / f"sim{i}", SimConfig(has_python=True, serialno=f"SIMBENCH{i}")).start()
            devices.append(dev)
            adb(port, "connect", dev.serial)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            states = dict(ln.split()[:2] for ln in adb(port, "devices").stdout.splitlines()[1:] if ln.strip())
            if all(states.get(d.serial) == "device" for d in devices):
                break
            time.sleep(0.1)
        else:
            print(f"the simulated devices did not come up: {states}", file=sys.stderr)
            return 3
        model = Path(a.model) if a.model else tiny_model(work / "dense.tflite")
        threads = list(range(1, a.cells // 2 + 1))
        mfile = work / "m.yaml"
        mfile.write_text(f"models: ['{model}']\ntargets: [{', '.join(repr('adb:' + d.serial) for d in devices)}]\n"
                         f"threads: {threads}\n" + (f"runs: {a.runs}\n" if a.runs else "")
                         + (f"min_time_s: {a.min_time}\n" if a.min_time is not None else ""))
        times: dict[str, list[float]] = {"local": [], "ray": []}
        print(f"matrix: {a.cells} cells ({model.name} x threads {threads} x 2 simulated phones), runs {a.runs or 'default'}, "
              f"min time {'default' if a.min_time is None else a.min_time} s; "
              f"{os.cpu_count()} CPUs here")
        for r in range(a.rounds):
            order = ("local", "ray") if r % 2 == 0 else ("ray", "local")
            for arm in order:
                rep = work / f"rep-{arm}-{r}.json"
                argv = [sys.executable, "-c", CLI, "matrix", "run", str(mfile), "--db", str(work / f"{arm}-{r}.db"),
                        "--json", str(rep)] + (["--executor", "ray"] if arm == "ray" else [])
                t0 = time.perf_counter()
                p = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=1200, check=False)
                dt = time.perf_counter() - t0
                if p.returncode != 0:
                    print(f"{arm} run failed (exit {p.returncode}):\n{p.stderr[-2000:]}", file=sys.stderr)
                    return 1
                cells = json.loads(rep.read_text())["rows"]
                ok = sum(c["status"] == "ok" for c in cells)
                extra = ""
                if arm == "ray":
                    span = max(c["worker"]["ended"] for c in cells) - min(c["worker"]["started"] for c in cells)
                    extra = (f", {overlaps(cells)} overlaps on a phone; cells {span:.2f} s, the rest "
                             f"{dt - span:.2f} s: Python, the cluster's start and stop")
                print(f"round {r + 1} {arm:5s}: {dt:6.2f} s ({ok}/{len(cells)} cells ok{extra})")
                times[arm].append(dt)
        lm, rm = statistics.median(times["local"]), statistics.median(times["ray"])
        print(f"median local {lm:.2f} s, ray {rm:.2f} s: local / ray = {lm / rm:.2f}x "
              f"(per round: {', '.join(f'{x / y:.2f}' for x, y in zip(times['local'], times['ray']))})")
        return 0
    finally:
        for dev in devices:
            dev.kill()
        adb(port, "kill-server")
        if a.keep:
            print(f"kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
