"""`edgebench bench` end to end (real CLI process, real LiteRT): JSON contract, validity,
side-by-side table, load modes, and exit codes / one-line errors for every bad input."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from edgebench.bench.run import BenchSettings, run_bench
from edgebench.targets.base import RunControl, RunOptions
from edgebench.targets.loop import resolve_targets
from edgebench.core.errors import BadInput
from conftest import make_job
from edgebench.targets.host import HostTarget
from edgebench.bench import load

pytest_plugins = ["conftest_bench"]

EDGEBENCH = str(Path(sys.executable).with_name("edgebench"))
CONTRACT = ("mean", "std", "min", "max", "p50", "p90", "p95", "p99", "samples", "p99_valid", "qps")
FAST = ["--min-time", "0.05", "--warmup-runs", "2"]


def cli(*args, env_extra=None, tmp=None) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    if tmp is not None:
        env["EDGEBENCH_DATA_DIR"] = str(tmp / "data")
        env.setdefault("EDGEBENCH_CACHE_DIR", str(tmp / "cache"))
    env["COLUMNS"] = "200"
    env.update(env_extra or {})
    return subprocess.run([EDGEBENCH, "bench", *map(str, args)], capture_output=True, text=True,
                          env=env, timeout=300)


def _one_line_error(p: subprocess.CompletedProcess) -> str:
    assert "Traceback" not in p.stderr, p.stderr
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert lines and lines[-1].startswith("error:"), p.stderr
    return lines[-1]


def test_default_run_has_valid_p99_and_contract_json(bench_models, tmp_path):
    out = tmp_path / "r.json"
    p = cli(bench_models["int8"], "--json", out, "--no-store", *FAST, tmp=tmp_path)
    assert p.returncode == 0, p.stderr
    doc = json.loads(out.read_text())
    assert doc["schema_version"] >= 1 and doc["kind"] == "bench" and doc["fingerprint"]
    (row,) = doc["rows"]
    lm = row["latency_ms"]
    for k in CONTRACT:
        assert k in lm
    assert lm["samples"] >= 662 and lm["p99_valid"] is True
    assert len(row["samples_ns"]) == lm["samples"]
    assert row["status"] == "ok" and len(row["model_sha256"]) == 64
    for k in ("warmup_ms", "init_ms", "first_inference_ms", "peak_rss_bytes", "threads", "delegate", "runtime", "gflops"):
        assert k in row
    assert row["warmup_ms"]["runs"] == 2
    assert row["gflops"] == pytest.approx(5024 / 1e9)
    assert "p99" in p.stdout and "conv_int8" in p.stdout


def test_runs_100_is_not_valid_and_says_how_many(bench_models, tmp_path):
    out = tmp_path / "r.json"
    p = cli(bench_models["int8"], "--runs", "100", "--json", out, "--no-store", tmp=tmp_path)
    assert p.returncode == 0, p.stderr
    lm = json.loads(out.read_text())["rows"][0]["latency_ms"]
    assert lm["samples"] == 100 and lm["p99_valid"] is False
    assert any("needs >= 662" in w for w in lm["warnings"])
    assert "not valid: 100 < 662" in p.stdout and "662" in p.stdout


def test_side_by_side_and_json_stdout(bench_models, tmp_path):
    p = cli(bench_models["fp32"], bench_models["int8"], "--runs", "30", "--json", "-", "--no-store", tmp=tmp_path)
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert [r["model"] for r in doc["rows"]] == ["conv_fp32", "conv_int8"]
    p = cli(bench_models["fp32"], bench_models["int8"], "--runs", "30", "--no-store", tmp=tmp_path)
    header = next(ln for ln in p.stdout.splitlines() if "metric" in ln)
    assert "conv_fp32" in header and "conv_int8" in header


def test_bad_inputs_exit_2_one_line(bench_models, tmp_path):
    trunc = tmp_path / "t.tflite"
    trunc.write_bytes(bench_models["fp32"].read_bytes()[:2500])
    text = tmp_path / "x.tflite"
    text.write_text("not a model\n" * 10)
    bad_npz = tmp_path / "bad.npz"
    np.savez(bad_npz, image=np.zeros((3, 5, 5, 1), np.float32))
    cases = [
        ((tmp_path / "missing.tflite",), "model not found"),
        ((trunc,), "truncated or corrupt"),
        ((text,), "not a TFLite flatbuffer"),
        ((bench_models["fp32"], "--data", bad_npz), "array 'image' declares"),
        ((bench_models["fp32"], "--delegate", "gpu"), "cannot be applied"),
        ((bench_models["fp32"], "--concurrency", "1,x"), "--concurrency"),
    ]
    for args, needle in cases:
        p = cli(*args, "--runs", "5", "--no-store", tmp=tmp_path)
        assert p.returncode == 2, (args, p.stderr)
        assert needle in _one_line_error(p), (args, p.stderr)


def test_worker_crash_exit_3_and_partial_json(bench_models, tmp_path):
    out = tmp_path / "r.json"
    p = cli(bench_models["fp32"], "--runs", "5", "--json", out, "--no-store", tmp=tmp_path,
            env_extra={"EDGEBENCH_RUNNER_FAULT": "abort"})
    assert p.returncode == 3
    assert "SIGABRT" in _one_line_error(p)
    row = json.loads(out.read_text())["rows"][0]
    assert row["status"] == "failed" and "SIGABRT" in row["error"]


def test_nan_outputs_flagged_in_row(bench_models, tmp_path):
    doc = run_bench(BenchSettings(models=(str(bench_models["nan"]),), run=RunOptions(control=RunControl(runs=20, warmup_runs=1)))).to_dict()
    row = doc["rows"][0]
    assert row["status"] == "ok" and row["nonfinite_outputs"]["y"] > 0
    assert any("NaN/Inf" in w for w in row["warnings"])


def test_load_modes_through_cli(bench_models, tmp_path):
    out = tmp_path / "load.json"
    p = cli(bench_models["fp32"], "--runs", "200", "--concurrency", "1,2", "--server-qps", "400",
            "--sla-p99-ms", "50", "--json", out, "--no-store", tmp=tmp_path)
    assert p.returncode == 0, p.stderr
    row = json.loads(out.read_text())["rows"][0]
    assert [c["level"] for c in row["concurrency"]] == [1, 2]
    assert all(c["qps"] > 0 and c["samples"] >= 200 for c in row["concurrency"])
    s = row["server"]
    assert s["target_qps"] == 400 and s["completed"] == 200 and s["achieved_qps"] > 0
    assert row["sla"]["met"] is True and row["sla"]["max_qps"] > 0 and len(row["sla"]["steps"]) == load.SLA_STEPS
    assert "concurrency" in p.stdout and "server" in p.stdout


def test_sla_unmeetable_says_why(bench_models):
    target = HostTarget()
    job = make_job(str(bench_models["fp32"]), runs=50, warmup_runs=1)
    res = load.sla_search(target, job, p99_ms=1e-6)
    assert res["met"] is False and res["max_qps"] is None and "already exceeds" in res["reason"]


def test_make_targets():
    (t,) = resolve_targets("host", threads=2)
    assert t.name == "host" and t.threads == 2
    with pytest.raises(BadInput, match="not supported"):
        resolve_targets("tpu0")


def test_pct_of_peak_from_cached_peak(bench_models, tmp_path, monkeypatch):
    monkeypatch.setenv("EDGEBENCH_CACHE_DIR", str(tmp_path / "cache"))
    from edgebench.bench import peak
    from edgebench.core.fingerprint import host_fingerprint

    fp = host_fingerprint()
    peak.cache_path().write_text(json.dumps({"peak_gflops": 20.0, "peak_gflops_1thread": 10.0, "cores": 2,
                                             "cpu_model": fp["cpu_model"], "hostname": fp["hostname"]}))
    row = run_bench(BenchSettings(models=(str(bench_models["fp32"]),), run=RunOptions(control=RunControl(runs=50, warmup_runs=1)))).to_dict()["rows"][0]
    assert row["peak_gflops"] == 10.0   # default 1 thread -> single-core peak
    assert row["pct_of_peak"] == pytest.approx(100 * row["achieved_gflops_per_s"] / 10.0)
    p50_s = row["latency_ms"]["p50"] / 1e3
    assert row["achieved_gflops_per_s"] == pytest.approx(5024 / p50_s / 1e9)


def test_peak_measured_cached_and_reloaded(tmp_path, monkeypatch):
    monkeypatch.setenv("EDGEBENCH_CACHE_DIR", str(tmp_path / "cache"))
    from edgebench.bench import peak

    assert peak.load_cached() is None
    doc = peak.measure_peak(n=256, repeats=2)
    assert doc["peak_gflops"] > 0 and doc["peak_gflops_1thread"] > 0
    assert doc["peak_gflops"] >= doc["peak_gflops_1thread"]
    assert peak.load_cached()["peak_gflops"] == doc["peak_gflops"]
    assert peak.peak_for_threads(doc, 1) == doc["peak_gflops_1thread"]
    assert peak.peak_for_threads(doc, None) == doc["peak_gflops"]


def test_render_bench_is_pure_and_flags_invalid_p99():
    from rich.console import Console

    from edgebench.report.terminal.bench import render_bench
    from edgebench.rows import Latency

    lm = Latency.from_samples(np.arange(1, 101) * 1_000_000).to_dict()
    doc = {"rows": [
        {"model": "a", "target": "host", "status": "ok", "latency_ms": lm, "threads_effective": 1,
         "delegate": "xnnpack", "warnings": ["w1"], "pct_of_peak": 12.5, "size_bytes": 3 * 2**20},
        {"model": "b", "target": "host", "status": "failed", "error": "boom", "delegate": "xnnpack"},
    ]}
    con = Console(record=True, width=200)
    for part in render_bench(doc):
        con.print(part)
    text = con.export_text()
    assert "99.01 (not valid: 100 < 662)" in text
    assert "50.5" in text and "12.5%" in text and "3.00 MiB" in text
    assert "FAILED (b @ host): boom" in text and "warning (a): w1" in text


def test_repeats_are_separate_processes_and_compare_uses_them(bench_models, tmp_path):
    """Audit W4: significance from run-level replicates (worker processes), and the comparison
    says which basis it used."""
    db = tmp_path / "r.db"
    ids = []
    for i in range(2):
        out = tmp_path / f"r{i}.json"
        p = cli(bench_models["int8"], "--repeats", "3", "--json", out, "--db", db, *FAST, tmp=tmp_path)
        assert p.returncode == 0, p.stderr
        (row,) = json.loads(out.read_text())["rows"]
        reps = row["repeats"]
        assert [r["process"] for r in reps] == [1, 2, 3] and len({r["pid"] for r in reps}) == 3
        assert sum(r["samples"] for r in reps) == row["latency_ms"]["samples"] == len(row["samples_ns"])
        assert any(w.startswith("run-to-run: p50 across 3 worker processes") for w in row["warnings"])
        ids.append(json.loads(out.read_text())["run_id"])
    env = dict(os.environ, EDGEBENCH_DATA_DIR=str(tmp_path / "data"))
    p = subprocess.run([EDGEBENCH, "results", "compare", ids[0], ids[1], "--db", str(db), "--json", "-"],
                       capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 0, p.stderr
    (pair,) = json.loads(p.stdout)["rows"]
    assert pair["repeats"] == [3, 3] and pair["basis"] == ["repeats"]
    p50 = next(c for c in pair["changes"] if c["metric"] == "p50 ms")
    assert p50["basis"] == "repeats" and p50["p_runs"] is not None and p50["test"] == "Mann-Whitney U"
    p = cli(bench_models["int8"], "--repeats", "0", "--no-store", tmp=tmp_path)
    assert p.returncode == 2 and "--repeats 0: must be >= 1" in _one_line_error(p)


def test_render_server_backlog_as_lower_bound():
    """Audit W10: an overloaded run's percentiles are lower bounds and print as "> x"."""
    from rich.console import Console

    from edgebench.report.terminal.bench import render_bench
    from edgebench.rows import Latency

    lm = Latency.from_samples(np.arange(1, 1001) * 1_000_000).to_dict()
    server = {"target_qps": 5000.0, "achieved_qps": 800.0, "workers": 1, "p50_ms": 250.0, "p99_ms": 480.0,
              "samples": 1000, "p99_valid": True, "overloaded": True, "latency_lower_bound": True}
    doc = {"rows": [{"model": "a", "target": "host", "status": "ok", "latency_ms": lm, "server": server,
                     "delegate": "xnnpack"}]}
    con = Console(record=True, width=200)
    for part in render_bench(doc):
        con.print(part)
    text = con.export_text()
    assert "> 250" in text and "> 480" in text
    assert "p99 LoadGen bound ms" in text and "MAD ms" in text
