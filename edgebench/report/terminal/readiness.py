"""``edgebench readiness``: one row per (precision, vendor, SoC), then why each op stayed on the CPU."""

from __future__ import annotations

from typing import Any, Mapping

from rich.table import Table

from edgebench.report.readiness import COLUMNS, details, table
from edgebench.report.terminal._cells import as_document, e, fit_columns
from edgebench.rows import Document

_NUMERIC = ("on NPU", "compiled", "s", "p50 ms")
_FLEX = {"target": 16, "checkable": 14, "left on CPU": 16, "SDK": 14, "vs CPU": 10}


def render_readiness(doc: Document | Mapping[str, Any], *, width: int | None = None, wide: bool = False) -> list:
    """The table (columns dropped first on a narrow terminal are named under it) and the lines."""
    doc = as_document(doc)
    headers, body = table(doc)
    prio = dict(COLUMNS)
    cols = [(h, prio[h]) for h in headers]
    flex = {i: _FLEX[h] for i, h in enumerate(headers) if h in _FLEX}
    keep, dropped = fit_columns(cols, body, width, wide, flex=flex)
    t = Table(title=f"NPU readiness: {e(doc.model or '?')}", title_justify="left")
    for i in keep:
        h = headers[i]
        if h in _NUMERIC:
            t.add_column(e(h), justify="right", no_wrap=True)
        else:
            t.add_column(e(h), overflow="fold")
    for row in body:
        t.add_row(*[e(row[i]) for i in keep])
    out: list = [t]
    if dropped:
        out.append(f"[dim]columns left out at this width: {e(', '.join(dropped))} (--wide shows them, --json has all)[/dim]")
    out += [e(line) for line in details(doc)]
    return out
