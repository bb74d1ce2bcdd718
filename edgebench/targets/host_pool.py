"""Host workers started ahead of their jobs, while the parent does untimed work.

A host row's worker spends ~0.15-0.2 s before its first inference on things that do not depend
on the job: starting Python, importing numpy and LiteRT. convert-and-compare knows how many host
rows it will run before it imports TensorFlow (~2.6 s on one core of a 2-core machine, the other
idle) and converts, so it starts that many workers meanwhile (``prestarted``), one at a time so
they take one core and leave TensorFlow its own. Each one imports its runtime, leaves a ``ready``
file in its own folder and blocks reading its stdin; a host row then hands a ready worker its job
file instead of starting a process (``take``). Nothing is timed while a
pre-started worker is busy: the parent waits for every worker to be ready (``wait_ready``) before
the reference's timed loop, and a waiting worker is blocked in a read, using no CPU.

The job, its folder, the stop rule, the deadline, the result files and every error are those of a
freshly started worker (``host.spawn_worker``); only the process start moved earlier. Workers not
taken are told to exit (stdin closed) and killed if they do not.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

RUNNER_PATH = Path(__file__).with_name("runner.py")
WAIT_FLAG = "--wait-job"       # runner.py: import the runtime, say ready, read the job path from stdin
READY_FILE = "ready"
# At most this many are pre-started (~30 MB each: Python, numpy, LiteRT); rows beyond start their
# own (--repeats 10 over five precisions would otherwise park fifty processes). None is started
# later: that would be while rows are timed.
MAX_WAITING = 8
OFF_ENV = "EDGEBENCH_PRESTART"  # "0": every row starts its own worker (scripts/bench_time_to_answer's A/B)


@dataclass
class Prestarted:
    proc: subprocess.Popen
    work: Path            # its folder: stdout.txt/stderr.txt now, the job and its results later

    def ready(self) -> bool:
        return (self.work / READY_FILE).is_file() or self.proc.poll() is not None


_LOCK = threading.Lock()
_WAITING: list[Prestarted] = []          # started (ready or importing), not yet taken
_SPAWNER: threading.Thread | None = None
_STOP = threading.Event()
READY_POLL_S = 0.005


def start_worker(argv: list[str], work: Path, stdin=subprocess.DEVNULL) -> subprocess.Popen:
    """A host worker (``argv``, no shell) in its own session, with ``work`` as its folder and its
    stdout/stderr in ``work/stdout.txt`` / ``work/stderr.txt``: how every host worker starts."""
    env = {"TF_CPP_MIN_LOG_LEVEL": "2", **os.environ}
    with open(work / "stdout.txt", "wb") as out, open(work / "stderr.txt", "wb") as err:
        return subprocess.Popen(  # noqa: S603 -- argv list, no shell
            argv, stdout=out, stderr=err, stdin=stdin, env=env, start_new_session=True, cwd=str(work))


def kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL a worker and everything it started (its own session), and reap it."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()
    proc.wait()


def _start_one() -> Prestarted:
    work = Path(tempfile.mkdtemp(prefix="edgebench-host-"))
    return Prestarted(start_worker([sys.executable, str(RUNNER_PATH), WAIT_FLAG], work, stdin=subprocess.PIPE), work)


def _spawn_in_turn(count: int) -> None:
    """One worker at a time, the next once the last is ready: the pool uses one core, so the
    TensorFlow import and conversion running meanwhile keep theirs."""
    for _ in range(count):
        if _STOP.is_set():
            return
        try:
            w = _start_one()
        except OSError:          # cannot start processes now: rows start their own as before
            return
        with _LOCK:
            _WAITING.append(w)
        while not w.ready() and not _STOP.is_set():
            time.sleep(READY_POLL_S)


def take() -> Prestarted | None:
    """A pre-started worker that is ready and alive, or None (then the row starts its own)."""
    with _LOCK:
        for w in list(_WAITING):
            if w.ready():
                _WAITING.remove(w)
                if w.proc.poll() is None:
                    return w
                _discard(w)
    return None


def wait_ready(timeout_s: float = 30.0) -> None:
    """Until the pool is complete and every worker has imported its runtime (or died), so none
    of them is busy while something is timed; the spawner is stopped at the timeout, and a worker
    not ready by then is stopped too."""
    end = time.monotonic() + timeout_s
    spawner = _SPAWNER
    if spawner is not None:
        spawner.join(max(0.0, end - time.monotonic()))
        if spawner.is_alive():
            _STOP.set()
            spawner.join()
    with _LOCK:
        waiting = list(_WAITING)
    for w in waiting:
        while not w.ready() and time.monotonic() < end:
            time.sleep(READY_POLL_S)
        if not w.ready():
            with _LOCK:
                if w in _WAITING:
                    _WAITING.remove(w)
            _discard(w)


def _discard(w: Prestarted) -> None:
    """Tell a worker to exit (EOF on its stdin), kill it if it does not, remove its folder."""
    try:
        if w.proc.stdin is not None:
            w.proc.stdin.close()
    except OSError:
        pass
    try:
        w.proc.wait(timeout=1.0)
    except subprocess.TimeoutExpired:
        kill_group(w.proc)
    shutil.rmtree(w.work, ignore_errors=True)


@contextmanager
def prestarted(count: int) -> Iterator[None]:
    """Up to ``count`` workers (at most MAX_WAITING) started one after another from now on (a
    background thread) and available to ``take`` inside the block; the ones left are stopped when
    it ends (however it ends)."""
    global _SPAWNER
    count = 0 if os.environ.get(OFF_ENV) == "0" else min(count, MAX_WAITING)
    _STOP.clear()
    _SPAWNER = threading.Thread(target=_spawn_in_turn, args=(count,), name="edgebench-prestart", daemon=True)
    _SPAWNER.start()
    try:
        yield
    finally:
        _STOP.set()
        _SPAWNER.join()
        _SPAWNER = None
        with _LOCK:
            left = list(_WAITING)
            _WAITING.clear()
        for w in left:
            _discard(w)
