#!/usr/bin/env python3
"""Server mode at low load: does the latency include the load generator's own lateness?

Audit W3: a ~20 us model at 0.4 % load showed p50 178 us in server mode (the old loop slept until
each due time, and Python's sleep oversleeps by ~0.1 ms -- more on a busy machine -- which was
charged to the model), and the SLA search called an easily met "p99 <= 200 us" unmeetable.

This builds a small dense model (~15-20 us per inference, LiteRT, 1 thread), measures its
single-stream p50, then runs Poisson server mode at 0.4 % load, alternating A/B in the same run:
A = the worker script given with ``--baseline-runner`` (e.g. main's edgebench/targets/runner.py),
B = this tree's runner. It prints per-round p50s, the medians and their ratio, the generator
lateness the new runner records apart, and (``--sla``) an SLA search for p99 <= 200 us with each.

    python scripts/bench_server_lateness.py --baseline-runner /path/to/main/edgebench/targets/runner.py --sla
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import statistics
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def build_model(path: Path) -> None:
    import keras
    import tensorflow as tf

    keras.utils.set_random_seed(0)
    inp = keras.Input(shape=(512,), name="x")
    h = keras.layers.Dense(512, activation="relu")(inp)
    out = keras.layers.Dense(256)(h)
    with contextlib.redirect_stdout(io.StringIO()):   # the converter's chatter
        path.write_bytes(tf.lite.TFLiteConverter.from_keras_model(keras.Model(inp, out)).convert())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline-runner", help="another runner.py to alternate with (A)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--queries", type=int, default=700)
    ap.add_argument("--sla", action="store_true", help="also search the highest QPS with p99 <= 200 us")
    args = ap.parse_args()

    import numpy as np

    from edgebench.bench import load
    from edgebench.rows import Latency
    from edgebench.targets import host as host_mod
    from edgebench.targets.base import Job, RunControl
    from edgebench.targets.host import HostTarget

    work = Path(tempfile.mkdtemp(prefix="eb-lateness-"))
    model = work / "dense.tflite"
    build_model(model)
    target = HostTarget(threads=1)
    single = Latency.from_samples(target.run(Job(str(model), control=RunControl(min_time_s=0.5))).samples_ns)
    qps = 0.004 / (single.mean / 1e3)                      # 0.4 % load
    print(f"single stream: p50 {single.p50 * 1e3:.1f} us, mean {single.mean * 1e3:.1f} us -> server at "
          f"{qps:.0f} QPS = 0.4% load, {args.queries} queries per run")
    this_runner = host_mod.RUNNER_PATH
    runners = [("B this tree", this_runner)]
    if args.baseline_runner:
        runners.insert(0, ("A baseline", Path(args.baseline_runner).resolve()))
    p50s: dict[str, list[float]] = {name: [] for name, _ in runners}
    job = Job(str(model), control=RunControl(max_time_s=30.0))
    for rnd in range(args.rounds):
        for name, path in runners:
            host_mod.RUNNER_PATH = path
            res = target.run_load(job, {"mode": "server", "qps": qps, "workers": 1, "queries": args.queries})
            lat = np.asarray(res.samples_ns) / 1e3
            p50s[name].append(float(np.median(lat)))
            late = (res.extra.get("load") or {}).get("generator_lateness_ms")
            extra = (f", generator lateness p50 {late['p50'] * 1e3:.1f} us p99 {late['p99'] * 1e3:.0f} us"
                     if late else "")
            print(f"round {rnd + 1} {name}: latency p50 {np.median(lat):.1f} us, p99 {np.percentile(lat, 99):.0f} us, "
                  f"service p50 {np.median(np.asarray(res.extra['service_ns']) / 1e3):.1f} us{extra}")
    for name, vals in p50s.items():
        print(f"{name}: median of round p50s {statistics.median(vals):.1f} us")
    if len(runners) == 2:
        a, b = (statistics.median(p50s[n]) for n, _ in runners)
        print(f"p50 ratio A/B = {a / b:.2f}")
    if args.sla:
        for name, path in runners:
            host_mod.RUNNER_PATH = path
            sla = load.sla_search(target, Job(str(model), control=RunControl(min_time_s=0.5, max_time_s=3.0)), 0.2, 1, single)
            if sla.get("met"):
                print(f"{name}: SLA p99 <= 200 us met up to {sla['max_qps']:.0f} QPS "
                      f"(p99 {sla['p99_at_max_ms'] * 1e3:.0f} us)")
            else:
                print(f"{name}: SLA p99 <= 200 us NOT met; probes "
                      + ", ".join(f"{s['qps']:.0f} QPS p99 {s['p99_ms'] * 1e3:.0f} us" for s in sla["steps"]))
    host_mod.RUNNER_PATH = this_runner
    return 0


if __name__ == "__main__":
    sys.exit(main())
