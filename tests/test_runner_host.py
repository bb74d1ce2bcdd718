"""The standalone runner and HostTarget with real LiteRT: run control, inputs, outputs,
quantization, load modes, and every failure path (bad model/data/delegate, crash, hang)."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from dataclasses import replace

import numpy as np
import pytest

from edgebench.core.errors import BadInput, InfraError
from conftest import make_job
from edgebench.targets.base import RunResult
from edgebench.targets.host import RUNNER_PATH, HostTarget
from edgebench.targets.runner import FAULT_ENV

pytest_plugins = ["conftest_bench"]

QUICK = dict(min_runs=20, min_time_s=0.0, max_time_s=5.0, warmup_runs=2)


@pytest.fixture(scope="module")
def host():
    return HostTarget()


def _ref(model, feeds: dict) -> dict:
    """Reference outputs straight from a LiteRT signature runner (no edgebench code)."""
    from ai_edge_litert.interpreter import Interpreter

    it = Interpreter(model_path=str(model))
    return it.get_signature_runner()(**feeds)


@pytest.mark.parametrize("name", ["runner.py", "runner_io.py", "runner_modes.py", "runner_profile.py",
                                  "runner_stop.py"])
def test_runner_is_standalone(name):
    """Only stdlib, numpy, TFLite runtimes and the worker's own files may be imported: the files
    are pushed to devices together (WORKER_FILES)."""
    from edgebench.targets.host import WORKER_FILES

    assert RUNNER_PATH.with_name(name) in WORKER_FILES
    tree = ast.parse(RUNNER_PATH.with_name(name).read_text())
    mods = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            mods |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            mods.add((node.module or "").split(".")[0])
    allowed = set(sys.stdlib_module_names) | {"numpy", "ai_edge_litert", "tflite_runtime", "tensorflow", "__future__"} \
        | {p.stem for p in WORKER_FILES}
    assert mods <= allowed, mods - allowed
    assert "edgebench" not in mods


def test_forced_runs_and_facts(host, bench_models):
    res = host.run(make_job(str(bench_models["fp32"]), runs=50, warmup_runs=3))
    assert isinstance(res, RunResult)
    assert res.samples_ns.dtype == np.int64 and len(res.samples_ns) == 50
    assert np.all(res.samples_ns > 0)
    assert len(res.warmup_ns) == 3
    assert res.init_ms > 0 and res.first_inference_ms > 0
    assert res.peak_rss_bytes > 10 * 2**20
    assert res.runtime.startswith("ai_edge_litert")
    assert res.extra["stop_reason"] == "runs" and res.extra["input_source"] == "synthetic"
    assert len(res.model_sha256) == 64
    assert res.fingerprint["delegate"] == "xnnpack"


def test_default_run_control_reaches_662(host, bench_models):
    res = host.run(make_job(str(bench_models["int8"]), min_time_s=0.05))
    assert len(res.samples_ns) >= 662
    assert res.extra["stop_reason"] in ("min_runs_and_min_time", "answer_valid")


def test_max_time_caps_the_run(host, bench_models):
    res = host.run(make_job(str(bench_models["fp32"]), min_runs=10**9, min_time_s=0.0, max_time_s=0.2))
    assert res.extra["stop_reason"] == "max_time"
    assert 0 < len(res.samples_ns) < 10**9
    forced = host.run(make_job(str(bench_models["fp32"]), runs=10**9, max_time_s=0.2))
    assert forced.extra["stop_reason"] == "max_time" and 0 < len(forced.samples_ns) < 10**9


def test_int8_io_quantizes_inputs_and_dequantizes_outputs(host, bench_models, tmp_path):
    x = np.random.default_rng(1).uniform(-1, 1, (5, 8, 8, 1)).astype(np.float32)
    npz = tmp_path / "in.npz"
    np.savez(npz, image=x, labels=np.arange(5))
    res = host.run(make_job(str(bench_models["int8"]), inputs_npz=str(npz), runs=2, save_outputs=True, **{k: v for k, v in QUICK.items() if k != "min_runs"}))
    out = res.outputs["output_0"]
    assert out.shape == (5, 10) and out.dtype == np.float32   # every sample, even with 2 timed runs
    info = res.extra["inputs"][0]
    o_info = res.extra["outputs_meta"][0]
    for i in range(5):
        q = np.clip(np.round(x[i:i + 1] / info["scale"]) + info["zero_point"], -128, 127).astype(np.int8)
        ref = _ref(bench_models["int8"], {"image": q})["output_0"]
        deq = (ref.astype(np.float32) - o_info["zero_point"]) * o_info["scale"]
        np.testing.assert_allclose(out[i:i + 1], deq, rtol=0, atol=1e-7)


def test_two_inputs_mapped_by_signature_name(host, bench_models, tmp_path):
    rng = np.random.default_rng(2)
    a = rng.normal(size=(3, 4)).astype(np.float32)
    b = rng.normal(size=(3, 3)).astype(np.float32)
    npz = tmp_path / "two.npz"
    np.savez(npz, b=b, a=a)   # stored in the opposite order of the tensor indices
    res = host.run(make_job(str(bench_models["two_input"]), inputs_npz=str(npz), save_outputs=True, **QUICK))
    for i in range(3):
        ref = _ref(bench_models["two_input"], {"a": a[i:i + 1], "b": b[i:i + 1]})["output_0"]
        np.testing.assert_allclose(res.outputs["output_0"][i:i + 1], ref, rtol=1e-6)


def test_int32_inputs_and_dtype_mismatch(host, bench_models, tmp_path):
    ids = np.arange(10, dtype=np.int32).reshape(2, 5)
    good = tmp_path / "ids.npz"
    np.savez(good, ids=ids)
    res = host.run(make_job(str(bench_models["int32"]), inputs_npz=str(good), save_outputs=True, **QUICK))
    np.testing.assert_array_equal(res.outputs["total"].ravel(), 2 * ids.sum(axis=1))
    bad = tmp_path / "floats.npz"
    np.savez(bad, ids=ids.astype(np.float32))
    with pytest.raises(BadInput, match=r"dtype float32 does not match the model input dtype int32"):
        host.run(make_job(str(bench_models["int32"]), inputs_npz=str(bad), **QUICK))


def test_shape_mismatch_is_bad_input(host, bench_models, tmp_path):
    npz = tmp_path / "wrong.npz"
    np.savez(npz, image=np.zeros((4, 7, 7, 1), np.float32))
    with pytest.raises(BadInput, match=r"input 'image'.*does not match the model input \[1, 8, 8, 1\]"):
        host.run(make_job(str(bench_models["fp32"]), inputs_npz=str(npz), **QUICK))
    keys = tmp_path / "keys.npz"
    np.savez(keys, x=np.zeros((2, 4)), y=np.zeros((2, 4)), z=np.zeros((2, 4)))
    with pytest.raises(BadInput, match="model's inputs are"):
        host.run(make_job(str(bench_models["two_input"]), inputs_npz=str(keys), **QUICK))


def test_nan_outputs_are_flagged(host, bench_models):
    res = host.run(make_job(str(bench_models["nan"]), save_outputs=True, **QUICK))
    assert res.extra["nonfinite_outputs"].get("y", 0) > 0
    assert np.isnan(res.outputs["y"]).any()


def test_delegate_none_and_unappliable_delegate(bench_models):
    res = HostTarget(delegate="none").run(make_job(str(bench_models["fp32"]), **QUICK))
    assert res.extra["delegate"] == "none" and len(res.samples_ns) >= 20
    with pytest.raises(BadInput, match="delegate 'gpu' cannot be applied"):
        HostTarget(delegate="gpu").run(make_job(str(bench_models["fp32"]), **QUICK))
    with pytest.raises(BadInput, match="unknown"):
        HostTarget(delegate="tpu")


def test_bad_model_files(host, bench_models, tmp_path):
    trunc = tmp_path / "trunc.tflite"
    trunc.write_bytes(bench_models["fp32"].read_bytes()[:3000])
    with pytest.raises(BadInput, match="cannot load"):
        host.run(make_job(str(trunc), **QUICK))
    junk = tmp_path / "junk.tflite"
    junk.write_bytes(b"\x00" * 64)
    with pytest.raises(BadInput, match="not a TFLite flatbuffer"):
        host.run(make_job(str(junk), **QUICK))
    with pytest.raises(BadInput, match="model not found"):
        host.run(make_job(str(tmp_path / "nope.tflite"), **QUICK))


def test_worker_crash_becomes_infra_error(host, bench_models, monkeypatch):
    monkeypatch.setenv(FAULT_ENV, "abort")
    with pytest.raises(InfraError, match="crashed with SIGABRT.*try --delegate none"):
        host.run(make_job(str(bench_models["fp32"]), **QUICK))
    # a crash without a delegate is not told to drop the delegate it did not have (issue 28.8)
    with pytest.raises(InfraError, match="crashed with SIGABRT") as got:
        host.run(make_job(str(bench_models["fp32"]), delegate="none", **QUICK))
    assert "try --delegate none" not in str(got.value) and "LiteRT's own kernels" in str(got.value)


def test_worker_hang_is_killed_at_deadline(host, bench_models, monkeypatch):
    monkeypatch.setenv(FAULT_ENV, "hang")
    with pytest.raises(InfraError, match=r"hung: no result after the 2 s deadline, killed"):
        host.run(make_job(str(bench_models["fp32"]), deadline_s=2.0, **QUICK))


def test_concurrency_and_server_modes(host, bench_models):
    job = make_job(str(bench_models["fp32"]), runs=40, warmup_runs=2)
    res = host.run_load(job, {"mode": "concurrency", "level": 2})
    load = res.extra["load"]
    assert load["level"] == 2 and load["completed"] == len(res.samples_ns) >= 40
    assert len(load["per_worker_completed"]) == 2 and min(load["per_worker_completed"]) >= 20
    assert load["qps"] > 0
    res = host.run_load(job, {"mode": "server", "qps": 500.0, "workers": 1, "queries": 60})
    load = res.extra["load"]
    assert load["completed"] == 60 == len(res.samples_ns)
    # latency includes queueing, so it can never be below the pure service time
    assert np.all(res.samples_ns >= res.extra["service_ns"])
    assert load["achieved_qps"] > 0


def test_runner_runs_as_plain_script(bench_models, tmp_path):
    """`python runner.py job.json` with nothing but the job file (as on a device)."""
    job = {"model_path": str(bench_models["int8"]), "runs": 5, "warmup_runs": 1, "save_outputs": True}
    (tmp_path / "job.json").write_text(json.dumps(job))
    out = subprocess.run([sys.executable, str(RUNNER_PATH), str(tmp_path / "job.json")],
                         capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    meta = json.loads((tmp_path / "result.json").read_text())
    assert meta["status"] == "ok" and meta["runtime"].startswith("ai_edge_litert")
    with np.load(tmp_path / "result.npz") as z:
        assert z["samples_ns"].shape == (5,) and z["out::output_0"].shape == (8, 10)
    # bad input exits 2 with the message in result.json
    (tmp_path / "job.json").write_text(json.dumps({**job, "model_path": str(tmp_path / "none.tflite")}))
    out = subprocess.run([sys.executable, str(RUNNER_PATH), str(tmp_path / "job.json")],
                         capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert out.returncode == 2
    assert "model not found" in json.loads((tmp_path / "result.json").read_text())["error"]


def test_job_defaults_filled_by_target(bench_models, tmp_path):
    spec = HostTarget(threads=2, delegate="none").job_spec(make_job(str(bench_models["fp32"])), str(tmp_path))
    assert spec["threads"] == 2 and spec["delegate"] == "none"
    spec = HostTarget(threads=2).job_spec(replace(make_job(str(bench_models["fp32"])), threads=1), str(tmp_path))
    assert spec["threads"] == 1


def test_runner_falls_back_to_tensorflow_lite(bench_models, tmp_path):
    """Without ai_edge_litert (and tflite_runtime) the runner uses tensorflow.lite and says so."""
    block = tmp_path / "block" / "ai_edge_litert"
    block.mkdir(parents=True)
    (block / "__init__.py").write_text('raise ImportError("blocked for this test")\n')
    job = {"model_path": str(bench_models["int8"]), "runs": 3, "warmup_runs": 1, "save_outputs": True}
    (tmp_path / "job.json").write_text(json.dumps(job))
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "block"), "TF_CPP_MIN_LOG_LEVEL": "2"}
    out = subprocess.run([sys.executable, str(RUNNER_PATH), str(tmp_path / "job.json")],
                         capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    meta = json.loads((tmp_path / "result.json").read_text())
    assert meta["runtime"].startswith(("tensorflow.lite", "tflite_runtime")), meta["runtime"]


# ---------------------------------------------------------------- audit W3/W6/W10 and C-items

def test_outputs_are_read_in_an_untimed_pass_before_the_timed_loop():
    """Nothing but set_tensor + invoke runs inside the timed loop (audit C-item)."""
    from edgebench.targets import runner

    events: list[str] = []

    class It:
        def invoke(self):
            events.append("invoke")

        def set_tensor(self, idx, arr):
            events.append("set")

    class Sess:
        it = It()
        n = 3
        single = False
        state = None

        def start_sample(self, i):
            events.append("start")
        set_items = [(0, [np.zeros(1)] * 3)]
        outputs = [{"name": "y"}]

        def _set(self, i):
            events.append("set")

        def read_outputs(self):
            events.append("read")
            return {"y": np.ones((1, 2), np.float32)}

    res = runner.run_single({"model_path": "m", "runs": 20, "warmup_runs": 2, "save_outputs": True}, Sess())
    assert events.count("read") == 3 and res["outputs"]["y"].shape == (3, 2)
    last_read = max(i for i, e in enumerate(events) if e == "read")
    assert events[last_read + 1:].count("invoke") == 1 + 20    # warmup (2 incl. the first) + 20 timed
    assert res["gc"] == {"disabled": True, "frozen": True, "collections": 0}


def test_timed_loops_run_with_gc_frozen_and_disabled(host, bench_models):
    res = host.run(make_job(str(bench_models["fp32"]), **QUICK))
    assert res.extra["gc"] == {"disabled": True, "frozen": True, "collections": 0}
    import gc

    assert gc.isenabled()   # the parent's collector is untouched


def test_peak_rss_excludes_the_input_data(host, tmp_path):
    """Audit W6: a 12 MB synthetic input added ~295 MB to peak_rss. The footprint is now measured
    after the inputs are prepared, without them, and synthetic inputs are float32 from the start."""
    import tensorflow as tf

    class Big(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([1, 1024, 1024, 3], tf.float32, name="image")])
        def __call__(self, image):
            return {"mean": tf.reduce_mean(image, axis=[1, 2])}

    m = Big()
    c = tf.lite.TFLiteConverter.from_concrete_functions([m.__call__.get_concrete_function()], m)
    path = tmp_path / "big_input.tflite"
    path.write_bytes(c.convert())
    res = host.run(make_job(str(path), runs=5, warmup_runs=1))
    mem = res.extra["memory"]
    tensor = 1024 * 1024 * 3 * 4
    assert mem["inputs_bytes"] == 8 * tensor                    # 8 float32 synthetic samples, held apart
    assert mem["peak_reset_after_inputs"] is True
    assert res.peak_rss_bytes == mem["peak_rss_bytes"]
    assert res.peak_rss_bytes < mem["runtime_rss_bytes"] + 4 * tensor   # the inputs are not in it
    assert mem["model_rss_bytes"] == res.peak_rss_bytes - mem["runtime_rss_bytes"]


def test_server_mode_records_generator_lateness_apart(host, bench_models):
    """Audit W3: the issuing thread's lateness is measured and reported, not hidden in latency."""
    from edgebench.bench import load

    job = make_job(str(bench_models["fp32"]), runs=80, warmup_runs=2)
    res = host.run_load(job, {"mode": "server", "qps": 400.0, "workers": 1, "queries": 80})
    late = res.extra["load"]["generator_lateness_ms"]
    assert 0 < late["count"] <= 80 and 0 <= late["p50"] <= late["p99"] <= late["max"]
    assert res.extra["load"]["spin_ns"] > 0 and res.extra["load"]["backlog"] == 0
    r = load.server(host, job, 400.0, 1)
    assert r["generator_lateness_ms"]["count"] > 0 and r["latency_lower_bound"] is False


