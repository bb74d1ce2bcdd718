#!/usr/bin/env python3
"""Where the time goes, on the machine that runs the model: the worker's delegation summary,
its separate op-profiling pass and LiteRT's CompiledModel API.

Standalone like ``runner.py`` (stdlib + numpy + a TFLite runtime; no edgebench import) and
copied next to it onto devices; ``runner.py`` imports it only when a job asks for one of these.

* ``graph_nodes(interpreter)`` / ``delegation_summary(nodes, delegate)``: the interpreter's own
  node list after delegation (``_get_ops_details()``: the original nodes, then one ``DELEGATE``
  node per delegate partition). A partition's members are found by walking back from its
  output tensors to its input tensors, so ``undelegated`` names exactly the nodes the CPU
  interpreter still runs.
* ``profile_ops(...)``: LiteRT's profiler through the C API of the ``libLiteRt.so`` that the
  ai-edge-litert wheel ships (ctypes; ``LiteRtCompiledModelGetProfiler``,
  ``LiteRtGetProfilerEvents``), on a CompiledModel created with ``enable_profiling`` runtime
  options and the job's thread count. Interpreter nodes give one ``OPERATOR_INVOKE_EVENT``
  each (node index in ``event_metadata1``); XNNPACK reports its inner operators as
  ``DELEGATE_PROFILED_OPERATOR_INVOKE_EVENT`` with a per-partition index that restarts at 0,
  so the k-th run of inner events is the k-th delegate partition. Event times are whole
  microseconds (the profiler's unit).
* ``CompiledModelAdapter``: the few Interpreter methods the runner's loops use
  (``set_tensor``/``invoke``/``get_tensor`` ...) over ``ai_edge_litert.compiled_model``, so the
  timed loop is the same code for both runtimes and ``invoke()`` is ``run_by_index``.

Result keys added to the worker's result.json: ``delegation`` (summary, with
``partition_members`` and ``undelegated_nodes``), ``runtime_api``, ``accelerator``,
``fully_accelerated``, ``gpu_precision``, ``gpu_adapter`` (e.g. "llvmpipe ... CPU / Software"),
``op_profile_raw`` (entries + totals) or ``op_profile_error`` (why there is none).
"""

from __future__ import annotations

import os
import re
import sys
import tempfile

import numpy as np

PROFILE_EXIT_UNAVAILABLE = 4      # the profiling child found no profiler (a reason, not a crash)
ACCELERATORS = ("cpu", "gpu", "npu")
DELEGATE_LABELS = {"xnnpack": "XNNPACK", "gpu": "GPU", "none": None}
# LiteRtProfilerEventType (litert/c/litert_profiler_event.h)
EV_DEFAULT, EV_OPERATOR, EV_DELEGATE_OP, EV_DELEGATE_PROFILED_OP = 1, 2, 4, 8
# LiteRtEnvOptionTag kLiteRtEnvOptionTagRuntimeLibraryDir; LiteRtAnyType kLiteRtAnyTypeString
_ENV_RUNTIME_LIBRARY_DIR, _ANY_STRING = 22, 8
_LOCK_WRITE = 1   # kLiteRtTensorBufferLockModeWrite


class Unavailable(Exception):
    """Nothing to measure here, with the reason (never a row of zeros)."""


# ============================================================================ delegation

def graph_nodes(it) -> list[dict] | None:
    """Subgraph 0's nodes after delegation: ``{index, op, inputs, outputs, name}`` (``name``:
    the first output tensor's name). None when the runtime has no node API."""
    try:
        ops = it._get_ops_details()   # noqa: SLF001 -- the only node API of every Python TFLite runtime
    except Exception:  # noqa: BLE001 -- very old tflite_runtime
        return None
    names: dict[int, str] = {}
    try:
        names = {int(d["index"]): str(d["name"]) for d in it.get_tensor_details()}
    except Exception:  # noqa: BLE001 -- names are a nicety
        pass
    out = []
    for o in ops:
        outs = [int(t) for t in o.get("outputs", [])]
        out.append({"index": int(o["index"]), "op": str(o["op_name"]), "inputs": [int(t) for t in o.get("inputs", [])],
                    "outputs": outs, "name": next((names[t] for t in outs if t in names), None)})
    return out


