"""Quantizing a float ``.tflite`` with ai-edge-quantizer (the optional extra ``[aeq]``).

Used for every source that arrives as a float ``.tflite`` rather than a TensorFlow model: a
vendor's FP32 file (``convert FP32.tflite -p int8 --data D``, the fix ``diagnose INT8.tflite
--reference FP32.tflite`` proves) and the FP32 file litert-torch writes for a PyTorch source.

Recipes (ai-edge-quantizer 0.10): int8 = ``static_wi8_ai8`` (int8 weights per channel, int8
activations, calibrated min/max), int16x8 = ``static_wi8_ai16``, dynamic = ``dynamic_wi8_afp32``,
fp16 = float16 weights cast back to float32 for the float kernels (its ``float_casting``
algorithm). ``keep_float`` tensors: the op that produces each one and every op that reads it get
``no_quantize`` (a regex of their exact output tensor names: the quantizer matches an op by its
output names), so the tensor never exists in int8 -- the same producer-and-consumers rule as
the TF path's ``--keep-float``. ``a16`` tensors: the same ops get 16-bit activations with int8
weights (``a16w8`` on that scope, int8 elsewhere).

Two traps of the package, handled here: ``quantize()`` returns a ``bytearray`` that LiteRT's
Interpreter refuses (``model_content`` must be ``bytes``), and its static recipes quantize the
model's own inputs and outputs too (int8, or int16 where an a16 op reads or writes them): every
edgebench reader quantizes inputs and dequantizes outputs with each tensor's own scale and zero
point, so the integer I/O is recorded (``quantization.io``) rather than rewritten.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import logging
import os
import re
import tempfile
import time
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

from edgebench.convert.quant.keep_float import float_tensors, keep_float_nodes, resolve_keep_float
from edgebench.core.errors import BadInput, PrecisionFailed
from edgebench.model.inputs import InputSet, Signature
from edgebench.model.tflite_model import inspect
from edgebench.model.tflite_rewrite import unique_tensor_names
from edgebench.sources.pytorch import litert_torch_version, torch_fp32

INSTALL = "pip install 'edgebench[aeq]'"
TESTED_VERSION = "0.10.0"
AEQ_PRECISIONS = ("fp32", "fp16", "int8", "dynamic", "int16x8")
CONTROL_FLOW_OPS = ("IF", "WHILE", "CALL", "STABLEHLO_WHILE", "STABLEHLO_CASE")
CALIBRATED = ("int8", "int16x8")     # the recipes that calibrate activations (fp16 and dynamic do not)
MECHANISM = ("ai-edge-quantizer from the float .tflite: calibrate on the calibration samples, then a recipe "
             "(no_quantize / 16-bit activations on the ops that produce or read each named tensor)")


def require_aeq(why: str):
    """The ``ai_edge_quantizer`` package, or BadInput naming the install command (exit 2)."""
    try:
        with _quiet():
            import ai_edge_quantizer
    except ImportError as e:
        raise BadInput(f"{why} needs ai-edge-quantizer, which is not installed ({e.name or e}); "
                       f"{INSTALL} (tested with ai-edge-quantizer {TESTED_VERSION})") from None
    return ai_edge_quantizer


def aeq_available() -> bool:
    """Installed (without importing it: the import takes seconds)."""
    try:
        return importlib.util.find_spec("ai_edge_quantizer") is not None
    except (ValueError, ImportError):    # present in sys.modules as None: blocked
        return False


def aeq_version() -> str | None:
    try:
        return metadata.version("ai-edge-quantizer")
    except Exception:  # noqa: BLE001 -- not installed
        return None


@contextlib.contextmanager
def _quiet():
    """The package prints a progress bar (tqdm, stderr) and a size report (stdout) per call, and
    logs through absl; a command's output is edgebench's own."""
    sink = io.StringIO()
    old = os.environ.get("TQDM_DISABLE")
    os.environ["TQDM_DISABLE"] = "1"
    level = logging.getLogger().level
    logging.getLogger().setLevel(logging.ERROR)
    try:
        with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
            yield sink
    finally:
        logging.getLogger().setLevel(level)
        if old is None:
            os.environ.pop("TQDM_DISABLE", None)
        else:
            os.environ["TQDM_DISABLE"] = old


def scope(float_model: str | Path, spec: str | tuple[str, ...] | list[str] | None, option: str) -> tuple[list[str], list[str]]:
    """(tensors, op output names) of a ``--keep-float`` / ``--a16`` spec on the float model: the
    named tensors (or a regex's matches) and the ops that produce or read them."""
    if not spec:
        return [], []
    graph = float_tensors(float_model)
    try:
        tensors = resolve_keep_float(tuple(spec) if isinstance(spec, list) else spec, graph)
    except BadInput as e:
        raise BadInput(str(e).replace("--keep-float", option, 1)) from None
    return tensors, keep_float_nodes(tensors, graph)


def _regex(nodes: list[str]) -> str:
    """The quantizer's scope of an op is its output names joined by ';' plus a trailing ';'
    (``tfl_flatbuffer_utils.get_op_scope``): match an op whose first output is one of ``nodes``."""
    return "^(?:" + "|".join(re.escape(n) for n in nodes) + ");"


def calibration_data(ds: InputSet, signature: Signature, n: int, key: str) -> dict[str, list[dict[str, np.ndarray]]]:
    """{signature key: [one sample per dict, batch 1, keyed by input name]} as the quantizer takes it."""
    names = list(signature.order or signature.input_names)
    dtypes = {t.name: np.dtype(t.dtype) for t in signature.inputs}
    return {key: [{k: np.asarray(ds.arrays[k][i:i + 1], dtypes[k]) for k in names} for i in range(min(n, ds.n))]}


def quantize_tflite(float_model: str | Path, precision: str, *, calibration: InputSet | None, signature: Signature,
                    samples: int, signature_key: str = "serving_default", keep_float: Any = None,
                    a16: Any = None) -> tuple[bytes, dict[str, Any]]:
    """The float ``.tflite`` at ``float_model`` quantized to ``precision`` (see the module
    docstring) -> (bytes the Interpreter accepts, the manifest's ``quantization`` facts)."""
    float_model = Path(float_model)
    if precision == "fp32":
        return float_model.read_bytes(), {"weights": "float32", "activations": "float32",
                                          "mode": "the float .tflite as given"}
    if precision not in AEQ_PRECISIONS:
        raise BadInput(f"--precision {precision}: a float .tflite is quantized with ai-edge-quantizer to one of "
                       f"{', '.join(AEQ_PRECISIONS)}")
    aeq = require_aeq(f"quantizing {float_model.name} to {precision}")
    from ai_edge_quantizer import qtyping, quantizer, recipe

    if (keep_float or a16) and precision != "int8":
        raise BadInput(f"--keep-float/--a16 change an int8 model; add int8 to --precision (got {precision})")
    kept, kept_ops = scope(float_model, keep_float, "--keep-float")
    wide, wide_ops = scope(float_model, a16, "--a16")
    both = sorted(set(kept_ops) & set(wide_ops))
    if both:
        raise BadInput(f"--keep-float and --a16 both name the op writing {both[0]!r}; keep a tensor float or give it "
                       "16-bit activations, not both")
    tmp = tempfile.TemporaryDirectory(prefix="edgebench-aeq-")
    given, renamed = _unique_names(float_model, Path(tmp.name))
    try:
        return _quantize(aeq, quantizer, recipe, qtyping, float_model, given, renamed, precision,
                         calibration=calibration, signature=signature, samples=samples, signature_key=signature_key,
                         kept=kept, kept_ops=kept_ops, wide=wide, wide_ops=wide_ops)
    finally:
        tmp.cleanup()


def _unique_names(float_model: Path, folder: Path) -> tuple[Path, list[dict[str, Any]]]:
    """The file to hand the quantizer: ``float_model`` itself, or a copy whose tensor names are unique
    across its subgraphs (``tflite_rewrite.unique_tensor_names``: the quantizer refuses a name two
    branch subgraphs share) and the renames."""
    raw = float_model.read_bytes()
    data, renamed = unique_tensor_names(raw)
    if not renamed:
        return float_model, []
    out = folder / float_model.name
    out.write_bytes(data)
    return out, renamed


def control_flow(info: dict[str, Any]) -> dict[str, int]:
    """{op: count} of the control-flow ops (IF, WHILE ...) a model runs, from ``inspect``."""
    hist = {**info.get("op_histogram", {})}
    for op, n in (info.get("subgraph_op_histogram") or {}).items():
        hist[op] = max(hist.get(op, 0), n)
    return {op: int(n) for op, n in sorted(hist.items()) if op in CONTROL_FLOW_OPS and n}


def _quantize(aeq, quantizer, recipe, qtyping, float_model: Path, given: Path, renamed: list[dict[str, Any]],
              precision: str, *, calibration: InputSet | None, signature: Signature, samples: int,
              signature_key: str, kept: list[str], kept_ops: list[str], wide: list[str],
              wide_ops: list[str]) -> tuple[bytes, dict[str, Any]]:
    q = quantizer.Quantizer(str(given))
    name = qtyping.TFLOperationName.ALL_SUPPORTED
    if precision in ("int8", "int16x8"):
        if calibration is None:
            raise BadInput(f"{precision} of {float_model.name} needs calibration data; pass --data PATH "
                           "(or --calibration-data)")
        q.load_quantization_recipe(recipe.static_wi8_ai8() if precision == "int8" else recipe.static_wi8_ai16())
    elif precision == "dynamic":
        q.load_quantization_recipe(recipe.dynamic_wi8_afp32())
    else:   # fp16: float16 weights, float compute
        cfg = qtyping.OpQuantizationConfig(
            weight_tensor_config=qtyping.TensorQuantizationConfig(num_bits=16, dtype=qtyping.TensorDataType.FLOAT),
            compute_precision=qtyping.ComputePrecision.FLOAT, explicit_dequantize=True)
        q.update_quantization_recipe(regex=".*", operation_name=name, op_config=cfg, algorithm_key="float_casting")
    if kept_ops:
        q.update_quantization_recipe(regex=_regex(kept_ops), operation_name=name, algorithm_key="no_quantize")
    if wide_ops:
        q.add_static_config(regex=_regex(wide_ops), operation_name=name, activation_num_bits=16, weight_num_bits=8)
    t0 = time.perf_counter()
    with _quiet():
        try:
            cal = (q.calibrate(calibration_data(calibration, signature, samples, signature_key))
                   if q.need_calibration else None)
            t_cal = time.perf_counter() - t0
            result = q.quantize(cal, enable_progress_report=False)
        except (ValueError, RuntimeError, KeyError) as e:
            own = f"{type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}"
            flow = control_flow(inspect(given)) if precision in CALIBRATED else {}
            if flow:
                own = f"its own reason: {own.split('. ')[0].rstrip('.')}"
                ops = ", ".join(f"{op} x{n}" for op, n in flow.items())
                raise PrecisionFailed(
                    f"{float_model.name}: ai-edge-quantizer {aeq_version()} does not calibrate through control flow "
                    f"({ops}: the ops inside its subgraphs get no ranges), so {precision} cannot be built from this "
                    f"file; fp16 and dynamic need no calibration (their own rows) ({own})") from None
            raise PrecisionFailed(f"{float_model.name}: ai-edge-quantizer could not quantize it to {precision} "
                                  f"({own})") from None
    data = bytes(result.quantized_model)     # a bytearray: LiteRT's Interpreter accepts only bytes
    info = inspect_bytes(data)
    qinfo: dict[str, Any] = {
        "weights": "float16" if precision == "fp16" else "int8",
        "activations": {"int8": "int8", "int16x8": "int16", "dynamic": "float32 (dynamic range)",
                        "fp16": "float32"}[precision],
        "io": ",".join(sorted({t["dtype"] for t in info["inputs"] + info["outputs"]})),
        "mode": f"ai-edge-quantizer {precision}" + (" with float islands" if kept else "")
        + (f" + a16 on {len(wide_ops)} op{'s' * (len(wide_ops) != 1)}" if wide else ""),
        "quantizer": f"ai-edge-quantizer {getattr(aeq, '__version__', None) or aeq_version()}",
        "calibration_seconds": round(t_cal, 3) if calibration is not None and precision in ("int8", "int16x8") else None,
        "seconds": round(time.perf_counter() - t0, 3),
    }
    if renamed:
        qinfo["mode"] += f" ({len(renamed)} shared tensor name{'s' * (len(renamed) != 1)} made unique first)"
        qinfo["renamed_tensors"] = len(renamed)
        qinfo["renamed_note"] = (f"{len(renamed)} tensor name(s) that branch subgraphs share (e.g. "
                                 f"{renamed[0]['name']!r}) made unique before quantizing: names only, same outputs")
    if kept or wide:
        qinfo["mechanism"] = MECHANISM
    if kept:
        qinfo.update(keep_float=kept, keep_float_ops=kept_ops)
    if wide:
        qinfo.update(a16=wide, a16_ops=wide_ops)
    problems = verify_scope(info, kept_ops, wide_ops)
    if problems:
        raise PrecisionFailed(f"{float_model.name}: ai-edge-quantizer did not honour the recipe: "
                              f"{'; '.join(problems[:3])}")
    return data, qinfo


def inspect_bytes(data: bytes) -> dict[str, Any]:
    """tflite_model.inspect of bytes (through a temporary file: inspect reads paths)."""
    with tempfile.NamedTemporaryFile(suffix=".tflite") as fh:
        fh.write(data)
        fh.flush()
        return inspect(fh.name)


def verify_scope(info: dict[str, Any], kept_ops: list[str], wide_ops: list[str]) -> list[str]:
    """Problems (empty when fine), read back from the quantized file: every kept op runs a float
    kernel, every a16 op writes int16."""
    by_name = {n: o for o in info["ops"] for n in o["output_names"]}
    problems = []
    for n in kept_ops:
        o = by_name.get(n)
        if o is None:
            problems.append(f"{n}: no op with this output in the quantized model")
        elif o["kind"] != "float":
            problems.append(f"{n}: {o['op']} is {o['kind']}, not float")
    for n in wide_ops:
        o = by_name.get(n)
        if o is None:
            problems.append(f"{n}: no op with this output in the quantized model")
        elif o["kind"] == "integer" and "int16" not in o["outputs"]:
            problems.append(f"{n}: {o['op']} writes {','.join(o['outputs'])}, not int16")
    return problems




# --------------------------------------------------------------------------- sources that are not TensorFlow


def converts_with_aeq(src) -> bool:
    """A source whose variants come from a float .tflite: a PyTorch model (litert-torch writes the
    FP32 file) or a float .tflite given as SRC. A quantized .tflite has nothing left to convert."""
    return src.kind == "torch" or (src.kind == "tflite" and (src.info or {}).get("precision") == "fp32")


def converter_versions(src) -> dict[str, str | None]:
    out = {"ai_edge_quantizer": aeq_version()}
    if src.kind == "torch":
        import torch

        out.update(torch=torch.__version__, litert_torch=litert_torch_version())
    return out


def convert_variant(src, precision: str, calibration: InputSet | None, samples: int, fp32_path: str | None,
                    keep_float: Any = None, a16: Any = None) -> tuple[bytes, dict[str, Any]]:
    """One variant of a float-.tflite or PyTorch source: FP32 is the source file itself or
    litert-torch's conversion; every other precision is ai-edge-quantizer on that FP32 file
    (``fp32_path``: written first, as every conversion starts with FP32)."""
    if precision == "fp32":
        if src.kind == "torch":

            return torch_fp32(src)
        return Path(src.path).read_bytes(), {"weights": "float32", "activations": "float32",
                                             "mode": "the float .tflite as given"}
    if fp32_path is None:
        raise PrecisionFailed(f"{src.path}: {precision} is quantized from the FP32 .tflite, which failed to convert "
                              "(its row says why)")
    return quantize_tflite(fp32_path, precision, calibration=calibration, signature=src.signature, samples=samples,
                           signature_key=src.signature_key, keep_float=keep_float if precision == "int8" else None,
                           a16=a16 if precision == "int8" else None)


__all__ = ["AEQ_PRECISIONS", "CONTROL_FLOW_OPS", "INSTALL", "control_flow", "TESTED_VERSION", "aeq_version", "convert_variant", "converter_versions",
           "converts_with_aeq", "quantize_tflite", "require_aeq", "scope"]
