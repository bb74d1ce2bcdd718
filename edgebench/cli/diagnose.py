"""``edgebench diagnose SRC``: which layer breaks the quantized model, and what to do about it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from edgebench.cli._common import console, deliver, progress_reporter, split_csv
from edgebench.cli._options import (
    OutputKindOpt,
    ChannelsLastOpt,
    DbOpt,
    DynamicBatchOpt,
    GpuPrecisionOpt,
    ImportOpt,
    InputShapeOpt,
    JsonOpt,
    MarkdownOpt,
    NoSandboxOpt,
    NoStoreOpt,
    SignatureOpt,
    StateOpt,
    StaticBatchOpt,
    TorchOpt,
    TrustModelOpt,
    WideOpt,
    gpu_precisions,
    publish_options,
    source_arg,
    source_options,
)
from edgebench.cli._options import check_state
from edgebench.cli._groups import CalibrationGroup, grouped
from edgebench.convert.run import INT8_IO, ConvertSettings
from edgebench.core.errors import BadInput
from edgebench.diagnose.accelerator import ACCELERATOR_SAMPLES, MIN_PSNR_DB
from edgebench.judge.drift import parse_output_kind
from edgebench.diagnose.run import DEFAULT_PRECISIONS, QUANTIZED, DiagnoseSettings, diagnose
from edgebench.report.diagnose import model_explorer
from edgebench.report.html import render_html
from edgebench.report.publish import check_store
from edgebench.report.terminal.diagnose import render_diagnose


def register(app: typer.Typer) -> None:
    d = DiagnoseSettings(convert=ConvertSettings(src=""))

    @app.command("diagnose")
    @grouped
    def diagnose_cmd(
        src: Optional[str] = typer.Argument(None, help="SavedModel folder, .keras file, reference model name, a torch.export .pt2 (or --torch), or a quantized .tflite (with --reference)."),
        reference: Optional[str] = typer.Option(None, "--reference", help="With a quantized .tflite as SRC: the float .tflite it was made from (per-layer error by matching tensors)."),
        precision: str = typer.Option(",".join(DEFAULT_PRECISIONS), "--precision", "-p", help=f"Comma-separated: {','.join(QUANTIZED)}."),
        data: Optional[str] = typer.Option(None, "--data", help="Evaluation data, as for convert-and-compare (.npz with optional 'labels', .npy, image folder, 'synthetic'); also calibrates unless --calibration-data."),
        calibration_data: Optional[str] = typer.Option(None, "--calibration-data", help="Separate calibration data for int8/int16x8."),
        samples: Optional[int] = typer.Option(None, "--samples", "-n", help=f"Samples compared, one at a time (first N of the data; default {d.eval_samples}, {ACCELERATOR_SAMPLES} with --accelerator)."),
        conversion: CalibrationGroup = CalibrationGroup(),
        out: Optional[str] = typer.Option(None, "--out", "-o", help="Output folder for the .tflite files and inputs."),
        class_output: Optional[str] = typer.Option(None, "--class-output", help="Output holding class scores (for top-1)."),
        output_kind: OutputKindOpt = None,
        no_isolated: bool = typer.Option(False, "--no-isolated", help="Skip the per-op isolated runs (accumulated error only; faster)."),
        fix_trials: int = typer.Option(d.fix_trials, "--fix-trials", help="int8: re-quantize with each of the top N candidate layers kept float and rank by the measured output PSNR gain (0: rank by the layers' own numbers only)."),
        top: int = typer.Option(10, "--top", help="Layers shown per precision in the table/Markdown/HTML (the JSON has all)."),
        accelerator: Optional[str] = typer.Option(None, "--accelerator", help="gpu or npu: bisect a .tflite for the first op whose output on that accelerator (LiteRT CompiledModel) departs from the CPU's (no conversion; --data optional, synthetic without)."),
        gpu_precision: GpuPrecisionOpt = None,
        min_psnr: Optional[float] = typer.Option(None, "--min-psnr", help=f"With --accelerator: a tensor departs below this PSNR vs the CPU (dB; default {MIN_PSNR_DB:g}), or with NaN/Inf the CPU lacks."),
        json_path: JsonOpt = None,
        html_path: Optional[str] = typer.Option(None, "--html", help="Write a self-contained HTML report to PATH."),
        markdown: MarkdownOpt = None,
        model_explorer: Optional[str] = typer.Option(None, "--model-explorer", help="Write Model Explorer node data (per-op SNR and colour) to PATH; with several precisions, PATH gets a .PRECISION suffix."),
        db: DbOpt = None,
        no_store: NoStoreOpt = False,
        signature: SignatureOpt = None,
        input_shape: InputShapeOpt = None,
        static_batch: StaticBatchOpt = False,
        dynamic_batch: DynamicBatchOpt = False,
        imports: ImportOpt = None,
        trust_model: TrustModelOpt = False,
        no_sandbox: NoSandboxOpt = False,
        wide: WideOpt = False,
        torch: TorchOpt = None,
        channels_last: ChannelsLastOpt = False,
        state: StateOpt = d.convert.state,
    ) -> None:
        """Per-layer quantization error (accumulated and isolated), ranked worst first with advice.

        With --accelerator gpu (or npu): the first op that accelerator computes differently from the CPU,
        by bisection over the execution order (see docs/diagnose.md).

        Exit codes: 0 diagnosed (findings or not), 2 bad input (or no such accelerator here), 3 the worker
        crashed or hung.
        """
        if accelerator is None and (gpu_precision or min_psnr is not None):
            raise BadInput("--gpu-precision / --min-psnr belong to the accelerator bisect; add --accelerator gpu")

        parse_output_kind(output_kind)     # a bad --output-kind is exit 2 before anything converts
        if conversion.int8_io not in INT8_IO:
            raise BadInput(f"--int8-io {conversion.int8_io}: use float or int8")
        src = source_arg(src, torch)
        precisions = tuple(split_csv(precision, option="--precision"))
        source = source_options(signature, input_shape, imports, static_batch=static_batch,
                                dynamic_batch=dynamic_batch, torch=torch, channels_last=channels_last,
                                trust_model=trust_model)
        settings = DiagnoseSettings(
            convert=conversion.settings(src, precisions=precisions, data=calibration_data or data, out=out,
                                        source=source, state=check_state(state)),
            data=data,
            eval_samples=samples if samples is not None else (ACCELERATOR_SAMPLES if accelerator else d.eval_samples),
            class_output=class_output, output_kind=output_kind,
            isolated=not no_isolated, reference=reference, fix_trials=fix_trials,
            accelerator=accelerator, gpu_precisions=gpu_precisions(gpu_precision),
            min_psnr_db=MIN_PSNR_DB if min_psnr is None else min_psnr)
        opts = publish_options(json_path=json_path, db=db, no_store=no_store, markdown=markdown,
                               extra_files=_extra_files(html_path, model_explorer))
        check_store(opts)
        with progress_reporter("diagnose") as say:
            doc = diagnose(settings, progress=say)
        width = console().width
        deliver(doc, opts, lambda d: render_diagnose(d, top=top, width=width, wide=wide), json_path=json_path)


def _extra_files(html_path: str | None, me_path: str | None) -> tuple:
    """--html and --model-explorer, written by publish like --json (an unwritable one is a line of
    its own after the table, and the result is still stored)."""
    out = []
    if html_path:
        out.append(("--html", lambda doc: {html_path: _html(doc)}))
    if me_path:
        out.append(("--model-explorer", lambda doc: _node_data(doc, me_path)))
    return tuple(out)


def _html(doc) -> str:
    return render_html(doc)


def _node_data(doc, me_path: str) -> dict[str, str]:
    """One Model Explorer file per diagnosed precision (PATH.PRECISION.json with several)."""


    rows = [r for r in doc.rows if r.ok]
    out = {}
    for r in rows:
        p = Path(me_path)
        if len(rows) > 1:
            p = p.with_name(f"{p.stem}.{r.precision}{p.suffix}")
        out[str(p)] = json.dumps(model_explorer(r), indent=1) + "\n"
    return out
