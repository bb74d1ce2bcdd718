"""``edgebench readiness`` documents for every output: the cells of the one table (terminal,
Markdown and HTML draw the same ones) and the lines under it -- each op left on the CPU with the
plugin's and the vendor's reason, the library each unchecked vendor lacks, the SDK notes, the
``--fail-on`` verdict. Pure: typed documents in, strings out; callers escape for their format."""

from __future__ import annotations

import re
from typing import Any, Callable, Sequence

from edgebench.core.formats import fmt_bytes, fmt_value
from edgebench.judge.outcome import precision_label, row_verdict
from edgebench.report.html_parts import esc, table_html
from edgebench.rows import Document, InferenceRow
from edgebench.rows.metrics import BY_KEY

HOST_PREFIX = "host"      # the host's own runs (CPU baseline, dispatch path): not NPU targets

# (header, priority): 0 = always shown, higher = dropped first on a narrow terminal
COLUMNS: tuple[tuple[str, int], ...] = (
    ("precision", 0), ("target", 0), ("checkable", 2), ("status", 0), ("on NPU", 0), ("left on CPU", 1),
    ("compiled", 3), ("s", 4), ("SDK", 5), ("p50 ms", 2), ("vs CPU", 2), ("placement", 1),
)
# the host dispatch run's columns; "placement" is where the run's ops went in words (rows'
# ``all_ops_on_npu``), not LiteRT's ``fully_accelerated``, which counts XNNPACK as accelerated
HOST_COLUMNS = ("p50 ms", "vs CPU", "placement")


def is_readiness(doc: Document) -> bool:
    return doc.kind == "readiness"


def _left(r: InferenceRow) -> str:
    """The ops left on the CPU by name; ops the plugin counted but did not name (a document stored
    before rows listed them) as 'N unnamed', never '-' beside N < M."""
    rd = r.readiness
    if rd is None:
        return "-"
    counts: dict[str, int] = {}
    for op in rd.left_on_cpu:
        counts[op.op or "?"] = counts.get(op.op or "?", 0) + 1
    words = [f"{op} x{n}" if n > 1 else op for op, n in counts.items()]
    unlisted = (rd.ops_total - rd.ops_on_npu - len(rd.left_on_cpu)) if rd.ops_known else 0
    if unlisted > 0:
        words.append(f"{unlisted} unnamed op{'s' * (unlisted != 1)}")
    if not words:
        return "-" if rd.ops_known else ""
    return ", ".join(words)


def cells(r: InferenceRow, gate: Any = None) -> list[str]:
    """One row's cells, in ``COLUMNS`` order (plain text)."""
    rd = r.readiness
    verdict = row_verdict(r, gate)
    if rd is None:                                     # the host's CPU baseline row
        status, checkable, on = verdict.text if not verdict.ok else "ok", "-", "-"
    else:
        checkable = "yes" if rd.checkable else f"no: {_lib(rd.missing)}"
        status = rd.compile_status or "-"
        if verdict.state == "gate-failed":
            status += " (GATE FAILED)"
        on = rd.ops_text if rd.checkable else "-"
    p50 = BY_KEY["p50_ms"].value(r)
    psnr = r.worst_vs_host.psnr_db if r.worst_vs_host is not None else None
    host = r.target and r.target.startswith("host:npu")
    vs = ("identical" if psnr is not None and psnr == float("inf") else f"PSNR {fmt_value(psnr, '.1f')} dB"
          if psnr is not None else "-") if host else "-"
    if vs != "-" and rd is not None and rd.drift_inputs is not None:
        vs += f", {rd.drift_inputs} inputs"
    return [precision_label(r) if r.precision else "-", r.target or "-", checkable, status, on, _left(r) or "-",
            fmt_bytes(rd.compiled_bytes) if rd and rd.compiled_bytes else "-",
            fmt_value(rd.compile_seconds, ".2f") if rd and rd.compile_seconds is not None else "-",
            (rd.sdk_version or rd.sdk or "-") if rd else (r.runtime or "-"),
            fmt_value(p50, ".4g") if p50 is not None else "-", vs,
            rd.placement if host and rd is not None else "-"]


def _lib(missing: str | None) -> str:
    """The library's name from a 'missing' sentence (the whole sentence is under the table)."""
    if not missing:
        return "?"
    head = missing.split(" (", 1)[0].split(":", 1)[0]
    return head if len(head) <= 48 else head[:45] + "..."


def _unchecked(r: InferenceRow) -> bool:
    return r.readiness is not None and not r.readiness.checkable


def _is_host(r: InferenceRow) -> bool:
    return r.readiness is None or (r.target or "").startswith(HOST_PREFIX)