def delegation_summary(nodes: list[dict] | None, delegate: str | None) -> dict | None:
    """Which original nodes each DELEGATE node replaced (see the module docstring)."""
    if nodes is None:
        return None
    n_orig = len(nodes)
    while n_orig and nodes[n_orig - 1]["op"] == "DELEGATE":
        n_orig -= 1
    original, kernels = nodes[:n_orig], nodes[n_orig:]
    producer = {t: n["index"] for n in original for t in n["outputs"]}
    by_index = {n["index"]: n for n in original}
    members: list[list[int]] = []
    taken: set[int] = set()
    for k in kernels:
        stop = set(k["inputs"])
        seen: set[int] = set()
        todo = [t for t in k["outputs"] if t not in stop]
        while todo:
            t = todo.pop()
            p = producer.get(t)
            if p is None or p in seen:
                continue
            seen.add(p)
            todo.extend(x for x in by_index[p]["inputs"] if x >= 0 and x not in stop)
        members.append(sorted(seen))
        taken |= seen
    left = [n for n in original if n["index"] not in taken]
    undelegated: dict[str, int] = {}
    for n in left:
        undelegated[n["op"]] = undelegated.get(n["op"], 0) + 1
    label = DELEGATE_LABELS.get(delegate, delegate) if delegate else None
    if label is None and kernels:
        label = "delegate"
    return {"delegate": label, "nodes_total": len(original), "nodes_delegated": len(taken),
            "partitions": len(kernels), "undelegated": undelegated, "source": "interpreter execution plan",
            "delegate_nodes": [k["index"] for k in kernels], "partition_members": members,
            "partition_ops": [[by_index[m]["op"] for m in ms] for ms in members],
            "undelegated_nodes": [n["index"] for n in left]}


# ============================================================================ native log capture

class NativeLog:
    """Capture what the C++ runtime writes to fd 2 (LiteRT logs accelerator facts there), then
    echo it to the real stderr so nothing is hidden."""

    def __enter__(self) -> "NativeLog":
        self.text = ""
        sys.stderr.flush()
        self._saved = os.dup(2)
        self._tmp = tempfile.TemporaryFile()
        os.dup2(self._tmp.fileno(), 2)
        return self

    def __exit__(self, *exc) -> None:
        try:
            sys.stderr.flush()
        finally:
            os.dup2(self._saved, 2)
            os.close(self._saved)
        self._tmp.seek(0)
        self.text = self._tmp.read().decode("utf-8", "replace")
        self._tmp.close()
        if self.text:
            sys.stderr.write(self.text)
            sys.stderr.flush()


_ADAPTER = re.compile(r"Selected adapter: (.+)$", re.M)
_PLUGINS_APPLIED = re.compile(r"\b[1-9]\d* compiler plugins? (?:was|were) applied successfully")
_DISPATCH_LOADED = re.compile(r"Loading shared library: \S*LiteRtDispatch")
_PLUGIN_ERRS = re.compile(r"0 compiler plugins were applied successfully.*?Plugin errs: ([^\n]+)", re.S)


def accelerator_problem(accelerator: str, log: str) -> str | None:
    """Why the requested accelerator did not load (from LiteRT's own log), or None."""
    # "NPU accelerator registered" is logged on every machine (the accelerator object, not a vendor
    # library): the NPU is there only when a vendor's compiler plugin was applied to the model or,
    # for a file compiled ahead of time, a vendor's dispatch library was loaded.
    plugin = _PLUGIN_ERRS.search(log)
    if accelerator == "npu" and not plugin and not (_PLUGINS_APPLIED.search(log) or _DISPATCH_LOADED.search(log)):
        return ("accelerator 'npu' is not available on this machine: LiteRT found no NPU dispatch library "
                "(no vendor SDK for this SoC); available here: cpu, and gpu when a Vulkan/OpenCL driver is "
                "installed; run NPU models on a device with --targets adb:SERIAL")
    if accelerator == "npu" and plugin:
        # a model not compiled ahead of time: the vendor's compiler failed on this host, so LiteRT
        # would run every op on the CPU while calling it an NPU run
        return ("accelerator 'npu' is not available for this model on this machine: a vendor's NPU dispatch "
                f"library loaded, but its compiler plugin could not compile the model ({plugin.group(1).strip()[:200]}) "
                "and LiteRT would run it on the CPU instead; available here: cpu; compile it ahead of time for a SoC "
                "(`edgebench readiness`) and run that file on its phone")
    if accelerator == "gpu" and ("GPU accelerator could not be loaded" in log or "No adapters found" in log):
        return ("accelerator 'gpu' is not available on this machine: LiteRT's WebGPU accelerator found no "
                "GPU adapter (install a Vulkan driver; without a GPU, scripts/software_gpu sets up Mesa's "
                "software Vulkan for correctness checks); available here: cpu")
    return None


def dynamic_inputs(model_path: str, interpreter_cls) -> list[str]:
    """``name [-1, 8, 8, 1]`` for each input whose shape signature has an unknown (-1) dimension."""
    try:
        details = interpreter_cls(model_path=model_path).get_input_details()
    except Exception:  # noqa: BLE001 -- only a hint for the message
        return []
    out = []
    for d in details:
        sig = [int(x) for x in d.get("shape_signature", d["shape"])]
        if any(x < 0 for x in sig):
            out.append(f"{d['name']} {sig}")
    return out


