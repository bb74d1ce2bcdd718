"""Drift between two sets of outputs, classification agreement/accuracy, detection agreement.

Definitions (also in docs/gate.md, "Drift and accuracy definitions"):

* ``max_abs``/``mean_abs``: max / mean of |got - ref| over every element of every sample.
* ``rmse``: sqrt(mean((got - ref)^2)).
* ``rel_l2``: ||got - ref||_2 / ||ref||_2 over the whole tensor (0 when both are zero).
* ``cosine``: cosine similarity of each sample's flattened output, averaged over samples;
  ``cosine_min`` is the worst sample. A zero vector against a zero vector counts as 1.
* ``psnr_db``: 20*log10(peak / rmse) with peak = max(ref) - min(ref) (the reference's dynamic
  range; 1.0 when the reference is constant); ``inf`` when the outputs are identical.
* ``nan``/``inf``: counts of non-finite values in ``got`` (any > 0 fails every gate, with or
  without thresholds); ``ref_nonfinite``: the same count in the reference. When either side has a
  non-finite value, every metric above is ``None`` (shown "n/a"): a NaN compared as 0 would
  make a broken model look perfect.
* Shapes: ``got`` must have the reference's shape, or one that differs only by dimensions of
  size 1 (e.g. [N, 1, 10] vs [N, 10]); anything else is an error, never a silent reshape.
* Classification: ``top1_agreement`` = share of samples whose argmax matches the reference's;
  ``top5_agreement`` = share whose reference top-1 class is in got's top 5 (``None`` with <= 5
  classes, where it is 1 by construction); ``top1`` = accuracy against real labels;
  ``top1_drop_pp`` = (reference top1 - top1) * 100. A sample whose scores hold NaN/Inf never
  agrees and is never correct (``nonfinite_samples`` counts them).
* Detection: per sample, reference detections (score >= threshold, first num_detections) are
  greedily matched to got's by IoU >= 0.5 with the same class; ``box_agreement`` = matched /
  max(#ref, #got) averaged over samples (1 when both are empty); ``score_mae`` over matched pairs.
  A non-finite or negative ``num_detections`` counts as no detections for that sample
  (``invalid_num_detections`` counts them; the NaN itself is in the drift's ``nan``).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from edgebench.core.errors import BadInput
from edgebench.rows import Accuracy

DRIFT_KEYS = ("max_abs", "mean_abs", "rmse", "rel_l2", "cosine", "cosine_min", "psnr_db")


def _squeezed(shape: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(d for d in shape if d != 1)


def drift(ref: np.ndarray, got: np.ndarray) -> dict[str, Any]:
    """Drift metrics of one output tensor ([N, ...] both)."""
    ref = np.asarray(ref, np.float64)
    got = np.asarray(got, np.float64)
    if ref.shape != got.shape:
        if _squeezed(ref.shape) != _squeezed(got.shape):
            raise BadInput(f"output shapes differ: {list(got.shape)} vs reference {list(ref.shape)} (they are not "
                           "the same up to size-1 dimensions); compare models with the same signature")
        got = got.reshape(ref.shape)   # only size-1 dimensions differ: the same element order
    nan = int(np.isnan(got).sum())
    inf = int(np.isinf(got).sum())
    ref_bad = int(ref.size - np.count_nonzero(np.isfinite(ref)))
    if nan or inf or ref_bad:
        return {**{k: None for k in DRIFT_KEYS}, "nan": nan, "inf": inf, "ref_nonfinite": ref_bad,
                "elements": int(got.size)}
    d = got - ref
    n = max(int(d.size), 1)
    mse = float((d ** 2).sum() / n)
    rmse = math.sqrt(mse)
    ref_norm = float(np.sqrt((ref ** 2).sum()))
    diff_norm = float(np.sqrt((d ** 2).sum()))
    rel_l2 = 0.0 if diff_norm == 0 else (diff_norm / ref_norm if ref_norm > 0 else math.inf)
    peak = float(ref.max() - ref.min()) if ref.size else 1.0
    if peak == 0:
        peak = 1.0
    psnr = math.inf if rmse == 0 else 20 * math.log10(peak / rmse)
    # per-sample cosine
    a = ref.reshape(ref.shape[0], -1) if ref.ndim else ref.reshape(1, -1)
    b = got.reshape(a.shape)
    na = np.linalg.norm(a, axis=1)
    nb = np.linalg.norm(b, axis=1)
    both_zero = (na == 0) & (nb == 0)
    denom = np.where(na * nb == 0, 1.0, na * nb)
    cos = np.where(both_zero, 1.0, (a * b).sum(axis=1) / denom)
    cos = np.where((na * nb == 0) & ~both_zero, 0.0, cos)
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
        "ref_nonfinite": 0,
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
    """Worst-output PSNR and cosine, and how many NaN/Inf values the outputs had (any -> the
    worst PSNR/cosine are ``None``: there is no honest number)."""
    if not drifts:
        return {"psnr_db": None, "cosine": None, "nonfinite": 0}
    nonfinite = sum(d["nan"] + d["inf"] for d in drifts.values())
    ref_bad = sum(d.get("ref_nonfinite") or 0 for d in drifts.values())
    if nonfinite or ref_bad:
        return {"psnr_db": None, "psnr_output": None, "cosine": None, "nonfinite": nonfinite,
                "ref_nonfinite": ref_bad}
    return {
        "psnr_db": min(d["psnr_db"] for d in drifts.values()),
        "psnr_output": min(drifts, key=lambda k: drifts[k]["psnr_db"]),
        "cosine": min(d["cosine"] for d in drifts.values()),
        "nonfinite": 0,
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
    bad = ~np.isfinite(got).all(axis=1)            # a sample with any NaN/Inf score has no answer
    got = np.where(np.isfinite(got), got, -np.inf)
    ref_top1 = ref.argmax(axis=1)
    got_top1 = np.where(bad, -1, got.argmax(axis=1))
    classes = got.shape[1]
    top5 = classes > 5                              # with <= 5 classes, top-5 holds every class
    got_top5 = np.where(bad[:, None], -1, np.argsort(-got, axis=1, kind="stable")[:, :5]) if top5 else None
    out: dict[str, Any] = {
        "top1_agreement": float((ref_top1 == got_top1).mean()),
        "top5_agreement": float((got_top5 == ref_top1[:, None]).any(axis=1).mean()) if top5 else None,
        "samples": int(ref.shape[0]),
        "classes": int(classes),
        "nonfinite_samples": int(bad.sum()),
    }
    if labels is not None:
        labels = np.asarray(labels).reshape(-1)
        if labels.shape[0] != got.shape[0]:
            raise BadInput(f"{labels.shape[0]} labels for {got.shape[0]} samples; give one label per sample")
        if labels.size and (labels.min() < 0 or labels.max() >= got.shape[1]):
            raise BadInput(f"labels span [{labels.min()}, {labels.max()}] but the model has {got.shape[1]} "
                           "classes; check the label encoding")
        out["top1_correct"] = int((got_top1 == labels).sum())     # whole samples: what results compare counts
        out["top1"] = float((got_top1 == labels).mean())
        out["top5"] = float((got_top5 == labels[:, None]).any(axis=1).mean()) if top5 else None
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
    invalid = {"reference": 0, "compared": 0}

    def kept(o: dict[str, np.ndarray], i: int, side: str):
        boxes, scores = np.asarray(o["boxes"][i], np.float64), np.asarray(o["scores"][i], np.float64)
        classes = np.asarray(o["classes"][i]) if "classes" in o else np.zeros(len(scores))
        cnt = len(scores)
        if "num_detections" in o:
            raw = np.asarray(o["num_detections"][i], np.float64).reshape(-1)
            if raw.size == 0 or not np.isfinite(raw[0]) or raw[0] < 0:
                invalid[side] += 1
                cnt = 0
            else:
                cnt = int(min(raw[0], len(scores)))
        sel = np.arange(min(cnt, len(scores)))
        sel = sel[np.isfinite(scores[sel]) & (scores[sel] >= score_threshold) & (scores[sel] > 0)]
        return boxes[sel], scores[sel], classes[sel]

    for i in range(n):
        rb, rs, rc = kept(ref, i, "reference")
        gb, gs, gc = kept(got, i, "compared")
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
        "invalid_num_detections": invalid["compared"],
        "reference_invalid_num_detections": invalid["reference"],
    }


OUTPUT_KIND_FORM = "NAME:ordinal[,tolerance=BINS] (e.g. pitch:ordinal,tolerance=2)"
MOSTLY_NEIGHBOURS = 0.8     # "mostly +-1 bin": at least this share of the top-1 disagreements
# ... of at least this many, over at least this many classes: a random top-1 change lands on a neighbour
# with chance ~2/classes (<= 20 % from 10 classes), so 80 % of 5 or more is not chance
NOTE_MIN_DISAGREEMENTS = 5
NOTE_MIN_BINS = 10


@dataclass(frozen=True)
class OutputKind:
    """An output declared ordinal (``--output-kind NAME:ordinal,tolerance=N``): its classes are
    ordered bins (20-cent pitch bins, age years), so a top-1 within ``tolerance`` bins of the
    reference (agreement) or of the label (accuracy) counts as the same answer."""

    output: str
    kind: str = "ordinal"
    tolerance: int = 1

    def text(self) -> str:
        return f"{self.output}: ordinal, within {self.tolerance} bin{'s' * (self.tolerance != 1)}"


def parse_output_kind(spec: str | None) -> OutputKind | None:
    """``--output-kind`` -> OutputKind; BadInput naming the value and the form otherwise."""
    if spec is None:
        return None
    m = re.fullmatch(r"\s*([^:,=]+?)\s*:\s*(\w+)\s*(?:,\s*tolerance\s*=\s*(\S+))?\s*", spec)
    if not m:
        raise BadInput(f"--output-kind {spec!r}: not of the form {OUTPUT_KIND_FORM}")
    name, kind, tol = m.group(1), m.group(2), m.group(3)
    if kind not in ("ordinal", "regression"):
        raise BadInput(f"--output-kind {spec!r}: unknown kind {kind!r}; use ordinal (or regression: the same, "
                       f"classes as ordered bins) in {OUTPUT_KIND_FORM}")
    try:
        tolerance = int(tol) if tol is not None else 1
    except ValueError:
        tolerance = -1
    if tolerance < 0 or tolerance > 1_000_000:
        raise BadInput(f"--output-kind {spec!r}: tolerance must be a whole number of bins >= 0 (e.g. tolerance=2)")
    return OutputKind(name, "ordinal", tolerance)


def check_output_kind(kind: OutputKind | None, outputs: dict[str, np.ndarray]) -> None:
    """The declared output must exist and hold scores [samples, bins]."""
    if kind is None:
        return
    if kind.output not in outputs:
        raise BadInput(f"--output-kind {kind.output}:...: the model has no output {kind.output!r}; its outputs are "
                       f"{', '.join(sorted(outputs)) or 'none'}")
    if not looks_like_class_scores(np.asarray(outputs[kind.output])):
        raise BadInput(f"--output-kind {kind.output}:...: output {kind.output!r} has shape "
                       f"{list(np.shape(outputs[kind.output]))}, not scores [samples, bins]")


def bin_distance(ref: np.ndarray, got: np.ndarray) -> dict[str, Any]:
    """How far the top-1 moves, in bins, on the samples where it moves: the share within +-1 bin
    and the largest move. Read by ``ordinal_note``."""
    r = np.asarray(ref).argmax(axis=1)
    g = np.where(np.isfinite(np.asarray(got, np.float64)).all(axis=1), np.asarray(got, np.float64).argmax(axis=1), -10**9)
    d = np.abs(g - r)
    moved = d[d > 0]
    return {"disagreements": int(moved.size), "within_1_bin": float((moved <= 1).mean()) if moved.size else None,
            "max_bins": int(moved.max()) if moved.size and moved.max() < 10**8 else None}


def ordinal_note(acc: Accuracy | None, kind: OutputKind | None = None) -> str | None:
    """One line when top-1 disagreement is mostly a move to a neighbouring bin (and the output was
    not declared ordinal): the output may be ordered bins, scored as classes."""
    if acc is None or kind is not None:
        return None
    d = acc.details or {}
    share, n = d.get("within_1_bin"), d.get("disagreements")
    if not n or n < NOTE_MIN_DISAGREEMENTS or share is None or share < MOSTLY_NEIGHBOURS \
            or (d.get("classes") or 0) < NOTE_MIN_BINS:
        return None
    return (f"{acc.output}: {share * 100:.0f}% of the top-1 disagreements ({n} samples) are a neighbouring bin "
            f"(+-1): if its classes are ordered bins (pitch, age), --output-kind {acc.output}:ordinal,tolerance=1 "
            "scores agreement and accuracy by bin distance")


def ordinal(ref: np.ndarray, got: np.ndarray, labels: np.ndarray | None, tolerance: int) -> dict[str, Any]:
    """``classification`` for ordered bins: a top-1 within ``tolerance`` bins is the same answer."""
    out = classification(ref, got, labels)
    r = np.asarray(ref).argmax(axis=1)
    gg = np.asarray(got, np.float64)
    bad = ~np.isfinite(gg).all(axis=1)
    g = np.where(bad, -10**9, np.where(np.isfinite(gg), gg, -np.inf).argmax(axis=1))
    out["exact_top1_agreement"] = out["top1_agreement"]
    out["top1_agreement"] = float((np.abs(g - r) <= tolerance).mean())
    out["top5_agreement"] = None
    out["ordinal_tolerance"] = int(tolerance)
    if labels is not None:
        lab = np.asarray(labels).reshape(-1)
        out["exact_top1"] = out.get("top1")
        out["top1_correct"] = int((np.abs(g - lab) <= tolerance).sum())
        out["top1"] = float((np.abs(g - lab) <= tolerance).mean())
        out["top5"] = None
    return out


def reference_accuracy(scores: np.ndarray, labels, class_out: str, kind: OutputKind | None = None) -> dict[str, Any]:
    """The reference's own accuracy on its class output (by bin distance when it is declared ordinal)."""
    if kind is not None and kind.output == class_out:
        return ordinal(scores, scores, labels, kind.tolerance)
    return classification(scores, scores, labels)


def accuracy_vs_reference(ref: dict[str, np.ndarray], got: dict[str, np.ndarray], labels, class_out: str | None,
                          ref_acc: dict[str, Any] | None, kind: OutputKind | None = None) -> Accuracy | None:
    """Top-1 (and top-5) of ``got``'s class output against the labels, with the reference's own
    top-1 and the change in points (``top1_drop_pp``: positive = worse than the reference). An
    output declared ordinal (``kind``) counts a top-1 within its tolerance in bins as agreeing."""
    if class_out is None:
        return None
    if kind is not None and kind.output == class_out:
        acc = ordinal(ref[class_out], got[class_out], labels, kind.tolerance)
    else:
        acc = classification(ref[class_out], got[class_out], labels)
        acc.update(bin_distance(ref[class_out], got[class_out]))
    acc["output"] = class_out
    if ref_acc is not None and "top1" in acc and "top1" in ref_acc:
        acc["reference_top1"] = ref_acc["top1"]
        acc["top1_drop_pp"] = round((ref_acc["top1"] - acc["top1"]) * 100.0, 6)
    return Accuracy.from_dict(acc)
