"""A simulated adb device daemon: the real ``adb`` server connects to it over TCP.

Run it by hand to try edgebench without a phone::

    python -m edgebench.sim.adbd --port 5599 --sandbox /tmp/simphone --model "Pixel 8" --python
    adb connect 127.0.0.1:5599 && adb devices -l

What it speaks (facts from the adb sources, checked against adb 29 and 36):

* transport messages: 24-byte little-endian header ``command arg0 arg1 data_length data_check
  magic``; we answer the host's CNXN with version 0x01000001 (checksums may be 0 from that
  version on) and the banner ``device::ro.product.name=..;ro.product.model=..;
  ro.product.device=..;features=cmd,fixed_push_mkdir,shell_v2``. AUTH is skipped (or, in the
  "unauthorized" mode, every signature is refused so the host shows ``unauthorized``).
* streams: OPEN -> OKAY; we send one WRTE and wait for the host's OKAY before the next; we OKAY
  every host WRTE; CLSE ends a stream.
* ``shell,v2,...:CMD`` packets are id(1) + length(4, LE) + data; id 1 stdout, 2 stderr, 3 exit
  code; ``shell:CMD`` / ``exec:CMD`` are raw byte streams.
* ``sync:`` v1 only (STAT, LIST, SEND, RECV, QUIT); request bytes span WRTE boundaries; with
  ``fixed_push_mkdir`` the daemon creates parent folders of a pushed file.

The device filesystem is a sandbox folder: sync paths map whole into it, and in shell commands
the Android roots (``/data``, ``/sdcard``, ``/sys``, ``/proc``, ``/system``, ...) are rewritten to
it. Shell commands run with ``PATH`` holding only ``SANDBOX/system/bin``: a toybox-like set of
host tools, a ``getprop`` that reads the configured properties, and ``python3`` (the host's
interpreter, with its LiteRT) only when the device is configured to have Python.

What it cannot prove about real phones is listed in docs/devices.md.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import secrets
import shlex
import shutil
import signal
import socket
import struct
import subprocess
import sys
import threading
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Callable

from edgebench.sim.power import BatteryConfig, SimBattery, dumpsys_script

# --- transport constants (adb/protocol.txt) ---------------------------------------------------
A_CNXN = 0x4E584E43
A_AUTH = 0x48545541
A_OPEN = 0x4E45504F
A_OKAY = 0x59414B4F
A_CLSE = 0x45534C43
A_WRTE = 0x45545257
A_STLS = 0x534C5453
A_VERSION = 0x01000001          # >= this: data checksums may be (and are) 0
MAX_PAYLOAD = 256 * 1024
AUTH_TOKEN, AUTH_SIGNATURE, AUTH_RSAPUBLICKEY = 1, 2, 3
FEATURES = "cmd,fixed_push_mkdir,shell_v2"   # sync v1 only: no stat_v2/ls_v2/sendrecv_v2
SYNC_DATA_MAX = 64 * 1024

# Android filesystem roots rewritten into the sandbox in shell commands.
_ROOTS = ("data", "sdcard", "storage", "sys", "proc", "system", "vendor", "odm", "product", "mnt")
_ROOT_RE = re.compile(r"(?<![\w.~/-])/(?:%s)(?=/|[\s'\";|&)<>,:]|$)" % "|".join(_ROOTS))
_SAFE_SANDBOX = re.compile(r"^[\w./+-]+$")

# Host tools linked into SANDBOX/system/bin (a toybox-like set; never python).
_TOOLS = (
    "sh", "cat", "ls", "mkdir", "rm", "rmdir", "cp", "mv", "ln", "chmod", "touch", "echo",
    "printf", "test", "true", "false", "sleep", "timeout", "sha256sum", "md5sum", "head", "tail",
    "wc", "grep", "sed", "awk", "cut", "tr", "sort", "uniq", "find", "xargs", "df", "du", "stat",
    "id", "uname", "date", "env", "kill", "nproc", "dd", "sync", "basename", "dirname",
    "readlink", "realpath", "seq", "expr", "tee", "ps", "getconf", "mktemp", "which", "nice",
    "taskset", "od", "cmp",
)
# Host environment variables a device process inherits (numeric libraries need them here).
_PASS_ENV = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "LD_LIBRARY_PATH", "TF_CPP_MIN_LOG_LEVEL")


@dataclass
class SimConfig:
    """What the simulated device looks like. Every field can be changed while it runs."""

    model: str = "Pixel 8"
    name: str = "shiba"                      # ro.product.name
    device: str = "shiba"                    # ro.product.device
    board: str = "zuma"                      # ro.product.board
    hardware: str = "zuma"                   # ro.hardware
    soc_manufacturer: str = "Google"
    soc_model: str = "Tensor G3"
    manufacturer: str = "Google"
    abi: str = "arm64-v8a"
    release: str = "14"
    sdk: int = 34
    serialno: str = "SIM00001"
    # per-core max frequency (kHz): Tensor G3's 4 little + 4 mid + 1 big
    cpu_max_khz: tuple[int, ...] = (1704000,) * 4 + (2367000,) * 4 + (2913000,)
    governor: str = "schedutil"
    mem_total_kb: int = 8 * 1024 * 1024
    thermal_zones: dict[str, float] = field(default_factory=lambda: {"cpu-big": 38.0, "battery": 30.0})
    battery_level: int = 80
    battery_temp_c: float = 29.5
    battery_status: str = "Discharging"     # with battery={"enabled": False}; else the battery model decides
    has_python: bool = False                 # python3 + a TFLite runtime (the host's venv)
    python: str = sys.executable
    storage_free_bytes: int | None = None    # None: unlimited; pushes past this fail ENOSPC
    auth: str = "ok"                         # "ok" | "unauthorized" | "offline"
    die_on: str | None = None                # regex: the daemon dies when a shell command matches
    thermal_script: dict[str, list[float]] = field(default_factory=dict)  # zone -> next temps
    freq_script: dict[int, list[int]] = field(default_factory=dict)       # cpu -> next cur kHz
    # power (edgebench.sim.power): battery whose current follows the load; dumpsys battery/thermalservice
    battery: dict[str, Any] = field(default_factory=dict)                 # BatteryConfig keys
    thermal_status: int = 0                                               # dumpsys thermalservice
    thermal_status_script: list[int] = field(default_factory=list)        # next statuses, one per command
    extra_props: dict[str, str] = field(default_factory=dict)

    def props(self) -> dict[str, str]:
        p = {
            "ro.product.model": self.model,
            "ro.product.name": self.name,
            "ro.product.device": self.device,
            "ro.product.board": self.board,
            "ro.product.manufacturer": self.manufacturer,
            "ro.hardware": self.hardware,
            "ro.board.platform": self.board,
            "ro.soc.manufacturer": self.soc_manufacturer,
            "ro.soc.model": self.soc_model,
            "ro.product.cpu.abi": self.abi,
            "ro.product.cpu.abilist": self.abi + (",armeabi-v7a,armeabi" if self.abi == "arm64-v8a" else ""),
            "ro.build.version.release": self.release,
            "ro.build.version.sdk": str(self.sdk),
            "ro.serialno": self.serialno,
            "ro.build.fingerprint": f"google/{self.name}/{self.device}:{self.release}/SIM/1:user/release-keys",
            "ro.build.type": "user",
            "ro.debuggable": "1" if self.battery.get("debuggable") else "0",
        }
        p.update(self.extra_props)
        return p


class _Closed(Exception):
    """The stream or the connection went away."""


class _Inbox:
    """Bytes the host wrote into one stream; reads block until enough arrived."""

    def __init__(self) -> None:
        self._buf = bytearray()
        self._cv = threading.Condition()
        self._eof = False

    def feed(self, data: bytes) -> None:
        with self._cv:
            self._buf += data
            self._cv.notify_all()

    def close(self) -> None:
        with self._cv:
            self._eof = True
            self._cv.notify_all()

    def read_exact(self, n: int) -> bytes:
        with self._cv:
            while len(self._buf) < n and not self._eof:
                self._cv.wait()
            if len(self._buf) < n:
                raise _Closed()
            out = bytes(self._buf[:n])
            del self._buf[:n]
            return out

    def read_some(self) -> bytes:
        with self._cv:
            while not self._buf and not self._eof:
                self._cv.wait()
            if not self._buf:
                raise _Closed()
            out = bytes(self._buf)
            self._buf.clear()
            return out


class _Stream:
    """One OPENed service: device->host writes wait for the host's OKAY (one WRTE in flight)."""

    def __init__(self, conn: "_Connection", local_id: int, remote_id: int) -> None:
        self.conn = conn
        self.local_id = local_id
        self.remote_id = remote_id
        self.inbox = _Inbox()
        self._okay = threading.Event()
        self._write_lock = threading.Lock()
        self.closed = threading.Event()
        self._sent_close = False
        self._close_lock = threading.Lock()

    # host -> device
    def on_okay(self) -> None:
        self._okay.set()

    def on_data(self, data: bytes) -> None:
        self.inbox.feed(data)

    def on_close(self) -> None:
        self.closed.set()
        self._okay.set()
        self.inbox.close()
        self.abort()

    # device -> host
    def write(self, data: bytes) -> None:
        with self._write_lock:
            step = self.conn.max_payload
            for i in range(0, len(data), step):
                if self.closed.is_set():
                    raise _Closed()
                self._okay.clear()
                self.conn.send(A_WRTE, self.local_id, self.remote_id, data[i:i + step])
                self._okay.wait()
                if self.closed.is_set():
                    raise _Closed()

    def close(self) -> None:
        with self._close_lock:
            first = not self._sent_close
            self._sent_close = True
        if first:
            try:
                self.conn.send(A_CLSE, self.local_id, self.remote_id)
            except _Closed:
                pass
        self.closed.set()
        self.inbox.close()
        self.conn.forget(self.local_id)

    def start(self) -> None:
        threading.Thread(target=self._run_guarded, daemon=True,
                         name=f"simadbd-stream-{self.local_id}").start()

    def _run_guarded(self) -> None:
        try:
            self.run()
        except _Closed:
            pass
        finally:
            self.close()

    def run(self) -> None:  # pragma: no cover - every service subclass defines its own
        """Serve the stream; each service (shell, sync, ...) overrides this."""
        raise TypeError(f"{type(self).__name__} is a base stream and serves nothing; use a service subclass")

    def abort(self) -> None:
        """The host closed the stream: stop any work."""


