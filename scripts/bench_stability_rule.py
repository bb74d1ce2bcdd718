#!/usr/bin/env python3
"""How often "unstable" fires: the old rule (CV of raw samples >= 10 %) against the current one
(robust spread of 10 window medians >= 5 %), on the same runs, on this machine as it is and with
busy-loop processes competing for the cores.

Each run is a real worker run (edgebench's host target) of the digits reference model's FP32 and
INT8 .tflite files; both rules are evaluated on the very same samples.

    PYTHONPATH=. python scripts/bench_stability_rule.py [--runs 10] [--load 2]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import time
from pathlib import Path


def _spin(stop_at: float) -> None:
    x = 0
    while time.time() < stop_at:
        x += 1


def measure(models: dict[str, Path], runs: int) -> dict[str, list[tuple[float, float | None]]]:
    import numpy as np

    from edgebench.measure import window_median_spread
    from edgebench.targets.base import Job, RunControl
    from edgebench.targets.host import HostTarget

    out: dict[str, list[tuple[float, float | None]]] = {p: [] for p in models}
    for _ in range(runs):
        for prec, path in models.items():
            res = HostTarget().run(Job(model_path=str(path), control=RunControl(min_time_s=0.5, answer_width=None)))
            ms = np.asarray(res.samples_ns, dtype=np.float64) / 1e6
            out[prec].append((float(ms.std(ddof=1) / ms.mean()), window_median_spread(ms)))
    return out


def report(label: str, got: dict[str, list[tuple[float, float | None]]]) -> None:
    from edgebench.measure import CV_WARN, MEDIAN_WARN

    for prec, vals in got.items():
        old = sum(cv >= CV_WARN for cv, _ in vals)
        new = sum(s is not None and s >= MEDIAN_WARN for _, s in vals)
        cvs = ", ".join(f"{cv:.0%}" for cv, _ in vals)
        spreads = ", ".join("-" if s is None else f"{s:.1%}" for _, s in vals)
        print(f"{label:14s} {prec:5s} old rule fired {old}/{len(vals)}, new rule {new}/{len(vals)} | "
              f"CV {cvs} | window-median spread {spreads}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--load", type=int, default=2, help="busy-loop processes for the loaded condition")
    args = ap.parse_args()
    import tempfile

    from edgebench.convert import ConvertSettings, convert
    from edgebench.sources import SourceOptions

    manifest = convert(ConvertSettings(src="digits", precisions=("fp32", "int8"), out_dir=tempfile.mkdtemp(),
                                       source=SourceOptions(static_batch=True)))   # as convert-and-compare
    paths = {p: Path(v["path"]) for p, v in manifest["variants"].items() if v.get("status") == "ok"}
    report("as it is", measure(paths, args.runs))
    stop = time.time() + 3600
    procs = [mp.Process(target=_spin, args=(stop,), daemon=True) for _ in range(args.load)]
    for p in procs:
        p.start()
    try:
        report(f"+{args.load} busy loops", measure(paths, args.runs))
    finally:
        for p in procs:
            p.terminate()


if __name__ == "__main__":
    main()
