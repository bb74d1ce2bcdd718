"""Heat: cool the device down before a run (poll to a threshold, never a fixed sleep), sample
thermal zones and CPU frequencies before/during/after it, and decide whether it throttled."""

from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from edgebench.core.errors import EdgebenchError
from edgebench.core.latency import trend_change
from edgebench.targets.adb.remote import HOST_MARGIN_S, AdbDevice, ShellResult


@dataclass
class ThermalPolicy:
    """Cool-down and sampling settings (defaults written once, here)."""

    cooldown_below_c: float | None = 42.0   # None: no cool-down
    cooldown_timeout_s: float = 180.0
    poll_s: float = 2.0
    sample_every_s: float = 1.0              # during the run


# Zones whose names say "CPU/SoC"; the cool-down watches these (all plausible zones if none match).
_HOT_ZONE_RE = re.compile(r"cpu|soc|big|mid|little|tsens|cluster|gpu|skin", re.I)


def hottest_c(zones: dict[str, float]) -> float | None:
    picked = [t for z, t in zones.items() if _HOT_ZONE_RE.search(z)] or list(zones.values())
    return max(picked) if picked else None


def detect_throttle(before: dict | None, during: list[dict], after: dict | None,
                    samples_ns: np.ndarray | None, *, freq_drop: float = 0.9,
                    latency_rise: float = 1.10) -> dict[str, Any]:
    """Throttle verdict from thermal samples and latencies (pure; unit-tested).

    * ``freq_cap``: a core's cpufreq cap (scaling_max_freq) fell below its value before the run
      (thermal mitigation lowers the cap);
    * ``freq_drop``: the peak current CPU frequency of a later sample during the run fell below
      ``freq_drop`` x the highest peak seen during the run;
    * ``latency_trend``: the median of the last third of the timed runs is more than
      ``latency_rise`` x the median of the first third, or the Theil-Sen trend fitted over the
      run (``measure.trend_change``) rises by more than ``latency_rise - 1`` (needs >= 30 samples).
    """
    reasons: list[str] = []
    details: dict[str, Any] = {}
    caps_before = {c["cpu"]: c["cap_khz"] for c in (before or {}).get("cpus", []) if c.get("cap_khz")}
    for s in during + ([after] if after else []):
        for c in s.get("cpus", []):
            b = caps_before.get(c["cpu"])
            if b and c.get("cap_khz") and c["cap_khz"] < b:
                details.setdefault("freq_cap", f"cpu{c['cpu']} cap {b} -> {c['cap_khz']} kHz")
    if "freq_cap" in details:
        reasons.append("freq_cap")
    peaks = [max((c["cur_khz"] or 0) for c in s.get("cpus", [])) for s in during if s.get("cpus")]
    if len(peaks) >= 2:
        top = max(peaks)
        low = min(peaks[1:])
        if top and low < freq_drop * top:
            reasons.append("freq_drop")
            details["freq_drop"] = f"peak CPU frequency {top} -> {low} kHz during the run"
    if samples_ns is not None and len(samples_ns) >= 30:
        k = len(samples_ns) // 3
        first = float(np.median(samples_ns[:k]))
        last = float(np.median(samples_ns[-k:]))
        details["latency_last_over_first"] = round(last / first, 4) if first > 0 else None
        fitted = trend_change(np.asarray(samples_ns, np.float64))
        details["latency_trend_fit"] = None if fitted is None else round(fitted, 4)
        if (first > 0 and last > latency_rise * first) or (fitted is not None and fitted > latency_rise - 1):
            reasons.append("latency_trend")
    return {"throttled": bool(reasons), "throttle_reasons": reasons, **details}


def cool_down(device: AdbDevice, policy: ThermalPolicy) -> dict[str, Any]:
    """Poll until the hottest CPU/SoC zone is below the threshold, or the timeout passes."""
    pol = policy
    if pol.cooldown_below_c is None:
        return {"enabled": False}
    start = time.monotonic()
    temps: list[float | None] = []
    while True:
        s = device.thermal_sample()
        t = hottest_c(s["zones_c"])
        temps.append(t)
        if t is None or t < pol.cooldown_below_c:
            reached = True
            break
        if time.monotonic() - start >= pol.cooldown_timeout_s:
            reached = False
            break
        time.sleep(pol.poll_s)
    return {"enabled": True, "threshold_c": pol.cooldown_below_c, "timeout_s": pol.cooldown_timeout_s,
            "reached": reached, "waited_s": round(time.monotonic() - start, 3), "polls": len(temps),
            "hottest_c": temps}


def monitored_shell(device: AdbDevice, policy: ThermalPolicy, command: str, *, deadline_s: float, what: str,
                    thermal: dict[str, Any], status: bool = False,
                    before_run: Callable[[], None] | None = None,
                    on_stdout: Callable[[bytes], None] | None = None) -> tuple[ShellResult, float]:
    """Cool down, then run ``command`` on the device while a thread samples thermal zones and
    CPU frequencies (and Android's thermal status when ``status``); records
    cooldown/before/during/after in ``thermal``. ``before_run`` (e.g. an energy idle window) runs
    after the sampling started, so the sampler's own cost is in it too. ``on_stdout`` sees the
    command's output as it arrives (progress). Returns (result, wall s)."""
    thermal["cooldown"] = cool_down(device, policy)
    thermal["before"] = device.thermal_sample(status=status)
    stop = threading.Event()
    during: list[dict] = []

    def loop() -> None:
        while not stop.wait(policy.sample_every_s):
            try:
                during.append(device.thermal_sample(status=status))
            except EdgebenchError:
                return

    sampler = threading.Thread(target=loop, daemon=True, name=f"thermal-{device.serial}")
    sampler.start()
    if before_run is not None:
        try:
            before_run()
        except BaseException:
            stop.set()
            raise
    t0 = time.monotonic()
    try:
        r = device.shell(command, deadline_s=deadline_s, what=what, on_stdout=on_stdout)
    finally:
        stop.set()
        sampler.join(timeout=policy.sample_every_s + HOST_MARGIN_S)
    wall = time.monotonic() - t0
    thermal["during"] = during
    thermal["after"] = device.thermal_sample(status=status)
    return r, wall
