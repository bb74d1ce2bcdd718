"""``edgebench diagnose``: the worst layers per precision with advice; the ``--keep-float auto``
candidates (the size/latency/accuracy trade-off to choose from)."""

from __future__ import annotations

from typing import Any, Mapping

from rich.table import Table

from edgebench.outcome import TOP1_CHANGE, top1_change
from edgebench.formats import fmt_bytes, num
from edgebench.report.diagnose import (LAYER_COLUMNS, TOP, accuracy_text, _layer_cells, _n, _notes, _short,
                                       commands)
from edgebench.report.terminal._cells import WholeLine, e
from edgebench.rows import Document


def render_diagnose(doc: Document | Mapping[str, Any], top: int = TOP) -> list:
    """One table per diagnosed precision: the ``top`` worst layers, findings in red, advice under
    it; then the commands that prove the fix, each whole on a line of its own (``WholeLine``: never
    cropped or wrapped mid-word, so copy and paste runs it)."""
    doc = doc.to_dict() if isinstance(doc, Document) else doc
    out = []
    for row in doc.get("rows", []):
        t = Table(title=f"edgebench diagnose: {e(str(doc.get('model')))} {e(str(row.get('precision')))}"
                        f"  ({row.get('samples', '-')} samples; {e(accuracy_text(row))})", header_style="bold",
                  caption_justify="left")
        if row.get("status") != "ok":
            t.add_column("status")
            t.add_row(e(f"{row.get('status')}: {row.get('error')}"))
            out.append(t)
            continue
        for c in (*LAYER_COLUMNS, "finding"):
            t.add_column(c, overflow="fold", justify="left" if c in ("op#node", "tensor", "finding") else "right",
                         min_width=28 if c == "tensor" else None)
        shown = (row.get("layers") or [])[:top]
        for l in shown:
            t.add_row(*(e(c) for c in _layer_cells(l)), "yes" if l.get("finding") else "",
                      style="red" if l.get("finding") else None)
        advice = [f"#{l['rank']} {_short(l.get('tensor'))}: {l.get('advice')}" for l in shown if l.get("finding")]
        t.caption = "\n".join(e(x) for x in advice + _notes(row))
        out.append(t)
        if commands(row):
            out.append("prove it:")
            out.extend(WholeLine(c) for c in commands(row))
    return out


def render_keep_float_table(search: Mapping[str, Any] | None) -> list[Table]:
    """The ``--keep-float auto`` candidates: kept-float layers, size, latency, accuracy ([] without a search)."""
    if not search:
        return []
    t = Table(title=f"keep-float search (goal: {e(str(search.get('goal')))}; "
                    f"{'met' if search.get('met') else 'NOT met'}; {search.get('evaluated')} models evaluated)",
              header_style="bold", caption_justify="left")
    for c in ("kept float", "size", "size red.", "p50 ms", "p99 ms", "top-1", TOP1_CHANGE, "PSNR dB", "goal"):
        t.add_column(c, overflow="fold", justify="left" if c == "kept float" else "right")
    for c in search.get("candidates", []):
        kept = ", ".join(_short(x, 40) for x in c.get("keep_float") or []) or "(none: plain int8)"
        top1 = num(c.get("top1"))
        p99 = _n(c.get("p99_ms"), 3) + ("" if c.get("p99_valid", True) else "*")
        t.add_row(e(kept), fmt_bytes(c.get("bytes")), _n(c.get("size_reduction_pct"), 1) + "%",
                  _n(c.get("p50_ms"), 3), p99, "-" if top1 is None else f"{top1 * 100:.2f}%",
                  top1_change(num(c.get("top1_drop_pp"))), _n(c.get("psnr_db")),
                  ("chosen" if c.get("chosen") else "") + (" meets" if c.get("meets_goal") else " misses"),
                  style="green" if c.get("chosen") else None)
    t.caption = e("\n".join(x for x in (search.get("stopped_early"), str(search.get("method") or "")) if x))
    return [t]
