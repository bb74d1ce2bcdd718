"""Options shared by several commands, declared once (``Annotated`` types for typer).

A command writes ``db: DbOpt = None`` instead of repeating ``typer.Option(None, "--db", help=...)``;
defaults come from the library's settings objects (``RunControl``, ``DEFAULT_DELEGATE``), so each
default is written once. ``run_control(...)`` and ``publish_options(...)`` turn the parsed values
into the library's settings objects.
"""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from edgebench.cli._common import split_csv
from edgebench.convert.run import INT8_IO
from edgebench.core.errors import BadInput
from edgebench.model.state_rule import STATE_OPTIONS
from edgebench.report.publish import PublishOptions
from edgebench.sources.resolve import DEFAULT_SIGNATURE, SourceOptions, parse_input_shape
from edgebench.targets.base import (
    ACCELERATORS,
    DEFAULT_DELEGATE,
    DELEGATES,
    GPU_PRECISIONS,
    P99_MIN_SAMPLES,
    RUNTIME_APIS,
    RunControl,
    Schedule,
)
from edgebench.targets.energy import EnergySettings

_RC = RunControl()
_SCHEDULE = Schedule()
_ENERGY = EnergySettings()

# --- what a stateful model remembers between samples (edgebench.model.state_rule)
StateOpt = Annotated[str, typer.Option(
    "--state", help="Stateful models (Keras stateful layers, streaming models with variables, LSTMs): "
                    "'independent' (every sample from the initial state), 'streams' (state carried within a "
                    "stream, reset between streams; streams from a 'stream_id' array or a [streams, windows, ...] "
                    "axis in --data, else all samples are one stream) or 'auto' (streams when the data defines "
                    "them). One rule for TF, the parity check, every row and diagnose.")]
OutputKindOpt = Annotated[Optional[str], typer.Option(
    "--output-kind", help="An output whose classes are ordered bins: NAME:ordinal[,tolerance=BINS] (e.g. "
                          "pitch:ordinal,tolerance=2); agreement and accuracy count a top-1 within BINS bins as "
                          "the same answer.")]

StreamThresholdOpt = Annotated[float, typer.Option(
    "--stream-threshold", help="--state streams, one score per window: a stream is detected when any window "
                               "scores at least this (default 0.5).")]

# --- outputs and the store
JsonOpt = Annotated[Optional[str], typer.Option("--json", help="Write the result as JSON to PATH ('-' for stdout).")]
DbOpt = Annotated[Optional[str], typer.Option(
    "--db", help="Results database: a SQLite file path or a SQLAlchemy URL (default $EDGEBENCH_DB, else the user data dir).")]
NoStoreOpt = Annotated[bool, typer.Option("--no-store", help="Do not write the result to the results database.")]
PushgatewayOpt = Annotated[Optional[str], typer.Option(
    "--pushgateway", help="Also push the metrics to this Prometheus Pushgateway URL.")]
MarkdownOpt = Annotated[Optional[str], typer.Option(
    "--markdown", help="Write a PR-comment-ready Markdown report to PATH (also appended to $GITHUB_STEP_SUMMARY).")]
JunitOpt = Annotated[Optional[str], typer.Option(
    "--junit", help="Write JUnit XML (one case per precision x target x threshold).")]
WideOpt = Annotated[bool, typer.Option("--wide", help="Show every column even when the terminal is narrow.")]
VerboseOpt = Annotated[bool, typer.Option("--verbose", "-v", help="Every warning in full, one per row (default: "
                                          "one line per cause; the JSON and Markdown always keep the full text).")]

# --- where and how models run
TargetsOpt = Annotated[str, typer.Option(
    "--targets", "-t", help="Comma-separated: host, adb:SERIAL, adb:all (adb: every attached device in parallel); "
    "bench also takes devicefarm:PROJECT/POOL (AWS Device Farm, docs/devicefarm.md).")]
ThreadsOpt = Annotated[Optional[int], typer.Option(
    "--threads", help="Interpreter threads (default: the runtime's default, recorded in the result).")]
DelegateOpt = Annotated[str, typer.Option(
    "--delegate", help=f"{', '.join(DELEGATES)}, or a path to a delegate .so (default {DEFAULT_DELEGATE}).")]
