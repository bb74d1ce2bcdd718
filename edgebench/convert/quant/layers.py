"""Per-layer quantization analysis: the worker that compares every tensor of a quantized
``.tflite`` with its float counterpart, and the ranking that names the layer to blame and what to
do about it. ``diagnose`` (the command) and the keep-float search (``quant.search``) both use it.
Each tensor of the quantized model is compared with its float counterpart (matched by tensor name,
then QUANTIZE/DEQUANTIZE outputs inherit their input's match, then by op type and order:
``edgebench.convert.quant.tensor_worker.match_tensors``): accumulated error (the whole quantized model) and
isolated error (the op alone, fed the float model's values), the float range and its outlier ratio.

**Metrics** per quantized tensor (``got`` dequantized, ``ref`` float): ``rmse_over_scale`` =
RMSE / quantization step: a healthy layer whose error is rounding only sits near 1/sqrt(12) = 0.289
(a rounding error uniform on [-step/2, step/2] has that rms: Bennett 1948; Widrow & Kollar,
"Quantization Noise", 2008); well above it means clipping or an inherited error. ``snr_db`` =
10 log10(sum ref^2 / sum (got-ref)^2); ``channel_snr_db`` = the median channel's SNR (last axis): a
per-tensor scale shared by a dominant channel crushes the others, which a tensor-wide SNR hides;
``cosine`` (per sample, averaged), ``max_abs``; the same for the isolated run (``isolated_*``);
``outlier_ratio`` = max|x| / the median channel's 99.9th percentile of |x| of the float tensor
(log2 of it ~ bits of the integer range spent on outliers).

**Ranking rule.** Worst first by the layer's *isolated* median-channel SNR (isolated tensor SNR
when the tensor has no channels; accumulated when the op cannot run alone): isolated error is what
the op adds given exact inputs, so a layer that only inherits error is not blamed. One exception
keeps the cause first: a layer whose isolated SNR is within ``INHERIT_MARGIN_DB`` of (or worse
than) the quantization error of an input that is itself a finding is ranked right after that
input's producer (its integer input grid is the cause). A layer is a *finding* when its modified
z-score over the model's layers is >= 3.5 (0.6745 (x - median) / MAD of the noise -SNR: Iglewicz &
Hoaglin 1993) and its SNR is below ``SNR_CEILING_DB`` (an ideal 8-bit quantizer's 49.9 dB: past it a
layer beats any int8 layer), or its SNR is below ``SNR_FLOOR_DB``, or it produced NaN/Inf.
"""

from __future__ import annotations

import json
import math
import shlex
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from edgebench.targets.base import model_state
from edgebench.targets.host import spawn_worker

NOISE_RATIO = 1 / math.sqrt(12)   # rms of uniform rounding error in quantization steps (0.2887)
Z_FINDING = 3.5                # Iglewicz & Hoaglin (1993): modified z-score outlier threshold
SNR_FLOOR_DB = 20.0            # below: noise power >= 1 % of the signal, a finding on its own
# Never a finding at or above: 6.02 N + 1.76 dB is the SNR of an ideal N-bit quantizer on a full-scale
# uniform signal (Bennett 1948), 49.9 dB for N = 8; a layer past it beats any int8 layer (fp16 models).
SNR_CEILING_DB = 50.0
INHERIT_MARGIN_DB = 3.0
OUTLIER_RATIO_FINDING = 16.0   # >= 4 bits of the integer range spent on outliers
CLIPPED_STEPS = 1.0            # float range beyond the representable range by more than 1 step
UNUSED_RANGE_FACTOR = 64.0     # the grid is >= 64x wider than the values: < 2 of its bits carry them
FLOAT16_MAX = 65504.0          # the largest finite float16
WORKER_DEADLINE_S = 3600.0
RANKING_RULE = ("worst isolated median-channel SNR first (isolated tensor SNR without channels, "
                "accumulated when the op cannot run alone); a layer within "
                f"{INHERIT_MARGIN_DB:g} dB of a bad input's error follows that input's producer; "
                f"finding: modified z-score >= {Z_FINDING:g} (Iglewicz & Hoaglin 1993) below {SNR_CEILING_DB:g} dB, "
                f"or SNR < {SNR_FLOOR_DB:g} dB, or NaN/Inf")