class _ShellStream(_Stream):
    """``shell:``, ``shell,v2,...:`` and ``exec:`` services."""

    def __init__(self, conn, local_id, remote_id, command: str, v2: bool, raw_exec: bool) -> None:
        super().__init__(conn, local_id, remote_id)
        self.command = command
        self.v2 = v2
        self.raw_exec = raw_exec
        self.proc: subprocess.Popen | None = None

    def _packet(self, pid: int, data: bytes) -> bytes:
        return struct.pack("<BI", pid, len(data)) + data

    def run(self) -> None:
        dev = self.conn.device
        dev.tick()
        if dev.should_die(self.command):
            dev.kill()          # drop the connection before any answer: a cable pulled mid-run
            raise _Closed()
        cmd = dev.rewrite(self.command) if self.command else ""
        argv = [str(dev.bin_dir / "sh")] + (["-c", cmd] if cmd else [])
        interactive = not cmd
        self.proc = subprocess.Popen(
            argv, cwd=str(dev.root), env=dev.shell_env(),
            stdin=subprocess.PIPE if (self.v2 or interactive) else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE if self.v2 else subprocess.STDOUT,
            start_new_session=True,
        )
        dev.track(self.proc)
        try:
            readers = [threading.Thread(target=self._pump, args=(self.proc.stdout, 1), daemon=True)]
            if self.v2:
                readers.append(threading.Thread(target=self._pump, args=(self.proc.stderr, 2), daemon=True))
            if self.proc.stdin is not None:
                threading.Thread(target=self._feed_stdin, daemon=True).start()
            for t in readers:
                t.start()
            for t in readers:
                t.join()
            rc = self.proc.wait()
            if self.closed.is_set():
                raise _Closed()
            if rc < 0:
                rc = 128 - rc   # killed by a signal: report it the way a shell does
            if self.v2:
                self.write(self._packet(3, bytes([rc & 0xFF])))
        finally:
            dev.untrack(self.proc)

    def _pump(self, pipe, pid: int) -> None:
        fd = pipe.fileno()
        try:
            while True:
                chunk = os.read(fd, 64 * 1024)
                if not chunk:
                    break
                self.write(self._packet(pid, chunk) if self.v2 else chunk)
        except (_Closed, OSError):
            self.abort()
        finally:
            pipe.close()

    def _feed_stdin(self) -> None:
        stdin = self.proc.stdin
        try:
            if self.v2:
                while True:
                    pid, n = struct.unpack("<BI", self.inbox.read_exact(5))
                    data = self.inbox.read_exact(n)
                    if pid == 0:
                        stdin.write(data)
                        stdin.flush()
                    elif pid == 4:          # close-stdin
                        break
            else:
                while True:
                    stdin.write(self.inbox.read_some())
                    stdin.flush()
        except (_Closed, OSError, ValueError):
            pass
        finally:
            try:
                stdin.close()
            except OSError:
                pass

    def abort(self) -> None:
        p = self.proc
        if p is not None and p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass


