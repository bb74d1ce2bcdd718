#!/usr/bin/env python3
"""Capture a real ``litert-benchmark --result_json`` file for the import-log tests.

``litert-benchmark`` is the console script of the ai-edge-litert wheel (CompiledModel API, CPU
accelerator). This builds a small float CNN (Keras MobileNetV2, alpha 0.35, 96x96, random weights:
about 1 ms per inference, so the tool's 0.01 ms rounding leaves digits to read), converts it, runs
the tool and copies its JSON and its console output next to the tests:

    python scripts/make_litert_benchmark_fixture.py [--out tests/fixtures/litert_benchmark]

It prints each file's sha256 (recorded in the fixture folder's SOURCES.md). The numbers depend on
the machine; the tests check the parse, not the values.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(Path(__file__).resolve().parents[1] / "tests/fixtures/litert_benchmark"))
    ap.add_argument("--runs", type=int, default=100)
    args = ap.parse_args()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import keras
    import tensorflow as tf

    tmp = Path(tempfile.mkdtemp(prefix="edgebench-lb-"))
    keras.utils.set_random_seed(0)
    model = keras.applications.MobileNetV2(input_shape=(96, 96, 3), alpha=0.35, weights=None, classes=10)
    tflite = tmp / "mobilenetv2_035_96.tflite"
    with contextlib.redirect_stdout(io.StringIO()):     # the converter's Keras export lists its endpoints
        tflite.write_bytes(tf.lite.TFLiteConverter.from_keras_model(model).convert())
    exe = shutil.which("litert-benchmark") or str(Path(sys.executable).with_name("litert-benchmark"))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    json_path = out / "mobilenetv2_035_96_cpu.json"
    proc = subprocess.run([exe, f"--model={tflite.name}", "--num_threads=1", f"--num_runs={args.runs}",
                           "--warmup_runs=10", f"--result_json={json_path.resolve()}"],
                          cwd=tmp, capture_output=True, text=True, check=True)
    (out / "mobilenetv2_035_96_cpu.stdout.txt").write_text(proc.stdout)
    for p in sorted(out.glob("mobilenetv2_035_96_cpu*")):
        print(f"{hashlib.sha256(p.read_bytes()).hexdigest()}  {p.name}")
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
