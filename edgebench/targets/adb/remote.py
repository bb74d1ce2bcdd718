"""Remote commands: the ONE place where device shell strings are built and quoted
(``RemoteCommand``), and ``AdbDevice``, which runs them under a device-side deadline and moves
files (sha256-checked push, pull) over one adb connection."""

from __future__ import annotations

import math
import posixpath
import re
import shlex
import stat
import struct
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable

from edgebench.core.bounded import printable
from edgebench.core.errors import EdgebenchError, InfraError
from edgebench.core.fingerprint import sha256_file
from edgebench.targets.adb.client import _adb_errors, _client, _describe, list_states
from edgebench.targets.adb.facts import (
    _sections,
    parse_cpufreq,
    parse_probe,
    parse_thermal,
    parse_thermal_status,
    parse_uptime,
)

REMOTE_ROOT = "/data/local/tmp/edgebench"
REMOTE_FILES = f"{REMOTE_ROOT}/files"          # pushed files, cached by content: files/<sha256><suffix>
# A command's device-side deadline when the caller gives none (probes, pushes' checks, cleanup).
SHORT_DEADLINE_S = 30.0
# Grace between the deadline's SIGTERM and its SIGKILL.
KILL_GRACE_S = 2
# adb's host protocol frames a request with a 4-hex-digit length; stay well below it.
MAX_COMMAND_BYTES = 32 * 1024
# The most output one shell command may send (stdout + stderr): a sample loop of 1,000,000 inferences
# prints ~20 MB, so 256 MiB is a runaway program or a hostile device, not a measurement.
SHELL_OUTPUT_MAX_BYTES = 256 * 1024 ** 2
# The host additionally gives up on a silent connection this long after the device deadline.
HOST_MARGIN_S = 30.0
# adb features a device must offer: shell protocol v2 carries the exit code and keeps stderr apart.
# Without it adbutils silently falls back to v1, where stdout arrives empty (see AdbDevice.shell).
REQUIRED_FEATURES = ("shell_v2",)
_SAFE_SUFFIX = re.compile(r"^\.[A-Za-z0-9_-]{1,16}$")


