"""Every numeric option of every command checked before the command body runs.

``checked(callback)`` wraps a command so that every numeric value it receives is finite and in
the range ``edgebench.core.ranges.RANGES`` gives its flag (one line naming the option and its range,
exit 2). ``cli/__init__`` wraps every registered command, so a new command is covered without a
line of its own; ``tests/faults/test_numeric_options.py`` fails when a numeric option has no
entry in ``RANGES``.
"""

from __future__ import annotations

import functools
import inspect
import typing
from typing import Any, Callable

import typer

from edgebench.core.errors import BadInput
from edgebench.core.ranges import RANGES, Range, check
from edgebench.model.inputs import PREPROCESS

__all__ = ["RANGES", "Range", "check", "check_app", "checked", "option_flags"]


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


# options whose value must be one of a few names, whatever the data turns out to be (--preprocess
# used to be checked only when the data was an image folder: "--preprocess bogus" ran silently)
def _choices() -> dict[str, tuple[str, ...]]:
    return {"--preprocess": tuple(PREPROCESS)}


# what an empty value should have been, for the message ('-' is standard output for these)
STDOUT_OPTIONS = ("--json", "--markdown", "--output")
EMPTY_HINTS = {"--db": "a database file or URL (or leave the option out for the default store)",
               "--out": "a folder", "--data": "an .npz/.npy file, an image folder or 'synthetic'"}


def check_text(flag: str, value: Any) -> None:
    """An option typed as an empty string (``--json ''``: a script's unset variable) names nothing:
    refused, never read as "not given"; a choice option outside its names is refused too."""

    if not isinstance(value, str):
        return
    if value == "":
        what = ("a file path, or - for standard output" if flag in STDOUT_OPTIONS
                else EMPTY_HINTS.get(flag, "a value (see --help)"))
        raise BadInput(f"{flag} '': empty; give {what}")
    allowed = _choices().get(flag)
    if allowed and value not in allowed:
        raise BadInput(f"{flag} {value}: unknown; use one of {', '.join(allowed)}")


def checked(fn: Callable) -> Callable:
    """``fn`` with its numeric options checked before its body runs (and its text options:
    ``check_text``)."""
    flags = option_flags(fn)

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        for name, value in kwargs.items():
            if name in flags:
                check(flags[name], value)
                check_text(flags[name], value)
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
