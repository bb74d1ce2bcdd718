"""``run_bench(settings)``: benchmark .tflite models on targets and return the result document.

One row per model x target: raw samples, ``latency_ms`` (``rows.Latency.to_dict()``), warmup
apart, init and first-inference time, peak RSS, model cost (FLOPs from the graph) and
achieved GFLOP/s / % of this machine's cached peak, plus the optional load-mode results
(``concurrency``, ``server``, ``sla``).

``repeats`` > 1 runs each model x target in that many worker processes, interleaved across the
models (every model's first process, then every model's second, ...: ABAB, so load that comes and
goes hits every model alike; ``targets.loop.measure_in_rounds``): the row's ``latency_ms`` and
``samples_ns`` pool every process's samples (in process order), and ``repeats`` lists each
process's own summary and its ``order`` on the target -- the run-level replicates that ``results
compare`` needs to tell a change from run-to-run noise (``stats.MIN_REPEATS``).

A model file that is missing, truncated or not a flatbuffer fails the whole call up front
(``BadInput``) before anything is timed; a model that fails while running (bad data, delegate,
crash, hang) becomes a ``status: "failed"`` row with ``error`` and ``exit_code`` and the other
models still run; ``raise_for_failures(doc)`` turns the worst failure into its exception after
the caller has saved/printed the partial results.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Callable

import numpy as np

from edgebench.bench import load, sustain
from edgebench.bench.peak import load_cached, peak_for_threads
from edgebench.core.errors import BadInput, EdgebenchError, InfraError
from edgebench.core.fingerprint import emulation_warning, host_fingerprint, sha256_file
from edgebench.model import tflite_model
from edgebench.model.inputs import check_npz_inputs, standin
from edgebench.model.tflite_model import compiled_for, precision_detail
from edgebench.model.tflite_model import precision as tflite_precision
from edgebench.rows import Cost, Delegation, Document, InferenceRow, Latency
from edgebench.targets.base import Job, RunOptions, RunResult, Schedule
from edgebench.targets.energy import EnergySettings
from edgebench.targets.loop import PROCESS_ORDER, Stop, is_device, measure_in_rounds, resolve_targets, run_on_targets
from edgebench.targets.measured import measured_fields, preemptions
from edgebench.targets.row_parts import runtime_row_parts
from edgebench.targets.runner_io import NOT_INPUTS, JobError, pair_inputs


@dataclass(frozen=True)
class BenchSettings:
    """Everything ``edgebench bench`` can be told: how each row runs is the shared ``RunOptions``
    (run control included), the rest is bench's own."""
    models: tuple[str, ...]
    targets: str = "host"
    run: RunOptions = field(default_factory=RunOptions)
    data: str | None = None
    concurrency: tuple[int, ...] = ()
    server_qps: float | None = None
    server_workers: int = 1
    sla_p99_ms: float | None = None
    save_outputs: bool = False
    deadline_s: float | None = None     # None -> the run control's deadline
    seed: int = 0
    schedule: Schedule = field(default_factory=Schedule)   # sustained / paced (edgebench.bench.sustain)
    cold_starts: int = 0
    xnnpack_cache: bool = False
    energy: EnergySettings | None = None

    def validate(self) -> None:
        if not self.models:
            raise BadInput("no model given; pass one or more .tflite files")
        self.run.validate()
        self.schedule.validate()
        if self.energy is not None:
            self.energy.validate()
        if self.cold_starts < 0:
            raise BadInput(f"--cold-starts must be >= 0, got {self.cold_starts}")
        if self.xnnpack_cache and not self.cold_starts:
            raise BadInput("--xnnpack-cache applies to cold starts; add --cold-starts N (e.g. 5)")
        if self.xnnpack_cache and self.run.delegate == "none":
            raise BadInput("--xnnpack-cache caches XNNPACK's packed weights, and --delegate none runs without "
                           "XNNPACK: drop one of them")
        if self.run.repeats > 1 and (self.schedule.sustained or self.schedule.paced or self.cold_starts):
            raise BadInput("--repeats applies to back-to-back runs; drop it for --duration/--period-ms/"
                           "--cold-starts (each of those is one measured process)")
        if any(c < 1 for c in self.concurrency):
            raise BadInput("--concurrency levels must be positive integers")
        if self.server_qps is not None and self.server_qps <= 0:
            raise BadInput(f"--server-qps must be > 0, got {self.server_qps}")
        if self.sla_p99_ms is not None and self.sla_p99_ms <= 0:
            raise BadInput(f"--sla-p99-ms must be > 0, got {self.sla_p99_ms}")
        if self.data is not None and not Path(self.data).is_file():
            raise BadInput(f"--data {self.data}: file not found; give an .npz InputSet")


