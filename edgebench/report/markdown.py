"""Markdown report for pull-request comments (pure: result documents in, text out).

GitHub-flavoured tables: one headline table per run (inference rows: size, latency, accuracy,
worst drift; training rows: throughput and step time), then a per-output drift table.

Every piece of user or device text (model, device and target names, error messages, versions)
goes through ``md_escape``: newlines become spaces and control/format characters (bidi
overrides, zero-width) become U+FFFD; text that GitHub would turn into a link or a notification
by itself -- an @mention, a ``#123`` reference, a URL or ``www.`` host -- is put in a code span
(nothing inside a code span is linked, mentioned or rendered); any other text gets every
Markdown-active character backslash-escaped (``\\ ` * _ [ ] { } ! ~ $ |``, ``_`` only at word
edges) and ``< > &`` as HTML entities. ``|`` is escaped in both forms, so a cell can never break
the table, inject a link/image/emphasis/math/HTML, or ping anyone. Rows with NaN/Inf outputs show
"n/a" for every drift number.
"""

from __future__ import annotations

import html
import math
import re
import unicodedata
from typing import Any, Mapping, Sequence

from edgebench.core.formats import fmt_bytes, num
from edgebench.judge.outcome import precision_label, row_verdict, run_verdict
from edgebench.report.diagnose import markdown_lines
from edgebench.report.llm import markdown_lines as llm_lines
from edgebench.report.pivot import SUBCOLUMNS, cell_values, matrix_pivots
from edgebench.report.readiness import markdown_lines as readiness_lines
from edgebench.report.tables import inference_rows, inference_table
from edgebench.rows import Document, InferenceRow, Row, TrainRow
from edgebench.targets.delegation import delegation_warning
from edgebench.targets.op_profile import top_ops

# Text GitHub links or notifies on by itself: mentions, issue refs, URLs, bare www. hosts.
_AUTOLINKED = re.compile(r"@|#\d|://|www\.|mailto:", re.IGNORECASE)
# Markdown-active characters escaped with a backslash (< > & become entities instead).
_MD_ACTIVE = re.compile(r"([\\`*\[\]{}!~$|])")
_EDGE_UNDERSCORE = re.compile(r"(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])")


def _clean(s: str) -> str:
    s = " ".join(s.splitlines()) if ("\n" in s or "\r" in s) else s
    return "".join("\ufffd" if unicodedata.category(ch) in ("Cc", "Cf") else ch for ch in s)


def md_escape(value: Any) -> str:
    """Make any value safe as inline text in GitHub Markdown (table cells, headings, lines)."""
    s = _clean("" if value is None else str(value))
    if not s:
        return "-"
    if _AUTOLINKED.search(s):
        fence = "`" * (max((len(m) for m in re.findall(r"`+", s)), default=0) + 1)
        pad = " " if s.startswith("`") or s.endswith("`") or s.startswith(" ") else ""
        return f"{fence}{pad}{s.replace('|', chr(92) + '|')}{pad}{fence}"
    s = _MD_ACTIVE.sub(r"\\\1", s)
    s = _EDGE_UNDERSCORE.sub(r"\\_", s)
    return html.escape(s, quote=False)


_num = num



def _f(value: Any, digits: int = 2, *, scale: float = 1.0, suffix: str = "") -> str:
    v = _num(value)
    if v is None:
        return "-"
    if math.isinf(v):
        return ("∞" if v > 0 else "-∞")
    if math.isnan(v):
        return "NaN"
    v *= scale
    if v != 0 and abs(v) < 10 ** -digits:
        return f"{v:.1e}{suffix}"
    return f"{v:,.{digits}f}{suffix}"


def _g(value: Any, sig: int = 3) -> str:
    """Significant-digit format for drift magnitudes that span many decades."""
    v = _num(value)
    if v is None:
        return "-"
    if math.isinf(v) or math.isnan(v):
        return _f(v)
    return f"{v:.{sig}g}"


def _ms(value: Any) -> str:
    """Latency in ms: 2 decimals from 1 ms up, 3 significant digits below (sub-ms models)."""
    v = _num(value)
    if v is None or math.isinf(v) or math.isnan(v) or abs(v) >= 1 or v == 0:
        return _f(v)
    return f"{v:.3g}"


