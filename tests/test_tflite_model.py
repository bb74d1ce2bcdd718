"""Flatbuffer inspection on real converted models: ops, dtypes, quantization, FLOPs, bad files."""

from __future__ import annotations

import pytest

from edgebench.core.errors import BadInput
from edgebench.model import tflite_model
from edgebench.model.tflite_model import COUNTED_OPS, inspect

pytest_plugins = ["conftest_bench"]


def test_fp32_ops_and_hand_counted_flops(bench_models):
    info = inspect(bench_models["fp32"])
    h = info["op_histogram"]
    assert h["CONV_2D"] == 1 and h["DEPTHWISE_CONV_2D"] == 1 and h["FULLY_CONNECTED"] == 1
    # conv 3x3x1->4 on 8x8 -> 6x6x4: 2*36*4*9 ; depthwise 3x3 on 6x6x4 -> 4x4x4: 2*64*9 ; dense 64->10: 2*10*64
    assert info["flops_by_op"] == {"CONV_2D": 2592, "DEPTHWISE_CONV_2D": 1152, "FULLY_CONNECTED": 1280}
    assert info["flops"] == 2592 + 1152 + 1280
    assert info["counted_ops"] == list(COUNTED_OPS)
    assert info["quantized"] is False and info["float_ops"] == []
    (inp,) = info["inputs"]
    assert inp["name"] == "image" and inp["shape"] == [1, 8, 8, 1] and inp["dtype"] == "float32"
    assert inp["quantization"] is None
    assert all(o["inputs"] and o["outputs"] for o in info["ops"])


def test_int8_io_quantization(bench_models):
    info = inspect(bench_models["int8"])
    assert info["quantized"] is True
    assert info["quantization_coverage"] == 1.0 and info["float_ops"] == []
    (inp,) = info["inputs"]
    (out,) = info["outputs"]
    assert inp["dtype"] == "int8" and out["dtype"] == "int8"
    assert inp["quantization"]["scale"] > 0 and isinstance(inp["quantization"]["zero_point"], int)
    conv = next(o for o in info["ops"] if o["op"] == "CONV_2D")
    assert conv["inputs"][0] == "int8" and conv["inputs"][1] == "int8" and conv["inputs"][2] == "int32"
    assert info["flops"] == inspect(bench_models["fp32"])["flops"]


def test_dynamic_range_model_reports_float_ops(bench_models):
    info = inspect(bench_models["dynamic"])
    assert info["quantized"] is True
    kinds = {o["op"]: o["kind"] for o in info["float_ops"]}
    assert kinds, "dynamic-range ops compute in float and must be listed"
    assert "hybrid" in kinds.values()
    assert info["quantization_coverage"] < 1.0


def test_signature_names_two_inputs(bench_models):
    names = {i["name"] for i in inspect(bench_models["two_input"])["inputs"]}
    assert names == {"a", "b"}
    assert inspect(bench_models["int32"])["inputs"][0]["dtype"] == "int32"


def test_bad_files(bench_models, tmp_path):
    trunc = tmp_path / "trunc.tflite"
    trunc.write_bytes(bench_models["fp32"].read_bytes()[:2000])
    with pytest.raises(BadInput, match="truncated or corrupt"):
        inspect(trunc)
    junk = tmp_path / "junk.tflite"
    junk.write_bytes(b"this is not a flatbuffer at all, just text\n")
    with pytest.raises(BadInput, match="not a TFLite flatbuffer"):
        inspect(junk)
    with pytest.raises(BadInput, match="model not found"):
        inspect(tmp_path / "missing.tflite")


