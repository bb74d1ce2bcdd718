"""A digits CNN with a planted quantization-hostile layer (not a registered reference model).

The demo and test model of ``edgebench diagnose``: a small CNN trained on scikit-learn's digits
whose ``hostile`` conv (+ReLU) has its most active output channel multiplied by ``factor`` after
training, while ``consumer`` (the next 1x1 conv) divides that input channel by ``factor``. The
float function is unchanged (ReLU(k z) = k ReLU(z) for k > 0), but INT8's one scale per
activation tensor now spends ~log2(factor) of its 8 bits on that channel and rounds the other 31
to zero: INT8 top-1 collapses to about chance.

    python -m reference_models.planted_outlier OUT_DIR [--factor 3000]

writes ``OUT_DIR/planted`` (SavedModel), ``OUT_DIR/eval.npz`` (the 360 test images + labels) and
``OUT_DIR/cal.npz`` (200 training images).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import numpy as np

DEFAULT_FACTOR = 3000.0
EPOCHS = 12


def build_planted(out: Path, factor: float = DEFAULT_FACTOR, seed: int = 0) -> dict[str, Any]:
    import keras  # noqa: PLC0415

    from reference_models.datasets import load_split  # noqa: PLC0415

    x_tr, y_tr, x_te, y_te = load_split()
    keras.utils.set_random_seed(seed)
    inp = keras.Input((8, 8, 1), name="image")
    x = keras.layers.Conv2D(16, 3, padding="same", activation="relu", name="conv1")(inp)
    x = keras.layers.Conv2D(32, 3, padding="same", activation="relu", name="hostile")(x)
    x = keras.layers.Conv2D(32, 1, activation="relu", name="consumer")(x)
    x = keras.layers.MaxPooling2D()(x)
    x = keras.layers.Flatten()(x)
    x = keras.layers.Dense(64, activation="relu", name="dense")(x)
    out_t = keras.layers.Dense(10, activation="softmax", name="scores")(x)
    model = keras.Model(inp, out_t)
    model.compile(optimizer=keras.optimizers.Adam(3e-3), loss="sparse_categorical_crossentropy")
    model.fit(x_tr, y_tr, epochs=EPOCHS, batch_size=32, verbose=0)
    feats = keras.Model(inp, model.get_layer("hostile").output).predict(x_tr[:200], verbose=0)
    ch = int(np.argmax(feats.mean(axis=(0, 1, 2))))   # the most active channel: planting it matters
    k, b = model.get_layer("hostile").get_weights()
    k[..., ch] *= factor
    b[ch] *= factor
    model.get_layer("hostile").set_weights([k, b])
    k2, b2 = model.get_layer("consumer").get_weights()
    k2[:, :, ch, :] /= factor
    model.get_layer("consumer").set_weights([k2, b2])
    acc = float(np.mean(model.predict(x_te, verbose=0).argmax(axis=1) == y_te))
    out.mkdir(parents=True, exist_ok=True)
    model.export(str(out / "planted"), format="tf_saved_model", verbose=False)
    np.savez(out / "eval.npz", image=x_te, labels=y_te)
    np.savez(out / "cal.npz", image=x_tr[:200])
    return {"model": out / "planted", "eval": out / "eval.npz", "cal": out / "cal.npz", "channel": ch,
            "factor": factor, "test_accuracy": acc}


def main(argv: list[str] | None = None) -> None:
    import os  # noqa: PLC0415

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    ap = argparse.ArgumentParser(prog="python -m reference_models.planted_outlier", description=__doc__.splitlines()[0])
    ap.add_argument("out_dir")
    ap.add_argument("--factor", type=float, default=DEFAULT_FACTOR)
    args = ap.parse_args(argv)
    info = build_planted(Path(args.out_dir), args.factor)
    print(f"{info['model']}: channel {info['channel']} x{info['factor']:g}, float test top-1 "
          f"{info['test_accuracy']:.2%}; data: {info['eval']} (evaluation), {info['cal']} (calibration)")


if __name__ == "__main__":
    main()
