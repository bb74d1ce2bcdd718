"""Option parsing helpers shared by command modules (no business logic here)."""

from __future__ import annotations

import os
import sys
import threading
from contextlib import contextmanager
from typing import Any, Callable

from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from edgebench.cli import _quiet
from edgebench.core import progress as events
from edgebench.core.errors import BadInput, EdgebenchError, Interrupted, StdoutNotWritable
from edgebench.core.ranges import RANGES, check
from edgebench.report.publish import keep_unsaved, publish
from edgebench.report.terminal._cells import WholeLine
from edgebench.report.terminal.console import DataConsole


def split_csv(value: str | None, *, option: str, allowed: tuple[str, ...] | None = None) -> list[str]:
    """'fp32,int8' -> ['fp32', 'int8'], validating against ``allowed``."""
    if value is None:
        return []
    items = [v.strip() for v in value.split(",") if v.strip()]
    if not items:
        raise BadInput(f"{option} is empty; give a comma-separated list" +
                       (f" of {', '.join(allowed)}" if allowed else ""))
    if allowed:
        bad = [v for v in items if v not in allowed]
        if bad:
            raise BadInput(f"{option}: unknown value {bad[0]!r}; use one or more of {', '.join(allowed)}")
    twice = [v for i, v in enumerate(items) if v in items[:i]]
    if twice:       # fp32,fp32 or host,host would run (and store) the same thing twice
        raise BadInput(f"{option} {value}: {twice[0]!r} is given twice; list each once")
    return items


def split_ints(value: str | None, *, option: str) -> list[int]:
    """'1,2,4' -> [1, 2, 4]; each value in the option's range (``edgebench.core.ranges.RANGES``)."""
    items = split_csv(value, option=option)
    try:
        out = [int(v) for v in items]
    except ValueError:
        raise BadInput(f"{option}: {value!r} is not a comma-separated list of integers") from None
    if option not in RANGES and any(v <= 0 for v in out):
        raise BadInput(f"{option}: values must be positive integers, got {value!r}")
    for v in out:
        check(option, v)
    return out


def console(stderr: bool = False):
    """A rich console; when writing to a pipe/file (no terminal, no $COLUMNS) tables get 160
    columns instead of rich's 80, so logs and CI output keep one line per row."""


    con = DataConsole(stderr=stderr, highlight=False)     # data's control characters shown, never sent
    if not con.is_terminal and not os.environ.get("COLUMNS"):
        con = DataConsole(stderr=stderr, highlight=False, width=160)
    return con


def terminal_stderr():
    """A text stream on the user's real stderr when it is a terminal, else None.

    The CLI routes fd 2 through a log filter (``_quiet.StderrFilter``), which makes stderr a pipe;
    the progress bar writes to the terminal the filter saved instead, so it shows in a real
    terminal and stays quiet when stderr is piped or redirected."""


    fd = _quiet.original_stderr_fd()
    if fd is None:
        return sys.stderr if sys.stderr.isatty() else None
    if not os.isatty(fd):
        return None
    return os.fdopen(os.dup(fd), "w", buffering=1, encoding="utf-8", errors="replace", closefd=True)


class progress_reporter:  # noqa: N801 -- used as a context manager
    """A rich progress bar on the terminal (never when stderr is piped) over a command's stages.

    Yields ``say(msg)``: each call completes the previous stage and starts ``msg``;
    ``say.set_total(n)`` sizes the bar once the number of stages is known (then an ETA shows).
    ``say.lane(name, label)`` is a context manager for one device lane's current item: the lane
    gets a line of its own, and what the run reports through ``edgebench.core.progress`` inside it
    (e.g. samples done of a device's sample loop) moves that line's bar and ETA.
    Safe to call from device-lane threads.
    """

    def __init__(self, title: str) -> None:
        self.title = title
        self._progress = None
        self._task = None
        self._stream = None

    def __enter__(self):



        self._stream = terminal_stderr()
        if self._stream is not None:

            con = DataConsole(file=self._stream, force_terminal=True)
            # redrawn by our own thread, which holds off while this machine is timed (progress.measuring)
            self._progress = Progress(SpinnerColumn(), TextColumn("[bold]{task.description}"), BarColumn(),
                                      MofNCompleteColumn(), TimeElapsedColumn(), TextColumn("eta"),
                                      TimeRemainingColumn(), console=con, transient=True, auto_refresh=False)
            self._progress.__enter__()
            self._task = self._progress.add_task(f"{self.title}: starting", total=None)
            self._stop = threading.Event()
            self._redraw = threading.Thread(target=self._redraw_loop, name="edgebench-progress", daemon=True)
            self._redraw.start()
        outer = self
        lock = threading.Lock()
        lanes: dict[str, Any] = {}

        class _Say:
            started = False

            def __call__(self, msg: str) -> None:
                if outer._progress is None:
                    return
                with lock:
                    outer._progress.update(outer._task, description=f"{outer.title}: {escape_markup(msg)}",
                                           advance=1 if self.started else 0, refresh=not events.is_measuring())
                    self.started = True

            def set_total(self, n: int) -> None:
                if outer._progress is not None:
                    outer._progress.update(outer._task, total=n)

            @contextmanager
            def lane(self, name: str, label: str):
                bar = outer._progress
                if bar is None:
                    yield
                    return
                head = f"  {escape_markup(name)}: {escape_markup(label)}"
                with lock:
                    if name not in lanes:
                        lanes[name] = bar.add_task(head, total=None)
                    task = lanes[name]
                    bar.reset(task, total=None, description=head)

                def sink(done: int, total: int | None, note: str) -> None:
                    with lock:
                        bar.update(task, completed=done, total=total,
                                   description=head + (f" ({escape_markup(note)})" if note else ""),
                                   refresh=not events.is_measuring())

                with events.reporting_to(sink):
                    yield

        return _Say()

    REDRAW_S = 0.1

    def _redraw_loop(self) -> None:
        while not self._stop.wait(self.REDRAW_S):
            if events.is_measuring():
                continue
            try:
                self._progress.refresh()
            except Exception:  # noqa: BLE001 -- a bar that cannot draw never stops the run
                pass

    def __exit__(self, *exc) -> None:
        if self._progress is not None:
            self._stop.set()
            self._redraw.join()
            self._progress.__exit__(*exc)
        if self._stream is not None and self._stream is not __import__("sys").stderr:
            self._stream.close()


