"""``edgebench matrix run``: the cells of a matrix run, one column per axis that varies."""

from __future__ import annotations

from typing import Any

from rich.markup import escape
from rich.text import Text

from edgebench.report.terminal.fit import Col, fit_tables, group
from edgebench.rows.records import MatrixCell, MatrixReport

_STATUS = {"ok": "green", "failed": "bold red", "skipped": "yellow", "resumed": "cyan", "planned": "white"}


def varying_axes(cells: list[MatrixCell]) -> tuple[list[str], dict[str, Any]]:
    """(the parameters whose value differs between cells, in matrix order; the fixed ones)."""
    keys: list[str] = []
    for c in cells:
        for k in c.params:
            if k not in keys:
                keys.append(k)
    varying = [k for k in keys if len({repr(c.params.get(k)) for c in cells}) > 1]
    fixed = {k: cells[0].params.get(k) for k in keys if k not in varying} if cells else {}
    return varying, fixed


def _short(v: Any) -> str:
    s = "-" if v is None else str(v)
    return s.rsplit("/", 1)[-1] if "/" in s and s.endswith(".tflite") else s


def render_matrix(report: MatrixReport | dict[str, Any], *, width: int | None = None, wide: bool = False):
    """The cells as a table (pure): the cell number and the axes that vary say what a cell is, the
    fixed axes are in the caption (report/terminal/fit.py: nothing cut; a narrow ``width`` drops
    the run id first, ``wide`` shows every column)."""

    rep = report if isinstance(report, MatrixReport) else MatrixReport.of(report)
    varying, fixed = varying_axes(list(rep.cells))
    counts = ", ".join(f"{v} {k}" for k, v in sorted(rep.counts.items()))
    shard = f" shard {rep.shard}" if rep.shard else ""
    cols = [Col("#", num=True, identity=True), *(Col(k, identity=True) for k in varying), Col("status"),
            Col("run id", priority=2), Col("result / reason")]
    rows = [[str(c.index), *(_short(c.params.get(k)) for k in varying),
             Text(c.status, style=_STATUS.get(c.status, "")), (c.run_id or "-")[:12],
             str(c.headline or c.reason or "-")] for c in rep.cells]
    notes = []
    if fixed:
        notes.append("every cell: " + ", ".join(f"{k}={escape(_short(v))}" for k, v in fixed.items()))
    if rep.db:
        notes.append(f"stored in {escape(rep.db)}; resume with --resume")
    return group(fit_tables(f"matrix {rep.matrix} ({rep.kind}, hash {rep.matrix_hash}){shard}: "
                            f"{len(rep.cells)} of {rep.total_cells} cells: {counts}", cols, rows, width=width,
                            wide=wide, caption=notes))
