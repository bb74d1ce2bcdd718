"""Renderers of ``edgebench diagnose`` results (pure; a ``Document`` or its stored/JSON form in).

``markdown_lines``   GitHub Markdown for a PR comment (called by report.markdown)
``html_section``     HTML: error along the graph order + the top layers (called by report.html)
``model_explorer``   node data for google-ai-edge/model-explorer (per op value and colour)
The terminal tables (layers, keep-float candidates) are in ``report.terminal.diagnose``.

Each entry point types its input once (``Document.from_dict`` / ``InferenceRow.from_dict``) and
reads the diagnose keys as ``InferenceRow.diagnosis`` (``rows.diagnosis``): a misspelt field
fails instead of printing "-". The one mapping read by key is ``InferenceRow.memory``, which every
producer fills with its own facts (free-form on the row; the diagnose worker writes its peak and
its bound there).
"""

from __future__ import annotations

import html
import math
from typing import Any, Callable, Mapping, Sequence

from edgebench.core.formats import fmt_bytes, num
from edgebench.judge.outcome import top1_change
from edgebench.report.html_parts import svg_lines
from edgebench.rows import Bisect, Diagnosis, Document, InferenceRow, Layer, Probe

TOP = 10
# Model Explorer colours nodes by value; SNR is clipped so "no error" (inf) stays a number.
ME_SNR_RANGE = (-20.0, 100.0)
ME_GRADIENT = [{"stop": 0, "bgColor": "#d62728"}, {"stop": 0.35, "bgColor": "#ff9f1c"},
               {"stop": 0.6, "bgColor": "#ffe066"}, {"stop": 1, "bgColor": "#a7e08f"}]


UNMATCHED_SHOWN = 5      # unmatched tensors named in a note (the JSON lists every one)


def _n(v: Any, digits: int = 1) -> str:
    f = num(v)
    if f is None:
        return "-"
    if math.isinf(f):
        return "inf" if f > 0 else "-inf"
    if f != 0 and abs(f) < 10 ** -digits:
        return f"{f:.2g}"
    return f"{f:,.{digits}f}"


def _g(v: Any) -> str:
    f = num(v)
    return "-" if f is None else (_n(f) if math.isinf(f) else f"{f:.3g}")


def _short(name: Any, limit: int = 48) -> str:
    s = str(name or "-").split(";")[0]
    return s if len(s) <= limit else "…" + s[-(limit - 1):]


def _layer_cells(l: Layer) -> list[str]:
    return [str(l.rank), f"{l.op}#{l.node}", _short(l.tensor), _g(l.scale), _n(l.rmse_over_scale, 2), _n(l.snr_db),
            _n(l.isolated_snr_db), _n(l.isolated_channel_snr_db), _n(l.cosine, 4), _n(l.outlier_ratio, 0)]


LAYER_COLUMNS = ("rank", "op#node", "tensor", "scale", "rmse/scale", "SNR dB", "iso SNR", "iso ch SNR",
                 "cosine", "outliers")


BISECT_COLUMNS = ("probe", "op#node", "tensor", "shape", "max abs", "PSNR dB", "cosine", "NaN", "Inf", "departs")


# --------------------------------------------------------------------------- typed once, at the entry


def document(doc: Document | Mapping[str, Any]) -> Document:
    """A diagnose document typed (the stored/JSON form is read once, here)."""
    return doc if isinstance(doc, Document) else Document.from_dict(doc)


def as_row(row: InferenceRow | Mapping[str, Any]) -> InferenceRow:
    """One diagnosed row typed (report.html hands its rows over in their JSON form)."""
    return row if isinstance(row, InferenceRow) else InferenceRow.from_dict(row)


def diagnosis(row: InferenceRow) -> Diagnosis:
    """The row's diagnosis; an empty one for a row without (no layers were compared)."""
    return row.diagnosis if row.diagnosis is not None else Diagnosis()


def bisect_of(row: InferenceRow) -> Bisect | None:
    """The accelerator bisect of a ``diagnose --accelerator`` row (None for an INT8 diagnose row)."""
    b = (row.unknown or {}).get("bisect")
    return Bisect.from_dict(b) if isinstance(b, Mapping) else None


def diagnosed_rows(doc: Document) -> list[InferenceRow]:
    return [r for r in doc.rows if isinstance(r, InferenceRow)]


# --------------------------------------------------------------------------- shared text


def against(doc: Document | None) -> str:
    """What the drift and accuracy were measured against: TF, PyTorch (a PyTorch source), or the
    float .tflite of ``--reference`` (no TensorFlow ran then)."""
    ref = doc.reference if doc is not None else None
    if ref is None or ref.precision in (None, "tf"):
        return "TF"
    return "PyTorch" if ref.precision == "torch" else "the float .tflite"


