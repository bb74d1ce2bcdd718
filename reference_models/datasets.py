"""Real labelled data the reference models train and calibrate on: scikit-learn's digits with a
fixed train/test split (it ships inside the package, so nothing is downloaded)."""
from __future__ import annotations

import numpy as np

SPLIT_SEED = 0  # the train/test split is fixed across seeds so accuracies are comparable
TEST_FRACTION = 0.2


def load_split() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(x_train, y_train, x_test, y_test): float32 NHWC in [0, 1], int32 labels."""
    from sklearn.datasets import load_digits  # noqa: PLC0415
    from sklearn.model_selection import train_test_split  # noqa: PLC0415

    d = load_digits()
    x = (d.images / 16.0).astype(np.float32)[..., None]
    y = d.target.astype(np.int32)
    x_tr, x_te, y_tr, y_te = train_test_split(x, y, test_size=TEST_FRACTION, random_state=SPLIT_SEED, stratify=y)
    return x_tr, y_tr, x_te, y_te
