"""``edgebench results list|show|compare|history|export|import``: read the results store."""

from __future__ import annotations

from typing import Optional

import typer

from edgebench.cli._common import console, escape_markup
from edgebench.cli._options import DbOpt, WideOpt
from edgebench.core.atomic import write_stdout, write_text
from edgebench.core.errors import BadInput, GateFailed, Undecided
from edgebench.core.result_file import envelope, load_result_file, write_json
from edgebench.judge.stats import compare_stored, comparison_gate, history_series
from edgebench.report.csv import render_csv
from edgebench.report.terminal.results import render_history, render_results_compare, render_runs, render_show
from edgebench.rows.metrics import REGISTRY

EXPORT_FORMATS = ("csv", "json")


def register(app: typer.Typer) -> None:
    results = typer.Typer(help="Browse, compare, track and export stored results.", no_args_is_help=True)
    app.add_typer(results, name="results")

    for name, command in (("list", list_cmd), ("show", show_cmd), ("compare", compare_cmd),
                          ("history", history_cmd), ("export", export_cmd), ("import", import_cmd)):
        results.command(name)(command)


def list_cmd(
    kind: Optional[str] = typer.Option(None, "--kind", help="bench, compare, train or import-log."),
    model: Optional[str] = typer.Option(None, "--model", help="Only runs with a row for this model: its stored name "
                                        "or its base name (digits finds digits-tiny and digits-tiny_int8)."),
    precision: Optional[str] = typer.Option(None, "--precision", help="Only runs with a row of this precision."),
    target: Optional[str] = typer.Option(None, "--target", help="Only runs with a row on this target (host, tf, adb:SERIAL)."),
    since: Optional[str] = typer.Option(None, "--since", help="ISO date/datetime or an age: 12h, 7d, 2w."),
    matrix: Optional[str] = typer.Option(None, "--matrix", help="Only runs of this matrix hash."),
    limit: int = typer.Option(50, "--limit", help="At most this many runs (newest first); 0 = all."),
    db: DbOpt = None,
    json_path: Optional[str] = typer.Option(None, "--json", help="Write the list as JSON to PATH ('-' for stdout)."),
    wide: WideOpt = False,
) -> None:
    """List stored runs, newest first."""
    from edgebench.store.db import Store

    with Store(db) as st:
        runs = st.list_runs(kind=kind, model=model, precision=precision, target=target, since=since,
                            matrix_hash=matrix, limit=limit or None)
        where = st.where
    if json_path:
        write_json(envelope("results-list", runs, {}, db=where), json_path)
    if json_path != "-":

        con = console()
        con.print(render_runs(runs, where, width=con.width, wide=wide))

def show_cmd(
    run_id: str = typer.Argument(..., help="Run id or a unique prefix (see `edgebench results list`)."),
    db: DbOpt = None,
    json_path: Optional[str] = typer.Option(None, "--json", help="Write the stored document (with raw samples) to PATH ('-' for stdout)."),
    wide: WideOpt = False,
) -> None:
    """Show one stored run: its rows, headline metrics and environment."""
    from edgebench.store.db import Store

    with Store(db) as st:
        doc = st.get(run_id)
    if json_path:
        write_json(doc, json_path)
    if json_path != "-":
        con = console()

        for part in render_show(doc, width=con.width, wide=wide):
            con.print(part)

def compare_cmd(
    a: str = typer.Argument(..., help="Run id A (before / baseline)."),
    b: str = typer.Argument(..., help="Run id B (after / candidate)."),
    min_ratio: float = typer.Option(1.1, "--min-ratio", help="A change must be at least this factor (asv default 1.1)."),
    alpha: float = typer.Option(0.002, "--alpha", help="...and p below this (asv default 0.002): per metric, a test of that metric on the samples and of the run-to-run noise (repeats or stored history)."),
    fail_on_regression: bool = typer.Option(False, "--fail-on-regression", help="Exit 1 when any metric is worse; when one cannot be judged, what --undecided says."),
    undecided: str = typer.Option("rerun", "--undecided", help="With --fail-on-regression, a metric that cannot be judged (load on its slower side, too few processes, an interval across the threshold): rerun = exit 4 naming what rerun decides it, fail = exit 1, pass = exit 0 with a warning."),
    accuracy_pp: Optional[float] = typer.Option(None, "--accuracy-pp", help="Top-1 change that counts, in percentage points (default: B's gate --max-accuracy-drop, else 1)."),
    psnr_db: Optional[float] = typer.Option(None, "--psnr-db", help="PSNR change that counts, in dB (default 3)."),
    cosine: Optional[float] = typer.Option(None, "--cosine", help="Change of 1 - cosine that counts (default 0.001)."),
    db: DbOpt = None,
    json_path: Optional[str] = typer.Option(None, "--json", help="Write the comparison as JSON to PATH ('-' for stdout)."),
    details: bool = typer.Option(False, "--details", help="Also every metric of every row pair: its test, p and note (the JSON has them always)."),
) -> None:
    """Compare two runs: environment differences first, then what changed (worse/better), then counts; --details for every metric."""
    from edgebench.store.db import Store

    if undecided not in ("rerun", "fail", "pass"):
        raise BadInput(f"--undecided {undecided}: must be rerun, fail or pass")
    if min_ratio <= 1.0:
        raise BadInput(f"--min-ratio {min_ratio}: must be > 1 (e.g. 1.1 for 10%)")
    if not 0 < alpha < 1:
        raise BadInput(f"--alpha {alpha}: must be between 0 and 1 (e.g. 0.002)")
    given = {"top1": accuracy_pp, "psnr_db": psnr_db, "cosine": cosine}
    with Store(db) as st:
        rep = compare_stored(st, a, b, min_ratio=min_ratio, alpha=alpha, thresholds=given)
    verdict = comparison_gate(rep)
    rep["gate"] = {"state": verdict.state, "text": verdict.text, "worse": list(verdict.worse),
                   "undecided": list(verdict.undecided)}
    if json_path:
        write_json(envelope("results-compare", rep["pairs"], {}, **{k: v for k, v in rep.items() if k != "pairs"}),
                   json_path)
    if json_path != "-":
        con = console()

        for part in render_results_compare(rep, width=con.width, details=details):
            con.print(part)
    if fail_on_regression:
        if verdict.state == "failed" or (verdict.state == "undecided" and undecided == "fail"):
            raise GateFailed(verdict.text)
        if verdict.state == "undecided" and undecided == "rerun":
            raise Undecided(verdict.text)
        if verdict.state == "undecided":
            console(stderr=True).print(f"[yellow]warning: {escape_markup(verdict.text)} (passed by --undecided pass)[/]")

