"""Models from the wild, end to end through convert, convert-and-compare and compare.

Built at test time with the real packages (TensorFlow 2.21, tf-keras, tensorflow-model-
optimization, Keras 3, LiteRT): a Keras-2-era SavedModel with optimizer slots (restored only
through the graph loader when tf-keras is absent), a TF1 Builder SavedModel, a multi-signature
module, a dynamic sequence model, a .keras with an unregistered custom layer, a QAT model, and
.tflite files as sources.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from edgebench.core.errors import BadInput
from edgebench.convert.run import precision_of as tflite_precision
from edgebench.sources.resolve import parse_input_shape, resolve_source
from edgebench.model.tflite_model import restore_signature

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent
FAST = ["--runs", "20", "--no-store"]


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    return env


def _script(*args: str, timeout: int = 900) -> dict:
    proc = subprocess.run([sys.executable, str(TESTS / "wild_models.py"), *args], capture_output=True,
                          text=True, timeout=timeout, env=_env(), cwd=str(REPO))
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _signature(tflite: str | Path) -> dict:
    from ai_edge_litert.interpreter import Interpreter

    return Interpreter(model_path=str(tflite)).get_signature_list()


def _json(path: Path) -> dict:
    return json.loads(Path(path).read_text())


def _psnr(row: dict) -> float:
    """Worst-output PSNR of a result row (JSON writes infinity as "inf")."""
    return float(row["worst"]["psnr_db"])


def _npz(path: Path, **arrays) -> str:
    np.savez(path, **arrays)
    return str(path)


# --------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def wild(tmp_path_factory) -> dict[str, str]:
    """Keras 2 (tf-keras, legacy Adam slots) and tfmot QAT SavedModels, built in their own process."""
    return _script("build", str(tmp_path_factory.mktemp("wild")))


@pytest.fixture(scope="module")
def tf_models(tmp_path_factory) -> dict[str, Path]:
    """TF1 Builder SavedModels (static and dynamic), a multi-signature module, a dynamic sequence module."""
    import tensorflow as tf

    out = tmp_path_factory.mktemp("tfmodels")
    tf1 = tf.compat.v1
    paths: dict[str, Path] = {}
    g = tf.Graph()
    with g.as_default():
        x = tf1.placeholder(tf.float32, [None, 6], name="features")
        # 6x256 weights: large enough (>= 1024 elements) for dynamic-range quantization to touch them
        w1 = tf1.get_variable("w1", initializer=tf.random.stateless_normal([6, 256], seed=[1, 1]) * 0.5)
        w2 = tf1.get_variable("w2", initializer=tf.random.stateless_normal([256, 3], seed=[1, 2]) * 0.1)
        b = tf1.get_variable("b", initializer=tf.constant([0.1, -0.2, 0.3]))
        logits = tf.matmul(tf.nn.relu(tf.matmul(x, w1)), w2) + b
        w = tf1.get_variable("w", initializer=tf.random.stateless_normal([6, 3], seed=[1, 3]))
        probs = tf.nn.softmax(logits, name="probs")
        seq = tf1.placeholder(tf.float32, [None, None, 6], name="seq")
        mask = tf1.placeholder(tf.float32, [None, None], name="mask")
        pooled = tf.reduce_sum(tf.einsum("bti,io->bto", seq, w) * tf.expand_dims(mask, -1), axis=1, name="pooled")
        with tf1.Session(graph=g) as s:
            s.run(tf1.global_variables_initializer())
            for name, sig in (("tf1", tf1.saved_model.predict_signature_def({"features": x},
                                                                           {"probs": probs, "logits": logits})),
                              ("tf1dyn", tf1.saved_model.predict_signature_def({"seq": seq, "mask": mask},
                                                                              {"pooled": pooled}))):
                paths[name] = out / name
                bld = tf1.saved_model.Builder(str(paths[name]))
                bld.add_meta_graph_and_variables(s, ["serve"], signature_def_map={"serving_default": sig})
                bld.save()

    class Seq(tf.Module):
        def __init__(self):
            super().__init__()
            self.w = tf.Variable(tf.random.stateless_normal([8, 3], seed=[1, 2]))

        @tf.function(input_signature=[tf.TensorSpec([None, None, 8], tf.float32, name="tokens")])
        def serve(self, tokens):
            h = tf.nn.relu(tf.matmul(tokens, self.w))
            return {"pooled": tf.reduce_mean(h, axis=1), "hidden": h}

        @tf.function(input_signature=[tf.TensorSpec([None, 8], tf.float32, name="x")])
        def double(self, x):
            return {"y": tf.matmul(x, self.w) * 2.0}

    m = Seq()
    paths["multi"] = out / "multi"
    tf.saved_model.save(m, str(paths["multi"]), signatures={"serving_default": m.serve, "double": m.double})
    return paths


# --------------------------------------------------------------------------- Keras 2 SavedModel


def test_keras2_savedmodel_with_optimizer_slots_uses_graph_loader_end_to_end(wild, tmp_path):
    """Without tf-keras, TF 2.21 cannot restore a Keras-2 SavedModel's optimizer slots ('add_slot');
    edgebench converts, references, compares and gates it at graph level with the real names."""
    import tensorflow as tf

    sm = wild["keras2"]
    rng = np.random.default_rng(1)
    x = rng.uniform(0, 1, (48, 8)).astype(np.float32)
    data = _npz(tmp_path / "d.npz", features=x, labels=x[:, :4].argmax(axis=1))
    # The authors' own .tflite, as the TF1 converter writes it: no signature, outputs named after TF ops.
    nosig = tmp_path / "authors.tflite"
    nosig.write_bytes(tf.compat.v1.lite.TFLiteConverter.from_saved_model(sm, signature_key="serving_default").convert())
    assert _signature(nosig) == {}
    conv, cac, cmp_tfl, cmp_nosig = (tmp_path / f"{n}.json" for n in ("conv", "cac", "cmp1", "cmp2"))
    res = _script("without-tf-keras", sm, json.dumps([
        ["convert", sm, "-p", "fp32,int8", "--data", data, "--out", str(tmp_path / "o1"), "--json", str(conv)],
        ["convert-and-compare", sm, "-p", "fp32,int8", "--data", data, "--out", str(tmp_path / "o2"), *FAST,
         "--min-psnr", "25", "--max-accuracy-drop", "15", "--json", str(cac)],
        ["compare", sm, str(tmp_path / "o1" / "keras2_fp32.tflite"), "--data", data, "--no-store", "--json", str(cmp_tfl)],
        ["compare", sm, str(nosig), "--data", data, "--no-store", "--json", str(cmp_nosig)],
    ]))
    assert "add_slot" in (res["probe"] or ""), res["probe"]   # the failure class is reproduced
    for r in res["runs"]:
        assert r["code"] == 0 and "Traceback" not in r["stderr"], r["stderr"][-2000:]
    m = _json(conv)
    assert m["source"]["loader"] == "graph" and "add_slot" in m["source"]["loader_reason"]
    assert "tf-keras" in m["source"]["loader_reason"] and m["parity"]["passed"]
    assert m["source"]["input_shapes"]["features"]["how"] == ("batch fixed to 1 for latency; the .tflite keeps a "
                                                              "dynamic batch")
    for v in m["variants"].values():   # the signature's names are back in every .tflite
        assert _signature(v["path"]) == {"serving_default": {"inputs": ["features"], "outputs": ["probs"]}}
    doc = _json(cac)
    assert doc["source"]["loader"] == "graph" and doc["gate"]["passed"]
    assert "graph loader" in doc["reference"]["method"]
    assert {r["precision"] for r in doc["rows"]} == {"fp32", "int8"}
    assert all("probs" in r["drift"] and r["output_mapping"] is None for r in doc["rows"])
    assert _psnr(doc["rows"][0]) > 80
    by_name = _json(cmp_tfl)
    assert by_name["output_mapping"]["how"] == "name" and by_name["saved_models"][0]["loader"] == "graph"
    by_order = _json(cmp_nosig)
    assert by_order["output_mapping"] == {"how": "order and shape", "pairs": {"probs": "StatefulPartitionedCall"}}
    assert _psnr(by_order["rows"][1]) > 80
    assert "matched to the reference by order and shape" in res["runs"][3]["stdout"]


def test_keras2_savedmodel_takes_tf2_path_when_tf_keras_is_installed(wild):
    """The fallback is taken only when the object graph cannot be restored: in this process
    tf-keras is importable, so TF revives the Keras 2 optimizer and the TF2 path works."""
    src = resolve_source(wild["keras2"])
    assert src.loader == "tf2" and src.loader_reason is None


def test_keras2_h5_that_keras3_cannot_read_loads_with_tf_keras(run_cli, wild, tmp_path):
    h5 = wild["h5"]
    data = _npz(tmp_path / "d.npz", image=np.random.default_rng(12).uniform(0, 1, (24, 8, 8, 3)).astype(np.float32))
    code, _, err = run_cli("convert-and-compare", h5, "-p", "fp32,int8", "--data", data, "--out", str(tmp_path / "o"),
                           *FAST, "--min-psnr", "25", "--json", str(tmp_path / "r.json"))
    assert code == 0, err
    m = _json(tmp_path / "o" / "manifest.json")
    assert m["source"]["kind"] == "keras" and m["source"]["info"]["loaded_with"].startswith("tf-keras")
    assert _json(tmp_path / "r.json")["gate"]["passed"]
    # Without tf-keras the message says exactly that, and what to install.
    res = _script("without-tf-keras", str(wild["keras2"]), json.dumps([["convert", h5, "--out", str(tmp_path / "x")]]))
    (run,) = res["runs"]
    assert run["code"] == 2 and "written by Keras 2." in run["stderr"] and "pip install tf-keras" in run["stderr"]


# --------------------------------------------------------------------------- TF1 SavedModels


def test_tf1_builder_savedmodel_graph_loader(run_cli, tf_models, tmp_path):
    rng = np.random.default_rng(2)
    data = _npz(tmp_path / "d.npz", features=rng.normal(size=(40, 6)).astype(np.float32))
    out = tmp_path / "o"
    code, _, err = run_cli("convert-and-compare", str(tf_models["tf1"]), "-p", "fp32,int8,dynamic", "--data", data,
                           "--out", str(out), *FAST, "--min-psnr", "20", "--json", str(tmp_path / "r.json"))
    assert code == 0, err
    m = _json(out / "manifest.json")
    assert m["source"]["loader"] == "graph" and "TF1 SavedModel" in m["source"]["loader_reason"]
    assert _signature(out / "tf1_fp32.tflite")["serving_default"] == {"inputs": ["features"],
                                                                     "outputs": ["logits", "probs"]}
    doc = _json(tmp_path / "r.json")
    assert doc["gate"]["passed"] and doc["reference"]["precision"] == "tf"
    assert all(set(r["drift"]) == {"logits", "probs"} for r in doc["rows"])
    code, out_txt, err = run_cli("compare", str(tf_models["tf1"]), str(out / "tf1_int8.tflite"), "--data", data,
                                 "--no-store", "--json", str(tmp_path / "c.json"))
    assert code == 0, err
    c = _json(tmp_path / "c.json")
    assert c["saved_models"][0]["loader"] == "graph" and c["rows"][1]["precision"] == "int8"
    assert _psnr(c["rows"][1]) > 20


def test_tf1_dynamic_dims_fixed_by_input_shape_with_int8_calibration(run_cli, tf_models, tmp_path):
    """Graph loader + two inputs + --input-shape: INT8 calibration feeds the inputs in the graph
    converter's order; the .tflite has static shapes and the signature's names."""
    src = str(tf_models["tf1dyn"])
    code, _, err = run_cli("convert", src, "--out", str(tmp_path / "x"))
    assert code == 2 and "input 'mask' has dynamic dims [?, ?]" in err and "--input-shape mask:1,128" in err
    rng = np.random.default_rng(3)
    data = _npz(tmp_path / "d.npz", seq=rng.normal(size=(32, 10, 6)).astype(np.float32),
                mask=(rng.uniform(size=(32, 10)) > 0.3).astype(np.float32))
    code, _, err = run_cli("convert-and-compare", src, "--input-shape", "seq:1,10,6", "--input-shape", "mask:1,10",
                           "-p", "fp32,int8", "--data", data, "--out", str(tmp_path / "o"), *FAST,
                           "--min-psnr", "25", "--json", str(tmp_path / "r.json"))
    assert code == 0, err
    m = _json(tmp_path / "o" / "manifest.json")
    assert m["variants"]["int8"]["inputs"][0]["shape_signature"] in ([1, 10, 6], [1, 10])
    assert {i["name"]: i["shape_signature"] for i in m["variants"]["int8"]["inputs"]} == {"mask": [1, 10],
                                                                                        "seq": [1, 10, 6]}
    assert m["source"]["input_shapes"]["seq"] == {"declared": [None, None, 6], "used": [1, 10, 6],
                                                  "how": "--input-shape; batch fixed to 1 for latency; static "
                                                         "batch 1 in the converted model (--dynamic-batch keeps "
                                                         "it dynamic)"}
    assert _json(tmp_path / "r.json")["gate"]["passed"]


# --------------------------------------------------------------------------- signatures and shapes


def test_multi_signature_module_with_signature_option(run_cli, tf_models, tmp_path):
    src = str(tf_models["multi"])
    code, _, err = run_cli("convert", src, "--signature", "nope", "--out", str(tmp_path / "x"))
    assert code == 2 and "no 'nope' signature (has: double, serving_default)" in err and "--signature double" in err
    data = _npz(tmp_path / "d.npz", x=np.random.default_rng(4).normal(size=(24, 8)).astype(np.float32))
    code, _, err = run_cli("convert-and-compare", src, "--signature", "double", "-p", "fp32,fp16", "--data", data,
                           "--out", str(tmp_path / "o"), *FAST, "--min-psnr", "40", "--json", str(tmp_path / "r.json"))
    assert code == 0, err
    m = _json(tmp_path / "o" / "manifest.json")
    assert m["source"]["signature_key"] == "double" and m["source"]["loader"] == "tf2"
    assert _signature(tmp_path / "o" / "multi_fp32.tflite") == {"double": {"inputs": ["x"], "outputs": ["y"]}}
    doc = _json(tmp_path / "r.json")
    assert doc["gate"]["passed"] and doc["source"]["signature_key"] == "double"
    code, _, err = run_cli("compare", src, str(tmp_path / "o" / "multi_fp16.tflite"), "--signature", "double",
                           "--data", data, "--no-store", "--json", str(tmp_path / "c.json"))
    assert code == 0, err
    assert _psnr(_json(tmp_path / "c.json")["rows"][1]) > 40


def test_dynamic_sequence_dimension_needs_and_takes_input_shape(run_cli, tf_models, tmp_path):
    src = str(tf_models["multi"])
    code, _, err = run_cli("convert", src, "--out", str(tmp_path / "x"))
    assert code == 2 and "dynamic dims [?, ?, 8]" in err and "--input-shape tokens:1,128,8" in err
    for bad, msg in (("tokens:2,16,8", "batch dim must be 1"), ("tokens:1,16,9", "dim 2 of input 'tokens' is fixed"),
                     ("tokens:1,16", "has 3 dims"), ("toks:1,16,8", "no such input"), ("tokens", "NAME:DIMS")):
        code, _, err = run_cli("convert", src, "--input-shape", bad, "--out", str(tmp_path / "x"))
        assert code == 2 and msg in err and len(err.strip().splitlines()) == 1, (bad, err)
    data = _npz(tmp_path / "d.npz", tokens=np.random.default_rng(5).normal(size=(16, 16, 8)).astype(np.float32))
    code, _, err = run_cli("convert-and-compare", src, "--input-shape", "tokens:1,16,8", "-p", "fp32,int8",
                           "--data", data, "--out", str(tmp_path / "o"), *FAST, "--min-psnr", "20",
                           "--json", str(tmp_path / "r.json"))
    assert code == 0, err
    m = _json(tmp_path / "o" / "manifest.json")
    assert m["variants"]["fp32"]["inputs"][0]["shape_signature"] == [1, 16, 8]   # static after conversion
    assert m["source"]["input_shapes"]["tokens"]["used"] == [1, 16, 8] and m["parity"]["passed"]
    doc = _json(tmp_path / "r.json")
    assert doc["gate"]["passed"] and set(doc["rows"][0]["drift"]) == {"hidden", "pooled"}
    code, _, err = run_cli("compare", src, str(tmp_path / "o" / "multi_int8.tflite"), "--input-shape",
                           "tokens:1,16,8", "--data", data, "--no-store", "--json", str(tmp_path / "c.json"))
    assert code == 0, err


def test_parse_input_shape():
    assert parse_input_shape("input_ids:1,128") == ("input_ids", (1, 128))
    assert parse_input_shape("a:b:1,3") == ("a:b", (1, 3))   # tensor-like names keep their colon
    for bad in ("x", "x:", ":1,2", "x:1,0", "x:1,a"):
        with pytest.raises(BadInput, match="NAME:DIMS"):
            parse_input_shape(bad)


# --------------------------------------------------------------------------- .keras with custom classes


def test_keras_file_with_custom_layer_needs_import(run_cli, tmp_path, monkeypatch):
    import keras

    import wild_layers

    model = keras.Sequential([keras.Input((6,), name="x"), keras.layers.Dense(256, name="d"),
                              wild_layers.ScaledTanh(1.5, name="out")])
    model.save(tmp_path / "custom.keras")
    code, _, err = run_cli("convert", str(tmp_path / "custom.keras"), "--out", str(tmp_path / "x"))
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "custom class 'ScaledTanh'" in err and "--import wild_layers" in err
    code, _, err = run_cli("convert", str(tmp_path / "custom.keras"), "--import", "no_such_module_xyz",
                           "--out", str(tmp_path / "x"))
    assert code == 2 and "--import no_such_module_xyz: no module named" in err
    data = _npz(tmp_path / "d.npz", x=np.random.default_rng(6).normal(size=(24, 6)).astype(np.float32))
    code, _, err = run_cli("convert", str(tmp_path / "custom.keras"), "--import", str(TESTS / "wild_layers.py"),
                           "-p", "fp32,dynamic", "--out", str(tmp_path / "o1"))
    assert code == 0, err
    monkeypatch.chdir(TESTS)   # a module name is found on PYTHONPATH or in the current folder
    code, _, err = run_cli("convert-and-compare", str(tmp_path / "custom.keras"), "--import", "wild_layers",
                           "-p", "fp32,int8", "--data", data, "--out", str(tmp_path / "o2"), *FAST,
                           "--min-psnr", "25", "--json", str(tmp_path / "r.json"))
    assert code == 0, err
    assert _json(tmp_path / "r.json")["gate"]["passed"]
    code, _, err = run_cli("compare", str(tmp_path / "o1" / "custom_fp32.tflite"),
                           str(tmp_path / "o1" / "custom_dynamic.tflite"), "--data", data, "--no-store",
                           "--json", str(tmp_path / "c.json"))
    assert code == 0, err
    c = _json(tmp_path / "c.json")
    assert [r["precision"] for r in c["rows"]] == ["fp32", "dynamic"]


# --------------------------------------------------------------------------- QAT


def test_qat_model_converts_to_int8_from_fake_quant_ranges(run_cli, wild, tmp_path):
    sm = wild["qat"]
    code, _, err = run_cli("convert", sm, "-p", "fp32,int8", "--out", str(tmp_path / "o"))   # no --data
    assert code == 0, err
    m = _json(tmp_path / "o" / "manifest.json")
    assert m["source"]["qat"] and m["source"]["info"]["qat"]["fake_quant_ops"] > 0
    assert m["calibration"]["needed"] is False
    int8 = m["variants"]["int8"]
    assert int8["quantization"]["mode"] == "quantization-aware (FakeQuant ranges)"
    assert tflite_precision(int8["path"]) == "int8" and int8["quantization_coverage"] == 1.0
    rng = np.random.default_rng(7)
    data = _npz(tmp_path / "d.npz", image=rng.uniform(0, 1, (32, 8, 8, 1)).astype(np.float32))
    code, _, err = run_cli("convert-and-compare", sm, "-p", "fp32,int8", "--data", data, "--out", str(tmp_path / "o2"),
                           *FAST, "--min-psnr", "20", "--json", str(tmp_path / "r.json"))
    assert code == 0, err
    doc = _json(tmp_path / "r.json")
    row = next(r for r in doc["rows"] if r["precision"] == "int8")
    assert doc["gate"]["passed"] and 20 < _psnr(row) < float("inf")
    assert doc["conversion"]["int8"]["quantization"]["calibration"].startswith("none")
    code, _, err = run_cli("compare", sm, int8["path"], "--data", data, "--no-store", "--json", str(tmp_path / "c.json"))
    assert code == 0, err


def test_diagnose_of_a_qat_model_reads_its_float_model_as_values(run_cli, wild, tmp_path):
    """Issue 24.10: the QAT model's first conv read 0.5 dB isolated against 29 dB accumulated -- the
    float model keeps the fake-quant as QUANTIZE -> uint8 -> DEQUANTIZE, and the raw uint8 codes
    were fed to the isolated op as if they were values. Now a first layer's isolated error is no
    worse than its accumulated one, and no keep-float fix is offered for a QAT model."""
    rng = np.random.default_rng(7)
    data = _npz(tmp_path / "d.npz", image=rng.uniform(0, 1, (32, 8, 8, 1)).astype(np.float32))
    code, out, err = run_cli("diagnose", wild["qat"], "--data", data, "--samples", "16", "--out", str(tmp_path / "o"),
                             "--no-store", "--json", str(tmp_path / "d.json"))
    assert code == 0, err
    row = _json(tmp_path / "d.json")["rows"][0]
    conv = next(l for l in row["layers"] if l["op"] == "CONV_2D")
    assert conv["isolated_snr_db"] >= conv["snr_db"] - 3.0, conv
    assert row["fix_commands"] == [] and row["suggested_keep_float"] == []
    assert all("--keep-float" not in l["advice"] for l in row["layers"])
    assert "quantization-aware-trained" in out


# --------------------------------------------------------------------------- .tflite sources


@pytest.fixture(scope="module")
def tf1_variants(tf_models, tmp_path_factory) -> dict[str, str]:
    from edgebench.convert.run import ConvertSettings, check_manifest, convert

    out = tmp_path_factory.mktemp("variants")
    rng = np.random.default_rng(8)
    np.savez(out / "cal.npz", features=rng.normal(size=(32, 6)).astype(np.float32))
    m = convert(ConvertSettings(src=str(tf_models["tf1"]), data=str(out / "cal.npz"), out_dir=str(out)))
    check_manifest(m)
    return {p: v["path"] for p, v in m["variants"].items()}


def test_tflite_precision_is_read_from_tensors(tf1_variants):
    assert {p: tflite_precision(path) for p, path in tf1_variants.items()} == {
        "fp32": "fp32", "fp16": "fp16", "int8": "int8", "dynamic": "dynamic"}


def test_tflite_files_compare_against_each_other(run_cli, tf1_variants, tmp_path):
    data = _npz(tmp_path / "d.npz", features=np.random.default_rng(9).normal(size=(32, 6)).astype(np.float32))
    files = [tf1_variants[p] for p in ("int8", "fp16", "fp32", "dynamic")]
    code, out, err = run_cli("convert-and-compare", *files, "--data", data, "--out", str(tmp_path / "o"), *FAST,
                             "--min-psnr", "20", "--json", str(tmp_path / "r.json"))
    assert code == 0, err
    doc = _json(tmp_path / "r.json")
    assert doc["source"]["kind"] == "tflite" and doc["source"]["tflite_files"] == files
    ref = doc["reference"]
    assert ref["precision"] == "fp32" and ref["target"] == "host" and ref["model_path"] == tf1_variants["fp32"]
    rows = {r["precision"]: r for r in doc["rows"]}
    assert set(rows) == {"int8", "fp16", "fp32", "dynamic"} and doc["gate"]["passed"]
    assert _psnr(rows["fp32"]) == float("inf")           # the reference against itself
    assert rows["fp32"]["samples_ns"] == ref["samples_ns"]            # measured once, not twice
    assert rows["int8"]["size_reduction_pct"] > 0
    # A gate that the int8 file misses fails with exit 1, naming it.
    code, _, err = run_cli("convert-and-compare", *files, "--data", data, "--out", str(tmp_path / "o"), *FAST,
                           "--min-psnr", "200")
    assert code == 1 and "int8" in err


def test_tflite_with_reference_savedmodel_and_unnamed_outputs(run_cli, tf_models, tf1_variants, tmp_path):
    import tensorflow as tf

    nosig = tmp_path / "authors.tflite"   # no signature: outputs named 'add' and 'probs' (graph tensor names)
    nosig.write_bytes(tf.compat.v1.lite.TFLiteConverter.from_saved_model(str(tf_models["tf1"])).convert())
    data = _npz(tmp_path / "d.npz", features=np.random.default_rng(10).normal(size=(32, 6)).astype(np.float32))
    code, out, err = run_cli("convert-and-compare", tf1_variants["int8"], str(nosig), "--reference",
                             str(tf_models["tf1"]), "--data", data, "--out", str(tmp_path / "o"), *FAST,
                             "--min-psnr", "20", "--json", str(tmp_path / "r.json"))
    assert code == 0, err
    doc = _json(tmp_path / "r.json")
    assert doc["reference"]["precision"] == "tf" and doc["source"]["reference"]["kind"] == "saved_model"
    rows = {r["precision"]: r for r in doc["rows"]}
    assert set(rows) == {"int8", "fp32"}
    mapping = rows["fp32"]["output_mapping"]
    assert mapping["how"] == "name, then order and shape" and mapping["pairs"] == {"logits": "add", "probs": "probs"}
    assert _psnr(rows["fp32"]) > 80
    assert "matched to the reference by name, then order and shape" in out
    code, _, err = run_cli("convert", tf1_variants["int8"], "--out", str(tmp_path / "x"))
    assert code == 2 and "nothing to convert" in err
    code, _, err = run_cli("convert-and-compare", tf1_variants["int8"], str(tf_models["tf1"]), "--data", data)
    assert code == 2 and "several SRCs must all be .tflite" in err


def test_multi_input_tflite_without_signature_pairs_inputs_with_the_reference_data(run_cli, tmp_path):
    """A two-input .tflite converted without a signature names its inputs serving_default_img /
    serving_default_meta; the data (keyed by the SavedModel's names img/meta) pairs by those names,
    the row says so, and the drift against TF proves the pairing (a swap could not even run)."""
    import tensorflow as tf

    class Two(tf.Module):
        def __init__(self):
            super().__init__()
            self.w = tf.Variable(tf.random.stateless_normal([6, 3], seed=[1, 2]))
            self.v = tf.Variable(tf.random.stateless_normal([6, 3], seed=[1, 3]))

        @tf.function(input_signature=[tf.TensorSpec([1, 6], tf.float32, name="img"),
                                      tf.TensorSpec([1, 6], tf.float32, name="meta")])
        def serve(self, img, meta):   # same shapes: only the names can pair them
            return {"score": tf.nn.softmax(tf.matmul(img, self.w) - tf.matmul(meta, self.v))}

    m = Two()
    tf.saved_model.save(m, str(tmp_path / "sm"), signatures={"serving_default": m.serve})
    nosig = tmp_path / "authors.tflite"
    nosig.write_bytes(tf.compat.v1.lite.TFLiteConverter.from_saved_model(str(tmp_path / "sm")).convert())
    rng = np.random.default_rng(12)
    data = _npz(tmp_path / "d.npz", img=rng.normal(size=(16, 6)).astype(np.float32),
                meta=rng.normal(size=(16, 6)).astype(np.float32))
    code, out, err = run_cli("convert-and-compare", str(nosig), "--reference", str(tmp_path / "sm"), "--data", data,
                             "--out", str(tmp_path / "o"), *FAST, "--min-psnr", "80", "--json", str(tmp_path / "r.json"))
    assert code == 0, err
    row = _json(tmp_path / "r.json")["rows"][0]
    assert row["input_mapping"] == {"how": "converter names",
                                    "pairs": {"img": "serving_default_img", "meta": "serving_default_meta"}}
    assert _psnr(row) > 80
    assert "inputs of fp32 matched to the data by converter names" in " ".join(out.split())
    # Arrays named after nothing in the model pair only when one sample's shape tells them apart.
    odd = _npz(tmp_path / "odd.npz", left=rng.normal(size=(16, 6)).astype(np.float32),
               right=rng.normal(size=(16, 6)).astype(np.float32))
    code, _, err = run_cli("bench", str(nosig), "--data", odd, *FAST)
    assert code == 2 and "neither their names nor one sample's shape pairs them" in err and "Traceback" not in err


def test_static_batch_folds_the_runtime_shape_arithmetic_a_delegate_leaves_out(run_cli, digits_model, tmp_path):
    """The digits CNN's Flatten under a dynamic batch converts to SHAPE/STRIDED_SLICE/PACK/RESHAPE, which
    XNNPACK leaves on the CPU (two partitions). convert-and-compare measures batch 1, so by default it
    converts a static batch of 1: the converter folds them and XNNPACK takes the whole graph in one
    partition (issue 27); --dynamic-batch keeps the dynamic batch, and the row's warning names the ops and
    the fix."""
    from ai_edge_litert.interpreter import Interpreter

    def run(*extra: str) -> dict:
        out = tmp_path / ("dynamic" if extra else "default")
        code, text, err = run_cli("convert-and-compare", str(digits_model.saved_model_dir), "-p", "fp32", *FAST,
                                  "--data", str(digits_model.evaluation_npz), "--out", str(out),
                                  "--json", str(out / "r.json"), "--verbose", *extra)
        assert code == 0, err
        doc = _json(out / "r.json")
        return {"row": doc["rows"][0], "text": " ".join((text + err).split()), "out": out}

    sta, dyn = run(), run("--dynamic-batch")
    d = dyn["row"]["delegation"]
    assert "SHAPE" in d["undelegated"] and d["partitions"] >= 2
    assert "convert with a static batch (--static-batch" in dyn["text"] and "the .tflite keeps a dynamic batch" in dyn["text"]
    d = sta["row"]["delegation"]
    assert d["undelegated"] == {} and d["partitions"] == 1 and d["nodes_delegated"] == d["nodes_total"]
    assert "static batch 1 in the converted model (--dynamic-batch keeps it dynamic)" in sta["text"]
    assert "left on the CPU interpreter" not in sta["text"]
    (model,) = sta["out"].glob("*_fp32.tflite")
    assert [int(x) for x in Interpreter(model_path=str(model)).get_input_details()[0]["shape_signature"]] == [1, 8, 8, 1]
    (model,) = dyn["out"].glob("*_fp32.tflite")
    assert [int(x) for x in Interpreter(model_path=str(model)).get_input_details()[0]["shape_signature"]] == [-1, 8, 8, 1]
    assert _psnr(sta["row"]) > 100                            # the same function, folded
    manifest = _json(sta["out"] / "manifest.json")
    assert "static batch 1 in the converted model" in json.dumps(manifest)
    code, _, err = run_cli("convert-and-compare", str(model), "--static-batch", *FAST)
    assert code == 2 and "already converted" in err
    code, _, err = run_cli("convert-and-compare", str(digits_model.saved_model_dir), "--static-batch",
                           "--dynamic-batch", *FAST)
    assert code == 2 and "give one of them" in err


def test_pair_inputs_rules():
    from edgebench.targets.runner import _sibling

    rn = _sibling("runner_io")
    ins = [{"name": "serving_default_ids:0", "shape": [1, 8]}, {"name": "serving_default_mask:0", "shape": [1, 8]}]
    d = {"ids": np.zeros((4, 8)), "mask": np.ones((4, 8))}
    assert rn.pair_inputs(d, ins, "d.npz") == ({"serving_default_ids:0": "ids", "serving_default_mask:0": "mask"},
                                               "converter names")
    by_shape = [{"name": "x", "shape": [1, 6]}, {"name": "y", "shape": [1, 4]}]
    assert rn.pair_inputs({"a": np.zeros((3, 4)), "b": np.zeros((3, 6))}, by_shape, "d.npz") == (
        {"x": "b", "y": "a"}, "shape")
    assert rn.pair_inputs({"arr_1": np.zeros((3, 6)), "arr_0": np.zeros((3, 6))},
                          [{"name": "p", "shape": [1, 6]}, {"name": "q", "shape": [1, 6]}], "d.npz")[1] == "order"
    # A suffix that two inputs share is ambiguous, not a guess.
    with pytest.raises(rn.JobError, match="neither their names"):
        rn.pair_inputs({"x": np.zeros((3, 6)), "y": np.zeros((3, 6))},
                       [{"name": "a_x", "shape": [1, 6]}, {"name": "b_x", "shape": [1, 6]}], "d.npz")


def test_restore_signature_names_graph_converter_output(tf_models):
    import tensorflow as tf
    from ai_edge_litert.interpreter import Interpreter

    data = tf.compat.v1.lite.TFLiteConverter.from_saved_model(str(tf_models["tf1"])).convert()
    named = restore_signature(data, "serving_default", {"features": "features:0"},
                              {"probs": "probs:0", "logits": "add:0"})
    it = Interpreter(model_content=named)
    assert it.get_signature_list() == {"serving_default": {"inputs": ["features"], "outputs": ["logits", "probs"]}}
    x = np.random.default_rng(11).normal(size=(1, 6)).astype(np.float32)
    got = it.get_signature_runner()(features=x)
    plain = Interpreter(model_content=data)
    plain.allocate_tensors()
    plain.set_tensor(plain.get_input_details()[0]["index"], x)
    plain.invoke()
    by_name = {d["name"]: plain.get_tensor(d["index"]) for d in plain.get_output_details()}
    np.testing.assert_array_equal(got["probs"], by_name["probs"])
    np.testing.assert_array_equal(got["logits"], by_name["add"])
    # Graph tensor names that do not match fall back to the converter's order (sorted tensor names).
    renamed = restore_signature(data, "serving_default", {"features": "other:0"}, {"b": "zz:0", "a": "aa:0"})
    sig = Interpreter(model_content=renamed).get_signature_runner()
    assert set(sig.get_output_details()) == {"a", "b"}


# --------------------------------------------------------------------------- messages


def test_loading_failures_name_the_file_what_was_tried_and_a_fix(run_cli, tf_models, tmp_path):
    import shutil

    from tensorflow.core.protobuf import saved_model_pb2

    novars = tmp_path / "novars"
    shutil.copytree(tf_models["multi"], novars)
    shutil.rmtree(novars / "variables")
    code, _, err = run_cli("convert", str(novars), "--input-shape", "tokens:1,4,8", "--out", str(tmp_path / "x"))
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert str(novars) in err and "tried the TF2 object graph" in err and "graph level" in err
    assert "variables/ folder is missing" in err

    nested = tmp_path / "download"
    shutil.copytree(tf_models["tf1"], nested / "model" / "1")
    code, _, err = run_cli("convert", str(nested), "--out", str(tmp_path / "x"))
    assert code == 2 and f"found one in {nested / 'model' / '1'}: pass that folder" in err

    custom_op = tmp_path / "custom_op"
    shutil.copytree(tf_models["tf1"], custom_op)
    sm = saved_model_pb2.SavedModel()
    sm.ParseFromString((custom_op / "saved_model.pb").read_bytes())
    node = next(n for n in sm.meta_graphs[0].graph_def.node if n.op == "Softmax")
    node.op = "EdgebenchAddonOp"   # an op only a TF add-on package would register
    (custom_op / "saved_model.pb").write_bytes(sm.SerializeToString())
    code, _, err = run_cli("convert", str(custom_op), "--out", str(tmp_path / "x"))
    assert code == 2 and "op 'EdgebenchAddonOp'" in err and "--import MODULE" in err, err

    (tmp_path / "trunc").mkdir()
    (tmp_path / "trunc" / "saved_model.pb").write_bytes((tf_models["tf1"] / "saved_model.pb").read_bytes()[:50])
    code, _, err = run_cli("convert", str(tmp_path / "trunc"), "--out", str(tmp_path / "x"))
    assert code == 2 and "not a readable SavedModel protobuf" in err and "copy or download" in err


def test_an_automatic_static_batch_the_converter_refuses_falls_back_to_the_dynamic_batch(digits_model, tmp_path,
                                                                                       monkeypatch):
    """The default static batch of convert-and-compare must never cost a model its conversion: when the
    converter refuses the static shapes (a Keras LSTM's TensorList wants a static element shape), the
    conversion is redone with the dynamic batch and the manifest says why. The refusal is simulated
    here (TF 2.21 converts no Keras-3 LSTM at either batch); an explicit --static-batch is not
    second-guessed."""
    from ai_edge_litert.interpreter import Interpreter

    from edgebench.convert import run as convert_mod
    from edgebench.sources.resolve import SourceOptions

    real = convert_mod.PRECISIONS["fp32"]

    def picky(src, calib, int8_io):
        if src.fixed_shapes:
            raise RuntimeError("'tf.TensorListReserve' op requires element_shape to be static")
        return real(src, calib, int8_io)

    monkeypatch.setitem(convert_mod.PRECISIONS, "fp32", picky)
    src = str(digits_model.saved_model_dir)
    m = convert_mod.convert(convert_mod.ConvertSettings(src=src, precisions=("fp32",), out_dir=str(tmp_path / "a"),
                                                        source=SourceOptions().for_measuring(src)))
    assert "TensorListReserve" in m["static_batch_fallback"] and m["variants"]["fp32"]["status"] == "ok"
    shape = Interpreter(model_path=m["variants"]["fp32"]["path"]).get_input_details()[0]["shape_signature"]
    assert list(shape) == [-1, 8, 8, 1]
    assert "keeps a dynamic batch" in json.dumps(m["source"]["input_shapes"])
    m = convert_mod.convert(convert_mod.ConvertSettings(src=src, precisions=("fp32",), out_dir=str(tmp_path / "b"),
                                                        source=SourceOptions(static_batch=True)))
    assert m["static_batch_fallback"] is None and m["variants"]["fp32"]["status"] == "failed"


def test_dynamic_batch_tflite_files_get_their_real_precision_and_the_fp32_reference(run_cli, digits_model, tmp_path):
    """Issue 24.1: the digits files `edgebench convert` writes keep a dynamic batch (int32 shape ops);
    given int8 first, the fp32 file is still the reference, each file is labelled by its precision,
    and the choice is announced with why; a single file says there is nothing to compare against."""
    code, _, err = run_cli("convert", "digits", "-p", "fp32,int8", "--out", str(tmp_path / "c"))
    assert code == 0, err
    fp32, int8 = (str(next((tmp_path / "c").glob(f"*_{p}.tflite"))) for p in ("fp32", "int8"))
    code, out, err = run_cli("convert-and-compare", int8, fp32, "--data", str(digits_model.evaluation_npz),
                             "--out", str(tmp_path / "o"), *FAST, "--json", str(tmp_path / "r.json"))
    assert code == 0, err
    doc = _json(tmp_path / "r.json")
    assert doc["reference"]["model_path"] == fp32 and doc["reference"]["precision"] == "fp32"
    assert {r["precision"] for r in doc["rows"]} == {"fp32", "int8"}
    assert "fp32" in doc["source"]["reference_reason"] and "most precise" in doc["source"]["reference_reason"]
    assert "reference: fp32" in " ".join(out.split())
    code, out, err = run_cli("convert-and-compare", int8, "--data", str(digits_model.evaluation_npz),
                             "--out", str(tmp_path / "o1"), *FAST)
    assert code == 0, err
    assert "nothing to compare it against" in " ".join(out.split()) and "--reference SAVEDMODEL" in out
