"""Target "adb:SERIAL": phones and boards over adb (on adbutils), plus ``edgebench devices``.

Contract:

* Every string that reaches a device shell is built by ``RemoteCommand`` (this module, one
  place) and every argument in it is ``shlex.quote``d: a file name with spaces, quotes or ``;``
  reaches the device intact and is never interpreted.
* Every remote command runs under a device-side deadline (toybox/coreutils ``timeout``):
  adbutils' own timeout is an idle timeout, not a deadline. A command succeeded only when its
  exit code came back (shell v2) AND the files it must write are there: a dropped connection
  can look like a clean, partial output.
* Files go into ``/data/local/tmp/edgebench/``: models, inputs and the runner are cached by
  name in ``files/`` and pushed again only when their remote sha256 differs; job and results
  live in a per-run folder ``run-<id>/`` that is removed afterwards.
* Thermal: zones and CPU frequencies are sampled before, during and after each run; before it,
  the device cools down until its hottest zone is below a threshold (with a timeout), never a
  fixed sleep. A run is flagged ``throttled`` when a CPU frequency cap drops, the peak CPU
  frequency falls, or latency trends upward. All of it is in ``RunResult.extra["thermal"]``.
* Runner: the edgebench runner (``runner.py``) when the device has ``python3`` with a TFLite
  runtime; otherwise Google's ``benchmark_model`` binary (``edgebench.targets.benchmark_model``).
"""

from __future__ import annotations

import json
import math
import os
import re
import shlex
import shutil
import stat
import struct
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable

import numpy as np

from edgebench.errors import BadInput, EdgebenchError, InfraError
from edgebench.fingerprint import sha256_file
from edgebench.targets.base import Job, RunResult, check_job_files

REMOTE_ROOT = "/data/local/tmp/edgebench"
REMOTE_FILES = f"{REMOTE_ROOT}/files"          # pushed files, cached by name (sha256-checked)
RUNNER_PATH = Path(__file__).with_name("runner.py")
DEFAULT_SERVER_PORT = 5037
SIM_HINT = ("or try the simulated device: python -m edgebench.sim.adbd --port 5599 --sandbox /tmp/simphone "
            "--python & adb connect 127.0.0.1:5599")
DEVICE_DELEGATES = ("xnnpack", "none", "gpu", "nnapi")
# A command's device-side deadline when the caller gives none (probes, pushes' checks, cleanup).
SHORT_DEADLINE_S = 30.0
# Grace between the deadline's SIGTERM and its SIGKILL.
KILL_GRACE_S = 2
# adb's host protocol frames a request with a 4-hex-digit length; stay well below it.
MAX_COMMAND_BYTES = 32 * 1024
# The host additionally gives up on a silent connection this long after the device deadline.
HOST_MARGIN_S = 30.0


# ============================================================================ shell strings
class RemoteCommand:
    """The ONE place where device shell strings are built. Every argument goes through
    ``shlex.quote``; scripts below are constants or composed only of quoted arguments."""

    @staticmethod
    def q(arg: str | int | float) -> str:
        return shlex.quote(str(arg))

    @classmethod
    def join(cls, argv: Iterable[str | int | float]) -> str:
        return " ".join(cls.q(a) for a in argv)

    @classmethod
    def with_deadline(cls, script: str, deadline_s: float) -> str:
        """``timeout`` (toybox on Android, coreutils on boards) kills the script on the device,
        TERM first and KILL ``KILL_GRACE_S`` later; exit 124/137 means the deadline hit."""
        secs = max(1, int(math.ceil(deadline_s)))
        return f"timeout -k {KILL_GRACE_S} {secs} sh -c {cls.q(script)}"

    @classmethod
    def sha256(cls, path: str) -> str:
        return f"sha256sum {cls.q(path)} 2>/dev/null"

    @classmethod
    def mkdir(cls, *paths: str) -> str:
        return "mkdir -p " + cls.join(paths)

    @classmethod
    def chmod_exec(cls, path: str) -> str:
        return f"chmod 755 {cls.q(path)}"

    @classmethod
    def rm_rf(cls, path: str) -> str:
        if not path.startswith(REMOTE_ROOT + "/"):
            raise ValueError(f"refusing to remove {path!r} outside {REMOTE_ROOT}")
        return f"rm -rf {cls.q(path)}"

    @classmethod
    def test_files(cls, paths: Iterable[str]) -> str:
        """Prints ``OK i`` / ``NO i`` for the i-th path (a non-empty file or not)."""
        return "; ".join(f"if [ -s {cls.q(p)} ]; then echo OK {i}; else echo NO {i}; fi"
                         for i, p in enumerate(paths))

    @classmethod
    def in_dir(cls, directory: str, argv: list[str]) -> str:
        """``cd DIR && exec ARGV``: exec so the deadline's signal reaches the program itself."""
        return f"cd {cls.q(directory)} && exec {cls.join(argv)}"

    @classmethod
    def script_line(cls, argv: list[str], *, quiet: bool = False) -> str:
        """One line of a device-side script file: ARGV, stopping the script when it fails."""
        return cls.join(argv) + (" >/dev/null 2>&1" if quiet else "") + " || exit $?"

    @classmethod
    def in_dir_script(cls, directory: str, script: str) -> str:
        return f"cd {cls.q(directory)} && {script}"

    PROBE = r"""
echo '@@props'; getprop
echo '@@cpuinfo'; cat /proc/cpuinfo 2>/dev/null
echo '@@meminfo'; cat /proc/meminfo 2>/dev/null
echo '@@cpufreq'
for c in /sys/devices/system/cpu/cpu[0-9]*; do
  echo "${c##*/} $(cat $c/cpufreq/cpuinfo_max_freq 2>/dev/null || echo -) $(cat $c/cpufreq/scaling_max_freq 2>/dev/null || echo -) $(cat $c/cpufreq/scaling_cur_freq 2>/dev/null || echo -) $(cat $c/cpufreq/scaling_governor 2>/dev/null || echo -)"
done
echo '@@thermal'
for z in /sys/class/thermal/thermal_zone*; do
  echo "${z##*/} $(cat $z/temp 2>/dev/null || echo -) $(cat $z/type 2>/dev/null)"
done
echo '@@battery'
for f in capacity temp status; do echo "$f $(cat /sys/class/power_supply/battery/$f 2>/dev/null)"; done
echo '@@python'
if command -v python3 >/dev/null 2>&1; then
  echo "path $(command -v python3)"
  python3 -c 'import importlib.util as u, importlib.metadata as m
for mod, dist in (("ai_edge_litert", "ai-edge-litert"), ("tflite_runtime", "tflite-runtime"), ("tensorflow", "tensorflow")):
    if u.find_spec(mod):
        try: v = m.version(dist)
        except Exception: v = "?"
        print("runtime", mod, v); break' 2>/dev/null
fi
echo '@@timeout'; command -v timeout 2>/dev/null
echo '@@end'
"""

    THERMAL = r"""
echo '@@thermal'
for z in /sys/class/thermal/thermal_zone*; do
  echo "${z##*/} $(cat $z/temp 2>/dev/null || echo -) $(cat $z/type 2>/dev/null)"
done
echo '@@cpufreq'
for c in /sys/devices/system/cpu/cpu[0-9]*; do
  echo "${c##*/} $(cat $c/cpufreq/cpuinfo_max_freq 2>/dev/null || echo -) $(cat $c/cpufreq/scaling_max_freq 2>/dev/null || echo -) $(cat $c/cpufreq/scaling_cur_freq 2>/dev/null || echo -) $(cat $c/cpufreq/scaling_governor 2>/dev/null || echo -)"
done
echo '@@end'
"""


