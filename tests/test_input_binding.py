"""Positional input data bound in the model's own input order (issue 24 item 3).

A model whose inputs are ``zeta`` then ``alpha`` (same shape): ``np.savez(path, z, a)`` stores
``arr_0``, ``arr_1``. The SignatureDef lists inputs alphabetically, so binding in its order fed
``arr_0`` to ``alpha`` -- to TF and TFLite alike, so drift looked perfect. Now every path binds in
the model's order (a Keras model's inputs, the SavedModel's serving function, the .tflite's
subgraph inputs), says how, and refuses when no order is known and two inputs could swap."""

from __future__ import annotations

import json

import numpy as np
import pytest

N = 16


@pytest.fixture(scope="module")
def zeta_alpha(tmp_path_factory):
    """A .keras file with inputs zeta, alpha (both [4]) and output zeta * 2 - alpha; the
    positional .npz (arr_0 = zeta's data, arr_1 = alpha's) and what the outputs must be."""
    import keras

    keras.utils.set_random_seed(0)
    zeta, alpha = keras.Input((4,), name="zeta"), keras.Input((4,), name="alpha")
    out = keras.layers.Subtract(name="out")([keras.layers.Rescaling(2.0)(zeta), alpha])
    model = keras.Model([zeta, alpha], out)
    d = tmp_path_factory.mktemp("binding")
    path = d / "za.keras"
    model.save(path)
    model.export(str(d / "za_sm"), verbose=False)          # a Keras 3 SavedModel export
    rng = np.random.default_rng(0)
    z = rng.uniform(0, 1, (N, 4)).astype(np.float32)
    a = rng.uniform(5, 6, (N, 4)).astype(np.float32)       # far apart: a swap changes the sign
    np.savez(d / "positional.npz", z, a)
    want = z * 2 - a
    return path, d / "positional.npz", want


def test_keras_source_records_its_input_order_and_binds_positional_data(zeta_alpha, tmp_path):
    from edgebench.model.savedmodel import run_tf
    from edgebench.sources.resolve import resolve_source, sample_set

    path, npz, want = zeta_alpha
    src = resolve_source(str(path), work_dir=tmp_path)
    assert [t.name for t in src.signature.inputs] == ["alpha", "zeta"]       # the SignatureDef's order
    assert src.signature.order == ("zeta", "alpha")                         # the model's own
    ds = sample_set(src, str(npz), preprocess="none", seed=0, split="evaluation")
    assert ds.binding == {"how": "position (the model's input order)", "pairs": {"arr_0": "zeta", "arr_1": "alpha"}}
    out = run_tf(src.saved_model_dir, src.signature, ds, signature_key=src.signature_key, loader=src.loader,
                 tags=src.tags)
    np.testing.assert_allclose(next(iter(out.values())), want, rtol=1e-5)


def test_tflite_binds_positional_data_in_subgraph_order(zeta_alpha, tmp_path, run_cli):
    """The converted .tflite: its signature lists alpha, zeta; its subgraph inputs keep zeta, alpha.
    `bench --data` hands the positional file to the worker, which binds by the subgraph order and
    says so in the row; `compare` binds in edgebench and stores the binding."""
    from edgebench.sources.resolve import tflite_signature

    path, npz, want = zeta_alpha
    out = tmp_path / "conv"
    code, _, err = run_cli("convert", str(path), "--precision", "fp32", "--out", str(out))
    assert code == 0, err
    tfl = next(out.rglob("*fp32*.tflite"))
    assert tflite_signature(str(tfl)).order == ("zeta", "alpha")
    js = tmp_path / "bench.json"
    code, _, err = run_cli("bench", str(tfl), "--data", str(npz), "--runs", "20", "--min-time", "0",
                           "--json", str(js), "--no-store")
    assert code == 0, err
    mapping = json.loads(js.read_text())["rows"][0]["input_mapping"]
    assert mapping["how"] == "order" and mapping["pairs"] == {"arr_0": "zeta", "arr_1": "alpha"}
    js2 = tmp_path / "compare.json"
    code, stdout, err = run_cli("compare", str(path.parent / "za_sm"), str(tfl), "--data", str(npz), "--json", str(js2),
                                "--no-store")
    assert code == 0, err
    doc = json.loads(js2.read_text())
    assert doc["inputs"]["binding"]["pairs"] == {"arr_0": "zeta", "arr_1": "alpha"}
    assert "bound to the model's inputs by position" in stdout
    psnr = doc["rows"][1]["worst"]["psnr_db"]
    assert psnr == "inf" or float(psnr) > 60                # TF and TFLite got the same, right, inputs


def test_no_order_and_interchangeable_inputs_is_refused_in_one_line(tmp_path, run_cli, tiny_two_input_savedmodel):
    """A SavedModel whose serving function does not record positional order (a TF1-style
    signature): positional data for two same-shaped inputs is refused, naming the fix."""
    sm, names = tiny_two_input_savedmodel
    npz = tmp_path / "p.npz"
    np.savez(npz, np.zeros((4, 6), np.float32), np.ones((4, 6), np.float32))
    code, _, err = run_cli("compare", str(sm), str(sm), "--data", str(npz), "--no-store")
    assert code == 2 and "records no input order" in err and "np.savez(PATH, " in err
    assert len(err.strip().splitlines()) == 1


