#!/usr/bin/env python3
"""A stand-in for Google's TFLite ``benchmark_model`` on the simulated adb device.

It runs the model with LiteRT (``ai_edge_litert``) and prints what a recent
benchmark_model prints -- the same lines, in the same order, to stderr with ``INFO:``
prefixes (checked against the captured logs in tests/fixtures/benchmark_model/) -- so that
edgebench's benchmark_model path (argv, the per-inference sample loop, value files, the
output file, the parser) runs end to end without a phone.

Honoured flags: --graph --num_threads --num_runs --warmup_runs --min_secs --max_secs
--warmup_min_secs --run_delay --use_xnnpack --use_gpu --gpu_precision_loss_allowed
--use_nnapi --input_layer --input_layer_shape --input_layer_value_files --output_filepath
--enable_op_profiling --report_peak_memory_footprint --model_runtime_info_output_file, and
benchmark_litert_model's --use_cpu
--use_npu --gpu-precision --require_full_delegation (an NPU fails as LiteRT fails without one).

What it cannot be: a phone. ``--use_gpu``/``--use_nnapi`` fail the way benchmark_model
fails when a delegate cannot be applied (there is no GPU/NNAPI here). When edgebench's
``runner_profile`` is importable (the simulated device runs on this host), it prints TFLite's
"Replacing N out of M node(s) with delegate ..." line from the interpreter's real execution plan
and, with ``--enable_op_profiling``, LiteRT's own profile summary (LiteRT's profiler through
its C API: the tables benchmark_model prints, measured, never invented); without it, no line
and no table. Timings are those of the host CPU. The script needs only the standard library,
numpy and ai_edge_litert.
"""

from __future__ import annotations

import math
import os
import resource
import sys
import threading
import time

USAGE_FLAGS = {
    "graph": "", "num_threads": "-1", "num_runs": "50", "warmup_runs": "1", "min_secs": "1",
    "max_secs": "150", "warmup_min_secs": "0.5", "run_delay": "-1", "use_xnnpack": "true",
    "use_gpu": "false", "gpu_precision_loss_allowed": "true", "use_nnapi": "false",
    "input_layer": "", "input_layer_shape": "", "input_layer_value_files": "", "output_filepath": "",
    "enable_op_profiling": "false", "report_peak_memory_footprint": "false",
    "verbose": "false", "model_runtime_info_output_file": "",
    # LiteRT's CompiledModel tool (benchmark_litert_model)
    "use_cpu": "true", "use_npu": "false", "gpu-precision": "auto", "require_full_delegation": "false",
}
# How benchmark_model echoes a parameter (LOG_BENCHMARK_PARAM names), in its order.
ECHO = (
    ("num_runs", "Min num runs"), ("min_secs", "Min runs duration (seconds)"),
    ("max_secs", "Max runs duration (seconds)"), ("run_delay", "Inter-run delay (seconds)"),
    ("num_threads", "Num threads"), ("warmup_runs", "Min warmup runs"),
    ("warmup_min_secs", "Min warmup runs duration (seconds)"), ("graph", "Graph"),
    ("input_layer", "Input layers"), ("input_layer_shape", "Input shapes"),
    ("input_layer_value_files", "Input value files"), ("output_filepath", "File path to export outputs layer as binary data"),
    ("enable_op_profiling", "Enable op profiling"),
    ("report_peak_memory_footprint", "Report the peak memory footprint"),
    ("use_xnnpack", "Use xnnpack"), ("use_gpu", "Use gpu"),
    ("gpu_precision_loss_allowed", "Allow lower precision in gpu"), ("use_nnapi", "Use NNAPI"),
)
BOOL_FLAGS = {"use_xnnpack", "use_gpu", "gpu_precision_loss_allowed", "use_nnapi",
              "enable_op_profiling", "report_peak_memory_footprint", "verbose", "use_cpu", "use_npu",
              "require_full_delegation"}


def log(msg: str = "", level: str = "INFO") -> None:
    sys.stderr.write(f"{level}: {msg}\n")
    sys.stderr.flush()


def fail(msg: str) -> int:
    log(msg, "ERROR")
    log("Benchmarking failed.", "ERROR")
    return 1


def g(x: float) -> str:
    """C++ ostream's default formatting of a double (6 significant digits)."""
    if isinstance(x, float) and math.isnan(x):
        return "nan"
    return f"{x:g}"