def history_cmd(
    metric: str = typer.Option(..., "--metric", help="A metric of the registry, by name or key: " + ", ".join(
        m.aliases[0] if m.aliases else m.key for m in REGISTRY) + "."),
    model: str = typer.Option(..., "--model", help="Model name as stored."),
    precision: Optional[str] = typer.Option(None, "--precision", help="Only this precision."),
    target: Optional[str] = typer.Option(None, "--target", help="Only this target."),
    kind: Optional[str] = typer.Option(None, "--kind", help="Only runs of this kind."),
    min_ratio: float = typer.Option(1.1, "--min-ratio", help="A change point must shift the series by at least this factor."),
    db: DbOpt = None,
    json_path: Optional[str] = typer.Option(None, "--json", help="Write the series and their change points as JSON to PATH ('-' for stdout)."),
) -> None:
    """A metric over time for one model, one series per configuration (precision, target, threads, delegate, runtime, method, batch, strategy...), with its change points and the run that began each (Apache Otava's E-divisive means with the 'changepoints' extra, else edgebench's own detector, and the output says which)."""
    from edgebench.store.db import Store

    with Store(db) as st:
        out = history_series(st, metric, model=model, precision=precision, target=target, kind=kind,
                             min_ratio=min_ratio)
    if json_path:
        write_json(envelope("results-history", out, {}, metric=metric, model=model), json_path)
    if json_path != "-":
        con = console()
        if not out:
            con.print(escape_markup(f"no stored values of {metric} for model {model!r}"))
        for part in out:

            con.print(render_history(part, width=con.width))

def export_cmd(
    fmt: str = typer.Option("csv", "--format", help="csv (one line per result row) or json."),
    output: str = typer.Option("-", "--output", "-o", help="File to write ('-' for stdout)."),
    kind: Optional[str] = typer.Option(None, "--kind"),
    model: Optional[str] = typer.Option(None, "--model", help="Stored name or base name (digits finds digits-tiny ...)."),
    precision: Optional[str] = typer.Option(None, "--precision"),
    target: Optional[str] = typer.Option(None, "--target"),
    since: Optional[str] = typer.Option(None, "--since", help="ISO date/datetime or an age: 12h, 7d, 2w."),
    matrix: Optional[str] = typer.Option(None, "--matrix", help="Only rows of this matrix hash."),
    db: DbOpt = None,
) -> None:
    """Export stored result rows (headline columns, oldest first) as CSV or JSON."""
    from edgebench.store.db import Store

    if fmt not in EXPORT_FORMATS:
        raise BadInput(f"--format {fmt}: use csv or json")
    with Store(db) as st:
        rows = st.rows(kind=kind, model=model, precision=precision, target=target, since=since,
                       matrix_hash=matrix, model_family=True)
        where = st.where
    if fmt == "json":
        write_json(envelope("results-export", rows, {}, db=where), output)
        return

    text = render_csv(rows)
    if output == "-":

        write_stdout(text)
    else:

        write_text(output, text)

def import_cmd(
    files: list[str] = typer.Argument(..., help="Result JSON files (edgebench --json output, or kept unsaved results)."),
    db: DbOpt = None,
    json_path: Optional[str] = typer.Option(None, "--json", help="Write the new run ids as JSON to PATH ('-' for stdout)."),
) -> None:
    """Store result documents written earlier with --json (or kept when the database was unavailable).

    A document already stored (same content hash) is not stored again: its run id is
    reported as "already stored"."""
    from edgebench.store.db import Store

    docs = [(f, load_result_file(f)) for f in files]   # validate every file before writing any
    saved = []
    with Store(db) as st:
        for f, d in docs:
            run_id, new = st.save_once(d)
            saved.append({"file": f, "run_id": run_id, "new": new, "kind": d.get("kind"),
                          "rows": len(d["rows"])})
    if json_path:
        write_json(envelope("results-import", saved, {}), json_path)
    if json_path != "-":
        con = console()
        for s in saved:
            what = "stored" if s["new"] else "already stored:"
            con.print(escape_markup(f"{what} {s['file']} as run {s['run_id'][:12]} "
                                    f"({s['kind']}, {s['rows']} rows)"))


# ----------------------------------------------------------------------------------------------
# pure renderers
