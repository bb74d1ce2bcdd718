"""One verdict everywhere (issue 25): a run whose gate fails reads "gate failed" in every output a
pipeline reads — the PR Markdown, `results list/show`, the stored columns, the HTML report and
Prometheus — and one configuration identity keeps apart what is not comparable."""

from __future__ import annotations

import json
import re
import shutil
import sqlite3
import subprocess
from html.parser import HTMLParser

import numpy as np
import pytest

from edgebench.judge.outcome import precision_label, row_verdict, run_verdict
from edgebench.core.result_file import envelope
from edgebench.rows import Document
from edgebench.store.db import Store

try:  # tests/ is on sys.path under pytest's default import mode
    from test_store import _cli as _store_cli  # noqa: E402
except ImportError:  # tests/ made a package
    from tests.test_store import _cli as _store_cli  # noqa: E402

pytest_plugins = ["conftest_report"]


class Sections(HTMLParser):
    """Text per <section id>, and the cells of each table row inside it."""

    def __init__(self) -> None:
        super().__init__()
        self.text: dict[str, str] = {}
        self.rows: dict[str, list[list[str]]] = {}
        self._sec: str | None = None
        self._row: list[str] | None = None
        self._cell: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        if tag == "section":
            self._sec = dict(attrs).get("id")
            self.text[self._sec] = ""
            self.rows[self._sec] = []
        elif tag == "tr" and self._sec:
            self._row = []
        elif tag in ("td", "th") and self._row is not None:
            self._cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None and self._row is not None:
            self._row.append("".join(self._cell).strip())
            self._cell = None
        elif tag == "tr" and self._row is not None and self._sec:
            self.rows[self._sec].append(self._row)
            self._row = None
        elif tag == "section":
            self._sec = None

    def handle_data(self, data):
        if self._sec:
            self.text[self._sec] += data
        if self._cell is not None:
            self._cell.append(data)


@pytest.fixture(scope="module")
def failed_gate_run(tmp_path_factory, digits_model):
    """convert-and-compare digits with a PSNR floor int8 cannot meet (a --gate file holding only
    int8 to it): the gate fails (exit 1), fp32 passes."""
    import contextlib
    import io
    import os

    from edgebench.cli import _main

    tmp = tmp_path_factory.mktemp("gate")
    db = str(tmp / "r.db")
    (tmp / "gate.yaml").write_text("int8:\n  min_psnr: 500\n")     # only int8 is held to it
    out, err = io.StringIO(), io.StringIO()
    os.environ["COLUMNS"] = "200"
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            _main(["convert-and-compare", "digits", "-p", "fp32,int8", "--runs", "700", "--gate", str(tmp / "gate.yaml"),
                   "--out", str(tmp / "o"), "--db", db, "--markdown", str(tmp / "pr.md"),
                   "--json", str(tmp / "r.json")])
            code = 0
        except SystemExit as e:
            code = e.code
    assert code == 1, err.getvalue()
    return tmp, db, json.loads((tmp / "r.json").read_text())


def _cli(*args):
    """The real CLI in-process: (exit code, stdout, stderr) -- test_store's runner."""
    r = _store_cli(*args)
    return r.returncode, r.stdout, r.stderr


def test_markdown_opens_with_the_failed_gate_and_the_diagnose_command(failed_gate_run):
    tmp, _, doc = failed_gate_run
    md = (tmp / "pr.md").read_text()
    first_table = md.index("| model |")
    head = md[:first_table]
    assert "gate failed" in head and "worst-output PSNR" in head and "min 500 dB" in head
    assert "edgebench diagnose" in head and doc["diagnose_command"] in head
    int8 = [ln for ln in md.splitlines() if ln.startswith("| ") and "| int8 |" in ln][0]
    assert "GATE FAILED: PSNR" in int8 and "| ok |" not in int8