BenchmarkBinaryOpt = Annotated[Optional[str], typer.Option(
    "--benchmark-binary", help="Google's android_aarch64_benchmark_model for devices without Python "
                               "(or $EDGEBENCH_BENCHMARK_MODEL).")]

# --- how a source model is read (SourceOptions)
SignatureOpt = Annotated[Optional[str], typer.Option(
    "--signature", help="SavedModel signature to convert and run (default serving_default; a missing key lists "
                        "the ones there are).")]
InputShapeOpt = Annotated[Optional[list[str]], typer.Option(
    "--input-shape", help="Fix a dynamic input: NAME:1,128 (batch first; repeatable). A dynamic batch dim alone "
                          "is converted as 1 without it.")]
StaticBatchOpt = Annotated[bool, typer.Option(
    "--static-batch", help="Convert a dynamic batch as a static 1: the converter folds the shape arithmetic a "
                           "dynamic batch needs (SHAPE/STRIDED_SLICE/PACK before a Reshape), ops delegates "
                           "leave on the CPU; the .tflite then takes batch 1 only (the default of "
                           "convert-and-compare and diagnose).")]
DynamicBatchOpt = Annotated[bool, typer.Option(
    "--dynamic-batch", help="Keep a dynamic batch in the converted .tflite, as an app that runs batches deploys "
                            "it (by default a dynamic batch is converted as the static 1 that is measured).")]
ImportOpt = Annotated[Optional[list[str]], typer.Option(
    "--import", help="Python module (name or .py path) imported first (repeatable): its classes become Keras "
                     "custom objects for .keras/.h5 files; it can also register custom TF ops.")]
NoSandboxOpt = Annotated[bool, typer.Option(
    "--no-sandbox", help="Run without the sandbox (docs/security.md): the model's code could then write "
                         "anywhere you can and reach the network. --trust-model alone keeps the sandbox.")]
TrustModelOpt = Annotated[bool, typer.Option(
    "--trust-model", help="Run code the model file carries (a Keras Lambda's bytecode, a custom class the file "
                          "names, SavedModel ops that write or read files or run Python): refused without it. "
                          "Only for files whose author you trust.")]

# --- PyTorch and float .tflite sources (litert-torch, ai-edge-quantizer)
TorchOpt = Annotated[Optional[str], typer.Option(
    "--torch", help="A PyTorch model: MODULE:FACTORY (a module name or .py path; FACTORY() returns an nn.Module, "
                    "run as given: user code) with --input-shape NAME:1,3,H,W per input; SRC may be omitted. "
                    "Needs pip install 'edgebench[torch]'.")]
ChannelsLastOpt = Annotated[bool, typer.Option(
    "--channels-last", help="PyTorch sources: the .tflite takes and returns NHWC (litert_torch.to_channel_last_io; "
                            "no leading TRANSPOSE); the data is then NHWC too.")]
A16Opt = Annotated[Optional[str], typer.Option(
    "--a16", help="int8 with 16-bit activations on these tensors' ops (names from `edgebench diagnose`, or a regex): "
                  "ai-edge-quantizer, for a float .tflite or PyTorch source.")]

# --- where the time goes (issue 15)
RuntimeOpt = Annotated[str, typer.Option(
    "--runtime", help=f"LiteRT API: {' or '.join(RUNTIME_APIS)} (CompiledModel, Google's recommended API).")]
AcceleratorOpt = Annotated[Optional[str], typer.Option(
    "--accelerator", help=f"CompiledModel accelerator: {', '.join(ACCELERATORS)} (needs --runtime compiled).")]
GpuPrecisionOpt = Annotated[Optional[str], typer.Option(
    "--gpu-precision", help=f"GPU runs: {','.join(GPU_PRECISIONS)} (comma-separated: side by side).")]
OpProfileOpt = Annotated[bool, typer.Option(
    "--op-profile", help="A separate op-profiling pass after the timed runs: time per op and per delegate partition.")]
RepeatsOpt = Annotated[int, typer.Option(
    "--repeats", help="Worker processes per model x target, one after another (>= 3 lets `results compare` test "
                      "changes against run-to-run noise).")]