def _flatbuffer(tensors: int, shape_len: int, *, signature_name: bool = True, input_index: int = 0) -> bytes:
    """A hand-built .tflite flatbuffer: ``tensors`` tensors that all share ONE shape vector of
    ``shape_len`` entries (legal flatbuffers, never produced by a converter), one signature."""
    import flatbuffers
    from ai_edge_litert import schema_py_generated as s

    b = flatbuffers.Builder(1024)
    s.TensorStartShapeVector(b, shape_len)
    for _ in range(shape_len):
        b.PrependInt32(1)
    shape = b.EndVector()
    name = b.CreateString("t")
    offs = []
    for _ in range(tensors):
        s.TensorStart(b)
        s.TensorAddShape(b, shape)
        s.TensorAddName(b, name)
        s.TensorAddBuffer(b, 0)
        offs.append(s.TensorEnd(b))
    s.SubGraphStartTensorsVector(b, len(offs))
    for o in reversed(offs):
        b.PrependUOffsetTRelative(o)
    tvec = b.EndVector()
    s.SubGraphStartInputsVector(b, 1)
    b.PrependInt32(input_index)
    ins = b.EndVector()
    s.SubGraphStart(b)
    s.SubGraphAddTensors(b, tvec)
    s.SubGraphAddInputs(b, ins)
    sg = s.SubGraphEnd(b)
    s.ModelStartSubgraphsVector(b, 1)
    b.PrependUOffsetTRelative(sg)
    sgs = b.EndVector()
    s.BufferStart(b)
    buf = s.BufferEnd(b)
    s.ModelStartBuffersVector(b, 1)
    b.PrependUOffsetTRelative(buf)
    bufs = b.EndVector()
    key = b.CreateString("serving_default")
    tname = b.CreateString("x") if signature_name else None
    s.TensorMapStart(b)
    if tname is not None:
        s.TensorMapAddName(b, tname)
    s.TensorMapAddTensorIndex(b, 0)
    tm = s.TensorMapEnd(b)
    s.SignatureDefStartInputsVector(b, 1)
    b.PrependUOffsetTRelative(tm)
    sins = b.EndVector()
    s.SignatureDefStart(b)
    s.SignatureDefAddInputs(b, sins)
    s.SignatureDefAddSignatureKey(b, key)
    s.SignatureDefAddSubgraphIndex(b, 0)
    sd = s.SignatureDefEnd(b)
    s.ModelStartSignatureDefsVector(b, 1)
    b.PrependUOffsetTRelative(sd)
    sds = b.EndVector()
    s.ModelStart(b)
    s.ModelAddVersion(b, 3)
    s.ModelAddSubgraphs(b, sgs)
    s.ModelAddBuffers(b, bufs)
    s.ModelAddSignatureDefs(b, sds)
    b.Finish(s.ModelEnd(b), file_identifier=b"TFL3")
    return bytes(b.Output())


def test_hand_built_flatbuffer_is_readable(tmp_path):
    p = tmp_path / "ok.tflite"
    p.write_bytes(_flatbuffer(3, 4))
    info = tflite_model.inspect(p)
    assert info["inputs"][0]["name"] == "x" and info["inputs"][0]["shape"] == [1, 1, 1, 1]


def test_shared_vectors_cannot_make_inspect_quadratic(tmp_path):
    # Audit S4: tensors sharing one long shape vector made inspect O(file size^2) in time and
    # memory (63 KiB: 4.8 s, 160 MB). The work is now bounded by the file size.
    p = tmp_path / "shared.tflite"
    p.write_bytes(_flatbuffer(3000, 3000))
    assert p.stat().st_size < 100_000
    with pytest.raises(BadInput, match="more data than its .* bytes hold"):
        tflite_model.inspect(p)


@pytest.mark.parametrize("kw,msg", [({"signature_name": False}, "corrupt"), ({"input_index": -3}, "corrupt"),
                                    ({"input_index": 99}, "corrupt")])
def test_hostile_model_is_bad_input_not_a_crash(tmp_path, kw, msg):
    # Audit R3: a signature tensor without a name raised AttributeError (exit 3); a negative
    # tensor index silently read another tensor.
    p = tmp_path / "hostile.tflite"
    p.write_bytes(_flatbuffer(3, 4, **kw))
    with pytest.raises(BadInput, match=msg):
        tflite_model.inspect(p)


def test_precision_comes_from_the_math_not_the_shape_arithmetic(run_cli, digits_model, tmp_path):
    """Issue 24.1: a float model with a dynamic-batch Flatten has int32 SHAPE/STRIDED_SLICE/PACK ops;
    it is still fp32 (fp16 ...), and an int8 file is int8 -- from the tensors of its compute ops."""
    import json

    code, _, err = run_cli("convert", "digits", "-p", "fp32,fp16,int8", "--out", str(tmp_path), "--json",
                           str(tmp_path / "m.json"))
    assert code == 0, err
    v = json.loads((tmp_path / "manifest.json").read_text())["variants"]
    assert "SHAPE" in inspect(v["fp32"]["path"])["op_histogram"]          # the dynamic batch's shape ops
    assert {p: v[p]["precision_from_tensors"] for p in v} == {"fp32": "fp32", "fp16": "fp16", "int8": "int8"}
    assert v["int8"]["precision_detail"] is None or v["int8"]["precision_detail"].startswith("int8 with ")


def test_dynamic_range_embedding_model_is_dynamic_not_int8(tmp_path):
    """Issue 28.4: an Embedding converted with dynamic-range quantization looks its int8 rows up with a
    GATHER (integer in, integer out); its math is float with int8 weights: dynamic."""
    import keras
    import numpy as np
    import tensorflow as tf

    m = keras.Sequential([keras.Input((12,), dtype="int32"), keras.layers.Embedding(2000, 64),
                          keras.layers.GlobalAveragePooling1D(), keras.layers.Dense(300), keras.layers.Dense(4)])
    m(np.zeros((1, 12), np.int32))
    conv = tf.lite.TFLiteConverter.from_keras_model(m)
    conv.optimizations = [tf.lite.Optimize.DEFAULT]
    path = tmp_path / "emb_dynamic.tflite"
    path.write_bytes(conv.convert())
    info = inspect(path)
    assert "GATHER" in info["op_histogram"]
    assert tflite_model.precision(info) == "dynamic"
    assert tflite_model.precision_detail(info) is None
