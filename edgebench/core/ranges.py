"""Every numeric option's valid range, written once: ``RANGES`` maps a flag to its :class:`Range`.

``check(flag, value)`` raises BadInput naming the option and its range (exit 2). The CLI checks
every numeric option of every command with it before the command body runs
(``cli/_ranges.checked``); comma-separated numbers (``--concurrency 1,2,4``, ``--batch-sizes``) and
a matrix file's numeric keys (``runs:``, ``min_time_s:``, ``--set steps=...``) are checked against
the same entries. ``tests/faults/test_numeric_options.py`` fails when a numeric option has no
entry here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from edgebench.core.errors import BadInput

WEEK_S = 7 * 24 * 3600.0


@dataclass(frozen=True)
class Range:
    lo: float | None = None
    hi: float | None = None
    lo_open: bool = False        # lo itself is not allowed (> lo)
    hi_open: bool = False

    def ok(self, v: float) -> bool:
        if isinstance(v, float) and not math.isfinite(v):
            return False
        if self.lo is not None and (v <= self.lo if self.lo_open else v < self.lo):
            return False
        return not (self.hi is not None and (v >= self.hi if self.hi_open else v > self.hi))

    def text(self) -> str:
        lo = None if self.lo is None else f"{'>' if self.lo_open else '>='} {_num(self.lo)}"
        hi = None if self.hi is None else f"{'<' if self.hi_open else '<='} {_num(self.hi)}"
        return " and ".join(x for x in (lo, hi) if x) or "finite"


def _num(v: float) -> str:
    """A bound as a user types it: whole numbers exactly, with thousands separators (4,294,967,295,
    not 4.29497e+09)."""
    return f"{int(v):,}" if float(v).is_integer() else f"{v:g}"


def _gt(lo: float, hi: float | None = None) -> Range:
    return Range(lo, hi, lo_open=True)


def _ge(lo: float, hi: float | None = None) -> Range:
    return Range(lo, hi)


COUNT_MAX = 1e9      # runs, samples, steps: beyond this a run cannot finish anyway

RANGES: dict[str, Range] = {
    # run control
    "--runs": _ge(1, COUNT_MAX), "--min-runs": _ge(1, COUNT_MAX), "--warmup-runs": _ge(1, COUNT_MAX),
    "--min-time": _ge(0, WEEK_S), "--max-time": _gt(0, WEEK_S), "--warmup-time": _ge(0, 3600),
    "--repeats": _ge(1, 1000), "--round-gap": _ge(0, 3600), "--threads": _ge(1, 1024),
    # schedules, cold starts, energy, load
    "--duration": _gt(0, WEEK_S), "--report-every": _gt(0, WEEK_S), "--period-ms": _gt(0, 3.6e6),
    "--cold-starts": _ge(0, 10_000), "--energy-idle": _gt(0, 3600), "--server-qps": _gt(0, 1e7),
    "--server-workers": _ge(1, 1024), "--sla-p99-ms": _gt(0, 3.6e6),
    "--concurrency": _ge(1, 1024),                 # each value of the comma-separated list
    # data
    "--samples": _ge(1, COUNT_MAX), "--calibration-samples": _ge(1, COUNT_MAX), "--seed": _ge(0, 2**32 - 1),
    # gate thresholds, in their own units
    "--max-accuracy-drop": _ge(0, 100), "--min-psnr": _ge(0, 1000), "--max-p99-ms": _gt(0, 3.6e6),
    "--min-size-reduction": Range(None, 100), "--min-cosine": _ge(-1, 1), "--min-delegated": _ge(0, 100),
    # results, reports
    "--alpha": Range(0, 1, lo_open=True, hi_open=True), "--min-ratio": _gt(1, 1000),
    "--accuracy-pp": _gt(0, 100), "--psnr-db": _gt(0, 1000), "--cosine": _gt(0, 2),   # changes that count
    "--limit": _ge(0, COUNT_MAX),                  # 0 = all runs
    "--top": _ge(1, 1_000_000), "--top-ops": _ge(0, 1_000_000),
    # training baselines
    "--steps": _ge(1, COUNT_MAX), "--warmup-steps": _ge(0, COUNT_MAX), "--workers": _ge(1, 1024),
    "--batch-sizes": _ge(1, 1_000_000),            # per replica, each value of the comma-separated list
    "--learning-rate": _gt(0, 10), "--timeout": _gt(0, WEEK_S),
    # llm-bench: tokens (each value of --prefill/--decode's comma-separated lists), warm-up generations
    "--prefill": _ge(1, 1 << 20), "--decode": _ge(1, 1 << 20), "--max-num-tokens": _ge(1, 1 << 20),
    "--warmup": _ge(0, 100), "--task-score": _ge(0, 10_000),   # task items per bundle (0: no task score)
    # NPU readiness
    "--compile-timeout": _gt(0, WEEK_S), "--jobs": _ge(1, 64),
    # streams (edgebench.model.state_rule): a detector's score, in the output's own unit (a probability or a logit)
    "--stream-threshold": Range(),
    "--fix-trials": _ge(0, 100),                   # diagnose: keep-float trials (each a re-quantization and a run)
}


def check(flag: str, value: Any) -> None:
    """Raise BadInput naming ``flag`` and its range when ``value`` is not finite or out of range."""
    rng = RANGES.get(flag)
    if rng is None or value is None or isinstance(value, bool):
        return
    values = value if isinstance(value, (list, tuple)) else (value,)
    for v in values:
        if isinstance(v, (int, float)) and not rng.ok(v):
            raise BadInput(f"{flag} {v:g}: must be {rng.text()}" if isinstance(v, float) else
                           f"{flag} {v}: must be {rng.text()}")
