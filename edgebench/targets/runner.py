#!/usr/bin/env python3
"""edgebench worker: run one .tflite model and write raw per-inference latencies.

Standalone on purpose: the Python stdlib, numpy and a TFLite interpreter only
(``ai_edge_litert``, else ``tflite_runtime``, else ``tensorflow.lite``; the one used is
recorded as ``runtime``). No edgebench import: this file is copied as-is to devices.

Usage::

    python runner.py job.json

``job.json`` (every key optional except ``model_path``; the defaults below mirror
``targets.base.RunControl``, which the parent always sends -- this file cannot import it)::

    {"model_path": "m.tflite", "inputs_npz": "inputs.npz" | null, "threads": 4 | null,
     "delegate": "xnnpack" | "none" | "gpu" | "/path/libdelegate.so",
     "warmup_runs": 10, "warmup_time_s": 0.0, "min_runs": 662, "min_time_s": 1.0,
     "max_time_s": 60.0, "runs": null, "save_outputs": false, "seed": 0,
     "cpu_affinity": null | [4, 5, 6, 7],
     "out_dir": "<dir of job.json>",
     "period_ms": null | 10.0,                        # paced: one invoke every period_ms
     "timeline": null | {"duration_s": 600, "report_every_s": 10},   # sustained, in windows
     "load": null | {"mode": "concurrency", "level": 2}
                  | {"mode": "server", "qps": 50.0, "workers": 1, "queries": 1000}
                  | {"mode": "cold_start", "count": 5, "xnnpack_cache": false}
                  | {"mode": "first_inference", "api": "interpreter" | "compiled",
                     "xnnpack_cache_path": null | "<file>"},  # one cold-start child
     "runtime_api": "interpreter" | "compiled", "accelerator": "cpu" | "gpu" | "npu" | null,
     "gpu_precision": "fp32" | "fp16" | null, "op_profile": false, "op_profile_runs": null,
     "state": null | {"kind": ..., "ops": [...], "variable_tensors": n, "init_subgraphs": [k]},  # the file's state
     "state_rule": null | {"mode": "independent" | "streams", "starts": null | [0, 40, ...]}}

A stateful graph's outputs follow ``state_rule`` (edgebench.model.state_rule): each sample starts from the
model's initial state (independent; also without a rule), or each stream's first window does and
state is carried between its windows (streams); see ``Session.start_sample``.

Writes ``result.json`` (facts, status, error) and ``result.npz`` (``samples_ns``,
``warmup_ns``, ``out::<output name>`` when outputs are saved, ``lag_ns`` for paced runs)
into ``out_dir``. Single-stream runs add ``timed_span_boottime_s`` [start, end] on
CLOCK_BOOTTIME (the clock of /proc/uptime) so a target's sensor samples line up with the timed
loop, and ``timed_rusage`` {cpu_s, involuntary_switches, voluntary_switches}: what the kernel
counted for the whole process during the timed loop (involuntary switches = preemptions by other
work: the parent's load signal weighs them); paced runs add ``paced`` {period_ms,
achieved_period_ms, late_starts}; sustained runs add ``timeline`` {duration_s, report_every_s, start_boottime_s, windows: [{end_index, t_end_s,
boottime_end_s}]}; cold starts add ``cold_start`` {count, xnnpack_cache, cache_bytes, starts:
[{kind, cache, runtime, process_start_ms, init_ms, first_inference_ms, total_ms}]}; a
cold-start child writes {ready_ns, first_done_ns, init_ms, first_inference_ms, runtime}.

Where the time goes (single-stream runs; the logic is in ``runner_profile.py``, which must sit
next to this file): result.json also has ``runtime_api``, ``delegation`` ({delegate,
nodes_total, nodes_delegated, partitions, undelegated: {OP: n}, source, delegate_nodes,
partition_members, undelegated_nodes}) and, for ``runtime_api: "compiled"`` (LiteRT's
CompiledModel; ``invoke()`` is ``run_by_index``), ``accelerator``, ``fully_accelerated``,
``gpu_precision``, ``gpu_adapter``. With ``op_profile`` a separate child
(``runner.py --op-profile job.json``, after the timed runs) writes ``profile.json``, merged as
``op_profile_raw`` ({runs, entries: [{node, op, name, delegated, mean_us, p50_us, members?,
member_names?, inner?}], invoke: {mean_us, p50_us}, note, delegation}) or ``op_profile_error``.

Exit status: 0 ok, 2 bad input (model/data/delegate; message in result.json), 3 internal
failure. A crash (signal) or hang is detected by the parent, which owns the deadline.

Timing: only ``invoke()`` sits between two ``time.perf_counter_ns()`` calls; ``set_tensor``
happens outside the timed region. Inference i uses input sample i % N. Outputs (for drift and the
NaN/Inf check) are read in an untimed pass over every sample *before* warmup and the timed loop,
so the timed loop does nothing but set inputs and invoke. Around every timed loop the garbage
collector is frozen and disabled (``gc.freeze()`` + ``gc.disable()``) and the collections that
still happened are recorded (``gc``).

Memory (``memory`` in result.json, Linux ``/proc/self/status``): ``runtime_rss_bytes`` after
Python, numpy and the runtime are imported; ``model_load_bytes`` added by creating and allocating
the interpreter; ``inputs_bytes`` of the input arrays kept for the run (their own bytes, exact);
then the peak is reset (``/proc/self/clear_refs``) so data loading and conversion transients do not
count, and ``peak_rss_bytes`` = the peak RSS from there to the end of the timed loop minus the
input and saved-output arrays: Python + numpy + runtime + model + arena. ``model_rss_bytes`` =
``peak_rss_bytes - runtime_rss_bytes``. ``load_peak_rss_bytes`` = the process's peak RSS before
the inputs are read (Python + runtime + loading and allocating the model, transients included);
``load_and_run_peak_rss_bytes`` = the larger of the two peaks: the registry's ``peak_memory_bytes``,
what the process needed over load and run. Synthetic inputs are drawn in float32 directly.

Server mode: each query waits for its scheduled time by sleeping until ``SPIN_NS`` before it and
spinning (yielding the GIL) for the rest, so the sleep's oversleep is not charged to the model;
the issuing thread's own lateness (issue time - scheduled time, for queries that found a worker
idle) is recorded apart as ``generator_lateness_ms``. A run stopped at max_time reports the
queries that were due but not served (``backlog_ns``: time from their due time to the stop, a
lower bound of their latency).
"""

