"""``edgebench convert SRC``: SavedModel / .keras / .h5 / reference model -> .tflite per precision."""

from __future__ import annotations

from typing import Optional

import typer

from edgebench.cli._common import console, progress_reporter, show, verdict_then_unwritten
from edgebench.cli._groups import ConvertGroup, grouped
from edgebench.cli._options import (
    ChannelsLastOpt,
    ImportOpt,
    InputShapeOpt,
    NoSandboxOpt,
    SignatureOpt,
    StaticBatchOpt,
    TorchOpt,
    TrustModelOpt,
    source_arg,
    source_options,
)
from edgebench.convert.quant.search import KeepFloatGoal
from edgebench.convert.run import check_manifest, convert
from edgebench.core.errors import BadInput
from edgebench.core.result_file import write_json
from edgebench.report.publish import try_write
from edgebench.report.terminal.compare import render_manifest
from edgebench.report.terminal.diagnose import render_keep_float_table


def register(app: typer.Typer) -> None:
    @app.command("convert")
    @grouped
    def convert_cmd(
        src: Optional[str] = typer.Argument(None, help="SavedModel folder, .keras/.h5 file, reference model name (edgebench models list), a float .tflite (quantized with ai-edge-quantizer) or a torch.export .pt2; omit with --torch."),
        data: Optional[str] = typer.Option(None, "--data", help="Calibration data: .npz (keyed by input name or positional), .npy, an image folder, or 'synthetic'."),
        eval_data: Optional[str] = typer.Option(None, "--eval-data", help="--keep-float auto: evaluation data with 'labels' (default: the reference model's evaluation split)."),
        max_accuracy_drop: Optional[float] = typer.Option(None, "--max-accuracy-drop", help="--keep-float auto goal: max top-1 drop vs TF (pp)."),
        min_psnr: Optional[float] = typer.Option(None, "--min-psnr", help="--keep-float auto goal: min worst-output PSNR (dB)."),
        json_path: Optional[str] = typer.Option(None, "--json", help="Write the manifest as JSON to PATH ('-' for stdout)."),
        conversion: ConvertGroup = ConvertGroup(),
        signature: SignatureOpt = None,
        input_shape: InputShapeOpt = None,
        static_batch: StaticBatchOpt = False,
        imports: ImportOpt = None,
        torch: TorchOpt = None,
        channels_last: ChannelsLastOpt = False,
        trust_model: TrustModelOpt = False,
        no_sandbox: NoSandboxOpt = False,
    ) -> None:
        """Convert a model to FP32/FP16/INT8/dynamic/int16x8 .tflite, check FP32 parity, write manifest.json."""
        goal = None
        if conversion.keep_float == "auto":
            goal = KeepFloatGoal(max_accuracy_drop_pp=max_accuracy_drop, min_psnr_db=min_psnr,
                                 eval_data=eval_data, preprocess=conversion.preprocess)
        elif max_accuracy_drop is not None or min_psnr is not None or eval_data is not None:

            raise BadInput("--max-accuracy-drop/--min-psnr/--eval-data on convert are the goal of --keep-float auto; "
                           "add --keep-float auto, or gate with `edgebench convert-and-compare`")
        settings = conversion.settings(
            source_arg(src, torch), data=data, keep_float_goal=goal,
            source=source_options(signature, input_shape, imports, static_batch=static_batch, torch=torch,
                                  channels_last=channels_last, trust_model=trust_model))
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
