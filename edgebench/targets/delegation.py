"""Delegation: which ops a delegate/accelerator took, from the runtime's own facts, and the one-line warning.

* ``delegation_from_worker`` / ``delegation_from_runtime_info`` / ``delegation_from_log``: the
  ``delegation`` object of a row, from the interpreter's execution plan (host, device runner),
  benchmark_model's model runtime info file (every node, where the binary writes it) or its log
  ("Replacing N out of M node(s) with delegate (...) node, yielding K partitions").
* ``delegation_warning``: a one-line warning naming the ops the delegate left out and the fix.
"""

from __future__ import annotations

from typing import Any, Mapping

from edgebench.rows import Delegation

# benchmark_model's delegate kernel names (lower case, no spaces) -> the delegate they belong to.
KERNEL_TO_DELEGATE = {
    "tflitexnnpackdelegate": "XNNPACK",
    "tflitegpudelegatev2": "GPU",
    "tflitegpudelegate": "GPU",
    "tflitennapidelegate": "NNAPI",
    "tflitehexagondelegate": "Hexagon",
    "tflitecoremldelegate": "CoreML",
}

QUANTIZE_OPS = ("QUANTIZE", "DEQUANTIZE")

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
