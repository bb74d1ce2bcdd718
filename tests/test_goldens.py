"""Byte-exact goldens of the renderers (issue 23 item 5): what the terminal tables, the Markdown
and the HTML reports print today, pinned before their columns move into one metric registry.

Inputs are frozen result documents in tests/goldens/inputs/ (recorded once from real runs by
tests/goldens/inputs/record.py, timings as measured): nothing here measures or converts. Each
golden renders one of them through the renderer function the CLI calls, the way the CLI prints it
(terminal: a rich Console of fixed width, no colour, not a terminal, as ``cli._common.deliver``).

A deliberate change of the output is one command, then review the diff of tests/goldens/:

    EDGEBENCH_UPDATE_GOLDENS=1 python -m pytest tests/test_goldens.py

Older goldens of the same kind live beside their tests and honour the same variable:
tests/test_first_screen.py (convert-and-compare first screen, hand-built document),
tests/test_report_browser.py (HTML of a hand-built compare and diagnose document);
tests/test_report_markdown.py keeps its Markdown golden inline.
"""

from __future__ import annotations

import difflib
import functools
import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import pytest
from rich.console import Console

GOLDENS = Path(__file__).parent / "goldens"
INPUTS = GOLDENS / "inputs"
WIDTHS = (80, 100, 120)
UPDATE = os.environ.get("EDGEBENCH_UPDATE_GOLDENS") == "1"


def load(name: str) -> dict[str, Any]:
    return json.loads((INPUTS / f"{name}.json").read_text(encoding="utf-8"))


def draw(parts: Any, width: int) -> str:
    """Renderables -> the text a ``width``-column terminal shows, printed as ``cli._common.deliver``
    prints them (a ``WholeLine`` command unwrapped). No colour and no terminal, so no escape codes.

    Nothing is normalized: every input is a frozen document (its ids, dates, paths and versions are
    the recorded ones), and the renderers read no clock, locale, time zone or environment (nor the
    hash seed: ``test_speedup_table_order_does_not_depend_on_the_hash_seed``)."""
    from edgebench.report.terminal._cells import WholeLine

    con = Console(width=width, file=io.StringIO(), record=True, color_system=None, force_terminal=False,
                  highlight=False, legacy_windows=False)
    for part in (parts if isinstance(parts, (list, tuple)) else [parts]):
        if isinstance(part, WholeLine):
            con.print(part, soft_wrap=True, markup=False, highlight=False)
        else:
            con.print(part)
    return con.export_text()


# --- terminal: each as its command draws it (edgebench/cli/*.py) ----------------------------------

def convert_and_compare(name: str, *, wide: bool = False, verbose: bool = False) -> Callable[[int], Any]:
    def render(width: int):
        from edgebench.report.terminal.compare import render_compare
        from edgebench.report.terminal.diagnose import render_keep_float_table

        doc = load(name)
        return render_keep_float_table(doc.get("keep_float_search")) + render_compare(
            doc, width=width, wide=wide, verbose=verbose)
    return render


def bench(name: str) -> Callable[[int], Any]:
    def render(width: int):
        from edgebench.report.terminal.bench import render_bench

        return render_bench(load(name), width=width)
    return render


def results_list(width: int):
    from edgebench.report.terminal.results import render_runs

    stored = load("results-list")
    return render_runs(stored["runs"], stored["where"], width=width)


def results_show(name: str) -> Callable[[int], Any]:
    def render(width: int):
        from edgebench.report.terminal.results import render_show

        return render_show(load(name), width=width)
    return render


def diagnose(width: int):
    from edgebench.report.terminal.diagnose import render_diagnose

    return render_diagnose(load("diagnose"), width=width)


def matrix(width: int):
    from edgebench.report.terminal.matrix import render_matrix

    return render_matrix(load("matrix-report"), width=width)



TERMINAL: dict[str, tuple[Callable[[int], Any], tuple[int, ...]]] = {
    "convert-and-compare": (convert_and_compare("compare"), WIDTHS),
    "convert-and-compare-wide": (convert_and_compare("compare", wide=True), (80,)),
    "convert-and-compare-keep-float": (convert_and_compare("keep-float"), WIDTHS),
    "convert-and-compare-keep-float-verbose": (convert_and_compare("keep-float", verbose=True), (100,)),
    "convert-and-compare-gate-failed": (convert_and_compare("gate-failed"), WIDTHS),
    "bench": (bench("bench"), WIDTHS),
    "bench-sustained": (bench("sustained"), WIDTHS),
    "results-list": (results_list, WIDTHS),
    "results-show-compare": (results_show("compare"), WIDTHS),
    "results-show-gate-failed": (results_show("gate-failed"), WIDTHS),
    "results-show-matrix-cell": (results_show("results-show-cell"), WIDTHS),
    "diagnose": (diagnose, WIDTHS),
    "matrix": (matrix, WIDTHS),
}