def test_wait_until_never_returns_early():
    import time

    from edgebench.targets.runner import wait_until

    for share in (False, True):
        due = time.perf_counter_ns() + 3_000_000
        wait_until(due, share_gil=share)
        assert time.perf_counter_ns() >= due


def test_overloaded_server_run_reports_its_backlog_as_a_lower_bound(host, bench_models):
    """Audit W10: queries still queued when max_time stopped the run were dropped from the p99."""
    from edgebench.bench import load

    job = make_job(str(bench_models["fp32"]), runs=200_000, warmup_runs=2, max_time_s=0.3)
    r = load.server(host, job, 2_000_000.0, 1)
    assert r["truncated_by_max_time"] and r["backlog"] > 0
    assert r["latency_lower_bound"] is True and r["overloaded"] is True
    assert r["samples"] == r["completed"] + r["backlog"]
    assert any("lower bound" in w and "p99 >" in w for w in r["warnings"])


# ---------------------------------------------------------------- R1: untrusted models stay out of this process
_NO_LITERT_HERE = r'''
import json, sys
from edgebench.convert_and_compare.pipeline import PairSettings, compare_pair
from edgebench.targets.adb.runners import AdbTarget
from edgebench.targets.base import Job, RunControl
a, b, npz = sys.argv[1:4]
doc = compare_pair(PairSettings(a=a, b=b, data="synthetic", samples=4, control=RunControl(runs=5, min_runs=5)))
t = AdbTarget.__new__(AdbTarget)              # the benchmark_model path's host-side preparation
ins, outs, prepared, n, source = t._host_io(Job(model_path=b, inputs_npz=npz))
print(json.dumps({"loaded_here": sorted(m for m in sys.modules if m.startswith(("ai_edge_litert.interpreter",
                                                                                "tflite_runtime", "tensorflow.lite"))),
                  "rows": [r.status for r in doc.rows], "n": n, "in_dtype": str(prepared[ins[0]["index"]][0].dtype),
                  "in_shape": list(prepared[ins[0]["index"]][0].shape), "out": [o["name"] for o in outs]}))
'''


