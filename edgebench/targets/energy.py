"""Energy per inference from power readings taken around a run (pure: readings in, verdict out).

Two sources, one method:

* **battery** (phones, boards with a fuel gauge): instantaneous ``current_now`` and
  ``voltage_now`` of ``/sys/class/power_supply/battery`` (or ``dumpsys battery get current_now``
  where SELinux closes sysfs), read on the device every ``sample_every_s`` during an idle window
  and during the run (``edgebench.targets.adb.battery``). Power P = |I| x V; energy = trapezoid
  integral of P over the timed span.
* **rapl** (Intel/AMD hosts): the cumulative ``energy_uj`` counters of the CPU packages under
  ``/sys/class/powercap`` (``edgebench.targets.host_sensors``). Energy over a span = counter
  difference (unwrapped with ``max_energy_range_uj``), interpolated at the span's ends. Scope: the
  whole package -- every process on the machine, not only the model.

Both subtract an idle baseline: net energy = energy over the timed span - idle power x span
length, where idle power comes from a window of ``idle_s`` seconds with the model not running
(just before the run). Reported: net joules, mJ per inference and inferences per joule, plus
the powers, the sample counts, the units and every reason the figure is not valid.

Validity (a figure is reported either way, ``valid`` says whether to trust it):

* at least ``MIN_RUN_SAMPLES`` readings inside the timed span and ``MIN_IDLE_SAMPLES`` in the
  idle window (battery; RAPL counters are exact integrals and need 2 each);
* battery units detected (below) -- unknown units mean an unknown scale;
* the battery is discharging in every reading, with no external supply online (unless its input
  was suspended): on USB power the battery current says little about what the SoC draws;
* the current does not change sign during the readings (a charger connecting mid-run);
* net energy > 1% of the gross (else the run drew no more than idle: too short, or the gauge too
  coarse);
* the device is not emulated (``emulation``: the properties by which it says it is an emulator,
  e.g. ``ro.kernel.qemu=1``): an emulator's or simulator's battery counters are modelled, not
  measured, so their figure says how the model works, never what a phone draws.

Unit detection (Android's HAL contract is uA/uV, but kernels differ): voltage by magnitude --
2.5-5.5 V of a Li-ion cell reads 2.5e6-5.5e6 in uV or 2500-5500 in mV; current by the median
magnitude during the run -- >= 20,000 means uA (a phone under load draws >= 20 mA), <= 5,000
means mA (5 A is more than a phone draws); in between it follows the voltage's unit and says
so (``assumed``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from edgebench.core.errors import BadInput

MIN_RUN_SAMPLES = 10       # fuel gauges update about once a second; fewer readings make the integral a guess
MIN_IDLE_SAMPLES = 5
DISCHARGING = ("discharging",)
CHARGING = ("charging", "full")
MIN_NET_SHARE = 0.01       # net energy below 1% of the gross is indistinguishable from the idle baseline
SIGN_FLIP_SHARE = 0.10     # more than 10% of readings with the minority sign: the supply changed mid-run


@dataclass(frozen=True)
class EnergySettings:
    """How energy is measured (``--energy``): idle baseline window and reading period. Defaults
    written here once."""

    idle_s: float = 5.0
    sample_every_s: float = 0.25

    def validate(self) -> "EnergySettings":
        if self.idle_s <= 0:
            raise BadInput(f"--energy-idle must be > 0 seconds, got {self.idle_s:g}")
        if not 0.01 <= self.sample_every_s <= 10:
            raise BadInput(f"energy sample period must be 0.01-10 s, got {self.sample_every_s:g}")
        return self

    def to_dict(self) -> dict[str, Any]:
        return {"idle_s": self.idle_s, "sample_every_s": self.sample_every_s}


@dataclass(frozen=True)
class PowerReading:
    """One battery reading: CLOCK_BOOTTIME seconds, raw current and voltage as the device wrote
    them, the battery status text, and whether an external supply was online."""

    t: float
    current: float | None
    voltage: float | None
    status: str | None = None
    external_online: bool | None = None


# ------------------------------------------------------------------------------------ units


def detect_units(currents: Sequence[float], voltages: Sequence[float]) -> dict[str, Any]:
    """``{current, voltage, current_scale_a, voltage_scale_v, assumed, note}`` (None units when
    the magnitudes fit no known scale). See the module docstring for the rule."""
    v = float(np.median(np.abs(voltages))) if len(voltages) else float("nan")
    i = float(np.median(np.abs(currents))) if len(currents) else float("nan")
    out: dict[str, Any] = {"current": None, "voltage": None, "current_scale_a": None, "voltage_scale_v": None,
                           "assumed": False, "note": ""}
    if 2.5e6 <= v <= 5.5e6:
        out.update(voltage="uV", voltage_scale_v=1e-6)
    elif 2500 <= v <= 5500:
        out.update(voltage="mV", voltage_scale_v=1e-3)
    else:
        out["note"] = f"voltage median {v:g} fits neither uV nor mV of a 2.5-5.5 V cell"
        return out
    if i >= 20_000:
        out.update(current="uA", current_scale_a=1e-6)
    elif 0 < i <= 5_000:
        out.update(current="mA", current_scale_a=1e-3)
    elif i > 0:
        unit = "mA" if out["voltage"] == "mV" else "uA"
        out.update(current=unit, current_scale_a=1e-3 if unit == "mA" else 1e-6, assumed=True,
                   note=f"current median {i:g} is ambiguous (5,000-20,000); assumed {unit} like the voltage")
    else:
        out["note"] = "current reads 0: the gauge reports no current"
    return out


# ------------------------------------------------------------------------------------ integration


def _trapezoid(t: np.ndarray, y: np.ndarray, a: float, b: float) -> float:
    """Integral of the piecewise-linear y(t) over [a, b] (values held flat beyond the ends)."""
    if b <= a or t.size == 0:
        return 0.0
    inner = (t > a) & (t < b)
    ts = np.concatenate([[a], t[inner], [b]])
    ys = np.concatenate([[np.interp(a, t, y)], y[inner], [np.interp(b, t, y)]])
    return float(np.sum((ts[1:] - ts[:-1]) * (ys[1:] + ys[:-1]) / 2.0))


def _result(source: str, method: str, *, gross_j: float, idle_w: float, run_s: float, inferences: int,
            reasons: list[str], **facts: Any) -> dict[str, Any]:
    net = gross_j - idle_w * run_s
    if net <= MIN_NET_SHARE * gross_j:
        reasons.append(f"the run drew no more than the idle baseline (net {net * 1e3:.3g} mJ of "
                       f"{gross_j * 1e3:.3g} mJ): run longer (--duration) so the difference rises above the noise")
    ok = net > MIN_NET_SHARE * gross_j and inferences > 0
    return {
        "source": source, "method": method, "valid": not reasons, "invalid_reasons": reasons,
        "joules": net, "gross_joules": gross_j, "idle_power_w": idle_w,
        "run_power_w": gross_j / run_s if run_s > 0 else None, "run_s": run_s, "inferences": inferences,
        "mj_per_inference": net * 1e3 / inferences if ok else None,
        "inferences_per_j": inferences / net if ok else None, **facts,
    }


def emulated_reason(emulation: str) -> str:
    """Why an emulated device's energy is not valid (EMULATION: what the device reports)."""
    return (f"emulated device ({emulation}): its battery counters are modelled, not measured, so the figure "
            "says nothing about a real phone's draw; measure energy on a physical device")


