"""convert-and-compare / compare: one row per precision x target, the reference first; the
convert manifest; the environment fingerprint."""

from __future__ import annotations

from typing import Any, Mapping

from rich.table import Table
from rich.text import Text

from edgebench.core.formats import fmt_bytes
from edgebench.judge.outcome import precision_label, row_verdict, top1_change  # noqa: F401 -- top1_change re-exported
from edgebench.report.tables import Table as ResultTable
from edgebench.report.tables import inference_table
from edgebench.report.terminal._cells import as_document, e, fit_columns, input_mapping_note, state_notes, stream_notes
from edgebench.report.terminal.fit import Col, fit_tables, plan
from edgebench.report.terminal.profile import render_where, verdict_lines
from edgebench.report.terminal.warnings import lines as grouped_warnings
from edgebench.rows import Document, InferenceRow
from edgebench.rows.envelope import Binding, SourceRecord
from edgebench.rows.records import Manifest

# The columns of edgebench.report.tables the terminal leaves out (the title names the model; the
# rest are in Markdown, HTML and the JSON); every other column is drawn, narrow terminals dropping
# by priority.
TERMINAL_HIDDEN = ("run", "model", "device", "p90_ms", "samples", "top5_agree")


def _fmt(v: Any, spec: str = ".2f", suffix: str = "") -> str:
    if v is None or v == "":
        return "-"
    if isinstance(v, (int, float)):
        return f"{v:{spec}}{suffix}"
    return str(v)


def _psnr(v: float | None, nonfinite: bool = False) -> str:
    if v is None:
        return "n/a" if nonfinite else "-"
    return "inf" if v == float("inf") else f"{v:.1f}"


def row_status(r: InferenceRow, gate: Mapping[str, Any] | None = None) -> str:
    """The row's verdict cell (``outcome.row_verdict``: the same words as every other output)."""
    return row_verdict(r, gate).text


def compare_rows(doc: Document) -> list[InferenceRow]:
    ref = doc.reference
    rows = [r for r in doc.rows if isinstance(r, InferenceRow)]
    return ([ref] if ref is not None and ref not in rows else []) + rows


def compare_table(doc: Document) -> ResultTable:
    """The terminal's columns of the one inference table (``report.tables``) that have a value in
    some row (a column with nothing to show is not "hidden": it is not there)."""
    return inference_table([doc], hide=TERMINAL_HIDDEN).without_empty()


# what a row of the inference table is: kept in every table at any width (report/terminal/fit.py)
IDENTITY = ("run", "model", "precision", "target", "device")


# a target name this short is one line at every width ("tf (/CPU:0)", "adb:R5CT1234 (GPU)")
TARGET_WHOLE = 20


def terminal_columns(table: ResultTable) -> list[Col]:
    """The inference table's columns for ``fit``: identity columns, text (the verdict) and numbers,
    with the table's drop priorities."""
    return [Col(c.label, num=not c.text, identity=c.key in IDENTITY, priority=c.priority,
                whole=TARGET_WHOLE if c.key == "target" else 0) for c in table.columns]


def row_where(r: InferenceRow, rows: list[InferenceRow], reference: InferenceRow | None = None) -> str:
    """A row's name in a headline or warning: its precision label, plus the target when the rows
    span several targets (the reference is "tf")."""
    if r.is_reference or r is reference:
        return "tf"
    one_target = len({x.target for x in rows if not x.is_reference and x is not reference}) <= 1
    return precision_label(r) if one_target else f"{precision_label(r)} on {r.target}"


def reference_timing_note(warnings: list[str]) -> str:
    """The reference's own timing warnings, at default verbosity, as one note: its latency is a
    baseline for context, not a candidate the user ships, and the headline compares candidates
    with fp32 -- the full text is under --verbose and in the JSON and Markdown."""
    kinds = list(dict.fromkeys(w.split(":", 1)[0].strip() for w in warnings))
    return f"reference latency {', '.join(kinds)}: its timing only, not a candidate's (--verbose: why)"


