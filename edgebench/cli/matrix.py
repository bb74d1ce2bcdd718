"""``edgebench matrix run FILE.yaml``: run a YAML test matrix into the results store."""

from __future__ import annotations

from contextlib import nullcontext
from typing import Optional

import typer
from rich.markup import escape

from edgebench.cli._common import console, progress_reporter, verdict_then_unwritten
from edgebench.cli._options import DbOpt, NoSandboxOpt, TrustModelOpt, WideOpt
from edgebench.core.errors import BadInput
from edgebench.core.fingerprint import host_fingerprint
from edgebench.core.result_file import envelope, write_json
from edgebench.matrix.envlock import describe, enforce_lock, read_lock
from edgebench.matrix.ray_executor import RayExecutor, RayOptions
from edgebench.matrix.run import MatrixOptions, load_matrix, parse_overrides, raise_for_failures, run_matrix
from edgebench.report.export import push_result
from edgebench.report.publish import try_write
from edgebench.report.terminal.matrix import render_matrix


EXECUTORS = ("local", "ray")


def register(app: typer.Typer) -> None:
    matrix = typer.Typer(help="Run a YAML test matrix (edge or training) into the results store.",
                         no_args_is_help=True)
    app.add_typer(matrix, name="matrix")

    @matrix.command("run")
    def run_cmd(
        file: str = typer.Argument(..., help="Matrix YAML (see matrices/ and docs/store-and-matrix.md)."),
        db: DbOpt = None,
        resume: bool = typer.Option(False, "--resume", help="Skip cells already stored ok for this matrix hash."),
        shard: Optional[str] = typer.Option(None, "--shard", help="K/N: run only cells K-1, K-1+N, ... so N machines split one matrix."),
        dry_run: bool = typer.Option(False, "--dry-run", help="List the cells (and skip reasons); run nothing, store nothing."),
        size: Optional[str] = typer.Option(None, "--size", help="Override the matrix's reference model size: tiny or full."),
        steps: Optional[int] = typer.Option(None, "--steps", help="Override timed training steps (training matrices)."),
        overrides: list[str] = typer.Option([], "--set", help="Override a matrix key: --set 'devices=[cpu, gpu]' (YAML value; repeatable)."),
        check_lock: Optional[str] = typer.Option(None, "--check-lock", help="Compare this machine with an environment lock FILE first (warn)."),
        strict: bool = typer.Option(False, "--strict", help="With --check-lock: a difference fails (exit 1) before any cell runs."),
        executor: str = typer.Option("local", "--executor", help="Where cells run: local (one after another, here) or ray (each cell a Ray task; each device, host and GPU a resource of capacity 1; needs the [ray] extra)."),
        address: Optional[str] = typer.Option(None, "--address", help="With --executor ray: auto or ray://HOST:PORT of a running cluster (default: a private local one on 127.0.0.1)."),
        json_path: Optional[str] = typer.Option(None, "--json", help="Write the matrix report as JSON to PATH ('-' for stdout)."),
        pushgateway: Optional[str] = typer.Option(None, "--pushgateway", help="Also push every stored cell's metrics to this Prometheus Pushgateway URL."),
        wide: WideOpt = False,
        trust_model: TrustModelOpt = False,
        no_sandbox: NoSandboxOpt = False,
    ) -> None:
        """Expand a matrix into cells and run them; every finished cell is stored at once."""
        ov = parse_overrides(overrides)
        labels = {k: f"--set {k}" for k in ov}
        if size is not None:
            ov["size"], labels["size"] = size, "--size"
        if steps is not None:
            ov["steps"], labels["steps"] = steps, "--steps"
        if executor not in EXECUTORS:
            raise BadInput(f"--executor {executor!r}: use {' or '.join(EXECUTORS)}")
        if address is not None and executor != "ray":
            raise BadInput("--address is for --executor ray; add --executor ray or leave --address out")
        spec = load_matrix(file, ov, labels)
        err = console(stderr=True)
        lock_diffs = None
        if strict and not check_lock:
            raise BadInput("--strict needs --check-lock FILE")
        if check_lock:

            fp = host_fingerprint(with_tf=bool(read_lock(check_lock).get("with_tf")))
            lock_diffs = enforce_lock(check_lock, fp, strict=strict)
            if lock_diffs:

                err.print(f"[bold yellow]warning:[/] environment differs from lock {escape(check_lock)}: "
                          f"{escape(describe(lock_diffs))}")

        elsewhere = RayExecutor(RayOptions(address=address)) if executor == "ray" and not dry_run else nullcontext()
        with elsewhere as ex, progress_reporter("matrix") as say:
            report = run_matrix(spec, MatrixOptions(db=db, resume=resume, shard=shard, dry_run=dry_run,
                                                   trust_model=trust_model),
                                _cell_progress(say), progress=say, executor=ex)
        if lock_diffs is not None:
            report["lock"] = {"file": check_lock, "differences": lock_diffs}
        unwritten = None      # every cell is stored already: the table comes first, then this line
        if json_path:

            extra = {k: v for k, v in report.items() if k not in ("cells", "kind")}
            unwritten = try_write("--json", json_path, lambda: write_json(
                envelope("matrix", report["cells"], host_fingerprint(), matrix_kind=report["kind"], **extra),
                json_path))
            if unwritten and json_path == "-" and not dry_run:
                unwritten += (f"; every cell run is stored (`edgebench results list --matrix "
                              f"{report['matrix_hash']}`)")
        if json_path != "-":

            con = console()
            con.print(render_matrix(report, width=con.width, wide=wide))
        if pushgateway and not dry_run:
            from edgebench.store.db import Store

            with Store(db) as st:   # push what was stored: the store stays the source of truth
                for c in report["cells"]:
                    if c.get("run_id"):
                        push_result(st.get(c["run_id"]), pushgateway, run_id=c["run_id"])

        verdict_then_unwritten(lambda: raise_for_failures(report), [unwritten])


def _cell_progress(say):
    """matrix.run_matrix's ``on_cell`` events -> one bar step per cell (with ETA over the cells)."""
    started: set[int] = set()

    def on_cell(event: str, cell, rec) -> None:
        if event == "plan":
            say.set_total(rec["total"])
        elif event == "start":
            started.add(cell.index)
            say(f"cell {cell.index}: {cell.key}")
        elif cell.index not in started:          # skipped, resumed or planned: a step without a run
            say(f"cell {cell.index}: {cell.key} ({rec['status']})")

    return on_cell
