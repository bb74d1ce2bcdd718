"""Option groups: a command's options defined once per group, so its signature is a handful of groups.

A group is a dataclass whose fields are typer options (the ``*Opt`` aliases of ``cli._options``) with
their defaults; ``@grouped`` flattens each group parameter of a command into its options for typer
(same flags, same help, same order) and hands the command one instance per group. A group turns its
options into the settings part it stands for (``SourceGroup.options()`` -> ``SourceOptions``,
``ControlGroup.control()`` -> ``RunControl``, ``GateGroup.thresholds()``, ``PublishGroup.options()``).

    @grouped
    def bench_cmd(model: ..., source: SourceGroup, control: ControlGroup, publish: PublishGroup): ...
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Callable, Optional, get_type_hints

import typer

from edgebench.cli._common import split_csv
from edgebench.cli._options import (
    RC_DEFAULTS,
    A16Opt,
    AcceleratorOpt,
    BenchmarkBinaryOpt,
    ChannelsLastOpt,
    DbOpt,
    DelegateOpt,
    DynamicBatchOpt,
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
    NoSandboxOpt,
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
    TargetsOpt,
    ThreadsOpt,
    TorchOpt,
    TrustModelOpt,
    VerboseOpt,
    WarmupRunsOpt,
    WarmupTimeOpt,
    WideOpt,
    check_int8_io,
    check_model_explorer,
    check_size,
    check_state,
    gpu_precisions,
    publish_options,
    run_control,
    source_options,
)
from edgebench.convert.quant.search import KeepFloatGoal
from edgebench.convert.run import DEFAULT_PRECISIONS, PRECISION_NAMES, ConvertSettings
from edgebench.judge.gate import Thresholds, load_gate_file
from edgebench.report.publish import PublishOptions
from edgebench.sources.resolve import SourceOptions
from edgebench.targets.base import DEFAULT_DELEGATE, RunControl, RunOptions


def option_group(cls: type) -> type:
    """Mark a dataclass of typer options as a group ``@grouped`` flattens."""
    cls.__option_group__ = True
    return cls


def _is_group(annotation: Any) -> bool:
    return isinstance(annotation, type) and getattr(annotation, "__option_group__", False)


def grouped(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` with every group parameter flattened into its options, for typer; calls ``fn`` with
    one instance per group. Two groups (or a group and a plain parameter) naming the same option is a
    programming error, refused when the command is defined."""
    sig = inspect.signature(fn, eval_str=True)
    flat: list[inspect.Parameter] = []
    groups: dict[str, tuple[type, list[str]]] = {}
    for p in sig.parameters.values():
        if _is_group(p.annotation):
            hints = get_type_hints(p.annotation, include_extras=True)
            names = []
            for f in dataclasses.fields(p.annotation):
                default = f.default if f.default is not dataclasses.MISSING else inspect.Parameter.empty
                flat.append(inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=default,
                                              annotation=hints[f.name]))
                names.append(f.name)
            groups[p.name] = (p.annotation, names)
        else:
            flat.append(p.replace(kind=inspect.Parameter.KEYWORD_ONLY))
    seen: set[str] = set()
    for p in flat:
        if p.name in seen:
            raise TypeError(f"{fn.__qualname__}: option parameter {p.name!r} is defined twice (two groups?)")
        seen.add(p.name)

    @functools.wraps(fn)
    def command(**kwargs: Any) -> Any:
        for name, (cls, names) in groups.items():
            kwargs[name] = cls(**{n: kwargs.pop(n) for n in names})
        return fn(**kwargs)

    command.__signature__ = sig.replace(parameters=flat)          # what typer reads
    command.__annotations__ = {p.name: p.annotation for p in flat if p.annotation is not inspect.Parameter.empty}
    if sig.return_annotation is not inspect.Signature.empty:
        command.__annotations__["return"] = sig.return_annotation
    del command.__wrapped__              # inspect.signature must not look through to fn's own parameters
    return command


