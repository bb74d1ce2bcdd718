"""Results store on a real SQLite file: round trip, filters, schema versions, faults, concurrency."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from edgebench.store import db as store_mod
from edgebench.core.errors import BadInput, InfraError
from edgebench.core.result_file import envelope
from edgebench.rows.identity import HEADLINE, headline
from edgebench.store.db import Store, decode_samples, encode_samples, parse_since

FP = {"hostname": "h1", "tensorflow": "2.21.0", "litert": "2.3.0", "cpu_model": "cpu", "edgebench_git_sha": "abc"}


def bench_doc(model="digits", precision="int8", target="host", p99=2.0, n=700, seed=0, created=None):
    rng = np.random.default_rng(seed)
    s = (rng.lognormal(0, 0.1, n) * 1e6).astype(np.int64)
    row = {"model": model, "model_sha256": "f" * 64, "precision": precision, "target": target,
           "status": "ok", "size_bytes": 12345, "size_reduction_pct": 74.5,
           "latency_ms": {"mean": 1.1, "std": 0.1, "min": 0.9, "max": 3.0, "p50": 1.0, "p90": 1.5,
                          "p95": 1.7, "p99": p99, "samples": n, "p99_valid": n >= 662, "qps": 909.0},
           "samples_ns": s,
           "accuracy": {"top1": 0.97, "top1_drop_pp": 0.3},
           "drift": {"logits": {"psnr_db": 41.0, "cosine": 0.999},
                     "probs": {"psnr_db": 38.5, "cosine": 0.9991}}}
    doc = envelope("compare", [row], FP)
    if created:
        doc["created"] = created
    return doc


@pytest.fixture
def db(tmp_path):
    return str(tmp_path / "results.db")


def test_round_trip_restores_samples_and_headline(db):
    st = Store(db)
    doc = bench_doc()
    rid = st.save(doc)
    assert len(rid) == 32
    got = st.get(rid)
    assert got["run_id"] == rid
    assert got["rows"][0]["samples_ns"] == np.asarray(doc["rows"][0]["samples_ns"]).tolist()
    assert got["fingerprint"] == FP and got["kind"] == "compare"
    assert "samples_ns_stored" not in got["rows"][0]
    # the stored JSON does not carry the samples
    con = sqlite3.connect(db)
    (doc_json,) = con.execute("select doc_json from runs where run_id=?", (rid,)).fetchone()
    assert "\"samples_ns\":" not in doc_json
    assert con.execute("pragma journal_mode").fetchone()[0] == "wal"
    con.close()
    (row,) = st.rows()
    assert row["p99_ms"] == 2.0 and row["p50_ms"] == 1.0 and row["qps"] == 909.0
    assert row["p99_valid"] is True and row["n_samples"] == 700
    assert row["psnr_db"] == 38.5 and row["cosine"] == 0.999      # worst output
    assert row["top1"] == 0.97 and row["top1_drop_pp"] == 0.3
    assert row["size_bytes"] == 12345 and row["model_sha256"] == "f" * 64
    np.testing.assert_array_equal(st.samples(rid, 0), doc["rows"][0]["samples_ns"])
    assert st.get(rid[:8])["run_id"] == rid


def test_samples_codec_round_trip_and_size():
    s = np.random.default_rng(0).integers(900_000, 1_100_000, 10_000)
    blob = encode_samples(s)
    assert len(blob) < s.size * 8
    np.testing.assert_array_equal(decode_samples(blob), s)


def test_headline_train_row_and_missing_fields():
    h = headline({"model": "resnet50", "status": "ok", "batch_size": 32, "examples_per_s": 123.4,
                  "step_time_ms": {"p50": 259.0, "p99": 300.0}})
    assert h["examples_per_s"] == 123.4 and h["step_time_p50_ms"] == 259.0 and h["batch_size"] == 32
    assert h["p99_ms"] is None and h["psnr_db"] is None
    assert set(h) == set(HEADLINE)
    # NaN and non-numeric values become NULL, never a crash
    assert headline({"latency_ms": {"p99": float("nan"), "p50": "x"}})["p99_ms"] is None


def test_unknown_and_bad_run_ids(db):
    st = Store(db)
    with pytest.raises(BadInput, match="no run"):
        st.get("deadbeef")
    with pytest.raises(BadInput, match="not a run id"):
        st.get("x%';drop table runs;--")
    ids = [st.save(bench_doc(seed=i)) for i in range(20)]
    common = None
    for a in ids:  # find two ids sharing a first hex digit -> ambiguous prefix
        for b in ids:
            if a != b and a[0] == b[0]:
                common = a[0]
    assert common is not None
    with pytest.raises(BadInput, match="several runs"):
        st.get(common)
    with pytest.raises(BadInput, match="no row"):
        st.samples(ids[0], 5)


def test_filters_and_history(db):
    st = Store(db)
    t = ["2026-11-01T10:00:00+00:00", "2026-11-02T10:00:00+00:00", "2026-11-03T10:00:00Z"]
    r1 = st.save(bench_doc(p99=2.0, created=t[0]))
    r2 = st.save(bench_doc(p99=2.5, created=t[1]))
    r3 = st.save(bench_doc(model="bert", precision="fp16", p99=9.0, created=t[2]), matrix_hash="m1",
                 cell={"key": "model=bert", "model": "bert"})
    st.save(envelope("train", [{"model": "digits", "status": "ok", "examples_per_s": 50.0}], FP))
    assert [r["run_id"] for r in st.list_runs(model="digits", kind="compare")] == [r2, r1]
    assert [r["run_id"] for r in st.list_runs(precision="fp16")] == [r3]
    assert [r["run_id"] for r in st.list_runs(matrix_hash="m1")] == [r3]
    assert len(st.list_runs(limit=2)) == 2
    assert {r["run_id"] for r in st.list_runs(since="2026-11-02", kind="compare")} == {r2, r3}
    assert st.list_runs(target="adb:nothing") == []
    h = st.history("p99", model="digits")
    assert [p["value"] for p in h] == [2.0, 2.5] and h[0]["run_id"] == r1
    assert st.history("examples_per_s", model="digits")[0]["value"] == 50.0
    with pytest.raises(BadInput, match="not a stored metric"):
        st.history("p77", model="digits")
    assert st.latest(kind="compare")["run_id"] == r3
    assert st.get(r3)["cell"] == {"key": "model=bert", "model": "bert"}
    assert st.cell_keys("m1") == {"model=bert"}
    assert len(st.rows(kind="compare")) == 3


def test_parse_since():
    assert parse_since("2026-11-02") == "2026-11-02T00:00:00.000000+00:00"
    assert parse_since("7d") < parse_since("1h")
    with pytest.raises(BadInput, match="--since"):
        parse_since("last tuesday")


def test_failed_rows_mark_run_failed(db):
    st = Store(db)
    rid = st.save(envelope("compare", [{"model": "m", "status": "ok"},
                                       {"model": "m", "status": "failed", "error": "worker crashed"}], FP),
                  matrix_hash="mh", cell={"key": "k1"})
    assert st.list_runs()[0]["status"] == "failed"
    assert st.cell_keys("mh") == set() and st.cell_keys("mh", status=None) == {"k1"}
    assert st.get(rid)["rows"][1]["error"] == "worker crashed"


def test_newer_schema_is_refused(db):
    Store(db).save(bench_doc())
    con = sqlite3.connect(db)
    con.execute("update schema_meta set value='99' where key='schema_version'")
    con.commit()
    con.close()
    with pytest.raises(BadInput, match="schema version 99, newer"):
        Store(db)


def test_migration_runs_on_older_schema(db, monkeypatch):
    rid = Store(db).save(bench_doc())

    def add_note_column(conn):
        conn.exec_driver_sql("ALTER TABLE runs ADD COLUMN note TEXT")

    monkeypatch.setattr(store_mod, "SCHEMA_VERSION", store_mod.SCHEMA_VERSION + 1)
    monkeypatch.setitem(store_mod._MIGRATIONS, store_mod.SCHEMA_VERSION - 1, add_note_column)
    st = Store(db)
    assert st.schema_version() == store_mod.SCHEMA_VERSION
    assert st.get(rid)["rows"][0]["model"] == "digits"
    con = sqlite3.connect(db)
    assert "note" in [r[1] for r in con.execute("pragma table_info(runs)")]
    con.close()


def test_missing_migration_is_infra_error(db, monkeypatch):
    Store(db)
    monkeypatch.setattr(store_mod, "SCHEMA_VERSION", store_mod.SCHEMA_VERSION + 1)
    with pytest.raises(InfraError, match="no migration"):
        Store(db)


def test_read_only_database(db):
    rid = Store(db).save(bench_doc())
    ro = Store(f"sqlite:///file:{db}?mode=ro&uri=true")
    assert ro.get(rid)["run_id"] == rid          # reading works
    with pytest.raises(InfraError, match="read-only"):
        ro.save(bench_doc())


def test_locked_database_gives_clear_error(db):
    st = Store(db, timeout_s=0.3)
    holder = sqlite3.connect(db, timeout=0)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(InfraError, match="locked by another process"):
            st.save(bench_doc())
    finally:
        holder.rollback()
        holder.close()
    st.save(bench_doc())  # works once the lock is gone
    assert len(st.list_runs()) == 1


def test_not_a_database(tmp_path):
    p = tmp_path / "junk.db"
    p.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(BadInput, match="not an edgebench results database"):
        Store(str(p))
    with pytest.raises(BadInput, match="does not exist"):
        Store(str(tmp_path / "no" / "such" / "dir.db"))


WRITER = textwrap.dedent("""
    import os, sys, time
    from edgebench.store.db import Store
    url, tag, go = sys.argv[1], sys.argv[2], sys.argv[3]
    st = Store(url, timeout_s=60)
    while not os.path.exists(go):
        time.sleep(0.005)
    for i in range(50):
        st.save({"kind": "bench", "created": "2026-12-01T00:00:00+00:00",
                 "rows": [{"model": f"{tag}-{i}", "status": "ok", "samples_ns": list(range(100))},
                          {"model": f"{tag}-{i}", "precision": "int8", "status": "ok"}]},
                matrix_hash="concurrency", cell={"key": f"{tag}-{i}"})