from __future__ import annotations

import gc
import json
import os
import platform
import subprocess
import sys
import time

import numpy as np


def _sibling(name: str):
    """A worker module that sits next to this file (on the host in the package, on a device in the
    same pushed folder), loaded by file name: the worker has no edgebench import."""
    mod = sys.modules.get(name)
    if mod is None:
        import importlib.util

        path = os.path.join(os.path.dirname(os.path.abspath(__file__)), name + ".py")
        spec = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
    return mod


_io = _sibling("runner_io")
_stop = _sibling("runner_stop")
_modes = _sibling("runner_modes")
from runner_io import (  # noqa: E402,F401 -- the worker's parts (FAULT_ENV re-exported for tests)
    EXIT_BAD_INPUT,
    EXIT_INFRA,
    EXIT_OK,
    FAULT_ENV,
    RUNNER_VERSION,
    GcPaused,
    JobError,
    Session,
    _json_default,
    _one_line,
    _where,
    check_flatbuffer,
    load_npz,
    load_runtime,
    owned_bytes,
    reset_peak_rss,
    rss_bytes,
    runtime_facts,
    serve_job,
)
from runner_stop import (  # noqa: E402,F401 -- the worker's stop rule (DEFAULT_MAX_TIME_S re-exported)
    ANSWER_MIN_TIME_S,
    DEFAULT_MAX_TIME_S,
    DEFAULT_MIN_RUNS,
    StopRule,
    next_checkpoint,
    p99_answered,
    rusage,
    rusage_delta,
)
from runner_modes import (  # noqa: E402,F401 -- (wait_until re-exported for tests)
    _count_nonfinite,
    boottime_s,
    run_cold_starts,
    run_concurrency,
    run_first_inference,
    run_paced,
    run_server,
    run_timeline,
    wait_until,
)


def _output_pass(job: dict, sess: Session, res: dict) -> dict[str, int]:
    """The untimed pass over every sample after the first inference: its outputs (``res["outputs"]``
    with ``save_outputs``), the state facts (``res["state"]``); returns the NaN/Inf count per output."""
    save = bool(job.get("save_outputs"))
    outputs: list[dict] = []
    nonfinite: dict[str, int] = {}
    for j in range(sess.n):
        if j:
            sess.start_sample(j)     # a stateful graph starts where the state rule says (each sample / stream)
            sess._set(j)
            sess.it.invoke()
        o = sess.read_outputs()
        _count_nonfinite(o, nonfinite)
        if save:
            outputs.append(o)
    if save:
        res["outputs"] = {d["name"]: np.concatenate([o[d["name"]] for o in outputs], axis=0)
                          for d in sess.outputs}
    del outputs
    if sess.state:
        res["state"] = {**sess.state, "handling": sess.state_handling, "fresh_interpreters": sess.fresh_interpreters,
                        "rule": "streams" if sess.resets.streams else "independent"}
    return nonfinite


