"""Models from the wild: Keras-2-era recurrent models, diagnose's
ranking and advice. Every model is built here with the real packages."""

from __future__ import annotations

import json

import numpy as np
import pytest

FAST = ("--min-time", "0.02", "--min-runs", "20", "--warmup-runs", "1")


@pytest.fixture(scope="module")
def bilstm(tmp_path_factory):
    """A Keras 2 (tf-keras) stacked Bidirectional LSTM with a sigmoid output, saved as .h5: Keras 3
    refuses its config (time_major), tf-keras loads it. Random weights, uniform inputs; the output
    bias is -9, so the sigmoid's values (~1e-4) sit below int8's fixed 1/256 output step."""
    import tf_keras as k

    d = tmp_path_factory.mktemp("k2lstm")
    k.utils.set_random_seed(0)
    L = k.layers
    m = k.Sequential([L.Input((12, 4), name="seq"), L.Bidirectional(L.LSTM(8, return_sequences=True)),
                      L.Bidirectional(L.LSTM(4)), L.Dense(1, activation="sigmoid")])
    w, b = m.layers[-1].get_weights()
    m.layers[-1].set_weights([w, b - 9.0])
    m.save(d / "bilstm.h5")
    x = np.random.default_rng(0).uniform(0, 1, (24, 12, 4)).astype("f4")
    np.savez(d / "data.npz", seq=x)
    return d


def test_keras2_lstm_h5_is_retraced_at_batch_1_and_converts(run_cli, bilstm, tmp_path):
    """Issue 33.2: a tf-keras-loaded LSTM was re-traced at batch 1 only for Keras 3 loads, so every
    precision failed with 'TensorListReserve ... element_shape to be static'."""
    code, out, err = run_cli("convert-and-compare", str(bilstm / "bilstm.h5"), "--data", str(bilstm / "data.npz"),
                             "-p", "fp32,fp16,int8", "--out", str(tmp_path / "o"), "--json", str(tmp_path / "r.json"),
                             "--no-store", *FAST)
    doc = json.loads((tmp_path / "r.json").read_text())
    rows = {r["precision"]: r for r in doc["rows"]}
    assert all(r["status"] == "ok" for r in rows.values()), {p: r["error"] for p, r in rows.items()}
    assert code in (0, 1), out + err
    assert float(rows["fp32"]["worst"]["psnr_db"]) > 100
    grown = [r for r in rows.values() if (r["size_reduction_pct"] or 0) < 0]   # a BiLSTM's fp16 file is larger
    assert all(f"{r['precision']}: {-r['size_reduction_pct']:.0f}% larger" in out for r in grown), out
    manifest = json.loads((tmp_path / "o" / "manifest.json").read_text())
    info = manifest["source"]["info"]
    assert info["loaded_with"].startswith("tf-keras") and info["static_export"]
    # 33.5: the int8 sigmoid output is exactly 0 -- the verdict names its 1/256 step, not a GPU/delegate
    zero = next(v for v in rows["int8"]["verdicts"] if v["kind"] == "zero_output")
    assert "quantized with a step of 0.00391" in zero["advice"] and "--gpu-precision" not in zero["advice"]


def test_diagnose_proves_a_zero_output_fix_by_cosine_and_names_the_reverse_v2_defect(run_cli, bilstm, tmp_path):
    """33.5: the fix for zeros is proved with the finding's metric (cosine), not PSNR; the REVERSE_V2
    every int8 Keras BiLSTM gets with different input and output quantization is named a converter
    defect."""
    code, out, err = run_cli("diagnose", str(bilstm / "bilstm.h5"), "--data", str(bilstm / "data.npz"),
                             "--out", str(tmp_path / "o"), "--json", str(tmp_path / "d.json"), "--no-store")
    assert code == 0, out + err
    row = json.loads((tmp_path / "d.json").read_text())["rows"][0]
    top = row["layers"][0]
    assert top["op"] == "LOGISTIC" and "output step is fixed at 0.0039" in top["advice"]
    assert "measured: keeping it float gains cosine" in top["advice"]
    assert row["fix_commands"] and all("--min-cosine" in c and "--min-psnr" not in c for c in row["fix_commands"])
    rev = [l for l in row["layers"] if l["op"] == "REVERSE_V2" and l.get("converter_defect")]
    assert rev and rev[0]["finding"] and rev[0]["advice"].startswith("converter defect: REVERSE_V2 copies")


