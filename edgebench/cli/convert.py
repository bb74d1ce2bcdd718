"""``edgebench convert SRC``: SavedModel / .keras / .h5 / reference model -> .tflite per precision."""

from __future__ import annotations

from typing import Optional

import typer

from edgebench.cli._common import console, progress_reporter, show, split_csv, verdict_then_unwritten
from edgebench.cli._options import (
    A16Opt,
    ChannelsLastOpt,
    ImportOpt,
    InputShapeOpt,
    NoSandboxOpt,
    SignatureOpt,
    StateOpt,
    StaticBatchOpt,
    TorchOpt,
    TrustModelOpt,
    source_arg,
    source_options,
)
from edgebench.convert.quant.search import KeepFloatGoal
from edgebench.convert.run import DEFAULT_PRECISIONS, INT8_IO, PRECISION_NAMES, ConvertSettings, check_manifest, convert
from edgebench.core.errors import BadInput
from edgebench.core.result_file import write_json
from edgebench.model.state_rule import STATE_OPTIONS
from edgebench.report.publish import try_write
from edgebench.report.terminal.compare import render_manifest
from edgebench.report.terminal.diagnose import render_keep_float_table


def register(app: typer.Typer) -> None:
    defaults = ConvertSettings(src="")

    @app.command("convert")
    def convert_cmd(
        src: Optional[str] = typer.Argument(None, help="SavedModel folder, .keras/.h5 file, reference model name (edgebench models list), a float .tflite (quantized with ai-edge-quantizer) or a torch.export .pt2; omit with --torch."),
        precision: str = typer.Option(",".join(DEFAULT_PRECISIONS), "--precision", "-p", help="Comma-separated: fp32,fp16,int8,dynamic,int16x8 (16-bit activations, 8-bit weights)."),
        data: Optional[str] = typer.Option(None, "--data", help="Calibration data: .npz (keyed by input name or positional), .npy, an image folder, or 'synthetic'."),
        calibration_samples: int = typer.Option(defaults.calibration_samples, "--calibration-samples", help="Samples used to calibrate INT8."),
        int8_io: str = typer.Option(defaults.int8_io, "--int8-io", help="Integer model input/output type: float or int8 (int16 for int16x8)."),
        keep_float: Optional[str] = typer.Option(None, "--keep-float", help="int8 with float islands: 'auto' (search the diagnose ranking for the smallest set meeting --max-accuracy-drop/--min-psnr on --eval-data), a regex, or comma-separated tensor names from `edgebench diagnose`."),
        eval_data: Optional[str] = typer.Option(None, "--eval-data", help="--keep-float auto: evaluation data with 'labels' (default: the reference model's evaluation split)."),
        max_accuracy_drop: Optional[float] = typer.Option(None, "--max-accuracy-drop", help="--keep-float auto goal: max top-1 drop vs TF (pp)."),
        min_psnr: Optional[float] = typer.Option(None, "--min-psnr", help="--keep-float auto goal: min worst-output PSNR (dB)."),
        preprocess: str = typer.Option(defaults.preprocess, "--preprocess", help="Image folders: scale01, mobilenet, imagenet-caffe, none."),
        size: str = typer.Option(defaults.size, "--size", help="Reference models: tiny or full."),
        out: Optional[str] = typer.Option(None, "--out", "-o", help="Output folder (default edgebench-out/<name>)."),
        json_path: Optional[str] = typer.Option(None, "--json", help="Write the manifest as JSON to PATH ('-' for stdout)."),
        signature: SignatureOpt = None,
        input_shape: InputShapeOpt = None,
        static_batch: StaticBatchOpt = False,
        imports: ImportOpt = None,
        torch: TorchOpt = None,
        channels_last: ChannelsLastOpt = False,
        a16: A16Opt = None,
        trust_model: TrustModelOpt = False,
        no_sandbox: NoSandboxOpt = False,
        state: StateOpt = defaults.state,
    ) -> None:
        """Convert a model to FP32/FP16/INT8/dynamic/int16x8 .tflite, check FP32 parity, write manifest.json."""
        goal = None
        if keep_float == "auto":
            goal = KeepFloatGoal(max_accuracy_drop_pp=max_accuracy_drop, min_psnr_db=min_psnr,
                                 eval_data=eval_data, preprocess=preprocess)
        elif max_accuracy_drop is not None or min_psnr is not None or eval_data is not None:

            raise BadInput("--max-accuracy-drop/--min-psnr/--eval-data on convert are the goal of --keep-float auto; "
                           "add --keep-float auto, or gate with `edgebench convert-and-compare`")
        settings = ConvertSettings(
            src=source_arg(src, torch),
            precisions=tuple(split_csv(precision, option="--precision", allowed=PRECISION_NAMES)),
            data=data,
            calibration_samples=calibration_samples,
            int8_io=check_int8_io(int8_io),
            out_dir=out,
            preprocess=preprocess,
            size=check_size(size),
            source=source_options(signature, input_shape, imports, static_batch=static_batch, torch=torch,
                                  channels_last=channels_last, trust_model=trust_model),
            keep_float=keep_float,
            keep_float_goal=goal,
            a16=a16,
            state=check_state(state),
        )
        with progress_reporter("convert") as say:
            say.set_total(2 + len(settings.precisions) + ("fp32" not in settings.precisions))
            manifest = convert(settings, progress=say)
        unwritten = None       # the variants and manifest.json are in --out: the table first, then this line
        if json_path:

            unwritten = try_write("--json", json_path, lambda: write_json(manifest, json_path))
        if json_path != "-":

            width = console().width
            search = (manifest["variants"].get("int8") or {}).get("keep_float_search")
            show([*render_keep_float_table(search, width), *render_manifest(manifest, width=width)])

        verdict_then_unwritten(lambda: check_manifest(manifest), [unwritten])


def check_int8_io(value: str) -> str:
    if value not in INT8_IO:
        raise BadInput(f"--int8-io {value}: use {' or '.join(INT8_IO)}")
    return value


def check_state(value: str) -> str:
    """--state: one of state_rule.STATE_OPTIONS (BadInput naming them otherwise)."""
    if value not in STATE_OPTIONS:
        raise BadInput(f"--state {value}: use {', '.join(STATE_OPTIONS)}")
    return value


def check_size(value: str) -> str:
    if value not in ("tiny", "full"):
        raise BadInput(f"--size {value}: use tiny or full")
    return value
