"""Numbers in result JSON read back and written out: one reader (``num``) and one format per unit
(``fmt_metric``, the units of ``metrics.UNITS``; sizes in binary units) for every renderer."""

from __future__ import annotations

import math
from typing import Any


def num(value: Any) -> float | None:
    """A float from a JSON value: numbers, numpy scalars and the strings 'inf'/'-inf'; else None."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        v = value.strip().lower()
        if v in ("inf", "+inf"):
            return math.inf
        if v == "-inf":
            return -math.inf
        try:
            return float(v)
        except ValueError:
            return None
    if hasattr(value, "item"):
        try:
            return float(value.item())
        except (TypeError, ValueError):
            return None
    return None


def fmt_bytes(value: Any) -> str:
    """Bytes in binary units, the one size format of every renderer (terminal, Markdown, HTML):
    ``512 B``, ``158.8 KiB``, ``3.52 MiB``, ``1.92 GiB``; '-' when missing."""
    v = num(value)
    if v is None:
        return "-"
    for unit, div, digits in (("GiB", 2**30, 2), ("MiB", 2**20, 2), ("KiB", 2**10, 1)):
        if abs(v) >= div:
            return f"{v / div:.{digits}f} {unit}"
    return f"{v:.0f} B"


def fmt_value(v: Any, spec: str = ".3g", none: str = "-") -> str:
    """A number with a format spec, booleans as yes/no, '-' for missing; anything else as text."""
    if v is None or v == "":
        return none
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, (int, float)):
        return format(v, spec)
    return str(v)


def fmt_metric(unit: str, value: Any) -> str:
    """A registry metric's value in its unit (``metrics.UNITS``), the one format per unit of the
    tables drawn from the registry: ``ms`` 3 significant digits (trailing zeros kept: 4.10) or whole from 100 up, ``1/s`` whole
    numbers from 100 up (``tok/s`` too), ``bytes`` binary units, ``%`` one decimal, ``fraction`` as a percentage,
    ``pp`` (points lost, positive = worse) signed as the change reads (-1.50 = 1.5 points worse),
    ``dB`` one decimal (inf for a bit-exact output), ``cosine`` 4 decimals; '-' when missing."""
    v = num(value)
    if v is None:
        return "-"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    if unit == "bytes":
        return fmt_bytes(v)
    if unit == "fraction":
        return f"{100 * v:.2f}%"
    if unit == "pp":
        return f"{0.0 - v + 0.0:+.2f}"
    if unit == "%":
        return f"{v:.1f}%"
    if unit == "dB":
        return f"{v:.1f}"
    if unit == "cosine":
        return f"{v:.4f}"
    if unit in ("ms", "1/s", "tok/s"):
        a = abs(float(f"{v:.3g}"))       # as rounded: 99.96 shows as 100, not "100."
        if a >= 100:
            return f"{v:.0f}"
        # sub-microsecond latencies stay decimals (0.000992, not 9.92e-04) down to 0.1 us
        return f"{v:#.3g}" if a >= 1e-4 else ("0" if v == 0 else f"{v:.2e}")
    return f"{v:.3g}"
