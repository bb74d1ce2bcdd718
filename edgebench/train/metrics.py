"""What a cell records besides its step times' source: GPU utilisation and memory (a sampler
thread on nvidia-ml-py), peak device memory, and the step-time statistics with edgebench's one
set of definitions."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from edgebench.core.latency import MEDIAN_WARN, MIN_SAMPLES, window_median_spread
from edgebench.rows import Latency

# --------------------------------------------------------------------------------------------
# GPU facts


def visible_gpus() -> list:
    import tensorflow as tf

    return tf.config.list_physical_devices("GPU")


class GpuSampler:
    """Samples GPU utilisation and memory with nvidia-ml-py every ``interval_s`` in a thread."""
    def __init__(self, interval_s: float = 0.2):
        self.interval_s = interval_s
        self.util: list[list[int]] = []
        self.mem: list[list[int]] = []
        self.error: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._nvml = None
        self._handles: list = []

    def start(self) -> "GpuSampler":
        try:
            import pynvml  # noqa: PLC0415 -- optional: the 'gpu' extra (nvidia-ml-py)
        except ImportError:
            self.error = "nvidia-ml-py is not installed; pip install 'edgebench[gpu]' for GPU utilisation"
            return self
        try:
            pynvml.nvmlInit()
            self._handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]
        except Exception as e:  # noqa: BLE001 -- NVML absent/broken: record why, keep training
            self.error = f"NVML unavailable: {e}"
            return self
        self._nvml = pynvml
        self._thread = threading.Thread(target=self._run, name="edgebench-gpu-sampler", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        nv = self._nvml
        while not self._stop.is_set():
            try:
                self.util.append([int(nv.nvmlDeviceGetUtilizationRates(h).gpu) for h in self._handles])
                self.mem.append([int(nv.nvmlDeviceGetMemoryInfo(h).used) for h in self._handles])
            except Exception as e:  # noqa: BLE001
                self.error = f"NVML sampling failed: {e}"
                return
            self._stop.wait(self.interval_s)

    def stop(self) -> dict[str, Any]:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self._nvml is not None:
            try:
                self._nvml.nvmlShutdown()
            except Exception:  # noqa: BLE001
                pass
        out: dict[str, Any] = {"interval_s": self.interval_s, "error": self.error}
        if self.util:
            u = np.asarray(self.util, dtype=np.float64)
            m = np.asarray(self.mem, dtype=np.float64)
            out["util_pct"] = {"mean": float(u.mean()), "p50": float(np.median(u)), "max": float(u.max()),
                               "samples": self.util}
            out["memory_used_bytes"] = {"max": int(m.max()), "samples": [[int(b) for b in r] for r in self.mem]}
        return out


def _peak_device_memory(gpus: list, reset: bool = False) -> int | None:
    import tensorflow as tf

    peaks = []
    for i in range(len(gpus)):
        try:
            if reset:
                tf.config.experimental.reset_memory_stats(f"GPU:{i}")
            else:
                peaks.append(int(tf.config.experimental.get_memory_info(f"GPU:{i}")["peak"]))
        except (ValueError, RuntimeError):
            pass
    return max(peaks) if peaks else None


def _step_stats(samples_ns: list[int]) -> dict[str, Any]:
    """Step-time statistics with edgebench's one set of definitions (``rows.Latency``).

    ``qps`` becomes ``steps_per_s``; the warnings are rephrased for training (the bench ones name
    bench options).
    """

    st = Latency.from_samples(samples_ns, what="training run")
    out = st.to_dict()
    out["steps_per_s"] = out.pop("qps")
    warnings = []
    if not st.p99_valid:
        warnings.append(f"p99 from {st.samples} steps is not valid: it needs >= {MIN_SAMPLES['p99']} (MLPerf "
                        "LoadGen minimum at 99% confidence); raise --steps")
    spread = window_median_spread([x / 1e6 for x in samples_ns])
    if spread is not None and spread >= MEDIAN_WARN:
        warnings.append(f"unstable: the median step time moved between windows of the run (robust spread "
                        f"{spread:.0%} >= {MEDIAN_WARN:.0%}); close other programs, raise --warmup-steps or --steps")
    if st.drifting:   # first vs last third, or the fitted (Theil-Sen) trend, moved >= DRIFT_WARN
        warnings.append(f"drift: median step {st.first_third_p50:.4g} ms in the first third vs "
                        f"{st.last_third_p50:.4g} ms in the last (fitted trend {st.trend or 0:+.0%}); "
                        "raise --warmup-steps or check heat/clocks")
    out["warnings"] = warnings
    return out
