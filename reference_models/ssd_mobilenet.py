"""``ssd_mobilenet``: SSD with a MobileNetV2 backbone, box decoding and NMS (random weights).

Layout of the TF Object Detection API's ``ssd_mobilenet_v2`` (300x300): features from
MobileNetV2's ``block_13_expand_relu`` (stride 16, 19x19) and ``out_relu`` (stride 32, 10x10)
plus four extra stride-2 layers (5x5, 3x3, 2x2, 1x1); 3 anchors per location on the first map and
6 on the others = 1,917 anchors; 3x3 conv box/class heads; sigmoid class scores; the
faster-RCNN box coder (scales 10, 10, 5, 5); class-agnostic NMS (IoU 0.6, score threshold 1e-8,
100 detections) -- the "fast" NMS of TFLite's detection post-processing.

The exported ``serving_default`` signature takes ONE image (``image`` [1, H, W, 3], MobileNet
preprocessing, range [-1, 1]) because NMS is per image; outputs ``boxes`` [1, max_det, 4]
(ymin, xmin, ymax, xmax, normalised to [0, 1]), ``scores`` [1, max_det], ``classes`` [1, max_det]
(int32, 0-based object class, background excluded) and ``num_detections`` [1] (int32); rows past
``num_detections`` are zero. NMS (``NON_MAX_SUPPRESSION_V4``) has no integer kernel and stays
float in an INT8 model.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from reference_models import _export

TASK = "detection"
DESCRIPTION = "SSD + MobileNetV2 backbone, box decoding and NMS, random weights"
BUILDER_VERSION = 3  # 3: BN recalibration + head init on sample images (no NMS ties)
CONFIGS: dict[str, dict[str, Any]] = {
    "tiny": {"input_shape": [64, 64, 3], "alpha": 0.35, "classes": 4, "extra_layers": [],
             "anchors_per_location": [3, 3], "max_detections": 10, "iou_threshold": 0.6,
             "score_threshold": 1e-8, "calibration_samples": 50, "evaluation_samples": 32},
    "full": {"input_shape": [300, 300, 3], "alpha": 1.0, "classes": 91, "extra_layers": [512, 256, 256, 128],
             "anchors_per_location": [3, 6, 6, 6, 6, 6], "max_detections": 100, "iou_threshold": 0.6,
             "score_threshold": 1e-8, "calibration_samples": 100, "evaluation_samples": 32},
}
FEATURE_LAYERS = ("block_13_expand_relu", "out_relu")
BOX_SCALES = (10.0, 10.0, 5.0, 5.0)  # faster-RCNN box coder (y, x, h, w)
MIN_SCALE, MAX_SCALE = 0.2, 0.95  # SSD anchor scales (Liu et al. 2016)
PREPROCESS = "mobilenet"


def inputs(cfg: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"name": "image", "shape": [1, *cfg["input_shape"]], "dtype": "float32",
             "range": list(_export.MOBILENET_RANGE), "preprocess": PREPROCESS}]


def _feature_sizes(cfg: dict[str, Any]) -> list[int]:
    """Square feature-map sizes with 'same' padding: stride 16, stride 32, then /2 per extra layer."""
    h = cfg["input_shape"][0]
    sizes = [math.ceil(h / 16), math.ceil(h / 32)]
    for _ in cfg["extra_layers"]:
        sizes.append(math.ceil(sizes[-1] / 2))
    return sizes


def anchors(cfg: dict[str, Any]) -> np.ndarray:
    """[num_anchors, 4] (ycenter, xcenter, h, w), ordered (map, row, col, anchor) like the heads."""
    sizes = _feature_sizes(cfg)
    k = len(sizes)
    scales = [MIN_SCALE + (MAX_SCALE - MIN_SCALE) * i / max(1, k - 1) for i in range(k)] + [1.0]
    out = []
    for m, (size, per_loc) in enumerate(zip(sizes, cfg["anchors_per_location"])):
        s = scales[m]
        shapes = [(s, 1.0), (s, 2.0), (s, 0.5)]
        if per_loc == 6:
            shapes += [(s, 3.0), (s, 1.0 / 3.0), (math.sqrt(s * scales[m + 1]), 1.0)]
        shapes = shapes[:per_loc]
        for i in range(size):
            for j in range(size):
                for scale, ratio in shapes:
                    out.append(((i + 0.5) / size, (j + 0.5) / size, scale / math.sqrt(ratio), scale * math.sqrt(ratio)))
    return np.asarray(out, dtype=np.float32)


def build_keras(cfg: dict[str, Any], seed: int = 0):
    """Backbone + SSD heads: image [B, H, W, 3] -> ``ssd_head`` [B, anchors, 4 + classes]
    (box offsets, then class logits; no decoding, no NMS)."""
    import keras  # noqa: PLC0415
    from keras import layers  # noqa: PLC0415

    keras.utils.set_random_seed(seed)
    backbone = keras.applications.MobileNetV2(input_shape=tuple(cfg["input_shape"]), alpha=cfg["alpha"],
                                              include_top=False, weights=None)
    feats = [backbone.get_layer(n).output for n in FEATURE_LAYERS]
    x = feats[-1]
    for e, depth in enumerate(cfg["extra_layers"]):
        x = layers.Conv2D(depth // 2, 1, activation="relu6", name=f"extra_{e}_1x1")(x)
        x = layers.Conv2D(depth, 3, strides=2, padding="same", activation="relu6", name=f"extra_{e}_3x3")(x)
        feats.append(x)
    classes = cfg["classes"]
    boxes, logits = [], []
    for m, (f, per_loc) in enumerate(zip(feats, cfg["anchors_per_location"])):
        b = layers.Conv2D(per_loc * 4, 3, padding="same", name=f"box_head_{m}")(f)
        c = layers.Conv2D(per_loc * classes, 3, padding="same", name=f"class_head_{m}")(f)
        boxes.append(layers.Reshape((-1, 4), name=f"box_head_{m}_flat")(b))
        logits.append(layers.Reshape((-1, classes), name=f"class_head_{m}_flat")(c))
    box = layers.Concatenate(axis=1, name="box_offsets")(boxes)
    cls = layers.Concatenate(axis=1, name="class_logits")(logits)
    out = layers.Concatenate(axis=-1, name="ssd_head")([box, cls])
    return keras.Model(backbone.input, out, name="ssd_mobilenet_v2")


def training_loss(cfg: dict[str, Any]):
    """SSD multibox loss without hard-negative mining: Huber on positive anchors' box offsets +
    sigmoid cross-entropy on one-hot classes. y_true [B, A, 5] = 4 encoded box targets + class id
    (0 = background); y_pred = ``build_keras`` output."""
    import keras  # noqa: PLC0415
    from keras import ops  # noqa: PLC0415

    class SSDMultiboxLoss(keras.losses.Loss):
        def call(self, y_true, y_pred):
            cls_true = ops.cast(y_true[..., 4], "int32")
            positive = ops.cast(cls_true > 0, y_pred.dtype)
            err = ops.abs(y_true[..., :4] - y_pred[..., :4])
            huber = ops.sum(ops.where(err < 1.0, 0.5 * err * err, err - 0.5), axis=-1)
            loc = ops.sum(huber * positive, axis=-1) / ops.maximum(ops.sum(positive, axis=-1), 1.0)
            num_classes = y_pred.shape[-1] - 4  # static; the same loss serves every size
            onehot = ops.one_hot(cls_true, num_classes)
            ce = ops.mean(ops.binary_crossentropy(onehot, y_pred[..., 4:], from_logits=True), axis=(-2, -1))
            return loc + ce * num_classes

    return SSDMultiboxLoss(name="ssd_multibox")


def training_batch(cfg: dict[str, Any], batch_size: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Synthetic images and random targets (about 5% positive anchors; not real data)."""
    rng = np.random.default_rng(seed)
    x = _export.preprocessed_images(rng, batch_size, tuple(cfg["input_shape"]), PREPROCESS)
    n_anchors = len(anchors(cfg))
    cls = np.where(rng.random((batch_size, n_anchors)) < 0.05,
                   rng.integers(1, cfg["classes"], size=(batch_size, n_anchors)), 0).astype(np.float32)
    box = rng.normal(0.0, 1.0, size=(batch_size, n_anchors, 4)).astype(np.float32) * (cls[..., None] > 0)
    return x, np.concatenate([box, cls[..., None]], axis=-1).astype(np.float32)


