"""The simulated adbd's services: one stream per OPENed service (``shell``/``exec`` and ``sync``).

``_Stream`` is the transport side of a stream (one WRTE in flight, the host's OKAY before the
next); ``_ShellStream`` runs a device command (``SimDevice.shell_argv``: plain host process or
confined board command) and speaks shell v2 packets; ``_SyncStream`` is ``sync:`` v1 on the
device's ``DeviceFS`` (links resolved inside the root, pushes replace, never write through).

Streams see the daemon only through ``Transport`` (the connection) and ``Device`` (the
simulated device behind it), two ``typing.Protocol``s written here: this module never imports
``edgebench.targets.sim.adbd``, which imports it.
"""

from __future__ import annotations

import os
import signal
import struct
import subprocess
import threading
from pathlib import Path
from typing import Protocol

from edgebench.targets.sim.devicefs import DeviceFS

A_CLSE = 0x45534C43
A_WRTE = 0x45545257
SYNC_DATA_MAX = 64 * 1024


class _Closed(Exception):
    """The stream or the connection went away."""


class Device(Protocol):
    """What the services need from the simulated device (``edgebench.targets.sim.adbd.SimDevice``)."""

    root: Path                  # the sandbox folder: shell commands run there
    fs: DeviceFS                # the sync service's confined view of it
    pushes: list[str]           # every sync SEND destination, for tests

    def tick(self) -> None:
        """Advance the scripted temperatures/frequencies (one step per shell command)."""

    def should_die(self, command: str) -> bool:
        """Record COMMAND; True when the daemon must die on it (the kill switch)."""

    def kill(self) -> None:
        """Drop every connection and kill every running command."""

    def shell_argv(self, command: str) -> list[str]:
        """The host argv that runs one device shell command."""

    def shell_env(self) -> dict[str, str]:
        """The environment of a device shell command."""

    def track(self, proc: subprocess.Popen) -> None:
        """A command started (killed with the device)."""

    def untrack(self, proc: subprocess.Popen) -> None:
        """A command ended."""

    def reserve(self, n: int) -> bool:
        """Take N bytes of the storage quota; False when the device is full."""

    def release(self, n: int) -> None:
        """Give N bytes back (a failed push)."""


class Transport(Protocol):
    """What a stream needs from the connection it runs on (``edgebench.targets.sim.adbd._Connection``)."""

    device: Device
    max_payload: int            # the largest WRTE the host accepts

    def send(self, cmd: int, arg0: int, arg1: int, data: bytes = b"") -> None:
        """Send one transport message; raises ``_Closed`` when the connection is gone."""

    def forget(self, local_id: int) -> None:
        """The stream LOCAL_ID is closed: drop it from the connection's table."""


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

    def __init__(self, conn: Transport, local_id: int, remote_id: int) -> None:
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

    def __init__(self, conn: Transport, local_id: int, remote_id: int, command: str, v2: bool,
                 raw_exec: bool) -> None:
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
        cmd = self.command
        interactive = not cmd
        try:
            self.proc = subprocess.Popen(
                dev.shell_argv(cmd), cwd=str(dev.root), env=dev.shell_env(),
                stdin=subprocess.PIPE if (self.v2 or interactive) else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE if self.v2 else subprocess.STDOUT,
                start_new_session=True,
            )
        except OSError as exc:      # the simulator's own launcher is missing: say so, exit 127
            msg = f"simulated adbd cannot start the device shell: {exc}\n".encode()
            self.write(self._packet(2, msg) + self._packet(3, bytes([127])) if self.v2 else msg)
            return
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
            st = self.conn.device.fs.lstat(path)
            self.write(b"STAT" + struct.pack("<III", st.st_mode & 0xFFFFFFFF,
                                             st.st_size & 0xFFFFFFFF, int(st.st_mtime)))
        except OSError:
            self.write(b"STAT" + struct.pack("<III", 0, 0, 0))

    def _list(self, path: str) -> None:
        try:
            entries = self.conn.device.fs.listdir(path)
        except OSError:
            entries = []
        for name, st in entries:
            b = name.encode("utf-8", "surrogateescape")
            self.write(b"DENT" + struct.pack("<IIII", st.st_mode & 0xFFFFFFFF,
                                             st.st_size & 0xFFFFFFFF, int(st.st_mtime), len(b)) + b)
        self.write(b"DONE" + struct.pack("<IIII", 0, 0, 0, 0))

    def _send(self, spec: str) -> None:
        """Receive a file. The destination is replaced, never written through (devicefs)."""
        dev = self.conn.device
        path, _, mode_s = spec.rpartition(",")
        if not path:
            path, mode_s = spec, "33188"
        try:
            mode = int(mode_s) & 0o777
        except ValueError:
            mode = 0o644
        dev.pushes.append(path)
        error: str | None = None
        fh = None
        pfd, name = -1, ""
        written = 0
        try:
            fh, pfd, name = dev.fs.create(path)
        except OSError as e:
            error = f"couldn't create file: {e.strerror}"
        mtime = None
        try:
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
            if fh is not None and error is None:
                fh.flush()
                os.fchmod(fh.fileno(), mode)          # the new file itself: never a link
                if mtime:
                    os.utime(fh.fileno(), (mtime, mtime))
        finally:
            if fh is not None:
                fh.close()
                if error is not None:
                    dev.release(written)
                    dev.fs.discard(pfd, name)
                os.close(pfd)
        if error is not None:
            self._fail(error)
            return
        self.write(b"OKAY" + struct.pack("<I", 0))

    def _recv(self, path: str) -> None:
        try:
            fh = self.conn.device.fs.open_read(path)
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
