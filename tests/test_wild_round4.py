"""Models from the wild, round 4 (issue 33.2 and on): Keras-2-era recurrent models, diagnose's
ranking and advice. Every model is built here with the real packages."""

from __future__ import annotations

import json

import numpy as np
import pytest

FAST = ("--min-time", "0.02", "--min-runs", "20", "--warmup-runs", "1")


@pytest.fixture(scope="module")
def bilstm(tmp_path_factory):
    """A Keras 2 (tf-keras) stacked Bidirectional LSTM with a sigmoid output, saved as .h5: Keras 3
    refuses its config (time_major), tf-keras loads it. Random weights, uniform inputs."""
    import tf_keras as k

    d = tmp_path_factory.mktemp("k2lstm")
    k.utils.set_random_seed(0)
    L = k.layers
    m = k.Sequential([L.Input((12, 4), name="seq"), L.Bidirectional(L.LSTM(8, return_sequences=True)),
                      L.Bidirectional(L.LSTM(4)), L.Dense(1, activation="sigmoid")])
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
    manifest = json.loads((tmp_path / "o" / "manifest.json").read_text())
    info = manifest["source"]["info"]
    assert info["loaded_with"].startswith("tf-keras") and info["static_export"]
