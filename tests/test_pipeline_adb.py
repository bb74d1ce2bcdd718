"""convert-and-compare with adb targets: real adb server, simulated devices, both runners.

One device has python3 + LiteRT (the edgebench runner), one is a stock phone (the stand-in
benchmark_model binary), one dies mid-run: only its rows fail (exit 3); the rest is kept.
"""

from __future__ import annotations

import json
import sys

import pytest

pytest_plugins = ["conftest_adb"]


@pytest.fixture(scope="module")
def standin(tmp_path_factory):
    from edgebench.targets.sim import benchmark_model_standin as standin

    return standin.install(str(tmp_path_factory.mktemp("bm") / "benchmark_model"), sys.executable)


def test_convert_and_compare_host_and_adb_all(run_cli, make_sim, standin, tmp_path, digits_model, monkeypatch):
    py = make_sim(has_python=True, model="Pixel 8")
    stock = make_sim(has_python=False, model="Galaxy S24")
    code, out, err = run_cli("convert-and-compare", "digits", "-p", "fp32,int8", "--targets", "host,adb:all",
                             "--benchmark-binary", standin, "--samples", "24", "--runs", "12",
                             "--out", str(tmp_path), "--json", "-", "--no-store")
    assert code == 0, err
    doc = json.loads(out)
    rows = {(r["precision"], r["target"]): r for r in doc["rows"]}
    assert set(rows) == {(p, t) for p in ("fp32", "int8") for t in ("host", f"adb:{py.serial}", f"adb:{stock.serial}")}
    for (prec, target), r in rows.items():
        assert r["status"] == "ok", (prec, target, r.get("error"))
        assert r["latency_ms"]["samples"] == 12
        assert r["accuracy"]["top1"] is not None
        if target != "host":
            # same LiteRT build on the simulated device: bit-identical to the host result
            assert r["worst_vs_host"]["psnr_db"] == "inf"
            assert "drift_vs_host" in r
    assert rows[("int8", f"adb:{stock.serial}")]["runtime"] == "benchmark_model"
    assert "sh loop" in rows[("int8", f"adb:{stock.serial}")]["method"]


def test_lost_device_fails_only_its_rows(run_cli, make_sim, tmp_path, digits_model, monkeypatch):
    good = make_sim(has_python=True)
    lost = make_sim(has_python=True, model="Pixel 7", die_on=r"\.py job\.json")
    code, out, err = run_cli("convert-and-compare", "digits", "-p", "int8", "--targets", "host,adb:all",
                             "--samples", "16", "--runs", "10", "--out", str(tmp_path),
                             "--json", str(tmp_path / "r.json"))
    assert code == 3, err
    assert lost.serial in err
    doc = json.loads((tmp_path / "r.json").read_text())
    rows = {r["target"]: r for r in doc["rows"]}
    assert rows["host"]["status"] == "ok" and rows[f"adb:{good.serial}"]["status"] == "ok"
    assert rows[f"adb:{lost.serial}"]["status"] == "failed" and lost.serial in rows[f"adb:{lost.serial}"]["error"]
    assert doc.get("run_id")    # stored despite the failure


def test_bench_cli_targets_adb_all(run_cli, make_sim, standin, tmp_path, digits_model):
    code, out, err = run_cli("convert", "digits", "-p", "int8", "--out", str(tmp_path), "--json", "-")
    model = json.loads(out)["variants"]["int8"]["path"]
    py = make_sim(has_python=True)
    stock = make_sim(has_python=False)
    code, out, err = run_cli("bench", model, "--targets", "host,adb:all", "--benchmark-binary", standin,
                             "--runs", "8", "--min-time", "0", "--json", "-", "--no-store")
    assert code == 0, err
    rows = {r["target"]: r for r in json.loads(out)["rows"]}
    assert set(rows) == {"host", f"adb:{py.serial}", f"adb:{stock.serial}"}
    assert all(r["status"] == "ok" and r["latency_ms"]["samples"] == 8 for r in rows.values())


def test_env_lock_with_adb_devices(run_cli, make_sim, tmp_path):
    import yaml

    dev = make_sim(has_python=True, model="Pixel 8")
    lock = tmp_path / "env.lock.yaml"
    code, _, err = run_cli("env", "--no-tf", "--lock", str(lock), "--targets", "adb:all")
    assert code == 0, err
    doc = yaml.safe_load(lock.read_text())
    assert doc["devices"][dev.serial]["device_model"] == "Pixel 8 (emulated)"
    code, _, err = run_cli("env", "--no-tf", "--check-lock", str(lock), "--targets", "adb:all", "--strict")
    assert code == 0, err
    doc["devices"][dev.serial]["device_model"] = "Pixel 7"
    lock.write_text(yaml.safe_dump(doc))
    code, _, err = run_cli("env", "--no-tf", "--check-lock", str(lock), "--targets", "adb:all", "--strict")
    assert code == 1 and dev.serial in err and "Pixel 7" in err
