#!/usr/bin/env python3
"""Conversion of "models from the wild": which loader each format takes, and how long it takes.

Builds (needs the `test` extra: tf-keras, tensorflow-model-optimization) a Keras 2
MobileNetV2 (alpha 0.35, 96x96, random weights) compiled with the Keras 2 Adam optimizer, trained
one step and saved as a SavedModel (optimizer slots in its object graph) and as .h5, a TF1
Builder SavedModel and a tfmot QAT model; then runs `edgebench convert SRC --data synthetic`
in a fresh process per source and prints the loader, the wall time and per-precision seconds.
The Keras 2 SavedModel runs twice: as on a machine without tf-keras (`import tf_keras` blocked:
the object graph cannot be restored, the graph loader takes over) and with tf-keras installed.

Usage: scripts/bench_wild_models.py [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BUILD = r'''
import sys, numpy as np, tensorflow as tf, tf_keras as k, tensorflow_model_optimization as tfmot
out = sys.argv[1]
rng = np.random.default_rng(0)
m = k.applications.MobileNetV2(input_shape=(96, 96, 3), alpha=0.35, weights=None, classes=10)
m.compile(k.optimizers.legacy.Adam(), "sparse_categorical_crossentropy")
m.fit(rng.uniform(0, 1, (8, 96, 96, 3)).astype("float32"), rng.integers(0, 10, 8), epochs=1, verbose=0)
m.save(out + "/keras2_mobilenetv2", save_format="tf")
m.save(out + "/keras2_mobilenetv2.h5")
tf1 = tf.compat.v1
g = tf.Graph()
with g.as_default():
    x = tf1.placeholder(tf.float32, [None, 64], name="features")
    h = tf1.layers.dense(x, 256, activation=tf.nn.relu)
    y = tf.nn.softmax(tf1.layers.dense(h, 10), name="probs")
    with tf1.Session(graph=g) as s:
        s.run(tf1.global_variables_initializer())
        b = tf1.saved_model.Builder(out + "/tf1_mlp")
        b.add_meta_graph_and_variables(s, ["serve"], signature_def_map={
            "serving_default": tf1.saved_model.predict_signature_def({"features": x}, {"probs": y})})
        b.save()
base = k.Sequential([k.layers.Input((32, 32, 3)), k.layers.Conv2D(16, 3, activation="relu"),
                     k.layers.MaxPooling2D(), k.layers.Conv2D(32, 3, activation="relu"), k.layers.Flatten(),
                     k.layers.Dense(10), k.layers.Softmax()])
q = tfmot.quantization.keras.quantize_model(base)
q.compile("adam", "sparse_categorical_crossentropy")
q.fit(rng.uniform(0, 1, (16, 32, 32, 3)).astype("float32"), rng.integers(0, 10, 16), epochs=1, verbose=0)
q.save(out + "/qat_cnn", save_format="tf")
'''

NO_TF_KERAS = "import sys; sys.modules['tf_keras'] = None; from edgebench.cli import main; main()"


def convert(src: str, out: Path, *, block_tf_keras: bool) -> tuple[float, dict]:
    head = [sys.executable, "-c", NO_TF_KERAS] if block_tf_keras else [sys.executable, "-m", "edgebench"]
    t0 = time.perf_counter()
    proc = subprocess.run([*head, "convert", src, "--data", "synthetic", "--out", str(out), "--json", "-"],
                          capture_output=True, text=True, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        return wall, {"error": proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else proc.returncode}
    return wall, json.loads(proc.stdout[proc.stdout.index("{"):])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    root = Path(args.out or tempfile.mkdtemp(prefix="edgebench-wild-"))
    root.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-c", BUILD, str(root)], check=True, capture_output=True,
                   env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    cases = [("keras2_mobilenetv2", True, "Keras 2 SavedModel, no tf-keras"),
             ("keras2_mobilenetv2", False, "Keras 2 SavedModel, tf-keras installed"),
             ("keras2_mobilenetv2.h5", False, "Keras 2 .h5 (Keras 3 cannot: via tf-keras)"),
             ("tf1_mlp", False, "TF1 Builder SavedModel"),
             ("qat_cnn", False, "tfmot QAT SavedModel")]
    print(f"{'source':42s} {'loader':7s} {'wall s':>7s}  per-precision convert seconds (bytes)")
    for i, (name, block, label) in enumerate(cases):
        wall, m = convert(str(root / name), root / f"out{i}", block_tf_keras=block)
        if "error" in m:
            print(f"{label:42s} FAILED  {wall:7.1f}  {m['error']}")
            continue
        per = "  ".join(f"{p} {v.get('seconds', 0):.2f}s ({v.get('bytes', 0) // 1024} KiB)"
                        for p, v in m["variants"].items() if v.get("status") == "ok")
        print(f"{label:42s} {m['source']['loader']:7s} {wall:7.1f}  {per}")
        if m["source"].get("loader_reason"):
            print(f"{'':42s} reason: {m['source']['loader_reason'][:110]}")
        if (m["source"].get("info") or {}).get("loaded_with"):
            print(f"{'':42s} loaded with {m['source']['info']['loaded_with'][:100]}")


if __name__ == "__main__":
    main()
