"""Sustained, paced and cold-start views of a run, and its energy (issue 17).

Every number here is derived from raw facts a target returned (``RunResult``): per-inference
samples, the worker's window boundaries and timed span on CLOCK_BOOTTIME, the target's sensor
readings stamped on the same clock, cold-start facts per fresh process, the energy object.

* **timeline**: one ``Window`` per ``--report-every`` seconds with the ``Latency`` of its own
  samples and the thermal state of the last sensor reading inside it (zones, hottest zone, CPU
  frequencies and caps, Android's thermal status). Summary (``Sustained``): steady-state ratio =
  last window p50 / first window p50; time to throttle = end of the first window where the p50
  rose above ``THROTTLE_RATIO`` x the first window's, a CPU frequency cap fell below the first
  window's, or Android's thermal status reached LIGHT (1) or worse.
* **paced**: the row's latency is the paced run's; ``Paced`` puts the back-to-back run of the
  same job next to it (``p50_ratio`` = paced p50 / back-to-back p50) with the achieved period and
  the start lag.
* **cold start**: a ``Latency`` over the fresh processes of process start, load + allocate,
  first inference and spawn-to-first-result; with the XNNPACK weight cache, the starts without a
  cache, the one that wrote the cache and the warm ones are reported apart.
* **ranking**: when rows of one model on several targets both have a timeline, a change of order
  between the first and the last window is a warning on each of them.
"""

from __future__ import annotations

import dataclasses
from dataclasses import replace
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from edgebench.core.errors import EdgebenchError
from edgebench.rows import COLD_START_PHASES, ColdStart, Energy, InferenceRow, Latency, Paced, Sustained, Window
from edgebench.targets.adb.thermal import hottest_c
from edgebench.targets.base import Job, RunResult, Schedule

THROTTLE_RATIO = 1.10            # as the adb throttle verdict's latency_rise: a 10% slower median
THERMAL_STATUS_LIGHT = 1         # android.os.PowerManager.THERMAL_STATUS_LIGHT: throttling began
COLD_START_DEADLINE_S = 300.0    # per fresh process (the worker's own timeout per child)


def _stats(samples_ns: Any, what: str) -> Latency | None:
    ns = np.asarray(samples_ns, np.int64)
    return Latency.from_samples(ns, what=what) if ns.size else None


def _hottest(zones: Mapping[str, float] | None) -> float | None:
    return hottest_c(dict(zones)) if zones else None


def _thermal_at(readings: Sequence[Mapping[str, Any]], lo: float | None, hi: float | None) -> Mapping[str, Any] | None:
    """The last reading with lo < t <= hi (else the last one before hi), as a window's thermal."""
    if hi is None:
        return None
    timed = [r for r in readings if r.get("t") is not None and (r.get("zones_c") or r.get("cpus")
                                                                 or r.get("thermal_status") is not None)]
    inside = [r for r in timed if (lo is None or r["t"] > lo) and r["t"] <= hi]
    before = [r for r in timed if r["t"] <= hi]
    pick = (inside or before or [None])[-1]
    if pick is None:
        return None
    cpus = pick.get("cpus") or []
    return {"t_boottime_s": pick["t"], "zones_c": dict(pick.get("zones_c") or {}),
            "hottest_c": _hottest(pick.get("zones_c")), "cpu_cur_khz": [c.get("cur_khz") for c in cpus],
            "cpu_cap_khz": [c.get("cap_khz") for c in cpus], "thermal_status": pick.get("thermal_status")}


def timeline(res: RunResult, what: str) -> tuple[tuple[Window, ...], Sustained]:
    """Windows and their summary from a sustained run's result."""
    tl = res.extra.get("timeline") or {}
    readings = res.extra.get("sensor_readings") or []
    reason = res.extra.get("thermal_reason")
    samples = np.asarray(res.samples_ns, np.int64)
    windows = []
    start_idx, t_prev, b_prev = 0, 0.0, tl.get("start_boottime_s")
    for k, w in enumerate(tl.get("windows") or []):
        end = int(w["end_index"])
        th = _thermal_at(readings, b_prev, w.get("boottime_end_s"))
        windows.append(Window(index=k, t_start_s=t_prev, t_end_s=w.get("t_end_s"), samples=end - start_idx,
                              latency=_stats(samples[start_idx:end], f"window {k + 1} of {what}"), thermal=th,
                              thermal_reason=None if th is not None else
                              (reason or "no thermal reading fell in or before this window")))
        start_idx, t_prev, b_prev = end, w.get("t_end_s"), w.get("boottime_end_s")
    return tuple(windows), _summary(windows, tl)


