"""The simulated device's power side: a battery whose current follows the real CPU load of the
commands the device runs, plus ``dumpsys battery`` and ``dumpsys thermalservice``.

The battery (``SimBattery``, one thread per device) reads, every ``update_s``, the CPU time
(utime + stime, and cutime + cstime of reaped children) of every process tree the device started
and turns it into a current: ``idle_ma + ma_per_core x busy cores``, smoothed like a fuel gauge
(exponential average, ``gauge_tau_s``). It writes what a phone's kernel shows under
``/sys/class/power_supply``:

* ``battery/current_now`` and ``voltage_now`` in ``units`` ("uA": uA and uV, most devices; "mA":
  mA and mV, some older kernels), negative while discharging when ``negative_discharge`` (Pixel
  style) else positive (Samsung style); the voltage sags by ``resistance_mohm`` x current;
* ``battery/status``: "Charging" while a cable (``usb_online``) supplies power, "Discharging"
  otherwise or when the input was suspended;
* ``usb/online`` (1 while the cable is in, suspended or not).

``dumpsys battery`` behaves as AOSP's BatteryService does (frameworks/base BatteryService.java):
the dump prints voltage in mV and status as an integer; ``unplug`` only changes what the
framework reports and *freezes* the dump ("UPDATES STOPPED") until ``reset`` -- the charger keeps
charging; ``suspend_input`` really stops charging, on debuggable builds only (else a
SecurityException); ``get current_now`` prints uA (Android 15+, ``dumpsys_current``).
``dumpsys thermalservice`` prints ``Thermal Status: N`` from the device's scripted status.
"""

from __future__ import annotations

import os
import shlex
import threading
import time
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Callable, Iterable

from edgebench.targets.sim.devicefs import DeviceFS

_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
STATUS_CODES = {"Charging": 2, "Discharging": 3, "Not charging": 4, "Full": 5}


@dataclass
class BatteryConfig:
    """``SimConfig.battery`` keys (all optional)."""

    enabled: bool = True
    usb_online: bool = False
    debuggable: bool = False
    units: str = "uA"
    negative_discharge: bool = True
    idle_ma: float = 120.0
    ma_per_core: float = 450.0
    charge_ma: float = 1500.0
    ocv_mv: float = 3900.0
    resistance_mohm: float = 120.0
    sysfs_current: bool = True          # False: current_now absent (SELinux-closed sysfs)
    dumpsys_current: bool = True        # `dumpsys battery get current_now` answers
    update_s: float = 0.1
    gauge_tau_s: float = 0.3

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None) -> "BatteryConfig":
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(d or {}) - known)
        if unknown:
            raise ValueError(f"unknown simulated battery keys {unknown}; known: {sorted(known)}")
        cfg = cls(**(d or {}))
        if cfg.units not in ("uA", "mA"):
            raise ValueError(f"battery units {cfg.units!r}: use 'uA' or 'mA'")
        return cfg


def tree_cpu_s(pid: int) -> float:
    """CPU seconds of a process and all its live descendants (plus their reaped children)."""
    total = 0.0
    stack = [pid]
    seen: set[int] = set()
    while stack:
        p = stack.pop()
        if p in seen:
            continue
        seen.add(p)
        try:
            with open(f"/proc/{p}/stat") as fh:
                stat = fh.read()
        except OSError:
            continue
        f = stat.rsplit(")", 1)[1].split()
        total += sum(int(x) for x in f[11:15]) / _TICK      # utime stime cutime cstime
        for task in Path(f"/proc/{p}/task").glob("*/children"):
            try:
                stack.extend(int(c) for c in task.read_text().split())
            except (OSError, ValueError):
                pass
    return total


