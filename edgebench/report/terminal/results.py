"""``edgebench results``: stored runs, one run, a comparison, a history."""

from __future__ import annotations

from typing import Any

from rich.markup import escape
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from edgebench.core.fingerprint import KEY_FIELDS
from edgebench.core.formats import fmt_metric
from edgebench.judge.outcome import precision_label, row_verdict, run_verdict
from edgebench.report.tables import INFERENCE_COLUMNS
from edgebench.report.terminal._cells import as_document
from edgebench.report.terminal.fit import Col, fit_tables, group
from edgebench.report.terminal.readiness import readiness_lines, readiness_tables
from edgebench.rows.identity import headline, series_label
from edgebench.rows.metrics import BY_KEY, REGISTRY
from edgebench.rows.records import Comparison, StoredRun


def _e(v: Any) -> str:
    """User data shown in a rich cell: escape markup ('[x]' is text, not a style)."""
    return escape(str(v))


def _f(v: Any, spec: str = ".3g") -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return format(v, spec)
    return _e(v)


# (column, drop priority: 0 = always shown, higher = dropped first on a narrow terminal); the run id
# is the identity of a row, the verdict and what was measured (models) come before the matrix keys
RUN_COLUMNS = (("run id", 0), ("created (UTC)", 0), ("kind", 0), ("status", 0), ("models", 1), ("rows", 2),
               ("matrix", 4), ("cell", 3))


def render_runs(runs: list[dict[str, Any]], where: str = "", *, width: int | None = None, wide: bool = False):
    """Stored runs, one line each (``report/terminal/fit.py``: the run id stays, no id or word is
    cut; a narrow ``width`` drops the matrix and cell first and the caption says so; ``wide`` shows
    every column, in a second table when one does not fit)."""


    cols = [Col("run id", identity=True), Col("created (UTC)", num=True), Col("kind"),
            *(Col(name, priority=p, num=name == "rows") for name, p in RUN_COLUMNS[3:])]
    rows = []
    for r in (StoredRun.of(x) for x in runs):
        status = run_cell(r)
        rows.append([r.run_id[:12], r.created[:19].replace("T", " "), r.kind,
                     status if status.startswith("ok") else Text(status, style="bold red"),
                     ", ".join(r.models) or "-", "-" if r.n_rows is None else str(r.n_rows),
                     (r.matrix_hash or "-")[:12], r.cell_key or "-"])
    return group(fit_tables(f"stored runs ({len(runs)})" + (f" in {where}" if where else ""), cols, rows,
                            width=width, wide=wide))


def run_cell(run: StoredRun | dict[str, Any]) -> str:
    """A stored run's verdict in a few words (the columns ``Store.save`` fills from ``outcome``):
    a failed gate or a silent failure reads so, never "ok"."""
    run = run if isinstance(run, StoredRun) else StoredRun.of(run)
    if run.gate == "failed":
        return "GATE FAILED"
    v = run.verdict
    if v in (None, "ok", "skipped"):
        return run.status + (" (gate passed)" if run.gate == "passed" else "")
    return {"failed": "failed", "nonfinite": "NaN/Inf", "silent": "SILENT", "gate-failed": "GATE FAILED"}.get(v, v)


_TEXT_COLS = ("model", "precision", "target", "status")


def _plain(v: Any, spec: str = ".3g") -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return format(v, spec)
    return str(v)


_IDENTITY_COLS = (("model", "model"), ("precision", "prec"), ("target", "target"), ("status", "status"),
                  ("batch_size", "batch"))
_IDENTITY_PRIORITY = {"model": 0, "precision": 0, "target": 0, "status": 0, "batch_size": 2}
_IDENTITY_KEYS = ("model", "precision", "target")
_NOTES_PRIORITY = 9            # the notes are the JSON's details: the first to go
# the registry's summary metrics follow (metrics.REGISTRY: label, unit, drop priority)
_ROW_COLS = _IDENTITY_COLS + tuple((m.key, m.label) for m in REGISTRY if m.summary)
# the drop order of the one inference table (report/tables.py) where it has the column, so a stored
# run drops what its live table drops: the size reduction and the top-1 change stay with p50/p99
_ROW_PRIORITY = {**_IDENTITY_PRIORITY, **{m.key: m.priority for m in REGISTRY},
                 **{c.key: c.priority for c in INFERENCE_COLUMNS if c.key in BY_KEY}}


def _show_cell(key: str, value: Any) -> str:
    """Identity columns as text; metrics in their unit's one format (``fmt_metric``)."""
    m = BY_KEY.get(key)
    return _plain(value) if m is None else fmt_metric(m.unit, value)


