"""``edgebench diagnose MODEL.tflite --accelerator gpu``: the bisect that names the op a GPU gets wrong.

The planted model (built here with TensorFlow) keeps every value inside fp16's range until a SUM
over 8 channels of values up to ~56,000 each: on the CPU (fp32) the sum reaches ~200,000; on the
GPU in fp16 it cannot (65504 is fp16's largest finite value), while in fp32 the GPU agrees. The GPU
tests run on a real Vulkan driver or on scripts/software_gpu's Mesa lavapipe (scripts/test sets it
up from Debian's packages); without one they skip and say so."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import numpy as np
import pytest

from edgebench.convert.run import ConvertSettings
from edgebench.diagnose.run import DiagnoseSettings, diagnose
from edgebench.model.tflite_rewrite import live_after, load_model_t, op_names, prefix_model
from edgebench.report.diagnose import html_section, markdown_lines, model_explorer
from edgebench.report.terminal.diagnose import render_diagnose
from edgebench.rows import Document

SHAPE = (1, 16, 16, 3)


def _planted_module(tf, output: str = "y"):
    class Planted(tf.Module):
        def __init__(self):
            r = np.random.default_rng(0)
            self.w1 = tf.constant(r.normal(size=(3, 3, 3, 8)).astype(np.float32) * 0.3)
            self.w2 = tf.constant(r.normal(size=(3, 3, 8, 8)).astype(np.float32) * 0.3)

        @tf.function(input_signature=[tf.TensorSpec(SHAPE, tf.float32, name="x")])
        def f(self, x):
            a = tf.nn.relu(tf.nn.conv2d(x, self.w1, 1, "SAME"))
            b = tf.nn.conv2d(a, self.w2, 1, "SAME")
            big = (tf.math.abs(b) + 1.0) * 8.0e3       # within fp16's range (<= ~56,000 on these inputs)
            s = tf.reduce_sum(big, axis=-1, keepdims=True)   # the planted overflow: ~200,000
            if output == "sum":
                return {"s": s}
            return {"y": tf.nn.avg_pool2d(s * 1.0e-5, 2, 2, "VALID")}

    return Planted()


def _convert(tf, m) -> bytes:
    return tf.lite.TFLiteConverter.from_concrete_functions([m.f.get_concrete_function()], m).convert()


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    import tensorflow as tf

    out = tmp_path_factory.mktemp("planted")
    paths = {"model": out / "planted.tflite", "sum_out": out / "planted_sum_output.tflite", "data": out / "data.npz"}
    paths["model"].write_bytes(_convert(tf, _planted_module(tf)))
    paths["sum_out"].write_bytes(_convert(tf, _planted_module(tf, "sum")))   # the independent recomputation
    np.savez(paths["data"], x=np.random.default_rng(3).uniform(0, 1, (4, *SHAPE[1:])).astype(np.float32))
    return paths


@pytest.fixture(scope="module")
def software_gpu_env_or_skip():
    from conftest_profile import software_gpu_env

    env = software_gpu_env()
    if env is None:
        pytest.skip("software GPU: needs a Vulkan driver -- run scripts/software_gpu and set EDGEBENCH_SOFTWARE_GPU "
                    "(scripts/test does both); no GPU and no Mesa lavapipe here")
    with pytest.MonkeyPatch.context() as mp:
        for k, v in env.items():
            mp.setenv(k, v)
        yield env


@pytest.fixture(scope="module")
def bisected(planted, software_gpu_env_or_skip, tmp_path_factory):
    out = tmp_path_factory.mktemp("bisect")
    return diagnose(DiagnoseSettings(convert=ConvertSettings(src=str(planted["model"]), data=str(planted["data"]), out_dir=str(out)),
                                     accelerator="gpu", gpu_precisions=("fp16", "fp32"), data=str(planted["data"]),
                                     eval_samples=4))


RECOMPUTE = """
import sys, numpy as np
from ai_edge_litert import compiled_model as cm
from ai_edge_litert.interpreter import Interpreter
model, data, out = sys.argv[1:]
xs = np.load(data)["x"]
cpu = Interpreter(model_path=model).get_signature_runner()
opts = cm.Options(hardware_accelerators=cm.HardwareAccelerator.GPU | cm.HardwareAccelerator.CPU)
opts.gpu_options.enforce_f32 = False
gpu = cm.CompiledModel.from_file(model, options=opts)
ref, got = [], []
for x in xs:
    ref.append(cpu(x=x[None])["s"])
    ib, ob = gpu.create_input_buffers(0), gpu.create_output_buffers(0)
    ib[0].write(np.ascontiguousarray(x[None]))
    gpu.run_by_index(0, ib, ob)
    got.append(ob[0].read(ref[-1].size, np.float32).reshape(ref[-1].shape))
