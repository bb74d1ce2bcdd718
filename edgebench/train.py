"""Training baselines: how fast a reference model trains, under which precision, compiler and
distribution settings, measured with the method fixed and the environment recorded.

One custom training loop serves every strategy (a ``tf.function`` train step run under
``strategy.run``): Keras 3 ``model.fit`` fails under MultiWorkerMirroredStrategy, and a custom
loop gives exact per-step timing with a device sync.

Method (written once here, documented in docs/training.md):

* A *cell* is one (strategy, precision, xla, batch size, input pipeline). ``batch_size`` is the
  per-replica batch (as in NVIDIA's per-GPU figures); ``global_batch_size`` = batch_size x
  replicas, and examples/s count global examples.
* Step ``i`` is timed from just before its input is fetched until the reduced loss *and* a read
  of an updated weight are on the host (``.numpy()``): a device sync every step. The first
  ``warmup_steps`` steps (tracing, XLA compilation, autotuning) are timed apart and excluded.
* ``examples_per_s`` = global examples in the timed window / wall time of the window (the window
  closes after a read of every trainable weight, so no queued device work escapes it);
  ``examples_per_s_median_step`` = global batch / median step time.
* ``input_wait_pct`` = time spent obtaining the next batch / window wall time, in percent: the
  Python gather + host-to-tensor conversion for the ``naive`` pipeline, the wait on the tf.data
  iterator for the ``optimized`` one (parallel map + prefetch(AUTOTUNE)).
* ``startup_ms`` = first step time - median timed step time (tracing + compilation + warm-up).
* ``allreduce_ms_per_step`` (mirrored/multiworker) = median time of one batched all-reduce of
  float32 tensors shaped like the gradients, measured separately after training.
* A non-finite loss, non-finite model outputs or non-finite updated weights at any step fail the
  cell; an out-of-memory error fails the cell and the
  sweep continues; a strategy that needs absent GPUs skips the cell with the reason.
"""

from __future__ import annotations

import dataclasses
import gc
import hashlib
import importlib.util
import json
import math
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

from edgebench.errors import BadInput

# Choices, each mapped to what it means (STYLE 9: explicit dicts, no string imports).
PRECISIONS = {"fp32": "float32", "mixed_float16": "mixed_float16", "mixed_bfloat16": "mixed_bfloat16"}
XLA_CHOICES = {"on": True, "off": False}
STRATEGIES = ("none", "mirrored", "multiworker")
PIPELINES = ("naive", "optimized")
SIZES = ("tiny", "full")
GPU_STRATEGIES = ("mirrored",)  # need at least one visible GPU; skipped (with the reason) otherwise

# The synthetic/--data pool is cycled; it holds up to POOL_BATCHES per-replica batches but never
# more than POOL_BYTES, so a full-size ResNet-50 at batch 256 does not need gigabytes of host RAM.
POOL_BATCHES = 4
POOL_BYTES = 512 * 1024 * 1024
ALLREDUCE_WARMUP = 2
WORKER_STARTUP_S = 180.0  # TF import + rendezvous allowance per worker group, on top of per-cell time
WORKER_STOP_GRACE_S = 5.0
ERROR_MAX_CHARS = 400


@dataclass(frozen=True)
class TrainSettings:
    """One ``train-baseline`` sweep. Every default is written here once; the CLI passes what the user set."""

    model: str
    size: str = "tiny"
    batch_sizes: tuple[int, ...] = (32,)
    precisions: tuple[str, ...] = ("fp32",)
    xla: tuple[str, ...] = ("off",)
    strategies: tuple[str, ...] = ("none",)
    input_pipelines: tuple[str, ...] = ("optimized",)
    steps: int = 50
    warmup_steps: int = 5
    data: str = "synthetic"            # "synthetic" or a .npz with the model's inputs + "labels"
    seed: int = 0
    deterministic: bool = False        # tf.config.experimental.enable_op_determinism()
    workers: int = 2                   # local worker processes for strategy "multiworker"
    learning_rate: float = 0.01        # SGD with momentum 0.9
    profile_steps: tuple[int, int] | None = None  # inclusive global step indices (warm-up counts)
    profile_dir: str | None = None
    worker_timeout_s: float = 900.0    # per multiworker cell; the whole group gets cells x this + startup
    gpu_sample_interval_s: float = 0.2
    allreduce_repeats: int = 10
    db: str | None = None              # save the result to this results database URL when set

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "TrainSettings":
        """Inverse of ``dataclasses.asdict`` after a JSON round trip (lists back to tuples)."""
        kw = {}
        for f in dataclasses.fields(cls):
            if f.name in d:
                v = d[f.name]
                kw[f.name] = tuple(v) if isinstance(v, list) else v
        return cls(**kw)

    def validate(self) -> None:
        """BadInput naming the option and the fix for anything unusable; no side effects."""
        def _check(values: tuple, allowed, option: str) -> None:
            if not values:
                raise BadInput(f"{option} is empty; give one or more of {', '.join(allowed)}")
            for v in values:
                if v not in allowed:
                    raise BadInput(f"{option}: unknown value {v!r}; use one or more of {', '.join(allowed)}")

        if self.size not in SIZES:
            raise BadInput(f"--size: unknown value {self.size!r}; use tiny or full")
        if not self.batch_sizes or any(int(b) <= 0 for b in self.batch_sizes):
            raise BadInput(f"--batch-sizes: need positive integers, got {self.batch_sizes!r}")
        _check(self.precisions, PRECISIONS, "--precision")
        _check(self.xla, XLA_CHOICES, "--xla")
        _check(self.strategies, STRATEGIES, "--strategy")
        _check(self.input_pipelines, PIPELINES, "--input-pipeline")
        if self.steps < 1:
            raise BadInput(f"--steps must be >= 1, got {self.steps}")
        if self.warmup_steps < 1:
            raise BadInput(f"--warmup-steps must be >= 1 (the first step traces and compiles and is never "
                           f"timed), got {self.warmup_steps}")
        if self.workers < 1:
            raise BadInput(f"--workers must be >= 1, got {self.workers}")
        if not (self.learning_rate > 0 and math.isfinite(self.learning_rate)):
            raise BadInput(f"--learning-rate must be a positive finite number, got {self.learning_rate}")
        if self.profile_steps is not None:
            if len(self.profile_steps) != 2:
                raise BadInput(f"--profile-steps takes START,END (two step indices), got {self.profile_steps!r}")
            a, b = self.profile_steps
            total = self.warmup_steps + self.steps
            if not (0 <= a <= b < total):
                raise BadInput(f"--profile-steps {a},{b}: need 0 <= START <= END < warmup + steps = {total}; "
                               "steps are counted from 0 including warm-up")
            require_profiler()
        if self.data != "synthetic" and not Path(self.data).is_file():
            raise BadInput(f"--data {self.data}: no such file; give 'synthetic' or an .npz with the model's "
                           "inputs and 'labels'")

    def cells(self) -> list["Cell"]:
        """The sweep, strategy-major (multiworker cells are contiguous: one worker group runs them)."""
        out = []
        for strategy in self.strategies:
            for precision in self.precisions:
                for xla in self.xla:
                    for bs in self.batch_sizes:
                        for pipe in self.input_pipelines:
                            out.append(Cell(strategy, precision, xla, int(bs), pipe))
        return out


