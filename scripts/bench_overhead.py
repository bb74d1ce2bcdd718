#!/usr/bin/env python3
"""How much does edgebench's measurement cost per inference, and does it bias ratios?

A/B alternated in one run (A = edgebench's host worker, B = a bare ``invoke()`` loop in a
fresh process with the same runtime, threads and delegate), ``--rounds`` times:

* bias   = edgebench's reported median per inference - bare loop's per-inference time
* cost   = edgebench's per-iteration time (median sample + the loop's bookkeeping: timed-loop
           wall / N - mean sample, which includes set_tensor for cycling inputs) - bare loop's
           per-inference time
The bare loop times chunks of 100 invokes (single invokes when --runs < 2000) and reports the
median chunk / 100, so background load on a shared machine moves both sides alike.

With ``--ratio FP32.tflite INT8.tflite`` it also compares the INT8/FP32 latency ratio
edgebench reports with the bare loop's (target: within 5%).

Usage:
    scripts/bench_overhead.py --model digits_int8.tflite [--rounds 5] [--runs 20000]
    scripts/bench_overhead.py --ratio resnet50_fp32.tflite resnet50_int8.tflite --runs 30 --threads 2
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from edgebench.targets.base import Job, RunControl  # noqa: E402
from edgebench.targets.host import HostTarget  # noqa: E402

BARE = r"""
import json, sys, time
import numpy as np
from ai_edge_litert.interpreter import Interpreter
path, runs, warm, threads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
it = Interpreter(model_path=path, num_threads=threads)
it.allocate_tensors()
rng = np.random.default_rng(0)
for d in it.get_input_details():
    shape = d["shape"]
    if np.issubdtype(d["dtype"], np.floating):
        x = rng.uniform(-1, 1, shape).astype(d["dtype"])
    else:
        x = rng.integers(-100, 100, shape).astype(d["dtype"])
    it.set_tensor(d["index"], x)
invoke = it.invoke
for _ in range(warm):
    invoke()
# chunks of 100 invokes timed as a whole: the median chunk resists background-load spikes
chunk = 100 if runs >= 2000 else 1   # slow models: per-invoke timing costs nothing relative
chunks = []
clock = time.perf_counter_ns
for _ in range(max(1, runs // chunk)):
    t0 = clock()
    for _ in range(chunk):
        invoke()
    chunks.append((clock() - t0) / chunk)
chunks.sort()
print(json.dumps({"per_inference_ns": chunks[len(chunks) // 2], "mean_ns": sum(chunks) / len(chunks)}))
"""


def bare(model: str, runs: int, warm: int, threads: int) -> float:
    out = subprocess.run([sys.executable, "-c", BARE, model, str(runs), str(warm), str(threads)],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])["per_inference_ns"]


def edgebench(model: str, runs: int, warm: int, threads: int) -> tuple[float, float]:
    """(median per-inference latency edgebench reports, per-iteration time of its loop).

    Per-iteration time = median sample + (timed-loop wall / N - mean sample): the median keeps
    background spikes out, the second term is the loop's own bookkeeping per inference."""
    res = HostTarget(threads=threads).run(Job(model, threads=threads, control=RunControl(runs=runs, warmup_runs=warm)))
    s = res.samples_ns.astype(float)
    n = len(s)
    wall = res.extra["timed_wall_s"] * 1e9 / n
    med = float(sorted(s)[n // 2])
    # per-iteration bookkeeping = wall - mean sample; add it to the median sample
    return med, med + (wall - float(s.mean()))


def overhead(args) -> None:
    bias, cost, ratios = [], [], []
    for r in range(args.rounds):
        order = ("A", "B") if r % 2 == 0 else ("B", "A")
        got = {}
        for who in order:
            if who == "A":
                got["A"] = edgebench(args.model, args.runs, args.warmup, args.threads)
            else:
                got["B"] = bare(args.model, args.runs, args.warmup, args.threads)
        (eb_mean, eb_wall), b = got["A"], got["B"]
        bias.append(eb_mean - b)
        cost.append(eb_wall - b)
        ratios.append(eb_mean / b)
        print(f"round {r + 1} ({'/'.join(order)}): edgebench p50 {eb_mean / 1e3:.3f} us, per iteration "
              f"{eb_wall / 1e3:.3f} us, bare {b / 1e3:.3f} us per inference")
    print(f"\n{args.model}: {args.runs} runs x {args.rounds} rounds, threads {args.threads}")
    print(f"reported-median bias vs bare loop: median {statistics.median(bias) / 1e3:+.3f} us "
          f"(ratio {statistics.median(ratios):.4f})")
    print(f"per-inference cost vs bare loop:  median {statistics.median(cost) / 1e3:+.3f} us "
          f"(min {min(cost) / 1e3:+.3f}, max {max(cost) / 1e3:+.3f}); target <= 2 us")


def ratio(args) -> None:
    fp32, int8 = args.ratio
    eb_r, bare_r = [], []
    best: dict[tuple[str, str], float] = {}
    for r in range(args.rounds):
        seq = [("eb", fp32), ("eb", int8), ("bare", fp32), ("bare", int8)]
        if r % 2:
            seq.reverse()
        got = {}
        for who, m in seq:
            got[(who, m)] = (edgebench(m, args.runs, args.warmup, args.threads)[0] if who == "eb"
                             else bare(m, args.runs, args.warmup, args.threads))
        for k, v in got.items():
            best[k] = min(best.get(k, v), v)
        eb_r.append(got[("eb", int8)] / got[("eb", fp32)])
        bare_r.append(got[("bare", int8)] / got[("bare", fp32)])
        print(f"round {r + 1}: edgebench INT8/FP32 {eb_r[-1]:.4f}  bare loop {bare_r[-1]:.4f}  "
              f"(edgebench fp32 {got[('eb', fp32)] / 1e6:.2f} / int8 {got[('eb', int8)] / 1e6:.2f} ms, "
              f"bare {got[('bare', fp32)] / 1e6:.2f} / {got[('bare', int8)] / 1e6:.2f} ms)")
    e, b = statistics.median(eb_r), statistics.median(bare_r)
    print(f"\nINT8/FP32 latency ratio: edgebench {e:.4f}, bare loop {b:.4f}, "
          f"difference {100 * (e / b - 1):+.2f}% (target within 5%)")
    # background load only slows rounds down: best round per side is the least disturbed
    be = best[("eb", int8)] / best[("eb", fp32)]
    bb = best[("bare", int8)] / best[("bare", fp32)]
    print(f"best rounds: edgebench {be:.4f}, bare loop {bb:.4f}, difference {100 * (be / bb - 1):+.2f}%")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", help=".tflite model (the tiny digits model for the overhead figure)")
    ap.add_argument("--ratio", nargs=2, metavar=("FP32", "INT8"), help="compare INT8/FP32 latency ratios")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--runs", type=int, default=20000)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    if args.ratio:
        ratio(args)
    elif args.model:
        overhead(args)
    else:
        ap.error("give --model or --ratio")


if __name__ == "__main__":
    main()
