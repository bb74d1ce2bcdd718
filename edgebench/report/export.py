"""Export stored results to Prometheus: push to a Pushgateway, or write a node_exporter textfile.

Python API (the CLI and every producer's ``--pushgateway`` option call these)::

    from edgebench.report.export import push_result, write_textfile, export_prometheus
    push_result(doc, "http://pushgateway:9091", run_id="...")   # PUT, grouped by run
    write_textfile([doc, ...], "/var/lib/node_exporter/textfile/edgebench.prom")

Pushes go to ``<URL>/metrics/job/edgebench/run_id/<run id>`` with HTTP PUT (the group is
replaced as a whole, so re-pushing a run is idempotent). Grouping-key values that contain ``/``
(or are empty) use the Pushgateway's base64 form ``run_id@base64/<base64url>``; other values are
percent-encoded. The metrics are rendered by :func:`edgebench.report.prometheus.render_prometheus`
without a ``run_id`` label -- the Pushgateway adds it from the grouping key.

Faults: an unreachable or refusing gateway raises ``InfraError`` (exit 3); nothing is deleted, the
results stay in the store. A missing textfile directory raises ``BadInput`` (exit 2).
"""

from __future__ import annotations

import base64
import hashlib
import http.client
import json
import os
import socket
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from edgebench.core.atomic import write_stdout, write_text
from edgebench.core.errors import BadInput, InfraError, OutputNotWritable
from edgebench.core.printable import shown
from edgebench.core.redact import redact, redact_url
from edgebench.judge.changepoints import history_with_steps
from edgebench.report.html import render_html
from edgebench.report.markdown import render_markdown
from edgebench.report.prometheus import render_prometheus
from edgebench.rows.identity import series_key, series_label

DEFAULT_JOB = "edgebench"
PUSH_TIMEOUT_S = 10.0
_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def _check_gateway_url(url: str) -> str:
    """``url`` without a trailing slash, refused (BadInput showing it redacted: userinfo, the fragment,
    and all of it after the scheme when it cannot be parsed) unless it is ``http(s)://host[:port][/prefix]``."""
    shown_url = shown(redact_url(url))
    try:
        parsed = urllib.parse.urlsplit(url or "")
        parsed.port                     # noqa: B018 -- ValueError: not a port number
    except ValueError:
        raise BadInput(f"--pushgateway {shown_url} is not a URL edgebench can read (its host or port); give e.g. "
                       "http://localhost:9091") from None
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise BadInput(f"--pushgateway {shown_url} is not an http(s) URL; give e.g. http://localhost:9091")
    if parsed.query or parsed.fragment:
        raise BadInput(f"--pushgateway {shown_url} has a query or fragment; give only "
                       "scheme://[user:password@]host:port[/prefix]")
    return url.rstrip("/")


def _credentials(url: str) -> tuple[str, dict[str, str]]:
    """(URL without its userinfo, headers): ``user:password@`` in a --pushgateway URL becomes HTTP
    basic auth (urllib would otherwise take it for part of the host name)."""
    parts = urllib.parse.urlsplit(url)
    if "@" not in parts.netloc:
        return url, {}
    userinfo, host = parts.netloc.rsplit("@", 1)
    user, _, password = userinfo.partition(":")
    token = base64.b64encode(f"{urllib.parse.unquote(user)}:{urllib.parse.unquote(password)}".encode()).decode()
    return (urllib.parse.urlunsplit((parts.scheme, host, parts.path, parts.query, parts.fragment)),
            {"Authorization": f"Basic {token}"})


def _encode_group_value(name: str, value: str) -> str:
    """One ``/<name>/<value>`` grouping-key segment, base64 where a plain segment can't hold it."""
    if value == "" or "/" in value:
        # Pushgateway: base64url (RFC 4648 sec. 5); an empty value is written as a single '='.
        enc = base64.urlsafe_b64encode(value.encode()).decode() or "="
        return f"/{name}@base64/{enc}"
    return f"/{name}/{urllib.parse.quote(value, safe='')}"


def grouping_path(grouping: dict[str, str], *, job: str = DEFAULT_JOB) -> str:
    """``{'run_id': 'a/b'}`` -> ``/metrics/job/edgebench/run_id@base64/YS9i``."""
    path = "/metrics" + _encode_group_value("job", job)
    for k, v in grouping.items():
        if k == "job":
            continue
        path += _encode_group_value(k, str(v))
    return path