def headline_lines(doc: Document) -> list[str]:
    """One line per candidate, before the table, answering the user's question (rich markup):
    ``int8: 73% smaller, p50 3.3x faster than fp32, top-1 -0.00 pp — gate passed`` (each check
    that failed in the caption and the GATE FAILED lines)."""
    rows = [r for r in doc.rows if isinstance(r, InferenceRow) and not r.is_reference]
    gate, gate_result = doc.gate, doc.gate_result
    fp32 = {r.target: r for r in rows if r.precision == "fp32" and r.ok and r.latency}
    out = []
    for r in rows:
        v = row_verdict(r, gate)
        where = row_where(r, rows)
        if not r.ok:
            out.append(f"[bold red]{e(where)}: {e(v.text)}[/]")
            continue
        bits = []
        if r.size_reduction_pct is not None and r.precision != "fp32":
            red = r.size_reduction_pct          # a file that grew is "larger", never "-2% smaller"
            bits.append(f"{red:.0f}% smaller" if round(red) > 0 else f"{-red:.0f}% larger" if round(red) < 0
                        else "same size")
        base = fp32.get(r.target)
        lat = r.latency
        if lat and lat.p50 and base is not None and base is not r and base.latency.p50:
            ratio = base.latency.p50 / lat.p50
            bits.append(f"p50 {ratio:.1f}x faster than fp32" if ratio >= 1 else
                        f"p50 {1 / ratio:.1f}x slower than fp32")
        elif lat and lat.p50 is not None:
            bits.append(f"p50 {lat.p50:.3g} ms")
        acc, worst = r.accuracy, r.worst
        if acc is not None and acc.top1_drop_pp is not None:
            bits.append(f"top-1 {top1_change(acc.top1_drop_pp)} pp")
        elif worst is not None and worst.psnr_db is not None:
            bits.append(f"PSNR {_psnr(worst.psnr_db)} dB")
        checks = gate_result.for_row(r.precision, r.target) if gate_result is not None else ()
        if not v.ok:
            tail = f"[bold red]{e(v.text)}[/]"
        else:
            tail = "[green]gate passed[/]" if checks else "ok"
        out.append(f"[bold]{e(where)}[/]: {e(', '.join(bits))} — {tail}")
    out.extend(size_lines(rows))
    return out


def size_lines(rows: list[InferenceRow]) -> list[str]:
    """One line per precision whose file is not smaller than FP32: where the bytes went and the
    precision that is smaller (``InferenceRow.size_explained``)."""
    said: dict[str, str] = {}
    for r in rows:
        if r.size_explained is not None and r.precision not in said:
            said[str(r.precision)] = r.size_explained.line
    return [f"[yellow]size: {e(line)}[/]" for line in said.values()]


def footer_lines(doc: Document) -> list[str]:
    """Where the files went and which run was stored (rich markup)."""
    out = []
    manifest = doc.manifest
    if manifest:
        out.append(f"files: {e(str(manifest).rsplit('/', 1)[0])}/")
    rid = doc.run_id
    why = doc.get("not_stored")      # set by cli._common.deliver: "--no-store" or the store's error
    out.append(f"stored as run {e(str(rid)[:12])} (edgebench results show {e(str(rid)[:12])})" if rid
               else f"not stored ({e(why)})" if why == "--no-store" else f"not stored: {e(why)}" if why
               else "not stored")
    return out