RoundGapOpt = Annotated[float, typer.Option(
    "--round-gap", help="Spread --repeats in time: a row's k-th process starts at least k x S seconds after its first. Processes "
                        "10 s or more apart give `results compare` an interval for a rerun; back-to-back ones are "
                        "one run (docs/statistics.md).")]
ModelExplorerOpt = Annotated[Optional[str], typer.Option(
    "--model-explorer", help="Write Model Explorer node data (per-op latency) to PATH (needs --op-profile).")]

# --- run control (RunControl's defaults)
RunsOpt = Annotated[Optional[int], typer.Option(
    "--runs", help=f"Force exactly N timed runs (default: >= --min-runs and >= --min-time; {P99_MIN_SAMPLES} "
                   "samples are needed for a valid p99).")]
MinRunsOpt = Annotated[int, typer.Option(
    "--min-runs", help=f"Run at least N timed inferences ({P99_MIN_SAMPLES} = valid p99).")]
MinTimeOpt = Annotated[Optional[float], typer.Option(
    "--min-time", help="...and at least S timed seconds (default 1; without it a row stops earlier once its "
                       "p99 is known to +/-5 %: stop reason answer_valid).")]
MaxTimeOpt = Annotated[float, typer.Option(
    "--max-time", help="Stop after S timed seconds even if --runs/--min-runs is not reached (the row says so).")]
WarmupRunsOpt = Annotated[int, typer.Option("--warmup-runs", help="Untimed warm-up inferences before timing.")]
WarmupTimeOpt = Annotated[float, typer.Option("--warmup-time", help="...and warm up for at least S seconds.")]

# --- when inferences happen, cold starts, energy (Schedule's and EnergySettings' defaults)
DurationOpt = Annotated[Optional[float], typer.Option(
    "--duration", help="Sustained run: invoke for S seconds and report a timeline of windows (latency, thermal); "
                       "replaces --runs/--min-runs/--min-time/--max-time for the timed loop.")]
ReportEveryOpt = Annotated[Optional[float], typer.Option(
    "--report-every", help=f"Sustained run (--duration): one timeline window every S seconds (default "
                           f"{_SCHEDULE.WINDOW_S:g}, or --duration / {_SCHEDULE.MIN_WINDOWS} when that is shorter).")]
PeriodMsOpt = Annotated[Optional[float], typer.Option(
    "--period-ms", help="Paced: one invoke every P ms, sleeping in between (latency = invoke only); reported "
                        "next to a back-to-back run.")]
ColdStartsOpt = Annotated[int, typer.Option(
    "--cold-starts", help="Also measure N fresh worker processes: process start, model load + allocate, first "
                          "inference.")]
XnnpackCacheOpt = Annotated[bool, typer.Option(
    "--xnnpack-cache", help="Cold starts with LiteRT's XNNPACK weight cache (CompiledModel API): starts without "
                            "a cache, the cache-writing start and the warm ones are reported apart.")]
EnergyOpt = Annotated[bool, typer.Option(
    "--energy", help="Energy per inference: battery current x voltage on devices, RAPL on Intel/AMD hosts, "
                     "minus an idle baseline; with validity.")]
EnergyIdleOpt = Annotated[float, typer.Option(
    "--energy-idle", help="Seconds of idle baseline before the run (--energy).")]

# --- gate thresholds
MaxAccuracyDropOpt = Annotated[Optional[float], typer.Option(
    "--max-accuracy-drop", help="Gate: max task top-1 drop vs TF, in percentage points (needs labels).")]
MinPsnrOpt = Annotated[Optional[float], typer.Option("--min-psnr", help="Gate: min worst-output PSNR (dB).")]
MaxP99Opt = Annotated[Optional[float], typer.Option("--max-p99-ms", help="Gate: max p99 latency (ms).")]
MinSizeReductionOpt = Annotated[Optional[float], typer.Option(
    "--min-size-reduction", help="Gate: min size reduction vs FP32 (%).")]
MinCosineOpt = Annotated[Optional[float], typer.Option(
    "--min-cosine", help="Gate: min mean cosine similarity to the reference, per output.")]
MinDelegatedOpt = Annotated[Optional[float], typer.Option(
    "--min-delegated", help="Gate: min % of nodes the delegate/accelerator must take.")]


