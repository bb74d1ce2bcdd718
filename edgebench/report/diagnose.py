"""Renderers of ``edgebench diagnose`` results (pure; the stored/JSON form of the document in).

``markdown_lines``   GitHub Markdown for a PR comment (called by report.markdown)
``html_section``     HTML: error along the graph order + the top layers (called by report.html)
``model_explorer``   node data for google-ai-edge/model-explorer (per op value and colour)
The terminal tables (layers, keep-float candidates) are in ``report.terminal.diagnose``.

Every number is read with ``formats.num`` (stored documents hold infinities as "inf").
"""

from __future__ import annotations

import html
import math
from typing import Any

from edgebench.formats import fmt_bytes, num
from edgebench.outcome import top1_change
from edgebench.report.html_parts import svg_lines

TOP = 10
# Model Explorer colours nodes by value; SNR is clipped so "no error" (inf) stays a number.
ME_SNR_RANGE = (-20.0, 100.0)
ME_GRADIENT = [{"stop": 0, "bgColor": "#d62728"}, {"stop": 0.35, "bgColor": "#ff9f1c"},
               {"stop": 0.6, "bgColor": "#ffe066"}, {"stop": 1, "bgColor": "#a7e08f"}]


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


def _layer_cells(l: dict[str, Any]) -> list[str]:
    return [str(l.get("rank")), f"{l.get('op')}#{l.get('node')}", _short(l.get("tensor")), _g(l.get("scale")),
            _n(l.get("rmse_over_scale"), 2), _n(l.get("snr_db")), _n(l.get("isolated_snr_db")),
            _n(l.get("isolated_channel_snr_db")), _n(l.get("cosine"), 4), _n(l.get("outlier_ratio"), 0)]


LAYER_COLUMNS = ("rank", "op#node", "tensor", "scale", "rmse/scale", "SNR dB", "iso SNR", "iso ch SNR",
                 "cosine", "outliers")


def accuracy_text(row: dict[str, Any]) -> str:
    acc = row.get("accuracy") or {}
    worst = row.get("worst") or {}
    parts = []
    if acc.get("top1") is not None:
        drop = num(acc.get("top1_drop_pp"))
        parts.append(f"top-1 {num(acc['top1']) * 100:.2f}%" + ("" if drop is None else
                                                              f" ({top1_change(drop)} pp vs TF)"))
    if acc.get("top1_agreement") is not None:
        parts.append(f"agreement {num(acc['top1_agreement']) * 100:.1f}%")
    if worst.get("psnr_db") is not None:
        parts.append(f"output PSNR {_n(worst['psnr_db'])} dB")
    return ", ".join(parts) or "no task metric"


def commands(row: dict[str, Any]) -> list[str]:
    """The commands that prove the fix (each runs as printed; shown whole, on lines of their own)."""
    return [str(c) for c in (row.get("fix_commands") or [])[:2]]


def _notes(row: dict[str, Any]) -> list[str]:
    notes = [f"{row.get('findings', 0)} finding(s) among {len(row.get('layers') or [])} layers; "
             "iso = the op alone fed the float model's values; rounding alone gives rmse/scale 0.289"]
    if row.get("verdict"):
        notes.append(row["verdict"])
    if row.get("suggested_keep_float"):
        notes.append("suggested --keep-float: " + ", ".join(_short(x) for x in row["suggested_keep_float"]))
    inter = row.get("intermediates") or {}
    if inter and (inter.get("float") != "preserve_all_tensors" or inter.get("quantized") != "preserve_all_tensors"):
        notes.append(f"LiteRT#413: preserving intermediates changed outputs; read them as: float {inter.get('float')}, "
                     f"quantized {inter.get('quantized')}")
    dep = num(inter.get("deployed_vs_builtin_max_diff"))
    if dep:
        notes.append(f"per-layer numbers use the builtin kernels; the deployed run (default delegate, whose accuracy "
                     f"is shown) differs from them by up to {dep:.3g} on the final outputs")
    if row.get("unmatched"):
        notes.append(f"{len(row['unmatched'])} quantized tensor(s) without a float counterpart (listed in the JSON)")
    mem = row.get("memory") or {}
    if mem.get("peak_rss_bytes"):
        notes.append(f"worker peak RSS {fmt_bytes(mem['peak_rss_bytes'])} (bound {fmt_bytes(mem.get('bound_bytes'))})")
    return notes


# --------------------------------------------------------------------------- markdown


