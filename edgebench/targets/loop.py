"""One resolver and one target loop for bench, convert-and-compare and matrix.

``resolve_targets("host,adb:all", ...)`` turns a ``--targets`` spec into Target objects (bad
names fail up front, before anything is measured). ``run_on_targets(targets, items, run,
on_error)`` runs every work item on every target:

* host targets first, one after another, alone on this machine's cores;
* then every device in its own lane (a thread), in parallel: a device's own latency does not
  depend on the host, and a lost device fails only its own items;
* an ``EdgebenchError`` from one item becomes that item's failed result (``on_error``) and the
  loop goes on; anything unforeseen in a device lane fails that lane's remaining items;
* with a progress reporter that has lanes (``cli._common.progress_reporter``), every device lane
  shows its current item on a line of its own, moved by what the run reports
  (``edgebench.core.progress``: e.g. the samples of a benchmark_model loop);
* Ctrl-C, SIGTERM or SIGHUP (the CLI turns the signals into :class:`Stop`) stop the loop after the
  current item of each lane (devices clean up their run folders); every item already measured is
  kept, the rest get a failed result saying they were not run, and ``outcome.interrupted`` names
  the signal so the caller can store what was measured and exit 130/143.
"""

from __future__ import annotations

import threading
import time
import warnings
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any, Callable, Generic, Sequence, TypeVar

from edgebench.core.errors import BadInput, EdgebenchError, InfraError
from edgebench.targets.adb.devices import resolve_adb_targets
from edgebench.targets.base import DEFAULT_DELEGATE
from edgebench.targets.benchmark_model.binary import resolve_binary
from edgebench.targets.devicefarm import PREFIX as FARM_PREFIX
from edgebench.targets.devicefarm import SPEC_HELP as FARM_SPEC
from edgebench.targets.devicefarm import DeviceFarmTarget
from edgebench.targets.host import HostTarget

T = TypeVar("T")

HOST_TARGETS = ("host",)
# How --repeats' worker processes are ordered (``measure_in_rounds``); documents with replicates say
# so, and each process's ``order`` in its row's ``repeats`` is its place in the target's sequence.
PROCESS_ORDER = "interleaved: round k runs the k-th worker process of every row before any row's next one (ABAB...)"


class Stop(KeyboardInterrupt):
    """Raised in the main thread by the CLI's SIGTERM/SIGHUP handler: handled like Ctrl-C. A row
    function raises it with ``row`` when the interrupted row still measured something (the
    finished windows of a sustained run): the loop keeps that row and stops."""

    def __init__(self, signal_name: str = "SIGTERM", row: Any = None) -> None:
        super().__init__(signal_name)
        self.signal_name = signal_name
        self.row = row


def interrupt_name(exc: BaseException) -> str:
    return exc.signal_name if isinstance(exc, Stop) else "Ctrl-C"


def resolve_targets(spec: str | Sequence[str], *, threads: int | None = None, delegate: str | None = None,
                    benchmark_binary: str | None = None, allow_tf: bool = False,
                    allow_farm: bool = False) -> list[Any]:
    """``host``, ``adb``, ``adb:SERIAL``, ``adb:all``, and where ``allow_farm`` (``edgebench bench``)
    ``devicefarm:PROJECT/POOL`` (comma-separated) -> targets, in spec order with devices after the
    host. ``tf`` (the reference) is accepted only where it always runs anyway (``allow_tf``) and is
    then left out of the list."""

    names = [s.strip() for s in (spec.split(",") if isinstance(spec, str) else spec) if s and s.strip()]
    if not names:
        raise BadInput("--targets is empty; use host, adb:SERIAL or adb:all")
    twice = [n for i, n in enumerate(names) if n in names[:i]]
    if twice:       # host,host ran (and stored) every row twice
        raise BadInput(f"--targets {','.join(names)}: {twice[0]!r} is given twice; list each target once")
    farms = [n for n in names if n.startswith(FARM_PREFIX)]
    if farms and not allow_farm:
        raise BadInput(f"--targets {farms[0]}: Device Farm targets run in `edgebench bench` only (benchmark_model's "
                       "summary statistics, no outputs to compare); use host, adb:SERIAL or adb:all here")
    if benchmark_binary is not None:      # given for nothing, or a file that is not there: say so now

        resolve_binary(benchmark_binary)
        if not any(n == "adb" or n.startswith("adb:") for n in names) and not farms:

            warnings.warn(f"--benchmark-binary {benchmark_binary} is for adb devices without Python and Device Farm "
                          f"targets; --targets {','.join(names)} has none, so it is not used", stacklevel=2)
    out: list[Any] = []
    for name in names:
        if name in HOST_TARGETS:
            out.append(HostTarget(threads=threads, delegate=delegate or DEFAULT_DELEGATE, name=name))
        elif name == "tf" and allow_tf:
            continue
        elif not (name == "adb" or name.startswith("adb:") or name.startswith(FARM_PREFIX)):
            allowed = (f"host, adb, adb:SERIAL, adb:all or {FARM_SPEC}" if allow_farm else "host, adb, adb:SERIAL or adb:all")
            allowed += " (tf always runs as the reference)" if allow_tf else ""
            raise BadInput(f"target {name!r} is not supported here; use {allowed}")
    adb_names = [n for n in names if n == "adb" or n.startswith("adb:")]
    if adb_names:

        kw: dict[str, Any] = {"threads": threads, "benchmark_binary": benchmark_binary}
        if delegate is not None:
            kw["delegate"] = delegate
        out.extend(resolve_adb_targets(",".join(adb_names), **kw))
    for name in farms:      # checked here; AWS is first called when the target runs
        out.append(DeviceFarmTarget(name, benchmark_binary=benchmark_binary, threads=threads,
                                    delegate=delegate or DEFAULT_DELEGATE))
    seen = [getattr(t, "name", None) for t in out]
    twice = [n for i, n in enumerate(seen) if n is not None and n in seen[:i]]
    if twice:       # adb:all,adb:SERIAL names one device twice
        raise BadInput(f"--targets {','.join(names)}: {twice[0]} is named twice (adb:all includes every "
                       "device); list each target once")
    return out


