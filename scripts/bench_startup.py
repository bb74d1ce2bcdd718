#!/usr/bin/env python3
"""The command line's start-up cost, this tree against an earlier commit, measured side by side.

    scripts/bench_startup.py --before REV [--runs 15]

Each round runs ``python -m edgebench --help`` once on the earlier tree (``git archive REV``) and once
on this one, alternating (A/B/A/B...), and prints the median wall time of each, their ratio and how
many modules each start loads. Run it on a quiet machine; the ratio is the figure to quote.
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COUNT = "import sys, edgebench.cli; print(len(sys.modules))"


def extract(rev: str, into: Path) -> Path:
    archive = into / "tree.tar"
    with open(archive, "wb") as fh:
        subprocess.run(["git", "-C", str(ROOT), "archive", rev, "edgebench", "reference_models"], stdout=fh,
                       check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(into / "tree", filter="data")
    return into / "tree"


def once(tree: Path, argv: list[str]) -> tuple[float, str]:
    env = {"PYTHONPATH": str(tree), "PATH": "/usr/bin:/bin", "TF_CPP_MIN_LOG_LEVEL": "2"}
    t = time.perf_counter()
    p = subprocess.run([sys.executable, *argv], env=env, capture_output=True, text=True, cwd=tempfile.gettempdir())
    if p.returncode != 0:
        raise SystemExit(f"{tree}: {' '.join(argv)} exited {p.returncode}: {p.stderr.strip()[-300:]}")
    return time.perf_counter() - t, p.stdout.strip()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", required=True, help="the earlier commit (any git revision)")
    ap.add_argument("--runs", type=int, default=15, help="rounds (each: one start of each tree)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="edgebench-startup-") as tmp:
        trees = {"before": extract(args.before, Path(tmp)), "now": ROOT}
        times: dict[str, list[float]] = {k: [] for k in trees}
        for name, tree in trees.items():          # one untimed start each: bytecode caches written
            once(tree, ["-m", "edgebench", "--help"])
        for _ in range(args.runs):
            for name, tree in trees.items():
                times[name].append(once(tree, ["-m", "edgebench", "--help"])[0])
        modules = {name: once(tree, ["-c", COUNT])[1] for name, tree in trees.items()}
    med = {k: statistics.median(v) for k, v in times.items()}
    for k in trees:
        print(f"{k:>6}: median {med[k] * 1000:7.1f} ms over {args.runs} starts "
              f"(min {min(times[k]) * 1000:.1f}, max {max(times[k]) * 1000:.1f}); {modules[k]} modules loaded")
    print(f"ratio now/before: {med['now'] / med['before']:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
