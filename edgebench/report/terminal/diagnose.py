"""``edgebench diagnose``: the worst layers per precision with advice; the ``--keep-float auto``
candidates (the size/latency/accuracy trade-off to choose from)."""

from __future__ import annotations

import re
import shlex
from typing import Any, Mapping

from edgebench.judge.outcome import TOP1_CHANGE, top1_change
from edgebench.core.formats import fmt_bytes
from edgebench.core.latency import MIN_SAMPLES
from edgebench.report.tables import INVALID_MARK
from edgebench.report.diagnose import (BISECT_COLUMNS, LAYER_COLUMNS, TOP, _layer_cells, _n, _notes, _short,
                                       accelerator_label, accuracy_text, bisect_notes, bisect_of, bisect_probes, commands,
                                       diagnosed_rows, diagnosis, document, probe_cells)
from edgebench.report.terminal._cells import WholeLine, e, fit_columns
from edgebench.report.terminal.fit import Col, fit_tables
from edgebench.rows import Document, KeepFloatSearch

# The layer table's columns (LAYER_COLUMNS, then "finding"): header as drawn (a header of two words
# takes two lines, so a column is as wide as its numbers) and priority (0 = always shown, higher =
# hidden first when the terminal is narrow). Kept at any width: which layer (rank, op#node, tensor),
# the number the ranking used (iso ch SNR) and whether it is a finding; then the accumulated error.
_NAMES = (*LAYER_COLUMNS, "finding")
_HEADERS = {"rmse/scale": "rmse/\nscale", "SNR dB": "SNR\ndB", "iso SNR": "iso\nSNR", "iso ch SNR": "iso ch\nSNR"}
_PRIORITY = {"rank": 0, "op#node": 0, "tensor": 0, "iso ch SNR": 0, "finding": 0, "SNR dB": 1, "rmse/scale": 2,
             "iso SNR": 3, "scale": 4, "cosine": 5, "outliers": 6}
# The two name columns take what the others leave, their names broken into lines where a name
# has parts (never a number: those columns never wrap). Each is counted at least this wide.
_BREAKS = {"op#node": r"(?<=_)|(?=#)", "tensor": r"(?<=/)|(?=:)"}    # after "_" / before "#"; after "/" / before ":"
_NAME_MIN = {"op#node": 18, "tensor": 20}


def _header(name: str) -> str:
    return _HEADERS[name] if name in _HEADERS else name


def _natural(i: int, rows: list[list[str]]) -> int:
    """Column i's width unwrapped: its widest cell or header line."""
    return max([len(line) for line in _header(_NAMES[i]).split("\n")] + [len(r[i]) for r in rows])


def _layout(rows: list[list[str]], width: int | None, wide: bool) -> tuple[list[int], list[str], dict[str, int | None]]:
    """The columns shown (and the names of those hidden) and the width of each name column."""
    flex = {i: min(_natural(i, rows), _NAME_MIN[n] if n in _NAME_MIN else 10 ** 6) for i, n in enumerate(_NAMES)}
    keep, dropped = fit_columns([(n, _PRIORITY[n]) for n in _NAMES], rows, width, wide, flex=flex)
    if not width or wide:
        return keep, dropped, {n: None for n in _BREAKS}
    fixed = sum(_natural(i, rows) + 3 for i in keep if _NAMES[i] not in _BREAKS)
    left = width - 1 - fixed - 3 * sum(1 for i in keep if _NAMES[i] in _BREAKS)
    op, tensor = _NAMES.index("op#node"), _NAMES.index("tensor")
    op_w = min(_natural(op, rows), max(_NAME_MIN["op#node"], left - min(_natural(tensor, rows), _NAME_MIN["tensor"])))
    op_w = max([len("op#node")] + [len(line) for r in rows
                                     for line in wrap_name(r[op], op_w, _BREAKS["op#node"]).split("\n")])
    return keep, dropped, {"op#node": op_w, "tensor": max(left - op_w, _NAME_MIN["tensor"])}


def wrap_name(name: str, width: int | None, breaks: str) -> str:
    """A name in lines of at most ``width``, broken only where ``breaks`` (a zero-width regex)
    matches -- a tensor after "/", an op after "_" -- so "a/b/MatMul" is never drawn as "a/b/M"
    over "atMul"; a part longer than a line is folded."""
    if not width or len(name) <= width:
        return name
    lines, line = [], ""
    for part in (p for p in re.split(breaks, name) if p):
        while len(part) > width:                   # a part longer than a line: fold it
            if line:
                lines.append(line)
                line = ""
            lines.append(part[:width])
            part = part[width:]
        if len(line) + len(part) > width:
            lines.append(line)
            line = ""
        line += part
    if line:
        lines.append(line)
    return "\n".join(lines)


