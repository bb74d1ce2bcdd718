"""Every numeric option of every command, fuzzed with nan, inf, -1, 0 and a huge value (issue 26.4).

The options are read from the typer app itself, so a new command or option is covered without a
line here; one that has no range in ``edgebench.core.ranges.RANGES`` fails
``test_every_numeric_option_has_a_range``. Comma-separated numbers (``--concurrency 1,2,4``) are
fuzzed when their flag has a range. A value outside the range must exit 2 before any work, with one
line naming the option; a value inside it must get past the check (the command's arguments are
paths that do not exist, so reaching the body prints a different error). A matrix file's numeric
keys are held to the same ranges (``test_matrix_numbers_use_the_options_ranges``).
"""

from __future__ import annotations

import math
import re
import time

import pytest
import typer

from edgebench.cli import app
from edgebench.core.ranges import RANGES

BAD = ("nan", "inf", "-1", "0", "1e308", "100000000000000")   # the last: a huge value an int option parses


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
    """'float' / 'int' for a numeric option, 'ints' for a comma-separated list of integers whose flag
    has a range (--concurrency, --batch-sizes), else None."""
    td = getattr(param, "type_descriptor", None)
    ann = repr(getattr(td, "annotation", None)) if td is not None else ""
    if not getattr(param, "opts", None) or not param.opts[0].startswith("--") or getattr(param, "is_flag", False):
        return None
    if "float" in ann:
        return "float"
    if "int" in ann and "Point" not in ann:
        return "int"
    return "ints" if "str" in ann and param.opts[0] in RANGES else None


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
    assert not missing, f"numeric options without a range in edgebench.core.ranges.RANGES: {missing}"
    assert {"--concurrency", "--batch-sizes"} <= {flag for _, flag, kind, _ in CASES if kind == "ints"}


def _help(param) -> str:
    return " ".join((getattr(param, "help", None) or "").split())


def test_a_value_the_help_gives_a_meaning_is_in_range():
    """'0 = all' (--limit), '(0: none)' (--top-ops): a documented value must pass its range."""
    documented = [(flag, m.group(1)) for path, cmd in _commands() for p in cmd.params
                  if (flag := (p.opts or [""])[0]) in RANGES
                  for m in re.finditer(r"(?:^|[ (;])(-?\d+(?:\.\d+)?)\s*(?:=|:)\s*[a-z]", _help(p))]
    assert ("--limit", "0") in documented and ("--top-ops", "0") in documented, documented
    for flag, raw in documented:
        assert RANGES[flag].ok(float(raw)), f"{flag} documents {raw} but its range refuses it"


def _expected_rejected(flag: str, kind: str, raw: str) -> bool:
    value = float(raw)
    if kind in ("int", "ints") and (not math.isfinite(value) or raw == "1e308"):
        return True                             # not an integer: refused by name
    return not RANGES[flag].ok(value if kind == "float" else int(value))


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
    complaint = re.compile(re.escape(flag) + r" \S+: must be")
    for raw in BAD:
        if _expected_rejected(flag, kind, raw):
            continue
        # in range: gets past the check (then fails on the missing input, or runs a query)
        code, out, err = run_cli(*path, *positional, flag, raw)
        assert not complaint.search(out + err) and "Traceback" not in out + err, (raw, out + err)


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


def _matrix_numeric_keys():
    """Every matrix key that takes a number (its own check accepts 5) -- a new one is covered too."""
    from edgebench.matrix.run import KEYS

    return [k for k in KEYS.values() if k.check(5) is None]


def test_every_numeric_matrix_key_names_the_option_whose_range_it_takes():
    keys = _matrix_numeric_keys()
    assert {"runs", "min_time_s", "seed", "steps", "batch_sizes"} <= {k.name for k in keys}
    assert not [k.name for k in keys if k.flag not in RANGES], "a numeric matrix key without an option range"


YAML_BAD = {"nan": ".nan", "inf": ".inf", "-1": "-1", "0": "0", "1e308": "1.0e+308", "100000000000000": "100000000000000"}


@pytest.mark.parametrize("key", [k.name for k in _matrix_numeric_keys()])
def test_matrix_numbers_use_the_options_ranges(run_cli, tmp_path, monkeypatch, key):
    """`matrix run --set KEY=VALUE --dry-run` (and the same key in the file): a value the option's range
    refuses is exit 2 naming the key and the option, before any cell; one it accepts passes."""
    from edgebench.matrix.run import KEYS

    k = KEYS[key]
    monkeypatch.chdir(tmp_path)
    head = "models: [digits]\n" + ("kind: train\n" if "edge" not in k.kinds else "")
    (tmp_path / "m.yaml").write_text(head)
    for raw, yaml_value in YAML_BAD.items():
        value = float(raw)
        refused = k.check(int(value) if value.is_integer() and raw != "1e308" else value) is not None \
            or not RANGES[k.flag].ok(value)
        code, out, err = run_cli("matrix", "run", "m.yaml", "--set", f"{key}={yaml_value}", "--dry-run")
        if refused:
            assert code == 2 and f"--set {key}" in err and "Traceback" not in err, (raw, err)
            assert k.flag in err or "is not" in err, (raw, err)     # the option's range, or the key's type
        else:
            assert code == 0, (raw, out + err)
    (tmp_path / "m.yaml").write_text(f"{head}{key}: .inf\n")
    code, _, err = run_cli("matrix", "run", "m.yaml", "--dry-run")
    assert code == 2 and f"m.yaml:{head.count(chr(10)) + 1}: {key}" in err, err


def test_an_infinite_matrix_time_is_refused_before_any_cell(run_cli, tmp_path, monkeypatch):
    """Was: every cell started and failed (`--min-time inf: must be a finite number`), exit 3."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "m.yaml").write_text("models: [digits]\nprecisions: [fp32]\nmin_time_s: .inf\nseed: 0\n")
    code, out, err = run_cli("matrix", "run", "m.yaml", "--db", str(tmp_path / "r.db"))
    assert code == 2 and "m.yaml:3: min_time_s: inf must be >= 0 and <= 604,800 (the range of --min-time)" in err, err
    assert not (tmp_path / "r.db").exists()
