"""Headers before bytes (issue 42 item 5), command by command: every command that takes data checks
each array's declared shape and dtype against the model from the ``.npy`` headers inside the
``.npz`` and refuses a file that cannot feed it before a byte of array data is inflated.

The file: 1.6 MB that really inflates to a [100000000, 4] float32 array (1.6 GB of zeros, deflated,
with a true CRC). On main ``bench --data`` decompressed it whole (its NaN/Inf check read every array
before any model was looked at); the other readers went through ``bounded.read_npz``'s header check."""

from __future__ import annotations

import resource
import time
from pathlib import Path

import pytest

from hostile_inputs import deflate_npz

DECLARED = "[100000000, 4]"
INFLATED = 1_600_000_000


def _peak_rss(field: str = "VmHWM") -> int:
    with open("/proc/self/status") as fh:
        return next(int(ln.split()[1]) * 1024 for ln in fh if ln.startswith(field + ":"))


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, Path]:
    """A SavedModel taking [N, 8, 8, 1] float32 and its .tflite ([1, 8, 8, 1])."""
    import tensorflow as tf

    class M(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([None, 8, 8, 1], tf.float32, name="x")])
        def serve(self, x):
            return {"y": tf.reduce_mean(x, axis=[1, 2])}

    d = tmp_path_factory.mktemp("npz_headers")
    m = M()
    tf.saved_model.save(m, str(d / "m881"), signatures={"serving_default": m.serve})
    conv = tf.lite.TFLiteConverter.from_concrete_functions([m.serve.get_concrete_function()], m)
    (d / "m881.tflite").write_bytes(conv.convert())
    crafted = deflate_npz(d / "crafted.npz", {"x": ((100_000_000, 4), "<f4")}, crc=True)
    class V(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([1, 4], tf.float32, name="x")])
        def serve(self, x):
            return {"y": x * 2.0}

    v = V()
    conv = tf.lite.TFLiteConverter.from_concrete_functions([v.serve.get_concrete_function()], v)
    (d / "v4.tflite").write_bytes(conv.convert())
    labeled = deflate_npz(d / "crafted-labeled.npz", {"x": ((100_000_000, 4), "<f4"),
                                                       "labels": ((100_000_000,), "<i8")}, crc=True)
    assert crafted.stat().st_size < 2 * 1024 ** 2 and labeled.stat().st_size < 3 * 1024 ** 2
    return {"saved_model": d / "m881", "tflite": d / "m881.tflite", "v4": d / "v4.tflite", "crafted": crafted,
            "labeled": labeled}


# command -> (argv with {sm} the SavedModel, {tfl} its .tflite, {npz} the crafted file, {out} a folder;
#             what the line names as the model's input)
COMMANDS = {
    "convert": (["convert", "{sm}", "-p", "int8", "--data", "{npz}", "--out", "{out}"], "[N, 8, 8, 1]"),
    "compare": (["compare", "{sm}", "{tfl}", "--data", "{npz}", "--no-store"], "[N, 8, 8, 1]"),
    "convert-and-compare": (["convert-and-compare", "{sm}", "-p", "fp32", "--data", "{npz}", "--no-store",
                             "--out", "{out}"], "[N, 8, 8, 1]"),
    "convert-and-compare --calibration-data": (
        ["convert-and-compare", "{sm}", "-p", "int8", "--data", "synthetic", "--calibration-data", "{npz}",
         "--no-store", "--out", "{out}"], "[N, 8, 8, 1]"),
    "diagnose": (["diagnose", "{sm}", "--data", "{npz}", "--no-store", "--out", "{out}"], "[N, 8, 8, 1]"),
    "diagnose --calibration-data": (["diagnose", "{sm}", "--data", "synthetic", "--calibration-data", "{npz}",
                                     "--no-store", "--out", "{out}"], "[N, 8, 8, 1]"),
    "readiness": (["readiness", "{sm}", "-p", "int8", "--data", "{npz}", "--out", "{out}"], "[N, 8, 8, 1]"),
    "bench": (["bench", "{tfl}", "--data", "{npz}", "--no-store", "--runs", "5"], "[1, 8, 8, 1]"),
    # training needs labels (refused from the headers too, but before the shapes): the file has them
    "train-baseline": (["train-baseline", "digits", "--data", "{npzl}", "--steps", "1", "--no-store"], "(8, 8, 1)"),
}


@pytest.mark.parametrize("command", list(COMMANDS))
def test_npz_that_cannot_feed_the_model_is_refused_from_its_header(run_cli, models, tmp_path, command):
    argv, model_shape = COMMANDS[command]
    fill = {"{sm}": str(models["saved_model"]), "{tfl}": str(models["tflite"]), "{npz}": str(models["crafted"]),
            "{npzl}": str(models["labeled"]),
            "{out}": str(tmp_path / "out")}
    args = [fill.get(a, a) for a in argv]
    rss0 = _peak_rss("VmRSS")
    children0 = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    with open("/proc/self/clear_refs", "w") as fh:      # VmHWM := VmRSS: the peak of this command alone
        fh.write("5")
    t0 = time.perf_counter()
    code, _out, err = run_cli(*args)
    elapsed = time.perf_counter() - t0
    grew = _peak_rss() - rss0
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    lines = [ln for ln in err.strip().splitlines() if ln.strip()]
    assert code == 2, err
    assert len(lines) == 1 and "Traceback" not in err, err
    line = lines[0]
    assert fill["{npzl}" if "{npzl}" in argv else "{npz}"] in line and "'x'" in line and DECLARED in line and model_shape in line, line
    assert elapsed < 5, f"{command}: {elapsed:.1f} s before the refusal"
    assert grew < INFLATED // 4, f"{command}: RSS grew {grew / 1e6:.0f} MB"
    assert children <= max(children0, INFLATED), f"{command}: a worker peaked at {children / 1e6:.0f} MB"


def test_bench_data_is_checked_against_every_model_before_it_is_read(run_cli, models, tmp_path):
    """bench --data with two models: a file that feeds the first but not the second is refused from its
    header, naming the second; the same file alone with the first model runs."""
    import numpy as np

    good = tmp_path / "x.npz"
    np.savez(good, x=np.random.default_rng(0).uniform(size=(4, 8, 8, 1)).astype(np.float32))
    code, _out, err = run_cli("bench", str(models["tflite"]), str(models["v4"]), "--data", str(good), "--no-store",
                              "--runs", "5")
    lines = [ln for ln in err.strip().splitlines() if ln.strip()]
    assert code == 2 and len(lines) == 1, err
    assert "array 'x' declares shape [4, 8, 8, 1] float32" in lines[0] and "v4.tflite is [1, 4]" in lines[0], lines[0]
    assert "nothing was read" in lines[0]
    code, out, err = run_cli("bench", str(models["tflite"]), "--data", str(good), "--no-store", "--runs", "5",
                             "--min-time", "0", "--json", "-")
    assert code == 0, err
    import json

    (row,) = json.loads(out)["rows"]
    assert row["status"] == "ok" and row["latency_ms"]["samples"] >= 5