def _summary(windows: Sequence[Window], tl: Mapping[str, Any]) -> Sustained:
    lat = [w for w in windows if w.latency is not None and w.latency.p50]
    first, last = (lat[0], lat[-1]) if lat else (None, None)
    # one window has no "last vs first": the ratio is unknown, not 1.000
    ratio = last.latency.p50 / first.latency.p50 if len(lat) >= 2 else None
    when = why = None
    caps0 = list((windows[0].thermal or {}).get("cpu_cap_khz") or []) if windows else []
    for w in windows[1:]:
        th = w.thermal or {}
        caps = list(th.get("cpu_cap_khz") or [])
        if first and w.latency is not None and w.latency.p50 > THROTTLE_RATIO * first.latency.p50:
            why = f"window p50 {w.latency.p50:.4g} ms > {THROTTLE_RATIO:g} x the first window's {first.latency.p50:.4g} ms"
        elif any(a is not None and b is not None and b < a for a, b in zip(caps0, caps)):
            why = "a CPU frequency cap fell below its value in the first window"
        elif (th.get("thermal_status") or 0) >= THERMAL_STATUS_LIGHT:
            why = f"Android thermal status {th['thermal_status']} (>= 1, light throttling)"
        if why:
            when = w.t_end_s
            break
    hottest = [w.thermal.get("hottest_c") for w in windows if w.thermal and w.thermal.get("hottest_c") is not None]
    statuses = [w.thermal.get("thermal_status") for w in windows if w.thermal and w.thermal.get("thermal_status") is not None]
    return Sustained(duration_s=tl.get("duration_s"), report_every_s=tl.get("report_every_s"), steady_state_ratio=ratio,
                     time_to_throttle_s=when, throttle_reason=why,
                     details={"windows": len(windows), "first_p50_ms": first.latency.p50 if first else None,
                              "last_p50_ms": last.latency.p50 if last else None,
                              "hottest_c": {"first": hottest[0], "last": hottest[-1], "max": max(hottest)} if hottest else None,
                              "max_thermal_status": max(statuses) if statuses else None,
                              "time_to_throttle_note": "end of the first window showing it"})


def paced(res: RunResult, back_to_back: RunResult, what: str) -> Paced:
    p = res.extra.get("paced") or {}
    b2b = _stats(back_to_back.samples_ns, f"back-to-back run of {what}")
    main = _stats(res.samples_ns, f"paced run of {what}")
    lag = np.asarray(res.extra.get("lag_ns", np.zeros(0)), np.float64) / 1e6
    return Paced(period_ms=p.get("period_ms"), achieved_period_ms=p.get("achieved_period_ms"),
                 late_starts=p.get("late_starts"),
                 p50_ratio=main.p50 / b2b.p50 if main and b2b and b2b.p50 else None, back_to_back_ms=b2b,
                 details={"p99_ratio": main.p99 / b2b.p99 if main and b2b and b2b.p99 else None,
                          # the model's capacity: 1 / the back-to-back mean (what docs/sustained.md promises);
                          # the paced mean is invoke-only latency under sleeps, often slower (cold caches)
                          "capacity_qps": b2b.qps if b2b else None,
                          "start_lag_ms": {"p50": float(np.percentile(lag, 50)), "p99": float(np.percentile(lag, 99)),
                                           "max": float(lag.max())} if lag.size else None})


def _phases(starts: Sequence[Mapping[str, Any]], what: str) -> dict[str, Latency | None]:
    return {k: _stats([float(s[k]) * 1e6 for s in starts if s.get(k) is not None], f"{k} of {what}")
            for k in COLD_START_PHASES}


def cold_start(res: RunResult, what: str) -> ColdStart:
    cs = res.extra.get("cold_start") or {}
    starts = list(cs.get("starts") or [])
    plain = [s for s in starts if s.get("cache") is None]
    build = [s for s in starts if s.get("cache") == "build"]
    warm = [s for s in starts if s.get("cache") == "warm"]
    details: dict[str, Any] = {"runtime": (plain or starts or [{}])[0].get("runtime"), "starts": starts,
                               "cache_bytes": cs.get("cache_bytes"),
                               "note": "fresh processes one after another; the OS page cache is not dropped"}
    if cs.get("xnnpack_cache"):
        details["cache_build"] = {k: build[0].get(k) for k in COLD_START_PHASES} if build else None
        w = _phases(warm, f"warm-cache starts of {what}")
        details["warm_cache"] = {k: (v.to_dict() if v else None) for k, v in w.items()}
        p50 = _phases(plain, what)["init_ms"]
        if w["init_ms"] and p50 and p50.p50:
            details["warm_vs_no_cache_init_ratio"] = w["init_ms"].p50 / p50.p50
    return ColdStart(count=cs.get("count"), xnnpack_cache=bool(cs.get("xnnpack_cache")),
                     **_phases(plain, f"cold starts of {what}"), details=details)


