"""``edgebench convert SRC``: SavedModel / .keras / .h5 / reference model -> .tflite per precision."""

from __future__ import annotations

from typing import Optional

import typer

from edgebench.cli._options import ImportOpt, InputShapeOpt, SignatureOpt


def register(app: typer.Typer) -> None:
    from edgebench.convert import PRECISION_NAMES, ConvertSettings

    defaults = ConvertSettings(src="")

    @app.command("convert")
    def convert_cmd(
        src: str = typer.Argument(..., help="SavedModel folder, .keras/.h5 file, or reference model name (edgebench models list)."),
        precision: str = typer.Option(",".join(PRECISION_NAMES), "--precision", "-p", help="Comma-separated: fp32,fp16,int8,dynamic."),
        data: Optional[str] = typer.Option(None, "--data", help="Calibration data: .npz (keyed by input name or positional), .npy, an image folder, or 'synthetic'."),
        calibration_samples: int = typer.Option(defaults.calibration_samples, "--calibration-samples", help="Samples used to calibrate INT8."),
        int8_io: str = typer.Option(defaults.int8_io, "--int8-io", help="INT8 model input/output type: float or int8."),
        preprocess: str = typer.Option(defaults.preprocess, "--preprocess", help="Image folders: scale01, mobilenet, imagenet-caffe, none."),
        size: str = typer.Option(defaults.size, "--size", help="Reference models: tiny or full."),
        out: Optional[str] = typer.Option(None, "--out", "-o", help="Output folder (default edgebench-out/<name>)."),
        json_path: Optional[str] = typer.Option(None, "--json", help="Write the manifest as JSON to PATH ('-' for stdout)."),
        signature: SignatureOpt = None,
        input_shape: InputShapeOpt = None,
        imports: ImportOpt = None,
    ) -> None:
        """Convert a model to FP32/FP16/INT8/dynamic .tflite, check FP32 parity, write manifest.json."""
        from edgebench.cli._common import console, progress_reporter, split_csv
        from edgebench.cli._options import source_options
        from edgebench.convert import check_manifest, convert
        from edgebench.report.terminal.compare import render_manifest
        from edgebench.results import write_json

        settings = ConvertSettings(
            src=src,
            precisions=tuple(split_csv(precision, option="--precision", allowed=PRECISION_NAMES)),
            data=data,
            calibration_samples=calibration_samples,
            int8_io=check_int8_io(int8_io),
            out_dir=out,
            preprocess=preprocess,
            size=check_size(size),
            source=source_options(signature, input_shape, imports),
        )
        with progress_reporter("convert") as say:
            say.set_total(2 + len(settings.precisions) + ("fp32" not in settings.precisions))
            manifest = convert(settings, progress=say)
        if json_path:
            write_json(manifest, json_path)
        if json_path != "-":
            console().print(render_manifest(manifest))
        check_manifest(manifest)


def check_int8_io(value: str) -> str:
    from edgebench.convert import INT8_IO
    from edgebench.errors import BadInput

    if value not in INT8_IO:
        raise BadInput(f"--int8-io {value}: use {' or '.join(INT8_IO)}")
    return value


def check_size(value: str) -> str:
    from edgebench.errors import BadInput

    if value not in ("tiny", "full"):
        raise BadInput(f"--size {value}: use tiny or full")
    return value