def render_compare(doc: Document | Mapping[str, Any], *, width: int | None = None, wide: bool = False,
                   verbose: bool = False) -> list:
    """A headline per candidate, the table (reference first) and its notes, the warnings of every
    row grouped by cause, then where the files went and the run id."""
    doc = as_document(doc)
    inputs = doc.inputs_record
    table = compare_table(doc)
    cols = terminal_columns(table)
    layout = plan(cols, table.cells, width, wide)
    shown = [i for g in layout.groups for i in g]
    legend = ResultTable(tuple(table.columns[i] for i in dict.fromkeys(shown)),
                         tuple(tuple(r[i] for i in dict.fromkeys(shown)) for r in table.cells), table.bad).legend()
    notes = ["; ".join(e(x) for x in legend)] if legend else []
    if any(isinstance(r, InferenceRow) and r.keep_float for r in doc.rows):
        notes.append("+N float = int8 with N tensors kept float (--keep-float; names in the JSON row's keep_float)")
    gate = doc.gate_result
    for c in gate.checks if gate is not None else ():
        if c.undecided:
            notes.append(f"[bold yellow]GATE CANNOT JUDGE[/] {e(c.message)}")
        elif not c.passed:
            notes.append(f"[bold red]GATE FAILED[/] {e(c.message)}")
    if gate is not None and gate.checks and gate.passed:
        notes.append(f"[green]gate passed[/] ({len(gate.checks)} checks)")
    if inputs.binding:        # positional arrays: say which input each went to (issue 24.3)
        pairs = ", ".join(f"{k} -> {n}" for k, n in inputs.binding.pairs.items())
        notes.append(f"--data arrays bound to the model's inputs by {e(inputs.binding.how)}: {e(pairs)}")
    if inputs.synthetic:
        # a note, not a second warning: the run's one SYNTHETIC warning is on stderr (cli._main)
        notes.append("inputs: synthetic random data (drift only, no accuracy)")
    notes.extend(source_notes(doc.source_record))
    for sm in doc.saved_models:   # compare A B: how each SavedModel was read
        if sm.loader == "graph":
            notes.append(f"{e(sm.path)}: loader graph ({e(sm.loader_reason)})")
    for r in compare_rows(doc):
        mp = Binding.of(r.output_mapping)
        if mp is not None and mp.how != "name":
            pairs = ", ".join(f"{g} -> {k}" for k, g in mp.pairs.items() if g != k)
            notes.append(f"outputs of {e(r.precision or r.model)} matched to the reference by {e(mp.how)}: "
                         f"{e(pairs)}")
        notes.extend(input_mapping_note(r))
    if doc.state_rule_note:
        notes.append(e(doc.state_rule_note))
    notes.extend(state_notes(compare_rows(doc)))
    notes.extend(stream_notes(compare_rows(doc)))
    if doc.error_sources_text:
        notes.append(e(doc.error_sources_text))
    per_process = sorted({str(r.target) for r in compare_rows(doc) if r.sample_class == "per-process"})
    if per_process:
        notes.append(f"[yellow]latency on {e(', '.join(per_process))}: per-process samples (benchmark_model: "
                     "each the first timed run of a fresh process), slower than the steady-state rows; compare "
                     "them only with each other[/]")
    tables = fit_tables(f"edgebench: {doc.model or '-'}  ({inputs.samples} samples, inputs sha256 "
                        f"{str(inputs.sha256)[:12]})", cols, table.cells, width=width, wide=wide,
                        row_styles=["red" if bad else None for bad in table.bad], caption=notes)

    out: list = [*headline_lines(doc), *tables]
    out.extend(verdict_lines(compare_rows(doc)))
    out.extend(render_where([r for r in compare_rows(doc)], width))
    items = [("data", w) for w in doc.data_warnings]
    reference_timing: list[str] = []
    for r in compare_rows(doc):
        where = row_where(r, compare_rows(doc), doc.reference)
        # with --repeats the row's own warnings are each process's (a pooled check would read
        # run-to-run noise as drift) plus the run-to-run spread; the pooled ones are left out
        pooled = () if r.repeats or not r.latency else r.latency.warnings
        if not verbose and (r.is_reference or r is doc.reference):
            reference_timing += pooled       # context, not a candidate: one dim line below
            pooled = ()
        long = f"{r.precision} on {r.target}"
        items += [(where, w, long) for w in dict.fromkeys(tuple(pooled) + tuple(r.warnings))]
    for line in grouped_warnings(items, verbose=verbose, width=width):
        out.append(f"[yellow]{e(line)}[/]")
    if reference_timing:
        out.append(f"[dim]{e(reference_timing_note(reference_timing))}[/]")
    out.extend(footer_lines(doc))
    return out


