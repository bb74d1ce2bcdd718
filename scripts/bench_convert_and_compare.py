#!/usr/bin/env python3
"""Wall time of `edgebench convert-and-compare digits` (all four precisions, host), first run
(empty model cache: the digits model is trained) and cached runs, with the stage breakdown the
command records in its JSON (`timings`). Target: cached run <= 30 s on a 2-core machine.

Usage: scripts/bench_convert_and_compare.py [--repeats 2]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def run_once(cache: Path, out: Path) -> tuple[float, dict]:
    env = dict(os.environ, EDGEBENCH_CACHE_DIR=str(cache), TF_CPP_MIN_LOG_LEVEL="2")
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "edgebench", "convert-and-compare", "digits", "--out", str(out),
         "--json", str(out / "r.json"), "--no-store"],
        capture_output=True, text=True, env=env, check=False)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        sys.exit(f"convert-and-compare failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return wall, json.loads((out / "r.json").read_text())["timings"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeats", type=int, default=2, help="cached runs after the first")
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="edgebench-bench-cac-"))
    cache = root / "cache"
    rows = []
    for i in range(1 + args.repeats):
        wall, t = run_once(cache, root / f"out{i}")
        rows.append(("first (builds digits)" if i == 0 else f"cached #{i}", wall, t))
    keys = ("tf_import_s", "convert_s", "reference_s", "targets_s", "total_s")
    print(f"{'run':24s} {'wall s':>8s} " + " ".join(f"{k[:-2]:>11s}" for k in keys))
    for name, wall, t in rows:
        print(f"{name:24s} {wall:8.2f} " + " ".join(f"{t.get(k, float('nan')):11.2f}" for k in keys))
    cached = [w for n, w, _ in rows[1:]]
    if cached:
        best = min(cached)
        print(f"\ncached wall (best of {len(cached)}): {best:.2f} s -> target <= 30 s: {'MET' if best <= 30 else 'MISSED'}")
        print("(wall - total_s = interpreter start + CLI import + rendering)")


if __name__ == "__main__":
    main()