def _problem_rank(r: InferenceRow, gate: Any = None) -> int:
    """Problems first: a failed or crashed compile, a gate that failed, ops left on the CPU, then
    what is ready, then the host's own runs."""
    rd = r.readiness
    if _is_host(r):
        return 4
    if r.status == "failed" or rd.compile_status == "compile-failed":
        return 0
    if row_verdict(r, gate).state == "gate-failed":
        return 1
    return 3 if _ready(r) else 2


def _ready(r: InferenceRow) -> bool:
    rd = r.readiness
    return rd is not None and rd.checkable is True and rd.compile_status == "ok" and r.status == "ok" \
        and rd.all_ops_on_npu is not False and (not rd.ops_known or rd.ops_on_npu == rd.ops_total)


def table(doc: Document, *, fold: bool = False) -> tuple[list[str], list[list[str]]]:
    """Headers and cells; the host-run columns only when a row ran on the host. ``fold`` (the
    terminal's first screen): rows that cannot be checked here are left to ``unchecked_lines`` (one
    line per vendor), problems come first, and the ``checkable`` column, all "yes" then, goes."""
    rows = list(doc.rows)
    gate = doc.gate
    if fold:
        rows = sorted((r for r in rows if not _unchecked(r)), key=lambda r: _problem_rank(r, gate))
    body = [cells(r, gate) for r in rows]
    keep = [i for i, (h, _p) in enumerate(COLUMNS) if (h not in HOST_COLUMNS or any(b[i] != "-" for b in body))
            and not (fold and h == "checkable")]
    return [COLUMNS[i][0] for i in keep], [[b[i] for i in keep] for b in body]


def _socs(socs: Sequence[str]) -> str:
    socs = list(dict.fromkeys(socs))
    return ", ".join(socs) if len(socs) <= 3 else f"{len(socs)} SoCs ({', '.join(socs)})"


_FP16 = re.compile(r"support\w*\s+FP16", re.I)
_INT_PRECISIONS = ("int8", "int16x8", "int4")


def _problem(r: InferenceRow) -> str:
    """What keeps one checked target from being ready, in a few words (the lines under the table
    have the plugin's and the vendor's whole sentences)."""
    rd = r.readiness
    if rd.compile_status == "compile-failed":
        return f"compile fails: {_clause(r.error)}" if r.error else "compile fails"
    if r.status == "failed":
        return f"the compile did not finish ({_clause(r.error)})"
    words = _left(r)
    n_left = (rd.ops_total - rd.ops_on_npu) if rd.ops_known else len(rd.left_on_cpu)
    text = f"{words} stay{'s' * (n_left == 1)} on the CPU" if words and words != "-" else (rd.compile_status or "not ready")
    fp16 = list(dict.fromkeys(o.op for o in rd.left_on_cpu if o.vendor_line and _FP16.search(o.vendor_line)))
    if fp16:
        text += f" ({', '.join(fp16)}: no FP16 on this SoC" + (
            " -- quantize to int8)" if (r.precision or "") not in _INT_PRECISIONS else _float_in_int(r, fp16) + ")")
    return text


def _float_in_int(r: InferenceRow, ops: list[str]) -> str:
    """Why an integer file has float ops for an SoC without FP16 to refuse: the file keeps them
    float (its ``precision_detail``, ``tflite_model.MixedFile``)."""
    detail = r.precision_detail or ""
    if not detail:
        return ""
    return (f" -- float in this file, which is {detail}: the converter found no integer kernel for them; an "
            "op with one (e.g. RELU for ELU) moves them to the NPU")


def _clause(error: str | None) -> str:
    """An error's first clause, short enough for a headline."""
    first = (error or "?").split(";", 1)[0].split("\n", 1)[0].strip()
    return first if len(first) <= 60 else first[:57].rstrip() + "..."


def headline(doc: Document) -> list[str]:
    """The answer first, computed from the rows: per vendor and precision, on how many of the SoCs
    checked here the model is ready, then each problem with the SoCs it holds for (problems that are
    the same word for word share one mention): ``Qualcomm, int8: ready on 8 of 10 SoCs; SM8350:
    compile fails: ...; 5 SoCs (...): Cumsum stays on the CPU (Cumsum: no FP16 on this SoC)``."""
    groups: dict[tuple[str, str], list[InferenceRow]] = {}
    for r in doc.rows:
        if not _is_host(r) and not _unchecked(r):
            groups.setdefault((r.readiness.vendor or "?", r.precision or "?"), []).append(r)
    out = []
    gate = doc.gate
    for (vendor, precision), rows in groups.items():
        ready = [r for r in rows if _ready(r)]
        problems: dict[str, list[str]] = {}
        for r in sorted((r for r in rows if not _ready(r)), key=lambda r: _problem_rank(r, gate)):
            problems.setdefault(_problem(r), []).append(r.readiness.soc or r.target or "?")
        noun = "SoC" if len(rows) == 1 else "SoCs"
        parts = [f"{vendor}, {precision}: ready on {len(ready)} of {len(rows)} {noun}"]
        parts += [f"{_socs(socs)}: {text}" for text, socs in problems.items()]
        out.append("; ".join(parts))
    if not groups and any(_unchecked(r) for r in doc.rows):
        out.append("no NPU target could be checked here: each vendor's compiler is missing (what to install is below)")
    return out


