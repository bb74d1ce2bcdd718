"""edgebench worker, part 2 of 4: the load and regime loops other than a single back-to-back run --
concurrency, Poisson server, paced, sustained timeline and cold starts.

Standalone like ``runner.py`` (stdlib + numpy + a TFLite runtime; no edgebench import); pushed
next to it and loaded by ``runner.py``. See ``runner.py``'s docstring for the contract.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import threading
import time

import numpy as np

from runner_stop import StopRule  # noqa: E402 -- loaded by runner.py first (see its _sibling)
from runner_io import (  # noqa: E402 -- loaded by runner.py first (see its _sibling)
    GcPaused,
    JobError,
    SPIN_NS,
    Session,
    _one_line,
    load_npz,
    load_runtime,
    map_inputs,
    synthetic_inputs,
)


def _count_nonfinite(o: dict, acc: dict) -> None:
    for k, v in o.items():
        if np.issubdtype(v.dtype, np.floating):
            bad = int(v.size - np.count_nonzero(np.isfinite(v)))
            if bad:
                acc[k] = acc.get(k, 0) + bad


def _run_workers(work, n: int, barrier, start_box: list, errors: list, what: str) -> None:
    """Start n worker threads, release them together (start time in start_box[0]), join them;
    the first worker error becomes a JobError."""
    threads = [threading.Thread(target=work, args=(w,), daemon=True) for w in range(n)]
    for t in threads:
        t.start()
    start_box[0] = time.perf_counter_ns()
    barrier.wait()
    for t in threads:
        t.join()
    if errors:
        raise JobError(f"{what} worker failed: {errors[0]}", bad_input=False)


def run_concurrency(job: dict, sessions: list, level: int) -> dict:
    """``level`` interpreters in parallel threads (invoke releases the GIL); time-bounded.

    Each worker stops once the shared clock passed min_time and it did its share of
    min_runs (or its share of ``runs``), or at max_time. Throughput = completed / wall.
    """
    for s in sessions:  # warm each interpreter
        for k in range(max(1, int(job.get("warmup_runs", 10)))):
            s.one(k)
    rule = StopRule(job)
    share = math.ceil((rule.cap if rule.cap is not None else rule.min_runs) / level)
    min_t = 0.0 if rule.cap is not None else rule.min_ns
    max_t = rule.max_ns
    barrier = threading.Barrier(level + 1)
    per_worker: list[list[int]] = [[] for _ in range(level)]
    ends = [0] * level
    errors: list[str] = []
    start_box = [0]

    def work(w: int) -> None:
        s = sessions[w]
        out = per_worker[w]
        clock = time.perf_counter_ns
        try:
            barrier.wait()
            start = start_box[0]
            i = 0
            while True:
                el = clock() - start
                if (i >= share and el >= min_t) or el >= max_t:
                    break
                d = s.one(i)
                out.append((clock(), d))
                i += 1
            ends[w] = clock()
        except Exception as exc:  # noqa: BLE001 -- reported by the main thread
            errors.append(_one_line(exc))

    with GcPaused() as paused:
        _run_workers(work, level, barrier, start_box, errors, "concurrency")
    wall = max(ends) - start_box[0]
    total = sum(len(x) for x in per_worker)
    return {
        # in completion order across workers, so first/last-third drift checks mean time
        "samples_ns": np.asarray([d for _, d in sorted(v for x in per_worker for v in x)], np.int64),
        "warmup_ns": np.zeros(0, np.int64),
        "first_inference_ms": None,
        "init_ms_each": [s.init_ns / 1e6 for s in sessions],
        "load": {"mode": "concurrency", "level": level, "completed": total, "wall_s": wall / 1e9,
                 "qps": total / (wall / 1e9) if wall > 0 else None,
                 "per_worker_completed": [len(x) for x in per_worker]},
        "nonfinite_outputs": {},
        "gc": paused.facts(),
    }


def wait_until(due_ns: int, share_gil: bool = False) -> None:
    """Return at ``due_ns`` (perf_counter_ns): sleep until SPIN_NS before it, then spin.

    ``time.sleep`` oversleeps by ~0.1 ms (more on a busy machine); spinning the last stretch
    keeps that out of the measured latency. With ``share_gil`` (several workers) the spin calls
    ``time.sleep(0)``, which hands the GIL to a worker coming back from ``invoke()`` instead of
    making it wait for the 5 ms switch interval; a lone worker spins without system calls, which
    on a loaded machine are chances to be descheduled."""
    clock = time.perf_counter_ns
    left = due_ns - clock()
    if left > SPIN_NS:
        time.sleep((left - SPIN_NS) / 1e9)
    if share_gil:
        while clock() < due_ns:
            time.sleep(0)
    else:
        while clock() < due_ns:
            pass


def _ms_summary(ns: np.ndarray) -> dict | None:
    if ns.size == 0:
        return None
    ms = ns.astype(np.float64) / 1e6
    return {"count": int(ms.size), "p50": float(np.percentile(ms, 50)), "p99": float(np.percentile(ms, 99)),
            "max": float(ms.max()), "mean": float(ms.mean())}


def run_server(job: dict, sessions: list, qps: float, workers: int, queries: int) -> dict:
    """Poisson arrivals at ``qps`` (seeded) served FIFO by ``workers`` interpreters.

    Latency of query k = completion time - scheduled arrival time, so queueing delay is
    included, as in MLPerf's server scenario. A worker that is idle waits for the due time with
    ``wait_until``; the time it still started late (issue - due) is the load generator's own
    lateness, recorded apart (``generator_lateness_ms``) and bounding how much of a latency is
    not the system's. Queries due before a max_time stop but not served are ``backlog_ns``.
    """
    for s in sessions:
        for k in range(max(1, int(job.get("warmup_runs", 10)))):
            s.one(k)
    rng = np.random.default_rng(int(job.get("seed", 0)))
    gaps = rng.exponential(1.0 / qps, size=queries)
    arrivals = (np.cumsum(gaps) * 1e9).astype(np.int64)
    lat = np.zeros(queries, np.int64)
    service = np.zeros(queries, np.int64)
    late = np.full(queries, -1, np.int64)
    done = np.zeros(queries, np.int64)
    lock = threading.Lock()
    nxt = [0]
    max_t = StopRule(job).max_ns
    barrier = threading.Barrier(workers + 1)
    start_box = [0]
    stops = [0] * workers
    errors: list[str] = []

    def work(w: int) -> None:
        s = sessions[w]
        clock = time.perf_counter_ns
        try:
            barrier.wait()
            start = start_box[0]
            while True:
                with lock:
                    k = nxt[0]
                    if k >= queries:
                        return
                    nxt[0] = k + 1
                due = start + int(arrivals[k])
                now = clock()
                if now - start > max_t:
                    stops[w] = now - start
                    return
                idle = due > now
                if idle:
                    wait_until(due, share_gil=workers > 1)
                issued = clock()
                svc = s.one(k)
                end = clock()
                service[k] = svc
                lat[k] = end - due
                done[k] = end - start
                if idle:
                    late[k] = max(issued - due, 0)
        except Exception as exc:  # noqa: BLE001
            errors.append(_one_line(exc))

    with GcPaused() as paused:
        _run_workers(work, workers, barrier, start_box, errors, "server")
    completed = done > 0
    n_done = int(completed.sum())
    span = int(done[completed].max()) if n_done else 0
    stop = max(stops) if any(stops) else 0
    backlog = np.zeros(0, np.int64)
    if stop:   # due before the stop, never served: latency at least stop - due
        unserved = ~completed & (arrivals <= stop)
        backlog = (stop - arrivals[unserved]).astype(np.int64)
    return {
        "samples_ns": lat[completed],
        "service_ns": service[completed],
        "backlog_ns": backlog,
        "warmup_ns": np.zeros(0, np.int64),
        "first_inference_ms": None,
        "load": {"mode": "server", "target_qps": qps, "workers": workers, "issued": queries,
                 "completed": n_done, "wall_s": span / 1e9,
                 "achieved_qps": n_done / (span / 1e9) if span > 0 else None,
                 # the rate the seeded schedule really offered (finite-sample Poisson noise)
                 "offered_qps": queries / (arrivals[-1] / 1e9) if arrivals[-1] > 0 else None,
                 "truncated_by_max_time": n_done < queries,
                 "backlog": int(backlog.size),
                 "generator_lateness_ms": _ms_summary(late[completed & (late >= 0)]),
                 "spin_ns": SPIN_NS},
        "nonfinite_outputs": {},
        "gc": paused.facts(),
    }


# ---------------------------------------------------------------------------- sustained, paced, cold start
# Issue 17. Three entries, each its own function: ``run_paced`` (one invoke every period_ms),
# ``run_timeline`` (a sustained run closed into windows; back-to-back or paced) and
# ``run_cold_starts`` (N fresh worker processes, each child running ``run_first_inference``).
# Sensors (thermal zones, CPU frequencies, battery, RAPL) are read by the target outside this
# process, so nothing here perturbs the timed loop; the loops report their spans on CLOCK_BOOTTIME
# (the clock of /proc/uptime) so the target's samples line up with the timed inferences.

# The worker entry point beside this file: a cold start is a fresh run of it.
RUNNER_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "runner.py")
TIMELINE_MAX_SAMPLES = 5_000_000   # 40 MB of int64 per sustained run; past it the run stops ("sample_cap")
LATE_FRACTION = 0.10               # a paced invoke starting > 10% of a period after its slot is "late"
COLD_START_TIMEOUT_S = 300.0       # one fresh process: start, load, one inference


def boottime_s():
    """Seconds on CLOCK_BOOTTIME (what /proc/uptime counts); None where it does not exist."""
    clk = getattr(time, "CLOCK_BOOTTIME", None)
    return None if clk is None else time.clock_gettime(clk)


def _warm(job: dict, sess: Session) -> tuple[int, list]:
    """First inference, then warm-up runs back-to-back (as in run_single); ns each."""
    try:
        first_ns = sess.one(0)
    except (RuntimeError, ValueError) as exc:
        raise JobError(f"inference failed on {job['model_path']}: {_one_line(exc)}") from None
    warmup = [first_ns]
    wr = int(job.get("warmup_runs", 10))
    wt = float(job.get("warmup_time_s", 0.0)) * 1e9
    w_start = time.perf_counter_ns()
    i = 1
    while i < wr or (time.perf_counter_ns() - w_start) < wt:
        warmup.append(sess.one(i))
        i += 1
    return first_ns, warmup


def _period_ns(job: dict, warmup: list) -> int | None:
    """The job's period in ns; a period the invoke itself cannot keep is bad input, said up front."""
    if job.get("period_ms") is None:
        return None
    period = int(float(job["period_ms"]) * 1e6)
    w = sorted(warmup[1:] or warmup)
    med = w[len(w) // 2]
    if med >= period:
        raise JobError(f"--period-ms {float(job['period_ms']):g} is shorter than one inference of {job['model_path']} "
                       f"(median {med / 1e6:.3g} ms over {len(w)} warm-up runs), so the invokes cannot keep "
                       f"that pace; use a --period-ms above {med / 1e6:.3g}")
    return period


def _output_pass(sess: Session) -> dict:
    """NaN/Inf count over one untimed pass of the input samples (after the timed loop)."""
    nonfinite: dict = {}
    for j in range(sess.n):
        sess.start_sample(j)
        sess._set(j)
        sess.it.invoke()
        _count_nonfinite(sess.read_outputs(), nonfinite)
    return nonfinite


def _sleep_until(due_ns: int) -> None:
    now = time.perf_counter_ns()
    if due_ns > now:
        time.sleep((due_ns - now) / 1e9)


def run_paced(job: dict, sess: Session) -> dict:
    """One invoke every ``period_ms``, sleeping in between (an audio or camera callback's pattern).

    Each sample is one ``invoke()`` only. The schedule is fixed-rate from the first timed invoke;
    an invoke that cannot start in its slot starts at once, without a catch-up burst, and its lag
    counts. Stops by the run-control rule of ``run_single``. Extra result: ``paced``
    {period_ms, achieved_period_ms, late_starts} and the array ``lag_ns`` (start - slot).
    """
    first_ns, warmup = _warm(job, sess)
    period = _period_ns(job, warmup)
    rule = StopRule(job)
    clock = time.perf_counter_ns
    invoke = sess.it.invoke
    samples, starts, lags = [], [], []
    b0 = boottime_s()
    start = clock()
    due = start
    i = 0
    while True:
        stop_reason = rule.reason(i, clock() - start)
        if stop_reason is not None:
            break
        if not sess.single:
            sess._set(i)
        _sleep_until(due)
        t0 = clock()
        invoke()
        t1 = clock()
        samples.append(t1 - t0)
        starts.append(t0)
        lags.append(t0 - due)
        due = max(due + period, t1)
        i += 1
    wall_ns = clock() - start
    b1 = boottime_s()
    achieved = (starts[-1] - starts[0]) / (len(starts) - 1) / 1e6 if len(starts) > 1 else None
    return {
        "samples_ns": np.asarray(samples, np.int64), "warmup_ns": np.asarray(warmup, np.int64),
        "lag_ns": np.asarray(lags, np.int64), "first_inference_ms": first_ns / 1e6,
        "stop_reason": stop_reason, "timed_wall_s": wall_ns / 1e9, "nonfinite_outputs": _output_pass(sess),
        "timed_span_boottime_s": [b0, b1],
        "paced": {"period_ms": period / 1e6, "achieved_period_ms": achieved,
                  "late_starts": sum(1 for x in lags if x > LATE_FRACTION * period)},
    }


def run_timeline(job: dict, sess: Session) -> dict:
    """A sustained run: ``timeline.duration_s`` seconds of invokes (back-to-back, or one every
    ``period_ms``), closed into a window every ``timeline.report_every_s``.

    Windows are boundaries only -- ``{end_index, t_end_s, boottime_end_s}`` (samples
    [previous end_index, end_index) belong to it) -- the parent derives each window's statistics
    from the raw samples. Stops at the duration (``stop_reason`` "duration") or, for very fast
    models, at TIMELINE_MAX_SAMPLES ("sample_cap").
    """
    import signal
    from array import array

    stop: list[int] = []        # the parent asks for the finished windows with SIGUSR1 (Ctrl-C/SIGTERM there)
    try:
        signal.signal(signal.SIGUSR1, lambda signum, _frame: stop.append(signum))
    except (ValueError, OSError, AttributeError):   # not the main thread / no SIGUSR1 on this platform
        pass
    tl = job["timeline"]
    dur = float(tl["duration_s"]) * 1e9
    every = float(tl["report_every_s"]) * 1e9
    first_ns, warmup = _warm(job, sess)
    period = _period_ns(job, warmup)
    clock = time.perf_counter_ns
    invoke = sess.it.invoke
    samples, lags = array("q"), array("q")
    windows: list[dict] = []
    b0 = boottime_s()
    start = clock()
    due = start
    edge = every
    i = 0
    stop_reason = "duration"
    while True:
        if stop:                 # keep the finished windows, drop the unfinished one
            keep = windows[-1]["end_index"] if windows else 0
            del samples[keep:]
            if period is not None:
                del lags[keep:]
            i = keep
            stop_reason = "interrupted"
            break
        el = clock() - start
        if el >= edge or el >= dur or len(samples) >= TIMELINE_MAX_SAMPLES:
            windows.append({"end_index": len(samples), "t_end_s": el / 1e9, "boottime_end_s": boottime_s()})
            while edge <= el:
                edge += every
            if el >= dur:
                break
            if len(samples) >= TIMELINE_MAX_SAMPLES:
                stop_reason = "sample_cap"
                break
        if not sess.single:
            sess._set(i)
        if period is not None:
            _sleep_until(due)
        t0 = clock()
        invoke()
        t1 = clock()
        samples.append(t1 - t0)
        if period is not None:
            lags.append(t0 - due)
            due = max(due + period, t1)
        i += 1
    wall_ns = (windows[-1]["t_end_s"] * 1e9 if windows else 0.0) if stop_reason == "interrupted" else clock() - start
    res = {
        "samples_ns": np.frombuffer(samples, np.int64).copy(), "warmup_ns": np.asarray(warmup, np.int64),
        "first_inference_ms": first_ns / 1e6, "stop_reason": stop_reason, "timed_wall_s": wall_ns / 1e9,
        "nonfinite_outputs": _output_pass(sess), "timed_span_boottime_s": [b0, boottime_s()],
        "timeline": {"duration_s": float(tl["duration_s"]), "report_every_s": float(tl["report_every_s"]),
                     "start_boottime_s": b0, "windows": windows},
    }
    if period is not None:
        res["lag_ns"] = np.frombuffer(lags, np.int64).copy()
        res["paced"] = {"period_ms": period / 1e6, "achieved_period_ms": (wall_ns / i / 1e6) if i else None,
                        "late_starts": sum(1 for x in lags if x > LATE_FRACTION * period)}
    return res


def _compiled_api():
    """LiteRT's CompiledModel API (the one that takes an XNNPACK weight cache path)."""
    try:
        from ai_edge_litert.compiled_model import CompiledModel  # type: ignore
        from ai_edge_litert.hardware_accelerator import HardwareAccelerator  # type: ignore
        from ai_edge_litert.options import CpuOptions, Options  # type: ignore
    except ImportError:
        raise JobError("--xnnpack-cache needs ai-edge-litert's CompiledModel API (pip install ai-edge-litert), "
                       "which this Python lacks; drop --xnnpack-cache") from None
    return CompiledModel, HardwareAccelerator, CpuOptions, Options


def _compiled_first_inference(api, job: dict, cache_path: str | None) -> tuple[int, int]:
    """(load + buffers ns, first run ns) with the CompiledModel API on the CPU (XNNPACK).

    Inputs: sample 0 of the InputSet (or the seeded synthetic one); the API exposes no input
    quantization, so a quantized input fed float data gets zeros (the value does not change what a
    first inference costs)."""
    CompiledModel, HardwareAccelerator, CpuOptions, Options = api
    delegate = job.get("delegate", "xnnpack")
    if delegate != "xnnpack":
        raise JobError(f"--xnnpack-cache needs the XNNPACK delegate, but --delegate is {delegate!r}; "
                       "use --delegate xnnpack")
    opts = Options(hardware_accelerators=HardwareAccelerator.CPU,
                   cpu_options=CpuOptions(num_threads=int(job.get("threads") or 1),
                                          xnnpack_weight_cache_path=cache_path or ""))
    t0 = time.perf_counter_ns()
    try:
        model = CompiledModel.from_file(job["model_path"], options=opts)
        ins, outs = model.create_input_buffers(0), model.create_output_buffers(0)
    except Exception as exc:  # noqa: BLE001 -- the wrapper raises RuntimeError/ValueError variants
        raise JobError(f"cannot load {job['model_path']} with the CompiledModel API: {_one_line(exc)}") from None
    init_ns = time.perf_counter_ns() - t0
    key = next(iter(model.get_signature_list()))
    details = model.get_input_tensor_details(key)
    names = list(model.get_signature_by_index(0)["inputs"])
    dets = [{"name": n, "shape": list(details[n]["shape"]), "dtype": np.dtype(details[n]["dtype"]).name,
             "scale": 0.0, "zero_point": 0} for n in names]
    if job.get("inputs_npz"):
        data = map_inputs(load_npz(job["inputs_npz"]), dets, job["inputs_npz"])
    else:
        data = synthetic_inputs(dets, int(job.get("seed", 0)), n=1)
    for buf, det in zip(ins, dets):
        arr = np.asarray(data[det["name"]])[:max(1, det["shape"][0] or 1)]
        want = np.dtype(det["dtype"])
        if arr.dtype != want:
            arr = arr.astype(want) if np.issubdtype(arr.dtype, np.integer) or np.issubdtype(want, np.floating) \
                else np.zeros(det["shape"], want)
        buf.write(np.ascontiguousarray(arr.reshape(det["shape"])))
    t0 = time.perf_counter_ns()
    try:
        model.run_by_index(0, ins, outs)
    except Exception as exc:  # noqa: BLE001
        raise JobError(f"inference failed on {job['model_path']}: {_one_line(exc)}") from None
    return init_ns, time.perf_counter_ns() - t0


def run_first_inference(job: dict, load: dict) -> dict:
    """A cold-start child: import the runtime (then it is *ready*), load + allocate, one inference.
    Times are on the monotonic clock, which the parent shares (CLOCK_MONOTONIC is system-wide)."""
    runtime = load_runtime()
    api = _compiled_api() if load.get("api") == "compiled" else None
    ready = time.monotonic_ns()
    if api is not None:
        init_ns, first_ns = _compiled_first_inference(api, job, load.get("xnnpack_cache_path"))
        name = f"{runtime[3]} CompiledModel"
    else:
        data = load_npz(job["inputs_npz"]) if job.get("inputs_npz") else None
        sess = Session(runtime, job, data)
        init_ns = sess.init_ns
        try:
            first_ns = sess.one(0)
        except (RuntimeError, ValueError) as exc:
            raise JobError(f"inference failed on {job['model_path']}: {_one_line(exc)}") from None
        name = f"{runtime[3]} Interpreter"
    return {"ready_ns": ready, "first_done_ns": time.monotonic_ns(), "init_ms": init_ns / 1e6,
            "first_inference_ms": first_ns / 1e6, "runtime": name}


def run_cold_starts(job: dict, load: dict) -> dict:
    """Parent of ``count`` fresh worker processes, one after another (``python runner.py child.json``).

    Per start: ``process_start_ms`` (spawn -> interpreter, numpy and LiteRT imported),
    ``init_ms`` (model load + allocate), ``first_inference_ms``, ``other_ms`` (the rest: reading the
    job and the inputs; the four add up to ``total_ms``), ``total_ms`` (spawn -> first
    result). Without a cache the children use the Interpreter API (what the timed runs use). With
    ``xnnpack_cache`` they use the CompiledModel API and alternate: a start without a cache, then
    one with the weight cache file -- the first cached start writes it ("build"), later ones load
    it ("warm"). The OS page cache is not dropped (that needs root): starts after the first find
    the model file in memory."""
    count = int(load["count"])
    use_cache = bool(load.get("xnnpack_cache"))
    out_dir = os.path.abspath(job["out_dir"])
    cache_path = os.path.join(out_dir, "xnnpack-weights.cache")
    if os.path.exists(cache_path):
        os.remove(cache_path)
    plan = ([("no_cache", None), ("cache", cache_path)] * count) if use_cache else [("interpreter", None)] * count
    starts = []
    for k, (kind, cpath) in enumerate(plan):
        d = os.path.join(out_dir, f"start{k}")
        os.makedirs(d, exist_ok=True)
        child = {"threads": job.get("threads"), "delegate": job.get("delegate", "xnnpack"),
                 "seed": job.get("seed", 0)}
        child.update(model_path=os.path.abspath(job["model_path"]), out_dir=d,
                     inputs_npz=os.path.abspath(job["inputs_npz"]) if job.get("inputs_npz") else None,
                     load={"mode": "first_inference", "api": "compiled" if use_cache else "interpreter",
                           "xnnpack_cache_path": cpath})
        with open(os.path.join(d, "job.json"), "w") as fh:
            json.dump(child, fh)
        cache_state = None if cpath is None else ("warm" if os.path.exists(cpath) else "build")
        t0 = time.monotonic_ns()
        try:
            proc = subprocess.run([sys.executable, RUNNER_SCRIPT, os.path.join(d, "job.json")],
                                  stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                  timeout=COLD_START_TIMEOUT_S, check=False)
        except subprocess.TimeoutExpired:
            raise JobError(f"cold start {k + 1} of {job['model_path']} gave no result within "
                           f"{COLD_START_TIMEOUT_S:g} s and was killed", bad_input=False) from None
        try:
            with open(os.path.join(d, "result.json")) as fh:
                meta = json.load(fh)
        except (OSError, ValueError):
            tail = (proc.stderr or b"").decode("utf-8", "replace").strip().splitlines()[-1:] or [""]
            raise JobError(f"cold start {k + 1} of {job['model_path']} exited {proc.returncode} without a "
                           f"result: {tail[0][:300]}", bad_input=False) from None
        if proc.returncode != 0 or meta.get("status") != "ok":
            raise JobError(f"cold start {k + 1}: {meta.get('error') or 'exit ' + str(proc.returncode)}",
                           bad_input=meta.get("error_kind") == "bad_input")
        phase = {"process_start_ms": (meta["ready_ns"] - t0) / 1e6, "init_ms": meta["init_ms"],
                 "first_inference_ms": meta["first_inference_ms"], "total_ms": (meta["first_done_ns"] - t0) / 1e6}
        # what no phase holds (reading the job and the inputs after "ready"): the phases add up to total
        phase["other_ms"] = phase["total_ms"] - phase["process_start_ms"] - phase["init_ms"] - phase["first_inference_ms"]
        starts.append({"kind": kind, "cache": cache_state, "runtime": meta["runtime"], **phase,
                       "peak_rss_bytes": meta.get("peak_rss_bytes")})
    return {"samples_ns": np.zeros(0, np.int64),      # no timed loop; result.npz is still written
            "cold_start": {"count": count, "xnnpack_cache": use_cache, "starts": starts,
                           "cache_bytes": os.path.getsize(cache_path) if os.path.exists(cache_path) else None}}
