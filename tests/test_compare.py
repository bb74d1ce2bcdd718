"""Drift metrics, classification and detection agreement against hand-computed values."""

from __future__ import annotations

import math

import numpy as np
import pytest

from edgebench.judge import drift as cmp
from edgebench.core.errors import BadInput


def test_drift_hand_computed():
    ref = np.array([[0.0, 1.0], [2.0, 3.0]])
    got = np.array([[0.0, 1.5], [2.0, 2.0]])
    d = cmp.drift(ref, got)
    assert d["max_abs"] == 1.0
    assert d["mean_abs"] == pytest.approx(1.5 / 4)
    assert d["rmse"] == pytest.approx(math.sqrt((0.25 + 1.0) / 4))
    assert d["rel_l2"] == pytest.approx(math.sqrt(1.25) / math.sqrt(14))
    assert d["psnr_db"] == pytest.approx(20 * math.log10(3.0 / math.sqrt(1.25 / 4)))
    cos0 = (0 * 0 + 1 * 1.5) / (1 * 1.5)
    cos1 = (2 * 2 + 3 * 2) / (math.sqrt(13) * math.sqrt(8))
    assert d["cosine"] == pytest.approx((cos0 + cos1) / 2)
    assert d["cosine_min"] == pytest.approx(cos1)
    assert d["nan"] == 0 and d["inf"] == 0


def test_identical_outputs_give_infinite_psnr_and_unit_cosine():
    a = np.random.default_rng(0).normal(size=(5, 7))
    d = cmp.drift(a, a.copy())
    assert d["psnr_db"] == math.inf and d["cosine"] == pytest.approx(1.0) and d["max_abs"] == 0


def test_nan_outputs_are_counted_and_never_similar():
    ref = np.ones((2, 3))
    got = ref.copy()
    got[0, 1] = np.nan
    got[1, 2] = np.inf
    d = cmp.drift(ref, got)
    assert d["nan"] == 1 and d["inf"] == 1
    assert all(d[k] is None for k in cmp.DRIFT_KEYS)          # no number is honest here
    w = cmp.worst({"o": d, "fine": cmp.drift(ref, ref)})
    assert w["nonfinite"] == 2 and w["psnr_db"] is None and w["cosine"] is None


def test_all_nan_model_does_not_look_perfect():
    # Issue 18.4: an all-NaN model showed max_abs 0, PSNR inf and 100% agreement.
    ref = np.random.default_rng(0).normal(size=(6, 8))
    got = np.full_like(ref, np.nan)
    d = cmp.drift(ref, got)
    assert d["max_abs"] is None and d["psnr_db"] is None and d["cosine"] is None and d["nan"] == 48
    c = cmp.classification(ref, got, labels=ref.argmax(axis=1))
    assert c["top1_agreement"] == 0.0 and c["top1"] == 0.0 and c["nonfinite_samples"] == 6
    # a NaN in the reference makes the numbers meaningless too
    assert cmp.drift(got, ref)["psnr_db"] is None and cmp.drift(got, ref)["ref_nonfinite"] == 48


def test_shapes_must_agree_up_to_size_one_dims():
    # Audit W11: [N, 2, 5] vs [N, 10] has the same size but another layout -- never reshape it.
    ref = np.arange(20.0).reshape(2, 10)
    with pytest.raises(BadInput, match="not the same up to size-1 dimensions"):
        cmp.drift(ref, ref.reshape(2, 2, 5))
    with pytest.raises(BadInput, match="shapes differ"):
        cmp.drift(ref, ref.T.copy())
    d = cmp.drift(ref, ref.reshape(2, 1, 10))
    assert d["max_abs"] == 0.0
    assert cmp.drift(ref[:1], ref[:1].reshape(10, 1))["max_abs"] == 0.0


def test_no_top5_for_five_classes_or_fewer():
    ref = np.eye(5)[[0, 1, 2, 3, 4, 0]]
    got = np.eye(5)[[4, 3, 2, 1, 0, 1]]
    c = cmp.classification(ref, got, labels=np.arange(6) % 5)
    assert c["top5_agreement"] is None and c["top5"] is None and c["classes"] == 5
    assert c["top1_agreement"] == pytest.approx(1 / 6)
    six = cmp.classification(np.eye(6), np.eye(6)[::-1])
    assert six["top5_agreement"] == pytest.approx(5 / 6)   # computed again from 6 classes on


def test_nan_num_detections_costs_only_that_sample():
    # Audit R4: int(NaN) raised and lost the whole run.
    boxes = np.array([[[0, 0, 0.5, 0.5]], [[0.5, 0.5, 1, 1]]], np.float32)
    ref = {"boxes": boxes, "scores": np.array([[0.9], [0.8]]), "classes": np.array([[1], [2]]),
           "num_detections": np.array([1.0, 1.0])}
    got = {**ref, "num_detections": np.array([np.nan, 1.0])}
    d = cmp.detection(ref, got)
    assert d["invalid_num_detections"] == 1 and d["matched"] == 1
    assert d["box_agreement"] == 0.5


