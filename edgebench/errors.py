"""Errors raised by library code. Only ``edgebench.cli`` maps them to exit codes.

Exit codes (ARCHITECTURE.md contract):
    0 ok / gate passed
    1 gate failed (a quality or latency threshold was missed)
    2 bad input or usage -- the message names the input and the fix
    3 infrastructure failure (device lost, binary missing, runtime crash)
"""

from __future__ import annotations


class EdgebenchError(Exception):
    """Base class. ``str(err)`` is one line that names the input and the fix."""

    exit_code = 2


class BadInput(EdgebenchError):
    """The user gave something we cannot use (path, data, option value)."""

    exit_code = 2


class GateFailed(EdgebenchError):
    """A threshold was missed; the message names precision, metric, value, threshold."""

    exit_code = 1


class InfraError(EdgebenchError):
    """The machinery failed: worker crashed or hung, device lost, binary missing."""

    exit_code = 3


class ConversionFailed(EdgebenchError):
    """A conversion produced no model or a wrong one (parity check)."""

    exit_code = 2


class Interrupted(EdgebenchError):
    """The user pressed Ctrl-C; what was measured before it was kept (the message says where)."""

    exit_code = 130