def render_diagnose(doc: Document | Mapping[str, Any], top: int = TOP, *, width: int | None = None,
                    wide: bool = False) -> list:
    """One table per diagnosed precision: the ``top`` worst layers, findings in red; at a narrow
    ``width`` the least important columns are hidden (and named; ``wide`` keeps them all) rather
    than a number split over two lines. Under it, each finding's advice and the commands that prove
    the fix, each whole on a line of its own (``WholeLine``: never cropped or wrapped mid-word, so
    copy and paste runs a command or a --keep-float name as printed)."""
    doc = document(doc)
    out: list = []
    src = doc.source_record
    if src.note:     # a vendor .tflite against its float .tflite
        out.append(f"{e(str(src.path))} against --reference {e(str(src.reference))}: {e(src.note)}")
    for row in diagnosed_rows(doc):
        if bisect_of(row) is not None:
            out.extend(_bisect_table(doc, row, width))
            continue
        d = diagnosis(row)
        samples = "-" if d.samples is None else d.samples
        title = (f"edgebench diagnose: {e(str(doc.get('model')))} {e(str(row.precision))}"
                 f"  ({samples} samples; {e(accuracy_text(row, doc))})")
        if row.status != "ok":
            out.extend(fit_tables(title, [Col("status")], [[f"{row.status}: {row.error}"]], width=width,
                                  markup_title=True))
            continue
        shown = d.layers[:top]
        cells = [_layer_cells(l) + ["yes" if l.finding else ""] for l in shown]
        keep, dropped, name_w = _layout(cells, width, wide)
        # the names are broken where they have parts (after "/" or "_"), one part a line, before the
        # width engine lays the table out (report/terminal/fit.py: it wraps between words only)
        cols = [Col(_header(_NAMES[i]), num=_NAMES[i] not in ("op#node", "tensor", "finding"),
                    identity=_NAMES[i] == "rank", whole=max(map(len, _header(_NAMES[i]).split("\n"))))
                for i in keep]      # a header's lines as written ("iso ch" over "SNR")
        body = [[wrap_name(c[i], name_w[_NAMES[i]], _BREAKS[_NAMES[i]]) if _NAMES[i] in _BREAKS else c[i]
                 for i in keep] for c in cells]
        notes = [e(x) for x in _notes(row, suggested=False)]
        if dropped:
            notes.append(f"hidden to fit the terminal: {e(', '.join(dropped))} (--wide shows every column)")
        out.extend(fit_tables(title, cols, body, width=width, wide=True, markup_title=True, caption=notes,
                              row_styles=["red" if l.finding else None for l in shown]))
        advice = [WholeLine(f"#{l.rank} {_short(l.tensor)}: {l.advice}") for l in shown if l.finding]
        if advice:
            out.append("advice:")
            out.extend(advice)
        if d.suggested_keep_float:
            out.append(WholeLine("suggested: --keep-float " + shlex.quote(",".join(d.suggested_keep_float))))
        proof = (row.unknown or {}).get("fix_proof")
        if proof:
            out.extend(_proof_lines(proof))
        if commands(row):
            out.append("the commands that rebuild and gate them:" if proof else "prove it:")
            out.extend(WholeLine(c) for c in commands(row))
    return out


def _bisect_table(doc: Document, row, width: int | None) -> list:
    """``diagnose --accelerator``: the probes along the graph (the culprit in red), then the verdict,
    the culprit's ranges and the cost, each whole on a line of its own (the software-GPU note among
    them: the row's warning says the same)."""
    b = bisect_of(row)
    title = (f"edgebench diagnose: {e(str(doc.get('model')))} on {e(accelerator_label(row))} vs CPU"
             f"  ({b.samples} samples; {b.compiles} compiles for {b.ops} ops)")
    culprit = (b.culprit or {}).get("node")
    probes = bisect_probes(b)
    cols = [Col(n, num=n not in ("op#node", "tensor", "shape", "departs"), identity=n == "probe",
                priority={"shape": 2, "cosine": 1, "NaN": 3}.get(n, 0)) for n in BISECT_COLUMNS]
    out = list(fit_tables(title, cols, [probe_cells(p) for p in probes], width=width, markup_title=True,
                          row_styles=["red" if p.node == culprit else ("yellow" if p.departs else None) for p in probes]))
    out.extend(WholeLine(n) for n in bisect_notes(row))
    return out


