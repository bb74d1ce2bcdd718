"""benchmark_model: the parser on real captured logs, argv/sample loop/value files, and the
LiteRT stand-in binary end to end (real TF conversion, real LiteRT, real /bin/sh)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from edgebench.core.errors import BadInput, InfraError
from edgebench.targets.sim import benchmark_model_standin as standin
from edgebench.targets import benchmark_model as bm

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

FIX = Path(__file__).parent / "fixtures" / "benchmark_model"


def _log(name: str) -> bm.BenchmarkModelLog:
    return bm.parse_log((FIX / name).read_text())


# --------------------------------------------------------------------------- real captured logs

# Exact numbers as printed in each log (microseconds / MB), asserted field by field.
EXPECTED = {
    "tflite1.12_ti_am57xx_linux.txt": dict(
        warmup=dict(count=1, curr_us=146161.0), inference=dict(count=50, first_us=137789.0, curr_us=137254.0,
                                                                min_us=137079.0, max_us=143416.0,
                                                                avg_us=137722.0, std_us=896.0),
        init_us=4452.0, first_inference_us=146161.0, warmup_avg_us=146161.0, inference_avg_us=137722.0,
        summary_format="average-inference-timings", init_session_ms=4.452, threads=1,
        model_path="mobilenet_v1_1.0_224_quant.tflite", delegates=(), unparsed=2),
    "tflite2019_zedboard_armv7.txt": dict(
        warmup=dict(count=1, curr_us=751932.0), inference=dict(count=50, min_us=747331.0, max_us=748577.0,
                                                                avg_us=747733.0, std_us=293.0),
        init_us=21039.0, warmup_avg_us=751932.0, inference_avg_us=747733.0,
        summary_format="average-inference-timings", init_session_ms=21.039, threads=1, delegates=(), unparsed=1),
    "tflite2.4_xiaomi_mi11_cpu_fp32.txt": dict(
        warmup=None, inference=dict(count=50, first_us=249042.0, min_us=247067.0, max_us=254474.0,
                                     avg_us=249684.0, std_us=1442.0),
        init_us=16242.0, first_inference_us=360262.0, warmup_avg_us=304586.0, inference_avg_us=249684.0,
        summary_format="inference-timings", mem_init_mb=4.92969, mem_overall_mb=138.809,
        mem_kind="peak-footprint (TFLite <= 2.4 wording)", delegates=(), unparsed=0),
    "tflite2.8_riscv64_qemu_opprofile.txt": dict(
        warmup=dict(count=1, curr_us=3512391.0),
        inference=dict(count=50, first_us=2990275.0, curr_us=2913402.0, min_us=2727568.0, max_us=3189954.0,
                       avg_us=2950340.0, std_us=109798.0),
        init_us=17187.0, first_inference_us=3512391.0, warmup_avg_us=3512390.0, inference_avg_us=2950340.0,
        init_session_ms=17.187, model_size_mb=16.9008, mem_init_mb=4.21094, mem_overall_mb=46.0859,
        mem_kind="delta-from-tool-start", threads=4, delegates=(), unparsed=0),
    "chromeos_tast_cpu_xnnpack.txt": dict(
        warmup=dict(count=9, first_us=81913.0, min_us=55502.0, max_us=81913.0, avg_us=58984.7, std_us=8115.0),
        inference=dict(count=1061, first_us=56576.0, curr_us=56299.0, min_us=54669.0, max_us=60236.0,
                       avg_us=56265.8, std_us=982.0),
        init_us=3337.0, first_inference_us=81913.0, warmup_avg_us=58984.7, inference_avg_us=56265.8,
        init_session_ms=3.337, peak_mem_mb=93.2383, delegates=("XNNPACK",), delegated_nodes=(58, 58), unparsed=0),
    "chromeos_tast_gpu_opencl.txt": dict(
        warmup=dict(count=13, avg_us=40199.8, std_us=21694.0),
        inference=dict(count=1694, min_us=30394.0, max_us=42335.0, avg_us=35134.9, std_us=1733.0),
        init_us=842225.0, first_inference_us=115098.0, init_session_ms=842.225, peak_mem_mb=74.6641,
        delegates=("GPU",), delegated_nodes=(58, 58), unparsed=0),
    "android_apk_logcat_cph2641_p5_median_p95.txt": dict(
        warmup=dict(count=3, avg_us=211669.0, std_us=16613.0, p5_us=199462.0, median_us=200386.0, p95_us=235158.0),
        inference=dict(count=25, first_us=187533.0, curr_us=140990.0, min_us=140071.0, max_us=195121.0,
                       avg_us=145528.0, std_us=13583.0, p5_us=140545.0, median_us=141253.0, p95_us=187533.0),
        init_us=92318.0, first_inference_us=235158.0, warmup_avg_us=211669.0, inference_avg_us=145528.0,
        init_session_ms=92.318, model_size_mb=3.06409, mem_init_mb=54.2852, mem_overall_mb=73.4102,
        threads=4, model_path="/data/local/tmp/best_int8.tflite", delegates=("XNNPACK",),
        delegated_nodes=(539, 548), unparsed=0),
    # only the results block: every number is the block's, converted from ms
    "litert2.1.5_benchmark_litert_model_gpu_results.txt": dict(
        warmup=None, inference=dict(count=10, avg_us=7430200.0, min_us=7416400.0, max_us=7448860.0, std_us=9920.0),
        init_us=23744730.0, first_inference_us=7441040.0, warmup_avg_us=7441040.0, inference_avg_us=7430200.0,
        summary_format="litert-benchmark-results", mem_init_mb=6391.74, mem_overall_mb=6391.74, delegates=(),
        unparsed=0),
}


def test_at_least_six_real_fixtures_with_sources():
    files = sorted(p.name for p in FIX.glob("*.txt"))
    assert len(files) >= 6
    sources = (FIX / "SOURCES.md").read_text()
    for f in files:
        assert f"`{f}`" in sources, f"{f} has no source in SOURCES.md"


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixture_numbers(name):
    log = _log(name)
    exp = dict(EXPECTED[name])
    assert log.is_benchmark_model and not log.failed
    for phase in ("warmup", "inference"):
        want = exp.pop(phase)
        got = getattr(log, phase)
        if want is None:
            assert got is None
            continue
        for k, v in want.items():
            assert getattr(got, k) == pytest.approx(v), (phase, k)
    assert len(log.unparsed) == exp.pop("unparsed")
    if "threads" in exp:
        assert log.threads == exp.pop("threads")
    for k, v in exp.items():
        got = getattr(log, k)
        assert got == (pytest.approx(v) if isinstance(v, float) else v), k


def test_op_profile_tables_riscv():
    log = _log("tflite2.8_riscv64_qemu_opprofile.txt")
    run_order = [r for r in log.op_profile if r.section == "regular" and r.table == "Run Order"]
    assert len(run_order) == 31
    first = run_order[0]
    assert (first.node_type, first.start_ms, first.first_ms, first.avg_ms, first.pct, first.cdf_pct,
            first.mem_kb, first.times_called, first.name) == (
        "CONV_2D", 0.066, 87.754, 60.957, 2.066, 2.066, 0.0, 1, "[MobilenetV1/MobilenetV1/Conv2d_0/Relu6]:0")
    assert run_order[-1].node_type == "SOFTMAX" and run_order[-1].cdf_pct == 100.0
    summary = {r.node_type: r for r in log.op_profile if r.section == "regular" and r.table.startswith("Summary")}
    assert summary["CONV_2D"].count == 15 and summary["CONV_2D"].avg_ms == pytest.approx(2651.853)
    assert summary["DEPTHWISE_CONV_2D"].pct == pytest.approx(10.065)
    init = [r for r in log.op_profile if r.section == "init" and r.table == "Run Order"]
    assert [(r.node_type, r.avg_ms) for r in init] == [("AllocateTensors", 1.356)]
    t = log.op_profile_timings["regular"]
    assert (t.count, t.avg_us, t.std_us) == (50, pytest.approx(2949900.0), 109770.0)
    assert log.op_profile_timings["init"].curr_us == 1356.0


def test_op_profile_only_log_nnapi_gpu():
    """A log quoted with only the profiler tables: latency from the profiler's own timings."""
    log = _log("tflite2.4_xiaomi_mi11_nnapi_gpu_opprofile.txt")
    assert log.inference is None and "NNAPI" in log.delegates
    rows = [r for r in log.op_profile if r.section == "regular" and r.table == "Run Order"]
    assert len(rows) == 11
    nn = rows[6]
    assert nn.node_type == "TfLiteNnapiDelegate" and nn.avg_ms == pytest.approx(79.010)
    assert nn.name == "[model/tf.nn.silu_16/mul, model/tf.nn.silu_26/mul, model/tf.nn.silu_35/mul]:231"
    init = {r.node_type: r for r in log.op_profile if r.section == "init" and r.table == "Run Order"}
    assert init["ModifyGraphWithDelegate"].mem_kb == 1748.0 and init["AllocateTensors"].times_called == 2
    row = bm.to_result_rows(log)[0].to_dict()
    assert row["status"] == "ok" and row["delegate"] == "nnapi"
    lat = row["latency_ms"]
    assert lat["mean"] == pytest.approx(158.715) and lat["samples"] == 50 and lat["min"] == pytest.approx(146.535)
    assert "op profiler" in lat["source"]


