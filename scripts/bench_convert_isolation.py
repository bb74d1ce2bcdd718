#!/usr/bin/env python3
"""What converting in a worker process costs (edgebench.convert.worker): the whole `edgebench
convert` command, A in the command's own process (EDGEBENCH_CONVERT_ISOLATED=0), B in the
pre-started conversion worker (the default), alternated --rounds times, each a fresh CLI process
into a fresh --out folder. Prints each round's wall times and the median B/A ratio and difference.

Usage:
    PYTHONPATH=. scripts/bench_convert_isolation.py [SRC] [--precisions fp32,int8] [--rounds 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time


def once(src: str, precisions: str, out: str, isolated: bool) -> float:
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "EDGEBENCH_CONVERT_ISOLATED": "1" if isolated else "0"}
    argv = [sys.executable, "-m", "edgebench", "convert", src, "-p", precisions, "--out", out]
    if src == "digits" or "int8" in precisions:
        argv += [] if src == "digits" else ["--data", "synthetic"]
    t0 = time.perf_counter()
    proc = subprocess.run(argv, env=env, capture_output=True, text=True)  # noqa: S603 -- argv list
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({proc.returncode}): {proc.stderr[-400:]}")
    return wall


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("src", nargs="?", default="digits")
    ap.add_argument("--precisions", default="fp32,int8")
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args(argv)
    work = tempfile.mkdtemp(prefix="edgebench-convert-isolation-")
    once(a.src, a.precisions, os.path.join(work, "warm"), True)    # the reference model's build, cached
    print(f"edgebench convert {a.src} -p {a.precisions}: A = in-process, B = conversion worker; "
          f"{a.rounds} rounds, each a fresh CLI process (load average {os.getloadavg()[0]:.1f})")
    ratios, diffs = [], []
    for i in range(a.rounds):
        got = {}
        for side in (("A", "B") if i % 2 == 0 else ("B", "A")):     # alternate who goes first
            got[side] = once(a.src, a.precisions, os.path.join(work, f"{side}{i}"), side == "B")
        ratios.append(got["B"] / got["A"])
        diffs.append(got["B"] - got["A"])
        print(f"  round {i + 1}: in-process {got['A']:.2f} s, worker {got['B']:.2f} s, ratio {ratios[-1]:.3f}")
    print(f"median ratio worker/in-process {statistics.median(ratios):.3f}, median difference "
          f"{statistics.median(diffs):+.2f} s (load average now {os.getloadavg()[0]:.1f})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