_bytes = fmt_bytes


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]], right_from: int) -> list[str]:
    out = ["| " + " | ".join(headers) + " |",
           "|" + "|".join("---" if i < right_from else "---:" for i in range(len(headers))) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return out


def _status(row: Row, gate: Mapping[str, Any] | None = None) -> str:
    v = row_verdict(row, gate)
    return "ok" if v.ok else f"**{md_escape(v.text)}**"


def _verdict_lines(doc: Document) -> list[str]:
    """The run's verdict before any table: what a PR reviewer must see first."""
    v = run_verdict(doc)
    if v.gate is None and v.state == "ok":
        return []
    if v.gate == "failed":
        head = "❔ gate cannot judge" if v.undecided else "❌ gate failed"
        out = [f"**{head}** ({len(v.failing)} check{'s' * (len(v.failing) != 1)}):", ""]
        out += [f"- {md_escape(m)}" for m in v.failing]
    elif v.interrupted:
        out = [f"**⏹ {md_escape(v.text)}**"]
    elif v.state != "ok":
        out = [f"**❌ {md_escape(v.text)}**"]
    else:
        checks = len(doc.gate_result.checks) if doc.gate_result is not None else 0
        out = [f"**✅ gate passed** ({checks} check{'s' * (checks != 1)})"]
    if v.diagnose:
        out += ["", "Find the layer that breaks it:", "", "```", v.diagnose, "```"]
    if doc.error_sources_text:
        out += ["", md_escape(doc.error_sources_text)]
    return out + [""]


def _header(doc: Document) -> list[str]:
    models = list(dict.fromkeys(str(r.model) for r in doc.rows if r.model))
    title = f"### edgebench {md_escape(doc.kind or 'result')}"
    if models:
        title += ": " + ", ".join(md_escape(m) for m in models)
    fp = doc.fingerprint
    facts = []
    if doc.run_id:
        facts.append(f"run {md_escape(doc.run_id)}")
    if doc.created:
        facts.append(md_escape(doc.created))
    for label, key in (("TF", "tensorflow"), ("LiteRT", "litert")):
        if fp.get(key):
            facts.append(f"{label} {md_escape(fp[key])}")
    if fp.get("cpu_model"):
        cpu = md_escape(fp["cpu_model"])
        facts.append(f"{cpu} ×{fp['cpu_count']}" if fp.get("cpu_count") else cpu)
    if fp.get("gpu"):
        facts.append(md_escape(fp["gpu"]))
    if doc.edgebench_version:
        facts.append(f"edgebench {md_escape(doc.edgebench_version)}")
    if doc.report_source:
        facts.append(f"in this report: {md_escape(doc.report_source)}")
    out = [title, ""]
    if facts:
        out += [" · ".join(facts), ""]
    return out


# The columns of edgebench.report.tables a pull-request comment leaves out (HTML draws them all).
MARKDOWN_HIDDEN = ("run", "p90_ms", "samples", "top5_agree", "cosine")


def _inference_table(doc: Document) -> tuple[list[str], list[str]]:
    """The one inference table (``report.tables``), its Markdown columns with a value, and its legend."""
    table = inference_table([doc], hide=MARKDOWN_HIDDEN).without_empty()
    out = ["| " + " | ".join(md_escape(c.label) for c in table.columns) + " |",
           "|" + "|".join("---" if c.text else "---:" for c in table.columns) + "|"]
    for cells, bad in zip(table.cells, table.bad):
        line = [md_escape(c) for c in cells]
        if bad:
            line[-1] = f"**{line[-1]}**"
        out.append("| " + " | ".join(line) + " |")
    return out, table.legend()


def _where_the_time_goes(rows: list[tuple[InferenceRow, bool]]) -> list[str]:
    """Silent-failure verdicts, delegation warnings and each profiled row's top ops."""
    out: list[str] = []
    for r, _ in rows:
        where = f"{r.precision or r.model} on {r.target}" + (f" (GPU {r.gpu_precision})" if r.gpu_precision else "")
        for v in r.verdicts:
            if v.failed:
                out.append(f"- **silent failure** ({md_escape(where)}): {md_escape(v.message)}; {md_escape(v.advice)}")
        w = delegation_warning(r.delegation, where)
        if w:
            out.append(f"- {md_escape(w)}")
    for r, _ in rows:
        if not r.op_profile:
            continue
        body = [[md_escape(e.node), md_escape(e.op), _f(e.ms, 4), _f(e.share, 1, scale=100, suffix="%"),
                 "delegate partition" if e.delegated else "CPU interpreter", md_escape((e.name or "")[:60])]
                for e in top_ops(r.op_profile, 10)]
        cover = r.op_summary.coverage
        note = f" · listed ops cover {100 * cover:.0f}% of the profiled Invoke" if cover is not None else ""
        out += ["", f"<details><summary>where the time goes: {md_escape(r.precision or r.model)} on "
                    f"{md_escape(r.target)}{note}</summary>", ""]
        out += _table(["node", "op", "ms", "share", "runs on", "name"], body, right_from=2)
        out += ["", "</details>"]
    return out


def _drift_table(rows: list[tuple[InferenceRow, bool]]) -> list[str]:
    body = []
    for r, _ in rows:
        for out, d in (r.drift or {}).items():
            if d.nonfinite or d.ref_nonfinite > 0:
                values = ["n/a"] * 6     # NaN/Inf outputs: no drift number is honest
            else:
                values = [_g(d.max_abs), _g(d.mean_abs), _g(d.rmse), _g(d.rel_l2), _f(d.cosine, 6), _f(d.psnr_db, 1)]
            body.append([md_escape(r.model), md_escape(precision_label(r) if r.precision else None), md_escape(r.target), md_escape(out), *values,
                         "-" if d.nan is None else md_escape(d.nan), "-" if d.inf is None else md_escape(d.inf)])
    if not body:
        return []
    return _table(["model", "precision", "target", "output", "max abs", "mean abs", "RMSE", "rel L2", "cosine",
                   "PSNR dB", "NaN", "Inf"], body, right_from=4)


def _train_table(doc: Document) -> list[str]:
    body = []
    for r in doc.rows:
        if not isinstance(r, TrainRow):
            continue
        st = r.step_time
        body.append([md_escape(r.model), md_escape(r.precision),
                     "-" if r.xla is None else str(bool(r.xla)).lower(), md_escape(r.strategy),
                     md_escape(r.input_pipeline), md_escape(r.target), _status(r), _f(r.batch_size, 0),
                     _f(r.examples_per_s, 1), _ms((st.p50 if st.p50 is not None else st.mean) if st else None),
                     _ms(st.p99 if st else None)])
    if not body:
        return []
    return _table(["model", "precision", "xla", "strategy", "pipeline", "target", "status", "batch", "examples/s",
                   "step p50 ms", "step p99 ms"], body, right_from=7)


def _pivot_tables(docs: Sequence[Document | Mapping[str, Any]]) -> list[str]:
    """A matrix report first pivots on its varying axes (``report.pivot``): one table per model,
    rows = precision, a column per axis value and number."""

    out: list[str] = []
    for p in matrix_pivots([d if isinstance(d, Document) else Document.read(d) for d in docs]):
        subs = SUBCOLUMNS[p["kind"]]
        headers = ["precision"] + [f"{c} {sc}" for c in p["columns"] for sc in subs]
        body = [[md_escape(r["precision"])] + [md_escape(v) for cell in r["cells"] for v in cell_values(p, cell)]
                for r in p["rows"]]
        out += [f"### edgebench matrix: {md_escape(p['model'])} by {md_escape(', '.join(p['axes']))}", ""]
        out += _table([md_escape(h) for h in headers], body, right_from=1) + [""]
    if out:
        out += ["Ratios are to the row's first column (p50 for inference, examples/s for training); "
                "† p99 from too few samples. Each run follows in full.", ""]
    return out


def render_markdown(docs: Document | Mapping[str, Any] | Sequence[Document | Mapping[str, Any]]) -> str:
    """Result document(s) -> GitHub-flavoured Markdown (ends with one newline); the runs of a
    matrix start with their pivot on the varying axes."""
    if isinstance(docs, (Document, Mapping)):
        docs = [docs]
    out: list[str] = _pivot_tables(docs)
    for doc in (d if isinstance(d, Document) else Document.from_dict(d) for d in docs):
        if out:
            out.append("")
        out += _header(doc)
        out += _verdict_lines(doc)
        if doc.kind == "diagnose":

            out += markdown_lines(doc, md_escape)
            continue
        if doc.kind == "readiness":

            out += readiness_lines(doc, md_escape)
            continue
        inf = inference_rows(doc)
        legend: list[str] = []
        if inf:
            table, legend = _inference_table(doc)
            out += table
        train = _train_table(doc)
        if train:
            if inf:
                out.append("")
            out += train
        if not inf and not train:
            out.append("_no result rows_")
        where = _where_the_time_goes(inf)
        if where:
            out += [""] + where
        drift = _drift_table(inf)
        if drift:
            out += ["", "<details><summary>per-output drift vs reference</summary>", ""] + drift + ["", "</details>"]
        if doc.kind == "llm-bench":

            out += llm_lines(doc, md_escape)
        if legend:
            out += ["", md_escape("; ".join(legend))]
        out += _state_lines(doc, inf)
    return "\n".join(out) + "\n"


def _state_lines(doc: Document, rows: list[tuple[InferenceRow, bool]]) -> list[str]:
    """The state rule that ran (stateful models, streams) and each row's per-stream decisions."""
    out = [md_escape(doc.state_rule_note)] if doc.state_rule_note else []
    for r, is_ref in rows:
        st = r.stream_record
        if st is not None and not is_ref:
            out.append(f"- streams, {md_escape(r.precision or r.model)}: {md_escape(st.text())}")
    return [""] + out if out else []