def test_failed_nnapi_log():
    log = _log("tflite2.4_xiaomi_mi11_nnapi_failed.txt")
    assert log.failed and log.inference is None
    assert log.delegate_fallback == ("NNAPI",)
    assert log.param("NNAPI accelerator name") == "qti-default"
    row = bm.to_result_rows(log)[0].to_dict()
    assert row["status"] == "failed" and "ANEURALNETWORKS_OP_FAILED" in row["error"]
    assert row["latency_ms"] is None and row["delegate"] is None
    err = bm.classify_failure((FIX / "tflite2.4_xiaomi_mi11_nnapi_failed.txt").read_text(), 1, where="mi11")
    assert isinstance(err, InfraError) and "ANEURALNETWORKS_OP_FAILED" in str(err) and "mi11" in str(err)


def test_result_rows_never_invent_p99():
    for name in EXPECTED:
        row = bm.to_result_rows(_log(name))[0].to_dict()
        lat = row["latency_ms"]
        assert row["status"] == "ok"
        assert lat["p99"] is None and lat["p99_valid"] is False and lat["p90"] is None
        assert bm.P99_NOTE in lat["p99_note"]
        for k in ("mean", "std", "min", "max", "p50", "p90", "p95", "p99", "samples", "p99_valid", "qps"):
            assert k in lat
    with_pct = bm.to_result_rows(_log("android_apk_logcat_cph2641_p5_median_p95.txt"))[0].to_dict()["latency_ms"]
    assert (with_pct["p50"], with_pct["p5"], with_pct["p95"]) == pytest.approx((141.253, 140.545, 187.533))
    assert with_pct["samples"] == 25 and with_pct["qps"] == pytest.approx(1e6 / 145528)
    without = bm.to_result_rows(_log("chromeos_tast_cpu_xnnpack.txt"))[0].to_dict()
    assert without["latency_ms"]["p50"] is None and without["latency_ms"]["p95"] is None
    assert without["init_ms"] == pytest.approx(3.337) and without["first_inference_ms"] == pytest.approx(81.913)
    assert without["warmup_ms"]["mean"] == pytest.approx(58.9847) and without["memory_mb"]["peak_periodic"] == 93.2383
    assert without["delegate"] == "xnnpack" and without["delegated_nodes"] == "58/58"
    gpu = bm.to_result_rows(_log("chromeos_tast_gpu_opencl.txt"))[0].to_dict()
    assert gpu["delegate"] == "gpu" and gpu["delegates"] == ["GPU"]


