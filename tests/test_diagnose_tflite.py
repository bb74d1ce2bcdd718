"""`diagnose INT8.tflite --reference FP32.tflite` (issue 24 item 12): a vendor's quantized and float
.tflite files, no SavedModel -- per-layer error by matching tensors, the unmatched ones named."""

from __future__ import annotations

import json

import numpy as np
import pytest


@pytest.fixture(scope="module")
def vendor_pair(tmp_path_factory):
    """A float and an int8 .tflite of one small conv model, converted straight from Keras (as a
    vendor ships them), and a .npz of real-range inputs."""
    import keras
    import tensorflow as tf

    keras.utils.set_random_seed(0)
    inp = keras.Input((8, 8, 1), batch_size=1, name="image")
    x = keras.layers.Conv2D(8, 3, padding="same", activation="relu")(inp)
    x = keras.layers.Flatten()(x)
    out = keras.layers.Dense(4, activation="softmax", name="scores")(x)
    model = keras.Model(inp, out)
    d = tmp_path_factory.mktemp("vendor")
    rng = np.random.default_rng(0)
    data = rng.uniform(0, 1, (32, 8, 8, 1)).astype(np.float32)
    fp32 = d / "model_fp32.tflite"
    fp32.write_bytes(tf.lite.TFLiteConverter.from_keras_model(model).convert())
    conv = tf.lite.TFLiteConverter.from_keras_model(model)
    conv.optimizations = [tf.lite.Optimize.DEFAULT]
    conv.representative_dataset = lambda: ([data[i:i + 1]] for i in range(16))
    conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    int8 = d / "model_int8.tflite"
    int8.write_bytes(conv.convert())
    npz = d / "eval.npz"
    np.savez(npz, image=data, labels=rng.integers(0, 4, 32))
    return fp32, int8, npz


def test_diagnose_a_vendor_int8_tflite_against_its_float_tflite(vendor_pair, run_cli, tmp_path):
    fp32, int8, npz = vendor_pair
    js = tmp_path / "d.json"
    code, out, err = run_cli("diagnose", str(int8), "--reference", str(fp32), "--data", str(npz), "--samples", "8",
                             "--out", str(tmp_path / "o"), "--json", str(js), "--no-store")
    assert code == 0, err
    doc = json.loads(js.read_text())
    (row,) = doc["rows"]
    assert row["precision"] == "int8" and row["status"] == "ok"
    assert row["layers"] and all("ranking_snr_db" in l for l in row["layers"])
    assert row["fix_commands"] == [] and row["suggested_keep_float"] == []     # nothing runnable to offer
    assert doc["source"]["kind"] == "tflite" and doc["source"]["reference"] == str(fp32)
    assert row["size_reduction_pct"] > 50
    assert "against --reference" in out and "matched by name, then by op type and shape" in out
    matched = {l["op"] for l in row["layers"]}
    assert "CONV_2D" in matched and "FULLY_CONNECTED" in matched


@pytest.mark.parametrize("case", ["no reference", "reference quantized", "src float"])
def test_a_tflite_pair_that_cannot_be_diagnosed_is_one_line_exit_2(vendor_pair, run_cli, tmp_path, case):
    fp32, int8, npz = vendor_pair
    args = {"no reference": [str(int8)], "reference quantized": [str(int8), "--reference", str(int8)],
            "src float": [str(fp32), "--reference", str(fp32)]}[case]
    code, _, err = run_cli("diagnose", *args, "--data", str(npz), "--out", str(tmp_path / "o"), "--no-store")
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert {"no reference": "--reference FP32.tflite", "reference quantized": "not float",
            "src float": "no quantization error"}[case] in err