def escape_markup(text: str) -> str:
    return escape(str(text))


def deliver(doc, opts, render, *, json_path: str | None = None) -> "object":
    """Publish a measured document, show it, then raise what went wrong -- in that order.

    ``render(doc)`` returns rich renderables (nothing is printed when ``--json -`` owns stdout).
    An interruption (Ctrl-C/SIGTERM/SIGHUP) is raised after the rows measured before it were
    stored and shown; a store or push failure after the table was printed. Returns the
    published document (with ``run_id``)."""

    outcome = publish(doc, opts)
    doc = outcome.doc
    if json_path != "-":
        try:
            # the renderer's footer says why a result was not stored (shown only: the JSON is written)
            show(render(doc.with_meta(not_stored=outcome.not_stored) if outcome.not_stored else doc))
        except StdoutNotWritable as err:         # the table was the user's copy: say where the result is
            raise err.kept(_kept_where(outcome)) from None
    if doc.get("interrupted"):
        signal_name = doc.get("interrupted_by") or "Ctrl-C"
        done = sum(1 for r in doc.rows if r.ok)
        where = f"run {doc.get('run_id')}" if doc.get("run_id") else (
            f"--json {json_path}" if json_path and json_path != "-" else "nowhere: it was not stored")
        raise Interrupted(f"interrupted ({signal_name}): {done} of {len(doc.rows)} rows were measured and kept "
                          f"({where}); rerun to measure the rest", signal_name=signal_name)
    outcome.raise_error()
    return doc


def show(parts) -> None:
    """Print rendered parts to stdout (a ``WholeLine`` unwrapped) and flush, so a write error
    surfaces while the result is at hand."""


    con = console()
    for part in (parts if isinstance(parts, (list, tuple)) else [parts]):
        if isinstance(part, WholeLine):      # a command: never wrapped or cropped by us
            con.print(part, soft_wrap=True, markup=False, highlight=False)
        else:
            con.print(part)
    sys.stdout.flush()


def _kept_where(outcome) -> str:
    """Where a published result is, for a message about output that did not arrive."""
    if outcome.run_id:
        return f"the result is stored as run {outcome.run_id}: `edgebench results show {outcome.run_id}`"
    if outcome.kept:
        return f"the result was kept in {outcome.kept}; store it with `edgebench results import {outcome.kept}`"
    try:
        path = keep_unsaved(outcome.doc)
    except OSError as exc:
        return f"the result could not be kept in unsaved/ either ({exc.strerror or exc})"
    return f"the result was kept in {path}; store it with `edgebench results import {path}`"


def verdict_then_unwritten(verdict: Callable[[], None], unwritten: list[str]) -> None:
    """After the table: ``verdict()`` raises the command's own outcome (failed cells, a failed
    variant, an interruption) with its exit code, naming the files that could not be written too;
    when it passes, those files are the error (exit 2). ``unwritten``: ``publish.try_write`` lines."""
    lines = [ln for ln in unwritten if ln]
    try:
        verdict()
    except EdgebenchError as err:
        if lines:
            err.args = ("; ".join([str(err), *lines]),)
            if hasattr(err, "message"):
                err.message = err.args[0]
        raise
    if lines:
        raise BadInput("\n".join(lines))