def test_untrusted_models_are_never_loaded_in_the_main_process(bench_models, tmp_path):
    """compare and the benchmark_model path read a model's I/O in the isolated model-I/O worker."""
    x = np.random.default_rng(0).uniform(-1, 1, (3, 8, 8, 1)).astype(np.float32)
    np.savez(tmp_path / "in.npz", image=x)
    p = subprocess.run([sys.executable, "-c", _NO_LITERT_HERE, str(bench_models["fp32"]), str(bench_models["int8"]),
                        str(tmp_path / "in.npz")], capture_output=True, text=True, timeout=300,
                       env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
    assert p.returncode == 0, p.stderr[-3000:]
    out = json.loads(p.stdout.strip().splitlines()[-1])
    assert out["loaded_here"] == [] and out["rows"] == ["ok", "ok"]
    # the InputSet prepared as the timing worker feeds it: int8-quantized, one sample per invocation
    assert out["n"] == 3 and out["in_dtype"] == "int8" and out["in_shape"] == [1, 8, 8, 1]


def test_model_io_worker_reports_a_bad_model_as_bad_input(tmp_path):
    from edgebench.targets.host import describe_model

    bad = tmp_path / "bad.tflite"
    bad.write_bytes(b"\x00" * 64)
    with pytest.raises(BadInput, match="not a TFLite flatbuffer"):
        describe_model(str(bad))


def test_synthetic_inputs_sized_by_an_untrusted_model_are_bounded(run_cli, tmp_path):
    """A model that declares a huge input cannot make edgebench generate gigabytes of synthetic data."""
    import tensorflow as tf

    class Big(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([1, 2048, 2048, 3], tf.float32, name="img")])
        def __call__(self, img):
            return {"m": tf.reduce_mean(img, axis=[1, 2])}

    m = Big()
    path = tmp_path / "big.tflite"
    path.write_bytes(tf.lite.TFLiteConverter.from_concrete_functions([m.__call__.get_concrete_function()], m).convert())
    code, out, err = run_cli("compare", str(path), str(path), "--data", "synthetic", "--no-store")
    assert code == 2, err
    assert "need 4.7 GiB, over the 2 GiB edgebench generates; lower --samples" in err


