"""``edgebench import-log FILE``: a captured benchmark_model output as edgebench results."""

from __future__ import annotations

from typing import Any, Optional

import typer


def _fmt(v: Any, unit: str = "") -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.4g}{unit}"
    return f"{v}{unit}"


def render(doc: dict[str, Any], top_ops: int = 10):
    """Pure renderer: the imported run as rich tables (a Group)."""
    from rich.console import Group
    from rich.table import Table

    parts: list[Any] = []
    for row in doc["rows"]:
        t = Table(title=f"benchmark_model log: {doc.get('source', '')}", show_header=True, header_style="bold")
        t.add_column("field")
        t.add_column("value", overflow="fold")
        lat = row.get("latency_ms") or {}
        mem = row.get("memory_mb") or {}
        items = [
            ("status", row["status"] + (f" ({row['error']})" if row.get("error") else "")),
            ("model", row.get("model_path")),
            ("delegate", row.get("delegate")),
            ("delegated nodes", row.get("delegated_nodes")),
            ("threads", row.get("threads")),
            ("timed runs (samples)", lat.get("samples")),
            ("mean ms", _fmt(lat.get("mean"))),
            ("std ms", _fmt(lat.get("std"))),
            ("min ms", _fmt(lat.get("min"))),
            ("max ms", _fmt(lat.get("max"))),
            ("p5 / p50 / p95 ms", " / ".join(_fmt(lat.get(k)) for k in ("p5", "p50", "p95"))),
            ("p99 ms", "- (" + lat["p99_note"].split(";")[0] + ")" if lat.get("p99_note") else "-"),
            ("QPS (1 / mean)", _fmt(lat.get("qps"))),
            ("init ms", _fmt(row.get("init_ms"))),
            ("first inference ms", _fmt(row.get("first_inference_ms"))),
            ("warmup avg ms", _fmt(row.get("warmup_ms"))),
            ("memory MB (init / overall)", f"{_fmt(mem.get('init'))} / {_fmt(mem.get('overall'))}"
             + (f" [{mem['kind']}]" if mem.get("kind") else "")),
            ("peak memory MB (periodic)", _fmt(mem.get("peak_periodic"))),
            ("latency source", lat.get("source")),
        ]
        for k, v in items:
            t.add_row(k, "-" if v is None else str(v))
        for w in row.get("warnings") or []:
            t.add_row("warning", w)
        if row.get("unparsed_lines"):
            t.add_row("unparsed lines", str(row["unparsed_lines"]))
        parts.append(t)
        ops = sorted(row.get("op_profile") or [], key=lambda r: -(r.get("avg_ms") or 0.0))[:top_ops]
        if ops:
            o = Table(title=f"top {len(ops)} operators (regular runs)", show_header=True, header_style="bold")
            for c in ("node type", "avg ms", "%", "name"):
                o.add_column(c, overflow="fold")
            for r in ops:
                o.add_row(r.get("node_type", ""), _fmt(r.get("avg_ms")), _fmt(r.get("pct")), r.get("name") or "")
            parts.append(o)
    return Group(*parts)


def register(app: typer.Typer) -> None:
    @app.command("import-log")
    def import_log_cmd(
        file: str = typer.Argument(..., help="Captured benchmark_model output (stdout+stderr), any version."),
        json_path: Optional[str] = typer.Option(None, "--json", help="Write the result document as JSON to PATH ('-' for stdout)."),
        top_ops: int = typer.Option(10, "--top-ops", min=0, help="Operators to show when the log has op profiling."),
    ) -> None:
        """Parse a captured TFLite benchmark_model log into edgebench results (no p99: the tool prints no samples)."""
        from edgebench.results import write_json
        from edgebench.targets.benchmark_model.log_rows import import_log_file

        doc = import_log_file(file)
        if json_path:
            write_json(doc, json_path)
            if json_path == "-":
                return
        from edgebench.cli._common import console

        console().print(render(doc, top_ops))
