"""Every numeric option of every command, fuzzed with nan, inf, -1, 0 and a huge value (issue 26.4).

The options are read from the typer app itself, so a new command or option is covered without a
line here; one that has no range in ``cli/_ranges.RANGES`` fails ``test_every_numeric_option_has_a_range``.
A value outside the range must exit 2 before any work, with one line naming the option; the
command's arguments are paths that do not exist, so reaching the body would print a different error.
"""

from __future__ import annotations

import math
import time

import pytest
import typer

from edgebench.cli import app
from edgebench.cli._ranges import RANGES

BAD = ("nan", "inf", "-1", "0", "1e308")


def _commands():
    root = typer.main.get_command(app)

    def walk(cmd, path):
        if hasattr(cmd, "commands"):
            for name, sub in sorted(cmd.commands.items()):
                yield from walk(sub, path + [name])
        else:
            yield path, cmd

    yield from walk(root, [])


def _numeric(param) -> str | None:
    td = getattr(param, "type_descriptor", None)
    ann = repr(getattr(td, "annotation", None)) if td is not None else ""
    if not getattr(param, "opts", None) or not param.opts[0].startswith("--") or getattr(param, "is_flag", False):
        return None
    return "float" if "float" in ann else "int" if "int" in ann and "Point" not in ann else None


def _required(cmd, flag: str) -> list[str]:
    """Values for the command's required arguments (paths that do not exist) and other required
    options (their first choice, else a word), so parsing reaches the range check."""
    out: list[str] = []
    for q in cmd.params:
        if not q.required or (q.opts and q.opts[0] == flag):
            continue
        if not q.opts or not q.opts[0].startswith("-"):
            out.append("does-not-exist.tflite")
        else:
            choices = getattr(getattr(q, "type", None), "choices", None)
            out += [q.opts[0], str(choices[0]) if choices else "p99"]
    return out


CASES = [(path, p.opts[0], kind, _required(cmd, p.opts[0]))
         for path, cmd in _commands() for p in cmd.params if (kind := _numeric(p))]


def test_every_numeric_option_has_a_range():
    assert len(CASES) >= 40, len(CASES)        # the walk found the options (bench alone has a dozen)
    missing = sorted({flag for _, flag, _, _ in CASES if flag not in RANGES})
    assert not missing, f"numeric options without a range in cli/_ranges.RANGES: {missing}"


def _expected_rejected(flag: str, kind: str, raw: str) -> bool:
    value = float(raw)
    if kind == "int" and (not math.isfinite(value) or raw == "1e308"):
        return True                             # not an integer: click refuses it by name
    return not RANGES[flag].ok(int(value) if kind == "int" else value)


@pytest.mark.parametrize("path,flag,kind,args", CASES, ids=[f"{' '.join(c[0])} {c[1]}" for c in CASES])
def test_out_of_range_values_exit_2_before_any_work(run_cli, tmp_path, monkeypatch, path, flag, kind, args):
    monkeypatch.setenv("EDGEBENCH_DB", str(tmp_path / "results.db"))
    monkeypatch.chdir(tmp_path)
    positional = args
    for raw in BAD:
        if not _expected_rejected(flag, kind, raw):
            continue
        t0 = time.perf_counter()
        code, out, err = run_cli(*path, *positional, flag, raw)
        text = out + err
        assert code == 2, (raw, text)
        assert flag in text and "Traceback" not in text, (raw, text)
        assert "does-not-exist" not in text or flag in text.splitlines()[-1], (raw, text)
        assert time.perf_counter() - t0 < 5, "the check runs before any work"
        assert not (tmp_path / "results.db").exists() and not (tmp_path / "edgebench-out").exists()


def test_in_range_values_pass_the_check():
    from edgebench.cli._ranges import check

    for flag, rng in RANGES.items():
        for v in (rng.lo, rng.hi):
            if v is not None and not ((v == rng.lo and rng.lo_open) or (v == rng.hi and rng.hi_open)):
                check(flag, v)                  # the bounds themselves are valid unless open


@pytest.mark.parametrize("argv,needle", [
    (["bench", "m.tflite", "--report-every", "3"], "--report-every 3 sets the window of a sustained run"),
    (["bench", "m.tflite", "--xnnpack-cache", "--cold-starts", "2", "--delegate", "none"], "--xnnpack-cache"),
    (["convert", "digits", "--keep-float", ""], "--keep-float ''"),
    (["convert-and-compare", "digits", "--min-cosine", "2"], "--min-cosine 2: must be >= -1 and <= 1"),
    (["convert-and-compare", "digits", "--min-delegated", "150"], "--min-delegated 150: must be >= 0 and <= 100"),
    (["bench", "m.tflite", "--duration", "nan"], "--duration nan"),
    (["bench", "m.tflite", "--period-ms", "inf"], "--period-ms inf"),
])
def test_contradictions_and_gate_thresholds_are_refused_before_work(run_cli, tmp_path, monkeypatch, argv, needle):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "m.tflite").write_bytes(b"")
    code, out, err = run_cli(*argv)
    assert code == 2 and needle in out + err, out + err
    assert not (tmp_path / "edgebench-out").exists()
