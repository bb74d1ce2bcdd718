"""What one benchmark_model run printed, as numbers: ``RunStats``, ``OpProfileRow`` and
``BenchmarkModelLog`` (frozen; filled by ``parse.parse_log``). Times are microseconds."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

# --------------------------------------------------------------------------- parsed structures


@dataclass(frozen=True)
class RunStats:
    """One ``count=... first=... curr=... min=... max=... avg=... std=...`` line (microseconds).

    Fields the line did not print are None (``count=1 curr=X`` prints only the current run;
    p5/median/p95 exist only in recent versions).
    """

    count: int
    first_us: float | None = None
    curr_us: float | None = None
    min_us: float | None = None
    max_us: float | None = None
    avg_us: float | None = None
    std_us: float | None = None
    p5_us: float | None = None
    median_us: float | None = None
    p95_us: float | None = None

    @property
    def mean_us(self) -> float | None:
        """avg=, or the single run's value when count=1 printed only curr=."""
        if self.avg_us is not None:
            return self.avg_us
        if self.count == 1:
            return self.curr_us
        return None

    @property
    def first_run_us(self) -> float | None:
        if self.first_us is not None:
            return self.first_us
        return self.curr_us if self.count == 1 else None

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in (
            "count", "first_us", "curr_us", "min_us", "max_us", "avg_us", "std_us",
            "p5_us", "median_us", "p95_us")}


@dataclass(frozen=True)
class OpProfileRow:
    """One row of an op-profiling table.

    ``section``: "init" (Profiling Info for Benchmark Initialization) or "regular"
    (Operator-wise Profiling Info for Regular Benchmark Runs); ``table``: "Run Order",
    "Top by Computation Time" or "Summary by node type". Times in ms, shares in percent.
    """

    section: str
    table: str
    node_type: str
    avg_ms: float | None
    pct: float | None
    cdf_pct: float | None
    mem_kb: float | None
    times_called: int | None
    start_ms: float | None = None
    first_ms: float | None = None
    count: int | None = None           # "Summary by node type" only: nodes of this type
    name: str | None = None            # Run Order / Top tables only

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in (
            "section", "table", "node_type", "name", "start_ms", "first_ms", "avg_ms", "pct",
            "cdf_pct", "mem_kb", "times_called", "count") if getattr(self, k) is not None}


@dataclass(frozen=True)
class BenchmarkModelLog:
    """Everything one benchmark_model run printed, as numbers. Times are microseconds."""

    params: dict[str, str] = field(default_factory=dict)          # echoed "Name: [value]" lines
    warmup: RunStats | None = None
    inference: RunStats | None = None
    run_stats: tuple[RunStats, ...] = ()                          # every stats line, in order
    init_us: float | None = None                                  # summary "Init:"
    first_inference_us: float | None = None                       # summary "First inference:"
    warmup_avg_us: float | None = None                            # summary "Warmup (avg):"/"Warmup:"
    inference_avg_us: float | None = None                         # "Inference (avg):"/"no stats:"/"Inference:"
    summary_format: str | None = None                             # "inference-timings" | "average-inference-timings"
    init_session_ms: float | None = None
    model_size_mb: float | None = None
    model_path: str | None = None
    mem_init_mb: float | None = None
    mem_overall_mb: float | None = None
    mem_kind: str | None = None          # "delta-from-tool-start" | "peak-footprint (TFLite <= 2.4 wording)"
    peak_mem_mb: float | None = None     # "Overall peak memory footprint (MB) via periodic monitoring"
    delegates: tuple[str, ...] = ()      # delegates created/applied, in order: "XNNPACK", "GPU", "NNAPI", ...
    delegated_nodes: tuple[int, int] | None = None   # (replaced, total) when printed
    delegate_partitions: int | None = None           # "..., yielding K partitions" when printed
    delegate_fallback: tuple[str, ...] = ()          # delegates that were requested but not applied
    op_profile: tuple[OpProfileRow, ...] = ()
    op_profile_timings: dict[str, RunStats] = field(default_factory=dict)  # section -> "Timings (microseconds)"
    errors: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    failed: bool = False
    unparsed: tuple[str, ...] = ()
    recognized_lines: int = 0
    summary_lines: int = 0

    @property
    def is_benchmark_model(self) -> bool:
        """True when at least one line is unmistakably benchmark_model output."""
        return self.recognized_lines > 0

    def param(self, *names: str) -> str | None:
        """First echoed parameter among ``names`` (case- and space-insensitive)."""
        norm = {_norm_key(k): v for k, v in self.params.items()}
        for n in names:
            v = norm.get(_norm_key(n))
            if v is not None:
                return v
        return None

    @property
    def threads(self) -> int | None:
        v = self.param("Num threads", "#threads used for CPU inference")
        try:
            return int(v) if v is not None else None
        except ValueError:
            return None


def _norm_key(k: str) -> str:
    return re.sub(r"\s+", " ", k.strip().lower())

