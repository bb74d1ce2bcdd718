"""Device facts from shell output (pure; unit-tested on their own): sections of a
``RemoteCommand.PROBE``/``THERMAL`` run -> props, CPU frequencies, thermal zones, battery,
python3 + TFLite runtime."""

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
    return {
        "model": props.get("ro.product.model"),
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