class _SyncStream(_Stream):
    """``sync:`` v1: STAT, LIST, SEND, RECV, QUIT."""

    def run(self) -> None:
        while True:
            sid, n = struct.unpack("<4sI", self.inbox.read_exact(8))
            if sid == b"QUIT":
                return
            path = self.inbox.read_exact(n).decode("utf-8", "surrogateescape")
            if sid == b"STAT":
                self._stat(path)
            elif sid == b"LIST":
                self._list(path)
            elif sid == b"SEND":
                self._send(path)
            elif sid == b"RECV":
                self._recv(path)
            else:
                self._fail(f"unknown sync command {sid!r}")
                return

    def _fail(self, msg: str) -> None:
        b = msg.encode()
        self.write(b"FAIL" + struct.pack("<I", len(b)) + b)

    def _stat(self, path: str) -> None:
        try:
            st = os.stat(self.conn.device.map_path(path))
            self.write(b"STAT" + struct.pack("<III", st.st_mode & 0xFFFFFFFF,
                                             st.st_size & 0xFFFFFFFF, int(st.st_mtime)))
        except OSError:
            self.write(b"STAT" + struct.pack("<III", 0, 0, 0))

    def _list(self, path: str) -> None:
        p = self.conn.device.map_path(path)
        try:
            names = sorted(os.listdir(p))
        except OSError:
            names = []
        for name in [".", ".."] + names:
            try:
                st = os.lstat(os.path.join(p, name))
            except OSError:
                continue
            b = name.encode("utf-8", "surrogateescape")
            self.write(b"DENT" + struct.pack("<IIII", st.st_mode & 0xFFFFFFFF,
                                             st.st_size & 0xFFFFFFFF, int(st.st_mtime), len(b)) + b)
        self.write(b"DONE" + struct.pack("<IIII", 0, 0, 0, 0))

    def _send(self, spec: str) -> None:
        dev = self.conn.device
        path, _, mode_s = spec.rpartition(",")
        if not path:
            path, mode_s = spec, "33188"
        try:
            mode = int(mode_s) & 0o777
        except ValueError:
            mode = 0o644
        target = dev.map_path(path)
        dev.pushes.append(path)
        error: str | None = None
        fh = None
        written = 0
        try:
            os.makedirs(os.path.dirname(target), exist_ok=True)   # fixed_push_mkdir
            fh = open(target, "wb")
        except OSError as e:
            error = f"couldn't create file: {e.strerror}"
        mtime = None
        while True:
            sid, n = struct.unpack("<4sI", self.inbox.read_exact(8))
            if sid == b"DONE":
                mtime = n
                break
            if sid != b"DATA":
                error = error or f"invalid sync data id {sid!r}"
                break
            data = self.inbox.read_exact(n)
            if fh is not None and error is None:
                if not dev.reserve(len(data)):
                    error = "write failed: No space left on device"
                else:
                    try:
                        fh.write(data)
                        written += len(data)
                    except OSError as e:
                        error = f"write failed: {e.strerror}"
        if fh is not None:
            fh.close()
        if error is not None:
            dev.release(written)
            try:
                os.unlink(target)
            except OSError:
                pass
            self._fail(error)
            return
        os.chmod(target, mode)
        if mtime:
            os.utime(target, (mtime, mtime))
        self.write(b"OKAY" + struct.pack("<I", 0))

    def _recv(self, path: str) -> None:
        try:
            fh = open(self.conn.device.map_path(path), "rb")
        except OSError as e:
            self._fail(f"open failed: {e.strerror}")
            return
        with fh:
            while True:
                chunk = fh.read(SYNC_DATA_MAX)
                if not chunk:
                    break
                self.write(b"DATA" + struct.pack("<I", len(chunk)) + chunk)
        self.write(b"DONE" + struct.pack("<I", 0))


