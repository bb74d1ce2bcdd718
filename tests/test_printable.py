"""A file name is data (issue 37 item 3): its control characters are shown as escapes wherever
edgebench prints it -- tables, titles, warnings, errors, usage errors -- never sent to the terminal."""

from __future__ import annotations

import io
import re
import shutil

import pytest
from rich.console import Console
from rich.table import Table
from rich.text import Text

from edgebench.core.printable import printable, printable_lines
from edgebench.report.terminal.console import DataConsole, safe_text

pytest_plugins = ["conftest_bench"]

RED = "\x1b[31mRED\x1b[0m"
# anything a terminal would act on: C0, DEL, C1 (0x9b is a one-byte CSI), bidi overrides/isolates
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def test_printable_shows_controls_bidi_and_undecodable_bytes_as_escapes():
    assert printable(f"{RED}.tflite") == r"\x1b[31mRED\x1b[0m.tflite"
    assert printable("a\x9b2Jb\x07\x7f") == r"a\x9b2Jb\x07\x7f"
    assert printable("evil\u202egnp.tflite") == r"evil\u202egnp.tflite"
    assert printable("bad\udcff.tflite") == r"bad\xff.tflite"        # os.fsdecode of a non-UTF-8 byte
    assert printable("a\nb\tc") == r"a\nb\tc"
    assert printable_lines("one\x1b]0;title\x07\ntwo") == "one\\x1b]0;title\\x07\ntwo"
    for ok in ("digits-tiny_int8", "modèle-été.tflite", "模型.tflite", "résumé ✓ 📱", "[bold]x[/]"):
        assert printable(ok) == ok


def _shown(*parts, width: int = 80, terminal: bool = False) -> str:
    out = io.StringIO()
    con = DataConsole(file=out, width=width, force_terminal=terminal, color_system="standard" if terminal else None,
                      highlight=False)
    for p in parts:
        con.print(p)
    return out.getvalue()


def test_data_console_escapes_cells_titles_and_text_and_keeps_tables_aligned():
    t = Table(title=f"runs of {RED}")
    t.add_column("model")
    t.add_column("p50 ms", justify="right")
    t.add_row(f"{RED}.tflite", "1.23")
    t.add_row("plain.tflite", "4.56")
    text = Text(f"warning ({RED}): slow", style="yellow")
    text.stylize("bold", 0, 7)
    plain = _shown(t, text, f"[bold]{RED}[/]")
    assert not RAW.search(plain), plain
    assert plain.count(r"\x1b[31mRED\x1b[0m") == 4
    lines = [ln for ln in plain.splitlines() if ln.startswith(("┃", "│", "┏", "└"))]
    assert len({len(ln) for ln in lines}) == 1, plain              # measured as printed: aligned
    # on a real terminal rich's own colours are still sent; the data's codes are not
    coloured = _shown(t, text, terminal=True)
    assert "\x1b[33m" in coloured or "\x1b[1;33m" in coloured       # rich's yellow warning
    assert "\x1b[31mRED" not in coloured and r"\x1b[31mRED" in coloured
    kept = safe_text(text)
    assert kept.plain == r"warning (\x1b[31mRED\x1b[0m): slow"
    assert any((s.start, s.end, s.style) == (0, 7, "bold") for s in kept.spans), kept.spans


def test_a_plain_console_would_have_sent_them():
    """The check above can fail: rich alone passes ESC through (what main did)."""
    out = io.StringIO()
    Console(file=out, width=80, color_system=None).print(f"x {RED}")
    assert "\x1b[31m" in out.getvalue()


def test_cli_prints_a_file_name_with_escape_codes_as_text(bench_models, run_cli, tmp_path):
    model = tmp_path / f"{RED}.tflite"
    shutil.copy(bench_models["fp32"], model)
    db = tmp_path / "r.db"
    code, out, err = run_cli("bench", str(model), "--runs", "20", "--warmup-runs", "1", "--db", str(db))
    assert code == 0, err
    assert r"\x1b[31mRED\x1b[0m" in out and not RAW.search(out + err), out + err
    for args in (("results", "list", "--db", str(db)), ("results", "show", _run_id(db), "--db", str(db))):
        code, out, err = run_cli(*args)
        assert code == 0 and r"\x1b[31mRED" in out and not RAW.search(out + err), out + err
    # an error naming the file, and a usage error quoting the value typed
    code, out, err = run_cli("bench", str(tmp_path / f"missing{RED}.tflite"))
    assert code == 2 and r"missing\x1b[31mRED" in err and not RAW.search(err), err


def test_usage_error_quoting_a_value_shows_it_as_text(run_cli, tmp_path, capfd):
    code, out, err = run_cli("results", "list", f"--limit{RED}", "1")
    err += capfd.readouterr().err
    assert code == 2 and r"\x1b[31m" in err and not RAW.search(err), err


def _run_id(db) -> str:
    from edgebench.store.db import Store

    with Store(str(db)) as st:
        return st.list_runs(limit=1)[0]["run_id"]
