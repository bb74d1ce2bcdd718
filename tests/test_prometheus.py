"""Prometheus exposition renderer and node_exporter textfile (edgebench.report.prometheus, export)."""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

pytest.register_assert_rewrite("conftest_report")
from conftest_report import make_bench_doc, make_compare_doc, make_train_doc, parse_exposition, run_cli
from edgebench.core.errors import BadInput
from edgebench.report.export import write_textfile
from edgebench.report.prometheus import escape_label_value, render_prometheus, sanitize_label_name

pytest_plugins = ["conftest_report"]

PROMTOOL = shutil.which("promtool")


def promtool_check(text: str) -> None:
    if PROMTOOL is None:
        pytest.skip("promtool not installed (Debian package 'prometheus'); scripts/test installs it")
    res = subprocess.run([PROMTOOL, "check", "metrics"], input=text, capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stdout + res.stderr
    # promtool prints lint problems (non-base units, missing HELP, ...) even when it exits 0.
    assert res.stdout.strip() == "" and res.stderr.strip() == "", res.stdout + res.stderr


def _find(samples, name, **labels):
    hits = [(lb, v) for n, lb, v in samples if n == name and all(lb.get(k) == str(x) for k, x in labels.items())]
    assert hits, f"no {name} with {labels}"
    return hits


def test_families_are_grouped_with_one_help_and_type(compare_doc, bench_doc, train_doc):
    text = render_prometheus([compare_doc, bench_doc, train_doc])
    lines = text.splitlines()
    helps = [ln.split()[2] for ln in lines if ln.startswith("# HELP ")]
    types = [ln.split()[2] for ln in lines if ln.startswith("# TYPE ")]
    assert helps == types and len(helps) == len(set(helps))
    # every sample belongs to the family whose TYPE came last (no interleaving)
    current = None
    for ln in lines:
        if ln.startswith("# TYPE "):
            current = ln.split()[2]
        elif not ln.startswith("#"):
            name = ln.split("{")[0].split(" ")[0]
            assert name == current or name in (current + "_sum", current + "_count"), ln
    for required in ("edgebench_inference_latency_seconds", "edgebench_model_size_bytes",
                     "edgebench_accuracy_top1_ratio", "edgebench_drift_psnr_db",
                     "edgebench_training_examples_per_second", "edgebench_run_info"):
        assert f"# TYPE {required} " in text
    assert "# TYPE edgebench_inference_latency_seconds summary" in text
    assert text.endswith("\n")


def test_values_are_in_base_units(compare_doc, train_doc):
    samples = parse_exposition(render_prometheus([compare_doc, train_doc]))
    int8 = next(r for r in compare_doc["rows"] if r["precision"] == "int8")
    (lb, v), = _find(samples, "edgebench_inference_latency_seconds", precision="int8", target="host", quantile="0.99")
    assert float(v) == pytest.approx(int8["latency_ms"]["p99"] / 1e3)
    assert lb["model"] == "mobilenet_v2_035" and lb["run_id"] == "r-compare-1"
    (_, v), = _find(samples, "edgebench_inference_latency_seconds_count", precision="int8", target="host")
    assert float(v) == 700
    (_, v), = _find(samples, "edgebench_inference_latency_seconds_sum", precision="int8", target="host")
    assert float(v) == pytest.approx(int8["latency_ms"]["mean"] * 700 / 1e3)
    (_, v), = _find(samples, "edgebench_model_size_bytes", precision="int8", target="host")
    assert float(v) == 1_861_632
    (_, v), = _find(samples, "edgebench_model_size_reduction_ratio", precision="int8")
    assert float(v) == pytest.approx(int8["size_reduction_pct"] / 100)
    (_, v), = _find(samples, "edgebench_accuracy_top1_ratio", precision="int8", target="host")
    assert float(v) == pytest.approx(0.6975)
    (_, v), = _find(samples, "edgebench_accuracy_top1_drop_ratio", precision="int8")
    assert float(v) == pytest.approx(0.015)
    (_, v), = _find(samples, "edgebench_drift_psnr_db", precision="int8", output="logits")
    assert float(v) == pytest.approx(40.1)
    # the TF reference row is exported too
    _find(samples, "edgebench_inference_latency_seconds", target="tf", quantile="0.5")
    (lb, v), = _find(samples, "edgebench_training_examples_per_second", batch_size=64, xla="true")
    assert float(v) == pytest.approx(1093.0 * 1.18, rel=1e-3) and lb["strategy"] == "none" and lb["input_pipeline"] == "optimized"
    (_, v), = _find(samples, "edgebench_training_step_time_seconds", batch_size=64, xla="false", quantile="0.5")
    assert float(v) == pytest.approx(64 / 1093.0 * 0.99, rel=1e-3)


def test_bench_rows_concurrency_and_failed_status(bench_doc):
    samples = parse_exposition(render_prometheus(bench_doc))
    (_, v), = _find(samples, "edgebench_row_ok", target="adb:0123ABCD", device_model="Galaxy A52")
    assert v == "0"
    hits = _find(samples, "edgebench_inference_concurrent_queries_per_second", target="host")
    assert sorted(lb["concurrency"] for lb, _ in hits) == ["1", "2", "4"]
    host = next(r for r in bench_doc["rows"] if r["target"] == "host")
    (_, v), = _find(samples, "edgebench_inference_concurrent_latency_p99_seconds", target="host", concurrency=4)
    assert float(v) == pytest.approx(host["concurrency"][2]["p99_ms"] / 1e3)
    (lb, _), = _find(samples, "edgebench_inference_latency_seconds", device_model="Pixel 7", quantile="0.99")
    assert lb["target"] == "adb:emulator-5554"


def test_label_values_escaped_and_round_trip(evil_doc):
    text = render_prometheus(evil_doc)
    model = evil_doc["rows"][0]["model"]
    assert '\\"x\\"' in text and "\\n" in text  # quotes and newline escaped, not raw
    assert all("\n" not in ln for ln in text.split("\n"))
    samples = parse_exposition(text)
    models = {lb["model"] for n, lb, _ in samples if "model" in lb}
    assert models == {model}
    outputs = {lb["output"] for n, lb, _ in samples if n == "edgebench_drift_psnr_db"}
    assert 'out"put\\1' in outputs
    devs = {lb["device_model"] for n, lb, _ in samples if n == "edgebench_model_size_bytes"}
    assert 'Pixel "7" Pro\\a/b' in devs
    assert {lb["run_id"] for _, lb, _ in samples if "run_id" in lb} == {"run/with/slashes"}
    promtool_check(text)


def test_escape_and_sanitise_helpers():
    assert escape_label_value('a\\b"c\nd') == 'a\\\\b\\"c\\nd'
    assert escape_label_value(None) == ""
    assert sanitize_label_name("device-model") == "device_model"
    assert sanitize_label_name("9lives") == "_9lives"
    assert sanitize_label_name("__name__") == "_name__"
    assert sanitize_label_name("ünï code") == "_n__code"
    assert sanitize_label_name("") == "label_"
    for name in ("a.b", "x y", "é", "__x", "0", "ok_name"):
        out = sanitize_label_name(name)
        assert out[0].isalpha() or out[0] == "_"
        assert not out.startswith("__") and all(c.isalnum() and c.isascii() or c == "_" for c in out)


# A document edgebench did not write: an empty row, a string row, bad drift entries, a bad
# concurrency item (tests/test_goldens.py pins its exposition too).
MALFORMED = {
    "kind": "compare", "created": "not a date", "fingerprint": None,
    "rows": [
        {},
        {"model": "m", "precision": "int8", "target": "host", "status": "failed", "error": "worker crashed"},
        {"model": "m", "precision": "fp16", "target": "host", "status": "ok",
         "latency_ms": {"p50": None, "p99": 3.0}, "accuracy": {}, "drift": {"out": {"psnr_db": "inf", "nan": 0},
                                                                           "bad": "not-a-dict"},
         "concurrency": [{"qps": 5.0}, "x"]},
        "not a row",
    ],
}


def test_missing_keys_and_non_finite_values():
    import copy

    doc = copy.deepcopy(MALFORMED)
    text = render_prometheus(doc)
    samples = parse_exposition(text)
    (_, v), = _find(samples, "edgebench_drift_psnr_db", output="out")
    assert v == "+Inf" and math.isinf(float(v))
    (_, v), = _find(samples, "edgebench_row_ok", precision="int8")
    assert v == "0"
    assert not [s for s in samples if s[0] == "edgebench_run_timestamp_seconds"]  # bad date: no sample
    assert not [s for s in samples if s[0] == "edgebench_inference_latency_seconds_count"]  # no mean/samples
    promtool_check(text)
    assert render_prometheus([]) == ""


def test_rows_too_malformed_to_type_keep_their_outcome():
    """A foreign row the typed rows cannot read (an unknown status, an accuracy that is not an
    object) keeps its identity and outcome (row_ok, verdict, the run verdict); its numbers are left
    out; the rows that type are drawn in full."""
    doc = {"kind": "bench", "created": "2026-12-01T00:00:00Z", "run_id": "r-u",
           "rows": [{"model": "m", "precision": "int8", "target": "host", "status": "crashed",
                     "latency_ms": {"p50": 1.0, "mean": 1.0, "samples": 10, "p99_valid": False}},
                    {"model": "m", "precision": "fp16", "target": "host", "status": "ok", "accuracy": "x",
                     "latency_ms": {"p50": 2.0}},
                    {"model": "m", "precision": "fp32", "target": "host", "status": "ok", "latency_ms": {"p50": 3.0}}]}
    text = render_prometheus(doc)
    samples = parse_exposition(text)
    assert [v for _, v in _find(samples, "edgebench_row_ok", precision="int8")] == ["0"]
    assert [lb["verdict"] for lb, _ in _find(samples, "edgebench_row_verdict", precision="int8")] == ["failed"]
    assert [v for _, v in _find(samples, "edgebench_row_ok", precision="fp16")] == ["1"]
    assert [v for _, v in _find(samples, "edgebench_run_ok")] == ["0"]
    lat = _find(samples, "edgebench_inference_latency_seconds")
    assert [(lb["precision"], v) for lb, v in lat] == [("fp32", "0.003")]
    promtool_check(text)


def test_promtool_accepts_every_kind(compare_doc, bench_doc, train_doc, evil_doc):
    promtool_check(render_prometheus([compare_doc, bench_doc, train_doc, evil_doc]))
    promtool_check(render_prometheus(compare_doc, run_id_label=False))


def test_duplicate_series_are_not_emitted():
    doc = make_compare_doc()
    doc["rows"].append(dict(doc["rows"][0]))  # same model/precision/target twice
    samples = parse_exposition(render_prometheus(doc))
    keys = [(n, tuple(sorted(lb.items()))) for n, lb, _ in samples]
    assert len(keys) == len(set(keys))


def test_write_textfile_is_atomic_and_valid(tmp_path):
    path = tmp_path / "edgebench.prom"
    path.write_text("stale content that is not exposition\n")
    docs = [make_compare_doc(), make_train_doc()]
    out = write_textfile(docs, path)
    assert out == path
    text = path.read_text()
    assert text == render_prometheus(docs)
    assert sorted(os.listdir(tmp_path)) == ["edgebench.prom"]  # temp file renamed, nothing left
    assert oct(path.stat().st_mode & 0o777) == "0o644"
    if PROMTOOL:
        res = subprocess.run([PROMTOOL, "check", "metrics"], stdin=open(path), capture_output=True, text=True,
                             timeout=60)
        assert res.returncode == 0 and not res.stdout.strip(), res.stdout + res.stderr


def test_write_textfile_bad_paths(tmp_path):
    with pytest.raises(BadInput, match="does not exist"):
        write_textfile(make_compare_doc(), tmp_path / "missing" / "e.prom")
    with pytest.raises(BadInput, match=r"\*\.prom"):
        write_textfile(make_compare_doc(), tmp_path / "e.txt")
    (tmp_path / "d.prom").mkdir()
    with pytest.raises(BadInput, match="is a directory"):
        write_textfile(make_compare_doc(), tmp_path / "d.prom")


def test_cli_export_textfile_from_store(tmp_path, sqlite_store, capsys):
    db, store = sqlite_store
    assert run_cli("export", "prometheus", "--latest", "--db", db) == 2  # empty store
    assert "empty" in capsys.readouterr().err
    first = store.save(make_compare_doc())
    rid = store.save(make_bench_doc())
    path = tmp_path / "tf" / "edgebench.prom"
    assert run_cli("export", "prometheus", "--latest", "--db", db, "--textfile", path) == 2  # dir missing
    path.parent.mkdir()
    assert run_cli("export", "prometheus", "--latest", "--db", db, "--textfile", path) == 0
    samples = parse_exposition(path.read_text())
    assert {lb["run_id"] for _, lb, _ in samples if "run_id" in lb} == {rid}
    if PROMTOOL:
        promtool_check(path.read_text())
    capsys.readouterr()
    assert run_cli("export", "prometheus", first[:10], "--db", db) == 0  # prefix, stdout
    out = capsys.readouterr().out
    assert "# TYPE edgebench_drift_psnr_db gauge" in out and first in out
    assert run_cli("export", "prometheus", "0" * 32, "--db", db) == 2
    assert run_cli("export", "prometheus", "--db", db) == 2  # neither RUN_ID nor --latest
    assert run_cli("export", "prometheus", rid, "--latest", "--db", db) == 2


# ---------------------------------------------------------------------------------------------
# Grafana dashboards (scripts/grafana)

GRAFANA = Path(__file__).resolve().parent.parent / "scripts" / "grafana"


def _dashboard(name: str) -> dict:
    d = json.loads((GRAFANA / name).read_text())
    ids = [p["id"] for p in d["panels"]]
    assert len(ids) == len(set(ids)) and d["uid"] and d["title"]
    assert any(v["type"] == "datasource" and v["name"] == "datasource" for v in d["templating"]["list"])
    for p in d["panels"]:
        assert p["datasource"]["uid"] == "${datasource}" and p["targets"], p["title"]
    return d


def test_prometheus_dashboard_only_uses_metrics_we_export(compare_doc, bench_doc, train_doc):
    d = _dashboard("edgebench.json")
    text = render_prometheus([compare_doc, bench_doc, train_doc])
    exported = {ln.split()[2] for ln in text.splitlines() if ln.startswith("# TYPE ")}
    used = set()
    for p in d["panels"]:
        for t in p["targets"]:
            used |= set(re.findall(r"edgebench_[a-z0-9_]+", t["expr"]))
    for v in d["templating"]["list"]:
        if v["type"] == "query":
            used |= set(re.findall(r"edgebench_[a-z0-9_]+", v["definition"]))
    assert used and used <= exported, used - exported
    titles = " ".join(p["title"].lower() for p in d["panels"])
    for needed in ("p99", "size reduction", "accuracy drop", "training throughput"):
        assert needed in titles


PG_URL = os.environ.get("EDGEBENCH_TEST_PG_URL")


@pytest.mark.skipif(not PG_URL, reason="EDGEBENCH_TEST_PG_URL not set (scripts/test starts PostgreSQL and sets it)")
def test_postgres_dashboard_sql_runs_against_the_store():
    import sqlalchemy as sa

    from edgebench.store.db import Store

    d = _dashboard("edgebench-postgres.json")
    tag = uuid.uuid4().hex[:8]
    model, tmodel = f"mobilenet_{tag}", f"resnet_{tag}"
    with Store(PG_URL) as store:
        doc = make_compare_doc(model=model, created="2026-12-01T10:00:00+00:00")
        store.save(doc)
        store.save(make_compare_doc(model=model, created="2026-12-02T10:00:00+00:00", seed=7))
        store.save(make_train_doc(model=tmodel))
        engine = store.engine

        def expand(sql: str) -> str:
            sql = re.sub(r"\$__timeFilter\(([^)]*)\)",
                         r"\1 BETWEEN '2026-11-01T00:00:00Z' AND '2026-12-31T00:00:00Z'", sql)
            return (sql.replace("$model", f"'{model}', '{tmodel}'").replace("$precision", "'int8', 'fp16', 'fp32'")
                    .replace("$target", "'host'"))

        with engine.connect() as conn:
            for v in d["templating"]["list"]:
                if v["type"] == "query":
                    got = conn.execute(sa.text(v["query"])).scalars().all()
                    assert got, v["name"]
            results = {}
            for p in d["panels"]:
                for t in p["targets"]:
                    results[p["title"]] = conn.execute(sa.text(expand(t["rawSql"]))).mappings().all()
    p99 = [r for r in results["p99 latency per model / precision / device"] if r["metric"] == f"{model} / int8 / host"]
    assert len(p99) == 2  # one point per stored run, at the run's time
    want = next(r for r in doc["rows"] if r["precision"] == "int8")["latency_ms"]["p99"] / 1e3
    assert float(p99[0]["value"]) == pytest.approx(want)
    assert p99[0]["time"] < p99[1]["time"]
    red = [r for r in results["Size reduction vs reference model"] if r["metric"] == f"{model} / int8 / host"]
    assert float(red[0]["value"]) == pytest.approx(0.7464)
    thr = [r for r in results["Training throughput"] if r["metric"].startswith(tmodel)]
    assert len(thr) == 8 and {r["metric"] for r in thr} >= {f"{tmodel} / fp32 / bs 64 / xla true / none / optimized",
                                                            f"{tmodel} / fp32 / bs 64 / xla false / none / optimized"}
    assert results["Latest runs"]