def unchecked_lines(doc: Document) -> list[str]:
    """One line per vendor whose targets cannot be checked here: its SoCs, the library it lacks and
    how to install it (the row's ``missing`` sentence says both)."""
    seen: dict[str, dict[str, list[str]]] = {}
    for r in doc.rows:
        rd = r.readiness
        if rd is not None and not rd.checkable:
            seen.setdefault(rd.vendor or "?", {}).setdefault(rd.missing or "?", []).append(rd.soc or "?")
    out = []
    for vendor, by_missing in seen.items():
        socs = list(dict.fromkeys(s for ss in by_missing.values() for s in ss))
        which = ", ".join(socs) if len(socs) <= 3 else f"{len(socs)} SoCs: {', '.join(socs)}"
        out.append(f"{vendor} ({which}): not checkable here: {'; '.join(by_missing)}")
    return out


def details(doc: Document, *, fold: bool = False) -> list[str]:
    """The lines under the table: why each op stayed on the CPU (plugin line | vendor line), what
    each vendor that could not be checked lacks (unless ``fold``: the terminal says that above the
    table, ``unchecked_lines``), notes, the --fail-on verdict."""
    out: list[str] = []
    for r in doc.rows:
        rd = r.readiness
        if rd is None or not rd.checkable:
            continue
        for op in rd.left_on_cpu:
            where = f"#{op.node} " if op.node is not None else ""
            vendor = f" | vendor: {op.vendor_line}" if op.vendor_line else (
                " | vendor: no such op (unmapped)" if op.why == "unmapped" else "")
            out.append(f"{r.precision} on {r.target}: {where}{op.op} stays on the CPU -- plugin: {op.plugin_line}{vendor}")
        if rd.compile_status == "compile-failed" and r.error:
            out.append(f"{r.precision} on {r.target}: compile failed after partitioning ({rd.ops_text}): {r.error}")
    seen: dict[str, list[str]] = {}
    for r in doc.rows if not fold else ():
        rd = r.readiness
        if rd is not None and not rd.checkable and rd.missing:
            seen.setdefault(f"{rd.vendor}|{rd.missing}", []).append(rd.soc or "?")
    for key, socs in seen.items():
        vendor, missing = key.split("|", 1)
        out.append(f"{vendor} ({', '.join(dict.fromkeys(socs))}): not checkable here: {missing}")
    notes = list(dict.fromkeys(n for r in doc.rows if r.readiness is not None for n in r.readiness.readiness_notes))
    out += [f"note: {n}" for n in notes]
    for v in doc.get("vendors") or ():
        if v.get("checkable") and v.get("sdk"):
            versions = sorted({r.readiness.sdk_version for r in doc.rows if r.readiness is not None
                               and r.readiness.vendor == v.get("vendor") and r.readiness.sdk_version})
            out.append(f"{v.get('vendor')}: compiled with {v.get('sdk')}"
                       + (f" (plugin SDK version {', '.join(versions)})" if versions else ""))
    gate = doc.gate_result
    if gate is not None:
        for c in gate.checks:
            out.append(("ok: " if c.passed else "FAIL-ON FAILED: ") + c.message)
    if doc.get("seconds") is not None:
        out.append(f"readiness report: {len(doc.rows)} rows in {fmt_value(doc.get('seconds'), '.1f')} s; compiled files "
                   f"in {doc.get('out_dir')}")
    return out


def markdown_lines(doc: Document, esc: Callable[[Any], str]) -> list[str]:
    headers, body = table(doc)
    out = ["| " + " | ".join(esc(h) for h in headers) + " |",
           "|" + "|".join("---" for _ in headers) + "|"]
    out += ["| " + " | ".join(esc(c) for c in row) + " |" for row in body]
    lines = details(doc)
    if lines:
        out += ["", *[f"- {esc(x)}" for x in lines]]
    return out


def html_section(docs: Sequence[Document]) -> str:
    parts = []
    for doc in docs:
        headers, body = table(doc)
        parts.append(f"<h3>{esc(doc.model or 'model')}</h3>")
        parts.append(table_html(headers, body, left=2))
        lines = details(doc)
        if lines:
            parts.append("<ul>" + "".join(f"<li>{esc(x)}</li>" for x in lines) + "</ul>")
    return "".join(parts)