""")


def run_two_writers(url: str, tmp_path) -> None:
    """Two processes, released together, each saving 50 runs of 2 rows."""
    Store(url)  # create the schema once so both writers race on rows, not on DDL
    go = tmp_path / "go"
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, url, tag, str(go)],
                              stderr=subprocess.PIPE, text=True) for tag in ("a", "b")]
    go.write_text("go")
    errs = [p.communicate(timeout=240)[1] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], errs


def test_two_processes_lose_no_rows_sqlite(db, tmp_path):
    run_two_writers(db, tmp_path)
    st = Store(db)
    runs = st.list_runs(limit=None)
    assert len(runs) == 100 and len({r["run_id"] for r in runs}) == 100
    assert len(st.rows()) == 200
    assert st.cell_keys("concurrency") == {f"{t}-{i}" for t in "ab" for i in range(50)}
    one = st.get(st.list_runs(model="b-7")[0]["run_id"])
    assert one["rows"][0]["samples_ns"] == list(range(100))


def test_json_of_stored_doc_is_plain(db):
    st = Store(db)
    rid = st.save(bench_doc())
    json.dumps(st.get(rid))  # numpy values were converted on save


# ------------------------------------------------------------------------------ results CLI

class _Result:
    def __init__(self, returncode: int, stdout: str, stderr: str) -> None:
        self.returncode, self.stdout, self.stderr = returncode, stdout, stderr


def _cli(*args) -> _Result:
    """The real CLI, in-process (exit code from SystemExit, stdout/stderr captured)."""
    import contextlib
    import io
    import os

    from edgebench.cli import _main

    out, err = io.StringIO(), io.StringIO()
    code = 0
    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "200"
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            _main(list(args))
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 2)
    finally:
        if old is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = old
    return _Result(code, out.getvalue(), err.getvalue())


@pytest.fixture
def history_db(db):
    """10 runs of digits/int8/host: p99 steps up 1.3x at run 5, and TF changes with it."""
    st = Store(db)
    ids = []
    for i in range(10):
        slow = i >= 5
        doc = bench_doc(p99=(2.6 if slow else 2.0) + 0.01 * (i % 3), seed=i, n=800,
                        created=f"2026-11-{i + 1:02d}T10:00:00+00:00")
        row = doc["rows"][0]
        if slow:
            row["samples_ns"] = (np.asarray(row["samples_ns"]) * 1.3).astype(np.int64)
            row["latency_ms"] = {**row["latency_ms"], "p50": 1.3, "mean": 1.43, "qps": 699.0}
            doc["fingerprint"] = {**FP, "tensorflow": "2.22.0"}
        ids.append(st.save(doc))
    return db, ids


def test_results_cli_list_show_compare_history_export(history_db, tmp_path):
    db, ids = history_db
    r = _cli("results", "list", "--db", db, "--json", "-")
    assert r.returncode == 0, r.stderr
    assert [x["run_id"] for x in json.loads(r.stdout)["rows"]] == ids[::-1]

    r = _cli("results", "show", ids[3][:10], "--db", db, "--json", "-")
    shown = json.loads(r.stdout)
    assert shown["run_id"] == ids[3] and len(shown["rows"][0]["samples_ns"]) == 800

    r = _cli("results", "compare", ids[0], ids[9], "--db", db)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "ENVIRONMENT DIFFERS" in out and "tensorflow: 2.21.0  ->  2.22.0" in out
    assert out.index("ENVIRONMENT DIFFERS") < out.index("p50 ms")          # differences first
    assert "worse" in out
    r = _cli("results", "compare", ids[0], ids[9], "--db", db, "--fail-on-regression")
    assert r.returncode == 1 and "worse in" in r.stderr and "p < 0.002" in r.stderr
    # two neighbouring runs with no history before B: nothing is worse, but an 800-sample p99 from one
    # run a side cannot be called "same" (issue 44) -- exit 4, naming what would decide it
    r = _cli("results", "compare", ids[0], ids[1], "--db", db, "--fail-on-regression", "--json", "-")
    assert r.returncode == 4, r.stderr
    assert "cannot be judged" in r.stderr and "within-run only" in r.stderr and "--repeats 3" in r.stderr
    assert json.loads(r.stdout)["gate"]["state"] == "undecided"
    r = _cli("results", "compare", ids[0], ids[1], "--db", db, "--fail-on-regression", "--undecided", "fail")
    assert r.returncode == 1 and "cannot be judged" in r.stderr
    r = _cli("results", "compare", ids[0], ids[1], "--db", db, "--fail-on-regression", "--undecided", "pass",
             "--json", "-")
    assert r.returncode == 0
    rep = json.loads(r.stdout)
    assert rep["regressions"] == 0 and rep["fingerprint_diff"] == []

    r = _cli("results", "history", "--metric", "p99", "--model", "digits", "--db", db, "--json", "-")
    (series,) = json.loads(r.stdout)["rows"]
    assert [p["step"] for p in series["points"]].index(True) == 5
    assert series["steps"][0]["run_id"] == ids[5]
    r = _cli("results", "history", "--metric", "p99", "--model", "digits", "--db", db)
    assert "shifted 1.30x here" in r.stdout and "change points:" in r.stdout

    csv_path = tmp_path / "out" / "rows.csv"
    r = _cli("results", "export", "--format", "csv", "-o", str(csv_path), "--db", db, "--since", "2026-11-06")
    assert r.returncode == 0, r.stderr
    import csv as _csv

    rows = list(_csv.DictReader(csv_path.open()))
    assert len(rows) == 5 and rows[0]["run_id"] == ids[5] and float(rows[0]["p99_ms"]) == 2.62
    r = _cli("results", "export", "--format", "json", "--db", db, "--model", "digits")
    assert len(json.loads(r.stdout)["rows"]) == 10
    r = _cli("results", "export", "--format", "xml", "--db", db)
    assert r.returncode == 2 and "--format xml" in r.stderr


def test_results_cli_bad_inputs(history_db, tmp_path):
    db, _ids = history_db
    r = _cli("results", "show", "abcdef", "--db", db)
    assert r.returncode == 2 and "no run 'abcdef'" in r.stderr and "Traceback" not in r.stderr
    r = _cli("results", "history", "--metric", "p77", "--model", "digits", "--db", db)
    assert r.returncode == 2 and "not a stored metric" in r.stderr
    r = _cli("results", "list", "--since", "yesterday-ish", "--db", db)
    assert r.returncode == 2 and "--since" in r.stderr
    con = sqlite3.connect(db)
    con.execute("update schema_meta set value='5' where key='schema_version'")
    con.commit()
    con.close()
    r = _cli("results", "list", "--db", db)
    assert r.returncode == 2 and "schema version 5, newer than this edgebench" in r.stderr


def test_results_import_and_store_result_keeps_unsaved(tmp_path, monkeypatch):
    from edgebench.report.publish import PublishOptions, publish
    from edgebench.rows import Document

    monkeypatch.setenv("EDGEBENCH_DATA_DIR", str(tmp_path / "data"))
    db = str(tmp_path / "r.db")
    Store(db)
    doc = bench_doc()
    rid = publish(Document.from_dict(doc), PublishOptions(db=db)).run_id
    assert Store(db).get(rid)["rows"][0]["model"] == "digits"
    assert publish(Document.from_dict(doc), PublishOptions(db=db, store=False)).run_id is None
    # a read-only database: the result is kept in <data>/unsaved and the error says where
    with pytest.raises(InfraError, match=r"result measured but not stored: .*read-only.*kept in (\S+unsaved\S+\.json)") as ei:
        publish(Document.from_dict(doc), PublishOptions(db=f"sqlite:///file:{db}?mode=ro&uri=true")).raise_error()
    kept = ei.value.args[0].split("kept in ")[1].split(";")[0]
    assert json.loads(open(kept).read())["rows"][0]["model"] == "digits"
    r = _cli("results", "import", kept, "--db", db, "--json", "-")
    assert r.returncode == 0, r.stderr
    (imp,) = json.loads(r.stdout)["rows"]
    got = Store(db).get(imp["run_id"])
    assert got["rows"][0]["samples_ns"] == np.asarray(doc["rows"][0]["samples_ns"]).tolist()
    bad = tmp_path / "bad.json"
    bad.write_text('{"rows": 3}')
    r = _cli("results", "import", str(bad), "--db", db)
    assert r.returncode == 2 and "not an edgebench result" in r.stderr


def test_renderers_show_user_text_verbatim(db):
    """Model names and errors with [brackets] are text, not rich markup."""
    from rich.console import Console

    from edgebench.report.terminal.results import render_runs, render_show

    st = Store(db)
    rid = st.save(envelope("bench", [{"model": "[bold]m[/]", "status": "failed", "error": "bad [/x] tag"}], FP),
                  cell={"key": "model=[red]"})
    con = Console(record=True, width=200)
    con.print(render_runs(st.list_runs(), st.where))
    for part in render_show(st.get(rid)):
        con.print(part)
    text = con.export_text()
    assert "[bold]m[/]" in text and "bad [/x] tag" in text and "model=[red]" in text


def test_history_never_joins_differing_configurations(db):
    # Issue 18.5: threads 1 / 2 / default, 200 vs 18,000 samples, and two training strategies.
    st = Store(db)
    for i in range(12):
        doc = bench_doc(p99=2.0 + 0.01 * i, n=800, seed=i, created=f"2026-11-{i + 1:02d}T10:00:00+00:00")
        row = doc["rows"][0]
        row["threads"] = row["threads_effective"] = (1, 2)[i % 2]
        row["runtime"] = "ai_edge_litert 2.3.0"
        if i % 2:  # twice the threads: half the latency, which must not read as a step
            row["latency_ms"] = {**row["latency_ms"], "p99": 1.0 + 0.01 * i}
        st.save(doc)
    short = bench_doc(p99=9.0, n=200, created="2026-11-20T10:00:00+00:00")
    short["rows"][0].update(threads=1, threads_effective=1, runtime="ai_edge_litert 2.3.0")
    st.save(short)
    for strategy, ex in (("none", 2571.0), ("multiworker", 892.0)):
        for j in range(5):
            st.save(envelope("train", [{"model": "digits", "status": "ok", "examples_per_s": ex + j,
                                         "strategy": strategy, "precision": "fp32", "batch_size": 64,
                                         "xla": False, "input_pipeline": "optimized",
                                         "target": f"train:{strategy}"}], FP))
    from edgebench.judge.stats import history_series

    lines = history_series(st, "p99", model="digits")
    assert sorted((h["series"]["threads"], len(h["points"]), h["left_out"]) for h in lines) == [(1, 6, 1), (2, 6, 0)]
    assert all(not h["steps"] for h in lines)                 # no fake level shift between thread counts
    (one,) = [h for h in lines if h["series"]["threads"] == 1]
    assert "p99 from fewer than 662 samples" in one["left_out_reason"]
    train = history_series(st, "throughput", model="digits")
    assert sorted((h["series"]["strategy"], len(h["points"])) for h in train) == [("multiworker", 5), ("none", 5)]
    assert all(not h["steps"] for h in train)


def test_compare_takes_run_to_run_noise_from_stored_history(db):
    st = Store(db)
    rng = np.random.default_rng(3)
    ids = []
    for i in range(12):   # the same configuration, 3% run-to-run noise on the p50
        doc = bench_doc(seed=i, n=800, created=f"2026-11-{i + 1:02d}T10:00:00+00:00")
        f = float(rng.lognormal(0, 0.03)) * (1.4 if i == 11 else 1.0)
        row = doc["rows"][0]
        row["samples_ns"] = (np.asarray(row["samples_ns"]) * f).astype(np.int64)
        row["latency_ms"] = {**row["latency_ms"], "p50": f, "mean": 1.1 * f, "qps": 909.0 / f}
        ids.append(st.save(doc))
    from edgebench.judge.stats import compare_stored

    rep = compare_stored(st, ids[8], ids[11])
    (pair,) = rep["pairs"]
    ch = {c.metric: c for c in pair["changes"]}
    assert "history" in pair["basis"]
    assert ch["p50 ms"].basis == "history" and ch["p50 ms"].verdict == "worse"
    assert "stored runs of this configuration" in ch["p50 ms"].note
    rep = compare_stored(st, ids[9], ids[10])
    assert rep["regressions"] == 0


def test_model_filter_finds_the_names_a_model_is_stored_under(db, run_cli):
    """Docs item of issue 18: `results list --model digits` finds compare rows (digits-tiny) and
    bench rows (digits-tiny_int8), never another model whose name merely starts alike."""
    from edgebench.store.db import model_family_names

    assert "digits-tiny_int8" in model_family_names("digits") and "digitsnet" not in model_family_names("digits")
    assert set(model_family_names("digits-tiny")) == {"digits-tiny"} | {f"digits-tiny_{p}" for p in
                                                                        ("fp32", "fp16", "int8", "dynamic")}
    with Store(db) as st:
        ids = {m: st.save(bench_doc(model=m)) for m in ("digits-tiny", "digits-tiny_int8", "digitsnet", "digits-full")}
        found = {r["run_id"] for r in st.list_runs(model="digits")}
        assert found == {ids["digits-tiny"], ids["digits-tiny_int8"], ids["digits-full"]}
        assert {r["run_id"] for r in st.list_runs(model="digits-tiny")} == {ids["digits-tiny"], ids["digits-tiny_int8"]}
        assert {p["run_id"] for p in st.history("p99", model="digits-tiny")} == {ids["digits-tiny"]}   # series: exact
    code, out, err = run_cli("results", "list", "--model", "digits", "--db", db, "--json", "-")
    assert code == 0, err
    assert {r["run_id"] for r in json.loads(out)["rows"]} == found
    code, out, err = run_cli("results", "export", "--format", "json", "--model", "digits", "--db", db)
    assert code == 0 and {r["model"] for r in json.loads(out)["rows"]} == {"digits-tiny", "digits-tiny_int8",
                                                                          "digits-full"}


def test_results_import_of_the_same_document_twice_stores_it_once(tmp_path):
    """Issue 25.4: import is idempotent by content hash, also for a --json file of a run that
    the measuring command already stored; a document that differs in one value is new."""
    db = str(tmp_path / "r.db")
    doc = bench_doc()
    rid = Store(db).save(doc)                       # as publish() stores a measured run
    f = tmp_path / "run.json"
    f.write_text(json.dumps(store_mod.to_jsonable(doc)))
    for _ in range(2):
        r = _cli("results", "import", str(f), "--db", db, "--json", "-")
        assert r.returncode == 0, r.stderr
        (imp,) = json.loads(r.stdout)["rows"]
        assert imp["run_id"] == rid and imp["new"] is False
    r = _cli("results", "import", str(f), "--db", db)
    assert r.returncode == 0 and "already stored" in r.stdout and rid[:12] in r.stdout
    assert len(Store(db).list_runs()) == 1
    other = tmp_path / "other.json"
    changed = store_mod.to_jsonable(doc)
    changed["rows"][0]["samples_ns"][0] += 1        # one nanosecond differs: another result
    other.write_text(json.dumps(changed))
    r = _cli("results", "import", str(other), "--db", db, "--json", "-")
    (imp,) = json.loads(r.stdout)["rows"]
    assert r.returncode == 0 and imp["new"] is True and imp["run_id"] != rid
    assert len(Store(db).list_runs()) == 2


def test_migration_backfills_content_hashes_of_an_0_1_0_database(tmp_path):
    """Every run of the database written by edgebench 0.1.0 gets its content hash and verdict
    columns on migration:
    re-importing a run exported from it (`results show --json`) finds that run."""
    import shutil
    from pathlib import Path

    db = tmp_path / "old.db"
    shutil.copy(Path(__file__).parent / "fixtures" / "store" / "results-0.1.0.db", db)
    st = Store(str(db))
    assert st.schema_version() == store_mod.SCHEMA_VERSION
    runs = st.list_runs(limit=None)
    assert runs
    for run in runs:
        got = st.get(run["run_id"])
        assert st.save_once(got) == (run["run_id"], False)
        assert run["verdict"] in ("ok", "failed", "silent", "gate-failed", "nonfinite", "skipped")
        assert run["verdict_text"]
    assert len(st.list_runs(limit=None)) == len(runs)
    rows = st.rows()
    assert rows and all(r["verdict"] is not None and r["verdict_text"] for r in rows)
    assert all(r["precision_label"] == r["precision"] for r in rows if r["precision"])