def test_worker_stop_rule_is_the_parents_run_control():
    """The standalone worker cannot import RunControl; its StopRule (and fallback defaults) must
    give the same verdict for every (runs, elapsed) the parent's rule does."""
    from edgebench.core.latency import quantile_answered
    from edgebench.targets.base import RunControl
    from edgebench.targets.runner import _sibling

    rn = _sibling("runner_stop")
    d = RunControl()
    assert (rn.DEFAULT_MIN_RUNS, rn.DEFAULT_MIN_TIME_S, rn.DEFAULT_MAX_TIME_S) == (d.min_runs, d.min_time_s,
                                                                                  d.max_time_s)
    rng = np.random.default_rng(0)
    tight = rng.normal(1e6, 1e3, 6000).astype(np.int64)                   # a p99 known to well within 10 %
    tailed = np.where(rng.random(6000) < 0.02, 9e6, 1e6).astype(np.int64)  # 2 % of runs 9x slower
    stalled = np.where(rng.random(6000) < 0.003, 4e6, 1e6 + rng.normal(0, 1e3, 6000)).astype(np.int64)
    drifting = (1e6 * np.linspace(1, 1.3, 6000) + rng.normal(0, 1e3, 6000)).astype(np.int64)
    bursty = np.sort(rng.lognormal(13.8, 0.05, 6000)).reshape(-1, 20)[rng.permutation(300)].ravel().astype(np.int64)
    for ctl in (RunControl(), RunControl(runs=50, max_time_s=2.0), RunControl(min_runs=10, min_time_s=0.5),
                RunControl(answer_width=None), RunControl(min_runs=700, answer_width=0.5)):
        rule = rn.StopRule(ctl.to_dict())
        for n in (0, 9, 10, 49, 50, 661, 662, 700, 828, 1035, 5000):
            for el in (0.0, 0.24, 0.25, 0.4, 0.5, 1.0, 1.9, 2.0, 59.0, 60.0, 61.0):
                for samples in (None, tight, tailed, stalled, drifting, bursty):
                    assert rule.reason(n, el * 1e9, samples) == ctl.stop_reason(n, el, samples), (ctl, n, el)
    for samples in (tight, tailed, stalled, drifting, bursty):        # the answer rule's arithmetic itself
        for n in (40, 662, 1035, 6000):
            for q, width in ((0.99, 0.10), (0.5, 0.10), (0.5, 0.02), (0.99, 0.5)):
                assert rn.quantile_answered(samples[:n], q, width) == quantile_answered(samples[:n], q, width)
    assert rn.StopRule({}).reason(662, 1e9) == "min_runs_and_min_time"    # a job without run control
    assert rn.StopRule({}).reason(662, 0.1e9, tight) is None              # ... and without the answer rule