def is_device(target: Any) -> bool:
    return getattr(target, "name", "") not in HOST_TARGETS


@dataclass
class LoopOutcome(Generic[T]):
    """Results keyed by ``(target name, item index)``; every key present once the loop returns."""
    results: dict[tuple[str, int], T] = field(default_factory=dict)
    interrupted: str | None = None       # "Ctrl-C" | "SIGTERM" | "SIGHUP" | None

    def for_target(self, name: str) -> list[T]:
        return [v for (t, _), v in sorted(self.results.items(), key=lambda kv: kv[0][1]) if t == name]


def run_on_targets(targets: Sequence[Any], items: Sequence[Any], run: Callable[[Any, Any], T],
                   on_error: Callable[[Any, Any, EdgebenchError], T],
                   progress: Callable[[str], None] | None = None,
                   describe: Callable[[Any, Any], str] | None = None) -> LoopOutcome[T]:
    """Run ``run(target, item)`` for every item on every target (see the module docstring)."""
    out: LoopOutcome[T] = LoopOutcome()
    stop = threading.Event()
    lock = threading.Lock()
    say = progress or (lambda _m: None)
    label = describe or (lambda t, it: f"{it} on {getattr(t, 'name', t)}")

    lane_of = getattr(progress, "lane", None)     # a progress bar with a line per device lane

    def one(target: Any, i: int, item: Any) -> None:
        say(label(target, item))
        scope = lane_of(target.name, label(target, item)) if lane_of and is_device(target) else nullcontext()
        try:
            with scope:
                value = run(target, item)
        except EdgebenchError as err:
            value = on_error(target, item, err)
        except Stop as stop_:
            if stop_.row is not None:        # what the interrupted row finished is a result
                with lock:
                    out.results[(target.name, i)] = stop_.row
            raise
        with lock:
            out.results[(target.name, i)] = value

    hosts = [t for t in targets if not is_device(t)]
    devices = [t for t in targets if is_device(t)]
    try:
        for t in hosts:
            for i, item in enumerate(items):
                one(t, i, item)
        if devices:
            _device_lanes(devices, items, one, stop, out, lock, on_error)
    except KeyboardInterrupt as exc:     # Ctrl-C, or Stop from the SIGTERM/SIGHUP handler
        stop.set()
        out.interrupted = interrupt_name(exc)
    for t in targets:
        for i, item in enumerate(items):
            if (t.name, i) not in out.results:
                why = (f"not run: interrupted ({out.interrupted}) before this row finished" if out.interrupted
                       else "not run: its device lane stopped early")
                out.results[(t.name, i)] = on_error(t, item, InfraError(why))
    return out


def _device_lanes(devices, items, one, stop: threading.Event, out: LoopOutcome, lock, on_error) -> None:
    errors: dict[str, BaseException] = {}

    def lane(target: Any) -> None:
        try:
            for i, item in enumerate(items):
                if stop.is_set():
                    return
                one(target, i, item)
        except Exception as exc:  # noqa: BLE001 -- a lane's crash must not lose the other lanes
            errors[target.name] = exc
            err = InfraError(f"{target.name}: internal error {type(exc).__name__}: {exc}")
            with lock:
                for i, item in enumerate(items):
                    out.results.setdefault((target.name, i), on_error(target, item, err))

    run_lanes(devices, lane, stop)


