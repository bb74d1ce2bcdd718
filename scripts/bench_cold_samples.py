#!/usr/bin/env python3
"""What is a benchmark_model per-inference sample? (issue 12, W1) -- mimicked on the host.

edgebench's benchmark_model path takes one sample per process: the binary runs with
``--num_runs=1`` once per sample inside one device-side ``sh`` loop. This script runs that very
loop on the host, with the LiteRT stand-in of benchmark_model (``edgebench.targets.sim``), and compares
the per-process samples' p50/p90 with the steady-state samples of edgebench's host worker (one
process, warm, thousands of runs) on the same model:

* before = ``--warmup_runs=1 --warmup_min_secs=0`` per process (what edgebench <= 0.2.0 passed);
* after  = the job's warm-up passed to every process (defaults: ``--warmup_runs=10``; also
           ``--warmup-time`` seconds, here ``--warmup-time``).

The arms alternate (``--rounds`` times) so background load on a shared machine moves them alike;
the ratios per arm (per-process / steady-state) are printed. Timings are host timings: on a phone,
cold caches and CPU-frequency ramp-up make the gap larger, never smaller.

Usage:
    scripts/bench_cold_samples.py [--model M.tflite] [--rounds 4] [--samples 15] [--warmup-time 0.2]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from edgebench.targets.sim import benchmark_model_standin as standin  # noqa: E402
from edgebench.targets import benchmark_model as bm  # noqa: E402
from edgebench.targets.base import Job, RunControl  # noqa: E402
from edgebench.targets.host import HostTarget  # noqa: E402


def default_model(work: Path) -> Path:
    """MobileNetV2 (alpha 0.35, 32x32x3, the `mobilenetv2` tiny reference model) as FP32 .tflite."""
    from edgebench.convert.run import ConvertSettings, convert

    m = convert(ConvertSettings(src="mobilenetv2", precisions=("fp32",), out_dir=str(work / "conv")))
    return Path(m["variants"]["fp32"]["path"])


def per_process(binary: str, model: Path, n: int, warmup_runs: int, warmup_s: float) -> np.ndarray:
    argv = bm.sample_argv(binary, str(model), threads=1, warmup_runs=warmup_runs, warmup_min_secs=warmup_s)
    p = subprocess.run(["sh", "-c", bm.build_sample_loop_script(argv, n)], capture_output=True, text=True,
                       timeout=600, check=False)
    return bm.parse_sample_loop(p.stdout, n, where="host")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", help=".tflite to measure (default: the mobilenetv2 tiny reference model, FP32)")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--samples", type=int, default=15, help="per-process samples per arm and round")
    ap.add_argument("--warmup-runs", type=int, default=RunControl().warmup_runs)
    ap.add_argument("--warmup-time", type=float, default=0.2)
    a = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="edgebench-cold-"))
    model = Path(a.model) if a.model else default_model(work)
    binary = standin.install(str(work / "benchmark_model"), sys.executable)
    host = HostTarget(threads=1)
    arms: dict[str, list[np.ndarray]] = {"steady-state (edgebench runner)": [], "per-process before (1 warm-up)": [],
                                          f"per-process after ({a.warmup_runs} runs + {a.warmup_time:g} s warm-up)": []}
    names = list(arms)
    for r in range(a.rounds):
        job = Job(model_path=str(model), threads=1,
                  control=RunControl(min_runs=662, min_time_s=1.0, warmup_runs=a.warmup_runs))
        arms[names[0]].append(host.run(job).samples_ns)
        arms[names[1]].append(per_process(binary, model, a.samples, 1, 0.0))
        arms[names[2]].append(per_process(binary, model, a.samples, a.warmup_runs, a.warmup_time))
        print(f"round {r + 1}/{a.rounds} done", file=sys.stderr)
    steady = np.concatenate(arms[names[0]]) / 1e6
    s50, s90 = np.percentile(steady, 50), np.percentile(steady, 90)
    print(f"model {model.name}, {a.rounds} alternating rounds, host {os.uname().nodename} ({os.cpu_count()} CPUs)")
    print(f"{'arm':<48} {'n':>6} {'p50 ms':>9} {'p90 ms':>9} {'p50/steady':>11} {'p90/steady':>11}")
    for name in names:
        ms = np.concatenate(arms[name]) / 1e6
        p50, p90 = np.percentile(ms, 50), np.percentile(ms, 90)
        print(f"{name:<48} {ms.size:>6} {p50:>9.4f} {p90:>9.4f} {p50 / s50:>10.2f}x {p90 / s90:>10.2f}x")


if __name__ == "__main__":
    main()
