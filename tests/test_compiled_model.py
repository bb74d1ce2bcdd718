"""--runtime compiled (LiteRT's CompiledModel API) and --accelerator on the host, for real.

The GPU accelerator needs a Vulkan driver: on a machine without a GPU, scripts/software_gpu
unpacks Mesa's software Vulkan and the ``software_gpu`` tests run when $EDGEBENCH_SOFTWARE_GPU
points at it (correctness only: its timing is a CPU emulating a GPU)."""

from __future__ import annotations

import numpy as np
import pytest

from edgebench.bench.run import BenchSettings, run_bench
from edgebench.core.errors import BadInput
from edgebench.targets.base import Job, RunControl, RunOptions, check_runtime
from edgebench.targets.host import HostTarget

pytest_plugins = ["conftest_profile"]


def _run(path, data, **kw):
    return HostTarget().run(Job(model_path=str(path), inputs_npz=str(data), save_outputs=True,
                                control=RunControl(runs=40, warmup_runs=3), **kw))


def test_compiled_cpu_matches_the_interpreter(prelu_models):
    for prec, full in (("fp32", True), ("int8", False)):
        interp = _run(prelu_models[prec], prelu_models["data"])
        comp = _run(prelu_models[prec], prelu_models["data"], runtime_api="compiled", accelerator="cpu")
        assert comp.extra["runtime_api"] == "compiled" and comp.extra["accelerator"] == "cpu"
        assert comp.extra["fully_accelerated"] is full           # int8 PRELU is not accelerated
        assert comp.method.endswith("CompiledModel.run_by_index()")
        assert comp.fingerprint["runtime_api"] == "compiled"
        assert len(comp.samples_ns) == 40
        for name, out in interp.outputs.items():
            np.testing.assert_allclose(comp.outputs[name], out, rtol=1e-5, atol=1e-6)
        d = comp.extra["delegation"]
        assert d["nodes_delegated"] == (6 if prec == "fp32" else 6) and d["nodes_total"] == (6 if prec == "fp32" else 8)


def test_compiled_rows_in_bench(prelu_models):
    doc = run_bench(BenchSettings(models=(str(prelu_models["int8"]),), run=RunOptions(runtime_api="compiled", accelerator="cpu", control=RunControl(runs=30, warmup_runs=2))))
    row = doc.rows[0]
    assert row.ok and row.runtime_api == "compiled" and row.accelerator == "cpu" and row.fully_accelerated is False
    assert row.to_dict()["fully_accelerated"] is False and row.delegation.partitions == 3


def test_npu_that_is_not_there_says_what_is(prelu_models):
    doc = run_bench(BenchSettings(models=(str(prelu_models["fp32"]),), run=RunOptions(runtime_api="compiled", accelerator="npu", control=RunControl(runs=5))))
    row = doc.rows[0]
    assert not row.ok and row.exit_code == 2
    assert "accelerator 'npu' is not available" in row.error and "available here: cpu" in row.error


def test_runtime_options_are_checked_up_front():
    with pytest.raises(BadInput, match="add --runtime compiled"):
        check_runtime("interpreter", "gpu")
    with pytest.raises(BadInput, match="--runtime 'tflite' is unknown"):
        check_runtime("tflite", None)
    with pytest.raises(BadInput, match="--gpu-precision applies to GPU runs"):
        check_runtime("compiled", "cpu", ("fp16",))
    with pytest.raises(BadInput, match="unknown"):
        check_runtime("compiled", "gpu", ("bf16",))
    check_runtime("compiled", "gpu", ("fp16", "fp32"))


def test_model_explorer_needs_a_profile(run_cli, prelu_models, tmp_path):
    code, out, err = run_cli("bench", str(prelu_models["fp32"]), "--model-explorer", str(tmp_path / "m.json"),
                             "--no-store")
    assert code == 2 and "add --op-profile" in err and "Traceback" not in err


