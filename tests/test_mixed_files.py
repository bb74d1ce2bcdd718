"""Issue 45 items 4-5: an "int8" file that keeps float ops says what it is everywhere (one count,
``tflite_model.MixedFile``), and diagnose's advice is checked before it is printed (nothing that is
already float in the int8 file is proposed; a built fix no better than the file is not offered).
Models are built here with Keras and converted by TF's converter / ai-edge-quantizer."""

from __future__ import annotations

import json

import numpy as np
import pytest


@pytest.fixture(scope="module")
def elu_model(tmp_path_factory):
    """TF's converter leaves ELU (and the CONCATENATION between two ELUs) float in an int8 file
    without an error: two ELU branches, a concatenation, a conv, a classifier head."""
    import keras

    keras.utils.set_random_seed(0)
    inp = keras.Input((8, 8, 3), name="image")
    a = keras.layers.ELU()(keras.layers.Conv2D(4, 3, padding="same")(inp))
    b = keras.layers.ELU()(keras.layers.Conv2D(4, 3, padding="same")(inp))
    x = keras.layers.Conv2D(4, 3, padding="same")(keras.layers.Concatenate()([a, b]))
    out = keras.layers.Dense(5, name="logits")(keras.layers.GlobalAveragePooling2D()(x))
    d = tmp_path_factory.mktemp("elu")
    keras.Model(inp, out).export(str(d / "sm"), verbose=False)
    rng = np.random.default_rng(0)
    np.savez(d / "data.npz", image=rng.uniform(-1, 1, (24, 8, 8, 3)).astype(np.float32), labels=rng.integers(0, 5, 24))
    return d


WANT = "int8, 3 float ops: ELU x2, CONCATENATION x1"


def test_a_mixed_int8_file_says_what_it_is_in_every_output(elu_model, run_cli, tmp_path):
    from edgebench.model.tflite_model import inspect, mixed_file
    from edgebench.report.html import render_html
    from edgebench.rows import Document

    js, md = tmp_path / "r.json", tmp_path / "r.md"
    code, out, err = run_cli("convert-and-compare", str(elu_model / "sm"), "-p", "fp32,int8", "--data",
                             str(elu_model / "data.npz"), "-n", "8", "--runs", "3", "--out", str(tmp_path / "o"),
                             "--json", str(js), "--markdown", str(md))
    assert code == 0, err
    doc = json.loads(js.read_text())
    int8 = next(r for r in doc["rows"] if r["precision"] == "int8")
    assert int8["precision_detail"] == WANT                                  # JSON: every float op counted
    manifest = json.loads((tmp_path / "o" / "manifest.json").read_text())
    v = manifest["variants"]["int8"]
    assert v["precision_detail"] == WANT and v["quantization"]["mode"] == WANT   # not "full-integer"
    m = mixed_file(inspect(v["path"]))                                        # the one reader, typed
    assert m.float_ops == (("ELU", 2), ("CONCATENATION", 1)) and m.float_count == 3
    assert WANT in " ".join(out.split())                                      # terminal
    assert WANT in md.read_text()                                             # Markdown
    assert WANT in render_html([doc])                                         # HTML


def test_readiness_links_an_fp16_refusal_to_the_float_ops_of_an_int8_file():
    from edgebench.report.readiness import headline
    from edgebench.rows import Document, InferenceRow, LeftOnCpu, Readiness

    rd = Readiness(vendor="Qualcomm", soc="SM8650", checkable=True, compile_status="ops-rejected", ops_on_npu=10,
                   ops_total=12, left_on_cpu=(LeftOnCpu(op="ELU", node=3, vendor_line="The SocModel doesn't support FP16"),),
                   all_ops_on_npu=False)
    row = InferenceRow(target="Qualcomm SM8650", model="m", precision="int8", precision_detail=WANT, readiness=rd)
    doc = Document.new("readiness", [row], {})
    line = headline(doc)[0]
    assert "ELU: no FP16 on this SoC" in line and WANT in line, line