def test_results_list_and_show_say_gate_failed(failed_gate_run, monkeypatch):
    _, db, doc = failed_gate_run
    monkeypatch.setenv("COLUMNS", "200")
    code, out, err = _cli("results", "list", "--db", db, "--json", "-")
    assert code == 0, err
    (run,) = json.loads(out)["rows"]
    assert run["gate"] == "failed" and run["verdict_text"].startswith("GATE FAILED (")
    code, out, _ = _cli("results", "list", "--db", db)
    assert "GATE FAILED" in out and " ok " not in out
    code, out, _ = _cli("results", "show", run["run_id"], "--db", db)
    assert code == 0
    assert out.lstrip().startswith("GATE FAILED") and "edgebench diagnose" in out
    int8 = [ln for ln in out.splitlines() if "int8" in ln and "host" in ln][0]
    assert "GATE FAILED" in int8
    # units as everywhere else: top-1 in %, sizes in KiB, the top-1 change signed (negative = worse)
    assert re.search(r"\d+\.\d\d%", out) and "KiB" in out and "Δtop-1 pp" in out
    # the stored columns a query can use
    con = sqlite3.connect(db)
    assert con.execute("select gate, verdict from runs").fetchall() == [("failed", "gate-failed")]
    rows = dict(con.execute("select precision, verdict from results").fetchall())
    assert rows == {"fp32": "ok", "int8": "gate-failed"}
    con.close()


def test_html_report_verdict_first_and_failed_rows_are_never_pareto_optimal(failed_gate_run, tmp_path):
    _, db, doc = failed_gate_run
    code, _, err = _cli("report", doc["run_id"], "--db", db, "--html", str(tmp_path / "r.html"))
    assert code == 0, err
    text = (tmp_path / "r.html").read_text()
    p = Sections()
    p.feed(text)
    assert list(p.text)[0] == "verdict"
    assert "GATE FAILED" in p.text["verdict"] and "edgebench diagnose" in p.text["verdict"]
    pareto = p.rows["pareto"]
    optimal = {r[0]: r[4] for r in pareto if len(r) >= 5 and r[0] != "row"}
    assert not any("int8" in name and flag == "yes" for name, flag in optimal.items())
    assert any("int8" in r[0] and "GATE FAILED" in r[1] for r in pareto if len(r) == 2)
    assert "GATE FAILED: PSNR" in p.text["results"]


def test_prometheus_has_a_gate_series_an_alert_can_use(failed_gate_run, tmp_path):
    from conftest_report import parse_exposition

    _, db, doc = failed_gate_run
    prom = tmp_path / "r.prom"
    code, _, err = _cli("export", "prometheus", doc["run_id"], "--db", db, "--textfile", str(prom))
    assert code == 0, err
    text = prom.read_text()
    samples = parse_exposition(text)
    gate = [v for n, lb, v in samples if n == "edgebench_gate_passed"]
    assert gate == ["0"]
    verdicts = {lb["precision"]: lb["verdict"] for n, lb, v in samples if n == "edgebench_row_verdict"}
    assert verdicts["int8"] == "gate-failed" and verdicts["fp32"] == "ok"
    row_ok = {lb["precision"]: v for n, lb, v in samples if n == "edgebench_row_ok"}
    assert row_ok["int8"] == "0"
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool not installed (Debian package 'prometheus'); scripts/test installs it")
    res = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True, timeout=60)
    assert res.returncode == 0 and not (res.stdout + res.stderr).strip(), res.stdout + res.stderr


# ---- without a real run: verdicts, labels and the configuration identity ----------------------

FP = {"hostname": "h", "tensorflow": "2.21.0", "litert": "2.3.0", "cpu_model": "cpu"}