def compile_failure(model_path: str, accelerator: str, failure: str, interpreter_cls) -> str:
    """Why a CompiledModel did not compile, with the fix. LiteRT 2.3 does not fall back to the CPU
    when an accelerator's delegate rejects a graph it had claimed ("Failed to modify graph with
    delegate", even with GPU|CPU): a dynamic batch (its SHAPE/PACK arithmetic before a RESHAPE, as in
    a converter's -1 batch) is the measured cause, so such a model gets the --static-batch advice."""
    head = f"CompiledModel cannot compile {model_path} for accelerator {accelerator!r}: {failure}"
    dyn = dynamic_inputs(model_path, interpreter_cls) if accelerator != "cpu" else []
    if dyn:
        return (f"{head}; the model has a dynamic batch (input {', '.join(dyn)}), whose shape ops LiteRT's "
                f"{accelerator.upper()} accelerator rejects without falling back to the CPU: re-convert it with a "
                "static batch (edgebench convert SRC --static-batch), or run it with --accelerator cpu")
    if accelerator != "cpu" and "modify graph with delegate" in failure:
        return (f"{head}; LiteRT's {accelerator.upper()} accelerator rejected the graph without falling back to "
                "the CPU: run it with --accelerator cpu, or find the op with `edgebench diagnose MODEL "
                f"--accelerator {accelerator}`")
    return head


def gpu_adapter(log: str) -> str | None:
    m = _ADAPTER.search(log)
    return m.group(1).strip() if m else None


# ============================================================================ CompiledModel runtime

class _SignatureView:
    def __init__(self, ins: dict, outs: dict) -> None:
        self._ins, self._outs = ins, outs

    def get_input_details(self) -> dict:
        return self._ins

    def get_output_details(self) -> dict:
        return self._outs


def compiled_module():
    """``ai_edge_litert.compiled_model`` (imported once; Session imports it before timing the
    load, so ``init_ms`` is load + allocate, not a Python import of several hundred ms)."""
    try:
        from ai_edge_litert import compiled_model as cm  # type: ignore
    except ImportError:
        raise Unavailable("--runtime compiled needs ai-edge-litert >= 2.0 (ai_edge_litert.compiled_model); "
                          "this runtime has only the Interpreter: use --runtime interpreter") from None
    return cm


