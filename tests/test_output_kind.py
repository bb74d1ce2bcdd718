"""Issue 45 item 6: task-aware agreement. An output whose classes are ordered bins (a pitch
tracker's 20-cent bins) is scored by bin distance when declared (``--output-kind
NAME:ordinal,tolerance=N``); undeclared, a top-1 disagreement that is mostly +-1 bin is said in
one line. The model is built here: a Gaussian bump over 40 bins centred on a learned position."""

from __future__ import annotations

import json

import numpy as np
import pytest

BINS = 40


@pytest.fixture(scope="module")
def pitch_model(tmp_path_factory):
    """Scores -|c - k| over bins k for a learned position c: int8 rounds c, which moves the top bin
    to a neighbour when c is near a bin edge (a pitch tracker's class of output)."""
    import keras

    keras.utils.set_random_seed(0)
    inp = keras.Input((4,), name="features")
    centre = keras.layers.Dense(1, name="centre")(inp)
    diff = keras.layers.Dense(BINS, name="diff")(centre)                   # c - k
    up = keras.layers.ReLU()(diff)
    down = keras.layers.ReLU()(keras.layers.Rescaling(-1.0)(diff))
    pitch = keras.layers.Rescaling(-1.0, name="pitch")(keras.layers.Add()([up, down]))   # -|c - k|
    model = keras.Model(inp, pitch)
    k = np.arange(BINS, dtype=np.float32)
    model.get_layer("centre").set_weights([np.full((4, 1), BINS / 4.0, np.float32), np.zeros(1, np.float32)])
    model.get_layer("diff").set_weights([np.ones((1, BINS), np.float32), -k])
    d = tmp_path_factory.mktemp("pitch")
    model.export(str(d / "sm"), verbose=False)
    rng = np.random.default_rng(0)
    x = rng.uniform(0.02, 0.98, (256, 4)).astype(np.float32)
    centre_v = x.sum(axis=1) * BINS / 4.0
    np.savez(d / "data.npz", features=x, labels=np.clip(np.round(centre_v), 0, BINS - 1).astype(np.int64))
    return d


def _int8(doc):
    return next(r for r in doc["rows"] if r["precision"] == "int8")


def test_ordinal_output_is_scored_by_bin_distance(pitch_model, run_cli, tmp_path):
    base = ["convert-and-compare", str(pitch_model / "sm"), "-p", "fp32,int8", "--data", str(pitch_model / "data.npz"),
            "-n", "256", "--runs", "3", "--no-store"]
    js = tmp_path / "plain.json"
    code, out, err = run_cli(*base, "--out", str(tmp_path / "a"), "--json", str(js))
    assert code == 0, err
    plain = _int8(json.loads(js.read_text()))
    acc = plain["accuracy"]
    assert acc["top1_agreement"] < 1.0 and acc["within_1_bin"] >= 0.8, acc       # int8 moves the peak one bin
    name = acc["output"]                     # the exported SavedModel's name for the scores
    note = [w for w in plain["warnings"] if "neighbouring bin" in w]
    assert len(note) == 1 and f"--output-kind {name}:ordinal,tolerance=1" in note[0]
    assert "neighbouring bin" in " ".join(out.split())

    js2 = tmp_path / "ordinal.json"
    code, out, err = run_cli(*base, "--out", str(tmp_path / "b"), "--json", str(js2),
                             "--output-kind", f"{name}:ordinal,tolerance=1")
    assert code == 0, err
    doc = json.loads(js2.read_text())
    row = _int8(doc)
    a = row["accuracy"]
    assert a["ordinal_tolerance"] == 1 and a["exact_top1_agreement"] == acc["top1_agreement"]
    assert a["top1_agreement"] == 1.0 and a["top1_agreement"] > acc["top1_agreement"]
    assert a["top1"] >= a["exact_top1"] and not any("neighbouring bin" in w for w in row["warnings"])
    ref = doc["reference"]
    assert ref["accuracy"]["ordinal_tolerance"] == 1


@pytest.mark.parametrize("value, says", [("pitch", "not of the form"), ("pitch:nominal", "unknown kind"),
                                         ("pitch:ordinal,tolerance=-1", "tolerance must be"),
                                         ("pitch:ordinal,tolerance=two", "tolerance must be")])
def test_a_bad_output_kind_is_one_line_exit_2(run_cli, tmp_path, value, says):
    code, out, err = run_cli("convert-and-compare", "digits", "--output-kind", value, "--out", str(tmp_path / "o"))
    assert code == 2
    text = (err or out).strip()
    assert len(text.splitlines()) == 1 and "--output-kind" in text and says in text and "Traceback" not in text


def test_an_output_kind_naming_no_output_is_exit_2(pitch_model, run_cli, tmp_path):
    code, out, err = run_cli("convert-and-compare", str(pitch_model / "sm"), "-p", "fp32", "--data",
                             str(pitch_model / "data.npz"), "-n", "8", "--runs", "3", "--no-store",
                             "--output-kind", "f0:ordinal", "--out", str(tmp_path / "o"))
    assert code == 2 and "no output 'f0'" in err and "output_0" in err


def test_compare_and_diagnose_take_the_output_kind(pitch_model, run_cli, tmp_path):
    code, _, err = run_cli("convert", str(pitch_model / "sm"), "-p", "fp32,int8", "--data", str(pitch_model / "data.npz"),
                           "--out", str(tmp_path / "c"))
    assert code == 0, err
    manifest = json.loads((tmp_path / "c" / "manifest.json").read_text())["variants"]
    fp32, int8 = manifest["fp32"]["path"], manifest["int8"]["path"]
    pair = ["compare", fp32, int8, "--data", str(pitch_model / "data.npz"), "-n", "256", "--no-store"]
    code, _, err = run_cli(*pair, "--json", str(tmp_path / "p.json"))
    assert code == 0, err
    plain = json.loads((tmp_path / "p.json").read_text())["rows"][1]
    assert plain["accuracy"]["top1_agreement"] < 1.0 and any("neighbouring bin" in w for w in plain["warnings"])
    name = plain["accuracy"]["output"]
    code, _, err = run_cli(*pair, "--json", str(tmp_path / "o.json"), "--output-kind", f"{name}:ordinal,tolerance=1")
    assert code == 0, err
    ordinal = json.loads((tmp_path / "o.json").read_text())["rows"][1]["accuracy"]
    assert ordinal["ordinal_tolerance"] == 1 and ordinal["top1_agreement"] == 1.0

    code, _, err = run_cli("diagnose", str(pitch_model / "sm"), "-p", "int8", "--data", str(pitch_model / "data.npz"),
                           "-n", "32", "--fix-trials", "0", "--no-store", "--out", str(tmp_path / "d"),
                           "--json", str(tmp_path / "d.json"), "--output-kind", f"{name}:ordinal,tolerance=1")
    assert code == 0, err
    (row,) = json.loads((tmp_path / "d.json").read_text())["rows"]
    assert row["accuracy"]["ordinal_tolerance"] == 1 and row["accuracy"]["top1_agreement"] == 1.0
    code, _, err = run_cli("diagnose", str(pitch_model / "sm"), "--output-kind", "x:ordinal,tolerance=z")
    assert code == 2 and "--output-kind" in err and len(err.strip().splitlines()) == 1
