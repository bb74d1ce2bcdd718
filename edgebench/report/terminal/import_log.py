"""``edgebench import-log``: a parsed benchmark_model log (summary, delegates, top operators)."""

from __future__ import annotations

from typing import Any

from rich.console import Group

from edgebench.report.terminal._cells import as_document
from edgebench.report.terminal.fit import Col, fit_tables
from edgebench.rows.records import LogFacts


def _fmt(v: Any, unit: str = "") -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.4g}{unit}"
    return f"{v}{unit}"


def render_import_log(doc, top_ops: int = 10, width: int | None = None):
    """Pure renderer: the imported run as rich tables (a Group): its facts, then the top operators
    (report/terminal/fit.py widths: the node type stays, a long op name is dropped before a number)."""


    doc = as_document(doc)
    parts: list[Any] = []
    for row in doc.rows:
        what = "litert-benchmark result" if doc.get("tool") == "litert-benchmark" else "benchmark_model log"
        lat = row.latency
        facts = LogFacts.of(row.log, lat.details if lat else None)
        mem = f"{_fmt(facts.memory_init_mb)} / {_fmt(facts.memory_overall_mb)}" + (
            f" [{facts.memory_kind}]" if facts.memory_kind else "")
        items = [
            ("status", row.status + (f" ({row.error})" if row.error else "")),
            ("model", row.model_path),
            ("delegate", row.delegate),
            ("delegated nodes", row.delegation.cell() if row.delegation else facts.delegated_nodes),
            ("threads", row.threads),
            ("timed runs (samples)", lat.samples if lat else None),
            ("mean ms", _fmt(lat.mean if lat else None)),
            ("std ms", _fmt(lat.std if lat else None)),
            ("min ms", _fmt(lat.min if lat else None)),
            ("max ms", _fmt(lat.max if lat else None)),
            ("p5 / p50 / p95 ms", " / ".join(_fmt(v) for v in (facts.p5_ms, lat.p50 if lat else None,
                                                                 lat.p95 if lat else None))),
            ("p99 ms", "- (" + facts.p99_note.split(";")[0] + ")" if facts.p99_note else "-"),
            ("QPS (1 / mean)", _fmt(lat.qps if lat else None)),
            ("init ms", _fmt(row.init_ms)),
            ("first inference ms", _fmt(row.first_inference_ms)),
            ("warmup avg ms", _fmt(row.warmup.mean if row.warmup else None)),
            ("memory MB (init / overall), as the tool prints it", mem),
            ("peak memory MB (periodic)", _fmt(facts.memory_peak_periodic_mb)),
            ("latency source", facts.latency_source),
        ]
        rows = [[k, "-" if v is None else str(v)] for k, v in items]
        rows += [["warning", w] for w in row.warnings]
        if facts.unparsed_lines:
            rows.append(["unparsed lines", str(facts.unparsed_lines)])
        parts += fit_tables(f"{what}: {doc.get('source', '')}", [Col("field", identity=True),
                                                                             Col("value")], rows, width=width)
        ops = sorted(row.op_profile or (), key=lambda r: -(r.ms or 0.0))[:top_ops]
        if ops:
            parts += fit_tables(f"top {len(ops)} operators (regular runs)",
                                [Col("node type", identity=True), Col("avg ms", num=True), Col("%", num=True),
                                 Col("name", priority=1)],
                                [[str(r.op), _fmt(r.ms), _fmt(None if r.share is None else 100 * r.share),
                                  str(r.name or "-")] for r in ops], width=width)
    return Group(*parts)