def markdown_lines(doc: dict[str, Any], escape_cell, top: int = TOP) -> list[str]:
    """Diagnose section for a PR comment; ``escape_cell`` is report.markdown's cell escaper."""
    out: list[str] = []
    for row in doc.get("rows", []):
        out += ["", f"**{escape_cell(row.get('precision'))}**: {escape_cell(accuracy_text(row))}", ""]
        if row.get("status") != "ok":
            out.append(f"_{escape_cell(row.get('status'))}: {escape_cell(row.get('error'))}_")
            continue
        head = [*LAYER_COLUMNS, "advice"]
        out += ["| " + " | ".join(head) + " |", "|" + "|".join("---" if i in (1, 2, 10) else "---:"
                                                             for i in range(len(head))) + "|"]
        for l in (row.get("layers") or [])[:top]:
            cells = [escape_cell(c) for c in _layer_cells(l)] + [escape_cell(l.get("advice"))]
            if l.get("finding"):
                cells[0] = f"**{cells[0]}**"
            out.append("| " + " | ".join(cells) + " |")
        out += [""] + [f"- {escape_cell(n)}" for n in _notes(row)]
        if commands(row):      # whole, in a code block: copy and paste runs them
            out += ["", "Prove it:", "", "```", *commands(row), "```"]
    return out


# --------------------------------------------------------------------------- html


def html_section(docs: list[dict[str, Any]]) -> str:
    """Per diagnosed precision: SNR along the graph order (accumulated and isolated) and the top layers."""

    parts = []
    for doc in docs:
        for row in doc.get("rows", []):
            layers = [l for l in (row.get("layers") or []) if l.get("node") is not None]
            title = f"{doc.get('model')} {row.get('precision')}: {accuracy_text(row)}"
            parts.append(f"<h3>{html.escape(title)}</h3>")
            if row.get("status") != "ok" or not layers:
                parts.append(f'<p class="note">{html.escape(str(row.get("error") or "no layers"))}</p>')
                continue
            series = []
            for label, key in (("accumulated SNR", "snr_db"), ("isolated SNR", "isolated_snr_db"),
                               ("isolated median-channel SNR", "isolated_channel_snr_db")):
                pts = [(float(l["node"]), _clip(num(l.get(key)))) for l in layers if num(l.get(key)) is not None]
                if pts:
                    series.append((label, [p[0] for p in pts], [p[1] for p in pts]))
            if series:
                parts.append(svg_lines(series, xlabel="node (graph order)", ylabel="SNR dB (clipped to 100)",
                                       title="error along the graph", y0=False))
            head = "".join(f"<th>{html.escape(c)}</th>" for c in (*LAYER_COLUMNS, "advice"))
            body = []
            for l in (row.get("layers") or [])[:TOP]:
                cls = ' class="bad"' if l.get("finding") else ""
                cells = "".join(f"<td>{html.escape(c)}</td>" for c in _layer_cells(l))
                body.append(f"<tr{cls}>{cells}<td class=\"l\">{html.escape(str(l.get('advice') or ''))}</td></tr>")
            parts.append(f'<div class="tw"><table><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody>'
                         "</table></div>")
            parts += [f'<p class="note">{html.escape(n)}</p>' for n in _notes(row)]
            parts += [f"<p>prove it: <code>{html.escape(c)}</code></p>" for c in commands(row)]
    return "".join(parts)


def _clip(v: float | None) -> float:
    lo, hi = ME_SNR_RANGE
    return lo if v is None or v < lo else min(v, hi)


# --------------------------------------------------------------------------- model explorer


def model_explorer(row: dict[str, Any]) -> dict[str, Any]:
    """Node data for google-ai-edge/model-explorer (``GraphNodeData``, as ``report.model_explorer``
    writes for op profiles): ``results`` keyed by each op's output tensor name (how Model Explorer
    matches a node through its ``tensor_name`` output metadata), ``value`` = the layer's ranking SNR
    in dB (isolated median-channel SNR, see edgebench.diagnose) clipped to [-20, 100], and a gradient
    from red (worst) to green. Load it in Model Explorer next to the quantized .tflite
    (``row["model_path"]``) with "Add per-node data"."""
    results = {}
    for l in row.get("layers") or []:
        if l.get("node") is None:
            continue
        results[str(l["tensor"])] = {"value": round(_clip(num(l.get("ranking_snr_db"))), 2)}
    return {"results": results, "gradient": ME_GRADIENT}