def fallback_run_id(doc: dict[str, Any]) -> str:
    """A stable id for a document that was not stored (sha256 of its JSON, 16 hex digits)."""
    payload = json.dumps({k: v for k, v in doc.items() if k != "run_id"}, sort_keys=True, default=str)
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


def push_metrics(text: str, url: str, grouping: dict[str, str], *, job: str = DEFAULT_JOB,
                 method: str = "PUT", timeout: float = PUSH_TIMEOUT_S, stored: bool = True) -> str:
    """Send exposition ``text`` to the Pushgateway group; return the group URL as shown to the user
    (credentials masked, ``edgebench.core.redact``).

    ``method``: PUT replaces the whole group, POST replaces only the metric names pushed.
    ``stored``: whether the result is in the store (only changes the error message's advice).
    ``user:password@`` in ``url`` is sent as HTTP basic auth (never to a redirect's host) and never
    printed: messages and the suggested retry command show ``***@``.
    """
    raw, auth = _credentials(_check_gateway_url(url))
    base = redact_url(url.rstrip("/"))
    if method not in ("PUT", "POST"):
        raise BadInput(f"push method {method!r}: use PUT or POST")
    path = grouping_path(grouping, job=job)
    req = urllib.request.Request(raw + path, data=text.encode("utf-8"), method=method,
                                 headers={"Content-Type": _CONTENT_TYPE})
    for k, v in auth.items():
        req.add_unredirected_header(k, v)
    rid = grouping.get("run_id")
    if stored:
        keep = (f"the results stay in the store; push again later with `edgebench export prometheus"
                f"{' ' + rid if rid else ''} --pushgateway {base}`")
    else:
        keep = "the result was not stored (--no-store); keep it with --json PATH"
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:  # noqa: S310 -- scheme checked above
            resp.read()
    except urllib.error.HTTPError as err:
        body = ""
        try:
            body = err.read().decode("utf-8", "replace").strip().splitlines()[0][:200]
        except Exception:  # noqa: BLE001 -- best effort detail only
            pass
        raise InfraError(redact(f"Pushgateway {base} refused the push (HTTP {err.code}"
                                f"{': ' + body if body else ''}); {keep}", url)) from None
    except (urllib.error.URLError, ConnectionError, socket.timeout, TimeoutError,
            http.client.HTTPException, OSError) as err:
        reason = getattr(err, "reason", err)
        raise InfraError(redact(f"Pushgateway {base} is unreachable ({reason}); start it or fix --pushgateway; "
                                f"{keep}", url)) from None
    return base + path


def push_result(doc: dict[str, Any], url: str, *, run_id: str | None = None, job: str = DEFAULT_JOB,
                timeout: float = PUSH_TIMEOUT_S) -> str:
    """Push one result document to the Pushgateway at ``url``, grouped by run; return the group URL.

    ``run_id``: the store's id for ``doc`` (default ``doc["run_id"]``, else a content hash).
    Raises ``InfraError`` when the gateway is unreachable or refuses, ``BadInput`` for a bad URL.
    """
    stored = bool(run_id or doc.get("run_id"))
    rid = run_id or doc.get("run_id") or fallback_run_id(doc)
    text = render_prometheus(doc, run_id_label=False)
    return push_metrics(text, url, {"run_id": str(rid)}, job=job, timeout=timeout, stored=stored)


def _atomic_write(p: Path, text: str) -> Path:
    return write_text(p, text)


def write_textfile(docs: dict[str, Any] | Iterable[dict[str, Any]], path: str | os.PathLike) -> Path:
    """Write the exposition of ``docs`` to ``path`` atomically (temp file + rename, same directory).

    For node_exporter's textfile collector, ``path`` must end in ``.prom``. The temporary file is
    named ``.<name>.<random>.tmp`` so the collector never reads a half-written file.
    """
    p = Path(path)
    if p.suffix != ".prom":
        raise BadInput(f"--textfile {str(p)!r}: node_exporter's textfile collector only reads *.prom files; "
                       "name it e.g. edgebench.prom")
    if p.is_dir():
        raise BadInput(f"--textfile {str(p)!r} is a directory; give a file path such as {p / 'edgebench.prom'}")
    parent = p.parent
    if not parent.is_dir():
        raise BadInput(f"--textfile directory {str(parent)!r} does not exist; create it or point to "
                       "node_exporter's --collector.textfile.directory")
    text = render_prometheus(docs, run_id_label=True)
    return _atomic_write(p, text)