def test_answer_rule_stops_a_row_once_its_p99_is_known():
    """Issue 27: a row stops before --min-time once min_runs are met and the p99's 95 % interval is
    within P99_ANSWER_WIDTH of it, checked at min_runs and each 25 % more; a heavy tail or an
    explicit --min-time keeps it running."""
    from edgebench.cli._options import run_control
    from edgebench.targets.base import P99_ANSWER_WIDTH, RunControl, answer_checkpoint

    rng = np.random.default_rng(1)
    tight = rng.normal(1e6, 1e3, 2000).astype(np.int64)
    tailed = np.where(rng.random(2000) < 0.02, 9e6, 1e6).astype(np.int64)
    rc = RunControl()
    assert rc.answer_width == P99_ANSWER_WIDTH
    assert rc.stop_reason(662, 0.3, tight) == "answer_valid"
    assert rc.stop_reason(661, 0.3, tight) is None                       # LoadGen's minimum first
    assert rc.stop_reason(700, 0.3, tight) is None                       # not a checkpoint (662, 828, ...)
    assert rc.stop_reason(662, 0.2, tight) is None                       # a compact tail must last 0.25 s
    assert [n for n in range(600, 1400) if answer_checkpoint(n, 662)] == [662, 828, 1035, 1294]
    assert rc.stop_reason(662, 0.3, tailed) is None                      # the tail is not known yet
    assert rc.stop_reason(662, 1.0, tailed) == "min_runs_and_min_time"   # --min-time still ends it
    assert run_control(min_time=2.0).answer_width is None                # an explicit --min-time: time only
    assert run_control().answer_width == P99_ANSWER_WIDTH and run_control().min_time_s == RunControl().min_time_s


