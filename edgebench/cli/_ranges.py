"""Every numeric option's valid range, written once, checked before any work.

``RANGES`` maps an option's flag to its :class:`Range`; ``checked(callback)`` wraps a command so
that every numeric value it receives is finite and in range before the command body runs (one
line naming the option and its range, exit 2). ``cli/__init__`` wraps every registered command,
so a new command is covered without a line of its own; ``tests/faults/test_numeric_options.py``
fails when a numeric option has no entry here.
"""

from __future__ import annotations

import functools
import inspect
import math
import typing
from dataclasses import dataclass
from typing import Any, Callable

import typer

from edgebench.errors import BadInput

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
        lo = None if self.lo is None else f"{'>' if self.lo_open else '>='} {self.lo:g}"
        hi = None if self.hi is None else f"{'<' if self.hi_open else '<='} {self.hi:g}"
        return " and ".join(x for x in (lo, hi) if x) or "finite"


def _gt(lo: float, hi: float | None = None) -> Range:
    return Range(lo, hi, lo_open=True)


def _ge(lo: float, hi: float | None = None) -> Range:
    return Range(lo, hi)


COUNT_MAX = 1e9      # runs, samples, steps: beyond this a run cannot finish anyway

RANGES: dict[str, Range] = {
    # run control
    "--runs": _ge(1, COUNT_MAX), "--min-runs": _ge(1, COUNT_MAX), "--warmup-runs": _ge(1, COUNT_MAX),
    "--min-time": _ge(0, WEEK_S), "--max-time": _gt(0, WEEK_S), "--warmup-time": _ge(0, 3600),
    "--repeats": _ge(1, 1000), "--threads": _ge(1, 1024),
    # schedules, cold starts, energy, load
    "--duration": _gt(0, WEEK_S), "--report-every": _gt(0, WEEK_S), "--period-ms": _gt(0, 3.6e6),
    "--cold-starts": _ge(0, 10_000), "--energy-idle": _gt(0, 3600), "--server-qps": _gt(0, 1e7),
    "--server-workers": _ge(1, 1024), "--sla-p99-ms": _gt(0, 3.6e6),
    # data
    "--samples": _ge(1, COUNT_MAX), "--calibration-samples": _ge(1, COUNT_MAX), "--seed": _ge(0, 2**32 - 1),
    # gate thresholds, in their own units
    "--max-accuracy-drop": _ge(0, 100), "--min-psnr": _ge(0, 1000), "--max-p99-ms": _gt(0, 3.6e6),
    "--min-size-reduction": Range(None, 100), "--min-cosine": _ge(-1, 1), "--min-delegated": _ge(0, 100),
    # results, reports
    "--alpha": Range(0, 1, lo_open=True, hi_open=True), "--min-ratio": _gt(1, 1000), "--limit": _ge(1, COUNT_MAX),
    "--top": _ge(1, 1_000_000), "--top-ops": _ge(1, 1_000_000),
    # training baselines
    "--steps": _ge(1, COUNT_MAX), "--warmup-steps": _ge(0, COUNT_MAX), "--workers": _ge(1, 1024),
    "--learning-rate": _gt(0, 10), "--timeout": _gt(0, WEEK_S),
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


def option_flags(fn: Callable) -> dict[str, str]:
    """Python parameter name -> its first long flag, read from the typer declarations."""
    inner = inspect.unwrap(fn)         # a decorated command: its annotations live in its own module
    scope = {**inner.__globals__, **inspect.getclosurevars(inner).nonlocals}
    out: dict[str, str] = {}
    for name, p in inspect.signature(fn).parameters.items():
        hint = p.annotation
        if isinstance(hint, str):      # from __future__ import annotations: resolve each one alone
            try:
                hint = eval(hint, scope)  # noqa: S307 -- the command's own annotation, in its own scope
            except Exception:  # noqa: BLE001 -- a name only the type checker sees
                hint = None
        infos = [m for m in typing.get_args(hint)[1:] if isinstance(m, typer.models.ParameterInfo)] \
            if typing.get_origin(hint) is typing.Annotated else []
        if isinstance(p.default, typer.models.ParameterInfo):
            infos.append(p.default)
        for info in infos:
            decls = list(getattr(info, "param_decls", None) or ())
            if isinstance(info.default, str):   # Annotated[..., typer.Option("--flag")]: the flag sits in default
                decls.insert(0, info.default)
            longs = [d for d in decls if isinstance(d, str) and d.startswith("--")]
            if longs:
                out[name] = longs[0]
                break
    return out


def checked(fn: Callable) -> Callable:
    """``fn`` with its numeric options checked before its body runs."""
    flags = option_flags(fn)

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        for name, value in kwargs.items():
            if name in flags:
                check(flags[name], value)
        return fn(*args, **kwargs)

    return wrapper


def check_app(app: typer.Typer) -> None:
    """Wrap every command of ``app`` and of its sub-apps (results, matrix ...) with ``checked``."""
    for info in app.registered_commands:
        if info.callback is not None and not getattr(info.callback, "_ranges_checked", False):
            info.callback = checked(info.callback)
            info.callback._ranges_checked = True   # type: ignore[attr-defined]
    for group in app.registered_groups:
        if group.typer_instance is not None:
            check_app(group.typer_instance)
