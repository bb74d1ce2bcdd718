#!/usr/bin/env python3
"""edgebench worker: run one .tflite model and write raw per-inference latencies.

Standalone on purpose: the Python stdlib, numpy and a TFLite interpreter only
(``ai_edge_litert``, else ``tflite_runtime``, else ``tensorflow.lite``; the one used is
recorded as ``runtime``). No edgebench import: this file is copied as-is to devices.

Usage::

    python runner.py job.json

``job.json`` (every key optional except ``model_path``; the defaults below mirror
``targets.base.RunControl``, which the parent always sends -- this file cannot import it)::

    {"model_path": "m.tflite", "inputs_npz": "inputs.npz" | null, "threads": 4 | null,
     "delegate": "xnnpack" | "none" | "gpu" | "/path/libdelegate.so",
     "warmup_runs": 10, "warmup_time_s": 0.0, "min_runs": 662, "min_time_s": 1.0,
     "max_time_s": 60.0, "runs": null, "save_outputs": false, "seed": 0,
     "cpu_affinity": null | [4, 5, 6, 7],
     "out_dir": "<dir of job.json>",
     "period_ms": null | 10.0,                        # paced: one invoke every period_ms
     "timeline": null | {"duration_s": 600, "report_every_s": 10},   # sustained, in windows
     "load": null | {"mode": "concurrency", "level": 2}
                  | {"mode": "server", "qps": 50.0, "workers": 1, "queries": 1000}
                  | {"mode": "cold_start", "count": 5, "xnnpack_cache": false}
                  | {"mode": "first_inference", "api": "interpreter" | "compiled",
                     "xnnpack_cache_path": null | "<file>"},  # one cold-start child
     "runtime_api": "interpreter" | "compiled", "accelerator": "cpu" | "gpu" | "npu" | null,
     "gpu_precision": "fp32" | "fp16" | null, "op_profile": false, "op_profile_runs": null}

Writes ``result.json`` (facts, status, error) and ``result.npz`` (``samples_ns``,
``warmup_ns``, ``out::<output name>`` when outputs are saved, ``lag_ns`` for paced runs)
into ``out_dir``. Single-stream runs add ``timed_span_boottime_s`` [start, end] on
CLOCK_BOOTTIME (the clock of /proc/uptime) so a target's sensor samples line up with the timed
loop; paced runs add ``paced`` {period_ms, achieved_period_ms, late_starts}; sustained runs add
``timeline`` {duration_s, report_every_s, start_boottime_s, windows: [{end_index, t_end_s,
boottime_end_s}]}; cold starts add ``cold_start`` {count, xnnpack_cache, cache_bytes, starts:
[{kind, cache, runtime, process_start_ms, init_ms, first_inference_ms, total_ms}]}; a
cold-start child writes {ready_ns, first_done_ns, init_ms, first_inference_ms, runtime}.

Where the time goes (single-stream runs; the logic is in ``runner_profile.py``, which must sit
next to this file): result.json also has ``runtime_api``, ``delegation`` ({delegate,
nodes_total, nodes_delegated, partitions, undelegated: {OP: n}, source, delegate_nodes,
partition_members, undelegated_nodes}) and, for ``runtime_api: "compiled"`` (LiteRT's
CompiledModel; ``invoke()`` is ``run_by_index``), ``accelerator``, ``fully_accelerated``,
``gpu_precision``, ``gpu_adapter``. With ``op_profile`` a separate child
(``runner.py --op-profile job.json``, after the timed runs) writes ``profile.json``, merged as
``op_profile_raw`` ({runs, entries: [{node, op, name, delegated, mean_us, p50_us, members?,
member_names?, inner?}], invoke: {mean_us, p50_us}, note, delegation}) or ``op_profile_error``.

Exit status: 0 ok, 2 bad input (model/data/delegate; message in result.json), 3 internal
failure. A crash (signal) or hang is detected by the parent, which owns the deadline.

Timing: only ``invoke()`` sits between two ``time.perf_counter_ns()`` calls; ``set_tensor``
happens outside the timed region. Inference i uses input sample i % N. Outputs (for drift and the
NaN/Inf check) are read in an untimed pass over every sample *before* warmup and the timed loop,
so the timed loop does nothing but set inputs and invoke. Around every timed loop the garbage
collector is frozen and disabled (``gc.freeze()`` + ``gc.disable()``) and the collections that
still happened are recorded (``gc``).

Memory (``memory`` in result.json, Linux ``/proc/self/status``): ``runtime_rss_bytes`` after
Python, numpy and the runtime are imported; ``model_load_bytes`` added by creating and allocating
the interpreter; ``inputs_bytes`` of the input arrays kept for the run (their own bytes, exact);
then the peak is reset (``/proc/self/clear_refs``) so data loading and conversion transients do not
count, and ``peak_rss_bytes`` = the peak RSS from there to the end of the timed loop minus the
input and saved-output arrays: Python + numpy + runtime + model + arena. ``model_rss_bytes`` =
``peak_rss_bytes - runtime_rss_bytes``. Synthetic inputs are drawn in float32 directly.

Server mode: each query waits for its scheduled time by sleeping until ``SPIN_NS`` before it and
spinning (yielding the GIL) for the rest, so the sleep's oversleep is not charged to the model;
the issuing thread's own lateness (issue time - scheduled time, for queries that found a worker
idle) is recorded apart as ``generator_lateness_ms``. A run stopped at max_time reports the
queries that were due but not served (``backlog_ns``: time from their due time to the stop, a
lower bound of their latency).
"""

from __future__ import annotations

import gc
import json
import math
import os
import platform
import subprocess
import sys
import threading
import time
import traceback

import numpy as np

RUNNER_VERSION = 1
EXIT_OK, EXIT_BAD_INPUT, EXIT_INFRA = 0, 2, 3
SYNTHETIC_SAMPLES = 8          # distinct seeded synthetic samples cycled through
SYNTHETIC_INT_RANGE = (0, 16)  # [low, high) for non-quantized integer inputs (e.g. token ids)
SPIN_NS = 300_000              # server mode: sleep until 0.3 ms before a due time, then spin
# (0.3 ms covers the sleep's usual ~0.1 ms oversleep; a longer spin burns CPU that a busy
# machine's scheduler charges back as preemption in the middle of the next query)
QUANTIZE_CHUNK_BYTES = 16 << 20  # float64 temporaries of quantize() stay below this
# Test-only fault injection so the parent's crash/hang handling can be tested for real:
# "abort" -> os.abort() after loading the model, "hang" -> sleep forever, "profile-abort" -> the
# op-profiling child aborts.
FAULT_ENV = "EDGEBENCH_RUNNER_FAULT"


class JobError(Exception):
    """A failure with a one-line message; ``bad_input`` decides exit 2 vs 3."""

    def __init__(self, message: str, bad_input: bool = True):
        super().__init__(message)
        self.bad_input = bad_input


# ---------------------------------------------------------------------------- runtime

def load_runtime():
    """(Interpreter class, load_delegate, OpResolverType or None, 'name version')."""
    try:
        from ai_edge_litert import interpreter as mod  # type: ignore
        name = "ai_edge_litert"
        version = _dist_version("ai-edge-litert")
    except ImportError:
        try:
            from tflite_runtime import interpreter as mod  # type: ignore
            name = "tflite_runtime"
            version = _dist_version("tflite-runtime") or _dist_version("tflite_runtime")
        except ImportError:
            try:
                import tensorflow as tf  # type: ignore
            except ImportError:
                raise JobError("no TFLite runtime found; install ai-edge-litert "
                               "(pip install ai-edge-litert) or tflite-runtime", bad_input=False) from None
            mod = tf.lite
            mod.load_delegate = tf.lite.experimental.load_delegate
            mod.OpResolverType = tf.lite.experimental.OpResolverType
            name, version = "tensorflow.lite", tf.__version__
    return (mod.Interpreter, getattr(mod, "load_delegate", None), getattr(mod, "OpResolverType", None),
            f"{name} {version or '?'}".strip())