def test_shape_mismatch_and_missing_output():
    with pytest.raises(BadInput, match="shapes differ"):
        cmp.drift(np.zeros((2, 3)), np.zeros((2, 4)))
    with pytest.raises(BadInput, match="missing from the compared model .* neither order nor shape"):
        cmp.compare_outputs({"a": np.zeros((2, 3))}, {"b": np.zeros((2, 4))})


def test_classification_agreement_and_accuracy():
    ref = np.array([[0.9, 0.1, 0, 0, 0, 0], [0.1, 0.8, 0.1, 0, 0, 0], [0, 0, 1, 0, 0, 0], [0.2, 0.3, 0.5, 0, 0, 0]])
    got = np.array([[0.9, 0.1, 0, 0, 0, 0], [0.6, 0.3, 0.1, 0, 0, 0], [0, 0, 1, 0, 0, 0], [0.2, 0.3, 0.5, 0, 0, 0]])
    labels = np.array([0, 1, 2, 1])
    c = cmp.classification(ref, got, labels)
    assert c["top1_agreement"] == 0.75
    assert c["top5_agreement"] == 1.0
    assert c["top1"] == 0.5           # got argmax: 0,0,2,2 vs labels 0,1,2,1
    with pytest.raises(BadInput, match="3 labels for 4 samples"):
        cmp.classification(ref, got, labels[:3])
    with pytest.raises(BadInput, match="classes"):
        cmp.classification(ref, got, np.array([0, 1, 2, 9]))
    with pytest.raises(BadInput, match="class scores"):
        cmp.classification(np.zeros((4, 2, 2)), np.zeros((4, 2, 2)))


def test_pick_class_output():
    outs = {"scores": np.zeros((3, 10), np.float32), "emb": np.zeros((3, 4, 4), np.float32)}
    assert cmp.pick_class_output(outs, None) == "scores"
    with pytest.raises(BadInput, match="not .samples, classes."):
        cmp.pick_class_output(outs, "emb")
    assert cmp.pick_class_output({"a": np.zeros((3, 5)), "b": np.zeros((3, 5))}, None) is None


def test_detection_agreement_iou_matching():
    boxes = np.array([[[0, 0, 0.5, 0.5], [0.5, 0.5, 1, 1], [0, 0, 0, 0]]], np.float32)
    ref = {"boxes": boxes, "scores": np.array([[0.9, 0.8, 0.0]]), "classes": np.array([[1, 2, 0]]),
           "num_detections": np.array([2.0])}
    moved = boxes.copy()
    moved[0, 0] = [0.02, 0.02, 0.52, 0.52]   # IoU ~0.85 with the original
    got = {"boxes": moved, "scores": np.array([[0.85, 0.8, 0.0]]), "classes": np.array([[1, 3, 0]]),
           "num_detections": np.array([2.0])}
    d = cmp.detection(ref, got)
    assert d["matched"] == 1 and d["box_agreement"] == 0.5     # second box has another class
    assert d["score_mae"] == pytest.approx(0.05)
    empty = {k: v.copy() for k, v in ref.items()}
    empty["num_detections"] = np.array([0.0])
    assert cmp.detection(empty, empty)["box_agreement"] == 1.0


def test_align_outputs_by_name_then_order_and_shape_then_shape():
    a, b = np.zeros((3, 4)), np.ones((3, 2))
    got, m = cmp.align_outputs({"probs": a, "emb": b}, {"emb": b + 1, "probs": a + 1})
    assert m["how"] == "name" and got["probs"][0, 0] == 1 and got["emb"][0, 0] == 2
    # No names in common: reference names sorted, compared outputs in model order, sizes must agree.
    got, m = cmp.align_outputs({"logits": a, "emb": b}, {"StatefulPartitionedCall:0": b, "StatefulPartitionedCall:1": a})
    assert m == {"how": "order and shape", "pairs": {"logits": "StatefulPartitionedCall:1",
                                                     "emb": "StatefulPartitionedCall:0"}}
    assert got["logits"].shape == (3, 4) and got["emb"].shape == (3, 2)
    # Order disagrees with shape, but every size is unique: paired by shape.
    got, m = cmp.align_outputs({"a": a, "b": b}, {"x": b, "y": a})
    assert m == {"how": "shape", "pairs": {"a": "y", "b": "x"}}
    # One name matches; the rest by order.
    got, m = cmp.align_outputs({"probs": a, "logits": a}, {"probs": a, "add": a + 5})
    assert m["how"] == "name, then order and shape" and m["pairs"] == {"probs": "probs", "logits": "add"}
    assert cmp.compare_outputs({"probs": a, "logits": a}, {"probs": a, "add": a + 5})["logits"]["max_abs"] == 5
    # Ambiguous: same sizes in a different count -> refused, naming what is missing.
    with pytest.raises(BadInput, match="outputs a, b missing from the compared model"):
        cmp.align_outputs({"a": a, "b": a}, {"x": a, "y": a, "z": a})
