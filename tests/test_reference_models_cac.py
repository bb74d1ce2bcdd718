"""Every tiny reference model goes through convert-and-compare: all precisions, host target.

BERT exercises int32 token-id inputs and two outputs; SSD exercises detection outputs and an
NMS op that stays float in INT8 (the coverage report must say so).
"""

from __future__ import annotations

import json

import pytest

MODELS = ["digits", "resnet50", "mobilenetv2", "bert", "ssd_mobilenet"]

# Conversions here take the default path: calibrated precisions in the conversion worker.
pytestmark = pytest.mark.usefixtures("isolated_conversions")


@pytest.mark.slow
@pytest.mark.parametrize("name", MODELS)
def test_tiny_reference_model_convert_and_compare(name, run_cli, tmp_path):
    code, out, err = run_cli("convert-and-compare", name, "--size", "tiny", "--samples", "16", "--runs", "16",
                             "--out", str(tmp_path), "--json", "-", "--no-store")
    assert code == 0, err
    doc = json.loads(out)
    rows = {r["precision"]: r for r in doc["rows"]}
    assert set(rows) == {"fp32", "fp16", "int8", "dynamic"}
    assert all(r["status"] == "ok" for r in rows.values()), [r.get("error") for r in rows.values()]
    assert doc["parity"]["passed"] is True
    fp32 = rows["fp32"]["worst"]["psnr_db"]
    assert fp32 == "inf" or fp32 > 60, fp32          # FP32 matches TF
    assert rows["int8"]["size_reduction_pct"] > 50
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    if name == "bert":
        assert {i["dtype"] for i in manifest["variants"]["int8"]["inputs"]} == {"int32"}
        assert set(rows["int8"]["drift"]) == {"pooled_output", "sequence_output"}
    if name == "ssd_mobilenet":
        assert "detection" in rows["int8"]
        assert any(op.startswith("NON_MAX_SUPPRESSION") for op in manifest["variants"]["int8"]["float_ops"])
    if name in ("digits", "resnet50", "mobilenetv2"):
        assert rows["int8"]["accuracy"]["top1_agreement"] is not None
