"""Model Explorer node data: per-op latency of profiled rows, as Model Explorer colours nodes.

``render_node_data(doc, path)`` -> ``{file path: JSON text}``: one GraphNodeData file per row
with an op profile (``PATH`` itself when there is one such row, else ``PATH``'s stem plus
``_<precision>_<target>`` per row). Load it in Model Explorer next to the same .tflite
("Add per-node data"). Values are ms per inference (see ``profile.model_explorer_node_data``).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from edgebench.targets.profile import model_explorer_node_data
from edgebench.rows import Document, InferenceRow


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
