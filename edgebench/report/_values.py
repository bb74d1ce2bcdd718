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
    """Bytes in decimal units (kB/MB/GB, 2 decimals); '-' when missing."""
    v = num(value)
    if v is None:
        return "-"
    for unit, div in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(v) >= div:
            return f"{v / div:.2f} {unit}"
    return f"{v:.0f} B"
