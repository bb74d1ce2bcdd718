"""Stateful graphs (issue 28.1): a fused LSTM keeps its state in variable tensors from one
invoke() to the next, and a graph with resource variables keeps them too. TensorFlow scores each
sample from a clean state, so every sample's LiteRT outputs must start clean as well -- else the
FP32 file "disagrees with TensorFlow" and INT8 is blamed for what the carried state did."""

from __future__ import annotations

import json

import numpy as np
import pytest

from conftest import make_job
from edgebench.model import tflite_model
from edgebench.targets.host import HostTarget

pytest_plugins = ["conftest_bench"]

# Conversions here take the default path: calibrated precisions in the conversion worker.
pytestmark = pytest.mark.usefixtures("isolated_conversions")


@pytest.fixture(scope="module")
def lstm(tmp_path_factory):
    """A tiny trained Keras-2 (tf-keras) LSTM classifier as a SavedModel, its data and labels."""
    import tensorflow as tf
    import tf_keras as k

    d = tmp_path_factory.mktemp("lstm")
    rng = np.random.RandomState(0)
    x = rng.rand(48, 12, 3).astype("f4")
    y = (x[:, :, 0].mean(1) > 0.5).astype("i8") + 2 * (x[:, -3:, 1].mean(1) > 0.5)
    k.utils.set_random_seed(0)
    m = k.Sequential([k.layers.Input((12, 3)), k.layers.LSTM(16), k.layers.Dense(4)])
    m.compile("adam", k.losses.SparseCategoricalCrossentropy(from_logits=True))
    m.fit(x, y, epochs=5, verbose=0)
    tf.saved_model.save(m, str(d / "sm"))
    np.savez(d / "data.npz", x=x, labels=y)
    return d


def test_lstm_outputs_start_from_a_clean_state_every_sample(run_cli, lstm, tmp_path):
    code, out, err = run_cli("convert-and-compare", str(lstm / "sm"), "--data", str(lstm / "data.npz"),
                             "-p", "fp32,int8", "--out", str(tmp_path / "o"), "--json", str(tmp_path / "r.json"),
                             "--min-time", "0.05", "--min-runs", "50")
    assert code == 0, out + err
    doc = json.loads((tmp_path / "r.json").read_text())
    rows = {r["precision"]: r for r in doc["rows"]}
    tf_top1 = doc["reference"]["accuracy"]["top1"]
    for p in ("fp32", "int8"):
        st = rows[p]["state"]
        assert st["kind"] == "variable_tensors" and "UNIDIRECTIONAL_SEQUENCE_LSTM" in st["ops"], st
        assert "reset" in st["handling"]
    fp32 = rows["fp32"]
    assert fp32["status"] == "ok", fp32["error"]                   # carried state failed FP32 parity
    assert fp32["accuracy"]["top1"] == tf_top1
    assert min(d["psnr_db"] for d in fp32["drift"].values()) > 100   # the same numbers as TensorFlow
    assert doc["reference"]["state"] is None
    assert "stateful graph (UNIDIRECTIONAL_SEQUENCE_LSTM) in fp32, int8" in out


@pytest.fixture(scope="module")
def accumulator(tmp_path_factory):
    """A graph whose tf.Variable adds every input to itself (VAR_HANDLE / ASSIGN_VARIABLE)."""
    import tensorflow as tf

    class Acc(tf.Module):
        def __init__(self):
            self.v = tf.Variable(tf.zeros([1, 4]))

        @tf.function(input_signature=[tf.TensorSpec([1, 4], tf.float32, name="x")])
        def __call__(self, x):
            self.v.assign_add(x)
            return {"y": self.v * 1.0}

    m = Acc()
    conv = tf.lite.TFLiteConverter.from_concrete_functions([m.__call__.get_concrete_function()], m)
    d = tmp_path_factory.mktemp("acc")
    (d / "acc.tflite").write_bytes(conv.convert())
    np.savez(d / "x.npz", x=np.ones((4, 4), np.float32))
    return d


def test_resource_variables_are_read_from_the_file(accumulator):
    st = tflite_model.state(tflite_model.inspect(accumulator / "acc.tflite"))
    assert st["kind"] == "resource_variables" and {"VAR_HANDLE", "ASSIGN_VARIABLE"} <= set(st["ops"])


