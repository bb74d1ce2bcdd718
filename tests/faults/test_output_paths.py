"""Output-path faults (issue 26.1, 26.2): nothing measured is lost, one line, exit 2.

Real faults, not mocks: a path under a regular file (ENOTDIR, which stops root too), a read-only
filesystem and a full one (a small tmpfs mounted in a private mount namespace: ``unshare -rm``
needs no privileges where user namespaces are allowed; skipped with the reason where they are not).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest_plugins = ["conftest_bench"]

ROOT = Path(__file__).resolve().parents[2]
FAST = ("--min-runs", "50", "--min-time", "0.05", "--warmup-runs", "2")


def _env(tmp_path: Path) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "EDGEBENCH_DATA_DIR": str(tmp_path / "data"),
           "COLUMNS": "160", "TF_CPP_MIN_LOG_LEVEL": "2"}
    env.pop("EDGEBENCH_DEBUG", None)
    env.pop("EDGEBENCH_DB", None)
    return env


def _edgebench(tmp_path: Path, *args: str, cwd: Path | None = None, mount: str | None = None,
               timeout: float = 300, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """``python -m edgebench ARGS``; with ``mount`` ('SIZE:DIR' or 'ro:DIR') inside a private mount
    namespace where DIR is a fresh tmpfs of that size (or read-only)."""
    cmd = [sys.executable, "-m", "edgebench", *args]
    if mount:
        # mount, cd into the mount when it is the working folder, run, then list what the run left
        # there (the tmpfs goes away with the namespace)
        opt, where = mount.split(":", 1)
        opts = "ro" if opt == "ro" else f"size={opt}"
        go = 'cd "$0" && ' if cwd is not None and Path(where) == cwd else ""
        script = (f'mount -t tmpfs -o {opts} tmpfs "$0" && {go}"$@"; rc=$?; echo ==files==; '
                  'find "$0" -type f | sort; exit $rc')
        cmd = ["unshare", "-rm", "sh", "-c", script, where, *cmd]
    return subprocess.run(cmd, capture_output=True, text=True, env={**_env(tmp_path), **(env or {})},
                          cwd=cwd or tmp_path, timeout=timeout)


def _can_unshare() -> str | None:
    if not shutil.which("unshare"):
        return "no unshare(1) on this machine"
    r = subprocess.run(["unshare", "-rm", "sh", "-c", "mount -t tmpfs -o size=64k tmpfs /mnt"],
                       capture_output=True, text=True)
    return None if r.returncode == 0 else f"unshare -rm cannot mount a tmpfs here ({r.stderr.strip()[:120]})"


NO_NS = _can_unshare()
needs_ns = pytest.mark.skipif(NO_NS is not None, reason=str(NO_NS))


def _runs(tmp_path: Path, db: Path) -> list[dict]:
    r = _edgebench(tmp_path, "results", "list", "--db", str(db), "--json", "-")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    return data["rows"] if isinstance(data, dict) else data


def _last_line(p: subprocess.CompletedProcess) -> str:
    return [ln for ln in p.stderr.splitlines() if ln.strip()][-1]


def test_unwritable_json_keeps_the_result_stored_and_prints_the_table(tmp_path, bench_models):
    (tmp_path / "a-file").write_text("")
    db = tmp_path / "r.db"
    p = _edgebench(tmp_path, "bench", str(bench_models["fp32"]), *FAST, "--db", str(db),
                   "--json", str(tmp_path / "a-file" / "out.json"))
    assert p.returncode == 2, p.stderr
    assert "p99" in p.stdout                                   # the table came first
    assert f"could not write --json {tmp_path / 'a-file' / 'out.json'}" in p.stderr
    assert "Not a directory" in p.stderr and "Traceback" not in p.stderr and "internal error" not in p.stderr
    assert len(_runs(tmp_path, db)) == 1                        # stored before any file was tried


def test_no_store_and_unwritable_json_keeps_the_result_in_unsaved(tmp_path, bench_models):
    (tmp_path / "a-file").write_text("")
    p = _edgebench(tmp_path, "bench", str(bench_models["fp32"]), *FAST, "--no-store",
                   "--json", str(tmp_path / "a-file" / "out.json"))
    assert p.returncode == 2 and "could not write --json" in p.stderr, p.stderr
    kept = list((tmp_path / "data" / "unsaved").glob("*.json"))
    assert len(kept) == 1 and json.loads(kept[0].read_text())["rows"][0]["status"] == "ok"
    assert f"results import {kept[0]}" in p.stderr


@needs_ns
def test_read_only_out_folder_is_one_line_exit_2(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    p = _edgebench(tmp_path, "convert", "digits", "-p", "fp32", "--out", str(ro / "out"), mount=f"ro:{ro}")
    assert p.returncode == 2, p.stderr
    line = _last_line(p)
    assert f"cannot create the folder {ro / 'out'}: Read-only file system" in line and "--out" in line
    assert "Traceback" not in p.stderr


@needs_ns
def test_read_only_working_folder_names_the_default_output_folder(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    p = _edgebench(tmp_path, "convert", "digits", "-p", "fp32", cwd=work, mount=f"ro:{work}")
    assert p.returncode == 2, p.stderr
    assert "edgebench-out" in _last_line(p) and "Read-only file system" in _last_line(p)


@needs_ns
def test_report_html_into_a_read_only_folder_is_exit_2(tmp_path, bench_models):
    db = tmp_path / "r.db"
    assert _edgebench(tmp_path, "bench", str(bench_models["fp32"]), *FAST, "--db", str(db)).returncode == 0
    ro = tmp_path / "ro"
    ro.mkdir()
    p = _edgebench(tmp_path, "report", "--latest", "--db", str(db), "--html", str(ro / "r.html"), mount=f"ro:{ro}")
    assert p.returncode == 2, p.stderr
    assert _last_line(p) == (f"error: could not write --html {ro / 'r.html'}: Read-only file system; choose a "
                             "writable path (the results stay in the store)") and "Traceback" not in p.stderr


@needs_ns
def test_full_disk_during_conversion_keeps_complete_variants_and_no_partial_file(tmp_path):
    disk = tmp_path / "disk"
    disk.mkdir()
    # digits (tiny): fp32 ~600 KiB fits in 800 KiB, fp16 ~300 KiB does not fit after it
    (tmp_path / "a-file").write_text("")
    p = _edgebench(tmp_path, "convert", "digits", "-p", "fp32,fp16", "--out", str(disk / "out"),
                   "--json", str(tmp_path / "a-file" / "m.json"), mount=f"800k:{disk}")
    # the tmpfs is gone with the namespace: what the user saw is what we can check
    assert p.returncode == 2, p.stderr
    line = _last_line(p)
    assert "No space left on device" in line and "free space" in line, line
    assert "fp16 failed: not written" in line and "kept: fp32" in line, line
    # the manifest table came first; the --json that could not be written is named in the same line
    assert "fp32" in p.stdout.split("==files==")[0], p.stdout
    assert f"could not write --json {tmp_path / 'a-file' / 'm.json'}: Not a directory" in line, line
    assert "Traceback" not in p.stderr and "internal error" not in p.stderr
    left = p.stdout.split("==files==")[1].split()
    assert any(f.endswith("digits-tiny_fp32.tflite") for f in left), left          # complete, kept
    assert not any("fp16" in f or f.endswith(".tmp") for f in left), left          # no partial file


@needs_ns
def test_full_store_keeps_the_result_in_unsaved_and_is_exit_3(tmp_path, bench_models):
    disk = tmp_path / "disk"
    disk.mkdir()
    # an empty store is 64 KiB; 30,000 raw samples do not fit in what is left of 160 KiB
    p = _edgebench(tmp_path, "bench", str(bench_models["fp32"]), "--runs", "30000", "--warmup-runs", "2",
                   "--db", str(disk / "r.db"), mount=f"160k:{disk}")
    assert p.returncode == 3, p.stderr
    line = _last_line(p)
    assert "result measured but not stored" in line and "database or disk is full" in line, line
    kept = list((tmp_path / "data" / "unsaved").glob("*.json"))
    assert len(kept) == 1 and len(json.loads(kept[0].read_text())["rows"][0]["samples_ns"]) == 30000
    assert f"edgebench results import {kept[0]}" in line and "p99" in p.stdout


def test_json_to_dev_full_is_written_into_never_replaced(tmp_path, bench_models):
    """/dev/full as an output file: ENOSPC on write, one line, the result stored -- and the device
    stays a device (an atomic rename over it, as root, would have replaced it with a file)."""
    import stat

    db = tmp_path / "r.db"
    p = _edgebench(tmp_path, "bench", str(bench_models["fp32"]), *FAST, "--db", str(db), "--json", "/dev/full")
    assert p.returncode == 2, p.stderr
    assert "could not write --json /dev/full: No space left on device" in p.stderr
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode) and stat.S_ISCHR(os.stat("/dev/null").st_mode)
    assert len(_runs(tmp_path, db)) == 1


def test_unwritable_data_or_cache_folder_is_one_line_naming_its_variable(tmp_path, bench_models):
    """The default store lives in the data folder, reference models build in the cache folder: a
    folder that cannot be made is exit 2 naming it and the variable that moves it (was: internal
    error: OSError, exit 3)."""
    (tmp_path / "a-file").write_text("")
    p = _edgebench(tmp_path, "bench", str(bench_models["fp32"]), *FAST,
                   env={"EDGEBENCH_DATA_DIR": str(tmp_path / "a-file" / "data")})
    assert p.returncode == 2, p.stderr
    assert _last_line(p) == (f"error: cannot create the folder {tmp_path / 'a-file' / 'data'}: Not a directory; "
                             "set EDGEBENCH_DATA_DIR to a writable folder (or pass --db PATH)")
    assert "p99" not in p.stdout                      # refused before anything was measured
    p = _edgebench(tmp_path, "convert", "digits", "-p", "fp32",
                   env={"EDGEBENCH_CACHE_DIR": str(tmp_path / "a-file" / "cache")})
    assert p.returncode == 2 and "set EDGEBENCH_CACHE_DIR to a writable folder" in _last_line(p), p.stderr
    assert "Traceback" not in p.stderr and "internal error" not in p.stderr


def test_matrix_json_unwritable_prints_the_table_and_keeps_every_cell(tmp_path, bench_models):
    (tmp_path / "a-file").write_text("")
    (tmp_path / "m.yaml").write_text(f"models: [{bench_models['fp32']}]\nthreads: [1, 2]\nruns: 30\n")
    db = tmp_path / "r.db"
    p = _edgebench(tmp_path, "matrix", "run", "m.yaml", "--db", str(db), "--json", str(tmp_path / "a-file" / "m.json"))
    assert p.returncode == 2, p.stderr
    assert "2 of 2 cells" in p.stdout                                          # the table came first
    assert _last_line(p) == (f"error: could not write --json {tmp_path / 'a-file' / 'm.json'}: Not a directory; "
                             "choose a writable path (the table above is the result)")
    assert len(_runs(tmp_path, db)) == 2


def test_diagnose_files_that_cannot_be_written_each_get_a_line_and_the_result_is_stored(tmp_path, run_cli,
                                                                                        monkeypatch):
    """--json, --markdown, --html and --model-explorer go the same way (was: only the HTML was named,
    as '...: cannot write (None)', hiding the others). In-process: TensorFlow is loaded once."""
    (tmp_path / "a-file").write_text("")
    bad = tmp_path / "a-file"
    db = tmp_path / "r.db"
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("EDGEBENCH_DATA_DIR", str(tmp_path / "data"))
    code, out, err = run_cli("diagnose", "digits", "-p", "int8", "-n", "8", "--calibration-samples", "8",
                             "--no-isolated", "--db", str(db), "--json", str(bad / "d.json"), "--markdown",
                             str(bad / "d.md"), "--html", str(bad / "d.html"), "--model-explorer", str(bad / "d.me.json"))
    assert code == 2, err
    for option, name in (("--json", "d.json"), ("--markdown", "d.md"), ("--html", "d.html"),
                         ("--model-explorer", "d.me.json")):
        assert f"could not write {option} {bad / name}: Not a directory; choose a writable path" in err, err
    assert "(None)" not in err and "Traceback" not in err
    assert "int8" in out                                                       # the table came first
    assert len(_runs(tmp_path, db)) == 1


def test_json_markdown_junit_into_a_read_only_folder_one_line_each(tmp_path):
    """convert-and-compare's three files into a read-only folder: chmod 0o500 for a normal user;
    root ignores permission bits, so as root the folder is a read-only tmpfs (private mount
    namespace). The table first, one line per file, the result stored once, exit 2."""
    ro = tmp_path / "ro"
    ro.mkdir()
    db = tmp_path / "r.db"
    args = ["convert-and-compare", "digits", "-p", "fp32", "-n", "8", "--runs", "30", "--db", str(db),
            "--json", str(ro / "r.json"), "--markdown", str(ro / "r.md"), "--junit", str(ro / "r.xml")]
    if os.geteuid() != 0:
        ro.chmod(0o500)
        try:
            p = _edgebench(tmp_path, *args)
        finally:
            ro.chmod(0o700)
        why = "Permission denied"
    elif NO_NS is None:
        p = _edgebench(tmp_path, *args, mount=f"ro:{ro}")
        why = "Read-only file system"
    else:
        pytest.skip(f"running as root (permission bits do not stop root) and {NO_NS}")
    assert p.returncode == 2, p.stderr
    for option, name in (("--json", "r.json"), ("--markdown", "r.md"), ("--junit", "r.xml")):
        assert f"could not write {option} {ro / name}: {why}; choose a writable path" in p.stderr, p.stderr
    assert "fp32" in p.stdout.split("==files==")[0] and "Traceback" not in p.stderr
    assert len(_runs(tmp_path, db)) == 1