MATCHING_RULE = ("tensor name, then QUANTIZE/DEQUANTIZE outputs take their input's match, then the k-th "
                 "op of a type to the k-th op of that type with the same shape; unmatched tensors listed")
ISOLATION_RULE = ("each op alone in a one-op .tflite (its weights and quantization copied), fed the float "
                  "model's values quantized to its input tensors' scale/zero point")


def run_worker(float_model: str | Path, quant_model: str | Path, inputs_npz: str | Path, *, samples: int,
               isolated: bool = True, deadline_s: float = WORKER_DEADLINE_S, state_rule=None) -> tuple[dict, dict]:
    """Per-tensor statistics from ``edgebench.convert.quant.tensor_worker`` in its own process; stateful models
    follow ``state_rule`` (``edgebench.model.state_rule.StateRule``; None: every sample independent)."""

    work = Path(tempfile.mkdtemp(prefix="edgebench-diagnose-"))
    try:
        job = {"float_model": str(Path(float_model).resolve()), "quant_model": str(Path(quant_model).resolve()),
               "inputs_npz": str(Path(inputs_npz).resolve()), "samples": int(samples), "isolated": bool(isolated),
               "out_dir": str(work), "float_state": model_state(str(float_model)),
               "quant_state": model_state(str(quant_model)),
               "state_rule": None if state_rule is None else state_rule.to_job()}
        job_file = work / "job.json"
        job_file.write_text(json.dumps(job))
        return spawn_worker([sys.executable, "-m", "edgebench.convert.quant.tensor_worker", str(job_file)], work,
                            deadline_s, quant_model)
    finally:
        shutil.rmtree(work, ignore_errors=True)


# --------------------------------------------------------------------------- ranking


def _f(v: Any) -> float | None:
    if v is None:
        return None
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def _bits(dtype: str | None) -> int | None:
    return {"int8": 8, "uint8": 8, "int16": 16}.get(dtype or "")


def _layer(e: dict[str, Any]) -> dict[str, Any]:
    acc, iso, rng = e.get("accumulated") or {}, e.get("isolated") or {}, e.get("range") or {}
    scale = _f(e.get("scale"))
    quality = next((q for q in (_f(iso.get("channel_snr_db")), _f(iso.get("snr_db")),
                                _f(acc.get("channel_snr_db")), _f(acc.get("snr_db"))) if q is not None), None)
    return {
        "tensor": e["tensor"], "float_tensor": e.get("float_tensor"), "op": e["op"], "node": e.get("node"),
        "shape": e.get("shape"), "dtype": e.get("dtype"), "scale": scale, "zero_point": e.get("zero_point"),
        "rmse_over_scale": (acc["rmse"] / scale) if scale and acc.get("rmse") is not None else None,
        "snr_db": _f(acc.get("snr_db")), "channel_snr_db": _f(acc.get("channel_snr_db")),
        "cosine": _f(acc.get("cosine")), "max_abs": _f(acc.get("max_abs")),
        "isolated_rmse_over_scale": (iso["rmse"] / scale) if scale and iso.get("rmse") is not None else None,
        "isolated_snr_db": _f(iso.get("snr_db")), "isolated_channel_snr_db": _f(iso.get("channel_snr_db")),
        "isolated_skipped": e.get("isolated_skipped"),
        "outlier_ratio": _f(rng.get("outlier_ratio")), "outlier_channel": rng.get("outlier_channel"),
        "float_min": _f(rng.get("min")), "float_max": _f(rng.get("max")), "match": e.get("match"),
        "nonfinite": (acc.get("nonfinite") or 0),
        "ranking_snr_db": quality, "_index": e.get("index"), "_inputs": e.get("input_indices") or [],
    }