def render_manifest(m: Manifest | dict[str, Any], width: int | None = None, wide: bool = False) -> list:
    """The convert manifest as a table: one row per precision (report/terminal/fit.py widths: the
    precision stays, nothing is cut), then where the files are and how the source was read."""
    man = m if isinstance(m, Manifest) else Manifest.of(m)
    cols = [Col("precision", identity=True), Col("status"), Col("size", num=True), Col("reduction", num=True),
            Col("convert s", num=True, priority=2), Col("ops", num=True, priority=3),
            Col("float ops (coverage)", priority=1), Col("notes")]
    rows = []
    for v in man.variants:
        notes = []
        if v.parity:
            notes.append(f"parity {v.parity}")
        if v.quantization_mode:
            notes.append(v.quantization_mode)
        if v.precision_found:
            notes.append(f"the file is {v.precision_found}")
        if v.keep_float:
            notes.append(f"{len(v.keep_float)} tensor(s) kept float, {v.keep_float_ops} op(s)")
        if not v.ok:
            notes.append(str(v.error))
        rows.append([v.precision, Text("ok", style="green") if v.ok else Text("FAILED", style="bold red"),
                     fmt_bytes(v.bytes), _fmt(v.size_reduction_pct, ".1f", "%"), _fmt(v.seconds, ".1f"),
                     "-" if v.ops is None else str(v.ops),
                     ", ".join(f"{k} x{n}" for k, n in sorted(v.float_ops.items(), key=lambda kv: (-kv[1], kv[0])))
                     or "none"
                     if v.ok and v.quantized else "-", "; ".join(notes) or "-"])
    notes = ([f"files: {e(man.out_dir)}"] if man.out_dir else []) + source_notes(man.source)
    notes += [f"[yellow]size: {e(v.size_explained)}[/]" for v in man.variants if v.ok and v.size_explained]
    if man.calibration_warning:
        # the warning itself is said once, on stderr (cli._main); the table keeps the fact
        notes.append("calibration: on synthetic random data (INT8 scales fitted to noise)")
    if man.calibration_not_needed is not None:
        notes.append(f"calibration: none needed ({e(man.calibration_not_needed)})")
    return fit_tables(f"edgebench convert: {man.name}  (source sha256 {str(man.sha256)[:12]})", cols, rows,
                      width=width, wide=wide, caption=notes)


def source_notes(src: SourceRecord | Mapping[str, Any]) -> list[str]:
    """How a source was read when it was not the plain TF2 path: loader, signature, fixed shapes
    (a result's ``source`` or a convert manifest's, typed once here)."""
    src = src if isinstance(src, SourceRecord) else SourceRecord.of(src)
    out = []
    if src.loader == "graph":
        out.append(f"loader: graph ({e(src.loader_reason)})")
    if src.signature_key not in (None, "serving_default"):
        out.append(f"signature: {e(src.signature_key)}")
    for name, n in src.input_shapes.items():
        out.append(f"input {e(name)}: {e(n.used)} ({e(n.how)})")
    if src.reference_reason:
        out.append(f"[yellow]reference: {e(src.reference_reason)}[/]")
    if src.static_batch_fallback:
        out.append(f"[yellow]converted with a dynamic batch: the converter could not take a static batch of 1 "
                   f"({e(src.static_batch_fallback)})[/]")
    return out


def render_fingerprint(fp: Mapping[str, Any], title: str = "environment") -> Table:
    t = Table(title=title, show_header=True, header_style="bold")
    t.add_column("field")
    t.add_column("value", overflow="fold")
    for k, v in fp.items():
        t.add_row(e(k), e(v))
    return t
