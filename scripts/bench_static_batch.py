#!/usr/bin/env python3
"""--static-batch: what folding a dynamic batch's shape arithmetic buys on this host.

Converts SRC (a SavedModel, .keras or reference model name; default the digits reference model)
twice per precision -- A as edgebench converts by default (dynamic batch kept), B with
``--static-batch`` -- then times both through edgebench's host worker, A/B alternated
``--rounds`` times with the same run control. Prints each variant's delegation ("6/10, 2 parts")
and the median of the per-round p50 ratios B/A (below 1.00: the static model is faster).

Usage:
    PYTHONPATH=. scripts/bench_static_batch.py [SRC] [--precisions fp32,int8] [--rounds 5] [--runs 3000]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from edgebench.convert.run import ConvertSettings, convert  # noqa: E402
from edgebench.targets.delegation import delegation_from_worker  # noqa: E402
from edgebench.rows import Latency  # noqa: E402
from edgebench.sources.resolve import SourceOptions  # noqa: E402
from edgebench.targets.base import Job, RunControl  # noqa: E402
from edgebench.targets.host import HostTarget  # noqa: E402


def run(model: str, runs: int):
    res = HostTarget().run(Job(model_path=model, control=RunControl(runs=runs, warmup_runs=50)))
    d = delegation_from_worker(res.extra.get("delegation"))
    return Latency.from_samples(res.samples_ns).p50, (d.cell() if d else "-")


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("src", nargs="?", default="digits")
    ap.add_argument("--precisions", default="fp32,int8")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--runs", type=int, default=3000)
    a = ap.parse_args(argv)
    precisions = tuple(a.precisions.split(","))
    work = tempfile.mkdtemp(prefix="edgebench-static-batch-")
    files = {}
    for side, static in (("A", False), ("B", True)):
        m = convert(ConvertSettings(src=a.src, precisions=precisions, out_dir=os.path.join(work, side),
                                    source=SourceOptions(static_batch=static)))
        files[side] = {p: v["path"] for p, v in m["variants"].items() if v.get("status") == "ok"}
    print(f"A = dynamic batch (default), B = --static-batch; {a.rounds} rounds x {a.runs} runs, host worker")
    for prec in precisions:
        ratios, cells = [], {}
        for i in range(a.rounds):
            got = {}
            for side in (("A", "B") if i % 2 == 0 else ("B", "A")):   # alternate who goes first
                got[side], cells[side] = run(files[side][prec], a.runs)
            ratios.append(got["B"] / got["A"])
            print(f"  {prec} round {i + 1}: dynamic p50 {got['A']:.5f} ms, static p50 {got['B']:.5f} ms, "
                  f"B/A {ratios[-1]:.3f}")
        print(f"{prec}: delegated dynamic {cells['A']} -> static {cells['B']}; static p50 / dynamic p50 = "
              f"{statistics.median(ratios):.3f} (median of {a.rounds} alternated rounds; min {min(ratios):.3f}, "
              f"max {max(ratios):.3f})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