def _input_names(layers: list[dict[str, Any]]) -> None:
    by_index = {l["_index"]: l["tensor"] for l in layers}
    for l in layers:
        l["input_tensors"] = [by_index[i] for i in l["_inputs"] if i in by_index]


# Ops whose integer kernels copy their input's codes unchanged (no requantization): correct only when
# the input and output share scale and zero point. The converter sometimes gives them different ones
# (a Keras Bidirectional LSTM's REVERSE_V2 in int8: zero point -8 in, -2 out), and every value is then
# read on the wrong grid -- a converter defect, not a quantization error a fix on the model can avoid.
# Integer kernels whose output quantization is fixed by the kernel, not calibrated: LOGISTIC and
# SOFTMAX give [0, 1] in 256 steps (int8), TANH [-1, 1].
FIXED_STEP_OPS = ("LOGISTIC", "SOFTMAX", "TANH")
COPY_OPS = ("REVERSE_V2", "RESHAPE", "TRANSPOSE", "GATHER", "GATHER_ND", "STRIDED_SLICE", "SLICE", "SQUEEZE",
            "EXPAND_DIMS", "SPACE_TO_DEPTH", "DEPTH_TO_SPACE", "TILE", "BROADCAST_TO")


def _requantizing_copy(l: dict[str, Any], by_index: dict[Any, dict[str, Any]]) -> dict[str, Any] | None:
    """{input, scale_in, scale_out, zero_point_in, zero_point_out} when a COPY_OPS layer's input and
    output quantization differ (see COPY_OPS), else None."""
    if l["op"] not in COPY_OPS or not l.get("scale") or not l["_inputs"]:
        return None
    src = by_index.get(l["_inputs"][0])
    if src is None or not src.get("scale"):
        return None
    si, so, zi, zo = src["scale"], l["scale"], src.get("zero_point") or 0, l.get("zero_point") or 0
    if abs(si - so) <= 1e-6 * max(abs(si), abs(so)) and zi == zo:
        return None
    return {"input": src["tensor"], "scale_in": si, "scale_out": so, "zero_point_in": zi, "zero_point_out": zo}


def rank_layers(tensors: list[dict[str, Any]], precision: str | None = None, *,
                keep_float: bool = True, qat: bool = False) -> list[dict[str, Any]]:
    """Worker tensor entries -> layer rows, worst first (the rule in this module's docstring)."""
    layers = [_layer(e) for e in tensors if e.get("op") != "INPUT"]
    _input_names(layers)
    noise = np.array([-(l["ranking_snr_db"]) if l["ranking_snr_db"] is not None else np.nan for l in layers])
    finite = noise[np.isfinite(noise)]
    med = float(np.median(finite)) if finite.size else 0.0
    mad = max(float(np.median(np.abs(finite - med))) if finite.size else 0.0, 0.1)
    by_index = {l["_index"]: l for l in layers}
    for l, x in zip(layers, noise):
        l["z"] = float(0.6745 * (x - med) / mad) if np.isfinite(x) else (math.inf if x > 0 else None)
        q = l["ranking_snr_db"]
        l["converter_defect"] = _requantizing_copy(l, by_index)
        l["already_float"] = _already_float(l, by_index) if precision in (None, "int8", "int16x8") else None
        l["finding"] = bool(l["nonfinite"] or (q is not None and q < SNR_FLOOR_DB) or l["converter_defect"]
                            or (l["z"] is not None and l["z"] >= Z_FINDING and (q is None or q < SNR_CEILING_DB)))
        if l["already_float"] and not l["nonfinite"]:
            l["finding"] = False     # keeping it float changes nothing: it is float (see _already_float)
    for l in layers:   # the cause first: an input that is itself a finding and about as bad
        causes = [by_index[i] for i in l["_inputs"] if l["finding"] and i in by_index and by_index[i]["finding"]]
        q = l["ranking_snr_db"]
        causes = [c for c in causes if c["ranking_snr_db"] is not None and q is not None
                  and c["ranking_snr_db"] <= q + INHERIT_MARGIN_DB]
        l["inherits_from"] = min(causes, key=lambda c: c["ranking_snr_db"])["tensor"] if causes else None
    placed, out, waiting = set(), [], {}
    # what is already float in the quantized file is never ranked as a culprit: after every other layer
    for l in sorted(layers, key=lambda l: (bool(l["already_float"]), *_rank_key(l))):
        cause = l["inherits_from"]
        if cause and cause not in placed and cause != l["tensor"]:
            waiting.setdefault(cause, []).append(l)
            continue
        _place(l, out, placed, waiting)
    for rest in waiting.values():   # a cause that never got placed (cycle guard)
        for l in rest:
            if l["tensor"] not in placed:
                _place(l, out, placed, {})
    for i, l in enumerate(out, 1):
        l["rank"] = i
        l["advice"] = advice(l, by_tensor={x["tensor"]: x for x in out}, precision=precision, keep_float=keep_float,
                             qat=qat)
        l.pop("_index", None)
        l.pop("_inputs", None)
    return out


