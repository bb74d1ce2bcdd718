"""``edgebench llm-bench``: one line per bundle x shape -- each metric's median over the processes with
its interval -- failed rows with their reason, then the precisions side by side."""

from __future__ import annotations

from typing import Any

from edgebench.core.formats import fmt_bytes, fmt_metric
from edgebench.judge.llm_pairs import SPEEDUP_METRICS, PrecisionPair, option_pairs, precision_pairs
from edgebench.judge.outcome import row_verdict
from edgebench.report.terminal._cells import as_document, e
from edgebench.report.terminal.fit import Col, fit_tables
from edgebench.rows import Document, InferenceRow, Spread

# (stats key, header, unit)
COLUMNS = (("ttft_ms", "TTFT ms", "ms"), ("prefill_tok_s", "prefill tok/s", "tok/s"),
           ("decode_tok_s", "decode tok/s", "tok/s"), ("init_ms", "init ms", "ms"),
           ("peak_rss_bytes", "peak mem", "bytes"))


def spread_cell(s: Spread | None, unit: str) -> str:
    """``median [lo-hi]`` in the metric's unit ('-' when not measured)."""
    if s is None or s.median is None:
        return "-"
    fmt = (lambda v: fmt_bytes(v)) if unit == "bytes" else (lambda v: fmt_metric(unit, v))
    if unit == "bytes" or s.lo is None or s.hi is None or len(s.values) < 2:
        return fmt(s.median)           # memory barely moves between processes: the median says it
    return f"{fmt(s.median)} [{fmt(s.lo)}-{fmt(s.hi)}]"


def interval_legend(rows: list[InferenceRow]) -> str | None:
    levels = sorted({round(s.level, 3) for r in rows if r.llm for s in r.llm.stats.values()
                     if s.level is not None and len(s.values) > 1})
    if not levels:
        return None
    lv = ", ".join(f"{100 * x:.1f}%" for x in levels)
    return (f"median over processes [interval of the median: order statistics, confidence {lv}; below 6 "
            "processes it is [min-max]]")


def _ratio(s) -> str:
    return "-" if s is None else s.cell