np.savez(out, ref=np.stack(ref), got=np.stack(got))
"""


def _bisect(row):
    return row.to_dict()["bisect"]


pytest_plugins = ["conftest_profile"]


# --------------------------------------------------------------------------- the graph cut (no GPU)


def test_a_prefix_cut_exposes_what_is_alive_and_computes_what_the_model_does(planted):
    from ai_edge_litert.interpreter import Interpreter

    raw = planted["model"].read_bytes()
    mt = load_model_t(raw)
    ops = op_names(mt)
    assert "SUM" in ops and ops[-1] == "AVERAGE_POOL_2D"
    x = np.load(planted["data"])["x"][:1]
    full = Interpreter(model_content=raw, experimental_preserve_all_tensors=True)
    full.allocate_tensors()
    full.set_tensor(full.get_input_details()[0]["index"], x)
    full.invoke()
    for k in range(len(ops)):
        data, live = prefix_model(mt, k)
        own = [int(t) for t in mt.subgraphs[0].operators[k].outputs]
        assert set(own) <= set(live) and live == live_after(mt, k)
        nxt = mt.subgraphs[0].operators[k + 1] if k + 1 < len(ops) else None
        if nxt is not None:      # every input op k+1 reads is alive, a graph input or a constant
            consts = {t for t, tt in enumerate(mt.subgraphs[0].tensors) if tt.buffer and mt.buffers[tt.buffer].data is not None}
            graph_in = {int(t) for t in mt.subgraphs[0].inputs}
            assert all(t in live or t in consts or t in graph_in for t in map(int, nxt.inputs) if t >= 0)
        got = Interpreter(model_content=data).get_signature_runner()(x=x)
        for t in live:
            np.testing.assert_allclose(got[f"t{t}"], full.get_tensor(t), rtol=1e-5, atol=1e-3)


# --------------------------------------------------------------------------- bad input (no GPU)


def test_accelerator_bisect_refuses_what_it_cannot_do(run_cli, planted, tmp_path):
    cases = [
        (("diagnose", str(planted["model"]), "--accelerator", "cpu"), "the CPU is the reference"),
        (("diagnose", "digits", "--accelerator", "gpu"), "bisects a .tflite"),
        (("diagnose", str(planted["model"]), "--gpu-precision", "fp16"), "add --accelerator gpu"),
        (("diagnose", str(planted["model"]), "--accelerator", "gpu", "--gpu-precision", "bf16"), "bf16"),
        (("diagnose", str(planted["model"]), "--accelerator", "npu", "--gpu-precision", "fp16"), "--gpu-precision"),
    ]
    for args, words in cases:
        code, out, err = run_cli(*args, "--no-store", "--out", str(tmp_path / "o"))
        assert code == 2 and words in out + err and "Traceback" not in out + err, (args, out, err)


def test_no_vulkan_adapter_is_one_line_naming_the_driver(run_cli, planted, monkeypatch, tmp_path):
    """Real: the Vulkan loader in the worker finds no driver (a missing ICD file)."""
    missing = str(tmp_path / "no_icd.json")
    monkeypatch.setenv("VK_ICD_FILENAMES", missing)
    monkeypatch.setenv("VK_DRIVER_FILES", missing)
    code, out, err = run_cli("diagnose", str(planted["model"]), "--accelerator", "gpu", "--data", str(planted["data"]),
                             "--no-store", "--out", str(tmp_path / "o"))
    assert code == 2, (out, err)
    assert "no GPU adapter" in err and "scripts/software_gpu" in err and "Traceback" not in out + err


# --------------------------------------------------------------------------- on the (software) GPU


@pytest.mark.slow
def test_the_bisect_names_the_overflowing_sum_in_log2_compiles(bisected, planted):
    fp16, fp32 = bisected.rows
    assert (fp16.accelerator, fp16.gpu_precision, fp32.gpu_precision) == ("gpu", "fp16", "fp32")
    b = _bisect(fp16)
    ops = op_names(load_model_t(planted["model"].read_bytes()))
    c = b["culprit"]
    assert c is not None and c["op"] == "SUM" and c["node"] == ops.index("SUM"), b["verdict"]
    assert b["ops"] == len(ops) and b["compiles"] == len(b["probes"])
    assert b["compiles"] <= math.ceil(math.log2(len(ops))) + 2
    assert c["ref_max"] > 65504 and "65504" in c["why"] and "--gpu-precision fp32" in c["why"]
    before = [p for p in b["probes"] if p["node"] < c["node"]]
    assert before and not any(p["departs"] for p in before)        # everything before it agreed
    assert b["probes"][0]["node"] == len(ops) - 1 and b["probes"][0]["departs"]   # the whole model departs
    # fp32 on the same GPU: no divergence, in one compile
    b32 = _bisect(fp32)
    assert b32["culprit"] is None and b32["compiles"] == 1 and b32["verdict"].startswith("no divergence")
    assert b32["probes"][0]["output"]["psnr_db"] > 80
    if b.get("software_gpu"):      # never presented as a GPU's numbers
        assert any("software GPU" in w for w in fp16.warnings)


@pytest.mark.slow
def test_the_culprits_drift_equals_an_independent_recomputation(bisected, planted, software_gpu_env_or_skip, tmp_path):
    """The SUM's output computed again without edgebench: TF converts a model whose output is that
    sum; the Interpreter (CPU) and LiteRT's CompiledModel (GPU, fp16) run it on the same inputs, in
    a child process (WebGPU beside TensorFlow in one process crashes)."""
    c = _bisect(bisected.rows[0])["culprit"]
    out = tmp_path / "recomputed.npz"
    subprocess.run([sys.executable, "-c", RECOMPUTE, str(planted["sum_out"]), str(planted["data"]), str(out)],
                   check=True, timeout=300, capture_output=True)
    with np.load(out) as z:
        ref, got = z["ref"].astype(np.float64), z["got"].astype(np.float64)
    fin = np.isfinite(got)
    assert int((~fin).sum()) == (c["nan"] or 0) + (c["inf"] or 0)
    np.testing.assert_allclose(c["finite_max_abs"], np.abs(got - ref)[fin].max(), rtol=1e-3)
    np.testing.assert_allclose(c["ref_max"], ref.max(), rtol=1e-6)
    if fin.all():
        psnr = 20 * math.log10((ref.max() - ref.min()) / math.sqrt(((got - ref) ** 2).mean()))
        assert abs(c["psnr_db"] - psnr) < 0.05


@pytest.mark.slow
def test_table_json_markdown_html_and_model_explorer(bisected, planted, tmp_path):
    doc = bisected
    again = Document.from_dict(json.loads(json.dumps(doc.to_dict())))
    assert again.to_dict()["rows"][0]["bisect"] == json.loads(json.dumps(doc.to_dict()["rows"][0]["bisect"]))
    node = _bisect(doc.rows[0])["culprit"]["node"]
    text = "\n".join(str(x) for x in render_diagnose(again, width=140))
    assert f"SUM#{node}" in text and "first departure" in text and "no divergence" in text and "compiles" in text
    md = "\n".join(markdown_lines(again, str))
    assert f"**SUM#{node}**" in md and "GPU fp16 vs CPU" in md
    assert "<table>" in html_section([again]) and "SUM#" in html_section([again])
    me = model_explorer(again.rows[0])
    tensor = _bisect(doc.rows[0])["culprit"]["tensor"]
    assert me["results"][tensor]["value"] < 40 and len(me["results"]) == len(_bisect(doc.rows[0])["probes"])


@pytest.mark.slow
def test_the_cli_writes_the_json_and_the_overlay(run_cli, planted, software_gpu_env_or_skip, tmp_path):
    js, me = tmp_path / "d.json", tmp_path / "me.json"
    code, out, err = run_cli("diagnose", str(planted["model"]), "--accelerator", "gpu", "--gpu-precision", "fp16",
                             "--data", str(planted["data"]), "--samples", "2", "--out", str(tmp_path / "o"),
                             "--json", str(js), "--model-explorer", str(me), "--no-store")
    assert code == 0, err
    row = json.loads(js.read_text())["rows"][0]
    assert row["bisect"]["culprit"]["op"] == "SUM" and row["bisect"]["samples"] == 2
    assert json.loads(me.read_text())["results"]
    assert "first departure at SUM#" in out
