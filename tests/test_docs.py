"""What the README and docs tell a new user to type, run as written (issue 18, "Docs that disagree
with the program"): the "Without a phone" line, the Prometheus label of the TF reference, `--db`
checked before measuring."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path


pytest_plugins = ["conftest_adb"]

ROOT = Path(__file__).resolve().parent.parent


def test_without_a_phone_line_of_the_readme_works_as_written(adbh, adb_server, tiny_tflite, run_cli, tmp_path):
    readme = (ROOT / "docs" / "devices.md").read_text()
    line = re.search(r"\*\*Without a phone\*\*: `([^`]+)`", readme).group(1)
    connect = re.search(r"`(adb connect 127\.0\.0\.1:\d+)`", readme).group(1)
    argv = shlex.split(line)
    assert argv[:3] == ["python", "-m", "edgebench.targets.sim.adbd"]
    port = adbh.free_port()
    argv = [sys.executable, *argv[1:]]
    argv[argv.index("--port") + 1] = str(port)                       # a free port and a fresh sandbox,
    argv[argv.index("--sandbox") + 1] = str(tmp_path / "phone")      # everything else as written
    sim = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    serial = f"127.0.0.1:{port}"
    try:
        assert "listening on" in sim.stdout.readline()
        adbh.adb(adb_server, *connect.replace("5599", str(port)).split()[1:])
        assert adbh.wait_state(adb_server, serial, "device") == "device"
        code, out, err = run_cli("bench", str(tiny_tflite), "--targets", f"adb:{serial}", "--runs", "5",
                                 "--warmup-runs", "1", "--no-store", "--json", "-")
        assert code == 0, err
        (row,) = json.loads(out)["rows"]
        assert row["status"] == "ok" and row["runtime"].startswith("ai_edge_litert")   # the edgebench runner
        assert row["fingerprint"]["device_model"] == "Pixel 8 (emulated)"      # the simulator says what it is
    finally:
        adbh.adb(adb_server, "disconnect", serial)
        sim.terminate()
        sim.wait(timeout=30)


def test_prometheus_label_of_the_tf_reference_is_the_one_documented(run_cli, tmp_path, small_savedmodels):
    from edgebench.report.prometheus import render_prometheus

    code, out, err = run_cli("convert-and-compare", str(small_savedmodels["multi"]), "-p", "fp32", "--data",
                             "synthetic", "--samples", "10", "--runs", "10", "--out", str(tmp_path / "o"),
                             "--json", "-", "--no-store")
    assert code == 0, err
    doc = json.loads(out)
    text = render_prometheus(doc)
    target = doc["reference"]["target"]
    assert target == "tf (/CPU:0)" and f'target="{target}"' in text and 'precision="tf"' in text
    docs = (ROOT / "docs" / "observability.md").read_text()
    assert f'`target="{target}"`' in docs and '`precision="tf"`' in docs
    assert '(`target="tf"`)' not in docs


def test_db_that_is_a_directory_is_exit_2_before_measuring_as_documented(run_cli, tmp_path, tiny_tflite):
    docs = (ROOT / "docs" / "store-and-matrix.md").read_text()
    assert "**before anything is measured**" in docs and "exit 2" in docs
    t0 = time.monotonic()
    code, _, err = run_cli("bench", str(tiny_tflite), "--db", str(tmp_path), "--runs", "5")
    assert code == 2 and "is a directory" in err and time.monotonic() - t0 < 60


def _docs_page(name: str) -> str:
    return (ROOT / "docs" / name).read_text()


def test_every_registry_metric_is_documented_in_json_results():
    """The docs guard (issue 23.7): every number of the metric registry -- its key, every alias
    --metric takes, its Prometheus gauge -- is named in docs/json.md ("JSON results")."""
    from edgebench.rows.metrics import REGISTRY

    section = _docs_page("json.md")
    missing = [name for m in REGISTRY for name in (m.key, *m.aliases, *([m.prometheus] if m.prometheus else []))
               if f"`{name}`" not in section]
    assert not missing, f"docs/json.md does not name: {missing}; add them to the headline metrics table"


def test_the_docs_guard_fails_on_an_undocumented_metric(monkeypatch):
    import edgebench.rows.metrics as metrics

    extra = metrics.Metric("undocumented_ms", "x", "ms", lambda r: None, "lower")
    monkeypatch.setattr(metrics, "REGISTRY", (*metrics.REGISTRY, extra))
    try:
        test_every_registry_metric_is_documented_in_json_results()
    except AssertionError as e:
        assert "undocumented_ms" in str(e)
    else:
        raise AssertionError("the docs guard passed with an undocumented metric")