def check_data_headers(path: str, heads: dict[str, tuple[tuple[int, ...], np.dtype]],
                       infos: dict[str, dict[str, Any]]) -> None:
    """``bench --data``'s arrays as their ``.npy`` headers declare them, against every model's inputs,
    paired as the runner pairs them (``runner_io.pair_inputs``) and held to what it accepts
    (``prepare_samples``: one sample's shape, a dynamic dim free, whole batches; ``_coerce``: a dtype
    it converts) -- before a byte of array data is read. BadInput names the file, the array, its
    declared shape and the model's input shape."""
    standins = {k: standin(shape, dtype) for k, (shape, dtype) in heads.items() if k not in NOT_INPUTS}
    for model, info in infos.items():
        inputs = info["inputs"]
        try:
            pairs, _how = pair_inputs(standins, inputs, path)
        except JobError as e:
            raise BadInput(f"--data: {e} (nothing was read)") from None
        for det in inputs:
            key = pairs[det["name"]]
            shape, dtype = heads[key]
            want, sig = list(det["shape"]), list(det.get("shape_signature") or det["shape"])
            what = (f"--data {path}: array {key!r} declares shape {list(shape)} {dtype.name}, but the input "
                    f"{det['name']!r} of {Path(model).name} is {want} {det['dtype']}")
            fits = len(shape) == len(want) and all(w == a or s == -1 for w, s, a in zip(want[1:], sig[1:], shape[1:]))
            if not fits:
                raise BadInput(f"{what} (one sample {want[1:]}, the leading dim counts samples); nothing was read: "
                               "save the data as [N, ...one sample] or resize it")
            batch = want[0] if want[0] > 0 else 1
            if shape[0] < batch or shape[0] % batch:
                raise BadInput(f"{what}: {shape[0]} samples is not a whole number of batches of {batch}; nothing "
                               f"was read: give N*{batch} samples")
            numeric = np.issubdtype(dtype, np.floating) or np.issubdtype(dtype, np.integer) or dtype == np.bool_
            want_dt = np.dtype(det["dtype"])
            if not numeric or (np.issubdtype(want_dt, np.integer) and np.issubdtype(dtype, np.floating)
                               and not det.get("quantization")):
                raise BadInput(f"{what}: the runner cannot convert {dtype.name} to {want_dt.name}; nothing was "
                               f"read: give {want_dt.name} data")


def _job(settings: BenchSettings, model: str, gpu_precision: str | None = None) -> Job:
    return Job(model_path=model, inputs_npz=settings.data, threads=settings.run.threads, delegate=settings.run.delegate,
               control=settings.run.control, save_outputs=settings.save_outputs, deadline=settings.deadline_s,
               seed=settings.seed, schedule=settings.schedule, energy=settings.energy,
               runtime_api=settings.run.runtime_api, accelerator=settings.run.accelerator, gpu_precision=gpu_precision,
               op_profile=settings.run.op_profile)


def failed_row(target_name: str, model: str, err: EdgebenchError, **known: Any) -> InferenceRow:
    return InferenceRow(target=target_name, model=Path(model).stem, model_path=str(model), status="failed",
                        error=str(err), exit_code=err.exit_code, error_type=type(err).__name__, **known)


def _run_warnings(res: RunResult, lat: Latency, settings: BenchSettings, *, interrupted: bool,
                  processes: int) -> list[str]:
    """The row's warnings from its run: the latency's (with several processes, each process's own --
    a pooled drift check would read run-to-run noise as drift -- and the run-to-run spread), an
    interrupted ``--repeats``, NaN/Inf outputs, a run stopped by --max-time."""
    reps = res.extra.get("repeats")
    warnings = list(res.extra["repeat_warnings"]) if reps else list(lat.warnings)
    if interrupted and processes < settings.run.repeats:
        warnings.append(f"interrupted: {processes} of {settings.run.repeats} worker processes were measured; "
                        "the row pools those")
    nonfinite = res.extra.get("nonfinite_outputs") or {}
    if nonfinite:
        bad = ", ".join(f"{k}: {v}" for k, v in nonfinite.items())
        warnings.append(f"NaN/Inf in outputs ({bad} values over the first pass); the model or its "
                        "inputs are broken: check the data range and the conversion")
    if res.extra.get("stop_reason") == "max_time":
        ctl = settings.run.control
        wanted = f"--runs {ctl.runs}" if ctl.runs is not None else f"--min-runs {ctl.min_runs}"
        warnings.append(f"stopped at --max-time {ctl.max_time_s:g} s after {lat.samples} runs, "
                        f"before {wanted}; raise --max-time")
    return warnings