def test_prefix_variants_parse_the_same():
    body = ["count=50 first=10 curr=11 min=9 max=12 avg=1.24027e+06 std=3 p5=9 median=10 p95=12",
            "Inference timings in us: Init: 5, First inference: 10, Warmup (avg): 10, Inference (avg): 1.24027e+06"]
    variants = {
        "plain": body,
        "info": [f"INFO: {b}" for b in body],
        "logcat-brief": [f"I/tflite  (12345): {b}" for b in body],
        "logcat-threadtime": [f"07-14 13:14:56.520 22838 22838 I tflite  : {b}" for b in body],
        "indented": [f"    {b}" for b in body],
    }
    for name, lines in variants.items():
        log = bm.parse_log("\n".join(lines))
        assert log.inference.avg_us == 1240270.0, name
        assert log.inference.median_us == 10.0 and log.inference_avg_us == 1240270.0, name
        assert log.unparsed == (), name


def test_unknown_and_hostile_text_never_crashes():
    junk = "\n".join([
        "hello world", "count=", "count=abc", "Inference timings in us: garbage", "=====",
        "\t\t[node type]", "Memory footprint delta from the start of the tool (MB): init=x overall=y",
        "\x00\xff binary", "Num threads: [", "count=3 first=nan curr=inf"])
    log = bm.parse_log(junk)
    assert "hello world" in log.unparsed
    assert bm.parse_log("").is_benchmark_model is False
    assert bm.parse_log("just some program output\nnothing to see").is_benchmark_model is False
    assert bm.to_result_rows(bm.parse_log("random"))[0].to_dict()["status"] == "failed"


