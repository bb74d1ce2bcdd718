"""Training baselines (edgebench.train, train_worker, cli/train) with real TensorFlow on CPU.

Steps are kept tiny (the numbers are not asserted as timings; their presence and consistency
are). GPU-only paths are marked ``gpu`` and skipped where TensorFlow sees no GPU.
"""

from __future__ import annotations

import json
import math
import os
import signal
import time
from pathlib import Path

import numpy as np
import pytest

from edgebench.core.errors import BadInput
from edgebench.train import Cell, TrainSettings, WorkerGroup
from edgebench.train.sweep import failure_summary, pipeline_comparison
from edgebench.train.sweep import run_train_baseline as _run_train_baseline


def run_train_baseline(settings):
    """The result document in its JSON form (what --json writes and the store keeps)."""
    return _run_train_baseline(settings).to_dict()


os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

ROW_KEYS = ("model", "size", "batch_size", "precision", "xla", "strategy", "workers", "input_pipeline", "status",
            "examples_per_s", "examples_per_s_median_step", "step_time_ms", "step_samples_ns", "startup_ms",
            "input_wait_pct", "peak_device_memory_bytes", "allreduce_ms_per_step", "final_loss", "deterministic",
            "seed", "global_batch_size", "replicas")


def _has_gpu() -> bool:
    import tensorflow as tf

    return bool(tf.config.list_physical_devices("GPU"))


def _cli(args: list[str]) -> int:
    from edgebench.cli import main

    try:
        main(args)
    except SystemExit as e:
        return int(e.code or 0)
    return 0


def _ok_row_consistent(r: dict, steps: int) -> None:
    for k in ROW_KEYS:
        assert k in r, k
    assert r["status"] == "ok", r.get("error")
    assert len(r["step_samples_ns"]) == steps
    st = r["step_time_ms"]
    assert st["samples"] == steps and 0 < st["p50"] <= st["p90"] <= st["p99"]
    assert math.isclose(st["p50"], float(np.percentile(np.asarray(r["step_samples_ns"]) / 1e6, 50)))
    assert r["examples_per_s"] > 0 and r["examples_per_s_median_step"] > 0
    # total examples / window wall time can never beat what the sum of the step times allows
    assert r["examples_per_s"] <= r["global_batch_size"] * steps / (sum(r["step_samples_ns"]) / 1e9) * 1.0001
    assert 0.0 <= r["input_wait_pct"] < 100.0
    assert math.isfinite(r["final_loss"])
    assert r["first_step_ms"] > 0


def test_digits_precision_xla_sweep_and_gpu_cells_skipped():
    steps = 5
    doc = run_train_baseline(TrainSettings(
        model="digits", batch_sizes=(8,), precisions=("fp32", "mixed_bfloat16", "mixed_float16"),
        xla=("off",), strategies=("none", "mirrored"), steps=steps, warmup_steps=2))
    assert doc["kind"] == "train" and doc["schema_version"] >= 1 and "tensorflow" in doc["fingerprint"]
    xla_doc = run_train_baseline(TrainSettings(model="digits", batch_sizes=(8,), xla=("on",), steps=steps,
                                               warmup_steps=2))
    rows = doc["rows"] + xla_doc["rows"]
    assert len(rows) == 7 and rows[-1]["xla"] is True and rows[-1]["xla_scope"] == "step"
    ran = [r for r in rows if r["strategy"] == "none"]
    for r in ran:
        if r["status"] == "ok":
            _ok_row_consistent(r, steps)
            assert r["xla"] is (r["xla_requested"] == "on")
            assert r["allreduce_ms_per_step"] is None and r["replicas"] == 1
        else:  # mixed_float16 may lack CPU kernels: then it must say why, never vanish
            assert r["status"] == "failed" and r["precision"] == "mixed_float16" and r["error"]
    assert all(r["status"] == "ok" for r in ran if r["precision"] != "mixed_float16")
    if not _has_gpu():
        for r in rows:
            if r["strategy"] == "mirrored":
                assert r["status"] == "skipped" and "GPU" in r["reason"]
    fp16 = [r for r in ran if r["precision"] == "mixed_float16" and r["status"] == "ok"]
    for r in fp16:
        assert r["loss_scale"] and r["loss_scale"] > 0


