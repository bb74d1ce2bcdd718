"""edgebench worker, part 1 of 4: the runtime, tensors, measurement helpers and the Session.

Standalone like ``runner.py`` (stdlib + numpy + a TFLite runtime; no edgebench import); pushed
next to it. ``runner.py`` holds the worker contract (job.json / result.json); see its docstring.
"""

from __future__ import annotations

import gc
import json
import os
import re
import sys
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
        import ai_edge_litert  # type: ignore
        from ai_edge_litert import interpreter as mod  # type: ignore
        name = "ai_edge_litert"
        # the package's own version string: importlib.metadata costs ~25 ms of every worker start
        version = getattr(ai_edge_litert, "__version__", None) or _dist_version("ai-edge-litert")
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
        raise JobError(custom_op_hint(model_path, exc) or f"cannot allocate {model_path}: {_one_line(exc)}") from None
    return it


def custom_op_hint(model_path: str, exc: BaseException) -> str | None:
    """'Encountered unresolved custom op: X' -> what that means and what the user can do."""
    m = re.search(r"unresolved custom op: ([\w.:/-]+?)\.?(?:\s|$)", str(exc))
    if not m:
        return None
    return (f"{model_path} uses the custom op {m.group(1)}, which LiteRT's built-in op set does not have (the "
            "converter let it through with allow_custom_ops; the app that ships the model registers its own "
            "kernel): edgebench runs built-in ops only -- re-convert without it (replace the op, or with "
            "SELECT_TF_OPS for a Flex-enabled runtime), or measure with --benchmark-binary built with that kernel")


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
            # the subgraph's input order is the model's positional order (the signature lists names
            # alphabetically): positional data (arr_0, arr_1 ...) is bound in it (pair_inputs)
            position = {i: k for k, i in enumerate(by_index_in)}
            return ([{**_detail(n, by_index_in[i]), "position": position[i]} for n, i in ins],
                    [_detail(n, by_index_out[i]) for n, i in outs])
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


# Arrays of an InputSet file that are not model inputs (edgebench.model.inputs: labels, the streams).
NOT_INPUTS = ("labels", "stream_id", "stream_labels")


def load_npz(path: str) -> dict[str, np.ndarray]:
    """Every model-input array of an .npz InputSet (one sample per leading row)."""
    if not os.path.isfile(path):
        raise JobError(f"input data not found: {path}; give an .npz InputSet")
    try:
        with np.load(path, allow_pickle=False) as z:
            return {k: z[k] for k in z.files if k not in NOT_INPUTS}
    except Exception as exc:  # noqa: BLE001 -- zip/pickle/format errors all mean bad file
        raise JobError(f"cannot read input data {path}: {_one_line(exc)}; give an .npz of arrays") from None


def _plain_name(name: str) -> str:
    """A tensor name without its output index (``x:0`` -> ``x``)."""
    head, sep, tail = name.rpartition(":")
    return head if sep and tail.isdigit() else name


def _bijection(data: list[str], names: list[str], fits) -> dict[str, str] | None:
    """model name -> data key when ``fits(key, name)`` pairs every key with exactly one name."""
    pairs = {}
    for n in names:
        hits = [k for k in data if fits(k, n)]
        if len(hits) != 1:
            return None
        pairs[n] = hits[0]
    return pairs if len(set(pairs.values())) == len(data) == len(names) else None


def pair_inputs(data: dict[str, np.ndarray], inputs: list[dict], path: str) -> tuple[dict[str, str], str]:
    """(model input name -> data key, how). Tried in order: exact names ("name"); a single input
    ("single input"); names as a converter without a signature writes them, ``serving_default_x:0``
    for data key ``x`` ("converter names"); one sample's shape when it tells every input apart
    ("shape": the same pairs for every file of one model, whatever order each lists its inputs in);
    ``arr_0``.. in the model's positional order -- the subgraph's inputs, ``position`` -- not the
    signature's alphabetical one ("order"). JobError when none pairs every input."""
    names = [d["name"] for d in inputs]
    keys = list(data)
    if set(keys) == set(names):
        return {n: n for n in names}, "name"
    if len(keys) == len(names) == 1:
        return {names[0]: keys[0]}, "single input"
    pairs = _bijection(keys, names, lambda k, n: _plain_name(n) == k or _plain_name(n).endswith("_" + k))
    if pairs is not None:
        return pairs, "converter names"
    shapes = {d["name"]: list(d["shape"][1:]) for d in inputs}
    pairs = _bijection(keys, names, lambda k, n: np.ndim(data[k]) >= 1 and list(np.shape(data[k])[1:]) == shapes[n])
    if pairs is not None:
        return pairs, "shape"
    if len(keys) == len(names) and {f"arr_{i}" for i in range(len(names))} == set(keys):
        ordered = [d["name"] for d in sorted(inputs, key=lambda d: d.get("position", names.index(d["name"])))]
        return {n: f"arr_{i}" for i, n in enumerate(ordered)}, "order"
    raise JobError(f"input data {path} has keys {sorted(keys)} but the model's inputs are {names}, and neither "
                   "their names nor one sample's shape pairs them; save the .npz with one array per model input name")