def render_show(doc: dict[str, Any], *, width: int | None = None, wide: bool = False) -> list[Any]:
    """Header line, a table of the rows' headline metrics, and the environment's key fields.
    Numbers and ids never wrap; at a narrow ``width`` low-priority columns are dropped instead."""


    typed = as_document(doc)
    gate = typed.gate
    heads = [{**headline(r), "status": row_verdict(r, gate).text,
              "precision": precision_label(r) if r.precision else None} for r in typed.rows]
    used = [(k, lbl) for k, lbl in _ROW_COLS if any(h.get(k) is not None for h in heads)]
    cells = []
    for row, h in zip(typed.rows, heads):
        notes = []
        if h.get("p99_valid") is False:
            notes.append("p99 not valid (too few samples)")
        if row.error:
            notes.append(str(row.error))
        if row.samples_ns is not None:
            notes.append(f"{len(row.samples_ns)} samples")
        cells.append([_show_cell(k, h.get(k)) for k, _ in used] + ["; ".join(notes) or "-"])
    # what a row is (model, precision, target) stays; its verdict and the metrics by their registry
    # priority; the notes (details of the JSON) go first on a narrow terminal
    cols = [Col(lbl, identity=k in _IDENTITY_KEYS, num=k not in _TEXT_COLS,
                priority=_ROW_PRIORITY.get(k, 1)) for k, lbl in used] + [Col("notes", priority=_NOTES_PRIORITY)]
    verdict = run_verdict(typed)
    title = f"run {(typed.run_id or '?')[:12]}  {typed.kind}  created {typed.created}"
    if typed.kind == "readiness":          # its answer table (N/M, partitions, ops left), as `readiness` drew it

        tables = readiness_tables(typed, f"{title}  model {typed.model or '?'}", width=width, wide=wide) \
            + readiness_lines(typed)
    else:
        tables = fit_tables(title, cols, cells, width=width, wide=wide)
    fp = typed.fingerprint       # free-form: the environment's own keys
    env = Table(title="environment (key fields)")
    env.add_column("field")
    env.add_column("value", overflow="fold")
    for k in ("hostname", *KEY_FIELDS, "edgebench", "edgebench_git_sha"):
        if fp.get(k) is not None:
            env.add_row(k, _e(fp[k]))
    style = "green" if verdict.state == "ok" and verdict.gate != "failed" else "bold red"
    parts: list[Any] = [f"[{style}]{_e(verdict.text)}[/]"]
    if verdict.diagnose:
        parts.append(f"find the layer: {_e(verdict.diagnose)}")
    parts.extend(tables)
    if typed.cell is not None:
        parts.append(f"matrix {str(typed.get('matrix_hash'))[:12]} cell {_e(typed.cell.get('key'))}")
    parts.append(env)
    return parts


def _short(v: Any) -> str:
    """An identity value for one line: a sha256 as its first 12 hex digits."""
    text = str(v)
    return text[:12] if len(text) == 64 and all(c in "0123456789abcdef" for c in text) else text


_VERDICT_STYLE = {"worse": "bold red", "better": "bold green", "same": "dim", "cannot judge": "bold yellow",
                  "n/a": "dim", "within threshold": "dim"}
# How an interval that is not one for a rerun is named where it is printed (apart from the verdict);
# a within-run one is named in the change's own note (``stats.decide``), widened as it was judged.
_APART = {"loaded": "95% interval of these runs' load (stalls from other work)"}


def _change_cell(ch: Any) -> str:
    """The change as it reads: a ratio with its interval for a rerun (``1.08x [1.05x, 1.11x]``), or an
    absolute change in its unit (``-8.33 pp``). A within-run or load-bound interval is not printed
    here, beside the verdict: the note carries it (``_note``)."""
    if ch.change is not None:
        return f"{ch.change:+.4g} {ch.unit}"
    if ch.ratio is None:
        return "-"
    text = f"{ch.ratio:.3f}x"
    return text + (f" [{ch.ci[0]:.3f}x, {ch.ci[1]:.3f}x]" if ch.ci and ch.rerun_interval else "")


def _verdict_cell(ch: Any) -> Any:
    """The verdict, with its reason when it cannot be judged: ``cannot judge (load on A)``."""
    text = f"{ch.verdict} ({ch.reason})" if ch.verdict == "cannot judge" and ch.reason else ch.verdict
    return Text(text, style=_VERDICT_STYLE.get(ch.verdict, ""))