@pytest.fixture
def tiny_two_input_savedmodel(tmp_path):
    """A SavedModel with a signature of two [6] inputs written from a keyword-only tf.function (no
    positional order is recorded)."""
    import tensorflow as tf

    class M(tf.Module):
        @tf.function(input_signature=[])
        def unused(self):
            return tf.constant(0.0)

    m = M()

    @tf.function
    def serve(**kw):
        return {"y": kw["b"] * 2.0 - kw["a"]}

    fn = serve.get_concrete_function(a=tf.TensorSpec([None, 6], tf.float32, name="a"),
                                     b=tf.TensorSpec([None, 6], tf.float32, name="b"))
    path = tmp_path / "kw_sm"
    tf.saved_model.save(m, str(path), signatures={"serving_default": fn})
    return path, ("a", "b")


@pytest.fixture(scope="module")
def alpha_zeta(tmp_path_factory):
    """A Keras model with inputs alpha, zeta (both [4]; output alpha * 2 - zeta) exported as a
    SavedModel, its positional .npz (arr_0 = alpha's data) and what the outputs must be. TF 2.21's
    converter lists this model's inputs zeta, alpha in the .tflite it writes."""
    import keras

    alpha, zeta = keras.Input((4,), name="alpha"), keras.Input((4,), name="zeta")
    model = keras.Model([alpha, zeta], keras.layers.Subtract(name="out")([keras.layers.Rescaling(2.0)(alpha), zeta]))
    d = tmp_path_factory.mktemp("alpha_zeta")
    model.export(str(d / "sm"), verbose=False)
    rng = np.random.default_rng(0)
    a = rng.uniform(0, 1, (N, 4)).astype(np.float32)
    z = rng.uniform(5, 6, (N, 4)).astype(np.float32)
    np.savez(d / "positional.npz", a, z)
    return d, a * 2 - z


def test_a_savedmodel_and_its_own_tflite_bind_positional_data_alike(alpha_zeta, tmp_path, run_cli):
    """Issue 33.7: the SavedModel bound arr_0 to alpha (its serving function's order), the .tflite
    converted from it to zeta (the converter's own input order): the same .npz fed swapped inputs
    to `bench model.tflite`. Converted files now list their inputs in the source's order."""
    import tensorflow as tf

    from edgebench.sources.resolve import resolve_source, sample_set, tflite_signature

    d, want = alpha_zeta
    src = resolve_source(str(d / "sm"), work_dir=tmp_path)
    assert src.signature.order == ("alpha", "zeta")
    ds = sample_set(src, str(d / "positional.npz"), preprocess="none", seed=0, split="evaluation")
    assert ds.binding["pairs"] == {"arr_0": "alpha", "arr_1": "zeta"}
    raw = tmp_path / "raw.tflite"
    raw.write_bytes(tf.lite.TFLiteConverter.from_saved_model(str(d / "sm")).convert())
    assert tflite_signature(str(raw)).order == ("zeta", "alpha")       # the converter's order: the trap
    code, _, err = run_cli("convert", str(d / "sm"), "-p", "fp32", "--out", str(tmp_path / "conv"))
    assert code == 0, err
    tfl = next((tmp_path / "conv").rglob("*fp32*.tflite"))
    assert tflite_signature(str(tfl)).order == ("alpha", "zeta")
    js = tmp_path / "bench.json"
    code, _, err = run_cli("bench", str(tfl), "--data", str(d / "positional.npz"), "--runs", "20", "--min-time", "0",
                           "--json", str(js), "--no-store")
    assert code == 0, err
    assert json.loads(js.read_text())["rows"][0]["input_mapping"]["pairs"] == {"arr_0": "alpha", "arr_1": "zeta"}
    from ai_edge_litert.interpreter import Interpreter

    it = Interpreter(model_path=str(tfl))          # LiteRT's positional view follows the source too
    it.allocate_tensors()
    (i0, i1), (o,) = it.get_input_details(), it.get_output_details()
    it.set_tensor(i0["index"], ds.arrays["alpha"][:1])
    it.set_tensor(i1["index"], ds.arrays["zeta"][:1])
    it.invoke()
    np.testing.assert_allclose(it.get_tensor(o["index"]), want[:1], rtol=1e-5)


def test_shapes_that_tell_inputs_apart_bind_every_file_alike(tmp_path, run_cli):
    """A .tflite converted elsewhere keeps the converter's order; when one sample's shape tells the
    inputs apart, positional arrays bind by shape on every path (before, `bench` bound by that order
    and refused the SavedModel's own data as the wrong shape)."""
    import tensorflow as tf

    class M(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([None, 4], tf.float32, name="alpha"),
                                      tf.TensorSpec([None, 3], tf.float32, name="zeta")])
        def serve(self, alpha, zeta):
            return {"y": tf.reduce_sum(alpha, 1, keepdims=True) - tf.reduce_sum(zeta, 1, keepdims=True)}

    m = M()
    tf.saved_model.save(m, str(tmp_path / "sm"), signatures={"serving_default": m.serve})
    tfl = tmp_path / "m.tflite"
    tfl.write_bytes(tf.lite.TFLiteConverter.from_saved_model(str(tmp_path / "sm")).convert())
    from edgebench.sources.resolve import tflite_signature

    assert tflite_signature(str(tfl)).order == ("zeta", "alpha")      # not the SavedModel's order
    np.savez(tmp_path / "p.npz", np.ones((8, 4), np.float32), np.zeros((8, 3), np.float32))
    js = tmp_path / "bench.json"
    code, _, err = run_cli("bench", str(tfl), "--data", str(tmp_path / "p.npz"), "--runs", "20", "--min-time", "0",
                           "--json", str(js), "--no-store")
    assert code == 0, err
    mapping = json.loads(js.read_text())["rows"][0]["input_mapping"]
    assert mapping == {"how": "shape", "pairs": {"arr_0": "alpha", "arr_1": "zeta"}}
