"""Where edgebench keeps its cache (model builds, peak GFLOP/s) and its data (results DB)."""

from __future__ import annotations

import os
from pathlib import Path

from edgebench.errors import OutputNotWritable


def _ensure(p: Path, variable: str, also: str = "") -> Path:
    """``mkdir -p``; a folder that cannot be made (read-only home, a file in the way) is one line
    naming it and the variable that moves it (exit 2), not an internal error."""
    try:
        p.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputNotWritable(p, exc, "create the folder",
                                fix=f"set {variable} to a writable folder{also}") from None
    return p


def cache_dir() -> Path:
    """$EDGEBENCH_CACHE_DIR, else $XDG_CACHE_HOME/edgebench, else ~/.cache/edgebench."""
    base = os.environ.get("EDGEBENCH_CACHE_DIR")
    if base:
        p = Path(base)
    else:
        p = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "edgebench"
    return _ensure(p, "EDGEBENCH_CACHE_DIR")


def data_dir() -> Path:
    """$EDGEBENCH_DATA_DIR, else $XDG_DATA_HOME/edgebench, else ~/.local/share/edgebench."""
    base = os.environ.get("EDGEBENCH_DATA_DIR")
    if base:
        p = Path(base)
    else:
        p = Path(os.environ.get("XDG_DATA_HOME", Path.home() / ".local" / "share")) / "edgebench"
    return _ensure(p, "EDGEBENCH_DATA_DIR", " (or pass --db PATH)")
