#!/usr/bin/env python3
"""Wall time and peak memory of edgebench's readers on crafted inputs (issue 39), each in a fresh
process, N rounds: the numbers in docs/security.md.

    python scripts/measure_untrusted_inputs.py [--rounds 3]

Inputs (built by tests/hostile_inputs.py in milliseconds): a 2 MiB .npz that inflates to 2 GiB, a
252-byte .npz declaring a 233 TiB array, a 512 MiB array read with -n 10, a 1.9 KB matrix naming
2,000,000 cells, a 200 KB log line built to make regular expressions backtrack, and a Keras archive
whose weights member inflates 1,000:1. Each child reports its own VmHWM (peak RSS, which includes
importing numpy and edgebench, ~40 MB before any input is read) and the wall time of the call
alone (imports done first).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from hostile_inputs import deflate_npz, huge_shape_npz, zip_bomb_member  # noqa: E402

CHILD = textwrap.dedent("""
    import json, sys, time
    kind, path = sys.argv[1], sys.argv[2]
    from edgebench.model.inputs import Signature, TensorSpec, load_data
    from edgebench.matrix.run import load_matrix
    from edgebench.targets.benchmark_model.parse import parse_log
    from edgebench.sources.trust import read_keras_config
    t0 = time.perf_counter()                  # the call alone: imports are done
    try:
        if kind == "npz":
            load_data(path, Signature((TensorSpec("x", (None, 8, 8, 1), "float32"),), ()), n=10)
            result = "loaded 10 samples"
        elif kind == "matrix":
            load_matrix(path)
            result = "loaded"
        elif kind == "log":
            parse_log(open(path).read())
            result = "parsed"
        else:
            read_keras_config(path)
            result = "read"
    except Exception as e:
        result = f"{type(e).__name__}: {str(e)[:90]}"
    dt = time.perf_counter() - t0
    hwm = [l for l in open("/proc/self/status") if l.startswith("VmHWM:")][0]
    print(json.dumps({"s": dt, "hwm_mb": int(hwm.split()[1]) / 1024, "result": result}))
""")


def build(tmp: Path) -> list[tuple[str, str, Path]]:
    GiB = 1024 ** 3
    bomb = deflate_npz(tmp / "bomb.npz", {"x": ((2 * GiB // 256 + 1, 8, 8, 1), "<f4")})
    huge = huge_shape_npz(tmp / "huge.npz", "x", (10 ** 12, 8, 8, 1))
    big = deflate_npz(tmp / "big.npz", {"x": ((2 * 1024 ** 2, 8, 8, 1), "<f4")}, crc=True)
    matrix = tmp / "bomb.yaml"
    targets = ["host", "tf"] + [f"adb:s{i}" for i in range(98)]
    matrix.write_text("model: digits\nthreads: [" + ",".join(map(str, range(1, 201))) + "]\ntargets: ["
                      + ",".join(targets) + "]\ndata: [" + ",".join(f"d{i}" for i in range(100)) + "]\n")
    log = tmp / "redos.log"
    log.write_text("\n".join(["A" + " " * 200_000 + "x", "W/" + " " * 200_000 + "x", "count=1 " + "1" * 200_000]))
    keras = zip_bomb_member(tmp / "bomb.keras", {"metadata.json": b"{}", "config.json": b"{}"}, "model.weights.h5",
                            256 * 1024 ** 2)
    return [("npz bomb (2 MiB -> 2 GiB), -n 10", "npz", bomb), ("npz declaring 233 TiB in 252 bytes", "npz", huge),
            ("512 MiB array, -n 10", "npz", big), ("matrix naming 2,000,000 cells", "matrix", matrix),
            ("log lines built for regex backtracking (3 x 200 KB)", "log", log),
            (".keras whose weights inflate 256 MiB at 1,000:1", "keras", keras)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OPENBLAS_NUM_THREADS": "1"}
    with tempfile.TemporaryDirectory() as d:
        cases = build(Path(d))
        print(f"{'input':52} {'size':>10} {'call s (median)':>16} {'peak RSS MB':>12}  result")
        for label, kind, path in cases:
            runs = []
            for _ in range(args.rounds):
                proc = subprocess.run([sys.executable, "-c", CHILD, kind, str(path)], capture_output=True,
                                      text=True, env=env, timeout=600)
                runs.append(json.loads(proc.stdout.strip().splitlines()[-1]))
            size = path.stat().st_size
            print(f"{label:52} {size:>10,} {statistics.median(r['s'] for r in runs):>16.4f} "
                  f"{max(r['hwm_mb'] for r in runs):>12.1f}  {runs[-1]['result']}")


if __name__ == "__main__":
    main()
