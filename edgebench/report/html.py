"""Self-contained HTML report (pure: result documents in, one HTML string out).

Everything is inline: CSS in a ``<style>`` element, plots as inline ``<svg>`` drawn here from
the raw samples -- no JavaScript, no fonts, no ``src``/``href`` to anything outside the file, so
the report opens offline and can be attached to a CI run. Every string from a result (model
names, targets, output names, fingerprint values, errors) goes through ``html.escape``.

Sections, in this order, each a ``<section id=...>``; a section with nothing to show is left out
(and from the navigation line), so the report opens with its verdict and holds no empty headings.
Tables scroll sideways inside their own box and plots scale down, so nothing is wider than the
page (1280 px checked in headless Chromium by the tests); the environment is collapsed:

``verdict``      first: each run's verdict (``outcome.run_verdict``: gate passed/failed with the
                 failing checks, silent failures, failed rows) and the ``diagnose`` command
``fingerprint``  environment fingerprint of the first run, plus the key fields that differ
                 between runs (they make numbers not directly comparable)
``results``      precision x target grid per model (p99 / size / top-1) and the full row table
``latency``      per row: latency CDF and histogram from the raw ``samples_ns``
``sustained``    latency and temperature over time of sustained runs, paced vs back-to-back, cold
                 starts, energy per inference (``report/html_sustain.py``)
``pareto``       size vs p99 scatter, accuracy annotated, Pareto-optimal rows filled
``where``        where the time goes: delegated nodes, ops left on the CPU, silent-failure verdicts, top ops
``drift``        per-output drift table (max/mean abs, RMSE, rel L2, cosine, PSNR, NaN/Inf)
``training``     training throughput vs batch size, one line per (model, precision, xla, strategy,
                 input pipeline)
``diagnose``     per-layer quantization error along the graph order and the worst layers
                 (``edgebench diagnose`` results; rendered by ``report.diagnose``)
``readiness``    NPU readiness per (vendor, SoC): ops on the NPU, why the rest stay on the CPU
                 (``edgebench readiness`` results; rendered by ``report.readiness``)
``history``      metric over time for each series with earlier stored runs, change points marked
"""

from __future__ import annotations

import datetime as _dt
import math
import re
from typing import Any, Sequence

from edgebench.core.fingerprint import KEY_FIELDS, diff_fingerprints
from edgebench.core.formats import fmt_bytes, num
from edgebench.judge.outcome import RowVerdict, precision_label, row_verdict, run_verdict_of
from edgebench.report.diagnose import accuracy_text as diagnose_accuracy
from edgebench.report.diagnose import html_section
from edgebench.report.html_parts import (
    PALETTE,
    Plot,
    esc,
    fmt,
    fmt_ms,
    fmt_pct,
    inference_of,
    note_html,
    row_title,
    rows_of,
    section_html,
    svg_cdf,
    svg_histogram,
    svg_lines,
    table_html,
)
from edgebench.report.html_sustain import sustained_section
from edgebench.report.llm import notes, tables
from edgebench.report.pivot import SUBCOLUMNS, cell_values, matrix_pivots, short_value, varying_axes
from edgebench.report.readiness import html_section as readiness_html
from edgebench.report.tables import inference_table
from edgebench.rows import Document, Drift, InferenceRow, TrainRow
from edgebench.rows.metrics import BY_KEY

SECTIONS = ("verdict", "fingerprint", "results", "where", "latency", "sustained", "pareto", "drift", "training", "diagnose",
            "readiness", "history")

_CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:2rem;color:#222;max-width:1200px}
h1{font-size:1.6rem}h2{border-bottom:1px solid #ccc;padding-bottom:.2rem;margin-top:2.2rem}
h3{font-size:1rem;margin:1.2rem 0 .4rem}
table{border-collapse:collapse;margin:.5rem 0;font-size:.85rem}.tw{max-width:100%;overflow-x:auto}
details>summary{cursor:pointer;color:#444}
th,td{border:1px solid #ddd;padding:.25rem .5rem;text-align:right;vertical-align:top}
th{background:#f3f3f3}td.l,th.l{text-align:left}
.note{color:#666;font-style:italic}.bad{color:#b00020;font-weight:600}.good{color:#1b7e2c;font-weight:600}.warn{color:#a15c00}
.plots{display:flex;flex-wrap:wrap;gap:1rem}
svg{background:#fff;border:1px solid #eee;max-width:100%;height:auto}
svg text{font-family:system-ui,sans-serif;font-size:11px;fill:#333}
.ok{color:#1b7f2a}
"""


# ---------------------------------------------------------------------------------------------
# small helpers


def _verdict_section(docs: list[tuple[dict[str, Any], Document]]) -> str:
    lines = []
    for d, t in docs:
        v = run_verdict_of(d)         # the JSON form: a malformed foreign row still counts by its status
        models = ", ".join(dict.fromkeys(str(r.model) for r, _ in rows_of(t) if r.model)) or "-"
        rid = (t.run_id or "")[:12]
        if t.kind == "diagnose":       # its verdict is the diagnosis: findings per precision
            said = "; ".join(f"{r.precision}: {(r.diagnosis.findings if r.diagnosis else None) or 0} finding(s), "
                             f"{diagnose_accuracy(r)}" if r.status == "ok" else f"{r.precision}: {r.status} ({r.error})"
                             for r in t.rows if isinstance(r, InferenceRow))
            lines.append(f"<li><strong>{esc(t.model or '-')}</strong>" + (f" (run {esc(rid)})" if rid else "")
                         + f": diagnosed — {esc(said)}</li>")
            continue
        cls = "good" if v.state == "ok" and v.gate != "failed" else "bad"
        head = f'<span class="{cls}">{esc(v.text if v.gate != "failed" else "GATE FAILED")}</span>'
        item = f"<strong>{esc(models)}</strong>" + (f" (run {esc(rid)})" if rid else "") + f": {head}"
        if v.gate == "failed":
            item += "<ul>" + "".join(f"<li>{esc(m)}</li>" for m in v.failing) + "</ul>"
        if v.diagnose:
            item += f"<p>find the layer that breaks it: <code>{esc(v.diagnose)}</code></p>"
        lines.append(f"<li>{item}</li>")
    return section_html("verdict", "Verdict", "<ul>" + "".join(lines) + "</ul>") if lines else ""


def _fingerprint_section(docs: list[tuple[dict[str, Any], Document]]) -> str:
    if not docs:
        return ""
    fp = docs[0][1].fingerprint
    parts = []
    if not fp:
        parts.append(note_html("this run recorded no environment fingerprint"))
    else:
        keys = [k for k in KEY_FIELDS if k in fp] + [k for k in fp if k not in KEY_FIELDS]
        summary = " · ".join(str(fp[k]) for k in ("hostname", "cpu_model", "tensorflow", "litert") if fp.get(k))
        parts.append(f"<details><summary>{esc(summary or 'environment')} ({len(keys)} fields)</summary>"
                     + table_html(["field", "value"], [(k, "-" if fp[k] is None else fp[k]) for k in keys], left=2)
                     + "</details>")
    diffs = []
    for _d, t in docs[1:]:
        for field, a, b in diff_fingerprints(fp, t.fingerprint):
            diffs.append((t.run_id or "-", field, "-" if a is None else a, "-" if b is None else b))
    if len(docs) > 1:
        if diffs:
            parts.append("<h3>Key fields that differ between runs (numbers are not directly comparable)</h3>")
            parts.append(table_html(["run", "field", "first run", "this run"], diffs, left=4))
        else:
            parts.append(note_html(f"all {len(docs)} runs share the key fingerprint fields"))
    runs = [(t.run_id or "-", t.report_source or "-", t.kind or "-", t.created or "-", t.edgebench_version or "-",
             len(t.rows)) for _d, t in docs]
    parts.append("<h3>Runs (only those asked for)</h3>")
    parts.append(table_html(["run id", "in this report because", "kind", "created", "edgebench", "rows"], runs, left=5))
    return section_html("fingerprint", "Environment", "".join(parts))


def _pivot_table(p: dict[str, Any]) -> str:
    """A matrix pivot (``report.pivot``): rows model x precision, two header rows -- each
    varying-axis value over its sub-columns."""
    subs = SUBCOLUMNS[p["kind"]]
    out = ['<div class="tw"><table><thead><tr><th class="l" rowspan="2">precision</th>']
    out += [f'<th colspan="{len(subs)}">{esc(c)}</th>' for c in p["columns"]]
    out.append("</tr><tr>")
    out += [f"<th>{esc(sc)}</th>" for _ in p["columns"] for sc in subs]
    out.append("</tr></thead><tbody>")
    for row in p["rows"]:
        out.append(f'<tr><td class="l">{esc(row["precision"])}</td>')
        for cell in row["cells"]:
            vals = cell_values(p, cell)
            bad = cell is not None and cell["status"] != "ok"
            out += [f'<td><span class="bad">{esc(v)}</span></td>' if bad and i == 0 else f"<td>{esc(v)}</td>"
                    for i, v in enumerate(vals)]
        out.append("</tr>")
    out.append("</tbody></table></div>")
    return "".join(out)


def _results_section(docs: list[tuple[dict[str, Any], Document]]) -> str:
    parts = []
    pivots = matrix_pivots([t for _, t in docs])
    for p in pivots:          # a matrix: one table per model, a column group per varying-axis value
        parts.append(f"<h3>{esc(p['model'])}: by {esc(', '.join(p['axes']))}</h3>")
        parts.append(_pivot_table(p))
    if pivots:
        parts.append(note_html("matrix runs: each column group is one value of the axes that vary; the ratio "
                           "is to the row's first column (p50 for inference, examples/s for training); "
                           "† p99 from too few samples"))
    pivoted = {p["model"] for p in pivots}
    inf_rows = [(t, r) for _d, t in docs for r, _ in inference_of(t)]
    if not inf_rows:
        return section_html("results", "Precision × target", "".join(parts)) if parts else ""
    # precision x target grid per model (a matrix model is shown by its pivot above)
    models: dict[str, list[tuple[Document, InferenceRow]]] = {}
    for t, r in inf_rows:
        if str(r.model or "?") not in pivoted:
            models.setdefault(str(r.model or "?"), []).append((t, r))
    p99_ms, size, top1 = BY_KEY["p99_ms"], BY_KEY["size_bytes"], BY_KEY["top1"]
    for model, rows in models.items():
        precs = list(dict.fromkeys(precision_label(r) for _, r in rows))
        targets = list(dict.fromkeys(str(r.target or "-") for _, r in rows))
        grid: dict[tuple[str, str], list[tuple[InferenceRow, RowVerdict]]] = {}
        for t, r in rows:
            grid.setdefault((precision_label(r), str(r.target or "-")), []).append((r, row_verdict(r, t.gate)))
        body = []
        for p in precs:
            cells = [p]
            for tg in targets:
                runs = grid.get((p, tg))
                if not runs:
                    cells.append("-")
                    continue
                # a cell never hides a failed run behind a good one: every non-ok verdict is shown
                bad = [v for _, v in runs if not v.ok]
                good = [r for r, v in runs if v.ok]
                bits = [f'<span class="bad">{esc(v.text)}</span>' for v in bad]
                if good:
                    r = good[0]
                    bits += [f"p99 {esc(fmt_ms(p99_ms.value(r)))} ms", esc(fmt_bytes(size.value(r)))]
                    if top1.value(r) is not None:
                        bits.append(f"top-1 {esc(fmt_pct(top1.value(r)))}")
                if len(runs) > 1:
                    bits.append(f'<span class="note">{len(runs)} runs ({len(bad)} not ok), see all rows</span>')
                cells.append("<br>".join(bits))
            body.append(cells)
        parts.append(f"<h3>{esc(model)}</h3>")
        parts.append(table_html(["precision \\ target", *targets], body, left=1,
                            raw_cols=tuple(range(1, len(targets) + 1))))
    # every row: the one inference table (report.tables), every column with a value
    table = inference_table([t for _, t in docs]).without_empty()
    body = [tuple(f'<span class="bad">{esc(c)}</span>' if bad and col.key == "status" else esc(c)
                  for col, c in zip(table.columns, cells)) for cells, bad in zip(table.cells, table.bad)]
    parts.append("<h3>All rows</h3>")
    parts.append(table_html([c.label for c in table.columns], body,
                            left=next((i for i, c in enumerate(table.columns) if not c.text), len(table.columns)),
                            raw_cols=tuple(range(len(table.columns)))))
    if table.legend():
        parts.append(note_html("; ".join(table.legend())))
    return section_html("results", "Precision × target", "".join(parts))


def _llm_section(docs: list[tuple[dict[str, Any], Document]]) -> str:
    """llm-bench runs: intervals over the processes and the precisions side by side (report.llm)."""
    parts = []
    for _d, t in docs:
        for title, headers, body in tables(t):
            parts.append(f"<h3>{esc(title)}</h3>")
            parts.append(table_html(headers, [tuple(esc(c) for c in row) for row in body], left=6,
                                    raw_cols=tuple(range(len(headers)))))
        for n in notes(t):
            parts.append(note_html(n))
    return section_html("llm", "LLM: processes and precisions", "".join(parts)) if parts else ""


def _where_section(docs: list[tuple[dict[str, Any], Document]]) -> str:
    """Delegation, silent-failure verdicts and the top ops of every row that has them (issue 15)."""
    rows = [r for _d, t in docs for r, _ in inference_of(t) if r.delegation or r.verdicts or r.op_profile]
    if not rows:
        return ""
    body = []
    for r in rows:
        d = r.delegation
        cell = "-"
        if d is not None and d.nodes_delegated is not None:
            cell = f"{d.nodes_delegated}/{'?' if d.nodes_total is None else d.nodes_total}"
            if d.partitions is not None:
                cell += f", {d.partitions} parts"
        left = ", ".join(f"{k} x{v}" for k, v in (d.undelegated if d is not None else {}).items()) or "-"
        verdicts = "; ".join(str(v.message) for v in r.verdicts if v.failed) or "-"
        ops = sorted((o for o in r.op_profile or () if o.ms is not None), key=lambda o: -float(o.ms))[:5]
        top = "; ".join(f"{o.op} {fmt(o.ms, 4)} ms ({fmt_pct(o.share, 1)})" for o in ops) or "-"
        body.append((r.model or "-", r.precision or "-", r.target or "-",
                     str((d.delegate if d is not None else None) or "-"), cell, left, verdicts, top))
    return section_html("where", "Where the time goes", table_html(
        ["model", "precision", "target", "delegate", "delegated", "left on the CPU", "silent failures",
         "top ops (mean ms per inference; a delegate partition is one entry)"], body, left=8))


def _latency_section(docs: list[tuple[dict[str, Any], Document]]) -> str:
    parts = []
    any_rows = False
    for _d, t in docs:
        for r, is_ref in inference_of(t):
            any_rows = True
            name = row_title(r, is_ref)
            if len(docs) > 1 and t.run_id:
                name += f" (run {t.run_id[:12]})"
            parts.append(f"<h3>{esc(name)}</h3>")
            vals = [float(x) / 1e6 for x in r.samples_ns or ()]
            vals = [v for v in vals if math.isfinite(v)]
            if not vals:
                parts.append(note_html("no raw latency samples stored for this row"))
                continue
            lat = r.latency
            parts.append('<div class="plots">')
            parts.append(svg_cdf(vals, title=f"CDF, {len(vals)} runs", p50=lat.p50 if lat else None,
                                 p99=lat.p99 if lat else None))
            parts.append(svg_histogram(vals, title="histogram"))
            parts.append("</div>")
    if not any_rows:
        return ""
    return section_html("latency", "Latency distributions", "".join(parts))


def pareto_front(points: Sequence[tuple[float, float, float | None]]) -> list[bool]:
    """For (size, p99, accuracy-or-None) points: True where no other point is at least as good in
    every dimension and better in one (smaller size, smaller p99, higher accuracy)."""
    out = []
    for i, (s, p, a) in enumerate(points):
        dominated = False
        for j, (s2, p2, a2) in enumerate(points):
            if i == j:
                continue
            acc_ge = a is None or (a2 is not None and a2 >= a)
            acc_gt = a is not None and a2 is not None and a2 > a
            if s2 <= s and p2 <= p and acc_ge and (s2 < s or p2 < p or acc_gt):
                dominated = True
                break
        out.append(not dominated)
    return out


def _pareto_section(docs: list[tuple[dict[str, Any], Document]]) -> str:
    pts, excluded = [], []
    size_m, p99_m, top1_m = BY_KEY["size_bytes"], BY_KEY["p99_ms"], BY_KEY["top1"]
    for _d, t in docs:
        for r, is_ref in inference_of(t):
            v = row_verdict(r, t.gate)
            if not v.ok:       # a failed gate, a silent failure or a crash is never a trade-off
                if r.status in (None, "ok"):
                    excluded.append([row_title(r, is_ref), esc(v.text)])
                continue
            size, p99 = size_m.value(r), p99_m.value(r)
            if size is None or p99 is None:
                continue
            a = top1_m.value(r)
            if a is None and r.accuracy is not None:
                a = r.accuracy.top1_agreement
            pts.append((r, t, size, p99, a, is_ref))
    if not pts:
        return section_html("pareto", "Size – p99 – accuracy trade-off", _excluded(excluded)) if excluded else ""
    # one front per model: rows of different models are never traded off against each other
    front = [False] * len(pts)
    for model in dict.fromkeys(str(r.model) for r, *_ in pts):
        idx = [i for i, (r, *_) in enumerate(pts) if str(r.model) == model]
        for i, opt in zip(idx, pareto_front([pts[i][2:5] for i in idx])):
            front[i] = opt
    axes = varying_axes([t for _, t in docs])
    targets = list(dict.fromkeys(str(r.target or "-") for r, *_ in pts))
    legend = [(tg, PALETTE[i % len(PALETTE)]) for i, tg in enumerate(targets)]
    plot = Plot([s / 2**20 for _, _, s, _, _, _ in pts], [p for _, _, _, p, _, _ in pts], xlabel="model size (MiB)",
                ylabel="p99 latency (ms)", title="filled = Pareto-optimal (size, p99, top-1)",
                width=620, height=340, y0=True, legend=legend, x_pad=(0.05, 0.22))
    # Pareto front: connect optimal points by size for orientation.
    fp = sorted((s / 2**20, p) for (_, _, s, p, _, _), f in zip(pts, front) if f)
    if len(fp) > 1:
        plot.polyline([x for x, _ in fp], [y for _, y in fp], "#bbb", width=1.0)
    rows, items = [], []
    for (r, t, s, p, a, is_ref), opt in zip(pts, front):
        color = PALETTE[targets.index(str(r.target or "-")) % len(PALETTE)]
        cell = t.cell
        axis = " ".join(f"{k}={short_value(cell.get(k))}" for k in axes) if cell is not None else ""
        label = " ".join(x for x in (precision_label(r), axis) if x) + (
            "" if a is None else f" {a * 100:.1f}%")
        plot.point(s / 2**20, p, color, filled=opt, r=5.0, tip=f"{row_title(r, is_ref)} {axis}".strip())
        items.append((s / 2**20, p, label, color))
        rows.append([row_title(r, is_ref) + (f" ({axis})" if axis else ""), fmt_bytes(s), fmt_ms(p), fmt_pct(a),
                     "yes" if opt else "no"])
    for row, shown in zip(rows, plot.labels(items)):
        row.append("yes" if shown else "no (crowded: see this row)")
    models = list(dict.fromkeys(str(r.model) for r, *_ in pts))
    body = plot.svg("size vs p99 latency") + table_html(
        ["row", "size", "p99 ms", "top-1 (or agreement)", "Pareto-optimal", "labelled in the plot"], rows, left=1)
    if len(models) > 1:
        body += note_html(f"one Pareto front per model ({', '.join(models)}): rows of different models are "
                      "never compared")
    return section_html("pareto", "Size – p99 – accuracy trade-off", body + _excluded(excluded))


def _excluded(rows: list[list[str]]) -> str:
    """Rows left out of the Pareto front because their verdict is not ok (cells already escaped)."""
    if not rows:
        return ""
    return note_html("left out of the trade-off (their verdict is not ok):") + table_html(
        ["row", "verdict"], rows, left=2, raw_cols=(1,))


_DRIFT_COLS = (("max_abs", "max |Δ|"), ("mean_abs", "mean |Δ|"), ("rmse", "RMSE"), ("rel_l2", "rel L2"),
               ("cosine", "cosine"), ("psnr_db", "PSNR dB"), ("nan", "NaN"), ("inf", "Inf"))


def _drift_cells(d: Drift) -> list[str]:
    cells: list[str] = []
    bad = any((x or 0) > 0 for x in (d.nan, d.inf, d.ref_nonfinite))
    for key, _ in _DRIFT_COLS:
        v = getattr(d, key)
        if bad and key not in ("nan", "inf"):
            cells.append("n/a")   # NaN/Inf outputs: no drift number is honest
        elif key in ("nan", "inf"):
            cells.append("-" if v is None else (str(v).lower() if isinstance(v, bool) else str(v)))
        elif key == "cosine":
            cells.append(fmt(v, 6))
        elif key == "psnr_db":
            cells.append(fmt(v, 1))
        else:
            g = num(v)
            cells.append("-" if g is None else (fmt(g) if not math.isfinite(g) else f"{g:.3g}"))
    return cells


def _drift_section(docs: list[tuple[dict[str, Any], Document]]) -> str:
    """Per-output drift vs the TF reference and, for device rows, vs the host LiteRT result;
    detection rows add their box agreement."""
    rows, det_rows = [], []
    for _d, t in docs:
        for r, is_ref in inference_of(t):
            name = [r.model or "-", precision_label(r) if r.precision else ("reference" if is_ref else "-"), r.target or "-"]
            n = r.readiness.drift_inputs if r.readiness is not None else None      # readiness host:npu rows
            for against, drift in (("reference", r.drift), (f"host ({n} inputs)" if n else "host", r.drift_vs_host)):
                for out, stats in (drift or {}).items():
                    rows.append([*name, against, out, *_drift_cells(stats)])
            det = r.detection_record
            if det is not None:
                det_rows.append([*name, fmt_pct(det.box_agreement), "-" if det.matched is None else str(det.matched),
                                 "-" if det.reference_detections is None else str(det.reference_detections),
                                 fmt(det.score_mae, 4)])
    if not rows:
        return ""
    body = table_html(["model", "precision", "target", "vs", "output", *[h for _, h in _DRIFT_COLS]], rows, left=5)
    if det_rows:
        body += table_html(["model", "precision", "target", "box agreement", "matched", "reference boxes",
                        "score MAE"], det_rows, left=3)
    return section_html("drift", "Per-output drift vs reference", body)


def _training_section(docs: list[tuple[dict[str, Any], Document]]) -> str:
    series: dict[str, list[tuple[float, float]]] = {}
    rows = []
    eps_m = BY_KEY["examples_per_s"]
    for _d, t in docs:
        for r in t.rows:
            if not isinstance(r, TrainRow):
                continue
            key = " / ".join(str(x) for x in (r.model or "?", r.precision or "-", "xla" if r.xla else "no-xla",
                                               r.strategy or "-", r.input_pipeline) if x)
            bs, eps = r.batch_size, eps_m.value(r)
            if bs is not None and eps is not None and r.status in (None, "ok"):
                series.setdefault(key, []).append((bs, eps))
            st = r.step_time
            status = r.status or "-"
            if r.error:
                status = f"{status}: {r.error}"
            rows.append((r.model or "-", r.precision or "-", "-" if r.xla is None else str(bool(r.xla)).lower(),
                         r.strategy or "-", r.input_pipeline or "-", r.target or "-", status, fmt(bs, 0), fmt(eps, 1),
                         fmt_ms((st.p50 if st.p50 is not None else st.mean) if st else None),
                         fmt_ms(st.p99 if st else None)))
    if not rows:
        return ""
    body = ""
    if series:
        body += svg_lines([(k, [x for x, _ in v], [y for _, y in v]) for k, v in series.items()],
                          xlabel="batch size", ylabel="examples / s", title="throughput vs batch size")
    body += table_html(["model", "precision", "xla", "strategy", "input pipeline", "target", "status", "batch",
                        "examples/s", "step p50 ms", "step p99 ms"], rows, left=7)
    return section_html("training", "Training throughput", body)


def _diagnose_section(docs: list[tuple[dict[str, Any], Document]]) -> str:
    diag = [t for _d, t in docs if t.kind == "diagnose"]
    if not diag:
        return ""
    return section_html("diagnose", "Quantization diagnosis", html_section(diag))


def _readiness_section(docs: list[tuple[dict[str, Any], Document]]) -> str:
    ready = [t for _d, t in docs if t.kind == "readiness"]
    if not ready:
        return ""
    return section_html("readiness", "NPU readiness", readiness_html(ready))


def _epoch(created: Any) -> float | None:
    try:
        t = _dt.datetime.fromisoformat(str(created).replace("Z", "+00:00"))
    except ValueError:
        return None
    if t.tzinfo is None:
        t = t.replace(tzinfo=_dt.timezone.utc)
    return t.timestamp()


def _history_section(history: dict[str, list[dict[str, Any]]] | None) -> str:
    charts = []
    for name, points in (history or {}).items():
        pts = [(_epoch(p.get("created")), num(p.get("value"))) for p in points]
        pts = [(x, y) for x, y in pts if x is not None and y is not None and math.isfinite(y)]
        if len(pts) < 2:
            continue
        ylabel = name.rsplit(" — ", 1)[-1] if " — " in name else "value"
        marks = [(_epoch(p.get("created")), f"x{num(p.get('shift')):.2f}") for p in points
                 if p.get("step") and num(p.get("shift")) is not None and _epoch(p.get("created")) is not None]
        charts.append(svg_lines([(name, [x for x, _ in pts], [y for _, y in pts])], xlabel="run time (UTC)",
                                ylabel=ylabel, title=name, x_is_time=True, y0=False, marks=marks))
    if not charts:
        return ""
    return section_html("history", "History", '<div class="plots">' + "".join(charts) + "</div>")


# ---------------------------------------------------------------------------------------------


def render_html(docs: dict[str, Any] | Sequence[dict[str, Any]], *,
                history: dict[str, list[dict[str, Any]]] | None = None, title: str | None = None) -> str:
    """Result document(s) -> one self-contained HTML page.

    ``history``: ``{series label: [{"created": iso, "value": float, ...}, ...]}`` (e.g. from
    ``Store.history``); series with fewer than two points are not drawn. The label's text after
    " — " is used as the y-axis label.
    """
    if isinstance(docs, dict) or hasattr(docs, "to_dict"):
        docs = [docs]
    docs = [d.to_dict() if hasattr(d, "to_dict") else d for d in docs]   # the stored (JSON) form
    pairs = [(d, Document.read(d)) for d in docs]               # ... read once, typed
    if title is None:
        kinds = sorted({t.kind or "?" for _, t in pairs})
        models = list(dict.fromkeys(str(r.model) for _, t in pairs for r in t.rows if r.model))
        title = f"edgebench {'/'.join(kinds)} report" + (f": {', '.join(models[:4])}" if models else "")
        if len(models) > 4:
            title += f" (+{len(models) - 4} more)"

    generated = max((t.created for _, t in pairs), default="")
    sections = [
        _verdict_section(pairs),
        _fingerprint_section(pairs),
        _results_section(pairs),
        _llm_section(pairs),
        _where_section(pairs),
        _latency_section(pairs),
        sustained_section(docs),
        _pareto_section(pairs),
        _drift_section(pairs),
        _training_section(pairs),
        _diagnose_section(pairs),
        _readiness_section(pairs),
        _history_section(history),
    ]
    sections = [x for x in sections if x]          # a section with nothing to show is left out
    nav = " · ".join(f'<a href="#{sid}">{sid}</a>' for x in sections
                     for sid in re.findall(r'^<section id="([^"]+)"', x))
    return ("<!DOCTYPE html>\n"
            f'<html lang="en"><head><meta charset="utf-8"><title>{esc(title)}</title>'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<style>{_CSS}</style></head><body>"
            f"<h1>{esc(title)}</h1><p>{len(docs)} run(s); newest created {esc(generated or '-')}. "
            f"{nav}</p>" + "".join(sections) + "</body></html>\n")