def test_worker_stops_on_a_valid_answer(bench_models):
    """The real worker loop ends at the first checkpoint where the p99 is answered, before a long
    --min-time (a wide answer width makes the interval pass on any machine) -- unless stalls from
    other work make the tail the machine's (the load signal): then no checkpoint it passed after
    ANSWER_MIN_TIME_S may have been answered, and it runs to --min-time."""
    from edgebench.targets.base import ANSWER_MIN_TIME_S, RunControl, answer_checkpoint, p99_answered
    from edgebench.targets.host import HostTarget

    job = replace(make_job(str(bench_models["fp32"])),
                  control=RunControl(min_time_s=3.0, max_time_s=10.0, answer_width=0.99))
    res = HostTarget(threads=1).run(job)
    s = np.asarray(res.samples_ns)
    n = len(s)
    if res.extra["stop_reason"] == "answer_valid":
        assert res.extra["timed_wall_s"] < 3.0
        assert n >= 662 and answer_checkpoint(n, 662) and p99_answered(s, 0.99)
    else:
        assert res.extra["stop_reason"] == "min_runs_and_min_time"
    timed = np.cumsum(s) / 1e9          # a lower bound of the loop's elapsed time at each count
    for c in (c for c in range(662, n) if answer_checkpoint(c, 662) and timed[c - 1] >= ANSWER_MIN_TIME_S):
        assert not p99_answered(s[:c], 0.99), c     # checked there, and it did not stop: not answered


