"""Drift between two sets of outputs, classification agreement/accuracy, detection agreement.

Definitions (also in the README):

* ``max_abs``/``mean_abs``: max / mean of |got - ref| over every element of every sample.
* ``rmse``: sqrt(mean((got - ref)^2)).
* ``rel_l2``: ||got - ref||_2 / ||ref||_2 over the whole tensor (0 when both are zero).
* ``cosine``: cosine similarity of each sample's flattened output, averaged over samples;
  ``cosine_min`` is the worst sample. A zero vector against a zero vector counts as 1.
* ``psnr_db``: 20*log10(peak / rmse) with peak = max(ref) - min(ref) (the reference's dynamic
  range; 1.0 when the reference is constant); ``inf`` when the outputs are identical.
* ``nan``/``inf``: counts of non-finite values in ``got`` (any > 0 fails every gate).
* Classification: ``top1_agreement`` = share of samples whose argmax matches the reference's;
  ``top5_agreement`` = share whose reference top-1 class is in got's top 5; ``top1`` = accuracy
  against real labels; ``top1_drop_pp`` = (reference top1 - top1) * 100.
* Detection: per sample, reference detections (score >= threshold, first num_detections) are
  greedily matched to got's by IoU >= 0.5 with the same class; ``box_agreement`` = matched /
  max(#ref, #got) averaged over samples (1 when both are empty); ``score_mae`` over matched pairs.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from edgebench.errors import BadInput


def drift(ref: np.ndarray, got: np.ndarray) -> dict[str, Any]:
    """Drift metrics of one output tensor ([N, ...] both)."""
    ref = np.asarray(ref, np.float64)
    got = np.asarray(got, np.float64)
    if ref.shape != got.shape:
        if ref.size == got.size:
            got = got.reshape(ref.shape)
        else:
            raise BadInput(f"output shapes differ: {list(got.shape)} vs reference {list(ref.shape)}; "
                           "compare models with the same signature")
    nan = int(np.isnan(got).sum())
    inf = int(np.isinf(got).sum())
    mask = np.isfinite(got) & np.isfinite(ref)
    d = np.where(mask, got - ref, 0.0)
    n = max(int(mask.sum()), 1)
    mse = float((d ** 2).sum() / n)
    rmse = math.sqrt(mse)
    ref_f = np.where(mask, ref, 0.0)
    ref_norm = float(np.sqrt((ref_f ** 2).sum()))
    diff_norm = float(np.sqrt((d ** 2).sum()))
    rel_l2 = 0.0 if diff_norm == 0 else (diff_norm / ref_norm if ref_norm > 0 else math.inf)
    finite_ref = ref[np.isfinite(ref)]
    peak = float(finite_ref.max() - finite_ref.min()) if finite_ref.size else 1.0
    if peak == 0:
        peak = 1.0
    psnr = math.inf if rmse == 0 else 20 * math.log10(peak / rmse)
    # per-sample cosine
    a = ref_f.reshape(ref.shape[0], -1) if ref.ndim else ref_f.reshape(1, -1)
    b = np.where(mask, got, 0.0).reshape(a.shape)
    na = np.linalg.norm(a, axis=1)
    nb = np.linalg.norm(b, axis=1)
    both_zero = (na == 0) & (nb == 0)
    denom = np.where(na * nb == 0, 1.0, na * nb)
    cos = np.where(both_zero, 1.0, (a * b).sum(axis=1) / denom)
    cos = np.where((na * nb == 0) & ~both_zero, 0.0, cos)
    if nan or inf:
        cos = np.minimum(cos, 0.0)  # non-finite output is never "similar"
    return {
        "max_abs": float(np.abs(d).max()) if d.size else 0.0,
        "mean_abs": float(np.abs(d).sum() / n),
        "rmse": rmse,
        "rel_l2": rel_l2,
        "cosine": float(cos.mean()) if cos.size else 1.0,
        "cosine_min": float(cos.min()) if cos.size else 1.0,
        "psnr_db": psnr,
        "nan": nan,
        "inf": inf,
        "elements": int(got.size),
    }


def _sample_size(a: np.ndarray) -> int:
    return int(np.prod(np.shape(a)[1:], dtype=np.int64))


def align_outputs(ref: dict[str, np.ndarray], got: dict[str, np.ndarray]) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """``got``'s outputs keyed by the reference's names, and how they were paired.

    By name first. Reference outputs left over (e.g. a .tflite without a signature names its
    outputs ``StatefulPartitionedCall:0``) pair with the compared model's leftovers by order --
    reference names sorted (the order TF flattens a signature's outputs), compared outputs in
    model order -- when every pair has the same per-sample size; else by shape when each size
    is unique. ``how``: "name", "order and shape", "shape", or "name, then ..." when mixed.
    Raises BadInput when no pairing is unambiguous.
    """
    pairs = {k: k for k in ref if k in got}
    rest_ref = sorted(k for k in ref if k not in got)
    rest_got = [k for k in got if k not in pairs]
    how = "name"
    if rest_ref:
        sizes_ref = [_sample_size(ref[k]) for k in rest_ref]
        sizes_got = [_sample_size(got[k]) for k in rest_got]
        if len(rest_ref) == len(rest_got) and sizes_ref == sizes_got:
            pairs.update(zip(rest_ref, rest_got))
            how = "order and shape"
        else:
            unique = {s: k for s, k in zip(sizes_got, rest_got) if sizes_got.count(s) == 1}
            matched = {r: unique[s] for r, s in zip(rest_ref, sizes_ref) if sizes_ref.count(s) == 1 and s in unique}
            if len(matched) != len(rest_ref):
                missing = [k for k in rest_ref if k not in matched]
                raise BadInput(f"outputs {', '.join(missing)} missing from the compared model (has "
                               f"{', '.join(got) or 'none'}) and neither order nor shape pairs them; compare "
                               "models with the same outputs")
            pairs.update(matched)
            how = "shape"
        if len(pairs) > len(rest_ref):
            how = f"name, then {how}"
    aligned = {k: got[pairs[k]] for k in ref}
    return aligned, {"how": how, "pairs": {k: pairs[k] for k in ref}}


def compare_outputs(ref: dict[str, np.ndarray], got: dict[str, np.ndarray]) -> dict[str, dict[str, Any]]:
    """Drift per reference output; outputs are paired as ``align_outputs`` does (BadInput if not)."""
    aligned, _ = align_outputs(ref, got)
    return {k: drift(ref[k], aligned[k]) for k in ref}


def worst(drifts: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Worst-output PSNR and cosine, and whether any output had NaN/Inf."""
    if not drifts:
        return {"psnr_db": None, "cosine": None, "nonfinite": 0}
    return {
        "psnr_db": min(d["psnr_db"] for d in drifts.values()),
        "psnr_output": min(drifts, key=lambda k: drifts[k]["psnr_db"]),
        "cosine": min(d["cosine"] for d in drifts.values()),
        "nonfinite": sum(d["nan"] + d["inf"] for d in drifts.values()),
    }


def looks_like_class_scores(a: np.ndarray) -> bool:
    return a.ndim == 2 and a.shape[1] >= 2 and np.issubdtype(a.dtype, np.floating)


def pick_class_output(outputs: dict[str, np.ndarray], declared: str | None) -> str | None:
    """The class-score output: the declared one, else the only [N, C>=2] float output."""
    if declared:
        if declared not in outputs:
            raise BadInput(f"--class-output {declared}: no such output (have {', '.join(outputs)})")
        if not looks_like_class_scores(outputs[declared]):
            raise BadInput(f"--class-output {declared}: shape {list(outputs[declared].shape)} is not "
                           "[samples, classes] class scores; pick a classification output")
        return declared
    cands = [k for k, v in outputs.items() if looks_like_class_scores(v)]
    return cands[0] if len(cands) == 1 else None


def classification(ref: np.ndarray, got: np.ndarray, labels: np.ndarray | None = None) -> dict[str, Any]:
    """Top-1/top-5 agreement with the reference and, with labels, task top-1 accuracy."""
    ref = np.asarray(ref)
    got = np.asarray(got, np.float64)
    if not looks_like_class_scores(ref):
        raise BadInput(f"top-k needs class scores [samples, classes]; output shape {list(ref.shape)} is not; "
                       "pass --class-output NAME or drop the accuracy options")
    got = np.where(np.isfinite(got), got, -np.inf)
    ref_top1 = ref.argmax(axis=1)
    got_top1 = got.argmax(axis=1)
    k = min(5, got.shape[1])
    got_top5 = np.argsort(-got, axis=1, kind="stable")[:, :k]
    out: dict[str, Any] = {
        "top1_agreement": float((ref_top1 == got_top1).mean()),
        "top5_agreement": float((got_top5 == ref_top1[:, None]).any(axis=1).mean()),
        "samples": int(ref.shape[0]),
    }
    if labels is not None:
        labels = np.asarray(labels).reshape(-1)
        if labels.shape[0] != got.shape[0]:
            raise BadInput(f"{labels.shape[0]} labels for {got.shape[0]} samples; give one label per sample")
        if labels.size and (labels.min() < 0 or labels.max() >= got.shape[1]):
            raise BadInput(f"labels span [{labels.min()}, {labels.max()}] but the model has {got.shape[1]} "
                           "classes; check the label encoding")
        out["top1"] = float((got_top1 == labels).mean())
        out["top5"] = float((got_top5 == labels[:, None]).any(axis=1).mean())
    return out


def _iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """IoU matrix between boxes [n,4] and [m,4] given as (ymin, xmin, ymax, xmax)."""
    y1 = np.maximum(a[:, None, 0], b[None, :, 0])
    x1 = np.maximum(a[:, None, 1], b[None, :, 1])
    y2 = np.minimum(a[:, None, 2], b[None, :, 2])
    x2 = np.minimum(a[:, None, 3], b[None, :, 3])
    inter = np.clip(y2 - y1, 0, None) * np.clip(x2 - x1, 0, None)
    area_a = np.clip(a[:, 2] - a[:, 0], 0, None) * np.clip(a[:, 3] - a[:, 1], 0, None)
    area_b = np.clip(b[:, 2] - b[:, 0], 0, None) * np.clip(b[:, 3] - b[:, 1], 0, None)
    union = area_a[:, None] + area_b[None, :] - inter
    return np.where(union > 0, inter / np.where(union > 0, union, 1), 0.0)


def detection(ref: dict[str, np.ndarray], got: dict[str, np.ndarray], *, iou: float = 0.5,
              score_threshold: float = 0.0) -> dict[str, Any]:
    """Agreement of kept boxes between two detection outputs (boxes/scores/classes/num_detections)."""
    for k in ("boxes", "scores"):
        if k not in ref or k not in got:
            raise BadInput(f"detection comparison needs a '{k}' output (have {', '.join(ref)})")
    n = ref["boxes"].shape[0]
    agreements, score_err, matched_total, ref_total, got_total = [], [], 0, 0, 0

    def kept(o: dict[str, np.ndarray], i: int):
        boxes, scores = np.asarray(o["boxes"][i], np.float64), np.asarray(o["scores"][i], np.float64)
        classes = np.asarray(o["classes"][i]) if "classes" in o else np.zeros(len(scores))
        cnt = int(np.asarray(o["num_detections"][i]).reshape(-1)[0]) if "num_detections" in o else len(scores)
        sel = np.arange(min(cnt, len(scores)))
        sel = sel[np.isfinite(scores[sel]) & (scores[sel] >= score_threshold) & (scores[sel] > 0)]
        return boxes[sel], scores[sel], classes[sel]

    for i in range(n):
        rb, rs, rc = kept(ref, i)
        gb, gs, gc = kept(got, i)
        ref_total += len(rb)
        got_total += len(gb)
        if len(rb) == 0 and len(gb) == 0:
            agreements.append(1.0)
            continue
        if len(rb) == 0 or len(gb) == 0:
            agreements.append(0.0)
            continue
        m = _iou(rb, gb)
        m = np.where(rc[:, None] == gc[None, :], m, 0.0)
        used = set()
        matched = 0
        for r in np.argsort(-rs):
            cand = [(m[r, g], g) for g in range(len(gb)) if g not in used and m[r, g] >= iou]
            if cand:
                _, g = max(cand)
                used.add(g)
                matched += 1
                score_err.append(abs(rs[r] - gs[g]))
        matched_total += matched
        agreements.append(matched / max(len(rb), len(gb)))
    return {
        "box_agreement": float(np.mean(agreements)) if agreements else 1.0,
        "matched": matched_total,
        "reference_detections": ref_total,
        "detections": got_total,
        "score_mae": float(np.mean(score_err)) if score_err else 0.0,
        "iou_threshold": iou,
        "score_threshold": score_threshold,
    }
