"""The ``edgebench`` command line: one module per command, composed here.

Each command module exposes ``register(app: typer.Typer) -> None``. Commands parse options,
call one library function and render; library code raises ``EdgebenchError`` subclasses and
only ``main()`` maps them to exit codes (0 ok, 1 gate failed, 2 bad input, 3 infrastructure).
"""

from __future__ import annotations

import errno
import importlib
import io
import os
import signal
import sys
import warnings

import typer
from rich.markup import escape

from edgebench.cli._help import plain_placeholders
from edgebench.cli._quiet import StderrFilter
from edgebench.cli._ranges import check_app
from edgebench.cli._startup import fast_exit, flush_stdout, skip_keras_sklearn, strict_stdout
from edgebench.core.errors import SIGNAL_EXIT_CODES, BadInput, EdgebenchError, Interrupted, SyntheticDataWarning
from edgebench.core.printable import clip_message, printable, printable_lines
from edgebench.report.terminal.console import DataConsole
from edgebench.targets.loop import Stop, interrupt_name

# Quiet TensorFlow's C++ logging before anything imports it; users can override.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

app = typer.Typer(
    name="edgebench",
    help="Convert, compare and benchmark TensorFlow models on the host, on phones and on boards.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

# Command modules, in help order. Each has register(app).
_COMMANDS = (
    "convert",
    "convert_and_compare",
    "diagnose",
    "readiness",
    "compare",
    "bench",
    "devices",
    "import_log",
    "models",
    "train",
    "matrix",
    "results",
    "report",
    "export",
    "env",
    "llm_bench",
)


def _register_all() -> None:
    for name in _COMMANDS:
        mod = importlib.import_module(f"edgebench.cli.{name}")
        mod.register(app)




@app.callback()
def _root() -> None:
    """edgebench: convert, compare and benchmark TensorFlow models on the edge."""


_register_all()


def _check_ranges() -> None:
    check_app(app)


_check_ranges()


def _plain_help() -> None:
    plain_placeholders()


_plain_help()


def _click_exceptions():
    try:  # typer >= 0.24 vendors click
        from typer._click import exceptions  # type: ignore[attr-defined]
    except ImportError:  # pragma: no cover - older typer
        from click import exceptions
    return exceptions


def main(argv: list[str] | None = None) -> int:
    """Console-script entry point. Returns (and exits with) the contract exit code."""
    skip_keras_sklearn()            # ~0.8 s of every TensorFlow import (cli/_startup.py)
    quiet = StderrFilter()
    quiet.start()
    _stop_on_signals()
    try:
        _main(argv)
    finally:
        quiet.stop()
    return 0


def run() -> None:
    """The ``edgebench`` console script and ``python -m edgebench``: :func:`main`, then a fast
    exit (``cli/_startup.fast_exit``: every output flushed and every atexit handler run, but no
    ~1 s of TensorFlow teardown). In-process callers (tests, notebooks) call :func:`main`."""

    strict_stdout()                 # a write error on stdout is exit 2, never output cut short with 0
    try:
        code = main()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if not isinstance(exc.code, (int, type(None))):
            print(exc.code, file=sys.stderr)
    fast_exit(flush_stdout(code))


def _stop_on_signals() -> None:
    """SIGTERM (what `timeout` and CI cancellation send) and SIGHUP (a closed terminal) stop a run
    the way Ctrl-C does: the current row finishes or is abandoned, what was measured is stored
    and written, and the exit code is 128 + the signal (143 / 129)."""


    def handler(signum, _frame):
        global _SIGNALLED
        _SIGNALLED = signal.Signals(signum).name
        raise Stop(_SIGNALLED)

    def ctrl_c(_signum, _frame):
        global _SIGNALLED
        _SIGNALLED = "Ctrl-C"      # recorded too: an interrupt swallowed by a finalizer still counts
        raise KeyboardInterrupt

    try:
        if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            signal.signal(signal.SIGINT, ctrl_c)
    except (ValueError, OSError):
        pass
    for sig in (signal.SIGTERM, signal.SIGHUP):
        try:
            signal.signal(sig, handler)
        except (ValueError, OSError):   # not the main thread / not supported here
            pass


_SAID_ONCE: set[str] = set()     # the warnings of this run said once (SyntheticDataWarning)


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """Python warnings from library code as one readable line (no file/line noise)."""
    if issubclass(category, (DeprecationWarning, PendingDeprecationWarning, FutureWarning)):
        return

    if issubclass(category, SyntheticDataWarning):    # every stage that loads --data warns; a run says it once
        if str(message) in _SAID_ONCE:
            return
        _SAID_ONCE.add(str(message))


    DataConsole(stderr=True, highlight=False, soft_wrap=True).print(f"[bold yellow]warning:[/] {escape(str(message))}")


def _main(argv: list[str] | None) -> None:


    warnings.showwarning = _show_warning
    _SAID_ONCE.clear()        # a new run (tests call _main many times in one process)
    try:
        _check_arguments(sys.argv[1:] if argv is None else argv)
        rv = app(args=argv, standalone_mode=False)
    except EdgebenchError as err:
        if _SIGNALLED and not isinstance(err, Interrupted):
            _interrupted()         # an error the signal caused (a worker it stopped ...): the signal is the news
        _fail(str(err), err.exit_code)
    except KeyboardInterrupt as exc:
        name = interrupt_name(exc)
        _fail(INTERRUPTED.replace("(Ctrl-C)", f"({name})"), SIGNAL_EXIT_CODES.get(name, 130))
    except SystemExit as exc:  # typer/click exit paths
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
        sys.exit(code)
    except typer.Abort:       # click turns a KeyboardInterrupt (and our Stop) raised outside a loop into Abort
        _interrupted()
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except Exception as exc:  # click usage errors and anything unforeseen
        if isinstance(exc, _click_exceptions().UsageError):
            text = io.StringIO()
            exc.show(file=text)                 # the value the user typed is data: shown, never sent
            sys.stderr.write(clip_message(printable_lines(text.getvalue())))
            sys.exit(2)
        if _SIGNALLED:
            # the signal's exception surfaced inside a library that wrapped it (TensorFlow turns it
            # into SystemError/AttributeError mid-trace): it is an interruption, not a bug
            _interrupted()
        if isinstance(exc, OSError) and exc.errno == errno.ENAMETOOLONG:
            # a path the user gave, with a part longer than a file name can be (stat, open, mkdir)
            _fail(f"{exc.filename or 'a path given'}: {exc.strerror}: a part of it is longer than a file name may "
                  f"be ({_name_max()} bytes) or the whole longer than a path may be; give a shorter path", 2)
        if os.environ.get("EDGEBENCH_DEBUG"):
            raise
        _fail(f"internal error: {type(exc).__name__}: {exc} (set EDGEBENCH_DEBUG=1 for a traceback "
              "and report it)", 3)
    else:
        # Without standalone mode typer *returns* the exit code of Ctrl-C (130) instead of raising.
        if rv == 130 or _SIGNALLED:
            # a signal whose exception something swallowed (a finalizer that was running when it
            # came: "Exception ignored in ... __del__") still ends the command as that signal
            _interrupted()
        if isinstance(rv, int) and rv:
            sys.exit(rv)


def _check_arguments(args: list[str]) -> None:
    """A command-line argument that is not valid UTF-8 (a file name in another encoding, which
    Python holds as lone surrogates) is refused before anything runs: edgebench writes every path it
    was given into JSON, the results store and reports, and LiteRT and TensorFlow take paths as UTF-8."""

    for arg in args:
        try:
            arg.encode("utf-8")
        except UnicodeEncodeError as exc:
            byte = printable(arg[exc.start])
            raise BadInput(f"{printable(arg)}: not valid UTF-8 (the byte {byte}); rename the file (or use a "
                           "link to it) with a UTF-8 name") from None


def _name_max() -> int:
    try:
        return os.pathconf("/", "PC_NAME_MAX")
    except (OSError, ValueError):
        return 255


INTERRUPTED = ("interrupted (Ctrl-C); results already stored or written with --json are kept, the "
               "command's unfinished work is not")
_SIGNALLED: str | None = None    # the last SIGTERM/SIGHUP received (Ctrl-C leaves it None)


def _interrupted() -> None:
    """An interruption outside the measuring loops (conversion, model build, diagnose, the
    keep-float search): the signal that stopped it names it and sets the exit code."""

    name = _SIGNALLED or "Ctrl-C"
    _fail(INTERRUPTED.replace("(Ctrl-C)", f"({name})"), SIGNAL_EXIT_CODES.get(name, 130))


def _fail(message: str, code: int) -> None:
    """Every error edgebench prints ends here: each line at most ``printable.LINE_LIMIT`` characters
    (a message that quotes a crafted value stays a line, not megabytes)."""


    console = DataConsole(stderr=True, highlight=False, soft_wrap=True)
    console.print(f"[bold red]error:[/] {escape(clip_message(message))}", markup=True)
    sys.exit(code)
