"""``resnet50``: ResNet-50 v1 (the keras.applications topology).

``tiny`` is trained at build time on scikit-learn's digits upscaled to 32x32x3 (real labels;
~11 s on 2 cores); ``full`` keeps random weights.

Written with Keras layers so that the tiny size can keep the exact block structure (7x7 stem,
bottleneck blocks with 4x expansion, conv shortcut in each stage's first block) at a fraction of
the width and depth; ``full`` (base width 64, blocks 3-4-6-3, 224x224x3, 1000 classes) has exactly
the parameter count of ``keras.applications.ResNet50(weights=None)`` (25,636,712; tested).
Input: ``image``, ImageNet "caffe" preprocessing (BGR, mean-subtracted, range about [-123.7, 151.1]).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from reference_models import _export

TASK = "classification"
DESCRIPTION = "ResNet-50 v1, keras.applications topology (tiny: trained on upscaled digits; full: random weights)"
BUILDER_VERSION = 2
CONFIGS: dict[str, dict[str, Any]] = {
    "tiny": {"input_shape": [32, 32, 3], "classes": 10, "width": 16, "blocks": [1, 1, 1, 1],
             "calibration_samples": 100, "evaluation_samples": 360,
             # trained at build time on scikit-learn's digits upscaled to 32x32x3 (real labels)
             "train": {"epochs": 4, "batch_size": 64, "learning_rate": 3e-3}},
    "full": {"input_shape": [224, 224, 3], "classes": 1000, "width": 64, "blocks": [3, 4, 6, 3],
             "calibration_samples": 100, "evaluation_samples": 32},
}
PREPROCESS = "imagenet-caffe"


def inputs(cfg: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"name": "image", "shape": [None, *cfg["input_shape"]], "dtype": "float32",
             "range": [round(v, 3) for v in _export.CAFFE_RANGE], "preprocess": PREPROCESS}]


def _block(x, filters: int, stride: int, conv_shortcut: bool, name: str):
    """keras.applications.resnet.residual_block_v1 (bottleneck, 4x expansion, BN eps 1.001e-5)."""
    from keras import layers  # noqa: PLC0415

    if conv_shortcut:
        shortcut = layers.Conv2D(4 * filters, 1, strides=stride, name=name + "_0_conv")(x)
        shortcut = layers.BatchNormalization(epsilon=1.001e-5, name=name + "_0_bn")(shortcut)
    else:
        shortcut = x
    x = layers.Conv2D(filters, 1, strides=stride, name=name + "_1_conv")(x)
    x = layers.BatchNormalization(epsilon=1.001e-5, name=name + "_1_bn")(x)
    x = layers.Activation("relu", name=name + "_1_relu")(x)
    x = layers.Conv2D(filters, 3, padding="same", name=name + "_2_conv")(x)
    x = layers.BatchNormalization(epsilon=1.001e-5, name=name + "_2_bn")(x)
    x = layers.Activation("relu", name=name + "_2_relu")(x)
    x = layers.Conv2D(4 * filters, 1, name=name + "_3_conv")(x)
    x = layers.BatchNormalization(epsilon=1.001e-5, name=name + "_3_bn")(x)
    x = layers.Add(name=name + "_add")([shortcut, x])
    return layers.Activation("relu", name=name + "_out")(x)


def build_keras(cfg: dict[str, Any], seed: int = 0):
    """ResNet-50 v1: image -> softmax ``scores`` (cfg classes)."""
    import keras  # noqa: PLC0415
    from keras import layers  # noqa: PLC0415

    keras.utils.set_random_seed(seed)
    inp = keras.Input(tuple(cfg["input_shape"]), name="image")
    x = layers.ZeroPadding2D(3, name="conv1_pad")(inp)
    x = layers.Conv2D(cfg["width"], 7, strides=2, name="conv1_conv")(x)
    x = layers.BatchNormalization(epsilon=1.001e-5, name="conv1_bn")(x)
    x = layers.Activation("relu", name="conv1_relu")(x)
    x = layers.ZeroPadding2D(1, name="pool1_pad")(x)
    x = layers.MaxPooling2D(3, strides=2, name="pool1_pool")(x)
    for stage, blocks in enumerate(cfg["blocks"]):
        filters = cfg["width"] * 2 ** stage
        for b in range(blocks):
            stride = (1 if stage == 0 else 2) if b == 0 else 1
            x = _block(x, filters, stride, conv_shortcut=(b == 0), name=f"conv{stage + 2}_block{b + 1}")
    x = layers.GlobalAveragePooling2D(name="avg_pool")(x)
    out = layers.Dense(cfg["classes"], activation="softmax", name="predictions")(x)
    return keras.Model(inp, out, name="resnet50")


def training_loss(cfg: dict[str, Any]):
    return _export.image_classifier_loss()


def training_batch(cfg: dict[str, Any], batch_size: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """tiny: the upscaled digits with real labels; full: synthetic images and random labels."""
    if cfg.get("train"):
        return _export.digits_training_batch(cfg, batch_size, seed, PREPROCESS)
    return _export.image_training_batch(cfg, batch_size, seed, PREPROCESS)


def build(cfg: dict[str, Any], seed: int, out_dir: Path) -> dict[str, Any]:
    return _export.build_image_classifier(build_keras(cfg, seed), cfg, seed, out_dir, PREPROCESS)
