"""Every input is bounded (issue 39): crafted .npz/.npy files, a matrix that names millions of cells,
very long benchmark_model logs, hostile result JSON -- each is one exit-2 line naming what it
declares, within bounded memory and time (edgebench/core/bounded.py, matrix.check_cells).

Memory is measured where it is spent: the reader runs in a child process under an address-space
limit (so a reader that inflates the whole file fails fast with MemoryError instead of swapping),
and the child reports its peak resident memory (VmHWM)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from hostile_inputs import deflate_npz, huge_shape_npz

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent
GiB = 1024 ** 3
# The child's address-space limit and what its peak RSS must stay under: numpy and edgebench.model.inputs
# take ~60 MB; the arrays of 10 samples a few KB. The files below declare 0.5-233,000 GiB.
LIMIT_AS = 3 * GiB // 2
PEAK_BOUND = 250 * 1024 ** 2


def _load_in_child(path: Path, n: int | None, shape: tuple[int, ...] = (8, 8, 1), name: str = "x") -> dict:
    """edgebench.model.inputs.load_data(path, n=n) in a fresh process under LIMIT_AS: {"error": one line or
    None, "type": exception class, "shape": loaded shape, "hwm": peak RSS bytes}."""
    code = textwrap.dedent(f"""
        import json, resource, sys
        resource.setrlimit(resource.RLIMIT_AS, ({LIMIT_AS}, {LIMIT_AS}))
        from edgebench.model.inputs import Signature, TensorSpec, load_data
        sig = Signature((TensorSpec({name!r}, (None, *{shape!r}), "float32"),), ())
        out = {{"error": None, "type": None, "shape": None}}
        try:
            ds = load_data({str(path)!r}, sig, n={n!r})
            out["shape"] = list(ds.arrays[{name!r}].shape)
        except BaseException as e:
            out["error"], out["type"] = str(e), type(e).__name__
        hwm = [l for l in open("/proc/self/status") if l.startswith("VmHWM:")][0]
        out["hwm"] = int(hwm.split()[1]) * 1024
        print(json.dumps(out))
    """)
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


# --------------------------------------------------------------------------- .npz / .npy


def test_npz_bomb_is_exit_2_naming_the_array_within_bounded_memory(tmp_path):
    """2.0 MiB of deflate that inflates to 2 GiB (on main: the whole array was inflated, 3 GB RSS
    even with -n 10; under this limit, MemoryError)."""
    bomb = deflate_npz(tmp_path / "bomb.npz", {"x": ((2 * GiB // 256 + 1, 8, 8, 1), "<f4")})
    assert bomb.stat().st_size < 3 * 1024 ** 2
    got = _load_in_child(bomb, 10)
    assert got["type"] == "BadInput", got
    assert "array 'x' declares [8388609, 8, 8, 1] float32 (2.0 GiB)" in got["error"] and "bomb" in got["error"]
    assert got["hwm"] < PEAK_BOUND, got


def test_huge_declared_shape_is_exit_2_naming_the_array_within_bounded_memory(tmp_path):
    """252 bytes that declare a 233 TiB array (on main: 'internal error: MemoryError', exit 3)."""
    huge = huge_shape_npz(tmp_path / "huge.npz", "x", (10 ** 12, 8, 8, 1))
    assert huge.stat().st_size < 400
    got = _load_in_child(huge, 10)
    assert got["type"] == "BadInput", got
    assert "array 'x' declares [1000000000000, 8, 8, 1] float32 (232.8 TiB) but holds 16 bytes" in got["error"]
    assert got["hwm"] < PEAK_BOUND, got
    # the same header as a plain .npy
    npy = tmp_path / "huge.npy"
    npy.write_bytes(huge_shape_npz.__globals__["npy_header"]((10 ** 12, 8, 8, 1)) + bytes(16))
    got = _load_in_child(npy, 10)
    assert got["type"] == "BadInput" and "declares [1000000000000, 8, 8, 1] float32" in got["error"], got


def test_only_the_samples_n_needs_are_read(tmp_path):
    """A real (if degenerate) 512 MiB array: -n 10 reads 10 samples, not 512 MiB (on main the
    whole array was inflated first)."""
    big = deflate_npz(tmp_path / "big.npz", {"x": ((2 * 1024 ** 2, 8, 8, 1), "<f4"),
                                              "labels": ((2 * 1024 ** 2,), "<i8")}, crc=True)
    got = _load_in_child(big, 10)
    assert got["error"] is None and got["shape"] == [10, 8, 8, 1], got
    assert got["hwm"] < PEAK_BOUND, got


def test_counts_are_checked_on_the_whole_file_when_only_n_rows_are_read(tmp_path):
    from edgebench.model.inputs import Signature, TensorSpec, load_data
    from edgebench.core.errors import BadInput

    sig = Signature((TensorSpec("x", (None, 4), "float32"),), ())
    np.savez(tmp_path / "d.npz", x=np.zeros((20, 4), np.float32), labels=np.zeros(7, np.int64))
    with pytest.raises(BadInput, match="7 labels for 20 samples"):
        load_data(str(tmp_path / "d.npz"), sig, n=5)
    two = Signature((TensorSpec("a", (None, 4), "float32"), TensorSpec("b", (None, 4), "float32")), ())
    np.savez(tmp_path / "ab.npz", a=np.zeros((20, 4), np.float32), b=np.zeros((9, 4), np.float32))
    with pytest.raises(BadInput, match="different sample counts"):
        load_data(str(tmp_path / "ab.npz"), two, n=5)
    np.save(tmp_path / "x.npy", np.arange(80, dtype=np.float32).reshape(20, 4))
    ds = load_data(str(tmp_path / "x.npy"), sig, n=3)
    assert ds.arrays["x"].tolist() == np.arange(12, dtype=np.float32).reshape(3, 4).tolist()
    np.save(tmp_path / "f.npy", np.asfortranarray(np.arange(80, dtype=np.float32).reshape(20, 4)))
    assert load_data(str(tmp_path / "f.npy"), sig, n=3).arrays["x"].tolist() == ds.arrays["x"].tolist()


def test_cli_names_the_array_and_its_declared_size(run_cli, small_savedmodels, tmp_path):
    huge = huge_shape_npz(tmp_path / "huge.npz", "a", (10 ** 12, 6))
    code, _, err = run_cli("compare", str(small_savedmodels["multi"]), str(small_savedmodels["multi"]),
                           "--data", str(huge), "-n", "10", "--no-store")
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "array 'a' declares [1000000000000, 6] float32 (21.8 TiB) but holds 16 bytes" in err


# --------------------------------------------------------------------------- the matrix


def _matrix_bomb(path: Path) -> Path:
    """1.9 KB naming 2,000,000 cells (100 targets x 200 threads x 100 data)."""
    targets = ["host", "tf"] + [f"adb:s{i}" for i in range(98)]
    path.write_text("model: digits\nthreads: [" + ",".join(map(str, range(1, 201))) + "]\ntargets: ["
                    + ",".join(targets) + "]\ndata: [" + ",".join(f"d{i}" for i in range(100)) + "]\n")
    return path


def test_matrix_bomb_is_refused_in_under_a_second(tmp_path):
    from edgebench.core.errors import BadInput
    from edgebench.matrix.run import MAX_CELLS, load_matrix

    bomb = _matrix_bomb(tmp_path / "bomb.yaml")
    assert bomb.stat().st_size < 2048
    t0 = time.perf_counter()
    with pytest.raises(BadInput, match=r"expands to 2,000,000 cells \(100 targets x 200 threads x 100 data\), "
                                       rf"more than the {MAX_CELLS:,}"):
        load_matrix(str(bomb))
    assert time.perf_counter() - t0 < 1.0      # on main: 150 s and 2.8 GB before a line was printed
    # end to end, in a process of its own (a hang on main is a timeout here, not a stuck suite)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-m", "edgebench", "matrix", "run", str(bomb), "--dry-run"],
                          capture_output=True, text=True, timeout=60, env=env)
    assert proc.returncode == 2 and "2,000,000 cells" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_matrix_file_and_axis_bounds(tmp_path):
    from edgebench.core.errors import BadInput
    from edgebench.matrix.run import MAX_CELLS, load_matrix

    long_axis = tmp_path / "axis.yaml"
    long_axis.write_text("model: digits\nthreads: [" + ",".join(map(str, range(1, MAX_CELLS + 2))) + "]\n")
    with pytest.raises(BadInput, match=f"threads lists {MAX_CELLS + 1:,} values"):
        load_matrix(str(long_axis))
    big = tmp_path / "big.yaml"
    with open(big, "wb") as fh:
        fh.truncate(2 * 1024 ** 2)          # sparse: 2 MiB of nothing
    with pytest.raises(BadInput, match="more than the 1.0 MiB edgebench reads as a matrix file"):
        load_matrix(str(big))


# --------------------------------------------------------------------------- benchmark_model logs

FIXTURE_LOG = TESTS / "fixtures" / "benchmark_model" / "tflite2.4_xiaomi_mi11_cpu_fp32.txt"


def test_a_log_of_thousands_of_warnings_keeps_a_bounded_result(run_cli, tmp_path):
    log = tmp_path / "long.log"
    log.write_text(FIXTURE_LOG.read_text() + "".join(f"WARNING: odd thing {i} in the delegate\n" for i in range(30000)))
    code, out, err = run_cli("import-log", str(log), "--json", "-")
    assert code == 0, err
    (row,) = json.loads(out)["rows"]
    assert len(row["warnings"]) == 101 and row["warnings"][-1] == ("... and 29,900 more warning lines (not kept; "
                                                                    "the log has them all)")
    assert row["status"] == "ok" and row["latency_ms"]["mean"] is not None


def test_long_lines_parse_in_linear_time(tmp_path):
    """Lines built to make the old patterns backtrack quadratically (200 KB each: ~80 s per line on
    main, a few ms here); run in a child so a regression is a timeout, not a stuck suite."""
    code = textwrap.dedent("""
        from edgebench.targets.benchmark_model.parse import parse_log
        n = 200_000
        lines = ["A" + " " * n + "x", "W/" + " " * n + "x", "count=1 " + "1" * n, "=" + " " * 400 + "x"]
        log = parse_log("\\n".join(lines) + "\\n")
        print(len(log.unparsed))
    """)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_log_over_the_size_limit_is_exit_2(run_cli, tmp_path):
    log = tmp_path / "huge.log"
    with open(log, "wb") as fh:
        fh.truncate(65 * 1024 ** 2)          # sparse: 65 MiB of nothing
    code, _, err = run_cli("import-log", str(log))
    assert code == 2 and "more than the 64.0 MiB edgebench reads as a benchmark_model log" in err


# --------------------------------------------------------------------------- result JSON


def test_results_import_is_bounded_and_shows_no_terminal_codes(run_cli, tmp_path):
    from conftest_report import make_compare_doc

    deep = tmp_path / "deep.json"
    deep.write_text("[" * 200_000 + "]" * 200_000)          # on main: RecursionError, exit 3
    code, _, err = run_cli("results", "import", str(deep), "--db", str(tmp_path / "r.db"))
    assert code == 2 and "nested too deeply" in err
    big = tmp_path / "big.json"
    with open(big, "wb") as fh:
        fh.truncate(513 * 1024 ** 2)
    code, _, err = run_cli("results", "import", str(big), "--db", str(tmp_path / "r.db"))
    assert code == 2 and "more than the 512.0 MiB edgebench reads as a result document" in err
    # a document naming paths and carrying terminal escapes: stored, shown inert, nothing opened
    doc = make_compare_doc()
    doc["rows"][0]["model"] = "evil\x1b]52;c;cHduZWQ=\x07\x1b[2J"
    doc["rows"][0]["model_path"] = "/etc/shadow"
    doc["source"] = {"path": "../../../../etc/passwd"}
    f = tmp_path / "hostile.json"
    f.write_text(json.dumps(doc))
    code, out, err = run_cli("results", "import", str(f), "--db", str(tmp_path / "r.db"), "--json", "-")
    assert code == 0, err
    run_id = json.loads(out)["rows"][0]["run_id"]
    code, out, err = run_cli("results", "show", run_id, "--db", str(tmp_path / "r.db"))
    assert code == 0, err
    assert "\x1b" not in out + err and "\x07" not in out + err and "evil\\x1b]52" in out