@dataclass(frozen=True)
class Cell:
    strategy: str
    precision: str
    xla: str
    batch_size: int
    input_pipeline: str

    @property
    def key(self) -> str:
        return f"{self.strategy}-{self.precision}-xla_{self.xla}-bs{self.batch_size}-{self.input_pipeline}"


def require_profiler() -> None:
    """BadInput when the optional profiling extra (tensorboard + tensorboard-plugin-profile) is missing."""
    missing = [m for m in ("tensorboard", "tensorboard_plugin_profile") if importlib.util.find_spec(m) is None]
    if missing:
        raise BadInput(f"--profile-steps needs {' and '.join(missing)} to capture and view the profile; "
                       "install the extra: pip install 'edgebench[profile]'")


class NonFiniteLoss(Exception):
    """The training loss became NaN or infinite."""


# --------------------------------------------------------------------------------------------
# data


@dataclass
class Pool:
    """Host-side examples the input pipelines cycle through. ``x`` is an array or {input: array}."""

    x: Any
    y: np.ndarray
    source: str
    sha256: str | None = None
    nonfinite: int = 0  # NaN/inf values among the inputs (recorded; the loss decides the cell)

    @property
    def n(self) -> int:
        return int(len(self.y))

    def dtypes(self) -> Any:
        if isinstance(self.x, dict):
            return {k: v.dtype for k, v in self.x.items()}
        return self.x.dtype


def _nbytes(x: Any) -> int:
    if isinstance(x, dict):
        return sum(int(v.nbytes) for v in x.values())
    return int(np.asarray(x).nbytes)


def _shape_tail(a: np.ndarray) -> tuple:
    return tuple(np.asarray(a).shape[1:])


