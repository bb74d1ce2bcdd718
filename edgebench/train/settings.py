"""What a ``train-baseline`` sweep is: the choices (explicit dicts), ``TrainSettings`` with every
default written once and its validation, and the ``Cell``s it expands to."""

from __future__ import annotations

import dataclasses
import importlib.util
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from edgebench.core.errors import BadInput

# Choices, each mapped to what it means (STYLE 9: explicit dicts, no string imports).
PRECISIONS = {"fp32": "float32", "mixed_float16": "mixed_float16", "mixed_bfloat16": "mixed_bfloat16"}
XLA_CHOICES = {"on": True, "off": False}
STRATEGIES = ("none", "mirrored", "multiworker")
PIPELINES = ("naive", "optimized")
SIZES = ("tiny", "full")
GPU_STRATEGIES = ("mirrored",)  # need at least one visible GPU; skipped (with the reason) otherwise


@dataclass(frozen=True)
class TrainSettings:
    """One ``train-baseline`` sweep. Every default is written here once; the CLI passes what the user set."""

    model: str
    size: str = "tiny"
    batch_sizes: tuple[int, ...] = (32,)
    precisions: tuple[str, ...] = ("fp32",)
    xla: tuple[str, ...] = ("off",)
    strategies: tuple[str, ...] = ("none",)
    input_pipelines: tuple[str, ...] = ("optimized",)
    steps: int = 50
    warmup_steps: int = 5
    data: str = "synthetic"            # "synthetic" or a .npz with the model's inputs + "labels"
    seed: int = 0
    deterministic: bool = False        # tf.config.experimental.enable_op_determinism()
    workers: int = 2                   # local worker processes for strategy "multiworker"
    learning_rate: float = 0.01        # SGD with momentum 0.9
    profile_steps: tuple[int, int] | None = None  # inclusive global step indices (warm-up counts)
    profile_dir: str | None = None
    worker_timeout_s: float = 900.0    # per multiworker cell; the whole group gets cells x this + startup
    gpu_sample_interval_s: float = 0.2
    allreduce_repeats: int = 10
    db: str | None = None              # save the result to this results database URL when set

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "TrainSettings":
        """Inverse of ``dataclasses.asdict`` after a JSON round trip (lists back to tuples)."""
        kw = {}
        for f in dataclasses.fields(cls):
            if f.name in d:
                v = d[f.name]
                kw[f.name] = tuple(v) if isinstance(v, list) else v
        return cls(**kw)

    def validate(self) -> None:
        """BadInput naming the option and the fix for anything unusable; no side effects."""
        def _check(values: tuple, allowed, option: str) -> None:
            if not values:
                raise BadInput(f"{option} is empty; give one or more of {', '.join(allowed)}")
            for v in values:
                if v not in allowed:
                    raise BadInput(f"{option}: unknown value {v!r}; use one or more of {', '.join(allowed)}")

        if self.size not in SIZES:
            raise BadInput(f"--size: unknown value {self.size!r}; use tiny or full")
        if not self.batch_sizes or any(int(b) <= 0 for b in self.batch_sizes):
            raise BadInput(f"--batch-sizes: need positive integers, got {self.batch_sizes!r}")
        _check(self.precisions, PRECISIONS, "--precision")
        _check(self.xla, XLA_CHOICES, "--xla")
        _check(self.strategies, STRATEGIES, "--strategy")
        _check(self.input_pipelines, PIPELINES, "--input-pipeline")
        if self.steps < 1:
            raise BadInput(f"--steps must be >= 1, got {self.steps}")
        if self.warmup_steps < 1:
            raise BadInput(f"--warmup-steps must be >= 1 (the first step traces and compiles and is never "
                           f"timed), got {self.warmup_steps}")
        if self.workers < 1:
            raise BadInput(f"--workers must be >= 1, got {self.workers}")
        if not (self.learning_rate > 0 and math.isfinite(self.learning_rate)):
            raise BadInput(f"--learning-rate must be a positive finite number, got {self.learning_rate}")
        if self.profile_steps is not None:
            if len(self.profile_steps) != 2:
                raise BadInput(f"--profile-steps takes START,END (two step indices), got {self.profile_steps!r}")
            a, b = self.profile_steps
            total = self.warmup_steps + self.steps
            if not (0 <= a <= b < total):
                raise BadInput(f"--profile-steps {a},{b}: need 0 <= START <= END < warmup + steps = {total}; "
                               "steps are counted from 0 including warm-up")
            require_profiler()
        if self.data != "synthetic" and not Path(self.data).is_file():
            raise BadInput(f"--data {self.data}: no such file; give 'synthetic' or an .npz with the model's "
                           "inputs and 'labels'")

    def cells(self) -> list["Cell"]:
        """The sweep, strategy-major (multiworker cells are contiguous: one worker group runs them)."""
        out = []
        for strategy in self.strategies:
            for precision in self.precisions:
                for xla in self.xla:
                    for bs in self.batch_sizes:
                        for pipe in self.input_pipelines:
                            out.append(Cell(strategy, precision, xla, int(bs), pipe))
        return out


@dataclass(frozen=True)
class Cell:
    strategy: str
    precision: str
    xla: str
    batch_size: int
    input_pipeline: str

    @property
    def key(self) -> str:
        return f"{self.strategy}-{self.precision}-xla_{self.xla}-bs{self.batch_size}-{self.input_pipeline}"


def require_profiler() -> None:
    """BadInput when the optional profiling extra (tensorboard + tensorboard-plugin-profile) is missing."""
    missing = [m for m in ("tensorboard", "tensorboard_plugin_profile") if importlib.util.find_spec(m) is None]
    if missing:
        raise BadInput(f"--profile-steps needs {' and '.join(missing)} to capture and view the profile; "
                       "install the extra: pip install 'edgebench[profile]'")
