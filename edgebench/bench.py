"""``run_bench(settings)``: benchmark .tflite models on targets and return the result document.

One row per model x target: raw samples, ``latency_ms`` (``LatencyStats.to_dict()``), warmup
apart, init and first-inference time, peak RSS, model cost (FLOPs from the graph) and
achieved GFLOP/s / % of this machine's cached peak, plus the optional load-mode results
(``concurrency``, ``server``, ``sla``).

A model file that is missing, truncated or not a flatbuffer fails the whole call up front
(``BadInput``) before anything is timed; a model that fails while running (bad data, delegate,
crash, hang) becomes a ``status: "failed"`` row with ``error`` and ``exit_code`` and the other
models still run; ``raise_for_failures(doc)`` turns the worst failure into its exception after
the caller has saved/printed the partial results.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any, Callable

import numpy as np

from edgebench import results
from edgebench.errors import BadInput, EdgebenchError, InfraError
from edgebench.fingerprint import host_fingerprint, sha256_file
from edgebench.measure import LatencyStats
from edgebench.targets.base import Job

_JOB = {f.name: f.default for f in fields(Job)}


@dataclass(frozen=True)
class BenchSettings:
    """Everything ``edgebench bench`` can be told. Run-control defaults come from ``Job``."""

    models: tuple[str, ...]
    targets: str = "host"
    benchmark_binary: str | None = None   # adb devices without Python
    threads: int | None = None
    delegate: str = "xnnpack"
    data: str | None = None
    runs: int | None = None
    min_runs: int = _JOB["min_runs"]
    min_time_s: float = _JOB["min_time_s"]
    max_time_s: float = _JOB["max_time_s"]
    warmup_runs: int = _JOB["warmup_runs"]
    warmup_time_s: float = _JOB["warmup_time_s"]
    concurrency: tuple[int, ...] = ()
    server_qps: float | None = None
    server_workers: int = 1
    sla_p99_ms: float | None = None
    save_outputs: bool = False
    deadline_s: float | None = None     # None -> max_time + a margin per run
    seed: int = _JOB["seed"]

    def validate(self) -> None:
        if not self.models:
            raise BadInput("no model given; pass one or more .tflite files")
        if self.runs is not None and self.runs < 1:
            raise BadInput(f"--runs must be >= 1, got {self.runs}")
        if self.min_runs < 1:
            raise BadInput(f"--min-runs must be >= 1, got {self.min_runs}")
        if self.min_time_s < 0 or self.max_time_s <= 0:
            raise BadInput("--min-time must be >= 0 and --max-time > 0")
        if self.max_time_s < self.min_time_s:
            raise BadInput(f"--max-time {self.max_time_s:g} is below --min-time {self.min_time_s:g}; "
                           "raise --max-time")
        if self.warmup_runs < 1 or self.warmup_time_s < 0:
            raise BadInput("--warmup-runs must be >= 1 and --warmup-time >= 0")
        if self.threads is not None and self.threads < 1:
            raise BadInput(f"--threads must be >= 1, got {self.threads}")
        if any(c < 1 for c in self.concurrency):
            raise BadInput("--concurrency levels must be positive integers")
        if self.server_qps is not None and self.server_qps <= 0:
            raise BadInput(f"--server-qps must be > 0, got {self.server_qps}")
        if self.sla_p99_ms is not None and self.sla_p99_ms <= 0:
            raise BadInput(f"--sla-p99-ms must be > 0, got {self.sla_p99_ms}")
        if self.data is not None and not Path(self.data).is_file():
            raise BadInput(f"--data {self.data}: file not found; give an .npz InputSet")


def make_targets(spec: str, *, threads: int | None = None, delegate: str = "xnnpack",
                 benchmark_binary: str | None = None) -> list:
    """Targets from a comma-separated spec: ``host``, ``adb``, ``adb:SERIAL``, ``adb:all``."""
    from edgebench.targets.host import HostTarget

    out = []
    names = [s.strip() for s in (spec or "host").split(",") if s.strip()]
    for name in names:
        if name == "host":
            out.append(HostTarget(threads=threads, delegate=delegate, name="host"))
        elif not (name == "adb" or name.startswith("adb:")):
            raise BadInput(f"target {name!r} is not supported here; use host, adb, adb:SERIAL or adb:all")
    if any(n == "adb" or n.startswith("adb:") for n in names):
        from edgebench.targets.adb.devices import resolve_adb_targets

        out.extend(resolve_adb_targets(",".join(names), threads=threads, delegate=delegate,
                                       benchmark_binary=benchmark_binary))
    if not out:
        raise BadInput("--targets is empty; use host, adb:SERIAL or adb:all")
    return out


def _job(settings: BenchSettings, model: str) -> Job:
    deadline = settings.deadline_s
    if deadline is None:
        # the worker itself stops at max_time; leave room for load, warmup and the output pass
        deadline = settings.max_time_s * 2 + settings.warmup_time_s + 120.0
    return Job(model_path=model, inputs_npz=settings.data, threads=settings.threads,
               delegate=settings.delegate, warmup_runs=settings.warmup_runs,
               warmup_time_s=settings.warmup_time_s, min_runs=settings.min_runs,
               min_time_s=settings.min_time_s, max_time_s=settings.max_time_s, runs=settings.runs,
               save_outputs=settings.save_outputs, deadline_s=deadline, seed=settings.seed)


def _summary_ms(ns: np.ndarray) -> dict[str, Any] | None:
    if ns is None or len(ns) == 0:
        return None
    ms = np.asarray(ns, np.float64) / 1e6
    return {"runs": int(ms.size), "mean": float(ms.mean()), "min": float(ms.min()),
            "max": float(ms.max()), "total": float(ms.sum()), "first": float(ms[0])}


def bench_one(target, model: str, info: dict[str, Any], settings: BenchSettings,
              peak: dict[str, Any] | None, progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Benchmark one model on one target; failures become a failed row."""
    from edgebench import load
    from edgebench.peak import peak_for_threads

    job = _job(settings, model)
    row: dict[str, Any] = {
        "model": Path(model).stem, "model_path": str(model), "model_sha256": sha256_file(model),
        "target": target.name, "status": "ok", "error": None, "size_bytes": info["size_bytes"],
        "threads": settings.threads, "delegate": settings.delegate,
        "flops": info["flops"], "gflops": info["flops"] / 1e9, "counted_ops": info["counted_ops"],
        "quantized": info["quantized"], "quantization_coverage": info["quantization_coverage"],
        "float_ops": sorted({o["op"] for o in info["float_ops"]}),
        "inputs": info["inputs"], "outputs": info["outputs"],
    }
    try:
        if progress:
            progress(f"{row['model']} on {target.name}")
        res = target.run(job)
        stats = LatencyStats.from_samples(res.samples_ns, what=f"run of {row['model']}")
        threads_eff = res.extra.get("threads") or 1  # LiteRT's Python default is 1 thread
        row.update({
            "latency_ms": stats.to_dict(),
            "samples_ns": [int(x) for x in res.samples_ns],
            "warmup_ms": _summary_ms(res.warmup_ns),
            "warmup_samples_ns": [int(x) for x in res.warmup_ns],
            "init_ms": res.init_ms,
            "first_inference_ms": res.first_inference_ms,
            "peak_rss_bytes": res.peak_rss_bytes,
            "rss_before_load_bytes": res.extra.get("rss_before_load_bytes"),
            "runtime": res.runtime,
            "threads": res.extra.get("threads"),
            "threads_effective": threads_eff,
            "delegate": res.extra.get("delegate"),
            "stop_reason": res.extra.get("stop_reason"),
            "input_source": res.extra.get("input_source"),
            "input_samples": res.extra.get("n_input_samples"),
            "nonfinite_outputs": res.extra.get("nonfinite_outputs") or {},
            "fingerprint": res.fingerprint,
            "method": res.method,
        })
        warnings = list(stats.warnings)
        if row["nonfinite_outputs"]:
            bad = ", ".join(f"{k}: {v}" for k, v in row["nonfinite_outputs"].items())
            warnings.append(f"NaN/Inf in outputs ({bad} values over the first pass); the model or its "
                            "inputs are broken: check the data range and the conversion")
        if res.extra.get("stop_reason") == "max_time":
            wanted = f"--runs {settings.runs}" if settings.runs is not None else f"--min-runs {settings.min_runs}"
            warnings.append(f"stopped at --max-time {settings.max_time_s:g} s after {stats.samples} runs, "
                            f"before {wanted}; raise --max-time")
        if info["flops"] and stats.p50 > 0:
            # p50, not mean: the kernel's typical speed, robust to background-load spikes
            achieved = info["flops"] / (stats.p50 / 1e3) / 1e9
            row["achieved_gflops_per_s"] = achieved
            if peak:
                ref = peak_for_threads(peak, threads_eff)
                row["peak_gflops"] = ref
                row["pct_of_peak"] = 100.0 * achieved / ref
        if res.outputs is not None:
            row["outputs_saved"] = {k: list(v.shape) for k, v in res.outputs.items()}
        loadjob = replace(job, save_outputs=False)
        if settings.concurrency:
            row["concurrency"] = load.concurrency(target, loadjob, list(settings.concurrency), progress)
        workers = settings.server_workers
        if settings.server_qps is not None:
            if progress:
                progress(f"server {settings.server_qps:g} QPS")
            row["server"] = load.server(target, loadjob, settings.server_qps, workers)
            if row["server"]["overloaded"]:
                warnings.append(f"server mode: achieved {row['server']['achieved_qps']:.1f} of "
                                f"{settings.server_qps:g} QPS; the target is overloaded, lower --server-qps")
        if settings.sla_p99_ms is not None:
            row["sla"] = load.sla_search(target, loadjob, settings.sla_p99_ms, workers, stats, progress)
        row["warnings"] = warnings
    except EdgebenchError as err:
        row.update(status="failed", error=str(err), exit_code=err.exit_code,
                   error_type=type(err).__name__)
    return row