# --------------------------------------------------------------------------- argv and the binary


def test_build_argv_records_gpu_precision_and_escapes_names():
    argv = bm.build_argv("/data/local/tmp/benchmark_model", "/data/local/tmp/m y;'x'.tflite", threads=4,
                         use_xnnpack=False, use_gpu=True, num_runs=50, warmup_runs=0, min_secs=0,
                         input_layers=["serving_default_x:0", "b"], input_shapes=[(1, 8), [2, 3]],
                         input_value_files=["/d/input_0.bin", "/d/input 1.bin"], output_filepath="/d/out.bin",
                         enable_op_profiling=True)
    assert argv[0] == "/data/local/tmp/benchmark_model"
    assert "--graph=/data/local/tmp/m y;'x'.tflite" in argv
    for flag in ("--num_threads=4", "--use_xnnpack=false", "--use_gpu=true", "--gpu_precision_loss_allowed=false",
                 "--num_runs=50", "--warmup_runs=0", "--min_secs=0", "--input_layer=serving_default_x:0,b",
                 "--input_layer_shape=1,8:2,3",
                 "--input_layer_value_files=serving_default_x::0:/d/input_0.bin,b:/d/input 1.bin",
                 "--output_filepath=/d/out.bin", "--enable_op_profiling=true"):
        assert flag in argv, flag
    assert bm.describe_argv(argv)["gpu_precision_loss_allowed"] == "false"
    lossy = bm.build_argv("bm", "m.tflite", use_gpu=True, gpu_precision_loss_allowed=True)
    assert "--gpu_precision_loss_allowed=true" in lossy
    assert not any("gpu" in a for a in bm.build_argv("bm", "m.tflite"))
    with pytest.raises(BadInput, match="','"):
        bm.build_argv("bm", "m", input_layers=["a,b"])
    with pytest.raises(BadInput, match="one shape per layer"):
        bm.build_argv("bm", "m", input_layers=["a"], input_shapes=[(1,), (2,)])
    with pytest.raises(BadInput, match="num_threads"):
        bm.build_argv("bm", "m", threads=0)
    with pytest.raises(BadInput, match="GPU or NNAPI"):
        bm.build_argv("bm", "m", use_gpu=True, use_nnapi=True)


def test_missing_binary_says_where_google_publishes_it(tmp_path, monkeypatch):
    monkeypatch.delenv(bm.ENV_VAR, raising=False)
    with pytest.raises(BadInput) as e:
        bm.resolve_binary(None)
    msg = str(e.value)
    assert "android_aarch64_benchmark_model" in msg and "--benchmark-binary" in msg and bm.ENV_VAR in msg
    assert bm.MEASUREMENT_DOCS_URL in msg and "\n" not in msg
    with pytest.raises(BadInput, match="does not exist"):
        bm.resolve_binary(str(tmp_path / "nope"))
    arm = tmp_path / "android_aarch64_benchmark_model"
    data = bytearray(Path(sys.executable).resolve().read_bytes()[:64])
    data[18:20] = (0xB7).to_bytes(2, "little")
    arm.write_bytes(bytes(data))
    monkeypatch.setenv(bm.ENV_VAR, str(arm))
    info = bm.resolve_binary(None)
    assert (info.kind, info.machine) == ("elf", "aarch64")
    bm.check_abi(info, ["arm64-v8a", "armeabi-v7a"])
    with pytest.raises(BadInput, match="x86_64"):
        bm.check_abi(info, ["x86_64"], serial="emulator-5554")
    text = tmp_path / "notes.txt"
    text.write_text("hello")
    with pytest.raises(BadInput, match="not an executable"):
        bm.resolve_binary(str(text))


