"""The TensorFlow reference target: the SavedModel's serving signature, on GPU when visible.

Produces outputs for every input sample (the reference every drift is measured against),
per-call latency samples at batch 1 (with a host sync: outputs are fetched as numpy), and the
throughput at a larger batch -- the "TensorFlow" baseline row.

Two loaders (chosen by ``edgebench.sources.resolve``): ``tf2`` calls the restored signature function;
``graph`` runs a ``tf.compat.v1.Session`` over the MetaGraph's signature tensors -- for TF1
SavedModels and ones whose object graph cannot be restored. Same signature names, same outputs.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from edgebench.core import progress
from edgebench.core.fingerprint import host_fingerprint, sha256_file
from edgebench.core.latency import MIN_SAMPLES
from edgebench.model.inputs import InputSet, Signature, cast_to_signature, synthetic
from edgebench.model.savedmodel import SignatureFunction, VariableState, outputs_by_rule, saved_model_signature
from edgebench.targets.base import Job, RunResult, answer_checkpoint, quantile_answered
from edgebench.targets.runner_io import (
    GcPaused,  # the LiteRT worker's collector rule, for the same method
)

TF_METHOD = ("per-call perf_counter_ns around the serving signature at batch 1, inputs built before "
             "the loop, outputs not fetched (as LiteRT rows time invoke() only)")
# Batch-1 input tensors prepared ahead of the timed loop (cycled): bounds their memory.
MAX_PREBUILT_FEEDS = 256
# The batch-throughput baseline reports a median call time. Under the answer rule it stops once
# LoadGen's minimum for a median is in and the median is answered (``quantile_answered``: its 95 %
# interval at the effective sample size within the answer width, confirmed by both halves), checked
# at THROUGHPUT_MIN_CALLS and each 25 % more calls, capped at THROUGHPUT_CAP_S; an explicit
# --min-time times it for that long (up to 2 s).
# The first calls at the larger shape run up to 1.5x slower (measured on digits: window medians
# 1.5 -> 0.9 ms over the first 40 calls), so the window starts after a warm-up of its own.
THROUGHPUT_MIN_CALLS = MIN_SAMPLES["p50"]
THROUGHPUT_CAP_S = 0.5
THROUGHPUT_WARMUP_S = 0.1


def _device_sync(tf):
    """A function that waits for queued device work (GPU execution is asynchronous)."""
    sync = getattr(getattr(tf.test, "experimental", None), "sync_devices", None)
    if sync is not None:
        return sync
    return lambda: tf.constant(0.0).numpy()


class TFTarget:
    """Runs one signature of a SavedModel with TensorFlow (GPU if visible, else CPU)."""
    name = "tf"

    def __init__(self, *, batch: int = 32, device: str | None = None, signature_key: str = "serving_default",
                 loader: str = "tf2", tags: tuple[str, ...] = ("serve",)) -> None:
        self.batch = batch
        self._device = device
        self.signature_key = signature_key
        self.loader = loader
        self.tags = tuple(tags)

    def device(self) -> str:
        import tensorflow as tf

        if self._device:
            return self._device
        return "/GPU:0" if tf.config.list_physical_devices("GPU") else "/CPU:0"

    def fingerprint(self) -> dict[str, Any]:
        return host_fingerprint(with_tf=True, tf_device=self.device())

    @staticmethod
    def _batch_throughput(call, b: int, job: Job) -> dict[str, Any]:
        """Median call time at batch ``b``, after THROUGHPUT_WARMUP_S (and at least the job's warm-up
        runs) of untimed calls at that shape."""
        w_end, warm = time.perf_counter() + THROUGHPUT_WARMUP_S, 0
        while warm < job.control.warmup_runs or time.perf_counter() < w_end:
            call(0, b)
            warm += 1
        width = job.control.answer_width
        span = THROUGHPUT_CAP_S if width is not None else max(THROUGHPUT_CAP_S, min(job.min_time_s, 2.0))
        times: list[int] = []
        t_end = time.perf_counter() + span
        stop = "time"
        while time.perf_counter() < t_end or len(times) < 3:
            s = time.perf_counter_ns()
            call(0, b)
            times.append(time.perf_counter_ns() - s)
            # the answer rule on the same schedule as the timed loops (answer_checkpoint), not after every
            # call: each check is a chance to stop on a lucky window
            if (width is not None and len(times) >= THROUGHPUT_MIN_CALLS
                    and answer_checkpoint(len(times), THROUGHPUT_MIN_CALLS) and quantile_answered(times, 0.5, width)):
                stop = "answer_valid"
                break
        med = float(np.median(times))
        return {"batch_size": b, "calls": len(times), "warmup_calls": warm, "median_call_ms": med / 1e6,
                "examples_per_s": b / (med / 1e9), "stop_reason": stop}

    def run(self, job: Job, signature: Signature | None = None) -> RunResult:
        import tensorflow as tf

        sig = signature or saved_model_signature(job.model_path, self.signature_key)
        ds = cast_to_signature(InputSet.load(job.inputs_npz), sig) if job.inputs_npz else None
        if ds is None:

            ds = cast_to_signature(synthetic(sig, 32, job.seed), sig)
        dev = self.device()
        t0 = time.perf_counter_ns()
        fn = SignatureFunction(job.model_path, signature_key=self.signature_key, loader=self.loader, tags=self.tags,
                               device=dev)
        init_ms = (time.perf_counter_ns() - t0) / 1e6
        batched = all(t.batched for t in sig.inputs) and not any(t.shape and t.shape[0] == 1 for t in sig.inputs)

        def feed(lo: int, hi: int) -> dict[Any, Any]:
            return fn.prepare({t.name: ds.arrays[t.name][lo:hi] if t.batched else ds.arrays[t.name][lo]
                               for t in sig.inputs})

        def call(lo: int, hi: int) -> dict[str, np.ndarray]:
            return fn.fetch(feed(lo, hi))

        # Outputs for every sample (batched when the signature allows it; a stateful signature one
        # sample at a time, following the run's state rule).
        state = VariableState(fn)
        first: list[float] = []
        outputs = outputs_by_rule(fn, sig, ds, self.batch, job.state_rule, state, first)
        first_ms = first[0] if first else None

        # Timed like the LiteRT rows time invoke(): the batch-1 input tensors are built before the
        # loop and outputs stay on the device; only the call (plus a device sync on a GPU, where
        # execution is asynchronous) sits between the two clock reads.
        on_gpu = "GPU" in dev.upper()
        sync = _device_sync(tf) if on_gpu else (lambda: None)
        feeds = [feed(j, j + 1) for j in range(min(ds.n, MAX_PREBUILT_FEEDS))]
        ctl = job.control

        def timed(j: int) -> int:
            s = time.perf_counter_ns()
            fn.invoke(feeds[j % len(feeds)])
            sync()
            return time.perf_counter_ns() - s

        warm: list[int] = []
        samples: list[int] = []
        with progress.measuring():       # a progress bar in this process holds its redraws meanwhile
            w_start = time.perf_counter()
            while len(warm) < ctl.warmup_runs or time.perf_counter() - w_start < ctl.warmup_time_s:
                warm.append(timed(len(warm)))
            with GcPaused() as paused:      # as the LiteRT rows' timed loops: no collection inside the timing
                start = time.perf_counter()
                while (stop_reason := ctl.stop_reason(len(samples), time.perf_counter() - start, samples)) is None:
                    samples.append(timed(len(samples)))
            throughput = (self._batch_throughput(call, min(self.batch, ds.n), job)
                          if batched and ds.n > 1 else None)

        extra: dict[str, Any] = {"device": dev, "batch_size_latency": 1, "stop_reason": stop_reason,
                                 "gc": paused.facts(),
                                 "loader": self.loader, "signature": self.signature_key}
        if throughput is not None:
            extra["batch_throughput"] = throughput
        if state.stateful:
            extra["state"] = state.record(job.state_rule)
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
            method=TF_METHOD + (" + device sync" if on_gpu else "")
            + ("; tf.compat.v1 session over the MetaGraph (graph loader)" if self.loader == "graph" else ""),
            fingerprint=self.fingerprint(),
            extra=extra,
        )
