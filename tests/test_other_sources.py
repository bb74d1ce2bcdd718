"""Sources that are not TensorFlow, without their extras (issue 38): a missing [torch] or [aeq] extra
is one line, exit 2, naming the install command; the mixed-precision label of an int8 file with a
few 16-bit-activation ops; SRC or --torch. Core tests: no extra needed, nothing converted."""

from __future__ import annotations

import sys

import pytest



@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """A tiny float SavedModel (x[1,4] -> y = relu(x W)) and its .tflite, written with tf.Module."""
    import tensorflow as tf

    d = tmp_path_factory.mktemp("tiny")

    class M(tf.Module):
        def __init__(self):
            super().__init__()
            self.w = tf.Variable(tf.ones((4, 3)))

        @tf.function(input_signature=[tf.TensorSpec((1, 4), tf.float32, name="x")])
        def __call__(self, x):
            return {"y": tf.nn.relu(x @ self.w)}

    m = M()
    tf.saved_model.save(m, str(d / "sm"), signatures={"serving_default": m.__call__})
    (d / "tiny.tflite").write_bytes(tf.lite.TFLiteConverter.from_saved_model(str(d / "sm")).convert())
    import numpy as np

    x = np.random.default_rng(0).uniform(-1, 1, (16, 4)).astype(np.float32)
    np.savez(d / "data.npz", x=x)
    c = tf.lite.TFLiteConverter.from_saved_model(str(d / "sm"))
    c.optimizations = [tf.lite.Optimize.DEFAULT]
    c.representative_dataset = lambda: ([x[i:i + 1]] for i in range(16))
    c.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    (d / "tiny_int8.tflite").write_bytes(c.convert())
    return d


@pytest.fixture
def no_torch(monkeypatch):
    for name in ("torch", "litert_torch"):
        monkeypatch.setitem(sys.modules, name, None)        # `import torch` raises ImportError
    from edgebench.targets import torch_ref

    monkeypatch.setattr(torch_ref, "_LOADED", {})


def _one_line_exit_2(code, err, needle):
    assert code == 2, err
    lines = [x for x in err.strip().splitlines() if x.strip()]
    assert len(lines) == 1 and needle in lines[0] and "Traceback" not in err, err


def test_torch_factory_without_the_extra(no_torch, run_cli):
    code, _, err = run_cli("convert", "--torch", "my_models:make_net", "--input-shape", "image:1,3,8,8")
    _one_line_exit_2(code, err, "pip install 'edgebench[torch]'")


def test_pt2_without_the_extra(no_torch, run_cli, tmp_path):
    pt2 = tmp_path / "m.pt2"
    pt2.write_bytes(b"PK\x03\x04 not really")
    code, _, err = run_cli("convert", str(pt2), "-p", "fp32")
    _one_line_exit_2(code, err, "pip install 'edgebench[torch]'")


def test_float_tflite_int8_without_the_extra(monkeypatch, run_cli, tiny, tmp_path):
    monkeypatch.setitem(sys.modules, "ai_edge_quantizer", None)
    import numpy as np

    np.savez(tmp_path / "cal.npz", x=np.ones((4, 4), np.float32))
    code, _, err = run_cli("convert", str(tiny / "tiny.tflite"), "-p", "int8", "--data", str(tmp_path / "cal.npz"),
                           "--out", str(tmp_path / "o"))
    _one_line_exit_2(code, err, "pip install 'edgebench[aeq]'")


def test_tflite_pair_diagnosis_without_the_extra_says_how_to_prove_a_fix(monkeypatch, run_cli, tiny, tmp_path):
    import json

    monkeypatch.setitem(sys.modules, "ai_edge_quantizer", None)
    code, out, err = run_cli("diagnose", str(tiny / "tiny_int8.tflite"), "--reference", str(tiny / "tiny.tflite"),
                             "--data", str(tiny / "data.npz"), "--samples", "8", "--no-store", "--json", "-",
                             "--out", str(tmp_path / "d"))
    assert code == 0, err
    (row,) = json.loads(out)["rows"]
    assert row["fix_commands"] == [] and "pip install 'edgebench[aeq]'" in row["verdict"]


def test_no_model_and_two_models_are_refused(run_cli, tiny):
    code, _, err = run_cli("convert")
    _one_line_exit_2(code, err, "--torch MODULE:FACTORY")
    code, _, err = run_cli("diagnose", str(tiny / "tiny.tflite"), "--torch", "m:f")
    _one_line_exit_2(code, err, "give one model")


def test_a16_needs_a_float_tflite_or_torch_source(run_cli, tiny, tmp_path):
    import numpy as np

    np.savez(tmp_path / "cal.npz", x=np.ones((4, 4), np.float32))
    code, _, err = run_cli("convert", str(tiny / "sm"), "-p", "int8", "--a16", "x", "--data", str(tmp_path / "cal.npz"),
                           "--out", str(tmp_path / "o"))
    _one_line_exit_2(code, err, "--a16")


def _op(kind, out):
    return {"op": "CONV_2D", "kind": kind, "inputs": ["int8"], "outputs": [out]}


def test_int8_file_with_a_few_a16_ops_is_labelled_mixed():
    from edgebench.model.tflite_model import precision, precision_detail

    mixed = {"ops": [_op("integer", "int8")] * 5 + [_op("integer", "int16")] * 2}
    assert precision(mixed) == "int8"
    assert precision_detail(mixed) == "int8 + a16 on 2 ops (CONV_2D)"
    both = {"ops": mixed["ops"] + [{"op": "SOFTMAX", "kind": "float", "inputs": ["float32"], "outputs": ["float32"]}]}
    assert precision_detail(both) == "int8 + a16 on 2 ops (CONV_2D), 1 float op: SOFTMAX x1"
    wide = {"ops": [_op("integer", "int16")] * 7}
    assert precision(wide) == "int16x8" and precision_detail(wide) is None
    mostly_wide = {"ops": [_op("integer", "int16")] * 5 + [_op("integer", "int8")]}
    assert precision(mostly_wide) == "int16x8" and precision_detail(mostly_wide) == "int16x8 + a8 on 1 op (CONV_2D)"
