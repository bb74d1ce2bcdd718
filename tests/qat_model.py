"""A small tensorflow-model-optimization QAT CNN for tests/test_keras2_recurrent.py, built in its own
process (tf-keras and tfmot stay out of the pytest process):

    python tests/qat_model.py OUT_DIR      -> OUT_DIR/qat (SavedModel), OUT_DIR/data.npz; prints the paths

The conv's output is fake-quantized after the Flatten (QUANTIZE/DEQUANTIZE follow the RESHAPE in the
fp32 .tflite), the logits right after the Dense."""

from __future__ import annotations

import json
import sys
from pathlib import Path


def build(out: Path) -> dict[str, str]:
    import numpy as np
    import tensorflow_model_optimization as tfmot
    import tf_keras as k

    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    img = rng.uniform(0, 1, (96, 8, 8, 1)).astype("float32")
    lab = (img.reshape(96, -1).mean(axis=1) > 0.5).astype("int64") + 2 * (img[:, 0, 0, 0] > 0.5)
    k.utils.set_random_seed(0)
    base = k.Sequential([k.layers.Input((8, 8, 1), name="image"), k.layers.Conv2D(4, 3, activation="relu"),
                         k.layers.Flatten(), k.layers.Dense(4, name="logits")])
    q = tfmot.quantization.keras.quantize_model(base)
    q.compile("adam", k.losses.SparseCategoricalCrossentropy(from_logits=True))
    q.fit(img, lab, epochs=3, batch_size=16, verbose=0)
    q.save(str(out / "qat"), save_format="tf")
    np.savez(out / "data.npz", image=img[:48], labels=lab[:48])
    return {"qat": str(out / "qat"), "data": str(out / "data.npz")}


if __name__ == "__main__":
    print(json.dumps(build(Path(sys.argv[1]))))
