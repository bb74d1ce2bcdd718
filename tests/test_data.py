"""InputSet loading and validation against real model signatures."""

from __future__ import annotations


import numpy as np
import pytest

from edgebench.model.inputs import (InputSet, Signature, TensorSpec, calibration_generator, dequantize, load_data, quantize,
                            validate)
from edgebench.core.errors import BadInput
from edgebench.model.savedmodel import saved_model_signature

IMG = Signature((TensorSpec("image", (None, 8, 8, 1), "float32"),), (TensorSpec("scores", (None, 10), "float32"),))
TOK = Signature((TensorSpec("ids", (None, 5), "int32"),), (TensorSpec("scores", (None, 3), "float32"),))
TWO = Signature((TensorSpec("a", (None, 6), "float32"), TensorSpec("b", (None, 6), "float32")),
                (TensorSpec("logits", (None, 3), "float32"),))


def test_npz_keyed_by_name_with_labels(tmp_path):
    x = np.random.default_rng(0).uniform(size=(20, 8, 8, 1)).astype(np.float32)
    np.savez(tmp_path / "d.npz", image=x, labels=np.arange(20) % 10)
    ds = load_data(str(tmp_path / "d.npz"), IMG)
    assert ds.n == 20 and ds.labels is not None and list(ds.labels[:3]) == [0, 1, 2]
    np.testing.assert_array_equal(ds.arrays["image"], x)


def test_npz_positional_multi_input(tmp_path):
    """arr_0, arr_1 go to the model's own input order (issue 24.3: not the signature's alphabetical
    one); with no order recorded and two inputs that could take the same array: refused."""
    import dataclasses

    a, b = np.ones((4, 6), np.float32), np.zeros((4, 6), np.float32)
    np.savez(tmp_path / "p.npz", a, b)
    ds = load_data(str(tmp_path / "p.npz"), dataclasses.replace(TWO, order=("b", "a")))
    assert ds.arrays["b"].sum() == 24 and ds.arrays["a"].sum() == 0
    assert ds.binding == {"how": "position (the model's input order)", "pairs": {"arr_0": "b", "arr_1": "a"}}
    with pytest.raises(BadInput, match=r"records no input order.*np.savez\(PATH, a=..., b=...\)"):
        load_data(str(tmp_path / "p.npz"), TWO)
    # shapes that tell the inputs apart bind without an order
    odd = Signature((TensorSpec("a", (None, 6), "float32"), TensorSpec("b", (None, 3), "float32")), TWO.outputs)
    np.savez(tmp_path / "q.npz", np.zeros((4, 3), np.float32), np.ones((4, 6), np.float32))
    ds = load_data(str(tmp_path / "q.npz"), odd)
    assert ds.arrays["a"].sum() == 24 and ds.binding["how"] == "shape"


def test_npy_single_input_and_multi_input_refused(tmp_path):
    np.save(tmp_path / "x.npy", np.zeros((3, 8, 8, 1), np.float32))
    assert load_data(str(tmp_path / "x.npy"), IMG).n == 3
    with pytest.raises(BadInput, match="2 inputs"):
        load_data(str(tmp_path / "x.npy"), TWO)


def test_image_folder_resized_with_labels_from_subfolders(tmp_path):
    from PIL import Image

    for cls in ("cat", "dog"):
        (tmp_path / "imgs" / cls).mkdir(parents=True)
        for i in range(3):
            arr = np.full((20, 30), 255 if cls == "dog" else 0, np.uint8)
            Image.fromarray(arr).save(tmp_path / "imgs" / cls / f"{i}.png")
    ds = load_data(str(tmp_path / "imgs"), IMG, preprocess="scale01")
    assert ds.arrays["image"].shape == (6, 8, 8, 1)
    assert sorted(set(ds.labels.tolist())) == [0, 1]
    assert ds.arrays["image"][ds.labels == 1].min() == pytest.approx(1.0)
    assert ds.arrays["image"][ds.labels == 0].max() == pytest.approx(0.0)
    mob = load_data(str(tmp_path / "imgs"), IMG, preprocess="mobilenet")
    assert mob.arrays["image"].min() == pytest.approx(-1.0)


def test_synthetic_warns_and_respects_dtype():
    with pytest.warns(UserWarning, match="SYNTHETIC"):
        ds = load_data("synthetic", TOK, n=7)
    assert ds.synthetic and ds.arrays["ids"].dtype == np.int32 and ds.n == 7


@pytest.mark.parametrize("arrays,msg", [
    ({"image": np.zeros((4, 9, 8, 1), np.float32)}, "sample shape"),
    ({"image": np.full((4, 8, 8, 1), np.nan, np.float32)}, "NaN"),
    ({"image": np.zeros((4, 8, 8, 1), np.float32), "labels": np.zeros(3)}, "3 labels for 4 samples"),
    ({"other": np.zeros((4, 8, 8, 1), np.float32), "more": np.zeros(3)}, "missing input"),
])
def test_bad_npz_is_rejected_with_the_fix(tmp_path, arrays, msg):
    np.savez(tmp_path / "bad.npz", **arrays)
    with pytest.raises(BadInput, match=msg):
        load_data(str(tmp_path / "bad.npz"), IMG)


