"""Progress from deep inside a long run (a device's sample loop, a training sweep) to whatever
shows it -- without the library knowing about terminals.

Whoever draws progress (the CLI's bar, ``cli/_common.progress_reporter``) registers a *sink* for
the current thread with ``reporting_to(sink)``; code inside a run calls ``update(done, total,
note)``. Device lanes are threads, so each lane reports to its own sink. With no sink registered
``update`` does nothing, and a sink that fails never breaks the run it reports on.

``measuring()`` marks a stretch in which this machine is being timed (the TF reference's loops in
this process, a host worker's run): whoever draws progress holds its redraws until it ends, so a
timed loop never shares the interpreter lock or a core with a progress bar, and a run in a
terminal is measured as a run in CI is.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Callable, Iterator

Sink = Callable[[int, "int | None", str], None]
_local = threading.local()
_MEASURING = threading.Event()


@contextmanager
def reporting_to(sink: Sink | None) -> Iterator[None]:
    """Send this thread's ``update`` calls to ``sink`` inside the block."""
    prev = getattr(_local, "sink", None)
    _local.sink = sink
    try:
        yield
    finally:
        _local.sink = prev


def update(done: int, total: int | None = None, note: str = "") -> None:
    """``done`` of ``total`` units (None: unknown) of the current piece of work, e.g. samples."""
    sink = getattr(_local, "sink", None)
    if sink is None:
        return
    try:
        sink(int(done), None if total is None else int(total), note)
    except Exception:  # noqa: BLE001 -- progress is never worth a failed measurement
        pass


@contextmanager
def measuring() -> Iterator[None]:
    """This machine is being timed inside the block (see the module docstring)."""
    was = _MEASURING.is_set()
    _MEASURING.set()
    try:
        yield
    finally:
        if not was:
            _MEASURING.clear()


def is_measuring() -> bool:
    return _MEASURING.is_set()
