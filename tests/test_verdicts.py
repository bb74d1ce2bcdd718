"""Silent-failure verdicts (issue 15 item 4): each one on a real conversion that produces it.

* zero and constant outputs: a real INT8 conversion calibrated on data with outliers, so the
  output scale is so coarse that the evaluation samples all quantize to the zero point (a ~1e-3
  output becomes exactly 0) or to one level (100 + ~1e-3 becomes a constant);
* NaN/Inf: log() of negative evaluation inputs;
* --min-cosine and --min-delegated: the PReLU INT8 model (its cosine is below 1 - 1e-7, FP32's is
  not; XNNPACK takes 75 % of its nodes).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from edgebench.rows import Delegation, Drift
from edgebench.judge.verdicts import delegation_verdict, output_verdicts

pytest_plugins = ["conftest_profile"]
FAST = ["--min-runs", "20", "--min-time", "0", "--warmup-runs", "2", "--no-store"]


def _cac(tmp: Path, src: str, *args: str) -> tuple[subprocess.CompletedProcess, dict]:
    env = dict(os.environ, COLUMNS="220")
    proc = subprocess.run([sys.executable, "-m", "edgebench", "convert-and-compare", src, "--out", str(tmp / "o"),
                           "--json", str(tmp / "r.json"), *FAST, *args],
                          capture_output=True, text=True, env=env, timeout=600)
    doc = json.loads((tmp / "r.json").read_text()) if (tmp / "r.json").is_file() else {}
    return proc, doc


@pytest.fixture(scope="module")
def collapsing_model(tmp_path_factory) -> dict[str, Path]:
    import tensorflow as tf

    out = tmp_path_factory.mktemp("collapse")

    class Collapse(tf.Module):
        def __init__(self):
            super().__init__()
            self.w = tf.Variable(tf.random.stateless_uniform([8, 4], seed=[1, 1], minval=0.5, maxval=1.0))

        @tf.function(input_signature=[tf.TensorSpec([None, 8], tf.float32, name="x")])
        def serve(self, x):
            h = tf.matmul(x, self.w)
            return {"tiny": h * 1e-3, "offset": h * 1e-3 + 100.0}

    m = Collapse()
    tf.saved_model.save(m, str(out / "sm"), signatures={"serving_default": m.serve})
    rng = np.random.default_rng(0)
    cal = rng.uniform(0, 1, (64, 8)).astype(np.float32)
    cal[::4] *= 1e5                     # outliers: the INT8 output scale becomes ~1 per level
    np.savez(out / "cal.npz", x=cal)
    np.savez(out / "eval.npz", x=rng.uniform(0, 1, (32, 8)).astype(np.float32))
    return {"sm": out / "sm", "cal": out / "cal.npz", "eval": out / "eval.npz"}


def test_zero_and_constant_outputs_fail_the_gate(collapsing_model, tmp_path):
    proc, doc = _cac(tmp_path, str(collapsing_model["sm"]), "--precision", "fp32,int8",
                     "--data", str(collapsing_model["eval"]), "--calibration-data", str(collapsing_model["cal"]),
                     "--min-size-reduction", "-100")
    assert proc.returncode == 1, proc.stderr[-2000:]
    rows = {r["precision"]: r for r in doc["rows"]}
    assert rows["fp32"]["verdicts"] == []                       # no false alarm on the good model
    kinds = {(v["kind"], v["output"]) for v in rows["int8"]["verdicts"]}
    assert ("zero_output", "tiny") in kinds
    assert ("constant_output", "offset") in kinds
    assert ("constant_output", "tiny") not in kinds            # said once, as the more specific finding
    for v in rows["int8"]["verdicts"]:
        assert v["failed"] and v["message"] and v["advice"]    # what it means and what to try
    failed = [c for c in doc["gate"]["checks"] if not c["passed"]]
    assert {c["metric"] for c in failed} == {"verdict:zero_output", "verdict:constant_output"}
    assert "SILENT" in proc.stdout and "gate failed" in proc.stderr


def test_nan_output_is_a_verdict(tmp_path):
    import tensorflow as tf

    class Log(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([None, 4], tf.float32, name="x")])
        def serve(self, x):
            return {"y": tf.math.log(x)}

    m = Log()
    tf.saved_model.save(m, str(tmp_path / "sm"), signatures={"serving_default": m.serve})
    rng = np.random.default_rng(0)
    np.savez(tmp_path / "cal.npz", x=rng.uniform(0.5, 1, (32, 4)).astype(np.float32))
    np.savez(tmp_path / "eval.npz", x=rng.uniform(-1, 1, (16, 4)).astype(np.float32))
    proc, doc = _cac(tmp_path, str(tmp_path / "sm"), "--precision", "fp32", "--data", str(tmp_path / "eval.npz"),
                     "--calibration-data", str(tmp_path / "cal.npz"), "--min-psnr", "0")
    assert proc.returncode == 1, proc.stderr[-2000:]
    v = [v for v in doc["rows"][0]["verdicts"] if v["kind"] == "nonfinite"]
    assert len(v) == 1 and v[0]["output"] == "y" and v[0]["value"] > 0 and "FP16" in v[0]["advice"]


def test_min_cosine_and_min_delegated_gates(prelu_models, tmp_path):
    proc, doc = _cac(tmp_path, str(prelu_models["savedmodel"]), "--precision", "fp32,int8",
                     "--data", str(prelu_models["data"]), "--min-cosine", "0.9999999", "--min-delegated", "90")
    assert proc.returncode == 1, proc.stderr[-2000:]
    rows = {r["precision"]: r for r in doc["rows"]}
    assert rows["fp32"]["verdicts"] == []
    kinds = {v["kind"] for v in rows["int8"]["verdicts"]}
    assert kinds == {"low_cosine", "low_delegation"}
    checks = {(c["precision"], c["metric"]): c for c in doc["gate"]["checks"]}
    assert checks[("fp32", "cosine")]["passed"] and checks[("fp32", "delegated_pct")]["passed"]
    assert not checks[("int8", "cosine")]["passed"]
    assert checks[("int8", "delegated_pct")]["value"] == pytest.approx(75.0)
    assert "6/8 nodes (75.0%) < min 90%" in proc.stderr
    assert rows["int8"]["delegation"]["undelegated"] == {"PRELU": 2}


def test_verdict_rules_on_arrays():
    rng = np.random.default_rng(0)
    ref = {"a": rng.normal(size=(10, 5)), "b": rng.normal(size=(10, 5))}
    ok = output_verdicts(ref, {k: v + 1e-6 for k, v in ref.items()}, None, min_cosine=0.99)
    assert ok == []
    got = {"a": np.zeros((10, 5)), "b": np.tile(ref["b"][:1], (10, 1))}
    kinds = {(v.kind, v.output) for v in output_verdicts(ref, got, None)}
    assert kinds == {("zero_output", "a"), ("constant_output", "b")}
    few = dict(ref, a=np.where(np.arange(10)[:, None] < 3, 0.0, ref["a"]))   # 3 of 10 samples zero: below half
    assert not [v for v in output_verdicts(ref, few, None) if v.kind == "zero_output"]
    d = {"a": Drift(max_abs=1, mean_abs=1, rmse=1, rel_l2=1, cosine=0.9, cosine_min=0.5, psnr_db=1, nan=0, inf=0)}
    low = output_verdicts({"a": ref["a"]}, {"a": ref["a"] * 0.5 + 1}, d, min_cosine=0.95)
    assert [v.kind for v in low] == ["low_cosine"] and "worst sample 0.5000" in low[0].message
    assert delegation_verdict(Delegation("XNNPACK", 8, 8, 1), 90) == []
    assert delegation_verdict(Delegation("XNNPACK", 8, 6, 3), 90)[0].value == pytest.approx(75.0)
    unknown = delegation_verdict(None, 50)
    assert unknown[0].failed and "needs the delegated node count" in unknown[0].message


def test_gate_file_takes_the_new_thresholds(tmp_path):
    from edgebench.judge.gate import load_gate_file

    f = tmp_path / "gate.yaml"
    f.write_text("default:\n  min_cosine: 0.99\nint8:\n  min_delegated: 95\n")
    g = load_gate_file(f)
    assert g["default"].min_cosine == 0.99 and g["int8"].min_delegated_pct == 95


def test_psnr_that_reads_fine_beside_a_low_cosine_is_warned():
    """Issue 28.8: PSNR 29.7 dB beside cosine 0.31 and 19 % agreement must not look good."""
    from edgebench.rows import Accuracy
    from edgebench.judge.verdicts import metric_disagreement

    acc = Accuracy(output="y", top1_agreement=0.19)
    seen = {"y": Drift.from_dict({"psnr_db": 29.7, "cosine": 0.31, "max_abs": 1.0})}
    w = metric_disagreement(seen, acc)
    assert len(w) == 1 and "PSNR 29.7 dB looks fine, but cosine 0.31 and top-1 agreement 19 %" in w[0]
    assert metric_disagreement({"y": Drift.from_dict({"psnr_db": 45.0, "cosine": 0.999})},
                               Accuracy(output="y", top1_agreement=0.98)) == []
    assert metric_disagreement({"y": Drift.from_dict({"psnr_db": 12.0, "cosine": 0.31})}, acc) == []  # PSNR says it


def test_error_sources_name_the_weights_when_dynamic_range_loses_as_much_as_int8():
    """Issue 28.6: an audio tagger's dynamic ~ int16x8 ~ int8 ~ 31 dB points at the 8-bit weights."""
    from edgebench.judge.outcome import error_sources
    from edgebench.rows import InferenceRow

    def row(p, db, found=None):
        return InferenceRow(target="host", status="ok", model="m", precision=p, precision_found=found or p,
                            drift={"y": Drift.from_dict({"psnr_db": db, "cosine": 0.99})})

    got = error_sources([row("int8", 30.5), row("dynamic", 31.2), row("int16x8", 31.0)])
    assert got["cause"] == "weights" and "8-bit weights cause most" in got["text"]
    got = error_sources([row("int8", 30.0), row("dynamic", 52.0), row("int16x8", 48.0)])
    assert got["cause"] == "activations" and "recover 18.0 dB" in got["text"]
    # a "dynamic" conversion that is an fp32 file isolates nothing; without it only int16x8 speaks
    got = error_sources([row("int8", 30.0), row("dynamic", 140.0, found="fp32")])
    assert got is None
    assert error_sources([row("fp16", 80.0)]) is None
    assert error_sources([row("int8", 55.0), row("dynamic", 60.0)]) is None    # nothing worth explaining