def run_control(runs: int | None = None, min_runs: int = _RC.min_runs, min_time: float | None = None,
                max_time: float = _RC.max_time_s, warmup_runs: int = _RC.warmup_runs,
                warmup_time: float = _RC.warmup_time_s) -> RunControl:
    """The run control of the options; an explicit --min-time measures for that long (no early
    stop on a valid answer), none keeps RunControl's default time and its answer rule."""
    timed = {} if min_time is None else {"min_time_s": min_time, "answer_width": None}
    return RunControl(runs=runs, min_runs=min_runs, max_time_s=max_time, warmup_runs=warmup_runs,
                      warmup_time_s=warmup_time, **timed).validate()


def schedule(duration: float | None = None, report_every: float | None = None,
             period_ms: float | None = None) -> Schedule:
    """--duration / --report-every / --period-ms -> Schedule (--report-every alone is refused: it
    is the window of a sustained run)."""

    if report_every is not None and duration is None:
        raise BadInput(f"--report-every {report_every:g} sets the window of a sustained run: add --duration S "
                       "(or drop --report-every)")
    return Schedule(duration_s=duration, report_every_s=report_every, period_ms=period_ms).validate()


def energy_settings(enabled: bool, idle_s: float = _ENERGY.idle_s) -> EnergySettings | None:
    return EnergySettings(idle_s=idle_s).validate() if enabled else None


def source_options(signature: str | None = None, input_shapes: list[str] | None = None,
                   imports: list[str] | None = None, reference: str | None = None, static_batch: bool = False,
                   *, dynamic_batch: bool = False, torch: str | None = None, channels_last: bool = False,
                   trust_model: bool = False):
    """--signature / --input-shape (repeatable) / --import (repeatable) / --reference / --static-batch
    / --dynamic-batch / --trust-model -> SourceOptions (neither flag: the command's default,
    ``SourceOptions.for_measuring``)."""

    if static_batch and dynamic_batch:
        raise BadInput("--static-batch and --dynamic-batch: give one of them")

    shapes = tuple(parse_input_shape(s) for s in (input_shapes or ()))
    names = [n for n, _ in shapes]
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup:
        raise BadInput(f"--input-shape {dup}: given twice; give each input once")
    return SourceOptions(signature_key=signature or DEFAULT_SIGNATURE, input_shapes=shapes,
                         imports=tuple(imports or ()), reference=reference,
                         static_batch=True if static_batch else False if dynamic_batch else None,
                         torch=torch, channels_last=channels_last, trust_model=trust_model)


def source_arg(src: str | None, torch: str | None) -> str:
    """SRC, or the --torch MODULE:FACTORY that stands for it (one of the two, not both)."""
    if torch and src and src != torch:
        raise BadInput(f"{src} and --torch {torch}: give one model, SRC or --torch MODULE:FACTORY")
    if not (src or torch):
        raise BadInput("no model given: pass SRC (a SavedModel folder, .keras, .tflite, .pt2 or a reference model name) "
                       "or --torch MODULE:FACTORY")
    return src or torch  # type: ignore[return-value]


def publish_options(*, json_path: str | None = None, db: str | None = None, no_store: bool = False,
                    pushgateway: str | None = None, markdown: str | None = None,
                    junit: str | None = None, model_explorer: str | None = None,
                    extra_files: tuple = ()) -> PublishOptions:
    return PublishOptions(json_path=json_path, markdown=markdown, junit=junit, db=db, store=not no_store,
                          pushgateway=pushgateway, model_explorer=model_explorer, extra_files=extra_files)


def gpu_precisions(value: str | None) -> tuple[str, ...]:
    """'fp16,fp32' -> ('fp16', 'fp32'), validated."""
    return tuple(split_csv(value, option="--gpu-precision", allowed=GPU_PRECISIONS)) if value else ()


def check_model_explorer(model_explorer: str | None, op_profile: bool) -> None:
    if model_explorer and not op_profile:
        raise BadInput("--model-explorer writes per-op latency, which needs a profile: add --op-profile")


RC_DEFAULTS = _RC
SCHEDULE_DEFAULTS = _SCHEDULE
ENERGY_DEFAULTS = _ENERGY


# --- conversion values the commands share (checked once, here)
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
