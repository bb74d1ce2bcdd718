"""The results database: every measured result, its raw samples and its environment.

SQLAlchemy Core over SQLite (the default, one file) or any SQLAlchemy URL (PostgreSQL for a
team). Reports and exports read from here, so any report can be rebuilt later ("store first,
report from the store").

Tables (schema version ``SCHEMA_VERSION``, recorded in ``schema_meta``):

``runs``     one row per saved result document: ``run_id`` (32 hex), ``created`` (UTC ISO, from the
             document), ``kind``, ``status`` ("ok" when every row is ok, else "failed"/"skipped"),
             ``matrix_hash`` / ``cell_key`` / ``cell_json`` (matrix runs), the fingerprint JSON,
             edgebench version and git SHA, ``models`` (comma-joined), ``n_rows``, ``doc_json``
             (the full document with each row's ``samples_ns`` moved out) and ``content_sha256``
             (``content_hash`` of the document as saved: ``results import`` of the same file
             twice finds the first run instead of storing a copy).
``results``  one row per ``doc["rows"]`` entry: ``HEADLINE`` columns (NULL when absent) and the raw
             latency samples (``samples``: zlib-compressed little-endian int64 ns).

Concurrency: each ``save`` is one transaction. SQLite uses WAL, a busy timeout and
``BEGIN IMMEDIATE`` for writes (so two writers queue instead of failing on a lock upgrade), and
retries "database is locked" until ``timeout_s``; PostgreSQL serialises schema creation with an
advisory lock. Several processes can write at once without losing rows.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import re
import time
import uuid
import zlib
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator

import numpy as np
import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import Connection, Engine

from edgebench.core.errors import BadInput, InfraError, first_line
from edgebench.core.paths import data_dir
from edgebench.core.printable import shown
from edgebench.core.redact import redact, redact_url
from edgebench.core.result_file import to_jsonable
from edgebench.judge.outcome import precision_label, row_verdict_of, run_verdict_of
from edgebench.rows.identity import HEADLINE, headline, headline_columns, series_key
from edgebench.rows.metrics import metric

if TYPE_CHECKING:
    from edgebench.rows import Document

# Version of the table layout. Bump it and add ``_MIGRATIONS[old] = fn`` (old -> old + 1) when
# the layout changes; a database from a newer edgebench is refused rather than misread.
SCHEMA_VERSION = 2
_MIGRATIONS: dict[int, Callable[[Connection], None]] = {}  # filled below the table definitions

SAMPLES_CODEC = "zlib-i64le"

def _sa_type(name: str) -> Any:
    """The SQLAlchemy type of a headline column type name (``identity.headline_columns``)."""
    if name.startswith("str"):
        return sa.String(int(name[3:]))
    return {"int": sa.Integer(), "bigint": sa.BigInteger(), "float": sa.Float(), "bool": sa.Boolean()}[name]


# The registry's columns as stored: recorded in schema_meta, so a database written before a metric
# was added gets its column (and the values, from the stored documents) on first open.
METRIC_COLUMNS_KEY = "metric_columns"
METRIC_COLUMNS = ",".join(name for name, _ in headline_columns())


def _schema_version_of(doc: dict[str, Any]) -> int | None:
    v = doc.get("schema_version")
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _metadata() -> tuple[sa.MetaData, sa.Table, sa.Table, sa.Table]:
    md = sa.MetaData()
    meta = sa.Table(
        "schema_meta", md,
        sa.Column("key", sa.String(64), primary_key=True),
        sa.Column("value", sa.String(256), nullable=False),
    )
    runs = sa.Table(
        "runs", md,
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("run_id", sa.String(32), nullable=False, unique=True),
        sa.Column("created", sa.String(40), nullable=False, index=True),
        sa.Column("saved_at", sa.String(40), nullable=False),
        sa.Column("kind", sa.String(32), nullable=False, index=True),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("doc_schema_version", sa.Integer),
        sa.Column("edgebench_version", sa.String(64)),
        sa.Column("git_sha", sa.String(64)),
        sa.Column("hostname", sa.String(256)),
        sa.Column("matrix_hash", sa.String(64), index=True),
        sa.Column("cell_key", sa.String(1024)),
        sa.Column("cell_json", sa.Text),
        sa.Column("models", sa.Text),
        sa.Column("n_rows", sa.Integer, nullable=False),
        sa.Column("fingerprint_json", sa.Text),
        sa.Column("doc_json", sa.Text, nullable=False),
        sa.Column("content_sha256", sa.String(64), index=True),
        sa.Column("verdict", sa.String(16), index=True),   # outcome.run_verdict: worst row state
        sa.Column("gate", sa.String(8), index=True),       # "passed" | "failed" | NULL (no gate ran)
        sa.Column("verdict_text", sa.Text),                # the one line every output shows first
    )
    results = sa.Table(
        "results", md,
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("run_id", sa.String(32), sa.ForeignKey("runs.run_id", ondelete="CASCADE"),
                  nullable=False, index=True),
        sa.Column("row_index", sa.Integer, nullable=False),
        *[sa.Column(name, _sa_type(typ)) for name, typ in headline_columns()],
        sa.Column("verdict", sa.String(16), index=True),   # outcome.row_verdict state
        sa.Column("verdict_text", sa.Text),
        sa.Column("precision_label", sa.String(64)),       # "int8 +1 float" (outcome.precision_label)
        sa.Column("n_samples", sa.Integer),
        sa.Column("samples_codec", sa.String(32)),
        sa.Column("samples", sa.LargeBinary),
        sa.UniqueConstraint("run_id", "row_index", name="uq_results_run_row"),
        sa.Index("ix_results_model_prec_target", "model", "precision", "target"),
    )
    return md, meta, runs, results


_MD, T_META, T_RUNS, T_RESULTS = _metadata()


def content_hash(doc: dict[str, Any]) -> str:
    """sha256 of a result document's content: its canonical JSON (sorted keys, the JSON form
    ``--json`` writes, samples included). The same document read from its ``--json`` file, from
    ``unsaved/`` or rebuilt from the store (``Store.get`` without the store's own keys) hashes the
    same; any measured value, timestamp or fingerprint field that differs changes it."""
    body = {k: v for k, v in to_jsonable(doc).items() if k not in _STORE_KEYS}
    rows = []
    for row in body.get("rows") or []:
        if isinstance(row, dict):   # samples as the store keeps them: int64, absent when null
            row = {k: v for k, v in row.items() if k not in ("samples_ns", "samples_ns_stored")}
            samples = to_jsonable(doc["rows"][len(rows)]).get("samples_ns")
            if samples is not None:
                row["samples_ns"] = np.asarray(samples, dtype=np.int64).ravel().tolist()
        rows.append(row)
    body["rows"] = rows
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(text.encode()).hexdigest()


# Keys ``Store.get`` adds to a document; not part of its content.
_STORE_KEYS = ("run_id", "matrix_hash", "cell")


def _migrate_1_to_2(conn: Connection) -> None:
    """Schema 1 -> 2: ``runs.content_sha256`` and the verdict columns of runs and results, each
    filled from the stored document (samples restored for the hash, so a file imported before
    the upgrade is recognised after it)."""
    for table, col, typ in (("runs", "content_sha256", "VARCHAR(64)"), ("runs", "verdict", "VARCHAR(16)"),
                            ("runs", "gate", "VARCHAR(8)"), ("runs", "verdict_text", "TEXT"),
                            ("results", "verdict", "VARCHAR(16)"), ("results", "verdict_text", "TEXT"),
                            ("results", "precision_label", "VARCHAR(64)")):
        conn.execute(sa.text(f"ALTER TABLE {table} ADD COLUMN {col} {typ}"))
    for table, col in (("runs", "content_sha256"), ("runs", "verdict"), ("runs", "gate"), ("results", "verdict")):
        conn.execute(sa.text(f"CREATE INDEX ix_{table}_{col} ON {table} ({col})"))
    runs = conn.execute(sa.select(T_RUNS.c.run_id, T_RUNS.c.doc_json)).all()
    for run in runs:
        samples = {r.row_index: (r.samples, r.samples_codec) for r in conn.execute(
            sa.select(T_RESULTS.c.row_index, T_RESULTS.c.samples, T_RESULTS.c.samples_codec)
            .where(T_RESULTS.c.run_id == run.run_id))}
        doc = _restore_samples(json.loads(run.doc_json), samples)
        verdicts = _verdicts(doc)
        conn.execute(sa.update(T_RUNS).where(T_RUNS.c.run_id == run.run_id)
                     .values(content_sha256=content_hash(doc), **verdicts["run"]))
        for i, cols in enumerate(verdicts["rows"]):
            conn.execute(sa.update(T_RESULTS).where(T_RESULTS.c.run_id == run.run_id,
                                                     T_RESULTS.c.row_index == i).values(**cols))


def _verdicts(doc: dict[str, Any]) -> dict[str, Any]:
    """The verdict columns of a run and of each of its rows (``outcome``)."""
    rv = run_verdict_of(doc)
    rows = []
    for r in doc.get("rows") or []:
        r = r if isinstance(r, dict) else {}
        v = row_verdict_of(doc, r)
        rows.append({"verdict": v.state, "verdict_text": v.text,
                     "precision_label": precision_label(r)[:64] if r.get("precision") else None})   # the column's width
    return {"run": {"verdict": rv.state, "gate": rv.gate, "verdict_text": rv.text}, "rows": rows}


_MIGRATIONS[1] = _migrate_1_to_2


def _add_metric_columns(conn: Connection) -> None:
    """The generic migration: add every headline column the registry has and ``results`` lacks,
    filled from each stored document (a row without the number stays NULL)."""
    have = {c["name"] for c in sa.inspect(conn).get_columns("results")}
    missing = [(name, typ) for name, typ in headline_columns() if name not in have]
    for name, typ in missing:
        ddl = _sa_type(typ).compile(dialect=conn.dialect)
        conn.execute(sa.text(f'ALTER TABLE results ADD COLUMN "{name}" {ddl}'))
    if missing:
        names = [n for n, _ in missing]
        for run in conn.execute(sa.select(T_RUNS.c.run_id, T_RUNS.c.kind, T_RUNS.c.doc_json)).all():
            for i, row in enumerate(json.loads(run.doc_json).get("rows") or []):
                if not isinstance(row, dict):
                    continue
                head = headline(row, kind=run.kind)
                values = {n: head[n] for n in names if head[n] is not None}
                if values:
                    conn.execute(sa.update(T_RESULTS).where(T_RESULTS.c.run_id == run.run_id,
                                                             T_RESULTS.c.row_index == i).values(**values))
    stamp = conn.execute(sa.select(T_META.c.value).where(T_META.c.key == METRIC_COLUMNS_KEY)).scalar()
    if stamp is None:
        conn.execute(sa.insert(T_META).values(key=METRIC_COLUMNS_KEY, value=METRIC_COLUMNS[:256]))
    elif stamp != METRIC_COLUMNS[:256]:
        conn.execute(sa.update(T_META).where(T_META.c.key == METRIC_COLUMNS_KEY).values(value=METRIC_COLUMNS[:256]))


def _restore_samples(doc: dict[str, Any], samples: dict[int, tuple[Any, Any]]) -> dict[str, Any]:
    """Put each row's ``samples_ns`` back into a stored document (in place; returns it)."""
    for i, row in enumerate(doc.get("rows", [])):
        if isinstance(row, dict) and row.pop("samples_ns_stored", False):
            blob, codec = samples.get(i, (None, None))
            row["samples_ns"] = decode_samples(blob, codec).tolist()
    return doc


MODEL_SIZES = ("tiny", "full")
MODEL_PRECISIONS = ("fp32", "fp16", "int8", "dynamic")


def model_family_names(model: str) -> tuple[str, ...]:
    """The names results of one model are stored under: convert-and-compare rows carry the source
    name (``digits-tiny`` for the reference model ``digits`` at size tiny), bench rows the file stem
    (``digits-tiny_int8``). ``digits`` -> itself, ``digits-tiny``, ``digits-full`` and each with a
    ``_<precision>`` suffix; ``digits-tiny`` -> itself and ``digits-tiny_<precision>``. Exact names,
    so ``digits`` never matches ``digitsnet``."""
    bases = [model] + ([f"{model}-{s}" for s in MODEL_SIZES] if not model.endswith(
        tuple(f"-{s}" for s in MODEL_SIZES)) else [])
    return tuple(b + suffix for b in bases for suffix in ("", *(f"_{p}" for p in MODEL_PRECISIONS)))


def encode_samples(samples: Any) -> bytes:
    """int64 ns samples -> zlib(little-endian int64 bytes)."""
    arr = np.asarray(samples, dtype=np.int64).astype("<i8", copy=False)
    return zlib.compress(arr.tobytes(), 6)


def decode_samples(blob: bytes | None, codec: str | None = SAMPLES_CODEC) -> np.ndarray:
    if not blob:
        return np.zeros(0, dtype=np.int64)
    if codec != SAMPLES_CODEC:
        raise InfraError(f"stored samples use codec {codec!r}, which this edgebench cannot read; "
                         "upgrade edgebench")
    return np.frombuffer(zlib.decompress(blob), dtype="<i8").astype(np.int64)


def _utc_iso(value: Any) -> str:
    """Any ISO timestamp (or datetime) -> 'YYYY-MM-DDTHH:MM:SS.ffffff+00:00' (sortable text)."""
    if isinstance(value, _dt.datetime):
        t = value
    else:
        s = str(value).strip()
        if s.endswith("Z"):
            s = s[:-1] + "+00:00"
        t = _dt.datetime.fromisoformat(s)
    if t.tzinfo is None:
        t = t.replace(tzinfo=_dt.timezone.utc)
    return t.astimezone(_dt.timezone.utc).isoformat(timespec="microseconds")


_SINCE_REL = re.compile(r"^(\d+)\s*([mhdw])$")


def parse_since(since: Any) -> str | None:
    """'2026-12-01', an ISO datetime, a datetime, or relative '30m' / '12h' / '7d' / '2w'."""
    if since is None or since == "":
        return None
    if isinstance(since, _dt.datetime):
        return _utc_iso(since)
    s = str(since).strip()
    m = _SINCE_REL.match(s)
    if m:
        n, unit = int(m.group(1)), m.group(2)
        delta = {"m": _dt.timedelta(minutes=n), "h": _dt.timedelta(hours=n),
                 "d": _dt.timedelta(days=n), "w": _dt.timedelta(weeks=n)}[unit]
        return _utc_iso(_dt.datetime.now(_dt.timezone.utc) - delta)
    try:
        return _utc_iso(s)
    except ValueError:
        raise BadInput(f"--since {since!r} is not a date; use an ISO date (2026-12-01), a datetime "
                       "(2026-12-01T10:00) or a relative age such as 12h, 7d, 2w") from None


def _run_status(rows: list[dict[str, Any]]) -> str:
    statuses = {str(r.get("status") or "ok") for r in rows if isinstance(r, dict)}
    if not statuses or statuses == {"ok"}:
        return "ok"
    if "failed" in statuses:
        return "failed"
    if statuses <= {"ok", "skipped"} and "ok" in statuses:
        return "ok"
    return "skipped" if statuses == {"skipped"} else "failed"


# --------------------------------------------------------------------------------------------
# the store


def default_url() -> str:
    """$EDGEBENCH_DB, else a SQLite file under the user data dir."""
    env = os.environ.get("EDGEBENCH_DB")
    if env:
        return env

    return str(data_dir() / "results.db")


def _to_url(url: str) -> sa.engine.URL:
    if "://" in url:
        try:
            return sa.engine.make_url(url)
        except Exception as exc:  # noqa: BLE001 -- sqlalchemy raises ArgumentError
            # SQLAlchemy found no parts in it: all after the scheme is masked, in the URL and in the reason
            reason = shown(redact(first_line(exc), url, parsed=False), quote=False)
            raise BadInput(f"--db {redact_url(url, parsed=False)} is not a database URL ({reason}); give a file "
                           "path or a URL such as postgresql+psycopg2://user@host/db") from None
    p = Path(url).expanduser()
    if p.is_dir():
        raise BadInput(f"--db {redact_url(url)} is a directory; give a file path such as "
                       f"{redact(str(p / 'results.db'), url)}")
    if not p.parent.exists():
        raise BadInput(f"--db {redact_url(url)}: directory {redact(str(p.parent), url)} does not exist; create it "
                       "or pick another path")
    return sa.engine.URL.create("sqlite", database=str(p.resolve()))


def _redact(url: sa.engine.URL) -> str:
    """The store's URL as messages show it (edgebench.core.redact: userinfo and secret query values masked)."""
    return redact_url(url.render_as_string(hide_password=False))


_LOCKED = ("database is locked", "database table is locked", "busy")


class Store:
    """Results database. ``url``: None -> $EDGEBENCH_DB or the default SQLite file; a plain path
    -> SQLite; any SQLAlchemy URL (``postgresql+psycopg2://...``).

    ``timeout_s`` bounds how long a write waits for another writer's lock before InfraError.
    """

    def __init__(self, url: str | None = None, *, timeout_s: float = 30.0) -> None:
        self._given = url or default_url()      # shown redacted as given: SQLAlchemy renders '#x' as '%23x'
        self.url = _to_url(self._given)
        self._raw = self.url.render_as_string(hide_password=False)
        self.is_sqlite = self.url.get_backend_name() == "sqlite"
        self.where = _redact(self.url) if self.is_sqlite else redact_url(self._given)
        self.timeout_s = float(timeout_s)
        self.engine = self._make_engine()
        self._ensure_schema()

    # ---- engine and transactions ---------------------------------------------------------

    def _make_engine(self) -> Engine:
        try:
            if self.is_sqlite:
                eng = sa.create_engine(self.url, connect_args={"timeout": self.timeout_s},
                                       poolclass=sa.pool.NullPool)
                busy_ms = int(self.timeout_s * 1000)

                @event.listens_for(eng, "connect")
                def _on_connect(dbapi_conn, _record):  # pragma: no cover - trivial
                    # Let SQLAlchemy issue BEGIN itself (below) so writes can use IMMEDIATE.
                    dbapi_conn.isolation_level = None
                    cur = dbapi_conn.cursor()
                    cur.execute(f"PRAGMA busy_timeout = {busy_ms}")
                    cur.execute("PRAGMA foreign_keys = ON")
                    try:
                        cur.execute("PRAGMA journal_mode = WAL")
                    except Exception:  # noqa: BLE001 -- read-only file: keep its journal mode
                        pass
                    cur.close()

                @event.listens_for(eng, "begin")
                def _on_begin(conn):
                    write = conn.get_execution_options().get("edgebench_write", False)
                    conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")

                return eng
            return sa.create_engine(self.url, pool_pre_ping=True, pool_size=2, max_overflow=2)
        except ModuleNotFoundError as exc:
            # the user's --db names a driver this install lacks: bad input they can fix (exit 2)
            how = ("pip install 'edgebench[postgres]' (psycopg2)" if self.url.get_backend_name() == "postgresql"
                   else f"install the Python package that provides {exc.name}, or pass a SQLite path")
            raise BadInput(f"--db {self.where}: the database driver {exc.name!r} is not installed; {how}") from None
        except sa.exc.ArgumentError as exc:
            raise BadInput(f"--db {self.where}: {redact(str(exc), self._raw, self._given)}") from None

    def _explain(self, exc: Exception, action: str) -> Exception:
        msg = str(getattr(exc, "orig", exc)).strip().splitlines()[0] if str(exc) else type(exc).__name__
        msg = redact(msg, self._raw, self._given)     # a driver's message may quote the URL it was given
        low = msg.lower()
        if any(s in low for s in _LOCKED):
            return InfraError(f"results database {self.where} is locked by another process "
                              f"(waited {self.timeout_s:g} s while {action}); retry when the other "
                              "writer has finished, or use a PostgreSQL --db for many writers")
        if "readonly" in low or "read-only" in low or "read only" in low:
            return InfraError(f"results database {self.where} is read-only ({msg}) while {action}; "
                              "make it writable or pass --db with a writable path")
        if "unable to open" in low:          # the path the user gave (--db, $EDGEBENCH_DB): exit 2
            return BadInput(f"--db {self.where}: cannot open the results database ({msg}); check the path "
                            "and its permissions, or pass another --db")
        if "could not translate host name" in low or "invalid dsn" in low or "invalid connection option" in low:
            return BadInput(f"--db {self.where}: {msg}; check the host and options of the URL")
        if "connection refused" in low or "timeout expired" in low:
            return InfraError(f"results database {self.where} is not reachable ({msg}); start the server or "
                              "check the host and port in --db")
        if "file is not a database" in low or "malformed" in low:
            return BadInput(f"--db {self.where} is not an edgebench results database ({msg}); "
                            "pass another --db")
        return InfraError(f"results database {self.where} failed while {action}: {msg}")

    @contextmanager
    def _tx(self, action: str, *, write: bool) -> Iterator[Connection]:
        """One transaction; SQLite writes take the write lock up front (BEGIN IMMEDIATE)."""
        try:
            with self.engine.connect() as raw:
                conn = raw.execution_options(edgebench_write=write) if self.is_sqlite else raw
                with conn.begin():
                    yield conn
        except (BadInput, InfraError):
            raise
        except sa.exc.DBAPIError as exc:
            raise self._explain(exc, action) from None
        except sa.exc.SQLAlchemyError as exc:
            raise InfraError(f"results database {self.where} failed while {action}: {exc}") from None

    def _retrying(self, action: str, fn: Callable[[Connection], Any], *, write: bool) -> Any:
        """Run ``fn`` in a transaction; retry lock/serialisation conflicts until ``timeout_s``."""
        deadline = time.monotonic() + self.timeout_s
        delay = 0.05
        while True:
            try:
                with self._tx(action, write=write) as conn:
                    return fn(conn)
            except InfraError as err:
                transient = "is locked" in str(err) or "could not serialize" in str(err) \
                    or "deadlock" in str(err)
                if not transient or time.monotonic() >= deadline:
                    raise
                time.sleep(delay)
                delay = min(delay * 2, 1.0)

    # ---- schema --------------------------------------------------------------------------

    def _read_version(self, conn: Connection) -> int | None:
        if not sa.inspect(conn).has_table("schema_meta"):
            return None
        v = conn.execute(sa.select(T_META.c.value).where(T_META.c.key == "schema_version")).scalar()
        try:
            return None if v is None else int(v)
        except ValueError:
            raise BadInput(f"--db {self.where}: schema_meta.schema_version is {v!r}, not a number; "
                           "this is not an edgebench results database") from None

    def _check_version(self, version: int | None) -> None:
        if version is not None and version > SCHEMA_VERSION:
            raise BadInput(f"results database {self.where} has schema version {version}, newer than "
                           f"this edgebench understands ({SCHEMA_VERSION}); upgrade edgebench or "
                           "pass another --db")

    def _ensure_schema(self) -> None:
        # Fast path: read-only check, so read-only databases can still be queried.
        version = self._retrying("reading the schema version", self._read_version, write=False)
        self._check_version(version)
        if version == SCHEMA_VERSION and self._retrying("reading the metric columns", self._metric_stamp,
                                                          write=False) == METRIC_COLUMNS[:256]:
            return

        def create_or_migrate(conn: Connection) -> None:
            if not self.is_sqlite and conn.dialect.name == "postgresql":
                # Serialise concurrent first-time creation/migration by several writers.
                conn.execute(sa.text("SELECT pg_advisory_xact_lock(:k)"), {"k": 0x6564676562})
            v = self._read_version(conn)
            self._check_version(v)
            if v is None:
                insp = sa.inspect(conn)
                if insp.has_table("runs") or insp.has_table("results"):
                    raise BadInput(f"--db {self.where} has 'runs'/'results' tables but no "
                                   "schema_meta; it is not an edgebench results database")
                _MD.create_all(conn)
                conn.execute(sa.insert(T_META).values(key="schema_version", value=str(SCHEMA_VERSION)))
                _add_metric_columns(conn)
                return
            while v < SCHEMA_VERSION:
                step = _MIGRATIONS.get(v)
                if step is None:
                    raise InfraError(f"results database {self.where} has schema version {v} and no "
                                     f"migration to {v + 1} exists; export it with an older "
                                     "edgebench and re-import")
                step(conn)
                v += 1
                conn.execute(sa.update(T_META).where(T_META.c.key == "schema_version")
                             .values(value=str(v)))
            _add_metric_columns(conn)

        self._retrying("creating or migrating the schema", create_or_migrate, write=True)

    def _metric_stamp(self, conn: Connection) -> str | None:
        return conn.execute(sa.select(T_META.c.value).where(T_META.c.key == METRIC_COLUMNS_KEY)).scalar()

    def schema_version(self) -> int | None:
        return self._retrying("reading the schema version", self._read_version, write=False)

    # ---- writing -------------------------------------------------------------------------

    def save(self, doc: "Document | dict[str, Any]", *, matrix_hash: str | None = None,
             cell: dict[str, Any] | None = None) -> str:
        """Store one result document (and its rows' samples); returns the new run id."""
        return self._save(doc, matrix_hash=matrix_hash, cell=cell, once=False)[0]

    def save_once(self, doc: "Document | dict[str, Any]") -> tuple[str, bool]:
        """``save`` unless a run with the same ``content_hash`` is stored already: returns
        (run id, True) for a new run, (the existing run's id, False) for a duplicate. The look-up
        and the insert are one write transaction (serialised on SQLite; an advisory lock on the
        hash on PostgreSQL), so two imports of one file at once store it once."""
        return self._save(doc, matrix_hash=None, cell=None, once=True)

    def _save(self, doc: "Document | dict[str, Any]", *, matrix_hash: str | None,
              cell: dict[str, Any] | None, once: bool) -> tuple[str, bool]:
        if hasattr(doc, "to_dict") and not isinstance(doc, dict):
            doc = doc.to_dict()
        if not isinstance(doc, dict) or not isinstance(doc.get("rows", []), list):
            raise BadInput("result document must be a dict with a 'rows' list (the envelope from "
                           "edgebench.core.result_file.envelope)")
        doc = to_jsonable(doc)
        rows = [r if isinstance(r, dict) else {"value": r} for r in doc.get("rows", [])]
        run_id = uuid.uuid4().hex
        now = _utc_iso(_dt.datetime.now(_dt.timezone.utc))
        try:
            created = _utc_iso(doc["created"]) if doc.get("created") else now
        except ValueError:
            raise BadInput(f"result document 'created' {doc.get('created')!r} is not an ISO "
                           "timestamp") from None
        stored_rows, result_rows = [], []
        verdicts = _verdicts({**doc, "rows": rows})
        for i, row in enumerate(rows):
            slim = dict(row)
            samples = slim.pop("samples_ns", None)
            stored_rows.append(slim)
            rec = {"run_id": run_id, "row_index": i, **headline(row, kind=doc.get("kind")),
                   **verdicts["rows"][i]}
            if samples is not None:
                arr = np.asarray(samples, dtype=np.int64).ravel()
                rec.update(n_samples=int(arr.size), samples_codec=SAMPLES_CODEC,
                           samples=encode_samples(arr))
                slim["samples_ns_stored"] = True
            else:
                rec.update(n_samples=None, samples_codec=None, samples=None)
            result_rows.append(rec)
        stored = dict(doc)
        stored["rows"] = stored_rows
        fp = doc.get("fingerprint") if isinstance(doc.get("fingerprint"), dict) else {}
        models = []
        for r in rows:
            m = r.get("model")
            if m is not None and str(m) not in models:
                models.append(str(m))
        cell_key = None
        if cell is not None:
            cell_key = str(cell.get("key") or json.dumps(to_jsonable(cell), sort_keys=True))
        run = {
            "run_id": run_id,
            "created": created,
            "saved_at": now,
            "kind": str(doc.get("kind") or "unknown"),
            "status": _run_status(rows),
            "doc_schema_version": _schema_version_of(doc),
            "edgebench_version": doc.get("edgebench_version"),
            "git_sha": fp.get("edgebench_git_sha") or doc.get("git_sha"),
            "hostname": fp.get("hostname"),
            "matrix_hash": matrix_hash,
            "cell_key": cell_key,
            "cell_json": None if cell is None else json.dumps(to_jsonable(cell), sort_keys=True),
            "models": ",".join(models),
            "n_rows": len(rows),
            "fingerprint_json": json.dumps(fp, sort_keys=True),
            "doc_json": json.dumps(stored),
            "content_sha256": content_hash(doc),
            **verdicts["run"],
        }

        def write(conn: Connection) -> tuple[str, bool]:
            if once:
                if conn.dialect.name == "postgresql":
                    key = int(run["content_sha256"][:15], 16)
                    conn.execute(sa.text("SELECT pg_advisory_xact_lock(:k)"), {"k": key})
                found = conn.execute(sa.select(T_RUNS.c.run_id)
                                     .where(T_RUNS.c.content_sha256 == run["content_sha256"])
                                     .order_by(T_RUNS.c.id).limit(1)).scalar()
                if found is not None:
                    return str(found), False
            conn.execute(sa.insert(T_RUNS).values(**run))
            if result_rows:
                conn.execute(sa.insert(T_RESULTS), result_rows)
            return run_id, True

        return self._retrying("saving a result", write, write=True)

    # ---- reading -------------------------------------------------------------------------

    def _resolve(self, conn: Connection, run_id: str) -> str:
        rid = str(run_id).strip().lower()
        if not re.fullmatch(r"[0-9a-f]{1,32}", rid):
            raise BadInput(f"run id {run_id!r} is not a run id; use one shown by `edgebench results list`")
        if len(rid) == 32:
            hits = conn.execute(sa.select(T_RUNS.c.run_id).where(T_RUNS.c.run_id == rid)).scalars().all()
        else:
            hits = conn.execute(sa.select(T_RUNS.c.run_id)
                                .where(T_RUNS.c.run_id.like(rid + "%")).limit(3)).scalars().all()
        if not hits:
            raise BadInput(f"no run {run_id!r} in {self.where}; list runs with `edgebench results list`")
        if len(hits) > 1:
            raise BadInput(f"run id prefix {run_id!r} matches several runs ({', '.join(h[:12] for h in hits)}"
                           "...); give more characters")
        return hits[0]

    def resolve(self, run_id: str) -> str:
        """Full run id for an id or a unique prefix (BadInput otherwise)."""
        return self._retrying("looking up a run", lambda c: self._resolve(c, run_id), write=False)

    def get(self, run_id: str) -> dict[str, Any]:
        """The stored document (as saved, with ``samples_ns`` restored) plus ``run_id``,
        ``matrix_hash`` and ``cell`` (when saved by a matrix)."""

        def read(conn: Connection) -> dict[str, Any]:
            rid = self._resolve(conn, run_id)
            run = conn.execute(sa.select(T_RUNS).where(T_RUNS.c.run_id == rid)).mappings().one()
            samples = conn.execute(
                sa.select(T_RESULTS.c.row_index, T_RESULTS.c.samples, T_RESULTS.c.samples_codec)
                .where(T_RESULTS.c.run_id == rid)).all()
            return {"run": dict(run), "samples": {r.row_index: (r.samples, r.samples_codec) for r in samples}}

        got = self._retrying("reading a run", read, write=False)
        run = got["run"]
        doc = _restore_samples(json.loads(run["doc_json"]), got["samples"])
        doc["run_id"] = run["run_id"]
        if run["matrix_hash"] is not None:
            doc["matrix_hash"] = run["matrix_hash"]
        if run["cell_json"] is not None:
            doc["cell"] = json.loads(run["cell_json"])
        return doc

    def samples(self, run_id: str, row_index: int) -> np.ndarray:
        """Raw latency samples (int64 ns) of one row; empty when the row has none."""
        def read(conn: Connection):
            rid = self._resolve(conn, run_id)
            return conn.execute(sa.select(T_RESULTS.c.samples, T_RESULTS.c.samples_codec)
                                .where(T_RESULTS.c.run_id == rid,
                                       T_RESULTS.c.row_index == int(row_index))).first()

        rec = self._retrying("reading samples", read, write=False)
        if rec is None:
            raise BadInput(f"run {run_id} has no row {row_index}; see `edgebench results show {run_id}`")
        return decode_samples(rec.samples, rec.samples_codec)

    def _row_filters(self, *, kind=None, model=None, precision=None, target=None, since=None,
                     matrix_hash=None, model_family: bool = False) -> list[Any]:
        conds: list[Any] = []
        if kind:
            conds.append(T_RUNS.c.kind == kind)
        if matrix_hash:
            conds.append(T_RUNS.c.matrix_hash == matrix_hash)
        s = parse_since(since)
        if s:
            conds.append(T_RUNS.c.created >= s)
        if model:
            names = model_family_names(str(model)) if model_family else (str(model),)
            conds.append(T_RESULTS.c.model.in_(names))
        if precision:
            conds.append(T_RESULTS.c.precision == precision)
        if target:
            conds.append(T_RESULTS.c.target == target)
        return conds

    def list_runs(self, *, kind=None, model=None, precision=None, target=None, since=None,
                  matrix_hash=None, limit: int | None = 50) -> list[dict[str, Any]]:
        """Run summaries, newest first: run_id, created, kind, status, verdict, gate, verdict_text
        (``outcome.run_verdict``), models, n_rows, matrix_hash,
        cell_key, edgebench_version, git_sha, hostname. ``model`` matches the stored name and the
        names stored for the same model (``model_family_names``: ``digits`` finds ``digits-tiny``
        and ``digits-tiny_int8``)."""
        cols = [T_RUNS.c.run_id, T_RUNS.c.created, T_RUNS.c.kind, T_RUNS.c.status, T_RUNS.c.verdict,
                T_RUNS.c.gate, T_RUNS.c.verdict_text, T_RUNS.c.models,
                T_RUNS.c.n_rows, T_RUNS.c.matrix_hash, T_RUNS.c.cell_key, T_RUNS.c.edgebench_version,
                T_RUNS.c.git_sha, T_RUNS.c.hostname]
        q = sa.select(*cols)
        conds = self._row_filters(kind=kind, since=since, matrix_hash=matrix_hash)
        if model or precision or target:
            sub = sa.select(T_RESULTS.c.run_id).where(
                *self._row_filters(model=model, precision=precision, target=target, model_family=True))
            conds.append(T_RUNS.c.run_id.in_(sub))
        q = q.where(*conds).order_by(T_RUNS.c.created.desc(), T_RUNS.c.id.desc())
        if limit:
            q = q.limit(int(limit))
        out = self._retrying("listing runs", lambda c: c.execute(q).mappings().all(), write=False)
        return [dict(r) for r in out]

    def latest(self, *, kind=None, matrix_hash=None) -> dict[str, Any] | None:
        """The newest run's full document, or None when there is none."""
        runs = self.list_runs(kind=kind, matrix_hash=matrix_hash, limit=1)
        return self.get(runs[0]["run_id"]) if runs else None

    def rows(self, *, kind=None, model=None, precision=None, target=None, since=None,
             matrix_hash=None, model_family: bool = False) -> list[dict[str, Any]]:
        """One dict per stored result row: run_id, created, kind, row_index, the HEADLINE columns,
        verdict, verdict_text, precision_label and n_samples; oldest first. ``model_family``: ``model`` also matches the names stored for
        the same model (``model_family_names``); off for series, which must not mix sizes."""
        cols = [T_RUNS.c.run_id, T_RUNS.c.created, T_RUNS.c.kind, T_RESULTS.c.row_index,
                *[T_RESULTS.c[name] for name in HEADLINE], T_RESULTS.c.verdict, T_RESULTS.c.verdict_text,
                T_RESULTS.c.precision_label, T_RESULTS.c.n_samples]
        q = (sa.select(*cols).select_from(T_RESULTS.join(T_RUNS, T_RESULTS.c.run_id == T_RUNS.c.run_id))
             .where(*self._row_filters(kind=kind, model=model, precision=precision, target=target,
                                       since=since, matrix_hash=matrix_hash, model_family=model_family))
             .order_by(T_RUNS.c.created, T_RUNS.c.id, T_RESULTS.c.row_index))
        out = self._retrying("reading result rows", lambda c: c.execute(q).mappings().all(), write=False)
        return [dict(r) for r in out]

    def history(self, metric_name: str, *, model: str, precision=None, target=None,
                kind=None) -> list[dict[str, Any]]:
        """A metric's values for one model: [{created, run_id, row_index, value, precision,
        target, batch_size, n_samples, p99_valid, series}] oldest first (rows with status != ok
        or no value are left out). ``series`` is the row's ``series_key``: points with different
        series keys belong to different lines."""
        col = metric(metric_name).key
        rows = [r for r in self.rows(kind=kind, model=model, precision=precision, target=target)
                if r["status"] == "ok" and r[col] is not None]
        docs = self._docs(sorted({r["run_id"] for r in rows}))
        out = []
        for r in rows:
            doc_rows = docs.get(r["run_id"], {}).get("rows") or []
            full = doc_rows[r["row_index"]] if r["row_index"] < len(doc_rows) else {}
            out.append({"created": r["created"], "run_id": r["run_id"], "row_index": r["row_index"],
                        "value": float(r[col]), "precision": r["precision"], "target": r["target"],
                        "batch_size": r["batch_size"], "n_samples": r["n_samples"],
                        "p99_valid": r["p99_valid"],
                        "series": series_key(full if isinstance(full, dict) else {})})
        return out

    def series_history(self, row: dict[str, Any], metric_name: str, *, kind=None, before: str | None = None,
                       exclude: tuple[str, ...] = ()) -> list[dict[str, Any]]:
        """Earlier values of ``metric`` for exactly the configuration of ``row`` (same model and
        ``series_key``), oldest first, created before ``before``, runs in ``exclude`` left out."""
        if row.get("model") is None:
            return []
        key = series_key(row)
        cut = _utc_iso(before) if before else None
        return [p for p in self.history(metric_name, model=str(row["model"]), precision=row.get("precision"),
                                        target=row.get("target"), kind=kind)
                if p["series"] == key and p["run_id"] not in exclude and (cut is None or p["created"] < cut)]

    def _docs(self, run_ids: list[str]) -> dict[str, dict[str, Any]]:
        """Stored documents (without samples) of these runs, by run id."""
        out: dict[str, dict[str, Any]] = {}
        for i in range(0, len(run_ids), 500):
            chunk = run_ids[i:i + 500]
            q = sa.select(T_RUNS.c.run_id, T_RUNS.c.doc_json).where(T_RUNS.c.run_id.in_(chunk))
            got = self._retrying("reading run documents", lambda c: c.execute(q).all(), write=False)
            out.update({rid: json.loads(js) for rid, js in got})
        return out

    def cell_keys(self, matrix_hash: str, *, status: str | None = "ok") -> set[str]:
        """Cell keys already stored for a matrix hash (``status`` None: any status)."""
        q = sa.select(T_RUNS.c.cell_key).where(T_RUNS.c.matrix_hash == matrix_hash,
                                               T_RUNS.c.cell_key.is_not(None))
        if status:
            q = q.where(T_RUNS.c.status == status)
        got = self._retrying("reading matrix progress", lambda c: c.execute(q).scalars().all(),
                             write=False)
        return set(got)

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