class CompiledModelAdapter:
    """``ai_edge_litert.compiled_model.CompiledModel`` behind the Interpreter methods the runner
    uses. Tensor "indices" are positions in the first signature; quantization parameters come
    from a plain Interpreter over the same file (the CompiledModel API does not report them).
    ``invoke()`` is ``run_by_index(0, inputs, outputs)`` on buffers created once."""

    def __init__(self, model_path: str, threads: int | None, accelerator: str, gpu_precision: str | None,
                 interpreter_cls) -> None:
        cm = compiled_module()
        if accelerator not in ACCELERATORS:
            raise Unavailable(f"accelerator {accelerator!r} is unknown; use {', '.join(ACCELERATORS)}")
        hw = {"cpu": cm.HardwareAccelerator.CPU,
              "gpu": cm.HardwareAccelerator.GPU | cm.HardwareAccelerator.CPU,
              "npu": cm.HardwareAccelerator.NPU | cm.HardwareAccelerator.CPU}[accelerator]
        opts = cm.Options(hardware_accelerators=hw, cpu_options=cm.CpuOptions(num_threads=int(threads or 1)))
        if accelerator == "gpu":
            opts.gpu_options.enforce_f32 = gpu_precision != "fp16"
        self.accelerator = accelerator
        self.gpu_precision = gpu_precision if accelerator == "gpu" else None
        with NativeLog() as log:
            try:
                self.cm = cm.CompiledModel.from_file(model_path, options=opts)
                failure = None
            except RuntimeError as exc:
                failure = " ".join(str(exc).split())[:300]
        problem = accelerator_problem(accelerator, log.text)
        if problem:
            raise Unavailable(problem)
        if failure:
            raise Unavailable(compile_failure(model_path, accelerator, failure, interpreter_cls))
        self.gpu_adapter = gpu_adapter(log.text)
        self.fully_accelerated = bool(self.cm.is_fully_accelerated())
        self._meta = interpreter_cls(model_path=model_path)
        sigs = self.cm.get_signature_list()
        self.key = next(iter(sigs))
        ins = self.cm.get_input_tensor_details(self.key)
        outs = self.cm.get_output_tensor_details(self.key)
        self._in_names = list(sigs[self.key]["inputs"])
        self._out_names = list(sigs[self.key]["outputs"])
        q_in, q_out = self._quantization()
        self._in = [self._detail(n, i, ins[n], q_in.get(n)) for i, n in enumerate(self._in_names)]
        self._out = [self._detail(n, len(self._in) + i, outs[n], q_out.get(n)) for i, n in enumerate(self._out_names)]
        self._bufs_in = self.cm.create_input_buffers(0)
        self._bufs_out = self.cm.create_output_buffers(0)
        self._by_index = {d["index"]: (k, d) for k, d in enumerate(self._in)}
        self._out_by_index = {d["index"]: (k, d) for k, d in enumerate(self._out)}

    def _quantization(self):
        try:
            r = self._meta.get_signature_runner(self.key)
            return ({n: d for n, d in r.get_input_details().items()}, {n: d for n, d in r.get_output_details().items()})
        except Exception:  # noqa: BLE001 -- a model without signatures: positional
            ins = {n: d for n, d in zip(self._in_names, self._meta.get_input_details())}
            outs = {n: d for n, d in zip(self._out_names, self._meta.get_output_details())}
            return ins, outs

    @staticmethod
    def _detail(name: str, index: int, d: dict, q: dict | None) -> dict:
        shape = [int(x) for x in d["shape"]]
        out = {"name": name, "index": index, "shape": np.array(shape), "shape_signature": np.array(shape),
               "dtype": np.dtype(d["dtype"]).type, "quantization": (0.0, 0),
               "quantization_parameters": {"scales": np.zeros(0), "zero_points": np.zeros(0), "quantized_dimension": 0}}
        if q is not None:
            out["quantization"] = q.get("quantization", (0.0, 0))
            out["quantization_parameters"] = q.get("quantization_parameters", out["quantization_parameters"])
        return out

    # -- the Interpreter subset the runner uses
    def get_signature_list(self) -> dict:
        return {self.key: {"inputs": self._in_names, "outputs": self._out_names}}

    def get_signature_runner(self, key=None) -> _SignatureView:
        return _SignatureView({d["name"]: d for d in self._in}, {d["name"]: d for d in self._out})

    def get_input_details(self) -> list:
        return list(self._in)

    def get_output_details(self) -> list:
        return list(self._out)

    def allocate_tensors(self) -> None:
        pass

    def resize_tensor_input(self, index, shape, strict=False) -> None:
        raise ValueError("the CompiledModel runtime here runs the model's own input shapes; give data of "
                         f"shape {list(self._by_index[index][1]['shape'])} or use --runtime interpreter")

    def set_tensor(self, index: int, value: np.ndarray) -> None:
        k, _ = self._by_index[index]
        self._bufs_in[k].write(np.ascontiguousarray(value))

    def invoke(self) -> None:
        self.cm.run_by_index(0, self._bufs_in, self._bufs_out)

    def get_tensor(self, index: int) -> np.ndarray:
        k, d = self._out_by_index[index]
        n = int(np.prod(d["shape"], dtype=np.int64))
        return self._bufs_out[k].read(n, d["dtype"]).reshape([int(x) for x in d["shape"]])

    def facts(self) -> dict:
        return {"runtime_api": "compiled", "accelerator": self.accelerator, "fully_accelerated": self.fully_accelerated,
                "gpu_precision": self.gpu_precision, "gpu_adapter": self.gpu_adapter}


def compiled_delegation(model_path: str, adapter: "CompiledModelAdapter", interpreter_cls) -> dict | None:
    """CPU accelerator = XNNPACK: the same partitioning as the Interpreter's XNNPACK delegate, read
    from an interpreter's execution plan. GPU/NPU: LiteRT reports only is_fully_accelerated()."""
    try:
        it = interpreter_cls(model_path=model_path)
        it.allocate_tensors()
        nodes = graph_nodes(it)
    except Exception:  # noqa: BLE001 -- a summary, never a reason to fail the run
        return None
    if nodes is None:
        return None
    if adapter.accelerator == "cpu":
        d = delegation_summary(nodes, "xnnpack")
        if d is not None:
            d["source"] = "interpreter execution plan (XNNPACK, as the CompiledModel CPU accelerator)"
        return d
    total = len([n for n in nodes if n["op"] != "DELEGATE"])
    label = "GPU (WebGPU)" if adapter.accelerator == "gpu" else "NPU"
    return {"delegate": label, "nodes_total": total, "nodes_delegated": total if adapter.fully_accelerated else None,
            "partitions": None, "undelegated": {}, "source": "CompiledModel.is_fully_accelerated()"}


# ============================================================================ profiler (C API)