class Stat:
    """tensorflow::Stat<int64_t>: the numbers behind a ``count=...`` line (microseconds)."""

    def __init__(self) -> None:
        self.values: list[int] = []

    def add(self, v: int) -> None:
        self.values.append(int(v))

    @property
    def avg(self) -> float:
        return (sum(self.values) / len(self.values)) if self.values else float("nan")

    @property
    def first(self) -> int:
        return self.values[0] if self.values else 0

    def __str__(self) -> str:
        v = self.values
        n = len(v)
        if n == 0:
            return "count=0"
        if n == 1:
            return f"count=1 curr={v[0]}"
        avg = sum(v) / n
        var = sum(x * x for x in v) / n - avg * avg
        std = int(math.sqrt(max(var, 0.0)))
        s = sorted(v)

        def pct(p: int) -> int:   # nearest rank
            return s[min(n - 1, max(0, math.ceil(p / 100 * n) - 1))]

        return (f"count={n} first={v[0]} curr={v[-1]} min={s[0]} max={s[-1]} avg={g(avg)} std={std} "
                f"p5={pct(5)} median={pct(50)} p95={pct(95)}")


def parse_flags(argv: list[str]) -> tuple[dict[str, str], list[str], list[str]]:
    flags = dict(USAGE_FLAGS)
    given: list[str] = []
    unknown: list[str] = []
    for a in argv:
        if a.startswith("--") and "=" in a:
            k, v = a[2:].split("=", 1)
        elif a.startswith("--"):
            k, v = a[2:], "true"
        else:
            unknown.append(a)
            continue
        if k in flags and k not in DROPPED_FLAGS:
            flags[k] = v
            if k not in given:
                given.append(k)
        else:
            unknown.append(a)
    return flags, given, unknown


def as_bool(v: str) -> bool:
    return v.strip().lower() in ("1", "true", "yes")


def split_value_files(spec: str) -> list[tuple[str, str]]:
    """benchmark_model's "name:path,name:path" where '::' is a literal ':' in the name."""
    out = []
    for item in [x for x in spec.split(",") if x]:
        i = 0
        name = []
        while i < len(item):
            if item[i] == ":" and item[i:i + 2] == "::":
                name.append(":")
                i += 2
            elif item[i] == ":":
                break
            else:
                name.append(item[i])
                i += 1
        if i >= len(item):
            raise ValueError(f"Wrong input value file item specified: {item}")
        out.append(("".join(name), item[i + 1:]))
    return out


def max_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


