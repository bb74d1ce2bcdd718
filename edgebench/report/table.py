"""Rich tables for the terminal (pure: return renderables, never print)."""

from __future__ import annotations

from typing import Any

from rich.markup import escape
from rich.table import Table


def render_fingerprint(fp: dict[str, Any], title: str = "environment") -> Table:
    t = Table(title=title, show_header=True, header_style="bold")
    t.add_column("field")
    t.add_column("value", overflow="fold")
    for k, v in fp.items():
        t.add_row(escape(str(k)), "-" if v is None else escape(str(v)))
    return t


def _fmt_bytes(n: Any) -> str:
    if n is None:
        return "-"
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def _fmt(v: Any, spec: str = ".2f", suffix: str = "") -> str:
    if v is None or v == "":
        return "-"
    if isinstance(v, (int, float)):
        return f"{v:{spec}}{suffix}"
    return str(v)


def render_manifest(m: dict[str, Any]) -> Table:
    """The convert manifest as a table: one row per precision."""
    src = m.get("source", {})
    t = Table(title=f"edgebench convert: {escape(str(src.get('name')))}  (source sha256 {str(src.get('sha256'))[:12]})")
    for col in ("precision", "status", "size", "reduction", "convert s", "ops", "float ops (coverage)", "notes"):
        t.add_column(col, overflow="fold")
    for prec, v in m.get("variants", {}).items():
        ok = v.get("status") == "ok"
        hist = v.get("op_histogram") or {}
        float_hist = v.get("float_op_histogram") or {}
        notes = []
        if v.get("parity"):
            notes.append(f"parity {v['parity']}")
        q = v.get("quantization") or {}
        if q.get("mode"):
            notes.append(q["mode"])
        if not ok:
            notes.append(str(v.get("error")))
        t.add_row(
            prec,
            "[green]ok[/]" if ok else "[bold red]FAILED[/]",
            _fmt_bytes(v.get("bytes")),
            _fmt(v.get("size_reduction_pct"), ".1f", "%"),
            _fmt(v.get("seconds"), ".1f"),
            str(sum(hist.values())) if hist else "-",
            (", ".join(f"{k} x{n}" for k, n in sorted(float_hist.items())) or "none")
            if ok and v.get("quantized") else "-",
            escape("; ".join(notes)),
        )
    cal = m.get("calibration")
    if cal and cal.get("warning"):
        t.caption = f"[bold yellow]warning:[/] {cal['warning']}"
    return t


def _psnr(v: Any) -> str:
    if v is None:
        return "-"
    if v == "inf" or (isinstance(v, float) and v == float("inf")):
        return "inf"
    return f"{v:.1f}"


def compare_table_rows(doc: dict[str, Any]) -> list[list[str]]:
    """The precision x target table as strings (shared by the rich and markdown renderers)."""
    out = []
    ref = doc.get("reference")
    rows = ([ref] if ref and ref not in doc.get("rows", []) else []) + list(doc.get("rows", []))
    for r in rows:
        lat = r.get("latency_ms") or {}
        acc = r.get("accuracy") or {}
        worst = r.get("worst") or {}
        p99 = _fmt(lat.get("p99"), ".3f")
        if lat and not lat.get("p99_valid", True):
            p99 += "*"
        if r.get("status") != "ok":
            status = f"FAILED: {r.get('error')}"
        else:
            status = "ok"
            if worst.get("nonfinite"):
                status = f"NaN/Inf x{worst['nonfinite']}"
        top1 = acc.get("top1")
        agree = acc.get("top1_agreement")
        det = r.get("detection") or {}
        out.append([
            str(r.get("precision") or "-"),
            str(r.get("target") or "-"),
            _fmt_bytes(r.get("size_bytes")),
            _fmt(r.get("size_reduction_pct"), ".1f", "%"),
            _fmt(lat.get("p50"), ".3f"),
            p99,
            _fmt(lat.get("qps"), ".0f"),
            _fmt(top1 * 100 if top1 is not None else None, ".2f", "%"),
            _fmt(acc.get("top1_drop_pp"), "+.2f"),
            _fmt(agree * 100 if agree is not None else (det.get("box_agreement", None) and det["box_agreement"] * 100), ".1f", "%"),
            _psnr(worst.get("psnr_db")),
            _fmt(worst.get("cosine"), ".5f"),
            status,
        ])
    return out


COMPARE_COLUMNS = ("precision", "target", "size", "size red.", "p50 ms", "p99 ms", "QPS", "top-1",
                   "Δtop-1 pp", "agree", "PSNR dB", "cosine", "status")


def render_compare(doc: dict[str, Any]) -> Table:
    """convert-and-compare / compare: one row per precision x target, reference first."""
    inputs = doc.get("inputs") or {}
    t = Table(title=f"edgebench: {escape(str(doc.get('model')))}  ({inputs.get('samples')} samples, inputs sha256 "
                    f"{str(inputs.get('sha256'))[:12]})", header_style="bold")
    for c in COMPARE_COLUMNS:
        t.add_column(c, overflow="fold", justify="left" if c in ("precision", "target", "status") else "right")
    for cells in compare_table_rows(doc):
        style = "red" if cells[-1].startswith(("FAILED", "NaN")) else None
        t.add_row(*(escape(c) for c in cells), style=style)
    notes = ["agree = top-1 agreement with TF (box agreement for detection); * p99 from fewer than 662 samples"]
    gate = doc.get("gate") or {}
    for c in gate.get("checks", []):
        if not c.get("passed"):
            notes.append(f"[bold red]GATE FAILED[/] {escape(str(c.get('message')))}")
    if gate.get("checks") and gate.get("passed"):
        notes.append(f"[green]gate passed[/] ({len(gate['checks'])} checks)")
    if inputs.get("synthetic"):
        notes.append("[bold yellow]warning:[/] synthetic inputs: drift only, accuracy is meaningless")
    t.caption = "\n".join(notes)
    return t
