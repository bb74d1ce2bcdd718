"""Which NPU compilers can run on this host, and, when one cannot, the library that is missing.

LiteRT's wheel (ai-edge-litert) ships one compiler plugin per vendor under
``ai_edge_litert/vendors/<vendor>/compiler/`` and the ``apply_plugin_main`` tool that drives them;
the vendors' own compilers are not in it. This module is the one place that looks for them:

============  =====================================================================================
Qualcomm      the x86-64 QNN libraries (``libQnnHtp.so``, ``libHtpPrepare.so``, ``libQnnSystem.so``,
              ``libQnnIr.so``, ``libQnnSaver.so``) from ``$QNN_SDK_ROOT`` / ``$QAIRT_SDK_ROOT``
              (a QAIRT SDK: ``lib/x86_64-linux-clang``) or from an installed ``onnxruntime-qnn``
              wheel (extra ``npu-qualcomm``). The plugin also lists ``libQnnLpai.so`` as a link
              dependency but loads nothing from it (it ``dlopen``\\ s its backends): when no SDK
              provides it, an empty stand-in is built with the host's C compiler into the cache
              folder (``stand_in``), never shipped.
Intel         OpenVINO's libraries from the ``openvino`` package (extra ``npu-intel``); the plugin
              links one OpenVINO release (``libopenvino.so.2631`` = 2026.3.1), read from the
              plugin's own ELF header. The wheel has no NPU compiler, so an NPU compile fails after
              partitioning; the OpenVINO CPU backend compiles (and runs on this host).
MediaTek      ``libneuronusdk_adapter.mtk.so`` (NeuroPilot SDK) from ``ai_edge_litert_sdk_mediatek``
              or ``$EDGEBENCH_MEDIATEK_LIBS``.
Google        ``liblitert_plugin_compiler.so`` from ``ai_edge_litert_sdk_google_tensor`` or
              ``$GOOGLE_TENSOR_COMPILER_LIB`` (the folder, as LiteRT's own backend reads it).
Samsung       the plugin itself; ai-edge-litert 2.3.0's does not load (an undefined flatbuffers
              symbol), which the load probe reports.
============  =====================================================================================

``find(vendor)`` answers once per process: the library folders for ``LD_LIBRARY_PATH``, or the
missing library by name with the command that installs it; then a load probe
(``apply_plugin_main --cmd=info``) says whether the plugin loads and lists the SoCs it knows.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.util
import os
import re
import shutil
import struct
import subprocess
import tempfile
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

from edgebench.core.errors import BadInput
from edgebench.core.paths import cache_dir

PROBE_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class Vendor:
    key: str                    # --vendor NAME
    manufacturer: str           # apply_plugin_main --soc_manufacturer (and the LiteRtStamp's vendor)
    folder: str                 # ai_edge_litert/vendors/<folder>/
    extra: str | None           # pip extra that installs its libraries, if one can
    library: str                # what the vendor's compiler is called, for messages


VENDORS: tuple[Vendor, ...] = (
    Vendor("qualcomm", "Qualcomm", "qualcomm", "npu-qualcomm", "Qualcomm QNN (QAIRT) HTP compiler"),
    Vendor("mediatek", "MediaTek", "mediatek", None, "MediaTek NeuroPilot compiler"),
    Vendor("google", "Google", "google_tensor", None, "Google Tensor TPU compiler"),
    Vendor("intel", "IntelOpenVINO", "intel_openvino", "npu-intel", "Intel OpenVINO"),
    Vendor("samsung", "Samsung", "samsung", None, "Samsung Exynos NPU compiler"),
)
BY_KEY = {v.key: v for v in VENDORS}
BY_MANUFACTURER = {v.manufacturer.lower(): v for v in VENDORS}

QNN_LIBS = ("libQnnHtp.so", "libHtpPrepare.so", "libQnnSystem.so", "libQnnIr.so", "libQnnSaver.so")
QNN_STAND_IN = "libQnnLpai.so"
QNN_SDK_VARS = ("QNN_SDK_ROOT", "QAIRT_SDK_ROOT")
QNN_SDK_SUBDIR = "lib/x86_64-linux-clang"
INTEL_NPU_COMPILER = "libopenvino_intel_npu_compiler_loader.so"


@dataclass(frozen=True)
class Found:
    """What this host has for one vendor's compiler plugin.

    ``checkable`` False: ``missing`` names the library (and how to get it) or ``load_error`` says
    why the plugin did not load -- such a target is never shown as 0/M. ``lib_dirs`` go on
    ``LD_LIBRARY_PATH`` of the compile process; ``sdk`` says which vendor libraries compile;
    ``socs`` are the SoCs the loaded plugin lists (``--cmd=info``)."""

    vendor: Vendor
    plugin_dir: str | None
    lib_dirs: tuple[str, ...] = ()
    missing: str | None = None
    load_error: str | None = None
    sdk: str | None = None
    socs: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    flags: tuple[str, ...] = field(default=())

    @property
    def checkable(self) -> bool:
        return self.missing is None and self.load_error is None

    @property
    def status(self) -> str | None:
        """The compile-status class of a target that cannot be checked (None when it can)."""
        if self.missing is not None:
            return "sdk-missing"
        if self.load_error is not None:
            return "plugin-load"
        return None


# --------------------------------------------------------------------------------- the wheel

def litert_dir() -> Path | None:
    spec = importlib.util.find_spec("ai_edge_litert")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def apply_plugin_binary() -> Path:
    """LiteRT's ``apply_plugin_main`` (ships in the ai-edge-litert wheel for x86-64 Linux)."""
    base = litert_dir()
    tool = base / "tools" / "apply_plugin_main" if base else None
    if tool is None or not tool.is_file():
        raise BadInput("NPU readiness needs LiteRT's AOT compiler (ai_edge_litert/tools/apply_plugin_main), which "
                       "this ai-edge-litert install lacks: pip install 'ai-edge-litert>=2.3' on x86-64 Linux")
    return tool