def run_bench(settings: BenchSettings, progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Benchmark every model on every target; return ``results.envelope("bench", rows, fp)``."""
    from edgebench import tflite_model
    from edgebench.peak import load_cached

    settings.validate()
    infos = {m: tflite_model.inspect(m) for m in settings.models}   # bad files fail up front
    targets = make_targets(settings.targets, threads=settings.threads, delegate=settings.delegate,
                           benchmark_binary=settings.benchmark_binary)
    peak = load_cached()
    local = [t for t in targets if not t.name.startswith("adb:")]
    rows = [bench_one(t, m, infos[m], settings, peak, progress) for t in local for m in settings.models]
    devices = [t for t in targets if t.name.startswith("adb:")]
    if devices:   # one lane (thread) per device; a lost device fails only its own rows
        from edgebench.targets.adb.lanes import run_lanes

        for lane in run_lanes(devices, lambda t: [bench_one(t, m, infos[m], settings, peak, progress)
                                                  for m in settings.models]):
            rows.extend(lane.value or [{"target": lane.target.name, "status": "failed", "error": str(lane.error),
                                        "exit_code": 3, "error_type": "InfraError"}])
    fp = host_fingerprint(threads=settings.threads, delegate=settings.delegate)
    return results.envelope("bench", rows, fp, settings=_settings_dict(settings),
                            peak=peak)


def _settings_dict(s: BenchSettings) -> dict[str, Any]:
    return {f.name: getattr(s, f.name) for f in fields(s)}


def raise_for_failures(doc: dict[str, Any]) -> None:
    """After the results were saved/printed: raise the worst failure (infra 3 over bad input 2)."""
    failed = [r for r in doc.get("rows", []) if r.get("status") == "failed"]
    if not failed:
        return
    worst = max(failed, key=lambda r: r.get("exit_code", 3))
    msg = worst.get("error") or "benchmark failed"
    if len(failed) > 1:
        msg += f" (and {len(failed) - 1} more failed row(s))"
    if worst.get("exit_code") == 2:
        raise BadInput(msg)
    raise InfraError(msg)
