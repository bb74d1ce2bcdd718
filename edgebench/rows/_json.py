"""JSON-boundary helpers of the typed rows: tolerant number readers and frozen mappings."""

from __future__ import annotations

from types import MappingProxyType
from typing import Any, Mapping

import numpy as np

STATUSES = ("ok", "failed", "skipped")


def _freeze(d: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return MappingProxyType(dict(d or {}))


def _f(v: Any) -> float | None:
    """A finite-or-infinite float from JSON (numbers, 'inf' strings); None otherwise."""
    if v is None or isinstance(v, bool):
        return None
    if isinstance(v, (int, float, np.integer, np.floating)):
        return float(v)
    if isinstance(v, str):
        s = v.strip().lower()
        if s in ("inf", "+inf"):
            return float("inf")
        if s == "-inf":
            return float("-inf")
        try:
            return float(s)
        except ValueError:
            return None
    return None


def _i(v: Any) -> int | None:
    f = _f(v)
    return None if f is None or f != f or f in (float("inf"), float("-inf")) else int(f)
