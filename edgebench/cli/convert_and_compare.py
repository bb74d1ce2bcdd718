"""``edgebench convert-and-compare SRC``: convert, run TF + every target on the same inputs, gate."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from edgebench.cli._options import (
    DynamicBatchOpt,
    RC_DEFAULTS,
    AcceleratorOpt,
    BenchmarkBinaryOpt,
    DbOpt,
    DelegateOpt,
    GpuPrecisionOpt,
    ImportOpt,
    InputShapeOpt,
    JsonOpt,
    JunitOpt,
    MarkdownOpt,
    MaxAccuracyDropOpt,
    MaxP99Opt,
    MaxTimeOpt,
    MinCosineOpt,
    MinDelegatedOpt,
    MinPsnrOpt,
    MinRunsOpt,
    MinSizeReductionOpt,
    MinTimeOpt,
    ModelExplorerOpt,
    NoStoreOpt,
    OpProfileOpt,
    PushgatewayOpt,
    RepeatsOpt,
    RoundGapOpt,
    RunsOpt,
    RuntimeOpt,
    SignatureOpt,
    StateOpt,
    StaticBatchOpt,
    StreamThresholdOpt,
    TargetsOpt,
    ThreadsOpt,
    NoSandboxOpt, TrustModelOpt,
    WarmupRunsOpt,
    VerboseOpt,
    WarmupTimeOpt,
    WideOpt,
    A16Opt,
    ChannelsLastOpt,
    TorchOpt,
)
from edgebench.targets.base import DEFAULT_DELEGATE


def register(app: typer.Typer) -> None:
    from edgebench.convert.run import DEFAULT_PRECISIONS, PRECISION_NAMES
    from edgebench.convert_and_compare.pipeline import CompareSettings

    d = CompareSettings(src="")

    @app.command("convert-and-compare")
    def cac_cmd(
        src: Annotated[Optional[list[str]], typer.Argument(
            help="SavedModel folder, .keras/.h5 file, reference model name, a torch.export .pt2 (or --torch), or one "
                 "or more .tflite files (the given variants; the most precise is the reference unless --reference; "
                 "a single float .tflite with --precision is quantized with ai-edge-quantizer).")] = None,
        precision: Annotated[Optional[str], typer.Option(
            "--precision", "-p", help="Comma-separated: fp32,fp16,int8,dynamic,int16x8 (16-bit activations, "
                                      "8-bit weights); default fp32,fp16,int8,dynamic.")] = None,
        targets: TargetsOpt = "host",
        data: Annotated[Optional[str], typer.Option(
            "--data", help="Evaluation data (.npz with optional 'labels', .npy, image folder, or 'synthetic'); "
                           "also calibrates INT8 unless --calibration-data.")] = None,
        calibration_data: Annotated[Optional[str], typer.Option(
            "--calibration-data", help="Separate calibration data for INT8.")] = None,
        samples: Annotated[int, typer.Option("--samples", "-n", help="Evaluation samples (first N of the data).")]
        = d.eval_samples,
        calibration_samples: Annotated[int, typer.Option("--calibration-samples")] = d.calibration_samples,
        int8_io: Annotated[str, typer.Option(
            "--int8-io", help="Integer model input/output type: float or int8 (int16 for int16x8).")] = d.int8_io,
        keep_float: Annotated[Optional[str], typer.Option(
            "--keep-float", help="int8 with float islands: 'auto' (search the diagnose ranking for the smallest set "
                                 "meeting --max-accuracy-drop/--min-psnr), a regex, or comma-separated tensor names "
                                 "from `edgebench diagnose`.")] = None,
        preprocess: Annotated[str, typer.Option(
            "--preprocess", help="Image folders: scale01, mobilenet, imagenet-caffe, none.")] = d.preprocess,
        size: Annotated[str, typer.Option("--size", help="Reference models: tiny or full.")] = d.size,
        out: Annotated[Optional[str], typer.Option(
            "--out", "-o", help="Output folder for .tflite files, inputs.npz and manifest.")] = None,
        benchmark_binary: BenchmarkBinaryOpt = None,
        threads: ThreadsOpt = None,
        delegate: DelegateOpt = DEFAULT_DELEGATE,
        runtime: RuntimeOpt = d.runtime_api,
        accelerator: AcceleratorOpt = None,
        gpu_precision: GpuPrecisionOpt = None,
        op_profile: OpProfileOpt = False,
        repeats: RepeatsOpt = 1,
        round_gap: RoundGapOpt = 0.0,
        model_explorer: ModelExplorerOpt = None,
        runs: RunsOpt = None,
        min_runs: MinRunsOpt = RC_DEFAULTS.min_runs,
        min_time: MinTimeOpt = None,
        max_time: MaxTimeOpt = RC_DEFAULTS.max_time_s,
        warmup_runs: WarmupRunsOpt = RC_DEFAULTS.warmup_runs,
        warmup_time: WarmupTimeOpt = RC_DEFAULTS.warmup_time_s,
        class_output: Annotated[Optional[str], typer.Option(
            "--class-output", help="Output holding class scores (for top-k / accuracy).")] = None,
        max_accuracy_drop: MaxAccuracyDropOpt = None,
        min_psnr: MinPsnrOpt = None,
        max_p99_ms: MaxP99Opt = None,
        min_size_reduction: MinSizeReductionOpt = None,
        min_cosine: MinCosineOpt = None,
        min_delegated: MinDelegatedOpt = None,
        gate: Annotated[Optional[Path], typer.Option("--gate", help="YAML with per-precision thresholds.")] = None,
        json_path: JsonOpt = None,
        markdown: MarkdownOpt = None,
        junit: JunitOpt = None,
        db: DbOpt = None,
        no_store: NoStoreOpt = False,
        pushgateway: PushgatewayOpt = None,
        wide: WideOpt = False,
        verbose: VerboseOpt = False,
        signature: SignatureOpt = None,
        input_shape: InputShapeOpt = None,
        static_batch: StaticBatchOpt = False,
        dynamic_batch: DynamicBatchOpt = False,
        imports: ImportOpt = None,
        trust_model: TrustModelOpt = False,
        no_sandbox: NoSandboxOpt = False,
        reference: Annotated[Optional[str], typer.Option(
            "--reference", help=".tflite SRCs: a SavedModel folder or .keras file run with TF as the reference row.")]
        = None,
        torch: TorchOpt = None,
        channels_last: ChannelsLastOpt = False,
        a16: A16Opt = None,
        state: StateOpt = d.state,
        stream_threshold: StreamThresholdOpt = d.stream_threshold,
    ) -> None:
        """Convert SRC, run the TF reference and every precision x target on ONE input set, report and gate.

        Exit codes: 0 passed, 1 a gate threshold missed, 2 bad input, 3 a target failed (its rows say FAILED;
        everything else is still reported and saved), 130/143 interrupted (measured rows are kept).
        """
        from edgebench.cli._common import console, deliver, progress_reporter, split_csv
        from edgebench.cli._options import (
            check_model_explorer,
            gpu_precisions,
            publish_options,
            run_control,
            source_arg,
            source_options,
        )
        from edgebench.cli.convert import check_int8_io, check_size, check_state
        from edgebench.core.errors import BadInput
        from edgebench.judge.gate import Thresholds, load_gate_file
        from edgebench.convert_and_compare.pipeline import convert_and_compare, raise_for_compare
        from edgebench.report.publish import check_store
        from edgebench.report.terminal.compare import render_compare
        from edgebench.report.terminal.diagnose import render_keep_float_table

        src = [source_arg(src[0] if src else None, torch), *(src or [])[1:]]
        if len(src) > 1 and not all(s.endswith(".tflite") for s in src):
            raise BadInput(f"{next(s for s in src if not s.endswith('.tflite'))}: several SRCs must all be .tflite "
                           "files; convert a SavedModel/.keras alone (or give it as --reference)")
        if reference and not src[0].endswith(".tflite"):
            raise BadInput(f"--reference {reference}: only for .tflite SRCs (a SavedModel SRC is its own reference)")
        settings = CompareSettings(
            src=src[0], more_tflite=tuple(src[1:]),
            source=source_options(signature, input_shape, imports, reference, static_batch=static_batch,
                                  dynamic_batch=dynamic_batch, torch=torch, channels_last=channels_last,
                                  trust_model=trust_model),
            precisions=tuple(split_csv(precision or ",".join(DEFAULT_PRECISIONS), option="--precision",
                                       allowed=PRECISION_NAMES)),
            precisions_given=precision is not None, a16=a16,
            targets=tuple(split_csv(targets, option="--targets")),
            data=data, calibration_data=calibration_data, eval_samples=samples,
            calibration_samples=calibration_samples, int8_io=check_int8_io(int8_io), out_dir=out,
            preprocess=preprocess, size=check_size(size), threads=threads, delegate=delegate,
            control=run_control(runs, min_runs, min_time, max_time, warmup_runs, warmup_time),
            class_output=class_output, benchmark_binary=benchmark_binary, keep_float=keep_float,
            thresholds=Thresholds(max_accuracy_drop, min_psnr, max_p99_ms, min_size_reduction, min_cosine,
                                  min_delegated),
            gate_file=load_gate_file(gate) if gate else None,
            runtime_api=runtime, accelerator=accelerator, gpu_precisions=gpu_precisions(gpu_precision),
            op_profile=op_profile, repeats=repeats, round_gap_s=round_gap, state=check_state(state),
            stream_threshold=stream_threshold,
        )
        check_model_explorer(model_explorer, op_profile)
        opts = publish_options(json_path=json_path, db=db, no_store=no_store, pushgateway=pushgateway,
                               markdown=markdown, junit=junit, model_explorer=model_explorer)
        check_store(opts)
        with progress_reporter("convert-and-compare") as say:
            doc = convert_and_compare(settings, progress=say)
        width = console().width
        doc = deliver(doc, opts, lambda d: render_keep_float_table(d.get("keep_float_search"), width)
                      + render_compare(d, width=width, wide=wide, verbose=verbose), json_path=json_path)
        raise_for_compare(doc)
