"""Where the time goes: delegation coverage and per-op profiles, host and device.

The worker (``targets/runner_profile.py``) reports raw facts; this module turns them into the
typed row parts (``rows.Delegation``, ``rows.OpEntry``) and the views the reports print:

* ``delegation_from_worker`` / ``delegation_from_runtime_info`` / ``delegation_from_log``: the
  ``delegation`` object of a row, from the interpreter's execution plan (host, device runner),
  benchmark_model's model runtime info file (every node, where the binary writes it) or its log
  ("Replacing N out of M node(s) with delegate (...) node, yielding K partitions").
* ``delegation_warning``: a one-line warning naming the ops the delegate left out and the fix.
* ``op_profile_from_worker`` / ``op_profile_from_log``: ``op_profile`` entries (mean ms per
  inference, share of the profile) and ``op_profile_info`` (source, runs, totals, ``coverage``:
  what share of the profiler's own Invoke the listed ops explain, and ``profiler_overhead``).
* ``by_op_type``, ``speedup_by_op_type`` (from per-op-type medians over the profiled runs, with an
  interval; ``op_type_medians``), ``quantize_cost``: the report's tables. Delegated work
  is split into op types by the delegate's own inner operators (XNNPACK: "Convolution (NHWC,
  QC8) IGEMM" -> Convolution), interpreter nodes by their TFLite op (CONV_2D -> Convolution),
  so FP32 and INT8 rows compare op type by op type.
* ``model_explorer_node_data``: Model Explorer's node-data JSON (per-op latency as a colour).
"""

from __future__ import annotations

import os
import re
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from edgebench.rows import Delegation, InferenceRow, OpEntry
from edgebench.model.tflite_model import inspect

# benchmark_model's delegate kernel names (lower case, no spaces) -> the delegate they belong to.
KERNEL_TO_DELEGATE = {
    "tflitexnnpackdelegate": "XNNPACK",
    "tflitegpudelegatev2": "GPU",
    "tflitegpudelegate": "GPU",
    "tflitennapidelegate": "NNAPI",
    "tflitehexagondelegate": "Hexagon",
    "tflitecoremldelegate": "CoreML",
}

# TFLite builtin op -> the op family XNNPACK names its operators by (the report's "op type").
OP_FAMILY = {
    "CONV_2D": "Convolution", "DEPTHWISE_CONV_2D": "Convolution", "TRANSPOSE_CONV": "Deconvolution",
    "FULLY_CONNECTED": "Fully Connected", "BATCH_MATMUL": "Batch Matrix Multiply", "PRELU": "PReLU",
    "QUANTIZE": "Convert", "DEQUANTIZE": "Convert", "MEAN": "Mean", "SUM": "Sum", "ADD": "Add", "SUB": "Subtract",
    "MUL": "Multiply", "DIV": "Divide", "SOFTMAX": "Softmax", "RESHAPE": "Reshape", "SQUEEZE": "Reshape",
    "MAX_POOL_2D": "Max Pooling", "AVERAGE_POOL_2D": "Average Pooling", "CONCATENATION": "Concatenation",
    "LEAKY_RELU": "Leaky ReLU", "HARD_SWISH": "HardSwish", "LOGISTIC": "Sigmoid", "TANH": "Tanh",
    "TRANSPOSE": "Transpose", "PAD": "Constant Pad", "RELU": "Clamp", "RELU6": "Clamp", "RELU_N1_TO_1": "Clamp",
    "ELU": "ELU", "GELU": "GELU", "RESIZE_BILINEAR": "Resize Bilinear", "SLICE": "Slice",
    "STRIDED_SLICE": "Slice", "SPLIT": "Split", "MAXIMUM": "Maximum", "MINIMUM": "Minimum",
}
# XNNPACK operator names that mean the same as another name above.
_XNN_ALIASES = {"Static Reshape": "Reshape", "Copy": "Reshape", "Static Constant Pad": "Constant Pad",
                "Global Average Pooling": "Mean", "Depthwise Convolution": "Convolution"}
QUANTIZE_OPS = ("QUANTIZE", "DEQUANTIZE")
_NAMED_NODE = re.compile(r"^\[(.*)\]:(\d+)$")      # benchmark_model's "[tensor name]:node"

# Why a delegate leaves an op on the CPU interpreter, and what usually fixes it.
_FIX = {
    ("XNNPACK", "PRELU"): "XNNPACK has no int8 PRELU kernel: replace PReLU by ReLU/LeakyReLU before "
                          "quantizing, or keep those layers float",
    ("XNNPACK", "SOFTMAX"): "XNNPACK runs SOFTMAX in float only: an int8 softmax stays on the interpreter's "
                            "int8 kernel (at the model's end that is one extra hand-over); keep its tensor float "
                            "(--keep-float) or apply the softmax in the app on the dequantized logits",
}
# SHAPE (with STRIDED_SLICE/PACK feeding a RESHAPE) is shape arithmetic on a dynamic dimension at run
# time -- typically a Keras Flatten/Reshape under a dynamic batch; a static shape folds it away.
_SHAPE_FIX = ("SHAPE and the ops after it compute a tensor shape at run time from a dynamic dimension (typically "
              "the batch of a Flatten/Reshape): convert with a static batch (--static-batch; convert-and-compare "
              "does unless --dynamic-batch; other dynamic dims: --input-shape) and the converter folds them into "
              "constants, so the delegate can take the graph in one partition")