def _note(ch: Any) -> str:
    """The change's note, then an interval that is not one for a rerun, named for what it is."""
    apart = _APART.get(ch.ci_basis) if ch.ci and not ch.rerun_interval else None
    if ch.ci and not ch.rerun_interval and ch.ci_basis == "within-run" and "within-run only" not in ch.note:
        apart = f"within-run only: {ch.ci_level:.0%} interval of the samples"
    if not apart:
        return ch.note
    return "; ".join(x for x in (ch.note, f"{apart}: [{ch.ci[0]:.3f}x, {ch.ci[1]:.3f}x]") if x)


_PANEL_LINES = 6         # an environment/method/configuration panel names at most this many rows


def _capped(lines: list[str], details: bool) -> str:
    if details or len(lines) <= _PANEL_LINES:
        return "\n".join(lines)
    return "\n".join(lines[:_PANEL_LINES - 1] + [f"  ... and {len(lines) - _PANEL_LINES + 1} more (--details)"])


def render_results_compare(rep: Comparison | dict[str, Any], *, width: int | None = None,
                           details: bool = False) -> list[Any]:
    """What changed, first: environment/method/configuration differences (loud, a few lines), then
    one table of the metrics that got worse or better (the row pair, the metric, A, B, the change),
    then a line counting the rest -- a comparison of many rows fits a screen. ``details`` adds a
    table per row pair with every metric, its test, p and note (report/terminal/fit.py widths)."""


    cmp = rep if isinstance(rep, Comparison) else Comparison.of(rep)
    parts: list[Any] = [_e(f"A = run {cmp.a[:12]}   B = run {cmp.b[:12]}")]
    if cmp.fingerprint_diff:
        lines = [f"  {d.field}: {_e(d.a)}  ->  {_e(d.b)}" for d in cmp.fingerprint_diff]
        parts.append(Panel(f"[bold]These runs come from different environments; a ratio may reflect "
                           f"the environment, not the model:[/]\n{_capped(lines, details)}",
                           title="[bold yellow]ENVIRONMENT DIFFERS[/]", border_style="yellow"))
    else:
        parts.append("[green]environment key fields identical[/]")
    mixed = [p for p in cmp.pairs if p.mixed_methods]
    if mixed:
        lines = [f"  {_e(' / '.join(p.identity))}: A {_e(p.sample_class[0])}, B {_e(p.sample_class[1])}"
                 for p in mixed]
        parts.append(Panel("[bold]Latency samples measured by different methods are not compared (no ratio, no "
                           "verdict): a fresh process's first timed run (per-process, benchmark_model) is slower "
                           f"than a long-lived process's steady state:[/]\n{_capped(lines, details)}",
                           title="[bold yellow]METHODS DIFFER[/]", border_style="yellow"))
    differ = [p for p in cmp.pairs if p.config_diff]
    if differ:
        lines = [f"  {_e(' / '.join(p.identity))}: " + _e(", ".join(
            f"{d.field} {_short(d.a)} -> {_short(d.b)}" for d in p.config_diff)) for p in differ]
        parts.append(Panel("[bold]These rows are different configurations (another model file, tensors kept "
                           "float, another delegate ...): a change may come from the configuration, not "
                           f"the run:[/]\n{_capped(lines, details)}", title="[bold yellow]CONFIGURATION DIFFERS[/]",
                           border_style="yellow"))
    width_key = max((len(p.identity) for p in cmp.pairs), default=3)
    keys = [p.identity + [""] * (width_key - len(p.identity)) for p in cmp.pairs]
    # a part of the key every pair shares (one model, one target) goes into the title, not a column
    longest = max((p.identity for p in cmp.pairs), key=len, default=[])
    names = ["model", "precision", "target"] + ["tokens" if v.endswith(" tokens") else "batch" for v in longest[3:]]
    same = [j for j in range(width_key) if len({k[j] for k in keys}) == 1 and len(keys) > 1]
    varies = [j for j in range(width_key) if j not in same]
    key_cols = [Col(names[j], identity=True) for j in varies]
    changed, counts = [], {}
    for pair, key in zip(cmp.pairs, keys):
        for ch in pair.changes:
            counts[ch.verdict] = counts.get(ch.verdict, 0) + 1
            if ch.verdict in ("worse", "better", "cannot judge"):
                changed.append(({"worse": 0, "cannot judge": 1}.get(ch.verdict, 2), [key[j] for j in varies] + [
                    ch.metric, _f(ch.a, ".4g"), _f(ch.b, ".4g"), _change_cell(ch), _verdict_cell(ch)]))
    shared = " / ".join(keys[0][j] for j in same) if same else ""
    total = sum(counts.values())
    tally = ", ".join(f"{counts[v]} {v}" for v in ("worse", "better", "cannot judge", "same", "within threshold",
                                                   "n/a") if counts.get(v))
    summary = (f"{total} metric(s) of {len(cmp.pairs)} row pair(s): {tally or 'none'}"
               + ("" if details else "; --details: every metric of every pair with its test, p and note"))
    if changed:
        cols = key_cols + [Col("metric", identity=True), Col("A", num=True), Col("B", num=True),
                           Col("change [95% CI]", num=True), Col("verdict")]
        changed.sort(key=lambda x: x[0])             # worse first, then what cannot be judged
        parts.extend(fit_tables("what changed (B vs A)" + (f": {shared}" if shared else ""), cols,
                                [c for _, c in changed], width=width, caption=[_e(summary)]))
    else:
        parts.append(_e(f"no metric changed -- {summary}"))
    if details:
        for pair in cmp.pairs:
            loaded = [s for s, f in zip("AB", pair.loaded) if f]
            title = (f"{' / '.join(pair.identity)}   samples {pair.n_samples[0]} vs {pair.n_samples[1]}, "
                     f"processes {pair.repeats[0]} vs {pair.repeats[1]}   run-to-run noise from: "
                     f"{', '.join(pair.basis or ('-',))}"
                     + (f"   load signal on {' and '.join(loaded)}: the tail, mean and QPS reflect other work on "
                        "this machine" if loaded else ""))
            rows = [[ch.metric, _f(ch.a, ".4g"), _f(ch.b, ".4g"), _change_cell(ch), str(ch.test or "-"),
                     "-" if ch.p_value is None else f"{ch.p_value:.2g}",
                     _verdict_cell(ch), str(_note(ch) or "-")]
                    for ch in pair.changes]
            cols = [Col("metric", identity=True), Col("A", num=True), Col("B", num=True),
                    Col("change [95% CI]", num=True), Col("test", priority=2), Col("p", num=True),
                    Col("verdict"), Col("note", priority=1)]
            caption = (["[yellow]device differs: " + _e(", ".join(f"{d.field} {d.a} -> {d.b}"
                                                                   for d in pair.fingerprint_diff)) + "[/]"]
                       if pair.fingerprint_diff else [])
            parts.extend(fit_tables(title, cols, rows, width=width, wide=True, caption=caption))
    for side, unmatched in (("A", cmp.unmatched_a), ("B", cmp.unmatched_b)):
        if unmatched:
            parts.append(f"only in {side}: " + _e("; ".join("/".join(str(x) for x in k if x is not None)
                                                           for k in unmatched)))
    if not cmp.pairs:
        parts.append("[yellow]no rows in common (rows are paired by model, precision, target, batch size)[/]")
    th = ", ".join(f"{k} {v:g}" if v > 1e-6 else f"{k} any" for k, v in cmp.thresholds.items())
    parts.append(_e(f"rule: a latency change counts when >= {cmp.min_ratio}x and p < {cmp.alpha} (the larger "
                    f"of the within-run and the run-to-run test; {cmp.test}); accuracy and drift when the "
                    f"absolute change exceeds {th}; same: the {cmp.ci_level:.0%} interval inside the threshold; "
                    f"{cmp.regressions} worse, {cmp.undecided} cannot judge"))
    return parts