def content_name(local: Path, sha256: str | None = None) -> str:
    """The cache name of a local file on the device: ``<sha256><suffix>``. Two files with the same
    basename (two jobs, two models called model.tflite) never share a device path, and a cached
    file's name says which bytes it holds. Only a plain suffix (``.tflite``, ``.npz``) is kept."""
    digest = sha256 or sha256_file(local)
    suffix = local.suffix if _SAFE_SUFFIX.match(local.suffix or "") else ""
    return digest + suffix


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
        """``rm -rf`` of a folder strictly inside REMOTE_ROOT; the path is normalised first, so
        ``REMOTE_ROOT/run-x/../..`` is refused rather than removing what it points at."""
        norm = posixpath.normpath(path)
        if not path.startswith("/") or not norm.startswith(REMOTE_ROOT + "/") or "\n" in path:
            raise ValueError(f"refusing to remove {path!r}: it resolves to {norm!r}, not a folder inside {REMOTE_ROOT}")
        return f"rm -rf {cls.q(norm)}"

    @classmethod
    def move(cls, src: str, dst: str) -> str:
        """``mv -f``: a rename within one folder, atomic for a reader of DST."""
        return f"mv -f {cls.q(src)} {cls.q(dst)}"

    @classmethod
    def file_size(cls, path: str) -> str:
        """Prints the size in bytes of PATH (``wc -c`` reads it; toybox and coreutils have it)."""
        return f"wc -c < {cls.q(path)}"

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

    # One thermal sample with no process started on the device: only shell builtins (``read``
    # with a redirection, ``echo``), so sampling once a second during a run does not perturb it
    # with dozens of ``cat`` processes. A missing or unreadable file reads as "-".
    THERMAL = r"""
echo '@@thermal'
for z in /sys/class/thermal/thermal_zone*; do
  t=-; y=
  read -r t 2>/dev/null < "$z/temp"
  read -r y 2>/dev/null < "$z/type"
  echo "${z##*/} ${t:--} $y"
done
echo '@@cpufreq'
for c in /sys/devices/system/cpu/cpu[0-9]*; do
  m=-; k=-; u=-; g=-
  read -r m 2>/dev/null < "$c/cpufreq/cpuinfo_max_freq"
  read -r k 2>/dev/null < "$c/cpufreq/scaling_max_freq"
  read -r u 2>/dev/null < "$c/cpufreq/scaling_cur_freq"
  read -r g 2>/dev/null < "$c/cpufreq/scaling_governor"
  echo "${c##*/} ${m:--} ${k:--} ${u:--} ${g:--}"
done
echo '@@uptime'
u=; read -r u 2>/dev/null < /proc/uptime; [ -n "$u" ] && echo "$u"
echo '@@end'
"""

    # Android's thermal status (0 none .. 6 shutdown), sampled in sustained runs only: dumpsys is
    # heavier than reading sysfs.
    THERMAL_STATUS = "echo '@@thermal_status'; dumpsys thermalservice 2>/dev/null | grep 'Thermal Status'\n"

    # ---- battery (energy per inference; edgebench.targets.adb.battery) ------------------------
    POWER_SUPPLY = "/sys/class/power_supply"
    BATTERY_STATE = r"""
B=/sys/class/power_supply
echo '@@battery'
for f in status current_now voltage_now; do v=-; { read -r v < "$B/battery/$f"; } 2>/dev/null; echo "$f $v"; done
echo '@@supplies'
for p in "$B"/*; do t=-; o=-; { read -r t < "$p/type"; } 2>/dev/null; { read -r o < "$p/online"; } 2>/dev/null; echo "${p##*/} $t $o"; done
echo '@@dumpsys'
dumpsys battery 2>/dev/null
echo '@@current'
dumpsys battery get current_now 2>/dev/null
echo '@@end'
"""
    BATTERY_ACTIONS = ("unplug", "reset", "suspend_input")

    @classmethod
    def dumpsys_battery(cls, action: str) -> str:
        if action not in cls.BATTERY_ACTIONS:
            raise ValueError(f"dumpsys battery {action!r} is not one of {cls.BATTERY_ACTIONS}")
        return f"dumpsys battery {cls.q(action)}"

    @classmethod
    def touch(cls, path: str) -> str:
        if not path.startswith(REMOTE_ROOT + "/"):
            raise ValueError(f"refusing to create {path!r} outside {REMOTE_ROOT}")
        return f": > {cls.q(path)}"

    @classmethod
    def battery_sampler(cls, stop_file: str, period_s: float, supplies: Iterable[str], *,
                        current: str = "sysfs", voltage: str = "sysfs", status: str = "sysfs") -> str:
        """Read the battery every ``period_s`` until ``stop_file`` exists, one line per reading:
        ``S|<uptime s>|<current>|<voltage>|<status>|<online of each supply>...``. Sysfs values are
        read with the shell builtin ``read`` (a reading forks only ``sleep``); a value whose sysfs
        file is closed comes from ``dumpsys battery`` instead (current: ``get current_now``, uA;
        voltage/status: the dump's mV and status code)."""
        bat = f"{cls.POWER_SUPPLY}/battery"

        def value(var: str, how: str, sysfs_name: str, dump_key: str) -> str:
            if how == "sysfs":
                return f"{{ read -r {var} < {cls.q(f'{bat}/{sysfs_name}')}; }} 2>/dev/null"
            if how == "dumpsys" and var == "c":
                return "c=$(dumpsys battery get current_now 2>/dev/null)"
            if how == "dumpsys":
                return f"{var}=$(dumpsys battery 2>/dev/null | sed -n {cls.q(f's/^ *{dump_key}: //p')})"
            return ":"

        online = "".join(f"x=-; {{ read -r x < {cls.q(f'{cls.POWER_SUPPLY}/{name}/online')}; }} 2>/dev/null; "
                         'o="$o|$x"; ' for name in supplies)
        return (f"while [ ! -e {cls.q(stop_file)} ]; do "
                "u=-; c=-; v=-; s=-; o=; { read -r u _ < /proc/uptime; } 2>/dev/null; "
                f"{value('c', current, 'current_now', '')}; {value('v', voltage, 'voltage_now', 'voltage')}; "
                f"{value('s', status, 'status', 'status')}; {online}"
                'echo "S|$u|$c|$v|$s$o"; '
                f"sleep {float(period_s):g}; done; echo END")