def _is_float(dtype: str | None) -> bool:
    return dtype in ("float32", "float16", "float64")


def _already_float(l: dict[str, Any], by_index: dict[Any, dict[str, Any]]) -> dict[str, Any] | None:
    """{op, tensor} of the op that computes this layer's value in float *in the quantized file*, or
    None. Either the layer is such an op (a LEAKY_RELU a quantizer left float: a float output, no
    scale) or it is the QUANTIZE that rounds such an op's float output onto the int8 grid of the next
    op. Keeping its float tensor float is what the file already does -- the same file again -- so it
    is neither a finding nor a --keep-float suggestion (the next op's int8 input is, when it is one)."""
    if l["op"] == "QUANTIZE" and l["_inputs"]:
        src = by_index.get(l["_inputs"][0])
        if src is not None and _is_float(src.get("dtype")) and src["op"] not in ("DEQUANTIZE", "QUANTIZE"):
            return {"op": src["op"], "node": src.get("node"), "tensor": src["tensor"]}
        return None
    if l["op"] not in ("QUANTIZE", "DEQUANTIZE") and _is_float(l.get("dtype")) and not l.get("scale"):
        return {"op": l["op"], "node": l.get("node"), "tensor": l["tensor"]}
    return None


def _rank_key(l: dict[str, Any]) -> tuple[float, int]:
    q = l["ranking_snr_db"]
    q = math.inf if q is None else q
    return (q, l["node"] if l["node"] is not None else -1)


def _place(l: dict[str, Any], out: list, placed: set, waiting: dict) -> None:
    out.append(l)
    placed.add(l["tensor"])
    for w in waiting.pop(l["tensor"], []):
        _place(w, out, placed, waiting)


