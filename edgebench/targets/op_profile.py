"""Per-op profiles: the worker's and benchmark_model's raw per-op timings as typed ``OpEntry`` rows.

The worker (``targets/runner_profile.py``) reports raw facts; this module turns them into
``rows.OpEntry`` entries and the views the reports print:

* ``op_profile_from_worker`` / ``op_profile_from_log``: ``op_profile`` entries (mean ms per
  inference, share of the profile) and ``op_profile_info`` (source, runs, totals, ``coverage``:
  what share of the profiler's own Invoke the listed ops explain, and ``profiler_overhead``).
* ``by_op_type`` (per-op-type medians over the profiled runs: ``op_type_medians``), ``top_ops``.
  Delegated work is split into op types by the delegate's own inner operators (XNNPACK:
  "Convolution (NHWC, QC8) IGEMM" -> Convolution), interpreter nodes by their TFLite op
  (CONV_2D -> Convolution), so FP32 and INT8 rows compare op type by op type; a delegate partition's
  time per member node: ``partition_split``.
Comparing two profiles (speed-up per op type) is ``judge.op_types``; Model Explorer's node data is
``report.model_explorer``.
"""

from __future__ import annotations

import re
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from edgebench.core.latency import autocorrelation_time, order_stat_ci
from edgebench.rows import OpEntry
from edgebench.targets.delegation import _is_delegate_kernel

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
_NAMED_NODE = re.compile(r"^\[(.*)\]:(\d+)$")      # benchmark_model's "[tensor name]:node"


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