@pytest.mark.parametrize("model", ["resnet50", "mobilenetv2", "bert"])
def test_tiny_reference_models_train(model):
    doc = run_train_baseline(TrainSettings(model=model, size="tiny", batch_sizes=(2,), steps=2, warmup_steps=1))
    (r,) = doc["rows"]
    _ok_row_consistent(r, 2)
    assert r["params"] > 0 and r["model_config_sha256"]


def test_cli_naive_vs_optimized_both_reported(tmp_path):
    out = tmp_path / "train.json"
    rc = _cli(["train-baseline", "digits", "--batch-sizes", "16", "--input-pipeline", "naive,optimized",
               "--steps", "5", "--warmup-steps", "2", "--json", str(out)])
    assert rc == 0
    doc = json.loads(out.read_text())
    assert doc.get("run_id")                      # stored by default, like every measuring command
    assert [r["input_pipeline"] for r in doc["rows"]] == ["naive", "optimized"]
    for r in doc["rows"]:
        _ok_row_consistent(r, 5)
    (c,) = doc["comparisons"]
    naive, opt = doc["rows"]
    assert c["naive_examples_per_s"] == naive["examples_per_s"]
    assert c["optimized_examples_per_s"] == opt["examples_per_s"]
    assert math.isclose(c["speedup"], opt["examples_per_s"] / naive["examples_per_s"])


def test_deterministic_runs_repeat_the_loss():
    s = TrainSettings(model="digits", batch_sizes=(8,), steps=4, warmup_steps=1, deterministic=True, seed=3)
    a = run_train_baseline(s)["rows"][0]
    b = run_train_baseline(s)["rows"][0]
    assert a["deterministic"] and a["seed"] == 3
    assert a["final_loss"] == b["final_loss"]


def test_nan_data_fails_the_cell_and_exits_3(tmp_path):
    rng = np.random.default_rng(0)
    # Overflowing and NaN inputs. (NaN alone can be absorbed on CPU: oneDNN's fused conv+ReLU maps
    # NaN to 0, and the loss stays finite; that is then reported as ok, with the NaN count.)
    x = rng.random((32, 8, 8, 1), dtype=np.float32)
    x[::2] = 3e38
    x[1::4] = np.nan
    data = tmp_path / "nan.npz"
    np.savez(data, image=x, labels=rng.integers(0, 10, 32).astype(np.int32))
    out = tmp_path / "r.json"
    rc = _cli(["train-baseline", "digits", "--data", str(data), "--batch-sizes", "8", "--steps", "3",
               "--warmup-steps", "1", "--json", str(out)])
    assert rc == 3
    (r,) = json.loads(out.read_text())["rows"]
    assert r["status"] == "failed" and r["final_loss"] is None
    assert "loss became inf" in r["error"] or "loss became nan" in r["error"]
    assert r["data_nonfinite_values"] == 8 * 64


def test_huge_learning_rate_fails_the_cell():
    doc = run_train_baseline(TrainSettings(model="digits", batch_sizes=(8,), steps=20, warmup_steps=1,
                                           learning_rate=1e5))
    (r,) = doc["rows"]
    assert r["status"] == "failed" and "became nan" in r["error"]
    assert "failed" in failure_summary(doc)


def test_data_npz_is_validated(tmp_path):
    bad = tmp_path / "nolabels.npz"
    np.savez(bad, image=np.zeros((4, 8, 8, 1), np.float32))
    with pytest.raises(BadInput, match="labels"):
        run_train_baseline(TrainSettings(model="digits", data=str(bad), steps=1, warmup_steps=1))
    shape = tmp_path / "shape.npz"
    np.savez(shape, image=np.zeros((4, 9, 9, 1), np.float32), labels=np.zeros(4, np.int32))
    with pytest.raises(BadInput, match="shape"):
        run_train_baseline(TrainSettings(model="digits", data=str(shape), steps=1, warmup_steps=1))
    from hostile_inputs import huge_shape_npz       # 252 bytes declaring 233 TiB: exit 2, not MemoryError

    huge = huge_shape_npz(tmp_path / "huge.npz", "image", (10 ** 12, 8, 8, 1))
    with pytest.raises(BadInput, match=r"array 'image' declares \[1000000000000, 8, 8, 1\] float32 \(232.8 TiB\)"):
        run_train_baseline(TrainSettings(model="digits", data=str(huge), steps=1, warmup_steps=1))


