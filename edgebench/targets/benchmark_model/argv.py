"""What one benchmark_model invocation gets: its argv (``build_argv``; strings only, the adb
layer quotes them) and its raw input/output files (``write_input_value_files``,
``split_output_file``)."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from edgebench.core.errors import BadInput, InfraError
from edgebench.model.inputs import quantize
from edgebench.targets.benchmark_model.binary import _WHERE

# --------------------------------------------------------------------------- argv


def _b(v: bool) -> str:
    return "true" if v else "false"


def _check_name(name: str, what: str) -> str:
    if not name or any(c in name for c in ",\n\r"):
        raise BadInput(f"{what} {name!r} cannot be passed to benchmark_model: names must be non-empty "
                       "and contain no ',' or newline (its flags are comma-separated)")
    return name


# Delegates benchmark_model's Interpreter flags can apply (an arbitrary delegate .so cannot be loaded).
INTERPRETER_DELEGATES = ("xnnpack", "none", "gpu", "nnapi")


def delegate_flags(delegate: str, runtime_api: str = "interpreter", accelerator: str | None = None,
                   gpu_precision: str | None = None) -> dict[str, Any]:
    """Delegate -> ``build_argv`` keyword flags (adb devices and Device Farm phones alike). GPU
    precision loss is always explicit (off unless ``gpu_precision`` is fp16): the tool's own default
    (on, fp16) would silently change the numbers. ``runtime_api`` "compiled" -> LiteRT's CompiledModel
    tool flags (the binary must then be ``benchmark_litert_model``)."""
    if runtime_api == "compiled":
        return {"accelerator": accelerator or "cpu", "gpu_precision": gpu_precision}
    if delegate.endswith(".so"):
        raise BadInput(f"delegate {delegate!r}: benchmark_model cannot load an arbitrary delegate .so here; "
                       "use xnnpack, none, gpu or nnapi")
    if delegate not in INTERPRETER_DELEGATES:
        raise BadInput(f"--delegate {delegate!r} is unknown for benchmark_model; use {', '.join(INTERPRETER_DELEGATES)}")
    return {"use_xnnpack": delegate == "xnnpack" if delegate in ("xnnpack", "none") else None,
            "use_gpu": delegate == "gpu",
            "gpu_precision_loss_allowed": gpu_precision == "fp16",
            "use_nnapi": delegate == "nnapi"}


def build_argv(
    binary: str,
    model: str,
    *,
    threads: int | None = None,
    use_xnnpack: bool | None = None,
    use_gpu: bool = False,
    gpu_precision_loss_allowed: bool = False,
    use_nnapi: bool = False,
    num_runs: int | None = None,
    warmup_runs: int | None = None,
    min_secs: float | None = None,
    max_secs: float | None = None,
    warmup_min_secs: float | None = None,
    run_delay: float | None = None,
    input_layers: Sequence[str] = (),
    input_shapes: Sequence[Sequence[int]] = (),
    input_value_files: Sequence[str] = (),
    output_filepath: str | None = None,
    enable_op_profiling: bool = False,
    report_peak_memory_footprint: bool = False,
    model_runtime_info_output_file: str | None = None,
    accelerator: str | None = None,
    gpu_precision: str | None = None,
    extra: Sequence[str] = (),
) -> list[str]:
    """argv for one benchmark_model invocation (strings only; the adb layer quotes them).

    ``gpu_precision_loss_allowed`` is always passed when ``use_gpu``: the tool's own default
    is true (fp16 arithmetic), which edgebench never leaves implicit. ``use_xnnpack`` None
    leaves the tool's default (on in current builds) and passes nothing.

    ``accelerator`` (cpu | gpu | npu) drives LiteRT's CompiledModel benchmark tool
    (``benchmark_litert_model``: ``--use_cpu/--use_gpu/--use_npu``, ``--gpu-precision``) instead
    of the Interpreter's delegate flags; the CPU stays on as the fallback, as on the host, and
    ``--require_full_delegation=false`` keeps a partly accelerated model running (the row's
    delegation says how much).
    """
    if not binary:
        raise BadInput(f"no benchmark_model binary given; {_WHERE}")
    if not model:
        raise BadInput("no model path given to benchmark_model")
    argv = [binary, f"--graph={model}"]

    def pos_int(name: str, v: int | None, minimum: int = 1) -> None:
        if v is None:
            return
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < minimum:
            raise BadInput(f"benchmark_model --{name} must be an integer >= {minimum}, got {v!r}")
        argv.append(f"--{name}={int(v)}")

    def secs(name: str, v: float | None) -> None:
        if v is None:
            return
        if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v) or v < 0:
            raise BadInput(f"benchmark_model --{name} must be a number of seconds >= 0, got {v!r}")
        argv.append(f"--{name}={float(v):g}")

    pos_int("num_threads", threads)
    pos_int("num_runs", num_runs)
    pos_int("warmup_runs", warmup_runs, minimum=0)
    secs("min_secs", min_secs)
    secs("max_secs", max_secs)
    secs("warmup_min_secs", warmup_min_secs)
    if run_delay is not None:
        argv.append(f"--run_delay={float(run_delay):g}")
    argv += _delegate_flags(accelerator, gpu_precision, use_xnnpack, use_gpu, gpu_precision_loss_allowed, use_nnapi)
    argv += _input_flags(input_layers, input_shapes, input_value_files)
    if output_filepath:
        argv.append(f"--output_filepath={output_filepath}")
    if enable_op_profiling:
        argv.append("--enable_op_profiling=true")
    if report_peak_memory_footprint:
        argv.append("--report_peak_memory_footprint=true")
    if model_runtime_info_output_file:   # recent builds only; older ones log it as unconsumed and go on
        argv.append(f"--model_runtime_info_output_file={model_runtime_info_output_file}")
    argv.extend(str(a) for a in extra)
    return argv


def _delegate_flags(accelerator: str | None, gpu_precision: str | None, use_xnnpack: bool | None, use_gpu: bool,
                    gpu_precision_loss_allowed: bool, use_nnapi: bool) -> list[str]:
    """The accelerator (CompiledModel tool) or Interpreter delegate flags of ``build_argv``."""
    argv: list[str] = []
    if accelerator is not None:
        if use_gpu or use_nnapi or use_xnnpack is not None:
            raise BadInput("an accelerator (CompiledModel tool) and Interpreter delegate flags do not mix")
        if accelerator not in ("cpu", "gpu", "npu"):
            raise BadInput(f"accelerator {accelerator!r} is unknown; use cpu, gpu or npu")
        argv += ["--use_cpu=true", f"--use_gpu={_b(accelerator == 'gpu')}", f"--use_npu={_b(accelerator == 'npu')}",
                 "--require_full_delegation=false"]
        if accelerator == "gpu":
            argv.append(f"--gpu-precision={gpu_precision or 'fp32'}")   # never the tool's "auto"
    if use_xnnpack is not None:
        argv.append(f"--use_xnnpack={_b(use_xnnpack)}")
    if use_gpu and use_nnapi:
        raise BadInput("choose one accelerator delegate: GPU or NNAPI, not both")
    if use_gpu:
        argv.append("--use_gpu=true")
        argv.append(f"--gpu_precision_loss_allowed={_b(gpu_precision_loss_allowed)}")
    if use_nnapi:
        argv.append("--use_nnapi=true")
    return argv


def _input_flags(input_layers: Sequence[str], input_shapes: Sequence[Sequence[int]],
                 input_value_files: Sequence[str]) -> list[str]:
    """``--input_layer``, ``--input_layer_shape`` and ``--input_layer_value_files`` of ``build_argv``."""
    argv: list[str] = []
    layers = [_check_name(n, "input layer") for n in input_layers]
    if input_shapes and len(input_shapes) != len(layers):
        raise BadInput(f"{len(input_shapes)} input shapes for {len(layers)} input layers; give one shape per layer")
    if input_value_files and len(input_value_files) != len(layers):
        raise BadInput(f"{len(input_value_files)} value files for {len(layers)} input layers; give one file per layer")
    if layers:
        argv.append("--input_layer=" + ",".join(layers))
    if input_shapes:
        parts = []
        for n, shape in zip(layers, input_shapes):
            dims = [int(d) for d in shape]
            if any(d <= 0 for d in dims):
                raise BadInput(f"input {n!r} shape {tuple(shape)} has a non-positive dimension; give the concrete shape")
            parts.append(",".join(str(d) for d in dims))
        argv.append("--input_layer_shape=" + ":".join(parts))
    if input_value_files:
        pairs = []
        for n, f in zip(layers, input_value_files):
            if "," in f:
                raise BadInput(f"value file path {f!r} contains ',', which benchmark_model cannot parse; rename it")
            # benchmark_model splits "name:path" at ':' and reads '::' as a literal ':' in the name
            pairs.append(n.replace(":", "::") + ":" + f)
        argv.append("--input_layer_value_files=" + ",".join(pairs))
    return argv


def describe_argv(argv: Sequence[str]) -> dict[str, str]:
    """The ``--flag=value`` settings of an argv, for the fingerprint (records GPU precision)."""
    out: dict[str, str] = {}
    for a in argv[1:]:
        if a.startswith("--") and "=" in a:
            k, v = a[2:].split("=", 1)
            out[k] = v
    return out


# --------------------------------------------------------------------------- inputs and outputs


@dataclass(frozen=True)
class InputValueFiles:
    """Raw input files written for one benchmark_model invocation."""
    names: tuple[str, ...]
    shapes: tuple[tuple[int, ...], ...]
    local_paths: tuple[Path, ...]
    remote_paths: tuple[str, ...]

    def argv_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for ``build_argv``."""
        return {"input_layers": list(self.names), "input_shapes": [list(s) for s in self.shapes],
                "input_value_files": list(self.remote_paths)}