@pytest.fixture()
def software_gpu(monkeypatch):
    from conftest_profile import software_gpu_env

    env = software_gpu_env()
    if env is None:
        pytest.skip("needs a Vulkan driver: run scripts/software_gpu and set EDGEBENCH_SOFTWARE_GPU "
                    "(no GPU and no software Vulkan here)")
    for k, v in env.items():
        monkeypatch.setenv(k, v)


def test_gpu_fp16_and_fp32_side_by_side_on_software_vulkan(software_gpu, prelu_models):
    doc = run_bench(BenchSettings(models=(str(prelu_models["fp32"]),), data=str(prelu_models["data"]), save_outputs=True, run=RunOptions(runtime_api="compiled", accelerator="gpu", gpu_precisions=("fp16", "fp32"), control=RunControl(runs=20, warmup_runs=2))))
    fp16, fp32 = doc.rows
    assert fp16.ok and fp32.ok, (fp16.error, fp32.error)
    assert (fp16.gpu_precision, fp32.gpu_precision) == ("fp16", "fp32")
    assert fp32.fully_accelerated and fp32.delegation.delegate == "GPU (WebGPU)"
    assert "software" in fp32.fingerprint["gpu_adapter"].lower()
    assert any("software GPU" in w for w in fp32.warnings)     # timing labelled, never passed off as a GPU's


def test_gpu_precision_outputs_differ_as_expected(software_gpu, prelu_models):
    cpu = _run(prelu_models["fp32"], prelu_models["data"])
    g32 = _run(prelu_models["fp32"], prelu_models["data"], runtime_api="compiled", accelerator="gpu",
               gpu_precision="fp32")
    g16 = _run(prelu_models["fp32"], prelu_models["data"], runtime_api="compiled", accelerator="gpu",
               gpu_precision="fp16")
    ref = next(iter(cpu.outputs.values()))
    err32 = np.abs(next(iter(g32.outputs.values())) - ref).max()
    err16 = np.abs(next(iter(g16.outputs.values())) - ref).max()
    assert err32 < 1e-4 and err16 > err32            # FP16 arithmetic really ran


def test_gpu_readiness_in_the_manifest_without_a_driver(prelu_models, monkeypatch, tmp_path):
    """The analyzer's static GPU check passes a model LiteRT's GPU accelerator rejects (UNIQUE), so
    the manifest records it with that caveat, and says when no driver allowed a real GPU compile."""
    import tensorflow as tf

    from edgebench.sources.describe import describe_tflite
    class Uniq(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([1, 8], tf.float32)])
        def f(self, x):
            u, _ = tf.unique(tf.reshape(tf.cast(x > 0, tf.int32), [-1]))
            return {"n": tf.size(u)}

    m = Uniq()
    path = tmp_path / "uniq.tflite"
    path.write_bytes(tf.lite.TFLiteConverter.from_concrete_functions([m.f.get_concrete_function()], m).convert())
    monkeypatch.delenv("VK_ICD_FILENAMES", raising=False)
    import pathlib

    real_glob = pathlib.Path.glob
    monkeypatch.setattr(pathlib.Path, "glob",
                        lambda self, pat: iter(()) if str(self) == "/dev/dri" else real_glob(self, pat))
    g = describe_tflite(path)["gpu_compatibility"]
    assert g["analyzer"] == "compatible" and "UNIQUE" in g["analyzer_note"]
    assert g["webgpu"]["checked"] is False and "scripts/software_gpu" in g["webgpu"]["reason"]


def test_gpu_readiness_compiles_for_the_gpu(software_gpu, prelu_models, tmp_path):
    import tensorflow as tf

    from edgebench.sources.describe import gpu_readiness
    class Uniq(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([1, 8], tf.float32)])
        def f(self, x):
            u, _ = tf.unique(tf.reshape(tf.cast(x > 0, tf.int32), [-1]))
            return {"n": tf.size(u)}

    m = Uniq()
    path = tmp_path / "uniq.tflite"
    path.write_bytes(tf.lite.TFLiteConverter.from_concrete_functions([m.f.get_concrete_function()], m).convert())
    bad = gpu_readiness(str(path))["webgpu"]
    assert bad["checked"] and bad["fully_on_gpu"] is False and "software" in bad["adapter"].lower()
    good = gpu_readiness(str(prelu_models["int8"]))["webgpu"]
    assert good["checked"] and good["fully_on_gpu"] is True