def test_unknown_model_and_bad_options_exit_2(tmp_path):
    assert _cli(["train-baseline", "no-such-model", "--steps", "1"]) == 2
    assert _cli(["train-baseline", "digits", "--precision", "fp8"]) == 2
    assert _cli(["train-baseline", "digits", "--warmup-steps", "0"]) == 2
    assert _cli(["train-baseline", "digits", "--profile-steps", "9,3"]) == 2
    assert _cli(["train-baseline", "digits", "--data", str(tmp_path / "missing.npz")]) == 2


def test_profile_steps_need_the_extra_or_capture_a_profile(tmp_path):
    import importlib.util

    have = all(importlib.util.find_spec(m) for m in ("tensorboard", "tensorboard_plugin_profile"))
    s = TrainSettings(model="digits", batch_sizes=(8,), steps=3, warmup_steps=1, profile_steps=(1, 2),
                      profile_dir=str(tmp_path / "prof"))
    if not have:
        with pytest.raises(BadInput, match=r"edgebench\[profile\]"):
            run_train_baseline(s)
        return
    (r,) = run_train_baseline(s)["rows"]
    assert r["status"] == "ok"
    assert any(p.suffix == ".pb" for p in Path(r["profile_dir"]).rglob("*"))


def test_multiworker_two_local_workers():
    doc = run_train_baseline(TrainSettings(model="digits", batch_sizes=(8,), strategies=("multiworker",),
                                           precisions=("fp32", "mixed_float16"), workers=2, steps=3, warmup_steps=1))
    r, fp16 = doc["rows"]
    _ok_row_consistent(r, 3)
    _ok_row_consistent(fp16, 3)  # loss scaling under MWMS: replicas agree on finiteness (no deadlock)
    assert fp16["loss_scale"] > 0
    assert r["workers"] == 2 and r["replicas"] == 2 and r["global_batch_size"] == 16
    assert r["task"] == "worker:0" and r["is_chief"]
    assert r["allreduce_ms_per_step"] > 0 and r["allreduce"]["bytes"] == 4 * r["params"]
    assert len(r["workers_examples_per_s"]) == 2 and all(v > 0 for v in r["workers_examples_per_s"])


def test_dead_worker_stops_the_others_without_hanging(tmp_path):
    s = TrainSettings(model="digits", batch_sizes=(8,), strategies=("multiworker",), workers=2,
                      steps=100000, warmup_steps=1)
    group = WorkerGroup(s, s.cells(), tmp_path, deadline_s=120).start()
    group.procs[1].send_signal(signal.SIGKILL)
    t0 = time.monotonic()
    reason = group.wait()
    assert time.monotonic() - t0 < 60
    assert reason and "worker 1 was killed by signal 9" in reason
    assert all(p.poll() is not None for p in group.procs)


def test_worker_group_deadline_stops_everyone(tmp_path):
    s = TrainSettings(model="digits", batch_sizes=(8,), strategies=("multiworker",), workers=2,
                      steps=100000, warmup_steps=1)
    group = WorkerGroup(s, s.cells(), tmp_path, deadline_s=1.0).start()
    reason = group.wait()
    assert reason and "did not finish within" in reason
    assert all(p.poll() is not None for p in group.procs)


def test_oom_is_classified_and_comparison_pairs_only_matching_cells():
    import tensorflow as tf

    from edgebench.train import _error_text, _is_oom

    autograph = NameError("in user code:\n\n    File \"x.py\", line 3, in f  *\n        foo\n\n"
                          "    NameError: name 'foo' is not defined\n")
    assert _error_text(autograph) == "NameError: name 'foo' is not defined"
    assert _error_text(ValueError("bad shape")) == "ValueError: bad shape"

    assert _is_oom(tf.errors.ResourceExhaustedError(None, None, "OOM when allocating tensor with shape[256]"))
    assert not _is_oom(ValueError("shapes differ"))
    base = {"model": "m", "strategy": "none", "precision": "fp32", "xla_requested": "off", "status": "ok",
            "input_wait_pct": 1.0}
    rows = [dict(base, batch_size=8, input_pipeline="naive", examples_per_s=100.0),
            dict(base, batch_size=8, input_pipeline="optimized", examples_per_s=150.0),
            dict(base, batch_size=16, input_pipeline="optimized", examples_per_s=300.0)]
    (c,) = pipeline_comparison(rows)
    assert c["batch_size"] == 8 and math.isclose(c["speedup"], 1.5)


