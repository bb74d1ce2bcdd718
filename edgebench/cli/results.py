"""``edgebench results list|show|compare|history|export|import``: read the results store."""

from __future__ import annotations

import csv
import io
from typing import Any, Optional

import typer

DB_HELP = "Results database: a SQLite file path or a SQLAlchemy URL (default $EDGEBENCH_DB, else the user data dir)."
EXPORT_FORMATS = ("csv", "json")


def register(app: typer.Typer) -> None:
    results = typer.Typer(help="Browse, compare, track and export stored results.", no_args_is_help=True)
    app.add_typer(results, name="results")

    @results.command("list")
    def list_cmd(
        kind: Optional[str] = typer.Option(None, "--kind", help="bench, compare, train or import-log."),
        model: Optional[str] = typer.Option(None, "--model", help="Only runs with a row for this model."),
        precision: Optional[str] = typer.Option(None, "--precision", help="Only runs with a row of this precision."),
        target: Optional[str] = typer.Option(None, "--target", help="Only runs with a row on this target (host, tf, adb:SERIAL)."),
        since: Optional[str] = typer.Option(None, "--since", help="ISO date/datetime or an age: 12h, 7d, 2w."),
        matrix: Optional[str] = typer.Option(None, "--matrix", help="Only runs of this matrix hash."),
        limit: int = typer.Option(50, "--limit", help="At most this many runs (newest first); 0 = all."),
        db: Optional[str] = typer.Option(None, "--db", help=DB_HELP),
        json_path: Optional[str] = typer.Option(None, "--json", help="Write the list as JSON to PATH ('-' for stdout)."),
    ) -> None:
        """List stored runs, newest first."""
        from edgebench.cli._common import console
        from edgebench.results import envelope, write_json
        from edgebench.store import Store

        with Store(db) as st:
            runs = st.list_runs(kind=kind, model=model, precision=precision, target=target, since=since,
                                matrix_hash=matrix, limit=limit or None)
            where = st.where
        if json_path:
            write_json(envelope("results-list", runs, {}, db=where), json_path)
        if json_path != "-":
            console().print(render_runs(runs, where))

    @results.command("show")
    def show_cmd(
        run_id: str = typer.Argument(..., help="Run id or a unique prefix (see `edgebench results list`)."),
        db: Optional[str] = typer.Option(None, "--db", help=DB_HELP),
        json_path: Optional[str] = typer.Option(None, "--json", help="Write the stored document (with raw samples) to PATH ('-' for stdout)."),
    ) -> None:
        """Show one stored run: its rows, headline metrics and environment."""
        from edgebench.cli._common import console
        from edgebench.results import write_json
        from edgebench.store import Store

        with Store(db) as st:
            doc = st.get(run_id)
        if json_path:
            write_json(doc, json_path)
        if json_path != "-":
            con = console()
            for part in render_show(doc):
                con.print(part)

    @results.command("compare")
    def compare_cmd(
        a: str = typer.Argument(..., help="Run id A (before / baseline)."),
        b: str = typer.Argument(..., help="Run id B (after / candidate)."),
        min_ratio: float = typer.Option(1.1, "--min-ratio", help="A change must be at least this factor (asv default 1.1)."),
        alpha: float = typer.Option(0.002, "--alpha", help="...and Mann-Whitney U p below this (asv default 0.002)."),
        fail_on_regression: bool = typer.Option(False, "--fail-on-regression", help="Exit 1 when any metric is significantly worse."),
        db: Optional[str] = typer.Option(None, "--db", help=DB_HELP),
        json_path: Optional[str] = typer.Option(None, "--json", help="Write the comparison as JSON to PATH ('-' for stdout)."),
    ) -> None:
        """Compare two runs: environment differences first, then per metric ratio and significance."""
        from edgebench.cli._common import console
        from edgebench.errors import BadInput, GateFailed
        from edgebench.results import envelope, write_json
        from edgebench.stats import compare_runs
        from edgebench.store import Store

        if min_ratio <= 1.0:
            raise BadInput(f"--min-ratio {min_ratio}: must be > 1 (e.g. 1.1 for 10%)")
        if not 0 < alpha < 1:
            raise BadInput(f"--alpha {alpha}: must be between 0 and 1 (e.g. 0.002)")
        with Store(db) as st:
            rep = compare_runs(st.get(a), st.get(b), min_ratio=min_ratio, alpha=alpha)
        if json_path:
            write_json(envelope("results-compare", rep["pairs"], {}, **{k: v for k, v in rep.items() if k != "pairs"}),
                       json_path)
        if json_path != "-":
            con = console()
            for part in render_compare(rep):
                con.print(part)
        if fail_on_regression and rep["regressions"]:
            raise GateFailed(f"{rep['regressions']} metric(s) significantly worse in {rep['b'][:12]} than "
                             f"{rep['a'][:12]} (>= {min_ratio}x and p < {alpha})")

    @results.command("history")
    def history_cmd(
        metric: str = typer.Option(..., "--metric", help="p50, p90, p99, mean, qps, size, top1, psnr, cosine, throughput, step_time (or a column name)."),
        model: str = typer.Option(..., "--model", help="Model name as stored."),
        precision: Optional[str] = typer.Option(None, "--precision", help="Only this precision."),
        target: Optional[str] = typer.Option(None, "--target", help="Only this target."),
        kind: Optional[str] = typer.Option(None, "--kind", help="Only runs of this kind."),
        min_ratio: float = typer.Option(1.1, "--min-ratio", help="A level shift must be at least this factor."),
        db: Optional[str] = typer.Option(None, "--db", help=DB_HELP),
        json_path: Optional[str] = typer.Option(None, "--json", help="Write the series and steps as JSON to PATH ('-' for stdout)."),
    ) -> None:
        """A metric over time for one model (one series per precision x target x batch size), level shifts flagged."""
        from edgebench.cli._common import console
        from edgebench.results import envelope, write_json
        from edgebench.stats import history_with_steps
        from edgebench.store import Store

        with Store(db) as st:
            series = st.history(metric, model=model, precision=precision, target=target, kind=kind)
        groups: dict[tuple, list[dict[str, Any]]] = {}
        for p in series:
            groups.setdefault((p["precision"], p["target"], p["batch_size"]), []).append(p)
        out = []
        for (prec, tgt, bs), pts in groups.items():
            h = history_with_steps(pts, min_ratio=min_ratio)
            out.append({"model": model, "metric": metric, "precision": prec, "target": tgt, "batch_size": bs, **h})
        if json_path:
            write_json(envelope("results-history", out, {}, metric=metric, model=model), json_path)
        if json_path != "-":
            con = console()
            if not out:
                con.print(_e(f"no stored values of {metric} for model {model!r}"))
            for part in out:
                con.print(render_history(part))

    @results.command("export")
    def export_cmd(
        fmt: str = typer.Option("csv", "--format", help="csv (one line per result row) or json."),
        output: str = typer.Option("-", "--output", "-o", help="File to write ('-' for stdout)."),
        kind: Optional[str] = typer.Option(None, "--kind"),
        model: Optional[str] = typer.Option(None, "--model"),
        precision: Optional[str] = typer.Option(None, "--precision"),
        target: Optional[str] = typer.Option(None, "--target"),
        since: Optional[str] = typer.Option(None, "--since", help="ISO date/datetime or an age: 12h, 7d, 2w."),
        matrix: Optional[str] = typer.Option(None, "--matrix", help="Only rows of this matrix hash."),
        db: Optional[str] = typer.Option(None, "--db", help=DB_HELP),
    ) -> None:
        """Export stored result rows (headline columns, oldest first) as CSV or JSON."""
        from pathlib import Path

        from edgebench.errors import BadInput
        from edgebench.results import envelope, write_json
        from edgebench.store import Store

        if fmt not in EXPORT_FORMATS:
            raise BadInput(f"--format {fmt}: use csv or json")
        with Store(db) as st:
            rows = st.rows(kind=kind, model=model, precision=precision, target=target, since=since,
                           matrix_hash=matrix)
            where = st.where
        if fmt == "json":
            write_json(envelope("results-export", rows, {}, db=where), output)
            return
        text = rows_to_csv(rows)
        if output == "-":
            typer.echo(text, nl=False)
        else:
            Path(output).parent.mkdir(parents=True, exist_ok=True)
            Path(output).write_text(text)

    @results.command("import")
    def import_cmd(
        files: list[str] = typer.Argument(..., help="Result JSON files (edgebench --json output, or kept unsaved results)."),
        db: Optional[str] = typer.Option(None, "--db", help=DB_HELP),
        json_path: Optional[str] = typer.Option(None, "--json", help="Write the new run ids as JSON to PATH ('-' for stdout)."),
    ) -> None:
        """Store result documents written earlier with --json (or kept when the database was unavailable)."""
        from edgebench.cli._common import console
        from edgebench.results import envelope, write_json
        from edgebench.store import Store, load_result_file

        docs = [(f, load_result_file(f)) for f in files]   # validate every file before writing any
        with Store(db) as st:
            saved = [{"file": f, "run_id": st.save(d), "kind": d.get("kind"), "rows": len(d["rows"])}
                     for f, d in docs]
        if json_path:
            write_json(envelope("results-import", saved, {}), json_path)
        if json_path != "-":
            con = console()
            for s in saved:
                con.print(_e(f"stored {s['file']} as run {s['run_id'][:12]} ({s['kind']}, {s['rows']} rows)"))


