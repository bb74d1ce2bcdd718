"""``edgebench matrix run``: the cells of a matrix run, one column per axis that varies."""

from __future__ import annotations

from typing import Any

_STATUS = {"ok": "green", "failed": "bold red", "skipped": "yellow", "resumed": "cyan", "planned": "white"}


def varying_axes(cells: list[dict[str, Any]]) -> tuple[list[str], dict[str, Any]]:
    """(the parameters whose value differs between cells, in matrix order; the fixed ones)."""
    keys: list[str] = []
    for c in cells:
        for k in (c.get("params") or {}):
            if k not in keys:
                keys.append(k)
    varying = [k for k in keys if len({repr((c.get("params") or {}).get(k)) for c in cells}) > 1]
    fixed = {k: (cells[0].get("params") or {}).get(k) for k in keys if k not in varying} if cells else {}
    return varying, fixed


def _short(v: Any) -> str:
    s = "-" if v is None else str(v)
    return s.rsplit("/", 1)[-1] if "/" in s and s.endswith(".tflite") else s


def render_matrix(report: dict[str, Any], *, width: int | None = None, wide: bool = False):
    """The cells as a table (pure): the axes that vary are columns (values never split across
    lines), the fixed ones are in the caption. At a narrow ``width`` the run id and then axis
    columns are dropped (and named), never folded."""
    from rich.markup import escape
    from rich.table import Table

    from edgebench.report.terminal._cells import fit_columns

    cells = report["cells"]
    varying, fixed = varying_axes(cells)
    counts = ", ".join(f"{v} {k}" for k, v in sorted(report["counts"].items()))
    shard = f" shard {report['shard']}" if report.get("shard") else ""
    columns = [("#", 0), *[(k, 1) for k in varying], ("status", 0), ("run id", 2), ("result / reason", 0)]
    rows = [[str(c["index"]), *[_short((c.get("params") or {}).get(k)) for k in varying], str(c["status"]),
             (c["run_id"] or "-")[:12], str(c["headline"] or c["reason"] or "")] for c in cells]
    last = len(columns) - 1
    keep, dropped = fit_columns(columns, rows, width, wide, flex={last: 24})
    t = Table(title=f"matrix {escape(report['matrix'])} ({report['kind']}, hash {report['matrix_hash']}){shard}: "
                    f"{len(cells)} of {report['total_cells']} cells: {counts}")
    for i in keep:
        if i == last:
            t.add_column(columns[i][0], overflow="fold")
        else:
            t.add_column(columns[i][0], no_wrap=True, justify="right" if i == 0 else "left")
    status_col = 1 + len(varying)
    for c, row in zip(cells, rows):
        shown = [escape(row[i]) for i in keep]
        if status_col in keep:
            style = _STATUS.get(c["status"], "")
            j = keep.index(status_col)
            shown[j] = f"[{style}]{shown[j]}[/]" if style else shown[j]
        t.add_row(*shown)
    notes = []
    if fixed:
        notes.append("every cell: " + ", ".join(f"{k}={escape(_short(v))}" for k, v in fixed.items()))
    if dropped:
        notes.append(f"hidden to fit the terminal: {', '.join(dropped)} (--wide shows every column)")
    if report.get("db"):
        notes.append(f"stored in {escape(str(report['db']))}; resume with --resume")
    t.caption = "\n".join(notes) or None
    return t