# ---------------------------------------------------------------- diagnose ranks by what a fix gains (33.4)

@pytest.fixture(scope="module")
def depthwise_model(tmp_path_factory):
    """A small CNN whose worst layer is a depthwise conv (one output channel 400x the others, undone
    by the next pointwise conv), beside a side branch with a worse channel SNR (1000x outlier) that
    barely reaches the output (x0.001): ranked by their own SNR the branch comes first, but keeping
    it float gains nothing while keeping the depthwise conv float gains > 10 dB."""
    import keras
    from keras import layers as L

    d = tmp_path_factory.mktemp("dw")
    keras.utils.set_random_seed(0)
    inp = keras.Input((16, 16, 3), name="img")
    c1 = L.Conv2D(8, 3, padding="same", activation="relu", name="conv1")(inp)
    dw = L.DepthwiseConv2D(3, padding="same", activation="relu", name="dw")(c1)
    pw = L.Conv2D(8, 1, activation="relu", name="pw")(dw)
    br = L.Conv2D(8, 1, activation="relu", name="branch")(c1)
    add = L.Add(name="add")([pw, L.Rescaling(0.001, name="branch_scale")(br)])
    out = L.Dense(4, name="logits")(L.GlobalAveragePooling2D(name="gap")(add))
    m = keras.Model(inp, out)
    for name, axis, factor in (("dw", None, 400.0), ("branch", None, 1000.0)):
        w, b = m.get_layer(name).get_weights()
        w[..., 0, 0] *= factor if name == "dw" else 1.0
        if name == "branch":
            w[..., 0] *= factor
        b[0] *= factor
        m.get_layer(name).set_weights([w, b])
    w, b = m.get_layer("pw").get_weights()
    w[0, 0, 0, :] /= 400.0
    m.get_layer("pw").set_weights([w, b])
    m.export(str(d / "sm"), verbose=False)
    np.savez(d / "data.npz", img=np.random.default_rng(0).uniform(0, 1, (48, 16, 16, 3)).astype("f4"))
    return d


def test_diagnose_ranks_by_the_measured_gain_of_keeping_a_layer_float(run_cli, depthwise_model, tmp_path):
    d = depthwise_model
    code, out, err = run_cli("diagnose", str(d / "sm"), "--data", str(d / "data.npz"), "--out", str(tmp_path / "o"),
                             "--json", str(tmp_path / "d.json"), "--no-store")
    assert code == 0, out + err
    row = json.loads((tmp_path / "d.json").read_text())["rows"][0]
    top = row["layers"][0]
    assert "dw" in top["tensor"] and top["op"] == "DEPTHWISE_CONV_2D" and top["fix_gain_db"] > 6, top
    assert "measured: keeping it float gains +" in top["advice"]
    branch = next(l for l in row["layers"] if "branch_1/Relu" in l["tensor"])
    assert branch["rank"] > 1 and branch["fix_gain_db"] < 1 and "not where the output's error comes from" in branch["advice"]
    assert row["suggested_keep_float"][0] == top["float_tensor"]
    best = max(t["psnr_db"] for t in row["fix_trials"])
    goal = float(row["fix_commands"][0].rsplit("--min-psnr ", 1)[1])
    assert float(row["worst"]["psnr_db"]) < goal <= best         # provable by the printed command