def battery_energy(readings: Sequence[PowerReading], idle_span: tuple[float, float], run_span: tuple[float, float],
                   inferences: int, *, source: str = "battery sysfs", facts: Mapping[str, Any] | None = None,
                   emulation: str | None = None) -> dict[str, Any]:
    """The energy object from battery readings (see the module docstring for the method).
    EMULATION (an emulated device's evidence, e.g. ``ro.kernel.qemu=1``) makes it never valid."""
    facts = dict(facts or {})
    usable = [r for r in readings if r.current is not None and r.voltage is not None]
    t = np.array([r.t for r in usable], np.float64)
    cur = np.array([r.current for r in usable], np.float64)
    volt = np.array([r.voltage for r in usable], np.float64)
    in_run = (t >= run_span[0]) & (t <= run_span[1])
    in_idle = (t >= idle_span[0]) & (t <= idle_span[1])
    reasons: list[str] = [emulated_reason(emulation)] if emulation else []
    units = detect_units(cur[in_run] if in_run.any() else cur, volt)
    if units["current"] is None or units["voltage"] is None:
        reasons.append(f"battery units unknown ({units['note']}); cannot scale the readings")
        i_a, v_v = np.abs(cur) * 1e-6, volt * 1e-6
    else:
        i_a, v_v = np.abs(cur) * units["current_scale_a"], volt * units["voltage_scale_v"]
    n_run, n_idle = int(in_run.sum()), int(in_idle.sum())
    if n_run < MIN_RUN_SAMPLES:
        reasons.append(f"only {n_run} battery readings during the run (needs >= {MIN_RUN_SAMPLES}): run "
                       "longer (--duration)")
    if n_idle < MIN_IDLE_SAMPLES:
        reasons.append(f"only {n_idle} battery readings in the idle window (needs >= {MIN_IDLE_SAMPLES}): "
                       "raise --energy-idle")
    window = [r for r in usable if idle_span[0] <= r.t <= run_span[1]]
    statuses = sorted({(r.status or "").strip() for r in window if r.status})
    if any(s.lower() in CHARGING for s in statuses):
        reasons.append(f"the battery was charging during the measurement (status {', '.join(statuses)}): the "
                       "battery current is then the charger's, not the SoC's; unplug the cable and use wireless "
                       "adb (adb tcpip), or suspend charging (dumpsys battery suspend_input, debuggable builds)")
    elif any(r.external_online for r in window) and not facts.get("input_suspended"):
        reasons.append("an external supply (USB/AC/wireless) was online: the device ran partly from it, so the "
                       "battery current understates the draw; unplug the cable (wireless adb) or suspend "
                       "charging (dumpsys battery suspend_input)")
    signs = np.sign(cur[(t >= idle_span[0]) & (t <= run_span[1])])
    signs = signs[signs != 0]
    if signs.size and min((signs > 0).mean(), (signs < 0).mean()) > SIGN_FLIP_SHARE:
        reasons.append("the battery current changed sign during the measurement (a charger connected or "
                       "disconnected); rerun with the supply unchanged")
    p = i_a * v_v
    run_s = run_span[1] - run_span[0]
    idle_s = idle_span[1] - idle_span[0]
    gross = _trapezoid(t, p, *run_span) if t.size else 0.0
    idle_w = _trapezoid(t, p, *idle_span) / idle_s if t.size and idle_s > 0 else 0.0
    units_out = {"current": units["current"], "voltage": units["voltage"], "assumed": units["assumed"]}
    if units["note"]:
        units_out["note"] = units["note"]
    return _result("battery", f"{source}: |current| x voltage, trapezoid integral over the timed span minus "
                   "the idle-window mean power x span", gross_j=gross, idle_w=idle_w, run_s=run_s,
                   inferences=inferences, reasons=reasons, samples={"run": n_run, "idle": n_idle},
                   units=units_out, battery=facts)


