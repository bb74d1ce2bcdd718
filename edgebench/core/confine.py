"""Confinement: a command that opens a model file runs in a sandbox the kernel enforces, so whatever
route a loader takes (a Keras function reference, a pickle, a tf.data graph, a custom op), what the
model's code can do is bounded by the sandbox, not by what edgebench guessed the loader would do.

The mechanism is bubblewrap (``bwrap``, Flatpak's sandbox: Linux mount, network, IPC and UTS
namespaces, no capabilities; unprivileged where the kernel allows user namespaces, and as root).
Inside the sandbox:

* the whole file system is **read-only**; writable are only the folders a command writes to (its
  ``--out``, the parents of ``--json``/``--markdown``/... files, edgebench's cache and data folders)
  and a **private** ``/tmp`` (a tmpfs thrown away at exit);
* the user's **home** (``$HOME``, ``/home``, ``/root``) is an empty tmpfs: only what the command is
  given is bound back, read-only (the model, its data, the Python installation and edgebench);
* ``/dev`` is a minimal one (null, zero, random, tty, shm; GPU nodes when present), not the host's
  disks;
* the **network** is a namespace of its own (loopback only, nothing listening) unless the command
  names a network destination (a PostgreSQL ``--db``, ``--pushgateway``, an adb target), which the
  caller passes as ``network=True`` with the reason;
* it dies with its parent; SIGINT, SIGTERM and SIGHUP sent to the parent are forwarded to the
  confined command, so its own handlers keep what was measured (exit 130/143/129).

``plan()`` is the pure part (a :class:`Sandbox` -> bwrap's argv); ``run_confined()`` runs it.
``available()`` probes once whether bwrap works here and says why not otherwise.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import edgebench

MECHANISM = "bubblewrap"
# The environment variable the confined process sees, naming the mechanism: it does not confine again.
CONFINED_ENV = "EDGEBENCH_CONFINED"
HIDDEN_ROOTS = ("/home", "/root", "/tmp", "/var/tmp", "/run/user")
_GPU_NODES = ("/dev/dri", "/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidia0",
              "/dev/nvidia1", "/dev/nvidia2", "/dev/nvidia3", "/dev/kfd")


@dataclass(frozen=True)
class Sandbox:
    """What a confined command may touch. Paths are made absolute and resolved by :func:`plan`."""
    writable: tuple[str, ...] = ()
    readable: tuple[str, ...] = ()
    network: bool = False
    hidden: tuple[str, ...] = field(default_factory=lambda: tuple(_hidden_roots()))


def _hidden_roots() -> list[str]:
    roots = [r for r in HIDDEN_ROOTS if os.path.isdir(r)]
    home = os.path.expanduser("~")
    if home not in ("/", "") and os.path.isdir(home) and home not in roots:
        roots.append(home)           # also inside another root: hidden again under a bound folder
    return roots


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _exposes_hidden(path: str, hidden: list[str]) -> bool:
    """A path that would bind back a whole hidden root (``$HOME`` itself, ``/tmp``): never read-only
    bound, only the paths below it that a command names."""
    home = _real("~")
    return path in hidden or path == home or any(_under(h, path) for h in hidden)


def _real(p: str) -> str | None:
    try:
        return os.path.realpath(os.path.abspath(os.path.expanduser(p)))
    except (OSError, ValueError):
        return None


def plan(argv: list[str], box: Sandbox) -> list[str]:
    """bwrap's argv that runs ``argv`` confined to ``box`` (pure but for ``exists`` checks)."""
    hidden = sorted({h for h in (_real(x) for x in box.hidden) if h}, key=len)
    out = ["bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
           "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try", "--die-with-parent"]
    if not box.network:
        out.append("--unshare-net")
    for node in _GPU_NODES:
        if os.path.exists(node):
            out += ["--dev-bind", node, node]
    binds: dict[str, str] = {}
    for p in box.readable:
        r = _real(p)
        if r and os.path.exists(r) and any(_under(r, h) for h in hidden) and not _exposes_hidden(r, hidden):
            binds.setdefault(r, "--ro-bind")
    for p in box.writable:
        r = _real(p)
        if r and os.path.isdir(r):
            binds[r] = "--bind"
    writable = [r for r, kind in binds.items() if kind == "--bind"]
    binds = {r: kind for r, kind in binds.items()     # inside a writable folder: visible and writable already
             if kind == "--bind" or not any(_under(r, w) for w in writable)}
    # One list, parents first: a hidden root inside a bound folder (``$HOME`` inside the working
    # folder) is hidden again after that bind, and a writable folder inside a read-only one stays
    # writable; on the same path the tmpfs comes first, then the bind.
    mounts = [(h, 0, "--tmpfs") for h in hidden] + [(r, 1, kind) for r, kind in binds.items()]
    for path, _order, kind in sorted(mounts, key=lambda m: (m[0].rstrip("/").count("/"), m[1], m[0])):
        out += [kind, path] if kind == "--tmpfs" else [kind, path, path]
    cwd = os.getcwd()
    if any(_under(cwd, h) for h in hidden) and not any(_under(cwd, b) for b in binds):
        out += ["--dir", cwd]                  # the working folder, empty: only what the command names
    out += ["--chdir", cwd if os.path.isdir(cwd) else "/", "--setenv", CONFINED_ENV, MECHANISM, "--"]
    return out + list(argv)