def test_a_proof_goal_never_exceeds_what_was_measured_reachable():
    from edgebench.diagnose.run import proof_goal

    row = {"worst": {"psnr_db": 21.2}, "fix_trials": [{"psnr_db": 30.5}, {"psnr_db": 22.0}]}
    assert proof_goal(dict(row)) == ["--min-psnr", "27"]                       # +6 dB, under the best trial
    capped = dict(row)
    assert proof_goal(capped, floor_db=23.9) == ["--min-psnr", "23"]           # the 8-bit-weight floor
    assert "8-bit-weight floor" in capped["proof_note"]
    at_floor = {"worst": {"psnr_db": 24.3}, "fix_trials": [{"psnr_db": 24.5}]}
    assert proof_goal(at_floor, floor_db=23.9) is None and "cannot do better" in at_floor["proof_note"]
    acc = {"accuracy": {"top1_drop_pp": 4.0}, "fix_trials": [{"psnr_db": 30.0, "top1_drop_pp": 3.95}]}
    assert proof_goal(acc) is None and "spread" in acc["proof_note"]


# ---------------------------------------------------------------- QAT: the fake-quantized value (33.6)

@pytest.fixture(scope="module")
def qat(tmp_path_factory):
    import subprocess
    import sys
    from pathlib import Path

    out = tmp_path_factory.mktemp("qat")
    proc = subprocess.run([sys.executable, str(Path(__file__).with_name("qat_model.py")), str(out)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_qat_diagnose_compares_with_the_models_own_fake_quantized_values(run_cli, qat, tmp_path):
    """A QAT model's fp32 file keeps its fake-quant (QUANTIZE -> DEQUANTIZE, here after a RESHAPE):
    each int8 tensor stands for that dequantized value. Compared with the value before it, the conv
    read ~29 dB and the logits ~26 dB with a false 'calibrate' hint; now they read as the int8 kernels
    really do, and no advice mentions calibration (a QAT model's ranges come from training)."""
    code, out, err = run_cli("diagnose", qat["qat"], "--data", qat["data"], "--out", str(tmp_path / "o"),
                             "--json", str(tmp_path / "d.json"), "--no-store")
    assert code == 0, out + err
    row = json.loads((tmp_path / "d.json").read_text())["rows"][0]
    layers = {l["op"]: l for l in row["layers"]}
    conv = layers["CONV_2D"]
    assert conv["match"].endswith("+ fake-quant") and conv["snr_db"] > 45, conv
    assert layers["FULLY_CONNECTED"]["match"].endswith("+ fake-quant")
    assert layers["FULLY_CONNECTED"]["isolated_snr_db"] > 45
    assert not any("calibrat" in (l["advice"] or "") for l in row["layers"])
    assert row["fix_commands"] == [] and row["suggested_keep_float"] == []


def test_qat_clipping_advice_names_training_not_calibration():
    from edgebench.convert.quant.layers import advice

    l = {"finding": True, "ranking_snr_db": 10.0, "dtype": "int8", "scale": 0.1, "zero_point": 0,
         "float_min": -30.0, "float_max": 30.0, "float_tensor": "t"}
    assert "calibrate on representative data" in advice(dict(l), precision="int8")
    qat_advice = advice(dict(l), precision="int8", keep_float=False, qat=True)
    assert "learned in quantization-aware training" in qat_advice and "calibrat" not in qat_advice.replace(
        "not calibration", "")


# ---------------------------------------------------------------- the smaller ones (33.7)

def test_a_frozen_graph_pb_converts_and_a_refused_one_leaves_no_out_folder(run_cli, tmp_path):
    import tensorflow as tf

    tf1 = tf.compat.v1
    g = tf.Graph()
    with g.as_default():
        x = tf1.placeholder(tf.float32, [None, 6], name="features")
        w = tf1.get_variable("w", initializer=tf.random.stateless_normal([6, 3], seed=[1, 2]))
        tf.nn.softmax(tf.matmul(x, w), name="probs")
        with tf1.Session() as s:
            s.run(tf1.global_variables_initializer())
            frozen = tf1.graph_util.convert_variables_to_constants(s, g.as_graph_def(), ["probs"])
    (tmp_path / "m.pb").write_bytes(frozen.SerializeToString())
    np.savez(tmp_path / "d.npz", features=np.random.default_rng(0).uniform(0, 1, (16, 6)).astype("f4"))
    code, out, err = run_cli("convert-and-compare", str(tmp_path / "m.pb"), "--data", str(tmp_path / "d.npz"),
                             "-p", "fp32", "--out", str(tmp_path / "o"), "--json", str(tmp_path / "r.json"),
                             "--no-store", *FAST)
    assert code == 0, out + err
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["rows"][0]["status"] == "ok" and float(doc["rows"][0]["worst"]["psnr_db"]) > 100
    assert doc["source"]["loader"] == "graph"
    (tmp_path / "junk.pb").write_bytes(b"\x08\x96\x01not a graph")
    code, out, err = run_cli("convert", str(tmp_path / "junk.pb"), "--out", str(tmp_path / "never"))
    assert code == 2 and "not a frozen TensorFlow graph" in err and not (tmp_path / "never").exists()


@pytest.fixture(scope="module")
def int8_io_pair(tmp_path_factory):
    """A float and an int8-input/int8-output .tflite of one small model (a vendor's set)."""
    import tensorflow as tf

    d = tmp_path_factory.mktemp("int8io")
    f = tf.function(lambda x: {"y": tf.nn.relu(tf.matmul(x, tf.constant(np.linspace(-1, 1, 24, dtype="f4")
                                                                        .reshape(8, 3))))},
                    input_signature=[tf.TensorSpec([1, 8], tf.float32, name="x")])
    cf = f.get_concrete_function()
    (d / "m_fp32.tflite").write_bytes(tf.lite.TFLiteConverter.from_concrete_functions([cf]).convert())
    c = tf.lite.TFLiteConverter.from_concrete_functions([cf])
    c.optimizations = [tf.lite.Optimize.DEFAULT]
    rng = np.random.default_rng(0)
    c.representative_dataset = lambda: ([rng.uniform(0, 1, (1, 8)).astype("f4")] for _ in range(20))
    c.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    c.inference_input_type = c.inference_output_type = tf.int8
    (d / "m_int8.tflite").write_bytes(c.convert())
    return d


def test_int8_codes_feed_a_vendor_int8_file_and_its_float_twin(run_cli, int8_io_pair, tmp_path):
    """Vendor int8-input files refused the exact int8 data their package feeds ('input is float32')."""
    from ai_edge_litert.interpreter import Interpreter

    d = int8_io_pair
    det = Interpreter(model_path=str(d / "m_int8.tflite")).get_input_details()[0]
    scale, zp = det["quantization"]
    x = np.random.default_rng(1).uniform(0, 1, (12, 8))
    codes = np.clip(np.round(x / scale) + zp, -128, 127).astype(np.int8)
    np.savez(tmp_path / "codes.npz", x=codes)
    code, out, err = run_cli("convert-and-compare", str(d / "m_int8.tflite"), str(d / "m_fp32.tflite"), "--data",
                             str(tmp_path / "codes.npz"), "--out", str(tmp_path / "o"), "--json",
                             str(tmp_path / "r.json"), "--no-store", *FAST)
    assert code == 0, out + err
    doc = json.loads((tmp_path / "r.json").read_text())
    assert "dequantized with the model's own quantization: x (int8 codes" in doc["inputs"]["source"]
    int8 = next(r for r in doc["rows"] if r["precision"] == "int8")
    assert float(int8["worst"]["psnr_db"]) > 30      # fed the same values as the float file


def test_op_profiling_a_fused_lstm_says_why_there_is_none(tmp_path):
    import tensorflow as tf
    import tf_keras as k

    from conftest import make_job
    from edgebench.targets.host import HostTarget

    m = k.Sequential([k.layers.Input((5, 3), batch_size=1), k.layers.LSTM(4), k.layers.Dense(2)])
    c = tf.lite.TFLiteConverter.from_keras_model(m)
    (tmp_path / "lstm.tflite").write_bytes(c.convert())
    res = HostTarget().run(make_job(str(tmp_path / "lstm.tflite"), runs=20, warmup_runs=1, op_profile=True))
    assert res.status == "ok", res.error
    msg = res.extra.get("op_profile_error") or ""
    assert "does not load a model with variable tensors" in msg and "status 5" in msg, res.extra


def _loop_savedmodel(path):
    """A SavedModel whose only matmul (a 64x64 weight: big enough for dynamic-range quantization)
    sits inside a tf.while_loop body run 3 times."""
    import tensorflow as tf

    class Loop(tf.Module):
        def __init__(self):
            super().__init__()
            self.w = tf.Variable(np.random.default_rng(0).normal(0, 0.1, (64, 64)).astype("f4"))

        @tf.function(input_signature=[tf.TensorSpec([1, 64], tf.float32, name="x")])
        def serve(self, x):
            _, h = tf.while_loop(lambda i, h: i < 3, lambda i, h: (i + 1, tf.nn.relu(tf.matmul(h, self.w))),
                                 [tf.constant(0), x])
            return {"y": h}

    m = Loop()
    tf.saved_model.save(m, str(path), signatures={"serving_default": m.serve})
    return path


def test_precision_flops_and_coverage_read_the_loop_body(tmp_path):
    """33.7: only subgraph 0 was read, so int8 weights inside a WHILE body were missed: the
    dynamic-range file read "dynamic (fp32 file)", with 0 FLOPs and no float op."""
    import tensorflow as tf

    from edgebench.model import tflite_model
    from edgebench.sources.describe import describe_tflite
    sm = _loop_savedmodel(tmp_path / "loop_sm")
    c = tf.lite.TFLiteConverter.from_saved_model(str(sm))
    c.optimizations = [tf.lite.Optimize.DEFAULT]
    (tmp_path / "loop_dynamic.tflite").write_bytes(c.convert())
    info = tflite_model.inspect(tmp_path / "loop_dynamic.tflite")
    assert info["op_histogram"] == {"WHILE": 1}                          # subgraph 0 holds the loop only
    assert tflite_model.precision(info) == "dynamic"
    assert info["float_op_histogram"] == {"FULLY_CONNECTED": 1}          # not WHILE, not the loop counter
    assert set(info["subgraph_roles"].values()) == {"WHILE cond", "WHILE body"}
    body = [o for o in info["subgraph_ops"] if o["op"] == "FULLY_CONNECTED"]
    assert len(body) == 1 and body[0]["kind"] == "hybrid" and info["subgraph_roles"][body[0]["subgraph"]] == "WHILE body"
    assert info["flops"] == 2 * 64 * 64 and "WHILE body" in info["flops_note"] and "trip count" in info["flops_note"]
    d = describe_tflite(tmp_path / "loop_dynamic.tflite")
    assert d["float_ops"] == [f"FULLY_CONNECTED#{body[0]['index']} (subgraph {body[0]['subgraph']}, WHILE body)"]


def test_shape_bookkeeping_is_no_float_op_of_a_dynamic_batch_file(tmp_path):
    """33.7: a dynamic-batch Flatten computes its target shape at run time (SHAPE -> STRIDED_SLICE ->
    PACK -> RESHAPE); a dynamic-range file listed SHAPE and RESHAPE as float ops and counted
    STRIDED_SLICE/PACK as int8 coverage (33 % of an int8-free file)."""
    import keras
    import tensorflow as tf

    from edgebench.model import tflite_model

    keras.utils.set_random_seed(0)
    m = keras.Sequential([keras.Input((8, 8, 1)), keras.layers.Conv2D(4, 3), keras.layers.Flatten(),
                          keras.layers.Dense(40)])
    m.export(str(tmp_path / "sm"), verbose=False)
    infos = {}
    for prec in ("dynamic", "int8"):
        c = tf.lite.TFLiteConverter.from_saved_model(str(tmp_path / "sm"))
        c.optimizations = [tf.lite.Optimize.DEFAULT]
        if prec == "int8":
            rng = np.random.default_rng(0)
            c.representative_dataset = lambda: ([rng.uniform(0, 1, (1, 8, 8, 1)).astype("f4")] for _ in range(8))
        (tmp_path / f"{prec}.tflite").write_bytes(c.convert())
        infos[prec] = tflite_model.inspect(tmp_path / f"{prec}.tflite")
    dyn, int8 = infos["dynamic"], infos["int8"]
    assert {"SHAPE", "STRIDED_SLICE", "PACK", "RESHAPE"} <= set(dyn["op_histogram"])    # a dynamic batch
    assert tflite_model.precision(dyn) == "dynamic"
    assert dyn["float_op_histogram"] == {"CONV_2D": 1, "FULLY_CONNECTED": 1}
    assert dyn["quantization_coverage"] == 0.0            # hybrid kernels compute in float
    assert tflite_model.precision(int8) == "int8" and int8["quantization_coverage"] == 1.0
    assert {o["op"] for o in tflite_model.math_ops(int8)} == {"CONV_2D", "FULLY_CONNECTED"}


def test_op_types_are_the_models_ops_not_xnnpacks_names(tmp_path):
    """33.7: "Fully Connected 89 %" on a MobileNet with one FC -- XNNPACK runs every 1x1 (pointwise)
    convolution as a "Fully Connected" GEMM and the op-type table used its operator names. The
    delegate's inner operators are now matched to the partition's nodes: a pointwise conv's time is a
    Convolution's, the one Dense layer is the one Fully Connected, and the share says what it is of."""
    import keras
    import tensorflow as tf
    from rich.console import Console

    from edgebench.targets.op_profile import by_op_type
    from edgebench.bench.run import BenchSettings, run_bench
    from edgebench.targets.base import RunOptions
    from edgebench.report.terminal.profile import render_op_profile
    from edgebench.targets.base import RunControl

    keras.utils.set_random_seed(0)
    L = keras.layers
    m = keras.Sequential([keras.Input((24, 24, 3), batch_size=1), L.Conv2D(8, 3, activation="relu"),
                          L.DepthwiseConv2D(3, activation="relu"), L.Conv2D(32, 1, activation="relu"),
                          L.Conv2D(32, 1, activation="relu"), L.GlobalAveragePooling2D(), L.Dense(10)])
    path = tmp_path / "mobilenetish.tflite"
    path.write_bytes(tf.lite.TFLiteConverter.from_keras_model(m).convert())
    doc = run_bench(BenchSettings(models=(str(path),), run=RunOptions(op_profile=True, control=RunControl(min_runs=100, min_time_s=0.05, max_time_s=10, answer_width=None))))
    (row,) = doc.rows
    assert row.ok, row.error
    part = next(e for e in row.op_profile if e.delegated and e.details.get("inner"))
    named_fc = [i for i in part.details["inner"] if i["op"].startswith("Fully Connected")]
    assert len(named_fc) == 3                       # XNNPACK's names: two pointwise convs + the Dense
    types = by_op_type(row.op_profile)
    assert types["Fully Connected"]["count"] == 1 and types["Convolution"]["count"] == 3
    assert types["Depthwise Convolution"]["count"] == 1
    assert all(v["split"] in ([], ["inner operators in order"]) for v in types.values()), types
    assert sum(v["share"] for v in types.values()) == pytest.approx(1.0)
    con = Console(width=200, record=True)
    for t in render_op_profile(row):
        con.print(t)
    text = con.export_text()
    assert "share of op time" in text and "measured, not FLOPs" in text and "counts as Convolution here" in text
