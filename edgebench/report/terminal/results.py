"""``edgebench results``: stored runs, one run, a comparison, a history."""

from __future__ import annotations

from typing import Any

from edgebench.formats import fmt_metric
from edgebench.metrics import BY_KEY, REGISTRY


def _e(v: Any) -> str:
    """User data shown in a rich cell: escape markup ('[x]' is text, not a style)."""
    from rich.markup import escape

    return escape(str(v))


def _f(v: Any, spec: str = ".3g") -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return format(v, spec)
    return _e(v)


# (column, drop priority: 0 = always shown, higher = dropped first on a narrow terminal)
RUN_COLUMNS = (("run id", 0), ("created (UTC)", 0), ("kind", 0), ("status", 0), ("models", 1), ("rows", 0),
               ("matrix", 3), ("cell", 2))


def render_runs(runs: list[dict[str, Any]], where: str = "", *, width: int | None = None, wide: bool = False):
    """Stored runs, one line each. At a narrow ``width`` the matrix and cell columns are dropped
    (and the caption says so) rather than splitting an id; ``wide`` keeps every column."""
    from rich.table import Table

    from edgebench.report.terminal._cells import fit_columns

    cells = [[r["run_id"][:12], r["created"][:19].replace("T", " "), str(r["kind"]), run_cell(r),
              str(r["models"] or "-"), str(r["n_rows"]), (r["matrix_hash"] or "-")[:12], str(r["cell_key"] or "-")]
             for r in runs]
    keep, dropped = fit_columns(list(RUN_COLUMNS), cells, width, wide, flex={4: 24, 7: 24})
    t = Table(title=f"stored runs ({len(runs)})" + (f" in {where}" if where else ""))
    for i in keep:
        if i in (4, 7):      # lists of names / a cell key: wrap at their separators
            t.add_column(RUN_COLUMNS[i][0], overflow="fold")
        else:
            t.add_column(RUN_COLUMNS[i][0], no_wrap=True)
    for row in cells:
        shown = [_e(row[i]) for i in keep]
        if not row[3].startswith("ok") and 3 in keep:
            shown[keep.index(3)] = f"[bold red]{_e(row[3])}[/]"
        t.add_row(*shown)
    if dropped:
        t.caption = f"hidden to fit the terminal: {', '.join(dropped)} (--wide shows every column)"
    return t


def run_cell(run: dict[str, Any]) -> str:
    """A stored run's verdict in a few words (the columns ``Store.save`` fills from ``outcome``):
    a failed gate or a silent failure reads so, never "ok"."""
    if run.get("gate") == "failed":
        return "GATE FAILED"
    v = run.get("verdict")
    if v in (None, "ok", "skipped"):
        return str(run.get("status")) + (" (gate passed)" if run.get("gate") == "passed" else "")
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
# the registry's summary metrics follow (metrics.REGISTRY: label, unit, drop priority)
_ROW_COLS = _IDENTITY_COLS + tuple((m.key, m.label) for m in REGISTRY if m.summary)
_ROW_PRIORITY = {**_IDENTITY_PRIORITY, **{m.key: m.priority for m in REGISTRY}}


def _show_cell(key: str, value: Any) -> str:
    """Identity columns as text; metrics in their unit's one format (``fmt_metric``)."""
    m = BY_KEY.get(key)
    return _plain(value) if m is None else fmt_metric(m.unit, value)