# ============================================================================ one device
@dataclass
class ShellResult:
    rc: int
    stdout: str
    stderr: str


class AdbDevice:
    """One device: quoted shell with a device-side deadline, sha-checked push, pull, facts."""

    def __init__(self, serial: str) -> None:
        self.serial = serial
        self._dev = _client().device(serial)
        self._features_checked = False

    def require_features(self) -> None:
        """InfraError unless the device offers every REQUIRED_FEATURES entry (checked once).

        adbutils' ``shell2(v2=True)`` quietly uses shell protocol v1 on a device without
        ``shell_v2``: the output then arrives in one stream and ``stdout`` is empty, so every
        parser would see nothing and a run would fail far away from its cause."""
        if self._features_checked:
            return
        try:
            features = set(filter(None, self._dev.get_features().strip().split(",")))
        except _adb_errors() as exc:
            raise self.lost("reading its adb features", _describe(exc)) from None
        missing = [f for f in REQUIRED_FEATURES if f not in features]
        if missing:
            raise InfraError(
                f"adb device {self.serial} does not offer the adb shell protocol v2 (its features: "
                f"{','.join(sorted(features)) or 'none'}; missing {', '.join(missing)}); edgebench needs it for "
                "exit codes and separate stdout/stderr. Update adbd: Android 7.0+ has it; on a board, install "
                "an adbd from platform-tools 24 or newer")
        self._features_checked = True

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
    def shell(self, script: str, *, deadline_s: float = SHORT_DEADLINE_S, what: str = "a shell command",
              on_stdout: Callable[[bytes], None] | None = None) -> ShellResult:
        """Run SCRIPT (built by RemoteCommand) under a device-side deadline; returns the real
        exit code from shell v2. A lost connection raises InfraError naming the serial.
        ``on_stdout`` sees the output as it arrives (progress of a long run)."""
        self.require_features()
        cmd = RemoteCommand.with_deadline(script, deadline_s)
        if len(cmd.encode()) > MAX_COMMAND_BYTES:
            raise InfraError(f"adb device {self.serial}: {what} is a {len(cmd.encode())}-byte shell command, over "
                             f"the {MAX_COMMAND_BYTES} bytes adb carries; this is an edgebench bug, please report it")
        try:
            rc, out, err = self._shell_v2(cmd, deadline_s + KILL_GRACE_S + HOST_MARGIN_S, on_stdout)
        except _adb_errors() as exc:
            raise self.lost(what, _describe(exc)) from None
        # what a device prints is shown and parsed, never acted on: terminal controls become escapes
        res = ShellResult(rc, printable(out.decode("utf-8", "replace")), printable(err.decode("utf-8", "replace")))
        if res.rc == 127 and "timeout" in res.stderr and "not found" in res.stderr:
            raise InfraError(f"adb device {self.serial} has no 'timeout' command, which edgebench needs to "
                             "enforce deadlines on the device (toybox has it from Android 6; on a board install "
                             "coreutils)")
        return res

    def _shell_v2(self, cmd: str, idle_timeout_s: float,
                  on_stdout: Callable[[bytes], None] | None) -> tuple[int, bytes, bytes]:
        """adb's shell protocol v2 (packets: id 1 stdout, 2 stderr, 3 exit code; 1-byte id +
        4-byte little-endian length + data), read as it arrives."""
        out, err = bytearray(), bytearray()
        with self._dev.open_transport(timeout=idle_timeout_s) as c:
            c.send_command(f"shell,v2:{cmd}")
            c.check_okay()
            while True:
                header = c.read_exact(5)
                n = int.from_bytes(header[1:5], "little")
                if len(out) + len(err) + n > SHELL_OUTPUT_MAX_BYTES:
                    raise InfraError(f"adb device {self.serial} sent more than {SHELL_OUTPUT_MAX_BYTES // 2**20} MiB "
                                     "of output for one command (a runaway program or a hostile device); stopped "
                                     "reading it: rerun, and check the device if it repeats")
                data = c.read_exact(n) if n else b""
                if header[0] == 1:
                    out += data
                    if on_stdout is not None and data:
                        on_stdout(data)
                elif header[0] == 2:
                    err += data
                elif header[0] == 3:
                    return (data[0] if data else 255), bytes(out), bytes(err)

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

    def push_if_changed(self, local: Path, remote: str, *, mode: int = 0o644, sha256: str | None = None) -> bool:
        """Push unless the remote file's sha256 equals the local one. True when pushed.

        The bytes go to a unique temporary name beside REMOTE, are checked there, and are then
        renamed over it: another job reading REMOTE at the same time (two edgebench runs on one
        phone) sees the old file or the new one, never a half-written one."""
        want = sha256_file(local)
        if self.remote_sha256(remote) == want:
            return False
        tmp = f"{posixpath.dirname(remote)}/.tmp-{uuid.uuid4().hex[:12]}-{posixpath.basename(remote)}"
        self.push(local, tmp, mode=mode)
        got = self.remote_sha256(tmp)
        if got is not None and got != want:
            self.shell(RemoteCommand.rm_rf(tmp), what="removing a corrupted upload")
            raise InfraError(f"adb device {self.serial}: {remote} has sha256 {got[:12]}... after the push, "
                             f"expected {want[:12]}...; the transfer was corrupted, rerun")
        self.check(RemoteCommand.move(tmp, remote), what=f"moving {posixpath.basename(remote)} into place")
        return True

    def remote_size(self, path: str) -> int | None:
        """Size in bytes of a device file (None when it cannot be read)."""
        r = self.shell(RemoteCommand.file_size(path), what=f"size of {path}")
        tok = r.stdout.split()[:1]
        return int(tok[0]) if r.rc == 0 and tok and tok[0].isdigit() else None

    def pull(self, remote: str, local: Path, *, max_bytes: int | None = None) -> int:
        """RECV REMOTE into LOCAL; returns the bytes written. With ``max_bytes`` a file the device
        says is larger is refused before the transfer, and the transfer stops (InfraError) as soon
        as more arrives: a device's answer never fills the host's disk or memory."""
        if max_bytes is not None:
            size = self.remote_size(remote)
            if size is not None and size > max_bytes:
                raise InfraError(f"adb device {self.serial}: {remote} is {size} bytes, more than the {max_bytes} "
                                 "bytes this run can produce; refusing to pull it (a corrupted run or a hostile "
                                 "device); rerun, and check the device if it repeats")
        written = 0
        try:
            with open(local, "wb") as fh:
                for chunk in self._dev.sync.iter_content(remote):
                    written += len(chunk)
                    if max_bytes is not None and written > max_bytes:
                        raise InfraError(f"adb device {self.serial}: {remote} sent more than the {max_bytes} bytes "
                                         "this run can produce; transfer stopped; rerun, and check the device "
                                         "if it repeats")
                    fh.write(chunk)
        except EdgebenchError:
            local.unlink(missing_ok=True)
            raise
        except _adb_errors() as exc:
            raise self.lost(f"pull of {remote}", _describe(exc)) from None
        return written

    # --- facts ------------------------------------------------------------------------------
    def probe(self) -> dict[str, Any]:
        r = self.shell(RemoteCommand.PROBE, what="reading device facts")
        facts = parse_probe(r.stdout)
        if not facts["probe_complete"]:
            raise self.lost("reading device facts", "output ended early")
        return facts

    def thermal_sample(self, status: bool = False) -> dict[str, Any]:
        """Zones and CPU frequencies (+ Android's thermal status when ``status``), stamped with
        host time ``t`` and the device's CLOCK_BOOTTIME ``uptime_s`` (None if unreadable)."""
        script = RemoteCommand.THERMAL_STATUS + RemoteCommand.THERMAL if status else RemoteCommand.THERMAL
        r = self.shell(script, what="sampling thermal zones")
        s = _sections(r.stdout)
        if "end" not in s:
            raise self.lost("sampling thermal zones", "output ended early")
        out = {"t": time.time(), "zones_c": parse_thermal(s.get("thermal", [])),
               "cpus": parse_cpufreq(s.get("cpufreq", [])), "uptime_s": parse_uptime(s.get("uptime", []))}
        if status:
            out["thermal_status"] = parse_thermal_status(s.get("thermal_status", []))
        return out