def _dtype(d: Any) -> np.dtype:
    return np.dtype(d)


def _quant(detail: Mapping[str, Any]) -> tuple[float, int]:
    q = detail.get("quantization") or (0.0, 0)
    return float(q[0]), int(q[1])


def write_input_value_files(arrays: Mapping[str, np.ndarray], input_details: Sequence[Mapping[str, Any]],
                            out_dir: str | os.PathLike, *, remote_dir: str | None = None) -> InputValueFiles:
    """Write one sample per model input as the raw little-endian bytes benchmark_model reads.

    ``arrays`` maps input name -> one sample with the model's input shape (a dynamic
    dimension, -1 in ``shape_signature``, takes the array's size and is passed through
    ``--input_layer_shape``). Float data for an integer-quantized input is quantized with
    the tensor's scale/zero point; float64 data is rounded to the model's float32; integer
    changes must be lossless.
    """

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    want = [str(d["name"]) for d in input_details]
    missing = [n for n in want if n not in arrays]
    if missing:
        raise BadInput(f"no data for model input {missing[0]!r}; the InputSet has {sorted(arrays)}")
    extra = sorted(set(arrays) - set(want))
    if extra:
        raise BadInput(f"InputSet key {extra[0]!r} is not an input of the model (inputs: {want})")
    names, shapes, local, remote = [], [], [], []
    for i, d in enumerate(input_details):
        name = _check_name(str(d["name"]), "model input")
        a = np.asarray(arrays[name])
        sig = [int(x) for x in (d.get("shape_signature") if d.get("shape_signature") is not None else d["shape"])]
        if len(sig) != a.ndim or any(s not in (-1, x) for s, x in zip(sig, a.shape)):
            raise BadInput(f"input {name!r}: sample shape {a.shape} does not fit the model's {tuple(sig)}")
        dt = _dtype(d["dtype"])
        if dt.kind in "OSU":
            raise BadInput(f"input {name!r} is a string tensor; benchmark_model value files hold raw numbers only")
        if a.dtype != dt:
            scale, zp = _quant(d)
            if dt.kind in "iu" and a.dtype.kind == "f" and scale > 0:
                a = quantize(a, scale, zp, dt)
            elif np.can_cast(a.dtype, dt, casting="safe") or a.dtype.kind == dt.kind == "f" or (
                    a.dtype.kind in "iu" and dt.kind in "iu"
                    and np.array_equal(a.astype(dt).astype(a.dtype), a)):
                a = a.astype(dt)
            else:
                raise BadInput(f"input {name!r}: data is {a.dtype} but the model takes {dt}; "
                               "convert the InputSet (or use the matching precision variant)")
        a = np.ascontiguousarray(a, dtype=dt.newbyteorder("<"))
        fname = f"input_{i}.bin"
        path = out / fname
        path.write_bytes(a.tobytes(order="C"))
        names.append(name)
        shapes.append(tuple(int(x) for x in a.shape))
        local.append(path)
        remote.append(f"{remote_dir.rstrip('/')}/{fname}" if remote_dir else str(path))
    return InputValueFiles(tuple(names), tuple(shapes), tuple(local), tuple(remote))