def render_show(doc: dict[str, Any], *, width: int | None = None, wide: bool = False) -> list[Any]:
    """Header line, a table of the rows' headline metrics, and the environment's key fields.
    Numbers and ids never wrap; at a narrow ``width`` low-priority columns are dropped instead."""
    from rich.table import Table

    from edgebench.fingerprint import KEY_FIELDS
    from edgebench.identity import headline
    from edgebench.outcome import precision_label, row_verdict, run_verdict
    from edgebench.report.terminal._cells import as_document, fit_columns

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
        cells.append([_show_cell(k, h.get(k)) for k, _ in used] + ["; ".join(notes)])
    columns = [(lbl, _ROW_PRIORITY.get(k, 1)) for k, lbl in used] + [("notes", 0)]
    keep, dropped = fit_columns(columns, cells, width, wide, flex={len(used): 20})
    verdict = run_verdict(typed)
    t = Table(title=f"run {(typed.run_id or '?')[:12]}  {typed.kind}  created {typed.created}")
    for i in keep:
        if i == len(used) or used[i][0] == "status":
            t.add_column(columns[i][0], overflow="fold")
        else:
            t.add_column(columns[i][0], no_wrap=True, justify="left" if used[i][0] in _TEXT_COLS else "right")
    for row in cells:
        t.add_row(*[_e(row[i]) for i in keep])
    if dropped:
        t.caption = f"hidden to fit the terminal: {', '.join(dropped)} (--wide shows every column)"
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
    parts.append(t)
    if typed.cell is not None:
        parts.append(f"matrix {str(typed.get('matrix_hash'))[:12]} cell {_e(typed.cell.get('key'))}")
    parts.append(env)
    return parts


def _short(v: Any) -> str:
    """An identity value for one line: a sha256 as its first 12 hex digits."""
    text = str(v)
    return text[:12] if len(text) == 64 and all(c in "0123456789abcdef" for c in text) else text


_VERDICT_STYLE = {"worse": "bold red", "better": "bold green", "same": "dim", "not significant": "yellow",
                  "n/a": "dim", "within threshold": "dim", "stalls": "yellow"}
# How an interval that is not one for a rerun is named where it is printed (apart from the verdict).
_APART = {"within-run": "within-run interval (one run a side: not an interval for a rerun)",
          "loaded": "interval of these runs' load (stalls from other work)"}


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


def _note(ch: Any) -> str:
    """The change's note, then an interval that is not one for a rerun, named for what it is."""
    apart = _APART.get(ch.ci_basis) if ch.ci and not ch.rerun_interval else None
    if not apart:
        return ch.note
    return "; ".join(x for x in (ch.note, f"{apart}: [{ch.ci[0]:.3f}x, {ch.ci[1]:.3f}x]") if x)


