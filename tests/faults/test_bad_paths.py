"""Bad input that was "internal error" (exit 3) -- issue 37 item 5: a file name that is not UTF-8,
a path part over the file system's 255 bytes, a --db that cannot be used. Each is one line naming
the input and the fix, exit 2, before anything is measured."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LONG = "a" * 300


def _lines(err: str) -> list[str]:
    return [ln for ln in err.splitlines() if ln.strip()]


def test_a_file_name_that_is_not_utf8_is_exit_2_naming_the_byte(tmp_path):
    """As the shell passes it: bytes, which Python holds as lone surrogates (was: runner internal error)."""
    name = os.fsencode(tmp_path) + b"/bad\xff.tflite"
    Path(os.fsdecode(name)).write_bytes(b"x")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "EDGEBENCH_DATA_DIR": str(tmp_path / "data")}
    p = subprocess.run([sys.executable, "-m", "edgebench", "bench", name, "--no-store"], capture_output=True,
                       env=env, timeout=120)
    err = p.stderr.decode("utf-8")              # the message itself is valid UTF-8
    assert p.returncode == 2, err
    assert _lines(err) == [f"error: {tmp_path}/bad\\xff.tflite: not valid UTF-8 (the byte \\xff); rename the file "
                           "(or use a link to it) with a UTF-8 name"]


@pytest.mark.parametrize("args", [
    ("bench", f"/tmp/{LONG}.tflite"),
    ("convert-and-compare", f"/tmp/{LONG}.tflite"),
    ("import-log", f"/tmp/{LONG}.txt"),
    ("results", "list", "--db", f"/tmp/{LONG}/r.db"),
])
def test_a_path_part_over_255_bytes_is_exit_2(run_cli, args):
    code, out, err = run_cli(*args)
    assert code == 2, err
    line = _lines(err)
    assert len(line) == 1 and LONG in line[0] and "File name too long" in line[0] and "shorter path" in line[0], err
    assert "internal error" not in err


@pytest.mark.parametrize("db,shown,says", [
    ("sqlite:////proc/no/r.db", "sqlite:////proc/no/r.db",
     "cannot open the results database (unable to open database file); check the path"),
    # a URL's user part is masked like a password (a token is often given as the user: redact.py)
    ("mysql://u@localhost/x", "mysql://***@localhost/x",
     "the database driver 'MySQLdb' is not installed; install the Python package"),
])
def test_a_bad_db_is_exit_2_as_documented(run_cli, db, shown, says):
    code, out, err = run_cli("results", "list", "--db", db)
    assert code == 2, err
    assert _lines(err) == [f"error: --db {shown}: {says}" + _lines(err)[0].split(says, 1)[1]], err
