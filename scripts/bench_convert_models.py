#!/usr/bin/env python3
"""Conversion time and peak memory per reference model and size (one process per model).

Runs `edgebench convert NAME --size SIZE` in a fresh process each time and reports the wall
time, the per-precision conversion seconds from the manifest, and the child's peak RSS
(GNU time's "Maximum resident set size"; the reference model is built first in a separate
process so the figure is the conversion's alone).

Usage: scripts/bench_convert_models.py [--sizes tiny,full] [--models digits,resnet50,...]
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

MODELS = ("digits", "resnet50", "mobilenetv2", "bert", "ssd_mobilenet")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--sizes", default="tiny,full")
    ap.add_argument("--models", default=",".join(MODELS))
    args = ap.parse_args()
    out_root = Path(tempfile.mkdtemp(prefix="edgebench-convert-bench-"))
    print(f"{'model':14s} {'size':5s} {'wall s':>8s} {'peak RSS GB':>12s}  per-precision seconds (bytes)")
    for size in args.sizes.split(","):
        for name in args.models.split(","):
            subprocess.run([sys.executable, "-m", "edgebench", "models", "build", name, "--size", size],
                           check=True, capture_output=True)
            t0 = time.perf_counter()
            proc = subprocess.run(["/usr/bin/time", "-v", sys.executable, "-m", "edgebench", "convert", name,
                                   "--size", size, "--out", str(out_root / f"{name}-{size}"), "--json", "-"],
                                  capture_output=True, text=True, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
            wall = time.perf_counter() - t0
            rss = [ln for ln in proc.stderr.splitlines() if "Maximum resident set size" in ln]
            peak_s = f"{int(rss[0].split(':')[1]) / 1024 / 1024:12.2f}" if rss else f"{'?':>12s}"
            if proc.returncode != 0:
                print(f"{name:14s} {size:5s} {wall:8.1f} {peak_s}  FAILED: {proc.stderr.strip()[-300:]}")
                continue
            m = json.loads(proc.stdout)
            per = ", ".join(f"{p} {v.get('seconds', 0):.1f}s ({v.get('bytes', 0) / 1e6:.1f} MB)"
                            for p, v in m["variants"].items())
            print(f"{name:14s} {size:5s} {wall:8.1f} {peak_s}  {per}", flush=True)


if __name__ == "__main__":
    main()
