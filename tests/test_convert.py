"""Real TF -> TFLite conversions on tiny models: manifest, parity, data formats, bad input."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from edgebench.convert import run as conv
from edgebench.convert.run import ConvertSettings, check_manifest, convert
from edgebench.core.errors import BadInput, ConversionFailed
from edgebench.core.fingerprint import sha256_file

MANIFEST_VARIANT_KEYS = {"path", "bytes", "size_reduction_pct", "seconds", "op_histogram", "float_ops",
                         "inputs", "outputs", "sha256", "quantization"}


@pytest.fixture(scope="module")
def digits_manifest(tmp_path_factory, digits_model):
    out = tmp_path_factory.mktemp("digits")
    return convert(ConvertSettings(src="digits", out_dir=str(out)))


def test_digits_converts_to_four_variants_with_full_manifest(digits_manifest):
    m = digits_manifest
    assert set(m["variants"]) == {"fp32", "fp16", "int8", "dynamic"}
    for prec, v in m["variants"].items():
        assert v["status"] == "ok", (prec, v.get("error"))
        assert MANIFEST_VARIANT_KEYS <= set(v), prec
        assert Path(v["path"]).stat().st_size == v["bytes"]
        assert sum(v["op_histogram"].values()) > 0
    assert m["variants"]["int8"]["size_reduction_pct"] >= 70.0
    assert m["variants"]["fp16"]["size_reduction_pct"] == pytest.approx(50, abs=5)
    assert m["parity"]["passed"] is True
    assert m["variants"]["int8"]["float_ops"] == []            # full-integer: nothing stayed float
    q = m["variants"]["int8"]["inputs"][0]
    assert q["dtype"] == "float32"                              # --int8-io float (default)
    assert len(m["source"]["sha256"]) == 64
    assert m["versions"]["tensorflow"] and m["versions"]["litert"]
    assert m["calibration"]["samples"] == 100 and not m["calibration"]["synthetic"]
    on_disk = json.loads((Path(m["out_dir"]) / "manifest.json").read_text())
    assert on_disk["variants"]["int8"]["bytes"] == m["variants"]["int8"]["bytes"]


def test_int8_io_int8_has_quantized_io(tmp_path, digits_model):
    m = convert(ConvertSettings(src="digits", precisions=("int8",), int8_io="int8", out_dir=str(tmp_path)))
    v = m["variants"]["int8"]
    assert v["inputs"][0]["dtype"] == "int8" and v["inputs"][0]["quantization"]["scale"]
    assert v["outputs"][0]["dtype"] == "int8"
    assert "fp32" in m["variants"] and m["variants"]["fp32"]["requested"] is False


def test_multi_input_multi_output_with_npz(tmp_path, small_savedmodels):
    rng = np.random.default_rng(0)
    np.savez(tmp_path / "cal.npz", a=rng.normal(size=(40, 6)).astype(np.float32),
             b=rng.normal(size=(40, 6)).astype(np.float32))
    m = convert(ConvertSettings(src=str(small_savedmodels["multi"]), data=str(tmp_path / "cal.npz"),
                                out_dir=str(tmp_path / "o"), calibration_samples=30))
    check_manifest(m)
    assert m["calibration"]["samples"] == 30
    names = {o["name"] for o in m["variants"]["int8"]["outputs"]}
    assert names == {"logits", "embedding"}
    assert {i["name"] for i in m["variants"]["fp32"]["inputs"]} == {"a", "b"}


def test_int32_token_inputs_calibrated_with_integer_data(tmp_path, small_savedmodels):
    np.savez(tmp_path / "ids.npz", ids=np.random.default_rng(1).integers(0, 50, size=(30, 5)).astype(np.int32))
    m = convert(ConvertSettings(src=str(small_savedmodels["tokens"]), data=str(tmp_path / "ids.npz"),
                                out_dir=str(tmp_path / "o")))
    check_manifest(m)
    assert m["variants"]["int8"]["inputs"][0]["dtype"] == "int32"
    np.savez(tmp_path / "bad.npz", ids=np.random.default_rng(1).uniform(0, 50, size=(30, 5)).astype(np.float32))
    with pytest.raises(BadInput, match="non-integer"):
        convert(ConvertSettings(src=str(small_savedmodels["tokens"]), data=str(tmp_path / "bad.npz"),
                                out_dir=str(tmp_path / "o2")))


def test_broken_conversion_is_caught_by_fp32_parity(tmp_path, small_savedmodels):
    m = convert(ConvertSettings(src=str(small_savedmodels["broken"]), precisions=("fp32",), data="synthetic",
                                out_dir=str(tmp_path)))
    assert m["parity"]["passed"] is False
    assert m["variants"]["fp32"]["status"] == "failed"
    assert "random or stateful ops" in m["parity"]["explanation"]
    with pytest.raises(ConversionFailed, match="disagrees with TensorFlow on output 'y'"):
        check_manifest(m)


def test_partial_failure_keeps_successful_variants(tmp_path, digits_model, monkeypatch):
    def failing_int8(src, calib, io):
        raise RuntimeError("ConverterError: 'tfl.custom_op' op has no int8 kernel")

    monkeypatch.setitem(conv.PRECISIONS, "int8", failing_int8)
    monkeypatch.setenv("EDGEBENCH_CONVERT_ISOLATED", "0")   # the patched converter lives in this process
    m = convert(ConvertSettings(src="digits", precisions=("fp32", "fp16", "int8"), out_dir=str(tmp_path)))
    assert m["variants"]["int8"]["status"] == "failed" and "no int8 kernel" in m["variants"]["int8"]["error"]
    assert m["variants"]["fp16"]["status"] == "ok" and Path(m["variants"]["fp16"]["path"]).exists()
    with pytest.raises(ConversionFailed, match=r"int8 failed: .*kept: fp32, fp16"):
        check_manifest(m)


def test_keras_file_source_and_corrupt_keras(tmp_path):
    import keras

    model = keras.Sequential([keras.Input((4,), name="x"), keras.layers.Dense(3, activation="softmax")])
    model.save(tmp_path / "m.keras")
    m = convert(ConvertSettings(src=str(tmp_path / "m.keras"), precisions=("fp32", "dynamic"),
                                out_dir=str(tmp_path / "o")))
    check_manifest(m)
    assert m["source"]["kind"] == "keras" and m["parity"]["passed"]
    (tmp_path / "bad.keras").write_bytes(b"not a zip at all")
    with pytest.raises(BadInput, match="cannot load this .keras file"):
        convert(ConvertSettings(src=str(tmp_path / "bad.keras"), out_dir=str(tmp_path / "o2")))


@pytest.mark.parametrize("args,msg", [
    (["/definitely/not/here"], "no such file or folder"),
    (["no_such_model"], "not a path and not a reference model"),
    (["digits", "--precision", "fp32,int4"], "unknown value 'int4'"),
    (["digits", "--int8-io", "uint8"], "use float or int8"),
])
def test_cli_bad_input_exits_2_with_one_line(run_cli, args, msg, digits_model, tmp_path):
    code, out, err = run_cli("convert", *args, "--out", str(tmp_path))
    assert code == 2, (out, err)
    assert msg in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_cli_folder_that_is_not_a_savedmodel_and_no_signature(run_cli, tmp_path, small_savedmodels):
    (tmp_path / "empty").mkdir()
    code, _, err = run_cli("convert", str(tmp_path / "empty"))
    assert code == 2 and "not a SavedModel" in err
    code, _, err = run_cli("convert", str(small_savedmodels["nosig"]), "--out", str(tmp_path / "o"))
    assert code == 2 and "no 'serving_default' signature" in err


def test_cli_wrong_calibration_shape(run_cli, tmp_path, digits_model):
    np.savez(tmp_path / "c.npz", image=np.zeros((10, 9, 9, 1), np.float32))
    code, _, err = run_cli("convert", "digits", "--data", str(tmp_path / "c.npz"), "--out", str(tmp_path / "o"))
    assert code == 2 and "declares shape [10, 9, 9, 1]" in err and "[N, 8, 8, 1]" in err and "nothing was read" in err, err


def test_cli_convert_json_stdout(run_cli, tmp_path, digits_model):
    code, out, err = run_cli("convert", "digits", "-p", "fp32,int8", "--out", str(tmp_path), "--json", "-")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["variants"]["int8"]["size_reduction_pct"] >= 70 and doc["parity"]["passed"]


# ---------------------------------------------------------------- issue 18.1: runs never share files silently
def test_two_conversions_never_share_a_folder_and_out_refuses_another_runs_files(run_cli, tmp_path, monkeypatch,
                                                                                 small_savedmodels):
    monkeypatch.chdir(tmp_path)
    rng = np.random.default_rng(0)
    np.savez(tmp_path / "cal.npz", a=rng.normal(size=(20, 6)).astype(np.float32),
             b=rng.normal(size=(20, 6)).astype(np.float32))
    common = dict(src=str(small_savedmodels["multi"]), precisions=("fp32", "int8"), data=str(tmp_path / "cal.npz"))
    m1 = convert(ConvertSettings(**common))
    m2 = convert(ConvertSettings(**common, int8_io="int8"))
    assert m1["out_dir"] != m2["out_dir"] and Path(m1["out_dir"]).parent == Path(m2["out_dir"]).parent
    assert Path(m1["out_dir"]).resolve().parent == (tmp_path / "edgebench-out" / "multi").resolve()
    # the first run's files are intact: every recorded sha256 is the file on disk
    for m in (m1, m2):
        for v in m["variants"].values():
            assert sha256_file(v["path"]) == v["sha256"]
    assert m1["variants"]["int8"]["sha256"] != m2["variants"]["int8"]["sha256"]
    # the same command again reuses its own folder
    assert convert(ConvertSettings(**common))["out_dir"] == m1["out_dir"]

    out = tmp_path / "shared"
    code, _, err = run_cli("convert", common["src"], "-p", "fp32,int8", "--data", str(tmp_path / "cal.npz"),
                           "--out", str(out))
    assert code == 0, err
    before = {p.name: p.read_bytes() for p in out.glob("*.tflite")}
    code, _, err = run_cli("convert", common["src"], "-p", "fp32,int8", "--data", str(tmp_path / "cal.npz"),
                           "--int8-io", "int8", "--out", str(out))
    assert code == 2
    assert "already holds the files of another conversion (int8_io 'float' there, 'int8' now)" in err
    assert "Traceback" not in err and {p.name: p.read_bytes() for p in out.glob("*.tflite")} == before
    code, _, err = run_cli("convert", common["src"], "-p", "fp32,int8", "--data", str(tmp_path / "cal.npz"),
                           "--out", str(out))
    assert code == 0, err          # the same conversion may write into its own folder again
    stray = tmp_path / "stray"
    stray.mkdir()
    (stray / "multi_fp32.tflite").write_bytes(b"not ours")
    code, _, err = run_cli("convert", common["src"], "-p", "fp32", "--out", str(stray))
    assert code == 2 and "already holds multi_fp32.tflite" in err