def run_single(job: dict, sess: Session) -> dict:
    """First inference, an untimed pass that reads every sample's outputs, warmup, timed runs."""
    res: dict = {}
    it = sess.it
    clock = time.perf_counter_ns
    invoke = it.invoke
    set_items = sess.set_items
    n = sess.n
    single = sess.single

    # first inference (separately reported; counts as the first warmup run)
    if not single:
        sess._set(0)
    t0 = clock()
    try:
        invoke()
    except (RuntimeError, ValueError) as exc:
        raise JobError(f"inference failed on {job['model_path']}: {_one_line(exc)}") from None
    first_ns = clock() - t0
    res["first_inference_ms"] = first_ns / 1e6

    # untimed output pass: every sample's outputs (drift, NaN/Inf), before anything is timed
    nonfinite = _output_pass(job, sess, res)
    it = sess.it                # a resource-variable graph got a new interpreter per sample above
    invoke = it.invoke

    warmup = [first_ns]
    wr = int(job.get("warmup_runs", 10))
    wt = float(job.get("warmup_time_s", 0.0)) * 1e9
    w_start = clock()
    i = 1
    while i < wr or (clock() - w_start) < wt:
        if not single:
            for idx, arrs in set_items:
                it.set_tensor(idx, arrs[i % n])
        t0 = clock()
        invoke()
        warmup.append(clock() - t0)
        i += 1

    # StopRule's rule, inlined below: the hot loop makes no extra call per inference
    rule = StopRule(job)
    cap, min_runs, min_t, max_t = rule.cap, rule.min_runs, rule.min_ns, rule.max_ns
    width = rule.answer_width
    check = min_runs if width is not None and cap is None else None   # the answer rule's next checkpoint
    answer_min = ANSWER_MIN_TIME_S * 1e9
    samples = []
    append = samples.append

    b0 = boottime_s()   # the timed span on CLOCK_BOOTTIME, for the target's sensor samples (issue 17)
    ru0 = rusage()
    stop_reason = "runs"
    with GcPaused() as paused:
        start = clock()
        i = 0
        while True:
            el = clock() - start
            if cap is not None:
                if i >= cap:
                    break
            elif i >= min_runs and el >= min_t:
                stop_reason = "min_runs_and_min_time"
                break
            elif check is not None and i >= check:
                if el >= answer_min and p99_answered(samples, width):
                    stop_reason = "answer_valid"
                    break
                check = next_checkpoint(check)
            if el >= max_t:  # also caps a forced --runs, so the parent's deadline stays meaningful
                stop_reason = "max_time"
                break
            if not single:
                for idx, arrs in set_items:
                    it.set_tensor(idx, arrs[i % n])
            t0 = clock()
            invoke()
            append(clock() - t0)
            i += 1
        wall_ns = clock() - start
    res["timed_span_boottime_s"] = [b0, boottime_s()]
    res["timed_rusage"] = rusage_delta(ru0, rusage())

    res.update({
        "samples_ns": np.asarray(samples, np.int64),
        "warmup_ns": np.asarray(warmup, np.int64),
        "stop_reason": stop_reason,
        "timed_wall_s": wall_ns / 1e9,
        "nonfinite_outputs": nonfinite,
        "gc": paused.facts(),
    })
    return res


# ---------------------------------------------------------------------------- main

def apply_affinity(cpus) -> dict:
    """Pin this process (and the interpreter threads it starts) to ``cpus`` (a device profile's
    recommended cores); the facts of what was applied go into the result."""
    if not cpus:
        return {}
    want = sorted(int(c) for c in cpus)
    if not hasattr(os, "sched_setaffinity"):
        return {"cpu_affinity": None, "cpu_affinity_error": "os.sched_setaffinity is not available here"}
    try:
        os.sched_setaffinity(0, set(want))
    except OSError as exc:
        return {"cpu_affinity": None, "cpu_affinity_error": f"cannot pin to cpus {want}: {exc}"}
    return {"cpu_affinity": sorted(os.sched_getaffinity(0))}