def map_inputs(data: dict[str, np.ndarray], inputs: list[dict], path: str) -> dict[str, np.ndarray]:
    """The arrays keyed by model input name, paired as ``pair_inputs`` does."""
    pairs, _ = pair_inputs(data, inputs, path)
    return {n: data[k] for n, k in pairs.items()}


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


class StateResets:
    """The job's state rule (``edgebench.model.state_rule.StateRule.to_job``): ``resets(i)`` is True where
    sample ``i`` starts from the model's initial state -- every sample (independent, also when the
    job has no rule), or each stream's first window (streams)."""

    def __init__(self, rule: dict | None):
        rule = rule or {}
        self.streams = rule.get("mode") == "streams"
        self.starts = frozenset(int(s) for s in rule.get("starts") or ()) | {0}

    def __call__(self, i: int) -> bool:
        return not self.streams or i in self.starts


def reset_state(it, state: dict | None) -> bool:
    """Put an interpreter back to the model's initial state in place: variable tensors (fused
    LSTM/RNN state) by ``reset_all_variables``, resource variables by running their init subgraphs
    again (what CALL_ONCE ran once, when the interpreter was new: it assigns every variable its
    initial value; measured exact and ~1 us against ~0.3 ms for a new interpreter). False when this
    runtime cannot run a subgraph by index or the variables have no init subgraph: the caller then
    builds a fresh interpreter."""
    if not state:
        return True
    if hasattr(it, "reset_all_variables"):
        it.reset_all_variables()
    elif state.get("variable_tensors"):
        return False
    if state.get("kind") != "resource_variables":
        return True
    inits = state.get("init_subgraphs") or []
    wrapper = getattr(it, "_interpreter", None)       # the Python interpreter's C++ wrapper
    if not inits or wrapper is None or not hasattr(wrapper, "Invoke"):
        return False
    try:
        for k in inits:
            wrapper.AllocateTensors(int(k))
            wrapper.Invoke(int(k))
    except (TypeError, RuntimeError, ValueError):   # a runtime whose Invoke takes no subgraph index
        return False
    return True


class Session:
    """One interpreter with its prepared inputs; the hot loop lives in ``timed``."""

    def __init__(self, runtime, job: dict, inputs_data: dict | None):
        self.job = job
        self.runtime = runtime
        self.input_mapping = None   # {how, pairs: data key -> model input} when not paired by name
        self.state = job.get("state")   # what carries over between invokes (the parent read the file)
        self.resets = StateResets(job.get("state_rule"))
        self.fresh_interpreters = 0
        if job.get("runtime_api") == "compiled":
            compiled_module()        # the import is not part of "load + allocate"
        t0 = time.perf_counter_ns()
        self.it = self._build()
        self.init_ns = time.perf_counter_ns() - t0
        self.inputs, self.outputs = io_details(self.it)
        if inputs_data is not False:
            self.prepare(inputs_data)

    def _build(self):
        job = self.job
        if job.get("runtime_api") == "compiled":
            return make_compiled_model(self.runtime, job)
        return make_interpreter(self.runtime, job["model_path"], job.get("threads"), job.get("delegate", "xnnpack"))

    @property
    def state_handling(self) -> str | None:
        """How sample outputs follow the state rule (None: the graph keeps no state)."""
        if not self.state:
            return None
        rule = "each stream's first window" if self.resets.streams else "each sample"
        if self.fresh_interpreters:
            how = "a fresh interpreter (variables survive a reset and the init subgraph cannot be re-run)"
        elif self.state.get("kind") == "resource_variables":
            how = "the init subgraph re-run (the variables' initial values; reset_all_variables keeps them)"
        else:
            how = "reset_all_variables"
        carried = "; state carried between a stream's windows" if self.resets.streams else ""
        return f"initial state before {rule}'s outputs: {how}{carried}; timed loop keeps state"

    def start_sample(self, i: int) -> None:
        """Before computing sample ``i``'s outputs: back to the model's initial state where the
        state rule says a sample (independent) or a stream (streams) starts."""
        if not self.state or not self.resets(i):
            return
        if reset_state(self.it, self.state):
            return
        it = self._build()          # resource variables without a re-runnable init subgraph
        by_name = {d["name"]: d for d in self.inputs}
        resized = False
        for det in io_details(it)[0]:
            want = by_name.get(det["name"])
            if want is not None and list(det["shape"]) != list(want["shape"]):
                it.resize_tensor_input(det["index"], list(want["shape"]))
                resized = True
        if resized:
            it.allocate_tensors()
        self.it = it
        self.fresh_interpreters += 1

    def prepare(self, inputs_data: dict | None) -> None:
        """Map, check and convert the input data (None: seeded synthetic inputs)."""
        job = self.job
        if inputs_data is None:
            data = synthetic_inputs(self.inputs, int(job.get("seed", 0)))
            source = "synthetic inputs"
        else:
            source = job.get("inputs_npz") or "input data"
            pairs, how = pair_inputs(inputs_data, self.inputs, source)
            data = {n: inputs_data[k] for n, k in pairs.items()}
            if how != "name":
                self.input_mapping = {"how": how, "pairs": {k: n for n, k in pairs.items()}}
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


