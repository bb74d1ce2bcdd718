"""The examples a cell trains on: a host-side ``Pool`` (seeded synthetic data or the user's
``--data`` .npz, checked against the model) and the two input pipelines that feed it to the
strategy (``naive`` Python gather, ``optimized`` tf.data)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from edgebench.core.bounded import read_npz
from edgebench.core.errors import BadInput
from edgebench.core.fingerprint import sha256_file
from edgebench.model import catalog as models
from edgebench.train.settings import TrainSettings

# The synthetic/--data pool is cycled; it holds up to POOL_BATCHES per-replica batches but never
# more than POOL_BYTES, so a full-size ResNet-50 at batch 256 does not need gigabytes of host RAM.
POOL_BATCHES = 4
POOL_BYTES = 512 * 1024 * 1024


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


def _check_headers(path: str, heads: dict[str, tuple[tuple[int, ...], np.dtype]], probe_x: Any,
                   probe_y: np.ndarray) -> None:
    """The checks below, from the arrays' ``.npy`` headers alone (``bounded.read_npz``'s ``expect``):
    a file whose arrays cannot train this model is refused before any array is inflated."""
    if "labels" not in heads:
        raise BadInput(f"--data {path}: no 'labels' array; save the training targets under the key 'labels'")
    xs = {k: v for k, v in heads.items() if k != "labels"}
    probes = probe_x if isinstance(probe_x, dict) else None
    if probes is not None:
        missing = [k for k in probes if k not in xs]
        if missing:
            raise BadInput(f"--data {path}: missing input array(s) {', '.join(missing)}; the model takes "
                           f"{', '.join(probes)} (plus 'labels')")
        pairs = {k: (xs[k], _shape_tail(probes[k])) for k in probes}
    else:
        if len(xs) != 1:
            raise BadInput(f"--data {path}: expected exactly one input array besides 'labels', found "
                           f"{', '.join(xs) or 'none'}")
        pairs = {next(iter(xs)): (next(iter(xs.values())), _shape_tail(probe_x))}
    n_labels = heads["labels"][0][0] if heads["labels"][0] else None
    for k, ((shape, dtype), want) in pairs.items():
        if not shape or tuple(shape[1:]) != want:
            raise BadInput(f"--data {path}: input {k!r} has per-example shape {tuple(shape[1:])}, the model needs "
                           f"{want} (array {k!r} declares {list(shape)} {dtype.name}; nothing was read)")
        if dtype.kind not in "biuf":
            raise BadInput(f"--data {path}: array {k!r} declares dtype {dtype}; save numeric arrays")
        if n_labels is not None and shape[0] != n_labels:
            raise BadInput(f"--data {path}: input {k!r} has {shape[0]} examples but 'labels' has {n_labels}")
    if tuple(heads["labels"][0][1:]) != _shape_tail(probe_y):
        raise BadInput(f"--data {path}: 'labels' per-example shape {tuple(heads['labels'][0][1:])}, the loss needs "
                       f"{_shape_tail(probe_y)}")


def _load_npz_pool(path: str, probe_x: Any, probe_y: np.ndarray) -> Pool:
    """The user's .npz as a Pool, checked against the structure of ``models.training_batch``."""
    # headers first: a crafted file (a bomb, a declared shape it does not hold, over 2 GiB) is one
    # exit-2 line naming the array, not a MemoryError
    arrays = read_npz(path, expect=lambda heads: _check_headers(path, heads, probe_x, probe_y))[0]
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
