"""The metric registry in use (issue 23.4/23.8): peak memory, added as one registry entry plus its
measurement, is measured on a real run and reaches every output -- the stored column, `results
compare`, `results history --metric`, Prometheus, the terminal/Markdown/HTML tables -- and a
database written before it existed gets the column on first open."""

from __future__ import annotations

import json
import sqlite3

import pytest

from edgebench.rows.identity import headline
from edgebench.rows.metrics import REGISTRY, metric
from edgebench.rows import Document
from edgebench.store.db import Store

pytest_plugins = ["conftest_adb"]


@pytest.fixture(scope="module")
def two_runs(tiny_tflite, tmp_path_factory):
    """Two real `bench` runs of a tiny model on the host, stored in one database, and their JSON."""
    from edgebench.cli import _main as main

    tmp = tmp_path_factory.mktemp("registry")
    db = f"sqlite:///{tmp / 'r.db'}"
    docs = []
    for i in range(2):
        out = tmp / f"run{i}.json"
        try:
            main(["bench", str(tiny_tflite), "--runs", "50", "--min-time", "0", "--json", str(out), "--db", db])
        except SystemExit as e:
            assert e.code in (0, None)
        docs.append(json.loads(out.read_text()))
    return db, docs, tmp


def test_peak_memory_is_measured_over_load_and_run(two_runs):
    _, docs, _ = two_runs
    row = docs[0]["rows"][0]
    mem = row["memory"]
    assert mem["load_peak_rss_bytes"] > 10 * 2**20            # Python + numpy + LiteRT: tens of MiB at least
    assert mem["load_and_run_peak_rss_bytes"] == max(mem["load_peak_rss_bytes"], mem["peak_rss_bytes"])
    assert headline(row, kind="bench")["peak_memory_bytes"] == mem["load_and_run_peak_rss_bytes"]


def test_peak_memory_is_stored_compared_and_has_history(two_runs):
    from edgebench.judge.stats import compare_stored

    db, docs, _ = two_runs
    with Store(db) as st:
        runs = st.list_runs()
        rows = st.rows()
        assert all(r["peak_memory_bytes"] and r["peak_memory_bytes"] > 0 for r in rows)
        cmp = compare_stored(st, runs[1]["run_id"], runs[0]["run_id"])
        labels = {c.metric for p in cmp["pairs"] for c in p["changes"]}
        assert metric("peak_memory").label in labels
        hist = st.history("memory", model=rows[0]["model"])
        assert len(hist) == 2 and all(p["value"] > 0 for p in hist)


def test_peak_memory_in_prometheus_and_every_table(two_runs):
    from edgebench.report.html import render_html
    from edgebench.report.markdown import render_markdown
    from edgebench.report.prometheus import render_prometheus
    from edgebench.report.tables import inference_table

    _, docs, _ = two_runs
    doc = docs[0]
    peak = doc["rows"][0]["memory"]["load_and_run_peak_rss_bytes"]
    prom = [ln for ln in render_prometheus(doc).splitlines() if ln.startswith("edgebench_peak_memory_bytes{")]
    assert prom and float(prom[0].rsplit(" ", 1)[1]) == peak
    table = inference_table([Document.from_dict(doc)])
    assert "peak mem" in [c.label for c in table.columns]
    assert "peak mem" in render_markdown(doc)
    assert "<th>peak mem</th>" in render_html(doc)


def test_an_old_database_gets_a_new_registry_column_filled_from_its_documents(two_runs, tmp_path):
    """Drop the column as a database from before the metric would lack it: opening it adds the
    column back (generic migration) and fills it from each stored document."""
    import shutil

    db, _, tmp = two_runs
    path = tmp_path / "old.db"
    shutil.copy(tmp / "r.db", path)
    con = sqlite3.connect(path)
    con.execute("ALTER TABLE results DROP COLUMN peak_memory_bytes")
    con.execute("UPDATE schema_meta SET value = 'older' WHERE key = 'metric_columns'")
    con.commit()
    con.close()
    with Store(f"sqlite:///{path}") as st:
        rows = st.rows()
    assert all(r["peak_memory_bytes"] and r["peak_memory_bytes"] > 0 for r in rows)


def test_every_metric_has_a_known_unit_and_direction():
    from edgebench.rows.metrics import UNITS

    for m in REGISTRY:
        assert m.unit in UNITS and m.better in ("lower", "higher"), m.key
        assert m.test in ("location", "mean", "percentile", "ratio", "absolute", "repeats"), m.key
    with pytest.raises(Exception, match="not a stored metric"):
        metric("no_such_metric")


def test_compare_rows_carry_the_same_worker_facts_as_bench_rows(two_runs, tiny_tflite, tmp_path):
    """One RunResult -> row builder (issue 23.6): a `compare` row has the memory, collector, input
    and load facts a `bench` row of the same model has (they used to copy different subsets)."""
    from edgebench.cli import _main as main

    out = tmp_path / "cmp.json"
    try:
        main(["compare", str(tiny_tflite), str(tiny_tflite), "--data", "synthetic", "--json", str(out),
              "--no-store"])
    except SystemExit as e:
        assert e.code in (0, None)
    cmp_row = json.loads(out.read_text())["rows"][1]
    bench_row = two_runs[1][0]["rows"][0]
    for key in ("memory", "gc", "input_source", "input_samples", "rss_before_load_bytes", "warmup_ms", "init_ms"):
        assert (cmp_row[key] is None) == (bench_row[key] is None), key
    assert cmp_row["memory"]["load_and_run_peak_rss_bytes"] > 0
    assert "memory" not in (cmp_row.get("extra") or {})       # a typed field, not repeated in extra
