"""The fix ``diagnose`` proves when there is no TensorFlow model: a quantized ``.tflite`` diagnosed
against its float ``.tflite`` (``--reference``), or a PyTorch source -- both re-quantized from the
float ``.tflite`` with ai-edge-quantizer (``quant.aeq``).

``prove_tflite_fix``: for the culprit tensors diagnose suggests (the causes among the findings,
named by the float file's tensor names), build two candidates from the float file with the same
calibration data -- the culprits kept float (``--keep-float``) and int8 with 16-bit activations on
their scope (``--a16``) -- run each on the diagnose InputSet, and score them against the float
file's outputs and the labels. Each candidate carries the ``edgebench convert-and-compare``
command that rebuilds and gates it, runnable as printed; a candidate that meets the goal is
*proven* (``proof_goal``: stricter than what the given int8 file reaches). A candidate that is the
same file again (every op in the same precision) or scores no better than the file being fixed
(``no_better``) is reported as tried -- "tried: no better, 32.6 dB vs 36.4 dB" -- and not offered.

``source_flags``: how a command names the model again (``--torch MODULE:FACTORY --input-shape ...
--channels-last`` for a factory; the path otherwise), so every printed command runs as printed.
"""

from __future__ import annotations

import shlex
import time
from pathlib import Path
from typing import Any

import numpy as np

from edgebench.convert.parity import run_tflite_inprocess
from edgebench.convert.quant.aeq import TESTED_VERSION, aeq_version, quantize_tflite
from edgebench.convert.quant.fix_trials import GAIN_MATTERS_DB
from edgebench.convert.quant.search import SEARCH_MIN_GAIN_PP
from edgebench.model.tflite_model import inspect, run_ops
from edgebench.judge import drift as cmp
from edgebench.model.inputs import DEFAULT_PREPROCESS, InputSet, Signature, cast_to_signature, load_data

AEQ_NOTE_MISSING = ("a fix can be built from the float .tflite with ai-edge-quantizer and proven here: "
                    "pip install 'edgebench[aeq]'")


def source_flags(src: str, source: Any) -> list[str]:
    """The argv that names the model of a run again: SRC, or --torch MODULE:FACTORY with its
    --input-shape values, and --channels-last."""
    if getattr(source, "torch", None):
        out = ["--torch", source.torch]
    else:
        out = [src]
    if getattr(source, "torch", None) or str(src).endswith(".pt2"):
        for name, dims in getattr(source, "input_shapes", ()):
            out += ["--input-shape", f"{name}:{','.join(map(str, dims))}"]
        if getattr(source, "channels_last", False):
            out.append("--channels-last")
    return out


def data_flags(data: str | None, calibration_data: str | None, preprocess: str | None) -> list[str]:
    out: list[str] = []
    for flag, value in (("--data", data), ("--calibration-data", calibration_data),
                        ("--preprocess", preprocess if preprocess and preprocess != DEFAULT_PREPROCESS else None)):
        if value is not None:
            out += [flag, str(value)]
    return out


def command(argv: list[str]) -> str:
    return " ".join(shlex.quote(x) for x in argv)


def _meets(goal: list[str] | None, drop: float | None, psnr: float | None) -> bool | None:
    if not goal:
        return None
    limit = float(goal[1])
    if goal[0] == "--max-accuracy-drop":
        return drop is not None and drop <= limit
    return psnr is not None and psnr >= limit


def _op_kinds(path: str | Path) -> list[tuple[str, str]]:
    """Every op an inference runs and the kind of kernel it runs (integer / float / hybrid): two
    files with the same list quantize the same ops the same way -- the same file for a fix."""
    return [(o["op"], o["kind"]) for o in run_ops(inspect(str(path)))]


def no_better(cand: dict[str, Any], base_psnr: float | None, base_drop: float | None,
              same_file: bool) -> str | None:
    """Why a built fix is not offered, or None when it is: the same file as the one being fixed, or
    a score that is not better -- at least ``GAIN_MATTERS_DB`` more worst-output PSNR, or (with labels)
    ``SEARCH_MIN_GAIN_PP`` fewer top-1 points lost."""
    psnr, drop = cand.get("psnr_db"), cand.get("top1_drop_pp")
    score = (f"{psnr:.1f} dB vs {base_psnr:.1f} dB" if psnr is not None and base_psnr is not None else
             f"top-1 drop {drop:.2f} pp vs {base_drop:.2f} pp" if drop is not None and base_drop is not None else "")
    if same_file:
        return "tried: the same file as the one being fixed (every op in the same precision)" + (
            f", {score}" if score else "")
    better_psnr = psnr is not None and base_psnr is not None and psnr - base_psnr >= GAIN_MATTERS_DB
    better_drop = drop is not None and base_drop is not None and base_drop - drop >= SEARCH_MIN_GAIN_PP
    if better_psnr or better_drop or (psnr is None and drop is None):
        return None
    worse = psnr is not None and base_psnr is not None and round(psnr, 1) < round(base_psnr, 1)
    return f"tried: {'worse' if worse else 'no better'}, {score}" if score else "tried: no better"


