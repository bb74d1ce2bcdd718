"""The first screen of convert-and-compare (issue 27): a headline per candidate, a table that fits
80/100/120 columns with its most important columns and no split number, one warning line per
cause, then where the files went and the run id. Goldens pin the layouts; regenerate them
deliberately with EDGEBENCH_UPDATE_GOLDENS=1."""

from __future__ import annotations

import copy
import os
import re
from pathlib import Path

import pytest
from rich.console import Console

from edgebench.report.terminal.compare import render_compare
from edgebench.report.terminal.warnings import lines as grouped

GOLDEN_DIR = Path(__file__).parent / "fixtures" / "terminal"

UNSTABLE = ("unstable: the median moved between windows of the run (robust spread {cv}% of 10 window medians "
            ">= 5%); close other programs, pin threads (--threads), add --warmup-time, or run longer (--min-time)")
SHAPE = ("{where}: XNNPACK took {a}/{b} nodes in 2 partitions; left on the CPU interpreter: SHAPE, STRIDED_SLICE, "
         "PACK, RESHAPE; SHAPE and the ops after it compute a tensor shape at run time from a dynamic dimension "
         "(typically the batch of a Flatten/Reshape): convert with --static-batch (other dynamic dims: "
         "--input-shape) and the converter folds them into constants, so the delegate can take the graph in one "
         "partition")


def first_screen_doc() -> dict:
    """The demo's shape: four precisions on the host, the same two warnings on most rows, a gate
    that int8 fails, the files' folder and a stored run id."""
    from conftest_report import make_compare_doc

    doc = make_compare_doc()
    for i, r in enumerate(doc["rows"]):
        r["warnings"] = [UNSTABLE.format(cv=20 + 7 * i)]
        if r["precision"] != "int8":
            r["warnings"].append(SHAPE.format(where=f"{r['precision']} on host", a=6 + i, b=10 + i))
    doc["reference"].setdefault("latency_ms", {})["warnings"] = [UNSTABLE.format(cv=53)]
    doc["gate"] = {"passed": False, "checks": [
        {"precision": p, "target": "host", "metric": "accuracy_drop_pp", "value": d, "threshold": 1.0,
         "passed": d <= 1.0, "message": f"{p} on host: top-1 drop {d:.2f} pp vs TF reference "
                                        f"{'<=' if d <= 1.0 else '>'} max 1 pp"}
        for p, d in (("fp32", 0.0), ("fp16", 0.0), ("int8", 1.5), ("dynamic", 0.25))]}
    doc["manifest"] = "edgebench-out/mobilenet_v2_035/3f2a9c1b/manifest.json"
    doc["inputs"] = {"samples": 500, "sha256": "7419fa6ea174" + "0" * 52}
    return doc


def screen(doc: dict, width: int, **kw) -> str:
    con = Console(width=width, record=True, color_system=None, force_terminal=False)
    for part in render_compare(doc, width=width, **kw):
        con.print(part)
    return con.export_text()