def test_settings_round_trip_for_workers():
    s = TrainSettings(model="bert", batch_sizes=(2, 4), precisions=("fp32", "mixed_bfloat16"),
                      profile_steps=(1, 2))
    import dataclasses

    assert TrainSettings.from_dict(json.loads(json.dumps(dataclasses.asdict(s)))) == s
    assert [c.key for c in s.cells()][:2] == ["none-fp32-xla_off-bs2-optimized", "none-fp32-xla_off-bs4-optimized"]
    assert isinstance(s.cells()[0], Cell)


@pytest.mark.gpu
def test_mirrored_on_gpu_reports_memory_and_utilisation():
    if not _has_gpu():
        pytest.skip("needs a GPU visible to TensorFlow (none here)")
    doc = run_train_baseline(TrainSettings(model="resnet50", batch_sizes=(32,), strategies=("none", "mirrored"),
                                           precisions=("mixed_float16",), xla=("on",), steps=20, warmup_steps=3))
    for r in doc["rows"]:
        _ok_row_consistent(r, 20)
        assert r["device"] == "GPU" and r["peak_device_memory_bytes"] > 0
        assert "gpu" in r
    assert doc["rows"][1]["allreduce_ms_per_step"] is not None


def test_db_saves_the_training_result(tmp_path):
    from edgebench.store.db import Store

    db = str(tmp_path / "results.db")
    doc = run_train_baseline(TrainSettings(model="digits", batch_sizes=(8,), steps=2, warmup_steps=1, db=db))
    store = Store(db)
    try:
        (row,) = store.rows(kind="train")
    finally:
        store.close()
    assert row["run_id"] == doc["run_id"] and row["model"] == "digits" and row["status"] == "ok"
    assert math.isclose(row["examples_per_s"], doc["rows"][0]["examples_per_s"])
    assert math.isclose(row["step_time_p50_ms"], doc["rows"][0]["step_time_ms"]["p50"])
    from edgebench.train.sweep import latest_baseline

    assert latest_baseline("digits", db=db)["run_id"] == doc["run_id"]
    assert latest_baseline("resnet50", db=db) is None


def test_render_train_table_shows_reasons_and_comparison():
    from rich.console import Console

    from edgebench.report.terminal.train import render_train

    ok = {"model": "digits", "size": "tiny", "strategy": "none", "workers": 1, "precision": "fp32", "xla": False,
          "batch_size": 8, "global_batch_size": 8, "replicas": 1, "status": "ok", "examples_per_s": 1234.5,
          "step_time_ms": {"p50": 6.5, "p99": 9.0, "samples": 5}, "input_wait_pct": 3.0, "startup_ms": 400.0,
          "final_loss": 2.3}
    rows = [dict(ok, input_pipeline="naive"), dict(ok, input_pipeline="optimized", examples_per_s=2469.0),
            {"model": "digits", "strategy": "mirrored", "workers": 1, "precision": "fp32", "xla": False,
             "batch_size": 8, "input_pipeline": "optimized", "status": "skipped", "reason": "needs GPUs"}]
    doc = {"rows": rows, "comparisons": [{"strategy": "none", "precision": "fp32", "xla": "off", "batch_size": 8,
                                          "naive_examples_per_s": 1234.5, "optimized_examples_per_s": 2469.0,
                                          "speedup": 2.0, "naive_input_wait_pct": 3.0,
                                          "optimized_input_wait_pct": 3.0}]}
    con = Console(record=True, width=200)
    con.print(render_train(doc))
    text = con.export_text()
    assert "skipped [1]" in text and "[1] needs GPUs" in text
    assert "1234.5" in text and "2.00x" in text and "not valid" in text