def prove_tflite_fix(settings: Any, row: dict[str, Any], ref_path: Path, sig: Signature, ds: InputSet,
                     ref_out: dict[str, np.ndarray], class_out: str | None, ref_acc: Any, out_dir: Path,
                     goal: list[str] | None, kind: cmp.OutputKind | None = None) -> dict[str, Any] | None:
    """Build, run and score the candidate fixes (see the module docstring); None when there is no
    culprit to fix. Raises BadInput (exit 2) only for bad calibration data."""

    culprits = list(row.get("suggested_keep_float") or [])
    if not culprits:
        return None
    t0 = time.perf_counter()
    cal_path = settings.calibration_data or settings.data
    conv = settings.convert
    cal = cast_to_signature(load_data(cal_path, sig, preprocess=conv.preprocess, seed=conv.seed,
                                      n=conv.calibration_samples), sig)     # only the rows it calibrates on
    n_cal = min(conv.calibration_samples, cal.n)
    ref_size = ref_path.stat().st_size
    base = ["edgebench", "convert-and-compare", str(ref_path),
            *data_flags(settings.data, settings.calibration_data, conv.preprocess)]
    if conv.calibration_samples != 100:     # convert-and-compare's default
        base += ["--calibration-samples", str(conv.calibration_samples)]
    candidates = []
    fixed_kinds = _op_kinds(row["model_path"])      # the file being fixed
    base_psnr = (row.get("worst") or {}).get("psnr_db")
    base_psnr = None if base_psnr is None or not np.isfinite(base_psnr) else float(base_psnr)
    base_drop = (row.get("accuracy") or {}).get("top1_drop_pp")
    for fix, flag in (("keep float", "--keep-float"), ("a16w8 on their scope", "--a16")):
        kw = {"keep_float": culprits} if flag == "--keep-float" else {"a16": culprits}
        data, qinfo = quantize_tflite(ref_path, "int8", calibration=cal, signature=sig, samples=n_cal,
                                      signature_key="serving_default", **kw)
        path = out_dir / f"{Path(row['model_path']).stem}_fix_{'keep_float' if flag == '--keep-float' else 'a16'}.tflite"
        path.write_bytes(data)
        outs = run_tflite_inprocess(data, ds, sig)
        got, _ = cmp.align_outputs(ref_out, outs)
        drift = cmp.compare_outputs(ref_out, got)
        worst = cmp.worst(drift) or {}
        acc = cmp.accuracy_vs_reference(ref_out, got, ds.labels, class_out, ref_acc, kind)
        accd = acc.to_dict() if acc is not None else {}
        drop, psnr = accd.get("top1_drop_pp"), worst.get("psnr_db")
        argv = base + ["--precision", "fp32,int8", flag, ",".join(culprits)] + (goal or [])
        candidates.append({
            "fix": fix, "option": flag, "tensors": culprits, "ops": qinfo.get("keep_float_ops") or qinfo.get("a16_ops"),
            "path": str(path), "bytes": len(data), "size_reduction_pct": round(100.0 * (1 - len(data) / ref_size), 2),
            "top1": accd.get("top1"), "top1_drop_pp": drop, "top1_agreement": accd.get("top1_agreement"),
            "psnr_db": psnr, "meets_goal": _meets(goal, drop, psnr), "mode": qinfo.get("mode"),
            "command": command(argv)})
        # advice is checked before it is printed: a fix no better than the file, or that file again, is not offered
        candidates[-1]["tried"] = no_better(candidates[-1], base_psnr, base_drop, _op_kinds(path) == fixed_kinds)
        candidates[-1]["offered"] = candidates[-1]["tried"] is None
    # proven first, then the better score (accuracy drop, else PSNR), then the smaller file
    order = sorted(candidates, key=lambda c: (not c["offered"], not c["meets_goal"],
                                              c["top1_drop_pp"] if c["top1_drop_pp"] is not None
                                              else -(c["psnr_db"] or 0.0), c["bytes"]))
    return {"method": ("ai-edge-quantizer from the float .tflite (the --reference file), calibrated on "
                       f"{n_cal} samples of {cal.source}; scored on the diagnose inputs against the float file"),
            "quantizer": f"ai-edge-quantizer {aeq_version()} (tested {TESTED_VERSION})",
            "goal": " ".join(goal) if goal else None,
            "proven": any(c["meets_goal"] and c["offered"] for c in candidates),
            "offered": sum(1 for c in candidates if c["offered"]),
            "candidates": order, "seconds": round(time.perf_counter() - t0, 3)}
