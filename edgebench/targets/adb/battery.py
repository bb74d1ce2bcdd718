"""Battery readings around a device run, for energy per inference (``--energy``).

``BatteryMonitor`` on one device:

1. ``prepare()`` reads the battery's state (sysfs status/current/voltage, every power supply's
   type and ``online``, ``dumpsys battery``) and picks a source per value: sysfs, else
   ``dumpsys battery`` (``get current_now`` needs Android 15+). When an external supply is online
   it asks ``dumpsys battery suspend_input`` to stop charging (debuggable builds only) and, when
   the values come from sysfs, ``dumpsys battery unplug`` so Android behaves as on battery.
   ``unplug`` only changes what the framework reports -- and freezes ``dumpsys battery``'s values
   until ``reset`` -- so it never makes a charging measurement valid (edgebench.targets.energy decides
   validity from the hardware's status and supplies).
2. ``start()`` runs the device-side sampler (``RemoteCommand.battery_sampler``) in a thread,
   then waits the idle window; the run follows.
3. ``finish()`` stops the sampler (a stop file), parses its readings and always undoes
   ``unplug``/``suspend_input`` with ``dumpsys battery reset``.
4. ``energy(span, inferences)`` -> ``(energy object, None)`` or ``(None, reason)``. On an emulated
   device (``emulation``: what it reports, ``facts.emulation_evidence``) the figure is never valid:
   its battery is a model, not a gauge.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from edgebench.targets.energy import EnergySettings, PowerReading, battery_energy
from edgebench.core.errors import EdgebenchError
from edgebench.targets.adb.facts import _sections
from edgebench.targets.adb.remote import AdbDevice, RemoteCommand, ShellResult

EXTERNAL_TYPES = ("usb", "mains", "wireless", "usb_c", "usb_pd", "usb_dcp", "usb_cdp", "usb_aca", "dock")
DUMPSYS_STATUS = {"1": "Unknown", "2": "Charging", "3": "Discharging", "4": "Not charging", "5": "Full"}
SUSPEND_POLLS, SUSPEND_POLL_S = 10, 0.3      # wait up to 3 s for the status to leave "Charging"
START_MARGIN_S = 1.0     # the sampler's first reading lands within this after start(); the run starts later


def _value(v: str | None) -> str | None:
    v = (v or "").strip()
    return None if v in ("", "-") else v


def _num(v: str | None) -> float | None:
    v = _value(v)
    try:
        return float(v) if v is not None else None
    except ValueError:
        return None


def parse_battery_state(text: str) -> dict[str, Any]:
    """``RemoteCommand.BATTERY_STATE`` output -> ``{sysfs: {status, current_now, voltage_now},
    external: [names online], supplies: {name: (type, online)}, dumpsys: {key: value},
    dumpsys_current: float|None, complete}``."""
    s = _sections(text)
    sysfs = {}
    for ln in s.get("battery", []):
        k, _, v = ln.partition(" ")
        sysfs[k] = _value(v)
    supplies = {}
    for ln in s.get("supplies", []):
        parts = ln.split()
        if len(parts) >= 3 and parts[0] != "*":
            supplies[parts[0]] = (parts[1], parts[2])
    external = sorted(n for n, (t, o) in supplies.items()
                      if (t.lower() in EXTERNAL_TYPES or n.lower() in ("usb", "ac", "wireless", "dc")) and o == "1")
    dump = {}
    for ln in s.get("dumpsys", []):
        k, sep, v = ln.strip().partition(":")
        if sep:
            dump[k.strip()] = v.strip()
    cur = None
    for ln in s.get("current", []):
        cur = _num(ln) if cur is None else cur
    return {"sysfs": sysfs, "supplies": supplies, "external": external, "dumpsys": dump, "dumpsys_current": cur,
            "watched": sorted(n for n, (t, _) in supplies.items()
                              if t.lower() in EXTERNAL_TYPES or n.lower() in ("usb", "ac", "wireless", "dc")),
            "complete": "end" in s}


def parse_sampler(text: str) -> list[PowerReading]:
    """``RemoteCommand.battery_sampler`` output -> readings (lines that are not readings skipped)."""
    out = []
    for ln in text.splitlines():
        parts = ln.strip().split("|")
        if len(parts) < 5 or parts[0] != "S":
            continue
        t = _num(parts[1])
        if t is None:
            continue
        status = _value(parts[4])
        status = DUMPSYS_STATUS.get(status, status) if status else None
        online = [p.strip() for p in parts[5:]]
        out.append(PowerReading(t=t, current=_num(parts[2]), voltage=_num(parts[3]), status=status,
                                external_online=any(o == "1" for o in online) if online else None))
    return out


class BatteryMonitor:
    """Battery readings on one device around one run (see the module docstring)."""

    def __init__(self, device: AdbDevice, settings: EnergySettings, run_dir: str, deadline_s: float,
                 emulation: str | None = None) -> None:
        self.dev, self.settings, self.deadline_s = device, settings, deadline_s
        self.emulation = emulation
        self.stop_file = f"{run_dir}/battery.stop"
        self.facts: dict[str, Any] = {}
        self.reason: str | None = None
        self.readings: list[PowerReading] = []
        self._thread: threading.Thread | None = None
        self._result: ShellResult | None = None
        self._error: EdgebenchError | None = None
        self._changed = False
        self._finished = False

    def _state(self) -> dict[str, Any]:
        return parse_battery_state(self.dev.shell(RemoteCommand.BATTERY_STATE, what="reading the battery").stdout)

    def prepare(self) -> None:
        st = self._state()
        sysfs, dump = st["sysfs"], st["dumpsys"]
        cur = "sysfs" if _num(sysfs.get("current_now")) is not None else \
            "dumpsys" if st["dumpsys_current"] is not None else None
        volt = "sysfs" if _num(sysfs.get("voltage_now")) is not None else "dumpsys" if dump.get("voltage") else None
        status = "sysfs" if sysfs.get("status") else "dumpsys" if dump.get("status") else None
        self.sources = {"current": cur, "voltage": volt, "status": status}
        self.facts = {"sources": dict(self.sources), "status_before": sysfs.get("status")
                      or DUMPSYS_STATUS.get(dump.get("status", ""), dump.get("status")),
                      "external_supplies_online": st["external"]}
        self.watched = st["watched"]
        if cur is None:
            self.reason = ("the battery current is not readable on this device (/sys/class/power_supply/battery/"
                           "current_now is closed and `dumpsys battery get current_now` needs Android 15+)")
            return
        if volt is None:
            self.reason = "the battery voltage is not readable (sysfs voltage_now closed, no dumpsys voltage)"
            return
        if st["external"] or (sysfs.get("status") or "").lower() in ("charging", "full"):
            r = self.dev.shell(RemoteCommand.dumpsys_battery("suspend_input"), what="suspending charging")
            self._changed = True
            ok = False
            for _ in range(SUSPEND_POLLS if r.rc == 0 else 0):   # the charger stops within a gauge update
                ok = (self._state()["sysfs"].get("status") or "").lower() == "discharging"
                if ok:
                    break
                time.sleep(SUSPEND_POLL_S)
            self.facts["input_suspended"] = ok
            if not ok:
                self.facts["suspend_input_error"] = ((r.stdout + r.stderr).strip().splitlines() or
                                                     [f"exit {r.rc}"])[-1][:200]
        if "dumpsys" not in self.sources.values():        # unplug freezes dumpsys battery's values
            r = self.dev.shell(RemoteCommand.dumpsys_battery("unplug"), what="dumpsys battery unplug")
            self._changed = True
            self.facts["unplugged"] = r.rc == 0

    def start(self) -> None:
        """Start the sampler, then wait the idle window (nothing of ours runs but the sampler)."""
        if self.reason is not None:
            return
        script = RemoteCommand.battery_sampler(self.stop_file, self.settings.sample_every_s, self.watched,
                                               **self.sources)

        def run() -> None:
            try:
                self._result = self.dev.shell(script, deadline_s=self.deadline_s, what="reading the battery")
            except EdgebenchError as err:
                self._error = err

        self._thread = threading.Thread(target=run, daemon=True, name=f"battery-{self.dev.serial}")
        self._thread.start()
        time.sleep(self.settings.idle_s + START_MARGIN_S)

    def finish(self) -> None:
        """Stop the sampler and undo unplug/suspend_input (always; errors here lose no result).
        Idempotent: the run calls it when done and again on its way out."""
        if self._finished:
            return
        self._finished = True
        try:
            if self._thread is not None:
                try:
                    self.dev.shell(RemoteCommand.touch(self.stop_file), what="stopping the battery sampler")
                except EdgebenchError:
                    pass
                self._thread.join(timeout=self.settings.sample_every_s + 35)
                if self._result is not None:
                    self.readings = parse_sampler(self._result.stdout)
                elif self._error is not None:
                    self.reason = f"the battery sampler failed: {self._error}"
        finally:
            if self._changed:
                try:
                    r = self.dev.shell(RemoteCommand.dumpsys_battery("reset"), what="dumpsys battery reset")
                    self.facts["reset"] = r.rc == 0
                except EdgebenchError:
                    self.facts["reset"] = False

    def energy(self, span: list[float | None] | None, inferences: int) -> tuple[dict[str, Any] | None, str | None]:
        if self.reason is not None:
            return None, self.reason
        if not span or None in span:
            return None, "the runner reported no timed span on CLOCK_BOOTTIME to line the battery readings up with"
        if not self.readings:
            return None, "the battery sampler returned no readings"
        t0 = self.readings[0].t
        idle = (t0, t0 + self.settings.idle_s)
        source = "battery " + "/".join(f"{k} {v}" for k, v in self.sources.items())
        return battery_energy(self.readings, idle, (float(span[0]), float(span[1])), inferences, source=source,
                              facts=self.facts, emulation=self.emulation), None
