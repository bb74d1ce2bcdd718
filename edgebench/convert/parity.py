"""The FP32 parity check: a converted .tflite run in this process on every sample, against TF's outputs.

``run_tflite_inprocess`` runs a .tflite here (parity only; benchmarks use the worker); ``parity_check``
compares its outputs with the reference's (detection heads by matched boxes).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from edgebench.core.errors import BadInput
from edgebench.judge.drift import detection
from edgebench.model.inputs import InputSet, Signature, dequantize, quantize
from edgebench.model.state_rule import StateRule
from edgebench.targets.base import model_state
from edgebench.targets.runner_io import reset_state

PARITY_RTOL = 1e-3
PARITY_ATOL = 1e-4

def run_tflite_inprocess(model: str | Path | bytes, ds: InputSet, signature: Signature | None = None,
                         rule: StateRule | None = None) -> dict[str, np.ndarray]:
    """Run a .tflite on every sample in this process (parity only; benchmarks use the worker).
    A stateful graph starts from its initial state where the state ``rule`` says (None: every
    sample), as the LiteRT worker does."""
    from ai_edge_litert.interpreter import Interpreter


    state = None if isinstance(model, bytes) else model_state(str(model))
    make = (lambda: Interpreter(model_content=model)) if isinstance(model, bytes) else \
        (lambda: Interpreter(model_path=str(model)))
    it = make()
    runner = it.get_signature_runner()
    in_det = runner.get_input_details()
    out_det = runner.get_output_details()
    outs: dict[str, list[np.ndarray]] = {k: [] for k in out_det}
    for i in range(ds.n):
        feed = {}
        for name, d in in_det.items():
            if name not in ds.arrays:
                raise BadInput(f"model input '{name}' is not in the data (has {', '.join(ds.arrays)}); "
                               "key the arrays by the model's input names")
            x = ds.arrays[name][i]
            scale, zp = d["quantization"]
            if np.dtype(d["dtype"]) in (np.int8, np.uint8, np.int16) and scale:
                x = quantize(x, scale, zp, np.dtype(d["dtype"]))
            feed[name] = np.asarray(x, d["dtype"]).reshape(d["shape"])
        if i and (rule is None or rule.resets_before(i)):
            if state is None:
                it.reset_all_variables()
            elif not reset_state(it, state):      # resource variables without an init subgraph
                it = make()
                runner = it.get_signature_runner()
        res = runner(**feed)
        for name, v in res.items():
            scale, zp = out_det[name]["quantization"]
            if np.dtype(out_det[name]["dtype"]) in (np.int8, np.uint8, np.int16) and scale:
                v = dequantize(v, scale, zp)
            shp = out_det[name]["shape"]
            v = np.asarray(v)
            if len(shp) >= 1 and shp[0] == 1:
                v = v[0]
            outs[name].append(v)
    return {k: np.stack(v) for k, v in outs.items()}


DETECTION_OUTPUTS = ("boxes", "scores", "num_detections")


def _detection_parity(tf_out: dict[str, np.ndarray], tfl_out: dict[str, np.ndarray]) -> dict[str, Any]:
    """NMS outputs: order among equal scores is arbitrary, so compare what NMS kept, not slots.

    Per sample: the same number of detections and the same sorted kept scores (within the
    parity tolerance). Box agreement (IoU >= 0.5, same class) is recorded for information.
    """

    ref_n = np.asarray(tf_out["num_detections"]).reshape(len(tf_out["scores"]), -1)[:, 0]
    got_n = np.asarray(tfl_out["num_detections"]).reshape(len(tfl_out["scores"]), -1)[:, 0]
    count_ok = bool(np.array_equal(ref_n.astype(int), got_n.astype(int)))
    max_err = 0.0
    for i in range(len(ref_n)):
        k = int(min(ref_n[i], got_n[i]))
        a = np.sort(np.asarray(tf_out["scores"][i], np.float64)[:k])
        b = np.sort(np.asarray(tfl_out["scores"][i], np.float64)[:k])
        if k:
            max_err = max(max_err, float(np.abs(a - b).max()))
    tol = PARITY_ATOL + PARITY_RTOL
    det = detection(tf_out, tfl_out)
    ok = count_ok and max_err <= tol
    out = {"passed": ok, "method": "detection: same detection counts and sorted kept scores",
           "max_abs_err": max_err, "tolerance": tol, "counts_equal": count_ok, "box_agreement": det["box_agreement"]}
    if not ok:
        out["error"] = ("detection counts differ" if not count_ok else
                        f"kept scores differ by {max_err:.3g} > tolerance {tol:.3g}")
    return out


def parity_check(tf_out: dict[str, np.ndarray], tfl_out: dict[str, np.ndarray], task: str | None = None) -> dict[str, Any]:
    """Compare FP32 TFLite outputs with TF's. ``passed`` False names the worst output.

    Detection models (outputs boxes/scores/num_detections) are compared as sets of kept
    detections: NMS may legitimately order equal-score boxes differently.
    """
    per: dict[str, Any] = {}
    passed = True
    worst = None
    if all(k in tf_out and k in tfl_out for k in DETECTION_OUTPUTS) and task in (None, "detection"):
        d = _detection_parity(tf_out, tfl_out)
        per["detections"] = d
        tf_out = {k: v for k, v in tf_out.items() if k not in ("boxes", "scores", "classes", "num_detections")}
        if not d["passed"]:
            passed = False
            worst = "detections"
    for name, ref in tf_out.items():
        if name not in tfl_out:
            per[name] = {"passed": False, "error": "output missing from the .tflite signature"}
            passed = False
            worst = worst or name
            continue
        got = tfl_out[name]
        ref_f = np.asarray(ref, np.float64).reshape(got.shape) if ref.size == got.size else np.asarray(ref, np.float64)
        if ref_f.shape != got.shape:
            per[name] = {"passed": False, "error": f"shape {list(got.shape)} vs TF {list(ref.shape)}"}
            passed = False
            worst = worst or name
            continue
        got_f = np.asarray(got, np.float64)
        err = np.abs(got_f - ref_f)
        finite = np.isfinite(err)
        max_err = float(err[finite].max()) if finite.any() else 0.0
        scale = float(np.abs(ref_f[np.isfinite(ref_f)]).max()) if np.isfinite(ref_f).any() else 0.0
        tol = PARITY_ATOL + PARITY_RTOL * scale
        nonfinite_mismatch = bool(np.any(np.isfinite(ref_f) != np.isfinite(got_f)))
        ok = max_err <= tol and not nonfinite_mismatch
        per[name] = {"passed": ok, "max_abs_err": max_err, "tolerance": tol, "ref_max_abs": scale,
                     "nonfinite_mismatch": nonfinite_mismatch}
        if not ok:
            passed = False
            if worst is None or max_err / max(tol, 1e-30) > per[worst].get("max_abs_err", 0) / max(per[worst].get("tolerance", 1), 1e-30):
                worst = name
    result = {"passed": passed, "outputs": per, "rtol": PARITY_RTOL, "atol": PARITY_ATOL}
    if not passed:
        w = per[worst]
        detail = w.get("error") or f"max abs error {w['max_abs_err']:.3g} > tolerance {w['tolerance']:.3g}"
        result["explanation"] = (
            f"FP32 .tflite disagrees with TensorFlow on output '{worst}' ({detail}). Likely causes: random "
            "or stateful ops in the serving function (tf.random, variables updated at call time), layers "
            "exported in training mode (Dropout/BatchNorm with training=True), or ops whose TFLite kernel "
            "differs; fix: export an inference-only function (training=False, no random/stateful ops) and "
            "convert again"
        )
    return result