def accuracy_text(row: InferenceRow | Mapping[str, Any], doc: Document | None = None) -> str:
    row = as_row(row)
    acc, worst = row.accuracy, row.worst
    parts = []
    if acc is not None and acc.top1 is not None:
        drop = acc.top1_drop_pp
        parts.append(f"top-1 {acc.top1 * 100:.2f}%" + ("" if drop is None else
                                                       f" ({top1_change(drop)} pp vs {against(doc)})"))
    if acc is not None and acc.top1_agreement is not None:
        parts.append(f"agreement {acc.top1_agreement * 100:.1f}%")
    if worst is not None and worst.psnr_db is not None:
        parts.append(f"output PSNR {_n(worst.psnr_db)} dB")
    return ", ".join(parts) or "no task metric"


def commands(row: InferenceRow) -> list[str]:
    """The commands that prove the fix (each runs as printed; shown whole, on lines of their own)."""
    return list(diagnosis(row).fix_commands[:2])


def suggested_note(d: Diagnosis) -> str | None:
    return ("suggested --keep-float: " + ", ".join(_short(x) for x in d.suggested_keep_float)
            if d.suggested_keep_float else None)


def _notes(row: InferenceRow, suggested: bool = True) -> list[str]:
    """The notes under a precision's table; ``suggested=False`` leaves out the suggested
    --keep-float names (the terminal prints them whole, on a line of their own)."""
    d = diagnosis(row)
    notes = [f"{d.findings or 0} finding(s) among {len(d.layers)} layers; "
             "iso = the op alone fed the float model's values; rounding alone gives rmse/scale 0.289"]
    if d.verdict:
        notes.append(d.verdict)
    if d.fix_trials:
        gains = sorted((t.get("gain_db") for t in d.fix_trials if t.get("gain_db") is not None), reverse=True)
        best = f" (best +{gains[0]:.1f} dB)" if gains and gains[0] > 0 else ""
        notes.append(f"ranked by the measured gain of keeping a layer float: {len(d.fix_trials)} layers re-quantized "
                     f"with it float and run{best}; the others follow in their own order")
    if d.proof_note:
        notes.append(d.proof_note)
    if suggested and d.suggested_keep_float:
        notes.append(suggested_note(d))
    inter = d.intermediates
    if inter is not None and not inter.preserved:
        notes.append(f"LiteRT#413: preserving intermediates changed outputs; read them as: float {inter.float}, "
                     f"quantized {inter.quantized}")
    dep = None if inter is None else inter.deployed_vs_builtin_max_diff
    if dep:
        notes.append(f"per-layer numbers use the builtin kernels; the deployed run (default delegate, whose accuracy "
                     f"is shown) differs from them by up to {dep:.3g} on the final outputs")
    if d.unmatched:
        names = ", ".join(f"{u.tensor} ({u.op}{': ' + u.reason if u.reason else ''})" for u in d.unmatched[:UNMATCHED_SHOWN])
        more = f" and {len(d.unmatched) - UNMATCHED_SHOWN} more (all in the JSON)" if len(d.unmatched) > UNMATCHED_SHOWN else ""
        notes.append(f"{len(d.unmatched)} quantized tensor(s) could not be matched to a float tensor, so they have no "
                     f"layer row: {names}{more}")
    mem = row.memory or {}      # free-form on InferenceRow: each producer's own memory facts
    if mem.get("peak_rss_bytes"):
        notes.append(f"worker peak RSS {fmt_bytes(mem['peak_rss_bytes'])} (bound {fmt_bytes(mem.get('bound_bytes'))})")
    return notes


# --------------------------------------------------------------------------- the accelerator bisect


def accelerator_label(row: InferenceRow) -> str:
    return f"{row.accelerator or '?'}{' ' + row.gpu_precision if row.gpu_precision else ''}".upper().replace("FP", "fp")


def probe_cells(p: Probe) -> list[str]:
    """One probe, by its op's own output (the worst exposed tensor when the op has none)."""
    t = p.output or p.worst or {}
    bad = (t.get("nan") or 0) + (t.get("inf") or 0)
    return [str(p.probe), f"{p.op}#{p.node}", _short(p.tensor or t.get("tensor")), "x".join(str(x) for x in t.get("shape") or ()),
            _g(t.get("finite_max_abs")), "n/a" if bad and t.get("psnr_db") is None else _n(t.get("psnr_db")),
            _n(t.get("cosine"), 4), str(t.get("nan") or 0), str(t.get("inf") or 0), "yes" if p.departs else ""]


