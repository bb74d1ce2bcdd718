"""``edgebench matrix run``: the cells of a matrix run."""

from __future__ import annotations

from typing import Any


_STATUS = {"ok": "green", "failed": "bold red", "skipped": "yellow", "resumed": "cyan", "planned": "white"}


def render_matrix(report: dict[str, Any]):
    """The cells of a matrix run as a table (pure)."""
    from rich.markup import escape
    from rich.table import Table

    counts = ", ".join(f"{v} {k}" for k, v in sorted(report["counts"].items()))
    shard = f" shard {report['shard']}" if report.get("shard") else ""
    t = Table(title=f"matrix {escape(report['matrix'])} ({report['kind']}, hash {report['matrix_hash']}){shard}: "
                    f"{len(report['cells'])} of {report['total_cells']} cells: {counts}")
    for col in ("#", "cell", "status", "run id", "result / reason"):
        t.add_column(col, overflow="fold")
    for c in report["cells"]:
        style = _STATUS.get(c["status"], "")
        t.add_row(str(c["index"]), escape(c["key"]), f"[{style}]{c['status']}[/]",
                  (c["run_id"] or "-")[:12], escape(c["headline"] or c["reason"] or ""))
    if report.get("db"):
        t.caption = f"stored in {report['db']}; resume with --resume"
    return t