def profile_job(job: dict, session) -> dict:
    """The op-profiling pass of one job: ``session()`` prepares the job's inputs (as the timed run
    did) on an XNNPACK interpreter, whose execution plan names the nodes and partitions."""
    if job.get("runtime_api") == "compiled" and (job.get("accelerator") or "cpu") != "cpu":
        raise Unavailable(f"op profiling runs on the CPU accelerator only: LiteRT's {job.get('accelerator')} "
                          "accelerator does not implement profiling (WebGPU: 'Profile is not implemented')")
    if job.get("delegate", "xnnpack") != "xnnpack" and job.get("runtime_api") != "compiled":
        raise Unavailable(f"op profiling needs the XNNPACK delegate: LiteRT 2.3's profiler runs through the "
                          f"CompiledModel CPU accelerator, which cannot run with delegate {job.get('delegate')!r}; "
                          "profile with --delegate xnnpack")
    st = job.get("state") or {}
    if st.get("variable_tensors"):
        raise Unavailable(f"op profiling runs through LiteRT's CompiledModel, which does not load a model with variable "
                          f"tensors (LiteRtCreateModelFromFile: status 5): this file keeps {st['variable_tensors']} "
                          f"variable tensors ({', '.join(st.get('ops') or []) or 'fused LSTM/RNN'} state), so it has no "
                          "op profile; "
                          "the timed results are kept")
    sess = session()
    nodes = graph_nodes(sess.it)
    delegation = delegation_summary(nodes, "xnnpack")
    feeds = [(d["name"], sess.samples[d["index"]]) for d in sess.inputs]
    runs = int(job.get("op_profile_runs") or job.get("runs") or job["min_runs"])   # runner.py fills min_runs
    raw = profile_ops(job["model_path"], job.get("threads"), feeds, runs, int(job.get("warmup_runs", 10)),
                      float(job.get("max_time_s", 60.0)))
    out = aggregate(raw, nodes, delegation)
    out["delegation"] = delegation
    return {"op_profile_raw": out}



def _litert_lib():
    import ctypes

    try:
        import ai_edge_litert  # type: ignore
    except ImportError:
        raise Unavailable("op profiling needs ai-edge-litert (its libLiteRt.so carries LiteRT's profiler); "
                          "this runtime has none") from None
    pkg = os.path.dirname(os.path.abspath(ai_edge_litert.__file__))
    path = os.path.join(pkg, "libLiteRt.so")
    if not os.path.isfile(path):
        raise Unavailable(f"op profiling needs {path} (LiteRT's C library), which this ai-edge-litert "
                          "install does not ship")
    lib = ctypes.CDLL(path)
    for sym in ("LiteRtCompiledModelGetProfiler", "LiteRtGetProfilerEvents", "LiteRtCreateOpaqueOptions"):
        if not hasattr(lib, sym):
            raise Unavailable(f"{path} has no {sym}; op profiling needs ai-edge-litert >= 2.0")
    return lib, pkg


