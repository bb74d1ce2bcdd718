"""Model Explorer node data: per-op latency of profiled rows, as Model Explorer colours nodes.

``render_node_data(doc, path)`` -> ``{file path: JSON text}``: one GraphNodeData file per row
with an op profile (``PATH`` itself when there is one such row, else ``PATH``'s stem plus
``_<precision>_<target>`` per row). Load it in Model Explorer next to the same .tflite
("Add per-node data"). Values are ms per inference (see ``model_explorer_node_data``).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from typing import Any

from edgebench.model.tflite_model import inspect
from edgebench.rows import Document, InferenceRow
from edgebench.targets.op_profile import NOT_TIMED, partition_split


def _label(r: InferenceRow, by_model: bool) -> str:
    """A file name part per row: bench rows by their model (the file stem: one per file, and two
    files may share a precision), convert-and-compare rows by precision."""
    first = (r.model or r.precision) if by_model else (r.precision or r.model)
    text = "_".join(str(x) for x in (first, r.target, r.gpu_precision) if x)
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text)


def render_node_data(doc: Document, path: str) -> dict[str, str]:
    rows = [r for r in doc.rows if isinstance(r, InferenceRow) and r.ok and r.op_profile]
    if not rows:
        return {}
    p = Path(path)
    if len(rows) == 1:
        return {str(p): json.dumps(model_explorer_node_data(rows[0]), indent=1)}
    by_model = doc.kind == "bench"
    return {str(p.with_name(f"{p.stem}_{_label(r, by_model)}{p.suffix or '.json'}")):
            json.dumps(model_explorer_node_data(r), indent=1) for r in rows}


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
