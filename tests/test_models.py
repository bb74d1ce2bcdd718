"""Reference models: every model builds at tiny size with the declared signature, converts to
FP32 and INT8 .tflite with the same names, digits is accurate on its real test split, and the
build cache is reused only when complete."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from edgebench.model import catalog as models  # noqa: E402
from edgebench.core.errors import BadInput  # noqa: E402

NAMES = ("digits", "resnet50", "mobilenetv2", "bert", "ssd_mobilenet")


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("models-cache")


@pytest.fixture(scope="module")
def built():
    """Each tiny model, from the session's build cache (the one every command in the suite uses, so
    a model is trained once per session; a tiny MobileNetV2 takes ~35 s). The cache's own rules
    are tested in a cache of their own (``cache``)."""
    done: dict[str, models.BuiltModel] = {}

    def get(name: str) -> models.BuiltModel:
        if name not in done:
            done[name] = models.build(name, "tiny")
        return done[name]

    return get


def _load_npz(path: Path) -> dict[str, np.ndarray]:
    with np.load(path, allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def test_registry_lists_the_five_models():
    assert tuple(models.MODELS) == NAMES
    assert {m.task for m in models.MODELS.values()} == {"classification", "detection", "embedding"}
    assert models.resolve("bert").task == "embedding"


def test_unknown_name_is_bad_input():
    with pytest.raises(BadInput, match=r"unknown reference model 'resnet'; choose one of digits, resnet50"):
        models.resolve("resnet")
    with pytest.raises(BadInput, match="unknown reference model"):
        models.build("nope")


def test_unknown_size_is_bad_input(cache):
    with pytest.raises(BadInput, match="unknown size 'huge'.*tiny, full"):
        models.build("digits", "huge", cache_dir=cache)


@pytest.mark.parametrize("name", NAMES)
def test_build_matches_info_and_runs(built, name):
    import tensorflow as tf

    b = built(name)
    info = b.info
    assert info["task"] == models.MODELS[name].task
    assert (b.directory / models.MARKER).is_file()
    sig = tf.saved_model.load(str(b.saved_model_dir)).signatures["serving_default"]
    _, sig_inputs = sig.structured_input_signature
    assert sorted(sig_inputs) == sorted(i["name"] for i in info["inputs"])
    assert sorted(sig.structured_outputs) == sorted(o["name"] for o in info["outputs"])
    cal, ev = _load_npz(b.calibration_npz), _load_npz(b.evaluation_npz)
    assert sorted(cal) == sorted(i["name"] for i in info["inputs"])
    assert sorted(set(ev) - {"labels"}) == sorted(cal)
    assert ("labels" in ev) == info["labels_real"]
    for spec in info["inputs"]:
        tspec = sig_inputs[spec["name"]]
        assert tspec.dtype.name == spec["dtype"]
        assert tspec.shape.as_list() == spec["shape"]
        for arrays in (cal, ev):
            a = arrays[spec["name"]]
            assert a.dtype == np.dtype(spec["dtype"]), spec["name"]
            assert list(a.shape[1:]) == spec["shape"][1:], spec["name"]
            lo, hi = spec["range"]
            assert lo <= a.min() and a.max() <= hi, (spec["name"], a.min(), a.max())
    if "params" in info:  # weights are stored once (Keras' ExportArchive.track would double them)
        data = sum(f.stat().st_size for f in (b.saved_model_dir / "variables").glob("variables.data-*"))
        assert data < 1.2 * 4 * info["params"] + 65536, (data, info["params"])
    # Run the SavedModel on the first evaluation sample: names, shapes, dtypes as declared.
    feed = {k: tf.constant(v[:1]) for k, v in ev.items() if k != "labels"}
    out = sig(**feed)
    for o in info["outputs"]:
        got = out[o["name"]]
        assert got.dtype.name == o["dtype"]
        assert got.shape.as_list()[1:] == o["shape"][1:]
        assert np.all(np.isfinite(got.numpy()))


def test_digits_is_accurate_on_its_real_test_split(built):
    import tensorflow as tf

    b = built("digits")
    ev = _load_npz(b.evaluation_npz)
    assert ev["image"].shape == (360, 8, 8, 1) and ev["labels"].shape == (360,)
    assert _load_npz(b.calibration_npz)["image"].shape == (200, 8, 8, 1)
    assert b.info["labels_real"] is True and b.info["class_output"] == "scores" and b.info["num_classes"] == 10
    sig = tf.saved_model.load(str(b.saved_model_dir)).signatures["serving_default"]
    scores = sig(image=tf.constant(ev["image"]))["scores"].numpy()
    acc = float(np.mean(scores.argmax(axis=1) == ev["labels"]))
    assert acc >= 0.97, acc
    assert abs(acc - b.info["test_accuracy"]) < 1e-6
    # Calibration images come from the training split, never from the test split.
    cal = _load_npz(b.calibration_npz)["image"].reshape(200, -1)
    test = ev["image"].reshape(360, -1)
    assert not any((np.abs(test - row).sum(axis=1) == 0).any() for row in cal[:50])


def _convert(saved_model_dir: Path, cal: dict[str, np.ndarray] | None) -> bytes:
    import tensorflow as tf

    conv = tf.lite.TFLiteConverter.from_saved_model(str(saved_model_dir))
    if cal is not None:
        n = len(next(iter(cal.values())))
        conv.optimizations = [tf.lite.Optimize.DEFAULT]
        conv.representative_dataset = lambda: ({k: v[i:i + 1] for k, v in cal.items()} for i in range(n))
    return conv.convert()


@pytest.mark.parametrize("name", NAMES)
def test_tiny_converts_to_fp32_and_int8_with_same_names(built, name):
    import tensorflow as tf
    from ai_edge_litert.interpreter import Interpreter

    b = built(name)
    cal, ev = _load_npz(b.calibration_npz), _load_npz(b.evaluation_npz)
    feed = {k: v[:1] for k, v in ev.items() if k != "labels"}
    ref = {k: v.numpy() for k, v in
           tf.saved_model.load(str(b.saved_model_dir)).signatures["serving_default"](
               **{k: tf.constant(v) for k, v in feed.items()}).items()}
    in_names = sorted(i["name"] for i in b.info["inputs"])
    out_names = sorted(o["name"] for o in b.info["outputs"])
    for precision, data in (("fp32", None), ("int8", cal)):
        interp = Interpreter(model_content=_convert(b.saved_model_dir, data))
        sig = interp.get_signature_list()["serving_default"]
        assert sorted(sig["inputs"]) == in_names, precision
        assert sorted(sig["outputs"]) == out_names, precision
        out = interp.get_signature_runner("serving_default")(**feed)
        for k in out_names:
            assert out[k].shape == ref[k].shape, (precision, k)
        ops = {d["op_name"] for d in interp._get_ops_details()}
        assert "READ_VARIABLE" not in ops  # weights frozen into the model
        if precision == "fp32" and name != "ssd_mobilenet":  # NMS picks are discontinuous
            for k in out_names:
                np.testing.assert_allclose(out[k], ref[k], rtol=1e-3, atol=1e-4, err_msg=k)
        if precision == "int8":
            assert "QUANTIZE" in ops or "DEQUANTIZE" in ops
    if name == "ssd_mobilenet":
        assert "NON_MAX_SUPPRESSION_V4" in ops


def test_cache_is_reused_and_keyed_by_config(cache):
    first = models.build("digits", "tiny", cache_dir=cache)
    marker_mtime = (first.directory / models.MARKER).stat().st_mtime_ns
    again = models.build("digits", "tiny", cache_dir=cache)
    assert again.reused and not first.reused
    assert again.saved_model_dir == first.saved_model_dir
    assert again.calibration_npz == first.calibration_npz and again.info == first.info
    assert (again.directory / models.MARKER).stat().st_mtime_ns == marker_mtime
    assert models.is_built("digits", "tiny", cache_dir=cache)
    assert first.directory.parent == cache / "models"
    assert first.directory.name.startswith("digits-tiny-")
    # Size and seed are part of the key.
    assert models.build_dir("digits", "full", cache_dir=cache) != first.directory
    assert models.build_dir("digits", "tiny", cache_dir=cache, seed=1) != first.directory
    assert not models.is_built("digits", "full", cache_dir=cache)


def test_killed_build_is_never_reused(cache):
    """A build killed after its folder moved into place but before the marker is rebuilt;
    a killed build's hidden work folder is ignored."""
    b = models.build("bert", "tiny", cache_dir=cache)  # the cheapest build
    d = b.directory
    (d / models.MARKER).unlink()
    (d / "calibration.npz").write_bytes(b"truncated")  # what a crash can leave behind
    stale = d.parent / f".{d.name}.building-999999"
    stale.mkdir()
    assert not models.is_built("bert", "tiny", cache_dir=cache)
    rebuilt = models.build("bert", "tiny", cache_dir=cache)
    assert not rebuilt.reused
    assert (d / models.MARKER).is_file()
    assert _load_npz(rebuilt.calibration_npz)["input_ids"].shape[0] == rebuilt.info["config"]["calibration_samples"]
    assert json.loads((d / models.INFO_FILE).read_text()) == rebuilt.info
    # force=True rebuilds a complete build too.
    forced = models.build("bert", "tiny", cache_dir=cache, force=True)
    assert not forced.reused and (d / models.MARKER).is_file()