def render_history(h: dict[str, Any], *, width: int | None = None):
    """One series' runs, oldest first, change points marked, through the width engine
    (report/terminal/fit.py: the run number and id say what a row is)."""


    conf = series_label(h.get("series") or {}, skip=())
    cols = [Col("#", num=True, identity=True), Col("created (UTC)", whole=len("2026-01-01 00:00:00")),
            Col("run id", identity=True), Col("value", num=True), Col("change point")]
    steps = {s["run_id"]: s for s in h["steps"]}
    body = []
    for i, p in enumerate(h["points"]):
        s = steps.get(p["run_id"]) if p["step"] else None
        mark = Text(f"shifted {s['ratio']:.2f}x here: {_f(s['before'], '.4g')} -> {_f(s['after'], '.4g')} "
                    f"(p={s['p_value']:.2g})", style="bold red") if s else ""
        body.append([str(i), p["created"][:19].replace("T", " "), p["run_id"][:12], f"{p['value']:.4g}", mark])
    notes = [] if h["steps"] else ["no change point (a shift needs >= 1.1x)"]
    if h.get("method"):
        notes.append(_e(f"change points: {h['method']}"))
    if h.get("note"):
        notes.append(_e(h["note"]))
    if h.get("left_out"):
        notes.append(_e(f"{h['left_out']} run(s) left out: {h['left_out_reason']}"))
    return group(fit_tables(f"{h['model']} {h['metric']}  {conf}", cols, body, width=width, caption=notes))
