"""Tiny real .tflite models for the bench tests (built once per session with real TF).

fp32 conv net, full-int8 with int8 I/O, a two-input model, an int32-input model and a model
whose output is NaN for negative inputs. Kept tiny so the whole set builds in seconds.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def _convert(converter) -> bytes:
    return converter.convert()


def build_bench_models(out: Path) -> dict[str, Path]:
    """Write the fixture models into ``out`` and return name -> path."""
    import tensorflow as tf
    import keras

    out.mkdir(parents=True, exist_ok=True)
    paths: dict[str, Path] = {}
    keras.utils.set_random_seed(0)

    inp = keras.Input(shape=(8, 8, 1), name="image")
    x = keras.layers.Conv2D(4, 3, activation="relu")(inp)
    x = keras.layers.DepthwiseConv2D(3, activation="relu")(x)
    x = keras.layers.Flatten()(x)
    x = keras.layers.Dense(10, name="logits")(x)
    conv = keras.Model(inp, x)

    c = tf.lite.TFLiteConverter.from_keras_model(conv)
    paths["fp32"] = out / "conv_fp32.tflite"
    paths["fp32"].write_bytes(_convert(c))

    rng = np.random.default_rng(0)

    def rep():
        for _ in range(16):
            yield [rng.uniform(-1, 1, (1, 8, 8, 1)).astype(np.float32)]

    c = tf.lite.TFLiteConverter.from_keras_model(conv)
    c.optimizations = [tf.lite.Optimize.DEFAULT]
    c.representative_dataset = rep
    c.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    c.inference_input_type = tf.int8
    c.inference_output_type = tf.int8
    paths["int8"] = out / "conv_int8.tflite"
    paths["int8"].write_bytes(_convert(c))

    d_in = keras.Input(shape=(64,), name="features")
    dense = keras.Model(d_in, keras.layers.Dense(32)(d_in))  # >= 1024 weights, so they get quantized
    c = tf.lite.TFLiteConverter.from_keras_model(dense)
    c.optimizations = [tf.lite.Optimize.DEFAULT]  # dynamic range: int8 weights, float activations
    paths["dynamic"] = out / "conv_dynamic.tflite"
    paths["dynamic"].write_bytes(_convert(c))

    a = keras.Input(shape=(4,), name="a")
    b = keras.Input(shape=(3,), name="b")
    y = keras.layers.Dense(2, name="out")(keras.layers.Concatenate()([a, b]))
    two = keras.Model([a, b], y)
    c = tf.lite.TFLiteConverter.from_keras_model(two)
    paths["two_input"] = out / "two_input.tflite"
    paths["two_input"].write_bytes(_convert(c))

    class IntModel(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([1, 5], tf.int32, name="ids")])
        def __call__(self, ids):
            return {"total": tf.reduce_sum(ids * 2, axis=1, keepdims=True)}

    im = IntModel()
    c = tf.lite.TFLiteConverter.from_concrete_functions([im.__call__.get_concrete_function()], im)
    paths["int32"] = out / "int32_input.tflite"
    paths["int32"].write_bytes(_convert(c))

    class NanModel(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([1, 4], tf.float32, name="x")])
        def __call__(self, x):
            return {"y": tf.math.log(x)}

    nm = NanModel()
    c = tf.lite.TFLiteConverter.from_concrete_functions([nm.__call__.get_concrete_function()], nm)
    paths["nan"] = out / "nan_out.tflite"
    paths["nan"].write_bytes(_convert(c))
    return paths


@pytest.fixture(scope="session")
def bench_models(tmp_path_factory) -> dict[str, Path]:
    return build_bench_models(tmp_path_factory.mktemp("bench_models"))
