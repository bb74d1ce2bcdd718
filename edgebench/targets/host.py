"""Target "host": LiteRT on this machine, in an isolated worker process.

The worker is ``runner.py`` (stdlib + numpy + a TFLite runtime), started as
``[sys.executable, runner.py, job.json]`` -- never through a shell -- in its own session so
a hung worker can be killed with everything it started. A segfault on a malformed model or
a runtime abort becomes an ``InfraError`` naming the signal, a hang past the deadline an
``InfraError`` after the kill, and a bad model / input / delegate a ``BadInput`` carrying the
worker's one-line message.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import numpy as np

from edgebench.core import progress
from edgebench.core.errors import BadInput, InfraError
from edgebench.core.fingerprint import host_fingerprint, sha256_file
from edgebench.targets import host_pool
from edgebench.targets.base import DEFAULT_DELEGATE, DELEGATES, HOST_DELEGATES, Job, RunResult, check_job_files
from edgebench.targets.energy import rapl_energy
from edgebench.targets.host_pool import RUNNER_PATH, kill_group, start_worker
from edgebench.targets.host_sensors import HostSampler

# The standalone worker: runner.py (the entry point and the job/result contract) and the modules
# it loads from its own folder; pushed together to devices.
WORKER_FILES = tuple(RUNNER_PATH.with_name(n) for n in ("runner.py", "runner_io.py", "runner_modes.py",
                                                          "runner_profile.py", "runner_stop.py"))
MODEL_IO_PATH = Path(__file__).with_name("model_io.py")
HOST_METHOD = "per-inference perf_counter_ns around invoke()"
# Loading and describing a model (no timing): generous for a large model on a busy machine.
DESCRIBE_DEADLINE_S = 300.0


def check_delegate(delegate: str, allowed: tuple[str, ...] = HOST_DELEGATES) -> str:
    """One of ``allowed`` or a path to a delegate .so; anything else is bad input."""
    if delegate in allowed or delegate.endswith(".so"):
        return delegate
    if delegate in DELEGATES:
        raise BadInput(f"delegate {delegate!r} cannot be applied on this host (its LiteRT has "
                       f"{', '.join(allowed)}, or pass a path to a delegate .so); {delegate} runs on adb devices")
    raise BadInput(f"--delegate {delegate!r} is unknown; use {', '.join(DELEGATES)} or a path to a delegate .so")


def _signal_name(rc: int) -> str:
    try:
        return signal.Signals(-rc).name
    except ValueError:
        return f"signal {-rc}"


class HostTarget:
    """Runs jobs with LiteRT on this machine. Target settings fill in what the job leaves at
    its defaults (threads None, delegate "xnnpack")."""

    def __init__(self, threads: int | None = None, delegate: str = DEFAULT_DELEGATE, name: str = "host"):
        if threads is not None and threads < 1:
            raise BadInput(f"--threads must be >= 1, got {threads}")
        self.threads = threads
        self.delegate = check_delegate(delegate)
        self.name = name

    # -- protocol -------------------------------------------------------------------------
    def fingerprint(self) -> dict[str, Any]:
        return host_fingerprint(threads=self.threads, delegate=self.delegate, target=self.name,
                                python_executable=sys.executable)

    def run(self, job: Job) -> RunResult:
        """Single-stream run: warmup, then timed runs per the job's run control."""
        return self._run(job, None)

    def run_load(self, job: Job, load: dict[str, Any]) -> RunResult:
        """A load-mode run: ``{"mode": "concurrency", "level": N}`` or
        ``{"mode": "server", "qps": Q, "workers": W, "queries": K}``; facts in ``extra["load"]``."""
        return self._run(job, load)

    # -- internals ------------------------------------------------------------------------
    def job_spec(self, job: Job, out_dir: str, load: dict[str, Any] | None = None) -> dict[str, Any]:
        spec = job.worker_spec()
        if job.threads is None:
            spec["threads"] = self.threads
        spec["delegate"] = check_delegate(job.delegate or self.delegate)
        spec["model_path"] = str(Path(job.model_path).resolve())
        if job.inputs_npz:
            spec["inputs_npz"] = str(Path(job.inputs_npz).resolve())
        spec["out_dir"] = out_dir
        spec["load"] = load
        return spec

    def _run(self, job: Job, load: dict[str, Any] | None) -> RunResult:
        model = check_job_files(job)
        sha = sha256_file(model)             # the bytes handed to the worker ...
        # a plain single-stream row takes a pre-started worker when convert-and-compare made some
        pooled = host_pool.take() if load is None and not job.schedule.sustained and job.energy is None else None
        work = str(pooled.work) if pooled is not None else tempfile.mkdtemp(prefix="edgebench-host-")
        try:
            spec = self.job_spec(job, work, load)
            job_file = Path(work) / "job.json"
            job_file.write_text(json.dumps(spec))
            sampler = self._start_sensors(job, load)
            try:
                # a progress bar holds its redraws meanwhile (not for a sustained run's minutes:
                # its elapsed time is what shows the run is alive)
                with progress.measuring() if not job.schedule.sustained else nullcontext():
                    meta, arrays = self._spawn(job_file, Path(work), job.deadline_s, model,
                                               graceful=job.schedule.sustained and load is None,
                                               started=pooled.proc if pooled is not None else None)
            finally:
                readings = sampler.stop() if sampler is not None else None
        finally:
            shutil.rmtree(work, ignore_errors=True)
        if sha256_file(model) != sha:        # ... are still the bytes on disk: nobody replaced the file meanwhile
            raise InfraError(f"{model} changed while it was measured (another run wrote the same file?); the "
                             "result would not belong to either version; give each run its own --out and rerun")
        res = self._to_result(job, spec, meta, arrays, sha)
        if pooled is not None:
            res.extra["prestarted"] = True
        if sampler is not None:
            res.extra.update(sensor_facts(job, sampler, readings, res))
        return res

    @staticmethod
    def _start_sensors(job: Job, load: dict[str, Any] | None) -> HostSampler | None:
        """Thermal/cpufreq readings for a sustained run, RAPL counters (after an idle window)
        for ``--energy``; None when neither is asked for."""
        if load is not None or not (job.schedule.sustained or job.energy is not None):
            return None
        period = min(1.0, job.energy.sample_every_s) if job.energy is not None else 1.0
        sampler = HostSampler(period_s=period, thermal=job.schedule.sustained, rapl=job.energy is not None)
        sampler.start()
        if job.energy is not None and sampler.rapl_reason is None:
            try:
                time.sleep(job.energy.idle_s)      # the idle baseline: nothing of ours runs yet
            except BaseException:                  # Ctrl-C/SIGTERM during the idle window
                sampler.stop()
                raise
        return sampler

    def _spawn(self, job_file: Path, work: Path, deadline_s: float, model: Path, graceful: bool = False,
               started: subprocess.Popen | None = None):
        return spawn_worker([sys.executable, str(RUNNER_PATH), str(job_file)], work, deadline_s, model,
                            graceful=graceful, started=started)

    @staticmethod
    def _kill(proc: subprocess.Popen) -> None:
        kill_group(proc)

    def _to_result(self, job: Job, spec: dict, meta: dict, arrays: dict, sha: str) -> RunResult:
        return RunResult.from_worker(meta, arrays, target=self.name, model_path=str(job.model_path),
                                     model_sha256=sha, spec=spec, fingerprint=self.fingerprint(), method=HOST_METHOD)