def profile_ops(model_path: str, threads: int | None, inputs: list[tuple[str, list[np.ndarray]]],
                runs: int, warmup: int, max_time_s: float, summary: bool = False) -> dict:
    """Run the model ``runs`` times under LiteRT's profiler (CPU accelerator = XNNPACK, the same
    kernels the Interpreter's default delegate uses) and return the raw events in buffer order.

    ``inputs``: ``(signature input name, samples)`` in signature order; sample i % N feeds run i.
    ``summary``: also LiteRT's own text summary (``LiteRtGetProfileSummary``: TFLite's profile
    summarizer, the tables benchmark_model prints)."""
    import ctypes as C
    import time

    lib, pkg = _litert_lib()
    P = C.c_void_p

    class Any(C.Structure):
        _fields_ = [("type", C.c_int), ("value", C.c_void_p)]

    class EnvOption(C.Structure):
        _fields_ = [("tag", C.c_int), ("value", Any)]

    class Event(C.Structure):   # ProfiledEventData (litert/c/litert_profiler_event.h)
        _fields_ = [("tag", C.c_char_p), ("event_type", C.c_int), ("start_us", C.c_uint64),
                    ("elapsed_us", C.c_uint64), ("begin_mem", C.c_size_t * 3), ("end_mem", C.c_size_t * 3),
                    ("metadata1", C.c_uint64), ("metadata2", C.c_uint64), ("source", C.c_int)]

    def ok(status: int, what: str) -> None:
        if status != 0:
            raise RuntimeError(f"LiteRT C API {what} returned status {status}")

    keep = []   # ctypes objects LiteRT keeps pointers to
    runtime_dir = C.c_char_p(pkg.encode())
    env_opts = (EnvOption * 1)(EnvOption(_ENV_RUNTIME_LIBRARY_DIR, Any(_ANY_STRING, C.cast(runtime_dir, P))))
    keep += [runtime_dir, env_opts]
    env, model, options, compiled = P(), P(), P(), P()
    buffers: list = []
    try:
        ok(lib.LiteRtCreateEnvironment(1, env_opts, C.byref(env)), "LiteRtCreateEnvironment")
        ok(lib.LiteRtCreateModelFromFile(env, model_path.encode(), C.byref(model)), "LiteRtCreateModelFromFile")
        ok(lib.LiteRtCreateOptions(C.byref(options)), "LiteRtCreateOptions")
        ok(lib.LiteRtSetOptionsHardwareAccelerators(options, 1), "LiteRtSetOptionsHardwareAccelerators")
        Dtor = C.CFUNCTYPE(None, P)
        noop = Dtor(lambda _p: None)   # payloads below are owned (and kept alive) by this function
        keep.append(noop)
        for ident, toml in ((b"runtime_options_string", b"enable_profiling = true\n"),
                            (b"xnnpack", f"num_threads = {int(threads or 1)}\n".encode())):
            payload = C.create_string_buffer(toml)
            opaque = P()
            ok(lib.LiteRtCreateOpaqueOptions(ident, C.cast(payload, P), noop, C.byref(opaque)),
               "LiteRtCreateOpaqueOptions")
            ok(lib.LiteRtAddOpaqueOptions(options, opaque), "LiteRtAddOpaqueOptions")
            keep.append(payload)
        ok(lib.LiteRtCreateCompiledModel(env, model, options, C.byref(compiled)), "LiteRtCreateCompiledModel")
        sig = P()
        ok(lib.LiteRtGetModelSignature(model, C.c_size_t(0), C.byref(sig)), "LiteRtGetModelSignature")
        n_in, n_out = C.c_size_t(), C.c_size_t()
        ok(lib.LiteRtGetNumSignatureInputs(sig, C.byref(n_in)), "LiteRtGetNumSignatureInputs")
        ok(lib.LiteRtGetNumSignatureOutputs(sig, C.byref(n_out)), "LiteRtGetNumSignatureOutputs")

        def buffer(kind: str, i: int):
            tensor = P()
            ok(getattr(lib, f"LiteRtGetSignature{kind}TensorByIndex")(sig, C.c_size_t(i), C.byref(tensor)),
               f"LiteRtGetSignature{kind}TensorByIndex")
            ttype = C.create_string_buffer(256)   # LiteRtRankedTensorType, passed through opaquely
            ok(lib.LiteRtGetRankedTensorType(tensor, ttype), "LiteRtGetRankedTensorType")
            words = np.frombuffer(ttype.raw[:40], np.int32).copy()
            rank = int(words[1]) & 0x7F     # layout.rank bit-field; a dynamic batch (-1) runs as 1
            words[2:2 + rank][words[2:2 + rank] < 0] = 1
            C.memmove(ttype, words.tobytes(), words.nbytes)
            req = P()
            ok(getattr(lib, f"LiteRtGetCompiledModel{kind}BufferRequirements")(
                compiled, C.c_size_t(0), C.c_size_t(i), C.byref(req)), "buffer requirements")
            buf = P()
            ok(lib.LiteRtCreateManagedTensorBufferFromRequirements(env, ttype, req, C.byref(buf)),
               "LiteRtCreateManagedTensorBufferFromRequirements")
            buffers.append(buf)
            size = C.c_size_t()
            ok(lib.LiteRtGetTensorBufferPackedSize(buf, C.byref(size)), "LiteRtGetTensorBufferPackedSize")
            return buf, size.value

        ins = [buffer("Input", i) for i in range(n_in.value)]
        outs = [buffer("Output", i) for i in range(n_out.value)]
        if len(ins) != len(inputs):
            raise Unavailable(f"the profiler sees {len(ins)} inputs but the model's signature has {len(inputs)}; "
                              "the profile cannot be fed the InputSet")
        n_samples = len(inputs[0][1]) if inputs else 1

        def feed(i: int) -> None:
            for (buf, size), (_name, samples) in zip(ins, inputs):
                arr = np.ascontiguousarray(samples[i % n_samples])
                if arr.nbytes != size:
                    raise Unavailable(f"input sample of {arr.nbytes} bytes does not fit the profiler's "
                                      f"{size}-byte buffer")
                addr = P()
                ok(lib.LiteRtLockTensorBuffer(buf, C.byref(addr), _LOCK_WRITE), "LiteRtLockTensorBuffer")
                C.memmove(addr, arr.ctypes.data, size)
                lib.LiteRtUnlockTensorBuffer(buf)

        in_arr = (P * len(ins))(*[b for b, _ in ins])
        out_arr = (P * len(outs))(*[b for b, _ in outs])

        def run(i: int) -> None:
            if n_samples > 1 or i == 0:
                feed(i)
            ok(lib.LiteRtRunCompiledModel(compiled, C.c_size_t(0), C.c_size_t(len(ins)), in_arr,
                                          C.c_size_t(len(outs)), out_arr), "LiteRtRunCompiledModel")

        for i in range(max(1, warmup)):
            run(i)
        prof = P()
        ok(lib.LiteRtCompiledModelGetProfiler(compiled, C.byref(prof)), "LiteRtCompiledModelGetProfiler")
        if not prof.value:
            raise Unavailable("LiteRT returned no profiler for this model (profiling was not enabled)")
        ok(lib.LiteRtResetProfiler(prof), "LiteRtResetProfiler")
        ok(lib.LiteRtStartProfiler(prof), "LiteRtStartProfiler")
        start = time.perf_counter()
        done = 0
        while done < runs and (time.perf_counter() - start) < max_time_s:
            run(done)
            done += 1
        ok(lib.LiteRtStopProfiler(prof), "LiteRtStopProfiler")
        n = C.c_int()
        ok(lib.LiteRtGetNumProfilerEvents(prof, C.byref(n)), "LiteRtGetNumProfilerEvents")
        events = (Event * max(n.value, 1))()
        if n.value:
            ok(lib.LiteRtGetProfilerEvents(prof, n, events), "LiteRtGetProfilerEvents")
        raw = [((e.tag or b"").decode("utf-8", "replace"), int(e.event_type), int(e.elapsed_us),
                int(e.metadata1), int(e.metadata2)) for e in events[:n.value]]
        out = {"runs": done, "events": raw}
        if summary:
            text = C.c_void_p()
            lib.LiteRtGetProfileSummary.argtypes = [P, P, C.POINTER(C.c_void_p)]
            if lib.LiteRtGetProfileSummary(prof, compiled, C.byref(text)) == 0 and text.value:
                out["summary"] = C.string_at(text.value).decode("utf-8", "replace")
                C.CDLL(None).free(text)     # the caller frees it (litert_profiler.h)
        return out
    finally:
        for b in buffers:
            lib.LiteRtDestroyTensorBuffer(b)
        if compiled.value:
            lib.LiteRtDestroyCompiledModel(compiled)
        if options.value:
            lib.LiteRtDestroyOptions(options)
        if model.value:
            lib.LiteRtDestroyModel(model)
        if env.value:
            lib.LiteRtDestroyEnvironment(env)


