"""What this host's kernel says about heat and power, read in the parent while a worker runs.

Thermal zones (``/sys/class/thermal``), CPU frequencies (``/sys/devices/system/cpu/cpu*/cpufreq``)
and the RAPL energy counters of the CPU packages (``/sys/class/powercap/intel-rapl:N``; AMD
exposes its packages under the same name) are read every ``period_s`` by a thread of this
process, never by the worker, and each reading is stamped on CLOCK_BOOTTIME -- the clock the
worker stamps its timed span with (``timed_span_boottime_s``) -- so readings and inferences line
up. Whatever is absent or unreadable is reported with the reason instead of a number.
"""

from __future__ import annotations

import glob
import os
import re
import threading
import time
from dataclasses import dataclass, field
from typing import Any

POWERCAP = "/sys/class/powercap"
THERMAL = "/sys/class/thermal"
CPUS = "/sys/devices/system/cpu"
_PACKAGE_ZONE = re.compile(r"^intel-rapl:\d+$")     # packages; intel-rapl:N:M are their sub-domains


def boottime_s() -> float | None:
    clk = getattr(time, "CLOCK_BOOTTIME", None)
    return None if clk is None else time.clock_gettime(clk)


def _read(path: str) -> str | None:
    try:
        with open(path) as fh:
            return fh.read().strip()
    except OSError:
        return None


def rapl_zones(root: str = POWERCAP) -> tuple[dict[str, str], str | None]:
    """``({zone name: zone dir}, None)`` for readable RAPL package zones, else ``({}, reason)``."""
    dirs = sorted(d for d in glob.glob(os.path.join(root, "intel-rapl:*")) if _PACKAGE_ZONE.match(os.path.basename(d)))
    if not dirs:
        return {}, (f"no RAPL package zones under {root} (the kernel does not expose RAPL here: virtual machines "
                    "and containers usually hide it, and non-x86 CPUs have none)")
    zones = {}
    for d in dirs:
        try:
            with open(os.path.join(d, "energy_uj")) as fh:
                int(fh.read().strip())
        except PermissionError:
            return {}, (f"{d}/energy_uj is readable by root only (Linux restricts RAPL since CVE-2020-8694); "
                        "run as root or make it readable (chmod o+r .../energy_uj)")
        except (OSError, ValueError) as exc:
            return {}, f"{d}/energy_uj cannot be read ({exc})"
        zones[_read(os.path.join(d, "name")) or os.path.basename(d)] = d
    return zones, None


def thermal_snapshot(thermal_root: str = THERMAL, cpu_root: str = CPUS) -> dict[str, Any]:
    """``{zones_c, cpus}`` in the shape the adb thermal sampler gives (empty when absent)."""
    zones: dict[str, float] = {}
    for z in sorted(glob.glob(os.path.join(thermal_root, "thermal_zone*"))):
        raw = _read(os.path.join(z, "temp"))
        try:
            c = int(raw) / 1000.0 if raw is not None else None
        except ValueError:
            c = None
        if c is not None:
            name = _read(os.path.join(z, "type")) or os.path.basename(z)
            zones[name if name not in zones else f"{name}#{os.path.basename(z)}"] = round(c, 3)
    cpus = []
    for c in sorted(glob.glob(os.path.join(cpu_root, "cpu[0-9]*")), key=lambda p: int(p.rsplit("cpu", 1)[1])):
        f = os.path.join(c, "cpufreq")
        if not os.path.isdir(f):
            continue

        def num(name: str) -> int | None:
            v = _read(os.path.join(f, name))
            return int(v) if v and v.isdigit() else None

        cpus.append({"cpu": int(c.rsplit("cpu", 1)[1]), "max_khz": num("cpuinfo_max_freq"),
                     "cap_khz": num("scaling_max_freq"), "cur_khz": num("scaling_cur_freq"),
                     "governor": _read(os.path.join(f, "scaling_governor"))})
    return {"zones_c": zones, "cpus": cpus}


@dataclass
class HostSampler:
    """A thread reading thermal/cpufreq (``thermal``) and RAPL counters (``rapl``) every
    ``period_s`` until ``stop()``; ``readings`` are ``{"t": boottime s, "zones_c", "cpus",
    "rapl": {zone: uJ}}``."""

    period_s: float = 1.0
    thermal: bool = True
    rapl: bool = False
    thermal_root: str = THERMAL
    cpu_root: str = CPUS
    powercap_root: str = POWERCAP
    readings: list[dict[str, Any]] = field(default_factory=list)
    rapl_reason: str | None = None
    rapl_max_range_uj: dict[str, float | None] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._zones: dict[str, str] = {}
        if self.rapl:
            self._zones, self.rapl_reason = rapl_zones(self.powercap_root)
            for name, d in self._zones.items():
                v = _read(os.path.join(d, "max_energy_range_uj"))
                self.rapl_max_range_uj[name] = float(v) if v and v.isdigit() else None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def read(self) -> dict[str, Any]:
        r: dict[str, Any] = {"t": boottime_s()}
        if self.thermal:
            r.update(thermal_snapshot(self.thermal_root, self.cpu_root))
        if self._zones:
            r["rapl"] = {}
            for name, d in self._zones.items():
                v = _read(os.path.join(d, "energy_uj"))
                if v is not None and v.isdigit():
                    r["rapl"][name] = float(v)
        return r

    def start(self) -> "HostSampler":
        self.readings.append(self.read())

        def loop() -> None:
            while not self._stop.wait(self.period_s):
                self.readings.append(self.read())

        self._thread = threading.Thread(target=loop, daemon=True, name="edgebench-host-sensors")
        self._thread.start()
        return self

    def stop(self) -> list[dict[str, Any]]:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.period_s + 5)
        self.readings.append(self.read())
        return self.readings

    def thermal_reason(self) -> str | None:
        """Why the readings hold no temperatures or frequencies (None when they do)."""
        if any(r.get("zones_c") or r.get("cpus") for r in self.readings):
            return None
        return (f"this host exposes no thermal zones ({self.thermal_root}) and no cpufreq "
                f"({self.cpu_root}/cpu*/cpufreq): virtual machines and containers usually hide them")
