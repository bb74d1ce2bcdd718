"""Reading numbers back out of result JSON (shared by the renderers)."""

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