def _with_speed(cost: Cost, info: dict[str, Any], lat: Latency, target, peak: dict[str, Any] | None,
                threads_eff: int) -> Cost:
    """``cost`` with the achieved GFLOP/s at p50 and, on this host with a measured peak, its % of peak."""
    if info["flops"] and lat.p50:
        # p50, not mean: the kernel's typical speed, robust to background-load spikes
        achieved = info["flops"] / (lat.p50 / 1e3) / 1e9
        cost = replace(cost, achieved_gflops_per_s=achieved)
        if is_device(target):
            cost = replace(cost, peak_note="peak GFLOP/s is measured per machine (edgebench env --peak); "
                                           "none is known for this device, so no % of peak")
        elif peak:
            ref = peak_for_threads(peak, threads_eff)
            cost = replace(cost, peak_gflops=ref, pct_of_peak=100.0 * achieved / ref)
    return cost


def bench_one(target, model: str, info: dict[str, Any], settings: BenchSettings,
              peak: dict[str, Any] | None, progress: Callable[[str], None] | None = None,
              gpu_precision: str | None = None, measured: list[RunResult] | None = None,
              order: list[int] | None = None, started: list[float] | None = None) -> InferenceRow:
    """Benchmark one model on one target; failures become a failed row. ``measured``: its worker
    processes, already run (``--repeats`` interleaved with the other models: ``run_bench``), with
    their ``order`` in the target's sequence; None runs them here, one after another."""
    job = _job(settings, model, gpu_precision)
    name = Path(model).stem
    found = tflite_precision(info)       # a bench row's precision is the one its file has
    known = dict(model_sha256=sha256_file(model), size_bytes=info["size_bytes"], threads=settings.run.threads,
                 precision=found, precision_found=found, precision_detail=precision_detail(info),
                 delegate=settings.run.delegate, runtime_api=settings.run.runtime_api, accelerator=settings.run.accelerator,
                 gpu_precision=gpu_precision)
    cost = Cost(flops=info["flops"], counted_ops=info["counted_ops"], quantized=info["quantized"],
                quantization_coverage=info["quantization_coverage"],
                float_ops=tuple(sorted({o["op"] for o in info["float_ops"]})), inputs=tuple(info["inputs"]),
                outputs=tuple(info["outputs"]), flops_note=info.get("flops_note"))
    if getattr(target, "summary_rows", False):      # a device farm: summary rows per phone, no samples
        return _farm_rows(target, job, known, cost)
    try:
        if measured is None:
            results = []
            for k in range(settings.run.repeats):
                if progress and settings.run.repeats > 1:
                    progress(f"{name} on {target.name} (process {k + 1}/{settings.run.repeats})")
                results.append(target.run(job))
        else:
            results = measured
            if not results:
                raise InfraError(f"not run: interrupted before {name} on {target.name} was measured")
        res = RunResult.pooled(results, name, order, started)
        if res.status != "ok":        # an interleaved process failed (its error, its exit code)
            raise (BadInput if res.extra.get("exit_code") == 2 else InfraError)(res.error or "worker failed")
        pooled = np.asarray(res.samples_ns, np.int64)
        lat = Latency.from_samples(pooled, what=f"run of {name}", preemptions=preemptions(res))
        threads_eff = res.extra.get("threads") or 1  # LiteRT's Python default is 1 thread
        warnings = _run_warnings(res, lat, settings, interrupted=measured is not None, processes=len(results))
        where_parts, where_warnings = runtime_row_parts(res.extra, lat, f"{name} on {target.name}")
        warnings.extend(where_warnings)
        if info.get("aot") and where_parts.get("delegation") is None:
            where_parts["delegation"] = _compiled_delegation(info)   # what the compiled file holds (issue 34)
        emulated = emulation_warning(res.fingerprint)
        if emulated:
            warnings.append(emulated)
        cost = _with_speed(cost, info, lat, target, peak, threads_eff)
        row = InferenceRow(
            target=target.name, model=name, model_path=str(model),
            **{**known, **measured_fields(res, f"run of {name}", lat),
               **{k: v for k, v in where_parts.items() if v is not None}},
            threads_effective=threads_eff, cost=cost,
        )
        stopped = res.extra.get("interrupted_by") if res.extra.get("stop_reason") == "interrupted" else None
        if stopped:
            tl = res.extra.get("timeline") or {}
            done = len(tl.get("windows") or ())
            warnings.append(f"interrupted ({stopped}) during the sustained run: its {done} finished window(s) "
                            f"({res.extra.get('timed_wall_s') or 0:.1f} s of {tl.get('duration_s', 0):g} s) are kept, "
                            "the unfinished one is dropped")
        row = sustain.attach(row.replace(warnings=tuple(warnings)), target, job, res,
                             cold_starts=0 if stopped else settings.cold_starts,
                             xnnpack_cache=settings.xnnpack_cache, progress=progress)
        if stopped:
            raise Stop(stopped, row=row)     # the loop keeps this row and stops
        warnings = list(row.warnings)
        loadjob = replace(job, save_outputs=False, schedule=Schedule(), energy=None, op_profile=False)
        if settings.concurrency:
            row = row.replace(concurrency=tuple(load.concurrency(target, loadjob, list(settings.concurrency),
                                                                 progress)))
        if settings.server_qps is not None:
            if progress:
                progress(f"server {settings.server_qps:g} QPS")
            srv = load.server(target, loadjob, settings.server_qps, settings.server_workers)
            row = row.replace(server=srv)
            warnings.extend(srv["warnings"])
            if srv["overloaded"]:
                warnings.append(f"server mode: achieved {srv['achieved_qps']:.1f} of "
                                f"{settings.server_qps:g} QPS; the target is overloaded, lower --server-qps")
        if settings.sla_p99_ms is not None:
            stats = Latency.from_samples(res.samples_ns, what=f"run of {name}")
            row = row.replace(sla=load.sla_search(target, loadjob, settings.sla_p99_ms, settings.server_workers,
                                                  stats, progress))
        return row.replace(warnings=tuple(warnings))
    except EdgebenchError as err:
        return failed_row(target.name, model, err, cost=cost, **known)