def run_job(job: dict) -> dict:
    if "model_path" not in job:
        raise JobError("job has no model_path")
    check_flatbuffer(job["model_path"])
    pinned = apply_affinity(job.get("cpu_affinity"))   # inherited by cold-start children too
    load = job.get("load") or None
    if load is not None and load.get("mode") == "cold_start":   # a parent: no runtime import here
        return {**run_cold_starts(job, load), **pinned}
    if load is not None and load.get("mode") == "first_inference":
        res = run_first_inference(job, load)
        res["peak_rss_bytes"] = rss_bytes("VmHWM")
        return res
    runtime = load_runtime()
    gc.collect()
    rss_runtime = rss_bytes("VmRSS")
    res: dict = {"runtime": runtime[3], **pinned}
    mode = "single" if load is None else load.get("mode")
    if mode not in ("single", "concurrency", "server"):
        raise JobError(f"unknown load mode {mode!r}; use single, concurrency, server or cold_start")
    count = 1 if mode == "single" else int(load["level"] if mode == "concurrency" else load.get("workers", 1))
    sessions = [Session(runtime, job, False) for _ in range(count)]   # interpreters first: their own cost
    rss_model = rss_bytes("VmRSS")
    load_hwm = rss_bytes("VmHWM")   # the peak through import + load + allocate, before any input exists
    res["init_ms"] = sessions[0].init_ns / 1e6
    fault = os.environ.get(FAULT_ENV)
    if fault == "abort":
        os.abort()
    elif fault == "hang":
        while True:
            time.sleep(3600)
    data = load_npz(job["inputs_npz"]) if job.get("inputs_npz") else None   # read once, mapped per session
    for sess in sessions:
        sess.prepare(data)
    del data                      # arrays the sessions do not use are freed here
    inputs_bytes = owned_bytes([a for sess in sessions for _, arrs in sess.set_items for a in arrs])
    gc.collect()
    rss_inputs = rss_bytes("VmRSS")
    peak_reset = reset_peak_rss()  # loading/converting transients do not count
    if mode == "single":
        sess = sessions[0]
        loop = run_timeline if job.get("timeline") else run_paced if job.get("period_ms") is not None else run_single
        try:
            if loop is run_single:   # pauses the collector around its own timed loop
                res.update(loop(job, sess))
            else:                    # paced/sustained: paused for the whole run (warm-up included)
                with GcPaused() as paused:
                    res.update(loop(job, sess))
                res["gc"] = paused.facts()
        except RuntimeError as exc:  # a kernel rejected an input (e.g. an index out of range)
            raise JobError(f"inference failed on {job['model_path']}: {_one_line(exc)}; check the input "
                           "data (value ranges such as token ids within the vocabulary)") from None
        res["n_input_samples"] = sess.n
        res["input_source"] = "npz" if job.get("inputs_npz") else "synthetic"
        res["inputs"] = sess.inputs
        if sess.input_mapping:
            res["input_mapping"] = sess.input_mapping
        res["outputs_meta"] = sess.outputs
        res.update(runtime_facts(job, sess))
    elif mode == "concurrency":
        res.update(run_concurrency(job, sessions, count))
    else:
        res.update(run_server(job, sessions, float(load["qps"]), count, int(load["queries"])))
    hwm = rss_bytes("VmHWM")
    outputs_bytes = sum(int(a.nbytes) for a in (res.get("outputs") or {}).values())
    peak = None if hwm is None else max(hwm - inputs_bytes - outputs_bytes, 0)
    res["memory"] = {
        "runtime_rss_bytes": rss_runtime,
        "model_load_bytes": None if rss_model is None or rss_runtime is None else rss_model - rss_runtime,
        "inputs_bytes": inputs_bytes,
        "inputs_rss_bytes": None if rss_inputs is None or rss_model is None else rss_inputs - rss_model,
        "outputs_bytes": outputs_bytes,
        "process_peak_rss_bytes": hwm,
        "peak_reset_after_inputs": peak_reset,
        "peak_rss_bytes": peak,
        "model_rss_bytes": None if peak is None or rss_runtime is None else max(peak - rss_runtime, 0),
        "load_peak_rss_bytes": load_hwm,
        "load_and_run_peak_rss_bytes": (None if peak is None and load_hwm is None else
                                        max(x for x in (peak, load_hwm) if x is not None)),
    }
    res["rss_before_load_bytes"] = rss_runtime
    res["peak_rss_bytes"] = peak
    return res


WAIT_FLAG = "--wait-job"


def main(argv: list[str]) -> int:
    if len(argv) == 3 and argv[1] == PROFILE_FLAG:
        return profile_main(argv[2])
    if len(argv) == 2 and argv[1] == WAIT_FLAG:
        job_path = wait_for_job()
        if job_path is None:
            return EXIT_OK
        argv = [argv[0], job_path]
    return serve_job(argv, _work, what="runner", meta=_facts)


