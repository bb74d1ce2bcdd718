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

Modules, one idea each: ``settings`` (choices, ``TrainSettings``, ``Cell``), ``data`` (pools and
input pipelines), ``step`` (strategy, train step, sync, all-reduce), ``metrics`` (GPU sampler,
device memory, step statistics), ``cell`` (one cell -> one row), ``multiworker`` (worker side and
the local ``WorkerGroup``), ``sweep`` (``run_train_baseline`` and readers of its result).
``edgebench/train/worker.py`` stays the worker entry point. The names below are re-exported for
users and tests; code inside edgebench imports from the submodule. ``sweep`` (the workflow that
publishes) is not re-exported: the package is loaded by the training worker, which must not load
the store and the report renderers (import it as ``edgebench.train.sweep``).
"""

from edgebench.train.cell import ERROR_MAX_CHARS, NonFiniteLoss, base_row, run_cell
from edgebench.train.cell import _error_text as _error_text  # noqa: F401 -- imported by tests
from edgebench.train.cell import _is_oom as _is_oom  # noqa: F401 -- imported by tests
from edgebench.train.data import FEEDS, POOL_BATCHES, POOL_BYTES, Pool, load_pool
from edgebench.train.metrics import GpuSampler, visible_gpus
from edgebench.train.multiworker import WORKER_STARTUP_S, WORKER_STOP_GRACE_S, WorkerGroup, run_worker_cells
from edgebench.train.settings import (GPU_STRATEGIES, PIPELINES, PRECISIONS, SIZES, STRATEGIES, XLA_CHOICES, Cell,
                                      TrainSettings, require_profiler)
from edgebench.train.step import ALLREDUCE_WARMUP, make_strategy, measure_allreduce

__all__ = [
    "ALLREDUCE_WARMUP", "ERROR_MAX_CHARS", "FEEDS", "GPU_STRATEGIES", "PIPELINES", "POOL_BATCHES", "POOL_BYTES",
    "PRECISIONS", "SIZES", "STRATEGIES", "WORKER_STARTUP_S", "WORKER_STOP_GRACE_S", "XLA_CHOICES",
    "Cell", "GpuSampler", "NonFiniteLoss", "Pool", "TrainSettings", "WorkerGroup",
    "base_row", "load_pool", "make_strategy",
    "measure_allreduce", "require_profiler", "run_cell",
    "run_worker_cells", "visible_gpus",
]
