"""Which layer breaks a quantized model, and the fix, proven.

``diagnose(settings)`` converts SRC exactly as ``convert-and-compare`` does, builds the same
InputSet, and for every requested precision compares each tensor of the quantized ``.tflite``
with its float counterpart (in an isolated worker, ``edgebench.diagnose_worker``): accumulated error
(the whole quantized model) and isolated error (the op alone, fed the float model's values), the
float range and its outlier ratio, then ranks the layers worst first and says what to do.
``search_keep_float`` (``--keep-float auto`` on ``convert`` / ``convert-and-compare``) proves a fix:
it keeps a few ranked tensors float until the accuracy goal is met.

**Float counterpart.** int8 / int16x8: the converter's calibrated float model (the graph the
quantizer starts from, so tensor names carry over); fp16 / dynamic: the FP32 ``.tflite``. Tensors
are matched by name, then QUANTIZE/DEQUANTIZE outputs inherit their input's match, then by op type
and order (``edgebench.diagnose_worker.match_tensors``); unmatched tensors are listed.

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
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

import numpy as np

from edgebench import compare as cmp
from edgebench.convert import ConvertSettings
from edgebench.errors import BadInput
from edgebench.rows import Accuracy, Document, InferenceRow
from edgebench.sources import SourceOptions
from edgebench.targets.base import DEFAULT_DELEGATE, RunControl

DEFAULT_SAMPLES = 100          # per-layer statistics converge in far fewer; accuracy uses these too
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
SEARCH_CANDIDATES = 6          # ranked tensors the keep-float search may keep float
SEARCH_DIAGNOSE_SAMPLES = 100
WORKER_DEADLINE_S = 3600.0
FLOAT_REFERENCE = {"int8": "calibrated", "int16x8": "calibrated", "fp16": "fp32", "dynamic": "fp32"}
QUANTIZED = tuple(FLOAT_REFERENCE)
RANKING_RULE = ("worst isolated median-channel SNR first (isolated tensor SNR without channels, "
                "accumulated when the op cannot run alone); a layer within "
                f"{INHERIT_MARGIN_DB:g} dB of a bad input's error follows that input's producer; "
                f"finding: modified z-score >= {Z_FINDING:g} (Iglewicz & Hoaglin 1993) below {SNR_CEILING_DB:g} dB, "
                f"or SNR < {SNR_FLOOR_DB:g} dB, or NaN/Inf")
MATCHING_RULE = ("tensor name, then QUANTIZE/DEQUANTIZE outputs take their input's match, then the k-th "
                 "op of a type to the k-th op of that type with the same shape; unmatched tensors listed")
ISOLATION_RULE = ("each op alone in a one-op .tflite (its weights and quantization copied), fed the float "
                  "model's values quantized to its input tensors' scale/zero point")


@dataclass(frozen=True)
class DiagnoseSettings:
    src: str
    precisions: tuple[str, ...] = ("int8",)
    data: str | None = None
    calibration_data: str | None = None
    eval_samples: int = DEFAULT_SAMPLES
    calibration_samples: int = ConvertSettings.calibration_samples   # conversion defaults: convert's
    int8_io: str = ConvertSettings.int8_io
    out_dir: str | None = None
    preprocess: str = ConvertSettings.preprocess
    size: str = ConvertSettings.size
    seed: int = ConvertSettings.seed
    class_output: str | None = None
    isolated: bool = True
    deadline_s: float = WORKER_DEADLINE_S
    source: SourceOptions = field(default_factory=SourceOptions)   # --signature/--input-shape/--import


@dataclass(frozen=True)
class KeepFloatGoal:
    """What ``--keep-float auto`` must reach, and how candidates are measured."""

    max_accuracy_drop_pp: float | None = None
    min_psnr_db: float | None = None
    eval_data: str | None = None          # else the reference model's evaluation split
    eval_samples: int = 1000              # convert-and-compare passes its own --samples
    preprocess: str = ConvertSettings.preprocess
    seed: int = ConvertSettings.seed
    class_output: str | None = None
    threads: int | None = None
    delegate: str = DEFAULT_DELEGATE
    control: RunControl = field(default_factory=RunControl)   # timing of the candidates table
    candidates: int = SEARCH_CANDIDATES

    def meets(self, cand: dict[str, Any]) -> bool:
        if self.max_accuracy_drop_pp is not None and not (cand.get("top1_drop_pp") is not None
                                                          and cand["top1_drop_pp"] <= self.max_accuracy_drop_pp):
            return False
        if self.min_psnr_db is not None and not (cand.get("psnr_db") is not None
                                                 and cand["psnr_db"] >= self.min_psnr_db):
            return False
        return True

    def describe(self) -> str:
        parts = []
        if self.max_accuracy_drop_pp is not None:
            parts.append(f"top-1 drop <= {self.max_accuracy_drop_pp:g} pp")
        if self.min_psnr_db is not None:
            parts.append(f"PSNR >= {self.min_psnr_db:g} dB")
        return " and ".join(parts)


# --------------------------------------------------------------------------- the worker


def run_worker(float_model: str | Path, quant_model: str | Path, inputs_npz: str | Path, *, samples: int,
               isolated: bool = True, deadline_s: float = WORKER_DEADLINE_S) -> tuple[dict, dict]:
    """Per-tensor statistics from ``edgebench.diagnose_worker`` in its own process."""
    import sys

    from edgebench.targets.host import spawn_worker

    work = Path(tempfile.mkdtemp(prefix="edgebench-diagnose-"))
    try:
        job = {"float_model": str(Path(float_model).resolve()), "quant_model": str(Path(quant_model).resolve()),
               "inputs_npz": str(Path(inputs_npz).resolve()), "samples": int(samples), "isolated": bool(isolated),
               "out_dir": str(work)}
        job_file = work / "job.json"
        job_file.write_text(json.dumps(job))
        return spawn_worker([sys.executable, "-m", "edgebench.diagnose_worker", str(job_file)], work,
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


def rank_layers(tensors: list[dict[str, Any]], precision: str | None = None) -> list[dict[str, Any]]:
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
        l["finding"] = bool(l["nonfinite"] or (q is not None and q < SNR_FLOOR_DB)
                            or (l["z"] is not None and l["z"] >= Z_FINDING and (q is None or q < SNR_CEILING_DB)))
    for l in layers:   # the cause first: an input that is itself a finding and about as bad
        causes = [by_index[i] for i in l["_inputs"] if l["finding"] and i in by_index and by_index[i]["finding"]]
        q = l["ranking_snr_db"]
        causes = [c for c in causes if c["ranking_snr_db"] is not None and q is not None
                  and c["ranking_snr_db"] <= q + INHERIT_MARGIN_DB]
        l["inherits_from"] = min(causes, key=lambda c: c["ranking_snr_db"])["tensor"] if causes else None
    placed, out, waiting = set(), [], {}
    for l in sorted(layers, key=_rank_key):
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
        l["advice"] = advice(l, by_tensor={x["tensor"]: x for x in out}, precision=precision)
        l.pop("_index", None)
        l.pop("_inputs", None)
    return out


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
           precision: str | None = None) -> str:
    """One sentence per layer: what the numbers say and what to do."""
    q = l.get("ranking_snr_db")
    bits = _bits(l.get("dtype"))
    scale = l.get("scale")
    name = l.get("float_tensor") or l["tensor"]
    if l.get("nonfinite"):
        return f"NaN/Inf in the quantized output ({l['nonfinite']} values): keep float (--keep-float {_short(name)})"
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
                f"(~{math.log2(ratio):.0f} of {bits or 8} bits spent on them): keep float "
                f"(--keep-float {_short(name)}), or int16x8, or fix the model's range (rescale that channel "
                "into the next layer)")
    if scale and bits and l.get("float_max") is not None:
        zp = l.get("zero_point") or 0
        lo_q, hi_q = (-(2 ** (bits - 1)) - zp) * scale, ((2 ** (bits - 1)) - 1 - zp) * scale
        if l["float_max"] > hi_q + CLIPPED_STEPS * scale or l["float_min"] < lo_q - CLIPPED_STEPS * scale:
            return (f"clipping: float range [{_num(l['float_min'], 3)}, {_num(l['float_max'], 3)}] exceeds the "
                    f"quantized range [{_num(lo_q, 3)}, {_num(hi_q, 3)}] fitted on the calibration data: calibrate "
                    f"on representative data (--calibration-data) or keep float (--keep-float {_short(name)})")
    hot = [x for x in ((by_tensor or {}).get(i) for i in l.get("input_tensors") or []) if x is not None
           and (x.get("outlier_ratio") or 0) >= OUTLIER_RATIO_FINDING]
    if hot and not scale:   # hybrid (dynamic-range) kernels quantize their float input per tensor at run time
        x = hot[0]
        return (f"its input {_short(x['tensor'])} has activation outliers (channel {x.get('outlier_channel')}, "
                f"{x['outlier_ratio']:,.0f}x the typical channel): quantizing that input per tensor crushes the "
                "other channels: use fp16, or int8 with --keep-float for it, or fix the model's range")
    lo, hi = l.get("float_min"), l.get("float_max")
    if scale and bits and lo is not None and hi is not None:
        used = max(hi, 0.0) - min(lo, 0.0)
        grid = (2 ** bits - 1) * scale
        if grid > UNUSED_RANGE_FACTOR * max(used, 1e-30):
            return (f"range far wider than the values: the {bits}-bit grid spans {_num(grid, 3)} but the float values "
                    f"span [{_num(lo, 3)}, {_num(hi, 3)}] ({grid / max(used, 1e-30):,.0f}x), so most round to one "
                    "level; the converter gave this tensor a range it does not use (often shared through a SELECT/"
                    "CONCATENATION/ADD input such as an attention-mask constant): keep float "
                    f"(--keep-float {_short(name)}), or int16x8, or give the mask a value near the data's range")
    if precision == "fp16" and not scale and lo is not None and max(abs(lo), abs(hi or 0.0)) > FLOAT16_MAX:
        return (f"float range [{_num(lo, 3)}, {_num(hi, 3)}] exceeds float16's ±65504: a constant stored as "
                "float16 saturates (e.g. an attention-mask value of -1e9); harmless when a softmax follows -- check "
                "the layers after it -- else keep fp32 for it")
    r = l.get("isolated_rmse_over_scale")
    if r is not None and r > 2 * NOISE_RATIO:
        return (f"{r:.1f} steps rms in isolation (rounding alone gives {NOISE_RATIO:.3f}): the integer kernel "
                f"loses precision here: keep float (--keep-float {_short(name)}) or int16x8")
    if bits:
        return (f"{bits}-bit steps too coarse here (SNR {_num(q)} dB from rounding alone): keep float "
                f"(--keep-float {_short(name)}) or int16x8")
    return (f"error above the rest of the model (SNR {_num(q)} dB): this precision hurts this op; use int8 "
            "with --keep-float for it, or fp32")


def _num(v: Any, digits: int = 1) -> str:
    f = _f(v)
    if f is None:
        return "-"
    if math.isinf(f):
        return "inf" if f > 0 else "-inf"
    return f"{f:.{digits}f}" if abs(f) >= 10 ** -digits or f == 0 else f"{f:.2g}"


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
        if l["finding"] and not l.get("inherits_from") and l.get("scale") and l.get("float_tensor"):
            if l["float_tensor"] not in out:
                out.append(l["float_tensor"])
        if len(out) >= limit:
            break
    return out


# --------------------------------------------------------------------------- the command


def _precisions(requested: tuple[str, ...]) -> tuple[list[str], list[str]]:
    from edgebench.convert import PRECISION_NAMES

    bad = [p for p in requested if p not in PRECISION_NAMES]
    if bad:
        raise BadInput(f"--precision: unknown value {bad[0]!r}; use one or more of {', '.join(QUANTIZED)}")
    quantized = [p for p in requested if p in QUANTIZED]
    skipped = [p for p in requested if p not in QUANTIZED]
    if not quantized:
        raise BadInput("--precision fp32: fp32 against the float model quantizes nothing, so there is no "
                       "quantization error to diagnose; pass --precision int8 (or int16x8, fp16, dynamic)")
    return quantized, skipped


def diagnose_command(src: str, precisions: list[str], *, data: str | None = None,
                     calibration_data: str | None = None, samples: int | None = None, size: str = "tiny",
                     preprocess: str | None = None, int8_io: str = "float") -> str:
    """The exact ``edgebench diagnose`` command line for a run (gate-failure messages point to it)."""
    parts = ["edgebench", "diagnose", src, "--precision", ",".join(precisions)]
    for flag, value in (("--data", data), ("--calibration-data", calibration_data),
                        ("--samples", samples), ("--preprocess", preprocess)):
        if value is not None:
            parts += [flag, str(value)]
    if size != "tiny":
        parts += ["--size", size]
    if int8_io != "float":
        parts += ["--int8-io", int8_io]
    return " ".join(shlex.quote(p) for p in parts)


def diagnose(settings: DiagnoseSettings, progress: Callable[[str], None] | None = None) -> Document:
    """Convert, run the per-tensor comparison for each quantized precision, rank. Returns the
    result document (kind "diagnose"); see the module docstring for every definition."""
    from edgebench.convert import calibrated_model, check_manifest, convert, resolve_source
    from edgebench.data import load_data, validate
    from edgebench.sources import calibration_feed, finish_tflite
    from edgebench.fingerprint import host_fingerprint
    from edgebench.pipeline import eval_set

    say = progress or (lambda _m: None)
    settings = replace(settings, source=settings.source.for_measuring(settings.src))   # as convert-and-compare
    quantized, skipped = _precisions(tuple(settings.precisions))
    if settings.eval_samples <= 0:
        raise BadInput(f"--samples {settings.eval_samples}: must be positive")
    t0 = time.perf_counter()
    if hasattr(say, "set_total"):
        say.set_total(4 + 3 * len(quantized))
    manifest = convert(ConvertSettings(
        src=settings.src, precisions=tuple(quantized), data=settings.calibration_data or settings.data,
        calibration_samples=settings.calibration_samples, int8_io=settings.int8_io, out_dir=settings.out_dir,
        preprocess=settings.preprocess, size=settings.size, seed=settings.seed, source=settings.source),
        progress=say)
    check_manifest(manifest)
    out_dir = Path(manifest["out_dir"])
    src = resolve_source(settings.src, size=settings.size, work_dir=out_dir, seed=settings.seed,
                         options=settings.source)
    task = (src.info or {}).get("task", "classification")
    say("evaluation inputs")
    ds = eval_set(settings, src, out_dir)
    inputs_path = out_dir / "diagnose_inputs.npz"
    inputs_sha = ds.save(inputs_path)
    say("TensorFlow reference")
    from edgebench.convert import run_tf

    ref_out = run_tf(src.saved_model_dir, src.signature, ds, signature_key=src.signature_key, loader=src.loader,
                     tags=src.tags)
    declared = settings.class_output or (src.info or {}).get("class_output")
    class_out = cmp.pick_class_output(ref_out, declared) if task == "classification" or declared else None
    ref_acc = (cmp.classification(ref_out[class_out], ref_out[class_out], ds.labels)
               if class_out is not None and ds.labels is not None else None)

    calib = None
    if any(FLOAT_REFERENCE[p] == "calibrated" for p in quantized) and not src.qat:
        if settings.calibration_data or settings.data:
            cal_ds = load_data(settings.calibration_data or settings.data, src.signature,
                               preprocess=settings.preprocess, seed=settings.seed)
        else:
            cal_ds = src.calibration
            validate(cal_ds, src.signature)
        calib = calibration_feed(src, cal_ds, min(settings.calibration_samples, cal_ds.n))

    fp32 = manifest["variants"]["fp32"]
    # Rows are built in their JSON form (the diagnose keys -- layers, suggested_keep_float ... -- ride
    # through InferenceRow's round trip unchanged) and typed once at the end.
    rows: list[dict[str, Any]] = [{"precision": p, "target": "host", "model": src.name, "status": "skipped",
                                   "error": f"{p} is the float reference: nothing is quantized"} for p in skipped]
    for prec in quantized:
        v = manifest["variants"][prec]
        t_p = time.perf_counter()
        if FLOAT_REFERENCE[prec] == "calibrated" and calib is not None:   # (QAT int8: the FP32 model)
            say(f"{prec}: calibrated float model")
            strict = v.get("quantization", {}).get("mode") == "full-integer"
            float_path = out_dir / f"{src.name}_{prec}_calibrated.tflite"
            float_path.write_bytes(finish_tflite(src, calibrated_model(src, calib, prec, settings.int8_io,
                                                                       strict=strict)))
        else:
            float_path = Path(fp32["path"])
        say(f"{prec}: per-tensor comparison ({ds.n} samples)")
        t_w = time.perf_counter()
        meta, arrays = run_worker(float_path, v["path"], inputs_path, samples=ds.n, isolated=settings.isolated,
                                  deadline_s=settings.deadline_s)
        meta["worker_seconds"] = round(time.perf_counter() - t_w, 3)
        say(f"{prec}: ranking")
        row = _row(prec, v, src.name, meta, arrays, ref_out, ds.labels, class_out, ref_acc,
                   str(float_path), time.perf_counter() - t_p)
        row["fix_commands"] = fix_commands(settings, row)
        rows.append(row)
    reference = InferenceRow(role="reference", precision="tf", target="tf", model=src.name,
                             model_path=str(src.saved_model_dir), model_sha256=src.sha256,
                             accuracy=None if ref_acc is None else Accuracy.from_dict({**ref_acc, "output": class_out}))
    return Document.new(
        "diagnose", [InferenceRow.from_dict(r) for r in rows], host_fingerprint(with_tf=True),
        reference=reference,
        model=src.name,
        source={"path": settings.src, "sha256": src.sha256, "kind": src.kind, "task": task},
        inputs={"path": str(inputs_path), "sha256": inputs_sha, "content_sha256": ds.sha256, "samples": ds.n,
                "source": ds.source, "synthetic": ds.synthetic, "labels": ds.labels is not None},
        manifest=str(out_dir / "manifest.json"),
        method={"matching": MATCHING_RULE, "isolated": ISOLATION_RULE, "ranking": RANKING_RULE,
                "noise_ratio": f"rmse_over_scale ~ 1/sqrt(12) = {NOISE_RATIO:.4f} for rounding alone",
                "outlier_ratio": next((r.get("outlier_ratio_method") for r in rows if r.get("outlier_ratio_method")), None),
                "float_reference": FLOAT_REFERENCE},
        timings={"total_s": time.perf_counter() - t0},
    )


def _row(prec: str, v: dict[str, Any], model: str, meta: dict[str, Any], arrays: dict[str, np.ndarray],
         ref_out: dict[str, np.ndarray], labels, class_out: str | None, ref_acc, float_path: str,
         seconds: float) -> dict[str, Any]:
    from edgebench.pipeline import accuracy_vs_reference

    outputs = {k.split("::", 1)[1]: a for k, a in arrays.items() if k.startswith("out::")}
    layers = rank_layers(meta["tensors"], prec)
    drift = cmp.compare_outputs(ref_out, outputs) if outputs else {}
    suggested = suggest_keep_float(layers, prec)
    row: dict[str, Any] = {
        "precision": prec, "target": "host", "model": model, "model_path": v["path"],
        "model_sha256": v.get("sha256"), "status": "ok", "error": None,
        "size_bytes": v.get("bytes"), "size_reduction_pct": v.get("size_reduction_pct"),
        "float_model_path": float_path, "samples": meta.get("samples"), "graph_id": meta.get("graph_id"),
        "drift": drift, "worst": cmp.worst(drift) if drift else None,
        "accuracy": _acc_dict(accuracy_vs_reference(ref_out, outputs, labels, class_out, ref_acc)) if outputs else None,
        "layers": layers,
        "findings": sum(1 for l in layers if l["finding"]),
        "unmatched": meta.get("unmatched", []),
        "suggested_keep_float": suggested,
        "intermediates": meta.get("intermediates"),
        "memory": meta.get("memory"),
        "outlier_ratio_method": meta.get("outlier_ratio"),
        "tensors_float": meta.get("float_tensors"), "tensors_quantized": meta.get("quantized_tensors"),
        "runtime": meta.get("runtime"),
        "seconds": round(seconds, 3), "worker_seconds": meta.get("worker_seconds"),
    }
    if not any(l["finding"] for l in layers):
        row["verdict"] = "no layer stands out: the error is spread evenly (rounding only)"
    return row


def _acc_dict(acc: Accuracy | None) -> dict[str, Any] | None:
    return None if acc is None else acc.to_dict()


def fix_commands(settings: DiagnoseSettings, row: dict[str, Any]) -> list[str]:
    """Commands that prove a fix for one diagnosed precision (convert-and-compare measures it)."""
    if row.get("status") != "ok" or row["precision"] != "int8":
        return []
    base = ["edgebench", "convert-and-compare", settings.src]
    for flag, value in (("--data", settings.data), ("--calibration-data", settings.calibration_data),
                        ("--preprocess", settings.preprocess if settings.preprocess != "scale01" else None),
                        ("--int8-io", settings.int8_io if settings.int8_io != "float" else None),
                        ("--size", settings.size if settings.size != "tiny" else None)):
        if value is not None:
            base += [flag, str(value)]
    if not settings.source.static_batch and not str(settings.src).endswith(".tflite"):
        base.append("--dynamic-batch")      # convert as diagnose did
    drop = ["--max-accuracy-drop", "1"] if row.get("accuracy") and row["accuracy"].get("top1_drop_pp") is not None \
        else ["--min-psnr", "30"]
    out = []
    if row.get("suggested_keep_float"):
        out.append(base + ["--precision", "fp32,int8", "--keep-float", ",".join(row["suggested_keep_float"])] + drop)
    out.append(base + ["--precision", "fp32,int8", "--keep-float", "auto"] + drop)
    out.append(base + ["--precision", "fp32,int8,int16x8"] + drop)
    return [" ".join(shlex.quote(x) for x in c) for c in out]


# --------------------------------------------------------------------------- keep-float auto


ACCURACY_ONLY = RunControl(runs=1, min_runs=1, min_time_s=0.0, warmup_runs=1)
SEARCH_METHOD = (f"greedy forward selection over the top-{SEARCH_CANDIDATES} tensors of the diagnose ranking: "
                 "each step keeps float the one candidate that most improves the goal metric (top-1 drop, "
                 "else worst-output PSNR; ties to the smaller model) and stops at the first set that meets the "
                 "goal; each kept tensor's producer and consumers run in float")


SEARCH_STALL_STEPS = 2       # greedy steps in a row that move nothing end the search
SEARCH_MIN_GAIN_DB = 0.5     # ... "moves": at least this much PSNR
SEARCH_MIN_GAIN_PP = 0.5     # ... or this many fewer top-1 points lost
FLOAT_PARITY_DB = 100.0      # a PSNR only float arithmetic reaches (fp32 files score 140+ dB)


def _moved(before: dict[str, Any], after: dict[str, Any], goal: "KeepFloatGoal") -> bool:
    """Did keeping one more tensor float move the metric the goal is about?"""
    a, b = before.get("psnr_db"), after.get("psnr_db")
    if goal.min_psnr_db is not None and a is not None and b is not None and (b - a >= SEARCH_MIN_GAIN_DB or
                                                                               math.isinf(b) and not math.isinf(a)):
        return True
    da, db_ = before.get("top1_drop_pp"), after.get("top1_drop_pp")
    return goal.max_accuracy_drop_pp is not None and da is not None and db_ is not None and \
        da - db_ >= SEARCH_MIN_GAIN_PP


def search_keep_float(src, calibrated: bytes, calibrated_path: Path, graph: dict[str, dict[str, Any]], *,
                      goal: KeepFloatGoal | None, out_dir: Path, int8_io: str = "float",
                      fp32_bytes: int | None = None, progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """``--keep-float auto``: the smallest set of ranked tensors kept float that meets ``goal``.
    Returns the search record (``chosen``, ``candidates`` table rows, ``met``, ``method``)."""
    from edgebench.convert import keep_float_nodes, quantize_keep_float, run_tf
    from edgebench.data import cast_to_signature, load_data, validate
    from edgebench.measure import LatencyStats
    from edgebench.pipeline import accuracy_vs_reference
    from edgebench.targets.base import Job
    from edgebench.targets.host import HostTarget

    say = progress or (lambda _m: None)
    if goal is None or (goal.max_accuracy_drop_pp is None and goal.min_psnr_db is None):
        raise BadInput("--keep-float auto needs a goal to search for: --max-accuracy-drop PP and/or --min-psnr DB "
                       "(or int8 thresholds in --gate FILE)")
    t0 = time.perf_counter()
    if goal.eval_data:
        ds = load_data(goal.eval_data, src.signature, preprocess=goal.preprocess, seed=goal.seed)
    elif src.evaluation is not None:
        ds = src.evaluation
        validate(ds, src.signature)
    else:
        raise BadInput("--keep-float auto needs evaluation data: pass --data (convert-and-compare) or --eval-data "
                       "(convert) with real samples, and a 'labels' array for --max-accuracy-drop")
    ds = cast_to_signature(ds, src.signature).take(goal.eval_samples)
    if goal.max_accuracy_drop_pp is not None and ds.labels is None:
        raise BadInput(f"--keep-float auto with --max-accuracy-drop needs labels, but {ds.source} has none; pass "
                       "data with a 'labels' array or search with --min-psnr")
    work = Path(out_dir) / "keep_float_search"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    inputs = work / "inputs.npz"
    inputs_sha = ds.save(inputs)
    say("keep-float search: TensorFlow reference")
    ref = run_tf(src.saved_model_dir, src.signature, ds, signature_key=src.signature_key, loader=src.loader,
                 tags=src.tags)
    class_out = None
    if goal.max_accuracy_drop_pp is not None:
        class_out = cmp.pick_class_output(ref, goal.class_output or (src.info or {}).get("class_output"))
        if class_out is None:
            raise BadInput("--keep-float auto with --max-accuracy-drop needs class scores [samples, classes]; pass "
                           "--class-output NAME or search with --min-psnr")
    ref_acc = cmp.classification(ref[class_out], ref[class_out], ds.labels) if class_out else None
    host = HostTarget(threads=goal.threads, delegate=goal.delegate)
    cache: dict[tuple[str, ...], dict[str, Any]] = {}

    def measure(tensors: list[str], timed: bool) -> dict[str, Any]:
        key = tuple(sorted(tensors))
        cand = cache.get(key)
        if cand is None:
            nodes = keep_float_nodes(list(tensors), graph)
            data, _ = quantize_keep_float(calibrated, nodes, int8_io)
            path = work / f"candidate_{len(cache)}.tflite"
            path.write_bytes(data)
            cand = {"keep_float": list(tensors), "ops": nodes, "bytes": len(data), "path": str(path),
                    "size_reduction_pct": round(100 * (1 - len(data) / fp32_bytes), 2) if fp32_bytes else None}
            cache[key] = cand
        if timed and "p50_ms" in cand or not timed and "top1_drop_pp" in cand:
            return cand
        control = goal.control if timed else ACCURACY_ONLY   # accuracy: one untimed pass over the samples
        run = host.run(Job(model_path=cand["path"], inputs_npz=str(inputs), threads=goal.threads,
                           delegate=goal.delegate, control=control, save_outputs=True, seed=goal.seed))
        if run.status != "ok":
            from edgebench.errors import InfraError

            raise InfraError(f"--keep-float auto: candidate {cand['keep_float']} failed on the host: {run.error}")
        drift = cmp.compare_outputs(ref, run.outputs or {})
        acc = accuracy_vs_reference(ref, run.outputs, ds.labels, class_out, ref_acc) if class_out else None
        cand.update(psnr_db=cmp.worst(drift)["psnr_db"], top1=acc.top1 if acc else None,
                    top1_drop_pp=acc.top1_drop_pp if acc else None)
        if timed:
            lat = LatencyStats.from_samples(run.samples_ns).to_dict()
            cand.update(p50_ms=lat.get("p50"), p99_ms=lat.get("p99"), p99_valid=lat.get("p99_valid"))
        cand["meets_goal"] = goal.meets(cand)
        return cand

    def badness(c: dict[str, Any]) -> tuple:
        drop = c.get("top1_drop_pp")
        psnr = c.get("psnr_db") if c.get("psnr_db") is not None else -math.inf
        return ((drop if drop is not None else 0.0) if goal.max_accuracy_drop_pp is not None else 0.0, -psnr, c["bytes"])

    say("keep-float search: int8 baseline")
    base = measure([], timed=False)
    say("keep-float search: ranking layers (diagnose)")
    meta, _ = run_worker(calibrated_path, base["path"], inputs, samples=min(SEARCH_DIAGNOSE_SAMPLES, ds.n))
    layers = rank_layers(meta["tensors"], "int8")
    ranked: list[str] = []
    for l in layers:
        ft = l.get("float_tensor")
        if l.get("scale") and ft in graph and ft not in ranked:
            ranked.append(ft)
    pool = ranked[:goal.candidates]
    current, path = [], [base]
    stall, stopped = 0, None
    while not goal.meets(path[-1]) and len(current) < len(pool):
        say(f"keep-float search: step {len(current) + 1}")
        options = [measure(current + [c], timed=False) for c in pool if c not in current]
        nxt = min(options, key=badness)
        current = list(nxt["keep_float"])
        stall = 0 if _moved(path[-1], nxt, goal) else stall + 1
        path.append(nxt)
        if stall >= SEARCH_STALL_STEPS:
            psnr = nxt.get("psnr_db")
            why = (f"the goal is out of reach: with these layers float the model already matches float (PSNR "
                   f"{psnr:.1f} dB), so no int8 model can do better; relax the goal"
                   if psnr is not None and psnr >= FLOAT_PARITY_DB else
                   "the error is not in a few layers' int8 activations. Compare the 'dynamic' row (int8 weights, "
                   "float activations): if it is as far off, the 8-bit weights are the cause (quantization-aware "
                   "training, or keep the model fp16)")
            stopped = (f"stopped after {len(current)} step(s): the last {stall} moved the metric by less than "
                       f"{SEARCH_MIN_GAIN_DB:g} dB PSNR / {SEARCH_MIN_GAIN_PP:g} pp top-1, so keeping more of these "
                       f"layers float will not meet the goal: {why}")
            say("keep-float search: " + stopped.split(":")[0])
            break
    say("keep-float search: timing the candidates")
    rows = [measure(c["keep_float"], timed=True) for c in path]
    winner = next((c for c in rows if c["meets_goal"]), min(rows, key=badness))
    table = [{k: v for k, v in c.items() if k != "path"} | {"chosen": c is winner} for c in rows]
    shutil.rmtree(work, ignore_errors=True)
    return {
        "method": SEARCH_METHOD, "goal": goal.describe(), "met": bool(winner["meets_goal"]), "stopped_early": stopped,
        "chosen": list(winner["keep_float"]), "candidates": table, "evaluated": len(cache),
        "ranking": [{"rank": l["rank"], "tensor": l["tensor"], "float_tensor": l.get("float_tensor"), "op": l["op"],
                     "ranking_snr_db": l["ranking_snr_db"], "finding": l["finding"]} for l in layers[:goal.candidates]],
        "reference_top1": (ref_acc or {}).get("top1"),
        "inputs": {"source": ds.source, "samples": ds.n, "sha256": inputs_sha},
        "seconds": round(time.perf_counter() - t0, 3),
    }
