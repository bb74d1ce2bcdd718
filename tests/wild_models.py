"""Models "from the wild" for tests/test_sources.py, built at test time with the real packages.

Run as a script in a separate process (the Keras 2 packages must not leak into the pytest
process, where they would register Keras 2's optimizer type and hide the failure under test):

    python tests/wild_models.py build OUT_DIR
        keras2/  a tf-keras (Keras 2) model compiled with the Keras 2 (legacy) Adam optimizer,
                 trained a few steps and saved in SavedModel format: its object graph holds
                 optimizer slot variables, as every Keras-2-era SavedModel of a compiled model
        keras2_dw.h5  a Keras 2 .h5 whose DepthwiseConv2D config Keras 3 cannot deserialize
        qat/     a tensorflow-model-optimization quantization-aware (FakeQuant) model, trained
                 a few steps, saved as a SavedModel
        prints {"keras2": path, "qat": path, "h5": path} as JSON

    python tests/wild_models.py without-tf-keras SAVEDMODEL COMMANDS_JSON
        with ``tf_keras`` unimportable (as on a machine with only TensorFlow 2.21 + Keras 3):
        first tf.saved_model.load(SAVEDMODEL) (the failure the graph loader exists for), then
        each edgebench CLI command of COMMANDS_JSON in this one process; prints
        {"probe": error text or null, "runs": [{"code", "stdout", "stderr"}]} as JSON
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def build(out: Path) -> dict[str, str]:
    import numpy as np
    import tensorflow_model_optimization as tfmot
    import tf_keras as k

    rng = np.random.default_rng(0)
    out.mkdir(parents=True, exist_ok=True)

    x = rng.uniform(0, 1, (64, 8)).astype("float32")
    y = (x[:, :4].argmax(axis=1)).astype("int64")
    k.utils.set_random_seed(0)
    m = k.Sequential([k.layers.Input((8,), name="features"), k.layers.Dense(16, activation="relu"),
                      k.layers.Dense(4, activation="softmax", name="probs")])
    m.compile(k.optimizers.legacy.Adam(1e-2), "sparse_categorical_crossentropy")
    m.fit(x, y, epochs=2, batch_size=16, verbose=0)
    m.save(str(out / "keras2"), save_format="tf")

    # Keras 2 .h5 that Keras 3 cannot deserialize (Keras 2's DepthwiseConv2D config).
    dw = k.Sequential([k.layers.Input((8, 8, 3), name="image"), k.layers.DepthwiseConv2D(3, name="dw"),
                       k.layers.GlobalAveragePooling2D(), k.layers.Dense(64, activation="relu"),
                       k.layers.Dense(4, name="logits")])
    dw.save(str(out / "keras2_dw.h5"))

    img = rng.uniform(0, 1, (64, 8, 8, 1)).astype("float32")
    lab = (img.reshape(64, -1).mean(axis=1) > 0.5).astype("int64") + 2 * (img[:, 0, 0, 0] > 0.5)
    base = k.Sequential([k.layers.Input((8, 8, 1), name="image"), k.layers.Conv2D(4, 3, activation="relu"),
                         k.layers.Flatten(), k.layers.Dense(4), k.layers.Softmax(name="scores")])
    q = tfmot.quantization.keras.quantize_model(base)
    q.compile("adam", "sparse_categorical_crossentropy")
    q.fit(img, lab, epochs=2, batch_size=16, verbose=0)
    q.save(str(out / "qat"), save_format="tf")
    return {"keras2": str(out / "keras2"), "qat": str(out / "qat"), "h5": str(out / "keras2_dw.h5")}


def without_tf_keras(saved_model: str, commands: list[list[str]]) -> dict:
    import contextlib
    import io

    sys.modules["tf_keras"] = None  # type: ignore[assignment] -- `import tf_keras` now raises ImportError
    import tensorflow as tf

    try:
        tf.saved_model.load(saved_model)
        probe = None
    except Exception as e:  # noqa: BLE001
        probe = f"{type(e).__name__}: {e}"
    from edgebench.cli import _main

    runs = []
    for argv in commands:
        out, err = io.StringIO(), io.StringIO()
        code = 0
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                _main(argv)
            except SystemExit as e:
                code = e.code if isinstance(e.code, int) else 0
        runs.append({"code": code, "stdout": out.getvalue(), "stderr": err.getvalue()})
    return {"probe": probe, "runs": runs}


if __name__ == "__main__":
    if sys.argv[1] == "build":
        print(json.dumps(build(Path(sys.argv[2]))))
    elif sys.argv[1] == "without-tf-keras":
        print(json.dumps(without_tf_keras(sys.argv[2], json.loads(sys.argv[3]))))
    else:
        raise SystemExit(f"unknown mode {sys.argv[1]!r}")
