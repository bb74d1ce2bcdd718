"""What a stored row says to the change verdicts (``stats``): its samples, its worker processes'
values and samples, whether the load signal fired on it, its stall rate and its top-1 counts.
Readers of plain result rows (dicts as stored), no verdicts here."""

from __future__ import annotations

from typing import Any

import numpy as np

from edgebench.core.latency import MIN_SAMPLES, STALL_FACTOR, load_signal
from edgebench.rows.metrics import REGISTRY

PERCENTILE_OF = {m.key: m.percentile for m in REGISTRY if m.percentile is not None}
REPEAT_KEY = {m.key: m.repeat_key for m in REGISTRY if m.repeat_key}


def samples_ms(row: dict[str, Any]) -> np.ndarray | None:
    s = row.get("samples_ns")
    if s is None or len(s) == 0:
        return None
    return np.asarray(s, dtype=np.float64) / 1e6


def repeat_values(row: dict[str, Any], col: str) -> list[float] | None:
    """The metric per worker process (``row["repeats"]``), or None; a percentile counts only
    when every process had enough samples for it to be valid."""
    reps = row.get("repeats")
    key = REPEAT_KEY.get(col)
    if not isinstance(reps, list) or len(reps) < 2 or key is None:
        return None
    if col in PERCENTILE_OF:
        need = MIN_SAMPLES[f"p{PERCENTILE_OF[col]:g}"]
        if any((r.get("samples") or 0) < need for r in reps):
            return None
    vals = [r.get(key) for r in reps]
    return [float(v) for v in vals] if all(isinstance(v, (int, float)) for v in vals) else None


def process_groups(row: dict[str, Any], ms: np.ndarray | None) -> list[np.ndarray] | None:
    """Each worker process's samples (ms), split from the row's pooled ``samples_ns`` (process order)
    by the per-process counts of ``repeats``; None for one process or counts that do not add up."""
    reps = row.get("repeats")
    if ms is None or not isinstance(reps, list) or len(reps) < 2:
        return None
    counts = [r.get("samples") for r in reps if isinstance(r, dict)]
    if len(counts) != len(reps) or not all(isinstance(c, int) and c > 0 for c in counts) or sum(counts) != ms.size:
        return None
    return np.split(ms, np.cumsum(counts)[:-1])


def process_span(row: dict[str, Any]) -> float | None:
    """Seconds between the first and the last start of a row's worker processes (``repeats``'
    ``started_s``); None for one process or a row that did not record when they started."""
    reps = [r for r in (row.get("repeats") or ()) if isinstance(r, dict)]
    starts = [r.get("started_s") for r in reps]
    if len(reps) < 2 or not all(isinstance(s, (int, float)) for s in starts):
        return None
    return float(max(starts) - min(starts))


def loaded_side(row: dict[str, Any], ms: np.ndarray | None) -> bool:
    """Whether the load signal fired for a row or any of its worker processes, as measured (the row's
    ``latency_ms.loaded`` and each process's ``loaded`` in ``repeats``, which weighed the worker's
    preemption count); for a document written before the signal, from its samples alone."""
    lat = row.get("latency_ms") or {}
    reps = [r for r in (row.get("repeats") or ()) if isinstance(r, dict)]
    if "loaded" in lat:
        return bool(lat.get("loaded")) or any(bool(r.get("loaded")) for r in reps)
    if ms is None:
        return False
    groups = process_groups(row, ms) or [ms]
    return any((load_signal(g) or {}).get("fired", False) for g in groups)


def stall_rate(ms: np.ndarray | None) -> float:
    """The share of samples that are stalls (> STALL_FACTOR x the median): a percentile at or above
    1 - this share is made of them."""
    if ms is None or ms.size == 0:
        return 0.0
    return float(np.mean(ms > STALL_FACTOR * float(np.median(ms))))


def top1_counts(row: dict[str, Any]) -> tuple[int, int] | None:
    """(correct, samples) of a row's task top-1 (``accuracy``: top1 x samples is a whole number)."""
    acc = row.get("accuracy") or {}
    top1, n = acc.get("top1"), acc.get("samples")
    if not isinstance(top1, (int, float)) or not isinstance(n, int) or n <= 0:
        return None
    correct = acc.get("top1_correct")
    return (int(correct) if isinstance(correct, int) else int(round(top1 * n))), n