def render_llm_bench(doc: Document | dict[str, Any], width: int | None = None, wide: bool = False) -> list[Any]:
    """Pure renderer: the rows table, its legend and warnings, and the precision comparison
    (report/terminal/fit.py widths: what a row is stays, no number or word is cut)."""

    doc = as_document(doc)
    rows = [r for r in doc.rows if isinstance(r, InferenceRow) and r.llm is not None]
    several = len({r.llm.options for r in rows}) > 1       # an engine-option axis: say which row is which
    cols = [Col("model", identity=True), Col("precision", identity=True),
            *([Col("options", identity=True)] if several else []), Col("target", identity=True),
            Col("tokens", identity=True), Col("ctx", num=True, priority=2), Col("runs", num=True, priority=3),
            *[Col(header, num=True, priority=p) for (_k, header, _u), p in zip(COLUMNS, (0, 0, 0, 1, 2))],
            Col("status")]
    body = []
    for r in rows:
        llm = r.llm
        runs = str(len(r.repeats or ())) if r.ok else "-"
        if r.ok:
            cells = [spread_cell(llm.spread(k), u) for k, _h, u in COLUMNS]
            status = row_verdict(r, None).text
        else:
            cells = ["-"] * len(COLUMNS)
            status = "FAILED (below)"
        body.append([r.model, r.precision, *([llm.options] if several else []), r.target,
                     f"{llm.prefill_tokens}+{llm.decode_tokens}",
                     "-" if llm.context_tokens is None else str(llm.context_tokens), runs, *cells, status])
    parts: list[Any] = list(fit_tables("llm-bench: LiteRT-LM", cols, body, width=width, wide=wide))
    legend = interval_legend(rows)
    if legend:
        parts.append(e(legend))
    first = next((r for r in rows if r.llm), None)
    if first is not None:
        warm = first.llm.warmup
        parts.append(e(f"warm-up: {warm} generation(s) per process before the measured one, shown apart in the "
                       f"JSON (llm.warmup_stats); weight cache: {first.llm.weight_cache}; activation: "
                       f"{'see options' if several else first.llm.activation or 'the engine default'}; source: "
                       f"{first.llm.source}"))
    for r in rows:
        if not r.ok:
            opts = f" ({r.llm.options})" if several else ""
            parts.append(e(f"FAILED {r.model} {r.precision}{opts} {r.llm.shape} tokens: {r.error}"))
    for r in rows:
        for w in r.warnings:
            opts = f", {r.llm.options}" if several else ""
            parts.append(e(f"warning ({r.model} {r.precision}{opts} {r.llm.shape}): {w}"))
    parts += context_curve(rows, width=width, wide=wide)
    parts += memory_phases(rows, width=width, wide=wide)
    pairs = precision_pairs(rows)
    if pairs:
        pcols = [Col("model", identity=True), Col("vs", identity=True), Col("tokens", identity=True),
                 Col("size", priority=1), *[Col(label, num=True) for _k, label, _h in SPEEDUP_METRICS],
                 Col("greedy tokens", priority=1)]
        pbody = []
        for p in pairs:
            ag = p.agreement
            agree = "-" if ag is None else (
                f"identical over {ag.compared}" if ag.first_divergence is None else
                f"first divergence at token {ag.first_divergence} of {ag.compared} ({100 * (ag.rate or 0):.0f}% agree)")
            pbody.append([p.model, f"{p.candidate} vs {p.reference}", f"{p.prefill}+{p.decode}",
                          "-" if p.size_ratio is None else f"{p.size_ratio:.2f}x smaller" if p.size_ratio >= 1
                          else f"{1 / p.size_ratio:.2f}x larger",
                          *[_ratio(p.speedup(k)) for k, _l, _h in SPEEDUP_METRICS], agree])
        parts += fit_tables("precisions side by side (speed-up over the reference: >1 = faster)", pcols, pbody,
                            width=width, wide=wide)
    note = (doc.get("comparison") or {}).get("agreement_note") if isinstance(doc.get("comparison"), dict) else None
    if note:
        parts.append(e(note))
    opairs = option_pairs(rows)
    if opairs:
        ocols = [Col("bundle", identity=True), Col("options vs first", identity=True), Col("tokens", identity=True),
                 *[Col(label, num=True) for _k, label, _h in SPEEDUP_METRICS], Col("greedy tokens", priority=1)]
        obody = [[p.model, f"{p.candidate} vs {p.reference}", f"{p.prefill}+{p.decode}",
                  *[_ratio(p.speedup(k)) for k, _l, _h in SPEEDUP_METRICS], agreement_cell(p)] for p in opairs]
        parts += fit_tables("engine options side by side (speed-up over the first value: >1 = faster)", ocols,
                            obody, width=width, wide=wide)
    options = doc.get("engine_options")
    if isinstance(options, dict):
        parts += [e(n) for n in options.get("notes") or ()]
    parts += [e(line) for line in task_score_lines(doc, rows)]
    return parts


PHASE_COLS = tuple((f"{p}_{k}_bytes", f"{p} {k}") for p in ("init", "prefill", "decode") for k in ("peak", "steady"))


def phase_rows(rows: list[InferenceRow]) -> list[list[str]]:
    """(model, precision, options, tokens, six memory cells) of each row with memory per phase."""
    out = []
    for r in rows:
        if r.ok and r.llm is not None and any(r.llm.spread(k) for k, _h in PHASE_COLS):
            out.append([str(r.model), str(r.precision), r.llm.options, r.llm.shape,
                        *[spread_cell(r.llm.spread(k), "bytes") for k, _h in PHASE_COLS]])
    return out


