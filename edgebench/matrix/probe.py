"""What this machine and this build can run: the matrix's skip reasons (no GPU, no TPU, a device not
attached, a producer missing from this build), checked cheaply before any cell runs."""

from __future__ import annotations

import importlib
import importlib.util
import os
from pathlib import Path
from typing import Any

from edgebench.core.errors import EdgebenchError
from edgebench.core.fingerprint import host_fingerprint
from edgebench.targets.adb.client import list_states
from edgebench.targets.base import HOST_DELEGATES
from edgebench.train import settings as train_settings


class Probe:
    """What this machine and this build can run (cheap checks, cached)."""
    def __init__(self) -> None:
        self._gpu: bool | None = None

    @staticmethod
    def has_module(mod: str, attr: str) -> bool:
        try:
            if importlib.util.find_spec(mod) is None:
                return False
            return hasattr(importlib.import_module(mod), attr)
        except Exception:  # noqa: BLE001 -- a broken optional module counts as absent
            return False

    def gpu(self) -> bool:
        if self._gpu is None:

            self._gpu = bool(host_fingerprint().get("gpu"))
        return self._gpu

    def adb_missing(self, serial: str) -> str | None:
        """Why adb:SERIAL (or adb:all) cannot run now, or None when the device is usable."""
        if not hasattr(self, "_adb"):

            try:
                self._adb: list[tuple[str, str]] | str = list_states()
            except EdgebenchError as err:
                self._adb = str(err)
        if isinstance(self._adb, str):
            return f"adb unavailable: {self._adb}"
        usable = [s for s, st in self._adb if st == "device"]
        if serial == "all":
            return None if usable else "no usable adb device attached (adb devices lists none in state 'device')"
        state = dict(self._adb).get(serial)
        if state is None:
            return f"adb device {serial} is not attached"
        return None if state == "device" else f"adb device {serial} is {state}"

    @staticmethod
    def tpu() -> bool:
        return bool(os.environ.get("TPU_NAME")) or any(Path("/dev").glob("accel*"))

    def edge_skip(self, p: dict[str, Any]) -> str | None:
        model, target, delegate = p["model"], p["target"], p["delegate"]
        tflite = str(model).endswith(".tflite")
        if target.startswith("adb:"):
            if not self.has_module("edgebench.targets.adb.devices", "resolve_adb_targets"):
                return "adb targets not available in this build"
            missing = self.adb_missing(target[4:])
            if missing:
                return missing
        if target in ("host", "tf") and delegate not in HOST_DELEGATES:
            return f"delegate {delegate} runs only on adb devices (host LiteRT has {', '.join(HOST_DELEGATES)})"
        if tflite:
            if target == "tf":
                return "the tf target runs source models (SavedModel/.keras), not a .tflite file"
            if target != "host" and not target.startswith("adb:"):
                return f"benchmarking a .tflite file on {target} is done by convert-and-compare on its source model"
            if not self.has_module("edgebench.bench.run", "run_bench"):
                return "bench (edgebench.bench.run.run_bench) not available in this build"
            return None
        if not self.has_module("edgebench.convert_and_compare.pipeline", "convert_and_compare"):
            return "convert-and-compare (edgebench.convert_and_compare.pipeline) not available in this build"
        return None

    @staticmethod
    def gpu_hidden() -> bool:
        return os.environ.get("CUDA_VISIBLE_DEVICES", None) in ("", "-1")

    def train_skip(self, p: dict[str, Any]) -> str | None:
        device = p["device"]
        if device == "gpu" and not self.gpu():
            return "no GPU on this machine (nvidia-smi reports none)"
        if device == "gpu" and self.gpu_hidden():
            return "the GPU is hidden (CUDA_VISIBLE_DEVICES is empty); unset it to run GPU cells"
        if device == "tpu":
            if not self.tpu():
                return "no TPU on this machine (no /dev/accel* device, TPU_NAME unset)"
            return "TPU training is not implemented by edgebench.train (no TPUStrategy)"
        if device == "cpu" and self.gpu() and not self.gpu_hidden():
            # edgebench.train places work on every GPU TensorFlow sees; a CPU cell needs them hidden.
            return "a GPU is visible, so TensorFlow would not train on the CPU; run CPU cells with CUDA_VISIBLE_DEVICES="
        if not self.has_module("edgebench.train.sweep", "run_train_baseline"):
            return "training baselines (edgebench.train) not available in this build"

        if device != "gpu" and p["strategy"] in getattr(train_settings, "GPU_STRATEGIES", ()):
            return f"strategy {p['strategy']} needs GPUs (edgebench.train runs it only on GPUs)"
        return None