# --- documents: one per frozen input (the report of `report`, `--markdown`, diagnose `--html`) -----

DOCUMENTS = ("compare", "keep-float", "gate-failed", "bench", "sustained", "diagnose")


def check(got: str, path: Path) -> None:
    """``got`` equals the golden byte for byte; with EDGEBENCH_UPDATE_GOLDENS=1 it becomes the golden."""
    if UPDATE:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(got.encode("utf-8"))
        return
    rel = path.relative_to(GOLDENS.parent.parent)
    assert path.is_file(), f"{rel} is missing; create it with EDGEBENCH_UPDATE_GOLDENS=1 (see this module's docstring)"
    want = path.read_bytes().decode("utf-8")
    if got != want:
        diff = "".join(difflib.unified_diff(want.splitlines(keepends=True), got.splitlines(keepends=True),
                                            fromfile=f"{rel} (golden)", tofile=f"{rel} (rendered now)", n=2))
        pytest.fail(f"{rel} differs from today's rendering; if the change is deliberate, regenerate with "
                    f"EDGEBENCH_UPDATE_GOLDENS=1 and review the diff:\n{diff}", pytrace=False)


@functools.lru_cache(maxsize=None)
def drawn_in_child(name: str, hash_seed: str) -> dict[int, str]:
    """``TERMINAL[name]`` at each of its widths, drawn by a fresh Python with PYTHONHASHSEED=hash_seed."""
    code = ("import json, sys, test_goldens as g; render, widths = g.TERMINAL[sys.argv[1]]; "
            "sys.stdout.write(json.dumps({w: g.draw(render(w), w) for w in widths}))")
    here = Path(__file__).resolve().parent
    path = os.pathsep.join([str(here.parent), str(here), os.environ.get("PYTHONPATH", "")])
    res = subprocess.run([sys.executable, "-c", code, name], cwd=here, capture_output=True, timeout=120,
                         env={**os.environ, "PYTHONHASHSEED": hash_seed, "PYTHONPATH": path,
                              "PYTHONIOENCODING": "utf-8"})
    assert res.returncode == 0, res.stderr.decode("utf-8", "replace")[-2000:]
    return {int(w): text for w, text in json.loads(res.stdout.decode("utf-8")).items()}


@pytest.mark.parametrize("name,width", [(n, w) for n, (_, ws) in TERMINAL.items() for w in ws],
                         ids=lambda v: str(v))
def test_terminal_golden(name, width):
    render, _ = TERMINAL[name]
    text = draw(render(width), width)
    check(text, GOLDENS / "terminal" / f"{name}-{width}.txt")


def test_speedup_table_order_does_not_depend_on_the_hash_seed():
    """Op types with equal times (Reshape and Convert, 0.0000 ms) sort by name, not by a set's order."""
    assert drawn_in_child("bench", "0") == drawn_in_child("bench", "4")


@pytest.mark.parametrize("name", DOCUMENTS)
def test_markdown_golden(name):
    from edgebench.report.markdown import render_markdown

    check(render_markdown(load(name)), GOLDENS / "markdown" / f"{name}.md")


@pytest.mark.parametrize("name", DOCUMENTS)
def test_html_golden(name):
    from edgebench.report.html import render_html

    check(render_html(load(name)), GOLDENS / "html" / f"{name}.html")


def test_html_report_of_several_runs_golden():
    """`edgebench report --html RUN RUN ...`: related runs side by side on one page."""
    from edgebench.report.html import render_html

    check(render_html([load(n) for n in ("compare", "bench", "sustained")]), GOLDENS / "html" / "report.html")


def test_every_golden_file_is_checked():
    """A golden whose case was renamed or removed is stale: delete it (none is left behind)."""
    expected = {f"terminal/{n}-{w}.txt" for n, (_, ws) in TERMINAL.items() for w in ws}
    expected |= {f"markdown/{n}.md" for n in DOCUMENTS} | {f"html/{n}.html" for n in DOCUMENTS}
    expected |= {"html/report.html"}
    present = {p.relative_to(GOLDENS).as_posix() for p in GOLDENS.rglob("*") if p.is_file()
               and p.parent != INPUTS}
    assert present == expected, {"stale (delete)": sorted(present - expected), "missing": sorted(expected - present)}
