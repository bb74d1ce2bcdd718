"""A Keras 2 (tf-keras) model exported as a SavedModel, optionally traced at fixed input shapes.

``sources`` loads a Keras-2-era ``.h5``/``.keras`` file that Keras 3 refuses (an LSTM's ``time_major``
config, a ``DepthwiseConv2D``'s ``groups``) with tf-keras -- a plain load of a file without code --
and exports it. When the conversion is measured at batch 1 the model is also traced *at* the fixed
shapes (what ``model.export`` does, with the batch-1 specs as the endpoint's input signature):
re-calling the dynamic-batch export at a fixed shape keeps its inner traces, and a Keras 2
LSTM/GRU's ``TensorListReserve`` then has no static element shape, so every precision failed to
convert with the converter's "element_shape to be static" error (with or without --static-batch).
"""

from __future__ import annotations

import contextlib
import io
from pathlib import Path
from typing import Any


def export_tf_keras(model: Any, out: Path, shapes: dict[str, tuple[int, ...]] | None = None) -> None:
    """``model.export(out)``, with the ``serve`` endpoint traced at ``shapes`` (keyed by input name,
    else taken in input order) when given -- the same endpoint and signature names as tf-keras'
    own export, so the two SavedModels are interchangeable."""
    with contextlib.redirect_stdout(io.StringIO()):   # tf-keras prints the exported endpoints
        if not shapes:
            model.export(str(out))
            return
        import tensorflow as tf
        from tf_keras.export import ExportArchive

        names = list(shapes)
        specs = [tf.TensorSpec(shapes.get(t.name) or shapes[names[min(i, len(names) - 1)]], t.dtype, name=t.name)
                 for i, t in enumerate(model.inputs)]
        archive = ExportArchive()
        archive.track(model)
        archive.add_endpoint("serve", model.__call__, [specs] if len(specs) > 1 else specs)
        archive.write_out(str(out))
