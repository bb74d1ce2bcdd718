"""``edgebench import-log``: a parsed benchmark_model log (summary, delegates, top operators)."""

from __future__ import annotations

from typing import Any


def _fmt(v: Any, unit: str = "") -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.4g}{unit}"
    return f"{v}{unit}"


def render_import_log(doc, top_ops: int = 10):
    """Pure renderer: the imported run as rich tables (a Group)."""
    from rich.console import Group
    from rich.table import Table

    from edgebench.report.terminal._cells import as_document, e

    doc = as_document(doc)
    parts: list[Any] = []
    for row in doc.rows:
        log = dict(row.log or {})
        what = "litert-benchmark result" if doc.get("tool") == "litert-benchmark" else "benchmark_model log"
        t = Table(title=f"{what}: {e(doc.get('source', ''))}", show_header=True, header_style="bold")
        t.add_column("field")
        t.add_column("value", overflow="fold")
        lat = row.latency
        d = dict(lat.details) if lat else {}
        mem = log.get("memory_mb") or {}
        items = [
            ("status", row.status + (f" ({row.error})" if row.error else "")),
            ("model", row.model_path),
            ("delegate", row.delegate),
            ("delegated nodes", row.delegation.cell() if row.delegation else log.get("delegated_nodes")),
            ("threads", row.threads),
            ("timed runs (samples)", lat.samples if lat else None),
            ("mean ms", _fmt(lat.mean if lat else None)),
            ("std ms", _fmt(lat.std if lat else None)),
            ("min ms", _fmt(lat.min if lat else None)),
            ("max ms", _fmt(lat.max if lat else None)),
            ("p5 / p50 / p95 ms", " / ".join(_fmt(v) for v in (d.get("p5"), lat.p50 if lat else None,
                                                                 lat.p95 if lat else None))),
            ("p99 ms", "- (" + d["p99_note"].split(";")[0] + ")" if d.get("p99_note") else "-"),
            ("QPS (1 / mean)", _fmt(lat.qps if lat else None)),
            ("init ms", _fmt(row.init_ms)),
            ("first inference ms", _fmt(row.first_inference_ms)),
            ("warmup avg ms", _fmt(row.warmup.mean if row.warmup else None)),
            ("memory MB (init / overall), as the tool prints it",
             f"{_fmt(mem.get('init'))} / {_fmt(mem.get('overall'))}" + (f" [{mem['kind']}]" if mem.get("kind") else "")),
            ("peak memory MB (periodic)", _fmt(mem.get("peak_periodic"))),
            ("latency source", d.get("source")),
        ]
        for k, v in items:
            t.add_row(e(k), e(v))
        for w in row.warnings:
            t.add_row("warning", e(w))
        if log.get("unparsed_lines"):
            t.add_row("unparsed lines", str(log["unparsed_lines"]))
        parts.append(t)
        ops = sorted(row.op_profile or (), key=lambda r: -(r.ms or 0.0))[:top_ops]
        if ops:
            o = Table(title=f"top {len(ops)} operators (regular runs)", show_header=True, header_style="bold")
            for c in ("node type", "avg ms", "%", "name"):
                o.add_column(c, overflow="fold")
            for r in ops:
                o.add_row(e(r.op), _fmt(r.ms), _fmt(None if r.share is None else 100 * r.share), e(r.name or ""))
            parts.append(o)
    return Group(*parts)
