"""The smaller findings of issue 37 item 9, each pinned: capacity from the back-to-back run, an
interrupted run's verdict, "vs TF" only when TF ran, no loop back to diagnose, sub-microsecond
latencies as decimals, "larger" not "-2% smaller", --help without type placeholders, the README
naming every package scripts/test installs."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
INPUTS = ROOT / "tests" / "goldens" / "inputs"


def _doc(name: str) -> dict:
    return json.loads((INPUTS / f"{name}.json").read_text())


def test_paced_capacity_is_one_over_the_back_to_back_mean():
    from edgebench.bench.sustain import paced
    from edgebench.targets.base import RunResult

    slow = RunResult("host", "m.tflite", "x", np.full(200, 2_000_000, np.int64),
                     extra={"paced": {"period_ms": 5.0, "achieved_period_ms": 5.0}})
    fast = RunResult("host", "m.tflite", "x", np.full(200, 1_000_000, np.int64))
    p = paced(slow, fast, "m")
    assert p.capacity_qps == pytest.approx(1000.0)          # 1 / 1 ms, not 1 / the paced 2 ms


def test_an_interrupted_run_reads_interrupted_not_a_row_failed():
    from edgebench.judge.outcome import run_verdict
    from edgebench.report.markdown import render_markdown
    from edgebench.rows import Document

    d = _doc("compare")
    d.update(interrupted=True, interrupted_by="SIGTERM")
    for r in d["rows"][2:]:
        r.update(status="failed", error="not run: interrupted (SIGTERM) before this row")
    doc = Document.from_dict(d)
    v = run_verdict(doc)
    assert v.text == "interrupted (SIGTERM): 2 of 4 rows measured, the rest not run"
    md = render_markdown(doc)
    assert "**⏹ interrupted (SIGTERM): 2 of 4 rows measured, the rest not run**" in md
    assert "a row FAILED" not in md


def test_diagnose_of_a_tflite_pair_says_what_it_measured_against():
    from edgebench.report.diagnose import accuracy_text
    from edgebench.rows import Document

    d = _doc("diagnose")
    tf = Document.from_dict(d)
    row = next(r for r in tf.rows if r.accuracy is not None and r.accuracy.top1_drop_pp is not None)
    assert "pp vs TF)" in accuracy_text(row, tf)
    d["reference"] = {**d["reference"], "precision": "fp32", "target": "host"}
    pair = Document.from_dict(d)
    assert "pp vs the float .tflite)" in accuracy_text(row, pair) and "vs TF" not in accuracy_text(row, pair)


def test_sub_microsecond_latency_is_a_decimal():
    from edgebench.core.formats import fmt_metric

    assert fmt_metric("ms", 0.000992) == "0.000992"
    assert fmt_metric("ms", 0.0123) == "0.0123" and fmt_metric("ms", 0.00005) == "5.00e-05"


def test_a_file_that_grew_is_larger_not_negative_smaller():
    from edgebench.report.terminal.compare import headline_lines
    from edgebench.rows import Document

    d = _doc("compare")
    d["rows"][1]["size_reduction_pct"] = -2.3
    lines = headline_lines(Document.from_dict(d))
    assert any("2% larger" in ln for ln in lines) and not any("-2% smaller" in ln for ln in lines), lines


@pytest.mark.parametrize("command", [("bench",), ("convert-and-compare",), ("results", "show"), ("report",)])
def test_help_has_no_type_placeholders(run_cli, command):
    code, out, err = run_cli(*command, "--help")
    assert code == 0, err
    assert "<bool>" not in out and not re.search(r"\{[a-z_]+\}", out) and "<list[" not in out, out
    usage = next(ln for ln in out.splitlines() if "Usage:" in ln)
    assert "[OPTIONS]" in usage and "{" not in usage, usage


def test_readme_names_every_package_scripts_test_installs():
    script = (ROOT / "scripts" / "test").read_text()
    packages = set(re.findall(r"need\+=\(([a-z0-9.+-]+)\)", script))
    assert {"adb", "chromium", "qemu-user-static", "binfmt-support"} <= packages
    intro = (ROOT / "README.md").read_text().split("## Documentation")[0]
    missing = [p for p in sorted(packages) if f"`{p}`" not in intro]
    assert not missing, f"README's scripts/test paragraph does not name {missing}"


def test_a_keep_float_run_that_misses_its_goal_does_not_point_back_to_diagnose(run_cli, tmp_path):
    """Diagnose's "prove it" command kept its tensors float; when the goal is still missed, the
    gate says what to try next, not the diagnose command that printed it (a loop)."""
    code, out, err = run_cli("convert-and-compare", "digits", "-p", "fp32,int8", "-n", "16", "--runs", "20",
                             "--calibration-samples", "16", "--keep-float", ".*scores.*MatMul.*",
                             "--min-psnr", "999", "--no-store", "--out", str(tmp_path / "out"))
    assert code == 1, err
    line = [ln for ln in err.splitlines() if ln.strip()][-1]
    assert "gate failed" in line and "find the layer" not in line, line
    assert "tensor(s) float did not reach it: let --keep-float auto search" in line, line


def test_readme_examples_are_the_programs_output_of_the_commands_the_script_runs():
    """Each example block of the README and the docs (after its marker) is what scripts/readme_examples.py writes: the
    commands it runs, each followed by its output -- a hand-edited block drifts from both."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("readme_examples", ROOT / "scripts" / "readme_examples.py")
    mod = importlib.util.module_from_spec(spec)
    import sys

    sys.modules["readme_examples"] = mod            # its dataclasses look their module up
    spec.loader.exec_module(mod)
    examples = mod.examples(Path("/tmp"))
    pages = {e.page for e in examples} | {"README.md"}
    marked = {(page, name) for page in pages for name in re.findall(
        r"<!-- example: ([\w-]+) \(scripts/readme_examples.py\) -->", (ROOT / page).read_text())}
    assert marked == {(e.page, e.name) for e in examples}
    for ex in examples:
        readme = (ROOT / ex.page).read_text()
        at = readme.index(mod.MARKER.format(name=ex.name))
        start = readme.index("```\n", at) + 4
        block = readme[start:readme.index("\n```", start)]
        shown = [ln[2:] for ln in block.splitlines() if ln.startswith("$ ") and not ln.startswith("$ cd ")]
        assert shown == list(ex.commands), ex.name
        assert not re.search(r"\w…|…\w", block), f"{ex.name}: a word cut in {ex.page}'s example"
