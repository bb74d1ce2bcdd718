"""An arm64 userland for the simulated adb device: built once, cached, cloned per device.

The board is a Debian bookworm arm64 root filesystem laid out like a phone's: ``/system/bin/sh``
is mksh, the commands in ``/system/bin`` are toybox applets, ``getprop`` reads
``/system/build.prop``; Debian's arm64 python3 and the aarch64 wheels of numpy and ai-edge-litert
(pinned to the versions this host runs, so host and board run the same LiteRT release) stand in
for a device with Python. Every arm64 program runs under qemu-user through binfmt_misc, so the
board's kernels are the ARM builds (NEON, ARM XNNPACK micro-kernels), not the host's.

Build, with no emulated step for packages:

1. the host's apt, with a private configuration (the host's dpkg architectures, sources and
   status are never touched), resolves and downloads the arm64 .debs of ``PACKAGES``;
2. ``dpkg-deb --fsys-tarfile | tar -x`` extracts them into a merged-/usr tree (maintainer
   scripts never run: nothing here needs them);
3. the host's pip installs the aarch64 wheels (``--platform manylinux..._aarch64
   --only-binary=:all:``) into ``/usr/local/lib/python3.11/dist-packages``;
4. the host's Python 3.11 compiles the .pyc files (same bytecode magic as the board's 3.11;
   otherwise the board's own python compiles them under emulation).

Cache: ``board_cache_dir()/<key>/`` where the key hashes everything the tree is made from (this
module's source, the suite, the package list, the pinned wheels). A build runs in
``<key>.partial-*`` under an exclusive lock and is renamed into place only after its
``COMPLETE`` marker is written, so a killed build is never reused (the next build removes it).

Per device, ``clone()`` makes a hard-link farm of the cached tree (a copy when not root or across
file systems); device commands run as uid 2000 (Android's ``shell``) and cannot write the shared
files; the simulated adbd replaces files on push instead of writing through them.

What it cannot be: a phone. Timings are emulated (tens of times slower than the ARM core named by
``QEMU_CPU``, and not proportional to it); there is no GPU/NNAPI, no real thermal behaviour, and
the kernel is the host's.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import fcntl
import hashlib
import importlib.metadata as md
import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Iterator

from edgebench.core.errors import BadInput, InfraError

SUITE = "bookworm"
ARCH = "arm64"
BOARD_PYTHON = "3.11"            # bookworm's python3; the wheels are built for cp311
# Debian packages the board needs (their dependencies come along): python3 + stdlib, the
# C++ runtime LiteRT links against, and the phone's shell and commands.
PACKAGES = ("python3-minimal", "libpython3.11-stdlib", "libstdc++6", "libgcc-s1", "mksh", "toybox")
# Wheels pinned to this host's versions; their other dependencies are constrained to the
# host's versions too when the host has them.
WHEELS = ("numpy", "ai-edge-litert")
WHEEL_PLATFORMS = ("manylinux2014_aarch64", "manylinux_2_17_aarch64", "manylinux_2_27_aarch64",
                   "manylinux_2_28_aarch64", "manylinux_2_34_aarch64")
SITE = f"usr/local/lib/python{BOARD_PYTHON}/dist-packages"
SHELL_UID = 2000                 # Android's AID_SHELL: the uid adb shell commands run as
DEFAULT_QEMU_CPU = "cortex-a76"  # qemu's default "max" CPU gives wrong INT8 XNNPACK results
KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"
BINFMT_ENTRY = Path("/proc/sys/fs/binfmt_misc/qemu-aarch64")
MANIFEST = "etc/edgebench-board.json"
COMPLETE = "COMPLETE"
PRUNE_DAYS = 14

# /proc/cpuinfo of the emulated core: (part, variant, revision, features) as the Linux kernel
# prints them for these cores (Arm TRMs: MIDR part numbers). The file must describe the core
# qemu emulates: LiteRT picks kernels from it, and an ARMv8.0 core (cortex-a53/a72) described
# as a Cortex-A76 dies with SIGILL in invoke(). qemu's "max" core is left out on purpose: it
# gives wrong INT8 XNNPACK results.
CPU_MODELS = {
    "cortex-a53": ("0xd03", "0x0", "4", "fp asimd evtstrm aes pmull sha1 sha2 crc32 cpuid"),
    "cortex-a72": ("0xd08", "0x0", "3", "fp asimd evtstrm aes pmull sha1 sha2 crc32 cpuid"),
    "cortex-a76": ("0xd0b", "0x4", "1", "fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp "
                                        "cpuid asimdrdm lrcpc dcpop asimddp"),
    "neoverse-n1": ("0xd0c", "0x4", "1", "fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp "
                                         "cpuid asimdrdm lrcpc dcpop asimddp ssbs"),
}


def board_cache_dir() -> Path:
    """$EDGEBENCH_BOARD_CACHE, else $XDG_CACHE_HOME/edgebench/boards (kept between test runs:
    the test suite points $EDGEBENCH_CACHE_DIR at a temporary folder, the board stays)."""
    base = os.environ.get("EDGEBENCH_BOARD_CACHE")
    p = Path(base) if base else Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "edgebench" / "boards"
    p.mkdir(parents=True, exist_ok=True)
    return p


# ============================================================================ availability
def unavailable_reason() -> str | None:
    """None when this machine can build and run the board, else what is missing and the fix."""
    if sys.platform != "linux":
        return "the arm64 board needs Linux (binfmt_misc + qemu-user)"
    missing = [t for t in ("apt-get", "dpkg-deb", "tar", "unshare", "cp") if shutil.which(t) is None]
    if missing:
        return f"the arm64 board needs {', '.join(missing)} (a Debian-like host)"
    if not Path(KEYRING).is_file():
        return f"the arm64 board needs Debian's archive keyring {KEYRING} (apt-get install debian-archive-keyring)"
    if not BINFMT_ENTRY.is_file():
        return ("arm64 programs cannot run here: no binfmt_misc entry qemu-aarch64 (apt-get install "
                "qemu-user-static binfmt-support; mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc; "
                "update-binfmts --enable qemu-aarch64; scripts/test does this)")
    entry = BINFMT_ENTRY.read_text()
    if not entry.startswith("enabled"):
        return "the binfmt_misc entry qemu-aarch64 is disabled: update-binfmts --enable qemu-aarch64"
    flags = next((ln.split(":", 1)[1].strip() for ln in entry.splitlines() if ln.startswith("flags:")), "")
    if "F" not in flags:
        return ("the binfmt_misc entry qemu-aarch64 lacks the F (fix-binary) flag, so arm64 programs cannot run "
                "inside a chroot; install qemu-user-static (its entry has F)")
    if os.geteuid() != 0:
        return ("the board runs device commands chrooted as uid 2000, which needs root here "
                "(run the tests as root, as scripts/test and CI do)")
    return None


# ============================================================================ spec and key
@dataclass(frozen=True)
class BoardSpec:
    """Everything the cached tree is made from; ``key()`` hashes it with this module's source."""

    suite: str = SUITE
    arch: str = ARCH
    packages: tuple[str, ...] = PACKAGES
    wheels: tuple[str, ...] = ()           # "name==version", pinned
    mirror: str = ""
    security_mirror: str = ""
    python: str = BOARD_PYTHON

    def key(self) -> str:
        h = hashlib.sha256(Path(__file__).read_bytes())
        h.update(json.dumps(asdict(self), sort_keys=True).encode())
        return h.hexdigest()[:16]


