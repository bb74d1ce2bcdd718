"""A simulated adb device daemon: the real ``adb`` server connects to it over TCP.

Run it by hand to try edgebench without a phone::

    python -m edgebench.targets.sim.adbd --port 5599 --sandbox /tmp/simphone --model "Pixel 8" --python
    python -m edgebench.targets.sim.adbd --port 5600 --sandbox /tmp/board --board     # emulated arm64
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

The device filesystem is a sandbox folder taken as ``/``. The sync service is confined to it
(``devicefs``: links resolved inside the root, ``O_NOFOLLOW`` on every component, pushes replace
instead of writing through). Shell commands:

* plain mode: host processes running as the daemon's user, cwd the sandbox, ``PATH`` only
  ``SANDBOX/system/bin`` (copies of a toybox-like set of host tools, a ``getprop`` reading the
  configured properties, ``python3`` = this interpreter when configured), Android roots
  (``/data``, ``/sdcard``, ``/sys``, ``/proc``, ``/system``, ...) rewritten in the command text.
  NOT confined: a command can reach anything the daemon's user can.
* board mode (``SimConfig.rootfs``, ``--board``): the sandbox is a clone of the arm64 board
  (``edgebench.targets.sim.board``); commands run chrooted into it as uid 2000 in their own namespaces
  (no network), with mksh, toybox and the board's aarch64 python under qemu-user.

It listens on loopback only unless ``unsafe_listen`` / ``--unsafe-listen``.
What it cannot prove about real phones is listed in docs/devices.md.
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import re
import secrets
import signal
import socket
import struct
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any, Callable

from edgebench.core.errors import BadInput, InfraError
from edgebench.targets.sim import board as _board
from edgebench.targets.sim import layout as _layout
from edgebench.targets.sim.config import SimConfig, load_config
from edgebench.targets.sim.devicefs import DeviceFS
from edgebench.targets.sim.power import BatteryConfig, SimBattery, dumpsys_script
from edgebench.targets.sim.streams import A_CLSE, A_WRTE, _Closed, _ShellStream, _Stream, _SyncStream

# --- transport constants (adb/protocol.txt; CLSE and WRTE live with the streams) ------------
A_CNXN = 0x4E584E43
A_AUTH = 0x48545541
A_OPEN = 0x4E45504F
A_OKAY = 0x59414B4F
A_STLS = 0x534C5453
A_VERSION = 0x01000001          # >= this: data checksums may be (and are) 0
MAX_PAYLOAD = 256 * 1024
AUTH_TOKEN, AUTH_SIGNATURE, AUTH_RSAPUBLICKEY = 1, 2, 3
FEATURES = "cmd,fixed_push_mkdir,shell_v2"   # sync v1 only: no stat_v2/ls_v2/sendrecv_v2
UPTIME_REFRESH_S = 0.02          # board: /proc/uptime is a copy of the host's, this fresh

# Android filesystem roots rewritten into the sandbox in shell commands.
_ROOTS = ("data", "sdcard", "storage", "sys", "proc", "system", "vendor", "odm", "product", "mnt")
_ROOT_RE = re.compile(r"(?<![\w.~/-])/(?:%s)(?=/|[\s'\";|&)<>,:]|$)" % "|".join(_ROOTS))
_SAFE_SANDBOX = re.compile(r"^[\w./+-]+$")

# Host environment variables a device process inherits (numeric libraries need them here).
_PASS_ENV = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "LD_LIBRARY_PATH", "TF_CPP_MIN_LOG_LEVEL")


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
                f"ro.product.device={c.device};features={c.features or FEATURES}").encode()

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
    """The simulated device: a sandbox folder (or a board clone) plus a TCP listener speaking adb.

    ``start()`` returns once it listens; ``serial`` is ``127.0.0.1:PORT`` as the adb server
    names it. ``kill()`` is the kill switch: it drops every connection and kills running
    commands, like a cable pulled mid-run.
    """

    def __init__(self, sandbox: str | os.PathLike, config: SimConfig | None = None,
                 port: int = 0, host: str = "127.0.0.1", unsafe_listen: bool = False) -> None:
        self.root = Path(sandbox).resolve()
        if not _SAFE_SANDBOX.match(str(self.root)):
            raise ValueError(f"sandbox path {self.root} must contain only letters, digits and ./_+-")
        if not unsafe_listen and not _is_loopback(host):
            raise ValueError(f"--host {host}: the simulated device listens on loopback only (127.0.0.1, ::1): "
                             "its shell and file service have no authentication; pass --unsafe-listen to "
                             "listen there anyway")
        self.config = config or SimConfig()
        if self.config.rootfs and self.config.qemu_cpu not in _board.CPU_MODELS:
            raise ValueError(f"qemu_cpu {self.config.qemu_cpu!r} is not one the board describes; use one of "
                             f"{', '.join(sorted(_board.CPU_MODELS))}")
        self.fs = DeviceFS(self.root, _board.SHELL_UID if self.config.rootfs and os.geteuid() == 0 else None)
        self.clone_kind: str | None = None
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
        self._uptime_stop = threading.Event()

    # --- filesystem -------------------------------------------------------------------------
    @property
    def is_board(self) -> bool:
        """Board mode: commands run inside a clone of an arm64 root filesystem (edgebench.targets.sim.board)."""
        return self.config.rootfs is not None

    @property
    def bin_dir(self) -> Path:
        return self.root / "system" / "bin"

    def map_path(self, device_path: str) -> str:
        """A device path -> the host path it resolves to inside the sandbox (never outside it)."""
        return self.fs.host_path(device_path)

    def rewrite(self, command: str) -> str:
        """Plain mode: rewrite Android roots in a shell command to the sandbox (the sandbox path is safe)."""
        root = str(self.root)
        return _ROOT_RE.sub(lambda m: root + m.group(0), command)

    def shell_argv(self, command: str) -> list[str]:
        """The host argv for one device shell command ("" = an interactive shell)."""
        if self.is_board:
            return _board.confined_argv(self.root, ["/system/bin/sh"] + (["-c", command] if command else []))
        return [str(self.bin_dir / "sh")] + (["-c", self.rewrite(command)] if command else [])

    def shell_env(self) -> dict[str, str]:
        if self.is_board:
            return {"PATH": "/system/bin:/system/xbin", "HOME": "/", "TMPDIR": "/data/local/tmp",
                    "ANDROID_DATA": "/data", "ANDROID_ROOT": "/system", "QEMU_CPU": self.config.qemu_cpu}
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
        """(Re)write the sandbox's system files from the config; keeps /data. Board mode
        clones the board into the sandbox first (once)."""
        self.root.mkdir(parents=True, exist_ok=True)
        if self.is_board:
            if not (self.root / _board.COMPLETE).is_file():
                self.clone_kind = _board.clone(self.config.rootfs, self.root)
            _layout.write_board(self.fs, self.config)
        else:
            _layout.write_plain(self.fs, self.config)
        _layout.write_system(self.fs, self.config)
        self._build_power()

    def _build_power(self) -> None:
        """/proc/uptime (CLOCK_BOOTTIME, as the device's python3 sees it), dumpsys, the thermal
        status and the load-following battery (edgebench.targets.sim.power)."""
        c = self.config
        if self.is_board:
            self._put_uptime()              # no /proc is mounted: a copy, refreshed while alive
            self.fs.put("/system/bin/dumpsys", dumpsys_script("/.sim", "/system/bin/sh"), mode=0o755)
        else:
            if not self.fs.exists("/proc/uptime"):          # the host's own, through a host link
                self.fs.special("/proc/uptime", link="/proc/uptime")
            self.fs.put("/system/bin/dumpsys", dumpsys_script(self.fs.host_path("/.sim")), mode=0o755)
        self.fs.put("/.sim/thermal_status", f"{int(c.thermal_status)}\n")
        cfg = BatteryConfig.from_dict(c.battery)
        if self.battery is not None:
            self.battery.stop()
            self.battery = None
        if cfg.enabled:
            self.battery = SimBattery(self.fs, cfg, c.battery_level, c.battery_temp_c, self._running_pids)
            self.battery.build()
            if self.alive:
                self.battery.start()

    def _put_uptime(self) -> None:
        with open("/proc/uptime") as fh:
            self.fs.put("/proc/uptime", fh.read())

    def _uptime_loop(self) -> None:
        while not self._uptime_stop.wait(UPTIME_REFRESH_S):
            try:
                self._put_uptime()
            except OSError:
                return              # the sandbox is being removed

    def _running_pids(self) -> list[int]:
        with self._lock:
            return [p.pid for p in self._procs if p.poll() is None]

    def set_temperature(self, zone: str, celsius: float) -> None:
        """Set one thermal zone's temperature now."""
        _layout.set_temperature(self.fs, zone, celsius)

    def set_cur_freq(self, cpu: int, khz: int) -> None:
        _layout.set_cur_freq(self.fs, cpu, khz)

    def tick(self) -> None:
        """Advance the scripted temperatures and frequencies by one step (one per shell command)."""
        c = self.config
        with self._lock:
            steps = [(z, seq.pop(0)) for z, seq in c.thermal_script.items() if seq]
            fsteps = [(cpu, seq.pop(0)) for cpu, seq in c.freq_script.items() if seq]
            status = c.thermal_status_script.pop(0) if c.thermal_status_script else None
        if status is not None:
            self.fs.put("/.sim/thermal_status", f"{int(status)}\n")
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
        if self.is_board:
            threading.Thread(target=self._uptime_loop, daemon=True, name=f"simadbd-uptime-{self.port}").start()
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
        self._uptime_stop.set()
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


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def main(argv: list[str] | None = None,
         on_ready: Callable[[SimDevice], None] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m edgebench.targets.sim.adbd",
        description="A simulated Android device that the real adb server connects to "
                    "(adb connect 127.0.0.1:PORT).")
    ap.add_argument("--port", type=int, default=5599, help="TCP port to listen on (0: any free port)")
    ap.add_argument("--host", default="127.0.0.1", help="loopback address to listen on (default 127.0.0.1)")
    ap.add_argument("--unsafe-listen", action="store_true",
                    help="allow a non-loopback --host: anyone who reaches it gets the device's shell")
    ap.add_argument("--sandbox", required=True, help="folder that stands for the device filesystem")
    ap.add_argument("--config", help="JSON file with SimConfig fields (props, thermal, quota...)")
    ap.add_argument("--model", help="ro.product.model, e.g. 'Pixel 8'")
    ap.add_argument("--serialno", help="ro.serialno")
    ap.add_argument("--python", dest="has_python", action="store_true", default=None,
                    help="give the device python3 with a TFLite runtime (plain mode: this interpreter's)")
    ap.add_argument("--rootfs", help="run commands inside this arm64 board (python -m edgebench.targets.sim.board build)")
    ap.add_argument("--board", action="store_true",
                    help="like --rootfs with the cached board, built first if needed (a minute on first use)")
    ap.add_argument("--qemu-cpu", choices=sorted(_board.CPU_MODELS), help="emulated core of the board")
    ap.add_argument("--storage-free", dest="storage_free_bytes", type=int,
                    help="bytes that pushes may write before failing with 'No space left on device'")
    ap.add_argument("--auth", choices=("ok", "unauthorized", "offline"))
    args = ap.parse_args(argv)
    rootfs = args.rootfs
    if args.board and not rootfs:
        try:
            rootfs = str(_board.ensure(log=lambda m: print(m, file=sys.stderr, flush=True)))
        except (BadInput, InfraError) as exc:
            ap.exit(3, f"cannot build the arm64 board: {exc}\n")
    cfg = load_config(args.config, rootfs, model=args.model, serialno=args.serialno,
                      has_python=args.has_python, storage_free_bytes=args.storage_free_bytes,
                      auth=args.auth, qemu_cpu=args.qemu_cpu)
    Path(args.sandbox).mkdir(parents=True, exist_ok=True)
    try:
        dev = SimDevice(args.sandbox, cfg, port=args.port, host=args.host, unsafe_listen=args.unsafe_listen).start()
    except (ValueError, BadInput, InfraError) as exc:
        ap.exit(2, f"{exc}\n")
    says = ("it says it is an emulator (ro.kernel.qemu=1), so edgebench labels it and its results 'emulated'"
            if cfg.advertise_emulator else "advertise_emulator is off: it passes as a real phone")
    print(f"simulated device {cfg.model!r} listening on {dev.serial}; sandbox {dev.root}; {says}; "
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