def test_integer_inputs_need_valid_integer_data(tmp_path):
    np.savez(tmp_path / "f.npz", ids=np.full((4, 5), 0.5, np.float32))
    with pytest.raises(BadInput, match="non-integer"):
        load_data(str(tmp_path / "f.npz"), TOK)
    np.savez(tmp_path / "n.npz", ids=np.full((4, 5), -1, np.int32))
    with pytest.raises(BadInput, match="negative"):
        load_data(str(tmp_path / "n.npz"), TOK)
    ranged = Signature(TOK.inputs, TOK.outputs, {"ids": (0, 49)})
    np.savez(tmp_path / "r.npz", ids=np.full((4, 5), 60, np.int32))
    with pytest.raises(BadInput, match="outside the model's range"):
        load_data(str(tmp_path / "r.npz"), ranged)


def test_pickled_npz_refused(tmp_path):
    np.savez(tmp_path / "o.npz", image=np.array([object()], dtype=object))
    with pytest.raises(BadInput, match="pickled"):
        load_data(str(tmp_path / "o.npz"), IMG)


def test_missing_and_unsupported_paths(tmp_path):
    with pytest.raises(BadInput, match="no such file"):
        load_data(str(tmp_path / "nope.npz"), IMG)
    (tmp_path / "x.csv").write_text("1,2")
    with pytest.raises(BadInput, match="unsupported format"):
        load_data(str(tmp_path / "x.csv"), IMG)


def test_inputset_save_is_deterministic_and_roundtrips(tmp_path):
    ds = InputSet({"a": np.arange(12, dtype=np.float32).reshape(2, 6), "b": np.ones((2, 6), np.float32)},
                  np.array([1, 2]), "t")
    sha1 = ds.save(tmp_path / "1.npz")
    sha2 = ds.save(tmp_path / "2.npz")
    assert sha1 == sha2
    back = InputSet.load(tmp_path / "1.npz")
    assert back.sha256 == ds.sha256 and list(back.labels) == [1, 2]


def test_calibration_generator_yields_batches_of_one_by_name():
    ds = InputSet({"a": np.ones((5, 6)), "b": np.zeros((5, 6))})
    items = list(calibration_generator(ds, TWO, 3))
    assert len(items) == 3 and items[0]["a"].shape == (1, 6) and items[0]["a"].dtype == np.float32


def test_quantize_roundtrip():
    x = np.array([-1.0, 0.0, 0.5, 1.0], np.float32)
    q = quantize(x, 1 / 127, 0, np.int8)
    assert q.dtype == np.int8 and list(q) == [-127, 0, 64, 127]
    np.testing.assert_allclose(dequantize(q, 1 / 127, 0), x, atol=1 / 127)


def test_saved_model_signature_reads_multi_io(small_savedmodels):
    sig = saved_model_signature(small_savedmodels["multi"])
    assert sig.input_names == ["a", "b"] and [o.name for o in sig.outputs] == ["embedding", "logits"]
    tok = saved_model_signature(small_savedmodels["tokens"])
    assert tok.inputs[0].dtype == "int32"
    with pytest.raises(BadInput, match="no 'serving_default' signature"):
        saved_model_signature(small_savedmodels["nosig"])


# ---------------------------------------------------------------- issue 18.3: dtype and range of calibration data
def test_integer_data_for_a_float_input_is_refused_not_cast():
    sig = Signature((TensorSpec("image", (None, 4, 4, 1), "float32"),), ())
    pixels = np.random.default_rng(0).integers(0, 256, (10, 4, 4, 1))
    with pytest.raises(BadInput, match=r"'image' is float32 but the data is int64 \(values \d+\.\.\d+\).*/ 255"):
        validate(InputSet({"image": pixels}), sig)
    with pytest.raises(BadInput, match="float32 but the data is uint8"):
        validate(InputSet({"image": pixels.astype(np.uint8)}), sig)
    validate(InputSet({"image": (pixels / 255.0)}), sig)                 # float64 -> float32: same meaning
    validate(InputSet({"image": (pixels / 255.0).astype(np.float16)}), sig)
    ids = Signature((TensorSpec("ids", (None, 3), "int32"),), ())
    validate(InputSet({"ids": np.array([[1, 2, 3]], np.int64)}), ids)       # fits int32: lossless
    with pytest.raises(BadInput, match="beyond its largest value 2147483647"):
        validate(InputSet({"ids": np.array([[1, 2, 2 ** 40]], np.int64)}), ids)


def test_calibration_and_evaluation_ranges_that_disagree_are_named():
    from edgebench.model.inputs import RANGE_FACTOR, range_warnings, value_ranges

    sig = Signature((TensorSpec("image", (None, 8, 8, 1), "float32"), TensorSpec("ids", (None, 3), "int32")), ())
    rng = np.random.default_rng(1)

    def ds(lo, hi, n=100):
        return InputSet({"image": rng.uniform(lo, hi, (n, 8, 8, 1)).astype(np.float32),
                         "ids": rng.integers(0, 9, (n, 3)).astype(np.int32)})

    base = value_ranges(ds(0, 1), sig)
    assert set(base) == {"image"}                                     # float inputs only
    assert range_warnings(base, value_ranges(ds(0, 1, n=1000), sig)) == []     # same preprocessing, other size
    (w,) = range_warnings(value_ranges(ds(0, 255), sig), base)                # unscaled pixels
    assert "input 'image'" in w and "spans differ 255x" in w and f"more than {RANGE_FACTOR}x" in w
    assert len(range_warnings(value_ranges(ds(-1, 1), sig), base)) == 1      # mobilenet vs scale01: 2x
    assert len(range_warnings(value_ranges(ds(1, 2), sig), base)) == 1       # same span, shifted
