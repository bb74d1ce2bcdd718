"""Models from the wild, round 5 (issue 45): an int8 file larger than its FP32 file is explained.

Two classes, built here and converted by TensorFlow's real converter:
- a static recurrent loop (one FULLY_CONNECTED's weights read at every one of 48 steps): int8 writes
  one int32 bias per step with per-channel scales and zero points -- quantization parameters and
  biases outweigh the int8 weights (the issue's 160-step LSTM, small);
- a Keras LSTM with ``unroll=True``: the int8 converter's fused tensor names outweigh everything.
Each time edgebench must say where the bytes went (by kind, against FP32) and which built precision
is smaller, in the terminal, the manifest and the typed compare rows; the numbers are recomputed
here from the flatbuffer's object form, independently of ``model.tflite_size``."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

STEPS, UNITS = 48, 128


@pytest.fixture(scope="module")
def loop_model(tmp_path_factory):
    import tensorflow as tf

    root = tmp_path_factory.mktemp("loop")
    rs = np.random.RandomState(0)

    class Loop(tf.Module):
        def __init__(self):
            self.w = tf.Variable(rs.randn(8 + UNITS, UNITS).astype(np.float32) * 0.1)
            self.b = tf.Variable(rs.randn(UNITS).astype(np.float32) * 0.1)
            self.o = tf.Variable(rs.randn(UNITS, 4).astype(np.float32) * 0.1)

        @tf.function(input_signature=[tf.TensorSpec([1, STEPS, 8], tf.float32, name="x")])
        def __call__(self, x):
            h = tf.zeros([1, UNITS])
            for t in range(STEPS):          # a static loop: unrolled into STEPS copies of the cell
                h = tf.tanh(tf.matmul(tf.concat([x[:, t, :], h], 1), self.w) + self.b)
            return {"y": tf.matmul(h, self.o)}

    m = Loop()
    tf.saved_model.save(m, str(root / "loop"), signatures={"serving_default": m.__call__})
    np.savez(root / "data.npz", x=rs.randn(24, STEPS, 8).astype(np.float32))
    return {"model": root / "loop", "data": root / "data.npz", "root": root}


@pytest.fixture(scope="module")
def lstm_model(tmp_path_factory):
    import keras

    root = tmp_path_factory.mktemp("lstm")
    inp = keras.Input((16, 8), batch_size=1, name="x")
    h = keras.layers.LSTM(8, unroll=True, return_sequences=True)(inp)
    h = keras.layers.LSTM(8, unroll=True)(h)
    model = keras.Model(inp, keras.layers.Dense(4)(h))
    model.save(root / "lstm.keras")
    np.savez(root / "data.npz", x=np.random.RandomState(1).randn(16, 16, 8).astype(np.float32))
    return {"model": root / "lstm.keras", "data": root / "data.npz"}


def _independent(path: str) -> dict:
    """Quantization-parameter bytes, bias tensors and names of a file, from the object API."""
    from edgebench.model.tflite_rewrite import load_model_t

    m = load_model_t(Path(path).read_bytes())
    q = names = 0
    for sg in m.subgraphs:
        for t in sg.tensors:
            names += len(t.name or b"")
            qp = t.quantization
            if qp is not None:
                q += 4 * len(qp.scale if qp.scale is not None else ()) + 8 * len(
                    qp.zeroPoint if qp.zeroPoint is not None else ()) + 4 * (
                    len(qp.min if qp.min is not None else ()) + len(qp.max if qp.max is not None else ()))
    fc = [i for i, c in enumerate(m.operatorCodes) if max(c.builtinCode, c.deprecatedBuiltinCode) == 9]
    biases = {sg.tensors[o.inputs[2]].buffer for sg in m.subgraphs for o in sg.operators
              if o.opcodeIndex in fc and len(o.inputs) > 2 and o.inputs[2] >= 0}
    return {"quant_params": q, "names": names, "bias_buffers": len(biases)}


def test_int8_of_an_unrolled_loop_says_where_the_bytes_went(loop_model, run_cli, tmp_path):
    out = tmp_path / "c"
    code, stdout, err = run_cli("convert", str(loop_model["model"]), "-p", "fp32,fp16,int8,dynamic", "--data",
                                str(loop_model["data"]), "--out", str(out), "--json", "-")
    assert code == 0, err
    m = json.loads(stdout)
    v = m["variants"]
    assert v["int8"]["bytes"] > v["fp32"]["bytes"]                      # the surprise is real
    assert json.loads((out / "manifest.json").read_text())["variants"]["int8"]["size_explained"] == \
        v["int8"]["size_explained"]
    ex = v["int8"]["size_explained"]
    mine = _independent(v["int8"]["path"])
    assert ex["kinds"]["quant_params"] == ex["quant_params_bytes"] == mine["quant_params"]
    assert ex["bias_tensors"] == mine["bias_buffers"] >= STEPS            # one int32 bias per step
    assert ex["max_weight_reuse"] >= STEPS
    assert sum(ex["kinds"].values()) == v["int8"]["bytes"]               # every byte has a kind
    assert ex["delta"]["quant_params"] > 0 and ex["delta"]["biases"] > 0 and ex["delta"]["weights"] < 0
    grew = [k for k, d in sorted(ex["delta"].items(), key=lambda kv: -kv[1]) if d > 0]
    assert grew[0] == "quant_params"                                     # the largest growth, named first
    smallest = min((p for p in v if p != "fp32"), key=lambda p: v[p]["bytes"])
    assert ex["smaller"] == smallest == "dynamic"                        # measured from the built files
    line = ex["line"]
    assert line.startswith("int8 is ") and "% larger than fp32" in line and "quantization parameters" in line
    assert "one per unrolled step" in line and "dynamic is smaller" in line
    assert "size_explained" not in v["dynamic"] and "size_explained" not in v["fp32"]

    code, table, err = run_cli("convert", str(loop_model["model"]), "-p", "fp32,fp16,int8,dynamic", "--data",
                               str(loop_model["data"]), "--out", str(out))
    flat = " ".join(table.split())
    assert code == 0 and "size: int8 is " in flat and "dynamic is smaller" in flat, table


def test_compare_rows_carry_it_typed_and_the_registry_reads_it(loop_model, run_cli, tmp_path):
    from edgebench.rows import InferenceRow
    from edgebench.rows.metrics import BY_KEY

    code, stdout, err = run_cli("convert-and-compare", str(loop_model["model"]), "-p", "fp32,int8,dynamic",
                                "--data", str(loop_model["data"]), "--runs", "10", "--no-store", "--json", "-",
                                "--out", str(tmp_path / "cac"))
    assert code == 0, err
    doc = json.loads(stdout)
    rows = {r["precision"]: r for r in doc["rows"] if r.get("role") != "reference"}
    typed = InferenceRow.from_dict(rows["int8"])
    assert typed.size_explained is not None and typed.size_explained.smaller == "dynamic"
    assert InferenceRow.from_dict(typed.to_dict()).size_explained == typed.size_explained     # round trip
    assert BY_KEY["quant_params_bytes"].value(typed) == _independent(rows["int8"]["model_path"])["quant_params"]
    assert BY_KEY["quant_params_bytes"].value(InferenceRow.from_dict(rows["dynamic"])) is None
    assert "size_explained" not in rows["fp32"]

    code, table, err = run_cli("convert-and-compare", str(loop_model["model"]), "-p", "fp32,int8,dynamic",
                               "--data", str(loop_model["data"]), "--runs", "10", "--no-store",
                               "--out", str(tmp_path / "cac"))
    flat = " ".join(table.split())
    assert "int8: " in flat and "% larger" in flat and "size: int8 is " in flat and "dynamic is smaller" in flat


def test_unrolled_keras_lstm_names_the_names(lstm_model, run_cli, tmp_path):
    """Another class: the bytes went into the int8 converter's fused tensor names; no precision built
    is smaller, and the line says so and which ones were not built."""
    code, stdout, err = run_cli("convert", str(lstm_model["model"]), "-p", "fp32,int8", "--data",
                                str(lstm_model["data"]), "--out", str(tmp_path / "l"), "--json", "-")
    assert code == 0, err
    v = json.loads(stdout)["variants"]
    assert v["int8"]["bytes"] > v["fp32"]["bytes"]
    ex = v["int8"]["size_explained"]
    assert max(ex["delta"], key=ex["delta"].get) == "names"
    assert ex["kinds"]["names"] == _independent(v["int8"]["path"])["names"]
    assert ex["smaller"] is None
    assert "tensor names +" in ex["line"] and "no precision built here is smaller than fp32" in ex["line"]
    assert "-p dynamic,fp16 measures them" in ex["line"]


def test_manifest_renderer_reads_the_typed_variant():
    from edgebench.report.terminal.compare import render_manifest
    from edgebench.rows.records import Manifest

    man = Manifest.of({"source": {"name": "m"}, "variants": {
        "fp32": {"status": "ok", "bytes": 100},
        "int8": {"status": "ok", "bytes": 150, "size_explained": {"line": "int8 is 50% larger than fp32: x"}}}})
    assert man.variants[1].size_explained == "int8 is 50% larger than fp32: x"
    from rich.console import Console

    con = Console(width=160, record=True)
    for part in render_manifest(man, width=160):
        con.print(part)
    assert "size: int8 is 50% larger than fp32: x" in con.export_text()


def test_given_tflite_files_are_explained_too(loop_model, run_cli, tmp_path):
    """A vendor's fp32 + int8 pair measured as given (no conversion): the same explanation."""
    code, stdout, err = run_cli("convert", str(loop_model["model"]), "-p", "fp32,int8", "--data",
                                str(loop_model["data"]), "--out", str(tmp_path / "c"), "--json", "-")
    assert code == 0, err
    v = json.loads(stdout)["variants"]
    code, stdout, err = run_cli("convert-and-compare", v["fp32"]["path"], v["int8"]["path"], "--data",
                                str(loop_model["data"]), "--runs", "10", "--no-store", "--json", "-",
                                "--out", str(tmp_path / "pair"))
    assert code == 0, err
    rows = {r["precision"]: r for r in json.loads(stdout)["rows"] if r.get("role") != "reference"}
    ex = rows["int8"]["size_explained"]
    assert ex["kinds"]["quant_params"] == _independent(v["int8"]["path"])["quant_params"]
    assert ex["smaller"] is None and "no precision built here is smaller" in ex["line"]