def test_tf_batch_throughput_stops_when_its_median_is_answered(monkeypatch):
    """The TF reference's batch-throughput baseline: a warm-up of its own at that shape, then calls
    until the median is answered (LoadGen's minimum for a median, 11, at least; checked at 11 and each
    25 % more calls, not after every call); with an explicit --min-time (no answer width) it times for
    that long instead. On a clock of its own (1 ms calls, then a slow spell): the rule, not this
    machine's load, is under test."""
    from edgebench.targets import tf as tf_mod
    from edgebench.targets.base import answer_checkpoint
    from edgebench.targets.tf import THROUGHPUT_MIN_CALLS, THROUGHPUT_WARMUP_S, TFTarget

    class Clock:
        now = 0.0

        def perf_counter(self):
            return self.now

        def perf_counter_ns(self):
            return int(self.now * 1e9)

    clock = Clock()
    monkeypatch.setattr(tf_mod, "time", clock)
    calls: list[float] = []
    durations = iter([])

    def call(lo: int, hi: int) -> None:
        calls.append(clock.now)
        clock.now += next(durations, 0.001)

    r = TFTarget._batch_throughput(call, 32, make_job("m.tflite", warmup_runs=3))
    assert r["stop_reason"] == "answer_valid" and r["calls"] >= THROUGHPUT_MIN_CALLS
    assert answer_checkpoint(r["calls"], THROUGHPUT_MIN_CALLS)        # on the schedule, not after any call
    assert r["warmup_calls"] >= 3 and calls[r["warmup_calls"]] - calls[0] >= THROUGHPUT_WARMUP_S
    assert r["median_call_ms"] == pytest.approx(1.0) and r["examples_per_s"] == pytest.approx(32 / 1e-3)
    # calls 3x slower after the first 5 timed: the halves disagree at 11, 14 and 18 calls, so the
    # answer waits for a window whose halves agree, and it is the new level's
    calls.clear()
    warm = int(round(THROUGHPUT_WARMUP_S / 0.001))
    durations = iter([0.001] * (warm + 5) + [0.003] * 1000)
    r = TFTarget._batch_throughput(call, 32, make_job("m.tflite", warmup_runs=3))
    assert r["stop_reason"] == "answer_valid" and r["calls"] > 18 and r["median_call_ms"] == pytest.approx(3.0)
    durations = iter([])
    timed = TFTarget._batch_throughput(call, 32, make_job("m.tflite", warmup_runs=1, min_time_s=0.6,
                                                          answer_width=None))
    assert timed["stop_reason"] == "time" and timed["calls"] > 590


def test_wait_exit_wakes_at_exit_and_times_out():
    """The worker wait returns the exit status as the process exits (no 50 ms polling tail) and
    raises TimeoutExpired at its deadline, as Popen.wait did."""
    import subprocess
    import sys
    import time

    from edgebench.targets.host import wait_exit

    proc = subprocess.Popen([sys.executable, "-c", "import time, sys; time.sleep(0.3); sys.exit(3)"])
    t0 = time.perf_counter()
    assert wait_exit(proc, 10.0) == 3
    assert time.perf_counter() - t0 < 2.0
    slow = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        with pytest.raises(subprocess.TimeoutExpired):
            wait_exit(slow, 0.2)
    finally:
        slow.kill()
        slow.wait()
