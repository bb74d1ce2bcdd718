"""``mobilenetv2``: ``keras.applications.MobileNetV2(weights=None)``.

``tiny`` is trained at build time on scikit-learn's digits upscaled to 32x32x3 (real labels, so
its INT8 drop is a real accuracy drop; ~30 s on 2 cores); ``full`` keeps random weights.

``full``: 224x224x3, alpha 1.0, 1000 classes (3,538,984 parameters). ``tiny``: 32x32x3,
alpha 0.35, 10 classes. Input: ``image`` with MobileNet preprocessing (range [-1, 1]).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from reference_models import _export

TASK = "classification"
DESCRIPTION = "keras.applications.MobileNetV2 (tiny: trained on upscaled digits; full: random weights)"
BUILDER_VERSION = 2
CONFIGS: dict[str, dict[str, Any]] = {
    "tiny": {"input_shape": [32, 32, 3], "classes": 10, "alpha": 0.35,
             "calibration_samples": 100, "evaluation_samples": 360,
             # trained at build time on scikit-learn's digits upscaled to 32x32x3 (real labels)
             "train": {"epochs": 6, "batch_size": 64, "learning_rate": 5e-3}},
    "full": {"input_shape": [224, 224, 3], "classes": 1000, "alpha": 1.0,
             "calibration_samples": 100, "evaluation_samples": 32},
}
PREPROCESS = "mobilenet"


def inputs(cfg: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"name": "image", "shape": [None, *cfg["input_shape"]], "dtype": "float32",
             "range": list(_export.MOBILENET_RANGE), "preprocess": PREPROCESS}]


def build_keras(cfg: dict[str, Any], seed: int = 0):
    """MobileNetV2: image -> softmax ``scores`` (cfg classes)."""
    import keras  # noqa: PLC0415

    keras.utils.set_random_seed(seed)
    return keras.applications.MobileNetV2(input_shape=tuple(cfg["input_shape"]), alpha=cfg["alpha"],
                                          weights=None, classes=cfg["classes"])


def training_loss(cfg: dict[str, Any]):
    return _export.image_classifier_loss()


def training_batch(cfg: dict[str, Any], batch_size: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """tiny: the upscaled digits with real labels; full: synthetic images and random labels."""
    if cfg.get("train"):
        return _export.digits_training_batch(cfg, batch_size, seed, PREPROCESS)
    return _export.image_training_batch(cfg, batch_size, seed, PREPROCESS)


def build(cfg: dict[str, Any], seed: int, out_dir: Path) -> dict[str, Any]:
    return _export.build_image_classifier(build_keras(cfg, seed), cfg, seed, out_dir, PREPROCESS)
