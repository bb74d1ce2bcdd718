"""One table model (issue 37 item 10): the renderers of the convert manifest, devices, import-log,
the matrix and the store's rows read typed records (edgebench/rows/records.py), not the producers'
JSON, and draw through the one set of width rules (report/terminal/fit.py); the p99 minimum is
derived once (measure.MIN_SAMPLES) with the standalone worker's single mirror pinned to it."""

from __future__ import annotations

import ast
import io
import json
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
INPUTS = ROOT / "tests" / "goldens" / "inputs"
TYPED = ("compare.py", "devices.py", "import_log.py", "matrix.py", "results.py")


def _raw_gets(path: Path) -> list[str]:
    """``x.get("...")`` calls on something that is not a typed record's own mapping field."""
    tree = ast.parse(path.read_text())
    out = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
                and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            target = ast.unparse(node.func.value)
            # a headline dict (identity.headline) and a matrix cell's axis values (params, a stored
            # run's Document.cell) are not producer JSON of these records; Document.get is typed meta
            if target in ("h", "doc", "typed") or target.endswith((".params", ".cell")):
                continue
            out.append(f"{path.name}:{node.lineno}: {ast.unparse(node)}")
    return out


def test_the_manifest_devices_import_log_matrix_and_store_renderers_read_typed_records():
    raw = [g for name in TYPED for g in _raw_gets(ROOT / "edgebench" / "report" / "terminal" / name)]
    assert not raw, "renderers reading producer JSON by key (type it in rows/records.py):\n" + "\n".join(raw)


def test_every_terminal_table_is_drawn_by_the_width_rules():
    """No renderer builds a rich Table of its own besides the fit engine (and the two-column
    environment listing, whose values wrap between words)."""
    allowed = {"fit.py", "compare.py"}      # compare.py: render_fingerprint, a field/value listing
    for path in sorted((ROOT / "edgebench" / "report" / "terminal").glob("*.py")):
        if path.name in allowed or path.name in ("diagnose.py", "train.py", "models.py", "results.py"):
            continue
        assert "Table(" not in path.read_text(), f"{path.name} builds a rich Table outside report/terminal/fit.py"


def test_records_read_what_the_producers_write():
    from edgebench.rows.records import Comparison, Device, Manifest, MatrixReport, StoredRun

    devs = [Device.of(r) for r in json.loads((INPUTS / "devices.json").read_text())["rows"]]
    assert devs[0].ready and devs[0].cpu_max_khz[-1] == 2913000 and devs[0].battery_status == "Discharging"
    assert devs[0].profile.id == "pixel_8" and not devs[1].ready and "unauthorized" in devs[1].error
    man = Manifest.of(json.loads((INPUTS / "manifest.json").read_text()))
    int8 = next(v for v in man.variants if v.precision == "int8")
    assert int8.ok and int8.quantization_mode == "full-integer" and int8.ops == 12 and int8.float_ops == {}
    runs = [StoredRun.of(r) for r in json.loads((INPUTS / "results-list.json").read_text())["runs"]]
    assert runs and all(len(r.run_id) >= 12 and r.kind for r in runs)
    rep = MatrixReport.of(json.loads((INPUTS / "matrix-report.json").read_text()))
    assert rep.total_cells == len(rep.cells) == 4 and rep.counts == {"ok": 2, "resumed": 2}
    from test_goldens import results_compare_rep

    cmp = Comparison.of(results_compare_rep())
    assert cmp.fingerprint_diff[0].field == "litert" and len(cmp.pairs) == 4 and cmp.pairs[0].identity[:2] == [
        "digits-tiny", "fp32"]


def test_the_p99_minimum_is_written_once():
    from edgebench.core.latency import MIN_SAMPLES
    from edgebench.targets import runner_stop

    assert runner_stop.DEFAULT_MIN_RUNS == MIN_SAMPLES["p99"]
    found = []
    for path in sorted((ROOT / "edgebench").rglob("*.py")):
        toks = tokenize.generate_tokens(io.StringIO(path.read_text()).readline)
        found += [f"{path.relative_to(ROOT)}:{t.start[0]}" for t in toks if t.type == tokenize.NUMBER and t.string == "662"]
    assert found == ["edgebench/targets/runner_stop.py:18"], found


@pytest.mark.parametrize("width", [80, 100, 120])
def test_typed_renderers_fit_and_keep_what_the_row_is(width):
    from rich.console import Console

    from edgebench.report.terminal.compare import render_manifest
    from edgebench.report.terminal.devices import render_devices
    from edgebench.report.terminal.matrix import render_matrix

    parts = [*render_manifest(json.loads((INPUTS / "manifest.json").read_text()), width=width),
             *render_devices(json.loads((INPUTS / "devices.json").read_text())["rows"], width=width),
             render_matrix(json.loads((INPUTS / "matrix-report.json").read_text()), width=width)]
    con = Console(width=width, file=io.StringIO(), record=True, color_system=None)
    for p in parts:
        con.print(p)
    text = con.export_text()
    assert max(len(ln) for ln in text.splitlines()) <= width and "…" not in text
    for ident in ("fp32", "fp16", "int8", "dynamic", "127.0.0.1:5611", "127.0.0.1:5612", "xnnpack"):
        assert ident in text, ident
