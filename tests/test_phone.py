"""On a real phone or board (skipped unless EDGEBENCH_TEST_PHONE_SERIAL names an attached device).

Run: EDGEBENCH_TEST_PHONE_SERIAL=<serial> [EDGEBENCH_BENCHMARK_MODEL=/path/android_aarch64_benchmark_model]
     scripts/test tests/test_phone.py
"""

from __future__ import annotations

import json
import os

import pytest

pytestmark = pytest.mark.phone


def test_real_device_listed_and_benchmarked(run_cli, tmp_path, digits_model):
    serial = os.environ["EDGEBENCH_TEST_PHONE_SERIAL"]
    code, out, err = run_cli("devices", "--json", "-")
    assert code == 0, err
    devices = {d["serial"]: d for d in json.loads(out)["rows"]}
    assert devices[serial]["state"] == "device"
    code, out, err = run_cli("convert-and-compare", "digits", "-p", "fp32,int8", "--targets", f"adb:{serial}",
                             "--samples", "32", "--runs", "64", "--out", str(tmp_path), "--json", "-", "--no-store")
    assert code == 0, err
    rows = json.loads(out)["rows"]
    assert all(r["status"] == "ok" and r["latency_ms"]["samples"] == 64 for r in rows)
    assert all(r["accuracy"]["top1_agreement"] > 0.9 for r in rows)