def _farm_rows(target, job: Job, known: dict[str, Any], cost: Cost) -> tuple[InferenceRow, ...] | InferenceRow:
    """A Device Farm target's rows (one per phone of its pool: benchmark_model's summary statistics)
    with what bench knows of the model; a failure of the whole run is one failed row."""
    try:
        rows = target.bench_rows(job)
    except EdgebenchError as err:
        return failed_row(target.name, job.model_path, err, cost=cost, **known)
    out = []
    for row in rows:
        fill = {k: v for k, v in known.items() if getattr(row, k) is None}
        out.append(row.replace(cost=cost, **fill))
    return tuple(out)


def prepare_farms(settings: BenchSettings, targets) -> None:
    """Device Farm targets, before anything is measured: what they cannot do is refused (one
    benchmark_model run per phone: no load modes, no worker processes to repeat, no cold starts),
    then each resolves its project and pool (credentials, names, compatible phones): a wrong name
    or missing credentials is one line up front, not a failed row per model."""
    farms = [t for t in targets if getattr(t, "summary_rows", False)]
    if not farms:
        return
    farm = farms[0]
    asked = [flag for flag, on in (("--concurrency", bool(settings.concurrency)),
                                   ("--server-qps", settings.server_qps is not None),
                                   ("--sla-p99-ms", settings.sla_p99_ms is not None),
                                   ("--repeats", settings.run.repeats > 1), ("--cold-starts", settings.cold_starts > 0),
                                   ("--save-outputs", settings.save_outputs)) if on]
    if asked:
        raise BadInput(f"--targets {farm.name}: {', '.join(asked)} cannot run on Device Farm (one benchmark_model "
                       "run per phone, summary statistics only); drop it or bench that target apart")
    for t in farms:
        t.resolve()


def _compiled_delegation(info: dict[str, Any]) -> Delegation:
    """An AOT-compiled file's own split: its DISPATCH_OP partitions and the builtins left to the CPU."""
    aot = info["aot"]
    return Delegation(delegate=f"NPU dispatch ({compiled_for(aot)})", nodes_total=None, nodes_delegated=None,
                      partitions=int(aot["partitions"]), undelegated=dict(aot["cpu_op_histogram"]),
                      source="the compiled file: one DISPATCH_OP per NPU partition, builtins left to the CPU")