@pytest.fixture(scope="module")
def leaky_pair(tmp_path_factory):
    """A float .tflite whose first conv has one channel 300x the others, and its int8 file made by
    ai-edge-quantizer, which leaves LEAKY_RELU float (DEQUANTIZE -> LEAKY_RELU -> QUANTIZE)."""
    pytest.importorskip("ai_edge_quantizer")
    import keras
    import tensorflow as tf

    from edgebench.cli import _main as main

    keras.utils.set_random_seed(0)
    inp = keras.Input((16, 16, 3), batch_size=1, name="image")
    c1 = keras.layers.Conv2D(8, 3, padding="same")
    x = keras.layers.LeakyReLU(0.1)(c1(inp))
    x = keras.layers.LeakyReLU(0.1)(keras.layers.Conv2D(8, 3, padding="same")(x))
    out = keras.layers.Dense(6, name="logits")(keras.layers.GlobalAveragePooling2D()(x))
    model = keras.Model(inp, out)
    w, b = c1.get_weights()
    w[..., 0] *= 300.0
    c1.set_weights([w, b])
    d = tmp_path_factory.mktemp("leaky")
    fp32 = d / "lr_fp32.tflite"
    fp32.write_bytes(tf.lite.TFLiteConverter.from_keras_model(model).convert())
    rng = np.random.default_rng(0)
    np.savez(d / "data.npz", image=rng.normal(0, 1, (48, 16, 16, 3)).astype(np.float32), labels=rng.integers(0, 6, 48))
    try:
        main(["convert", str(fp32), "-p", "int8", "--data", str(d / "data.npz"), "--out", str(d / "o")])
    except SystemExit as e:
        assert not e.code
    return fp32, d / "o" / "lr_fp32_int8.tflite", d / "data.npz"


def test_diagnose_never_proposes_keeping_float_what_is_already_float(leaky_pair, run_cli, tmp_path):
    from edgebench.model.tflite_model import inspect, mixed_file

    fp32, int8, npz = leaky_pair
    assert dict(mixed_file(inspect(str(int8))).float_ops).get("LEAKY_RELU") == 2      # the quantizer's leftovers
    js = tmp_path / "d.json"
    code, out, err = run_cli("diagnose", str(int8), "--reference", str(fp32), "--data", str(npz), "--samples", "32",
                             "--out", str(tmp_path / "o"), "--json", str(js), "--no-store")
    assert code == 0, err
    (row,) = json.loads(js.read_text())["rows"]
    layers = row["layers"]
    after_leaky = [l for l in layers if l["op"] == "QUANTIZE" and "LeakyRelu" in l["tensor"]]
    assert after_leaky and all(not l["finding"] and l["already_float"]["op"] == "LEAKY_RELU" for l in after_leaky)
    # never ranked as culprits: after every layer that is not already float
    first_float = min(l["rank"] for l in layers if l.get("already_float"))
    assert all(l["rank"] < first_float for l in layers if not l.get("already_float"))
    proposed = (row.get("suggested_keep_float") or []) + (row.get("tried_keep_float") or [])
    assert not any("LeakyRelu" in t for t in proposed), proposed
    assert "--keep-float functional_1/leaky_re_lu" not in out
    # the fixes it built score no better than the file: reported as tried, not offered
    proof = row["fix_proof"]
    base = row["worst"]["psnr_db"]
    for c in proof["candidates"]:
        if c["psnr_db"] < base + 1.0:
            assert not c["offered"] and c["tried"].startswith("tried: "), c
            assert f"{base:.1f} dB" in c["tried"] and c["command"] not in row["fix_commands"]
    if not any(c["offered"] for c in proof["candidates"]):
        assert row["fix_commands"] == [] and row["suggested_keep_float"] == []
        assert "tried, nothing better than the file" in out and "not offered" in out


def test_a_fix_that_is_the_same_file_again_is_not_offered():
    from edgebench.diagnose.fix import no_better

    assert no_better({"psnr_db": 40.0}, 30.0, None, same_file=False) is None
    assert no_better({"psnr_db": 32.6}, 36.4, None, same_file=False) == "tried: worse, 32.6 dB vs 36.4 dB"
    assert no_better({"psnr_db": 36.8}, 36.4, None, same_file=False) == "tried: no better, 36.8 dB vs 36.4 dB"
    assert no_better({"psnr_db": 40.0}, 30.0, None, same_file=True).startswith("tried: the same file")
    assert no_better({"psnr_db": 30.0, "top1_drop_pp": 0.5}, 30.0, 4.0, same_file=False) is None   # fewer points lost
