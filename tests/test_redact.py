"""Secrets never printed (issue 39; edgebench/core/redact.py): a credential planted in every URL-like
option -- the Pushgateway URL (``user:token@`` and a token in the path), the store URL, a remote adb
server -- appears in no message, no suggested retry command, no progress line and no file written."""

from __future__ import annotations

import json
import os
import socket

import pytest

from conftest_report import make_compare_doc

TOKEN = "S3cr3tT0kenQ9x7Zp2Lm4"        # 22 characters, letters and digits: what a token looks like
PGW = os.environ.get("EDGEBENCH_TEST_PUSHGATEWAY")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_redact_url_forms():
    from edgebench.core.redact import redact, redact_url

    assert redact_url(f"http://ci:{TOKEN}@gw:9091/") == "http://***@gw:9091/"
    assert redact_url(f"http://{TOKEN}@gw:9091") == "http://***@gw:9091"
    assert redact_url(f"ci:{TOKEN}@gw:9091") == "***@gw:9091"
    assert redact_url(f"https://gw.example.com/push/{TOKEN}") == "https://gw.example.com/push/***"
    assert redact_url("http://gw:9091/token/hunter2") == "http://gw:9091/token/***"
    assert redact_url(f"postgresql+psycopg2://bob:{TOKEN}@db/r?sslmode=require&password=x") == \
        "postgresql+psycopg2://***@db/r?sslmode=require&password=***"
    for plain in ("http://localhost:9091", "http://gw:9091/pushgateway", "/tmp/results.db",
                  "sqlite:////tmp/run-20240101T120000abc/results.db"):
        assert redact_url(plain) == plain
    text = f"could not reach ci:{TOKEN}@gw (tried http://ci:{TOKEN}@gw:9091/metrics)"
    assert TOKEN not in redact(text, f"http://ci:{TOKEN}@gw:9091")


def _no_token(*texts: str) -> None:
    for t in texts:
        assert TOKEN not in t, t


def test_no_output_contains_a_planted_credential(run_cli, tmp_path, monkeypatch):
    """On main the Pushgateway URL was printed whole in the error and in the retry command."""
    from edgebench.report.publish import PublishOptions, publish
    from edgebench.rows import Document

    db = tmp_path / "r.db"
    doc_file = tmp_path / "doc.json"
    doc_file.write_text(json.dumps({k: v for k, v in make_compare_doc().items() if k != "run_id"}))
    code, out, err = run_cli("results", "import", str(doc_file), "--db", str(db), "--json", "-")
    assert code == 0, err
    run_id = json.loads(out)["rows"][0]["run_id"]
    port = _free_port()                                # nothing listens there: the push fails
    urls = [f"http://ci:{TOKEN}@127.0.0.1:{port}", f"http://127.0.0.1:{port}/push/{TOKEN}",
            f"ci:{TOKEN}@127.0.0.1:{port}", f"http://ci:{TOKEN}@127.0.0.1:{port}/?x=1"]
    for url in urls:
        textfile = tmp_path / "e.prom"
        code, out, err = run_cli("export", "prometheus", run_id, "--db", str(db), "--pushgateway", url,
                                 "--textfile", str(textfile))
        assert code in (2, 3), err
        _no_token(out, err, textfile.read_text() if textfile.exists() else "")
        if code == 3:
            assert "push again later with `edgebench export prometheus" in err and "***" in err
    # every producer's --pushgateway goes through publish(): the error it keeps is redacted too
    outcome = publish(Document.from_dict(make_compare_doc()), PublishOptions(store=False, pushgateway=urls[0]))
    assert outcome.error is not None and "***@127.0.0.1" in str(outcome.error)
    _no_token(str(outcome.error))
    # the store: a bad URL, an unreachable server, a password in the query
    for db_url in (f"postgresql+psycopg2://ci:{TOKEN}@127.0.0.1:{port}/r", f"postgresql://ci:{TOKEN}@:bad:/r",
                   f"sqlite:///{tmp_path}/x.db?password={TOKEN}"):
        code, out, err = run_cli("results", "list", "--db", db_url)
        _no_token(out, err)
    # a remote adb server named with credentials
    monkeypatch.setenv("ANDROID_ADB_SERVER_HOST", f"ci:{TOKEN}@127.0.0.1")
    monkeypatch.setenv("ANDROID_ADB_SERVER_PORT", str(port))
    from edgebench.core.errors import InfraError
    from edgebench.targets.adb.client import list_states

    try:
        list_states()
    except InfraError as e:
        _no_token(str(e))


@pytest.mark.skipif(not PGW, reason="EDGEBENCH_TEST_PUSHGATEWAY not set (scripts/test starts a Pushgateway)")
def test_credentials_become_basic_auth_and_the_printed_url_hides_them(run_cli, tmp_path):
    import urllib.parse

    from edgebench.report.export import push_result

    parts = urllib.parse.urlsplit(PGW)
    url = f"{parts.scheme}://ci:{TOKEN}@{parts.netloc}{parts.path}"
    shown = push_result(make_compare_doc(), url, run_id="redact-test")
    assert shown.startswith(f"{parts.scheme}://***@{parts.netloc}") and TOKEN not in shown
    db = tmp_path / "r.db"
    doc_file = tmp_path / "doc.json"
    doc_file.write_text(json.dumps(make_compare_doc()))
    code, out, err = run_cli("results", "import", str(doc_file), "--db", str(db), "--json", "-")
    run_id = json.loads(out)["rows"][0]["run_id"]
    code, out, err = run_cli("export", "prometheus", run_id, "--db", str(db), "--pushgateway", url)
    assert code == 0, err
    assert "***@" in out and TOKEN not in out + err