# ----------------------------------------------------------------------------------------------
# pure renderers


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


def render_runs(runs: list[dict[str, Any]], where: str = ""):
    from rich.table import Table

    t = Table(title=f"stored runs ({len(runs)})" + (f" in {where}" if where else ""))
    for col in ("run id", "created (UTC)", "kind", "status", "models", "rows", "matrix", "cell"):
        t.add_column(col, overflow="fold")
    for r in runs:
        st = r["status"]
        t.add_row(r["run_id"][:12], r["created"][:19].replace("T", " "), r["kind"],
                  st if st == "ok" else f"[bold red]{_e(st)}[/]", _e(r["models"] or "-"), str(r["n_rows"]),
                  (r["matrix_hash"] or "-")[:12], _e(r["cell_key"] or "-"))
    return t


_ROW_COLS = (("model", "model"), ("precision", "prec"), ("target", "target"), ("status", "status"),
             ("batch_size", "batch"), ("p50_ms", "p50 ms"), ("p99_ms", "p99 ms"), ("qps", "QPS"),
             ("size_bytes", "size B"), ("top1", "top-1"), ("psnr_db", "PSNR dB"), ("cosine", "cosine"),
             ("examples_per_s", "ex/s"), ("step_time_p50_ms", "step p50 ms"))