def unwrap_counter(values_uj: Sequence[float], max_range_uj: float | None) -> np.ndarray:
    """A cumulative energy counter with its wrap-arounds removed (uJ, monotone)."""
    v = np.asarray(values_uj, np.float64)
    if v.size < 2:
        return v
    d = np.diff(v)
    if max_range_uj:
        d = np.where(d < 0, d + float(max_range_uj), d)
    else:
        d = np.where(d < 0, 0.0, d)
    return np.concatenate([[v[0]], v[0] + np.cumsum(d)])


def rapl_energy(times: Sequence[float], counters_uj: Mapping[str, Sequence[float]],
                max_range_uj: Mapping[str, float | None], idle_span: tuple[float, float],
                run_span: tuple[float, float], inferences: int, facts: Mapping[str, Any] | None = None
                ) -> dict[str, Any]:
    """The energy object from RAPL package counters read at ``times`` (CLOCK_BOOTTIME s)."""
    t = np.asarray(times, np.float64)
    reasons: list[str] = []
    n_run = int(((t >= run_span[0]) & (t <= run_span[1])).sum())
    n_idle = int(((t >= idle_span[0]) & (t <= idle_span[1])).sum())
    if t.size < 2 or t[0] > idle_span[0] + 1e-3 or t[-1] < run_span[1] - 1e-3:
        reasons.append("the RAPL readings do not cover the idle window and the run; rerun")
    gross = idle_j = 0.0
    for zone, vals in counters_uj.items():
        e = unwrap_counter(vals, max_range_uj.get(zone)) * 1e-6
        gross += float(np.interp(run_span[1], t, e) - np.interp(run_span[0], t, e))
        idle_j += float(np.interp(idle_span[1], t, e) - np.interp(idle_span[0], t, e))
    idle_s = idle_span[1] - idle_span[0]
    return _result("rapl", "RAPL energy_uj of every CPU package (the whole package: all processes on this "
                   "machine), counter difference over the timed span minus the idle-window mean power x span",
                   gross_j=gross, idle_w=idle_j / idle_s if idle_s > 0 else 0.0, run_s=run_span[1] - run_span[0],
                   inferences=inferences, reasons=reasons, samples={"run": n_run, "idle": n_idle},
                   zones=sorted(counters_uj), **dict(facts or {}))