def aggregate(raw: dict, nodes: list[dict] | None, delegation: dict | None) -> dict:
    """Raw profiler events -> entries with mean and median microseconds per run (and each run's
    microseconds, ``us_per_run``, also of a partition's inner ops), and totals.

    Events come in buffer order; each run starts with the runtime's "Invoke" event. One entry per
    node the CPU interpreter ran, and ONE entry per delegate partition (the k-th group of inner
    events in a run is the k-th partition; its inner ops are listed in order). When the groups do
    not match the partitions, all delegated work becomes a single entry and ``note`` says so."""
    per_run: list[dict] = []
    for tag, etype, us, m1, m2 in raw["events"]:
        if etype == EV_DEFAULT and tag == "Invoke":
            per_run.append({"invoke": us, "nodes": {}, "groups": [], "last": None})
            continue
        if not per_run:
            continue
        run = per_run[-1]
        if etype == EV_OPERATOR:
            key = (m2, m1)
            prev = run["nodes"].get(key, (tag, 0))
            run["nodes"][key] = (tag, prev[1] + us)
            run["last"] = None
        elif etype in (EV_DELEGATE_OP, EV_DELEGATE_PROFILED_OP):
            if run["last"] is None or m1 <= run["last"]:
                run["groups"].append([])
            run["groups"][-1].append((tag, us))
            run["last"] = m1
    runs = len(per_run)
    if runs == 0:
        raise Unavailable("the profiling pass recorded no run (no 'Invoke' event)")
    if not any(r["nodes"] or r["groups"] for r in per_run):
        raise Unavailable("LiteRT's profiler recorded no operator events for this model")
    names = {n["index"]: n for n in (nodes or [])}
    part_nodes = list((delegation or {}).get("delegate_nodes") or [])
    members = list((delegation or {}).get("partition_members") or [])
    entries: list[dict] = []
    keys = sorted({k for r in per_run for k in r["nodes"]})
    for sub, idx in keys:
        tag = next(r["nodes"][(sub, idx)][0] for r in per_run if (sub, idx) in r["nodes"])
        node = names.get(idx) if sub == 0 else None
        e = {"node": idx, "op": tag, "name": node["name"] if node else None, "delegated": False,
             "us_per_run": [r["nodes"].get((sub, idx), ("", 0))[1] for r in per_run]}
        if sub:
            e["subgraph"] = sub
        entries.append(e)
    note = None
    matched = bool(part_nodes) and all(len(r["groups"]) == len(part_nodes) for r in per_run)
    if matched:
        for k, node_index in enumerate(part_nodes):
            inner_names = [t for t, _ in per_run[0]["groups"][k]]
            inner_us = [0] * len(inner_names)
            inner_runs: list[list[int]] = [[] for _ in inner_names]     # per run: the parent's medians
            for r in per_run:
                got = r["groups"][k][:len(inner_us)]
                for j, (_t, us) in enumerate(got):
                    inner_us[j] += us
                for j in range(len(inner_us)):
                    inner_runs[j].append(got[j][1] if j < len(got) else 0)
            ops = [names[m]["op"] for m in members[k] if m in names] if k < len(members) else []
            entries.append({"node": node_index, "op": "DELEGATE", "name": _partition_name(delegation, ops),
                            "delegated": True, "members": members[k] if k < len(members) else [],
                            "member_names": [names[m]["name"] for m in (members[k] if k < len(members) else [])
                                             if m in names],
                            "member_ops": ops,
                            "us_per_run": [sum(us for _, us in r["groups"][k]) for r in per_run],
                            "inner": [{"op": t, "us": us, "us_per_run": runs_}
                                      for t, us, runs_ in zip(inner_names, inner_us, inner_runs)]})
    elif any(r["groups"] for r in per_run):
        counts = sorted({len(r["groups"]) for r in per_run})
        note = (f"the delegate's inner events ({'/'.join(map(str, counts))} groups per run) could not be matched "
                f"to its {len(part_nodes)} partition(s); all delegated work is one entry")
        entries.append({"node": None, "op": "DELEGATE", "name": "all delegate partitions", "delegated": True,
                        "members": sorted(m for ms in members for m in ms),
                        "us_per_run": [sum(us for g in r["groups"] for _, us in g) for r in per_run]})
    for e in entries:       # us_per_run stays: the parent takes per-op-type medians and their intervals
        e.update(_stats(e["us_per_run"]))
    return {"runs": runs, "entries": entries, "invoke": _stats([r["invoke"] for r in per_run]), "note": note}


