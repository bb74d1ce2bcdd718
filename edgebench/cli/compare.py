"""``edgebench compare A B --data ...``: the same inputs through two models; A is the reference."""

from __future__ import annotations

from typing import Optional

import typer


def register(app: typer.Typer) -> None:
    from edgebench.pipeline import PairSettings

    d = PairSettings(a="", b="")

    @app.command("compare")
    def compare_cmd(
        a: str = typer.Argument(..., help="Reference: a .tflite file or a SavedModel folder (run with TF)."),
        b: str = typer.Argument(..., help="Compared model: a .tflite file or a SavedModel folder."),
        data: Optional[str] = typer.Option(None, "--data", help="Inputs: .npz (optional 'labels'), .npy, image folder or 'synthetic'."),
        samples: int = typer.Option(d.samples, "--samples", "-n", help="Use the first N samples."),
        preprocess: str = typer.Option(d.preprocess, "--preprocess", help="Image folders: scale01, mobilenet, imagenet-caffe, none."),
        threads: Optional[int] = typer.Option(None, "--threads"),
        delegate: str = typer.Option(d.delegate, "--delegate", help="xnnpack or none."),
        class_output: Optional[str] = typer.Option(None, "--class-output", help="Output holding class scores."),
        json_path: Optional[str] = typer.Option(None, "--json", help="Write the result JSON to PATH ('-' for stdout)."),
        markdown: Optional[str] = typer.Option(None, "--markdown", help="Write a Markdown table to PATH."),
        db: Optional[str] = typer.Option(None, "--db", help="Results database (path or SQLAlchemy URL)."),
        no_store: bool = typer.Option(False, "--no-store", help="Do not write the result to the results database."),
    ) -> None:
        """Drift (max/mean abs, RMSE, rel L2, cosine, PSNR, NaN/Inf) and top-k agreement of B against A."""
        from edgebench.cli._common import console, finish_result, progress_reporter
        from edgebench.pipeline import compare_pair
        from edgebench.report.table import render_compare

        settings = PairSettings(a=a, b=b, data=data, samples=samples, preprocess=preprocess, threads=threads,
                                delegate=delegate, class_output=class_output)
        with progress_reporter("compare") as say:
            doc = compare_pair(settings, progress=say)
        finish_result(doc, json_path=json_path, db=db, no_store=no_store, markdown=markdown)
        if json_path != "-":
            console().print(render_compare(doc))
        from edgebench.cli.convert_and_compare import raise_for_compare

        raise_for_compare(doc)