def bisect_probes(b: Bisect) -> list[Probe]:
    """The probes along the graph (execution order); each keeps the number it was run as."""
    return sorted(b.probes, key=lambda p: (p.node if p.node is not None else -1))


def bisect_notes(row: InferenceRow) -> list[str]:
    """Under a bisect table: the verdict, the culprit's ranges, the cost, and what the GPU was."""
    b = bisect_of(row)
    if b is None:
        return []
    notes = [b.verdict] if b.verdict else []
    c = b.culprit
    if c:
        notes.append(f"culprit {c.get('op')}#{c.get('node')} {_short(c.get('tensor'))} shape {list(c.get('shape') or [])}: "
                     f"CPU range [{_g(c.get('ref_min'))}, {_g(c.get('ref_max'))}], {accelerator_label(row)} range "
                     f"[{_g(c.get('acc_min'))}, {_g(c.get('acc_max'))}], {c.get('nan') or 0} NaN, {c.get('inf') or 0} Inf"
                     + (f"; reads {', '.join(_short(x, 32) for x in c.get('inputs') or ())}" if c.get("inputs") else ""))
        if c.get("probe_model"):
            notes.append(f"the culprit's probe (the model cut after it): {c['probe_model']}")
    notes.append(f"{b.compiles} accelerator compile(s) for {b.ops} ops (bisection bound 1 + ceil(log2(ops)) = "
                 f"{b.compile_bound}), {b.samples} samples each, {_n(b.seconds, 1)} s; a tensor departs below "
                 f"{_n(b.min_psnr_db)} dB PSNR vs the CPU or with NaN/Inf the CPU lacks; max abs over elements finite on both sides")
    if b.inputs_note:
        notes.append(b.inputs_note)
    if b.software_gpu:
        notes.append(f"software GPU ({b.adapter}): precision and lowering, not a vendor driver's bugs or speed")
    return notes


# --------------------------------------------------------------------------- markdown


def markdown_lines(doc: Document | Mapping[str, Any], escape_cell: Callable[[Any], str], top: int = TOP) -> list[str]:
    """Diagnose section for a PR comment; ``escape_cell`` is report.markdown's cell escaper."""
    out: list[str] = []
    doc = document(doc)
    for row in diagnosed_rows(doc):
        b = bisect_of(row)
        if b is not None:
            out += ["", f"**{escape_cell(accelerator_label(row))} vs CPU**", "",
                    "| " + " | ".join(BISECT_COLUMNS) + " |", "|" + "|".join("---" if i in (1, 2, 3, 9) else "---:"
                                                                        for i in range(len(BISECT_COLUMNS))) + "|"]
            for p in bisect_probes(b):
                cells = [escape_cell(c) for c in probe_cells(p)]
                if b.culprit and p.node == b.culprit.get("node"):
                    cells[1] = f"**{cells[1]}**"
                out.append("| " + " | ".join(cells) + " |")
            out += [""] + [f"- {escape_cell(n)}" for n in bisect_notes(row)]
            continue
        out += ["", f"**{escape_cell(row.precision)}**: {escape_cell(accuracy_text(row, doc))}", ""]
        if row.status != "ok":
            out.append(f"_{escape_cell(row.status)}: {escape_cell(row.error)}_")
            continue
        head = [*LAYER_COLUMNS, "advice"]
        out += ["| " + " | ".join(head) + " |", "|" + "|".join("---" if i in (1, 2, 10) else "---:"
                                                             for i in range(len(head))) + "|"]
        for l in diagnosis(row).layers[:top]:
            cells = [escape_cell(c) for c in _layer_cells(l)] + [escape_cell(l.advice)]
            if l.finding:
                cells[0] = f"**{cells[0]}**"
            out.append("| " + " | ".join(cells) + " |")
        out += [""] + [f"- {escape_cell(n)}" for n in _notes(row)]
        if commands(row):      # whole, in a code block: copy and paste runs them
            out += ["", "Prove it:", "", "```", *commands(row), "```"]
    return out


# --------------------------------------------------------------------------- html

_SERIES: tuple[tuple[str, Callable[[Layer], float | None]], ...] = (
    ("accumulated SNR", lambda l: l.snr_db), ("isolated SNR", lambda l: l.isolated_snr_db),
    ("isolated median-channel SNR", lambda l: l.isolated_channel_snr_db))


