"""The one atomic file writer: every file edgebench writes for a user or a collector.

``write_text(path, text)`` / ``write_bytes(path, data)`` write to a *unique* hidden temp file in
the target's own folder (``mkstemp``: created with O_EXCL, so a pre-planted ``PATH.tmp`` symlink is
never followed and two concurrent writers never share a temp file), fsync it and ``os.replace``
it over the target: readers (node_exporter, a browser, a CI step) see the old file or the new
one, never half of one. ``temp_path(path)`` gives writers that need a file name (zip, npz) the
same guarantee; ``temp_dir(path)`` does it for a folder built in place (a SavedModel export).

Standard output is written the same careful way: ``write_stdout(text)`` (``--json -``, ``results
export``, ``report --markdown -``) and ``StdoutWriter`` (the stream the command line puts under
``sys.stdout``) write every byte or raise ``StdoutNotWritable``. Python's own unbuffered stdout
(``PYTHONUNBUFFERED=1``, common in CI and containers) ignores a short write: on a disk that fills,
16 KiB of a 37 KiB document reached the file and the command exited 0.
"""

from __future__ import annotations

import errno
import io
import os
import shutil
import stat
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from edgebench.core.errors import EdgebenchError, OutputNotWritable, StdoutNotWritable


def ensure_dir(path: str | os.PathLike, fix: str | None = None) -> Path:
    """``mkdir -p`` for an output folder; a failure is one clear line (OutputNotWritable, exit 2;
    ``fix`` replaces the generic advice, e.g. naming the option that chose the folder)."""
    p = Path(path)
    try:
        p.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputNotWritable(p, exc, "create the folder", fix=fix) from None
    return p


def _special(p: Path) -> bool:
    """An existing target that is not a regular file or folder: a device (/dev/null, /dev/full,
    /dev/stdout), a FIFO, a socket. It is written *into*, never replaced -- replacing /dev/null
    with a regular file (as root) would break the machine."""
    try:
        st = os.stat(p)
    except OSError:
        return False
    return not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode))


@contextmanager
def _into_special(p: Path) -> Iterator[Path]:
    """Like temp_path for a device/FIFO target: the temp file lives in the temp folder and is copied
    into the target on success."""
    fd, tmp = tempfile.mkstemp(prefix="edgebench-", suffix=".tmp")
    os.close(fd)
    try:
        yield Path(tmp)
        with open(tmp, "rb") as src, open(p, "wb") as dst:
            shutil.copyfileobj(src, dst)
            dst.flush()
    except OSError as exc:
        if isinstance(exc, EdgebenchError):
            raise
        raise OutputNotWritable(p, exc) from None
    finally:
        try:
            os.unlink(tmp)
        except OSError:
            pass


@contextmanager
def temp_path(path: str | os.PathLike, mode: int = 0o644) -> Iterator[Path]:
    """Yield a fresh temp file next to ``path``; on success it replaces ``path`` (fsynced). A device
    or FIFO target (``--json /dev/stdout``) is written into instead (``_special``)."""
    p = Path(path)
    if _special(p):
        with _into_special(p) as tmp:
            yield tmp
        return
    ensure_dir(p.parent)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=p.parent)
    except OSError as exc:
        raise OutputNotWritable(p, exc) from None
    os.close(fd)
    try:
        yield Path(tmp)
        with open(tmp, "rb+") as fh:
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, p)
    except BaseException as exc:
        try:
            os.unlink(tmp)     # never a half-written file under the user's name
        except OSError:
            pass
        if isinstance(exc, OSError) and not isinstance(exc, EdgebenchError):
            raise OutputNotWritable(p, exc) from None
        raise


def write_bytes(path: str | os.PathLike, data: bytes) -> Path:
    with temp_path(path) as tmp:
        tmp.write_bytes(data)
    return Path(path)


def write_text(path: str | os.PathLike, text: str) -> Path:
    with temp_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return Path(path)


@contextmanager
def temp_dir(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a fresh temp folder next to ``path``; on success it replaces ``path``."""
    p = Path(path)
    ensure_dir(p.parent)
    try:
        tmp = Path(tempfile.mkdtemp(prefix=f".{p.name}.", suffix=".tmp", dir=p.parent))
    except OSError as exc:
        raise OutputNotWritable(p, exc) from None
    try:
        yield tmp         # the body's own errors (reading a model ...) pass through as they are
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    try:
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p, ignore_errors=True)
        os.replace(tmp, p)
    except OSError as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        raise OutputNotWritable(p, exc) from None


def write_fully(fd: int, data: bytes) -> None:
    """``os.write`` until every byte of ``data`` is written: a short write (a disk that fills mid-way,
    a pipe) is retried from where it stopped, so the next attempt reports the error (ENOSPC)."""
    view = memoryview(data).cast("B")
    while len(view):
        try:
            n = os.write(fd, view)
        except InterruptedError:
            continue
        view = view[n:]


# descriptors whose output already failed (reported once) or whose reader is gone: the rest is dropped
_DROPPED: set[int] = set()


class StdoutWriter(io.RawIOBase):
    """A raw stream over file descriptor ``fd`` (standard output) that writes every byte or raises
    ``StdoutNotWritable`` naming why (exit 2) -- once: after that, like after a reader closed the
    pipe (``| head``, no error), the rest is discarded, so the command still finishes (its result
    is stored) and the error is reported a single time."""

    def __init__(self, fd: int) -> None:
        super().__init__()
        self._fd = fd

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self._fd

    def isatty(self) -> bool:
        return os.isatty(self._fd)

    def write(self, b) -> int:
        n = len(memoryview(b).cast("B"))
        if self._fd in _DROPPED:
            return n
        try:
            write_fully(self._fd, bytes(b))
        except OSError as exc:
            _DROPPED.add(self._fd)
            if exc.errno == errno.EPIPE:
                return n
            raise StdoutNotWritable(exc) from None
        return n


def write_stdout(text: str) -> None:
    """Write ``text`` to standard output, all of it or ``StdoutNotWritable``. Whatever ``sys.stdout``
    holds is flushed first, so the order of output is kept; a stdout without a file descriptor (a
    test's capture, a notebook) is written as a stream."""

    stream = sys.stdout
    stream.flush()
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError):
        stream.write(text)
        stream.flush()
        return
    encoding = getattr(stream, "encoding", None) or "utf-8"
    StdoutWriter(fd).write(text.encode(encoding, errors=getattr(stream, "errors", None) or "strict"))
