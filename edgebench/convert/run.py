"""SavedModel / .keras / reference model -> .tflite per precision, FP32 parity check, manifest.

``convert(settings)`` writes one ``<name>_<precision>.tflite`` per precision and a
``manifest.json`` describing exactly what was produced (sizes, op histograms, quantization
coverage, tensor quantization parameters, timings, versions, fingerprint, parity verdict).
A variant that fails to convert is recorded as failed with the reason; the others are kept.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import resource
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from edgebench import __version__
from edgebench.convert.errors import REASON_MAX, TENSORLIST_FIX, _one_line, converter_reason  # noqa: F401
from edgebench.convert.parity import parity_check, run_tflite_inprocess
from edgebench.convert.quant.aeq import convert_variant, converter_versions, converts_with_aeq
from edgebench.convert.quant.keep_float import (
    float_tensors,
    keep_float_nodes,
    quantize_keep_float,
    resolve_keep_float,
    verify_keep_float,
)
from edgebench.convert.quant.search import KeepFloatGoal, search_keep_float
from edgebench.convert.worker import Isolated, convert_each, isolated, job_for, prestarted, serve, take
from edgebench.core.atomic import ensure_dir, write_bytes
from edgebench.core.errors import BadInput, ConversionFailed, InfraError, OutputNotWritable, PrecisionFailed
from edgebench.core.fingerprint import host_fingerprint
from edgebench.core.result_file import write_json
from edgebench.judge.drift import detection
from edgebench.model.inputs import (
    DEFAULT_PREPROCESS,
    SYNTHETIC_WARNING,
    InputSet,
    Signature,
    TensorSpec,
    cast_to_signature,
    dequantize,
    quantize,
    synthetic,
    value_ranges,
)
from edgebench.model.savedmodel import run_tf
from edgebench.model.state_rule import DEFAULT_STATE, StateRule
from edgebench.model.state_rule import resolve as resolve_state
from edgebench.model.tflite_model import inspect, mixed_file, precision, precision_detail
from edgebench.model.tflite_size import explain_sizes
from edgebench.sources.describe import describe_tflite
from edgebench.sources.pytorch import reference_outputs

# every stage resolves through here: SavedModel / .keras / reference / .tflite, and PyTorch (.pt2, --torch)
from edgebench.sources.pytorch import resolve_any as resolve_source
from edgebench.sources.resolve import Source, SourceOptions, calibration_feed, finish_tflite, make_converter, sample_set
from edgebench.sources.trust import check_output_dir
from edgebench.targets.base import model_state
from edgebench.targets.runner_io import reset_state

PRECISION_NAMES = ("fp32", "fp16", "int8", "dynamic", "int16x8")
DEFAULT_PRECISIONS = ("fp32", "fp16", "int8", "dynamic")   # int16x8 on request (slower kernels)
INT8_IO = ("float", "int8")   # "int8": integer model I/O (int16 for int16x8)
# Without --out, every conversion gets its own folder OUT_ROOT/<name>/<run key>/ (see run_key).
OUT_ROOT = "edgebench-out"

# FP32 parity: |tflite - tf| <= ATOL + RTOL * max|tf| per output. FP32 TFLite kernels differ from
# TF's by float reassociation only (~1e-6 relative); 1e-3 leaves room for oneDNN/XNNPACK
# accumulation order while catching genuinely wrong graphs (which differ by O(1)).
PARITY_SAMPLES = 32


@dataclass(frozen=True)
class ConvertSettings:
    src: str
    precisions: tuple[str, ...] = DEFAULT_PRECISIONS
    data: str | None = None
    calibration_samples: int = 100
    int8_io: str = "float"
    out_dir: str | None = None
    preprocess: str = DEFAULT_PREPROCESS
    size: str = "tiny"            # reference models only
    seed: int = 0
    parity_samples: int = PARITY_SAMPLES
    source: SourceOptions = field(default_factory=SourceOptions)   # --signature/--input-shape/--import
    # int8 with float islands: "auto" (searched, see edgebench.diagnose.run), a regex, or tensor names.
    keep_float: str | tuple[str, ...] | None = None
    keep_float_goal: KeepFloatGoal | None = None   # required by "auto"
    # int8 with 16-bit activations on these tensors' ops (ai-edge-quantizer sources: float .tflite, PyTorch)
    a16: str | tuple[str, ...] | None = None
    state: str = DEFAULT_STATE     # --state: the parity check's state rule (edgebench.model.state_rule)


# --------------------------------------------------------------------------- converters


def _converter(src: Source, *, calibrated: bool = False):
    """The source's converter: TF2 or graph-level (sources.py), its signature, fixed input shapes.

    ``calibrated`` (integer precisions) never uses a Keras 3 model re-exported at the fixed shapes
    (``source.info.static_export``): TF 2.21's calibrator crashes (SIGSEGV in ``_feed_tensors``) on a
    Keras 3 LSTM traced at a static shape, so integer conversions take the re-called signature, where
    such a model fails with the converter's own reason instead. A tf-keras (Keras 2) model's static
    trace calibrates (and a crash would be one failed row: ``convert_worker``)."""
    keras3 = str(src.info.get("loaded_with", "")).startswith("keras ")
    if calibrated and keras3 and src.info.get("static_export"):
        src = dataclasses.replace(src, info={k: v for k, v in src.info.items() if k != "static_export"})
    return make_converter(src)


KERAS3_RECURRENT_INT8 = (
    "{prec} cannot be converted from a Keras 3 recurrent layer with TensorFlow 2.21: the calibrator crashes "
    "(SIGSEGV in _feed_tensors) on the model traced at a fixed shape, and the model's own signature keeps the "
    "loop's TensorList shape dynamic, which LiteRT builtins cannot hold -- --static-batch and --input-shape do not "
    "change that; use fp16 or dynamic (converted from the fixed-shape trace), or re-save the model with tf-keras "
    "(Keras 2), whose fixed-shape trace calibrates (converter: {reason})")


def integer_failure_reason(src: Source, prec: str, error: str | None, detail: str | None = None) -> str | None:
    """A failed variant's one-line reason; for an integer precision of a Keras 3 model that fails on
    an LSTM/GRU's ``TensorListReserve`` the real cause (``_converter``: integer precisions cannot use
    the fixed-shape trace) and what works instead, not the shape advice that does not help there."""
    keras3 = str((src.info or {}).get("loaded_with", "")).startswith("keras ")
    text = f"{error or ''}\n{detail or ''}"
    if prec in INTEGER_OPSETS and keras3 and "TensorListReserve" in text:
        reason = (error or "").split("; a recurrent layer traced")[0]
        return KERAS3_RECURRENT_INT8.format(prec=prec, reason=reason)
    return error


def _conv_fp32(src: Source, calib: Callable | None, int8_io: str) -> tuple[bytes, dict]:
    return _converter(src).convert(), {}


def _conv_fp16(src: Source, calib: Callable | None, int8_io: str) -> tuple[bytes, dict]:
    import tensorflow as tf

    c = _converter(src)
    c.optimizations = [tf.lite.Optimize.DEFAULT]
    c.target_spec.supported_types = [tf.float16]
    return c.convert(), {"weights": "float16", "activations": "float32"}


def _conv_dynamic(src: Source, calib: Callable | None, int8_io: str) -> tuple[bytes, dict]:
    import tensorflow as tf

    c = _converter(src)
    c.optimizations = [tf.lite.Optimize.DEFAULT]
    return c.convert(), {"weights": "int8", "activations": "float32 (dynamic range)"}


# Integer precisions: the op set that makes the converter quantize activations to that width.
INTEGER_OPSETS = {
    "int8": "TFLITE_BUILTINS_INT8",
    "int16x8": "EXPERIMENTAL_TFLITE_BUILTINS_ACTIVATIONS_INT16_WEIGHTS_INT8",   # 16-bit activations
}
INTEGER_QINFO = {
    "int8": {"weights": "int8", "activations": "int8"},
    "int16x8": {"weights": "int8", "activations": "int16"},
}


def integer_converter(src: Source, calib: Callable | None, precision: str, int8_io: str, *, strict: bool):
    """The TFLite converter set up for an integer precision. ``strict`` False adds float builtins
    for ops without an integer kernel. ``int8_io`` "int8" makes the model's float inputs/outputs
    integer: int8 for int8, int16 for int16x8."""
    import tensorflow as tf

    if calib is None:
        raise BadInput(f"{precision} needs calibration data; pass --data (or use a reference model)")
    c = _converter(src, calibrated=True)
    c.optimizations = [tf.lite.Optimize.DEFAULT]
    c.representative_dataset = calib
    opset = getattr(tf.lite.OpsSet, INTEGER_OPSETS[precision])
    c.target_spec.supported_ops = [opset] if strict else [opset, tf.lite.OpsSet.TFLITE_BUILTINS]
    if int8_io == "int8":
        io = tf.int16 if precision == "int16x8" else tf.int8
        c.inference_input_type = io
        c.inference_output_type = io
    return c


def _conv_integer(precision: str) -> Callable[[Source, Callable | None, str], tuple[bytes, dict]]:
    """Full-integer conversion. Falls back to integer + float builtins for ops without integer
    kernels (e.g. SSD's NMS); the coverage report then lists the ops that stayed float."""

    def conv(src: Source, calib: Callable | None, int8_io: str) -> tuple[bytes, dict]:
        info = {**INTEGER_QINFO[precision], "io": int8_io}
        try:
            return (integer_converter(src, calib, precision, int8_io, strict=True).convert(),
                    {**info, "mode": "full-integer"})
        except BadInput:
            raise
        except Exception as strict_err:  # noqa: BLE001 -- converter raises ConverterError/RuntimeError
            try:
                data = integer_converter(src, calib, precision, int8_io, strict=False).convert()
            except Exception:  # noqa: BLE001
                raise strict_err from None
            return data, {**info, "activations": f"{info['activations']} where kernels exist",
                          "mode": f"{precision} with float fallback", "fallback_reason": _one_line(strict_err)}

    return conv


PRECISIONS: dict[str, Callable[[Source, Callable | None, str], tuple[bytes, dict]]] = {
    "fp32": _conv_fp32,
    "fp16": _conv_fp16,
    "int8": _conv_integer("int8"),
    "dynamic": _conv_dynamic,
    "int16x8": _conv_integer("int16x8"),
}


# --------------------------------------------------------------------------- keep-float (int8 islands)
#
# Mechanism: calibrate once (the converter's ``_experimental_calibrate_only``: the float model with
# the calibration ranges attached), then quantize that model with
# ``tensorflow.lite.python.convert.mlir_quantize(..., denylisted_nodes=[op output names])`` -- the
# route tf.lite.experimental.QuantizationDebugger takes for its ``denylisted_nodes`` option. Without
# a denylist this gives the same model as the plain int8 conversion (same outputs, tested). A
# denylisted op runs in float, but its float output is re-quantized for an integer consumer with the
# calibrated range, so keeping a *tensor* float means denylisting the op that produces it and every
# op that reads it. The result is checked by reading the .tflite (``verify_keep_float``).

def calibrated_model(src: Source, calib: Callable | None, precision: str = "int8", int8_io: str = "float",
                     *, strict: bool = True) -> bytes:
    """The float model with calibration ranges: what the quantizer of ``precision`` starts from.
    Its tensor names are the quantized model's, which is how diagnose matches tensors."""
    try:
        c = integer_converter(src, calib, precision, int8_io, strict=strict)
        c._experimental_calibrate_only = True  # noqa: SLF001 -- the documented debugger route
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")   # the calibrator's own tf.lite.Interpreter deprecation notice
            return c.convert()
    except BadInput:
        raise
    except Exception:  # noqa: BLE001 -- strict op set refused: the fallback conversion's graph
        if not strict:
            raise
        return calibrated_model(src, calib, precision, int8_io, strict=False)


def _conv_int8_qat(src: Source, calib: Callable | None, int8_io: str) -> tuple[bytes, dict]:
    """INT8 of a quantization-aware (FakeQuant) model: its trained ranges, no calibration."""
    import tensorflow as tf

    c = _converter(src)
    c.optimizations = [tf.lite.Optimize.DEFAULT]
    if int8_io == "int8":
        c.inference_input_type = tf.int8
        c.inference_output_type = tf.int8
    return c.convert(), {"weights": "int8", "activations": "int8", "io": int8_io,
                         "mode": "quantization-aware (FakeQuant ranges)",
                         "calibration": "none: ranges come from the model's FakeQuant ops"}


# --------------------------------------------------------------------------- inspection


def precision_detail_of(path: str | Path) -> str | None:
    """How a mixed file is mixed (tflite_model.precision_detail), or None."""
    return precision_detail(inspect(path))


def precision_of(path: str | Path) -> str:
    """The precision a .tflite actually has (tflite_model.precision: kernels and constants)."""
    return precision(inspect(str(path)))


# --------------------------------------------------------------------------- the job


def _peak_rss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _calibration_set(settings: ConvertSettings, src: Source) -> InputSet | None:
    ds = sample_set(src, settings.data, preprocess=settings.preprocess, seed=settings.seed, split="calibration",
                    samples=max(settings.calibration_samples, settings.parity_samples, 1))
    if ds is None:
        return None
    if settings.calibration_samples <= 0:
        raise BadInput(f"--calibration-samples {settings.calibration_samples}: must be positive")
    return ds


def run_key(settings: ConvertSettings, src: Source, calibration_sha256: str | None) -> tuple[str, dict[str, Any]]:
    """What decides the bytes a conversion writes -- source content, precisions, INT8 I/O,
    calibration data, seed, TF and edgebench versions -- and its sha256, the conversion's
    ``run_key``. Without ``--out`` the files go to ``OUT_ROOT/<name>/<run_key[:12]>/``: two runs
    that would write different files never share a folder; the same command run again reuses it."""
    import tensorflow as tf


    opts = settings.source
    facts = {"source_sha256": src.sha256, "source_kind": src.kind, "size": settings.size if src.kind == "reference"
             else None, "signature": opts.signature_key, "input_shapes": [[n, list(d)] for n, d in opts.input_shapes],
             "static_batch": bool(opts.static_batch),
             "imports": list(opts.imports), "precisions": sorted(settings.precisions),
             "keep_float": ([settings.keep_float] if isinstance(settings.keep_float, str)
                            else list(settings.keep_float or ())),
             "keep_float_goal": None if settings.keep_float_goal is None else repr(settings.keep_float_goal), "int8_io": settings.int8_io,
             "calibration_sha256": calibration_sha256, "calibration_samples": settings.calibration_samples,
             "seed": settings.seed, "parity_samples": settings.parity_samples, "tensorflow": tf.__version__,
             "edgebench": __version__}
    if converts_with_aeq(src):          # (keys only where they apply: TF sources keep their run keys)
        facts.update(a16=settings.a16, converters=converter_versions(src), channels_last=opts.channels_last,
                     torch=opts.torch)
    return hashlib.sha256(json.dumps(facts, sort_keys=True).encode()).hexdigest(), facts


RUN_MARKER = ".edgebench-run.json"


def out_fix(out_dir: str | None) -> str:
    """What to do about an output folder that cannot be made: the user's ``--out``, or the working
    folder under which ``edgebench-out/`` goes (the default, and every matrix cell's folder)."""
    if out_dir is None:
        return f"pass --out DIR (a writable folder) or run from a writable working folder (the default is ./{OUT_ROOT})"
    if not Path(out_dir).is_absolute() and Path(out_dir).parts[:1] == (OUT_ROOT,):
        return f"run from a writable working folder (edgebench writes under ./{OUT_ROOT})"
    return "choose a writable folder for --out"


def claim_out_dir(out_dir: Path, key: str, facts: dict[str, Any], name: str) -> None:
    """Claim an output folder for one conversion, or refuse it (BadInput, before anything is
    converted) when it holds another conversion's files: a second run must never silently
    replace the .tflite files a stored result describes. The claim is a marker file created
    exclusively (``RUN_MARKER``: the run key and what it covers), so of two runs started at once
    only one gets the folder; the same conversion (same ``run_key``) may write into it again."""

    ensure_dir(out_dir)
    marker = out_dir / RUN_MARKER
    try:
        with open(marker, "x", encoding="utf-8") as fh:
            stray = sorted(p.name for p in out_dir.glob(f"{name}_*.tflite"))
            if stray or (out_dir / "manifest.json").exists():
                fh.close()
                marker.unlink()
                raise BadInput(f"--out {out_dir} already holds {', '.join(stray[:3]) or 'manifest.json'} from an "
                               "earlier conversion that did not record its settings; converting into it would "
                               "replace files another result describes. Give an empty folder or another --out "
                               f"(or omit --out: each conversion then gets its own folder), or delete {out_dir}")
            json.dump({"run_key": key, **facts}, fh, sort_keys=True)
        return
    except FileExistsError:
        pass
    try:
        theirs = json.loads(marker.read_text())
    except (OSError, ValueError):
        theirs = {}
    if theirs.get("run_key") == key:
        return
    differ = [f"{k} {theirs.get(k)!r} there, {v!r} now" for k, v in facts.items() if theirs.get(k) != v]
    raise BadInput(f"--out {out_dir} already holds the files of another conversion ({'; '.join(differ[:3])}); "
                   "converting into it would replace the .tflite files another result describes. Give an empty "
                   f"folder or another --out (or omit --out: each conversion then gets its own folder), or delete "
                   f"{out_dir}")


@dataclass(frozen=True)
class Converted:
    """A conversion's manifest and the source it converted, resolved once: a workflow that goes on to
    run the model (convert-and-compare's TF reference, its inputs) takes this ``source`` instead of
    reading the model again. After a static-batch fallback it is the dynamic-batch source."""
    manifest: dict[str, Any]
    source: Source


def convert(settings: ConvertSettings, progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Run the conversion job; returns the manifest (also written to OUT/manifest.json).

    Failed variants -- a converter crash included (``convert_worker``) -- and a failed FP32 parity
    check are recorded, not raised: call ``check_manifest`` to turn them into a ``ConversionFailed``
    after rendering.
    """
    return convert_resolved(settings, progress).manifest


def convert_resolved(settings: ConvertSettings, progress: Callable[[str], None] | None = None) -> Converted:
    """``convert``, also handing back the source as resolved for the conversion (``Converted``)."""
    calibrated = any(p in INTEGER_OPSETS for p in settings.precisions)
    with prestarted(calibrated):     # the conversion worker imports TensorFlow while the source is read
        return _convert(settings, progress)


def _convert(settings: ConvertSettings, progress: Callable[[str], None] | None) -> Converted:
    _check_settings(settings)
    say = progress or (lambda _msg: None)
    t_start = time.perf_counter()
    say("loading source")
    base = Path(settings.out_dir or Path(OUT_ROOT) / Path(settings.src).name.removesuffix(".keras"))
    src = _resolve(settings, base)
    aeq = converts_with_aeq(src)     # a float .tflite or a PyTorch model: litert-torch + ai-edge-quantizer
    _check_source(settings, src, aeq)

    calib_ds = _calibration_set(settings, src)
    n_cal = min(settings.calibration_samples, calib_ds.n) if calib_ds is not None else 0
    key, key_facts = run_key(settings, src, calib_ds.take(n_cal).sha256 if calib_ds is not None else None)
    out_dir = base if settings.out_dir else base / key[:12]
    calib_note = None
    if calib_ds is not None and calib_ds.synthetic:

        calib_note = SYNTHETIC_WARNING
    _check_calibration(settings, src, calib_ds)
    calib = calibration_feed(src, calib_ds, n_cal) if calib_ds is not None else None
    claim_out_dir(out_dir, key, key_facts, src.name)   # after the checks: a refused run claims nothing

    run = _Variants(settings, src, aeq, base, out_dir, calib_ds, n_cal, calib, say)
    run.convert_all()
    src, variants, fallback = run.src, run.variants, run.fallback

    fp32 = variants.get("fp32", {})
    fp32_bytes = fp32.get("bytes") if fp32.get("status") == "ok" else None
    for v in variants.values():
        if v.get("status") == "ok" and fp32_bytes:
            v["size_reduction_pct"] = round(100.0 * (1 - v["bytes"] / fp32_bytes), 2)
    explain_sizes(variants)
    parity = _parity(settings, src, fp32, calib_ds, say)   # FP32 parity, always

    import tensorflow as tf

    manifest = {
        "schema_version": 1,
        "kind": "convert",
        "source": src.to_manifest(),
        # the automatic static batch the converter could not take, and why (the batch stayed dynamic)
        "static_batch_fallback": fallback,
        "calibration": ({"needed": False, "reason": "quantization-aware model: int8 uses its FakeQuant ranges",
                         "data_used_only_for_parity": None if calib_ds is None else calib_ds.source}
                        if src.qat else None if calib_ds is None else {
            "source": calib_ds.source, "samples": n_cal, "sha256": calib_ds.take(n_cal).sha256,
            "synthetic": calib_ds.synthetic, "warning": calib_note,
            "value_ranges": value_ranges(calib_ds.take(n_cal), src.signature)}),
        "variants": {p: variants[p] for p in run.order},
        "parity": parity,
        "int8_io": settings.int8_io,
        "versions": {"tensorflow": tf.__version__, "litert": host_fingerprint().get("litert"),
                     **(converter_versions(src) if aeq else {})},
        "fingerprint": host_fingerprint(),
        "total_seconds": round(time.perf_counter() - t_start, 3),
        "out_dir": str(out_dir),
        "run_key": key,
        "run_key_facts": key_facts,
    }
    _write_manifest(manifest, variants, out_dir)
    manifest["failed"] = [p for p, v in variants.items() if v.get("status") != "ok"]
    return Converted(manifest, src)


def _check_settings(settings: ConvertSettings) -> None:
    """The settings' own mistakes, before anything is read."""
    bad = [p for p in settings.precisions if p not in PRECISIONS]
    if bad:
        raise BadInput(f"--precision: unknown value {bad[0]!r}; use one or more of {', '.join(PRECISIONS)}")
    if settings.int8_io not in INT8_IO:
        raise BadInput(f"--int8-io {settings.int8_io}: use one of {', '.join(INT8_IO)}")
    kf = settings.keep_float
    if kf is not None and not (kf.strip() if isinstance(kf, str) else [t for t in kf if str(t).strip()]):
        raise BadInput("--keep-float '': give 'auto', a regex, or comma-separated tensor names "
                       "(edgebench diagnose lists them); drop the option for plain int8")


def _resolve(settings: ConvertSettings, base: Path) -> Source:
    """The source, read once, with the output folder made first (a refused source leaves none behind)."""
    check_output_dir(base, "--out" if settings.out_dir else "the output folder")   # before anything is read back
    made = not base.exists()
    ensure_dir(base, out_fix(settings.out_dir))
    try:
        return resolve_source(settings.src, size=settings.size, work_dir=base, seed=settings.seed,
                              options=settings.source)
    except BadInput:
        if made and base.is_dir() and not any(base.iterdir()):
            base.rmdir()        # a refused source leaves no empty --out folder behind
        raise


def _check_source(settings: ConvertSettings, src: Source, aeq: bool) -> None:
    """What this source cannot be converted with (a quantized .tflite, --a16 for TF, auto for aeq)."""
    if src.saved_model_dir is None and not aeq:
        raise BadInput(f"{settings.src}: already a quantized .tflite ({src.info.get('precision')}), nothing to convert; "
                       "measure it with `edgebench convert-and-compare FILE.tflite --data D [--reference FP32.tflite "
                       "or SAVEDMODEL]` or `edgebench bench`")
    if settings.a16 and not aeq:
        raise BadInput("--a16 gives ops 16-bit activations through ai-edge-quantizer, for a float .tflite or PyTorch "
                       "source; for a TensorFlow source use --precision int16x8 or --keep-float")
    if aeq and settings.keep_float == "auto":
        raise BadInput(f"--keep-float auto searches with TensorFlow's converter; for {settings.src} name the tensors "
                       "(`edgebench diagnose` lists them and proves the fix) or a regex")


def _check_calibration(settings: ConvertSettings, src: Source, calib_ds: InputSet | None) -> None:
    """Integer precisions need calibration data; --keep-float needs int8 and a model that is not QAT."""
    integer = [p for p in settings.precisions if p in INTEGER_OPSETS and not (p == "int8" and src.qat)]
    if integer and calib_ds is None:
        raise BadInput(f"{settings.src}: {integer[0]} needs calibration data; pass --data PATH (an .npz/.npy/image "
                       "folder of real samples) or --data synthetic (misleading accuracy), or drop "
                       f"{integer[0]} from --precision")
    if settings.keep_float and "int8" not in settings.precisions:
        raise BadInput("--keep-float keeps tensors of an int8 model float; add int8 to --precision")
    if settings.keep_float and src.qat:
        raise BadInput("--keep-float re-quantizes from calibration ranges; this model is quantization-aware "
                       "(its int8 ranges come from FakeQuant ops): drop --keep-float")


class _Variants:
    """Every precision converted, FP32 first (everything else is reported relative to it), into
    ``variants`` (precision -> the manifest's variant record; a failed one says why).

    The calibrated precisions (int8, int16x8: TensorFlow's calibrator runs the model in native code)
    are converted in a worker process (convert_worker): a crash there fails that variant, not the
    command. It starts after the first precision (a static-batch fallback there sets its options)
    and converts while this process does the others. int8 with --keep-float, and every precision of
    an ai-edge-quantizer source, are converted here (``_quantize``)."""

    def __init__(self, settings: ConvertSettings, src: Source, aeq: bool, base: Path, out_dir: Path,
                 calib_ds: InputSet | None, n_cal: int, calib: Callable | None, say: Callable[[str], None]):
        self.settings, self.src, self.aeq, self.base, self.out_dir = settings, src, aeq, base, out_dir
        self.calib_ds, self.n_cal, self.calib, self.say = calib_ds, n_cal, calib, say
        order = sorted(settings.precisions, key=lambda p: PRECISION_NAMES.index(p))
        if "fp32" not in order:
            order = ["fp32", *order]   # size reduction and parity need the FP32 baseline
        self.order = order
        self.plain = [] if aeq else [p for p in order if not (p == "int8" and settings.keep_float)]
        calibrated = [p for p in self.plain if p in INTEGER_OPSETS and not (p == "int8" and src.qat)]
        self.calibrated = calibrated if calibrated and isolated() else []
        self.variants: dict[str, dict[str, Any]] = {}
        self.fallback: str | None = None

    def _calibration(self) -> InputSet | None:
        return self.calib_ds.take(self.n_cal) if self.calib_ds is not None else None

    def _start_remote(self) -> Isolated:     # the source as resolved here, after a static-batch fallback too
        s = self.settings
        opts = s.source.dynamic_batch() if self.fallback else s.source
        return Isolated(job_for(s.src, size=s.size, seed=s.seed, work_dir=self.base, options=opts,
                                precisions=self.calibrated, calibration=self._calibration(),
                                n_cal=self.n_cal, int8_io=s.int8_io, source=self.src), self.say, take())

    def convert_all(self) -> None:
        s = self.settings
        local = convert_each(job_for(s.src, size=s.size, seed=s.seed, work_dir=self.base,
                                     options=s.source, precisions=[p for p in self.plain if p not in self.calibrated],
                                     calibration=None, n_cal=self.n_cal, int8_io=s.int8_io),
                             self._calibration(), PRECISIONS, _conv_int8_qat, _one_line, src=self.src)
        remote: Isolated | None = None
        try:
            for prec in self.order:
                if remote is None and self.calibrated and prec != self.order[0]:
                    remote = self._start_remote()
                path = self.out_dir / f"{self.src.name}_{prec}.tflite"
                t0 = time.perf_counter()
                if prec in self.plain:
                    got = self._plain(prec, remote.next if prec in self.calibrated else lambda: next(local))
                else:
                    got = self._quantize(prec, t0)
                if got is not None:
                    self._record(prec, path, *got)
        finally:
            local.close()
            if remote is not None:
                remote.close()      # the worker is ended, its folder removed

    def _plain(self, prec: str, result: Callable[[], tuple[str, dict[str, Any], bytes | None]]):
        """A precision the converter makes on its own (here, or in the worker): (bytes, quantization
        info, seconds, the converting process's peak RSS, None), or None when it failed (recorded)."""
        if prec not in self.calibrated:
            self.say(f"converting {prec}")
        _, res, data = result()
        if res.get("fallback"):       # the converter refused the automatic static batch: dynamic it is
            s = self.settings
            self.fallback = res["fallback"]
            self.src = resolve_source(s.src, size=s.size, work_dir=self.base, seed=s.seed,
                                      options=s.source.dynamic_batch())
            self.calib = calibration_feed(self.src, self.calib_ds, self.n_cal) if self.calib_ds is not None else None
        if res.get("bad_input"):
            raise BadInput(res["error"])
        if res["status"] != "ok":
            self.variants[prec] = {"precision": prec, "status": "failed",
                                   "error": integer_failure_reason(self.src, prec, res["error"], res.get("error_detail")),
                                   "error_detail": res.get("error_detail"), "seconds": res.get("seconds"),
                                   **{k: res[k] for k in ("crashed", "stage") if k in res}}
            return None
        return data, res["qinfo"], res["seconds"], res.get("peak_rss_bytes"), None

    def _quantize(self, prec: str, t0: float):
        """int8 with float islands (--keep-float), or an ai-edge-quantizer source's precision: the
        same tuple as ``_plain``, or None when it failed (recorded)."""
        s, src = self.settings, self.src
        self.say(f"converting {prec}")
        keep: dict[str, Any] | None = None
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                if self.aeq:     # ai-edge-quantizer from the FP32 .tflite (fp32 itself: litert-torch / the file)
                    data, qinfo = convert_variant(src, prec, self.calib_ds, self.n_cal,
                                                  (self.variants.get("fp32") or {}).get("path"), s.keep_float, s.a16)
                else:
                    keep = _keep_float_plan(s, src, self.calib, self.out_dir, self.variants, self.say)
                    data, qinfo = quantize_keep_float(keep["calibrated"], keep["nodes"], s.int8_io)
                data = finish_tflite(src, data)
        except PrecisionFailed as e:     # this precision's reason, in one line; the others go on
            self.variants[prec] = {"precision": prec, "status": "failed", "error": str(e),
                                   "seconds": round(time.perf_counter() - t0, 3)}
            return None
        except (BadInput, InfraError):
            raise
        except Exception as e:  # noqa: BLE001 -- keep the other variants
            self.variants[prec] = {"precision": prec, "status": "failed", "error": _one_line(e),
                                   "error_detail": str(e)[:20000], "seconds": round(time.perf_counter() - t0, 3)}
            return None
        return data, qinfo, time.perf_counter() - t0, None, keep

    def _record(self, prec: str, path: Path, data: bytes, qinfo: dict[str, Any], secs: float,
                peak_rss: int | None, keep: dict[str, Any] | None) -> None:
        """Write the file and describe it (the variant record)."""
        try:
            write_bytes(path, data)      # atomic: a full disk leaves no half-written file
        except OutputNotWritable as e:
            self.variants[prec] = {"precision": prec, "status": "failed", "error": f"not written: {e}",
                                   "seconds": round(secs, 3)}
            return
        v: dict[str, Any] = {
            "precision": prec,
            "status": "ok",
            "path": str(path),
            "bytes": len(data),
            "sha256": hashlib.sha256(data).hexdigest(),
            "seconds": round(secs, 3),
            "process_peak_rss_bytes": peak_rss or _peak_rss_bytes(),
            "quantization": qinfo,
            "requested": prec in self.settings.precisions,
        }
        try:
            v.update(describe_tflite(path))
            v["precision_from_tensors"] = precision_of(path)   # e.g. a QAT model's "fp16" is an int8 file
            mixed = mixed_file(inspect(path))     # the one count of float ops (tflite_model.MixedFile)
            v["precision_detail"] = mixed.text() if mixed is not None else None   # "int8, 3 float ops: ..."
            if mixed is not None and mixed.float_ops and qinfo.get("mode") == "full-integer":
                # the converter left ops float without an error: the file is not full-integer
                v["quantization"] = {**qinfo, "mode": v["precision_detail"], "integer_only_ops": True}
        except Exception as e:  # noqa: BLE001 -- a model LiteRT cannot load is a failed variant
            v.update({"status": "failed", "error": f"LiteRT cannot load the converted model: {_one_line(e)}"})
        if qinfo.get("keep_float"):         # ai-edge-quantizer's float islands
            v["keep_float"], v["keep_float_ops"] = qinfo["keep_float"], qinfo["keep_float_ops"]
        if keep is not None:
            v["keep_float"] = keep["tensors"]
            v["keep_float_ops"] = keep["nodes"]
            v["calibrated_path"] = keep["calibrated_path"]
            if keep.get("search") is not None:
                v["keep_float_search"] = keep["search"]
            problems = verify_keep_float(path, keep["nodes"])
            if problems:
                v.update({"status": "failed", "error": "--keep-float was not honoured by the converter: "
                          + "; ".join(problems[:3])})
        self.variants[prec] = v


def _parity(settings: ConvertSettings, src: Source, fp32: dict[str, Any], calib_ds: InputSet | None,
            say: Callable[[str], None]) -> dict[str, Any]:
    """The FP32 parity check (the FP32 .tflite against TF, or PyTorch, on the same inputs); a failed
    one fails the FP32 variant (``fp32`` is updated)."""
    parity: dict[str, Any] = {"passed": None, "skipped": "fp32 conversion failed"}
    if fp32.get("status") == "ok" and src.kind == "tflite":
        parity = {"passed": None, "skipped": "the fp32 variant is the source .tflite itself"}
    elif fp32.get("status") == "ok":
        say("FP32 parity check")
        pset = src.evaluation or calib_ds
        if pset is None:

            pset = synthetic(src.signature, settings.parity_samples, settings.seed)
        pset = cast_to_signature(pset, src.signature).take(settings.parity_samples)
        rule = resolve_state(settings.state, pset.streams, pset.n, how=pset.stream_how, source=pset.source)
        tf_out = (reference_outputs(src, pset) if src.kind == "torch" else
                  run_tf(src.saved_model_dir, src.signature, pset, signature_key=src.signature_key,
                         loader=src.loader, tags=src.tags, rule=rule))
        tfl_out = run_tflite_inprocess(fp32["path"], pset, rule=rule)
        parity = parity_check(tf_out, tfl_out, (src.info or {}).get("task"))
        parity["reference"] = "torch" if src.kind == "torch" else "tf"
        if src.kind == "torch" and not parity["passed"]:
            parity["explanation"] = parity["explanation"].split(". Likely causes")[0].replace(
                "TensorFlow", "PyTorch") + ("; the model may have train-mode layers or random ops in forward, or an "
                                            "op litert-torch lowers differently: convert an eval-mode, deterministic "
                                            "model")
        parity["samples"] = pset.n
        parity["inputs"] = pset.source
        parity["state_rule"] = rule.mode
        fp32["parity"] = "passed" if parity["passed"] else "failed"
        if not parity["passed"]:
            fp32["status"] = "failed"
            fp32["error"] = parity["explanation"]
    return parity


def _write_manifest(manifest: dict[str, Any], variants: dict[str, dict[str, Any]], out_dir: Path) -> None:
    """OUT/manifest.json; unwritable after some files were written: BadInput naming what was kept."""
    try:
        write_json(manifest, str(out_dir / "manifest.json"))
    except OutputNotWritable as e:
        written = [f"{p} ({Path(v['path']).name})" for p, v in variants.items() if v.get("status") == "ok"]
        failed = [p for p, v in variants.items() if v.get("status") != "ok"]
        if not written:
            raise
        raise BadInput(f"{e}; complete and kept: {', '.join(written)}; not written: "
                       f"{', '.join(failed) or 'manifest.json'}") from None


def _keep_float_plan(settings: ConvertSettings, src: Source, calib: Callable | None, out_dir: Path,
                     variants: dict[str, dict[str, Any]], say: Callable[[str], None]) -> dict[str, Any]:
    """Calibrate once, pick the tensors (named, regex, or searched for "auto") and their ops."""
    say("calibrating for --keep-float")
    calibrated = calibrated_model(src, calib, "int8", settings.int8_io)
    cal_path = out_dir / f"{src.name}_int8_calibrated.tflite"
    cal_path.write_bytes(calibrated)
    graph = float_tensors(cal_path)
    search = None
    if settings.keep_float == "auto":
        fp32 = variants.get("fp32") or {}
        search = search_keep_float(src, calibrated, cal_path, graph, goal=settings.keep_float_goal,
                                   out_dir=out_dir, int8_io=settings.int8_io,
                                   fp32_bytes=fp32.get("bytes"), progress=say)
        tensors = list(search["chosen"])
    else:
        tensors = resolve_keep_float(settings.keep_float, graph)
    return {"calibrated": calibrated, "calibrated_path": str(cal_path), "tensors": tensors,
            "nodes": keep_float_nodes(tensors, graph), "search": search}


def check_manifest(manifest: dict[str, Any]) -> None:
    """Raise ConversionFailed when parity failed or a requested precision failed."""
    src = manifest["source"]["path"]
    where = Path(manifest["out_dir"]) / "manifest.json"
    parity = manifest.get("parity", {})
    if parity.get("passed") is False:
        raise ConversionFailed(f"{src}: {parity['explanation']} (manifest: {where})")
    failed = [p for p in manifest.get("failed", []) if manifest["variants"][p].get("requested", True)]
    if failed:
        ok = [p for p, v in manifest["variants"].items() if v.get("status") == "ok"]
        raise ConversionFailed(
            f"{src}: " + "; ".join(f"{p} failed: {manifest['variants'][p].get('error')}" for p in failed)
            + (f" (kept: {', '.join(ok)}; manifest: {where})" if ok else f" (manifest: {where})"))


def load_manifest(path: str | Path) -> dict[str, Any]:
    p = Path(path)
    if p.is_dir():
        p = p / "manifest.json"
    try:
        return json.loads(p.read_text())
    except (OSError, ValueError) as e:
        raise BadInput(f"{p}: not a readable edgebench manifest ({e})") from None


if __name__ == "__main__":       # the conversion worker (edgebench.convert.worker)
    import sys

    sys.exit(serve(sys.argv, PRECISIONS, _conv_int8_qat, _one_line))


__all__ = ["ConvertSettings", "PRECISIONS", "PRECISION_NAMES", "Source", "TensorSpec", "convert",
           "check_manifest", "resolve_source"]
