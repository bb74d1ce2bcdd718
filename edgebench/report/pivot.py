"""A matrix report pivots on the axes that vary (pure: typed documents in, table data out).

The runs of one matrix (``edgebench report --matrix HASH``) differ in a few axes -- threads,
delegate, target, batch size ... A report that lists them run after run hides the matrix; this
builds one table per model instead: rows are model x precision, columns are the values of the
varying axes (``threads=1``, ``threads=2 · delegate=none`` ...), and each cell holds the numbers
that matter (inference: p50, p99, top-1 or agreement; training: examples/s, step p50) with the
ratio to the row's first column. The HTML and Markdown renderers draw it.
"""

from __future__ import annotations

from typing import Any, Sequence

from edgebench.rows.metrics import BY_KEY
from edgebench.rows import Document, InferenceRow, Row, TrainRow

# Cell parameters that are rows (or identity), not axes.
_NOT_AXES = ("key", "kind", "index", "model", "precisions", "precision")


def varying_axes(docs: Sequence[Document]) -> list[str]:
    """The cell parameters whose value differs between the matrix runs, in matrix order."""
    cells = [d.cell for d in docs if d.cell is not None]
    keys: list[str] = []
    for c in cells:
        keys.extend(k for k in c if k not in _NOT_AXES and k not in keys)
    return [k for k in keys if len({repr(c.get(k)) for c in cells}) > 1]


def short_value(v: Any) -> str:
    s = "-" if v is None else str(v)
    return s.rsplit("/", 1)[-1] if "/" in s else s


def _metrics(doc: Document, row: Row) -> dict[str, Any]:
    top1 = BY_KEY["top1"].value(row)
    agree = row.accuracy.top1_agreement if isinstance(row, InferenceRow) and row.accuracy else None
    valid = BY_KEY["p99_ms"].valid(row)
    return {"status": row.status or "ok", "run_id": doc.run_id,
            "p50": BY_KEY["p50_ms"].value(row), "p99": BY_KEY["p99_ms"].value(row),
            "p99_valid": True if valid is None else valid,
            "accuracy": top1 if top1 is not None else agree,
            "accuracy_is_agreement": top1 is None and agree is not None,
            "examples_per_s": BY_KEY["examples_per_s"].value(row), "step_p50": BY_KEY["step_time_p50_ms"].value(row)}


def matrix_pivots(docs: Sequence[Document]) -> list[dict[str, Any]]:
    """One pivot per model: ``{"model", "kind", "axes", "columns", "rows": [{"precision",
    "cells": [metrics | None per column]}]}``; each cell's ``ratio`` is its headline (p50, or
    examples/s for training) over the row's first column that has one. Empty when no axis varies."""
    axes = varying_axes(docs)
    if not axes:
        return []
    ordered = sorted((d for d in docs if d.cell is not None),
                     key=lambda d: (int(d.cell.get("index") or 0), d.created))
    columns: list[str] = []
    table: dict[str, dict[str, Any]] = {}
    for d in ordered:
        col = " · ".join(f"{k}={short_value(d.cell.get(k))}" for k in axes)
        if col not in columns:
            columns.append(col)
        train = d.kind == "train"
        for row in d.rows:
            model = str(row.model or d.cell.get("model") or "?")
            prec = str(row.precision or "-")
            t = table.setdefault(model, {"kind": "train" if train or isinstance(row, TrainRow) else "inference",
                                         "rows": {}})
            t["rows"].setdefault(prec, {})[col] = _metrics(d, row)
    out = []
    for model, t in table.items():
        rows = []
        for prec, by_col in t["rows"].items():
            cells = [dict(by_col[c]) if c in by_col else None for c in columns]
            key = "examples_per_s" if t["kind"] == "train" else "p50"
            first = next((c[key] for c in cells if c is not None and c[key] is not None), None)
            for c in cells:
                if c is not None:
                    c["ratio"] = c[key] / first if (c[key] is not None and first) else None
            rows.append({"precision": prec, "cells": cells})
        out.append({"model": model, "kind": t["kind"], "axes": axes, "columns": columns, "rows": rows})
    return out


SUBCOLUMNS = {"inference": ("p50 ms", "p99 ms", "top-1", "p50 / first"),
              "train": ("examples/s", "step p50 ms", "ex/s / first")}


def cell_values(pivot: dict[str, Any], cell: dict[str, Any] | None) -> list[str]:
    """The sub-column texts of one cell (shared by the HTML and Markdown renderers)."""
    n = len(SUBCOLUMNS[pivot["kind"]])
    if cell is None:
        return ["-"] * n
    if cell["status"] != "ok":
        return [str(cell["status"]).upper()] + [""] * (n - 1)

    def f(v: Any, spec: str) -> str:
        return "-" if v is None else format(v, spec)

    ratio = f(cell["ratio"], ".2f") + ("x" if cell["ratio"] is not None else "")
    if pivot["kind"] == "train":
        return [f(cell["examples_per_s"], ".1f"), f(cell["step_p50"], ".3g"), ratio]
    acc = "-" if cell["accuracy"] is None else f"{cell['accuracy'] * 100:.1f}%" + (
        " agr." if cell["accuracy_is_agreement"] else "")
    p99 = f(cell["p99"], ".3g") + ("" if cell["p99_valid"] else " †")
    return [f(cell["p50"], ".3g"), p99, acc, ratio]
