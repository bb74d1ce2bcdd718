#!/usr/bin/env python3
"""Wall time and peak memory of `edgebench diagnose` (one fresh process per case).

Cases: the digits reference model (int8) and the full MobileNetV2 (224x224x3, random weights,
int8), each at two sample counts so the per-sample cost and the claim "memory does not grow with
the number of samples" are visible. The reference model is built first in a separate process.
Reported per case: wall time of the command, the CLI process's peak RSS (GNU time; conversion
and TF run there), the diagnose worker's peak RSS and its stated bound (from the JSON), the
worker's seconds (the per-tensor comparison alone; the rest of the wall time is TF import,
conversion and the calibrated float model), layers and findings. Run on a quiet machine: other
processes on the cores inflate every figure.

Usage: scripts/bench_diagnose.py [--cases digits:tiny:30,digits:tiny:300,mobilenetv2:full:4,mobilenetv2:full:16]
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

CASES = "digits:tiny:30,digits:tiny:300,mobilenetv2:full:4,mobilenetv2:full:16"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--cases", default=CASES, help="comma-separated MODEL:SIZE:SAMPLES")
    ap.add_argument("--precision", default="int8")
    args = ap.parse_args()
    out_root = Path(tempfile.mkdtemp(prefix="edgebench-diagnose-bench-"))
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    print(f"{'model':12s} {'size':5s} {'samples':>7s} {'wall s':>7s} {'CLI RSS GB':>10s} {'worker RSS GB':>13s} "
          f"{'bound GB':>9s} {'worker s':>8s} {'layers':>6s} {'findings':>8s}  top layer")
    built = set()
    for case in args.cases.split(","):
        name, size, samples = case.split(":")
        if (name, size) not in built:
            subprocess.run([sys.executable, "-m", "edgebench", "models", "build", name, "--size", size],
                           check=True, capture_output=True, env=env)
            built.add((name, size))
        out = out_root / f"{name}-{size}-{samples}"
        t0 = time.perf_counter()
        proc = subprocess.run(["/usr/bin/time", "-v", sys.executable, "-m", "edgebench", "diagnose", name, "--size", size,
                               "--precision", args.precision, "--samples", samples, "--out", str(out),
                               "--json", str(out / "diagnose.json"), "--no-store"],
                              capture_output=True, text=True, env=env)
        wall = time.perf_counter() - t0
        rss = [ln for ln in proc.stderr.splitlines() if "Maximum resident set size" in ln]
        cli = f"{int(rss[0].split(':')[1]) / 1024 / 1024:10.2f}" if rss else f"{'?':>10s}"
        if proc.returncode != 0:
            print(f"{name:12s} {size:5s} {samples:>7s} {wall:7.1f} {cli}  FAILED: {proc.stderr.strip()[-300:]}")
            continue
        row = json.loads((out / "diagnose.json").read_text())["rows"][0]
        mem = row["memory"]
        top = row["layers"][0] if row["layers"] else {}
        print(f"{name:12s} {size:5s} {row['samples']:7d} {wall:7.1f} {cli} {mem['peak_rss_bytes'] / 1e9:13.2f} "
              f"{mem['bound_bytes'] / 1e9:9.2f} {row['worker_seconds']:8.1f} {len(row['layers']):6d} {row['findings']:8d}  "
              f"{top.get('op')}#{top.get('node')} {str(top.get('tensor', '')).split(';')[0][-40:]}", flush=True)


if __name__ == "__main__":
    main()
