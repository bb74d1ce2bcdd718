"""llm-bench end to end with LiteRT-LM's real engine (the [llm] extra) on the committed tiny bundles
(tests/fixtures/llm, built by scripts/build_tiny_litertlm.py): rows with 3 processes, every number
positive with an interval, a prompt over the context as a failed row naming the limit, a bundle the
engine misreads as a failed row naming the fix, fp32 vs int8 side by side and in `results compare`,
and the device path through the simulated adb device with the LiteRT-LM binary's stand-in."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import require_extra
from edgebench.judge.undecided import REASONS

pytestmark = pytest.mark.extras
pytest_plugins = ["conftest_adb"]

FIX = Path(__file__).parent / "fixtures" / "llm"
F32, Q8, BAD = (str(FIX / f"tiny-llama-{n}.litertlm") for n in ("f32", "q8", "bad-kv"))
EDGEBENCH = str(Path(sys.executable).with_name("edgebench"))


@pytest.fixture(scope="module", autouse=True)
def _litert_lm():
    require_extra("litert_lm", "llm")


def cli(tmp: Path, *args: str, env_extra: dict | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "COLUMNS": "200", "EDGEBENCH_DATA_DIR": str(tmp / "data"),
           **(env_extra or {})}
    return subprocess.run([EDGEBENCH, *args], capture_output=True, text=True, env=env, timeout=600,
                          stdin=subprocess.DEVNULL)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Two stored runs: the fp32 bundle at 64+16 and 300+16 tokens, the int8 bundle at 64+16; 3 processes each."""
    tmp = tmp_path_factory.mktemp("llm")
    db = str(tmp / "r.db")
    out = {}
    for key, bundle, prefill in (("fp32", F32, "64,300"), ("int8", Q8, "64")):
        path = tmp / f"{key}.json"
        p = cli(tmp, "llm-bench", bundle, "--prefill", prefill, "--decode", "16", "--repeats", "3", "--threads", "1",
                "--db", db, "--json", str(path))
        out[key] = (p, json.loads(path.read_text()))
    return tmp, db, out


def test_rows_with_three_processes_all_positive_and_an_interval_per_metric(runs):
    _tmp, _db, out = runs
    p, doc = out["int8"]
    assert p.returncode == 0, p.stderr
    assert doc["kind"] == "llm-bench" and doc["run_id"]
    (row,) = doc["rows"]
    assert row["status"] == "ok" and row["precision"] == "dynamic" and row["model"] == "tiny-llama"
    assert row["model_sha256"] == doc["bundles"][0]["sha256"] and row["llm"]["context_tokens"] == 256
    assert len(row["repeats"]) == 3
    for rec in row["repeats"]:
        for k in ("init_ms", "ttft_ms", "prefill_tok_s", "decode_tok_s", "peak_rss_bytes"):
            assert rec[k] > 0, (k, rec)
        assert (rec["prefill_tokens"], rec["decode_tokens"]) == (64, 16)
    for k, s in row["llm"]["stats"].items():
        assert len(s["values"]) == 3 and s["lo"] <= s["median"] <= s["hi"], k
        assert s["level"] == pytest.approx(0.75)
    assert row["llm"]["warmup"] == 1 and row["llm"]["warmup_stats"]["decode_tok_s"]["median"] > 0
    assert row["llm"]["weight_cache"] == "disk" and row["threads"] == 1
    from importlib.metadata import version
    assert row["llm"]["engine_version"] == version("litert-lm-api") and row["runtime"].endswith(version("litert-lm-api"))
    assert row["memory"]["load_and_run_peak_rss_bytes"] > row["memory"]["rss_before_engine_bytes"] > 0
    assert "TTFT ms" in p.stdout and "decode tok/s" in p.stdout and "[" in p.stdout


def test_prompt_over_the_context_is_a_failed_row_naming_the_limit(runs):
    _tmp, _db, out = runs
    p, doc = out["fp32"]
    ok, over = doc["rows"]
    assert ok["status"] == "ok" and ok["llm"]["prefill_tokens"] == 64
    assert over["status"] == "failed" and over["exit_code"] == 2
    assert over["error"].startswith("prefill 300 tokens > the bundle's context 256")
    assert all(over.get(k) is None for k in ("repeats", "memory")) and over["llm"]["stats"] == {}
    assert p.returncode == 2                      # stored and shown first, then the README's exit code
    assert p.stderr.strip().splitlines()[-1].startswith("error: prefill 300 tokens > the bundle's context 256")
    assert "Traceback" not in p.stderr