class _Connection:
    """One TCP connection from the adb server: the transport."""

    def __init__(self, device: "SimDevice", sock: socket.socket) -> None:
        self.device = device
        self.sock = sock
        self.max_payload = MAX_PAYLOAD
        self._send_lock = threading.Lock()
        self._streams: dict[int, _Stream] = {}
        self._lock = threading.Lock()
        self._next_id = 1
        self.online = False

    def send(self, cmd: int, arg0: int, arg1: int, data: bytes = b"") -> None:
        hdr = struct.pack("<6I", cmd, arg0, arg1, len(data), 0, cmd ^ 0xFFFFFFFF)
        with self._send_lock:
            try:
                self.sock.sendall(hdr + data)
            except OSError:
                raise _Closed() from None

    def forget(self, local_id: int) -> None:
        with self._lock:
            self._streams.pop(local_id, None)

    def _recv_exact(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise _Closed()
            buf += chunk
        return bytes(buf)

    def serve(self) -> None:
        try:
            while True:
                cmd, arg0, arg1, length, _check, _magic = struct.unpack("<6I", self._recv_exact(24))
                data = self._recv_exact(length) if length else b""
                self._dispatch(cmd, arg0, arg1, data)
        except (_Closed, OSError):
            pass
        finally:
            self.shutdown()

    def shutdown(self) -> None:
        with self._lock:
            streams = list(self._streams.values())
            self._streams.clear()
        for s in streams:
            s.on_close()
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()

    def _banner(self) -> bytes:
        c = self.device.config
        return (f"device::ro.product.name={c.name};ro.product.model={c.model};"
                f"ro.product.device={c.device};features={FEATURES}").encode()

    def _dispatch(self, cmd: int, arg0: int, arg1: int, data: bytes) -> None:
        mode = self.device.config.auth
        if cmd == A_CNXN:
            self.max_payload = max(4096, min(MAX_PAYLOAD, arg1 or MAX_PAYLOAD))
            if mode == "offline":
                return                      # never answer: the host shows "offline"
            if mode == "unauthorized":
                self.send(A_AUTH, AUTH_TOKEN, 0, secrets.token_bytes(20))
                return
            self.online = True
            self.send(A_CNXN, A_VERSION, MAX_PAYLOAD, self._banner())
        elif cmd == A_AUTH:
            if mode == "unauthorized" and arg0 == AUTH_SIGNATURE:
                self.send(A_AUTH, AUTH_TOKEN, 0, secrets.token_bytes(20))  # refuse every key
            # RSAPUBLICKEY: a real phone shows the "Allow USB debugging?" prompt; nobody taps it
        elif not self.online:
            return
        elif cmd == A_OPEN:
            self._open(arg0, data.rstrip(b"\0").decode("utf-8", "surrogateescape"))
        elif cmd == A_WRTE:
            with self._lock:
                s = self._streams.get(arg1)
            if s is not None:
                s.on_data(data)
                self.send(A_OKAY, arg1, arg0)
        elif cmd == A_OKAY:
            with self._lock:
                s = self._streams.get(arg1)
            if s is not None:
                s.on_okay()
        elif cmd == A_CLSE:
            with self._lock:
                s = self._streams.pop(arg1, None)
            if s is not None:
                s.on_close()
                s.close()

    def _open(self, remote_id: int, service: str) -> None:
        with self._lock:
            local_id = self._next_id
            self._next_id += 1
        stream: _Stream | None = None
        if service.startswith("shell"):
            head, _, command = service.partition(":")
            opts = head.split(",")[1:]
            stream = _ShellStream(self, local_id, remote_id, command, v2="v2" in opts, raw_exec=False)
        elif service.startswith("exec:"):
            stream = _ShellStream(self, local_id, remote_id, service[5:], v2=False, raw_exec=True)
        elif service == "sync:":
            stream = _SyncStream(self, local_id, remote_id)
        if stream is None:
            self.send(A_CLSE, 0, remote_id)   # unknown service: refuse it
            return
        with self._lock:
            self._streams[local_id] = stream
        self.send(A_OKAY, local_id, remote_id)
        stream.start()


class SimDevice:
    """The simulated device: a sandbox folder plus a TCP listener speaking adb.

    ``start()`` returns once it listens; ``serial`` is ``127.0.0.1:PORT`` as the adb server
    names it. ``kill()`` is the kill switch: it drops every connection and kills running
    commands, like a cable pulled mid-run.
    """

    def __init__(self, sandbox: str | os.PathLike, config: SimConfig | None = None,
                 port: int = 0, host: str = "127.0.0.1") -> None:
        self.root = Path(sandbox).resolve()
        if not _SAFE_SANDBOX.match(str(self.root)):
            raise ValueError(f"sandbox path {self.root} must contain only letters, digits and ./_+-")
        self.config = config or SimConfig()
        self.host = host
        self.port = port
        self._listener: socket.socket | None = None
        self._conns: list[_Connection] = []
        self._procs: set[subprocess.Popen] = set()
        self._lock = threading.Lock()
        self._used_bytes = 0
        self.alive = False
        self.commands: list[str] = []        # every shell command received, for tests
        self.pushes: list[str] = []          # every sync SEND destination, for tests
        self.battery: SimBattery | None = None

    # --- filesystem -------------------------------------------------------------------------
    @property
    def bin_dir(self) -> Path:
        return self.root / "system" / "bin"

    def map_path(self, device_path: str) -> str:
        """A device path -> the host path inside the sandbox (never outside it)."""
        rel = os.path.normpath("/" + device_path.lstrip("/")).lstrip("/")
        return str(self.root / rel) if rel != "." else str(self.root)

    def rewrite(self, command: str) -> str:
        """Rewrite Android roots in a shell command to the sandbox (the sandbox path is safe)."""
        root = str(self.root)
        return _ROOT_RE.sub(lambda m: root + m.group(0), command)

    def shell_env(self) -> dict[str, str]:
        env = {
            "PATH": str(self.bin_dir),
            "HOME": str(self.root / "data" / "local" / "tmp"),
            "TMPDIR": str(self.root / "data" / "local" / "tmp"),
            "ANDROID_DATA": "/data",
            "ANDROID_ROOT": "/system",
            "LANG": "C.UTF-8",
        }
        for k in _PASS_ENV:
            if k in os.environ:
                env[k] = os.environ[k]
        return env

    def build(self) -> None:
        """(Re)write the sandbox's system files from the config; keeps /data."""
        c = self.config
        r = self.root
        for d in ("data/local/tmp", "sdcard", "system/bin", "proc", ".sim"):
            (r / d).mkdir(parents=True, exist_ok=True)
        bin_dir = self.bin_dir
        for tool in _TOOLS:
            src = shutil.which(tool, path="/usr/bin:/bin:/usr/sbin:/sbin")
            link = bin_dir / tool
            if src and not link.exists():
                link.symlink_to(src)
        (r / ".sim" / "build.prop").write_text("".join(f"{k}={v}\n" for k, v in c.props().items()))
        prop_file = shlex.quote(str(r / ".sim" / "build.prop"))
        _write_exec(bin_dir / "getprop", f"""#!/bin/sh
# getprop for the simulated device: reads {r}/.sim/build.prop
if [ $# -eq 0 ]; then
  while IFS='=' read -r k v; do printf '[%s]: [%s]\\n' "$k" "$v"; done < {prop_file}
  exit 0
fi
while IFS='=' read -r k v; do
  if [ "$k" = "$1" ]; then printf '%s\\n' "$v"; exit 0; fi
done < {prop_file}
printf '%s\\n' "${{2:-}}"
""")
        py = bin_dir / "python3"
        if c.has_python:
            _write_exec(py, f"#!/bin/sh\nexec {shlex.quote(c.python)} \"$@\"\n")
        elif py.exists() or py.is_symlink():
            py.unlink()
        # /proc
        ncpu = len(c.cpu_max_khz)
        cpuinfo = "".join(f"processor\t: {i}\nBogoMIPS\t: 52.00\nCPU implementer\t: 0x41\n\n"
                          for i in range(ncpu))
        cpuinfo += f"Hardware\t: {c.soc_manufacturer} {c.soc_model}\n"
        (r / "proc" / "cpuinfo").write_text(cpuinfo)
        (r / "proc" / "meminfo").write_text(
            f"MemTotal:       {c.mem_total_kb} kB\nMemFree:        {c.mem_total_kb // 4} kB\n"
            f"MemAvailable:   {c.mem_total_kb // 2} kB\n")
        # /sys: cpufreq
        cpu_root = r / "sys" / "devices" / "system" / "cpu"
        cpu_root.mkdir(parents=True, exist_ok=True)
        (cpu_root / "possible").write_text(f"0-{ncpu - 1}\n")
        (cpu_root / "present").write_text(f"0-{ncpu - 1}\n")
        (cpu_root / "online").write_text(f"0-{ncpu - 1}\n")
        for i, khz in enumerate(c.cpu_max_khz):
            f = cpu_root / f"cpu{i}" / "cpufreq"
            f.mkdir(parents=True, exist_ok=True)
            (f / "cpuinfo_max_freq").write_text(f"{khz}\n")
            (f / "cpuinfo_min_freq").write_text(f"{min(khz, 300000)}\n")
            (f / "scaling_max_freq").write_text(f"{khz}\n")
            (f / "scaling_cur_freq").write_text(f"{khz}\n")
            (f / "scaling_governor").write_text(f"{c.governor}\n")
        # /sys: thermal zones (millidegrees C) and battery (tenths of a degree)
        th = r / "sys" / "class" / "thermal"
        if th.exists():
            shutil.rmtree(th)
        for i, (zone, temp) in enumerate(c.thermal_zones.items()):
            z = th / f"thermal_zone{i}"
            z.mkdir(parents=True, exist_ok=True)
            (z / "type").write_text(f"{zone}\n")
            (z / "temp").write_text(f"{int(round(temp * 1000))}\n")
        bat = r / "sys" / "class" / "power_supply" / "battery"
        bat.mkdir(parents=True, exist_ok=True)
        (bat / "capacity").write_text(f"{c.battery_level}\n")
        (bat / "temp").write_text(f"{int(round(c.battery_temp_c * 10))}\n")
        (bat / "status").write_text(f"{c.battery_status}\n")
        self._build_power()

    def _build_power(self) -> None:
        """/proc/uptime (the host's: the same CLOCK_BOOTTIME the device's python3 sees), dumpsys,
        the thermal status and the load-following battery (edgebench.sim.power)."""
        c = self.config
        up = self.root / "proc" / "uptime"
        if not up.is_symlink():
            up.symlink_to("/proc/uptime")
        _write_exec(self.bin_dir / "dumpsys", dumpsys_script(self.root))
        (self.root / ".sim" / "thermal_status").write_text(f"{int(c.thermal_status)}\n")
        cfg = BatteryConfig.from_dict(c.battery)
        if self.battery is not None:
            self.battery.stop()
            self.battery = None
        if cfg.enabled:
            self.battery = SimBattery(self.root, cfg, c.battery_level, c.battery_temp_c, self._running_pids)
            self.battery.build()
            if self.alive:
                self.battery.start()

    def _running_pids(self) -> list[int]:
        with self._lock:
            return [p.pid for p in self._procs if p.poll() is None]

    def set_temperature(self, zone: str, celsius: float) -> None:
        """Set one thermal zone's temperature now."""
        for z in (self.root / "sys" / "class" / "thermal").glob("thermal_zone*"):
            if (z / "type").read_text().strip() == zone:
                (z / "temp").write_text(f"{int(round(celsius * 1000))}\n")
                return
        raise KeyError(zone)

    def set_cur_freq(self, cpu: int, khz: int) -> None:
        p = self.root / "sys" / "devices" / "system" / "cpu" / f"cpu{cpu}" / "cpufreq" / "scaling_cur_freq"
        p.write_text(f"{khz}\n")

    def tick(self) -> None:
        """Advance the scripted temperatures and frequencies by one step (one per shell command)."""
        c = self.config
        with self._lock:
            steps = [(z, seq.pop(0)) for z, seq in c.thermal_script.items() if seq]
            fsteps = [(cpu, seq.pop(0)) for cpu, seq in c.freq_script.items() if seq]
            status = c.thermal_status_script.pop(0) if c.thermal_status_script else None
        if status is not None:
            (self.root / ".sim" / "thermal_status").write_text(f"{int(status)}\n")
        for zone, t in steps:
            self.set_temperature(zone, t)
        for cpu, khz in fsteps:
            self.set_cur_freq(int(cpu), khz)

    # --- storage quota ------------------------------------------------------------------------
    def reserve(self, n: int) -> bool:
        with self._lock:
            free = self.config.storage_free_bytes
            if free is not None and self._used_bytes + n > free:
                return False
            self._used_bytes += n
            return True

    def release(self, n: int) -> None:
        with self._lock:
            self._used_bytes = max(0, self._used_bytes - n)

    # --- processes -------------------------------------------------------------------------------
    def should_die(self, command: str) -> bool:
        self.commands.append(command)
        pat = self.config.die_on
        return bool(pat and re.search(pat, command))

    def track(self, proc: subprocess.Popen) -> None:
        with self._lock:
            self._procs.add(proc)

    def untrack(self, proc: subprocess.Popen) -> None:
        with self._lock:
            self._procs.discard(proc)

    def running(self) -> int:
        """How many shell commands are running on the device now."""
        with self._lock:
            return sum(1 for p in self._procs if p.poll() is None)

    # --- lifecycle -------------------------------------------------------------------------------
    @property
    def serial(self) -> str:
        return f"{self.host}:{self.port}"

    def start(self) -> "SimDevice":
        self.build()
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind((self.host, self.port))
        s.listen(8)
        self.port = s.getsockname()[1]
        self._listener = s
        self.alive = True
        if self.battery is not None:
            self.battery.start()
        threading.Thread(target=self._accept_loop, daemon=True, name=f"simadbd-{self.port}").start()
        return self

    def _accept_loop(self) -> None:
        while self.alive:
            try:
                sock, _ = self._listener.accept()
            except OSError:
                return
            if not self.alive:
                sock.close()
                return
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            conn = _Connection(self, sock)
            with self._lock:
                self._conns.append(conn)
            threading.Thread(target=conn.serve, daemon=True, name=f"simadbd-conn-{self.port}").start()

    def kill(self) -> None:
        """Kill switch: stop listening, drop every connection, kill every running command."""
        self.alive = False
        if self.battery is not None:
            self.battery.stop()
        if self._listener is not None:
            try:
                self._listener.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            self._listener.close()
        with self._lock:
            conns, self._conns = self._conns, []
            procs = list(self._procs)
        for p in procs:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        for c in conns:
            c.shutdown()

    stop = kill

    def __enter__(self) -> "SimDevice":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.kill()


def _write_exec(path: Path, text: str) -> None:
    if path.is_symlink():
        path.unlink()
    path.write_text(text)
    path.chmod(0o755)


def load_config(path: str | None, **overrides: Any) -> SimConfig:
    """A SimConfig from a JSON file (keys = SimConfig fields) plus command-line overrides."""
    data: dict[str, Any] = {}
    if path:
        data = json.loads(Path(path).read_text())
        known = {f.name for f in fields(SimConfig)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise SystemExit(f"{path}: unknown simulated-device keys {unknown}; known: {sorted(known)}")
    data.update({k: v for k, v in overrides.items() if v is not None})
    if "cpu_max_khz" in data:
        data["cpu_max_khz"] = tuple(int(x) for x in data["cpu_max_khz"])
    return SimConfig(**data)


def main(argv: list[str] | None = None,
         on_ready: Callable[[SimDevice], None] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m edgebench.sim.adbd",
        description="A simulated Android device that the real adb server connects to "
                    "(adb connect 127.0.0.1:PORT).")
    ap.add_argument("--port", type=int, default=5599, help="TCP port to listen on (0: any free port)")
    ap.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    ap.add_argument("--sandbox", required=True, help="folder that stands for the device filesystem")
    ap.add_argument("--config", help="JSON file with SimConfig fields (props, thermal, quota...)")
    ap.add_argument("--model", help="ro.product.model, e.g. 'Pixel 8'")
    ap.add_argument("--serialno", help="ro.serialno")
    ap.add_argument("--python", dest="has_python", action="store_true", default=None,
                    help="give the device python3 with a TFLite runtime (this interpreter's)")
    ap.add_argument("--storage-free", dest="storage_free_bytes", type=int,
                    help="bytes that pushes may write before failing with 'No space left on device'")
    ap.add_argument("--auth", choices=("ok", "unauthorized", "offline"))
    args = ap.parse_args(argv)
    cfg = load_config(args.config, model=args.model, serialno=args.serialno,
                      has_python=args.has_python, storage_free_bytes=args.storage_free_bytes,
                      auth=args.auth)
    Path(args.sandbox).mkdir(parents=True, exist_ok=True)
    dev = SimDevice(args.sandbox, cfg, port=args.port, host=args.host).start()
    print(f"simulated device {cfg.model!r} listening on {dev.serial}; sandbox {dev.root}; "
          f"now run: adb connect {dev.serial}", flush=True)
    if on_ready:
        on_ready(dev)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        while not stop.is_set() and dev.alive:
            stop.wait(0.5)
    except KeyboardInterrupt:
        pass
    dev.kill()
    return 0


if __name__ == "__main__":
    sys.exit(main())