@lru_cache(maxsize=1)
def available() -> tuple[bool, str]:
    """(works, why not): bwrap on PATH and able to start a namespace here."""
    tool = shutil.which("bwrap")
    if tool is None:
        return False, "bubblewrap is not installed (apt install bubblewrap / dnf install bubblewrap)"
    try:
        p = subprocess.run([tool, "--ro-bind", "/", "/", "--dev", "/dev", "--unshare-net", "--die-with-parent",
                            "--", "/bin/true"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, f"bwrap could not start ({exc})"
    if p.returncode != 0:
        why = (p.stderr.strip().splitlines() or ["no reason given"])[-1][:200]
        return False, (f"bwrap cannot create a sandbox here ({why}); unprivileged user namespaces may be "
                       "off (sysctl kernel.unprivileged_userns_clone=1, or AppArmor's "
                       "kernel.apparmor_restrict_unprivileged_userns=0)")
    return True, ""


def python_paths() -> list[str]:
    """What the Python running edgebench needs to read: its installation, the venv, every import path."""
    paths = {sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(os.path.realpath(sys.executable))}
    paths.update(p for p in sys.path if p)

    paths.add(str(Path(edgebench.__file__).resolve().parents[1]))
    return sorted(paths)


def run_confined(argv: list[str], box: Sandbox) -> int:
    """Run ``argv`` under bwrap; forward SIGINT/SIGTERM/SIGHUP to it; return its exit code (128 + the
    signal when a signal ended it, as a shell reports it)."""
    read_fd, write_fd = os.pipe()
    cmd = plan(argv, box)
    cmd[1:1] = ["--info-fd", str(write_fd)]
    child_pid: list[int] = []
    proc = subprocess.Popen(cmd, pass_fds=(write_fd,))  # noqa: S603 -- argv list, no shell
    os.close(write_fd)

    def forward(signum, _frame):
        target = child_pid[0] if child_pid else proc.pid
        try:
            os.kill(target, signum)
        except ProcessLookupError:
            pass

    old = {s: signal.signal(s, forward) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    try:
        with os.fdopen(read_fd, "rb") as info:
            raw = info.read()
        try:
            child_pid.append(int(json.loads(raw.decode() or "{}")["child-pid"]))
        except (ValueError, KeyError):
            pass
        code = proc.wait()
    finally:
        for s, h in old.items():
            signal.signal(s, h)
    return 128 - code if code < 0 else code
