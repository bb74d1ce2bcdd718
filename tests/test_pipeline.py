"""convert-and-compare and compare end to end: real TF, real LiteRT, real worker processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from xml.etree import ElementTree as ET

import numpy as np
import pytest

pytest_plugins = ["conftest_bench"]


@pytest.fixture(scope="module")
def cac_digits(tmp_path_factory, digits_model):
    """One full default run (all precisions, >= 662 samples per row) through the real console script."""
    out = tmp_path_factory.mktemp("cac")
    env = dict(os.environ, COLUMNS="200", GITHUB_STEP_SUMMARY=str(out / "summary.md"))
    proc = subprocess.run(
        [sys.executable, "-m", "edgebench", "convert-and-compare", "digits", "--max-accuracy-drop", "1.0",
         "--out", str(out / "o"), "--json", str(out / "r.json"), "--junit", str(out / "junit.xml"),
         "--markdown", str(out / "pr.md")],
        capture_output=True, text=True, env=env, timeout=600)
    return out, proc


def test_digits_passes_the_accuracy_gate(cac_digits):
    out, proc = cac_digits
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr and "I0000" not in proc.stderr
    doc = json.loads((out / "r.json").read_text())
    assert doc["schema_version"] == 2 and doc["kind"] == "compare"
    rows = {r["precision"]: r for r in doc["rows"]}
    assert set(rows) == {"fp32", "fp16", "int8", "dynamic"}
    ref_top1 = doc["reference"]["accuracy"]["top1"]
    assert ref_top1 >= 0.97                                   # real digits test split
    for prec, r in rows.items():
        assert r["status"] == "ok", r.get("error")
        lat = r["latency_ms"]
        assert {"mean", "std", "min", "max", "p50", "p90", "p95", "p99", "samples", "p99_valid", "qps"} <= set(lat)
        assert lat["samples"] >= 662 and lat["p99_valid"] is True and len(r["samples_ns"]) == lat["samples"]
        assert r["accuracy"]["top1_drop_pp"] <= 1.0
        assert len(r["model_sha256"]) == 64
        assert r["extra"].get("prestarted") is True       # its worker was started during the TF import
    assert rows["int8"]["size_reduction_pct"] >= 70
    assert rows["fp32"]["worst"]["psnr_db"] == "inf" or rows["fp32"]["worst"]["psnr_db"] > 80
    assert doc["inputs"]["samples"] == 360 and len(doc["inputs"]["sha256"]) == 64
    assert doc["gate"]["passed"] is True and len(doc["gate"]["checks"]) == 4
    assert doc["fingerprint"]["tensorflow"] and doc.get("run_id")     # stored
    assert "digits" in proc.stdout and "int8" in proc.stdout


def test_junit_markdown_and_step_summary(cac_digits):
    out, _ = cac_digits
    root = ET.parse(out / "junit.xml").getroot()
    cases = root.find("testsuite").findall("testcase")
    assert len(cases) == 4 and all(c.find("failure") is None for c in cases)
    md = (out / "pr.md").read_text()
    assert "| " in md and "int8" in md
    assert (out / "summary.md").read_text().strip() == md.strip()


def test_same_inputs_bytes_fed_to_every_target(cac_digits):
    out, _ = cac_digits
    doc = json.loads((out / "r.json").read_text())
    import hashlib

    assert hashlib.sha256(Path(doc["inputs"]["path"]).read_bytes()).hexdigest() == doc["inputs"]["sha256"]


def test_impossible_threshold_exits_1_with_precise_message(run_cli, tmp_path, digits_model):
    code, out, err = run_cli("convert-and-compare", "digits", "-p", "fp32,int8", "--runs", "20",
                             "--min-psnr", "500", "--out", str(tmp_path), "--no-store")
    assert code == 1, err
    assert "gate failed" in err and "int8 on host: worst-output PSNR" in err and "< min 500 dB" in err


def test_accuracy_gate_without_labels_is_bad_input(run_cli, tmp_path, digits_model):
    x = np.load(digits_model.evaluation_npz)["image"][:20]
    np.savez(tmp_path / "nolabels.npz", image=x)
    code, _, err = run_cli("convert-and-compare", "digits", "-p", "int8", "--data", str(tmp_path / "nolabels.npz"),
                           "--max-accuracy-drop", "1", "--out", str(tmp_path / "o"), "--no-store")
    assert code == 2 and "needs labelled data" in err


def test_wrong_label_length_is_bad_input(run_cli, tmp_path, digits_model):
    x = np.load(digits_model.evaluation_npz)["image"][:20]
    np.savez(tmp_path / "badlabels.npz", image=x, labels=np.zeros(7, np.int64))
    code, _, err = run_cli("convert-and-compare", "digits", "--data", str(tmp_path / "badlabels.npz"),
                           "--out", str(tmp_path / "o"), "--no-store")
    assert code == 2 and "7 labels for 20 samples" in err


def test_failing_target_rows_say_failed_and_results_are_kept(run_cli, tmp_path, digits_model, monkeypatch):
    monkeypatch.setenv("EDGEBENCH_RUNNER_FAULT", "abort")
    code, _, err = run_cli("convert-and-compare", "digits", "-p", "fp32,int8", "--runs", "20",
                           "--out", str(tmp_path / "o"), "--json", str(tmp_path / "r.json"))
    assert code == 3, err
    doc = json.loads((tmp_path / "r.json").read_text())
    assert all(r["status"] == "failed" and r["error"] for r in doc["rows"])
    assert doc["reference"]["status"] == "ok" and doc.get("run_id")


def test_multi_io_model_with_synthetic_data_drift_only(run_cli, tmp_path, small_savedmodels):
    code, out, err = run_cli("convert-and-compare", str(small_savedmodels["multi"]), "--data", "synthetic",
                             "--samples", "30", "--runs", "30", "--out", str(tmp_path), "--json", "-", "--no-store")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["inputs"]["synthetic"] is True
    for r in doc["rows"]:
        assert set(r["drift"]) == {"logits", "embedding"}
        assert r["latency_ms"]["p99_valid"] is False         # 30 runs < 662
    assert "synthetic" in err.lower()


def test_repeats_give_convert_and_compare_rows_run_level_replicates(run_cli, tmp_path, small_savedmodels):
    """--repeats on convert-and-compare: each precision x target in N worker processes (samples
    pooled, one summary per process), so `results compare` of two such runs tests changes against
    run-to-run noise (basis "repeats") instead of giving no verdict."""
    db, ids = tmp_path / "r.db", []
    for i in range(2):
        code, out, err = run_cli("convert-and-compare", str(small_savedmodels["multi"]), "-p", "fp32,fp16",
                                 "--data", "synthetic", "--samples", "10", "--runs", "40", "--repeats", "3",
                                 "--out", str(tmp_path / f"o{i}"), "--json", str(tmp_path / f"r{i}.json"),
                                 "--db", str(db))
        assert code == 0, err
        doc = json.loads((tmp_path / f"r{i}.json").read_text())
        for r in doc["rows"]:
            assert [p["process"] for p in r["repeats"]] == [1, 2, 3] and len({p["pid"] for p in r["repeats"]}) == 3
            assert r["latency_ms"]["samples"] == 120 == sum(p["samples"] for p in r["repeats"])
            assert any(w.startswith("run-to-run: p50 across 3 worker processes") for w in r["warnings"])
            assert r["drift"]                                   # outputs from the first process
        ids.append(doc["run_id"])
    code, out, err = run_cli("results", "compare", ids[0], ids[1], "--db", str(db), "--json", "-")
    assert code == 0, err
    pairs = json.loads(out)["rows"]
    compared = [p for p in pairs if p.get("repeats") == [3, 3]]
    assert len(compared) == 2 and all("repeats" in p["basis"] for p in compared)
    for p in compared:   # p90/p99 from 40 samples per process are not valid per process: those use the samples
        p50 = next(c for c in p["changes"] if c["metric"] == "p50 ms")
        assert p50["basis"] == "repeats" and p50["p_runs"] is not None
    code, _, err = run_cli("convert-and-compare", str(small_savedmodels["multi"]), "--data", "synthetic",
                           "--repeats", "0", "--no-store")
    assert code == 2 and "--repeats 0: must be >= 1" in err


def test_compare_two_tflite_files(run_cli, tmp_path, digits_model):
    code, out, err = run_cli("convert", "digits", "-p", "fp32,int8", "--out", str(tmp_path), "--json", "-")
    m = json.loads(out)
    a, b = m["variants"]["fp32"]["path"], m["variants"]["int8"]["path"]
    code, out, err = run_cli("compare", a, b, "--data", str(digits_model.evaluation_npz), "--json", "-", "--no-store")
    assert code == 0, err
    doc = json.loads(out)
    ref, other = doc["rows"]
    assert ref["role"] == "reference" and other["accuracy"]["top1_agreement"] > 0.95
    assert other["worst"]["psnr_db"] > 20
    code, out, err = run_cli("compare", str(digits_model.saved_model_dir), b, "--data",
                             str(digits_model.evaluation_npz), "--json", "-", "--no-store")
    assert code == 0, err
    assert json.loads(out)["rows"][0]["target"] == "tf"


def test_nan_outputs_are_loud_and_fail_without_a_gate(run_cli, tmp_path):
    """Issue 18.4: an all-NaN model showed max_abs 0, PSNR inf, 100% agreement and exit 0."""
    import tensorflow as tf

    class Ref(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([None, 4], tf.float32, name="x")])
        def serve(self, x):
            return {"y": tf.nn.softmax(x * 3.0)}

    class Broken(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([1, 4], tf.float32, name="x")])
        def serve(self, x):
            return {"y": tf.math.log(-tf.abs(x) - 1.0)}        # NaN everywhere

    ref = Ref()
    tf.saved_model.save(ref, str(tmp_path / "ref"), signatures={"serving_default": ref.serve})
    br = Broken()
    conv = tf.lite.TFLiteConverter.from_concrete_functions([br.serve.get_concrete_function()], br)
    (tmp_path / "nan.tflite").write_bytes(conv.convert())
    code, out, err = run_cli("compare", str(tmp_path / "ref"), str(tmp_path / "nan.tflite"), "--data", "synthetic",
                             "--samples", "12", "--json", str(tmp_path / "r.json"), "--no-store")
    assert code == 1, err
    assert "NaN/Inf" in err and "always fail" in err
    doc = json.loads((tmp_path / "r.json").read_text())
    got = doc["rows"][1]
    assert got["drift"]["y"]["nan"] == 48
    assert got["drift"]["y"]["max_abs"] is None and got["drift"]["y"]["psnr_db"] is None
    assert got["worst"]["psnr_db"] is None and got["accuracy"]["top1_agreement"] == 0.0
    assert "n/a" in out and "NaN/Inf x48" in out


def test_ctrl_c_keeps_the_rows_already_measured(run_cli, tmp_path, digits_model, monkeypatch):
    """Ctrl-C arriving during the third host run: rows 1-2 (real runs) are written and stored, exit 130."""
    from edgebench.targets.host import HostTarget

    real_run = HostTarget.run
    calls = []

    def run_then_interrupt(self, job):
        calls.append(job.model_path)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real_run(self, job)

    monkeypatch.setattr(HostTarget, "run", run_then_interrupt)
    code, _, err = run_cli("convert-and-compare", "digits", "--runs", "20", "--out", str(tmp_path / "o"),
                           "--json", str(tmp_path / "r.json"))
    assert code == 130 and "2 of 4 rows were measured and kept" in err
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["interrupted"] is True and doc.get("run_id")
    assert [r["status"] for r in doc["rows"]] == ["ok", "ok", "failed", "failed"]
    assert len(calls) == 3                        # nothing ran after the interrupt


def test_a_row_never_carries_another_files_sha256(run_cli, tmp_path, small_savedmodels, monkeypatch):
    """18.1: when another run replaces a converted file before it is measured, the row does not
    pass off the other file's numbers under this run's size and conversion facts."""
    import shutil

    from edgebench.targets.host import HostTarget

    real_run = HostTarget.run

    def replaced_then_run(self, job):
        if job.model_path.endswith("_fp16.tflite"):
            shutil.copy(job.model_path.replace("_fp16", "_fp32"), job.model_path)   # "another run" wrote it
        return real_run(self, job)

    monkeypatch.setattr(HostTarget, "run", replaced_then_run)
    code, out, err = run_cli("convert-and-compare", str(small_savedmodels["multi"]), "-p", "fp32,fp16", "--data",
                             "synthetic", "--samples", "10", "--runs", "10", "--out", str(tmp_path / "o"),
                             "--json", "-", "--no-store")
    assert code == 2, err
    rows = {r["precision"]: r for r in json.loads(out)["rows"]}
    assert rows["fp32"]["status"] == "ok"
    bad = rows["fp16"]
    assert bad["status"] == "failed" and "is not the one this run converted" in bad["error"]
    assert "give each run its own --out" in bad["error"] and bad["latency_ms"] is None
    assert json.loads(out)["inputs"]["path"].endswith(".npz") and "/inputs-" in json.loads(out)["inputs"]["path"]


def test_calibration_data_of_another_dtype_or_range(run_cli, tmp_path, small_savedmodels):
    """18.3: integer data for a float input is refused before converting; calibration values on
    another scale than the evaluation values are named under the table and in the JSON."""
    rng = np.random.default_rng(0)
    ev = {k: rng.uniform(0, 1, (20, 6)).astype(np.float32) for k in ("a", "b")}
    np.savez(tmp_path / "eval.npz", **ev)
    np.savez(tmp_path / "int.npz", **{k: rng.integers(0, 256, (20, 6)) for k in ("a", "b")})
    np.savez(tmp_path / "x255.npz", **{k: (v * 255).astype(np.float32) for k, v in ev.items()})
    src = str(small_savedmodels["multi"])
    code, _, err = run_cli("convert-and-compare", src, "-p", "int8", "--data", str(tmp_path / "eval.npz"),
                           "--calibration-data", str(tmp_path / "int.npz"), "--out", str(tmp_path / "o1"), "--no-store")
    assert code == 2 and "is float32 but the data is int64" in err and not (tmp_path / "o1" / "manifest.json").exists()
    code, out, err = run_cli("convert-and-compare", src, "-p", "int8", "--data", str(tmp_path / "eval.npz"),
                             "--calibration-data", str(tmp_path / "x255.npz"), "--runs", "10",
                             "--out", str(tmp_path / "o2"), "--no-store", "--verbose")
    assert code == 0, err
    assert "warning (data): input 'a': calibration values span" in out and "spans differ" in out
    code, out, err = run_cli("convert-and-compare", src, "-p", "int8", "--data", str(tmp_path / "eval.npz"),
                             "--runs", "10", "--out", str(tmp_path / "o3"), "--json", "-", "--no-store")
    assert code == 0, err
    assert json.loads(out)["data_warnings"] == []


def test_rows_carry_the_precision_asked_for_and_the_one_found(run_cli, tmp_path, small_savedmodels, bench_models):
    """Issue 24.2/24.14: a tiny model's "dynamic" conversion keeps float weights (below the
    converter's size threshold): the row says dynamic was asked, fp32 found, in the table and the
    JSON; a bench row carries the precision its file has (it was null)."""
    code, out, err = run_cli("convert-and-compare", str(small_savedmodels["multi"]), "-p", "fp32,dynamic",
                             "--data", "synthetic", "--runs", "20", "--out", str(tmp_path / "o"), "--no-store",
                             "--json", str(tmp_path / "r.json"))
    assert code == 0, err
    rows = {r["precision"]: r for r in json.loads((tmp_path / "r.json").read_text())["rows"]}
    assert rows["fp32"]["precision_found"] == "fp32"
    assert rows["dynamic"]["precision_found"] == "fp32"
    assert "dynamic (fp32 file)" in out
    code, out, err = run_cli("bench", str(bench_models["int8"]), "--runs", "20", "--no-store", "--json", "-")
    assert code == 0, err
    (row,) = json.loads(out)["rows"]
    assert row["precision"] == "int8" and row["precision_found"] == "int8"