def _load_npz_pool(path: str, probe_x: Any, probe_y: np.ndarray) -> Pool:
    """The user's .npz as a Pool, checked against the structure of ``models.training_batch``."""
    from edgebench.fingerprint import sha256_file

    try:
        with np.load(path, allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
    except ValueError as e:
        raise BadInput(f"--data {path}: cannot load it without pickle ({e}); save plain numeric arrays "
                       "with np.savez") from None
    except (OSError, EOFError) as e:
        raise BadInput(f"--data {path}: not a readable .npz ({e}); save arrays with np.savez") from None
    if "labels" not in arrays:
        raise BadInput(f"--data {path}: no 'labels' array; save the training targets under the key 'labels'")
    y = arrays.pop("labels")
    if isinstance(probe_x, dict):
        missing = [k for k in probe_x if k not in arrays]
        if missing:
            raise BadInput(f"--data {path}: missing input array(s) {', '.join(missing)}; the model takes "
                           f"{', '.join(probe_x)} (plus 'labels')")
        x = {k: arrays[k] for k in probe_x}
    else:
        if len(arrays) != 1:
            raise BadInput(f"--data {path}: expected exactly one input array besides 'labels', found "
                           f"{', '.join(arrays) or 'none'}")
        x = next(iter(arrays.values()))
    xs = x if isinstance(x, dict) else {"input": x}
    ps = probe_x if isinstance(probe_x, dict) else {"input": probe_x}
    for k, arr in xs.items():
        if _shape_tail(arr) != _shape_tail(ps[k]):
            raise BadInput(f"--data {path}: input {k!r} has per-example shape {_shape_tail(arr)}, the model "
                           f"needs {_shape_tail(ps[k])}")
        if len(arr) != len(y):
            raise BadInput(f"--data {path}: input {k!r} has {len(arr)} examples but 'labels' has {len(y)}")
    if len(y) == 0:
        raise BadInput(f"--data {path}: holds no examples")
    if _shape_tail(y) != _shape_tail(probe_y):
        raise BadInput(f"--data {path}: 'labels' per-example shape {_shape_tail(y)}, the loss needs "
                       f"{_shape_tail(probe_y)}")
    # The pipelines cast to the model's dtypes; keep the file's values (NaN included) as they are.
    if isinstance(x, dict):
        x = {k: np.asarray(v).astype(probe_x[k].dtype, copy=False) for k, v in x.items()}
    else:
        x = np.asarray(x).astype(probe_x.dtype, copy=False)
    y = np.asarray(y).astype(probe_y.dtype, copy=False)
    arrays_x = x.values() if isinstance(x, dict) else [x]
    nonfinite = sum(int(np.size(a) - np.count_nonzero(np.isfinite(a))) for a in arrays_x
                    if np.issubdtype(a.dtype, np.floating))
    return Pool(x, y, source=str(path), sha256=sha256_file(path), nonfinite=nonfinite)


def load_pool(settings: TrainSettings, batch_size: int) -> Pool:
    """The examples for one batch size: seeded synthetic data from the registry, or ``--data``."""
    from edgebench import models

    probe_x, probe_y = models.training_batch(settings.model, settings.size, 1, settings.seed)
    if settings.data != "synthetic":
        return _load_npz_pool(settings.data, probe_x, np.asarray(probe_y))
    per_example = max(1, _nbytes(probe_x) + int(np.asarray(probe_y).nbytes))
    n = max(batch_size, min(POOL_BATCHES * batch_size, POOL_BYTES // per_example))
    x, y = models.training_batch(settings.model, settings.size, n, settings.seed)
    return Pool(x, np.asarray(y), source="synthetic")


class _NaiveFeed:
    """A plain Python feed: per step, gather and cast examples one by one, stack, convert to tensors.

    All of it runs on the training loop's critical path (no overlap with the device).
    """

    def __init__(self, strategy, pool: Pool, batch_size: int):
        self.strategy = strategy
        self.pool = pool
        self.bs = batch_size
        self.step = 0

    def _batch(self, start: int):
        import tensorflow as tf

        n = self.pool.n
        idx = [(start + j) % n for j in range(self.bs)]
        if isinstance(self.pool.x, dict):
            x = {k: tf.constant(np.stack([np.array(v[i], dtype=v.dtype) for i in idx]))
                 for k, v in self.pool.x.items()}
        else:
            v = self.pool.x
            x = tf.constant(np.stack([np.array(v[i], dtype=v.dtype) for i in idx]))
        y = tf.constant(np.stack([np.array(self.pool.y[i]) for i in idx]))
        return x, y

    def next(self):
        base = self.step * self.bs * self.strategy.num_replicas_in_sync
        self.step += 1
        return self.strategy.experimental_distribute_values_from_function(
            lambda ctx: self._batch(base + ctx.replica_id_in_sync_group * self.bs))


class _OptimizedFeed:
    """tf.data: cycle the pool, parallel map (cast), batch, prefetch(AUTOTUNE), per input pipeline."""

    def __init__(self, strategy, pool: Pool, batch_size: int):
        import tensorflow as tf

        dtypes = pool.dtypes()

        def cast(x, y):
            if isinstance(x, dict):
                x = {k: tf.cast(v, dtypes[k]) for k, v in x.items()}
            else:
                x = tf.cast(x, dtypes)
            return x, y

        def dataset_fn(ctx):
            ds = tf.data.Dataset.from_tensor_slices((pool.x, pool.y))
            if ctx.num_input_pipelines > 1 and pool.n >= ctx.num_input_pipelines * batch_size:
                ds = ds.shard(ctx.num_input_pipelines, ctx.input_pipeline_id)
            ds = ds.repeat().map(cast, num_parallel_calls=tf.data.AUTOTUNE)
            return ds.batch(batch_size, drop_remainder=True).prefetch(tf.data.AUTOTUNE)

        self._it = iter(strategy.distribute_datasets_from_function(dataset_fn))

    def next(self):
        return next(self._it)


FEEDS = {"naive": _NaiveFeed, "optimized": _OptimizedFeed}


# --------------------------------------------------------------------------------------------
# the train step


def _make_train_step(strategy, model, optimizer, loss_fn, *, xla: bool, loss_scaling: bool, distributed: bool):
    """A ``tf.function`` step: (x, y) per replica -> float32 [mean loss, probe of an updated
    weight, count of non-finite model outputs].

    Without a distribution strategy the whole step (forward, backward, optimizer update) is
    compiled with ``jit_compile=xla``. Under mirrored/multiworker the forward + backward pass is
    compiled and the optimizer update (which holds the cross-replica all-reduce) runs outside
    XLA, as Keras does: collective ops cannot sit inside an XLA cluster.
    """
    import tensorflow as tf

    replicas = strategy.num_replicas_in_sync
    variables = model.trainable_variables

    def forward_backward(x, y):
        with tf.GradientTape() as tape:
            pred = model(x, training=True)
            pred = tf.nest.map_structure(lambda t: tf.cast(t, tf.float32), pred)
            # Counted because Keras clips probabilities before the log: NaN outputs can leave the
            # loss finite (and their gradients zero), so the loss alone would hide them.
            bad = tf.add_n([tf.reduce_sum(tf.cast(tf.logical_not(tf.math.is_finite(t)), tf.float32))
                            for t in tf.nest.flatten(pred)])
            loss = loss_fn(y, pred)
            if model.losses:
                loss = loss + tf.add_n([tf.cast(v, tf.float32) for v in model.losses])
            scaled = loss / replicas
            if loss_scaling:
                scaled = optimizer.scale_loss(scaled)
        grads = tape.gradient(scaled, variables)
        return loss, bad, grads

    fb = tf.function(forward_backward, jit_compile=xla) if distributed else forward_backward

    def replica_step(x, y):
        loss, bad, grads = fb(x, y)
        if loss_scaling and distributed:
            # Keras' LossScaleOptimizer decides "finite?" on each replica's *local* gradients and
            # only the finite branch all-reduces: when one replica overflows and another does not,
            # the collective deadlocks. One scalar all-reduce makes every replica agree, and NaN
            # poisoning sends them all down the same (skip-and-shrink-the-scale) branch.
            local_bad = tf.cast(tf.logical_not(optimizer.check_finite(grads)), tf.float32)
            any_bad = tf.distribute.get_replica_context().all_reduce(tf.distribute.ReduceOp.SUM, local_bad)
            poison = tf.where(any_bad > 0, tf.constant(float("nan")), tf.constant(0.0))
            grads = [g + tf.cast(poison, g.dtype) for g in grads]
        optimizer.apply(grads, variables)
        # Reading an updated weight makes the host wait for the update, not only the loss.
        probe = tf.reduce_sum(tf.cast(variables[-1].value, tf.float32))
        return loss, probe, bad

    def step(x, y):
        loss, probe, bad = strategy.run(replica_step, args=(x, y))
        mean, total = tf.distribute.ReduceOp.MEAN, tf.distribute.ReduceOp.SUM
        # One small vector, so the host sync is a single device-to-host copy per step.
        return tf.stack([tf.cast(strategy.reduce(mean, loss, axis=None), tf.float32),
                         strategy.reduce(mean, probe, axis=None), strategy.reduce(total, bad, axis=None)])

    return tf.function(step, jit_compile=(xla and not distributed))


def _make_sync(strategy, variables):
    """A compiled read of one element of every trainable weight (per replica) on the host.

    Called once at the end of the timed window: after it returns, no queued device work is left.
    Traced during warm-up so that the window does not pay for tracing.
    """
    import tensorflow as tf

    @tf.function
    def touch():
        def fn():
            return tf.add_n([tf.reduce_sum(tf.cast(tf.reshape(v.value, [-1])[:1], tf.float32)) for v in variables])
        return strategy.reduce(tf.distribute.ReduceOp.SUM, strategy.run(fn), axis=None)

    def sync() -> None:
        touch().numpy()

    return sync


def measure_allreduce(strategy, variables, repeats: int) -> dict[str, Any]:
    """Median time of one batched SUM all-reduce of float32 tensors shaped like the gradients.

    Run in lockstep by every replica/worker after training (it is a collective).
    """
    import tensorflow as tf

    shapes = [tuple(v.shape) for v in variables]

    @tf.function
    def reduce_once():
        def fn():
            # The replica's weight values: float32 tensors with exactly the gradients' shapes, and
            # reading them costs nothing next to the collective (no fill kernel in the timing).
            ts = [tf.identity(tf.cast(v.value, tf.float32)) for v in variables]
            out = tf.distribute.get_replica_context().all_reduce(tf.distribute.ReduceOp.SUM, ts)
            return [tf.reshape(o, [-1])[:1] for o in out]  # one element per tensor: waits on each
        return strategy.run(fn)

    times = []
    for i in range(ALLREDUCE_WARMUP + repeats):
        t0 = time.perf_counter_ns()
        out = reduce_once()
        for o in out:
            for local in strategy.experimental_local_results(o):
                local.numpy()
        if i >= ALLREDUCE_WARMUP:
            times.append(time.perf_counter_ns() - t0)
    ms = np.asarray(times, dtype=np.float64) / 1e6
    return {"median_ms": float(np.median(ms)), "samples_ms": [float(v) for v in ms],
            "bytes": int(sum(4 * int(np.prod(s)) for s in shapes)), "tensors": len(shapes),
            "replicas": strategy.num_replicas_in_sync}


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


# --------------------------------------------------------------------------------------------
# one cell


_ERROR_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Exceeded)\b:?")


def _error_text(exc: BaseException) -> str:
    """One informative line from an exception.

    TF and autograph errors put the cause after generic headers ("Graph execution error:",
    "in user code:", stack lines): prefer the last "SomethingError: ..." line, else the first
    line that is not a header.
    """
    text = getattr(exc, "message", None) or str(exc) or type(exc).__name__
    lines = [ln.strip() for ln in str(text).splitlines() if ln.strip()]
    named = [ln for ln in lines if _ERROR_LINE.match(ln)]
    if named:
        return named[-1][:ERROR_MAX_CHARS]
    skip = ("Graph execution error", "Detected at node", "File \"", "[[{{node", "Traceback", "in user code:")
    useful = [ln for ln in lines if not ln.startswith(skip)]
    line = (useful or lines or [type(exc).__name__])[0]
    return f"{type(exc).__name__}: {line}"[:ERROR_MAX_CHARS]


def _is_oom(exc: BaseException) -> bool:
    import tensorflow as tf

    text = str(exc)
    return isinstance(exc, (tf.errors.ResourceExhaustedError, MemoryError)) or "RESOURCE_EXHAUSTED" in text \
        or "Out of memory" in text or "OOM when allocating" in text


def _step_stats(samples_ns: list[int]) -> dict[str, Any]:
    """Step-time statistics with edgebench's one set of definitions (``measure.LatencyStats``).

    ``qps`` becomes ``steps_per_s``; the warnings are rephrased for training (the bench ones name
    bench options).
    """
    from edgebench.measure import CV_WARN, DRIFT_WARN, MIN_SAMPLES, LatencyStats

    st = LatencyStats.from_samples(samples_ns, what="training run")
    out = st.to_dict()
    out["steps_per_s"] = out.pop("qps")
    warnings = []
    if not st.p99_valid:
        warnings.append(f"p99 from {st.samples} steps is not valid: it needs >= {MIN_SAMPLES['p99']} (MLPerf "
                        "LoadGen minimum at 99% confidence); raise --steps")
    if st.samples > 1 and st.cv >= CV_WARN:
        warnings.append(f"unstable: step-time CV {st.cv:.0%} >= {CV_WARN:.0%}; close other programs, raise "
                        "--warmup-steps or --steps")
    if st.first_third_p50 and st.last_third_p50 and st.p50 > 0 and \
            abs(st.last_third_p50 - st.first_third_p50) / st.p50 >= DRIFT_WARN:
        warnings.append(f"drift: median step {st.first_third_p50:.4g} ms in the first third vs "
                        f"{st.last_third_p50:.4g} ms in the last; raise --warmup-steps or check heat/clocks")
    out["warnings"] = warnings
    return out


def base_row(settings: TrainSettings, cell: Cell) -> dict[str, Any]:
    return {
        "model": settings.model, "size": settings.size, "batch_size": cell.batch_size,
        "precision": cell.precision, "xla": XLA_CHOICES[cell.xla], "xla_requested": cell.xla,
        "strategy": cell.strategy, "workers": settings.workers if cell.strategy == "multiworker" else 1,
        "input_pipeline": cell.input_pipeline, "target": f"train:{cell.strategy}",
        "status": "ok", "error": None, "steps": settings.steps, "warmup_steps": settings.warmup_steps,
        "data": settings.data, "seed": settings.seed, "deterministic": settings.deterministic,
        "learning_rate": settings.learning_rate, "optimizer": "SGD(momentum=0.9)",
    }


def _model_config_sha256(model) -> str | None:
    try:
        return hashlib.sha256(model.to_json().encode()).hexdigest()
    except Exception:  # noqa: BLE001 -- a model that cannot serialise its config still trains
        return None


def run_cell(settings: TrainSettings, cell: Cell, strategy, *, pool: Pool | None = None,
             profile_dir: str | None = None, gpus: list | None = None) -> dict[str, Any]:
    """Train one cell under ``strategy`` and return its row. Failures become the row's ``error``."""
    import keras
    import tensorflow as tf

    from edgebench import models

    row = base_row(settings, cell)
    gpus = visible_gpus() if gpus is None else gpus
    distributed = cell.strategy != "none"
    xla = XLA_CHOICES[cell.xla]
    row.update(replicas=int(strategy.num_replicas_in_sync),
               global_batch_size=int(cell.batch_size * strategy.num_replicas_in_sync),
               xla_scope=("step" if not distributed else "forward_backward") if xla else None,
               device="GPU" if gpus else "CPU", gpu_count=len(gpus))
    prev_policy = keras.mixed_precision.global_policy()
    model = optimizer = step_fn = feed = sync = None
    sampler: GpuSampler | None = None
    profiling = False
    try:
        keras.utils.set_random_seed(settings.seed)
        keras.mixed_precision.set_global_policy(PRECISIONS[cell.precision])
        if pool is None:
            pool = load_pool(settings, cell.batch_size)
        row["data_sha256"] = pool.sha256
        if pool.nonfinite:
            row["data_nonfinite_values"] = pool.nonfinite
        loss_fn = models.training_loss(settings.model, settings.size)
        _peak_device_memory(gpus, reset=True)
        t_build = time.perf_counter()
        with strategy.scope():
            model = models.build_keras(settings.model, settings.size, settings.seed)
            optimizer = keras.optimizers.SGD(learning_rate=settings.learning_rate, momentum=0.9)
            loss_scaling = cell.precision == "mixed_float16"
            if loss_scaling:
                optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
            optimizer.build(model.trainable_variables)
        row["build_ms"] = (time.perf_counter() - t_build) * 1e3
        row["params"] = int(sum(int(np.prod(v.shape)) for v in model.trainable_variables))
        row["model_config_sha256"] = _model_config_sha256(model)
        step_fn = _make_train_step(strategy, model, optimizer, loss_fn, xla=xla, loss_scaling=loss_scaling,
                                   distributed=distributed)
        feed = FEEDS[cell.input_pipeline](strategy, pool, cell.batch_size)
        sync = _make_sync(strategy, model.trainable_variables)

        total = settings.warmup_steps + settings.steps
        prof = settings.profile_steps if profile_dir else None
        warm_ns: list[int] = []
        step_ns: list[int] = []
        wait_ns: list[int] = []
        loss_v = float("nan")
        t_window = 0
        for i in range(total):
            if prof and i == prof[0]:
                tf.profiler.experimental.start(profile_dir)
                profiling = True
            if i == settings.warmup_steps:
                sync()  # traces the end-of-window sync outside the window
                if gpus:
                    sampler = GpuSampler(settings.gpu_sample_interval_s).start()
                t_window = time.perf_counter_ns()
            t0 = time.perf_counter_ns()
            x, y = feed.next()
            t1 = time.perf_counter_ns()
            loss_v, probe_v, bad_v = (float(v) for v in step_fn(x, y).numpy())
            t2 = time.perf_counter_ns()
            if profiling and i == prof[1]:
                tf.profiler.experimental.stop()
                profiling = False
            if not math.isfinite(loss_v):
                raise NonFiniteLoss(f"loss became {loss_v} at step {i} (0-based, warm-up included); lower "
                                    "--learning-rate, check --data for NaN/inf, or use fp32")
            if bad_v:
                raise NonFiniteLoss(f"model outputs held {bad_v:.0f} nan/inf values at step {i} (0-based, warm-up "
                                    f"included) while the clipped loss read {loss_v:.4g}; check --data for "
                                    "NaN/inf or lower --learning-rate")
            if not math.isfinite(probe_v):
                # Keras clips probabilities before the log, so NaN activations can leave the loss
                # finite while the update has already poisoned the weights.
                raise NonFiniteLoss(f"weights became {probe_v} at step {i} (0-based, warm-up included) although "
                                    f"the loss read {loss_v:.4g}: the gradients were nan/inf; check --data for "
                                    "NaN/inf or lower --learning-rate")
            if i < settings.warmup_steps:
                warm_ns.append(t2 - t0)
            else:
                step_ns.append(t2 - t0)
                wait_ns.append(t1 - t0)
        sync()
        window_ns = time.perf_counter_ns() - t_window
        gpu = sampler.stop() if sampler else None
        sampler = None

        stats = _step_stats(step_ns)
        gb = row["global_batch_size"]
        row.update(
            examples_per_s=gb * settings.steps / (window_ns / 1e9),
            examples_per_s_median_step=gb / (stats["p50"] / 1e3),
            step_time_ms=stats,
            step_samples_ns=[int(v) for v in step_ns],
            warmup_samples_ns=[int(v) for v in warm_ns],
            window_s=window_ns / 1e9,
            first_step_ms=warm_ns[0] / 1e6,
            startup_ms=warm_ns[0] / 1e6 - stats["p50"],
            input_wait_pct=100.0 * sum(wait_ns) / window_ns,
            input_wait_ms_per_step=float(np.mean(wait_ns)) / 1e6,
            peak_device_memory_bytes=_peak_device_memory(gpus),
            final_loss=loss_v,
            loss_scale=float(optimizer.dynamic_scale.numpy()) if loss_scaling else None,
            profile_dir=profile_dir if prof else None,
            profiled_steps=list(prof) if prof else None,  # profiling slows these steps; they stay in the stats
        )
        if gpus:
            row["gpu"] = gpu
        if distributed:
            ar = measure_allreduce(strategy, model.trainable_variables, settings.allreduce_repeats)
            row["allreduce_ms_per_step"] = ar["median_ms"]
            row["allreduce"] = ar
        else:
            row["allreduce_ms_per_step"] = None
    except NonFiniteLoss as e:
        row.update(status="failed", error=str(e), final_loss=None)
    except BadInput:
        raise
    except Exception as e:  # noqa: BLE001 -- one failed cell must not end the sweep
        if _is_oom(e):
            row.update(status="failed", error=f"out of memory at batch size {cell.batch_size} "
                                              f"({_error_text(e)}); use a smaller --batch-sizes value")
        else:
            row.update(status="failed", error=_error_text(e))
    finally:
        if profiling:
            try:
                tf.profiler.experimental.stop()
            except Exception:  # noqa: BLE001
                pass
        if sampler is not None:
            sampler.stop()
        keras.mixed_precision.set_global_policy(prev_policy)
        del model, optimizer, step_fn, feed, sync
        keras.backend.clear_session()
        gc.collect()
    return row


# --------------------------------------------------------------------------------------------
# strategies


def _skip_reason(settings: TrainSettings, cell: Cell, gpus: list) -> str | None:
    if cell.strategy in GPU_STRATEGIES and not gpus:
        return (f"strategy {cell.strategy!r} needs GPUs and TensorFlow sees none "
                "(tf.config.list_physical_devices('GPU') is empty); use --strategy none or multiworker on CPU")
    return None


def _training_skip_reason(settings: TrainSettings) -> str | None:
    """Why the model cannot be trained at all (e.g. no training loss), or None."""
    from edgebench import models

    try:
        models.training_loss(settings.model, settings.size)
    except BadInput:
        raise
    except Exception as e:  # noqa: BLE001 -- any builder error: the cell is skipped with it
        return f"{settings.model} does not support training baselines: {_error_text(e)}"
    return None


def make_strategy(name: str, *, timeout_s: float | None = None):
    """The tf.distribute strategy for a cell (the multiworker one reads TF_CONFIG)."""
    import tensorflow as tf

    if name == "none":
        return tf.distribute.get_strategy()
    if name == "mirrored":
        return tf.distribute.MirroredStrategy()
    if name == "multiworker":
        opts = tf.distribute.experimental.CommunicationOptions(
            timeout_seconds=float(timeout_s) if timeout_s else None)
        return tf.distribute.MultiWorkerMirroredStrategy(communication_options=opts)
    raise BadInput(f"--strategy: unknown value {name!r}; use one of {', '.join(STRATEGIES)}")


def _profile_dir_for(settings: TrainSettings, cell: Cell, root: Path | None, task: str = "") -> str | None:
    if settings.profile_steps is None or root is None:
        return None
    d = root / (cell.key + task)
    d.mkdir(parents=True, exist_ok=True)
    return str(d)


def _profile_root(settings: TrainSettings) -> Path | None:
    if settings.profile_steps is None:
        return None
    if settings.profile_dir:
        root = Path(settings.profile_dir)
    else:
        from edgebench.paths import data_dir

        root = data_dir() / "profiles" / f"{settings.model}-{time.strftime('%Y%m%dT%H%M%S')}"
    root.mkdir(parents=True, exist_ok=True)
    return root


def run_worker_cells(settings: TrainSettings, cells: list[Cell], *,
                     on_row: Callable[[list[dict[str, Any]]], None] | None = None) -> list[dict[str, Any]]:
    """Run multiworker cells as one worker of the cluster described by TF_CONFIG.

    The MultiWorkerMirroredStrategy is created first, before any other TensorFlow op (it must
    configure the collective runtime). Every worker runs the same cells in the same order.
    """
    _enable_memory_growth(visible_gpus())  # lists devices only: creates no op before the strategy
    strategy = make_strategy("multiworker", timeout_s=settings.worker_timeout_s)
    _set_determinism(settings.deterministic)
    tf_config = json.loads(os.environ.get("TF_CONFIG", "{}"))
    task = tf_config.get("task", {})
    is_chief = task.get("type", "worker") == "chief" or (
        task.get("type", "worker") == "worker" and int(task.get("index", 0)) == 0
        and "chief" not in tf_config.get("cluster", {}))
    root = _profile_root(settings) if is_chief else None
    gpus = visible_gpus()
    rows = []
    for cell in cells:
        row = run_cell(settings, cell, strategy, profile_dir=_profile_dir_for(settings, cell, root), gpus=gpus)
        row["task"] = f"{task.get('type', 'worker')}:{task.get('index', 0)}"
        row["is_chief"] = is_chief
        row["workers"] = int(sum(len(v) for k, v in tf_config.get("cluster", {}).items() if k in ("worker", "chief")))
        rows.append(row)
        if on_row:
            on_row(rows)
    return rows


def _free_ports(n: int) -> list[int]:
    """n distinct free TCP ports on 127.0.0.1 (held open together so none repeats)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


class WorkerGroup:
    """N local ``python -m edgebench.train_worker`` processes with TF_CONFIG on loopback ports.

    ``wait()`` returns once every worker exited 0, or stops all of them as soon as one dies or the
    deadline passes (no hang: a peer stuck in a collective is killed, not waited for).
    """

    def __init__(self, settings: TrainSettings, cells: list[Cell], run_dir: Path, *, deadline_s: float,
                 gpu_count: int = 0):
        self.settings = settings
        self.cells = cells
        self.run_dir = Path(run_dir)
        self.deadline_s = deadline_s
        self.gpu_count = gpu_count
        self.n = settings.workers
        self.procs: list[subprocess.Popen] = []
        self.logs: list[Path] = []
        self.outs: list[Path] = []
        self.note: str | None = None

    def start(self) -> "WorkerGroup":
        spec = self.run_dir / "spec.json"
        spec.write_text(json.dumps({"settings": dataclasses.asdict(self.settings),
                                    "cells": [dataclasses.asdict(c) for c in self.cells]}))
        ports = _free_ports(self.n)
        cluster = {"worker": [f"127.0.0.1:{p}" for p in ports]}
        for i in range(self.n):
            env = dict(os.environ)
            env["TF_CONFIG"] = json.dumps({"cluster": cluster, "task": {"type": "worker", "index": i}})
            env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
            env["PYTHONUNBUFFERED"] = "1"
            if self.gpu_count >= self.n:
                env["CUDA_VISIBLE_DEVICES"] = str(i)  # one GPU per worker: NCCL needs distinct devices
            elif self.gpu_count > 0:
                env["CUDA_VISIBLE_DEVICES"] = "-1"
                self.note = (f"{self.n} local workers but {self.gpu_count} GPU(s): workers ran on CPU "
                             "(NCCL cannot share one GPU between workers)")
            out = self.run_dir / f"worker{i}.json"
            log = self.run_dir / f"worker{i}.log"
            self.outs.append(out)
            self.logs.append(log)
            with open(log, "wb") as fh:
                self.procs.append(subprocess.Popen(
                    [sys.executable, "-m", "edgebench.train_worker", "--spec", str(spec), "--out", str(out)],
                    env=env, stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL))
        return self

    def _log_tail(self, i: int, lines: int = 3) -> str:
        try:
            text = self.logs[i].read_text(errors="replace").splitlines()
        except OSError:
            return ""
        keep = [ln.strip() for ln in text if ln.strip() and not ln.startswith(("I0000", "W0000", "WARNING: All"))]
        return " | ".join(keep[-lines:])[-ERROR_MAX_CHARS:]

    def wait(self, poll_s: float = 0.2) -> str | None:
        """None when every worker exited 0; otherwise the reason (the rest were stopped)."""
        deadline = time.monotonic() + self.deadline_s
        try:
            while True:
                codes = [p.poll() for p in self.procs]
                bad = [(i, c) for i, c in enumerate(codes) if c not in (None, 0)]
                if bad:
                    i, c = bad[0]
                    how = f"was killed by signal {-c}" if c < 0 else f"exited with code {c}"
                    tail = self._log_tail(i)
                    return f"worker {i} {how}; the other workers were stopped" + (f" (log: {tail})" if tail else "")
                if all(c == 0 for c in codes):
                    return None
                if time.monotonic() > deadline:
                    return (f"multiworker group did not finish within {self.deadline_s:.0f} s; all workers were "
                            "stopped (raise the timeout or lower --steps)")
                time.sleep(poll_s)
        finally:
            self.stop()

    def stop(self) -> None:
        """Terminate every worker still running, then kill what ignores it."""
        alive = [p for p in self.procs if p.poll() is None]
        for p in alive:
            try:
                p.send_signal(signal.SIGTERM)
            except ProcessLookupError:
                pass
        end = time.monotonic() + WORKER_STOP_GRACE_S
        for p in alive:
            try:
                p.wait(timeout=max(0.0, end - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()

    def read_rows(self, i: int = 0) -> list[dict[str, Any]]:
        try:
            return json.loads(self.outs[i].read_text())["rows"]
        except (OSError, ValueError, KeyError):
            return []


def _run_multiworker_local(settings: TrainSettings, cells: list[Cell], gpu_count: int) -> list[dict[str, Any]]:
    run_dir = Path(tempfile.mkdtemp(prefix="edgebench-train-"))
    try:
        group = WorkerGroup(settings, cells, run_dir,
                            deadline_s=WORKER_STARTUP_S + settings.worker_timeout_s * len(cells),
                            gpu_count=gpu_count).start()
        failure = group.wait()
        chief = group.read_rows(0)
        others = [group.read_rows(i) for i in range(1, group.n)]
        rows = []
        for k, cell in enumerate(cells):
            if k < len(chief):
                row = chief[k]
                row["workers_examples_per_s"] = [row.get("examples_per_s")] + [
                    (o[k].get("examples_per_s") if k < len(o) else None) for o in others]
                if group.note:
                    row["note"] = group.note
            else:
                row = base_row(settings, cell)
                row.update(status="failed", error=failure or "worker 0 wrote no result for this cell")
            rows.append(row)
        return rows
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)


def _set_determinism(on: bool) -> None:
    import tensorflow as tf

    if on:
        tf.config.experimental.enable_op_determinism()
    else:
        try:
            from tensorflow.python.framework import config as tf_config  # noqa: PLC0415

            tf_config.disable_op_determinism()
        except (ImportError, AttributeError):
            pass


def _enable_memory_growth(gpus: list) -> None:
    import tensorflow as tf

    for g in gpus:
        try:
            tf.config.experimental.set_memory_growth(g, True)
        except (RuntimeError, ValueError):
            pass  # GPUs already initialised in this process: keep what is configured


# --------------------------------------------------------------------------------------------
# the sweep


def pipeline_comparison(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """optimized / naive examples/s for every pair of ok cells that differ only in the pipeline."""
    by_key: dict[tuple, dict[str, dict]] = {}
    for r in rows:
        if r.get("status") != "ok":
            continue
        key = (r["model"], r["strategy"], r["precision"], r["xla_requested"], r["batch_size"])
        by_key.setdefault(key, {})[r["input_pipeline"]] = r
    out = []
    for key, pair in by_key.items():
        if "naive" in pair and "optimized" in pair:
            n, o = pair["naive"], pair["optimized"]
            out.append({"model": key[0], "strategy": key[1], "precision": key[2], "xla": key[3],
                        "batch_size": key[4],
                        "naive_examples_per_s": n["examples_per_s"], "optimized_examples_per_s": o["examples_per_s"],
                        "speedup": o["examples_per_s"] / n["examples_per_s"] if n["examples_per_s"] else None,
                        "naive_input_wait_pct": n["input_wait_pct"], "optimized_input_wait_pct": o["input_wait_pct"]})
    return out


def run_train_baseline(settings: TrainSettings) -> dict[str, Any]:
    """Run the sweep and return the ``train`` result envelope (one row per cell, in sweep order).

    Raises BadInput for an unknown model or unusable options; per-cell failures (OOM, NaN loss,
    unsupported precision, a dying worker) are rows with status "failed"; cells needing absent
    hardware are rows with status "skipped" and the reason.
    """
    from edgebench import models
    from edgebench.fingerprint import host_fingerprint
    from edgebench.results import envelope

    settings.validate()
    models.resolve(settings.model)
    if settings.size not in getattr(models, "SIZES", SIZES):
        raise BadInput(f"--size: unknown value {settings.size!r}; use tiny or full")
    cells = settings.cells()
    external_cluster = "TF_CONFIG" in os.environ and "multiworker" in settings.strategies
    if external_cluster and set(settings.strategies) != {"multiworker"}:
        raise BadInput("TF_CONFIG is set (this process is one worker of a cluster): run only "
                       "--strategy multiworker, or unset TF_CONFIG for local runs")
    if settings.data != "synthetic" and not external_cluster:
        load_pool(settings, 1)  # validate --data before any training (BadInput names the problem)

    if external_cluster:
        rows = run_worker_cells(settings, cells)  # creates the strategy before any other TF op
        gpus = visible_gpus()
    else:
        import tensorflow as tf  # noqa: F401  -- heavy import only once settings are valid

        gpus = visible_gpus()
        _enable_memory_growth(gpus)
        skip_all = _training_skip_reason(settings)
        _set_determinism(settings.deterministic)
        profile_root = _profile_root(settings)
        rows = []
        mw_cells = [c for c in cells if c.strategy == "multiworker"]
        mw_rows: dict[str, dict] = {}
        if mw_cells and not skip_all:
            for cell, row in zip(mw_cells, _run_multiworker_local(settings, mw_cells, len(gpus))):
                mw_rows[cell.key] = row
        try:
            for cell in cells:
                reason = skip_all or _skip_reason(settings, cell, gpus)
                if reason:
                    row = base_row(settings, cell)
                    row.update(status="skipped", error=None, reason=reason)
                elif cell.strategy == "multiworker":
                    row = mw_rows[cell.key]
                else:
                    row = run_cell(settings, cell, make_strategy(cell.strategy),
                                   profile_dir=_profile_dir_for(settings, cell, profile_root), gpus=gpus)
                rows.append(row)
        finally:
            _set_determinism(False)

    fp = host_fingerprint(with_tf=True)
    doc = envelope("train", rows, fp,
                   settings={k: v for k, v in dataclasses.asdict(settings).items() if k != "db"},
                   comparisons=pipeline_comparison(rows),
                   method=("custom loop, tf.function step under strategy.run; per-step perf_counter_ns "
                           "from input fetch to host read of loss and an updated weight; warm-up excluded"))
    if settings.db:
        from edgebench.store import Store

        store = Store(settings.db)
        try:
            doc["run_id"] = store.save(doc)
        finally:
            store.close()
    return doc


def latest_baseline(model: str, *, db: str | None = None) -> dict[str, Any] | None:
    """The newest stored ``ok`` training row of ``model`` (headline columns + run_id), or None.

    For reports that show a deployment result next to the training baseline of the same model
    (e.g. convert-and-compare). ``db`` defaults to the results store's default URL.
    """
    from edgebench.store import Store, default_url

    store = Store(db or default_url())
    try:
        rows = [r for r in store.rows(kind="train", model=model) if r.get("status") == "ok"]
    finally:
        store.close()
    return rows[-1] if rows else None


def failed_cells(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return [r for r in doc.get("rows", []) if r.get("status") == "failed"]


def _row_label(r: dict[str, Any]) -> str:
    return (f"{r.get('strategy')}/{r.get('precision')}/xla {r.get('xla_requested')}/bs {r.get('batch_size')}/"
            f"{r.get('input_pipeline')}")


def failure_summary(doc: dict[str, Any]) -> str | None:
    """One line naming the failed cells, or None when none failed."""
    bad = failed_cells(doc)
    if not bad:
        return None
    first = bad[0]
    return (f"{len(bad)} of {len(doc['rows'])} training cells failed; first: {_row_label(first)}: "
            f"{first.get('error')}")