def run_bench(settings: BenchSettings, progress: Callable[[str], None] | None = None) -> Document:
    """Benchmark every model on every target (host first, devices in parallel lanes).

    Ctrl-C/SIGTERM keep every row already measured (``interrupted`` true, ``interrupted_by`` the signal)."""

    settings.validate()
    infos = {m: tflite_model.inspect(m) for m in settings.models}   # bad files fail up front
    host_npu = settings.run.runtime_api == "compiled" and settings.run.accelerator == "npu"
    for m, info in infos.items():          # an AOT-compiled file: one line naming its SoC (issue 34)
        tflite_model.refuse_compiled(m, info, host_npu=host_npu)
    if settings.data is not None:          # headers against every model's inputs, then the bytes
        check_npz_inputs(settings.data, expect=lambda heads: check_data_headers(settings.data, heads, infos))
    targets = resolve_targets(settings.targets, threads=settings.run.threads, delegate=settings.run.delegate,
                              benchmark_binary=settings.run.benchmark_binary, allow_farm=True)
    prepare_farms(settings, targets)
    peak = load_cached()
    if hasattr(progress, "set_total"):
        progress.set_total(len(targets) * len(settings.models) * max(1, len(settings.run.gpu_precisions))
                           * settings.run.repeats)
    items = [(i, m, gp) for i, (m, gp) in enumerate((m, gp) for m in settings.models
                                                    for gp in (settings.run.gpu_precisions or (None,)))]
    describe = (lambda t, it: f"{Path(it[1]).stem} on {t.name}" + (f" (GPU {it[2]})" if it[2] else ""))
    rounds, row_settings = None, settings
    if settings.run.repeats > 1:
        # replicates that are replicates: every model's k-th process runs before any model's k+1-th
        rounds = measure_in_rounds(
            targets, items, settings.run.repeats,
            measure=lambda t, it, r: t.run(_job(settings, it[1], it[2])),
            on_error=lambda t, it, err: RunResult.failed(t.name, it[1], str(err), exit_code=err.exit_code),
            progress=progress, describe=describe, round_gap_s=settings.run.round_gap_s)
        if rounds.interrupted:      # the rows pool what was measured; nothing new is started
            row_settings = replace(settings, concurrency=(), server_qps=None, sla_p99_ms=None)
    outcome = run_on_targets(
        targets, items,
        run=lambda t, it: bench_one(t, it[1], infos[it[1]], row_settings, peak, progress, gpu_precision=it[2],
                                    measured=None if rounds is None else rounds.processes.get((t.name, it[0]), []),
                                    order=None if rounds is None else rounds.order.get((t.name, it[0])),
                                    started=None if rounds is None else rounds.started.get((t.name, it[0]))),
        on_error=lambda t, it, err: failed_row(t.name, it[1], err, gpu_precision=it[2]),
        progress=progress if rounds is None else None, describe=describe)
    # a Device Farm item is a tuple of rows (one per phone of its pool)
    rows = sustain.ranking_changes([r for t in targets for i in range(len(items))
                                    for r in _rows_of(outcome.results[(t.name, i)])])
    fp = host_fingerprint(threads=settings.run.threads, delegate=settings.run.delegate)
    stopped = (rounds.interrupted if rounds is not None else None) or outcome.interrupted
    return Document.new("bench", rows, fp, settings=_settings_dict(settings), peak=peak,
                        interrupted=stopped is not None, interrupted_by=stopped)


def _rows_of(value: InferenceRow | tuple[InferenceRow, ...]) -> tuple[InferenceRow, ...]:
    return value if isinstance(value, tuple) else (value,)


def _settings_dict(s: BenchSettings) -> dict[str, Any]:
    """The settings as the JSON has always shown them: flat (the run part's fields beside bench's own)."""
    out = {f.name: getattr(s, f.name) for f in fields(s) if f.name not in ("run", "schedule", "energy")}
    out.update({f.name: getattr(s.run, f.name) for f in fields(s.run) if f.name != "control"})
    out.update(s.run.control.to_dict())
    out.update(s.schedule.to_dict())
    out["energy"] = None if s.energy is None else s.energy.to_dict()
    out["gpu_precisions"] = list(s.run.gpu_precisions)
    if s.run.repeats > 1:
        out["process_order"] = PROCESS_ORDER
    return out


def raise_for_failures(doc: Document) -> None:
    """After the results were saved/printed: raise the worst failure (infra 3 over bad input 2)."""
    failed = [r for r in doc.rows if r.status == "failed"]
    if not failed:
        return
    worst = max(failed, key=lambda r: r.exit_code if r.exit_code is not None else 3)
    msg = worst.error or "benchmark failed"
    if len(failed) > 1:
        msg += f" (and {len(failed) - 1} more failed row(s))"
    if worst.exit_code == 2:
        raise BadInput(msg)
    raise InfraError(msg)