def html_section(docs: Sequence[Document | Mapping[str, Any]]) -> str:
    """Per diagnosed precision: SNR along the graph order (accumulated and isolated) and the top layers."""

    parts = []
    for doc in (document(d) for d in docs):
        for row in diagnosed_rows(doc):
            b = bisect_of(row)
            if b is not None:
                parts.append(_bisect_html(doc, row, b))
                continue
            layers = [l for l in diagnosis(row).layers if l.node is not None]
            title = f"{doc.get('model')} {row.precision}: {accuracy_text(row, doc)}"   # Document.get: the envelope's meta
            parts.append(f"<h3>{html.escape(title)}</h3>")
            if row.status != "ok" or not layers:
                parts.append(f'<p class="note">{html.escape(str(row.error or "no layers"))}</p>')
                continue
            series = []
            for label, value in _SERIES:
                pts = [(float(l.node), _clip(value(l))) for l in layers if value(l) is not None]
                if pts:
                    series.append((label, [p[0] for p in pts], [p[1] for p in pts]))
            if series:
                parts.append(svg_lines(series, xlabel="node (graph order)", ylabel="SNR dB (clipped to 100)",
                                       title="error along the graph", y0=False))
            head = "".join(f"<th>{html.escape(c)}</th>" for c in (*LAYER_COLUMNS, "advice"))
            body = []
            for l in diagnosis(row).layers[:TOP]:
                cls = ' class="bad"' if l.finding else ""
                cells = "".join(f"<td>{html.escape(c)}</td>" for c in _layer_cells(l))
                body.append(f"<tr{cls}>{cells}<td class=\"l\">{html.escape(str(l.advice or ''))}</td></tr>")
            parts.append(f'<div class="tw"><table><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody>'
                         "</table></div>")
            parts += [f'<p class="note">{html.escape(n)}</p>' for n in _notes(row)]
            parts += [f"<p>prove it: <code>{html.escape(c)}</code></p>" for c in commands(row)]
    return "".join(parts)


def _bisect_html(doc: Document, row: InferenceRow, b: Bisect) -> str:
    probes = bisect_probes(b)
    out = [f"<h3>{html.escape(str(doc.get('model')))}: {html.escape(accelerator_label(row))} vs CPU</h3>"]
    pts = [(float(p.node), _clip(_probe_db(p))) for p in probes if p.node is not None]
    if len(pts) > 1:
        out.append(svg_lines([("probe PSNR", [x for x, _ in pts], [y for _, y in pts])], xlabel="op (execution order)",
                             ylabel="PSNR dB vs CPU (clipped; NaN/Inf at the bottom)", title="drift along the graph", y0=False))
    head = "".join(f"<th>{html.escape(c)}</th>" for c in BISECT_COLUMNS)
    body = []
    for p in probes:
        cls = ' class="bad"' if p.departs else ""
        body.append(f"<tr{cls}>" + "".join(f"<td>{html.escape(c)}</td>" for c in probe_cells(p)) + "</tr>")
    out.append(f'<div class="tw"><table><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table></div>')
    out += [f'<p class="note">{html.escape(n)}</p>' for n in bisect_notes(row)]
    return "".join(out)


def _probe_db(p: Probe) -> float | None:
    """A probe's value for a chart or Model Explorer: its op's output PSNR; NaN/Inf count as the worst."""
    t = p.output or p.worst or {}
    if (t.get("nan") or 0) + (t.get("inf") or 0) > (t.get("ref_nonfinite") or 0):
        return ME_SNR_RANGE[0]
    return num(t.get("psnr_db"))


def _clip(v: float | None) -> float:
    lo, hi = ME_SNR_RANGE
    return lo if v is None or v < lo else min(v, hi)


# --------------------------------------------------------------------------- model explorer


def model_explorer(row: InferenceRow | Mapping[str, Any]) -> dict[str, Any]:
    """Node data for google-ai-edge/model-explorer (``GraphNodeData``, as ``report.model_explorer``
    writes for op profiles): ``results`` keyed by each op's output tensor name (how Model Explorer
    matches a node through its ``tensor_name`` output metadata), ``value`` = the layer's ranking SNR
    in dB (isolated median-channel SNR, see edgebench.diagnose.run) clipped to [-20, 100], and a gradient
    from red (worst) to green. Load it in Model Explorer next to the quantized .tflite
    (``row.model_path``) with "Add per-node data".

    An accelerator bisect row (``diagnose --accelerator``): the probed ops only, keyed by their
    output tensor, ``value`` = PSNR vs the CPU in dB clipped the same way (NaN/Inf: the bottom)."""
    results = {}
    row = as_row(row)
    b = bisect_of(row)
    if b is not None:
        for p in b.probes:
            if p.tensor:
                results[str(p.tensor)] = {"value": round(_clip(_probe_db(p)), 2)}
        return {"results": results, "gradient": ME_GRADIENT}
    for l in diagnosis(row).layers:
        if l.node is None:
            continue
        results[str(l.tensor)] = {"value": round(_clip(l.ranking_snr_db), 2)}
    return {"results": results, "gradient": ME_GRADIENT}
