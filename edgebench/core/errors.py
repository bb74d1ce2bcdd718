"""Errors raised by library code. Only ``edgebench.cli`` maps them to exit codes.

Exit codes (docs/exit-codes.md):
    0 ok / gate passed
    1 gate failed (a quality or latency threshold was missed)
    2 bad input or usage -- the message names the input and the fix
    3 infrastructure failure (device lost, binary missing, runtime crash)
"""

from __future__ import annotations

import errno


def first_line(exc: BaseException, limit: int = 240) -> str:
    """The first non-blank line of an exception's text (its type name when it has none), for
    one-line messages that quote a library's own reason."""
    lines = [ln for ln in str(exc).strip().splitlines() if ln.strip()]
    return (lines[0] if lines else type(exc).__name__)[:limit]


class EdgebenchError(Exception):
    """Base class. ``str(err)`` is one line that names the input and the fix."""
    exit_code = 2


class BadInput(EdgebenchError):
    """The user gave something we cannot use (path, data, option value)."""
    exit_code = 2


class OutputNotWritable(BadInput, OSError):
    """A file or folder written for the user could not be written: a read-only or missing
    folder, a full disk, a path under a file. One line naming the path, why, and what the user
    can do (exit 2; ``fix`` replaces the generic advice, e.g. the variable that moves a folder).
    Also an ``OSError``, so code that guards a write with ``except OSError`` keeps working."""

    def __init__(self, path: object, exc: OSError, what: str = "write", fix: str | None = None) -> None:
        reason = exc.strerror or type(exc).__name__
        if exc.errno == errno.EEXIST:       # mkdir -p through a regular file
            reason = "Not a directory"
        # the generic advice names no option: the command that has one (--out) says it in ``fix``
        if exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
            fix = fix or "free space on that disk or write elsewhere"
        elif exc.errno in (errno.ENOTDIR, errno.EEXIST):
            fix = fix or "a part of that path is a file, not a folder: choose another path"
        else:
            fix = fix or "choose a writable folder or fix its permissions"
        self.message = f"cannot {what} {path}: {reason}; {fix}"
        self.path = str(path)
        self.reason = reason
        BadInput.__init__(self, self.message)

    def __str__(self) -> str:
        return self.message


class StdoutNotWritable(OutputNotWritable):
    """Standard output (redirected to a file on a full disk, ``/dev/full``, a device that fails)
    could not take what a command wrote. Raised by the one stdout writer (``atomic.StdoutWriter``)
    on the first failing write -- a short write is retried, so output is never cut silently.
    ``where`` is appended by a caller that knows where the measured result is kept."""

    def __init__(self, exc: OSError, where: str | None = None) -> None:
        OutputNotWritable.__init__(self, "standard output", exc)
        fix = ("free space on that disk or redirect the output elsewhere"
               if exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
               else "redirect the output to a writable file")
        self.cause = exc
        self.message = f"could not write to standard output: {self.reason}; {fix}" + (f" ({where})" if where else "")
        self.args = (self.message,)

    def kept(self, where: str) -> "StdoutNotWritable":
        """The same error, saying where the measured result is (a run id, an unsaved/ file)."""
        return StdoutNotWritable(self.cause, where)


class GateFailed(EdgebenchError):
    """A threshold was missed; the message names precision, metric, value, threshold."""
    exit_code = 1


class Undecided(EdgebenchError):
    """A gate could not judge (load on the slower side, too few processes, an interval across the
    threshold): neither a pass nor a fail. The message says what rerun would decide it."""

    exit_code = 4


class InfraError(EdgebenchError):
    """The machinery failed: worker crashed or hung, device lost, binary missing."""
    exit_code = 3


class ConversionFailed(EdgebenchError):
    """A conversion produced no model or a wrong one (parity check)."""
    exit_code = 2


class PrecisionFailed(ConversionFailed):
    """One precision could not be produced (its quantizer or converter refused this model): the
    conversion records it as that precision's failed row, with this reason, and converts the others.
    The whole command still exits 2 (``check_manifest``), after every other variant and the manifest
    are written and measured."""


# Exit codes of a run stopped by a signal: 128 + the signal number, as a shell reports it.
SIGNAL_EXIT_CODES = {"Ctrl-C": 130, "SIGINT": 130, "SIGTERM": 143, "SIGHUP": 129}


class Interrupted(EdgebenchError):
    """Ctrl-C, SIGTERM or SIGHUP stopped a run; what was measured before it was kept (the
    message says where). Exit 130 / 143 / 129."""

    exit_code = 130

    def __init__(self, message: str, *, signal_name: str = "Ctrl-C") -> None:
        super().__init__(message)
        self.exit_code = SIGNAL_EXIT_CODES.get(signal_name, 130)


class SyntheticDataWarning(UserWarning):
    """``--data synthetic``: the one warning that the numbers are measured on noise. The CLI shows
    it once per run (``cli._show_warning``), however many stages load the data."""