def test_a_slower_quantized_row_says_why():
    """Issue 28.7 / 24.11: int8 slower than fp32 names the ops the delegate left out; int16x8 with
    nothing delegated names the missing 16x8 kernels, not SOFTMAX/SHAPE."""
    from edgebench.judge.outcome import no_integer16_kernels, slower_reason
    from edgebench.rows import InferenceRow, Latency

    def row(p, p50_ms, d):
        lat = Latency.from_samples(np.full(700, int(p50_ms * 1e6), np.int64), what=p)
        return InferenceRow(target="host", status="ok", model="m", precision=p, latency=lat, delegation=d)

    fp32 = row("fp32", 1.0, Delegation("XNNPACK", 13, 13, 1, {}))
    int8 = row("int8", 1.5, Delegation("XNNPACK", 15, 11, 3, {"PRELU": 2, "SOFTMAX": 1}))
    why = slower_reason(int8, fp32)
    assert why.startswith("p50 1.5x slower than fp32 on host: XNNPACK took 11/15 nodes in 3 partition(s) "
                          "(fp32: 13/13 in 1)") and "PRELU x2" in why
    i16 = row("int16x8", 44.0, Delegation("XNNPACK", 13, 0, 0, {"SOFTMAX": 1, "SHAPE": 1, "CONV_2D": 11}))
    assert "has no int16x8 (16-bit activation) kernels: 0/13 nodes" in no_integer16_kernels(i16)
    assert "no int16x8" in slower_reason(i16, fp32)
    assert slower_reason(row("int8", 0.5, fp32.delegation), fp32) is None          # faster: nothing to explain
    same = slower_reason(row("int8", 1.3, fp32.delegation), fp32)
    assert "--op-profile shows which ops" in same
