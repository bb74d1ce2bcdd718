#!/usr/bin/env python3
"""Capture real ``apply_plugin_main`` logs (stdout and stderr apart) as the fixtures of
``tests/test_aot_plugin_log.py``: the probe CNNs of ``reference_models/npu_probe.py`` converted to
.tflite and compiled for the cases the parser must read. Needs the npu-qualcomm and npu-intel
extras. Writes ``tests/fixtures/aot/<case>.{stdout,stderr}.gz`` and ``SHA256SUMS`` beside them.

    python scripts/capture_aot_logs.py [--out tests/fixtures/aot]
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

CASES = (  # (case, model, precision, vendor key, SoC, extra flags)
    ("qualcomm_sm8650_unsupported_int8", "unsupported_ops_cnn", "int8", "qualcomm", "SM8650", ()),
    ("qualcomm_sm8350_unsupported_int8", "unsupported_ops_cnn", "int8", "qualcomm", "SM8350", ()),
    ("qualcomm_sm7550_mobilenet_fp32", "mobilenet_like", "fp32", "qualcomm", "SM7550", ()),
    ("intel_lnl_mobilenet_int8", "mobilenet_like", "int8", "intel", "LNL", ()),
    ("samsung_e9965_mobilenet_int8", "mobilenet_like", "int8", "samsung", "E9965", ()),
)


def tflite(name: str, precision: str, work: Path) -> Path:
    import numpy as np
    import tensorflow as tf

    from reference_models.npu_probe import BUILDERS

    model = BUILDERS[name](0)
    conv = tf.lite.TFLiteConverter.from_keras_model(model)
    if precision == "int8":
        shape = (1, *model.inputs[0].shape[1:])
        rng = np.random.default_rng(0)
        conv.optimizations = [tf.lite.Optimize.DEFAULT]
        conv.representative_dataset = lambda: ([rng.random(shape, dtype=np.float32)] for _ in range(8))
    out = work / f"{name}_{precision}.tflite"
    out.write_bytes(conv.convert())
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "tests" / "fixtures" / "aot"))
    args = ap.parse_args()
    from edgebench.readiness.aot import vendors

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    sums = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for case, name, precision, key, soc, flags in CASES:
            found = vendors.find(key)
            model = tflite(name, precision, work)
            env = {**os.environ, "TMPDIR": tmp, "LD_LIBRARY_PATH": os.pathsep.join(found.lib_dirs)}
            proc = subprocess.run([str(vendors.apply_plugin_binary()), "--cmd=apply", f"--model={model}",
                                   f"--o={work / 'out.tflite'}", f"--soc_manufacturer={found.vendor.manufacturer}",
                                   f"--soc_model={soc}", f"--libs={found.plugin_dir}", "--err=--", *flags],
                                  cwd=tmp, env=env, capture_output=True, check=False)
            for stream, data in (("stdout", proc.stdout), ("stderr", proc.stderr)):
                path = out / f"{case}.{stream}.gz"
                path.write_bytes(gzip.compress(data, mtime=0))
                sums.append(f"{hashlib.sha256(path.read_bytes()).hexdigest()}  {path.name}")
            print(f"{case}: exit {proc.returncode}")
    (out / "SHA256SUMS").write_text("\n".join(sums) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
