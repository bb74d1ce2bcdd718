"""The TensorFlow side of a cell: the distribution strategy and process-wide TF settings
(determinism, GPU memory growth), the compiled train step, the end-of-window sync and the
all-reduce measurement."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from edgebench.core.errors import BadInput
from edgebench.train.settings import STRATEGIES

ALLREDUCE_WARMUP = 2


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
# the strategy and process-wide TensorFlow settings


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