def test_classify_failure_kinds():
    assert "wrong ABI" in str(bm.classify_failure("sh: 1: ./bm: Exec format error", 126))
    assert "wrong ABI" in str(bm.classify_failure(
        "/system/bin/sh: /data/local/tmp/bm: not executable: 64-bit ELF file", 126))
    assert "missing" in str(bm.classify_failure("sh: 1: ./bm: not found", 127))
    assert "permission denied" in str(bm.classify_failure("sh: ./bm: Permission denied", 126))
    assert "no exit status" in str(bm.classify_failure("", None))


# --------------------------------------------------------------------------- outputs and inputs


def test_split_output_file_roundtrip_and_truncation():
    a = np.arange(6, dtype=np.float32).reshape(1, 6)
    b = np.array([[-128, 0, 127]], dtype=np.int8)
    details = [{"name": "a", "shape": [1, 6], "dtype": np.float32, "quantization": (0.0, 0)},
               {"name": "b", "shape": [1, 3], "dtype": np.int8, "quantization": (0.5, -1)}]
    data = a.tobytes() + b.tobytes()
    out = bm.split_output_file(data, details)
    np.testing.assert_array_equal(out["a"], a)
    np.testing.assert_array_equal(out["b"], b)
    deq = bm.split_output_file(data, details, dequantize=True)
    np.testing.assert_allclose(deq["b"], (b.astype(np.float32) + 1) * 0.5)
    with pytest.raises(InfraError, match="26 bytes, expected 27"):
        bm.split_output_file(data[:-1], details)


# --------------------------------------------------------------------------- end to end with the stand-in


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """A two-input fp32 model (input names carry ':0') and a full-int8 model, built with real TF."""
    import keras
    import tensorflow as tf

    out = tmp_path_factory.mktemp("bm_models")
    keras.utils.set_random_seed(0)
    x1 = keras.Input(shape=(6,), name="alpha")
    x2 = keras.Input(shape=(4,), name="beta")
    h = keras.layers.Concatenate()([keras.layers.Dense(5, activation="relu")(x1), x2])
    two = keras.Model([x1, x2], [keras.layers.Dense(3, name="o1")(h), keras.layers.Dense(2, name="o2")(h)])
    fp32 = out / "two inputs 'x';y.tflite"
    fp32.write_bytes(tf.lite.TFLiteConverter.from_keras_model(two).convert())

    xi = keras.Input(shape=(6,), name="q")
    single = keras.Model(xi, keras.layers.Dense(3)(xi))
    rng = np.random.default_rng(0)

    def rep():
        for _ in range(8):
            yield [rng.uniform(-1, 1, (1, 6)).astype(np.float32)]

    c = tf.lite.TFLiteConverter.from_keras_model(single)
    c.optimizations = [tf.lite.Optimize.DEFAULT]
    c.representative_dataset = rep
    c.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    c.inference_input_type = tf.int8
    c.inference_output_type = tf.int8
    int8 = out / "int8.tflite"
    int8.write_bytes(c.convert())
    return {"fp32": fp32, "int8": int8}


@pytest.fixture(scope="module")
def standin_bin(tmp_path_factory):
    d = tmp_path_factory.mktemp("device dir 'with' spaces;x")
    return Path(standin.install(str(d / "benchmark_model"), sys.executable))


def _host_outputs(model: Path, feeds: dict[str, np.ndarray]) -> tuple[dict[str, np.ndarray], list, list]:
    from ai_edge_litert.interpreter import Interpreter

    it = Interpreter(model_path=str(model))
    it.allocate_tensors()
    ins, outs = it.get_input_details(), it.get_output_details()
    for d in ins:
        it.set_tensor(d["index"], feeds[d["name"]])
    it.invoke()
    return {d["name"]: it.get_tensor(d["index"]) for d in outs}, ins, outs


def _run(argv: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)