_GENERIC_FIX = ("each op the delegate rejects runs on the CPU interpreter and every partition boundary is a "
                "hand-over: replace those ops with ones the delegate supports, or keep them float")


# ------------------------------------------------------------------------------------ delegation

def delegation_from_worker(d: Mapping[str, Any] | None) -> Delegation | None:
    return Delegation.from_dict(d) if isinstance(d, Mapping) else None


def delegation_from_log(log: Any) -> Delegation | None:
    """From a parsed benchmark_model log: the last "Replacing N out of M node(s)" line (and its
    partition count) and the op-profile's interpreter nodes, which are the undelegated ones."""
    if getattr(log, "delegated_nodes", None) is None:
        return None
    replaced, total = log.delegated_nodes
    undelegated: dict[str, int] = {}
    delegates = {d.lower() for d in (log.delegates or ())}
    for row in getattr(log, "op_profile", ()):
        if row.section == "regular" and row.table == "Run Order" and not _is_delegate_kernel(row.node_type, delegates):
            undelegated[row.node_type] = undelegated.get(row.node_type, 0) + 1
    applied = [d for d in log.delegates if d not in log.delegate_fallback]
    return Delegation(delegate=applied[-1] if applied else None, nodes_total=total, nodes_delegated=replaced,
                      partitions=getattr(log, "delegate_partitions", None), undelegated=undelegated,
                      source="benchmark_model log")


def delegation_from_runtime_info(info: Mapping[str, Any]) -> Delegation:
    """From benchmark_model's model runtime info (``benchmark_model.runtime_info.read_runtime_info``):
    every node of the main graph, so the ops left on the CPU interpreter are named by the tool."""
    kernels = list(info.get("kernels") or ())
    names = [str(k.get("delegate_name") or "") for k in kernels]
    label = None
    if names:
        top = max(set(names), key=names.count)
        label = KERNEL_TO_DELEGATE.get(top.lower().replace(" ", ""), top or "delegate")
    return Delegation(delegate=label, nodes_total=info.get("nodes_total"), nodes_delegated=info.get("nodes_delegated"),
                      partitions=len(kernels), undelegated=dict(info.get("undelegated") or {}),
                      source="benchmark_model --model_runtime_info_output_file",
                      details={"partition_sizes": [len(k.get("replaced") or ()) for k in kernels],
                               "subgraphs": info.get("subgraphs")})


def _is_delegate_kernel(node_type: str, delegates: set[str]) -> bool:
    t = node_type.lower()
    return t.startswith(("tflite", "delegate/")) or "delegate" in t or t in delegates


def undelegated_tail(d: Delegation | None) -> bool:
    """Every node the delegate left out runs after the model's last delegated compute op (only
    QUANTIZE/DEQUANTIZE partitions follow): e.g. an int8 model's final SOFTMAX. Such a tail splits
    nothing -- the outputs come back to the CPU anyway -- so it is shown in the delegation column,
    not warned about. False when the execution plan's node order is unknown."""
    det = d.details if d is not None else {}
    left, members, ops = det.get("undelegated_nodes"), det.get("partition_members"), det.get("partition_ops")
    if not left or members is None or ops is None or len(members) != len(ops):
        return False
    first = min(left)
    return all(all(op in QUANTIZE_OPS for op in part_ops) for mem, part_ops in zip(members, ops)
               if any(m > first for m in mem))


def delegation_warning(d: Delegation | None, where: str | None = None) -> str | None:
    """'int8 on host: XNNPACK took 6/8 nodes in 3 partitions; left on the CPU: PRELU x2 -- fix'
    (without ``where`` for a row's own warnings: every renderer already names the row)."""
    if d is None or d.nodes_delegated is None or d.nodes_total is None or d.complete or not d.delegate:
        return None
    if undelegated_tail(d):
        return None
    left = ", ".join(f"{op} x{n}" if n > 1 else op for op, n in sorted(d.undelegated.items(), key=lambda kv: -kv[1]))
    fixes = [_FIX[(str(d.delegate).upper(), op)] for op in d.undelegated if (str(d.delegate).upper(), op) in _FIX]
    if "SHAPE" in d.undelegated:
        fixes.append(_SHAPE_FIX)
    parts = f" in {d.partitions} partitions" if d.partitions is not None else ""
    return (f"{where + ': ' if where else ''}{d.delegate} took {d.nodes_delegated}/{d.nodes_total} nodes{parts}; left on the CPU "
            f"interpreter: {left or 'unknown ops'}; " + ("; ".join(fixes) if fixes else _GENERIC_FIX))