def memory_phases(rows: list[InferenceRow], width: int | None = None, wide: bool = False) -> list[Any]:
    """``--memory-phases``: peak and steady resident memory of init, prefill and decode (median over processes)."""
    body = phase_rows(rows)
    if not body:
        return []
    cols = [Col("model", identity=True), Col("precision", identity=True), Col("options", priority=3),
            Col("tokens", identity=True), *[Col(h, num=True) for _k, h in PHASE_COLS]]
    return list(fit_tables("memory per phase (resident, median over processes; Engine/Session API)", cols, body,
                           width=width, wide=wide))


def agreement_cell(p: PrecisionPair) -> str:
    ag = p.agreement
    if ag is None:
        return "-"
    if ag.first_divergence is None:
        return f"identical over {ag.compared}"
    return f"first divergence at token {ag.first_divergence} of {ag.compared} ({100 * (ag.rate or 0):.0f}% agree)"


def task_score_lines(doc: Document, rows: list[InferenceRow]) -> list[str]:
    """``task score`` per bundle (``--task-score``): right answers / items, the set, the plain caveat."""
    meta = doc.get("task_score")
    if not isinstance(meta, dict):
        return []
    out = [f"task score ({meta.get('task_set')}; exact match, greedy, {meta.get('decode_tokens')} tokens per item):"]
    seen = set()
    for r in rows:
        ts = r.llm.task_score if r.llm is not None else None
        key = (r.model_sha256, r.llm.options if r.llm is not None else "")
        if ts is not None and key not in seen:
            seen.add(key)
            opts = "" if r.llm.options == "engine defaults" else f", {r.llm.options}"
            out.append(f"  {r.model} {r.precision} ({r.model_path.rsplit('/', 1)[-1] if r.model_path else '-'}{opts}): "
                       f"{ts.cell} right")
    for name, err in (meta.get("errors") or {}).items():
        out.append(f"  {name}: not scored: {err}")
    out.append(f"note: {meta.get('note')}")
    return out


CURVE = (("ttft_ms", "TTFT ms", "ms"), ("prefill_tok_s", "prefill tok/s", "tok/s"),
         ("decode_tok_s", "decode tok/s", "tok/s"), ("peak_rss_bytes", "peak mem", "bytes"))


def curves(rows: list[InferenceRow]) -> dict[tuple, list[InferenceRow]]:
    """(model, precision, sha256, decode) -> its ok rows by prefill depth, where there are two depths or more."""
    by: dict[tuple, list[InferenceRow]] = {}
    for r in rows:
        if r.ok and r.llm is not None:
            by.setdefault((r.model, r.precision, r.model_sha256, r.llm.decode_tokens), []).append(r)
    return {k: sorted(v, key=lambda r: r.llm.prefill_tokens) for k, v in by.items()
            if len({r.llm.prefill_tokens for r in v}) > 1}


def context_curve(rows: list[InferenceRow], width: int | None = None, wide: bool = False) -> list[Any]:
    """The context curve (``--context``): per bundle, each depth's medians with intervals and decode
    tok/s relative to the shallowest depth."""

    found = curves(rows)
    if not found:
        return []
    cols = [Col("model", identity=True), Col("precision", identity=True), Col("depth", identity=True, num=True),
            *[Col(h, num=True) for _k, h, _u in CURVE], Col("decode vs first", num=True, priority=1)]
    body = []
    for (model, precision, _sha, decode), rs in found.items():
        first = rs[0].llm.spread("decode_tok_s")
        for r in rs:
            d = r.llm.spread("decode_tok_s")
            rel = "-" if first is None or d is None or not first.median else f"{d.median / first.median:.2f}x"
            body.append([model, precision, f"{r.llm.prefill_tokens}+{decode}",
                         *[spread_cell(r.llm.spread(k), u) for k, _h, u in CURVE], rel])
    return list(fit_tables("context curve (prefill depth + decode tokens)", cols, body, width=width, wide=wide))