def test_standin_prints_the_real_format_and_parses(models, standin_bin, tmp_path):
    argv = bm.build_argv(str(standin_bin), str(models["fp32"]), threads=2, num_runs=30, warmup_runs=3,
                         min_secs=0, warmup_min_secs=0, report_peak_memory_footprint=True)
    p = _run(argv)
    assert p.returncode == 0, p.stderr
    text = p.stderr          # like benchmark_model, the stand-in logs to stderr
    assert "INFO: STARTING!" in text and "INFO: Created TensorFlow Lite XNNPACK delegate for CPU." in text
    log = bm.parse_log(text)
    assert log.unparsed == () and not log.failed
    assert log.warmup.count == 3 and log.inference.count == 30
    inf = log.inference
    assert inf.min_us <= inf.p5_us <= inf.median_us <= inf.p95_us <= inf.max_us
    assert inf.min_us <= inf.avg_us <= inf.max_us
    assert log.inference_avg_us == pytest.approx(inf.avg_us, rel=1e-5)
    assert log.threads == 2 and log.mem_kind == "delta-from-tool-start" and log.peak_mem_mb > 0
    assert log.delegates == ("XNNPACK",) and log.param("Graph") == str(models["fp32"])
    row = bm.to_result_rows(log)[0].to_dict()
    assert row["status"] == "ok" and row["latency_ms"]["samples"] == 30 and row["latency_ms"]["p99"] is None
    no_xnn = bm.parse_log(_run(bm.build_argv(str(standin_bin), str(models["fp32"]), use_xnnpack=False,
                                             num_runs=2, min_secs=0, warmup_min_secs=0)).stderr)
    assert "XNNPACK" not in no_xnn.delegates and bm.primary_delegate(no_xnn) == "none"


def test_standin_gpu_fails_like_the_real_tool(models, standin_bin):
    p = _run(bm.build_argv(str(standin_bin), str(models["fp32"]), use_gpu=True))
    assert p.returncode == 1
    log = bm.parse_log(p.stderr)
    assert log.failed and log.delegate_fallback == ("GPU",) and log.param("Use gpu") == "1"
    assert log.param("Allow lower precision in gpu") == "0"
    assert "Failed to apply GPU delegate" in str(bm.classify_failure(p.stderr, p.returncode))


def test_value_files_and_output_file_match_host_litert(models, standin_bin, tmp_path):
    rng = np.random.default_rng(3)
    from ai_edge_litert.interpreter import Interpreter

    it = Interpreter(model_path=str(models["fp32"]))
    ins, outs = it.get_input_details(), it.get_output_details()
    assert any(":" in d["name"] for d in ins)   # exercises the '::' escape of --input_layer_value_files
    feeds = {d["name"]: rng.normal(size=tuple(d["shape"])).astype(np.float64) for d in ins}  # float64 -> cast
    files = bm.write_input_value_files(feeds, ins, tmp_path / "in dir")
    out_file = tmp_path / "out 'file'.bin"
    argv = bm.build_argv(str(standin_bin), str(models["fp32"]), num_runs=1, warmup_runs=0, min_secs=0,
                         warmup_min_secs=0, output_filepath=str(out_file), **files.argv_kwargs())
    p = _run(argv)
    assert p.returncode == 0, p.stderr
    got = bm.split_output_file(out_file.read_bytes(), outs)
    ref, _, _ = _host_outputs(models["fp32"], {k: v.astype(np.float32) for k, v in feeds.items()})
    assert set(got) == set(ref)
    for k in ref:
        np.testing.assert_allclose(got[k], ref[k], rtol=1e-5, atol=1e-6)
    with pytest.raises(BadInput, match="no data for model input"):
        bm.write_input_value_files({}, ins, tmp_path / "x")
    with pytest.raises(BadInput, match="does not fit"):
        bm.write_input_value_files({d["name"]: np.zeros((2, 99)) for d in ins}, ins, tmp_path / "y")