def host_mirrors() -> tuple[str, str]:
    """The Debian and Debian-security mirrors apt on this host uses ($EDGEBENCH_BOARD_MIRROR wins)."""
    env = os.environ.get("EDGEBENCH_BOARD_MIRROR")
    uris: list[str] = []
    for f in [Path("/etc/apt/sources.list"), *sorted(Path("/etc/apt/sources.list.d").glob("*"))]:
        if not f.is_file() or not f.name.endswith((".list", ".sources")):
            continue
        for line in f.read_text(errors="replace").splitlines():
            line = line.strip()
            if line.startswith("URIs:"):
                uris.extend(line.split()[1:])
            elif line.startswith("deb "):
                uris.extend(w for w in line.split()[1:] if "://" in w)
    main = env or next((u for u in uris if u.rstrip("/").endswith("/debian")), "http://deb.debian.org/debian")
    sec = next((u for u in uris if u.rstrip("/").endswith("/debian-security")), "http://deb.debian.org/debian-security")
    return main.rstrip("/"), sec.rstrip("/")


def default_spec() -> BoardSpec:
    pins = []
    for name in WHEELS:
        try:
            pins.append(f"{name}=={md.version(name)}")
        except md.PackageNotFoundError:
            raise BadInput(f"the board pins {name} to this host's version, but {name} is not installed here; "
                           f"pip install {name}") from None
    main, sec = host_mirrors()
    return BoardSpec(wheels=tuple(pins), mirror=main, security_mirror=sec)


