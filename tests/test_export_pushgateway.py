"""Push results to a REAL Prometheus Pushgateway and read them back (edgebench.report.export).

scripts/test starts ``prometheus-pushgateway`` on loopback and sets EDGEBENCH_TEST_PUSHGATEWAY.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from pathlib import Path

import pytest

pytest.register_assert_rewrite("conftest_report")
from conftest_report import make_compare_doc, make_train_doc, parse_exposition, run_cli  # noqa: E402
from edgebench.core.errors import BadInput, InfraError  # noqa: E402
from edgebench.report.export import grouping_path, push_metrics, push_result  # noqa: E402

pytest_plugins = ["conftest_report"]

PGW = os.environ.get("EDGEBENCH_TEST_PUSHGATEWAY")
needs_pgw = pytest.mark.skipif(not PGW, reason="EDGEBENCH_TEST_PUSHGATEWAY not set (scripts/test starts a "
                                              "Pushgateway on loopback and sets it)")


def gateway_samples() -> list[tuple[str, dict[str, str], str]]:
    with urllib.request.urlopen(PGW.rstrip("/") + "/metrics", timeout=10) as resp:
        return parse_exposition(resp.read().decode("utf-8"))


def delete_group(run_id: str) -> None:
    req = urllib.request.Request(PGW.rstrip("/") + grouping_path({"run_id": run_id}), method="DELETE")
    urllib.request.urlopen(req, timeout=10).read()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_grouping_path_uses_base64_for_slashes_and_empty_values():
    assert grouping_path({"run_id": "abc123"}) == "/metrics/job/edgebench/run_id/abc123"
    p = grouping_path({"run_id": "a/b/c"})
    enc = p.rsplit("/", 1)[1]
    assert p.startswith("/metrics/job/edgebench/run_id@base64/")
    assert base64.urlsafe_b64decode(enc).decode() == "a/b/c"
    assert grouping_path({"run_id": ""}) == "/metrics/job/edgebench/run_id@base64/="
    assert grouping_path({"run_id": "ü x?"}) == "/metrics/job/edgebench/run_id/" + urllib.parse.quote("ü x?", safe="")


def test_bad_gateway_url_is_bad_input():
    with pytest.raises(BadInput, match="not an http"):
        push_result(make_compare_doc(), "localhost:9091")


@needs_pgw
def test_push_and_read_back_round_trips_forbidden_characters(evil_doc):
    rid = f"run/{uuid.uuid4().hex[:8]}/x y\"q"
    url = push_result(evil_doc, PGW, run_id=rid)
    assert "run_id@base64/" in url
    try:
        mine = [(n, lb, v) for n, lb, v in gateway_samples() if lb.get("run_id") == rid]
        assert mine, "pushed metrics not found on the gateway"
        assert all(lb["job"] == "edgebench" for _, lb, _ in mine)
        model = evil_doc["rows"][0]["model"]
        assert {lb["model"] for n, lb, _ in mine if "model" in lb} == {model}
        p99 = [(lb, float(v)) for n, lb, v in mine if n == "edgebench_inference_latency_seconds"
               and lb.get("quantile") == "0.99" and lb.get("precision") == "int8"]
        assert len(p99) == 1
        assert p99[0][1] == pytest.approx(evil_doc["rows"][2]["latency_ms"]["p99"] / 1e3)
        outs = {lb["output"] for n, lb, _ in mine if n == "edgebench_drift_psnr_db"}
        assert outs == {"logits", "features", 'out"put\\1'}
        devs = {lb["device_model"] for n, lb, _ in mine if n == "edgebench_model_size_bytes"}
        assert 'Pixel "7" Pro\\a/b' in devs
    finally:
        delete_group(rid)


@needs_pgw
def test_push_replaces_the_group(train_doc):
    rid = uuid.uuid4().hex
    push_result(make_compare_doc(), PGW, run_id=rid)
    push_result(train_doc, PGW, run_id=rid)  # PUT: the compare metrics of this run are replaced
    try:
        names = {n for n, lb, _ in gateway_samples() if lb.get("run_id") == rid}
        assert "edgebench_training_examples_per_second" in names
        assert "edgebench_model_size_bytes" not in names
    finally:
        delete_group(rid)


@needs_pgw
def test_refused_push_is_infra_error():
    rid = uuid.uuid4().hex
    with pytest.raises(InfraError, match=r"refused the push \(HTTP 400"):
        push_metrics("edgebench_broken{model=\"unterminated 1\n", PGW, {"run_id": rid})
    # a metric whose type conflicts with one already on the gateway is refused too
    push_metrics("# TYPE edgebench_conflict_test gauge\nedgebench_conflict_test 1\n", PGW, {"run_id": rid})
    try:
        with pytest.raises(InfraError, match="results stay in the store"):
            push_metrics("# TYPE edgebench_conflict_test counter\nedgebench_conflict_test 1\n", PGW,
                         {"run_id": rid + "x"})
    finally:
        delete_group(rid)


def test_unreachable_gateway_is_infra_error():
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(InfraError, match="unreachable") as err:
        push_result(make_compare_doc(), url, run_id="abc")
    assert "results stay in the store" in str(err.value) and "\n" not in str(err.value)
    with pytest.raises(InfraError, match="not stored"):
        push_result({k: v for k, v in make_compare_doc().items() if k != "run_id"}, url)


def test_cli_push_exit_codes(sqlite_store, capsys, tmp_path):
    db, store = sqlite_store
    rid = store.save(make_train_doc())
    url = f"http://127.0.0.1:{free_port()}"
    tf = tmp_path / "e.prom"
    assert run_cli("export", "prometheus", rid, "--db", db, "--pushgateway", url, "--textfile", tf) == 3
    err = capsys.readouterr().err
    assert "unreachable" in err and "stay in the store" in err
    assert tf.exists()  # the textfile was still written before the failed push
    assert store.get(rid)["run_id"] == rid  # nothing removed from the store
    if PGW:
        assert run_cli("export", "prometheus", "--latest", "--db", db, "--pushgateway", PGW) == 0
        try:
            got = [(lb, v) for n, lb, v in gateway_samples()
                   if n == "edgebench_training_examples_per_second" and lb.get("run_id") == rid]
            assert len(got) == 8
        finally:
            delete_group(rid)


PROMETHEUS = shutil.which("prometheus")


@needs_pgw
@pytest.mark.skipif(PROMETHEUS is None, reason="prometheus server not installed (Debian package 'prometheus')")
def test_grafana_queries_pick_the_newest_run_in_a_real_prometheus(tmp_path):
    """Scrape the Pushgateway with a real Prometheus and run the dashboard's PromQL."""
    dash = json.loads((Path(__file__).resolve().parent.parent / "scripts/grafana/edgebench.json").read_text())
    tag = uuid.uuid4().hex[:8]
    model = f"mobilenet_{tag}"
    old, new = make_compare_doc(model=model, created="2026-12-01T10:00:00+00:00"), \
        make_compare_doc(model=model, created="2026-12-02T10:00:00+00:00", p99_scale=2.0, seed=3)
    groups = [f"old-{tag}", f"new/{tag}", f"train-{tag}"]
    push_result(new, PGW, run_id=groups[1])  # pushed first: "newest" must come from created, not push order
    push_result(old, PGW, run_id=groups[0])
    push_result(make_train_doc(model=model), PGW, run_id=groups[2])
    port = free_port()
    (tmp_path / "prom.yml").write_text(
        "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: pushgateway\n    honor_labels: true\n"
        f"    static_configs:\n      - targets: ['{urllib.parse.urlsplit(PGW).netloc}']\n")
    log = open(tmp_path / "prometheus.log", "wb")
    proc = subprocess.Popen([PROMETHEUS, f"--config.file={tmp_path / 'prom.yml'}",
                             f"--storage.tsdb.path={tmp_path / 'data'}", f"--web.listen-address=127.0.0.1:{port}"],
                            stdout=log, stderr=subprocess.STDOUT)

    def query(expr: str) -> list[dict]:
        expr = expr.replace("$model", model).replace("$precision", ".*").replace("$target", ".*")
        url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
        with urllib.request.urlopen(url, timeout=10) as resp:
            body = json.load(resp)
        assert body["status"] == "success", body
        return body["data"]["result"]

    try:
        panels = {p["title"]: p["targets"][0]["expr"] for p in dash["panels"]}
        p99_expr = panels["p99 latency per model / precision / device (newest run)"]
        deadline = time.monotonic() + 90
        got: list[dict] = []
        while time.monotonic() < deadline:  # wait for the first scrapes (not a timing assertion)
            assert proc.poll() is None, (tmp_path / "prometheus.log").read_text()[-2000:]
            try:
                got = query(p99_expr)
                if len(got) == 5 and len(query(panels["Training throughput"])) == 8:
                    break
            except (urllib.error.URLError, ConnectionError):
                pass
            time.sleep(0.5)
        assert len(got) == 5, got  # reference + 4 precisions, newest run only
        assert {g["metric"]["run_id"] for g in got} == {groups[1]}
        int8 = next(g for g in got if g["metric"]["precision"] == "int8")
        want = next(r for r in new["rows"] if r["precision"] == "int8")["latency_ms"]["p99"] / 1e3
        assert float(int8["value"][1]) == pytest.approx(want)
        red = query(panels["Size reduction vs reference model"])
        assert len(red) == 4 and all(g["metric"]["run_id"] == groups[1] for g in red)
        psnr = query(panels["Worst-output PSNR vs reference"])
        assert {g["metric"]["precision"]: round(float(g["value"][1]), 1) for g in psnr}["int8"] == 34.1
        thr = query(panels["Training throughput"])
        assert {g["metric"]["batch_size"] for g in thr} == {"16", "32", "64", "128"}
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
        log.close()
        for g in groups:
            delete_group(g)
