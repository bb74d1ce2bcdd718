"""The TensorFlow reference target: the SavedModel's serving signature, on GPU when visible.

Produces outputs for every input sample (the reference every drift is measured against),
per-call latency samples at batch 1 (with a host sync: outputs are fetched as numpy), and the
throughput at a larger batch -- the "TensorFlow" baseline row.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from edgebench.data import InputSet, Signature, cast_to_signature, saved_model_signature
from edgebench.fingerprint import host_fingerprint, sha256_file
from edgebench.targets.base import Job, RunResult


class TFTarget:
    """Runs a SavedModel's ``serving_default`` with TensorFlow (GPU if visible, else CPU)."""

    name = "tf"

    def __init__(self, *, batch: int = 32, device: str | None = None) -> None:
        self.batch = batch
        self._device = device

    def device(self) -> str:
        import tensorflow as tf

        if self._device:
            return self._device
        return "/GPU:0" if tf.config.list_physical_devices("GPU") else "/CPU:0"

    def fingerprint(self) -> dict[str, Any]:
        return host_fingerprint(with_tf=True, tf_device=self.device())

    def run(self, job: Job, signature: Signature | None = None) -> RunResult:
        import tensorflow as tf

        sig = signature or saved_model_signature(job.model_path)
        ds = cast_to_signature(InputSet.load(job.inputs_npz), sig) if job.inputs_npz else None
        if ds is None:
            from edgebench.data import synthetic

            ds = cast_to_signature(synthetic(sig, 32, job.seed), sig)
        dev = self.device()
        t0 = time.perf_counter_ns()
        with tf.device(dev):
            fn = tf.saved_model.load(job.model_path).signatures["serving_default"]
        init_ms = (time.perf_counter_ns() - t0) / 1e6
        batched = all(t.batched for t in sig.inputs) and not any(t.shape and t.shape[0] == 1 for t in sig.inputs)

        def feed(lo: int, hi: int) -> dict[str, Any]:
            out = {}
            for t in sig.inputs:
                a = ds.arrays[t.name][lo:hi]
                out[t.name] = tf.constant(a if t.batched else a[0])
            return out

        def call(lo: int, hi: int) -> dict[str, np.ndarray]:
            with tf.device(dev):
                res = fn(**feed(lo, hi))
            return {k: v.numpy() for k, v in res.items()}  # .numpy() syncs the device

        # Outputs for every sample (batched when the signature allows it).
        step = self.batch if batched else 1
        outs: dict[str, list[np.ndarray]] = {}
        first_ms = None
        for lo in range(0, ds.n, step):
            s = time.perf_counter_ns()
            r = call(lo, min(lo + step, ds.n))
            if first_ms is None:
                first_ms = (time.perf_counter_ns() - s) / 1e6
            for k, v in r.items():
                spec = next((o for o in sig.outputs if o.name == k), None)
                if step == 1 and spec is not None and not spec.batched:
                    v = v[None, ...]
                outs.setdefault(k, []).append(v)
        outputs = {k: np.concatenate(v, axis=0) for k, v in outs.items()}

        # Warmup, then per-call latency at batch 1.
        warm = []
        for i in range(job.warmup_runs):
            s = time.perf_counter_ns()
            call(i % ds.n, i % ds.n + 1)
            warm.append(time.perf_counter_ns() - s)
        samples: list[int] = []
        start = time.perf_counter()
        i = 0
        while True:
            if job.runs is not None:
                if len(samples) >= job.runs:
                    break
            elif (len(samples) >= job.min_runs and time.perf_counter() - start >= job.min_time_s) or \
                    time.perf_counter() - start >= job.max_time_s:
                break
            j = i % ds.n
            s = time.perf_counter_ns()
            call(j, j + 1)
            samples.append(time.perf_counter_ns() - s)
            i += 1

        extra: dict[str, Any] = {"device": dev, "batch_size_latency": 1}
        if batched and ds.n > 1:
            b = min(self.batch, ds.n)
            call(0, b)  # warm the larger shape
            times = []
            t_end = time.perf_counter() + max(0.5, min(job.min_time_s, 2.0))
            while time.perf_counter() < t_end or len(times) < 3:
                s = time.perf_counter_ns()
                call(0, b)
                times.append(time.perf_counter_ns() - s)
            med = float(np.median(times))
            extra["batch_throughput"] = {"batch_size": b, "calls": len(times), "median_call_ms": med / 1e6,
                                         "examples_per_s": b / (med / 1e9)}
        return RunResult(
            target="tf",
            model_path=job.model_path,
            model_sha256=sha256_file(job.model_path),
            samples_ns=np.asarray(samples, np.int64),
            warmup_ns=np.asarray(warm, np.int64),
            init_ms=init_ms,
            first_inference_ms=first_ms,
            outputs=outputs,
            runtime=f"tensorflow {tf.__version__}",
            method="per-call perf_counter_ns around the serving signature incl. output fetch (batch 1)",
            fingerprint=self.fingerprint(),
            extra=extra,
        )