# ============================================================================ ensure / build
def board_path(spec: BoardSpec | None = None) -> Path:
    return board_cache_dir() / (spec or default_spec()).key()


def is_complete(root: Path) -> bool:
    return (root / COMPLETE).is_file() and (root / MANIFEST).is_file()


@contextlib.contextmanager
def _locked(cache: Path) -> Iterator[None]:
    with open(cache / ".lock", "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def ensure(spec: BoardSpec | None = None, log: Callable[[str], None] = lambda s: None) -> Path:
    """The cached board for SPEC (default: this host's pins), built first when absent.

    Returns the root folder. Raises InfraError naming the failed step (network, apt, pip)."""
    reason = unavailable_reason()
    if reason:
        raise InfraError(reason)
    spec = spec or default_spec()
    cache = board_cache_dir()
    final = cache / spec.key()
    if is_complete(final):
        os.utime(final / COMPLETE)            # last use, for pruning
        return final
    with _locked(cache):
        if is_complete(final):
            return final
        for stale in cache.glob(f"{spec.key()}.partial-*"):
            log(f"removing {stale.name}: a build that did not finish")
            shutil.rmtree(stale, ignore_errors=True)
        if final.exists():          # no COMPLETE marker: never reuse it
            shutil.rmtree(final, ignore_errors=True)
        partial = cache / f"{spec.key()}.partial-{os.getpid()}"
        t0 = time.monotonic()
        build(spec, partial, apt_dir=cache / "apt-arm64", log=log)
        manifest = json.loads((partial / MANIFEST).read_text())
        manifest["build_s"] = round(time.monotonic() - t0, 1)
        (partial / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True))
        (partial / COMPLETE).write_text(f"{spec.key()}\n")
        os.rename(partial, final)
        log(f"board {spec.key()} built in {manifest['build_s']} s: {final}")
        _prune(cache, keep=final, log=log)
    return final


def _prune(cache: Path, keep: Path, log: Callable[[str], None]) -> None:
    """Remove other boards not used for PRUNE_DAYS (older recipes or pins, ~200 MB each)."""
    limit = time.time() - PRUNE_DAYS * 86400
    for other in cache.iterdir():
        if other != keep and is_complete(other) and (other / COMPLETE).stat().st_mtime < limit:
            log(f"removing {other.name}: unused for {PRUNE_DAYS} days")
            shutil.rmtree(other, ignore_errors=True)


def _run(argv: list[str], what: str, **kw) -> subprocess.CompletedProcess:
    r = subprocess.run(argv, capture_output=True, text=True, check=False, stdin=subprocess.DEVNULL, **kw)
    if r.returncode != 0:
        tail = " | ".join((r.stderr or r.stdout).strip().splitlines()[-3:])[-400:]
        raise InfraError(f"building the arm64 board: {what} failed (exit {r.returncode}): {tail}")
    return r


def _apt_env(apt_dir: Path, spec: BoardSpec) -> dict[str, str]:
    for d in ("state/lists/partial", "cache/archives/partial", "etc/apt.conf.d", "etc/preferences.d",
              "etc/sources.list.d", "etc/trusted.gpg.d"):
        (apt_dir / d).mkdir(parents=True, exist_ok=True)
    (apt_dir / "state" / "status").touch()
    opts = f"arch={spec.arch} signed-by={KEYRING}"
    (apt_dir / "etc" / "sources.list").write_text(
        f"deb [{opts}] {spec.mirror} {spec.suite} main\n"
        f"deb [{opts}] {spec.mirror} {spec.suite}-updates main\n"
        f"deb [{opts}] {spec.security_mirror} {spec.suite}-security main\n")
    conf = apt_dir / "apt.conf"
    conf.write_text(
        f'Dir::State "{apt_dir}/state";\nDir::State::status "{apt_dir}/state/status";\n'
        f'Dir::Cache "{apt_dir}/cache";\nDir::Etc "{apt_dir}/etc";\n'
        f'APT::Architecture "{spec.arch}";\nAPT::Architectures {{ "{spec.arch}"; }};\n'
        'APT::Install-Recommends "false";\nAPT::Get::Assume-Yes "true";\nDebug::NoLocking "true";\n'
        'APT::Sandbox::User "root";\n')
    env = {k: v for k, v in os.environ.items() if not k.startswith("APT_")}
    env.update(APT_CONFIG=str(conf), DEBIAN_FRONTEND="noninteractive", LC_ALL="C")
    return env