def test_resource_variable_graph_starts_every_sample_from_its_initial_state(accumulator):
    """Issue 33: the variables' init subgraph is re-run in place (no new interpreter per sample)."""
    res = HostTarget().run(make_job(str(accumulator / "acc.tflite"), inputs_npz=str(accumulator / "x.npz"),
                                    save_outputs=True, runs=20, warmup_runs=1))
    assert res.status == "ok", res.error
    y = res.outputs["y"]
    assert y.shape[0] == 4 and np.allclose(y, 1.0), y.ravel()      # carried over, it would read 1, 2, 3, 4
    st = res.extra["state"]
    assert st["kind"] == "resource_variables" and st["fresh_interpreters"] == 0 and st["init_subgraphs"] == [1]
    assert "init subgraph re-run" in st["handling"]


def test_stateless_graphs_say_nothing(bench_models):
    assert tflite_model.state(tflite_model.inspect(bench_models["fp32"])) is None
    res = HostTarget().run(make_job(str(bench_models["fp32"]), runs=20, warmup_runs=1))
    assert "state" not in res.extra


# ---------------------------------------------------------------- Keras 3 LSTM (issue 28.2, 28.3)

@pytest.fixture(scope="module")
def keras3_lstm(tmp_path_factory):
    import keras

    d = tmp_path_factory.mktemp("k3lstm")
    keras.utils.set_random_seed(0)
    m = keras.Sequential([keras.Input((12, 3)), keras.layers.LSTM(8), keras.layers.Dense(4)])
    m.save(d / "lstm.keras")
    np.savez(d / "data.npz", x=np.random.RandomState(0).rand(24, 12, 3).astype("f4"))
    return d


def test_keras3_lstm_is_retraced_at_the_static_batch_and_int8_fails_with_the_converters_reason(
        run_cli, keras3_lstm, tmp_path):
    code, out, err = run_cli("convert-and-compare", str(keras3_lstm / "lstm.keras"), "--data",
                             str(keras3_lstm / "data.npz"), "-p", "fp32,int8", "--out", str(tmp_path / "o"),
                             "--json", str(tmp_path / "r.json"), "--min-time", "0.05", "--min-runs", "50")
    assert code == 2, out + err            # a failed variant: the others reported, exit 2
    rows = {r["precision"]: r for r in json.loads((tmp_path / "r.json").read_text())["rows"]}
    assert rows["fp32"]["status"] == "ok", rows["fp32"]["error"]   # the Keras model re-traced at batch 1
    assert min(d["psnr_db"] for d in rows["fp32"]["drift"].values()) > 100
    int8 = rows["int8"]
    assert int8["status"] == "failed"
    assert "'tf.TensorListReserve' op requires element_shape to be static" in int8["error"]
    assert "loc(" not in int8["error"] and "loc(" not in err
    manifest = json.loads((tmp_path / "o" / "manifest.json").read_text())
    detail = manifest["variants"]["int8"]["error_detail"]       # the converter's whole text is kept
    assert "element_shape to be static" in detail and len(detail) > len(int8["error"])


def test_converter_reason_drops_compiler_locations():
    from pathlib import Path

    from edgebench.convert.run import converter_reason

    text = (Path(__file__).parent / "fixtures" / "converter" / "tensorlist_reserve_error.txt").read_text()
    reason = converter_reason(text)
    assert reason.startswith("'tf.TensorListReserve' op requires element_shape to be static during TF Lite "
                             "transformation pass (at sequential_1/lstm_1/TensorArrayV2_1); a recurrent layer traced "
                             "with a dynamic shape: fix every input dimension (--static-batch")
    assert "loc(" not in reason and "callsite" not in reason and len(reason) <= 400
    assert "Select TF ops and disabling" not in reason       # the converter's advice, for its API's users (33.2)
    assert converter_reason("ValueError: something else") is None


def test_a_custom_op_gets_one_line_that_names_it_and_what_to_do(tmp_path):
    """Issue 28.8: a .tflite with a custom op (the converter's allow_custom_ops) is refused with the
    op's name and the ways forward, not LiteRT's 'Node number 0 failed to prepare'."""
    import tensorflow as tf

    from edgebench.core.errors import BadInput

    f = tf.function(lambda x: {"y": tf.math.special.bessel_i1e(x)},
                    input_signature=[tf.TensorSpec([1, 4], tf.float32)])
    c = tf.lite.TFLiteConverter.from_concrete_functions([f.get_concrete_function()])
    c.allow_custom_ops = True
    (tmp_path / "custom.tflite").write_bytes(c.convert())
    with pytest.raises(BadInput) as got:
        HostTarget().run(make_job(str(tmp_path / "custom.tflite"), runs=20, warmup_runs=1))
    msg = str(got.value)
    assert "uses the custom op BesselI1e" in msg and "built-in ops only" in msg and "failed to prepare" not in msg