def _stats(us: list) -> dict:
    """Per-inference microseconds -> mean and median (the profiler's unit is 1 us)."""
    a = np.asarray(us, np.float64)
    return {"mean_us": float(a.mean()), "p50_us": float(np.median(a))}


def _partition_name(delegation: dict | None, ops: list[str]) -> str:
    label = (delegation or {}).get("delegate") or "delegate"
    counts: dict[str, int] = {}
    for op in ops:
        counts[op] = counts.get(op, 0) + 1
    inside = ", ".join(f"{op} x{n}" if n > 1 else op for op, n in counts.items())
    return f"{label} partition: {inside}" if inside else f"{label} partition"


# ============================================================================ GPU readiness

def gpu_check(model_path: str) -> dict:
    """Does LiteRT's GPU accelerator take the whole model? Compile it for the GPU alone (no CPU
    fallback): success means every op runs on the GPU; failure, that some op does not (then
    GPU+CPU says whether the model still runs, partly on the CPU)."""
    from ai_edge_litert import compiled_model as cm  # type: ignore

    def compile_for(hw) -> tuple[bool, str, str]:
        with NativeLog() as log:
            try:
                model = cm.CompiledModel.from_file(model_path, options=cm.Options(hardware_accelerators=hw))
                ok, err = True, ""
                del model
            except RuntimeError as exc:
                ok, err = False, " ".join(str(exc).split())[:300]
        return ok, err, log.text

    gpu_only, err, log = compile_for(cm.HardwareAccelerator.GPU)
    problem = accelerator_problem("gpu", log)
    if problem:
        return {"checked": False, "reason": problem}
    out = {"checked": True, "method": "LiteRT WebGPU accelerator: compile for GPU only",
           "adapter": gpu_adapter(log), "fully_on_gpu": gpu_only}
    if not gpu_only:
        with_cpu, err2, _ = compile_for(cm.HardwareAccelerator.GPU | cm.HardwareAccelerator.CPU)
        out.update(error=err, runs_with_cpu_fallback=with_cpu, **({"fallback_error": err2} if not with_cpu else {}))
    return out


if __name__ == "__main__":
    import json

    if len(sys.argv) == 3 and sys.argv[1] == "--gpu-check":
        print(json.dumps(gpu_check(sys.argv[2])))
        sys.exit(0)
    sys.stderr.write("usage: runner_profile.py --gpu-check MODEL.tflite\n")
    sys.exit(2)