def test_fp32_and_int8_runs_compare_in_results_compare(runs):
    tmp, db, out = runs
    a, b = out["fp32"][1]["run_id"], out["int8"][1]["run_id"]
    path = tmp / "cmp.json"
    p = cli(tmp, "results", "compare", a, b, "--db", db, "--json", str(path))
    assert p.returncode == 0, p.stderr
    pairs = json.loads(path.read_text())["rows"]
    (pair,) = pairs                                           # 64+16 pairs across the precisions; 300+16 has none
    assert pair["key"] == ["tiny-llama", "dynamic", "host", 64, 16]
    assert {"field": "precision", "a": "fp32", "b": "dynamic"} in pair["config_diff"]
    ch = {c["metric"]: c for c in pair["changes"]}
    for m in ("TTFT ms", "prefill tok/s", "decode tok/s", "init ms"):
        assert ch[m]["basis"] == "repeats" and ch[m]["ratio"] > 0 and ch[m]["verdict"] in (
            "better", "worse", "same", "cannot judge"), ch[m]
        assert ch[m]["verdict"] != "cannot judge" or ch[m]["reason"] in REASONS, ch[m]
        assert ch[m]["ci"] is not None
    assert ch["size"]["verdict"] == "better"
    assert "CONFIGURATION DIFFERS" in p.stdout or "precision" in p.stdout


def test_side_by_side_precisions_with_greedy_token_agreement(tmp_path):
    out = tmp_path / "both.json"
    p = cli(tmp_path, "llm-bench", F32, Q8, "--prefill", "32", "--decode", "24", "--repeats", "1", "--no-store",
            "--json", str(out), "--weight-cache", "none")
    assert p.returncode == 0, p.stderr
    doc = json.loads(out.read_text())
    f32, q8 = doc["rows"]
    assert (f32["precision"], q8["precision"]) == ("fp32", "dynamic") and f32["model"] == q8["model"]
    ag = q8["llm"]["agreement"]
    assert ag["reference"].startswith("tiny-llama-f32") and ag["compared"] == 24 == ag["lengths"][0]
    assert ag["first_divergence"] is None or 0 <= ag["first_divergence"] <= 24
    assert ag["same_prefix"] == (24 if ag["first_divergence"] is None else ag["first_divergence"])
    (pair,) = doc["comparison"]["pairs"]
    assert pair["candidate"] == "dynamic" and pair["reference"] == "fp32"
    assert pair["size_ratio"] == pytest.approx(os.path.getsize(F32) / os.path.getsize(Q8))
    assert {s["metric"] for s in pair["speedups"]} == {"decode_tok_s", "prefill_tok_s", "ttft_ms", "init_ms"}
    assert "precisions side by side" in p.stdout and "dynamic vs fp32" in p.stdout


def test_a_bundle_the_engine_misreads_fails_naming_the_export_fix(tmp_path):
    out = tmp_path / "bad.json"
    p = cli(tmp_path, "llm-bench", BAD, "--prefill", "16", "--decode", "8", "--repeats", "2", "--no-store",
            "--json", str(out))
    assert p.returncode == 2
    (row,) = json.loads(out.read_text())["rows"]
    assert row["status"] == "failed" and row["exit_code"] == 2 and len(row["repeats"]) == 1
    assert "INVALID_ARGUMENT" in row["error"] and "reads a context of 1 token(s)" in row["error"]
    assert "KV_LAYOUT_TRANSPOSED" in row["error"] and row["repeats"][0]["decode_tok_s"] == 0.0


def test_device_path_through_the_simulated_phone(make_sim, tmp_path):
    from edgebench.targets.sim import litert_lm_standin

    dev = make_sim(has_python=False)
    binary = litert_lm_standin.install(str(tmp_path / "litert_lm_advanced_main"), sys.executable)
    out = tmp_path / "dev.json"
    p = cli(tmp_path, "llm-bench", F32, "--target", f"adb:{dev.serial}", "--llm-binary", binary, "--prefill",
            "32,300", "--decode", "8", "--repeats", "2", "--no-store", "--json", str(out))
    assert p.returncode == 2, p.stderr
    doc = json.loads(out.read_text())
    row, over = doc["rows"]
    assert row["status"] == "ok" and row["target"] == f"adb:{dev.serial}" and len(row["repeats"]) == 2
    assert all(r["decode_tok_s"] > 0 and r["prefill_tok_s"] > 0 and r["peak_rss_bytes"] > 0 for r in row["repeats"])
    assert "litert_lm_advanced_main" in row["llm"]["source"] and row["device_model"].endswith("(emulated)")
    assert any("emulated device" in w for w in row["warnings"])
    assert over["status"] == "failed" and over["error"].startswith("prefill 300 tokens > the bundle's context 256")
    assert sum(p.endswith(".litertlm") for p in dev.pushes) == 1      # pushed once, cached by content
    assert any("files/" in p and not p.endswith(".litertlm") for p in dev.pushes)   # ... and the binary
    assert not list((dev.root / "data/local/tmp/edgebench").glob("llm-*"))    # the run folder is cleaned up


