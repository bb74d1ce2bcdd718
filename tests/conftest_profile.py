"""A real model whose INT8 variant falls off XNNPACK: keras PReLU, converted at test time.

XNNPACK has an FP32 PReLU but no int8 PRELU kernel, so the FP32 model runs as one XNNPACK
partition and the INT8 model leaves both PRELU nodes to the CPU interpreter, splitting the rest
into three partitions -- the shape of the real regression issue 15 starts from. The convolutions
are wide enough (32x32x16/32) that every op takes tens of microseconds: the profiler's 1 us
resolution then costs well under 5 % of the sum.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

SHAPE = (32, 32, 3)


def build_prelu_models(out: Path) -> dict[str, Path]:
    import keras
    import tensorflow as tf

    out.mkdir(parents=True, exist_ok=True)
    keras.utils.set_random_seed(0)
    inp = keras.Input(shape=SHAPE, name="image")
    x = keras.layers.Conv2D(16, 3, padding="same")(inp)
    x = keras.layers.PReLU(shared_axes=[1, 2])(x)
    x = keras.layers.Conv2D(32, 3, padding="same")(x)
    x = keras.layers.PReLU(shared_axes=[1, 2])(x)
    x = keras.layers.GlobalAveragePooling2D()(x)
    x = keras.layers.Dense(10, name="logits")(x)
    model = keras.Model(inp, x)
    paths = {"savedmodel": out / "prelu_savedmodel"}
    model.export(str(paths["savedmodel"]), verbose=False)
    paths["fp32"] = out / "prelu_fp32.tflite"
    paths["fp32"].write_bytes(tf.lite.TFLiteConverter.from_keras_model(model).convert())
    rng = np.random.default_rng(0)

    def rep():
        for _ in range(16):
            yield [rng.uniform(0, 1, (1, *SHAPE)).astype(np.float32)]

    c = tf.lite.TFLiteConverter.from_keras_model(model)
    c.optimizations = [tf.lite.Optimize.DEFAULT]
    c.representative_dataset = rep
    c.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    paths["int8"] = out / "prelu_int8.tflite"
    paths["int8"].write_bytes(c.convert())
    paths["data"] = out / "prelu_data.npz"
    np.savez(paths["data"], image=np.random.default_rng(1).uniform(0, 1, (32, *SHAPE)).astype(np.float32))
    return paths


@pytest.fixture(scope="session")
def prelu_models(session_tmp: Path) -> dict[str, Path]:
    return build_prelu_models(session_tmp / "prelu")


def software_gpu_env() -> dict[str, str] | None:
    """The environment scripts/software_gpu wrote (``$EDGEBENCH_SOFTWARE_GPU/env.sh``), or None."""
    root = os.environ.get("EDGEBENCH_SOFTWARE_GPU")
    if not root or not (Path(root) / "lvp_icd.json").is_file():
        return None
    lib = next((p.parent for p in (Path(root) / "root").rglob("libvulkan_lvp.so")), None)
    if lib is None:
        return None
    return {"VK_ICD_FILENAMES": str(Path(root) / "lvp_icd.json"),
            "LD_LIBRARY_PATH": f"{lib}:{os.environ.get('LD_LIBRARY_PATH', '')}".rstrip(":"),
            "XDG_RUNTIME_DIR": os.environ.get("XDG_RUNTIME_DIR", "/tmp")}
