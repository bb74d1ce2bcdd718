#!/usr/bin/env python3
"""Paced vs back-to-back latency of one model on this host (issue 17).

The same job runs back-to-back (A) and paced, one invoke every P ms with a sleep in between (B),
alternated A/B, B/A, ... for ``--rounds`` rounds per period, each run in a fresh edgebench worker
(``edgebench.targets.host``) with ``--runs`` timed invokes. Printed per period: each round's
p50 ratio B/A and their median, and the median p90 and mean ratios. A ratio above 1 is the
effect tensorflow/tensorflow#48190 describes (3 ms in a loop, ~9 ms every 10 ms): between paced
invokes caches go cold and the CPU frequency governor may lower the clock.

Usage:
    edgebench convert mobilenetv2 --size tiny --precision fp32 --out /tmp/mnv2
    scripts/bench_paced.py --model /tmp/mnv2/mobilenetv2-tiny_fp32.tflite [--periods 2,10,50] [--rounds 5]
"""

from __future__ import annotations

import argparse
import os
import statistics

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402

from edgebench.targets.base import Job, RunControl, Schedule  # noqa: E402
from edgebench.targets.host import HostTarget  # noqa: E402


def run(target: HostTarget, model: str, runs: int, period_ms: float | None) -> np.ndarray:
    job = Job(model_path=model, control=RunControl(runs=runs, warmup_runs=20), schedule=Schedule(period_ms=period_ms))
    return target.run(job).samples_ns.astype(np.float64) / 1e6


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True, help=".tflite file")
    ap.add_argument("--periods", default="2,10,50", help="comma-separated periods in ms")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--runs", type=int, default=300, help="timed invokes per run")
    ap.add_argument("--threads", type=int, default=None)
    args = ap.parse_args()
    target = HostTarget(threads=args.threads)
    print(f"model {args.model}; {args.rounds} rounds x {args.runs} invokes per run; A = back-to-back, "
          "B = paced; A/B order alternates each round")
    for period in (float(p) for p in args.periods.split(",")):
        r50, r90, rmean, a50s, b50s = [], [], [], [], []
        for k in range(args.rounds):
            order = (None, period) if k % 2 == 0 else (period, None)
            out = {p: run(target, args.model, args.runs, p) for p in order}
            a, b = out[None], out[period]
            a50, b50 = float(np.median(a)), float(np.median(b))
            r50.append(b50 / a50)
            r90.append(float(np.percentile(b, 90) / np.percentile(a, 90)))
            rmean.append(float(b.mean() / a.mean()))
            a50s.append(a50)
            b50s.append(b50)
        print(f"period {period:g} ms: back-to-back p50 {statistics.median(a50s):.4g} ms, paced p50 "
              f"{statistics.median(b50s):.4g} ms; p50 ratio paced/back-to-back per round "
              f"[{', '.join(f'{x:.2f}' for x in r50)}], median {statistics.median(r50):.2f}x; "
              f"p90 {statistics.median(r90):.2f}x; mean {statistics.median(rmean):.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