def split_output_file(data: bytes, output_details: Sequence[Mapping[str, Any]], *,
                      dequantize: bool = False) -> dict[str, np.ndarray]:
    """Split ``--output_filepath`` bytes (all outputs' raw bytes, in output order) into arrays.

    ``output_details`` are the interpreter's output details in order (name, shape, dtype,
    quantization). A size mismatch means a truncated transfer or a different model: InfraError.
    """
    sizes = []
    for d in output_details:
        dt = _dtype(d["dtype"])
        if dt.kind in "OSU":
            raise BadInput(f"output {d['name']!r} is a string tensor; it cannot be read from raw bytes")
        shape = tuple(int(x) for x in d["shape"])
        sizes.append((str(d["name"]), dt, shape, int(np.prod(shape, dtype=np.int64)) * dt.itemsize))
    expected = sum(s[3] for s in sizes)
    if len(data) != expected:
        raise InfraError(f"benchmark_model output file has {len(data)} bytes, expected {expected} for outputs "
                         f"{[s[0] for s in sizes]}; the pull was truncated or the model differs; rerun")
    out: dict[str, np.ndarray] = {}
    off = 0
    for (name, dt, shape, nbytes), d in zip(sizes, output_details):
        arr = np.frombuffer(data, dtype=dt.newbyteorder("<"), count=nbytes // dt.itemsize, offset=off)
        arr = arr.reshape(shape).astype(dt)
        off += nbytes
        scale, zp = _quant(d)
        if dequantize and dt.kind in "iu" and scale > 0:
            arr = ((arr.astype(np.float32) - np.float32(zp)) * np.float32(scale)).astype(np.float32)
        out[name] = arr
    return out