def test_int8_value_files_quantize_and_outputs_dequantize(models, standin_bin, tmp_path):
    from ai_edge_litert.interpreter import Interpreter

    it = Interpreter(model_path=str(models["int8"]))
    ins, outs = it.get_input_details(), it.get_output_details()
    x = np.linspace(-1, 1, 6, dtype=np.float32).reshape(1, 6)
    files = bm.write_input_value_files({ins[0]["name"]: x}, ins, tmp_path)
    raw = files.local_paths[0].read_bytes()
    assert len(raw) == 6 and np.frombuffer(raw, np.int8).dtype == np.int8
    out_file = tmp_path / "o.bin"
    p = _run(bm.build_argv(str(standin_bin), str(models["int8"]), num_runs=1, warmup_runs=0, min_secs=0,
                           warmup_min_secs=0, output_filepath=str(out_file), **files.argv_kwargs()))
    assert p.returncode == 0, p.stderr
    got = bm.split_output_file(out_file.read_bytes(), outs, dequantize=True)
    q = np.frombuffer(raw, np.int8).reshape(1, 6)
    ref, _, _ = _host_outputs(models["int8"], {ins[0]["name"]: q})
    scale, zp = outs[0]["quantization"]
    np.testing.assert_allclose(got[outs[0]["name"]], (ref[outs[0]["name"]].astype(np.float32) - zp) * scale)


def test_sample_loop_end_to_end_in_real_sh(models, standin_bin):
    """Per-inference samples: one sh loop, hostile file names, curr= of each single run."""
    n = 6
    argv = bm.sample_argv(str(standin_bin), str(models["fp32"]), warmup_runs=1, threads=1)
    script = bm.build_sample_loop_script(argv, n)
    assert "'" in script and "$(" not in script.replace("$((i + 1))", "")
    p = subprocess.run(["sh", "-c", script], capture_output=True, text=True, timeout=120, check=False)
    assert p.returncode == 0, p.stdout[-2000:]
    ns = bm.parse_sample_loop(p.stdout, n)
    assert ns.dtype == np.int64 and ns.shape == (n,) and (ns >= 0).all() and (ns % 1000 == 0).all()
    method = bm.sample_method(n, 1)
    assert "--num_runs=1" in method and f"{n} times" in method and "one device-side sh loop" in method

    # a connection that drops before the loop ends must not look like a clean, short result
    cut = p.stdout[: p.stdout.index("EDGEBENCH_SAMPLE_END 3")]
    with pytest.raises(InfraError, match="ended inside sample 3"):
        bm.parse_sample_loop(cut, n)
    with pytest.raises(InfraError, match="did not finish"):
        bm.parse_sample_loop(p.stdout[: p.stdout.index("EDGEBENCH_SAMPLE_DONE")], n)
    with pytest.raises(BadInput, match="num_runs=1"):
        bm.build_sample_loop_script(bm.build_argv("bm", "m"), 3)

    # no warmup: the tool prints "count=0" for the empty warmup phase and "nan" as its average
    cold = bm.build_sample_loop_script(bm.sample_argv(str(standin_bin), str(models["fp32"]), warmup_runs=0), 2)
    q = subprocess.run(["sh", "-c", cold], capture_output=True, text=True, timeout=120, check=False)
    assert "count=0" in q.stdout and "Warmup (avg): nan" in q.stdout
    assert bm.parse_sample_loop(q.stdout, 2).shape == (2,)


def test_sample_loop_wrong_abi_and_missing_binary(tmp_path, models):
    arm = tmp_path / "bm arm"
    data = bytearray(Path("/bin/true").resolve().read_bytes())
    data[18:20] = (0xB7).to_bytes(2, "little")
    arm.write_bytes(bytes(data))
    arm.chmod(0o755)
    for binary, pattern in ((arm, "wrong ABI"), (tmp_path / "absent", "missing")):
        script = bm.build_sample_loop_script(bm.sample_argv(str(binary), str(models["fp32"])), 3)
        p = subprocess.run(["sh", "-c", script], capture_output=True, text=True, timeout=60, check=False)
        assert p.returncode != 0
        with pytest.raises(InfraError, match=pattern):
            bm.parse_sample_loop(p.stdout, 3, where="sim-device")


def test_sample_loop_does_not_let_the_shell_interpret_names(tmp_path, standin_bin):
    marker = tmp_path / "pwned"
    evil = f"$(touch {marker}); `touch {marker}` \"q\" 'x'.tflite"
    script = bm.build_sample_loop_script(bm.sample_argv(str(standin_bin), evil), 1)
    p = subprocess.run(["sh", "-c", script], capture_output=True, text=True, timeout=60, check=False)
    assert not marker.exists()
    assert p.returncode == 1 and f"Could not open '{evil}'" in p.stdout
    with pytest.raises(InfraError, match="Could not open"):
        bm.parse_sample_loop(p.stdout, 1)


