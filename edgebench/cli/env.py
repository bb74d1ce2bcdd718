"""``edgebench env``: print the environment fingerprint recorded with every result."""

from __future__ import annotations

from typing import Optional

import typer


def register(app: typer.Typer) -> None:
    @app.command("env")
    def env_cmd(
        json_path: Optional[str] = typer.Option(None, "--json", help="Write the fingerprint as JSON to PATH ('-' for stdout)."),
        no_tf: bool = typer.Option(False, "--no-tf", help="Skip importing TensorFlow (no CUDA/cuDNN/XLA/AMP facts)."),
    ) -> None:
        """Print this machine's environment fingerprint (OS, CPU, Python, TF, LiteRT, GPU/CUDA, XLA/AMP)."""
        from edgebench.fingerprint import host_fingerprint
        from edgebench.report.table import render_fingerprint
        from edgebench.results import envelope, write_json

        fp = host_fingerprint(with_tf=not no_tf)
        if json_path:
            write_json(envelope("env", [], fp), json_path)
            if json_path == "-":
                return
        from edgebench.cli._common import console

        console().print(render_fingerprint(fp))