def _spread_head_outputs(model, cfg: dict[str, Any], seed: int) -> None:
    """Data-dependent init of the random heads (as in weight-norm / LSUV init).

    A randomly initialised MobileNetV2 (BatchNorm statistics 0/1) shrinks activations layer
    by layer until class logits are ~1e-4: every sigmoid score is 0.5000, NMS ties everywhere
    and detections are decided by float rounding. First recalibrate every BatchNorm's moving
    statistics on sample images (one training-mode pass with momentum 0, as BN statistics of a
    trained network come from data), so activations keep a healthy scale; then rescale each
    head so class logits have std 2 around a prior of -1 (scores spread like a trained
    detector's) and box offsets std 0.5.
    """
    import keras  # noqa: PLC0415

    rng = np.random.default_rng(seed + 1)
    x = _export.preprocessed_images(rng, 16, tuple(cfg["input_shape"]), PREPROCESS)
    bns = [ly for ly in model.layers if isinstance(ly, keras.layers.BatchNormalization)]
    saved = [ly.momentum for ly in bns]
    for ly in bns:
        ly.momentum = 0.0
    model(x, training=True)
    for ly, m in zip(bns, saved):
        ly.momentum = m
    heads = [ly for ly in model.layers if ly.name.startswith(("class_head_", "box_head_")) and
             not ly.name.endswith("_flat")]
    probe = keras.Model(model.input, [ly.output for ly in heads])
    outs = probe.predict(x, verbose=0)
    for ly, out in zip(heads, outs):
        kernel, bias = ly.get_weights()
        std = float(np.std(out)) or 1e-12
        target, centre = (2.0, -1.0) if ly.name.startswith("class_head_") else (0.5, 0.0)
        ly.set_weights([kernel * (target / std), np.full_like(bias, centre)])


