#!/usr/bin/env python3
"""What ``edgebench diagnose MODEL --accelerator gpu`` costs: ops, probes (= accelerator compiles),
the 1 + ceil(log2(ops)) bound, the culprit, and the bisect's wall time per GPU precision.

    source ~/.cache/edgebench/software-gpu/env.sh      # or a real GPU's Vulkan driver
    scripts/bench_gpu_bisect.py MODEL.tflite... [--rounds 2] [--samples 8] [--min-psnr 40] [--json PATH]

Each round runs fp16 then fp32, the next round fp32 then fp16 (A/B alternated: a machine that
slows down during the run does not favour one precision); the time is the median over rounds of
the worker's own ``seconds`` (compiles + runs, after its imports). Inputs: synthetic, seeded.
On the software GPU (lavapipe) the times are a CPU emulating a GPU: the counts are the claim.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from edgebench.diagnose.accelerator import run_bisect  # noqa: E402
from edgebench.model.inputs import cast_to_signature, synthetic  # noqa: E402
from edgebench.sources.resolve import tflite_signature  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="+")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--samples", type=int, default=8)
    ap.add_argument("--min-psnr", type=float, default=40.0)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    out = []
    work = Path(tempfile.mkdtemp(prefix="bench-gpu-bisect-"))
    for model in args.models:
        sig = tflite_signature(model)
        inputs = work / f"{Path(model).stem}.npz"
        cast_to_signature(synthetic(sig, args.samples, 0), sig).save(inputs)
        runs: dict[str, list[dict]] = {"fp16": [], "fp32": []}
        for r in range(args.rounds):
            for prec in (("fp16", "fp32") if r % 2 == 0 else ("fp32", "fp16")):
                runs[prec].append(run_bisect(Path(model), inputs, samples=args.samples, accelerator="gpu",
                                             gpu_precision=prec, min_psnr_db=args.min_psnr))
        for prec, metas in runs.items():
            m = metas[0]
            c = m.get("culprit")
            row = {"model": Path(model).name, "gpu_precision": prec, "ops": m["ops"], "probes": m["compiles"],
                   "bound": m["compile_bound"], "seconds_median": statistics.median(x["seconds"] for x in metas),
                   "seconds": [x["seconds"] for x in metas], "rounds": args.rounds,
                   "culprit": None if c is None else f"{c['op']}#{c['node']}",
                   "whole_model_psnr_db": (m["probes"][0].get("worst") or {}).get("psnr_db"),
                   "adapter": (m.get("accelerator_facts") or {}).get("gpu_adapter")}
            out.append(row)
            print(f"{row['model']:32s} {prec}: {row['ops']:4d} ops, {row['probes']:2d} probes (bound {row['bound']}), "
                  f"{row['seconds_median']:7.2f} s median of {args.rounds}, whole-model PSNR "
                  f"{row['whole_model_psnr_db'] if row['whole_model_psnr_db'] is None else round(row['whole_model_psnr_db'], 1)}"
                  f" dB, culprit {row['culprit'] or 'none (no divergence)'}")
    if out and out[0].get("adapter"):
        print(f"GPU: {out[0]['adapter']}")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