def test_standin_is_executable_with_plain_python(standin_bin):
    assert os.access(standin_bin, os.X_OK)
    assert standin_bin.read_text().splitlines()[0] == f"#!{sys.executable}"
    assert shutil.which("sh")


# ------------------------------------------------------------------ --model_runtime_info_output_file

def _pb(number: int, value) -> bytes:
    """One protobuf field, encoded by hand from the wire format (independent of the reader's schema)."""
    def varint(v: int) -> bytes:
        v &= (1 << 64) - 1
        out = b""
        while True:
            b, v = v & 0x7F, v >> 7
            out += bytes([b | (0x80 if v else 0)])
            if not v:
                return out
    if isinstance(value, int):
        return varint(number << 3) + varint(value)
    raw = value.encode() if isinstance(value, str) else value
    return varint(number << 3 | 2) + varint(len(raw)) + raw


def test_runtime_info_reader_follows_the_tools_schema():
    """Bytes laid out as model_runtime_info.proto says (field numbers from the .proto): node 0
    CONV_2D and node 2 MY_CUSTOM_OP stay on the interpreter, node 1 is delegated to kernel 3
    (an XNNPACK partition); tensors (edges, field 2) are unknown to the reader and skipped."""
    from edgebench.targets.delegation import delegation_from_runtime_info
    from edgebench.targets.benchmark_model.runtime_info import read_runtime_info

    packed = lambda *xs: b"".join(bytes([x]) for x in xs)   # noqa: E731 -- small ints: one byte each
    nodes = [_pb(1, 0) + _pb(2, "CONV_2D") + _pb(3, "3") + _pb(4, packed(0, 1)) + _pb(5, packed(2)),
             _pb(1, 1) + _pb(2, "ADD") + _pb(3, "0") + _pb(9, 3),
             _pb(1, 2) + _pb(2, "MY_CUSTOM_OP") + _pb(3, "MY_CUSTOM_OP"),
             _pb(1, 3) + _pb(2, "TfLiteXNNPackDelegate") + _pb(3, "TfLiteXNNPackDelegate")
             + _pb(8, _pb(1, "TfLiteXNNPackDelegate") + _pb(2, packed(1)))]
    edge = _pb(1, 0) + _pb(2, "input") + _pb(3, 1) + _pb(4, packed(1, 4))
    sub = _pb(1, 0) + _pb(2, edge) + b"".join(_pb(3, n) for n in nodes) + _pb(4, packed(0, 3, 2)) + _pb(5, 1)
    data = _pb(1, "m.tflite") + _pb(2, sub) + _pb(2, _pb(1, 1) + _pb(3, _pb(1, 0) + _pb(2, "WHILE")))
    info = read_runtime_info(data)
    assert info["nodes_total"] == 3 and info["nodes_delegated"] == 1 and info["subgraphs"] == 2
    assert info["undelegated"] == {"CONV_2D": 1, "MY_CUSTOM_OP": 1}
    assert info["kernels"] == [{"node": 3, "delegate_name": "TfLiteXNNPackDelegate", "replaced": [1]}]
    d = delegation_from_runtime_info(info)
    assert (d.delegate, d.cell()) == ("XNNPACK", "1/3, 1 part")
    for bad in (b"\xff\xff\xff", b"", _pb(1, "no subgraphs")):
        with pytest.raises(ValueError):
            read_runtime_info(bad)


def test_litert_results_block_never_overrides_the_finer_lines():
    """With the classic stats line and summary present (us), the block's two-decimal ms only fill gaps."""
    text = ("INFO: count=40 first=1201 curr=1187 min=1180 max=1305 avg=1199.5 std=20\n"
            "INFO: Inference timings in us: Init: 5000, First inference: 2400, Warmup (avg): 1300, Inference (avg): 1199.5\n"
            + (FIX / "litert2.1.5_benchmark_litert_model_gpu_results.txt").read_text())
    log = bm.parse_log(text)
    assert log.inference.count == 40 and log.inference_avg_us == 1199.5 and log.init_us == 5000
    assert log.summary_format == "inference-timings" and log.mem_overall_mb == pytest.approx(6391.74)
