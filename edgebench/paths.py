"""Where edgebench keeps its cache (model builds, peak GFLOP/s) and its data (results DB)."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """$EDGEBENCH_CACHE_DIR, else $XDG_CACHE_HOME/edgebench, else ~/.cache/edgebench."""
    base = os.environ.get("EDGEBENCH_CACHE_DIR")
    if base:
        p = Path(base)
    else:
        p = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "edgebench"
    p.mkdir(parents=True, exist_ok=True)
    return p


def data_dir() -> Path:
    """$EDGEBENCH_DATA_DIR, else $XDG_DATA_HOME/edgebench, else ~/.local/share/edgebench."""
    base = os.environ.get("EDGEBENCH_DATA_DIR")
    if base:
        p = Path(base)
    else:
        p = Path(os.environ.get("XDG_DATA_HOME", Path.home() / ".local" / "share")) / "edgebench"
    p.mkdir(parents=True, exist_ok=True)
    return p