# ---------------------------------------------------------------------------- where the time goes
# Delegation summary, the separate op-profiling pass and LiteRT's CompiledModel runtime (issue 15).
# The logic lives in runner_profile.py (standalone too, copied next to this file); these hooks only
# call it, so the timed loops above stay as they are.

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


def compiled_module():
    """Import LiteRT's CompiledModel module (once), outside any timed region."""
    rp = _where()
    try:
        return rp.compiled_module()
    except rp.Unavailable as exc:
        raise JobError(str(exc)) from None


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

def _json_default(o):
    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    raise TypeError(type(o).__name__)


# ---------------------------------------------------------------------------- the worker contract

def serve_job(argv: list[str], work, *, what: str, meta=None) -> int:
    """One worker process's life under the runner contract: read ``argv[1]`` (the job JSON), run
    ``work(job, job_path) -> (meta, arrays)``, write ``result.json`` (+ ``result.npz``) into the
    job's ``out_dir`` (default: the job file's folder) by write-then-rename, and return the exit
    code: 0 ok, 2 bad input (a JobError marked so, or an unreadable job), 3 anything else -- a
    message naming ``what`` failed, never a bare traceback. ``meta(job)`` gives facts recorded
    even when the work fails."""
    if len(argv) != 2:
        sys.stderr.write(f"usage: {what} job.json\n")
        return EXIT_BAD_INPUT
    try:
        with open(argv[1]) as fh:
            job = json.load(fh)
    except (OSError, ValueError) as exc:
        sys.stderr.write(f"cannot read job {argv[1]}: {exc}\n")
        return EXIT_BAD_INPUT
    out_dir = job.get("out_dir") or os.path.dirname(os.path.abspath(argv[1]))
    os.makedirs(out_dir, exist_ok=True)
    job["out_dir"] = out_dir
    result = dict(meta(job)) if meta is not None else {}
    code, arrays = EXIT_OK, {}
    try:
        got, arrays = work(job, argv[1])
        result.update(got)
        result.update(status="ok", error=None)
    except JobError as exc:
        code = EXIT_BAD_INPUT if exc.bad_input else EXIT_INFRA
        result.update(status="failed", error=str(exc), error_kind="bad_input" if exc.bad_input else "infra")
    except MemoryError:
        code = EXIT_INFRA
        result.update(status="failed", error=f"{what} ran out of memory", error_kind="infra")
    except Exception as exc:  # noqa: BLE001 -- reported, never a bare traceback to the user
        code = EXIT_INFRA
        result.update(status="failed", error=f"{what} internal error: {type(exc).__name__}: {_one_line(exc)}",
                      error_kind="infra", traceback=traceback.format_exc())
    if arrays:
        tmp = os.path.join(out_dir, "result.tmp.npz")
        np.savez(tmp, **arrays)
        os.replace(tmp, os.path.join(out_dir, "result.npz"))
    tmp = os.path.join(out_dir, "result.json.tmp")
    with open(tmp, "w") as fh:
        json.dump(result, fh, indent=1, default=_json_default)
    os.replace(tmp, os.path.join(out_dir, "result.json"))
    return code
