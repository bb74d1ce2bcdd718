"""One cell: build the model under the strategy, run warm-up + timed steps with a device sync
each, and turn the measurement (or the failure: NaN, OOM, anything else) into the cell's row;
plus where a cell's profile goes."""

from __future__ import annotations

import gc
import hashlib
import math
import re
import time
from pathlib import Path
from typing import Any

import numpy as np

from edgebench.core.errors import BadInput
from edgebench.core.paths import data_dir
from edgebench.model import catalog as models
from edgebench.train.data import FEEDS, Pool, load_pool
from edgebench.train.metrics import GpuSampler, _peak_device_memory, _step_stats, visible_gpus
from edgebench.train.settings import PRECISIONS, XLA_CHOICES, Cell, TrainSettings
from edgebench.train.step import _make_sync, _make_train_step, measure_allreduce

ERROR_MAX_CHARS = 400


class NonFiniteLoss(Exception):
    """The training loss became NaN or infinite."""


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


def _check_step(i: int, loss_v: float, probe_v: float, bad_v: float) -> None:
    """Step ``i``'s loss, outputs and weights were finite, else ``NonFiniteLoss`` saying which and what to do."""
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


def _window_fields(gb: int, steps: int, step_ns: list[int], warm_ns: list[int], wait_ns: list[int],
                   window_ns: int) -> dict[str, Any]:
    """The row's throughput and step-time fields from the measured window (global batch ``gb``)."""
    stats = _step_stats(step_ns)
    return dict(
        examples_per_s=gb * steps / (window_ns / 1e9),
        examples_per_s_median_step=gb / (stats["p50"] / 1e3),
        step_time_ms=stats,
        step_samples_ns=[int(v) for v in step_ns],
        warmup_samples_ns=[int(v) for v in warm_ns],
        window_s=window_ns / 1e9,
        first_step_ms=warm_ns[0] / 1e6,
        startup_ms=warm_ns[0] / 1e6 - stats["p50"],
        input_wait_pct=100.0 * sum(wait_ns) / window_ns,
        input_wait_ms_per_step=float(np.mean(wait_ns)) / 1e6,
    )


def run_cell(settings: TrainSettings, cell: Cell, strategy, *, pool: Pool | None = None,
             profile_dir: str | None = None, gpus: list | None = None) -> dict[str, Any]:
    """Train one cell under ``strategy`` and return its row. Failures become the row's ``error``."""
    import keras
    import tensorflow as tf


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
            _check_step(i, loss_v, probe_v, bad_v)
            if i < settings.warmup_steps:
                warm_ns.append(t2 - t0)
            else:
                step_ns.append(t2 - t0)
                wait_ns.append(t1 - t0)
        sync()
        window_ns = time.perf_counter_ns() - t_window
        gpu = sampler.stop() if sampler else None
        sampler = None

        row.update(
            **_window_fields(row["global_batch_size"], settings.steps, step_ns, warm_ns, wait_ns, window_ns),
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
# where a cell's profile goes (--profile-steps)


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

        root = data_dir() / "profiles" / f"{settings.model}-{time.strftime('%Y%m%dT%H%M%S')}"
    root.mkdir(parents=True, exist_ok=True)
    return root