@pytest.mark.parametrize("name", NAMES)
def test_training_api_gives_a_finite_loss(name):
    import tensorflow as tf

    model = models.build_keras(name, "tiny", seed=0)
    x, y = models.training_batch(name, "tiny", batch_size=2, seed=0)
    loss_fn = models.training_loss(name)
    with tf.GradientTape() as tape:
        loss = loss_fn(y, model(x, training=True))
    grads = tape.gradient(loss, model.trainable_variables)
    assert np.isfinite(float(loss))
    assert sum(g is not None for g in grads) == len(model.trainable_variables)


def test_full_resnet50_has_keras_applications_parameter_count():
    # 25,636,712 = keras.applications.ResNet50(weights=None).count_params() (1000 classes).
    assert models.build_keras("resnet50", "full").count_params() == 25_636_712


def _cli(argv: list[str]) -> int:
    from edgebench.cli import main

    try:
        return main(argv)
    except SystemExit as exc:
        return exc.code


def test_cli_list_and_unknown_name(capsys, cache, monkeypatch):
    monkeypatch.setenv("EDGEBENCH_CACHE_DIR", str(cache))
    monkeypatch.setenv("COLUMNS", "200")  # rich folds narrow tables
    assert _cli(["models", "list", "--json", "-"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["schema_version"] == 2 and doc["kind"] == "models"
    rows = {r["name"]: r for r in doc["rows"]}
    assert tuple(rows) == NAMES
    assert rows["bert"]["inputs"]["full"][0]["shape"] == [None, 128]
    assert _cli(["models", "list"]) == 0
    table = capsys.readouterr().out
    assert all(n in table for n in NAMES) and "1x300x300x3" in table
    assert _cli(["models", "build", "resnet"]) == 2
    err = capsys.readouterr().err
    assert "unknown reference model 'resnet'" in err and "Traceback" not in err


def test_cli_build_json_reports_digits_accuracy(built, tmp_path):
    built("digits")                      # in the session's cache, which the command reads
    out = tmp_path / "build.json"
    assert _cli(["models", "build", "digits", "--json", str(out)]) == 0
    row = json.loads(out.read_text())["rows"][0]
    assert row["model"] == "digits" and row["reused"] is True and row["test_accuracy"] >= 0.97
    assert Path(row["saved_model_dir"]).is_dir()
