"""``edgebench import-log`` of a real ``litert-benchmark --result_json`` file: one summary row,
no samples, no p99, and it says so; the same run's console output gives the same numbers."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from edgebench.cli import main

FIX = Path(__file__).parent / "fixtures" / "litert_benchmark"
JSON = FIX / "mobilenetv2_035_96_cpu.json"


def _run(argv, capsys):
    with pytest.raises(SystemExit) as e:
        main(argv)
        raise SystemExit(0)
    out = capsys.readouterr()
    return e.value.code, out.out, out.err


def test_fixture_is_the_recorded_capture():
    sources = (FIX / "SOURCES.md").read_text()
    for p in FIX.glob("mobilenetv2_035_96_cpu*"):
        assert hashlib.sha256(p.read_bytes()).hexdigest() in sources, p.name


def test_litert_benchmark_json_is_a_summary_row(capsys):
    raw = json.loads(JSON.read_text())["latency"]
    code, out, _ = _run(["import-log", str(JSON), "--json", "-"], capsys)
    assert code == 0
    doc = json.loads(out)
    assert doc["kind"] == "import-log" and doc["tool"] == "litert-benchmark"
    (row,) = doc["rows"]
    lat = row["latency_ms"]
    assert lat["p50"] == raw["median_ms"] and lat["mean"] == raw["avg_ms"] and lat["p95"] == raw["p95_ms"]
    assert lat["p5"] == raw["p5_ms"] and lat["min"] == raw["min_ms"] and lat["max"] == raw["max_ms"]
    assert lat["samples"] == raw["num_runs"] == 100
    assert lat["p99"] is None and lat["p90"] is None and lat["p99_valid"] is False
    assert "no per-inference samples" in lat["p99_note"]
    assert not row.get("samples_ns")                  # nothing to derive a p99 from
    assert row["sample_class"] == "summary" and row["target"] == "litert-benchmark"
    assert row["init_ms"] == raw["init_ms"] and row["threads"] == 1
    assert row["warmup_ms"]["runs"] == raw["num_warmup_runs"] and row["warmup_ms"]["mean"] == raw["warmup_avg_ms"]
    assert row["fully_accelerated"] is True and row["delegate"] == "cpu"
    assert any("summary only" in w for w in row["warnings"])


def test_litert_benchmark_json_table_says_no_p99(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "250")        # the table's width, whatever an earlier test left
    code, out, _ = _run(["import-log", str(JSON)], capsys)
    assert code == 0
    assert "litert-benchmark result" in out and "p99" in out and "no per-inference samples" in out


def test_console_output_of_the_same_run_agrees(capsys):
    """The tool's printed BENCHMARK RESULTS block (parsed as a log) and its JSON give one median."""
    code, out, _ = _run(["import-log", str(FIX / "mobilenetv2_035_96_cpu.stdout.txt"), "--json", "-"], capsys)
    assert code == 0
    lat = json.loads(out)["rows"][0]["latency_ms"]
    assert lat["p50"] == json.loads(JSON.read_text())["latency"]["median_ms"]


@pytest.mark.parametrize("text,needle", [
    ('{"latency": {"avg_ms": 1.0}}', "without litert-benchmark's latency summary"),
    ('{"latency": ', "does not parse"),
    ('{"latency": {"avg_ms": "x", "median_ms": null, "num_runs": 3}}', "no numeric avg_ms"),
])
def test_bad_json_is_one_line_exit_2(tmp_path, capsys, text, needle):
    p = tmp_path / "r.json"
    p.write_text(text)
    code, out, err = _run(["import-log", str(p)], capsys)
    assert code == 2 and needle in err and "Traceback" not in err