_INST_RE = re.compile(r"^Inst (\S+) \((\S+) .*\[(\S+)\]\)")


def fetch_debs(spec: BoardSpec, apt_dir: Path, log: Callable[[str], None]) -> list[tuple[str, str, Path]]:
    """Resolve and download the arm64 .debs with the host's apt (private config). [(pkg, version, file)]"""
    env = _apt_env(apt_dir, spec)
    _run(["apt-get", "update", "-q"], "apt-get update (arm64 package lists)", env=env)
    sim = _run(["apt-get", "install", "-s", *spec.packages], "resolving the arm64 packages", env=env)
    pkgs = [m.groups() for m in map(_INST_RE.match, sim.stdout.splitlines()) if m]
    if not pkgs:
        raise InfraError(f"building the arm64 board: apt resolved no packages for {spec.packages}")
    _run(["apt-get", "install", "--download-only", "-q", *spec.packages], "downloading the arm64 .debs", env=env)
    archives = apt_dir / "cache" / "archives"
    out = []
    for name, version, arch in pkgs:
        f = archives / f"{name}_{version.replace(':', '%3a')}_{arch}.deb"
        if not f.is_file():
            raise InfraError(f"building the arm64 board: apt downloaded no {f.name}")
        out.append((name, version, f))
    log(f"{len(out)} arm64 packages")
    return out


def _extract(deb: Path, root: Path) -> None:
    with subprocess.Popen(["dpkg-deb", "--fsys-tarfile", str(deb)], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, stdin=subprocess.DEVNULL) as deb_p:
        tar = subprocess.run(["tar", "-x", "--keep-directory-symlink", "--no-same-owner", "-f", "-", "-C", str(root)],
                             stdin=deb_p.stdout, capture_output=True, check=False)
        deb_p.stdout.close()
        err = deb_p.stderr.read()
        rc = deb_p.wait()
    if rc != 0 or tar.returncode != 0:
        raise InfraError(f"building the arm64 board: extracting {deb.name} failed: "
                         f"{(err or tar.stderr).decode(errors='replace').strip()[-300:]}")


def _host_constraints(dest: Path) -> Path:
    """Constraints pinning every distribution this host has to the host's version."""
    lines = sorted({f"{d.metadata['Name']}=={d.version}" for d in md.distributions() if d.metadata["Name"]})
    dest.write_text("\n".join(lines) + "\n")
    return dest


def install_wheels(spec: BoardSpec, root: Path, work: Path) -> None:
    site = root / SITE
    site.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-compile",
            "--only-binary=:all:", "--implementation", "cp", "--python-version", spec.python,
            "--target", str(site), "--constraint", str(_host_constraints(work / "constraints.txt"))]
    for p in WHEEL_PLATFORMS:
        argv += ["--platform", p]
    _run(argv + list(spec.wheels), f"pip install of the aarch64 wheels {' '.join(spec.wheels)}")
    shutil.rmtree(site / "bin", ignore_errors=True)          # console scripts with host #! lines


def _applets(root: Path) -> list[str]:
    """toybox's applet list, asked from the arm64 toybox itself (one emulated command)."""
    r = _run(["unshare", "--root", str(root), "--", "/usr/bin/toybox"], "listing toybox applets",
             env={"PATH": "/usr/bin", "QEMU_CPU": DEFAULT_QEMU_CPU})
    names = [a for a in r.stdout.split() if re.fullmatch(r"[\w.\[-]+", a)]
    if "timeout" not in names or "sha256sum" not in names:
        raise InfraError(f"building the arm64 board: toybox lists no timeout/sha256sum applets ({r.stdout[:200]})")
    return names