def enum_socs(vendor: Vendor) -> tuple[str, ...]:
    """The SoCs LiteRT's ``ai_edge_litert.aot`` registers for a vendor (``--soc all``)."""
    try:
        mod = importlib.import_module(f"ai_edge_litert.aot.vendors.{vendor.folder}.target")
    except ImportError:
        return ()
    return tuple(m.value for m in mod.SocModel if m.value != "ALL")


def _package_dir(name: str) -> Path | None:
    """An installed package's folder, without importing it (onnxruntime and openvino are heavy)."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    if spec.submodule_search_locations:
        return Path(next(iter(spec.submodule_search_locations)))
    return Path(spec.origin).parent if spec.origin else None


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def needed(path: Path) -> tuple[str, ...]:
    """DT_NEEDED entries of a 64-bit little-endian ELF shared object (what it links against)."""
    try:
        data = path.read_bytes()
    except OSError:
        return ()
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        return ()
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    out = []
    for i in range(shnum):
        sh = shoff + i * shentsize
        sh_type, = struct.unpack_from("<I", data, sh + 4)
        if sh_type != 6:                                  # SHT_DYNAMIC
            continue
        off, size = struct.unpack_from("<QQ", data, sh + 0x18)
        link, = struct.unpack_from("<I", data, sh + 0x28)
        str_off, = struct.unpack_from("<Q", data, shoff + link * shentsize + 0x18)
        for k in range(off, off + size, 16):
            tag, val = struct.unpack_from("<qQ", data, k)
            if tag == 0:
                break
            if tag == 1:                                  # DT_NEEDED
                end = data.index(b"\0", str_off + val)
                out.append(data[str_off + val:end].decode())
    return tuple(out)


# --------------------------------------------------------------------------------- finding

def vendors(keys: str | None) -> tuple[Vendor, ...]:
    """``--vendor qualcomm,intel`` -> vendors (None/'all': every one)."""
    if not keys or keys.strip().lower() == "all":
        return VENDORS
    out = []
    for k in (x.strip().lower() for x in keys.split(",") if x.strip()):
        v = BY_KEY.get(k) or BY_MANUFACTURER.get(k)
        if v is None:
            raise BadInput(f"--vendor {k!r} is unknown; use one or more of {', '.join(BY_KEY)} (or all)")
        if v not in out:
            out.append(v)
    return tuple(out)


@functools.lru_cache(maxsize=None)
def find(key: str) -> Found:
    """What this host has for vendor ``key`` (cached per process)."""
    vendor = BY_KEY[key]
    base = litert_dir()
    plugin_dir = base / "vendors" / vendor.folder / "compiler" if base else None
    plugins = sorted(plugin_dir.glob("libLiteRtCompilerPlugin_*.so")) if plugin_dir and plugin_dir.is_dir() else []
    if not plugins:
        return Found(vendor, None, missing=f"LiteRT's {vendor.manufacturer} compiler plugin (not in this "
                                            "ai-edge-litert wheel; pip install 'ai-edge-litert>=2.3')")
    found = {"qualcomm": _qualcomm, "intel": _intel, "mediatek": _mediatek, "google": _google,
             "samsung": _samsung}[key](vendor, plugin_dir, plugins[0])
    if not found.checkable:
        return found
    return _probe(found)


def _qualcomm(vendor: Vendor, plugin_dir: Path, plugin: Path) -> Found:
    dirs: list[Path] = []
    sdk = None
    for var in QNN_SDK_VARS:
        root = os.environ.get(var)
        if root:
            d = Path(root) / QNN_SDK_SUBDIR
            if not d.is_dir():
                return Found(vendor, str(plugin_dir), missing=f"{QNN_LIBS[0]} (${var}={root} has no {QNN_SDK_SUBDIR}/; "
                                                              "point it at a QAIRT SDK's root folder)")
            dirs.append(d)
            sdk = f"QAIRT SDK at ${var}"
            break
    if not dirs:
        wheel = _package_dir("onnxruntime_qnn")
        if wheel is not None:
            dirs.append(wheel)
            sdk = f"onnxruntime-qnn {_version('onnxruntime-qnn') or '?'}"
    fix = ("pip install 'edgebench[npu-qualcomm]' (onnxruntime-qnn ships the x86-64 QNN libraries) "
           "or set QNN_SDK_ROOT to a QAIRT SDK")
    if not dirs:
        return Found(vendor, str(plugin_dir), missing=f"{QNN_LIBS[0]} (Qualcomm QNN): {fix}")
    absent = [lib for lib in QNN_LIBS if not any((d / lib).is_file() for d in dirs)]
    if absent:
        return Found(vendor, str(plugin_dir), missing=f"{absent[0]} (not in {dirs[0]}): {fix}")
    notes = []
    if not any((d / QNN_STAND_IN).is_file() for d in dirs) and QNN_STAND_IN in needed(plugin):
        stand_in, why = stand_in_dir()
        if stand_in is None:
            return Found(vendor, str(plugin_dir), missing=f"{QNN_STAND_IN} ({why})")
        dirs.append(stand_in)
        notes.append(f"{QNN_STAND_IN}: an empty stand-in built here ({stand_in}); the plugin lists it as a link "
                     "dependency but loads nothing from it")
    return Found(vendor, str(plugin_dir), lib_dirs=tuple(str(d) for d in dirs), sdk=sdk, notes=tuple(notes))


def stand_in_dir() -> tuple[Path | None, str]:
    """The folder holding the empty ``libQnnLpai.so`` stand-in, built with the host's C compiler
    the first time (atomically, in the cache folder); (None, why) when no compiler exists."""

    folder = cache_dir() / "aot" / "qnn-stand-in"
    lib = folder / QNN_STAND_IN
    if lib.is_file():
        return folder, ""
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        return None, ("not in onnxruntime-qnn; edgebench builds an empty stand-in with a C compiler and found "
                      "none: apt-get install gcc, or use a QAIRT SDK (QNN_SDK_ROOT)")
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=folder) as tmp:
        out = Path(tmp) / QNN_STAND_IN
        proc = subprocess.run([cc, "-shared", "-fPIC", "-o", str(out), "-x", "c", "-"], capture_output=True,
                              text=True, timeout=120, check=False, stdin=None,
                              input="/* edgebench: empty stand-in for an unused QNN link dependency */\n")
        if proc.returncode != 0 or not out.is_file():
            return None, f"building the empty stand-in with {cc} failed: {(proc.stderr.strip() or '?')[:200]}"
        os.replace(out, lib)
    return folder, ""


def _intel(vendor: Vendor, plugin_dir: Path, plugin: Path) -> Found:
    wheel = _package_dir("openvino")
    installed = _version("openvino")
    want = [n for n in needed(plugin) if n.startswith("libopenvino")]
    release = next((_release(n) for n in want if _release(n)), None)
    pin = f"openvino=={release}" if release else "openvino"
    fix = f"pip install 'edgebench[npu-intel]' ({pin}: the release LiteRT's Intel plugin links)"
    if wheel is None:
        return Found(vendor, str(plugin_dir), missing=f"{want[0] if want else 'libopenvino.so'} (OpenVINO): {fix}")
    libs = wheel / "libs" if (wheel / "libs").is_dir() else wheel
    absent = [n for n in want if not (libs / n).is_file()]
    if absent:
        have = sorted(p.name for p in libs.glob("libopenvino.so.*"))
        return Found(vendor, str(plugin_dir), missing=f"{absent[0]} (openvino {installed or '?'} provides "
                                                      f"{', '.join(have) or 'no libopenvino.so'}): {fix}")
    notes = []
    if not (libs / INTEL_NPU_COMPILER).is_file():
        notes.append(f"the Intel NPU compiler ({INTEL_NPU_COMPILER}) is not in the openvino wheel: an NPU "
                     "compile partitions and then fails; the OpenVINO CPU backend compiles and runs here")
    return Found(vendor, str(plugin_dir), lib_dirs=(str(libs),), sdk=f"openvino {installed or '?'}", notes=tuple(notes))


def _release(soname: str) -> str | None:
    """'libopenvino.so.2631' -> '2026.3.1' (OpenVINO's soname is its release: two digits of the year,
    the minor and the patch number)."""
    m = re.search(r"\.so\.(\d{2})(\d)(\d+)$", soname)
    return f"20{m.group(1)}.{m.group(2)}.{m.group(3)}" if m else None


def _sdk_package(module: str) -> tuple[Path | None, str | None]:
    """An ``ai_edge_litert_sdk_<vendor>`` package's library folder (those sdists download the
    vendor SDK at install time; offline they install empty), and its version."""
    if importlib.util.find_spec(module) is None:
        return None, None
    try:
        mod = importlib.import_module(module)
        path = Path(str(mod.path_to_sdk_libs()))
    except Exception:  # noqa: BLE001 -- an empty or broken sdist: as if absent
        return None, None
    return (path if path.is_dir() else None), _version(module.replace("_", "-"))


def _vendor_lib(vendor: Vendor, plugin_dir: Path, lib: str, module: str, var: str, where: str) -> Found:
    dirs = []
    sdk = None
    if os.environ.get(var):
        dirs.append(Path(os.environ[var]))
        sdk = f"${var}"
    pkg, ver = _sdk_package(module)
    if pkg is not None:
        dirs.append(pkg)
        sdk = sdk or f"{module.replace('_', '-')} {ver or '?'}"
    if not any((d / lib).is_file() for d in dirs):
        return Found(vendor, str(plugin_dir), missing=f"{lib} ({where}): install the vendor SDK and set {var} to the "
                                                      "folder holding it (pip's ai-edge-litert-sdk-* packages download "
                                                      "it from the vendor's site at install time)")
    return Found(vendor, str(plugin_dir), lib_dirs=tuple(str(d) for d in dirs), sdk=sdk)


def _mediatek(vendor: Vendor, plugin_dir: Path, plugin: Path) -> Found:
    return _vendor_lib(vendor, plugin_dir, "libneuronusdk_adapter.mtk.so", "ai_edge_litert_sdk_mediatek",
                       "EDGEBENCH_MEDIATEK_LIBS", "MediaTek NeuroPilot SDK")


def _google(vendor: Vendor, plugin_dir: Path, plugin: Path) -> Found:
    return _vendor_lib(vendor, plugin_dir, "liblitert_plugin_compiler.so", "ai_edge_litert_sdk_google_tensor",
                       "GOOGLE_TENSOR_COMPILER_LIB", "Google Tensor compiler")


def _samsung(vendor: Vendor, plugin_dir: Path, plugin: Path) -> Found:
    pkg, ver = _sdk_package("ai_edge_litert_sdk_samsung")
    if os.environ.get("EDGEBENCH_SAMSUNG_LIBS"):
        return Found(vendor, str(plugin_dir), lib_dirs=(os.environ["EDGEBENCH_SAMSUNG_LIBS"],), sdk="$EDGEBENCH_SAMSUNG_LIBS")
    return Found(vendor, str(plugin_dir), lib_dirs=(str(pkg),) if pkg else (),
                 sdk=f"ai-edge-litert-sdk-samsung {ver}" if pkg else None)


_INFO = re.compile(r'<\s*LiteRtCompilerPlugin\s*>\s*"([^"]+)"\s*\|\s*(.*)')


def _probe(found: Found) -> Found:
    """Load the plugin once (``--cmd=info``): whether it loads, and the SoCs it lists."""
    tool = apply_plugin_binary()
    with tempfile.TemporaryDirectory(prefix="edgebench-aot-probe-") as tmp:
        out = Path(tmp) / "info.txt"
        env = {**os.environ, "TMPDIR": tmp, "LD_LIBRARY_PATH": os.pathsep.join(found.lib_dirs)}
        try:
            proc = subprocess.run([str(tool), "--cmd=info", f"--soc_manufacturer={found.vendor.manufacturer}",
                                   f"--libs={found.plugin_dir}", "--err=--", f"--o={out}"], cwd=tmp, env=env,
                                  capture_output=True, text=True, errors="replace", timeout=PROBE_TIMEOUT_S,
                                  stdin=subprocess.DEVNULL, check=False)
        except subprocess.TimeoutExpired:
            return dataclasses.replace(found, load_error=f"loading the plugin did not finish in {PROBE_TIMEOUT_S:g} s")
        info = out.read_text(errors="replace") if out.is_file() else ""
    log = proc.stdout + proc.stderr
    m = _INFO.search(info)
    if m is None:
        why = re.search(r"Could not load shared library [^\n]*?: ([^\n]+)", log) or re.search(r"(undefined symbol: \S+)", log)
        reason = (why.group(1) if why else (log.strip().splitlines() or [f"exit {proc.returncode}"])[-1]).strip()
        return dataclasses.replace(found, load_error=f"LiteRT's {found.vendor.manufacturer} compiler plugin does not "
                                                     f"load: {reason[:300]}")
    socs = tuple(s.strip().strip('"') for s in m.group(2).split(",") if s.strip().strip('"'))
    return dataclasses.replace(found, socs=socs)


def resolve_soc(found: Found, soc: str) -> str:
    """A SoC name as the plugin spells it (MediaTek lists lower case); the name as given when the
    plugin did not load (the row then says why it cannot be checked)."""
    for s in found.socs:
        if s.lower() == soc.lower():
            return s
    return soc