def render_show(doc: dict[str, Any]) -> list[Any]:
    """Header line, a table of the rows' headline metrics, and the environment's key fields."""
    from rich.table import Table

    from edgebench.fingerprint import KEY_FIELDS
    from edgebench.store import headline

    heads = [headline(r) for r in doc.get("rows", [])]
    used = [(k, lbl) for k, lbl in _ROW_COLS if any(h.get(k) is not None for h in heads)]
    t = Table(title=f"run {doc.get('run_id', '?')[:12]}  {doc.get('kind')}  created {doc.get('created')}")
    for _, lbl in used:
        t.add_column(lbl, overflow="fold")
    t.add_column("notes", overflow="fold")
    for row, h in zip(doc.get("rows", []), heads):
        notes = []
        if h.get("p99_valid") is False:
            notes.append("p99 not valid (too few samples)")
        if row.get("error"):
            notes.append(str(row["error"]))
        if row.get("samples_ns") is not None:
            notes.append(f"{len(row['samples_ns'])} samples")
        t.add_row(*[_f(h.get(k)) for k, _ in used], _e("; ".join(notes)))
    fp = doc.get("fingerprint") or {}
    env = Table(title="environment (key fields)")
    env.add_column("field")
    env.add_column("value", overflow="fold")
    for k in ("hostname", *KEY_FIELDS, "edgebench", "edgebench_git_sha"):
        if fp.get(k) is not None:
            env.add_row(k, _e(fp[k]))
    parts: list[Any] = [t]
    if doc.get("cell"):
        parts.append(f"matrix {str(doc.get('matrix_hash'))[:12]} cell {_e(doc['cell'].get('key'))}")
    parts.append(env)
    return parts


_VERDICT_STYLE = {"worse": "bold red", "better": "bold green", "same": "dim", "not significant": "yellow",
                  "n/a": "dim"}


def render_compare(rep: dict[str, Any]) -> list[Any]:
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
    rule = rep["rule"]
    for pair in rep["pairs"]:
        t = Table(title=f"{_e(' / '.join(str(k) for k in pair['key']))}   A={str(rep['a'])[:12]}  "
                        f"B={str(rep['b'])[:12]}   samples {pair['n_samples'][0]} vs {pair['n_samples'][1]}")
        for col in ("metric", "A", "B", "B/A", "p (Mann-Whitney)", "verdict", "note"):
            t.add_column(col, overflow="fold")
        for ch in pair["changes"]:
            style = _VERDICT_STYLE.get(ch.verdict, "")
            t.add_row(ch.metric, _f(ch.a, ".4g"), _f(ch.b, ".4g"),
                      "-" if ch.ratio is None else f"{ch.ratio:.3f}x",
                      "-" if ch.p_value is None else f"{ch.p_value:.2g}",
                      f"[{style}]{ch.verdict}[/]" if style else ch.verdict, _e(ch.note))
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
    parts.append(f"rule: a change counts when >= {rule['min_ratio']}x and p < {rule['alpha']} "
                 f"({rule['test']} on raw samples); {rep['regressions']} significantly worse")
    return parts


def render_history(h: dict[str, Any]):
    from rich.table import Table

    bs = f" batch={h['batch_size']}" if h.get("batch_size") is not None else ""
    t = Table(title=_e(f"{h['model']} {h['metric']}  precision={h['precision'] or '-'} target={h['target'] or '-'}{bs}"))
    for col in ("#", "created (UTC)", "run id", "value", "step"):
        t.add_column(col)
    steps = {s["run_id"]: s for s in h["steps"]}
    for i, p in enumerate(h["points"]):
        s = steps.get(p["run_id"]) if p["step"] else None
        mark = f"[bold red]level shift {s['ratio']:.2f}x (p={s['p_value']:.2g})[/]" if s else ""
        t.add_row(str(i), p["created"][:19].replace("T", " "), p["run_id"][:12], f"{p['value']:.4g}", mark)
    if not h["steps"]:
        t.caption = "no level shift (needs >= 1.1x and >= 4 runs on each side)"
    return t


def rows_to_csv(rows: list[dict[str, Any]]) -> str:
    """Stored result rows -> CSV text with a header line (columns as in Store.rows)."""
    from edgebench.store import HEADLINE

    cols = ["run_id", "created", "kind", "row_index", *HEADLINE, "n_samples"]
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=cols, extrasaction="ignore", lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({k: ("" if r.get(k) is None else r.get(k)) for k in cols})
    return buf.getvalue()

