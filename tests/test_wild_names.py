"""Issue 45 item 7: what a user reads names their model, not edgebench: PyTorch tensor names
without edgebench's wrapper module, a Keras 3 LSTM's int8 failure with its real cause, and no
--trust-model offered where it cannot resolve a custom Keras class. Models are built here."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

HERE = Path(__file__).parent


@pytest.mark.extras
@pytest.mark.parametrize("layout", [[], ["--channels-last"]])
def test_torch_tensor_names_carry_no_edgebench_wrapper(run_cli, tmp_path, layout):
    from conftest import require_extra

    require_extra("torch", "torch")
    require_extra("litert_torch", "torch")
    if str(HERE) not in sys.path:
        sys.path.insert(0, str(HERE))
    from edgebench.model.tflite_model import inspect

    code, out, err = run_cli("convert", "--torch", "torch_models:make_net", "--input-shape", "image:1,3,16,16",
                             *layout, "-p", "fp32", "--out", str(tmp_path / "o"), "--json", str(tmp_path / "c.json"))
    assert code == 0, err
    path = json.loads((tmp_path / "o" / "manifest.json").read_text())["variants"]["fp32"]["path"]
    names = [n for o in inspect(path)["ops"] for n in o["output_names"]]
    assert names and not any(w in n for n in names for w in ("edgebench", "ByName", "_inner", "Wrapper", "_wrapped")), names
    assert any("torch_models.make_net.<locals>.Net/torch.nn.modules.conv.Conv2d_conv" in n for n in names), names


def test_keras3_lstm_int8_failure_names_the_real_cause(run_cli, tmp_path):
    import keras

    keras.utils.set_random_seed(0)
    inp = keras.Input((10, 4), name="seq")
    out = keras.layers.Dense(3, name="logits")(keras.layers.LSTM(8)(inp))
    keras.Model(inp, out).save(tmp_path / "lstm.keras")
    np.savez(tmp_path / "d.npz", seq=np.random.default_rng(0).normal(size=(16, 10, 4)).astype(np.float32))
    code, _, err = run_cli("convert", str(tmp_path / "lstm.keras"), "-p", "fp32,int8", "--static-batch", "--data",
                           str(tmp_path / "d.npz"), "--out", str(tmp_path / "o"))
    v = json.loads((tmp_path / "o" / "manifest.json").read_text())["variants"]
    assert v["fp32"]["status"] == "ok" and v["int8"]["status"] == "failed"
    why = v["int8"]["error"]
    assert "Keras 3 recurrent layer" in why and "TensorFlow 2.21" in why and "fp16 or dynamic" in why, why
    assert "do not change that" in why and "fix every input dimension" not in why      # not advice that fails
    assert why in " ".join(err.split()) or "Keras 3 recurrent layer" in err


def test_trust_model_is_not_offered_for_a_custom_class_it_cannot_resolve(run_cli, tmp_path):
    import keras

    if str(HERE) not in sys.path:
        sys.path.insert(0, str(HERE))
    import wild_layers

    model = keras.Sequential([keras.Input((6,), name="x"), keras.layers.Dense(8, name="d"),
                              wild_layers.ScaledTanh(1.5, name="out")])
    model.save(tmp_path / "custom.keras")
    code, _, err = run_cli("convert", str(tmp_path / "custom.keras"), "--out", str(tmp_path / "x"))
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "--import wild_layers" in err and "--trust-model" not in err, err
    # what the refusal no longer offers does indeed not resolve it (Keras 3 needs the module imported)
    sys.modules.pop("wild_layers", None)
    code, _, err = run_cli("convert", str(tmp_path / "custom.keras"), "--trust-model", "--out", str(tmp_path / "y"))
    assert code == 2 and "--import" in err