@option_group
@dataclass
class SourceGroup:
    """How SRC is read: signature, input shapes, batch, --import, trust, the sandbox, PyTorch."""
    signature: SignatureOpt = None
    input_shape: InputShapeOpt = None
    static_batch: StaticBatchOpt = False
    dynamic_batch: DynamicBatchOpt = False
    imports: ImportOpt = None
    trust_model: TrustModelOpt = False
    no_sandbox: NoSandboxOpt = False        # read before the command runs (edgebench.__main__'s sandbox)
    torch: TorchOpt = None
    channels_last: ChannelsLastOpt = False

    def options(self, reference: str | None = None) -> SourceOptions:
        return source_options(self.signature, self.input_shape, self.imports, reference,
                              static_batch=self.static_batch, dynamic_batch=self.dynamic_batch, torch=self.torch,
                              channels_last=self.channels_last, trust_model=self.trust_model)


_CONVERT = ConvertSettings(src="")


@option_group
@dataclass
class ConvertGroup:
    """How SRC becomes .tflite files: precisions, calibration, integer I/O, float islands, 16-bit
    activations, preprocessing, the output folder, the state rule (convert, convert-and-compare)."""
    precision: Annotated[Optional[str], typer.Option(
        "--precision", "-p", help="Comma-separated: fp32,fp16,int8,dynamic,int16x8 (16-bit activations, "
                                  f"8-bit weights); default {','.join(DEFAULT_PRECISIONS)}.")] = None
    calibration_samples: Annotated[int, typer.Option(
        "--calibration-samples", help="Samples used to calibrate INT8.")] = _CONVERT.calibration_samples
    int8_io: Annotated[str, typer.Option(
        "--int8-io", help="Integer model input/output type: float or int8 (int16 for int16x8).")] = _CONVERT.int8_io
    keep_float: Annotated[Optional[str], typer.Option(
        "--keep-float", help="int8 with float islands: 'auto' (search the diagnose ranking for the smallest set "
                             "meeting --max-accuracy-drop/--min-psnr), a regex, or comma-separated tensor names "
                             "from `edgebench diagnose`.")] = None
    a16: A16Opt = None
    preprocess: Annotated[str, typer.Option(
        "--preprocess", help="Image folders: scale01, mobilenet, imagenet-caffe, none.")] = _CONVERT.preprocess
    size: Annotated[str, typer.Option("--size", help="Reference models: tiny or full.")] = _CONVERT.size
    out: Annotated[Optional[str], typer.Option(
        "--out", "-o", help="Output folder for the .tflite files and manifest.json (default "
                            "edgebench-out/<name>/<run key>).")] = None
    state: StateOpt = _CONVERT.state

    def precisions(self) -> tuple[str, ...]:
        return tuple(split_csv(self.precision or ",".join(DEFAULT_PRECISIONS), option="--precision",
                               allowed=PRECISION_NAMES))

    def settings(self, src: str, *, data: str | None, source: SourceOptions,
                 keep_float_goal: KeepFloatGoal | None = None) -> ConvertSettings:
        """The conversion part of a command's settings: SRC read with SOURCE, calibrated on DATA."""
        return ConvertSettings(
            src=src, precisions=self.precisions(), data=data, calibration_samples=self.calibration_samples,
            int8_io=check_int8_io(self.int8_io), out_dir=self.out, preprocess=self.preprocess,
            size=check_size(self.size), source=source, keep_float=self.keep_float, keep_float_goal=keep_float_goal,
            a16=self.a16, state=check_state(self.state))


@option_group
@dataclass
class CalibrationGroup:
    """How a command that converts on the way (diagnose, readiness) converts SRC: calibration samples,
    integer I/O, image preprocessing, the reference model's size (``convert``'s own: ``ConvertGroup``)."""
    calibration_samples: Annotated[int, typer.Option("--calibration-samples")] = _CONVERT.calibration_samples
    int8_io: Annotated[str, typer.Option(
        "--int8-io", help="Integer model input/output type: float or int8.")] = _CONVERT.int8_io
    preprocess: Annotated[str, typer.Option(
        "--preprocess", help="Image folders: scale01, mobilenet, imagenet-caffe, none.")] = _CONVERT.preprocess
    size: Annotated[str, typer.Option("--size", help="Reference models: tiny or full.")] = _CONVERT.size

    def settings(self, src: str, *, precisions: tuple[str, ...], data: str | None, out: str | None,
                 source: SourceOptions, state: str = _CONVERT.state) -> ConvertSettings:
        """The conversion part of a command's settings: SRC read with SOURCE, calibrated on DATA, into OUT.
        (--int8-io is checked by the command, each with its own message.)"""
        return ConvertSettings(src=src, precisions=precisions, data=data,
                               calibration_samples=self.calibration_samples, int8_io=self.int8_io, out_dir=out,
                               preprocess=self.preprocess, size=check_size(self.size), source=source, state=state)