@dataclass
class ExportOutcome:
    """What ``export_prometheus`` did: run ids exported, group URLs pushed, textfile written."""
    run_ids: list[str]
    text: str
    pushed: list[str] = field(default_factory=list)
    textfile: str | None = None


def select_docs(store: Any, run_id: "str | Sequence[str] | None" = None, *, latest: bool = False,
                matrix_hash: str | None = None) -> list[dict[str, Any]]:
    """Full result documents from the store for run id(s), ``--latest`` or a matrix hash -- and
    nothing else: a report holds only what was asked for. Each document carries
    ``report_source``, saying why it is in (shown by the reports).

    Raises ``BadInput`` when nothing matches (empty store, unknown id, unknown matrix).
    """
    ids = [run_id] if isinstance(run_id, str) else list(run_id or [])
    chosen = [x for x in (ids or None, latest or None, matrix_hash) if x]
    if len(chosen) > 1:
        raise BadInput("give only one of RUN_ID..., --latest, --matrix HASH")
    if ids:
        return [{**store.get(i), "report_source": f"run id {i} given on the command line"} for i in ids]
    if matrix_hash:
        runs = store.list_runs(matrix_hash=matrix_hash, limit=100_000)
        if not runs:
            raise BadInput(f"--matrix {matrix_hash!r}: no stored runs for this matrix hash; "
                           "list runs with `edgebench results list`")
        runs = sorted(runs, key=lambda r: (str(r.get("created") or ""), str(r.get("run_id"))))
        return [{**store.get(r["run_id"]), "report_source": f"stored run of matrix {matrix_hash} (--matrix)"}
                for r in runs]
    if latest:
        doc = store.latest()
        if doc is None:
            raise BadInput("the results store is empty; produce a result first (e.g. "
                           "`edgebench convert-and-compare ...`) or point --db at another store")
        if "rows" not in doc or "run_id" not in doc:  # latest() may return a summary only
            doc = store.get(doc["run_id"])
        return [{**doc, "report_source": "the newest stored run (--latest)"}]
    raise BadInput("say which results: give RUN_ID(s), --latest or --matrix HASH")


def export_prometheus(store: Any, run_id: str | None = None, *, latest: bool = False,
                      pushgateway: str | None = None, textfile: str | None = None,
                      progress: Callable[[str], None] | None = None) -> ExportOutcome:
    """Read run(s) from the store and push them and/or write them as a textfile.

    Each run is pushed into its own group (``run_id``); the textfile holds all of them with a
    ``run_id`` label. Returns what was done; raises InfraError / BadInput as the helpers above.
    """
    if pushgateway:
        _check_gateway_url(pushgateway)  # fail on a bad URL before reading anything
    docs = select_docs(store, run_id, latest=latest)
    out = ExportOutcome(run_ids=[str(d.get("run_id")) for d in docs], text=render_prometheus(docs))
    if textfile:
        out.textfile = str(write_textfile(docs, textfile))
    if pushgateway:
        for d in docs:
            if progress:
                progress(f"pushing run {d.get('run_id')} to {redact_url(pushgateway)}")
            out.pushed.append(push_result(d, pushgateway))
    return out


# ---------------------------------------------------------------------------------------------
# reports (HTML / Markdown) written from the store

HISTORY_MAX_SERIES = 24  # keeps a matrix report's size bounded; the rest are in the store