def _row(p99: float, *, sha: str = "a" * 64, precision: str = "int8", delegate: str = "xnnpack",
         keep_float=None, **kw):
    s = (np.random.default_rng(int(p99 * 1000)).lognormal(0, 0.05, 700) * p99 * 1e6 / 1.2).astype(np.int64)
    return {"model": "digits-tiny", "model_sha256": sha, "precision": precision, "target": "host",
            "status": "ok", "delegate": delegate, "threads": 2, "keep_float": keep_float,
            "size_bytes": 50_000, "latency_ms": {"mean": p99 / 1.2, "std": 0.01, "min": p99 / 2, "max": p99,
                                                 "p50": p99 / 1.2, "p90": p99 / 1.1, "p95": p99 / 1.05,
                                                 "p99": p99, "samples": 700, "p99_valid": True, "qps": 1e3},
            "samples_ns": s, **kw}


def test_silent_failure_and_keep_float_read_the_same_in_every_output(tmp_path):
    from edgebench.report.html import render_html
    from edgebench.report.markdown import render_markdown
    from edgebench.report.prometheus import render_prometheus

    silent = _row(0.2, accuracy={"top1": 0.1, "top1_drop_pp": 88.3},
                  verdicts=[{"kind": "constant_output", "output": "probs", "failed": True,
                             "message": "probs: output is the same for all samples", "advice": "diagnose"}])
    kept = _row(0.15, sha="b" * 64, keep_float=["dense/MatMul"], accuracy={"top1": 0.97, "top1_drop_pp": 0.5})
    doc = envelope("compare", [silent, kept], FP, gate={"passed": True, "checks": []})
    typed = Document.from_dict(doc)
    assert [row_verdict(r).state for r in typed.rows] == ["silent", "ok"]
    assert run_verdict(typed).state == "silent"
    assert precision_label(typed.rows[1]) == "int8 +1 float"
    md = render_markdown(doc)
    assert "SILENT" in md.split("| model |")[0] and "int8 +1 float" in md and "-88.30" in md
    html = render_html(doc)
    assert "SILENT: constant_output(probs)" in html and "int8 +1 float" in html
    prom = render_prometheus(doc)
    assert 'verdict="silent"' in prom and 'keep_float="1"' in prom
    st = Store(str(tmp_path / "r.db"))
    rid = st.save(doc)
    assert st.list_runs()[0]["verdict"] == "silent"
    rows = [r for r in st.rows() if r["run_id"] == rid]
    assert [r["precision_label"] for r in rows] == ["int8", "int8 +1 float"]
    assert [r["verdict"] for r in rows] == ["silent", "ok"]


def test_history_and_compare_never_join_two_configurations(tmp_path):
    """--delegate none, --keep-float int8 (another file) and plain int8 are three history lines;
    results compare pairs them only with a CONFIGURATION DIFFERS panel."""
    from edgebench.report.export import collect_history
    from edgebench.judge.stats import compare_stored

    st = Store(str(tmp_path / "r.db"))
    ids = {}
    for i, (name, kw) in enumerate([("xnn", {}), ("none", {"delegate": "none"}),
                                    ("kept", {"sha": "b" * 64, "keep_float": ["dense/MatMul"]})]):
        for k in range(2):
            doc = envelope("compare", [_row(0.1 + 0.05 * i + 0.001 * k, **kw)], FP)
            doc["created"] = f"2026-12-0{1 + k}T0{i}:00:00+00:00"
            ids.setdefault(name, []).append(st.save(doc))
    history = collect_history(st, [st.get(ids[n][1]) for n in ("xnn", "none", "kept")])
    assert len(history) == 3
    for label, pts in history.items():
        assert len(pts) == 2, label
    labels = " | ".join(history)
    assert "delegate none" in labels and "+1 float" in labels and "sha256 bbbbbbbb" in labels
    rep = compare_stored(st, ids["xnn"][0], ids["kept"][0])
    diff = {d["field"] for d in rep["pairs"][0]["config_diff"]}
    assert diff == {"model_sha256", "keep_float"}
    code, out, _ = _cli("results", "compare", ids["xnn"][0], ids["none"][0], "--db", str(tmp_path / "r.db"))
    assert "CONFIGURATION DIFFERS" in out and "delegate xnnpack -> none" in out