def build(cfg: dict[str, Any], seed: int, out_dir: Path) -> dict[str, Any]:
    import tensorflow as tf  # noqa: PLC0415

    model = build_keras(cfg, seed)
    _spread_head_outputs(model, cfg, seed)
    anchor_t = tf.constant(anchors(cfg))
    max_det = cfg["max_detections"]
    iou, score_thr = float(cfg["iou_threshold"]), float(cfg["score_threshold"])

    def serve(image):
        raw = model(image, training=False)[0]  # [A, 4 + C]; batch fixed at 1
        ty, tx, th, tw = tf.unstack(raw[:, :4] / tf.constant(BOX_SCALES), axis=-1)
        ya, xa, ha, wa = tf.unstack(anchor_t, axis=-1)
        yc, xc = ty * ha + ya, tx * wa + xa
        h, w = tf.exp(th) * ha, tf.exp(tw) * wa
        boxes = tf.clip_by_value(tf.stack([yc - h / 2, xc - w / 2, yc + h / 2, xc + w / 2], axis=-1), 0.0, 1.0)
        probs = tf.sigmoid(raw[:, 4:])[:, 1:]  # drop background
        best = tf.reduce_max(probs, axis=-1)
        cls = tf.cast(tf.argmax(probs, axis=-1), tf.int32)
        idx, num = tf.raw_ops.NonMaxSuppressionV4(
            boxes=boxes, scores=best, max_output_size=max_det, iou_threshold=iou, score_threshold=score_thr,
            pad_to_max_output_size=True)
        valid = tf.range(max_det) < num
        return {
            "boxes": tf.where(valid[:, None], tf.gather(boxes, idx), 0.0)[None],
            "scores": tf.where(valid, tf.gather(best, idx), 0.0)[None],
            "classes": tf.where(valid, tf.gather(cls, idx), 0)[None],
            "num_detections": tf.reshape(num, [1]),
        }

    _export.export_saved_model(model, serve, [tf.TensorSpec([1, *cfg["input_shape"]], tf.float32, name="image")],
                               out_dir / "saved_model")
    rng = np.random.default_rng(seed)
    shape = tuple(cfg["input_shape"])
    _export.save_npz(out_dir / "calibration.npz",
                     {"image": _export.preprocessed_images(rng, cfg["calibration_samples"], shape, PREPROCESS)})
    _export.save_npz(out_dir / "evaluation.npz",
                     {"image": _export.preprocessed_images(rng, cfg["evaluation_samples"], shape, PREPROCESS)})
    return {
        "class_output": None,
        "num_classes": cfg["classes"] - 1,
        "labels_real": False,
        "batch_size_fixed": 1,
        "num_anchors": int(anchor_t.shape[0]),
        "params": int(model.count_params()),
        "data_note": "synthetic smooth-noise images; random weights, no real boxes or labels; "
                     "one image per inference (NMS is per image)",
    }