def collect_history(store: Any, docs: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Stored series for the rows of ``docs``: p99 per (model, precision, target) and training
    throughput per (model, precision, batch size), each point marked where a change point began
    (``step``, ``shift``). Labels end in " — <unit>" (the y axis)."""
    out: dict[str, list[dict[str, Any]]] = {}
    seen: set[tuple] = set()
    for d in docs:
        rows = [r for r in (d.get("rows") or []) if isinstance(r, dict)]
        if isinstance(d.get("reference"), dict):
            rows = [d["reference"], *rows]
        for r in rows:
            if len(out) >= HISTORY_MAX_SERIES:
                return out
            model = r.get("model")
            if not model:
                continue
            if d.get("kind") == "train" or ("examples_per_s" in r and "latency_ms" not in r):
                key = ("train", model, r.get("precision"), r.get("batch_size"))
                if key in seen:
                    continue
                seen.add(key)
                pts = [p for p in store.rows(kind="train", model=model, precision=r.get("precision"))
                       if p.get("status") == "ok" and p.get("examples_per_s") is not None
                       and p.get("batch_size") == r.get("batch_size")]
                label = f"{model} / {r.get('precision') or '-'} / batch {r.get('batch_size')} — examples/s"
                out[label] = [{"created": p["created"], "run_id": p["run_id"], "value": p["examples_per_s"]}
                              for p in pts]
            else:
                # one line per configuration identity (identity.series_key): a --delegate none run or
                # an int8 with tensors kept float is never a point of the plain int8 line
                ident = series_key(r)
                key = ("p99", model, json.dumps(ident, sort_keys=True, default=str))
                if key in seen or not r.get("precision") or not r.get("target"):
                    continue
                seen.add(key)
                what = series_label(ident)
                label = f"{model} / {r['precision']} / {r['target']}" + (f" ({what})" if what else "") + " — p99 ms"
                out[label] = [p for p in store.history("p99", model=str(model), precision=r["precision"],
                                                       target=r["target"]) if p.get("series") == ident]
    return {label: _with_change_points(points) for label, points in out.items()}


def _with_change_points(points: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A series' points, each with ``step`` (a change point began at this run) and, there, ``shift``
    (after / before): what the HTML history charts mark (``changepoints.history_with_steps``)."""

    pts = [p for p in points if isinstance(p.get("value"), (int, float))]
    if len(pts) < 3:
        return points
    h = history_with_steps(pts)
    shifts = {s["run_id"]: s["ratio"] for s in h["steps"]}
    return [dict(p, shift=shifts.get(p.get("run_id")), change_points=h["method"]) for p in h["points"]]


def _write_text(text: str, path: str, option: str) -> str:
    """Write ``text`` to ``path`` atomically ('-' = stdout); BadInput when the directory is missing."""
    if path == "-":

        write_stdout(text)
        return "-"
    p = Path(path)
    if p.is_dir():
        raise BadInput(f"{option} {path!r} is a directory; give a file path such as {p / 'report.html'}")
    if not p.parent.is_dir():
        raise BadInput(f"{option} {path!r}: directory {str(p.parent)!r} does not exist; create it first")
    try:
        return str(_atomic_write(p, text))
    except OutputNotWritable as e:    # read-only folder, full disk: the option, the path, why (exit 2)
        raise BadInput(f"could not write {option} {path}: {e.reason}; choose a writable path (the results "
                       "stay in the store)") from None


@dataclass
class ReportOutcome:
    """What ``write_report`` produced."""
    docs: list[dict[str, Any]]
    markdown: str
    html_path: str | None = None
    markdown_path: str | None = None
    history_series: int = 0


def write_report(store: Any, run_id: "str | Sequence[str] | None" = None, *, latest: bool = False,
                 matrix_hash: str | None = None,
                 html_path: str | None = None, markdown_path: str | None = None,
                 progress: Callable[[str], None] | None = None) -> ReportOutcome:
    """Read run(s) from the store and render the HTML and/or Markdown report. Only the runs asked
    for are in it (several RUN_IDs put related runs side by side, e.g. a compare run and the
    training baseline of the same model); each says where it came from.

    BadInput on an empty store, unknown run id or matrix hash, or a missing output directory.
    """

    if progress:
        progress("reading results from the store")
    docs = select_docs(store, run_id, latest=latest, matrix_hash=matrix_hash)
    md = render_markdown(docs)
    out = ReportOutcome(docs=docs, markdown=md)
    if html_path:
        if progress:
            progress("collecting history")
        history = collect_history(store, docs)
        out.history_series = sum(1 for v in history.values() if len(v) >= 2)
        if progress:
            progress("rendering HTML")
        out.html_path = _write_text(render_html(docs, history=history), html_path, "--html")
    if markdown_path:
        out.markdown_path = _write_text(md, markdown_path, "--markdown")
    return out
