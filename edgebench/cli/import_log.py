"""``edgebench import-log FILE``: a captured benchmark_model output as edgebench results."""

from __future__ import annotations

from typing import Optional

import typer

from edgebench.cli._common import console
from edgebench.core.result_file import write_json
from edgebench.report.terminal.import_log import render_import_log
from edgebench.targets.benchmark_model.log_rows import import_log_file


def register(app: typer.Typer) -> None:
    @app.command("import-log")
    def import_log_cmd(
        file: str = typer.Argument(..., help="Captured benchmark_model output (stdout+stderr), any version, or the JSON litert-benchmark --result_json wrote."),
        json_path: Optional[str] = typer.Option(None, "--json", help="Write the result document as JSON to PATH ('-' for stdout)."),
        top_ops: int = typer.Option(10, "--top-ops", help="Operators to show when the log has op profiling (0: none)."),
    ) -> None:
        """Parse a captured benchmark_model log or a litert-benchmark --result_json file into edgebench results (no p99: neither tool keeps samples)."""
        doc = import_log_file(file)
        if json_path:
            write_json(doc, json_path)
            if json_path == "-":
                return


        con = console()
        con.print(render_import_log(doc, top_ops, width=con.width))
