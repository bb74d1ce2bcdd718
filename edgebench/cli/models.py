"""``edgebench models list|build``: the reference models (random-weight architectures + digits)."""

from __future__ import annotations

from typing import Optional

import typer

from edgebench.cli._common import console
from edgebench.core.fingerprint import host_fingerprint
from edgebench.core.result_file import envelope, write_json
from edgebench.model.catalog import build, build_row, list_models
from edgebench.report.terminal.models import render_build, render_list


def register(app: typer.Typer) -> None:
    models_app = typer.Typer(help="Reference models: list them, build one (SavedModel + calibration/evaluation data).",
                             no_args_is_help=True)
    app.add_typer(models_app, name="models")

    @models_app.command("list")
    def list_cmd(
        json_path: Optional[str] = typer.Option(None, "--json", help="Write the list as JSON to PATH ('-' for stdout)."),
    ) -> None:
        """List the reference models, their inputs at tiny and full size, and which are cached."""
        rows = list_models()
        if json_path:
            write_json(envelope("models", rows, host_fingerprint()), json_path)
            if json_path == "-":
                return


        con = console()
        con.print(render_list(rows, width=con.width))

    @models_app.command("build")
    def build_cmd(
        name: str = typer.Argument(..., help="Reference model: digits, resnet50, mobilenetv2, bert, ssd_mobilenet."),
        size: str = typer.Option("tiny", "--size", help="tiny (for tests) or full (standard size)."),
        force: bool = typer.Option(False, "--force", help="Rebuild even when a cached build exists."),
        json_path: Optional[str] = typer.Option(None, "--json", help="Write the result as JSON to PATH ('-' for stdout)."),
    ) -> None:
        """Build a reference model (cached): SavedModel, calibration .npz, evaluation .npz."""
        row = build_row(build(name, size, force=force))
        if json_path:
            write_json(envelope("model-build", [row], host_fingerprint()), json_path)
            if json_path == "-":
                return


        console().print(render_build(row))