GETPROP = r"""#!/system/bin/sh
# getprop for the arm64 board: reads /system/build.prop (written per device by edgebench.targets.sim.adbd)
f=/system/build.prop
if [ $# -eq 0 ]; then
  while IFS='=' read -r k v; do printf '[%s]: [%s]\n' "$k" "$v"; done < $f
  exit 0
fi
while IFS='=' read -r k v; do
  if [ "$k" = "$1" ]; then printf '%s\n' "$v"; exit 0; fi
done < $f
printf '%s\n' "${2:-}"
"""


def _layout(root: Path) -> list[str]:
    """Android-flavoured folders: /system/bin with mksh as sh, toybox applets, getprop."""
    for d in ("system/bin", "system/xbin", "system/etc", "vendor/bin", "data", "dev", "proc", "sys",
              "sdcard", "storage", "mnt", "tmp"):
        (root / d).mkdir(parents=True, exist_ok=True)
    os.chmod(root / "tmp", 0o1777)
    sbin = root / "system" / "bin"
    os.symlink("../../usr/bin/mksh", sbin / "sh")
    applets = _applets(root)
    for a in applets:
        if a not in ("sh",) and not (sbin / a).exists():
            os.symlink("../../usr/bin/toybox", sbin / a)
    (sbin / "getprop").write_text(GETPROP)
    os.chmod(sbin / "getprop", 0o755)
    (root / "etc" / "passwd").write_text(f"root:x:0:0:root:/:/system/bin/sh\n"
                                         f"shell:x:{SHELL_UID}:{SHELL_UID}:shell:/:/system/bin/sh\n")
    (root / "etc" / "group").write_text(f"root:x:0:\nshell:x:{SHELL_UID}:\n")
    return applets


def _trim(root: Path) -> None:
    for d in ("usr/share/doc", "usr/share/man", "usr/share/info", "usr/share/locale", "usr/share/lintian",
              "var/cache", "var/lib/dpkg"):
        shutil.rmtree(root / d, ignore_errors=True)
    for tests in (root / SITE).glob("*/tests"):
        shutil.rmtree(tests, ignore_errors=True)


def _compile(root: Path) -> str:
    """.pyc files for the stdlib and the wheels (device commands cannot write them)."""
    dirs = [f"usr/lib/python{BOARD_PYTHON}", SITE]
    if f"{sys.version_info[0]}.{sys.version_info[1]}" == BOARD_PYTHON:
        for d in dirs:
            subprocess.run([sys.executable, "-m", "compileall", "-q", "-j", "0", "-s", str(root), "-p", "/",
                            str(root / d)], capture_output=True, check=False, stdin=subprocess.DEVNULL)
        return f"host python {sys.version.split()[0]}"
    _run(["unshare", "--root", str(root), "--", f"/usr/bin/python{BOARD_PYTHON}", "-m", "compileall", "-q",
          *["/" + d for d in dirs]], "compiling .pyc under emulation",
         env={"PATH": "/usr/bin", "QEMU_CPU": DEFAULT_QEMU_CPU})
    return "board python (emulated)"


def build(spec: BoardSpec, dest: Path, *, apt_dir: Path, log: Callable[[str], None] = lambda s: None) -> None:
    """Build the board tree into DEST (which must not exist)."""
    dest.mkdir(parents=True)
    times: dict[str, float] = {}
    t = time.monotonic()
    debs = fetch_debs(spec, apt_dir, log)
    times["apt_s"] = time.monotonic() - t
    t = time.monotonic()
    for d in ("usr/bin", "usr/lib", "usr/sbin"):
        (dest / d).mkdir(parents=True, exist_ok=True)
    for link in ("bin", "lib", "sbin"):
        os.symlink(f"usr/{link}", dest / link)
    for _, _, f in debs:
        _extract(f, dest)
    times["extract_s"] = time.monotonic() - t
    t = time.monotonic()
    install_wheels(spec, dest, apt_dir)
    times["pip_s"] = time.monotonic() - t
    t = time.monotonic()
    applets = _layout(dest)
    _trim(dest)
    compiled = _compile(dest)
    times["layout_compile_s"] = time.monotonic() - t
    wheels = sorted("==".join(p.name.removesuffix(".dist-info").rsplit("-", 1))
                    for p in (dest / SITE).glob("*.dist-info"))
    manifest = {"key": spec.key(), "spec": asdict(spec), "debs": {n: v for n, v, _ in debs}, "wheels": wheels,
                "toybox_applets": applets, "pyc": compiled, "built": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                "times_s": {k: round(v, 1) for k, v in times.items()}}
    (dest / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True))