def advice(l: dict[str, Any], by_tensor: dict[str, dict[str, Any]] | None = None,
           precision: str | None = None, keep_float: bool = True, qat: bool = False) -> str:
    """One sentence per layer: what the numbers say and what to do (``keep_float`` False: the source
    cannot be re-quantized with tensors kept float -- a QAT model -- so that fix is not offered)."""
    q = l.get("ranking_snr_db")
    bits = _bits(l.get("dtype"))
    scale = l.get("scale")
    keep = _keep_float_option(l, precision) if keep_float and not l.get("already_float") else ""
    done = l.get("already_float")
    if done and not l.get("nonfinite") and precision in (None, "int8", "int16x8"):
        where = f"{done['op']}#{done['node']}" if done.get("node") is not None else done["op"]
        if l["op"] == "QUANTIZE":
            return (f"already float in the quantized file: {where} computes it in float and this QUANTIZE only "
                    f"rounds it onto the int8 grid the next op reads (isolated SNR {_num(q)} dB); keeping "
                    f"{_short(done['tensor'])} float is the same file again, so it is not a culprit")
        return (f"already float in the quantized file ({where} runs a float kernel): keeping it float changes "
                "nothing")
    if l.get("nonfinite"):
        return f"NaN/Inf in the quantized output ({l['nonfinite']} values): {keep or 'use fp32 for this model'}"
    bug = l.get("converter_defect")
    if bug:
        r = l.get("isolated_rmse_over_scale")
        off = f" ({r:.1f} steps rms in isolation)" if r is not None else ""
        return (f"converter defect: {l['op']} copies its input's int8 codes, but the converter gave its input and "
                f"output different quantization (scale {_num(bug['scale_in'], 4)} -> {_num(bug['scale_out'], 4)}, "
                f"zero point {bug['zero_point_in']} -> {bug['zero_point_out']}), so every value is read on the "
                f"wrong grid{off}; not fixable by calibration: {keep + ', or ' if keep else ''}int16x8, and report "
                "it to TensorFlow's converter with the model")
    if not l.get("finding"):
        r = l.get("isolated_rmse_over_scale")
        rounding = f", {r:.2f} steps rms (rounding alone: {NOISE_RATIO:.3f})" if r is not None and bits == 8 else ""
        return f"healthy: isolated SNR {_num(q)} dB{rounding}"
    cause = l.get("inherits_from")
    if cause:
        c = (by_tensor or {}).get(cause, {})
        return (f"inherits its error from input {_short(cause)} (isolated SNR {_num(c.get('ranking_snr_db'))} dB): "
                f"keeping that tensor float fixes both")
    ratio = l.get("outlier_ratio")
    if scale and ratio is not None and ratio >= OUTLIER_RATIO_FINDING:
        ch = l.get("outlier_channel")
        where = f"channel {ch}" if ch is not None else "a few values"
        return (f"activation outliers in {where}: range {ratio:,.0f}x the typical channel's 99.9th percentile "
                f"(~{math.log2(ratio):.0f} of {bits or 8} bits spent on them): {keep + ', or ' if keep else ''}"
                "int16x8, or fix the model's range (rescale that channel into the next layer)")
    if scale and bits and l.get("float_max") is not None:
        zp = l.get("zero_point") or 0
        lo_q, hi_q = (-(2 ** (bits - 1)) - zp) * scale, ((2 ** (bits - 1)) - 1 - zp) * scale
        if (l["float_max"] > hi_q + CLIPPED_STEPS * scale or l["float_min"] < lo_q - CLIPPED_STEPS * scale) and qat:
            return (f"clipping: float values [{_num(l['float_min'], 3)}, {_num(l['float_max'], 3)}] beyond the range "
                    f"[{_num(lo_q, 3)}, {_num(hi_q, 3)}] learned in quantization-aware training (its FakeQuant "
                    "range, not calibration): the fix is in training (train on data covering these values, or keep "
                    "this layer float in the QAT model)")
        if l["float_max"] > hi_q + CLIPPED_STEPS * scale or l["float_min"] < lo_q - CLIPPED_STEPS * scale:
            return (f"clipping: float range [{_num(l['float_min'], 3)}, {_num(l['float_max'], 3)}] exceeds the "
                    f"quantized range [{_num(lo_q, 3)}, {_num(hi_q, 3)}] fitted on the calibration data: calibrate "
                    f"on representative data (--calibration-data){' or ' + keep if keep else ''}")
    hot = [x for x in ((by_tensor or {}).get(i) for i in l.get("input_tensors") or []) if x is not None
           and (x.get("outlier_ratio") or 0) >= OUTLIER_RATIO_FINDING]
    if hot and not scale:   # hybrid (dynamic-range) kernels quantize their float input per tensor at run time
        x = hot[0]
        return (f"its input {_short(x['tensor'])} has activation outliers (channel {x.get('outlier_channel')}, "
                f"{x['outlier_ratio']:,.0f}x the typical channel): quantizing that input per tensor crushes the "
                "other channels: use fp16, or int8 with --keep-float for it, or fix the model's range")
    lo, hi = l.get("float_min"), l.get("float_max")
    if l.get("op") in FIXED_STEP_OPS and scale and bits and hi is not None and max(abs(hi), abs(lo or 0.0)) < scale:
        return (f"the integer {l['op']} kernel's output step is fixed at {_num(scale, 4)} (1/{1 / scale:,.0f}) and "
                f"the float values [{_num(lo, 3)}, {_num(hi, 3)}] are below one step, so they round to 0: not a "
                f"calibration or delegate problem; {keep + ', or ' if keep else ''}int16x8 (a 256x finer step); "
                "judge the fix by cosine, which sees the zeros")
    if scale and bits and lo is not None and hi is not None:
        used = max(hi, 0.0) - min(lo, 0.0)
        grid = (2 ** bits - 1) * scale
        if grid > UNUSED_RANGE_FACTOR * max(used, 1e-30):
            return (f"range far wider than the values: the {bits}-bit grid spans {_num(grid, 3)} but the float values "
                    f"span [{_num(lo, 3)}, {_num(hi, 3)}] ({grid / max(used, 1e-30):,.0f}x), so most round to one "
                    "level; the converter gave this tensor a range it does not use (often shared through a SELECT/"
                    f"CONCATENATION/ADD input such as an attention-mask constant): {keep + ', or ' if keep else ''}"
                    "int16x8, or give the mask a value near the data's range")
    if precision == "fp16" and not scale and lo is not None and max(abs(lo), abs(hi or 0.0)) > FLOAT16_MAX:
        return (f"float range [{_num(lo, 3)}, {_num(hi, 3)}] exceeds float16's ±65504: a constant stored as "
                "float16 saturates (e.g. an attention-mask value of -1e9); harmless when a softmax follows -- check "
                "the layers after it -- else keep fp32 for it")
    r = l.get("isolated_rmse_over_scale")
    if r is not None and r > 2 * NOISE_RATIO:
        return (f"{r:.1f} steps rms in isolation (rounding alone gives {NOISE_RATIO:.3f}): the integer kernel "
                f"loses precision here: {keep + ' or ' if keep else ''}int16x8")
    if bits:
        return (f"{bits}-bit steps too coarse here (SNR {_num(q)} dB from rounding alone): "
                f"{keep + ' or ' if keep else ''}int16x8")
    return (f"error above the rest of the model (SNR {_num(q)} dB): this precision hurts this op; use int8 "
            "with --keep-float for it, or fp32")


