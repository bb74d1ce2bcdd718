"""The Target protocol and the types every target speaks.

tf, host and adb targets look the same to measure/compare: ``run(job) -> RunResult``.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol, Sequence

import numpy as np

from edgebench.core import latency as measure
from edgebench.core.errors import BadInput, EdgebenchError
from edgebench.core.latency import MIN_SAMPLES
from edgebench.core.paths import require_file
from edgebench.model import tflite_model
from edgebench.model.state_rule import StateRule
from edgebench.rows import Latency

# 662: MLPerf LoadGen early-stopping minimum sample count for a p99 at 99% confidence
# (derived once in measure.MIN_SAMPLES; imported from here by everything else).
P99_MIN_SAMPLES = MIN_SAMPLES["p99"]

# Delegates a LiteRT target accepts (a path to a delegate .so is accepted too); "gpu" and
# "nnapi" need a device that has them. One list for the CLI, the matrix and every target.
DELEGATES = ("xnnpack", "none", "gpu", "nnapi")
HOST_DELEGATES = ("xnnpack", "none")   # what LiteRT's Python interpreter applies on a Linux/macOS host
DEFAULT_DELEGATE = "xnnpack"
# LiteRT's two APIs (issue 15): the legacy Interpreter, or the CompiledModel with an accelerator.
RUNTIME_APIS = ("interpreter", "compiled")
ACCELERATORS = ("cpu", "gpu", "npu")
GPU_PRECISIONS = ("fp32", "fp16")

# What one latency sample is: every row says (``sample_class``), and ``results compare`` never
# judges samples of one class against another's -- a fresh process's first timed run after its
# own warm-up is slower than the same model's steady state (caches, page faults, CPU frequency
# ramp-up), so a ratio between them is a change of method, not of the model.
SAMPLE_CLASSES = {
    "steady-state": "invoke() times of one long-lived process after its warm-up (edgebench runner, TF reference)",
    "per-process": "the single timed invoke() of a fresh process after that process's own warm-up "
                   "(benchmark_model sample loop: one process per sample)",
    "summary": "no per-inference samples: statistics a tool printed (import-log)",
}
STEADY_STATE, PER_PROCESS, SUMMARY = "steady-state", "per-process", "summary"


# The answer rule (issue 27, made honest under load in issue 35): a row's latency answer is valid
# and stable when LoadGen's sample minimum is met (``min_runs``) and the p99 is answered
# (``measure.quantile_answered``): its 95 % order-statistic interval at the effective sample size
# (clustered stalls count as few observations) spans at most P99_ANSWER_WIDTH of the p99, and the
# p99s of the window's two halves agree within that width (a compact tail must hold twice). Checked
# on a schedule, not after every run: at ``min_runs`` and then each time the sample count has grown
# by ANSWER_CHECK_GROWTH (the checks cost about as much as five sorts of the final sample). What
# the width buys on real traces (coverage and bias of the answer against the same process's
# long-run quantile, idle and loaded) is measured by scripts/bench_stop_rule.py and stated in the
# docs/statistics.md: the width is the rule's target, not a promise.
P99_ANSWER_WIDTH = 0.10
ANSWER_CHECK_GROWTH = 1.25
# ... and never before this much timed wall time: a window shorter than a few of the machine's
# scheduling periods can hold no stall at all while the process's long run has them (on this
# project's shared 2-core machine, stall-free windows of up to ~0.2 s answered a digits INT8 p99
# at 0.12x its long-run value; scripts/bench_stop_rule.py): a compact tail must last 0.25 s.
ANSWER_MIN_TIME_S = 0.25


def answer_checkpoint(n: int, min_runs: int) -> bool:
    """Whether the answer rule is checked after ``n`` runs: at min_runs, then at each count
    ceil(previous * ANSWER_CHECK_GROWTH) (the worker's loop walks the same sequence)."""
    c = max(int(min_runs), 1)
    while c < n:
        c = int(math.ceil(c * ANSWER_CHECK_GROWTH))
    return c == n


def p99_answered(samples: Sequence[int], width: float) -> bool:
    """True when the p99 of ``samples`` is known to within ``width`` (relative, full interval)."""
    return quantile_answered(samples, 0.99, width)


def quantile_answered(samples: Sequence[float], q: float, width: float) -> bool:
    """True when the ``q`` quantile of ``samples`` (run order) is known to within ``width``
    (relative, full 95 % interval): ``measure.quantile_answered``, the answer rule for any quantile."""
    return measure.quantile_answered(samples, q, width)


@dataclass(frozen=True)
class RunControl:
    """How long to measure: the one run-control object every settings object embeds and every
    target (TF reference, host, adb) obeys. Each default is written here once.

    Timed runs stop when ``runs`` were done (if set), else when at least ``min_runs`` runs AND
    ``min_time_s`` seconds were timed, or earlier, with ``answer_width`` set (the CLI's default
    when --min-time is not given), once ``min_runs`` were timed, ``ANSWER_MIN_TIME_S`` passed
    and the p99 is answered (``p99_answered``, stop reason "answer_valid"); in every case at
    ``max_time_s`` (a forced ``runs`` is capped too, and the row says so, so a slow model is never
    mistaken for a hang). Warm-up
    runs ``warmup_runs`` times and for at least ``warmup_time_s`` seconds, untimed.
    """

    runs: int | None = None
    min_runs: int = P99_MIN_SAMPLES
    min_time_s: float = 1.0
    max_time_s: float = 60.0
    warmup_runs: int = 10
    warmup_time_s: float = 0.0
    # stop before min_time once the answer is valid and stable: min_runs met and the p99 answered
    # to this width (``p99_answered``); None (the CLI's choice when --min-time is given): time only
    answer_width: float | None = P99_ANSWER_WIDTH

    def validate(self) -> "RunControl":
        if self.runs is not None and self.runs < 1:
            raise BadInput(f"--runs must be >= 1, got {self.runs}")
        if self.min_runs < 1:
            raise BadInput(f"--min-runs must be >= 1, got {self.min_runs}")
        for flag, v in (("--min-time", self.min_time_s), ("--max-time", self.max_time_s),
                        ("--warmup-time", self.warmup_time_s)):
            if not math.isfinite(v):          # a matrix YAML or a library caller: the CLI checks first
                raise BadInput(f"{flag} {v}: must be a finite number of seconds")
        if self.min_time_s < 0 or self.max_time_s <= 0:
            raise BadInput("--min-time must be >= 0 and --max-time > 0")
        if self.max_time_s < self.min_time_s:
            raise BadInput(f"--max-time {self.max_time_s:g} is below --min-time {self.min_time_s:g}; "
                           "raise --max-time")
        if self.warmup_runs < 1 or self.warmup_time_s < 0:
            raise BadInput("--warmup-runs must be >= 1 and --warmup-time >= 0")
        if self.answer_width is not None and not 0 < self.answer_width < 1:
            raise BadInput(f"answer_width {self.answer_width}: must be between 0 and 1 (a relative width)")
        return self

    def deadline_s(self) -> float:
        """Wall-clock bound for one worker: the timed loop stops at max_time, leaving room for
        load, warm-up and the untimed output pass."""
        return self.max_time_s * 2 + self.warmup_time_s + 120.0

    def stop_reason(self, n: int, elapsed_s: float, samples: Sequence[int] | None = None) -> str | None:
        """Why a timed loop stops after ``n`` runs and ``elapsed_s`` seconds (None: go on).
        The same rule, in the same order, as the standalone worker's loop (runner.py), for the
        in-process TF reference; ``samples`` (the first ``n``) for the answer rule, which is
        checked at ``answer_checkpoint`` counts only, from ``ANSWER_MIN_TIME_S`` of timed wall time."""
        if self.runs is not None:
            if n >= self.runs:
                return "runs"
        elif n >= self.min_runs and elapsed_s >= self.min_time_s:
            return "min_runs_and_min_time"
        elif (self.answer_width is not None and samples is not None and n >= self.min_runs
              and answer_checkpoint(n, self.min_runs) and elapsed_s >= ANSWER_MIN_TIME_S
              and p99_answered(samples[:n], self.answer_width)):
            return "answer_valid"
        if elapsed_s >= self.max_time_s:
            return "max_time"
        return None

    def to_dict(self) -> dict[str, Any]:
        return {"runs": self.runs, "min_runs": self.min_runs, "min_time_s": self.min_time_s,
                "max_time_s": self.max_time_s, "warmup_runs": self.warmup_runs,
                "warmup_time_s": self.warmup_time_s, "answer_width": self.answer_width}


@dataclass(frozen=True)
class RunOptions:
    """How each row is run: the one part every measuring command's settings embed (bench,
    convert-and-compare, matrix cells), built once by the CLI's TargetGroup + ControlGroup.
    Each default is written here once; ``validate`` holds the checks they share."""

    threads: int | None = None
    delegate: str = DEFAULT_DELEGATE
    control: RunControl = field(default_factory=RunControl)
    benchmark_binary: str | None = None   # adb devices without Python: Google's benchmark_model
    runtime_api: str = "interpreter"      # "compiled": LiteRT's CompiledModel API (--runtime)
    accelerator: str | None = None        # compiled runtime: cpu | gpu | npu (--accelerator)
    gpu_precisions: tuple[str, ...] = ()  # GPU runs: fp32 and/or fp16, side by side (--gpu-precision)
    op_profile: bool = False              # a separate op-profiling pass per row (--op-profile)
    repeats: int = 1                      # worker processes per row (run-level replicates)
    round_gap_s: float = 0.0              # --round-gap: a row's k-th process starts >= k x this after its first

    def validate(self) -> "RunOptions":
        self.control.validate()
        check_runtime(self.runtime_api, self.accelerator, self.gpu_precisions, self.delegate)
        if self.repeats < 1:
            raise BadInput(f"--repeats must be >= 1, got {self.repeats}")
        if self.round_gap_s and self.repeats < 2:
            raise BadInput(f"--round-gap {self.round_gap_s:g} spreads the processes of --repeats, and there is one; "
                           "add --repeats 3 (or more) or drop --round-gap")
        if self.threads is not None and self.threads < 1:
            raise BadInput(f"--threads must be >= 1, got {self.threads}")
        return self


@dataclass(frozen=True)
class Schedule:
    """When the timed inferences happen: back-to-back (the default), one every ``period_ms``
    (paced, sleeping in between), and/or for ``duration_s`` seconds closed into windows of
    ``report_every_s`` (sustained). Embedded in Job and BenchSettings beside RunControl; each
    default written here once. A sustained run replaces RunControl's stop rule by its duration."""

    duration_s: float | None = None
    report_every_s: float | None = None    # None: WINDOW_S, shortened to give MIN_WINDOWS windows (window_s)
    period_ms: float | None = None

    # a sustained run's window when --report-every is not given: 10 s, or duration / 3 when that is
    # shorter -- "--duration 10" is three windows, never one window and a steady-state ratio of 1
    WINDOW_S = 10.0
    MIN_WINDOWS = 3

    @property
    def window_s(self) -> float | None:
        """The window a sustained run is closed into (the given --report-every or the default)."""
        if self.report_every_s is not None or self.duration_s is None:
            return self.report_every_s
        return min(self.WINDOW_S, self.duration_s / self.MIN_WINDOWS)

    @property
    def sustained(self) -> bool:
        return self.duration_s is not None

    @property
    def paced(self) -> bool:
        return self.period_ms is not None

    def validate(self) -> "Schedule":
        for flag, v in (("--duration", self.duration_s), ("--report-every", self.report_every_s),
                        ("--period-ms", self.period_ms)):
            if v is not None and not math.isfinite(v):
                raise BadInput(f"{flag} {v}: must be a finite number")
        if self.duration_s is not None and self.duration_s <= 0:
            raise BadInput(f"--duration must be > 0 seconds, got {self.duration_s:g}")
        if self.report_every_s is not None and self.report_every_s <= 0:
            raise BadInput(f"--report-every must be > 0 seconds, got {self.report_every_s:g}")
        if self.duration_s is not None and self.report_every_s is not None \
                and self.report_every_s * 2 > self.duration_s:
            n = int(self.duration_s // self.report_every_s)
            raise BadInput(f"--report-every {self.report_every_s:g} with --duration {self.duration_s:g} gives "
                           f"{n} window{'' if n == 1 else 's'}, and the steady-state ratio compares the first window "
                           f"with the last: use --report-every {self.duration_s / 2:g} or less (or leave it out for "
                           f"{self.MIN_WINDOWS} windows)")
        if self.period_ms is not None and self.period_ms <= 0:
            raise BadInput(f"--period-ms must be > 0, got {self.period_ms:g}")
        return self

    def worker_keys(self) -> dict[str, Any]:
        """The worker contract's ``period_ms`` and ``timeline`` keys (runner.py)."""
        tl = ({"duration_s": self.duration_s, "report_every_s": self.window_s} if self.sustained else None)
        return {"period_ms": self.period_ms, "timeline": tl}

    def to_dict(self) -> dict[str, Any]:
        return {"duration_s": self.duration_s, "report_every_s": self.window_s, "period_ms": self.period_ms}


@dataclass(frozen=True)
class Job:
    """What to run on one target. Run control is the embedded :class:`RunControl`; its fields
    are readable on the job (``job.min_runs``) for the targets."""

    model_path: str
    inputs_npz: str | None = None       # InputSet file; None -> seeded synthetic inputs
    threads: int | None = None          # None -> the target's setting, else the runtime default
    delegate: str | None = None         # None -> the target's setting (default DEFAULT_DELEGATE)
    control: RunControl = field(default_factory=RunControl)
    save_outputs: bool = False          # outputs for every input sample (for drift)
    deadline: float | None = None       # worker is killed after this; None -> control.deadline_s()
    seed: int = 0
    schedule: Schedule = field(default_factory=Schedule)
    energy: Any = None                  # energy.EnergySettings: read power around the run (targets)
    runtime_api: str = "interpreter"    # "compiled": LiteRT's CompiledModel API
    accelerator: str | None = None      # compiled runtime: "cpu" | "gpu" | "npu" (None -> cpu)
    gpu_precision: str | None = None    # GPU accelerator / delegate: "fp32" | "fp16"
    op_profile: bool = False            # a separate op-profiling pass after the timed runs
    state_rule: StateRule | None = None  # what a stateful model's outputs start from (None: independent)

    @property
    def deadline_s(self) -> float:
        if self.deadline is not None:
            return self.deadline
        extra = (self.schedule.duration_s or 0.0) + (self.energy.idle_s if self.energy is not None else 0.0)
        return self.control.deadline_s() + extra

    @property
    def runs(self) -> int | None:
        return self.control.runs

    @property
    def min_runs(self) -> int:
        return self.control.min_runs

    @property
    def min_time_s(self) -> float:
        return self.control.min_time_s

    @property
    def max_time_s(self) -> float:
        return self.control.max_time_s

    @property
    def warmup_runs(self) -> int:
        return self.control.warmup_runs

    @property
    def warmup_time_s(self) -> float:
        return self.control.warmup_time_s

    def worker_spec(self) -> dict[str, Any]:
        """The flat job JSON of the standalone worker contract (runner.py)."""
        return {"model_path": self.model_path, "inputs_npz": self.inputs_npz, "threads": self.threads,
                "delegate": self.delegate or DEFAULT_DELEGATE, **self.control.to_dict(),
                "save_outputs": self.save_outputs, "seed": self.seed, **self.schedule.worker_keys(),
                "runtime_api": self.runtime_api, "accelerator": self.accelerator,
                "gpu_precision": self.gpu_precision, "op_profile": self.op_profile,
                "state": model_state(self.model_path),
                "state_rule": None if self.state_rule is None else self.state_rule.to_job()}


def model_state(model_path: str) -> dict[str, Any] | None:
    """``tflite_model.state`` of a .tflite file (None for other files and for files it cannot
    read: the worker then reports the load error itself)."""
    p = Path(model_path)
    if p.suffix.lower() != ".tflite" or not p.is_file():
        return None
    try:
        st = p.stat()
        got = _state_cached(str(p), st.st_size, st.st_mtime_ns)
        return dict(got) if got else None
    except (EdgebenchError, OSError, ValueError):
        return None


@functools.lru_cache(maxsize=64)
def _state_cached(path: str, _size: int, _mtime_ns: int) -> dict[str, Any] | None:
    return tflite_model.state(tflite_model.inspect(path))


@dataclass(frozen=True)
class RunResult:
    """Raw facts from one run of one model on one target; statistics are derived elsewhere."""
    target: str                          # "host", "tf", "adb:SERIAL"
    model_path: str
    model_sha256: str
    samples_ns: np.ndarray               # per-inference latencies, int64 ns, timed runs only
    warmup_ns: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    init_ms: float | None = None         # load + allocate
    first_inference_ms: float | None = None
    outputs: dict[str, np.ndarray] | None = None   # name -> [N_samples, ...] (dequantized float)
    peak_rss_bytes: int | None = None
    runtime: str | None = None           # "ai_edge_litert 2.3.0", "tflite_runtime", "tensorflow 2.21"
    method: str = "per-inference perf_counter_ns around invoke()"
    fingerprint: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    status: str = "ok"                   # "ok" | "failed"
    error: str | None = None
    sample_class: str = STEADY_STATE     # what one sample is (SAMPLE_CLASSES)

    # Facts of the worker's result.json that travel in ``extra`` (the worker contract, runner.py).
    WORKER_EXTRA_KEYS = ("stop_reason", "timed_wall_s", "n_input_samples", "input_source", "inputs",
                         "outputs_meta", "nonfinite_outputs", "rss_before_load_bytes", "load", "init_ms_each",
                         "runner_version", "python", "numpy", "platform", "pid", "cpu_affinity",
                         "cpu_affinity_error", "timed_span_boottime_s", "paced", "timeline", "cold_start",
                         "memory", "gc", "input_mapping", "state", "interrupted_by",
                         # issue 15: what ran the model and where the time went
                         "runtime_api", "accelerator", "fully_accelerated", "gpu_precision", "gpu_adapter",
                         "delegation", "op_profile_raw", "op_profile_error",
                         # issue 35: what the kernel saw of the timed loop (preemptions: the load signal)
                         "timed_rusage")

    @classmethod
    def from_worker(cls, meta: dict[str, Any], arrays: dict[str, np.ndarray], *, target: str, model_path: str,
                    model_sha256: str, spec: dict[str, Any], fingerprint: dict[str, Any], method: str,
                    extra: dict[str, Any] | None = None) -> "RunResult":
        """The one place a worker's ``result.json`` + ``result.npz`` become a RunResult (host and
        devices alike). ``spec`` is the job JSON the worker ran (threads/delegate in effect)."""
        outputs = {k.split("::", 1)[1]: v for k, v in arrays.items() if k.startswith("out::")} or None
        facts: dict[str, Any] = {k: meta[k] for k in cls.WORKER_EXTRA_KEYS if k in meta}
        for key in ("service_ns", "lag_ns", "backlog_ns"):
            if key in arrays:
                facts[key] = arrays[key]
        facts["threads"] = spec.get("threads")
        facts["delegate"] = spec.get("delegate")
        facts.update(extra or {})
        fp = dict(fingerprint)
        fp.update({"threads": spec.get("threads"), "delegate": spec.get("delegate"), "runtime": meta.get("runtime")})
        if meta.get("runtime_api") == "compiled":   # a different API is a different measurement
            fp.update({"runtime_api": "compiled", "accelerator": meta.get("accelerator"),
                       "gpu_precision": meta.get("gpu_precision"), "gpu_adapter": meta.get("gpu_adapter")})
            method = method.replace("invoke()", "CompiledModel.run_by_index()")
        return cls(
            target=target, model_path=model_path, model_sha256=model_sha256,
            samples_ns=np.asarray(arrays.get("samples_ns", np.zeros(0)), np.int64),
            warmup_ns=np.asarray(arrays.get("warmup_ns", np.zeros(0)), np.int64),
            init_ms=meta.get("init_ms"), first_inference_ms=meta.get("first_inference_ms"), outputs=outputs,
            peak_rss_bytes=meta.get("peak_rss_bytes"), runtime=meta.get("runtime"), method=method,
            fingerprint=fp, extra=facts,
        )

    @classmethod
    def pooled(cls, results: list["RunResult"], what: str, order: Sequence[int] | None = None,
               started: Sequence[float] | None = None) -> "RunResult":
        """Several worker processes of one job (``--repeats``) as one result: the first process's
        facts and outputs, every process's samples pooled, the highest peak RSS, and
        ``extra["repeats"]``: one summary per process (its own percentiles: the run-level
        replicates ``results compare`` tests changes against; ``order``: its place in the target's
        sequence of worker processes, when the caller interleaved them; ``started``: when each began
        (``time.monotonic()``), kept as ``started_s`` from the first: how far apart in time they ran) and
        ``extra["repeat_warnings"]`` (each process's own latency warnings, then the run-to-run
        spread of p50). A failed process makes the whole result that failure."""

        bad = next((r for r in results if r.status != "ok"), None)
        if bad is not None or len(results) == 1:
            return bad or results[0]
        first = results[0]
        reps, warnings = [], []
        for k, r in enumerate(results):
            ru = r.extra.get("timed_rusage") if isinstance(r.extra.get("timed_rusage"), dict) else {}
            st = Latency.from_samples(r.samples_ns, what=f"process {k + 1} of {what}",
                                      preemptions=ru.get("involuntary_switches"))
            reps.append({"process": k + 1, "pid": r.extra.get("pid"), "samples": st.samples, "p50": st.p50,
                         "p90": st.p90, "p99": st.p99, "mean": st.mean, "qps": st.qps, "p99_valid": st.p99_valid,
                         "peak_rss_bytes": r.peak_rss_bytes, "stall_share": st.stall_share,
                         "preemptions": st.preemptions, "loaded": st.loaded,
                         **({"order": int(order[k])} if order is not None and k < len(order) else {}),
                         **({"started_s": round(float(started[k]) - float(started[0]), 3)}
                            if started is not None and len(started) == len(results) else {})})
            warnings.extend(w for w in st.warnings if w not in warnings)
        p50s = [r["p50"] for r in reps]
        warnings.append(f"run-to-run: p50 across {len(p50s)} worker processes {min(p50s):.4g}-{max(p50s):.4g} ms "
                        f"(spread {max(p50s) / min(p50s) - 1:.1%})")
        rus = [r.extra.get("timed_rusage") for r in results]
        summed = ({k: sum(ru[k] for ru in rus) for k in rus[0]
                   if all(isinstance(ru.get(k), (int, float)) for ru in rus)}
                  if all(isinstance(ru, dict) for ru in rus) else None)
        return replace(first, samples_ns=np.concatenate([np.asarray(r.samples_ns, np.int64) for r in results]),
                       peak_rss_bytes=max((r.peak_rss_bytes or 0) for r in results) or first.peak_rss_bytes,
                       extra={**first.extra, "repeats": reps, "repeat_warnings": warnings, "timed_rusage": summed})

    @classmethod
    def failed(cls, target: str, model_path: str, error: str, *, model_sha256: str = "",
               exit_code: int = 3) -> "RunResult":
        """A run that produced nothing; ``extra["exit_code"]`` keeps the error's exit code."""
        return cls(target=target, model_path=model_path, model_sha256=model_sha256,
                   samples_ns=np.zeros(0, np.int64), status="failed", error=error, extra={"exit_code": exit_code})


def check_runtime(runtime_api: str, accelerator: str | None, gpu_precisions: tuple[str | None, ...] = (),
                  delegate: str | None = None) -> None:
    """--runtime / --accelerator / --gpu-precision: known values that fit together (BadInput)."""
    if runtime_api not in RUNTIME_APIS:
        raise BadInput(f"--runtime {runtime_api!r} is unknown; use {' or '.join(RUNTIME_APIS)}")
    if accelerator is not None:
        if accelerator not in ACCELERATORS:
            raise BadInput(f"--accelerator {accelerator!r} is unknown; use {', '.join(ACCELERATORS)}")
        if runtime_api != "compiled":
            raise BadInput(f"--accelerator {accelerator} selects a CompiledModel accelerator; add --runtime compiled "
                           "(the Interpreter takes --delegate instead)")
    for p in gpu_precisions:
        if p is not None and p not in GPU_PRECISIONS:
            raise BadInput(f"--gpu-precision {p!r} is unknown; use {', '.join(GPU_PRECISIONS)} (comma-separated)")
    if any(p is not None for p in gpu_precisions) and accelerator != "gpu" and delegate != "gpu":
        raise BadInput("--gpu-precision applies to GPU runs; add --runtime compiled --accelerator gpu "
                       "(host) or --delegate gpu (devices)")


def check_job_files(job: Job) -> Path:
    """The job's model path, after checking that it and its input set exist (BadInput otherwise)."""


    model = require_file(job.model_path, "a .tflite file", "give the path of an existing .tflite file",
                         missing="model not found")
    if job.inputs_npz and not Path(job.inputs_npz).is_file():
        raise BadInput(f"input data not found: {job.inputs_npz}; give an .npz InputSet (--data)")
    return model


class Target(Protocol):
    name: str

    def fingerprint(self) -> dict[str, Any]: ...

    def run(self, job: Job) -> RunResult: ...