class SimBattery:
    """The battery thread of one simulated device (see the module docstring). Every file goes
    through ``DeviceFS.put`` (renamed into place: readers never see a half-written value, and a
    link a device command left there is replaced, never written through)."""

    SIM = "/.sim"
    SUPPLY = "/sys/class/power_supply"

    def __init__(self, fs: DeviceFS, cfg: BatteryConfig, level: int, temp_c: float,
                 pids: Callable[[], Iterable[int]]) -> None:
        self.fs, self.cfg, self.level, self.temp_c, self._pids = fs, cfg, level, temp_c, pids
        self._cpu: dict[int, float] = {}
        self._ma = cfg.idle_ma
        self._stop = threading.Event()

    # --- state -----------------------------------------------------------------------------------
    def flag(self, name: str) -> bool:
        return self.fs.exists(f"{self.SIM}/{name}")

    def charging(self) -> bool:
        return self.cfg.usb_online and not self.flag("battery_input_suspended")

    def load_cores(self, dt: float) -> float:
        busy = 0.0
        now: dict[int, float] = {}
        for pid in list(self._pids()):
            now[pid] = tree_cpu_s(pid)
            busy += max(0.0, now[pid] - self._cpu.get(pid, now[pid]))
        self._cpu = now
        return busy / dt if dt > 0 else 0.0

    # --- files -------------------------------------------------------------------------------------
    def build(self) -> None:
        c, put = self.cfg, self.fs.put
        bat, usb, sim = f"{self.SUPPLY}/battery", f"{self.SUPPLY}/usb", self.SIM
        put(f"{bat}/type", "Battery\n")
        put(f"{usb}/type", "USB\n")
        put(f"{usb}/online", f"{int(c.usb_online)}\n")
        put(f"{sim}/debuggable", f"{int(c.debuggable)}\n")
        if not self.flag("thermal_status"):
            put(f"{sim}/thermal_status", "0\n")
        if c.dumpsys_current:
            put(f"{sim}/dumpsys_current", "1\n")
        else:
            self.fs.remove(f"{sim}/dumpsys_current")
        if not c.sysfs_current:
            self.fs.remove(f"{bat}/current_now")
        self.update(0.0)

    def update(self, dt: float) -> None:
        c, put, sim = self.cfg, self.fs.put, self.SIM
        load_ma = c.idle_ma + c.ma_per_core * self.load_cores(dt)
        a = 1.0 if dt <= 0 else 1.0 - pow(2.718281828, -dt / c.gauge_tau_s)
        self._ma += a * (load_ma - self._ma)
        sign = -1.0 if c.negative_discharge else 1.0
        if self.charging():
            into = c.charge_ma - self._ma              # the charger feeds the SoC and the battery
            ma, mv, status = -sign * into, c.ocv_mv + c.resistance_mohm * into / 1000.0, "Charging"
        else:
            ma, mv, status = sign * self._ma, c.ocv_mv - c.resistance_mohm * self._ma / 1000.0, "Discharging"
        k = 1000.0 if c.units == "uA" else 1.0
        bat = f"{self.SUPPLY}/battery"
        if c.sysfs_current:
            put(f"{bat}/current_now", f"{int(round(ma * k))}\n")
        put(f"{bat}/voltage_now", f"{int(round(mv * k))}\n")
        put(f"{bat}/status", f"{status}\n")
        put(f"{sim}/current_ua", f"{int(round(ma * 1000))}\n")
        if not self.flag("battery_unplugged"):        # AOSP freezes the dump after `unplug`
            usb = self.cfg.usb_online
            put(f"{sim}/battery_dump", "\n".join([
                "Current Battery Service state:", "  AC powered: false", f"  USB powered: {str(usb).lower()}",
                "  Wireless powered: false", "  Dock powered: false", "  Max charging current: 3000000",
                "  Max charging voltage: 5000000", "  Charge counter: 3800000",
                f"  status: {STATUS_CODES[status]}", "  health: 2", "  present: true", f"  level: {self.level}",
                "  scale: 100", f"  voltage: {int(round(mv))}", f"  temperature: {int(round(self.temp_c * 10))}",
                "  technology: Li-ion", ""]))
        elif not self.flag("battery_dump_frozen"):
            text = self.fs.read_text(f"{sim}/battery_dump").replace(
                "Current Battery Service state:\n", "Current Battery Service state:\n"
                "  (UPDATES STOPPED -- use 'reset' to restart)\n", 1).replace("USB powered: true", "USB powered: false")
            put(f"{sim}/battery_dump", text)
            put(f"{sim}/battery_dump_frozen", "1\n")

    def start(self) -> None:
        def loop() -> None:
            last = time.monotonic()
            while not self._stop.wait(self.cfg.update_s):
                now = time.monotonic()
                try:
                    self.update(now - last)
                except OSError:
                    pass              # the sandbox is being removed
                last = now

        threading.Thread(target=loop, daemon=True, name="simadbd-battery").start()

    def stop(self) -> None:
        self._stop.set()


def dumpsys_script(sim_dir: str, shell: str = "/bin/sh") -> str:
    """``/system/bin/dumpsys``: battery and thermalservice (see the module docstring). SIM_DIR is
    the simulator's state folder as the device's commands see it; SHELL the device's sh."""
    s = shlex.quote(sim_dir)
    return f"""#!{shell}
# dumpsys for the simulated device (edgebench.targets.sim.power): battery and thermalservice
S={s}
case "$1" in
battery)
  case "$2" in
  unplug) : > "$S/battery_unplugged"; exit 0 ;;
  reset) rm -f "$S/battery_unplugged" "$S/battery_dump_frozen" "$S/battery_input_suspended"; exit 0 ;;
  suspend_input)
    if [ "$(cat "$S/debuggable")" = 1 ]; then : > "$S/battery_input_suspended"; exit 0; fi
    echo "Exception occurred while executing 'suspend_input':"
    echo "java.lang.SecurityException: battery suspend_input is only supported on debuggable builds"
    exit 255 ;;
  get)
    shift 2; [ "$1" = -f ] && shift
    if [ "$1" = current_now ] && [ -e "$S/dumpsys_current" ]; then cat "$S/current_ua"; else echo "Unknown get option: $1"; fi
    exit 0 ;;
  "") cat "$S/battery_dump"; exit 0 ;;
  *) echo "Unknown command: $2"; exit 255 ;;
  esac ;;
thermalservice)
  echo "IsStatusOverride: false"
  echo "ThermalEventListeners:"
  echo "Thermal Status: $(cat "$S/thermal_status")"
  exit 0 ;;
*) echo "Can't find service: $1"; exit 0 ;;
esac
"""
