#!/usr/bin/env python3
"""Does the reported peak RSS include the input data? (audit W6)

Audit W6: ``peak_rss`` grew by +295 MB for the synthetic inputs of a 12 MB input tensor and by
+574 MB for the default 1000-sample input set of a 224x224x3 model. This builds two tiny models
whose weights are negligible -- one with a [1, 1024, 1024, 3] float input (12 MB), one with a
[1, 224, 224, 3] input fed 1000 samples from an .npz (602 MB) -- and reports ``peak_rss_bytes``
from the worker, alternating A/B in the same run: A = ``--baseline-runner`` (e.g. main's
edgebench/targets/runner.py), B = this tree's runner (which also reports the model footprint
and the input bytes apart).

    python scripts/bench_memory_inputs.py --baseline-runner /path/to/main/edgebench/targets/runner.py
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
MiB = 2 ** 20


def build(path: Path, side: int) -> None:
    import tensorflow as tf

    class M(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([1, side, side, 3], tf.float32, name="image")])
        def __call__(self, image):
            return {"mean": tf.reduce_mean(image, axis=[1, 2])}

    m = M()
    with contextlib.redirect_stdout(io.StringIO()):
        path.write_bytes(tf.lite.TFLiteConverter.from_concrete_functions(
            [m.__call__.get_concrete_function()], m).convert())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline-runner", help="another runner.py to alternate with (A)")
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()

    import numpy as np

    from edgebench.targets import host as host_mod
    from edgebench.targets.base import Job, RunControl
    from edgebench.targets.host import HostTarget

    work = Path(tempfile.mkdtemp(prefix="eb-mem-"))
    big, small = work / "big_input.tflite", work / "image224.tflite"
    build(big, 1024)
    build(small, 224)
    npz = work / "inputs1000.npz"
    np.savez(npz, image=np.random.default_rng(0).random((1000, 224, 224, 3), dtype=np.float32))
    cases = [("12 MB input, synthetic inputs", Job(str(big), control=RunControl(runs=20, warmup_runs=1))),
             ("224x224x3, 1000-sample npz (602 MB)", Job(str(small), inputs_npz=str(npz), control=RunControl(runs=20, warmup_runs=1)))]
    runners = [("B this tree", host_mod.RUNNER_PATH)]
    if args.baseline_runner:
        runners.insert(0, ("A baseline", Path(args.baseline_runner).resolve()))
    this = host_mod.RUNNER_PATH
    target = HostTarget(threads=1)
    for rnd in range(args.rounds):
        for case, job in cases:
            for name, path in runners:
                host_mod.RUNNER_PATH = path
                res = target.run(job)
                mem = res.extra.get("memory")
                base = res.extra.get("rss_before_load_bytes") or 0
                line = (f"round {rnd + 1} {case:<36} {name}: peak_rss {res.peak_rss_bytes / MiB:7.1f} MiB "
                        f"(+{(res.peak_rss_bytes - base) / MiB:6.1f} MiB over the runtime)")
                if mem:
                    line += (f"; model {mem['model_rss_bytes'] / MiB:.1f} MiB, inputs held apart "
                             f"{mem['inputs_bytes'] / MiB:.1f} MiB, process peak {mem['process_peak_rss_bytes'] / MiB:.1f} MiB")
                print(line, flush=True)
    host_mod.RUNNER_PATH = this
    return 0


if __name__ == "__main__":
    sys.exit(main())
