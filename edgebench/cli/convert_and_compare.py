"""``edgebench convert-and-compare SRC``: convert, run TF + every target on the same inputs, gate."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from edgebench.judge.drift import parse_output_kind
from edgebench.cli._common import console, deliver, progress_reporter, split_csv
from edgebench.cli._groups import (
    ControlGroup,
    ConvertGroup,
    GateGroup,
    PublishGroup,
    SourceGroup,
    TargetGroup,
    ViewGroup,
    grouped,
)
from edgebench.cli._options import OutputKindOpt, StreamThresholdOpt, source_arg
from edgebench.convert.run import ConvertSettings
from edgebench.convert_and_compare.pipeline import CompareSettings, convert_and_compare, raise_for_compare
from edgebench.core.errors import BadInput
from edgebench.report.publish import check_store
from edgebench.report.terminal.compare import render_compare
from edgebench.report.terminal.diagnose import render_keep_float_table


def register(app: typer.Typer) -> None:
    d = CompareSettings(convert=ConvertSettings(src=""))

    @app.command("convert-and-compare")
    @grouped
    def cac_cmd(
        src: Annotated[Optional[list[str]], typer.Argument(
            help="SavedModel folder, .keras/.h5 file, reference model name, a torch.export .pt2 (or --torch), or one "
                 "or more .tflite files (the given variants; the most precise is the reference unless --reference; "
                 "a single float .tflite with --precision is quantized with ai-edge-quantizer).")] = None,
        data: Annotated[Optional[str], typer.Option(
            "--data", help="Evaluation data (.npz with optional 'labels', .npy, image folder, or 'synthetic'); "
                           "also calibrates INT8 unless --calibration-data.")] = None,
        calibration_data: Annotated[Optional[str], typer.Option(
            "--calibration-data", help="Separate calibration data for INT8.")] = None,
        samples: Annotated[int, typer.Option("--samples", "-n", help="Evaluation samples (first N of the data).")]
        = d.eval_samples,
        class_output: Annotated[Optional[str], typer.Option(
            "--class-output", help="Output holding class scores (for top-k / accuracy).")] = None,
        output_kind: OutputKindOpt = None,
        reference: Annotated[Optional[str], typer.Option(
            "--reference", help=".tflite SRCs: a SavedModel folder or .keras file run with TF as the reference row.")]
        = None,
        stream_threshold: StreamThresholdOpt = d.stream_threshold,
        conversion: ConvertGroup = ConvertGroup(),
        source: SourceGroup = SourceGroup(),
        target: TargetGroup = TargetGroup(),
        control: ControlGroup = ControlGroup(),
        gate: GateGroup = GateGroup(),
        publish: PublishGroup = PublishGroup(),
        view: ViewGroup = ViewGroup(),
    ) -> None:
        """Convert SRC, run the TF reference and every precision x target on ONE input set, report and gate.

        Exit codes: 0 passed, 1 a gate threshold missed, 2 bad input, 3 a target failed (its rows say FAILED;
        everything else is still reported and saved), 130/143 interrupted (measured rows are kept).
        """
        parse_output_kind(output_kind)     # a bad --output-kind is exit 2 before anything converts
        src = [source_arg(src[0] if src else None, source.torch), *(src or [])[1:]]
        if len(src) > 1 and not all(s.endswith(".tflite") for s in src):
            raise BadInput(f"{next(s for s in src if not s.endswith('.tflite'))}: several SRCs must all be .tflite "
                           "files; convert a SavedModel/.keras alone (or give it as --reference)")
        if reference and not src[0].endswith(".tflite"):
            raise BadInput(f"--reference {reference}: only for .tflite SRCs (a SavedModel SRC is its own reference)")
        settings = CompareSettings(
            convert=conversion.settings(src[0], data=calibration_data or data, source=source.options(reference)),
            run=target.run(control.control()), targets=tuple(split_csv(target.targets, option="--targets")),
            more_tflite=tuple(src[1:]), precisions_given=conversion.precision is not None,
            data=data, eval_samples=samples, class_output=class_output, output_kind=output_kind,
            thresholds=gate.thresholds(), gate_file=gate.gate_file(), stream_threshold=stream_threshold,
        )
        opts = publish.options(target.op_profile)
        check_store(opts)
        with progress_reporter("convert-and-compare") as say:
            doc = convert_and_compare(settings, progress=say)
        width = console().width
        doc = deliver(doc, opts, lambda d: render_keep_float_table(d.get("keep_float_search"), width)
                      + render_compare(d, width=width, wide=view.wide, verbose=view.verbose),
                      json_path=publish.json_path)
        raise_for_compare(doc)
