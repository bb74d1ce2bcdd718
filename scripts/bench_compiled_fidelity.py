#!/usr/bin/env python3
"""CompiledModel CPU vs Interpreter: does ``--runtime compiled`` measure the same model the same?

A/B alternated in one run, ``--rounds`` times, both through edgebench's host worker with the
same model, inputs, threads and run control:

* A = ``--runtime interpreter`` (legacy Interpreter, XNNPACK delegate),
* B = ``--runtime compiled --accelerator cpu`` (CompiledModel, XNNPACK CPU accelerator).

Prints each round's p50s and the median of the per-round ratios B/A (1.00 = same speed;
the CompiledModel's run_by_index() also copies the input/output TensorBuffers, which the
Interpreter's invoke() does not).

Usage:
    scripts/bench_compiled_fidelity.py MODEL.tflite [MODEL2.tflite ...] [--rounds 5] [--runs 2000] [--threads 1]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from edgebench.rows import Latency  # noqa: E402
from edgebench.targets.base import Job, RunControl  # noqa: E402
from edgebench.targets.host import HostTarget  # noqa: E402


def p50_ms(model: str, runs: int, threads: int | None, **kw) -> float:
    res = HostTarget(threads=threads).run(Job(model_path=model, control=RunControl(runs=runs, warmup_runs=50),
                                              threads=threads, **kw))
    return Latency.from_samples(res.samples_ns).p50


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("models", nargs="+")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--runs", type=int, default=2000)
    ap.add_argument("--threads", type=int, default=None)
    a = ap.parse_args(argv)
    print(f"A = Interpreter, B = CompiledModel CPU; {a.rounds} rounds x {a.runs} runs, threads={a.threads}")
    for model in a.models:
        ratios = []
        for i in range(a.rounds):
            order = ("A", "B") if i % 2 == 0 else ("B", "A")   # alternate who goes first
            got = {}
            for side in order:
                kw = {} if side == "A" else {"runtime_api": "compiled", "accelerator": "cpu"}
                got[side] = p50_ms(model, a.runs, a.threads, **kw)
            ratios.append(got["B"] / got["A"])
            print(f"  {os.path.basename(model)} round {i + 1}: interpreter p50 {got['A']:.4f} ms, "
                  f"compiled p50 {got['B']:.4f} ms, B/A {ratios[-1]:.3f}")
        med = statistics.median(ratios)
        print(f"{os.path.basename(model)}: CompiledModel CPU p50 / Interpreter p50 = {med:.3f} "
              f"(median of {a.rounds} alternated rounds; min {min(ratios):.3f}, max {max(ratios):.3f})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
