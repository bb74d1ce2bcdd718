"""Environment fingerprint recorded with every result.

"Numbers are only comparable when the environment is recorded": every manifest and result
carries ``host_fingerprint()``; ``KEY_FIELDS`` are the fields whose difference makes two
results not directly comparable (shown first, loudly, by every comparison).
"""

from __future__ import annotations

import functools
import hashlib
import os
import platform
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

from edgebench import __version__

# Fields whose difference between two results must be shown before any ratio.
KEY_FIELDS = (
    "tensorflow",
    "litert",
    "numpy",
    "cuda",
    "cudnn",
    "gpu_driver",
    "gpu",
    "cpu_model",
    "cpu_count",
    "xla",
    "amp",
    "threads",
    "delegate",
    "soc",
    "device_model",
    "governor",
    "os",
)


def sha256_file(path: str | os.PathLike, chunk: int = 1 << 20) -> str:
    """sha256 of a file, or of every file under a directory (sorted, path-salted)."""
    p = Path(path)
    h = hashlib.sha256()
    if p.is_dir():
        for f in sorted(x for x in p.rglob("*") if x.is_file()):
            h.update(str(f.relative_to(p)).encode())
            with open(f, "rb") as fh:
                for block in iter(lambda: fh.read(chunk), b""):
                    h.update(block)
    else:
        with open(p, "rb") as fh:
            for block in iter(lambda: fh.read(chunk), b""):
                h.update(block)
    return h.hexdigest()


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith(("model name", "hardware", "cpu model")):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _governor() -> str | None:
    p = Path("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor")
    try:
        return p.read_text().strip()
    except OSError:
        return None


def _mem_total_bytes() -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    return None


def _nvidia_smi() -> dict[str, Any]:
    """GPU name and driver via nvidia-smi when present (no TF import needed)."""
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=10, check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return {}
    if out.returncode != 0 or not out.stdout.strip():
        return {}
    rows = [r.split(",") for r in out.stdout.strip().splitlines()]
    return {
        "gpu": "; ".join(r[0].strip() for r in rows),
        "gpu_count": len(rows),
        "gpu_driver": rows[0][1].strip() if len(rows[0]) > 1 else None,
    }


def git_sha() -> str | None:
    """The git commit edgebench runs from, when it runs from a checkout."""
    root = Path(__file__).resolve().parents[2]
    if not (root / ".git").exists():
        return None
    try:
        out = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"],
                             capture_output=True, text=True, timeout=5, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None


@functools.lru_cache(maxsize=1)
def _static_host() -> dict[str, Any]:
    fp: dict[str, Any] = {
        "hostname": platform.node(),
        "os": f"{platform.system()} {platform.release()}",
        "platform": platform.platform(),
        "arch": platform.machine(),
        "cpu_model": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "mem_total_bytes": _mem_total_bytes(),
        "governor": _governor(),
        "python": platform.python_version(),
        "numpy": _version("numpy"),
        "tensorflow": _version("tensorflow") or _version("tensorflow-cpu"),
        "litert": _version("ai-edge-litert"),
        "tflite_runtime": _version("tflite-runtime"),
        "edgebench": __version__,
        "edgebench_git_sha": git_sha(),
    }
    fp.update(_nvidia_smi())
    return fp


def tf_build_info() -> dict[str, Any]:
    """CUDA/cuDNN/XLA/AMP facts from an already-imported TensorFlow (imports it if needed)."""
    import tensorflow as tf  # noqa: PLC0415 -- heavy import only when asked

    info: dict[str, Any] = {}
    gpus = tf.config.list_physical_devices("GPU")
    info["tf_visible_gpus"] = len(gpus)
    try:
        build = tf.sysconfig.get_build_info()
        info["tf_build_cuda"] = build.get("cuda_version")
        info["tf_build_cudnn"] = build.get("cudnn_version")
        info["tf_built_with_cuda"] = bool(build.get("is_cuda_build"))
        # CUDA/cuDNN in use: TF's (hermetic) CUDA build, but only when a GPU is actually in use --
        # on a CPU-only machine "cuda 12.5" would claim a CUDA stack that does not run.
        if gpus:
            info["cuda"] = build.get("cuda_version")
            info["cudnn"] = build.get("cudnn_version")
    except Exception:  # noqa: BLE001 -- build info is optional metadata
        pass
    info["xla"] = bool(tf.config.optimizer.get_jit()) or ("--tf_xla_auto_jit" in os.environ.get("TF_XLA_FLAGS", ""))
    try:
        import keras  # noqa: PLC0415

        info["amp"] = keras.mixed_precision.global_policy().name
        info["keras"] = keras.__version__
    except Exception:  # noqa: BLE001
        info["amp"] = None
    info["onednn"] = os.environ.get("TF_ENABLE_ONEDNN_OPTS", "default")
    return info


def host_fingerprint(*, with_tf: bool = False, **extra: Any) -> dict[str, Any]:
    """This machine's fingerprint. ``with_tf`` adds CUDA/cuDNN/XLA/AMP (imports TF).

    ``extra`` records run settings that belong to the method (threads, delegate, ...).
    """
    fp = dict(_static_host())
    fp.setdefault("cuda", None)
    fp.setdefault("cudnn", None)
    if with_tf or "tensorflow" in sys.modules:
        try:
            fp.update(tf_build_info())
        except Exception:  # noqa: BLE001 -- TF missing on a minimal install
            pass
    fp.update({k: v for k, v in extra.items() if v is not None})
    return fp


def emulation_warning(fp: dict[str, Any] | None) -> str | None:
    """A row's warning when its device is emulated (``emulated``/``emulation``, which the device
    target records from what the device reports), else None."""
    fp = fp or {}
    if not fp.get("emulated"):
        return None
    return (f"emulated device ({fp.get('emulation') or 'it says so'}): its latency is the host CPU's under "
            "emulation and its battery is modelled, so these are not a phone's numbers; measure on a physical device")


def diff_fingerprints(a: dict[str, Any], b: dict[str, Any],
                      fields: tuple[str, ...] = KEY_FIELDS) -> list[tuple[str, Any, Any]]:
    """Key fields that differ between two fingerprints: [(field, a_value, b_value)]."""
    out = []
    for f in fields:
        va, vb = a.get(f), b.get(f)
        if va != vb and not (va is None and vb is None):
            out.append((f, va, vb))
    return out