@option_group
@dataclass
class TargetGroup:
    """Where and how the rows run: targets, threads, delegate, runtime API, accelerator, GPU precision,
    op profiling, worker processes and their spread in time."""
    targets: TargetsOpt = "host"
    benchmark_binary: BenchmarkBinaryOpt = None
    threads: ThreadsOpt = None
    delegate: DelegateOpt = DEFAULT_DELEGATE
    runtime: RuntimeOpt = "interpreter"
    accelerator: AcceleratorOpt = None
    gpu_precision: GpuPrecisionOpt = None
    op_profile: OpProfileOpt = False
    repeats: RepeatsOpt = 1
    round_gap: RoundGapOpt = 0.0

    def gpu_precisions(self) -> tuple[str, ...]:
        return gpu_precisions(self.gpu_precision)

    def run(self, control: RunControl) -> RunOptions:
        """How each row runs (the settings part every measuring command embeds), under CONTROL."""
        return RunOptions(threads=self.threads, delegate=self.delegate, control=control,
                          benchmark_binary=self.benchmark_binary, runtime_api=self.runtime,
                          accelerator=self.accelerator, gpu_precisions=self.gpu_precisions(),
                          op_profile=self.op_profile, repeats=self.repeats, round_gap_s=self.round_gap)


@option_group
@dataclass
class ControlGroup:
    """How long each row is measured: runs, minimum runs/time, the time limit, warm-up."""
    runs: RunsOpt = None
    min_runs: MinRunsOpt = RC_DEFAULTS.min_runs
    min_time: MinTimeOpt = None
    max_time: MaxTimeOpt = RC_DEFAULTS.max_time_s
    warmup_runs: WarmupRunsOpt = RC_DEFAULTS.warmup_runs
    warmup_time: WarmupTimeOpt = RC_DEFAULTS.warmup_time_s

    def control(self) -> RunControl:
        return run_control(self.runs, self.min_runs, self.min_time, self.max_time, self.warmup_runs,
                           self.warmup_time)


@option_group
@dataclass
class GateGroup:
    """The gate's thresholds, on the command line or per precision in a --gate YAML."""
    max_accuracy_drop: MaxAccuracyDropOpt = None
    min_psnr: MinPsnrOpt = None
    max_p99_ms: MaxP99Opt = None
    min_size_reduction: MinSizeReductionOpt = None
    min_cosine: MinCosineOpt = None
    min_delegated: MinDelegatedOpt = None
    gate: Annotated[Optional[Path], typer.Option("--gate", help="YAML with per-precision thresholds.")] = None

    def thresholds(self) -> Thresholds:
        return Thresholds(self.max_accuracy_drop, self.min_psnr, self.max_p99_ms, self.min_size_reduction,
                          self.min_cosine, self.min_delegated)

    def gate_file(self) -> dict | None:
        return load_gate_file(self.gate) if self.gate else None


@option_group
@dataclass
class PublishGroup:
    """Where the result goes: JSON, Markdown, JUnit, the results store, a Pushgateway, Model Explorer."""
    model_explorer: ModelExplorerOpt = None
    json_path: JsonOpt = None
    markdown: MarkdownOpt = None
    junit: JunitOpt = None
    db: DbOpt = None
    no_store: NoStoreOpt = False
    pushgateway: PushgatewayOpt = None

    def options(self, op_profile: bool = False, extra_files: tuple = ()) -> PublishOptions:
        check_model_explorer(self.model_explorer, op_profile)
        return publish_options(json_path=self.json_path, db=self.db, no_store=self.no_store,
                               pushgateway=self.pushgateway, markdown=self.markdown, junit=self.junit,
                               model_explorer=self.model_explorer, extra_files=extra_files)


@option_group
@dataclass
class ViewGroup:
    """How the terminal shows it."""
    wide: WideOpt = False
    verbose: VerboseOpt = False