def run_lanes(devices, lane, stop: threading.Event) -> None:
    """``lane(target)`` on a thread per device; on Ctrl-C ``stop`` is set, every lane finishes its
    current run (and cleans up on the device), then the interrupt goes on. A target with a
    ``cancel()`` (Device Farm: a run that may wait for an hour) is told to stop its run first."""
    threads = [threading.Thread(target=lane, args=(t,), name=f"edgebench-lane-{t.name}", daemon=True)
               for t in devices]
    for th in threads:
        th.start()
    try:
        for th in threads:
            while th.is_alive():
                th.join(timeout=0.2)   # short joins keep the main thread responsive to signals
    except KeyboardInterrupt:
        stop.set()
        for t in devices:           # a remote run that waits for long (a device farm) stops its run now
            cancel = getattr(t, "cancel", None)
            if callable(cancel):
                cancel()
        for th in threads:
            th.join()
        raise


@dataclass
class Rounds:
    """What ``measure_in_rounds`` measured: per ``(target name, item index)`` the results of its
    worker processes in the order they ran, and each one's place in its target's sequence."""

    processes: dict[tuple[str, int], list[Any]] = field(default_factory=dict)
    order: dict[tuple[str, int], list[int]] = field(default_factory=dict)
    started: dict[tuple[str, int], list[float]] = field(default_factory=dict)   # time.monotonic() at each start
    interrupted: str | None = None


def measure_in_rounds(targets: Sequence[Any], items: Sequence[Any], rounds: int,
                      measure: Callable[[Any, Any, int], Any], on_error: Callable[[Any, Any, EdgebenchError], Any],
                      progress: Callable[[str], None] | None = None,
                      describe: Callable[[Any, Any], str] | None = None, round_gap_s: float = 0.0) -> Rounds:
    """Replicates that are replicates: each target runs round 1 of every item, then round 2 of every
    item, ... (A1 B1 A2 B2 ..., as Chromium's Pinpoint alternates A/B runs), so load that comes and
    goes on the machine falls on every item alike instead of on one item's processes. ``measure(target,
    item, round)`` runs one worker process; hosts go first, one after another, then each device in
    its own lane, as in :func:`run_on_targets`. An item whose process failed (``on_error`` gives its
    result) runs no further rounds. Ctrl-C/SIGTERM stop after the current process: what was measured
    is kept and ``interrupted`` names the signal. ``round_gap_s``: an item's k-th process starts no
    sooner than k x this many seconds after its first (``--round-gap``; the loop waits where the
    rounds run faster): processes spread in time see the shifts between runs that back-to-back
    processes do not (``judge.stats.SPREAD_MIN_S``)."""
    out = Rounds()
    lock = threading.Lock()
    stop = threading.Event()
    say = progress or (lambda _m: None)
    label = describe or (lambda t, it: f"{it} on {getattr(t, 'name', t)}")
    lane_of = getattr(progress, "lane", None)

    def target_rounds(target: Any) -> None:
        seq = 0
        dead: set[int] = set()
        firsts: dict[int, float] = {}
        for r in range(rounds):
            for i, item in enumerate(items):
                if i in dead or stop.is_set():
                    continue
                seq += 1
                text = f"{label(target, item)} (process {r + 1}/{rounds})"
                say(text)
                scope = lane_of(target.name, text) if lane_of and is_device(target) else nullcontext()
                wait = firsts.get(i, 0.0) + r * round_gap_s - time.monotonic() if r else 0.0
                if wait > 0:
                    say(f"{text}: starts in {wait:.0f} s (--round-gap)")
                    if threading.current_thread() is threading.main_thread():
                        time.sleep(wait)          # Ctrl-C interrupts it
                    elif stop.wait(wait):
                        continue
                began = time.monotonic()
                firsts.setdefault(i, began)
                try:
                    with scope:
                        value = measure(target, item, r)
                except EdgebenchError as err:
                    value = on_error(target, item, err)
                if getattr(value, "status", "ok") != "ok":
                    dead.add(i)
                with lock:
                    out.processes.setdefault((target.name, i), []).append(value)
                    out.order.setdefault((target.name, i), []).append(seq)
                    out.started.setdefault((target.name, i), []).append(began)

    hosts = [t for t in targets if not is_device(t)]
    devices = [t for t in targets if is_device(t)]
    try:
        for t in hosts:
            target_rounds(t)
        errors: dict[str, BaseException] = {}

        def lane(target: Any) -> None:
            try:
                target_rounds(target)
            except Exception as exc:  # noqa: BLE001 -- a lane's crash must not lose the other lanes
                errors[target.name] = exc
                err = InfraError(f"{target.name}: internal error {type(exc).__name__}: {exc}")
                with lock:
                    for i, item in enumerate(items):
                        if (target.name, i) not in out.processes:
                            out.processes[(target.name, i)] = [on_error(target, item, err)]
                            out.order[(target.name, i)] = [0]

        run_lanes(devices, lane, stop)
    except KeyboardInterrupt as exc:
        stop.set()
        out.interrupted = interrupt_name(exc)
    return out
