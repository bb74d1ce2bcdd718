"""llm-bench --memory-phases with LiteRT-LM's real engine: peak and steady resident memory of init,
prefill and decode per process (Engine/Session API), stored with intervals, growing from phase to
phase and with the prefill depth, and judged by `results compare` like the other per-process figures."""
from __future__ import annotations

import json

import pytest

from conftest import require_extra
from test_llm_bench import F32, Q8, cli

pytestmark = pytest.mark.extras
PHASES = [f"{p}_{k}_bytes" for p in ("init", "prefill", "decode") for k in ("peak", "steady")]


@pytest.fixture(scope="module", autouse=True)
def _litert_lm():
    require_extra("litert_lm", "llm")


def test_memory_per_phase_is_stored_and_compared(tmp_path):
    db, ids, docs = str(tmp_path / "m.db"), [], []
    for bundle in (F32, Q8):
        out = tmp_path / "run.json"
        p = cli(tmp_path, "llm-bench", bundle, "--prefill", "16,200", "--decode", "16", "--repeats", "3",
                "--threads", "1", "--memory-phases", "--db", db, "--json", str(out))
        assert p.returncode == 0, p.stderr
        doc = json.loads(out.read_text())
        ids.append(doc["run_id"])
        docs.append(doc)
        assert "memory per phase" in p.stdout
    for doc in docs:
        shallow, deep = doc["rows"]
        for r in (shallow, deep):
            assert r["llm"]["memory_phases"] is True
            assert all(len([p for p in r["repeats"] if p.get(k)]) == 3 for k in PHASES)
            st = r["llm"]["stats"]
            before = r["memory"]["rss_before_engine_bytes"]
            # the engine's weights arrive at init; the KV cache and activations only grow after it
            assert before < st["init_peak_bytes"]["median"] <= st["prefill_peak_bytes"]["median"] \
                <= st["decode_peak_bytes"]["median"]
            assert all(st[f"{p}_steady_bytes"]["median"] <= st[f"{p}_peak_bytes"]["median"]
                       for p in ("init", "prefill", "decode"))
        assert deep["llm"]["stats"]["prefill_peak_bytes"]["median"] > shallow["llm"]["stats"]["prefill_peak_bytes"]["median"]
    out = tmp_path / "cmp.json"
    p = cli(tmp_path, "results", "compare", *ids, "--db", db, "--json", str(out))
    assert p.returncode == 0, p.stderr
    pairs = json.loads(out.read_text())["rows"]
    assert len(pairs) == 2
    for pair in pairs:
        ch = {c["metric"]: c for c in pair["changes"]}
        for label in ("init peak mem", "prefill peak mem", "decode peak mem", "decode steady mem"):
            assert ch[label]["basis"] == "repeats" and ch[label]["ratio"] > 0, ch[label]
            assert ch[label]["verdict"] in ("better", "worse", "same", "cannot judge")
        # the dynamic-int8 bundle holds half the weights: init's peak is not larger than fp32's
        assert ch["init peak mem"]["ratio"] < 1.0


def test_memory_phases_on_a_device_target_is_one_line(tmp_path):
    p = cli(tmp_path, "llm-bench", F32, "--no-store", "--memory-phases", "--target", "adb:emulator-5554")
    assert p.returncode == 2 and "--memory-phases runs on the host" in p.stderr and "Traceback" not in p.stderr
