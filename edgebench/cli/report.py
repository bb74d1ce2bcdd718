"""``edgebench report``: HTML / Markdown report of stored results (a run, a matrix, or the latest)."""

from __future__ import annotations

from typing import List, Optional

import typer
from rich.markdown import Markdown

from edgebench.cli._common import console, progress_reporter
from edgebench.cli._options import DbOpt
from edgebench.report.export import write_report


def register(app: typer.Typer) -> None:
    @app.command("report")
    def report_cmd(
        run_ids: Optional[List[str]] = typer.Argument(
            None, help="Run id(s) (or unique prefixes) from `edgebench results list`; several runs (e.g. a compare "
                       "run and the training baseline of its model) go side by side. Only these are reported."),
        latest: bool = typer.Option(False, "--latest", help="Report the newest stored run."),
        matrix: Optional[str] = typer.Option(None, "--matrix", help="Report every stored run of this matrix hash."),
        html: Optional[str] = typer.Option(None, "--html", help="Write a self-contained HTML report (inline SVG plots) to PATH."),
        markdown: Optional[str] = typer.Option(None, "--markdown", help="Write PR-comment-ready Markdown to PATH ('-' for stdout)."),
        db: DbOpt = None,
    ) -> None:
        """Render stored results as HTML (fingerprint, precision x target, latency CDFs/histograms,
        size-p99-accuracy Pareto, drift, training throughput, history) and/or Markdown.

        Without --html/--markdown the Markdown is shown in the terminal. A report holds only the runs
        asked for, and says for each why it is there.
        Exit codes: 0 written, 2 empty store / unknown run id / bad path.
        """
        from edgebench.store.db import Store

        with Store(db) as store, progress_reporter("report") as say:
            out = write_report(store, run_ids, latest=latest, matrix_hash=matrix, html_path=html,
                               markdown_path=markdown, progress=say)
        if markdown == "-":
            return
        con = console()
        con.soft_wrap = True
        if not html and not markdown:

            con.print(Markdown(out.markdown))
            return
        runs = ", ".join(str(d.get("run_id")) for d in out.docs[:5]) + (" ..." if len(out.docs) > 5 else "")
        if out.html_path:
            con.print(f"HTML report ({len(out.docs)} run(s): {runs}; {out.history_series} history chart(s)) "
                      f"-> {out.html_path}")
        if out.markdown_path:
            con.print(f"Markdown report -> {out.markdown_path}")
