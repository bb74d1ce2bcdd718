"""``llm-bench`` in Markdown and HTML: each metric's median with its interval over the processes, the
failed rows' reasons, and the precisions side by side -- beside the one inference table that already
carries the medians (``report.tables``: TTFT, prefill/decode tok/s, init are registry metrics)."""

from __future__ import annotations

from typing import Callable, Sequence

from edgebench.judge.llm_pairs import SPEEDUP_METRICS, PrecisionPair, option_pairs, precision_pairs
from edgebench.report.terminal.llm import (COLUMNS, CURVE, PHASE_COLS, curves, interval_legend, phase_rows,
                                           spread_cell, task_score_lines)
from edgebench.rows import Document, InferenceRow


def _rows(doc: Document) -> list[InferenceRow]:
    return [r for r in doc.rows if isinstance(r, InferenceRow) and r.llm is not None]


def _agree(p: PrecisionPair) -> str:
    ag = p.agreement
    if ag is None:
        return "-"
    if ag.first_divergence is None:
        return f"identical over {ag.compared} tokens"
    return f"first divergence at token {ag.first_divergence} of {ag.compared} ({100 * (ag.rate or 0):.0f}% agree)"


def _ratio(p: PrecisionPair, key: str) -> str:
    s = p.speedup(key)
    return "-" if s is None else s.cell


def _size(p: PrecisionPair) -> str:
    if p.size_ratio is None:
        return "-"
    return f"{p.size_ratio:.2f}x smaller" if p.size_ratio >= 1 else f"{1 / p.size_ratio:.2f}x larger"


def tables(doc: Document) -> list[tuple[str, list[str], list[list[str]]]]:
    """(title, headers, rows) of the intervals table and the comparison table (empty when none)."""
    rows = _rows(doc)
    if not rows:
        return []
    out = []
    body = []
    for r in rows:
        cells = [spread_cell(r.llm.spread(k), u) for k, _h, u in COLUMNS] if r.ok else ["-"] * len(COLUMNS)
        body.append([str(r.model), str(r.precision), str(r.target), r.llm.shape, str(r.llm.context_tokens),
                     str(len(r.repeats or ())) if r.ok else "-", *cells, "ok" if r.ok else f"failed: {r.error}"])
    out.append(("Over the processes (median [interval])",
                ["model", "precision", "target", "tokens", "context", "processes", *[h for _k, h, _u in COLUMNS],
                 "status"], body))
    curve_body = []
    for (model, precision, _sha, decode), rs in curves(rows).items():
        first = rs[0].llm.median("decode_tok_s")
        for r in rs:
            d = r.llm.median("decode_tok_s")
            curve_body.append([str(model), str(precision), f"{r.llm.prefill_tokens}+{decode}",
                               *[spread_cell(r.llm.spread(k), u) for k, _h, u in CURVE],
                               "-" if not first or d is None else f"{d / first:.2f}x"])
    if curve_body:
        out.append(("Context curve (prefill depth + decode tokens; median [interval])",
                    ["model", "precision", "depth", *[h for _k, h, _u in CURVE], "decode vs first"], curve_body))
    phases = phase_rows(rows)
    if phases:
        out.append(("Memory per phase (resident, median over processes)",
                    ["model", "precision", "options", "tokens", *[h for _k, h in PHASE_COLS]], phases))
    pairs: Sequence[PrecisionPair] = precision_pairs(rows)
    if pairs:
        out.append(("Precisions side by side (speed-up over the reference, >1 = faster)",
                    ["model", "vs", "tokens", "size", *[label for _k, label, _h in SPEEDUP_METRICS], "greedy tokens"],
                    [[p.model, f"{p.candidate} vs {p.reference}", f"{p.prefill}+{p.decode}", _size(p),
                      *[_ratio(p, k) for k, _l, _h in SPEEDUP_METRICS], _agree(p)] for p in pairs]))
    opairs = option_pairs(rows)
    if opairs:
        out.append(("Engine options side by side (speed-up over the first value, >1 = faster)",
                    ["bundle", "options vs first", "tokens", *[label for _k, label, _h in SPEEDUP_METRICS],
                     "greedy tokens"],
                    [[p.model, f"{p.candidate} vs {p.reference}", f"{p.prefill}+{p.decode}",
                      *[_ratio(p, k) for k, _l, _h in SPEEDUP_METRICS], _agree(p)] for p in opairs]))
    return out


def notes(doc: Document) -> list[str]:
    rows = _rows(doc)
    out = [x for x in (interval_legend(rows),) if x]
    comparison = doc.get("comparison")
    if isinstance(comparison, dict) and comparison.get("agreement_note"):
        out.append(str(comparison["agreement_note"]))
    out += task_score_lines(doc, rows)
    return out


def markdown_lines(doc: Document, esc: Callable[[object], str]) -> list[str]:
    out: list[str] = []
    for title, headers, body in tables(doc):
        out += ["", f"**{esc(title)}**", "", "| " + " | ".join(esc(h) for h in headers) + " |",
                "|" + "|".join("---" for _ in headers) + "|"]
        out += ["| " + " | ".join(esc(c) for c in row) + " |" for row in body]
    for n in notes(doc):
        out += ["", esc(n)]
    return out