def test_compiled_init_time_is_load_and_allocate_not_a_python_import(prelu_models):
    """Issue 24.4: init_ms of --runtime compiled held the ~0.6 s import of
    ai_edge_litert.compiled_model; it must be load + allocate, like the interpreter's (a few ms).
    Compared with the interpreter's init on the same model in the same test (a 10x margin)."""
    interp = _run(prelu_models["fp32"], prelu_models["data"])
    comp = _run(prelu_models["fp32"], prelu_models["data"], runtime_api="compiled", accelerator="cpu")
    assert comp.init_ms < 10 * max(interp.init_ms, 5.0), (comp.init_ms, interp.init_ms)


@pytest.fixture(scope="module")
def dynamic_batch_model(tmp_path_factory):
    """A converter's dynamic batch: SHAPE/STRIDED_SLICE/PACK before a RESHAPE (as digits-tiny fp32
    converted with a -1 batch, or MTCNN's RNet): LiteRT's GPU accelerator rejects it whole."""
    import tensorflow as tf

    class Dyn(tf.Module):
        def __init__(self):
            self.w = tf.constant(np.random.default_rng(0).normal(size=(3, 3, 1, 4)).astype(np.float32))
            self.d = tf.constant(np.random.default_rng(1).normal(size=(256, 10)).astype(np.float32))

        @tf.function(input_signature=[tf.TensorSpec([None, 8, 8, 1], tf.float32)])
        def f(self, x):
            y = tf.nn.relu(tf.nn.conv2d(x, self.w, 1, "SAME"))
            return {"y": tf.matmul(tf.reshape(y, tf.stack([tf.shape(y)[0], 256])), self.d)}

    m = Dyn()
    path = tmp_path_factory.mktemp("dyn") / "dyn_batch.tflite"
    path.write_bytes(tf.lite.TFLiteConverter.from_concrete_functions([m.f.get_concrete_function()], m).convert())
    return path


def test_dynamic_batch_on_the_gpu_is_one_row_with_the_static_batch_advice(software_gpu, dynamic_batch_model):
    doc = run_bench(BenchSettings(models=(str(dynamic_batch_model),), run=RunOptions(runtime_api="compiled", accelerator="gpu", gpu_precisions=("fp16",), control=RunControl(runs=5))))
    (row,) = doc.rows
    assert not row.ok and row.latency is None                  # no CPU number under a GPU label
    assert "Failed to modify graph with delegate" in row.error
    assert "dynamic batch" in row.error and "[-1, 8, 8, 1]" in row.error and "--static-batch" in row.error
    cpu = run_bench(BenchSettings(models=(str(dynamic_batch_model),), run=RunOptions(runtime_api="compiled", accelerator="cpu", control=RunControl(runs=5)))).rows[0]
    assert cpu.ok, cpu.error                                   # the model itself is fine


def test_no_vulkan_adapter_is_one_row_naming_the_driver(prelu_models, monkeypatch, run_cli, tmp_path):
    """Real: the Vulkan loader is pointed at no driver (a missing ICD file) in the worker's environment."""
    missing = str(tmp_path / "no_icd.json")
    monkeypatch.setenv("VK_ICD_FILENAMES", missing)
    monkeypatch.setenv("VK_DRIVER_FILES", missing)
    doc = run_bench(BenchSettings(models=(str(prelu_models["fp32"]),), run=RunOptions(runtime_api="compiled", accelerator="gpu", gpu_precisions=("fp32",), control=RunControl(runs=5))))
    (row,) = doc.rows
    assert not row.ok and row.latency is None
    assert "no GPU adapter" in row.error and "scripts/software_gpu" in row.error and "available here: cpu" in row.error
    code, out, err = run_cli("bench", str(prelu_models["fp32"]), "--runtime", "compiled", "--accelerator", "gpu",
                             "--runs", "5", "--no-store")
    assert code != 0 and "scripts/software_gpu" in out + err and "Traceback" not in out + err