def energy(res: RunResult) -> tuple[Energy | None, str | None]:
    e = res.extra.get("energy")
    return (Energy.from_dict(e) if isinstance(e, Mapping) else None), res.extra.get("energy_reason")


def attach(row: InferenceRow, target: Any, job: Job, res: RunResult, *, cold_starts: int = 0,
           xnnpack_cache: bool = False, progress: Callable[[str], None] | None = None) -> InferenceRow:
    """The row with the regimes its job asked for; each extra run's failure becomes a warning
    naming it, never the loss of what was measured."""
    name = row.model or "model"
    warnings = list(row.warnings)
    changes: dict[str, Any] = {}
    sched = job.schedule
    if sched.sustained:
        changes["timeline"], changes["sustained"] = timeline(res, f"sustained run of {name}")
        if res.extra.get("stop_reason") == "sample_cap":
            warnings.append(f"sustained run stopped at {res.samples_ns.size} samples (the worker's cap) before "
                            f"--duration {sched.duration_s:g}; add --period-ms or shorten --duration")
    if sched.paced:
        changes["period_ms"] = sched.period_ms
        changes["method"] = f"{row.method}; paced: one invoke every {sched.period_ms:g} ms, sleeping in between"
        if progress:
            progress(f"{name}: back-to-back run for the paced comparison")
        try:
            b2b = target.run(replace(job, schedule=Schedule(), energy=None, save_outputs=False))
            changes["paced"] = paced(res, b2b, name)
            ach = changes["paced"].achieved_period_ms
            if row.latency is not None and ach:
                # a paced run's throughput is the rate it was offered and kept up with, not 1/mean
                # (which is the model's capacity, kept in paced.details.capacity_qps)
                changes["latency"] = dataclasses.replace(row.latency, qps=1000.0 / ach)
            if ach is not None and ach > THROTTLE_RATIO * sched.period_ms:
                warnings.append(f"paced run achieved a {ach:.4g} ms period, not {sched.period_ms:g} ms: invokes "
                                "started late; raise --period-ms")
        except EdgebenchError as err:
            warnings.append(f"back-to-back comparison run failed: {err}")
    if job.energy is not None:
        changes["energy"], changes["energy_reason"] = energy(res)
        e = changes["energy"]
        if e is not None and not e.valid:
            warnings.append("energy not valid: " + "; ".join(e.invalid_reasons))
    if cold_starts:
        if progress:
            progress(f"{name}: {cold_starts} cold start(s)" + (" with the XNNPACK weight cache" if xnnpack_cache else ""))
        n = cold_starts * (2 if xnnpack_cache else 1)
        cjob = replace(job, schedule=Schedule(), energy=None, save_outputs=False,
                       deadline=60.0 + n * COLD_START_DEADLINE_S)
        try:
            cres = target.run_load(cjob, {"mode": "cold_start", "count": int(cold_starts),
                                          "xnnpack_cache": bool(xnnpack_cache)})
            changes["cold_start"] = cold_start(cres, name)
        except EdgebenchError as err:
            warnings.append(f"cold starts failed: {err}")
    return row.replace(warnings=tuple(warnings), **changes)


def ranking_changes(rows: Sequence[InferenceRow]) -> list[InferenceRow]:
    """Rows with a warning added where, for one model, the targets' order by p50 in the first
    window differs from their order in the last window."""
    out = list(rows)
    by_model: dict[str, list[int]] = {}
    for i, r in enumerate(out):
        if r.ok and r.timeline and r.sustained and r.sustained.details.get("first_p50_ms") is not None:
            by_model.setdefault(str(r.model), []).append(i)
    for model, idx in by_model.items():
        if len({out[i].target for i in idx}) < 2:
            continue
        first = sorted(idx, key=lambda i: out[i].sustained.details["first_p50_ms"])
        last = sorted(idx, key=lambda i: out[i].sustained.details["last_p50_ms"])
        if first != last:
            order = lambda o: " < ".join(str(out[i].target) for i in o)  # noqa: E731
            msg = (f"ranking changed over the sustained run of {model}: first window {order(first)}, last window "
                   f"{order(last)} (p50); a short burst would have ranked these targets wrongly")
            for i in idx:
                out[i] = out[i].replace(warnings=(*out[i].warnings, msg))
    return out
