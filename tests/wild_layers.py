"""A custom Keras layer that is NOT registered with Keras: a .keras file using it can only be
loaded when this module is passed with --import (tests/test_sources.py)."""

from __future__ import annotations

import keras


class ScaledTanh(keras.layers.Layer):
    def __init__(self, scale: float = 2.0, **kwargs):
        super().__init__(**kwargs)
        self.scale = scale

    def call(self, x):
        return keras.ops.tanh(x) * self.scale

    def get_config(self):
        return {**super().get_config(), "scale": self.scale}
