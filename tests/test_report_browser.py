"""The HTML reports in a real browser (issue 27): Debian's Chromium, headless, lays each report out
in a 1280-px window; the page must not be wider than that and must open with its verdict.
The report itself has no JavaScript: the test adds one line to a copy of it that writes the
measured widths into the title, and reads them back from ``--dump-dom``."""

from __future__ import annotations

import copy
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest_report import make_compare_doc, make_train_doc
from edgebench.report.html import render_html

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
PAGE_PX = 1280

MEASURE = ("<script>document.title = 'W=' + document.documentElement.scrollWidth + ';F=' + "
           "(document.querySelector('section') || {id: 'none'}).id + ';T=' + "
           "Math.max(0, ...Array.from(document.querySelectorAll('section')).map(s => s.scrollWidth));</script>")


def layout(html_text: str, tmp_path: Path, name: str) -> dict[str, str]:
    """Chromium's page width (scrollWidth), first section id and widest section, in px."""
    if CHROMIUM is None:
        pytest.skip("chromium is not installed (Debian package 'chromium'; scripts/test installs it)")
    page = tmp_path / f"{name}.html"
    page.write_text(html_text.replace("</body>", MEASURE + "</body>"))
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           f"--user-data-dir={tmp_path / ('profile-' + name)}", f"--window-size={PAGE_PX},900",
           "--dump-dom", page.as_uri()]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    m = re.search(r"<title>W=(\d+);F=([\w-]+);T=(\d+)</title>", res.stdout)
    assert m, (res.returncode, res.stdout[:300], res.stderr[-600:])
    return {"width": int(m.group(1)), "first": m.group(2), "widest_section": int(m.group(3))}


def _wide_compare_doc() -> dict:
    """Many targets and a long model name: the "All rows" table and the grid at their widest."""
    doc = make_compare_doc(model="mobilenet_v3_large_minimalistic_1.0_224_with_a_rather_long_name")
    extra = []
    for i, target in enumerate(("adb:R58N40ABCDE", "adb:emulator-5554", "adb:192.168.1.20:5555", "adb:ZY22FLBM9X")):
        for r in doc["rows"]:
            x = copy.deepcopy(r)
            x["target"], x["device_model"] = target, f"Galaxy A{52 + i} 5G (SM-A52{i}B)"
            extra.append(x)
    doc["rows"] += extra
    doc["gate"] = {"passed": False, "checks": [{"precision": "int8", "target": "host", "metric": "accuracy_drop_pp",
                                               "value": 1.5, "threshold": 1.0, "passed": False,
                                               "message": "int8 on host: top-1 drop 1.50 pp vs TF reference > max 1 pp"}]}
    return doc


def _diagnose_doc() -> dict:
    layers = [{"rank": i + 1, "tensor": f"functional_1/block_{i}/conv2d_{i}/Conv2D;functional_1/block_{i}/bn/FusedBatchNorm",
               "op": "CONV_2D", "node": i, "shape": [1, 56, 56, 144], "scale": 0.0123, "zero_point": -3,
               "rmse_over_scale": 0.31, "snr_db": 40.0 - i, "cosine": 0.9999, "max_abs": 0.2,
               "isolated_snr_db": 44.0 - i, "isolated_channel_snr_db": 41.0 - i, "outlier_ratio": 3.2,
               "finding": i == 0, "advice": "keep float (--keep-float functional_1/block_0/conv2d_0/Conv2D)"}
              for i in range(12)]
    return {"kind": "diagnose", "model": "mobilenet_v2", "created": "2026-12-03T10:00:00+00:00",
            "fingerprint": {"hostname": "h", "tensorflow": "2.21.0"}, "run_id": "d1",
            "rows": [{"precision": "int8", "status": "ok", "samples": 100, "layers": layers, "findings": 1,
                      "accuracy": {"top1": 0.62, "top1_drop_pp": 9.5},
                      "fix_commands": ["edgebench convert-and-compare mobilenet_v2 --precision fp32,int8 "
                                       "--keep-float functional_1/block_0/conv2d_0/Conv2D --max-accuracy-drop 1"]}]}


@pytest.mark.parametrize("name", ["compare", "wide-compare", "compare+train", "diagnose", "readiness"])
def test_reports_fit_a_1280px_page_and_open_with_the_verdict(name, tmp_path):
    if name == "readiness":      # a real run's document (tests/goldens/inputs/record.py): long errors and paths
        import json

        docs = [json.loads((Path(__file__).parent / "goldens" / "inputs" / "readiness.json").read_text())]
    else:
        docs = {"compare": [make_compare_doc()], "wide-compare": [_wide_compare_doc()],
                "compare+train": [make_compare_doc(), make_train_doc()], "diagnose": [_diagnose_doc()]}[name]
    got = layout(render_html(docs), tmp_path, name)
    assert got["width"] <= PAGE_PX, got
    assert got["widest_section"] <= PAGE_PX, got
    assert got["first"] == "verdict", got


@pytest.mark.parametrize("name", ["compare", "diagnose"])
def test_html_golden(name):
    """Byte-exact HTML layouts (regenerate deliberately with EDGEBENCH_UPDATE_GOLDENS=1)."""
    import os

    doc = make_compare_doc() if name == "compare" else _diagnose_doc()
    text = render_html(doc)
    path = Path(__file__).parent / "fixtures" / "html" / f"{name}.html"
    if os.environ.get("EDGEBENCH_UPDATE_GOLDENS"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert text == path.read_text()