def _proof_lines(proof: Mapping[str, Any]) -> list:
    """The fixes diagnose built and measured itself (a .tflite pair, ai-edge-quantizer)."""
    offered = proof.get("offered")
    head = ("proven" if proof.get("proven") else "tried, nothing better than the file" if offered == 0
            else "tried, goal not met") + f" ({e(str(proof.get('quantizer')))}"
    head += f"; goal {e(str(proof['goal']))}):" if proof.get("goal") else "):"
    out: list = [head]
    for c in proof.get("candidates") or ():
        top1 = "" if c.get("top1") is None else f"top-1 {c['top1'] * 100:.2f}%"
        drop = "" if c.get("top1_drop_pp") is None else f" ({top1_change(c['top1_drop_pp'])} pp vs float)"
        psnr = "" if c.get("psnr_db") is None else f", PSNR {_n(c['psnr_db'])} dB"
        verdict = {True: "meets the goal", False: "misses the goal", None: ""}[c.get("meets_goal")]
        if c.get("tried"):       # checked and not offered (diagnose.fix.no_better)
            verdict = f"{c['tried']}; not offered"
        out.append(WholeLine(f"  {c['fix']} ({', '.join(_short(t) for t in c.get('tensors') or ())}): {top1}{drop}{psnr}, "
                             f"{c['bytes'] / 1024:.1f} KiB ({c.get('size_reduction_pct')}% smaller) -- {verdict}"))
    return out


def render_keep_float_table(search: KeepFloatSearch | Mapping[str, Any] | None,
                            width: int | None = None) -> list:
    """The ``--keep-float auto`` candidates: kept-float layers, size, latency, accuracy ([] without a
    search). The kept tensors are the identity of a candidate: shown whole, one name a line."""
    if not search:
        return []
    s = search if isinstance(search, KeepFloatSearch) else KeepFloatSearch.from_dict(search)
    # a candidate is its number and how many tensors it keeps; the names (long, and one "word" each)
    # follow the table whole, one candidate a line
    cols = [Col("#", num=True, identity=True), Col("kept float", identity=True), Col("size", num=True, priority=2),
            Col("size red.", num=True), Col("p50 ms", num=True), Col("p99 ms", num=True, priority=1),
            Col("top-1", num=True, priority=3), Col(TOP1_CHANGE, num=True), Col("PSNR dB", num=True), Col("goal")]
    rows, styles, names = [], [], []
    for k, c in enumerate(s.candidates, 1):
        p99 = _n(c.p99_ms, 3) + ("" if c.p99_valid is not False else INVALID_MARK)
        if c.keep_float:
            names.append(f"#{k} keeps float: {', '.join(c.keep_float)}")
        rows.append([str(k), f"{len(c.keep_float)} tensor{'s' * (len(c.keep_float) != 1)}" if c.keep_float
                     else "none (plain int8)", fmt_bytes(c.bytes),
                     _n(c.size_reduction_pct, 1) + "%", _n(c.p50_ms, 3), p99,
                     "-" if c.top1 is None else f"{c.top1 * 100:.2f}%", top1_change(c.top1_drop_pp), _n(c.psnr_db),
                     ("chosen" if c.chosen else "") + (" meets" if c.meets_goal else " misses")])
        styles.append("green" if c.chosen else None)
    starred = any(c.p99_valid is False for c in s.candidates)
    caption = [x for x in (s.stopped_early, str(s.method or ""),
                           f"{INVALID_MARK} p99 from fewer than {MIN_SAMPLES['p99']} samples: not valid"
                           if starred else "") if x]
    # the names whole, each on a line of its own (WholeLine: never wrapped or cropped by us; a
    # tensor name is one word, often longer than the terminal)
    return [*fit_tables(f"keep-float search (goal: {s.goal}; {'met' if s.met else 'NOT met'}; "
                        f"{s.evaluated} models evaluated)", cols, rows, width=width, row_styles=styles),
            *(WholeLine(n) for n in names), *(e(x) for x in caption)]