def wait_exit(proc: subprocess.Popen, timeout: float) -> int:
    """``proc.wait(timeout)`` that wakes the moment the process exits: Popen.wait polls with sleeps
    of up to 50 ms, which every worker's result waited out. Uses a pidfd (Linux >= 5.3); falls back
    to Popen.wait. A signal handler's exception (Ctrl-C, SIGTERM's Stop) still interrupts it."""
    try:
        fd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):       # not Linux, an old kernel, or already reaped
        return proc.wait(timeout=timeout)
    try:
        ready, _, _ = select.select([fd], [], [], timeout)   # readable once the process has exited
    finally:
        os.close(fd)
    if not ready:
        raise subprocess.TimeoutExpired(proc.args, timeout)
    return proc.wait()


GRACEFUL_S = 30.0    # how long an interrupted sustained run may take to hand over its finished windows


def spawn_worker(argv: list[str], work: Path, deadline_s: float, model: Path | str, *, graceful: bool = False,
                 started: subprocess.Popen | None = None):
    """Run a worker (``argv``, no shell) in its own session with ``work`` as its folder and read
    the ``result.json`` / ``result.npz`` it leaves there. The runner contract: exit 0 ok, 2 bad
    input, 3 internal failure. A signal -> InfraError naming it; past ``deadline_s`` -> killed with
    everything it started, InfraError; a bad model/input -> BadInput with the worker's message.

    ``started``: a pre-started worker (``host_pool``) already waiting in ``work``; it is handed the
    job file (``argv[-1]``) on its stdin instead of a new process being started, and everything
    after that is the same.

    ``graceful`` (sustained runs): on Ctrl-C/SIGTERM the worker is asked (SIGUSR1) to stop at its
    last finished window and write its result, which is returned with ``meta["interrupted_by"]``;
    a second interrupt, or no result within GRACEFUL_S, kills it as before."""
    stderr_path = work / "stderr.txt"
    if started is None:
        proc = start_worker(argv, work)
    else:
        proc = started
        try:
            proc.stdin.write(f"{argv[-1]}\n".encode())
            proc.stdin.close()
        except OSError:     # it died waiting: reported below like a fresh worker that wrote no result
            pass
    interrupted: KeyboardInterrupt | None = None
    try:
        rc = wait_exit(proc, deadline_s)
    except KeyboardInterrupt as exc:
        if not graceful:
            kill_group(proc)  # its own session gets no SIGINT from the terminal
            raise
        interrupted = exc
        rc = _hand_over(proc, exc)
    except subprocess.TimeoutExpired:
        kill_group(proc)
        raise InfraError(f"worker for {model} hung: no result after the {deadline_s:g} s deadline, "
                         "killed; raise the deadline or lower --max-time"
                         + ("" if _no_delegate(work) else ", and check the model with --delegate none")) from None
    if interrupted is not None and (rc != 0 or not (work / "result.json").is_file()):
        raise interrupted        # nothing finished to hand over
    tail = _tail(stderr_path)
    if rc < 0:
        fix = ("it ran without a delegate (--delegate none), so the crash is in LiteRT's own kernels: "
               "re-export or re-convert the model, or report the crash to LiteRT with the model"
               if _no_delegate(work) else "try --delegate none or re-export the model")
        raise InfraError(f"worker crashed with {_signal_name(rc)} while running {model} "
                         f"(runtime crash{': ' + tail if tail else ''}); {fix}")
    result_json = work / "result.json"
    if not result_json.is_file():
        raise InfraError(f"worker for {model} exited with status {rc} and wrote no result"
                         f"{': ' + tail if tail else ''}; run it by hand: {' '.join(argv)}")
    meta = json.loads(result_json.read_text())
    if rc != 0 or meta.get("status") != "ok":
        msg = meta.get("error") or f"worker exited with status {rc}"
        if meta.get("error_kind") == "bad_input" or rc == 2:
            raise BadInput(msg)
        raise InfraError(msg)
    arrays: dict[str, np.ndarray] = {}
    npz = work / "result.npz"
    if npz.is_file():
        with np.load(npz, allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
    if interrupted is not None:
        meta["interrupted_by"] = getattr(interrupted, "signal_name", "Ctrl-C")
    return meta, arrays


def _no_delegate(work: Path) -> bool:
    """The job in ``work`` already ran without a delegate (so advising --delegate none is void)."""
    try:
        return json.loads((work / "job.json").read_text()).get("delegate") == "none"
    except (OSError, ValueError, AttributeError):
        return False


def _hand_over(proc: subprocess.Popen, exc: KeyboardInterrupt) -> int:
    """Ask an interrupted sustained worker for its finished windows; its exit status, or the
    interrupt again (after killing it) when it does not answer in time or a second one comes."""
    try:
        proc.send_signal(signal.SIGUSR1)
        return proc.wait(timeout=GRACEFUL_S)
    except (KeyboardInterrupt, subprocess.TimeoutExpired):
        kill_group(proc)
        raise exc from None


def describe_model(model_path: str, *, inputs_npz: str | None = None, seed: int = 0, prepare: bool = False,
                   deadline_s: float = DESCRIBE_DEADLINE_S) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """A .tflite's inputs and outputs (and, with ``prepare``, the InputSet prepared exactly as the
    timing worker feeds it), read by the isolated model-I/O worker (``model_io.py``): an untrusted
    model is never built or allocated in this process. Returns (facts, arrays ``in::<index>``)."""
    work = tempfile.mkdtemp(prefix="edgebench-io-")
    try:
        job = {"model_path": str(Path(model_path).resolve()), "seed": seed, "prepare": prepare, "out_dir": work,
               "inputs_npz": str(Path(inputs_npz).resolve()) if inputs_npz else None}
        job_file = Path(work) / "job.json"
        job_file.write_text(json.dumps(job))
        return spawn_worker([sys.executable, str(MODEL_IO_PATH), str(job_file)], Path(work), deadline_s, model_path)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _tail(path: Path, limit: int = 300) -> str:
    """Last meaningful stderr line of the worker (runtime INFO chatter skipped)."""
    try:
        lines = [ln.strip() for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    lines = [ln for ln in lines if not ln.startswith("INFO:")]
    return lines[-1][:limit] if lines else ""


def sensor_facts(job: Job, sampler: HostSampler, readings: list[dict[str, Any]], res: RunResult) -> dict[str, Any]:
    """``sensor_readings`` (thermal, for the timeline), ``energy`` / ``energy_reason`` (RAPL)."""
    out: dict[str, Any] = {}
    if job.schedule.sustained:
        out["sensor_readings"] = [{k: r.get(k) for k in ("t", "zones_c", "cpus")} for r in readings]
        out["thermal_reason"] = sampler.thermal_reason()
    if job.energy is None:
        return out
    span = res.extra.get("timed_span_boottime_s") or [None, None]
    if sampler.rapl_reason is not None:
        out.update(energy=None, energy_reason=sampler.rapl_reason)
    elif None in span or readings[0].get("t") is None:
        out.update(energy=None, energy_reason="this OS has no CLOCK_BOOTTIME to line RAPL readings up with the run")
    else:
        rapl = [r for r in readings if r.get("rapl")]
        zones = sorted(rapl[0]["rapl"]) if rapl else []
        idle = (rapl[0]["t"], rapl[0]["t"] + job.energy.idle_s) if rapl else (0.0, 0.0)
        out["energy"] = rapl_energy([r["t"] for r in rapl], {z: [r["rapl"][z] for r in rapl] for z in zones},
                                    sampler.rapl_max_range_uj, idle, (span[0], span[1]), int(res.samples_ns.size))
    return out
