"""The results store against a real PostgreSQL server (EDGEBENCH_TEST_PG_URL, set by scripts/test).

Each test gets its own fresh database on that server, dropped afterwards.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid

import numpy as np
import pytest
import sqlalchemy as sa

from edgebench.core.errors import BadInput
from edgebench.core.result_file import envelope
from edgebench.store import db as store_mod
from edgebench.store.db import Store

PG_URL = os.environ.get("EDGEBENCH_TEST_PG_URL")
pytestmark = pytest.mark.skipif(not PG_URL, reason="EDGEBENCH_TEST_PG_URL not set (scripts/test starts "
                                                   "PostgreSQL and sets it)")

# The same writer as the SQLite two-process test.
try:  # tests/ is on sys.path under pytest's default import mode
    from test_store import WRITER, bench_doc  # noqa: E402
except ImportError:  # tests/ made a package
    from tests.test_store import WRITER, bench_doc  # noqa: E402


@pytest.fixture
def pg_url():
    admin = sa.create_engine(PG_URL, isolation_level="AUTOCOMMIT")
    name = f"edgebench_test_{uuid.uuid4().hex[:12]}"
    with admin.connect() as c:
        c.exec_driver_sql(f'CREATE DATABASE "{name}"')
    url = sa.engine.make_url(PG_URL).set(database=name).render_as_string(hide_password=False)
    yield url
    with admin.connect() as c:
        c.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    admin.dispose()


def test_round_trip_and_filters_pg(pg_url):
    st = Store(pg_url)
    doc = bench_doc(created="2026-11-01T10:00:00+00:00")
    rid = st.save(doc)
    rid2 = st.save(bench_doc(model="bert", p99=3.0, created="2026-11-02T10:00:00+00:00"),
                   matrix_hash="mh", cell={"key": "model=bert"})
    got = st.get(rid[:10])
    assert got["run_id"] == rid
    np.testing.assert_array_equal(got["rows"][0]["samples_ns"], doc["rows"][0]["samples_ns"])
    np.testing.assert_array_equal(st.samples(rid, 0), doc["rows"][0]["samples_ns"])
    (row,) = st.rows(model="bert")
    assert row["p99_ms"] == 3.0 and row["p99_valid"] is True and row["psnr_db"] == 38.5
    assert [r["run_id"] for r in st.list_runs()] == [rid2, rid]
    assert [r["run_id"] for r in st.list_runs(since="2026-11-02")] == [rid2]
    assert st.cell_keys("mh") == {"model=bert"}
    assert [p["value"] for p in st.history("p99", model="digits")] == [2.0]
    assert st.schema_version() == store_mod.SCHEMA_VERSION
    st.save(envelope("train", [{"model": "resnet50", "status": "ok", "examples_per_s": 12.5,
                                "batch_size": 32}], {}))
    assert st.history("throughput", model="resnet50")[0]["value"] == 12.5


def test_save_once_and_migration_from_schema_1_pg(pg_url):
    """PostgreSQL: a schema-1 database gains the content hash and verdict columns on first open,
    and the same document saved once more is found, not stored again (advisory lock per hash)."""
    doc = bench_doc(created="2026-11-01T10:00:00+00:00")
    st = Store(pg_url)
    rid = st.save(doc)
    eng = sa.create_engine(pg_url)
    with eng.begin() as c:        # make it a schema-1 database: drop what version 2 added
        for table, col in (("runs", "content_sha256"), ("runs", "verdict"), ("runs", "gate"),
                           ("runs", "verdict_text"), ("results", "verdict"), ("results", "verdict_text"),
                           ("results", "precision_label")):
            c.exec_driver_sql(f"ALTER TABLE {table} DROP COLUMN {col}")
        c.exec_driver_sql("UPDATE schema_meta SET value='1' WHERE key='schema_version'")
    eng.dispose()
    st = Store(pg_url)
    assert st.schema_version() == store_mod.SCHEMA_VERSION
    assert st.list_runs()[0]["verdict"] == "ok"
    assert st.save_once(doc) == (rid, False)
    assert st.save_once(bench_doc(p99=9.0))[1] is True
    assert len(st.list_runs()) == 2


def test_newer_schema_refused_pg(pg_url):
    Store(pg_url)
    eng = sa.create_engine(pg_url)
    with eng.begin() as c:
        c.exec_driver_sql("UPDATE schema_meta SET value='7' WHERE key='schema_version'")
    eng.dispose()
    with pytest.raises(BadInput, match="schema version 7, newer"):
        Store(pg_url)


def test_two_processes_lose_no_rows_pg(pg_url, tmp_path):
    go = tmp_path / "go"
    # No pre-created schema: both writers race on the first-time CREATE as well.
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, pg_url, tag, str(go)],
                              stderr=subprocess.PIPE, text=True) for tag in ("a", "b")]
    go.write_text("go")
    errs = [p.communicate(timeout=240)[1] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], errs
    st = Store(pg_url)
    runs = st.list_runs(limit=None)
    assert len(runs) == 100 and len({r["run_id"] for r in runs}) == 100
    assert len(st.rows()) == 200
    assert st.cell_keys("concurrency") == {f"{t}-{i}" for t in "ab" for i in range(50)}