@pytest.mark.parametrize("width", [80, 100, 120])
def test_first_screen_golden(width):
    text = screen(first_screen_doc(), width)
    path = GOLDEN_DIR / f"convert-and-compare-{width}.txt"
    if os.environ.get("EDGEBENCH_UPDATE_GOLDENS"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert text == path.read_text()


@pytest.mark.parametrize("width", [80, 100, 120])
def test_the_table_fits_and_keeps_its_answer(width):
    text = screen(first_screen_doc(), width)
    assert max(len(line) for line in text.splitlines()) <= width
    lines = text.splitlines()
    top = next(i for i, line in enumerate(lines) if line.startswith("┏"))
    head = lines[top + 1:next(i for i in range(top, len(lines)) if lines[i].startswith("┡"))]
    # a header may wrap between its words ("size" over "red."): read each column's lines together
    cells = [" ".join(ln.split("┃")[k].strip() for ln in head).strip() for k in range(1, head[0].count("┃"))]
    for col in ("precision", "size red.", "p50 ms", "p99 ms", "Δtop-1 pp", "status"):
        assert col in cells, (col, cells)
    # never a split number: every number of the int8 row appears whole on one line
    int8 = next(line for line in text.splitlines() if line.startswith("│ int8"))
    for number in ("74.6%", "-1.50"):
        assert number in int8
    if width < 120:
        assert "hidden to fit the terminal:" in text and "--wide" in text


def test_headline_first_then_table_then_one_line_per_cause_then_files_and_run():
    text = screen(first_screen_doc(), 100)
    lines = text.splitlines()
    assert lines[0].startswith("fp32:") and lines[2].startswith("int8: 75% smaller, p50 1.6x faster than fp32")
    assert "GATE FAILED: top-1 drop" in lines[2]
    assert "top-1 -1.50 pp" in lines[2]
    table_at = next(i for i, line in enumerate(lines) if line.startswith("┏"))
    assert table_at == 5        # four headline lines and the table's title
    warnings = [line for line in lines if line.startswith("warning")]
    assert warnings == [
        # shortened between words, never inside one (issue 37 item 2); --verbose shows all
        "warning (all rows): unstable: the median moved … — fix: --threads --warmup-time (--verbose: why)",
        "warning (fp32, fp16, dynamic): left on the CPU interpreter … — fix: --static-batch --input-shape",
    ]
    assert lines[-2] == "files: edgebench-out/mobilenet_v2_035/3f2a9c1b/"
    assert lines[-1] == "stored as run r-compare-1 (edgebench results show r-compare-1)"


def test_verbose_keeps_every_word():
    text = screen(first_screen_doc(), 100, verbose=True)
    joined = " ".join(text.split())
    assert "the converter folds them into constants, so the delegate can take the graph in one partition" in joined
    assert joined.count("unstable: the median moved") == 1 and "spread 53%, 20%, 27%, 34%, 41% of 10" in joined


def test_the_references_timing_is_one_note_not_a_warning():
    """The reference is not a candidate: at default verbosity its own timing warnings are one dim
    note (no "warning (tf)" line); --verbose lists them in full like every row's; no note when
    its timing raised nothing."""
    doc = first_screen_doc()
    for r in doc["rows"]:
        r["warnings"] = []
    text = screen(doc, 100)
    assert not [line for line in text.splitlines() if line.startswith("warning")]
    assert "reference latency unstable: its timing only, not a candidate's (--verbose: why)" in text
    verbose = " ".join(screen(doc, 100, verbose=True).split())
    assert "warning (tf): unstable: the median moved between windows of the run (robust spread 53%" in verbose
    assert "reference latency" not in verbose
    doc["reference"]["latency_ms"]["warnings"] = []
    assert "reference latency" not in screen(doc, 100)


def test_grouping_keeps_causes_apart_and_names_their_rows():
    items = [("fp32", "fp32 on host: XNNPACK took 6/10 nodes; left on the CPU interpreter: SHAPE; fix with "
                      "--static-batch", "fp32 on host"),
             ("int8", "int8 on host: XNNPACK took 7/12 nodes; left on the CPU interpreter: SHAPE, SOFTMAX; fix "
                      "with --keep-float", "int8 on host"),
             ("fp16", "fp16 on host: XNNPACK took 14/18 nodes; left on the CPU interpreter: SHAPE; fix with "
                      "--static-batch", "fp16 on host")]
    out = grouped(items, width=None)
    assert len(out) == 2
    assert out[0].startswith("warning (fp32, fp16): XNNPACK took 6/10, 14/18 nodes; left on the CPU")
    assert out[1].startswith("warning (int8): ") and "--keep-float" in out[1]
    full = grouped(items, verbose=True)
    assert "6/10, 14/18" in full[0] and "fix with --static-batch" in full[0]


def test_ranges_of_several_rows_merge_into_one_range():
    """--repeats gives each row a range ("0.0315-0.032 ms"); grouped, the line shows the span of
    them all, not a range of ranges; --verbose lists each row's."""
    t = "run-to-run: p50 across 3 worker processes {}-{} ms; rerun on a quieter machine"
    items = [("fp32", t.format(0.03152, 0.03195), "fp32 on host"), ("int8", t.format(0.009555, 0.009604), "int8 on host")]
    assert grouped(items, width=None)[0].startswith(
        "warning (fp32, int8): run-to-run: p50 across 3 worker processes 0.009555–0.03195 ms;")
    assert "0.03152-0.03195, 0.009555-0.009604 ms" in grouped(items, verbose=True, width=None)[0]


def test_a_failed_row_is_in_the_headline_not_hidden():
    doc = first_screen_doc()
    doc["rows"][1] = {**copy.deepcopy(doc["rows"][1]), "status": "failed", "error": "worker crashed (SIGSEGV)"}
    text = screen(doc, 80)
    assert re.search(r"^fp16: FAILED: worker crashed \(SIGSEGV\)", text, re.M)


def test_diagnose_commands_are_printed_whole_at_80_columns(monkeypatch, capsys):
    """Issue 27: a "prove it" command is never cropped mid-word (`--keep-float functi`): it gets a
    line of its own, printed without wrapping, so copy and paste runs it."""
    from edgebench.cli import _common
    from edgebench.report.publish import PublishOptions
    from edgebench.report.terminal.diagnose import render_diagnose
    from edgebench.rows import Document

    cmd = ("edgebench convert-and-compare digits --precision int8 --keep-float "
           "functional_1/conv2d_1/Conv2D,functional_1/dense_1/MatMul --max-accuracy-drop 1.0 --data eval.npz")
    doc = Document.from_dict({"kind": "diagnose", "model": "digits", "created": "2026-12-03T10:00:00+00:00",
                              "fingerprint": {}, "rows": [{"precision": "int8", "status": "ok", "samples": 64,
                                                           "layers": [], "fix_commands": [cmd]}]})
    monkeypatch.setenv("COLUMNS", "80")
    _common.deliver(doc, PublishOptions(store=False), lambda d: render_diagnose(d))
    out = capsys.readouterr().out
    assert cmd in out.splitlines()