def wait_for_job() -> str | None:
    """A pre-started worker (``runner.py --wait-job``, the host's ``host_pool``): import the
    runtime now, leave a ``ready`` file in the working folder, then block until the parent writes
    the job file's path on stdin; None (exit quietly) when stdin closes without one."""
    try:
        load_runtime()
    except JobError:
        pass                 # no runtime: the job reports it as it would in a fresh worker
    with open("ready", "w"):
        pass
    line = sys.stdin.readline()
    return line.strip() or None


def _facts(job: dict) -> dict:
    """What result.json records even when the run fails."""
    return {
        "runner_version": RUNNER_VERSION,
        "python": platform.python_version(),
        "numpy": np.__version__,
        "platform": platform.platform(),
        "machine": platform.machine(),
        "threads": job.get("threads"),
        "threads_effective": job.get("threads") or 1,  # LiteRT / tflite_runtime Python default: 1
        "delegate": job.get("delegate", "xnnpack"),
        "pid": os.getpid(),
    }


def _work(job: dict, job_path: str) -> tuple[dict, dict]:
    arrays: dict[str, np.ndarray] = {}
    res = run_job(job)
    if job.get("op_profile") and (job.get("load") or {}).get("mode", "single") == "single":
        res.update(run_profile_child(job_path, job, job["out_dir"]))
    for key in ("samples_ns", "warmup_ns", "service_ns", "lag_ns", "backlog_ns"):
        if key in res:
            arrays[key] = np.asarray(res.pop(key), np.int64)
    for name, arr in (res.pop("outputs", None) or {}).items():
        arrays[f"out::{name}"] = arr
    return res, arrays



# ---------------------------------------------------------------------------- op profiling child

PROFILE_FLAG = "--op-profile"


def run_profile_child(job_path: str, job: dict, out_dir: str) -> dict:
    """The op profile comes from a separate process (``runner.py --op-profile job.json``) after the
    timed runs: the timed loop never runs with a profiler attached, and a crash in the profiler
    cannot lose the measured samples."""

    deadline = float(job.get("max_time_s", DEFAULT_MAX_TIME_S)) + 120.0
    try:
        proc = subprocess.run([sys.executable, os.path.abspath(__file__), PROFILE_FLAG, job_path],  # noqa: S603
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              timeout=deadline, check=False)
    except subprocess.TimeoutExpired:
        return {"op_profile_error": f"the op-profiling pass did not finish within {deadline:g} s; it was stopped "
                                    "(the timed results are kept)"}
    path = os.path.join(out_dir, "profile.json")
    if os.path.isfile(path):
        with open(path) as fh:
            got = json.load(fh)
        if "op_profile_raw" in got or "op_profile_error" in got:
            return got
    tail = (proc.stderr.decode("utf-8", "replace").strip().splitlines() or [""])[-1][:300]
    how = f"signal {-proc.returncode}" if proc.returncode < 0 else f"status {proc.returncode}"
    return {"op_profile_error": f"the op-profiling pass exited with {how} and wrote no profile"
                                f"{': ' + tail if tail else ''} (the timed results are kept)"}


def profile_main(job_path: str) -> int:
    """Child entry: prepare the job's inputs as the timed run did, profile, write profile.json."""
    rp = _where()
    if os.environ.get(FAULT_ENV) == "profile-abort":   # test-only: a profiler crash must not lose the run
        os.abort()
    with open(job_path) as fh:
        job = json.load(fh)
    out_dir = job.get("out_dir") or os.path.dirname(os.path.abspath(job_path))

    def session():   # the job's inputs prepared exactly as the timed run prepared them
        data = load_npz(job["inputs_npz"]) if job.get("inputs_npz") else None
        return Session(load_runtime(), {**job, "runtime_api": "interpreter", "delegate": "xnnpack"}, data)

    try:
        result, code = rp.profile_job({**job, "min_runs": job.get("min_runs", DEFAULT_MIN_RUNS)}, session), EXIT_OK
    except rp.Unavailable as exc:
        result, code = {"op_profile_error": str(exc)}, rp.PROFILE_EXIT_UNAVAILABLE
    except (JobError, RuntimeError, OSError, ValueError) as exc:
        result = {"op_profile_error": f"op profiling failed: {_one_line(exc)} (the timed results are kept)"}
        code = EXIT_INFRA
    tmp = os.path.join(out_dir, "profile.json.tmp")
    with open(tmp, "w") as fh:
        json.dump(result, fh, default=_json_default)
    os.replace(tmp, os.path.join(out_dir, "profile.json"))
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv))
