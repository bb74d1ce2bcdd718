"""Flatbuffer inspection on real converted models: ops, dtypes, quantization, FLOPs, bad files."""

from __future__ import annotations

import pytest

from edgebench.errors import BadInput
from edgebench.tflite_model import COUNTED_OPS, inspect

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
