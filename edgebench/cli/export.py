"""``edgebench export prometheus``: push stored results to a Pushgateway or write a textfile."""

from __future__ import annotations

from typing import Optional

import typer

from edgebench.cli._common import console, progress_reporter
from edgebench.cli._options import DbOpt
from edgebench.core.atomic import write_stdout
from edgebench.report.export import export_prometheus


def register(app: typer.Typer) -> None:
    export_app = typer.Typer(name="export", help="Export stored results to monitoring systems.",
                             no_args_is_help=True)
    app.add_typer(export_app, name="export")

    @export_app.command("prometheus")
    def prometheus_cmd(
        run_id: Optional[str] = typer.Argument(None, help="Run id (or unique prefix) from `edgebench results list`."),
        latest: bool = typer.Option(False, "--latest", help="Export the newest stored run."),
        pushgateway: Optional[str] = typer.Option(None, "--pushgateway", help="Push to this Pushgateway URL (grouped by job=edgebench, run_id)."),
        textfile: Optional[str] = typer.Option(None, "--textfile", help="Write a node_exporter textfile (PATH ending in .prom; atomic)."),
        db: DbOpt = None,
    ) -> None:
        """Export a stored run as Prometheus metrics (edgebench_inference_latency_seconds,
        edgebench_model_size_bytes, edgebench_accuracy_top1_ratio, edgebench_drift_psnr_db,
        edgebench_training_examples_per_second, ...).

        Without --pushgateway/--textfile the exposition text is printed to stdout.
        Exit codes: 0 exported, 2 bad input (unknown run, missing directory), 3 Pushgateway
        unreachable or refusing (the results stay in the store).
        """
        from edgebench.store.db import Store

        with Store(db) as store, progress_reporter("export") as say:
            out = export_prometheus(store, run_id, latest=latest, pushgateway=pushgateway, textfile=textfile,
                                    progress=say)
        if not pushgateway and not textfile:

            write_stdout(out.text)          # all of it, or one line and exit 2 (a full disk)
            return
        con = console()
        con.soft_wrap = True
        for url in out.pushed:
            con.print(f"pushed run(s) {', '.join(out.run_ids)} -> {url}", markup=False)
        if out.textfile:
            con.print(f"wrote {out.textfile}", markup=False)