def _dist_version(dist: str) -> str | None:
    try:
        from importlib import metadata
        return metadata.version(dist)
    except Exception:  # noqa: BLE001 -- metadata missing on stripped device installs
        return None


GPU_DELEGATE_LIBS = ("libtensorflowlite_gpu_delegate.so", "libLiteRtGpuAccelerator.so")


def make_interpreter(runtime, model_path: str, threads: int | None, delegate: str):
    """Build and allocate an interpreter; delegate errors are bad input (exit 2)."""
    Interpreter, load_delegate, OpResolverType, _ = runtime
    kwargs = {"model_path": model_path}
    if threads is not None:
        kwargs["num_threads"] = int(threads)
    if delegate == "xnnpack":
        pass  # the default op resolver applies XNNPACK to float and quantized graphs
    elif delegate == "none":
        if OpResolverType is None:
            raise JobError("delegate 'none' needs a runtime with OpResolverType; use --delegate xnnpack")
        kwargs["experimental_op_resolver_type"] = OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES
    else:
        if load_delegate is None:
            raise JobError(f"delegate {delegate!r} cannot be applied: this runtime cannot load delegates; "
                           "use --delegate xnnpack or none")
        libs = GPU_DELEGATE_LIBS if delegate == "gpu" else (delegate,)
        errors = []
        loaded = None
        for lib in libs:
            try:
                loaded = load_delegate(lib)
                break
            except (ValueError, OSError, RuntimeError) as exc:
                errors.append(f"{lib}: {_one_line(exc)}")
        if loaded is None:
            raise JobError(f"delegate {delegate!r} cannot be applied ({'; '.join(errors)}); "
                           "use --delegate xnnpack or none")
        kwargs["experimental_delegates"] = [loaded]
    try:
        it = Interpreter(**kwargs)
    except ValueError as exc:
        msg = _one_line(exc)
        if "delegate" in msg.lower():
            raise JobError(f"delegate {delegate!r} cannot be applied to {model_path}: {msg}; "
                           "use --delegate xnnpack or none") from None
        raise JobError(f"cannot load {model_path}: {msg}; give a valid .tflite file") from None
    except RuntimeError as exc:
        raise JobError(f"cannot load {model_path}: {_one_line(exc)}; give a valid .tflite file") from None
    try:
        it.allocate_tensors()
    except (RuntimeError, ValueError) as exc:
        raise JobError(f"cannot allocate {model_path}: {_one_line(exc)}") from None
    return it


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text[:400] if text else type(exc).__name__


def check_flatbuffer(path: str) -> None:
    """Cheap checks before the runtime touches the file (it may crash on garbage)."""
    if not os.path.isfile(path):
        raise JobError(f"model not found: {path}; give the path of an existing .tflite file")
    size = os.path.getsize(path)
    if size < 16:
        raise JobError(f"{path} is {size} bytes, too small to be a .tflite model; re-export it")
    with open(path, "rb") as fh:
        head = fh.read(8)
    if head[4:8] != b"TFL3":
        raise JobError(f"{path} is not a TFLite flatbuffer (no 'TFL3' identifier); give a .tflite file "
                       "produced by the TFLite converter")


# ---------------------------------------------------------------------------- tensors

def io_details(it):
    """(inputs, outputs): lists of dicts {name, index, shape, shape_signature, dtype, scale, zero_point}.

    Names come from the first signature (the SavedModel signature names); a model without
    signatures falls back to positional order and tensor names.
    """
    sigs = {}
    try:
        sigs = it.get_signature_list() or {}
    except Exception:  # noqa: BLE001 -- old runtimes
        sigs = {}
    by_index_in = {d["index"]: d for d in it.get_input_details()}
    by_index_out = {d["index"]: d for d in it.get_output_details()}
    if sigs:
        key = next(iter(sigs))
        runner = it.get_signature_runner(key)
        ins = [(name, d["index"]) for name, d in runner.get_input_details().items()]
        outs = [(name, d["index"]) for name, d in runner.get_output_details().items()]
        # Signature order is the SavedModel order; keep it, but fall back to positional
        # details if the signature refers to tensors outside subgraph 0.
        if all(i in by_index_in for _, i in ins) and all(i in by_index_out for _, i in outs):
            return ([_detail(n, by_index_in[i]) for n, i in ins], [_detail(n, by_index_out[i]) for n, i in outs])
    return ([_detail(d["name"], d) for d in it.get_input_details()],
            [_detail(d["name"], d) for d in it.get_output_details()])


def _detail(name: str, d: dict) -> dict:
    scale, zp = d.get("quantization", (0.0, 0)) or (0.0, 0)
    qp = d.get("quantization_parameters") or {}
    scales = qp.get("scales")
    if scales is not None and len(scales) > 1:
        raise JobError(f"tensor {name!r} has per-channel quantization on a model input/output; "
                       "re-export the model with per-tensor I/O quantization")
    return {
        "name": name,
        "index": int(d["index"]),
        "shape": [int(x) for x in d["shape"]],
        "shape_signature": [int(x) for x in d.get("shape_signature", d["shape"])],
        "dtype": np.dtype(d["dtype"]).name,
        "scale": float(scale),
        "zero_point": int(zp),
    }


def is_quantized(det: dict) -> bool:
    return det["scale"] != 0.0 and np.issubdtype(np.dtype(det["dtype"]), np.integer)


