"""Models from the wild, round 5 (issue 45): a float ``.tflite`` with control flow (IF, WHILE: several
subgraphs) whose branch subgraphs reuse tensor names -- legal in the format, refused by
ai-edge-quantizer ("Tensor name arg0 is not unique in the model").

The models are built here: a ``tf.function`` with ``tf.cond`` / ``tf.while_loop`` converted by
TensorFlow's converter (IF / WHILE ops), then every branch subgraph's tensors renamed ``arg0``,
``arg1``... in the flatbuffer, as the vendor's file had them. edgebench makes the names unique
before quantizing (outputs bit-identical, run here with LiteRT), converts each precision on its
own (one failing precision is one failed row: fp32, fp16, dynamic and the manifest are kept) and
says plainly that int8 cannot be calibrated through the IF (what ai-edge-quantizer 0.10 does)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from edgebench.model.tflite_rewrite import _pack, load_model_t, unique_tensor_names

pytestmark = pytest.mark.extras      # ai-edge-quantizer is the [aeq] extra


def _duplicate_branch_names(raw: bytes) -> bytes:
    """Every subgraph but the model's own names its tensors arg0, arg1, ... (the names clash across
    branches, and with nothing in subgraph 0)."""
    m = load_model_t(raw)
    for sg in m.subgraphs[1:]:
        for i, t in enumerate(sg.tensors):
            t.name = f"arg{i}".encode()
    return _pack(m)


def _names(raw: bytes) -> list[list[str]]:
    return [[t.name.decode() for t in sg.tensors] for sg in load_model_t(raw).subgraphs]


@pytest.fixture(scope="module")
def flow_models(tmp_path_factory):
    """{"if": path, "while": path}: float .tflite files whose branch subgraphs share tensor names, and
    calibration / evaluation data (both signs of the IF's predicate)."""
    import tensorflow as tf

    root = tmp_path_factory.mktemp("flow")
    rs = np.random.RandomState(0)
    w1, w2 = (rs.randn(8, 8).astype(np.float32) * 0.5 for _ in range(2))

    class IfModel(tf.Module):
        def __init__(self):
            self.w1, self.w2 = tf.Variable(w1), tf.Variable(w2)

        @tf.function(input_signature=[tf.TensorSpec([1, 8], tf.float32, name="x")])
        def __call__(self, x):
            y = tf.cond(tf.reduce_sum(x) > 0, lambda: tf.nn.relu(tf.matmul(x, self.w1)),
                        lambda: tf.tanh(tf.matmul(x, self.w2)))
            return {"y": y}

    class WhileModel(tf.Module):
        def __init__(self):
            self.w = tf.Variable(w1)

        @tf.function(input_signature=[tf.TensorSpec([1, 8], tf.float32, name="x")])
        def __call__(self, x):
            _, h = tf.while_loop(lambda i, h: i < 3, lambda i, h: (i + 1, tf.tanh(tf.matmul(h, self.w))),
                                 [tf.constant(0), x])
            return {"y": h}

    out = {}
    for name, module in (("if", IfModel()), ("while", WhileModel())):
        sm = root / f"sm_{name}"
        tf.saved_model.save(module, str(sm), signatures={"serving_default": module.__call__})
        raw = tf.lite.TFLiteConverter.from_saved_model(str(sm)).convert()
        path = root / f"{name}_dup.tflite"
        path.write_bytes(_duplicate_branch_names(raw))
        out[name] = path
    x = rs.randn(48, 8).astype(np.float32)
    np.savez(root / "data.npz", x=x)
    out["data"] = root / "data.npz"
    out["x"] = x
    return out


def _run(path_or_bytes, x: np.ndarray) -> np.ndarray:
    from ai_edge_litert.interpreter import Interpreter

    it = (Interpreter(model_content=path_or_bytes) if isinstance(path_or_bytes, bytes)
          else Interpreter(model_path=str(path_or_bytes)))
    it.allocate_tensors()
    inp, out = it.get_input_details()[0], it.get_output_details()[0]
    ys = []
    for row in x:
        it.set_tensor(inp["index"], row[None].astype(inp["dtype"]))
        it.invoke()
        ys.append(it.get_tensor(out["index"]).copy())
    return np.concatenate(ys)


@pytest.mark.parametrize("kind,op", [("if", "IF"), ("while", "WHILE")])
def test_unique_names_change_names_only_outputs_bit_identical(flow_models, kind, op):
    from edgebench.model.tflite_model import inspect

    raw = flow_models[kind].read_bytes()
    assert op in inspect(flow_models[kind])["op_histogram"]
    before = _names(raw)
    assert any(n in before[1] for n in before[2])          # the fixture really clashes (arg0 in both)
    fixed, renamed = unique_tensor_names(raw)
    after = _names(fixed)
    flat = [n for sg in after for n in sg]
    assert len(flat) == len(set(flat)) and renamed
    assert after[0] == before[0] and after[1] == before[1]   # the first user of a name keeps it
    assert {r["renamed"] for r in renamed} <= set(flat)
    x = flow_models["x"]
    assert (x.sum(axis=1) > 0).any() and (x.sum(axis=1) <= 0).any()    # both IF branches run
    a, b = _run(raw, x), _run(fixed, x)
    assert a.dtype == b.dtype == np.float32 and np.array_equal(a.view(np.uint32), b.view(np.uint32))
    assert unique_tensor_names(fixed) == (fixed, [])        # nothing left to rename


@pytest.mark.parametrize("kind,op", [("if", "IF"), ("while", "WHILE")])
def test_convert_keeps_every_precision_and_names_what_control_flow_stops(flow_models, run_cli, tmp_path, kind, op):
    """Main stopped at fp16 (the quantizer refused the names): no manifest, fp32 not recorded. Now:
    fp32, fp16 and dynamic are built (from the renamed file), int8 is one failed row whose reason
    says the quantizer does not calibrate through the control flow, exit 2 as for any partly failed
    conversion."""
    from conftest import require_extra

    require_extra("ai_edge_quantizer", "aeq")
    out = tmp_path / "c"
    code, stdout, err = run_cli("convert", str(flow_models[kind]), "-p", "fp32,fp16,int8,dynamic", "--data",
                                str(flow_models["data"]), "--out", str(out), "--json", "-")
    assert code == 2, err
    m = json.loads(stdout)
    assert json.loads((out / "manifest.json").read_text())["variants"].keys() == m["variants"].keys()
    v = m["variants"]
    assert [p for p in ("fp32", "fp16", "int8", "dynamic") if v[p]["status"] == "ok"] == ["fp32", "fp16", "dynamic"]
    reason = v["int8"]["error"]
    assert "does not calibrate through control flow" in reason and f"{op} x1" in reason, reason
    assert "\n" not in reason and m["failed"] == ["int8"]
    for p in ("fp16", "dynamic"):
        assert "made unique first" in v[p]["quantization"]["mode"] and v[p]["quantization"]["renamed_tensors"] > 0
        y, ref = _run(Path(v[p]["path"]), flow_models["x"]), _run(flow_models[kind], flow_models["x"])
        assert np.allclose(y, ref, atol=0.05 * np.abs(ref).max()), p      # the quantized file computes the model
    assert "int8 failed:" in err and "kept: fp32, fp16, dynamic" in err


def test_convert_and_compare_measures_every_other_precision(flow_models, run_cli, tmp_path):
    from conftest import require_extra

    require_extra("ai_edge_quantizer", "aeq")
    code, stdout, err = run_cli("convert-and-compare", str(flow_models["if"]), "-p", "fp32,fp16,int8,dynamic",
                                "--data", str(flow_models["data"]), "--runs", "20", "--no-store", "--json", "-",
                                "--out", str(tmp_path / "cac"))
    assert code == 2, err
    doc = json.loads(stdout)
    rows = {r["precision"]: r for r in doc["rows"] if r.get("role") != "reference"}
    assert {p: r["status"] for p, r in rows.items()} == {"fp32": "ok", "fp16": "ok", "int8": "failed",
                                                        "dynamic": "ok"}
    assert "does not calibrate through control flow" in rows["int8"]["error"]
    for p in ("fp16", "dynamic"):
        assert rows[p]["latency_ms"]["samples"] >= 20 and rows[p]["worst"]["cosine"] > 0.99
    assert (tmp_path / "cac" / "manifest.json").is_file()
