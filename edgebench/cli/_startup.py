"""What the command line does once per process to start and end faster.

``import tensorflow`` imports Keras, and Keras imports scikit-learn -- when it is installed, as it
is wherever the digits reference model is used -- only to define its scikit-learn wrapper classes
(``keras.wrappers.SKLearnClassifier`` and friends), which edgebench never uses. That import is
~0.8 s of the ~3.3 s TensorFlow import on the 2-core test machine (measured: ``import tensorflow``
3.31-3.35 s vs 2.41-2.62 s with it skipped). :class:`SkipKerasSklearn` answers "not installed"
to that one importer only; every other ``import sklearn`` (the digits data, a user's code) works
as before, and library callers who never run the CLI are untouched.
"""

from __future__ import annotations

import atexit
import io
import os
import sys
import threading
from importlib.abc import MetaPathFinder

from edgebench.core.atomic import StdoutWriter
from edgebench.core.errors import StdoutNotWritable

# the Keras modules whose optional ``import sklearn`` only defines the scikit-learn wrappers
_WRAPPER_MODULES = ("keras.src.wrappers", "keras.wrappers")


class SkipKerasSklearn(MetaPathFinder):
    """A finder placed first on ``sys.meta_path``: ``import sklearn`` (and its submodules) from a
    Keras wrapper module raises ImportError, which Keras already handles (wrappers then say
    scikit-learn is missing if used); any other importer falls through to the normal finders."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "sklearn" and not fullname.startswith("sklearn."):
            return None
        if "sklearn" in sys.modules and sys.modules["sklearn"] is not None:
            return None                     # already imported: nothing to save
        if _importer().startswith(_WRAPPER_MODULES):
            raise ModuleNotFoundError(f"edgebench skips scikit-learn for Keras's wrappers ({fullname})",
                                      name=fullname)
        return None


def _importer() -> str:
    """The module whose code runs the current import (past the import machinery's frames)."""
    frame = sys._getframe(2)
    while frame is not None:
        name = frame.f_globals.get("__name__", "")
        if not (name.startswith("importlib") or name == __name__):
            return str(name)
        frame = frame.f_back
    return ""


def skip_keras_sklearn() -> None:
    """Install :class:`SkipKerasSklearn` once (idempotent)."""
    if not any(isinstance(f, SkipKerasSklearn) for f in sys.meta_path):
        sys.meta_path.insert(0, SkipKerasSklearn())


def strict_stdout() -> None:
    """Put ``atomic.StdoutWriter`` under ``sys.stdout``: every byte printed reaches the file or the
    command fails with one line (``StdoutNotWritable``, exit 2) -- never a table or document cut
    short with exit 0. Buffering stays what Python chose (line-buffered on a terminal, unbuffered
    under ``PYTHONUNBUFFERED``); only the real process stdout is replaced, never a caller's stream."""

    out = sys.stdout
    if out is None or out is not sys.__stdout__:
        return
    buffer = getattr(out, "buffer", None)
    try:
        fd = out.fileno()
    except (AttributeError, OSError, ValueError):
        return
    unbuffered = not isinstance(buffer, io.BufferedWriter)
    out.flush()
    raw = StdoutWriter(fd)
    # unbuffered: the raw writer itself (it never writes short); else a buffer like Python's own
    buffer = raw if unbuffered else io.BufferedWriter(raw)
    sys.stdout = io.TextIOWrapper(buffer, encoding=out.encoding, errors=out.errors, newline=None,
                                  line_buffering=out.line_buffering, write_through=unbuffered)
    _REPLACED.append(out)           # kept alive: collecting it would close file descriptor 1


_REPLACED: list = []


def flush_stdout(code: int) -> int:
    """Flush standard output at the end of a command; a write that fails now (the last buffered
    lines onto a full disk) is one line on stderr and exit 2 instead of a silent loss."""

    try:
        sys.stdout.flush()
    except StdoutNotWritable as err:
        try:
            sys.stderr.write(f"error: {err}\n")
            sys.stderr.flush()
        except (OSError, ValueError):
            pass
        return 2 if code == 0 else code
    except (OSError, ValueError):     # a closed stream: nothing left to deliver
        pass
    return code


def fast_exit(code: int) -> None:
    """End the process with ``code`` without the interpreter's teardown, which in a process that
    imported TensorFlow takes ~1 s after the command's last line (measured on convert-and-compare
    digits: 0.95-1.0 s from the last atexit handler to the process's end; 0.06 s with this).
    Everything a normal exit guarantees is done first: stdout/stderr flushed and every atexit
    handler run (temporary folders' finalizers, logging). A non-daemon thread still running is
    waited for by a normal exit, so then this falls back to ``sys.exit``."""
    main = threading.main_thread()
    if any(t is not main and t.is_alive() and not t.daemon for t in threading.enumerate()):
        sys.exit(code)
    try:
        atexit._run_exitfuncs()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):     # a closed pipe: nothing left to deliver
                pass
        os._exit(code)
