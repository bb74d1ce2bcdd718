#!/usr/bin/env python3
"""Where a MobileNet's time goes, by op type: the delegate's operator names against the model's ops.

Builds a Keras MobileNetV1 (random weights; ``--alpha``, ``--size``), converts it to fp32 and int8
with the TFLite converter, runs ``edgebench bench --op-profile`` on both (one run, host XNNPACK) and
prints, per file, the op-type shares two ways from the same profile:

* by XNNPACK's own operator names (what the op-type table printed before issue 33.7): every 1x1
  convolution is a "Fully Connected" GEMM there;
* by the model's ops (``edgebench.targets.op_profile.by_op_type``: the inner operators matched to the
  partition's nodes in order);

and the share of FLOPs per op kind from the flatbuffer (pointwise = 1x1 CONV_2D), for comparison.

Usage:
    PYTHONPATH=. scripts/op_types_mobilenet.py [--alpha 1.0] [--size 224] [--min-time 1]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections import Counter
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def build(out: Path, alpha: float, size: int) -> list[str]:
    import keras
    import numpy as np
    import tensorflow as tf

    keras.utils.set_random_seed(0)
    m = keras.applications.MobileNet(input_shape=(size, size, 3), alpha=alpha, weights=None, classes=1000)
    paths = []
    for prec in ("fp32", "int8"):
        c = tf.lite.TFLiteConverter.from_keras_model(m)
        if prec == "int8":
            rng = np.random.default_rng(0)
            c.optimizations = [tf.lite.Optimize.DEFAULT]
            c.representative_dataset = lambda: ([rng.uniform(0, 1, (1, size, size, 3)).astype("f4")] for _ in range(4))
        p = out / f"mobilenet_{prec}.tflite"
        p.write_bytes(c.convert())
        paths.append(str(p))
    return paths


def shares(d: dict[str, float]) -> str:
    total = sum(d.values()) or 1.0
    return ", ".join(f"{k} {100 * v / total:.1f}%" for k, v in sorted(d.items(), key=lambda kv: -kv[1])[:4])


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--alpha", type=float, default=1.0)
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--min-time", type=float, default=1.0)
    args = ap.parse_args(argv)

    from edgebench.report.model_explorer import node_flops
    from edgebench.targets.op_profile import by_op_type, op_family
    from edgebench.bench.run import BenchSettings, run_bench
    from edgebench.targets.base import RunOptions
    from edgebench.targets.base import RunControl
    from edgebench.model.tflite_model import inspect

    with tempfile.TemporaryDirectory() as tmp:
        models = build(Path(tmp), args.alpha, args.size)
        doc = run_bench(BenchSettings(models=tuple(models), run=RunOptions(op_profile=True, control=RunControl(min_runs=100, min_time_s=args.min_time, max_time_s=120,
                                                         answer_width=None))))
        print(f"MobileNetV1 alpha {args.alpha:g}, {args.size}x{args.size}, host XNNPACK, --op-profile "
              f"(--min-time {args.min_time:g})")
        for row in doc.rows:
            if not row.ok:
                print(f"{row.model}: {row.error}")
                continue
            by_name: Counter[str] = Counter()
            for e in row.op_profile:
                for i in (e.details.get("inner") or ()) if e.delegated else ():
                    by_name[op_family(str(i["op"]))] += float(i.get("ms") or 0.0)
                if not (e.delegated and e.details.get("inner")):
                    by_name[op_family(e.op)] += float(e.ms or 0.0)
            by_op = {k: v["ms"] for k, v in by_op_type(row.op_profile, node_flops(row.model_path)).items()}
            flops: Counter[str] = Counter()
            for o in inspect(row.model_path)["ops"]:
                if o["flops"]:
                    pointwise = o["op"] == "CONV_2D" and _is_1x1(row.model_path, o)
                    flops["1x1 CONV_2D" if pointwise else o["op"]] += o["flops"]
            print(f"{Path(row.model_path).stem}: p50 {row.latency.p50:.3f} ms")
            print(f"  by XNNPACK's operator names: {shares(by_name)}")
            print(f"  by the model's ops:          {shares(by_op)}")
            print(f"  FLOPs:                       {shares(dict(flops))}")
    return 0


_KERNELS: dict[str, dict[int, bool]] = {}


def _is_1x1(path: str, op: dict) -> bool:
    """Whether CONV_2D node ``op`` has a 1x1 kernel (read once per file with the flatbuffer schema)."""
    if path not in _KERNELS:
        from ai_edge_litert import schema_py_generated as schema

        m = schema.Model.GetRootAs(Path(path).read_bytes(), 0)
        sg = m.Subgraphs(0)
        out = {}
        for j in range(sg.OperatorsLength()):
            o = sg.Operators(j)
            if o.InputsLength() > 1:
                w = sg.Tensors(o.Inputs(1))
                shape = [int(x) for x in w.ShapeAsNumpy()] if w.ShapeLength() == 4 else []
                out[j] = len(shape) == 4 and shape[1] == 1 and shape[2] == 1
        _KERNELS[path] = out
    return _KERNELS[path].get(op["index"], False)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
