"""The Target protocol and the types every target speaks.

tf, host and adb targets look the same to measure/compare: ``run(job) -> RunResult``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

# 662: MLPerf LoadGen early-stopping minimum sample count for a p99 at 99% confidence.
P99_MIN_SAMPLES = 662


@dataclass(frozen=True)
class Job:
    """What to run. Defaults are written here once; the CLI passes through what the user set."""

    model_path: str
    inputs_npz: str | None = None       # InputSet file; None -> seeded synthetic inputs
    threads: int | None = None          # None -> runtime default
    delegate: str = "xnnpack"           # "xnnpack" | "none" (| "gpu" | "nnapi" on devices)
    warmup_runs: int = 10
    warmup_time_s: float = 0.0
    min_runs: int = P99_MIN_SAMPLES
    min_time_s: float = 1.0
    max_time_s: float = 60.0
    runs: int | None = None             # forces exactly this many timed runs
    save_outputs: bool = False          # outputs for every input sample (for drift)
    deadline_s: float = 300.0           # worker is killed after this
    seed: int = 0


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


def check_job_files(job: Job) -> Path:
    """The job's model path, after checking that it and its input set exist (BadInput otherwise)."""
    from edgebench.errors import BadInput

    model = Path(job.model_path)
    if not model.is_file():
        raise BadInput(f"model not found: {model}; give the path of an existing .tflite file")
    if job.inputs_npz and not Path(job.inputs_npz).is_file():
        raise BadInput(f"input data not found: {job.inputs_npz}; give an .npz InputSet (--data)")
    return model


class Target(Protocol):
    name: str

    def fingerprint(self) -> dict[str, Any]: ...

    def run(self, job: Job) -> RunResult: ...
