"""llm-bench's engine-option axes with LiteRT-LM's real engine: `--activation fp32,fp16` gives rows per
value with the greedy token agreement against the first value; `--speculative off,on` on a tiny bundle
without a drafter gives ok "off" rows and failed "on" rows that say why (exit 2); the single-value
behaviour is unchanged; the collapse warning fires below half the tokens agreeing."""
from __future__ import annotations

import json

import pytest

from conftest import require_extra
from edgebench.llm.compare import COLLAPSE_BELOW, collapse_warning
from edgebench.rows import Agreement
from test_llm_bench import COUNT, F32, cli


@pytest.fixture()
def _litert_lm():
    require_extra("litert_lm", "llm")


def test_collapse_warning_below_half_the_tokens_agreeing():
    ref = [f"t{i}" for i in range(10)]
    soup = ref[:2] + ["x"] * 8                            # "token soup" after two tokens
    ag = Agreement.between("m (activation fp32)", ref, soup)
    assert ag.rate == pytest.approx(0.2) and ag.rate < COLLAPSE_BELOW
    (w,) = collapse_warning(ag, "activation fp16", "activation fp32")
    assert "activation fp16 collapses the output: 2 of 10" in w and "first divergence at token 2" in w
    half = Agreement.between("m", ref, ref[:5] + ["x"] * 5)
    assert half.rate == 0.5 and collapse_warning(half, "activation fp16", "activation fp32") == ()


@pytest.mark.extras
@pytest.mark.usefixtures("_litert_lm")
def test_activation_axis_gives_rows_per_value_with_token_agreement(tmp_path):
    out = tmp_path / "act.json"
    p = cli(tmp_path, "llm-bench", COUNT, F32, "--prefill", "32", "--decode", "12", "--repeats", "1", "--no-store",
            "--activation", "fp32,fp16", "--json", str(out), "--weight-cache", "none")
    assert p.returncode == 0, p.stderr
    doc = json.loads(out.read_text())
    rows = doc["rows"]
    assert [(r["model"], r["llm"]["activation"]) for r in rows] == [
        ("tiny-count", "fp32"), ("tiny-llama", "fp32"), ("tiny-count", "fp16"), ("tiny-llama", "fp16")]
    assert all(r["status"] == "ok" and r["llm"]["stats"]["decode_tok_s"]["median"] > 0 for r in rows)
    for r in rows[:2]:
        assert "option_agreement" not in r["llm"]                    # the first value is the reference
    for r in rows[2:]:
        ag = r["llm"]["option_agreement"]
        assert ag["reference"].endswith("(activation fp32)") and ag["compared"] == 12
        assert ag["same_prefix"] == (12 if ag["first_divergence"] is None else ag["first_divergence"])
    eo = doc["engine_options"]
    assert eo["reference"] == "activation fp32" and eo["values"] == ["activation fp32", "activation fp16"]
    assert len(eo["agreement"]) == 2
    assert "engine options side by side" in p.stdout and "activation fp16 vs" in p.stdout
    assert doc["settings"]["activations"] == ["fp32", "fp16"] and doc["settings"]["activation"] is None
    from edgebench.report.html import _llm_section
    from edgebench.report.terminal._cells import as_document
    html = _llm_section([({}, as_document(doc))])
    assert "Engine options side by side" in html and "activation fp16 vs activation fp32" in html


@pytest.mark.extras
@pytest.mark.usefixtures("_litert_lm")
def test_speculative_on_a_bundle_without_a_drafter_fails_its_on_rows_saying_why(tmp_path):
    out = tmp_path / "spec.json"
    p = cli(tmp_path, "llm-bench", COUNT, "--prefill", "32", "--decode", "8", "--repeats", "1", "--no-store",
            "--speculative", "off,on", "--json", str(out))
    assert p.returncode == 2, p.stderr
    off, on = json.loads(out.read_text())["rows"]
    assert (off["status"], off["llm"]["speculative"]) == ("ok", False)
    assert (on["status"], on["llm"]["speculative"], on["exit_code"]) == ("failed", True, 2)
    assert on["error"].startswith("--speculative on: the engine cannot create a speculative-decoding engine for "
                                  "tiny-count-f32") and "--speculative off" in on["error"]
    assert p.stderr.strip().splitlines()[-1].startswith("error: --speculative on:") and "Traceback" not in p.stderr
    p = cli(tmp_path, "llm-bench", COUNT, "--no-store", "--speculative", "maybe")
    assert p.returncode == 2 and "--speculative 'maybe': use on, off or off,on" in p.stderr


@pytest.mark.extras
@pytest.mark.usefixtures("_litert_lm")
def test_one_activation_value_keeps_the_single_run_document(tmp_path):
    out = tmp_path / "one.json"
    p = cli(tmp_path, "llm-bench", COUNT, "--prefill", "32", "--decode", "8", "--repeats", "1", "--no-store",
            "--activation", "fp32", "--json", str(out))
    assert p.returncode == 0, p.stderr
    doc = json.loads(out.read_text())
    (row,) = doc["rows"]
    assert row["llm"]["activation"] == "fp32" and row["llm"]["speculative"] is None
    assert doc["settings"]["activation"] == "fp32" and doc["settings"]["activations"] == []
    assert "engine_options" not in doc and "task_score" not in doc and "option_agreement" not in row["llm"]
    assert "options" not in p.stdout.split("warm-up")[0]            # no options column without an axis


@pytest.mark.extras
@pytest.mark.usefixtures("_litert_lm")
def test_two_stored_activation_axes_pair_value_by_value_in_results_compare(tmp_path):
    db, ids = str(tmp_path / "a.db"), []
    for _ in range(2):
        out = tmp_path / "run.json"
        p = cli(tmp_path, "llm-bench", COUNT, "--prefill", "32", "--decode", "8", "--repeats", "3", "--threads", "1",
                "--activation", "fp32,fp16", "--db", db, "--json", str(out))
        assert p.returncode == 0, p.stderr
        ids.append(json.loads(out.read_text())["run_id"])
    out = tmp_path / "cmp.json"
    p = cli(tmp_path, "results", "compare", *ids, "--db", db, "--json", str(out))
    assert p.returncode == 0, p.stderr
    pairs = json.loads(out.read_text())["rows"]
    assert sorted(pr["key"][-1] for pr in pairs) == ["fp16", "fp32"]       # the activation ends each key
    assert all(not any(d["field"] == "activation" for d in pr["config_diff"]) for pr in pairs)