class PeakMemory(threading.Thread):
    """Periodic RSS sampling (benchmark_model's --report_peak_memory_footprint)."""

    def __init__(self, period_s: float = 0.05) -> None:
        super().__init__(daemon=True)
        self.period = period_s
        self.peak_kb = 0
        self.stop = threading.Event()

    def sample(self) -> None:
        try:
            with open("/proc/self/statm") as fh:
                rss_pages = int(fh.read().split()[1])
            self.peak_kb = max(self.peak_kb, rss_pages * os.sysconf("SC_PAGE_SIZE") // 1024)
        except (OSError, ValueError, IndexError):
            pass

    def run(self) -> None:
        while not self.stop.wait(self.period):
            self.sample()


def run_phase(interp, min_runs: int, min_secs: float, max_secs: float, run_delay: float) -> tuple[Stat, bool]:
    """benchmark_model's BenchmarkModel::Run loop: at least min_runs and min_secs, at most max_secs."""
    stat = Stat()
    now = time.perf_counter()
    min_finish = now + min_secs
    max_finish = now + max_secs
    run = 0
    while (run < min_runs or now < min_finish) and now <= max_finish:
        t0 = time.perf_counter_ns()
        try:
            interp.invoke()
        except Exception as exc:   # noqa: BLE001 -- report like the tool does
            log(f"Failed to invoke interpreter: {exc}", "ERROR")
            return stat, False
        t1 = time.perf_counter_ns()
        stat.add((t1 - t0) // 1000)
        if run_delay > 0:
            time.sleep(run_delay)
        now = time.perf_counter()
        run += 1
    return stat, True


def main(argv: list[str]) -> int:
    start_rss = max_rss_mb()
    flags, given, unknown = parse_flags(argv)
    log("STARTING!")
    if unknown:
        log(f"Unconsumed cmdline flags: {' '.join(unknown)}", "WARN")
    verbose = as_bool(flags["verbose"])
    log(f"Log parameter values verbosely: [{int(verbose)}]")
    for key, label in ECHO:
        if verbose or key in given:
            v = flags[key]
            log(f"{label}: [{int(as_bool(v)) if key in BOOL_FLAGS else v}]")
    graph = flags["graph"]
    if not graph:
        return fail("Please specify the name of your TF Lite input file with --graph")
    threads = int(flags["num_threads"])
    if "num_threads" in given:
        log(f"#threads used for CPU inference: [{threads}]")

    peak = None
    if as_bool(flags["report_peak_memory_footprint"]):
        peak = PeakMemory()
        peak.sample()
        peak.start()

    import numpy as np  # noqa: PLC0415 -- after the flag echo, like the tool's own ordering

    try:
        from ai_edge_litert.interpreter import Interpreter, OpResolverType  # noqa: PLC0415
    except ImportError as exc:
        return fail(f"ai_edge_litert is not importable by {sys.executable}: {exc}")

    if not os.path.isfile(graph):
        return fail(f"Could not open '{graph}'.")
    t_init0 = time.perf_counter()
    with open(graph, "rb") as fh:
        content = fh.read()
    log(f"Loaded model {graph}")

    if as_bool(flags["use_gpu"]):
        log("GPU acceleration is unsupported on this platform.", "WARN")
        return fail("Failed to apply GPU delegate.")
    if as_bool(flags["use_nnapi"]):
        log("NNAPI acceleration is unsupported on this platform.", "WARN")
        return fail("Failed to apply NNAPI delegate.")
    if as_bool(flags["use_npu"]):   # benchmark_litert_model: LiteRT's own message, then the tool's
        log("[npu_registry.cc:34] NPU accelerator could not be loaded and registered: "
            "kLiteRtStatusErrorNotFound.", "WARNING")
        return fail("Failed to compile model.")

    resolver = (OpResolverType.AUTO if as_bool(flags["use_xnnpack"])
                else OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    try:
        interp = Interpreter(model_content=content, num_threads=threads if threads > 0 else None,
                             experimental_op_resolver_type=resolver)
    except (ValueError, RuntimeError) as exc:
        return fail(f"Failed to construct interpreter: {exc}")
    log(f"The input model file size (MB): {g(len(content) / 1e6)}")

    inputs = interp.get_input_details()
    by_name = {d["name"]: d for d in inputs}
    layers = [x for x in flags["input_layer"].split(",") if x]
    shapes = [x for x in flags["input_layer_shape"].split(":") if x] if flags["input_layer_shape"] else []
    if shapes and len(shapes) != len(layers):
        return fail("There must be as many input layer shapes as input layer names.")
    for name in layers:
        if name not in by_name:
            return fail(f"Cannot find input layer {name} in the model; its inputs are "
                        f"{','.join(by_name)}")
    for name, shape in zip(layers, shapes):
        try:
            dims = [int(x) for x in shape.split(",")]
        except ValueError:
            return fail(f"Invalid input layer shape {shape} for {name}")
        interp.resize_tensor_input(by_name[name]["index"], dims, strict=False)
    try:
        interp.allocate_tensors()
    except RuntimeError as exc:
        return fail(f"Failed to allocate tensors: {exc}")
    inputs = interp.get_input_details()
    rp = _edgebench_module("runner_profile", RUNNER_PROFILE)
    if rp is not None and as_bool(flags["use_xnnpack"]):
        d = rp.delegation_summary(rp.graph_nodes(interp), "xnnpack")
        if d and d["partitions"]:
            log(f"Replacing {d['nodes_delegated']} out of {d['nodes_total']} node(s) with delegate "
                f"(TfLiteXNNPackDelegate) node, yielding {d['partitions']} partitions for the whole graph.")
    if flags["model_runtime_info_output_file"]:
        write_runtime_info(flags["model_runtime_info_output_file"], rp, interp, as_bool(flags["use_xnnpack"]), graph)

    try:
        files = dict(split_value_files(flags["input_layer_value_files"]))
    except ValueError as exc:
        return fail(str(exc))
    rng = np.random.default_rng(0)
    for d in inputs:
        dt = np.dtype(d["dtype"])
        shape = tuple(int(x) for x in d["shape"])
        if d["name"] in files:
            path = files[d["name"]]
            try:
                raw = open(path, "rb").read()
            except OSError:
                return fail(f"Failed to read the input_layer_value_file: {path}")
            need = int(np.prod(shape, dtype=np.int64)) * dt.itemsize
            if len(raw) != need:
                return fail(f"The number of bytes in {path} ({len(raw)}) doesn't match the size of "
                            f"input tensor {d['name']} ({need}).")
            value = np.frombuffer(raw, dtype=dt.newbyteorder("<")).astype(dt).reshape(shape)
        elif dt.kind == "f":
            value = rng.uniform(-1.0, 1.0, size=shape).astype(dt)
        elif dt.kind in "iu":
            info = np.iinfo(dt)
            value = rng.integers(max(info.min, -128), min(info.max, 127), size=shape, endpoint=True).astype(dt)
        elif dt.kind == "b":
            value = rng.integers(0, 1, size=shape, endpoint=True).astype(dt)
        else:
            return fail(f"Input tensor {d['name']} has type {dt}, which the stand-in cannot fill")
        interp.set_tensor(d["index"], value)
    init_ms = (time.perf_counter() - t_init0) * 1000.0
    init_rss = max_rss_mb()
    log(f"Initialized session in {g(init_ms)}ms.")
    profiling = as_bool(flags["enable_op_profiling"])
    if profiling and (rp is None or not as_bool(flags["use_xnnpack"])):
        log("Op profiling is unavailable in the edgebench benchmark_model stand-in here: it needs "
            "edgebench's runner_profile and XNNPACK; no operator-wise table is printed.", "WARN")
        profiling = False

    max_secs = float(flags["max_secs"])
    run_delay = float(flags["run_delay"])
    warm_runs, warm_secs = int(flags["warmup_runs"]), float(flags["warmup_min_secs"])
    log(f"Running benchmark for at least {warm_runs} iterations and at least {g(warm_secs)} seconds "
        f"but terminate if exceeding {g(max_secs)} seconds.")
    warm, ok = run_phase(interp, warm_runs, warm_secs, max_secs, run_delay)
    log(str(warm))
    log("")
    if not ok:
        return fail("Benchmarking failed during warmup.")
    num_runs, min_secs = int(flags["num_runs"]), float(flags["min_secs"])
    log(f"Running benchmark for at least {num_runs} iterations and at least {g(min_secs)} seconds "
        f"but terminate if exceeding {g(max_secs)} seconds.")
    timed, ok = run_phase(interp, num_runs, min_secs, max_secs, run_delay)
    log(str(timed))
    log("")
    if not ok:
        return fail("Benchmarking failed during the timed runs.")

    if profiling:
        feeds = [(d["name"], [interp.get_tensor(d["index"]).copy()]) for d in inputs]
        try:
            raw = rp.profile_ops(graph, threads if threads > 0 else None, feeds, max(1, len(timed.values)), 1, max_secs,
                                 summary=True)
        except (rp.Unavailable, RuntimeError) as exc:
            log(f"Op profiling failed: {exc}", "WARN")
        else:
            sys.stderr.write("Operator-wise Profiling Info for Regular Benchmark Runs:\n" + raw.get("summary", "")
                             + "\n")
    log(f"Inference timings in us: Init: {int(init_ms * 1000)}, First inference: {warm.first}, "
        f"Warmup (avg): {g(warm.avg)}, Inference (avg): {g(timed.avg)}")
    log("Note: as the benchmark tool itself affects memory footprint, the following is only APPROXIMATE "
        "to the actual memory footprint of the model at runtime. Take the information at your discretion.")
    log(f"Memory footprint delta from the start of the tool (MB): init={g(init_rss - start_rss)} "
        f"overall={g(max_rss_mb() - start_rss)}")
    if peak is not None:
        peak.sample()
        peak.stop.set()
        log(f"Overall peak memory footprint (MB) via periodic monitoring: {g(peak.peak_kb / 1024.0)}")

    out_path = flags["output_filepath"]
    if out_path:
        try:
            with open(out_path, "wb") as fh:
                for d in interp.get_output_details():
                    arr = np.ascontiguousarray(interp.get_tensor(d["index"]))
                    fh.write(arr.astype(arr.dtype.newbyteorder("<")).tobytes())
        except OSError as exc:
            return fail(f"Failed to write the outputs to {out_path}: {exc}")
    return 0


def write_runtime_info(path: str, rp, interp, use_xnnpack: bool, graph: str) -> None:
    """``--model_runtime_info_output_file``: the ModelRuntimeDetails protobuf a recent
    benchmark_model writes after applying delegates, built from the interpreter's real node list
    (edgebench's runner_profile) with the schema of edgebench's reader. One difference from the
    tool: a builtin node's ``type`` holds its op name, not the op's enum number (the stand-in has no
    enum table; the reader uses ``name``). Without runner_profile or protobuf: a warning, no file."""
    ri = _edgebench_module("runtime_info", RUNTIME_INFO_MODULE)
    nodes = rp.graph_nodes(interp) if rp is not None else None
    if ri is None or nodes is None:
        log("Model runtime info is unavailable in the edgebench benchmark_model stand-in here: it needs "
            "edgebench's runner_profile; no file is written.", "WARN")
        return
    d = rp.delegation_summary(nodes, "xnnpack" if use_xnnpack else None)
    kernel_of = {m: k for k, members in zip(d["delegate_nodes"], d["partition_members"]) for m in members}
    C = ri.message_classes()
    msg = C["ModelRuntimeDetails"](model_name=graph)
    sg = msg.subgraphs.add(subgraph_id=0, subgraph_type=1)   # TFLITE_SUBGRAPH
    for n in nodes:
        node = sg.nodes.add(id=n["index"], inputs=n["inputs"], outputs=n["outputs"])
        if n["index"] in d["delegate_nodes"]:
            node.name = node.type = "TfLiteXNNPackDelegate"
            node.delegate_node_details.delegate_name = "TfLiteXNNPackDelegate"
            node.delegate_node_details.tflite_node_ids_replaced.extend(
                d["partition_members"][d["delegate_nodes"].index(n["index"])])
        else:
            node.name = node.type = n["op"]
            if n["index"] in kernel_of:
                node.delegated_to_node_id = kernel_of[n["index"]]
    sg.execution_plan.extend(sorted(d["undelegated_nodes"] + d["delegate_nodes"]))
    with open(path, "wb") as fh:
        fh.write(msg.SerializeToString())


# Where edgebench's standalone modules are: ``install`` writes their paths into the installed copy
# (the simulated device runs on this host); empty means "in the edgebench package this module is in".
RUNNER_PROFILE = ""
RUNTIME_INFO_MODULE = ""
# Flags this build does not know (``install(..., without_flags=...)``: an older benchmark_model):
# logged as unconsumed and ignored, as the tool does.
DROPPED_FLAGS: tuple[str, ...] = ()
_PACKAGE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_DEFAULT_PATHS = {"runner_profile": os.path.join(_PACKAGE, "targets", "runner_profile.py"),
                  "runtime_info": os.path.join(_PACKAGE, "targets", "benchmark_model", "runtime_info.py")}


def _edgebench_module(name: str, path: str):
    """One of edgebench's standalone modules, when this host has it (the simulated device does)."""
    import importlib.util  # noqa: PLC0415

    path = path or _DEFAULT_PATHS[name]
    if not os.path.isfile(path):
        return None
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(mod)
    except ImportError:   # e.g. no protobuf in this Python
        return None
    return mod


def install(dest: str, python: str | None = None, without_flags: tuple[str, ...] = ()) -> str:
    """Copy this script to ``dest`` with a #! line naming ``python`` (default: this interpreter);
    ``without_flags`` makes it a build that does not know those flags."""
    with open(os.path.abspath(__file__), encoding="utf-8") as fh:
        body = fh.read().split("\n", 1)[1]
    body = body.replace('\nRUNNER_PROFILE = ""\n', f"\nRUNNER_PROFILE = {_DEFAULT_PATHS['runner_profile']!r}\n", 1)
    body = body.replace('\nRUNTIME_INFO_MODULE = ""\n', f"\nRUNTIME_INFO_MODULE = {_DEFAULT_PATHS['runtime_info']!r}\n", 1)
    body = body.replace("\nDROPPED_FLAGS: tuple[str, ...] = ()\n", f"\nDROPPED_FLAGS: tuple[str, ...] = {tuple(without_flags)!r}\n", 1)
    with open(dest, "w", encoding="utf-8") as fh:
        fh.write(f"#!{python or sys.executable}\n{body}")
    os.chmod(dest, 0o755)
    return dest


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
