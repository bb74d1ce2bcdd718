"""Export and data helpers shared by the reference-model builders.

Every builder exports through ``keras.export.ExportArchive`` with an explicit input signature
and a dict of named outputs: that is the route that gives stable signature names in the
SavedModel *and* in the converted ``.tflite`` (a plain ``tf.saved_model.save`` of a Keras 3
model leaves ``VAR_HANDLE``/``READ_VARIABLE`` ops that break INT8 calibration).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import numpy as np

from reference_models.datasets import load_split

# Part of every build's cache key: bump when the export format changes.
EXPORT_VERSION = 2


def export_saved_model(model: Any, fn: Callable[..., dict], input_signature: list, out_dir: Path) -> None:
    """Write ``fn`` (a function of named tensors returning a dict of named tensors, calling
    ``model``) as the ``serving_default`` signature of a SavedModel at ``out_dir``.

    Each ``tf.TensorSpec`` in ``input_signature`` must carry the input's ``name``; the keys of the
    returned dict are the output names. The variables the endpoint uses are saved automatically;
    ``archive.track(model)`` is deliberately NOT called: in Keras 3.15 it stores every weight a
    second time (the Keras variables beside the captured ``tf.Variable``s), doubling the
    SavedModel's size.
    """
    import keras  # noqa: PLC0415

    del model  # captured by ``fn``; see above
    archive = keras.export.ExportArchive()
    # The first endpoint also becomes "serving_default".
    archive.add_endpoint(name="serve", fn=fn, input_signature=input_signature)
    archive.write_out(str(out_dir), verbose=False)


def save_npz(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """Write arrays uncompressed (fast to load, no pickles) and atomically."""
    tmp = path.with_name(path.name + ".tmp.npz")
    np.savez(tmp, **{k: np.ascontiguousarray(v) for k, v in arrays.items()})
    tmp.replace(path)


def smooth_images(rng: np.random.Generator, n: int, h: int, w: int, c: int, lo: float, hi: float,
                  cell: int = 8) -> np.ndarray:
    """Seeded synthetic images with image-like (low-frequency) structure in [lo, hi], float32.

    Smooth random fields (bilinearly upsampled coarse noise) plus fine noise: closer to the
    statistics of photographs than i.i.d. uniform noise, so INT8 calibration ranges are sane.
    These are NOT real images and carry no labels.
    """
    gh, gw = max(2, h // cell + 1), max(2, w // cell + 1)
    coarse = rng.random((n, gh, gw, c), dtype=np.float32)
    ys = np.linspace(0, gh - 1, h, dtype=np.float32)
    xs = np.linspace(0, gw - 1, w, dtype=np.float32)
    y0 = np.clip(np.floor(ys).astype(int), 0, gh - 2)
    x0 = np.clip(np.floor(xs).astype(int), 0, gw - 2)
    fy = (ys - y0)[None, :, None, None]
    fx = (xs - x0)[None, None, :, None]
    top = coarse[:, y0][:, :, x0] * (1 - fx) + coarse[:, y0][:, :, x0 + 1] * fx
    bot = coarse[:, y0 + 1][:, :, x0] * (1 - fx) + coarse[:, y0 + 1][:, :, x0 + 1] * fx
    img = top * (1 - fy) + bot * fy
    img = 0.85 * img + 0.15 * rng.random((n, h, w, c), dtype=np.float32)
    return (lo + img * (hi - lo)).astype(np.float32)


def synthetic_labels(rng: np.random.Generator, n: int, num_classes: int) -> np.ndarray:
    """Random int32 class labels -- for training-throughput baselines only (not real labels)."""
    return rng.integers(0, num_classes, size=(n,), dtype=np.int32)


# Per-channel means of the "imagenet-caffe" preprocessing (keras.applications.resnet50
# .preprocess_input: RGB->BGR, subtract the ImageNet BGR means, no scaling).
CAFFE_BGR_MEANS = (103.939, 116.779, 123.68)
CAFFE_RANGE = (-123.68, 255.0 - 103.939)
MOBILENET_RANGE = (-1.0, 1.0)


def preprocessed_images(rng: np.random.Generator, n: int, shape: tuple[int, int, int], preprocess: str) -> np.ndarray:
    """Synthetic [0, 255] RGB images passed through ``preprocess`` ("imagenet-caffe" | "mobilenet")."""
    h, w, c = shape
    px = smooth_images(rng, n, h, w, c, 0.0, 255.0)
    if preprocess == "imagenet-caffe":
        return (px[..., ::-1] - np.asarray(CAFFE_BGR_MEANS, np.float32)).astype(np.float32)
    if preprocess == "mobilenet":
        return (px / 127.5 - 1.0).astype(np.float32)
    raise ValueError(f"unknown preprocess {preprocess!r}")


def export_image_classifier(model: Any, input_shape: tuple[int, int, int], seed: int, out_dir: Path,
                            cfg: dict[str, Any], preprocess: str) -> dict[str, Any]:
    """Export an image classifier (input ``image``, output ``scores``) with synthetic input sets."""
    import tensorflow as tf  # noqa: PLC0415

    export_saved_model(
        model,
        lambda image: {"scores": model(image, training=False)},
        [tf.TensorSpec([None, *input_shape], tf.float32, name="image")],
        out_dir / "saved_model",
    )
    rng = np.random.default_rng(seed)
    save_npz(out_dir / "calibration.npz",
             {"image": preprocessed_images(rng, cfg["calibration_samples"], input_shape, preprocess)})
    save_npz(out_dir / "evaluation.npz",
             {"image": preprocessed_images(rng, cfg["evaluation_samples"], input_shape, preprocess)})
    return {
        "class_output": "scores",
        "num_classes": cfg["classes"],
        "labels_real": False,
        "data_note": "synthetic smooth-noise images in the preprocessed input range; random weights, no real labels",
    }


def image_classifier_loss():
    """Loss for the softmax image classifiers (resnet50, mobilenetv2)."""
    import keras  # noqa: PLC0415

    return keras.losses.SparseCategoricalCrossentropy(from_logits=False)


def image_training_batch(cfg: dict, batch_size: int, seed: int, preprocess: str):
    """Synthetic preprocessed images and random labels (throughput baselines; not real data)."""
    rng = np.random.default_rng(seed)
    x = preprocessed_images(rng, batch_size, tuple(cfg["input_shape"]), preprocess)
    return x, synthetic_labels(rng, batch_size, cfg["classes"])


def build_image_classifier(model, cfg: dict, seed: int, out_dir, preprocess: str) -> dict:
    """Export an image classifier with its calibration/evaluation sets; adds the parameter count.
    A config with ``train`` is first trained on the upscaled digits (``train_on_digits``)."""
    if cfg.get("train"):
        extras = train_on_digits(model, cfg, seed, out_dir, preprocess)
    else:
        extras = export_image_classifier(model, tuple(cfg["input_shape"]), seed, out_dir, cfg, preprocess)
    return {**extras, "params": int(model.count_params())}


# --------------------------------------------------------------------------- real labelled data

# BatchNormalization momentum while training on the digits: keras.applications' 0.999 leaves the
# moving statistics far from the data after the ~150 steps of a tiny build (test top-1 ~10 %);
# 0.9 converges in that budget.
TRAIN_BN_MOMENTUM = 0.9


def digits_images(shape: tuple[int, int, int], preprocess: str):
    """scikit-learn's digits (the ``digits`` reference model's fixed split) bilinearly upscaled to
    ``shape`` (grey repeated on 3 channels) and passed through ``preprocess``:
    (x_train, y_train, x_test, y_test)."""
    import tensorflow as tf  # noqa: PLC0415

    h, w, c = shape
    x_tr, y_tr, x_te, y_te = load_split()

    def prep(x: np.ndarray) -> np.ndarray:
        px = tf.image.resize(x, (h, w), method="bilinear").numpy().clip(0.0, 1.0) * 255.0
        px = np.repeat(px, c, axis=-1) if c != 1 else px
        if preprocess == "imagenet-caffe":
            return (px[..., ::-1] - np.asarray(CAFFE_BGR_MEANS, np.float32)).astype(np.float32)
        if preprocess == "mobilenet":
            return (px / 127.5 - 1.0).astype(np.float32)
        raise ValueError(f"unknown preprocess {preprocess!r}")

    return prep(x_tr), y_tr, prep(x_te), y_te


def train_on_digits(model: Any, cfg: dict[str, Any], seed: int, out_dir: Path, preprocess: str) -> dict[str, Any]:
    """Train ``model`` on the upscaled digits (``cfg["train"]``: epochs, batch_size, learning_rate;
    Adam with cosine decay), export it, and write the real splits: evaluation = the 360 test images
    with labels, calibration = training images."""
    import keras  # noqa: PLC0415

    tr = cfg["train"]
    x_tr, y_tr, x_te, y_te = digits_images(tuple(cfg["input_shape"]), preprocess)
    for layer in model.layers:
        if isinstance(layer, keras.layers.BatchNormalization):
            layer.momentum = TRAIN_BN_MOMENTUM
    steps = tr["epochs"] * -(-len(x_tr) // tr["batch_size"])
    lr = keras.optimizers.schedules.CosineDecay(tr["learning_rate"], decay_steps=steps)
    model.compile(optimizer=keras.optimizers.Adam(lr), loss=image_classifier_loss())
    model.fit(x_tr, y_tr, epochs=tr["epochs"], batch_size=tr["batch_size"], shuffle=True, verbose=0)
    scores = np.asarray(model.predict(x_te, batch_size=256, verbose=0))
    import tensorflow as tf  # noqa: PLC0415

    export_saved_model(model, lambda image: {"scores": model(image, training=False)},
                       [tf.TensorSpec([None, *cfg["input_shape"]], tf.float32, name="image")], out_dir / "saved_model")
    rng = np.random.default_rng(seed)
    cal_idx = np.sort(rng.choice(len(x_tr), size=cfg["calibration_samples"], replace=False))
    save_npz(out_dir / "calibration.npz", {"image": x_tr[cal_idx]})
    save_npz(out_dir / "evaluation.npz", {"image": x_te, "labels": y_te})
    return {
        "class_output": "scores",
        "num_classes": cfg["classes"],
        "labels_real": True,
        "dataset": f"sklearn.datasets.load_digits upscaled to {'x'.join(map(str, cfg['input_shape']))} "
                   f"({len(x_tr)} training / {len(x_te)} test images, 10 classes)",
        "train_samples": int(len(x_tr)),
        "test_samples": int(len(x_te)),
        "test_accuracy": float(np.mean(np.argmax(scores, axis=1) == y_te)),
    }


def digits_training_batch(cfg: dict, batch_size: int, seed: int, preprocess: str):
    """A seeded batch of the upscaled digits with their real labels (sampled with replacement)."""
    x_tr, y_tr, _, _ = digits_images(tuple(cfg["input_shape"]), preprocess)
    idx = np.random.default_rng(seed).integers(0, len(x_tr), size=batch_size)
    return x_tr[idx], y_tr[idx]
