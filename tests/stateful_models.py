"""Small stateful models for tests/test_state_rule.py, built at test time with real TensorFlow.

- ``ring(out, name, seed)``: a streaming detector that keeps the last ``RING`` frames in a
  ``tf.Variable`` ring buffer (a SavedModel and its .tflite, which holds resource variables:
  VAR_HANDLE / ASSIGN_VARIABLE and an init subgraph run by CALL_ONCE). Its score ignores the newest
  frame alone, so with a fresh state on every window it outputs one constant -- the wake-word
  models of issue 33: two different detectors then look identical. ``seed`` sets the weights.
- ``counter(out)``: a streaming classifier whose state is the running sum of its frames (never
  forgets): two logits, class 1 while the sum is small, class 0 once it is large. Carrying state
  across streams, or not resetting it, changes most decisions.
- ``keras_stateful_lstm(out)``: a tf-keras ``LSTM(stateful=True)`` classifier at batch 1 (random
  weights), saved as a SavedModel: TensorFlow keeps its state in variables between calls.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

RING, FRAME = 4, 3


def _save(module, fn, out: Path, name: str) -> tuple[Path, Path]:
    import tensorflow as tf

    sm = out / f"{name}_sm"
    tf.saved_model.save(module, str(sm), signatures=fn.get_concrete_function())
    tfl = out / f"{name}.tflite"
    tfl.write_bytes(tf.lite.TFLiteConverter.from_saved_model(str(sm)).convert())
    return sm, tfl


def ring(out: Path, name: str, seed: int) -> tuple[Path, Path]:
    import tensorflow as tf

    w = np.random.default_rng(seed).uniform(0.5, 1.5, (1, RING, FRAME)).astype("f4")
    w[:, -1, :] = 0.0                     # the newest frame alone never fires

    class Ring(tf.Module):
        def __init__(self):
            self.buf = tf.Variable(tf.zeros([1, RING, FRAME]), trainable=False, name="ring")
            self.w = tf.constant(w)

        @tf.function(input_signature=[tf.TensorSpec([1, FRAME], tf.float32, name="frame")])
        def __call__(self, frame):
            new = tf.concat([self.buf[:, 1:, :], frame[:, None, :]], axis=1)
            self.buf.assign(new)
            return {"score": tf.sigmoid(tf.reduce_sum(new * self.w, axis=[1, 2])[:, None] - 4.0)}

    m = Ring()
    return _save(m, m.__call__, out, name)


def counter(out: Path) -> tuple[Path, Path]:
    import tensorflow as tf

    class Counter(tf.Module):
        def __init__(self):
            self.total = tf.Variable(tf.zeros([1, 1]), trainable=False, name="total")

        @tf.function(input_signature=[tf.TensorSpec([1, FRAME], tf.float32, name="frame")])
        def __call__(self, frame):
            self.total.assign_add(tf.reduce_sum(frame, axis=1, keepdims=True))
            return {"logits": tf.concat([self.total, tf.fill([1, 1], 7.5)], axis=1)}

    m = Counter()
    return _save(m, m.__call__, out, "counter")


def keras_stateful_lstm(out: Path, steps: int = 6, features: int = 3) -> Path:
    import tensorflow as tf
    import tf_keras as k

    k.utils.set_random_seed(0)
    m = k.Sequential([k.layers.LSTM(8, stateful=True, batch_input_shape=(1, steps, features)),
                      k.layers.Dense(4)])
    sm = out / "stateful_lstm_sm"
    tf.saved_model.save(m, str(sm))
    return sm


def frames(streams: int, windows: int, seed: int = 0) -> np.ndarray:
    """[streams, windows, FRAME] uniform frames."""
    return np.random.default_rng(seed).uniform(0, 1, (streams, windows, FRAME)).astype("f4")
