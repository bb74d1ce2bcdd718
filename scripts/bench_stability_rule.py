#!/usr/bin/env python3
"""How often "unstable" fires: the old rule (CV of raw samples >= 10 %) against the current one
(robust spread of 10 window medians >= 5 %), and how often the load signal fires (issue 35: stalls
-- samples over 3x the median -- take >= 10 % of the timed wall time, p99/p50 >= 10, or mean/p50 >=
1.25 in a run whose level held; weighed by the worker's own preemption count), on the same runs, on
this machine as it is and with busy-loop processes competing for the cores. Before issue 35 no load
signal existed: every one of these rows carried no warning about its tail, mean and QPS.

Each run is a real worker run (edgebench's host target) of the digits reference model's FP32 and
INT8 .tflite files; every rule is evaluated on the very same samples.

    PYTHONPATH=. python scripts/bench_stability_rule.py [--runs 10] [--load 2] [--min-time 0.5]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import time
from pathlib import Path


def _spin(stop_at: float) -> None:
    # a session of its own, as another user's program (Linux's autogroup scheduler shares the CPUs
    # between sessions first; the benchmark's worker runs in a session of its own)
    os.setsid()
    x = 0
    while time.time() < stop_at:
        x += 1


def measure(models: dict[str, Path], runs: int, min_time: float) -> dict[str, list[tuple]]:
    import numpy as np

    from edgebench.core.latency import load_signal, window_median_spread
    from edgebench.targets.base import Job, RunControl
    from edgebench.targets.host import HostTarget

    out: dict[str, list[tuple]] = {p: [] for p in models}
    for _ in range(runs):
        for prec, path in models.items():
            ctl = RunControl(min_time_s=min_time, answer_width=None)
            res = HostTarget().run(Job(model_path=str(path), control=ctl))
            ms = np.asarray(res.samples_ns, dtype=np.float64) / 1e6
            ru = res.extra.get("timed_rusage") or {}
            out[prec].append((float(ms.std(ddof=1) / ms.mean()), window_median_spread(ms),
                              load_signal(ms, ru.get("involuntary_switches")), load_signal(ms)))
    return out


def _span(values: list[float], fmt: str) -> str:
    return f"{format(min(values), fmt)}-{format(max(values), fmt)}" if values else "-"


def report(label: str, got: dict[str, list[tuple]]) -> None:
    from edgebench.core.latency import CV_WARN, MEDIAN_WARN

    for prec, vals in got.items():
        old = sum(cv >= CV_WARN for cv, *_ in vals)
        new = sum(s is not None and s >= MEDIAN_WARN for _, s, *_ in vals)
        cvs = ", ".join(f"{cv:.0%}" for cv, *_ in vals)
        spreads = ", ".join("-" if s is None else f"{s:.1%}" for _, s, *_ in vals)
        print(f"{label:14s} {prec:5s} unstable: old rule fired {old}/{len(vals)}, new rule {new}/{len(vals)} | "
              f"CV {cvs} | window-median spread {spreads}")
        sigs = [sig for *_, sig, _ in vals if sig]
        alone = [sig for *_, sig in vals if sig]
        print(f"{'':14s} {prec:5s} load signal: before issue 35 0/{len(vals)} (none existed); now "
              f"{sum(x['fired'] for x in sigs)}/{len(vals)} (from the samples alone "
              f"{sum(x['fired'] for x in alone)}/{len(vals)}) | stall share {_span([x['stall_share'] for x in sigs], '.0%')}"
              f" | mean/p50 {_span([x['mean_over_p50'] for x in sigs], '.2f')} | p99/p50 "
              f"{_span([x['p99_over_p50'] for x in sigs], '.3g')} | preemptions "
              f"{_span([x['preemptions'] for x in sigs if x['preemptions'] is not None], 'd')}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--load", type=int, default=2, help="busy-loop processes for the loaded condition")
    ap.add_argument("--min-time", type=float, default=0.5, help="seconds timed per run")
    args = ap.parse_args()
    import tempfile

    from edgebench.convert.run import ConvertSettings, convert
    from edgebench.sources.resolve import SourceOptions

    manifest = convert(ConvertSettings(src="digits", precisions=("fp32", "int8"), out_dir=tempfile.mkdtemp(),
                                       source=SourceOptions(static_batch=True)))   # as convert-and-compare
    paths = {p: Path(v["path"]) for p, v in manifest["variants"].items() if v.get("status") == "ok"}
    report("as it is", measure(paths, args.runs, args.min_time))
    stop = time.time() + 3600
    procs = [mp.Process(target=_spin, args=(stop,), daemon=True) for _ in range(args.load)]
    for p in procs:
        p.start()
    try:
        report(f"+{args.load} busy loops", measure(paths, args.runs, args.min_time))
    finally:
        for p in procs:
            p.terminate()


if __name__ == "__main__":
    main()
