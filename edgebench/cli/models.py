"""``edgebench models list|build``: the reference models (random-weight architectures + digits)."""

from __future__ import annotations

from typing import Any, Optional

import typer
from rich.table import Table


def _shape(shape: list) -> str:
    return "x".join("N" if d is None else str(d) for d in shape)


def render_list(rows: list[dict[str, Any]]) -> Table:
    """Pure renderer: one line per model, inputs shown for tiny and full sizes."""
    t = Table(title="reference models", header_style="bold")
    for col in ("name", "task"):
        t.add_column(col, no_wrap=True)
    for col in ("inputs", "tiny", "full", "cached"):
        t.add_column(col, overflow="fold")
    for r in rows:
        tiny, full = r["inputs"]["tiny"], r["inputs"]["full"]
        names = ", ".join(f"{i['name']} ({i['dtype']})" for i in tiny)
        cached = ", ".join(size for size, ok in r["cached"].items() if ok) or "-"
        t.add_row(r["name"], r["task"], names,
                  "; ".join(_shape(i["shape"]) for i in tiny),
                  "; ".join(_shape(i["shape"]) for i in full), cached)
    return t


def render_build(row: dict[str, Any]) -> Table:
    """Pure renderer for one build: paths, timing, signature, accuracy where labels are real."""
    info = row["info"]
    t = Table(title=f"{row['model']} ({row['size']})", show_header=False)
    t.add_column("field", style="bold")
    t.add_column("value", overflow="fold")
    t.add_row("task", str(row["task"]))
    t.add_row("saved model", row["saved_model_dir"])
    t.add_row("calibration", row["calibration_npz"])
    t.add_row("evaluation", row["evaluation_npz"])
    secs = f"{row['build_seconds']:.1f} s" if row["build_seconds"] is not None else "-"
    t.add_row("build time", secs + (" (cached build reused)" if row["reused"] else ""))
    for i in info["inputs"]:
        rng = i.get("range")
        t.add_row(f"input {i['name']}", f"{_shape(i['shape'])} {i['dtype']}" + (f" range {rng}" if rng else ""))
    for o in info["outputs"]:
        t.add_row(f"output {o['name']}", f"{_shape(o['shape'])} {o['dtype']}")
    if row["test_accuracy"] is not None:
        t.add_row("test top-1", f"{100 * row['test_accuracy']:.2f} % ({info.get('test_samples')} real test images)")
    if not row["labels_real"]:
        t.add_row("labels", "none: random weights, synthetic inputs (no accuracy)")
    return t


def register(app: typer.Typer) -> None:
    models_app = typer.Typer(help="Reference models: list them, build one (SavedModel + calibration/evaluation data).",
                             no_args_is_help=True)
    app.add_typer(models_app, name="models")

    @models_app.command("list")
    def list_cmd(
        json_path: Optional[str] = typer.Option(None, "--json", help="Write the list as JSON to PATH ('-' for stdout)."),
    ) -> None:
        """List the reference models, their inputs at tiny and full size, and which are cached."""
        from edgebench.fingerprint import host_fingerprint
        from edgebench.models import list_models
        from edgebench.results import envelope, write_json

        rows = list_models()
        if json_path:
            write_json(envelope("models", rows, host_fingerprint()), json_path)
            if json_path == "-":
                return
        from edgebench.cli._common import console

        console().print(render_list(rows))

    @models_app.command("build")
    def build_cmd(
        name: str = typer.Argument(..., help="Reference model: digits, resnet50, mobilenetv2, bert, ssd_mobilenet."),
        size: str = typer.Option("tiny", "--size", help="tiny (for tests) or full (standard size)."),
        force: bool = typer.Option(False, "--force", help="Rebuild even when a cached build exists."),
        json_path: Optional[str] = typer.Option(None, "--json", help="Write the result as JSON to PATH ('-' for stdout)."),
    ) -> None:
        """Build a reference model (cached): SavedModel, calibration .npz, evaluation .npz."""
        from edgebench.fingerprint import host_fingerprint
        from edgebench.models import build, build_row
        from edgebench.results import envelope, write_json

        row = build_row(build(name, size, force=force))
        if json_path:
            write_json(envelope("model-build", [row], host_fingerprint()), json_path)
            if json_path == "-":
                return
        from edgebench.cli._common import console

        console().print(render_build(row))