# ------------------------------------------------------------------------------------ op profiles

def op_profile_from_worker(raw: Mapping[str, Any], latency: Any = None,
                           source: str = "LiteRT profiler (CompiledModel CPU accelerator, XNNPACK)"
                           ) -> tuple[tuple[OpEntry, ...], dict[str, Any]]:
    """Entries (mean ms per inference, share of the profile's sum) and ``op_profile_info``."""
    runs = int(raw.get("runs") or 0)
    entries = []
    sum_mean = sum(float(e["mean_us"]) for e in raw.get("entries", ())) / 1e3
    sum_p50 = sum(float(e["p50_us"]) for e in raw.get("entries", ())) / 1e3
    for e in raw.get("entries", ()):
        ms = float(e["mean_us"]) / 1e3
        details: dict[str, Any] = {"p50_ms": float(e["p50_us"]) / 1e3}
        if e.get("members") is not None:
            details["members"] = list(e["members"])
        if e.get("member_names"):
            details["member_names"] = list(e["member_names"])
        if e.get("member_ops"):
            details["member_ops"] = list(e["member_ops"])
        if e.get("inner"):
            details["inner"] = [{"op": i["op"], "ms": i["us"] / runs / 1e3 if runs else None} for i in e["inner"]]
        if e.get("subgraph"):
            details["subgraph"] = e["subgraph"]
        entries.append(OpEntry(node=e.get("node"), op=str(e["op"]), name=e.get("name"), ms=ms,
                               share=ms / sum_mean if sum_mean > 0 else None, delegated=bool(e.get("delegated")),
                               details=details))
    entries.sort(key=lambda x: (x.node is None, x.node if x.node is not None else 0))
    invoke = raw.get("invoke") or {}
    info: dict[str, Any] = {
        "source": source, "runs": runs, "unit": "mean ms per inference (p50_ms: per-inference median)",
        "sum_ms": sum_mean, "sum_p50_ms": sum_p50,
        "invoke_ms": (invoke.get("mean_us") or 0) / 1e3 if invoke else None,
        "invoke_p50_ms": (invoke.get("p50_us") or 0) / 1e3 if invoke else None,
        "partitions_as_one_entry": True,
        "resolution": "1 us per event (LiteRT profiler); ops shorter than that count as 0",
    }
    if raw.get("note"):
        info["note"] = raw["note"]
    info.update(coverage(sum_mean, sum_p50, latency, info["invoke_ms"], info["invoke_p50_ms"]))
    types = op_type_medians(raw)
    if types:
        info["op_types"] = types
    return tuple(entries), info


