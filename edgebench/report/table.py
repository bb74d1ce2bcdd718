"""Rich tables for the terminal (pure: return renderables, never print)."""

from __future__ import annotations

from typing import Any

from rich.table import Table


def render_fingerprint(fp: dict[str, Any], title: str = "environment") -> Table:
    t = Table(title=title, show_header=True, header_style="bold")
    t.add_column("field")
    t.add_column("value", overflow="fold")
    for k, v in fp.items():
        t.add_row(str(k), "-" if v is None else str(v))
    return t
