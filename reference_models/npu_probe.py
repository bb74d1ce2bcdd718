"""Small CNNs that probe NPU compilers (``edgebench readiness`` tests and
``scripts/readiness_table.py``): not reference models of ``edgebench models`` (no training, random
weights), just graphs whose op lists are known.

``mobilenet_like``: a stem convolution, depthwise-separable blocks (two with residual adds), global
average pooling, a dense layer and a softmax -- 16 builtin ops in FP32, 18 in INT8 with float I/O
(QUANTIZE and DEQUANTIZE at the ends), every one of them an op NPUs are built for.

``unsupported_ops_cnn``: convolutions around ATAN2, CUMSUM, BUCKETIZE and SIGN -- ops NPU
compilers lack or reject -- 21 builtin ops in INT8 with float I/O.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def mobilenet_like(seed: int = 0, size: int = 32):
    import tensorflow as tf

    tf.keras.utils.set_random_seed(seed)
    L = tf.keras.layers
    i = tf.keras.Input((size, size, 3), batch_size=1, name="image")
    x = L.Conv2D(8, 3, strides=2, padding="same", activation="relu6")(i)
    for filters, stride, residual in ((8, 1, False), (16, 2, False), (16, 1, True), (16, 1, True), (24, 2, False)):
        y = L.DepthwiseConv2D(3, strides=stride, padding="same", activation="relu6")(x)
        y = L.Conv2D(filters, 1)(y)
        x = L.Add()([x, y]) if residual else y
    x = L.GlobalAveragePooling2D()(x)
    x = L.Dense(10)(x)
    return tf.keras.Model(i, L.Softmax()(x), name="mobilenet_like")


def unsupported_ops_cnn(seed: int = 0, size: int = 16):
    import tensorflow as tf

    tf.keras.utils.set_random_seed(seed)
    L = tf.keras.layers

    class Unusual(L.Layer):
        """atan2, a running sum, bucketing and sign: ops an NPU compiler lacks or refuses."""

        def call(self, x):
            a = tf.math.atan2(x, x * 0.5 + 1.0)
            c = tf.math.cumsum(a, axis=-1)
            b = tf.cast(tf.raw_ops.Bucketize(input=c, boundaries=[-1.0, 0.0, 1.0]), tf.float32)
            return tf.math.sign(c) * b + a

    i = tf.keras.Input((size, size, 3), batch_size=1, name="image")
    x = L.Conv2D(8, 3, padding="same", activation="relu")(i)
    x = L.DepthwiseConv2D(3, padding="same", activation="relu")(x)
    x = L.Conv2D(8, 1)(x)
    x = Unusual()(x)
    x = L.GlobalAveragePooling2D()(x)
    return tf.keras.Model(i, L.Dense(4)(x), name="unsupported_ops_cnn")


BUILDERS = {"mobilenet_like": mobilenet_like, "unsupported_ops_cnn": unsupported_ops_cnn}


def export(name: str, out_dir: str | Path, seed: int = 0) -> dict[str, Any]:
    """A SavedModel of builder ``name`` (``out_dir/name``) and a calibration .npz beside it (seeded
    uniform [0, 1) images: calibration ranges, not accuracy, matter to a compile)."""
    import numpy as np

    model = BUILDERS[name](seed)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    saved = out / name
    model.export(str(saved), verbose=False)
    shape = (32, *model.inputs[0].shape[1:])
    data = out / f"{name}_calibration.npz"
    np.savez(data, image=np.random.default_rng(seed).random(shape, dtype=np.float32))
    return {"saved_model": str(saved), "data": str(data)}