def op_type_medians(raw: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Per op type (the model's op types, as ``by_op_type`` keys them when a partition's inner operators
    match its nodes in order; the delegate's names otherwise): the median over the profiled runs
    of each run's total ms in that op type, and its 95 % order-statistic interval at the effective
    sample size (``measure.order_stat_ci``, ``autocorrelation_time`` of the runs above the median),
    widened by half the profiler's 1 us unit either way:
    ``{family: {"p50_ms", "ci_ms": [lo, hi], "runs"}}``. Empty when the worker kept no per-run times."""
    from edgebench.core.latency import autocorrelation_time, order_stat_ci

    per: dict[str, np.ndarray] = {}

    def add(family: str, us: Any) -> None:
        a = np.asarray(us, dtype=np.float64)
        per[family] = per[family] + a if family in per and per[family].size == a.size else a

    for e in raw.get("entries", ()):
        inner = e.get("inner") if e.get("delegated") else None
        if inner and all("us_per_run" in i for i in inner):
            ops = list(e.get("member_ops") or ())
            groups = _align([op_family(o) for o in ops], [op_family(str(i["op"])) for i in inner]) if ops else None
            if groups is not None:    # as by_op_type: the inner operators matched to the nodes, in order
                for op, g in zip(ops, groups):
                    if g:
                        add(op_type(op), np.sum([np.asarray(inner[k]["us_per_run"], dtype=np.float64) for k in g],
                                                axis=0))
            else:                     # by the delegate's own operator names (as by_op_type's fallback)
                for i in inner:
                    add(op_type(str(i["op"])), i["us_per_run"])
        elif e.get("us_per_run") is not None and not inner:
            add("DELEGATE" if e.get("delegated") and e.get("op") == "DELEGATE" else op_type(str(e["op"])),
                e["us_per_run"])
    out = {}
    for family, us in per.items():
        if us.size < 2:
            continue
        ms = np.sort(us / 1e3)
        med = float(np.median(ms))
        tau = autocorrelation_time(us > np.median(us)) if np.ptp(us) > 0 else 1.0
        lo, hi = order_stat_ci(ms, 50.0, n_eff=ms.size / tau)
        # the profiler counts whole microseconds: the median is known to its unit at best, never to a
        # zero-width interval (RESOLUTION_MS)
        if lo is not None and hi is not None:
            lo, hi = max(lo - RESOLUTION_MS / 2, 0.0), hi + RESOLUTION_MS / 2
        out[family] = {"p50_ms": med, "ci_ms": [lo, hi], "runs": int(ms.size)}
    return out


def coverage(sum_mean: float, sum_p50: float, latency: Any, invoke_ms: float | None = None,
             invoke_p50_ms: float | None = None) -> dict[str, Any]:
    """How much of the profiled run the listed ops explain, and what profiling cost.

    ``coverage`` (sum of per-op means / the profiler's own Invoke mean) and ``coverage_p50`` (the
    same with medians) compare parts with the whole of the SAME profiled runs; the rest is the
    runtime's work between ops and events under the profiler's 1 us resolution. ``profiler_overhead``
    is the profiled Invoke median over the timed run's p50 (a separate process: > 1 means the
    profiler slowed each inference). The profile is never compared with the timed run as a check."""
    out: dict[str, Any] = {}
    if invoke_ms:
        out["coverage"] = sum_mean / invoke_ms
    if invoke_p50_ms:
        out["coverage_p50"] = sum_p50 / invoke_p50_ms
    p50 = getattr(latency, "p50", None)
    if invoke_p50_ms and p50:
        out["profiler_overhead"] = invoke_p50_ms / p50
    return out


def op_profile_from_log(log: Any) -> tuple[tuple[OpEntry, ...], dict[str, Any]] | None:
    """benchmark_model's "Operator-wise Profiling Info for Regular Benchmark Runs" (Run Order)."""
    rows = [r for r in getattr(log, "op_profile", ()) if r.section == "regular" and r.table == "Run Order"]
    if not rows:
        return None
    delegates = {d.lower() for d in (log.delegates or ())}
    total = sum(r.avg_ms or 0.0 for r in rows)
    entries = []
    for r in rows:
        name, node = r.name, None
        m = _NAMED_NODE.match(r.name or "")
        if m:
            name, node = m.group(1), int(m.group(2))
        delegated = _is_delegate_kernel(r.node_type, delegates) or name == "Delegate"
        entries.append(OpEntry(node=None if name == "Delegate" else node, op=r.node_type, name=name, ms=r.avg_ms,
                               share=(r.avg_ms / total) if (total > 0 and r.avg_ms is not None) else None,
                               delegated=delegated,
                               details={k: v for k, v in (("times_called", r.times_called), ("first_ms", r.first_ms),
                                                          ("tool_index", node)) if v is not None}))
    timings = getattr(log, "op_profile_timings", {}).get("regular")
    info = {"source": "benchmark_model --enable_op_profiling", "runs": rows[0].times_called,
            "unit": "mean ms per inference (benchmark_model avg)", "sum_ms": total,
            "invoke_ms": (timings.avg_us / 1e3) if timings is not None and timings.avg_us else None,
            "partitions_as_one_entry": False,
            "note": "entries are benchmark_model's Run Order rows: a delegate's inner operators are its "
                    "'Delegate/<op>' rows, one per inner op, not one entry per partition"}
    info.update(coverage(total, 0.0, None, info["invoke_ms"]))
    return tuple(entries), info


# ------------------------------------------------------------------------------------ views

def op_family(op: str) -> str:
    """CONV_2D / 'Convolution (NHWC, QC8) IGEMM' / 'Delegate/Convolution ...' -> 'Convolution'."""
    name = op.split("/", 1)[1] if op.startswith("Delegate/") else op
    if name in OP_FAMILY:
        return OP_FAMILY[name]
    base = name.split(" (", 1)[0].strip()
    return _XNN_ALIASES.get(base, base)


# The model's op types where the families above merge two (XNNPACK names both "Convolution").
_OP_TYPE = {"DEPTHWISE_CONV_2D": "Depthwise Convolution"}
# A delegate's GEMM no node was matched to: XNNPACK runs FULLY_CONNECTED and 1x1 CONV_2D alike.
GEMM_TYPE = "GEMM (FC or 1x1 conv)"


def op_type(op: str) -> str:
    """The op type a node's time is shown under: a TFLite op's family (CONV_2D -> Convolution,
    DEPTHWISE_CONV_2D -> Depthwise Convolution). A delegate's own operator name that no node of the
    model was matched to keeps its family ("... DWConv" is a Depthwise Convolution), except that
    XNNPACK's "Fully Connected" GEMM may be a 1x1 convolution: ``GEMM_TYPE``, never the model's
    FULLY_CONNECTED."""
    if op in _OP_TYPE:
        return _OP_TYPE[op]
    family = op_family(op)
    if op in OP_FAMILY or re.fullmatch(r"[A-Z0-9_]+(:.*)?", op):
        return family
    if family == "Convolution" and "DWConv" in op:
        return _OP_TYPE["DEPTHWISE_CONV_2D"]
    return GEMM_TYPE if family == "Fully Connected" else family


def by_op_type(entries: Iterable[OpEntry], flops: Mapping[int, int] | None = None) -> dict[str, dict[str, Any]]:
    """Mean ms per inference by the model's op type (``op_type``), and its ``share`` of the profiled
    op time (the sum of the entries -- not of the timed latency).

    Interpreter nodes count under their op. A delegate partition's time is split over its member
    nodes (``partition_split``: the delegate's inner operators matched to the nodes in order, else
    each op family's share by FLOPs) and counted under each node's op: XNNPACK runs a MobileNet's
    1x1 convolutions as "Fully Connected" GEMMs, and that time is the CONV_2D nodes'. Inner operators
    no member list comes with (rows recorded before members were) go by the delegate's names
    (``op_type``); a partition without inner events counts as 'DELEGATE'. ``split`` lists how
    delegated time was attributed."""
    out: dict[str, dict[str, Any]] = {}

    def add(family: str, ms: float | None, where: str, how: str | None = None) -> None:
        if ms is None:
            return
        slot = out.setdefault(family, {"ms": 0.0, "cpu_ms": 0.0, "delegated_ms": 0.0, "count": 0, "split": []})
        slot["ms"] += ms
        slot[where] += ms
        slot["count"] += 1
        if how and how not in slot["split"]:
            slot["split"].append(how)

    for e in entries:
        inner = e.details.get("inner") if e.delegated else None
        if inner:
            values, how = partition_split(e, flops)
            ops = list(e.details.get("member_ops") or ())
            if values is None and ops and not e.ms:
                values, how = [0.0] * len(ops), None      # nothing measurable to split (under 1 us)
            if values is not None:
                for op, ms in zip(ops, values):
                    add(op_type(op), ms, "delegated_ms", how)
                continue
            for i in inner:
                add(op_type(str(i["op"])), i.get("ms"), "delegated_ms", "the delegate's operator names")
        else:
            add("DELEGATE" if e.delegated and e.op == "DELEGATE" else op_type(e.op), e.ms,
                "delegated_ms" if e.delegated else "cpu_ms")
    total = sum(v["ms"] for v in out.values())
    for v in out.values():
        v["share"] = v["ms"] / total if total > 0 else None
    return dict(sorted(out.items(), key=lambda kv: -kv[1]["ms"]))


def top_ops(entries: Sequence[OpEntry], n: int = 10) -> list[OpEntry]:
    return sorted((e for e in entries if e.ms is not None), key=lambda e: -(e.ms or 0.0))[:n]


RESOLUTION_MS = 0.001     # the LiteRT profiler's unit: 1 us per event


# A per-op-type speed-up whose 95 % interval spans more than this factor (hi / lo) is "unstable": the
# op's time moved between the profiled runs (stalls, frequency) more than the ratio can carry.
OP_UNSTABLE_SPAN = 1.25


def speedup_by_op_type(base: Sequence[OpEntry], other: Sequence[OpEntry], base_info: Mapping[str, Any] | None = None,
                       other_info: Mapping[str, Any] | None = None, *, base_flops: Mapping[int, int] | None = None,
                       other_flops: Mapping[int, int] | None = None) -> list[dict[str, Any]]:
    """Per op type (``by_op_type``: the model's op types): base ms, other ms and base/other (> 1: the
    other precision is faster).

    From medians where both profiles carry that op type's median over the profiled runs
    (``op_profile_info["op_types"]``: ``op_type_medians``, keyed like ``by_op_type``): the ratio of the
    medians (a stall in a few runs moves a mean, not a median), with ``ci`` -- its interval from the
    two medians' intervals ([lo_a / hi_b, hi_a / lo_b]) -- and ``unstable`` when that spans more than
    OP_UNSTABLE_SPAN or a median cannot be bounded at all; ``basis`` "medians". Else (benchmark_model's
    table, older rows, an op type whose delegated time was split by FLOPs) from the per-entry means,
    ``basis`` "means". A side under the profiler's resolution (< 1 us per inference: mostly 0-us
    events) has no honest ratio: ``speedup`` is None and ``below_resolution`` True."""
    a, b = by_op_type(base, base_flops), by_op_type(other, other_flops)
    ta = (base_info or {}).get("op_types") or {}
    tb = (other_info or {}).get("op_types") or {}
    rows = []
    for fam in sorted(set(a) | set(b), key=lambda f: (-max(a.get(f, {}).get("ms", 0.0), b.get(f, {}).get("ms", 0.0)), f)):
        ci, unstable = None, False
        medians = fam in ta and fam in tb
        if medians:
            xa, xb = ta.get(fam) or {}, tb.get(fam) or {}
            ma, mb = xa.get("p50_ms"), xb.get("p50_ms")
            (la, ha), (lb, hb) = (xa.get("ci_ms") or (None, None)), (xb.get("ci_ms") or (None, None))
            if None not in (la, ha, lb, hb) and lb > 0 and hb > 0:
                ci = (la / hb, ha / lb)
                unstable = ci[0] <= 0 or ci[1] / ci[0] > OP_UNSTABLE_SPAN
            else:     # a median the runs cannot bound (its time moved during the profile) is unstable too
                unstable = True
        else:
            ma, mb = a.get(fam, {}).get("ms"), b.get(fam, {}).get("ms")
        tiny = any(m is not None and m < RESOLUTION_MS for m in (ma, mb))
        ok = bool(ma and mb and not tiny)
        rows.append({"op_type": fam, "base_ms": ma, "other_ms": mb,
                     "speedup": (ma / mb) if ok else None, "below_resolution": tiny,
                     "ci": ci if ok else None, "unstable": unstable if ok else False,
                     "basis": "medians" if medians else "means",
                     "other_on_cpu_ms": b.get(fam, {}).get("cpu_ms")})
    return rows


def quantize_cost(entries: Sequence[OpEntry]) -> dict[str, Any]:
    """What QUANTIZE/DEQUANTIZE (XNNPACK: Convert) cost per inference, and their share."""
    types = by_op_type(entries)
    total = sum(e.ms or 0.0 for e in entries)
    ms = types["Convert"]["ms"] if "Convert" in types else 0.0
    return {"ms": ms, "share": ms / total if total > 0 else None}


def profile_pairs(rows: Sequence[InferenceRow]) -> list[tuple[InferenceRow, InferenceRow]]:
    """(fp32 row, quantized row) pairs on the same target that both carry a profile; rows
    without a precision (bench) pair the first profiled model with each later one."""
    by_target: dict[str, list[InferenceRow]] = {}
    for r in rows:
        if r.ok and r.op_profile:
            by_target.setdefault(str(r.target), []).append(r)
    pairs = []
    for group in by_target.values():
        precs = {r.precision: r for r in group if r.precision}
        base = precs.get("fp32")
        if base is not None:
            pairs.extend((base, precs[p]) for p in ("int8", "fp16", "dynamic") if p in precs)
        elif not precs and len(group) > 1:
            pairs.extend((group[0], r) for r in group[1:])
    return pairs


# ------------------------------------------------------------------------------------ Model Explorer

NOT_TIMED = "delegated, not timed per node"


def partition_split(e: OpEntry, flops: Mapping[int, int] | None = None) -> tuple[list[float] | None, str]:
    """A delegate partition's measured time per member node, and how it was attributed.

    1. ``inner operators in order``: the delegate timed its own operators (XNNPACK's inner events)
       and they line up with the member nodes in execution order, op family by op family
       (``_align``; a 1x1 convolution may run as a GEMM, reshapes come and go): each node gets its
       operators' time.
    2. ``op type share``: otherwise each op family gets its share of the inner time, split among
       that family's member nodes by their FLOPs (``flops``: node -> FLOPs; evenly without them);
       time of inner operators no member family explains is spread in proportion.
    3. None, ``NOT_TIMED``: no inner events (a GPU/NPU delegate times the partition only) or no
       family in common: the nodes are marked, not given invented numbers.
    Values add up to the partition's time (``e.ms``)."""
    inner = [i for i in (e.details.get("inner") or ()) if i.get("ms") is not None]
    ops = list(e.details.get("member_ops") or ())
    members = list(e.details.get("members") or ())
    total = float(e.ms or 0.0)
    if not inner or not ops:
        return None, NOT_TIMED
    fam_m = [op_family(o) for o in ops]
    fam_i = [op_family(str(i["op"])) for i in inner]
    inner_sum = sum(float(i["ms"]) for i in inner)
    groups = _align(fam_m, fam_i) if inner_sum > 0 else None
    if groups is not None:
        return [sum(float(inner[k]["ms"]) for k in g) * total / inner_sum for g in groups], "inner operators in order"
    by_fam: dict[str, float] = {}
    for f, i in zip(fam_i, inner):
        if f not in fam_m:      # a 1x1 convolution run as a GEMM is the convolution's time
            f = next((g for g in fam_m if frozenset((f, g)) in _SAME_WORK), f)
        by_fam[f] = by_fam.get(f, 0.0) + float(i["ms"])
    weights = []
    for k, f in enumerate(fam_m):
        node = members[k] if k < len(members) else None
        w = float((flops or {}).get(node, 0) or 0) if node is not None else 0.0
        same = [j for j, g in enumerate(fam_m) if g == f]
        fam_w = [float((flops or {}).get(members[j], 0) or 0) if j < len(members) else 0.0 for j in same]
        share = (w / sum(fam_w)) if sum(fam_w) > 0 else 1.0 / len(same)
        weights.append(by_fam.get(f, 0.0) * share)
    if sum(weights) <= 0:
        return None, NOT_TIMED
    return [w * total / sum(weights) for w in weights], "op type share"


# XNNPACK runs a 1x1 convolution as a GEMM ("Fully Connected (NC, F32) GEMM"); reshapes and copies
# it adds or elides are data movement and may sit next to any node.
_SAME_WORK = {frozenset(("Convolution", "Fully Connected"))}
_MOVES = ("Reshape", "Convert", "Transpose", "Constant Pad")
_MAX_PER_NODE = 4          # inner operators one node may expand to


def _align(nodes: list[str], inner: list[str]) -> list[list[int]] | None:
    """Assign the delegate's inner operators, in order, to the member nodes, in order (a node
    takes 0..4 consecutive operators): the assignment with the fewest misfits (an operator of
    another family, a node left without one), or None when misfits exceed 10 % of the nodes."""
    def fits(f: str, g: str) -> bool:
        return f == g or g in _MOVES or frozenset((f, g)) in _SAME_WORK

    n, m = len(nodes), len(inner)
    inf = float("inf")
    cost = [[inf] * (m + 1) for _ in range(n + 1)]
    back = [[0] * (m + 1) for _ in range(n + 1)]
    cost[0][0] = 0
    for i in range(1, n + 1):
        for j in range(m + 1):
            for t in range(0, min(_MAX_PER_NODE, j) + 1):
                prev = cost[i - 1][j - t]
                if prev == inf:
                    continue
                c = prev + (1 if t == 0 and nodes[i - 1] not in _MOVES else 0) + sum(
                    0 if fits(nodes[i - 1], inner[k]) else 1 for k in range(j - t, j))
                if c < cost[i][j]:
                    cost[i][j], back[i][j] = c, t
    if cost[n][m] > max(2, 0.1 * n):
        return None
    groups, j = [], m
    for i in range(n, 0, -1):
        t = back[i][j]
        groups.append(list(range(j - t, j)))
        j -= t
    return groups[::-1]


def model_explorer_node_data(row: InferenceRow) -> dict[str, Any]:
    """Model Explorer "node data" (GraphNodeData JSON: ``results`` keyed by a node's output
    tensor name, ``value`` = ms per inference, and a green-to-red gradient). Inside a delegate
    partition each member node gets its own time (``partition_split``: the delegate's inner
    operators in order, else its op type's share, by FLOPs); a partition the delegate did not time
    per operator marks its nodes ``NOT_TIMED`` (a string value) instead of N identical numbers.
    The numbers add up to the profile's sum less the partitions marked so."""
    results: dict[str, dict[str, Any]] = {}
    flops: dict[int, int] | None = None
    for e in row.op_profile or ():
        if e.ms is None:
            continue
        members = e.details.get("member_names") if e.delegated else None
        if members:
            if flops is None:
                flops = node_flops(row.model_path)
            values, _how = partition_split(e, flops)
            for k, key in enumerate(members):
                results[str(key)] = ({"value": NOT_TIMED} if values is None or k >= len(values)
                                     else {"value": round(values[k], 6)})
        elif e.name:
            results[str(e.name)] = {"value": round(e.ms, 6)}
    return {"results": results,
            "gradient": [{"stop": 0, "bgColor": "#e8f5e9"}, {"stop": 0.5, "bgColor": "#ffeb3b"},
                         {"stop": 1, "bgColor": "#f44336"}]}


def node_flops(model_path: str | None) -> dict[int, int]:
    """Node index -> FLOPs, read from the .tflite (empty when the file is not here)."""
    try:
        return {o["index"]: int(o.get("flops") or 0) for o in inspect(str(model_path))["ops"]} if model_path else {}
    except Exception:  # noqa: BLE001 -- a device path or a moved file: split evenly instead
        return {}


# ------------------------------------------------------------------------------------ rows

def runtime_row_parts(extra: Mapping[str, Any], latency: Any, where: str) -> tuple[dict[str, Any], list[str]]:
    """The issue-15 fields of a row from a run's facts (``RunResult.extra``), and its warnings.

    Host and device runners report ``delegation`` and ``op_profile_raw``/``op_profile_error``;
    the benchmark_model runner reports ready ``op_profile`` entries parsed from its log."""
    parts: dict[str, Any] = {
        "runtime_api": extra.get("runtime_api"), "accelerator": extra.get("accelerator"),
        "fully_accelerated": extra.get("fully_accelerated"), "gpu_precision": extra.get("gpu_precision"),
        "delegation": delegation_from_worker(extra.get("delegation")),
    }
    warnings: list[str] = []
    raw = extra.get("op_profile_raw")
    ready = extra.get("op_profile")
    if isinstance(raw, Mapping):
        entries, info = op_profile_from_worker(raw, latency)
        parts["op_profile"], parts["op_profile_info"] = entries, info
    elif isinstance(ready, Mapping) and ready.get("entries") is not None:
        entries = tuple(OpEntry.from_dict(e) for e in ready["entries"])
        info = dict(ready.get("info") or {})
        info.update(coverage(sum(e.ms or 0.0 for e in entries), sum(e.ms or 0.0 for e in entries), latency))
        parts["op_profile"], parts["op_profile_info"] = entries, info
    elif extra.get("op_profile_error"):
        parts["op_profile_info"] = {"error": extra["op_profile_error"]}
        warnings.append(f"no op profile: {extra['op_profile_error']}")
    w = delegation_warning(parts["delegation"])        # the row's own warning: renderers name the row
    if w:
        warnings.append(w)
    if extra.get("gpu_adapter") and "software" in str(extra["gpu_adapter"]).lower():
        warnings.append(f"the GPU is a software Vulkan driver ({extra['gpu_adapter']}): its outputs check "
                        "correctness; its timing is 'software GPU', not a GPU's speed")
    return parts, warnings


# ------------------------------------------------------------------------------------ readiness

ANALYZER_NOTE = ("the model analyzer's GPU check (gpu_compatibility=True) in TF 2.21 and ai-edge-litert 2.3 "
                 "reports every model compatible: a model with UNIQUE, which LiteRT's GPU accelerator rejects, "
                 "passes it; the webgpu check below compiles the model for the GPU instead")


def gpu_readiness(model_path: str, timeout_s: float = 180.0) -> dict[str, Any]:
    """GPU readiness of a .tflite without a phone: the analyzer's verdict (with its caveat) and,
    when a Vulkan driver is configured (a real GPU or scripts/software_gpu), a real compile for
    LiteRT's WebGPU accelerator in a child process (a driver crash cannot take convert down)."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    out: dict[str, Any] = {"analyzer": _analyzer_gpu(model_path), "analyzer_note": ANALYZER_NOTE}
    has_driver = bool(os.environ.get("VK_ICD_FILENAMES")) or any(Path("/dev/dri").glob("renderD*"))
    if not has_driver:
        out["webgpu"] = {"checked": False, "reason": "no Vulkan driver here (no /dev/dri render node, no "
                                                     "VK_ICD_FILENAMES); scripts/software_gpu sets up Mesa's"}
        return out
    script = Path(__file__).parent / "runner_profile.py"
    try:
        proc = subprocess.run([sys.executable, str(script), "--gpu-check", str(model_path)], capture_output=True,
                              text=True, timeout=timeout_s, stdin=subprocess.DEVNULL, check=False)
        out["webgpu"] = (json.loads(proc.stdout.strip().splitlines()[-1]) if proc.returncode == 0 and proc.stdout.strip()
                         else {"checked": False, "reason": f"the GPU check exited {proc.returncode}: "
                                                           f"{(proc.stderr.strip().splitlines() or [''])[-1][:200]}"})
    except subprocess.TimeoutExpired:
        out["webgpu"] = {"checked": False, "reason": f"the GPU check did not finish in {timeout_s:g} s"}
    return out


def _analyzer_gpu(model_path: str) -> str:
    try:
        from ai_edge_litert import _pywrap_analyzer_wrapper as analyzer  # type: ignore
    except ImportError:
        return "unavailable (no ai_edge_litert analyzer)"
    text = analyzer.ModelAnalyzer(str(model_path), True, True)
    warnings = [ln.strip() for ln in text.splitlines() if "GPU COMPATIBILITY WARNING" in ln]
    if warnings:
        return "incompatible: " + "; ".join(warnings)
    return "compatible" if "looks compatible with GPU delegate" in text else "unknown"


def describe_tflite(path: "str | os.PathLike[str]") -> dict[str, Any]:
    """Op histogram, quantization coverage and I/O tensor details of a .tflite file."""
    info = inspect(str(path))
    keep = ("inputs", "outputs", "op_count", "op_histogram", "quantized", "float_op_histogram",
            "quantization_coverage", "flops", "counted_ops")
    out = {k: info[k] for k in keep if k in info}
    if info.get("flops_note"):
        out["flops_note"] = info["flops_note"]
    if info.get("subgraph_roles"):          # the subgraphs the model's ops run (JSON keys are strings)
        out["subgraph_roles"] = {str(k): v for k, v in info["subgraph_roles"].items()}
    # Quantization coverage: the compute ops that stayed float (index + op type) in a quantized model;
    # an op of another subgraph (a loop body) says which: "FULLY_CONNECTED#0 (subgraph 2, WHILE body)".
    roles = info.get("subgraph_roles") or {}
    out["float_ops"] = [f"{o['op']}#{o['index']}" + (f" (subgraph {o['subgraph']}, {roles.get(o['subgraph'], '?')})"
                                                    if o.get("subgraph") else "")
                        for o in info.get("float_ops", [])]
    out["gpu_compatibility"] = gpu_readiness(str(path))     # host readiness without a phone (issue 15)
    return out
