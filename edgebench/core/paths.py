"""Where edgebench keeps its cache (model builds, peak GFLOP/s) and its data (results DB), and what
a path the user gave as an input file turns out to be when it is not one."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from edgebench.core.errors import BadInput, OutputNotWritable


def require_file(path: str | os.PathLike, what: str, fix: str, missing: str = "no such file") -> Path:
    """``path`` if it is a regular file, else BadInput saying what it is instead -- missing, a
    folder (and the files of ``what`` it holds), a device such as /dev/null, a FIFO -- so the
    message never says "not found" about a folder that is there. ``what``: 'a .tflite file';
    ``fix``: the sentence after the semicolon (the input and how to give it); ``missing``: how a
    missing path is said ('model not found' puts it before the path)."""
    p = Path(path)
    try:
        st = os.stat(p)
    except FileNotFoundError:
        raise BadInput(f"{missing}: {p}; {fix}" if missing != "no such file" else f"{p}: no such file; {fix}") from None
    except NotADirectoryError:
        raise BadInput(f"{p}: a part of this path is a file, not a folder; {fix}") from None
    except PermissionError:
        raise BadInput(f"{p}: permission denied; {fix} (or make it readable)") from None
    if stat.S_ISREG(st.st_mode):
        return p
    if stat.S_ISDIR(st.st_mode):
        suffix = what.rsplit(".", 1)[-1].split()[0] if "." in what else None
        inside = sorted(x.name for x in p.glob(f"*.{suffix}"))[:3] if suffix else []
        hint = f" (it holds {', '.join(inside)}{' ...' if len(inside) == 3 else ''})" if inside else ""
        raise BadInput(f"{p} is a folder, not {what}{hint}; {fix}")
    kind = ("a character device" if stat.S_ISCHR(st.st_mode) else "a block device" if stat.S_ISBLK(st.st_mode)
            else "a FIFO" if stat.S_ISFIFO(st.st_mode) else "a socket" if stat.S_ISSOCK(st.st_mode)
            else "not a regular file")
    raise BadInput(f"{p} is {kind}, not {what}; {fix}")


def _ensure(p: Path, variable: str, also: str = "") -> Path:
    """``mkdir -p``; a folder that cannot be made (read-only home, a file in the way) is one line
    naming it and the variable that moves it (exit 2), not an internal error."""
    try:
        p.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputNotWritable(p, exc, "create the folder",
                                fix=f"set {variable} to a writable folder{also}") from None
    return p


def cache_dir_path() -> Path:
    """Where the cache is, without creating it (the sandbox binds it before the command runs)."""
    base = os.environ.get("EDGEBENCH_CACHE_DIR")
    if base:
        return Path(base)
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "edgebench"


def data_dir_path() -> Path:
    """Where the data (the default results store) is, without creating it."""
    base = os.environ.get("EDGEBENCH_DATA_DIR")
    if base:
        return Path(base)
    return Path(os.environ.get("XDG_DATA_HOME", Path.home() / ".local" / "share")) / "edgebench"


def cache_dir() -> Path:
    """$EDGEBENCH_CACHE_DIR, else $XDG_CACHE_HOME/edgebench, else ~/.cache/edgebench."""
    return _ensure(cache_dir_path(), "EDGEBENCH_CACHE_DIR")


def data_dir() -> Path:
    """$EDGEBENCH_DATA_DIR, else $XDG_DATA_HOME/edgebench, else ~/.local/share/edgebench."""
    return _ensure(data_dir_path(), "EDGEBENCH_DATA_DIR", " (or pass --db PATH)")
