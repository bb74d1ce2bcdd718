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