def _num(v: Any, digits: int = 1) -> str:
    f = _f(v)
    if f is None:
        return "-"
    if math.isinf(f):
        return "inf" if f > 0 else "-inf"
    return f"{f:.{digits}f}" if abs(f) >= 10 ** -digits or f == 0 else f"{f:.2g}"


def _keep_float_option(l: dict[str, Any], precision: str | None) -> str:
    """``keep float (--keep-float 'NAME')`` with the whole float tensor name, runnable as printed --
    or "" when the layer has no float tensor to keep (an int8-only tensor such as a final SOFTMAX's
    output) or the precision is not int8 (``--keep-float`` re-quantizes int8 only)."""
    ft = l.get("float_tensor")
    if not ft or precision not in (None, "int8"):
        return ""
    return f"keep float (--keep-float {shlex.quote(str(ft))})"


def _short(name: str, limit: int = 60) -> str:
    """A tensor name shortened for advice text (the full name is in the JSON)."""
    first = name.split(";")[0]
    s = first if len(first) <= limit else "…" + first[-limit:]
    return shlex.quote(s)


def suggest_keep_float(layers: list[dict[str, Any]], precision: str, limit: int = 3) -> list[str]:
    """Float-tensor names worth keeping float: the causes among the findings (int8 only)."""
    if precision != "int8":
        return []
    out = []
    for l in layers:
        if l["finding"] and not l.get("inherits_from") and l.get("scale") and l.get("float_tensor") \
                and not l.get("already_float"):
            if l["float_tensor"] not in out:
                out.append(l["float_tensor"])
        if len(out) >= limit:
            break
    return out