def manifest(root: str | os.PathLike) -> dict:
    return json.loads((Path(root) / MANIFEST).read_text())


# ============================================================================ per device
def clone(rootfs: str | os.PathLike, dest: str | os.PathLike) -> str:
    """Make DEST a private copy of the cached board: hard links as root on one file system
    (device commands run as uid 2000 and cannot write root's files), else a real copy.
    Returns "hardlink" or "copy"."""
    src, dst = Path(rootfs), Path(dest)
    if not is_complete(src):
        raise BadInput(f"{src} is not a complete edgebench board (no {COMPLETE} marker); build one with "
                       "python -m edgebench.targets.sim.board build")
    dst.mkdir(parents=True, exist_ok=True)
    if os.geteuid() == 0:
        r = subprocess.run(["cp", "-a", "-l", f"{src}/.", str(dst)], capture_output=True, text=True,
                           check=False, stdin=subprocess.DEVNULL)
        if r.returncode == 0:
            return "hardlink"
        if "cross-device" not in r.stderr and errno.errorcode.get(errno.EXDEV, "EXDEV") not in r.stderr:
            raise InfraError(f"cloning the board into {dst} failed: {r.stderr.strip()[-300:]}")
        shutil.rmtree(dst)
        dst.mkdir(parents=True)
    _run(["cp", "-a", "--reflink=auto", f"{src}/.", str(dst)], f"copying the board into {dst}")
    return "copy"


def confined_argv(root: str | os.PathLike, argv: list[str]) -> list[str]:
    """ARGV run inside the board ROOT as Android's shell user.

    ``unshare`` gives the command its own mount, PID, IPC, UTS and network namespaces (nothing is
    mounted: /proc, /sys and /dev are plain files and device nodes of the clone), chroots into
    ROOT and drops to uid/gid 2000. When unshare dies, the namespace's init and so every process
    the command started is killed (``--kill-child``)."""
    return [shutil.which("unshare") or "/usr/bin/unshare", "--mount", "--pid", "--ipc", "--uts", "--net", "--fork", "--kill-child",
            f"--root={root}", "--wd=/", "--setgid", str(SHELL_UID), "--setuid", str(SHELL_UID), "--", *argv]


def cpuinfo(ncpu: int, qemu_cpu: str, hardware: str) -> str:
    """An ARM-format /proc/cpuinfo for NCPU emulated QEMU_CPU cores (LiteRT's cpuinfo parses it;
    the host's x86 file makes the aarch64 LiteRT crash)."""
    part, variant, rev, feats = CPU_MODELS.get(qemu_cpu, CPU_MODELS[DEFAULT_QEMU_CPU])
    core = (f"BogoMIPS\t: 50.00\nFeatures\t: {feats}\nCPU implementer\t: 0x41\nCPU architecture: 8\n"
            f"CPU variant\t: {variant}\nCPU part\t: {part}\nCPU revision\t: {rev}\n\n")
    return "".join(f"processor\t: {i}\n{core}" for i in range(ncpu)) + f"Hardware\t: {hardware}\n"


# ============================================================================ command line
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m edgebench.targets.sim.board",
                                 description="Build (once) and locate the cached arm64 board for the simulated adb device.")
    ap.add_argument("command", choices=("build", "path", "check"),
                    help="build: build or reuse and print the root folder; path: print it if built; "
                         "check: say whether this machine can run the board")
    args = ap.parse_args(argv)
    if args.command == "check":
        reason = unavailable_reason()
        print(reason or "ok: this machine can build and run the arm64 board")
        return 1 if reason else 0
    try:
        if args.command == "path":
            p = board_path()
            if not is_complete(p):
                print(f"not built yet: {p} (python -m edgebench.targets.sim.board build)", file=sys.stderr)
                return 1
        else:
            p = ensure(log=lambda s: print(s, file=sys.stderr, flush=True))
    except (BadInput, InfraError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 3 if isinstance(exc, InfraError) else 2
    print(p)
    return 0


if __name__ == "__main__":
    sys.exit(main())