# ============================================================================ adb server
def _client():
    """An adbutils client for the server at $ANDROID_ADB_SERVER_PORT (read now, not at import)."""
    from adbutils import AdbClient

    port = int(os.environ.get("ANDROID_ADB_SERVER_PORT", DEFAULT_SERVER_PORT))
    host = os.environ.get("ANDROID_ADB_SERVER_HOST", "127.0.0.1")
    return AdbClient(host=host, port=port, socket_timeout=20)


def _describe(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__


def _adb_errors() -> tuple[type[BaseException], ...]:
    from adbutils import AdbError

    return (AdbError, EOFError, OSError)


def list_states() -> list[tuple[str, str]]:
    """[(serial, state)] as ``adb devices`` shows them (starts the adb server if needed)."""
    try:
        return [(d.serial, d.state) for d in _client().list()]
    except _adb_errors() as exc:
        port = os.environ.get("ANDROID_ADB_SERVER_PORT", DEFAULT_SERVER_PORT)
        raise InfraError(f"cannot reach or start the adb server on port {port} ({exc}); install adb "
                         "(apt-get install adb / Android platform-tools) and run 'adb start-server'") from None


def _state_fix(serial: str, state: str) -> str:
    if state == "unauthorized":
        return (f"adb device {serial} is unauthorized: unlock it and accept 'Allow USB debugging?' "
                "(or revoke USB debugging authorizations, replug and accept), then rerun")
    if state == "offline":
        return (f"adb device {serial} is offline: replug it or run 'adb reconnect offline' (for a network "
                f"device 'adb disconnect {serial} && adb connect {serial}'), then rerun")
    return f"adb device {serial} is in state {state!r}, not 'device'; reboot it into Android, then rerun"


# ============================================================================ device facts
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


# ============================================================================ thermal
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
      ``latency_rise`` x the median of the first third (needs >= 30 samples).
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
        if first > 0 and last > latency_rise * first:
            reasons.append("latency_trend")
    return {"throttled": bool(reasons), "throttle_reasons": reasons, **details}


# ============================================================================ one device
@dataclass
class ShellResult:
    rc: int
    stdout: str
    stderr: str


@dataclass
class ThermalPolicy:
    """Cool-down and sampling settings (defaults written once, here)."""

    cooldown_below_c: float | None = 42.0   # None: no cool-down
    cooldown_timeout_s: float = 180.0
    poll_s: float = 2.0
    sample_every_s: float = 1.0              # during the run


class AdbDevice:
    """One device: quoted shell with a device-side deadline, sha-checked push, pull, facts."""

    def __init__(self, serial: str) -> None:
        self.serial = serial
        self._dev = _client().device(serial)

    # --- errors -----------------------------------------------------------------------------
    def lost(self, what: str, exc: BaseException | str) -> InfraError:
        state = None
        try:
            state = dict(list_states()).get(self.serial)
        except EdgebenchError:
            pass
        if state == "device":
            return InfraError(f"adb device {self.serial}: {what} ended without an exit code although the device "
                              f"is still attached ({exc}); adbd or the link dropped the command; rerun, and "
                              "check the USB/network link if it repeats")
        now = f"now {state}" if state else "no longer listed by adb devices"
        return InfraError(f"adb device {self.serial} was lost during {what} ({now}; {exc}); reconnect it "
                          f"(check the cable, or 'adb connect {self.serial}') and rerun")

    # --- shell --------------------------------------------------------------------------------
    def shell(self, script: str, *, deadline_s: float = SHORT_DEADLINE_S, what: str = "a shell command") -> ShellResult:
        """Run SCRIPT (built by RemoteCommand) under a device-side deadline; returns the real
        exit code from shell v2. A lost connection raises InfraError naming the serial."""
        cmd = RemoteCommand.with_deadline(script, deadline_s)
        if len(cmd.encode()) > MAX_COMMAND_BYTES:
            raise InfraError(f"adb device {self.serial}: {what} is a {len(cmd.encode())}-byte shell command, over "
                             f"the {MAX_COMMAND_BYTES} bytes adb carries; this is an edgebench bug, please report it")
        try:
            r = self._dev.shell2(cmd, timeout=deadline_s + KILL_GRACE_S + HOST_MARGIN_S,
                                 encoding=None, v2=True)
        except _adb_errors() as exc:
            raise self.lost(what, _describe(exc)) from None
        res = ShellResult(r.returncode, (r.stdout or b"").decode("utf-8", "replace"),
                          (r.stderr or b"").decode("utf-8", "replace"))
        if res.rc == 127 and "timeout" in res.stderr and "not found" in res.stderr:
            raise InfraError(f"adb device {self.serial} has no 'timeout' command, which edgebench needs to "
                             "enforce deadlines on the device (toybox has it from Android 6; on a board install "
                             "coreutils)")
        return res

    def check(self, script: str, *, what: str, deadline_s: float = SHORT_DEADLINE_S) -> ShellResult:
        r = self.shell(script, deadline_s=deadline_s, what=what)
        if r.rc in (124, 137):
            raise InfraError(f"adb device {self.serial}: {what} exceeded its device-side deadline of "
                             f"{deadline_s:g} s and was killed (exit {r.rc}); raise the deadline or check the device")
        if r.rc != 0:
            tail = (r.stderr or r.stdout).strip().splitlines()[-1:] or [""]
            raise InfraError(f"adb device {self.serial}: {what} failed with exit {r.rc}: {tail[0][:300]}")
        return r

    # --- files ---------------------------------------------------------------------------------
    def remote_sha256(self, path: str) -> str | None:
        r = self.shell(RemoteCommand.sha256(path), what=f"sha256 of {path}")
        tok = r.stdout.split()[:1]
        return tok[0] if r.rc == 0 and tok and re.fullmatch(r"[0-9a-f]{64}", tok[0]) else None

    def push(self, local: Path, remote: str, *, mode: int = 0o644) -> None:
        """sync SEND; a device-side failure message (e.g. ENOSPC) is kept, not lost."""
        size = local.stat().st_size
        try:
            with self._dev.open_transport(timeout=HOST_MARGIN_S) as c:
                c.send_command("sync:")
                c.check_okay()
                spec = f"{remote},{stat.S_IFREG | mode}".encode()
                sock = c.conn
                status = None
                try:
                    sock.sendall(b"SEND" + struct.pack("<I", len(spec)) + spec)
                    with open(local, "rb") as fh:
                        while True:
                            chunk = fh.read(64 * 1024)
                            if not chunk:
                                break
                            sock.sendall(b"DATA" + struct.pack("<I", len(chunk)) + chunk)
                    sock.sendall(b"DONE" + struct.pack("<I", int(time.time())))
                except OSError:
                    pass   # the device may have answered FAIL and closed early: read it below
                status = c.read_exact(4)
                n = struct.unpack("<I", c.read_exact(4))[0]
                if status == b"FAIL":
                    msg = c.read_exact(n).decode("utf-8", "replace")
                    if "No space left" in msg or "ENOSPC" in msg:
                        raise InfraError(
                            f"adb device {self.serial} storage is full: pushing {local.name} ({size} bytes) to "
                            f"{remote} failed ({msg}); free space on the device (e.g. adb -s {self.serial} "
                            f"shell rm -rf {REMOTE_ROOT}) and rerun")
                    raise InfraError(f"adb device {self.serial}: pushing {local} to {remote} failed: {msg}")
                if status != b"OKAY":
                    raise InfraError(f"adb device {self.serial}: unexpected sync answer {status!r} pushing {local}")
                try:
                    sock.sendall(b"QUIT" + struct.pack("<I", 0))
                except OSError:
                    pass
        except EdgebenchError:
            raise
        except _adb_errors() as exc:
            raise self.lost(f"push of {local.name}", _describe(exc)) from None

    def push_if_changed(self, local: Path, remote: str, *, mode: int = 0o644) -> bool:
        """Push unless the remote file's sha256 equals the local one. True when pushed."""
        want = sha256_file(local)
        if self.remote_sha256(remote) == want:
            return False
        self.push(local, remote, mode=mode)
        got = self.remote_sha256(remote)
        if got is not None and got != want:
            raise InfraError(f"adb device {self.serial}: {remote} has sha256 {got[:12]}... after the push, "
                             f"expected {want[:12]}...; the transfer was corrupted, rerun")
        return True

    def pull(self, remote: str, local: Path) -> None:
        try:
            self._dev.sync.pull_file(remote, local)
        except _adb_errors() as exc:
            raise self.lost(f"pull of {remote}", _describe(exc)) from None

    # --- facts ------------------------------------------------------------------------------
    def probe(self) -> dict[str, Any]:
        r = self.shell(RemoteCommand.PROBE, what="reading device facts")
        facts = parse_probe(r.stdout)
        if not facts["probe_complete"]:
            raise self.lost("reading device facts", "output ended early")
        return facts

    def thermal_sample(self) -> dict[str, Any]:
        r = self.shell(RemoteCommand.THERMAL, what="sampling thermal zones")
        s = _sections(r.stdout)
        if "end" not in s:
            raise self.lost("sampling thermal zones", "output ended early")
        return {"t": time.time(), "zones_c": parse_thermal(s.get("thermal", [])),
                "cpus": parse_cpufreq(s.get("cpufreq", []))}


# ============================================================================ the target
def _run_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S") + "-" + uuid.uuid4().hex[:8]


class AdbTarget:
    """Runs jobs on one adb device. ``runner``: "auto" (edgebench runner when the device has
    python3 + a TFLite runtime, else benchmark_model), "edgebench" or "benchmark_model"."""

    def __init__(self, serial: str, *, threads: int | None = None, delegate: str = "xnnpack",
                 runner: str = "auto", benchmark_binary: str | None = None,
                 thermal: ThermalPolicy | None = None, keep_files: bool = False) -> None:
        if delegate not in DEVICE_DELEGATES and not delegate.endswith(".so"):
            raise BadInput(f"--delegate {delegate!r} is unknown for adb targets; use one of "
                           f"{', '.join(DEVICE_DELEGATES)} or a path to a delegate .so on the device")
        if runner not in ("auto", "edgebench", "benchmark_model"):
            raise BadInput(f"runner {runner!r} is unknown; use auto, edgebench or benchmark_model")
        if threads is not None and threads < 1:
            raise BadInput(f"--threads must be >= 1, got {threads}")
        self.serial = serial
        self.name = f"adb:{serial}"
        self.threads = threads
        self.delegate = delegate
        self.runner = runner
        self.benchmark_binary = benchmark_binary
        self.thermal = thermal or ThermalPolicy()
        self.keep_files = keep_files
        self.device = AdbDevice(serial)
        self._facts: dict[str, Any] | None = None

    # -- protocol ------------------------------------------------------------------------------
    def facts(self, refresh: bool = False) -> dict[str, Any]:
        if self._facts is None or refresh:
            self._facts = self.device.probe()
        return self._facts

    def fingerprint(self) -> dict[str, Any]:
        f = self.facts()
        return {
            "target": self.name,
            "serial": self.serial,
            "device_model": f["model"],
            "manufacturer": f["manufacturer"],
            "soc": f["soc"],
            "board": f["board"],
            "abi": f["abi"],
            "os": f"Android {f['android_version']} (SDK {f['sdk']})" if f["android_version"] else None,
            "build_fingerprint": f["build_fingerprint"],
            "cpu_model": f["soc"],
            "cpu_count": f["cpu_cores"],
            "cpu_max_khz": f["cpu_max_khz"],
            "mem_total_bytes": f["ram_bytes"],
            "governor": f["governor"],
            "threads": self.threads,
            "delegate": self.delegate,
            "device_runtime": f["tflite_runtime"],
        }

    def choose_runner(self) -> str:
        if self.runner != "auto":
            return self.runner
        return "edgebench" if self.facts()["has_python_runtime"] else "benchmark_model"

    def run(self, job: Job) -> RunResult:
        return self._run(job, None)

    def run_load(self, job: Job, load: dict[str, Any]) -> RunResult:
        """Load modes (concurrency / server) through the edgebench runner on the device."""
        if self.choose_runner() != "edgebench":
            raise BadInput(f"adb device {self.serial}: load modes (--concurrency, --server-qps, --sla-p99-ms) need "
                           "python3 with a TFLite runtime on the device; benchmark_model has no load modes")
        return self._run(job, load)

    def _run(self, job: Job, load: dict[str, Any] | None) -> RunResult:
        check_job_files(job)
        runner = self.choose_runner()
        if runner == "edgebench":
            if not self.facts()["has_python_runtime"]:
                raise BadInput(f"adb device {self.serial} has no python3 with a TFLite runtime, so the edgebench "
                               "runner cannot run there; use the benchmark_model runner (--benchmark-binary)")
            return self._run_edgebench(job, load)
        return self._run_benchmark_model(job)

    # -- cool-down and sampling -----------------------------------------------------------------
    def cool_down(self) -> dict[str, Any]:
        """Poll until the hottest CPU/SoC zone is below the threshold, or the timeout passes."""
        pol = self.thermal
        if pol.cooldown_below_c is None:
            return {"enabled": False}
        start = time.monotonic()
        temps: list[float | None] = []
        while True:
            s = self.device.thermal_sample()
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

    def _monitored_shell(self, dev: "AdbDevice", command: str, *, deadline_s: float, what: str,
                         thermal: dict[str, Any]):
        """Cool down, then run ``command`` on the device while a thread samples thermal zones and
        CPU frequencies; records cooldown/before/during/after in ``thermal``. Returns (result, wall s)."""
        thermal["cooldown"] = self.cool_down()
        thermal["before"] = dev.thermal_sample()
        stop = threading.Event()
        during: list[dict] = []

        def loop() -> None:
            while not stop.wait(self.thermal.sample_every_s):
                try:
                    during.append(self.device.thermal_sample())
                except EdgebenchError:
                    return

        sampler = threading.Thread(target=loop, daemon=True, name=f"thermal-{self.serial}")
        sampler.start()
        t0 = time.monotonic()
        try:
            r = dev.shell(command, deadline_s=deadline_s, what=what)
        finally:
            stop.set()
            sampler.join(timeout=self.thermal.sample_every_s + HOST_MARGIN_S)
        wall = time.monotonic() - t0
        thermal["during"] = during
        thermal["after"] = dev.thermal_sample()
        return r, wall

    # -- edgebench runner -------------------------------------------------------------------------
    def _stage(self, local: Path, pushed: dict[str, bool], key: str) -> str:
        remote = f"{REMOTE_FILES}/{local.name}"
        pushed[key] = self.device.push_if_changed(local, remote)
        return remote

    def _job_spec(self, job: Job, model_rel: str, inputs_rel: str | None,
                  load: dict[str, Any] | None = None) -> dict[str, Any]:
        spec = job.worker_spec()
        spec["threads"] = spec["threads"] if spec["threads"] is not None else self.threads
        spec["delegate"] = job.delegate or self.delegate
        if spec["delegate"] == "nnapi":
            raise BadInput("delegate 'nnapi' is only available through the benchmark_model runner; "
                           "use --delegate xnnpack, none or gpu with the edgebench runner")
        spec["model_path"] = model_rel       # relative to the run folder: the runner runs there
        spec["inputs_npz"] = inputs_rel
        spec["load"] = load
        return spec

    def _run_edgebench(self, job: Job, load: dict[str, Any] | None = None) -> RunResult:
        dev = self.device
        model = Path(job.model_path)
        run_dir = f"{REMOTE_ROOT}/run-{_run_id()}"
        pushed: dict[str, bool] = {}
        dev.check(RemoteCommand.mkdir(REMOTE_FILES, run_dir), what="creating the run folder")
        local_tmp = Path(tempfile.mkdtemp(prefix="edgebench-adb-"))
        thermal: dict[str, Any] = {}
        try:
            self._stage(RUNNER_PATH, pushed, "runner")
            self._stage(model, pushed, "model")
            inputs_remote = self._stage(Path(job.inputs_npz), pushed, "inputs") if job.inputs_npz else None
            spec = self._job_spec(job, "../files/" + model.name,
                                  "../files/" + Path(job.inputs_npz).name if inputs_remote else None, load)
            job_file = local_tmp / "job.json"
            job_file.write_text(json.dumps(spec))
            dev.push(job_file, f"{run_dir}/job.json")

            r, wall = self._monitored_shell(
                dev, RemoteCommand.in_dir(run_dir, ["python3", "../files/runner.py", "job.json"]),
                deadline_s=job.deadline_s, what=f"the run of {model.name}", thermal=thermal)

            self._check_deadline(r, job, model)
            expected = [f"{run_dir}/result.json", f"{run_dir}/result.npz"]
            listing = dev.check(RemoteCommand.test_files(expected), what="checking result files")
            present = {expected[int(ln[3:])] for ln in listing.stdout.splitlines()
                       if ln.startswith("OK ") and ln[3:].strip().isdigit()}
            if expected[0] not in present:
                tail = (r.stderr.strip().splitlines() or [""])[-1][:300]
                raise InfraError(f"adb device {self.serial}: the runner exited {r.rc} and wrote no result.json"
                                 f"{': ' + tail if tail else ''}; run it by hand: adb -s {self.serial} shell "
                                 f"'cd {run_dir} && python3 ../files/runner.py job.json'")
            dev.pull(f"{run_dir}/result.json", local_tmp / "result.json")
            meta = json.loads((local_tmp / "result.json").read_text())
            if r.rc != 0 or meta.get("status") != "ok":
                msg = meta.get("error") or f"runner exited with status {r.rc}"
                msg = f"adb device {self.serial}: {msg}"
                if meta.get("error_kind") == "bad_input" or r.rc == 2:
                    raise BadInput(msg)
                raise InfraError(msg)
            if f"{run_dir}/result.npz" not in present:
                raise InfraError(f"adb device {self.serial}: the runner reported success but result.npz is "
                                 "missing (connection or storage problem); rerun")
            dev.pull(f"{run_dir}/result.npz", local_tmp / "result.npz")
            with np.load(local_tmp / "result.npz", allow_pickle=False) as z:
                arrays = {k: z[k] for k in z.files}
        finally:
            self._cleanup(run_dir)
            shutil.rmtree(local_tmp, ignore_errors=True)

        samples = np.asarray(arrays.get("samples_ns", np.zeros(0)), np.int64)
        thermal.update(detect_throttle(thermal.get("before"), thermal["during"], thermal.get("after"), samples))
        outputs = {k.split("::", 1)[1]: v for k, v in arrays.items() if k.startswith("out::")} or None
        extra_keys = ("stop_reason", "timed_wall_s", "n_input_samples", "input_source", "inputs",
                      "outputs_meta", "nonfinite_outputs", "rss_before_load_bytes", "load", "init_ms_each",
                      "runner_version", "python", "numpy", "platform")
        extra: dict[str, Any] = {k: meta[k] for k in extra_keys if k in meta}
        if "service_ns" in arrays:
            extra["service_ns"] = arrays["service_ns"]
        extra.update({"runner": "edgebench", "serial": self.serial, "threads": spec["threads"],
                      "delegate": spec["delegate"], "pushed": pushed, "remote_run_dir": run_dir,
                      "device_wall_s": round(wall, 3), "thermal": thermal,
                      "throttled": thermal["throttled"]})
        fp = self.fingerprint()
        fp.update({"threads": spec["threads"], "delegate": spec["delegate"], "runtime": meta.get("runtime")})
        return RunResult(
            target=self.name, model_path=str(job.model_path), model_sha256=sha256_file(model),
            samples_ns=samples,
            warmup_ns=np.asarray(arrays.get("warmup_ns", np.zeros(0)), np.int64),
            init_ms=meta.get("init_ms"), first_inference_ms=meta.get("first_inference_ms"),
            outputs=outputs, peak_rss_bytes=meta.get("peak_rss_bytes"), runtime=meta.get("runtime"),
            method="per-inference perf_counter_ns around invoke(), edgebench runner on the device",
            fingerprint=fp, extra=extra,
        )

    def _cleanup(self, run_dir: str) -> None:
        if self.keep_files:
            return
        try:
            self.device.shell(RemoteCommand.rm_rf(run_dir), what="cleanup")
        except EdgebenchError:
            pass   # the device is gone; the run's own error says so

    # -- benchmark_model runner ---------------------------------------------------------------------
    def _bm_flags(self, delegate: str) -> dict[str, Any]:
        """Delegate -> benchmark_model flags. GPU precision loss is always explicit (off): the
        tool's own default (on, fp16) would silently change the numbers."""
        if delegate.endswith(".so"):
            raise BadInput(f"delegate {delegate!r}: benchmark_model cannot load an arbitrary delegate .so here; "
                           "use xnnpack, none, gpu or nnapi")
        return {"use_xnnpack": delegate == "xnnpack" if delegate in ("xnnpack", "none") else None,
                "use_gpu": delegate == "gpu", "gpu_precision_loss_allowed": False,
                "use_nnapi": delegate == "nnapi"}

    def _host_io(self, job: Job):
        """Model I/O and the InputSet prepared exactly as the edgebench runner prepares them
        (same synthetic seed, same quantization), so outputs compare with the host's."""
        from edgebench.targets import runner as rn  # noqa: PLC0415 -- LiteRT only when needed

        try:
            it = rn.make_interpreter(rn.load_runtime(), str(job.model_path), None, "xnnpack")
            ins, outs = rn.io_details(it)
            if job.inputs_npz:
                data = rn.map_inputs(rn.load_npz(job.inputs_npz), ins, job.inputs_npz)
                source = "npz"
            else:
                data = rn.synthetic_inputs(ins, job.seed)
                source = "synthetic"
            prepared, n = rn.prepare_samples(it, ins, data, source)
        except rn.JobError as exc:
            raise BadInput(str(exc)) from None
        tensor_in = {d["index"]: d["name"] for d in it.get_input_details()}
        # benchmark_model writes outputs in the interpreter's output order, under tensor names
        out_order = [d["index"] for d in it.get_output_details()]
        by_index = {d["index"]: d for d in outs}
        out_details = [{"name": by_index[i]["name"] if i in by_index else str(i),
                        "shape": by_index[i]["shape"], "dtype": by_index[i]["dtype"],
                        "quantization": (by_index[i]["scale"], by_index[i]["zero_point"])}
                       for i in out_order]
        in_details = [{"name": tensor_in[d["index"]], "shape": d["shape"],
                       "shape_signature": d["shape_signature"], "dtype": d["dtype"], "index": d["index"]}
                      for d in ins]
        return in_details, out_details, prepared, n, source

    def _push_inputs(self, bm, in_details, prepared, i: int, local_tmp: Path, run_dir: str,
                     relative: bool = False):
        """Value files of input sample i, pushed to RUN_DIR/in<i>/; their argv paths are
        absolute, or relative to the run folder when ``relative``."""
        arrays = {d["name"]: prepared[d["index"]][i] for d in in_details}
        details = [{k: v for k, v in d.items() if k != "index"} for d in in_details]
        ivf = bm.write_input_value_files(arrays, details, local_tmp / f"in{i}",
                                         remote_dir=f"in{i}" if relative else f"{run_dir}/in{i}")
        for local, remote in zip(ivf.local_paths, ivf.remote_paths):
            self.device.push(Path(local), remote if remote.startswith("/") else f"{run_dir}/{remote}")
        return ivf

    def _run_benchmark_model(self, job: Job) -> RunResult:
        from edgebench.targets import benchmark_model as bm  # noqa: PLC0415

        dev = self.device
        facts = self.facts()
        info = bm.resolve_binary(self.benchmark_binary)
        abis = (facts["props"].get("ro.product.cpu.abilist") or facts["abi"] or "").split(",")
        bm.check_abi(info, abis, self.serial)
        model = Path(job.model_path)
        delegate = job.delegate or self.delegate
        threads = job.threads if job.threads is not None else self.threads
        flags = self._bm_flags(delegate)
        in_details, out_details, prepared, n_inputs, source = self._host_io(job)
        n = int(job.runs or job.min_runs)
        where = f"adb device {self.serial}"

        run_dir = f"{REMOTE_ROOT}/run-{_run_id()}"
        pushed: dict[str, bool] = {}
        dev.check(RemoteCommand.mkdir(REMOTE_FILES, run_dir), what="creating the run folder")
        local_tmp = Path(tempfile.mkdtemp(prefix="edgebench-adb-"))
        thermal: dict[str, Any] = {}
        outputs: dict[str, np.ndarray] | None = None
        try:
            binary = f"{REMOTE_FILES}/{info.path.name}"
            pushed["binary"] = dev.push_if_changed(info.path, binary, mode=0o755)
            dev.check(RemoteCommand.chmod_exec(binary), what="making benchmark_model executable")
            model_remote = self._stage(model, pushed, "model")
            ivf0 = self._push_inputs(bm, in_details, prepared, 0, local_tmp, run_dir)
            # inside the run folder, relative paths: the outputs script is a file on the device
            binary_rel = f"../files/{info.path.name}"
            model_rel = f"../files/{model.name}"

            # outputs first (one invocation per input sample), then the timed sample loop
            if job.save_outputs:
                files = []
                lines = []
                for i in range(n_inputs):
                    ivf = self._push_inputs(bm, in_details, prepared, i, local_tmp, run_dir, relative=True)
                    argv = bm.build_argv(binary_rel, model_rel, threads=threads, num_runs=1, warmup_runs=0,
                                         min_secs=0.0, warmup_min_secs=0.0, output_filepath=f"out{i}.bin",
                                         **flags, **ivf.argv_kwargs())
                    lines.append(RemoteCommand.script_line(argv, quiet=True))
                    files.append(f"{run_dir}/out{i}.bin")
                script = local_tmp / "outputs.sh"
                script.write_text("\n".join(lines) + "\n")
                dev.push(script, f"{run_dir}/outputs.sh")
                r = dev.shell(RemoteCommand.in_dir(run_dir, ["sh", "outputs.sh"]), deadline_s=job.deadline_s,
                              what=f"benchmark_model outputs of {model.name}")
                self._check_deadline(r, job, model)
                if r.rc != 0:
                    raise bm.classify_failure(r.stdout + r.stderr, r.rc, where=where)
                listing = dev.check(RemoteCommand.test_files(files), what="checking output files")
                ok = {int(ln[3:]) for ln in listing.stdout.splitlines() if ln.startswith("OK ") and ln[3:].isdigit()}
                missing = [f for i, f in enumerate(files) if i not in ok]
                if missing:
                    raise InfraError(f"{where}: benchmark_model exited 0 but wrote no {missing[0]}; the binary "
                                     "ignored --output_filepath (too old?) or storage is full; rerun")
                per_sample: list[dict[str, np.ndarray]] = []
                for i, f in enumerate(files):
                    dev.pull(f, local_tmp / f"out{i}.bin")
                    per_sample.append(bm.split_output_file((local_tmp / f"out{i}.bin").read_bytes(),
                                                           out_details, dequantize=True))
                outputs = {d["name"]: np.concatenate([s[d["name"]] for s in per_sample], axis=0)
                           for d in out_details}

            argv = bm.sample_argv(binary, model_remote, threads=threads, **flags, **ivf0.argv_kwargs())
            script = bm.build_sample_loop_script(argv, n)
            r, wall = self._monitored_shell(
                dev, RemoteCommand.in_dir_script(run_dir, script), deadline_s=job.deadline_s,
                what=f"the benchmark_model sample loop of {model.name}", thermal=thermal)
            self._check_deadline(r, job, model)
            samples = bm.parse_sample_loop(r.stdout, n, where=where)   # needs rc 0 and the DONE marker
            if r.rc != 0:
                raise bm.classify_failure(r.stdout + r.stderr, r.rc, where=where)
            first = bm.parse_log(_first_sample_body(r.stdout))
        finally:
            self._cleanup(run_dir)
            shutil.rmtree(local_tmp, ignore_errors=True)

        thermal.update(detect_throttle(thermal.get("before"), thermal["during"], thermal.get("after"), samples))
        settings = bm.describe_argv(argv)
        extra: dict[str, Any] = {
            "runner": "benchmark_model", "serial": self.serial, "threads": threads, "delegate": delegate,
            "benchmark_model_flags": settings, "benchmark_binary": str(info.path),
            "benchmark_binary_sha256": sha256_file(info.path),
            "p99_method": bm.sample_method(n, int(settings.get("warmup_runs", 1))),
            "input_source": source, "n_input_samples": n_inputs,
            "delegates_applied": list(first.delegates), "delegate_fallback": list(first.delegate_fallback),
            "mem_overall_mb": first.mem_overall_mb, "pushed": pushed, "remote_run_dir": run_dir,
            "device_wall_s": round(wall, 3), "thermal": thermal, "throttled": thermal["throttled"],
        }
        fp = self.fingerprint()
        fp.update({"threads": threads, "delegate": delegate, "runtime": "benchmark_model",
                   "gpu_precision_loss_allowed": settings.get("gpu_precision_loss_allowed")})
        return RunResult(
            target=self.name, model_path=str(job.model_path), model_sha256=sha256_file(model),
            samples_ns=samples, warmup_ns=np.zeros(0, np.int64),
            init_ms=first.init_us / 1e3 if first.init_us is not None else None,
            first_inference_ms=first.first_inference_us / 1e3 if first.first_inference_us is not None else None,
            outputs=outputs, runtime="benchmark_model", method=extra["p99_method"],
            fingerprint=fp, extra=extra,
        )

    def _check_deadline(self, r: ShellResult, job: Job, model: Path) -> None:
        if r.rc in (124, 137):
            raise InfraError(f"adb device {self.serial}: the run of {model.name} exceeded its device-side "
                             f"deadline of {job.deadline_s:g} s and was killed (exit {r.rc}); raise the "
                             "deadline or lower the number of runs")


def _first_sample_body(text: str) -> str:
    """The output of the first invocation in a benchmark_model sample loop."""
    lines = text.splitlines()
    try:
        b = next(i for i, ln in enumerate(lines) if ln.strip().startswith("EDGEBENCH_SAMPLE_BEGIN 0"))
        e = next(i for i, ln in enumerate(lines) if ln.strip().startswith("EDGEBENCH_SAMPLE_END 0"))
    except StopIteration:
        return ""
    return "\n".join(lines[b + 1:e])


# ============================================================================ choosing devices
def resolve_adb_targets(spec: str, **target_kwargs: Any) -> list[AdbTarget]:
    """``adb``, ``adb:SERIAL[,adb:SERIAL]`` or ``adb:all`` -> targets (other items ignored).

    No device, several devices with no choice, an unknown serial, or an unauthorized/offline
    device raise BadInput with the fix."""
    items = [s.strip() for s in spec.split(",") if s.strip().startswith("adb")]
    if not items:
        return []
    states = list_states()
    usable = [s for s, st in states if st == "device"]
    if not states:
        raise BadInput("no adb device found (adb devices lists none): connect a phone with USB debugging on, "
                       f"or a board with 'adb connect HOST:PORT', {SIM_HINT}")
    serials: list[str] = []
    for item in items:
        if item == "adb:all":
            if not usable:
                raise BadInput(_state_fix(*states[0]))
            serials.extend(usable)
        elif item == "adb":
            if len(states) > 1:
                raise BadInput(f"several adb devices are attached ({', '.join(s for s, _ in states)}); choose one "
                               f"with --targets adb:SERIAL (e.g. adb:{states[0][0]}) or all with --targets adb:all")
            serial, st = states[0]
            if st != "device":
                raise BadInput(_state_fix(serial, st))
            serials.append(serial)
        elif item.startswith("adb:"):
            serial = item[4:]
            st = dict(states).get(serial)
            if st is None:
                raise BadInput(f"adb device {serial!r} is not attached (adb devices lists: "
                               f"{', '.join(f'{s} ({t})' for s, t in states)}); use one of those serials or adb:all")
            if st != "device":
                raise BadInput(_state_fix(serial, st))
            serials.append(serial)
        else:
            raise BadInput(f"--targets item {item!r} is not understood; use adb, adb:SERIAL or adb:all")
    seen: list[str] = []
    for s in serials:
        if s not in seen:
            seen.append(s)
    return [AdbTarget(s, **target_kwargs) for s in seen]


@dataclass
class LaneOutcome:
    target: Any
    value: Any = None
    error: EdgebenchError | None = None


def run_lanes(targets: list[Any], work: Callable[[Any], Any]) -> list[LaneOutcome]:
    """Run ``work(target)`` for every target in parallel, one thread per device lane.

    An ``EdgebenchError`` (device lost, ...) fails only its own lane; every other lane's value
    is kept. Outcomes come back in the order of ``targets``."""
    outcomes = [LaneOutcome(t) for t in targets]

    def lane(o: LaneOutcome) -> None:
        try:
            o.value = work(o.target)
        except EdgebenchError as exc:
            o.error = exc
        except Exception as exc:  # noqa: BLE001 -- a lane's crash must not lose the others
            o.error = InfraError(f"{getattr(o.target, 'name', o.target)}: internal error "
                                 f"{type(exc).__name__}: {exc}")

    threads = [threading.Thread(target=lane, args=(o,), name=f"lane-{getattr(o.target, 'name', i)}")
               for i, o in enumerate(outcomes)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return outcomes


# ============================================================================ edgebench devices
def device_info(serial: str, state: str) -> dict[str, Any]:
    """One row of ``edgebench devices``: facts for an online device, the state and fix otherwise."""
    row: dict[str, Any] = {"serial": serial, "state": state}
    if state != "device":
        row["error"] = _state_fix(serial, state)
        return row
    try:
        facts = AdbDevice(serial).probe()
    except EdgebenchError as exc:
        row["error"] = str(exc)
        return row
    facts.pop("probe_complete", None)
    row.update(facts)
    return row


def list_devices(with_props: bool = True) -> list[dict[str, Any]]:
    """Every device ``adb devices`` lists, with its facts (probed in parallel)."""
    states = list_states()
    outcomes = run_lanes([(s, st) for s, st in states], lambda ss: device_info(*ss))
    rows = [o.value if o.error is None else {"serial": o.target[0], "state": o.target[1], "error": str(o.error)}
            for o in outcomes]
    if not with_props:
        for r in rows:
            r.pop("props", None)
    return rows