def quantize(x: np.ndarray, det: dict) -> np.ndarray:
    """round(x / scale) + zero_point, clipped, in float64 -- a chunk of rows at a time, so a large
    input never needs a full float64 copy."""
    dt = np.dtype(det["dtype"])
    info = np.iinfo(dt)
    x = np.asarray(x)
    out = np.empty(x.shape, dt)
    row = max(1, int(np.prod(x.shape[1:], dtype=np.int64)) * 8) if x.ndim else 8
    step = max(1, QUANTIZE_CHUNK_BYTES // row)
    flat_x = x.reshape(1) if x.ndim == 0 else x
    flat_o = out.reshape(1) if x.ndim == 0 else out
    for i in range(0, flat_x.shape[0], step):
        q = np.round(flat_x[i:i + step].astype(np.float64) / det["scale"]) + det["zero_point"]
        flat_o[i:i + step] = np.clip(q, info.min, info.max)
    return out


def dequantize(q: np.ndarray, det: dict) -> np.ndarray:
    return ((q.astype(np.float32) - np.float32(det["zero_point"])) * np.float32(det["scale"])).astype(np.float32)


def synthetic_inputs(inputs: list[dict], seed: int, n: int = SYNTHETIC_SAMPLES) -> dict[str, np.ndarray]:
    """Seeded samples [n, *shape[1:]] per input: floats U(-1, 1) (quantized with the tensor's
    own scale/zero point for int8/uint8 inputs), integers in SYNTHETIC_INT_RANGE, bools."""
    rng = np.random.default_rng(seed)
    out = {}
    for det in inputs:
        shape = [n] + [max(1, s) for s in det["shape"][1:]]
        dt = np.dtype(det["dtype"])
        if is_quantized(det) or np.issubdtype(dt, np.floating):
            x = rng.random(shape, dtype=np.float32)    # float32 directly: no float64 copy
            x *= 2.0
            x -= 1.0
            out[det["name"]] = x
        elif dt == np.bool_:
            out[det["name"]] = rng.integers(0, 2, shape).astype(np.bool_)
        elif np.issubdtype(dt, np.integer):
            out[det["name"]] = rng.integers(*SYNTHETIC_INT_RANGE, size=shape).astype(dt)
        else:
            raise JobError(f"input {det['name']!r} has dtype {dt.name}, which synthetic inputs cannot "
                           "fill; pass --data with an .npz holding it")
    return out


def load_npz(path: str) -> dict[str, np.ndarray]:
    """Every array of an .npz InputSet except 'labels' (one sample per leading row)."""
    if not os.path.isfile(path):
        raise JobError(f"input data not found: {path}; give an .npz InputSet")
    try:
        with np.load(path, allow_pickle=False) as z:
            return {k: z[k] for k in z.files if k != "labels"}
    except Exception as exc:  # noqa: BLE001 -- zip/pickle/format errors all mean bad file
        raise JobError(f"cannot read input data {path}: {_one_line(exc)}; give an .npz of arrays") from None


def map_inputs(data: dict[str, np.ndarray], inputs: list[dict], path: str) -> dict[str, np.ndarray]:
    """Key the arrays by model input name: exact names, else a single input, else arr_0.. order."""
    names = [d["name"] for d in inputs]
    if set(data) == set(names):
        return data
    if len(data) == len(names) == 1:
        return {names[0]: next(iter(data.values()))}
    if len(data) == len(names) and all(k.startswith("arr_") for k in data):
        return {n: data[f"arr_{i}"] for i, n in enumerate(names)}
    raise JobError(f"input data {path} has keys {sorted(data)} but the model's inputs are {names}; "
                   "save the .npz with one array per model input name")


def prepare_samples(it, inputs: list[dict], data: dict[str, np.ndarray], source: str):
    """Per input, a list of ready-to-set arrays (dtype/shape/quantization applied) and N."""
    counts = set()
    prepared: dict[int, list[np.ndarray]] = {}
    resized = False
    for det in inputs:
        name = det["name"]
        arr = np.asarray(data[name])
        want = det["shape"]
        sig = det["shape_signature"]
        if arr.ndim != len(want):
            raise JobError(f"input {name!r} in {source}: data shape {list(arr.shape)} has {arr.ndim} dims but "
                           f"the model input is {want} (leading dim = samples); reshape the data to "
                           f"[N, {', '.join(str(s) for s in want[1:])}]")
        batch = want[0] if want[0] > 0 else 1
        if list(arr.shape[1:]) != want[1:]:
            dynamic_ok = all(s == a or s == -1 for s, a in zip(sig[1:], arr.shape[1:]))
            if not dynamic_ok:
                raise JobError(f"input {name!r} in {source}: data shape {list(arr.shape)} does not match the model "
                               f"input {want} (one sample = {want[1:]}); reshape the data or re-export the model")
            it.resize_tensor_input(det["index"], [batch] + list(arr.shape[1:]))
            resized = True
        n_rows = arr.shape[0]
        if n_rows < batch or n_rows % batch:
            raise JobError(f"input {name!r} in {source}: {n_rows} samples is not a multiple of the model batch "
                           f"size {batch}; give N*{batch} samples")
        arr = _coerce(arr, det, source)
        prepared[det["index"]] = [np.ascontiguousarray(arr[i:i + batch]) for i in range(0, n_rows, batch)]
        counts.add(n_rows // batch)
    if len(counts) > 1:
        raise JobError(f"inputs in {source} have different sample counts {sorted(counts)}; give the same "
                       "number of samples for every input")
    if resized:
        it.allocate_tensors()
    n = counts.pop() if counts else 1
    return prepared, n


def _coerce(arr: np.ndarray, det: dict, source: str) -> np.ndarray:
    name, dt = det["name"], np.dtype(det["dtype"])
    if arr.dtype == dt:
        return arr
    if is_quantized(det):
        if np.issubdtype(arr.dtype, np.floating):
            return quantize(arr, det)
        raise JobError(f"input {name!r} in {source}: dtype {arr.dtype.name} does not match the quantized model "
                       f"input {dt.name}; give float data (it is quantized with scale {det['scale']:.6g}, "
                       f"zero point {det['zero_point']}) or {dt.name} data")
    if np.issubdtype(dt, np.floating) and (np.issubdtype(arr.dtype, np.floating) or np.issubdtype(arr.dtype, np.integer)):
        return arr.astype(dt)
    if np.issubdtype(dt, np.integer) and np.issubdtype(arr.dtype, np.integer):
        info = np.iinfo(dt)
        if arr.size and (arr.min() < info.min or arr.max() > info.max):
            raise JobError(f"input {name!r} in {source}: values outside the {dt.name} range; give {dt.name} data")
        return arr.astype(dt)
    raise JobError(f"input {name!r} in {source}: dtype {arr.dtype.name} does not match the model input dtype "
                   f"{dt.name}; give {dt.name} data")


# ---------------------------------------------------------------------------- measurement

def rss_bytes(field: str = "VmHWM") -> int | None:
    """Peak (VmHWM) or current (VmRSS) resident set size from /proc, else getrusage."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        import resource
        r = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return int(r if sys.platform == "darwin" else r * 1024)
    except Exception:  # noqa: BLE001
        return None


def reset_peak_rss() -> bool:
    """Reset the peak RSS (VmHWM) to the current RSS (Linux >= 4.0); False where not possible."""
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        return True
    except OSError:
        return False


def owned_bytes(arrays) -> int:
    """Bytes of the memory blocks that hold these arrays (views count their base once)."""
    seen: dict[int, int] = {}
    for a in arrays:
        base = a
        while isinstance(getattr(base, "base", None), np.ndarray):
            base = base.base
        if isinstance(base, np.ndarray):
            seen[id(base)] = int(base.nbytes)
        else:
            seen[id(a)] = int(a.nbytes)
    return sum(seen.values())


class GcPaused:
    """``with GcPaused() as g:`` collect, freeze and disable the garbage collector; afterwards
    ``g.collections`` counts the collections that still ran (0 unless something re-enabled it)."""

    def __enter__(self):
        gc.collect()
        if hasattr(gc, "freeze"):
            gc.freeze()
        self.was_enabled = gc.isenabled()
        gc.disable()
        self.before = sum(st["collections"] for st in gc.get_stats())
        return self

    def __exit__(self, *exc):
        self.collections = sum(st["collections"] for st in gc.get_stats()) - self.before
        if self.was_enabled:
            gc.enable()
        if hasattr(gc, "unfreeze"):
            gc.unfreeze()
        return False

    def facts(self) -> dict:
        return {"disabled": True, "frozen": hasattr(gc, "freeze"), "collections": int(self.collections)}


class Session:
    """One interpreter with its prepared inputs; the hot loop lives in ``timed``."""

    def __init__(self, runtime, job: dict, inputs_data: dict | None):
        self.job = job
        t0 = time.perf_counter_ns()
        if job.get("runtime_api") == "compiled":
            self.it = make_compiled_model(runtime, job)
        else:
            self.it = make_interpreter(runtime, job["model_path"], job.get("threads"), job.get("delegate", "xnnpack"))
        self.init_ns = time.perf_counter_ns() - t0
        self.inputs, self.outputs = io_details(self.it)
        if inputs_data is not False:
            self.prepare(inputs_data)

    def prepare(self, inputs_data: dict | None) -> None:
        """Map, check and convert the input data (None: seeded synthetic inputs)."""
        job = self.job
        if inputs_data is None:
            data = synthetic_inputs(self.inputs, int(job.get("seed", 0)))
            source = "synthetic inputs"
        else:
            source = job.get("inputs_npz") or "input data"
            data = map_inputs(inputs_data, self.inputs, source)
        self.samples, self.n = prepare_samples(self.it, self.inputs, data, source)
        # Output indices may change after a resize; re-read them.
        self.inputs, self.outputs = io_details(self.it)
        self.set_items = [(idx, arrs) for idx, arrs in self.samples.items()]
        self.single = self.n == 1
        if self.single:
            self._set(0)

    def input_bytes(self) -> int:
        return owned_bytes([a for _, arrs in self.set_items for a in arrs])

    def _set(self, i: int) -> None:
        k = i % self.n
        st = self.it.set_tensor
        for idx, arrs in self.set_items:
            st(idx, arrs[k])

    def read_outputs(self) -> dict[str, np.ndarray]:
        out = {}
        for det in self.outputs:
            v = self.it.get_tensor(det["index"])
            out[det["name"]] = dequantize(v, det) if is_quantized(det) else np.array(v, copy=True)
        return out

    def one(self, i: int) -> int:
        if not self.single:
            self._set(i)
        clock = time.perf_counter_ns
        invoke = self.it.invoke
        t0 = clock()
        invoke()
        return clock() - t0


def run_single(job: dict, sess: Session) -> dict:
    """First inference, an untimed pass that reads every sample's outputs, warmup, timed runs."""
    res: dict = {}
    it = sess.it
    clock = time.perf_counter_ns
    invoke = it.invoke
    set_items = sess.set_items
    n = sess.n
    single = sess.single

    # first inference (separately reported; counts as the first warmup run)
    if not single:
        sess._set(0)
    t0 = clock()
    try:
        invoke()
    except (RuntimeError, ValueError) as exc:
        raise JobError(f"inference failed on {job['model_path']}: {_one_line(exc)}") from None
    first_ns = clock() - t0
    res["first_inference_ms"] = first_ns / 1e6

    # untimed output pass: every sample's outputs (drift, NaN/Inf), before anything is timed
    save = bool(job.get("save_outputs"))
    outputs: list[dict] = []
    nonfinite: dict[str, int] = {}
    for j in range(n):
        if j:
            sess._set(j)
            invoke()
        o = sess.read_outputs()
        _count_nonfinite(o, nonfinite)
        if save:
            outputs.append(o)
    if save:
        res["outputs"] = {d["name"]: np.concatenate([o[d["name"]] for o in outputs], axis=0)
                          for d in sess.outputs}
    del outputs

    warmup = [first_ns]
    wr = int(job.get("warmup_runs", 10))
    wt = float(job.get("warmup_time_s", 0.0)) * 1e9
    w_start = clock()
    i = 1
    while i < wr or (clock() - w_start) < wt:
        if not single:
            for idx, arrs in set_items:
                it.set_tensor(idx, arrs[i % n])
        t0 = clock()
        invoke()
        warmup.append(clock() - t0)
        i += 1

    runs = job.get("runs")
    min_runs = int(job.get("min_runs", 662))
    min_t = float(job.get("min_time_s", 1.0)) * 1e9
    max_t = float(job.get("max_time_s", 60.0)) * 1e9
    cap = int(runs) if runs is not None else None
    samples = []
    append = samples.append

    b0 = boottime_s()   # the timed span on CLOCK_BOOTTIME, for the target's sensor samples (issue 17)
    stop_reason = "runs"
    with GcPaused() as paused:
        start = clock()
        i = 0
        while True:
            el = clock() - start
            if cap is not None:
                if i >= cap:
                    break
            elif i >= min_runs and el >= min_t:
                stop_reason = "min_runs_and_min_time"
                break
            if el >= max_t:  # also caps a forced --runs, so the parent's deadline stays meaningful
                stop_reason = "max_time"
                break
            if not single:
                for idx, arrs in set_items:
                    it.set_tensor(idx, arrs[i % n])
            t0 = clock()
            invoke()
            append(clock() - t0)
            i += 1
        wall_ns = clock() - start
    res["timed_span_boottime_s"] = [b0, boottime_s()]

    res.update({
        "samples_ns": np.asarray(samples, np.int64),
        "warmup_ns": np.asarray(warmup, np.int64),
        "stop_reason": stop_reason,
        "timed_wall_s": wall_ns / 1e9,
        "nonfinite_outputs": nonfinite,
        "gc": paused.facts(),
    })
    return res


def _count_nonfinite(o: dict, acc: dict) -> None:
    for k, v in o.items():
        if np.issubdtype(v.dtype, np.floating):
            bad = int(v.size - np.count_nonzero(np.isfinite(v)))
            if bad:
                acc[k] = acc.get(k, 0) + bad


def _run_workers(work, n: int, barrier, start_box: list, errors: list, what: str) -> None:
    """Start n worker threads, release them together (start time in start_box[0]), join them;
    the first worker error becomes a JobError."""
    threads = [threading.Thread(target=work, args=(w,), daemon=True) for w in range(n)]
    for t in threads:
        t.start()
    start_box[0] = time.perf_counter_ns()
    barrier.wait()
    for t in threads:
        t.join()
    if errors:
        raise JobError(f"{what} worker failed: {errors[0]}", bad_input=False)


def run_concurrency(job: dict, sessions: list, level: int) -> dict:
    """``level`` interpreters in parallel threads (invoke releases the GIL); time-bounded.

    Each worker stops once the shared clock passed min_time and it did its share of
    min_runs (or its share of ``runs``), or at max_time. Throughput = completed / wall.
    """
    for s in sessions:  # warm each interpreter
        for k in range(max(1, int(job.get("warmup_runs", 10)))):
            s.one(k)
    runs = job.get("runs")
    share = math.ceil((int(runs) if runs is not None else int(job.get("min_runs", 662))) / level)
    min_t = 0.0 if runs is not None else float(job.get("min_time_s", 1.0)) * 1e9
    max_t = float(job.get("max_time_s", 60.0)) * 1e9
    barrier = threading.Barrier(level + 1)
    per_worker: list[list[int]] = [[] for _ in range(level)]
    ends = [0] * level
    errors: list[str] = []
    start_box = [0]

    def work(w: int) -> None:
        s = sessions[w]
        out = per_worker[w]
        clock = time.perf_counter_ns
        try:
            barrier.wait()
            start = start_box[0]
            i = 0
            while True:
                el = clock() - start
                if (i >= share and el >= min_t) or el >= max_t:
                    break
                d = s.one(i)
                out.append((clock(), d))
                i += 1
            ends[w] = clock()
        except Exception as exc:  # noqa: BLE001 -- reported by the main thread
            errors.append(_one_line(exc))

    with GcPaused() as paused:
        _run_workers(work, level, barrier, start_box, errors, "concurrency")
    wall = max(ends) - start_box[0]
    total = sum(len(x) for x in per_worker)
    return {
        # in completion order across workers, so first/last-third drift checks mean time
        "samples_ns": np.asarray([d for _, d in sorted(v for x in per_worker for v in x)], np.int64),
        "warmup_ns": np.zeros(0, np.int64),
        "first_inference_ms": None,
        "init_ms_each": [s.init_ns / 1e6 for s in sessions],
        "load": {"mode": "concurrency", "level": level, "completed": total, "wall_s": wall / 1e9,
                 "qps": total / (wall / 1e9) if wall > 0 else None,
                 "per_worker_completed": [len(x) for x in per_worker]},
        "nonfinite_outputs": {},
        "gc": paused.facts(),
    }


def wait_until(due_ns: int, share_gil: bool = False) -> None:
    """Return at ``due_ns`` (perf_counter_ns): sleep until SPIN_NS before it, then spin.

    ``time.sleep`` oversleeps by ~0.1 ms (more on a busy machine); spinning the last stretch
    keeps that out of the measured latency. With ``share_gil`` (several workers) the spin calls
    ``time.sleep(0)``, which hands the GIL to a worker coming back from ``invoke()`` instead of
    making it wait for the 5 ms switch interval; a lone worker spins without system calls, which
    on a loaded machine are chances to be descheduled."""
    clock = time.perf_counter_ns
    left = due_ns - clock()
    if left > SPIN_NS:
        time.sleep((left - SPIN_NS) / 1e9)
    if share_gil:
        while clock() < due_ns:
            time.sleep(0)
    else:
        while clock() < due_ns:
            pass


def _ms_summary(ns: np.ndarray) -> dict | None:
    if ns.size == 0:
        return None
    ms = ns.astype(np.float64) / 1e6
    return {"count": int(ms.size), "p50": float(np.percentile(ms, 50)), "p99": float(np.percentile(ms, 99)),
            "max": float(ms.max()), "mean": float(ms.mean())}


def run_server(job: dict, sessions: list, qps: float, workers: int, queries: int) -> dict:
    """Poisson arrivals at ``qps`` (seeded) served FIFO by ``workers`` interpreters.

    Latency of query k = completion time - scheduled arrival time, so queueing delay is
    included, as in MLPerf's server scenario. A worker that is idle waits for the due time with
    ``wait_until``; the time it still started late (issue - due) is the load generator's own
    lateness, recorded apart (``generator_lateness_ms``) and bounding how much of a latency is
    not the system's. Queries due before a max_time stop but not served are ``backlog_ns``.
    """
    for s in sessions:
        for k in range(max(1, int(job.get("warmup_runs", 10)))):
            s.one(k)
    rng = np.random.default_rng(int(job.get("seed", 0)))
    gaps = rng.exponential(1.0 / qps, size=queries)
    arrivals = (np.cumsum(gaps) * 1e9).astype(np.int64)
    lat = np.zeros(queries, np.int64)
    service = np.zeros(queries, np.int64)
    late = np.full(queries, -1, np.int64)
    done = np.zeros(queries, np.int64)
    lock = threading.Lock()
    nxt = [0]
    max_t = float(job.get("max_time_s", 60.0)) * 1e9
    barrier = threading.Barrier(workers + 1)
    start_box = [0]
    stops = [0] * workers
    errors: list[str] = []

    def work(w: int) -> None:
        s = sessions[w]
        clock = time.perf_counter_ns
        try:
            barrier.wait()
            start = start_box[0]
            while True:
                with lock:
                    k = nxt[0]
                    if k >= queries:
                        return
                    nxt[0] = k + 1
                due = start + int(arrivals[k])
                now = clock()
                if now - start > max_t:
                    stops[w] = now - start
                    return
                idle = due > now
                if idle:
                    wait_until(due, share_gil=workers > 1)
                issued = clock()
                svc = s.one(k)
                end = clock()
                service[k] = svc
                lat[k] = end - due
                done[k] = end - start
                if idle:
                    late[k] = max(issued - due, 0)
        except Exception as exc:  # noqa: BLE001
            errors.append(_one_line(exc))

    with GcPaused() as paused:
        _run_workers(work, workers, barrier, start_box, errors, "server")
    completed = done > 0
    n_done = int(completed.sum())
    span = int(done[completed].max()) if n_done else 0
    stop = max(stops) if any(stops) else 0
    backlog = np.zeros(0, np.int64)
    if stop:   # due before the stop, never served: latency at least stop - due
        unserved = ~completed & (arrivals <= stop)
        backlog = (stop - arrivals[unserved]).astype(np.int64)
    return {
        "samples_ns": lat[completed],
        "service_ns": service[completed],
        "backlog_ns": backlog,
        "warmup_ns": np.zeros(0, np.int64),
        "first_inference_ms": None,
        "load": {"mode": "server", "target_qps": qps, "workers": workers, "issued": queries,
                 "completed": n_done, "wall_s": span / 1e9,
                 "achieved_qps": n_done / (span / 1e9) if span > 0 else None,
                 # the rate the seeded schedule really offered (finite-sample Poisson noise)
                 "offered_qps": queries / (arrivals[-1] / 1e9) if arrivals[-1] > 0 else None,
                 "truncated_by_max_time": n_done < queries,
                 "backlog": int(backlog.size),
                 "generator_lateness_ms": _ms_summary(late[completed & (late >= 0)]),
                 "spin_ns": SPIN_NS},
        "nonfinite_outputs": {},
        "gc": paused.facts(),
    }


# ---------------------------------------------------------------------------- sustained, paced, cold start
# Issue 17. Three entries, each its own function: ``run_paced`` (one invoke every period_ms),
# ``run_timeline`` (a sustained run closed into windows; back-to-back or paced) and
# ``run_cold_starts`` (N fresh worker processes, each child running ``run_first_inference``).
# Sensors (thermal zones, CPU frequencies, battery, RAPL) are read by the target outside this
# process, so nothing here perturbs the timed loop; the loops report their spans on CLOCK_BOOTTIME
# (the clock of /proc/uptime) so the target's samples line up with the timed inferences.

TIMELINE_MAX_SAMPLES = 5_000_000   # 40 MB of int64 per sustained run; past it the run stops ("sample_cap")
LATE_FRACTION = 0.10               # a paced invoke starting > 10% of a period after its slot is "late"
COLD_START_TIMEOUT_S = 300.0       # one fresh process: start, load, one inference


def boottime_s():
    """Seconds on CLOCK_BOOTTIME (what /proc/uptime counts); None where it does not exist."""
    clk = getattr(time, "CLOCK_BOOTTIME", None)
    return None if clk is None else time.clock_gettime(clk)


def _warm(job: dict, sess: Session) -> tuple[int, list]:
    """First inference, then warm-up runs back-to-back (as in run_single); ns each."""
    try:
        first_ns = sess.one(0)
    except (RuntimeError, ValueError) as exc:
        raise JobError(f"inference failed on {job['model_path']}: {_one_line(exc)}") from None
    warmup = [first_ns]
    wr = int(job.get("warmup_runs", 10))
    wt = float(job.get("warmup_time_s", 0.0)) * 1e9
    w_start = time.perf_counter_ns()
    i = 1
    while i < wr or (time.perf_counter_ns() - w_start) < wt:
        warmup.append(sess.one(i))
        i += 1
    return first_ns, warmup


def _period_ns(job: dict, warmup: list) -> int | None:
    """The job's period in ns; a period the invoke itself cannot keep is bad input, said up front."""
    if job.get("period_ms") is None:
        return None
    period = int(float(job["period_ms"]) * 1e6)
    w = sorted(warmup[1:] or warmup)
    med = w[len(w) // 2]
    if med >= period:
        raise JobError(f"--period-ms {period / 1e6:g} is shorter than one inference of {job['model_path']} "
                       f"(median {med / 1e6:.3g} ms over {len(w)} warm-up runs), so the invokes cannot keep "
                       f"that pace; use a --period-ms above {med / 1e6:.3g}")
    return period


def _output_pass(sess: Session) -> dict:
    """NaN/Inf count over one untimed pass of the input samples (after the timed loop)."""
    nonfinite: dict = {}
    for j in range(sess.n):
        sess._set(j)
        sess.it.invoke()
        _count_nonfinite(sess.read_outputs(), nonfinite)
    return nonfinite


def _sleep_until(due_ns: int) -> None:
    now = time.perf_counter_ns()
    if due_ns > now:
        time.sleep((due_ns - now) / 1e9)


def run_paced(job: dict, sess: Session) -> dict:
    """One invoke every ``period_ms``, sleeping in between (an audio or camera callback's pattern).

    Each sample is one ``invoke()`` only. The schedule is fixed-rate from the first timed invoke;
    an invoke that cannot start in its slot starts at once, without a catch-up burst, and its lag
    counts. Stops by the run-control rule of ``run_single``. Extra result: ``paced``
    {period_ms, achieved_period_ms, late_starts} and the array ``lag_ns`` (start - slot).
    """
    first_ns, warmup = _warm(job, sess)
    period = _period_ns(job, warmup)
    runs = job.get("runs")
    cap = int(runs) if runs is not None else None
    min_runs = int(job.get("min_runs", 662))
    min_t = float(job.get("min_time_s", 1.0)) * 1e9
    max_t = float(job.get("max_time_s", 60.0)) * 1e9
    clock = time.perf_counter_ns
    invoke = sess.it.invoke
    samples, starts, lags = [], [], []
    b0 = boottime_s()
    start = clock()
    due = start
    i = 0
    stop_reason = "runs"
    while True:
        el = clock() - start
        if cap is not None:
            if i >= cap:
                break
        elif i >= min_runs and el >= min_t:
            stop_reason = "min_runs_and_min_time"
            break
        if el >= max_t:
            stop_reason = "max_time"
            break
        if not sess.single:
            sess._set(i)
        _sleep_until(due)
        t0 = clock()
        invoke()
        t1 = clock()
        samples.append(t1 - t0)
        starts.append(t0)
        lags.append(t0 - due)
        due = max(due + period, t1)
        i += 1
    wall_ns = clock() - start
    b1 = boottime_s()
    achieved = (starts[-1] - starts[0]) / (len(starts) - 1) / 1e6 if len(starts) > 1 else None
    return {
        "samples_ns": np.asarray(samples, np.int64), "warmup_ns": np.asarray(warmup, np.int64),
        "lag_ns": np.asarray(lags, np.int64), "first_inference_ms": first_ns / 1e6,
        "stop_reason": stop_reason, "timed_wall_s": wall_ns / 1e9, "nonfinite_outputs": _output_pass(sess),
        "timed_span_boottime_s": [b0, b1],
        "paced": {"period_ms": period / 1e6, "achieved_period_ms": achieved,
                  "late_starts": sum(1 for x in lags if x > LATE_FRACTION * period)},
    }


def run_timeline(job: dict, sess: Session) -> dict:
    """A sustained run: ``timeline.duration_s`` seconds of invokes (back-to-back, or one every
    ``period_ms``), closed into a window every ``timeline.report_every_s``.

    Windows are boundaries only -- ``{end_index, t_end_s, boottime_end_s}`` (samples
    [previous end_index, end_index) belong to it) -- the parent derives each window's statistics
    from the raw samples. Stops at the duration (``stop_reason`` "duration") or, for very fast
    models, at TIMELINE_MAX_SAMPLES ("sample_cap").
    """
    from array import array

    tl = job["timeline"]
    dur = float(tl["duration_s"]) * 1e9
    every = float(tl["report_every_s"]) * 1e9
    first_ns, warmup = _warm(job, sess)
    period = _period_ns(job, warmup)
    clock = time.perf_counter_ns
    invoke = sess.it.invoke
    samples, lags = array("q"), array("q")
    windows: list[dict] = []
    b0 = boottime_s()
    start = clock()
    due = start
    edge = every
    i = 0
    stop_reason = "duration"
    while True:
        el = clock() - start
        if el >= edge or el >= dur or len(samples) >= TIMELINE_MAX_SAMPLES:
            windows.append({"end_index": len(samples), "t_end_s": el / 1e9, "boottime_end_s": boottime_s()})
            while edge <= el:
                edge += every
            if el >= dur:
                break
            if len(samples) >= TIMELINE_MAX_SAMPLES:
                stop_reason = "sample_cap"
                break
        if not sess.single:
            sess._set(i)
        if period is not None:
            _sleep_until(due)
        t0 = clock()
        invoke()
        t1 = clock()
        samples.append(t1 - t0)
        if period is not None:
            lags.append(t0 - due)
            due = max(due + period, t1)
        i += 1
    wall_ns = clock() - start
    res = {
        "samples_ns": np.frombuffer(samples, np.int64).copy(), "warmup_ns": np.asarray(warmup, np.int64),
        "first_inference_ms": first_ns / 1e6, "stop_reason": stop_reason, "timed_wall_s": wall_ns / 1e9,
        "nonfinite_outputs": _output_pass(sess), "timed_span_boottime_s": [b0, boottime_s()],
        "timeline": {"duration_s": float(tl["duration_s"]), "report_every_s": float(tl["report_every_s"]),
                     "start_boottime_s": b0, "windows": windows},
    }
    if period is not None:
        res["lag_ns"] = np.frombuffer(lags, np.int64).copy()
        res["paced"] = {"period_ms": period / 1e6, "achieved_period_ms": (wall_ns / i / 1e6) if i else None,
                        "late_starts": sum(1 for x in lags if x > LATE_FRACTION * period)}
    return res


def _compiled_api():
    """LiteRT's CompiledModel API (the one that takes an XNNPACK weight cache path)."""
    try:
        from ai_edge_litert.compiled_model import CompiledModel  # type: ignore
        from ai_edge_litert.hardware_accelerator import HardwareAccelerator  # type: ignore
        from ai_edge_litert.options import CpuOptions, Options  # type: ignore
    except ImportError:
        raise JobError("--xnnpack-cache needs ai-edge-litert's CompiledModel API (pip install ai-edge-litert), "
                       "which this Python lacks; drop --xnnpack-cache") from None
    return CompiledModel, HardwareAccelerator, CpuOptions, Options


def _compiled_first_inference(api, job: dict, cache_path: str | None) -> tuple[int, int]:
    """(load + buffers ns, first run ns) with the CompiledModel API on the CPU (XNNPACK).

    Inputs: sample 0 of the InputSet (or the seeded synthetic one); the API exposes no input
    quantization, so a quantized input fed float data gets zeros (the value does not change what a
    first inference costs)."""
    CompiledModel, HardwareAccelerator, CpuOptions, Options = api
    delegate = job.get("delegate", "xnnpack")
    if delegate != "xnnpack":
        raise JobError(f"--xnnpack-cache needs the XNNPACK delegate, but --delegate is {delegate!r}; "
                       "use --delegate xnnpack")
    opts = Options(hardware_accelerators=HardwareAccelerator.CPU,
                   cpu_options=CpuOptions(num_threads=int(job.get("threads") or 1),
                                          xnnpack_weight_cache_path=cache_path or ""))
    t0 = time.perf_counter_ns()
    try:
        model = CompiledModel.from_file(job["model_path"], options=opts)
        ins, outs = model.create_input_buffers(0), model.create_output_buffers(0)
    except Exception as exc:  # noqa: BLE001 -- the wrapper raises RuntimeError/ValueError variants
        raise JobError(f"cannot load {job['model_path']} with the CompiledModel API: {_one_line(exc)}") from None
    init_ns = time.perf_counter_ns() - t0
    key = next(iter(model.get_signature_list()))
    details = model.get_input_tensor_details(key)
    names = list(model.get_signature_by_index(0)["inputs"])
    dets = [{"name": n, "shape": list(details[n]["shape"]), "dtype": np.dtype(details[n]["dtype"]).name,
             "scale": 0.0, "zero_point": 0} for n in names]
    if job.get("inputs_npz"):
        data = map_inputs(load_npz(job["inputs_npz"]), dets, job["inputs_npz"])
    else:
        data = synthetic_inputs(dets, int(job.get("seed", 0)), n=1)
    for buf, det in zip(ins, dets):
        arr = np.asarray(data[det["name"]])[:max(1, det["shape"][0] or 1)]
        want = np.dtype(det["dtype"])
        if arr.dtype != want:
            arr = arr.astype(want) if np.issubdtype(arr.dtype, np.integer) or np.issubdtype(want, np.floating) \
                else np.zeros(det["shape"], want)
        buf.write(np.ascontiguousarray(arr.reshape(det["shape"])))
    t0 = time.perf_counter_ns()
    try:
        model.run_by_index(0, ins, outs)
    except Exception as exc:  # noqa: BLE001
        raise JobError(f"inference failed on {job['model_path']}: {_one_line(exc)}") from None
    return init_ns, time.perf_counter_ns() - t0


def run_first_inference(job: dict, load: dict) -> dict:
    """A cold-start child: import the runtime (then it is *ready*), load + allocate, one inference.
    Times are on the monotonic clock, which the parent shares (CLOCK_MONOTONIC is system-wide)."""
    runtime = load_runtime()
    api = _compiled_api() if load.get("api") == "compiled" else None
    ready = time.monotonic_ns()
    if api is not None:
        init_ns, first_ns = _compiled_first_inference(api, job, load.get("xnnpack_cache_path"))
        name = f"{runtime[3]} CompiledModel"
    else:
        data = load_npz(job["inputs_npz"]) if job.get("inputs_npz") else None
        sess = Session(runtime, job, data)
        init_ns = sess.init_ns
        try:
            first_ns = sess.one(0)
        except (RuntimeError, ValueError) as exc:
            raise JobError(f"inference failed on {job['model_path']}: {_one_line(exc)}") from None
        name = f"{runtime[3]} Interpreter"
    return {"ready_ns": ready, "first_done_ns": time.monotonic_ns(), "init_ms": init_ns / 1e6,
            "first_inference_ms": first_ns / 1e6, "runtime": name}


def run_cold_starts(job: dict, load: dict) -> dict:
    """Parent of ``count`` fresh worker processes, one after another (``python runner.py child.json``).

    Per start: ``process_start_ms`` (spawn -> interpreter, numpy and LiteRT imported),
    ``init_ms`` (model load + allocate), ``first_inference_ms``, ``total_ms`` (spawn -> first
    result). Without a cache the children use the Interpreter API (what the timed runs use). With
    ``xnnpack_cache`` they use the CompiledModel API and alternate: a start without a cache, then
    one with the weight cache file -- the first cached start writes it ("build"), later ones load
    it ("warm"). The OS page cache is not dropped (that needs root): starts after the first find
    the model file in memory."""
    count = int(load["count"])
    use_cache = bool(load.get("xnnpack_cache"))
    out_dir = os.path.abspath(job["out_dir"])
    cache_path = os.path.join(out_dir, "xnnpack-weights.cache")
    if os.path.exists(cache_path):
        os.remove(cache_path)
    plan = ([("no_cache", None), ("cache", cache_path)] * count) if use_cache else [("interpreter", None)] * count
    starts = []
    for k, (kind, cpath) in enumerate(plan):
        d = os.path.join(out_dir, f"start{k}")
        os.makedirs(d, exist_ok=True)
        child = {"threads": job.get("threads"), "delegate": job.get("delegate", "xnnpack"),
                 "seed": job.get("seed", 0)}
        child.update(model_path=os.path.abspath(job["model_path"]), out_dir=d,
                     inputs_npz=os.path.abspath(job["inputs_npz"]) if job.get("inputs_npz") else None,
                     load={"mode": "first_inference", "api": "compiled" if use_cache else "interpreter",
                           "xnnpack_cache_path": cpath})
        with open(os.path.join(d, "job.json"), "w") as fh:
            json.dump(child, fh)
        cache_state = None if cpath is None else ("warm" if os.path.exists(cpath) else "build")
        t0 = time.monotonic_ns()
        try:
            proc = subprocess.run([sys.executable, os.path.abspath(__file__), os.path.join(d, "job.json")],
                                  stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                  timeout=COLD_START_TIMEOUT_S, check=False)
        except subprocess.TimeoutExpired:
            raise JobError(f"cold start {k + 1} of {job['model_path']} gave no result within "
                           f"{COLD_START_TIMEOUT_S:g} s and was killed", bad_input=False) from None
        try:
            with open(os.path.join(d, "result.json")) as fh:
                meta = json.load(fh)
        except (OSError, ValueError):
            tail = (proc.stderr or b"").decode("utf-8", "replace").strip().splitlines()[-1:] or [""]
            raise JobError(f"cold start {k + 1} of {job['model_path']} exited {proc.returncode} without a "
                           f"result: {tail[0][:300]}", bad_input=False) from None
        if proc.returncode != 0 or meta.get("status") != "ok":
            raise JobError(f"cold start {k + 1}: {meta.get('error') or 'exit ' + str(proc.returncode)}",
                           bad_input=meta.get("error_kind") == "bad_input")
        starts.append({"kind": kind, "cache": cache_state, "runtime": meta["runtime"],
                       "process_start_ms": (meta["ready_ns"] - t0) / 1e6, "init_ms": meta["init_ms"],
                       "first_inference_ms": meta["first_inference_ms"],
                       "total_ms": (meta["first_done_ns"] - t0) / 1e6, "peak_rss_bytes": meta.get("peak_rss_bytes")})
    return {"samples_ns": np.zeros(0, np.int64),      # no timed loop; result.npz is still written
            "cold_start": {"count": count, "xnnpack_cache": use_cache, "starts": starts,
                           "cache_bytes": os.path.getsize(cache_path) if os.path.exists(cache_path) else None}}


# ---------------------------------------------------------------------------- main

def apply_affinity(cpus) -> dict:
    """Pin this process (and the interpreter threads it starts) to ``cpus`` (a device profile's
    recommended cores); the facts of what was applied go into the result."""
    if not cpus:
        return {}
    want = sorted(int(c) for c in cpus)
    if not hasattr(os, "sched_setaffinity"):
        return {"cpu_affinity": None, "cpu_affinity_error": "os.sched_setaffinity is not available here"}
    try:
        os.sched_setaffinity(0, set(want))
    except OSError as exc:
        return {"cpu_affinity": None, "cpu_affinity_error": f"cannot pin to cpus {want}: {exc}"}
    return {"cpu_affinity": sorted(os.sched_getaffinity(0))}


def run_job(job: dict) -> dict:
    if "model_path" not in job:
        raise JobError("job has no model_path")
    check_flatbuffer(job["model_path"])
    pinned = apply_affinity(job.get("cpu_affinity"))   # inherited by cold-start children too
    load = job.get("load") or None
    if load is not None and load.get("mode") == "cold_start":   # a parent: no runtime import here
        return {**run_cold_starts(job, load), **pinned}
    if load is not None and load.get("mode") == "first_inference":
        res = run_first_inference(job, load)
        res["peak_rss_bytes"] = rss_bytes("VmHWM")
        return res
    runtime = load_runtime()
    gc.collect()
    rss_runtime = rss_bytes("VmRSS")
    res: dict = {"runtime": runtime[3], **pinned}
    mode = "single" if load is None else load.get("mode")
    if mode not in ("single", "concurrency", "server"):
        raise JobError(f"unknown load mode {mode!r}; use single, concurrency, server or cold_start")
    count = 1 if mode == "single" else int(load["level"] if mode == "concurrency" else load.get("workers", 1))
    sessions = [Session(runtime, job, False) for _ in range(count)]   # interpreters first: their own cost
    rss_model = rss_bytes("VmRSS")
    res["init_ms"] = sessions[0].init_ns / 1e6
    fault = os.environ.get(FAULT_ENV)
    if fault == "abort":
        os.abort()
    elif fault == "hang":
        while True:
            time.sleep(3600)
    data = load_npz(job["inputs_npz"]) if job.get("inputs_npz") else None   # read once, mapped per session
    for sess in sessions:
        sess.prepare(data)
    del data                      # arrays the sessions do not use are freed here
    inputs_bytes = owned_bytes([a for sess in sessions for _, arrs in sess.set_items for a in arrs])
    gc.collect()
    rss_inputs = rss_bytes("VmRSS")
    peak_reset = reset_peak_rss()  # loading/converting transients do not count
    if mode == "single":
        sess = sessions[0]
        loop = run_timeline if job.get("timeline") else run_paced if job.get("period_ms") is not None else run_single
        try:
            if loop is run_single:   # pauses the collector around its own timed loop
                res.update(loop(job, sess))
            else:                    # paced/sustained: paused for the whole run (warm-up included)
                with GcPaused() as paused:
                    res.update(loop(job, sess))
                res["gc"] = paused.facts()
        except RuntimeError as exc:  # a kernel rejected an input (e.g. an index out of range)
            raise JobError(f"inference failed on {job['model_path']}: {_one_line(exc)}; check the input "
                           "data (value ranges such as token ids within the vocabulary)") from None
        res["n_input_samples"] = sess.n
        res["input_source"] = "npz" if job.get("inputs_npz") else "synthetic"
        res["inputs"] = sess.inputs
        res["outputs_meta"] = sess.outputs
        res.update(runtime_facts(job, sess))
    elif mode == "concurrency":
        res.update(run_concurrency(job, sessions, count))
    else:
        res.update(run_server(job, sessions, float(load["qps"]), count, int(load["queries"])))
    hwm = rss_bytes("VmHWM")
    outputs_bytes = sum(int(a.nbytes) for a in (res.get("outputs") or {}).values())
    peak = None if hwm is None else max(hwm - inputs_bytes - outputs_bytes, 0)
    res["memory"] = {
        "runtime_rss_bytes": rss_runtime,
        "model_load_bytes": None if rss_model is None or rss_runtime is None else rss_model - rss_runtime,
        "inputs_bytes": inputs_bytes,
        "inputs_rss_bytes": None if rss_inputs is None or rss_model is None else rss_inputs - rss_model,
        "outputs_bytes": outputs_bytes,
        "process_peak_rss_bytes": hwm,
        "peak_reset_after_inputs": peak_reset,
        "peak_rss_bytes": peak,
        "model_rss_bytes": None if peak is None or rss_runtime is None else max(peak - rss_runtime, 0),
    }
    res["rss_before_load_bytes"] = rss_runtime
    res["peak_rss_bytes"] = peak
    return res


def main(argv: list[str]) -> int:
    if len(argv) == 3 and argv[1] == PROFILE_FLAG:
        return profile_main(argv[2])
    if len(argv) != 2:
        sys.stderr.write("usage: runner.py job.json\n")
        return EXIT_BAD_INPUT
    job_path = argv[1]
    try:
        with open(job_path) as fh:
            job = json.load(fh)
    except (OSError, ValueError) as exc:
        sys.stderr.write(f"cannot read job {job_path}: {exc}\n")
        return EXIT_BAD_INPUT
    out_dir = job.get("out_dir") or os.path.dirname(os.path.abspath(job_path))
    os.makedirs(out_dir, exist_ok=True)
    job["out_dir"] = out_dir
    meta = {
        "runner_version": RUNNER_VERSION,
        "python": platform.python_version(),
        "numpy": np.__version__,
        "platform": platform.platform(),
        "machine": platform.machine(),
        "threads": job.get("threads"),
        "threads_effective": job.get("threads") or 1,  # LiteRT / tflite_runtime Python default: 1
        "delegate": job.get("delegate", "xnnpack"),
        "pid": os.getpid(),
    }
    code = EXIT_OK
    arrays: dict[str, np.ndarray] = {}
    try:
        res = run_job(job)
        if job.get("op_profile") and (job.get("load") or {}).get("mode", "single") == "single":
            res.update(run_profile_child(job_path, job, out_dir))
        for key in ("samples_ns", "warmup_ns", "service_ns", "lag_ns", "backlog_ns"):
            if key in res:
                arrays[key] = np.asarray(res.pop(key), np.int64)
        for name, arr in (res.pop("outputs", None) or {}).items():
            arrays[f"out::{name}"] = arr
        meta.update(res)
        meta["status"] = "ok"
        meta["error"] = None
    except JobError as exc:
        code = EXIT_BAD_INPUT if exc.bad_input else EXIT_INFRA
        meta.update(status="failed", error=str(exc), error_kind="bad_input" if exc.bad_input else "infra")
    except MemoryError:
        code = EXIT_INFRA
        meta.update(status="failed", error="worker ran out of memory", error_kind="infra")
    except Exception as exc:  # noqa: BLE001 -- reported, never a bare traceback to the user
        code = EXIT_INFRA
        meta.update(status="failed", error=f"runner internal error: {type(exc).__name__}: {_one_line(exc)}",
                    error_kind="infra", traceback=traceback.format_exc())
    if arrays:
        tmp = os.path.join(out_dir, "result.tmp.npz")
        np.savez(tmp, **arrays)
        os.replace(tmp, os.path.join(out_dir, "result.npz"))
    tmp = os.path.join(out_dir, "result.json.tmp")
    with open(tmp, "w") as fh:
        json.dump(meta, fh, indent=1, default=_json_default)
    os.replace(tmp, os.path.join(out_dir, "result.json"))
    return code


def _json_default(o):
    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    raise TypeError(type(o).__name__)


# ---------------------------------------------------------------------------- where the time goes
# Delegation summary, the separate op-profiling pass and LiteRT's CompiledModel runtime (issue 15).
# The logic lives in runner_profile.py (standalone too, copied next to this file); these hooks only
# call it, so the timed loops above stay as they are.

PROFILE_FLAG = "--op-profile"


def _where() -> "object":
    """runner_profile.py from this file's own folder (host package or device run folder)."""
    mod = sys.modules.get("runner_profile")
    if mod is None:
        import importlib.util

        path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "runner_profile.py")
        if not os.path.isfile(path):
            raise JobError(f"{path} is missing: it ships with runner.py (copy both files)", bad_input=False)
        spec = importlib.util.spec_from_file_location("runner_profile", path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules["runner_profile"] = mod
        spec.loader.exec_module(mod)
    return mod


def make_compiled_model(runtime, job: dict):
    """``--runtime compiled``: a CompiledModel behind the Interpreter methods the loops use."""
    rp = _where()
    try:
        return rp.CompiledModelAdapter(job["model_path"], job.get("threads"), job.get("accelerator") or "cpu",
                                       job.get("gpu_precision"), runtime[0])
    except rp.Unavailable as exc:
        raise JobError(str(exc)) from None


def runtime_facts(job: dict, sess) -> dict:
    """What ran the model: runtime API, accelerator, and which nodes the delegate took."""
    rp = _where()
    if job.get("runtime_api") == "compiled":
        facts = sess.it.facts()
        facts["delegation"] = rp.compiled_delegation(job["model_path"], sess.it, load_runtime()[0])
        return facts
    delegate = job.get("delegate", "xnnpack")
    return {"runtime_api": "interpreter", "delegation": rp.delegation_summary(rp.graph_nodes(sess.it), delegate)}


def run_profile_child(job_path: str, job: dict, out_dir: str) -> dict:
    """The op profile comes from a separate process (``runner.py --op-profile job.json``) after the
    timed runs: the timed loop never runs with a profiler attached, and a crash in the profiler
    cannot lose the measured samples."""
    import subprocess

    deadline = float(job.get("max_time_s", 60.0)) + 120.0
    try:
        proc = subprocess.run([sys.executable, os.path.abspath(__file__), PROFILE_FLAG, job_path],  # noqa: S603
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              timeout=deadline, check=False)
    except subprocess.TimeoutExpired:
        return {"op_profile_error": f"the op-profiling pass did not finish within {deadline:g} s; it was stopped "
                                    "(the timed results are kept)"}
    path = os.path.join(out_dir, "profile.json")
    if os.path.isfile(path):
        with open(path) as fh:
            got = json.load(fh)
        if "op_profile_raw" in got or "op_profile_error" in got:
            return got
    tail = (proc.stderr.decode("utf-8", "replace").strip().splitlines() or [""])[-1][:300]
    how = f"signal {-proc.returncode}" if proc.returncode < 0 else f"status {proc.returncode}"
    return {"op_profile_error": f"the op-profiling pass exited with {how} and wrote no profile"
                                f"{': ' + tail if tail else ''} (the timed results are kept)"}


def profile_main(job_path: str) -> int:
    """Child entry: prepare the job's inputs as the timed run did, profile, write profile.json."""
    rp = _where()
    if os.environ.get(FAULT_ENV) == "profile-abort":   # test-only: a profiler crash must not lose the run
        os.abort()
    with open(job_path) as fh:
        job = json.load(fh)
    out_dir = job.get("out_dir") or os.path.dirname(os.path.abspath(job_path))

    def session():   # the job's inputs prepared exactly as the timed run prepared them
        data = load_npz(job["inputs_npz"]) if job.get("inputs_npz") else None
        return Session(load_runtime(), {**job, "runtime_api": "interpreter", "delegate": "xnnpack"}, data)

    try:
        result, code = rp.profile_job(job, session), EXIT_OK
    except rp.Unavailable as exc:
        result, code = {"op_profile_error": str(exc)}, rp.PROFILE_EXIT_UNAVAILABLE
    except (JobError, RuntimeError, OSError, ValueError) as exc:
        result = {"op_profile_error": f"op profiling failed: {_one_line(exc)} (the timed results are kept)"}
        code = EXIT_INFRA
    tmp = os.path.join(out_dir, "profile.json.tmp")
    with open(tmp, "w") as fh:
        json.dump(result, fh, default=_json_default)
    os.replace(tmp, os.path.join(out_dir, "profile.json"))
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv))
