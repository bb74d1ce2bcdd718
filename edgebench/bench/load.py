"""Load modes in MLPerf vocabulary: offline-style concurrency, Poisson server, SLA search.

* ``concurrency(target, job, levels)``: at each level N, N interpreters run back-to-back
  inferences in parallel (threads in one worker; ``invoke()`` releases the GIL). Reports
  throughput QPS = completed / wall time and the latency percentiles of all inferences.
* ``server(target, job, qps, workers)``: queries arrive as a seeded Poisson process at
  ``qps``; ``workers`` interpreters serve them FIFO. Latency = completion - scheduled arrival,
  so it includes queueing (MLPerf server scenario). Reports achieved QPS and p99. The issuing
  thread sleeps to 0.3 ms before each due time and spins the rest, so the sleep's oversleep is not
  charged as latency; what lateness remains (issue - due, for queries that found a worker idle)
  is reported as ``generator_lateness_ms`` and bounds how much of each latency is the load
  generator's, not the model's: a warning says so when its p99 exceeds
  ``LATENESS_WARN_FRACTION`` of the latency p50. When the run stops at max_time with queries due
  but not served (an overloaded target), those queries enter the percentiles at their lower
  bound (stop - due): the percentiles are then lower bounds, flagged ``latency_lower_bound`` and
  shown as "> x" -- dropping the backlog would report a p99 the system never achieved.
* ``sla_search(target, job, p99_ms, workers)``: bisection for the highest Poisson QPS whose
  p99 latency stays <= ``p99_ms`` (each probe is a server run of at least the p99 minimum,
  ``measure.MIN_SAMPLES["p99"]``, queries so its p99 is valid, capped by the job's ``max_time_s``).
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any, Callable

import numpy as np

from edgebench.core.errors import BadInput
from edgebench.core.latency import MIN_SAMPLES
from edgebench.rows import Latency
from edgebench.targets.base import Job, RunResult

SLA_STEPS = 7               # bisection probes after the capacity estimate (resolution ~1/128)
OVERLOAD_RATIO = 0.95       # achieved / offered QPS below this -> the system could not keep up
LATENESS_WARN_FRACTION = 0.10   # generator lateness p99 above this share of the latency p50 -> warn


def _stats_row(stats: Latency) -> dict[str, Any]:
    return {"p50_ms": stats.p50, "p90_ms": stats.p90, "p99_ms": stats.p99, "mean_ms": stats.mean,
            "samples": stats.samples, "p99_valid": stats.p99_valid}


def concurrency(target, job: Job, levels: list[int],
                progress: Callable[[str], None] | None = None) -> list[dict[str, Any]]:
    """One run per level; returns [{level, qps, p50_ms, p99_ms, ..., latency_ms}]."""
    rows = []
    for level in levels:
        if level < 1:
            raise BadInput(f"--concurrency levels must be >= 1, got {level}")
        if progress:
            progress(f"concurrency {level}")
        res: RunResult = target.run_load(job, {"mode": "concurrency", "level": int(level)})
        stats = Latency.from_samples(res.samples_ns, what=f"concurrency {level} run")
        load = res.extra.get("load", {})
        rows.append({"level": int(level), "qps": load.get("qps"), "completed": load.get("completed"),
                     "wall_s": load.get("wall_s"), **_stats_row(stats), "latency_ms": stats.to_dict(),
                     "peak_rss_bytes": res.peak_rss_bytes})
    base = rows[0]["qps"] if rows and rows[0]["qps"] else None
    for r in rows:
        r["speedup_vs_first"] = (r["qps"] / base) if base and r["qps"] else None
    return rows


def server_queries(job: Job, qps: float) -> int:
    """Queries for a server run: job.runs if forced, else enough for a valid p99 and min_time,
    but no more than max_time allows."""
    if job.runs is not None:
        return int(job.runs)
    want = max(job.min_runs, MIN_SAMPLES["p99"], int(math.ceil(qps * job.min_time_s)))
    cap = max(1, int(qps * job.max_time_s))
    return max(1, min(want, cap))


def server(target, job: Job, qps: float, workers: int = 1) -> dict[str, Any]:
    """A Poisson server run at ``qps``."""
    if not qps or qps <= 0:
        raise BadInput(f"--server-qps must be > 0, got {qps}")
    if workers < 1:
        raise BadInput(f"server workers must be >= 1, got {workers}")
    queries = server_queries(job, qps)
    res = target.run_load(job, {"mode": "server", "qps": float(qps), "workers": int(workers),
                                "queries": queries})
    backlog = res.extra.get("backlog_ns")
    backlog = np.zeros(0, np.int64) if backlog is None else np.asarray(backlog, np.int64)
    samples = np.concatenate([np.asarray(res.samples_ns, np.int64), backlog])
    stats = Latency.from_samples(samples, what=f"server run at {qps:g} QPS")
    load = res.extra.get("load", {})
    achieved = load.get("achieved_qps")
    offered = load.get("offered_qps")
    service = res.extra.get("service_ns")
    svc = Latency.from_samples(service, what="service times").to_dict() if service is not None and len(service) else None
    late = load.get("generator_lateness_ms")
    overloaded = bool(achieved is not None and offered and achieved < OVERLOAD_RATIO * offered) or backlog.size > 0
    warnings = []
    if backlog.size:
        warnings.append(f"server mode at {qps:g} QPS: {backlog.size} queries were still waiting when --max-time "
                        f"stopped the run; their latency is at least the wait so far, so every percentile is a "
                        f"lower bound (p99 > {stats.p99:.4g} ms); lower --server-qps")
    if late and stats.p50 > 0 and late["p99"] > LATENESS_WARN_FRACTION * stats.p50:
        warnings.append(f"server mode at {qps:g} QPS: the load generator itself issued queries late (p99 "
                        f"{late['p99'] * 1e3:.0f} us, max {late['max'] * 1e3:.0f} us vs a latency p50 of "
                        f"{stats.p50 * 1e3:.0f} us); latencies include up to that much of its lateness; use fewer "
                        "--server-workers or a quieter machine")
    return {
        "target_qps": float(qps), "achieved_qps": achieved, "workers": int(workers),
        "issued": load.get("issued"), "completed": load.get("completed"),
        "offered_qps": offered,
        "overloaded": overloaded,
        "truncated_by_max_time": load.get("truncated_by_max_time"),
        "backlog": int(backlog.size),
        "latency_lower_bound": bool(backlog.size),
        "generator_lateness_ms": late,
        **_stats_row(stats), "latency_ms": stats.to_dict(), "service_ms": svc,
        "warnings": warnings,
    }


def sla_search(target, job: Job, p99_ms: float, workers: int = 1,
               single_stream: Latency | None = None,
               progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Highest Poisson QPS with p99 <= ``p99_ms`` (bisection between 0 and the capacity)."""
    if p99_ms <= 0:
        raise BadInput(f"--sla-p99-ms must be > 0, got {p99_ms}")
    if single_stream is None:
        res = target.run(replace(job, save_outputs=False))
        single_stream = Latency.from_samples(res.samples_ns)
    out: dict[str, Any] = {"sla_p99_ms": p99_ms, "workers": workers, "steps": [],
                           "single_stream_p99_ms": single_stream.p99}
    if single_stream.p99 > p99_ms:
        out.update(max_qps=None, met=False,
                   reason=(f"single-stream p99 {single_stream.p99:.3f} ms already exceeds the SLA "
                           f"{p99_ms:g} ms; no arrival rate can meet it"))
        return out
    capacity = workers * 1000.0 / single_stream.mean
    lo, hi = 0.0, capacity
    best: dict[str, Any] | None = None
    for _ in range(SLA_STEPS):
        mid = (lo + hi) / 2
        if progress:
            progress(f"SLA probe {mid:.1f} QPS")
        r = server(target, job, mid, workers)
        ok = r["p99_ms"] <= p99_ms and not r["overloaded"]
        late = r.get("generator_lateness_ms") or {}
        out["steps"].append({"qps": mid, "achieved_qps": r["achieved_qps"], "p99_ms": r["p99_ms"],
                             "p99_valid": r["p99_valid"], "ok": ok, "latency_lower_bound": r["latency_lower_bound"],
                             "generator_lateness_p99_ms": late.get("p99")})
        if ok:
            lo, best = mid, r
        else:
            hi = mid
    out["capacity_estimate_qps"] = capacity
    if best is None:
        out.update(max_qps=None, met=False,
                   reason=f"no probed rate down to {hi:.2f} QPS kept p99 <= {p99_ms:g} ms")
    else:
        out.update(max_qps=best["target_qps"], achieved_qps=best["achieved_qps"],
                   p99_at_max_ms=best["p99_ms"], p99_valid=best["p99_valid"], met=True,
                   resolution_qps=capacity / 2 ** SLA_STEPS)
    return out
