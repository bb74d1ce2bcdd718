"""Device facts from shell output (pure; unit-tested on their own): sections of a
``RemoteCommand.PROBE``/``THERMAL`` run -> props, CPU frequencies, thermal zones, battery,
python3 + TFLite runtime, and whether the device is emulated.

Emulated devices are told by what they report, the way Android's own tools tell them: the
emulator sets ``ro.kernel.qemu=1`` (up to Android 11) or ``ro.boot.qemu=1`` (Android 12 on) and
its hardware is ``goldfish`` (the old kernel) or ``ranchu`` (the current one); a board under
qemu names ``qemu`` in its hardware. edgebench's own simulated device advertises itself the same
way. An emulated device's model carries ``EMULATED_SUFFIX`` wherever it is shown or stored, and
its facts say ``emulated`` with the evidence (``emulation``)."""

from __future__ import annotations

import re
from typing import Any


def _sections(text: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    cur = None
    for line in text.splitlines():
        if line.startswith("@@"):
            cur = line[2:].strip()
            out[cur] = []
        elif cur is not None:
            out[cur].append(line)
    return out


_PROP_RE = re.compile(r"^\[([^\]]+)\]: \[(.*)\]$")


def _int(s: str) -> int | None:
    try:
        return int(s)
    except (TypeError, ValueError):
        return None


def _temp_c(raw: str) -> float | None:
    """sysfs thermal value -> degrees C (millidegrees on most kernels, degrees on a few)."""
    v = _int(raw)
    if v is None:
        return None
    c = v / 1000.0 if abs(v) >= 1000 else float(v)
    return c if -40.0 <= c <= 200.0 else None


def parse_cpufreq(lines: list[str]) -> list[dict[str, Any]]:
    cpus = []
    for line in lines:
        parts = line.split()
        if len(parts) < 5 or not parts[0].startswith("cpu"):
            continue
        cpus.append({"cpu": _int(parts[0][3:]), "max_khz": _int(parts[1]), "cap_khz": _int(parts[2]),
                     "cur_khz": _int(parts[3]), "governor": None if parts[4] == "-" else parts[4]})
    return sorted(cpus, key=lambda c: c["cpu"] if c["cpu"] is not None else -1)


def parse_thermal(lines: list[str]) -> dict[str, float]:
    zones: dict[str, float] = {}
    for line in lines:
        parts = line.split(None, 2)
        if len(parts) < 2:
            continue
        t = _temp_c(parts[1])
        if t is None:
            continue
        name = parts[2].strip() if len(parts) > 2 and parts[2].strip() else parts[0]
        if name in zones:
            name = f"{name}#{parts[0]}"
        zones[name] = round(t, 3)
    return zones


EMULATOR_HARDWARE = ("goldfish", "ranchu")          # Android emulator kernels (ro.hardware, /proc/cpuinfo)
EMULATED_SUFFIX = " (emulated)"


def emulation_evidence(props: dict[str, str], cpuinfo_hardware: str | None = None) -> str | None:
    """What the device reports that makes it an emulator (``"ro.kernel.qemu=1, ro.hardware=ranchu"``),
    or None for a device that reports none of it (see the module docstring)."""
    found = [f"{k}=1" for k in ("ro.kernel.qemu", "ro.boot.qemu") if (props.get(k) or "").strip() == "1"]
    for k in ("ro.hardware", "ro.boot.hardware"):
        v = (props.get(k) or "").strip()
        if v.lower() in EMULATOR_HARDWARE or v.lower().startswith("qemu"):
            found.append(f"{k}={v}")
    hw = (cpuinfo_hardware or "").strip()
    if hw.lower() in EMULATOR_HARDWARE:
        found.append(f"/proc/cpuinfo Hardware {hw}")
    return ", ".join(found) or None


def device_label(model: str | None, emulation: str | None) -> str | None:
    """The device's name as edgebench shows and stores it: ``ro.product.model``, with
    ``EMULATED_SUFFIX`` when the device is emulated (so no table, export or store row can pass an
    emulated "Pixel 8" off as the phone)."""
    if emulation is None:
        return model
    return (model or "unknown model") + EMULATED_SUFFIX


def parse_probe(text: str) -> dict[str, Any]:
    """The output of ``RemoteCommand.PROBE`` -> device facts (pure; tested on its own)."""
    s = _sections(text)
    props = {}
    for line in s.get("props", []):
        m = _PROP_RE.match(line.strip())
        if m:
            props[m.group(1)] = m.group(2)
    cpuinfo = s.get("cpuinfo", [])
    cores_cpuinfo = sum(1 for ln in cpuinfo if ln.lower().startswith("processor"))
    hardware = next((ln.split(":", 1)[1].strip() for ln in cpuinfo
                     if ln.lower().startswith(("hardware", "model name"))), None)
    mem = None
    for ln in s.get("meminfo", []):
        if ln.startswith("MemTotal:"):
            v = _int(ln.split()[1])
            mem = v * 1024 if v is not None else None
    cpus = parse_cpufreq(s.get("cpufreq", []))
    governors = sorted({c["governor"] for c in cpus if c["governor"]})
    battery: dict[str, Any] = {}
    for ln in s.get("battery", []):
        k, _, v = ln.partition(" ")
        v = v.strip()
        if not v:
            continue
        if k == "capacity":
            battery["level_pct"] = _int(v)
        elif k == "temp":
            t = _int(v)
            battery["temp_c"] = t / 10.0 if t is not None else None
        elif k == "status":
            battery["status"] = v
    py_path = None
    runtime = None
    for ln in s.get("python", []):
        if ln.startswith("path "):
            py_path = ln[5:].strip()
        elif ln.startswith("runtime "):
            parts = ln.split()
            runtime = f"{parts[1]} {parts[2] if len(parts) > 2 else '?'}"
    timeout_tool = next((ln.strip() for ln in s.get("timeout", []) if ln.strip()), None)
    soc = " ".join(x for x in (props.get("ro.soc.manufacturer"), props.get("ro.soc.model")) if x) or \
        props.get("ro.board.platform") or props.get("ro.hardware") or hardware
    emulation = emulation_evidence(props, hardware)
    return {
        "model": device_label(props.get("ro.product.model"), emulation),
        "product_model": props.get("ro.product.model"),
        "emulated": emulation is not None,
        "emulation": emulation,
        "manufacturer": props.get("ro.product.manufacturer"),
        "product": props.get("ro.product.name"),
        "soc": soc,
        "board": props.get("ro.product.board") or props.get("ro.board.platform"),
        "hardware": props.get("ro.hardware") or hardware,
        "abi": props.get("ro.product.cpu.abi"),
        "android_version": props.get("ro.build.version.release"),
        "sdk": _int(props.get("ro.build.version.sdk", "")),
        "build_fingerprint": props.get("ro.build.fingerprint"),
        "cpu_cores": len(cpus) or cores_cpuinfo or None,
        "cpu_max_khz": [c["max_khz"] for c in cpus],
        "ram_bytes": mem,
        "governor": ",".join(governors) if governors else None,
        "thermal_c": parse_thermal(s.get("thermal", [])),
        "battery": battery,
        "python3": py_path,
        "tflite_runtime": runtime,
        "has_python_runtime": bool(py_path and runtime),
        "timeout_tool": timeout_tool,
        "probe_complete": "end" in s,
        "props": props,
    }


def parse_uptime(lines: list[str]) -> float | None:
    """``/proc/uptime`` -> seconds on CLOCK_BOOTTIME (its first field)."""
    for line in lines:
        try:
            return float(line.split()[0])
        except (IndexError, ValueError):
            continue
    return None


def parse_thermal_status(lines: list[str]) -> int | None:
    """``dumpsys thermalservice``'s ``Thermal Status: N`` (0 none, 1 light, 2 moderate, 3 severe,
    4 critical, 5 emergency, 6 shutdown; android.os.PowerManager) -> N; None when absent."""
    for line in lines:
        if "Thermal Status" in line:
            try:
                return int(line.rsplit(":", 1)[1].strip())
            except (IndexError, ValueError):
                return None
    return None