COUNT, COUNT_Q8, PLANTED = (str(FIX / f"tiny-count-{n}.litertlm") for n in ("f32", "q8", "planted-f32"))


def test_token_agreement_finds_the_planted_divergence_at_its_position(tmp_path):
    """scripts/build_counting_litertlm.py: greedy output walks a cycle through the vocabulary (no
    repeats); the planted twin's LM head swaps two rows so decode position 6 differs; the int8 bundle
    keeps every argmax. The agreement must say exactly that."""
    out = tmp_path / "count.json"
    p = cli(tmp_path, "llm-bench", COUNT, PLANTED, COUNT_Q8, "--name", "tiny-count", "--prefill", "32",
            "--decode", "24", "--repeats", "1", "--no-store", "--json", str(out), "--weight-cache", "none")
    assert p.returncode == 0, p.stderr
    doc = json.loads(out.read_text())
    ref, planted, q8 = doc["rows"]
    assert doc["comparison"]["reference"]["bundle"].endswith("tiny-count-f32.litertlm")
    assert ref["llm"].get("agreement") is None
    ag = planted["llm"]["agreement"]
    assert ag["first_divergence"] == 6 and ag["same_prefix"] == 6 and ag["compared"] == 24, ag
    assert ag["agree"] < 24 and ag["lengths"] == [24, 24]
    full = q8["llm"]["agreement"]
    assert full["first_divergence"] is None and full["same_prefix"] == full["agree"] == full["compared"] == 24, full
    assert full["agreement"] == 1.0


def test_context_sweep_gives_a_curve_with_intervals_per_depth(tmp_path):
    """--context 16,96,224: one row per depth with 3 processes, intervals, a curve table; TTFT (the
    prefill turn) grows with depth -- compared shallowest against deepest, 14x the tokens, so a busy
    shared machine cannot turn it around."""
    import time

    out = tmp_path / "curve.json"
    began = time.monotonic()
    p = cli(tmp_path, "llm-bench", F32, "--context", "16,96,224", "--decode", "16", "--repeats", "3", "--threads",
            "1", "--no-store", "--json", str(out))
    cost = time.monotonic() - began
    assert p.returncode == 0, p.stderr
    doc = json.loads(out.read_text())
    assert doc["settings"]["context"] == [16, 96, 224] and doc["settings"]["prefill"] == [16, 96, 224]
    rows = doc["rows"]
    assert [r["llm"]["prefill_tokens"] for r in rows] == [16, 96, 224]
    for r in rows:
        assert r["status"] == "ok" and len(r["repeats"]) == 3
        for k in ("ttft_ms", "prefill_tok_s", "decode_tok_s", "peak_rss_bytes"):
            s = r["llm"]["stats"][k]
            assert len(s["values"]) == 3 and 0 < s["lo"] <= s["median"] <= s["hi"], (k, s)
    ttft = [r["llm"]["stats"]["ttft_ms"]["median"] for r in rows]
    assert ttft[2] > ttft[0], ttft
    assert "context curve" in p.stdout and "224+16" in p.stdout and "decode vs first" in p.stdout
    from edgebench.report.html import _llm_section
    from edgebench.report.terminal._cells import as_document
    html = _llm_section([({}, as_document(doc))])
    assert "Context curve" in html and "224+16" in html and "decode vs first" in html
    print(f"sweep cost {cost:.1f} s; TTFT ms {ttft}; decode tok/s "
          f"{[r['llm']['stats']['decode_tok_s']['median'] for r in rows]}; prefill tok/s "
          f"{[r['llm']['stats']['prefill_tok_s']['median'] for r in rows]}")


def test_two_context_sweeps_pair_depth_by_depth_in_results_compare(tmp_path):
    db = str(tmp_path / "c.db")
    ids = []
    for bundle in (F32, Q8):
        path = tmp_path / f"{Path(bundle).stem}.json"
        p = cli(tmp_path, "llm-bench", bundle, "--context", "16,96", "--decode", "8", "--repeats", "3", "--threads",
                "1", "--db", db, "--json", str(path))
        assert p.returncode == 0, p.stderr
        ids.append(json.loads(path.read_text())["run_id"])
    out = tmp_path / "cmp.json"
    p = cli(tmp_path, "results", "compare", *ids, "--db", db, "--json", str(out))
    assert p.returncode == 0, p.stderr
    pairs = json.loads(out.read_text())["rows"]
    assert sorted(pr["key"][3] for pr in pairs) == [16, 96]
    for pr in pairs:
        ch = {c["metric"]: c for c in pr["changes"]}
        assert ch["TTFT ms"]["basis"] == "repeats" and ch["decode tok/s"]["ci"] is not None