def render_results_compare(rep: dict[str, Any]) -> list[Any]:
    """Environment differences FIRST (loud), then one table per paired row."""
    from rich.panel import Panel
    from rich.table import Table

    parts: list[Any] = []
    if rep["fingerprint_diff"]:
        lines = "\n".join(f"  {d['field']}: {_e(d['a'])}  ->  {_e(d['b'])}" for d in rep["fingerprint_diff"])
        parts.append(Panel(f"[bold]These runs come from different environments; a ratio may reflect "
                           f"the environment, not the model:[/]\n{lines}",
                           title="[bold yellow]ENVIRONMENT DIFFERS[/]", border_style="yellow"))
    else:
        parts.append("[green]environment key fields identical[/]")
    mixed = [p for p in rep["pairs"] if p.get("mixed_methods")]
    if mixed:
        lines = "\n".join(f"  {_e(' / '.join(str(k) for k in p['key']))}: A {_e(p['sample_class'][0])}, "
                          f"B {_e(p['sample_class'][1])}" for p in mixed)
        parts.append(Panel("[bold]Latency samples measured by different methods are not compared (no ratio, no "
                           "verdict): a fresh process's first timed run (per-process, benchmark_model) is slower "
                           f"than a long-lived process's steady state:[/]\n{lines}",
                           title="[bold yellow]METHODS DIFFER[/]", border_style="yellow"))
    differ = [p for p in rep["pairs"] if p.get("config_diff")]
    if differ:
        lines = "\n".join(f"  {_e(' / '.join(str(k) for k in p['key']))}: " + _e(", ".join(
            f"{d['field']} {_short(d['a'])} -> {_short(d['b'])}" for d in p["config_diff"])) for p in differ)
        parts.append(Panel("[bold]These rows are different configurations (another model file, tensors kept "
                           "float, another delegate ...): a change may come from the configuration, not "
                           f"the run:[/]\n{lines}", title="[bold yellow]CONFIGURATION DIFFERS[/]",
                           border_style="yellow"))
    rule = rep["rule"]
    for pair in rep["pairs"]:
        reps = pair.get("repeats") or [1, 1]
        loaded = [s for s, f in zip("AB", pair.get("loaded") or ()) if f]
        t = Table(title=f"{_e(' / '.join(str(k) for k in pair['key']))}   A={str(rep['a'])[:12]}  "
                        f"B={str(rep['b'])[:12]}   samples {pair['n_samples'][0]} vs {pair['n_samples'][1]}, "
                        f"processes {reps[0]} vs {reps[1]}   run-to-run noise from: "
                        f"{', '.join(pair.get('basis') or ['-'])}"
                        + (f"   [yellow]load signal on {' and '.join(loaded)}: the tail, mean and QPS reflect "
                           "other work on this machine[/]" if loaded else ""))
        for col in ("metric", "A", "B", "change [95% CI]", "test", "p", "verdict", "note"):
            if col in ("note", "test"):
                t.add_column(col, overflow="fold")
            else:     # numbers never split across lines
                t.add_column(col, no_wrap=True, justify="left" if col in ("metric", "verdict") else "right")
        for ch in pair["changes"]:
            style = _VERDICT_STYLE.get(ch.verdict, "")
            t.add_row(ch.metric, _f(ch.a, ".4g"), _f(ch.b, ".4g"), _change_cell(ch), _e(ch.test),
                      "-" if ch.p_value is None else f"{ch.p_value:.2g}",
                      f"[{style}]{ch.verdict}[/]" if style else ch.verdict, _e(_note(ch)))
        if pair["fingerprint_diff"]:
            t.caption = "[yellow]device differs: " + _e(", ".join(
                f"{d['field']} {d['a']} -> {d['b']}" for d in pair["fingerprint_diff"])) + "[/]"
        parts.append(t)
    for side in ("a", "b"):
        if rep[f"unmatched_{side}"]:
            parts.append(f"only in {side.upper()}: " + _e("; ".join("/".join(str(x) for x in k if x is not None)
                                                                    for k in rep[f"unmatched_{side}"])))
    if not rep["pairs"]:
        parts.append("[yellow]no rows in common (rows are paired by model, precision, target, batch size)[/]")
    th = ", ".join(f"{k} {v:g}" for k, v in (rule.get("thresholds") or {}).items())
    parts.append(_e(f"rule: a latency change counts when >= {rule['min_ratio']}x and p < {rule['alpha']} (the larger "
                    f"of the within-run and the run-to-run test; {rule['test']}); accuracy and drift when the "
                    f"absolute change exceeds {th}; {rep['regressions']} worse"))
    return parts


def render_history(h: dict[str, Any]):
    from rich.table import Table

    from edgebench.identity import series_label

    conf = series_label(h.get("series") or {}, skip=())
    t = Table(title=_e(f"{h['model']} {h['metric']}  {conf}"))
    for col in ("#", "created (UTC)", "run id", "value", "change point"):
        t.add_column(col, no_wrap=col != "change point", overflow="fold")
    steps = {s["run_id"]: s for s in h["steps"]}
    for i, p in enumerate(h["points"]):
        s = steps.get(p["run_id"]) if p["step"] else None
        mark = (f"[bold red]shifted {s['ratio']:.2f}x here: {_f(s['before'], '.4g')} -> {_f(s['after'], '.4g')} "
                f"(p={s['p_value']:.2g})[/]" if s else "")
        t.add_row(str(i), p["created"][:19].replace("T", " "), p["run_id"][:12], f"{p['value']:.4g}", mark)
    notes = [] if h["steps"] else ["no change point (a shift needs >= 1.1x)"]
    if h.get("method"):
        notes.append(_e(f"change points: {h['method']}"))
    if h.get("note"):
        notes.append(_e(h["note"]))
    if h.get("left_out"):
        notes.append(_e(f"{h['left_out']} run(s) left out: {h['left_out_reason']}"))
    t.caption = "\n".join(notes) or None
    return t
