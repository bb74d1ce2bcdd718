"""Errors that blamed the wrong thing (issue 37 item 7): each now names what is actually wrong."""

from __future__ import annotations

import errno
from pathlib import Path

import numpy as np
import pytest

pytest_plugins = ["conftest_bench"]


def _err(err: str) -> str:
    return [ln for ln in err.splitlines() if ln.strip()][-1]


@pytest.fixture()
def image_npz(tmp_path) -> Path:
    p = tmp_path / "d.npz"
    np.savez(p, image=np.random.default_rng(0).uniform(0, 1, (4, 8, 8, 1)).astype(np.float32))
    return p


def test_compare_of_another_model_names_the_model_not_the_data(run_cli, bench_models, image_npz):
    a, b = str(bench_models["fp32"]), str(bench_models["dynamic"])     # image [8, 8, 1] vs features [64]
    code, out, err = run_cli("compare", a, b, "--data", str(image_npz), "--no-store")
    assert code == 2, err
    line = _err(err)
    assert line.startswith(f"error: {b} takes features [64] float32 where the reference takes image [8, 8, 1]"), line
    assert "two forms of one model" in line and "inputs.npz" not in line and "reshape" not in line, line
    # two forms of one model (float I/O and int8 I/O) are still compared
    code, out, err = run_cli("compare", a, str(bench_models["int8"]), "--data", str(image_npz), "--no-store")
    assert code == 0, err


def test_reference_of_another_model_names_the_reference(run_cli, bench_models, small_savedmodels, image_npz):
    code, out, err = run_cli("convert-and-compare", str(bench_models["fp32"]), "--reference",
                             str(small_savedmodels["multi"]), "--data", str(image_npz), "--no-store", "-n", "4")
    assert code == 2, err
    line = _err(err)
    assert f"(--reference {small_savedmodels['multi']}): the reference must be the model the .tflite files were " \
           "converted from" in line and "reshape" not in line, line


def test_a_folder_or_a_device_is_not_model_not_found(run_cli, bench_models, tmp_path):
    folder = bench_models["fp32"].parent
    code, out, err = run_cli("bench", str(folder), "--no-store")
    assert code == 2 and _err(err).startswith(f"error: {folder} is a folder, not a .tflite file (it holds "), err
    code, out, err = run_cli("bench", "/dev/null", "--no-store")
    assert code == 2 and _err(err) == ("error: /dev/null is a character device, not a .tflite file; give the path "
                                       "of an existing .tflite file"), err
    code, out, err = run_cli("import-log", str(tmp_path))
    assert code == 2 and _err(err).startswith(f"error: {tmp_path} is a folder, not a captured log file"), err
    code, out, err = run_cli("bench", str(tmp_path / "missing.tflite"), "--no-store")
    assert code == 2 and "model not found" in _err(err)                 # a missing file still says so


def test_period_below_a_nanosecond_is_echoed_as_typed(run_cli, bench_models):
    code, out, err = run_cli("bench", str(bench_models["fp32"]), "--period-ms", "1e-9", "--runs", "20", "--no-store")
    assert code == 2 and _err(err).startswith("error: --period-ms 1e-09 is shorter than one inference"), err


def test_out_dir_is_suggested_only_where_the_folder_came_from_it():
    from edgebench.convert.run import out_fix
    from edgebench.core.errors import OutputNotWritable

    rofs = OSError(errno.EROFS, "Read-only file system")
    msg = str(OutputNotWritable(Path("/x/lock.yaml"), rofs))          # env --lock, report, devices ...
    assert msg == "cannot write /x/lock.yaml: Read-only file system; choose a writable folder or fix its permissions"
    full = str(OutputNotWritable(Path("/x/a.prom"), OSError(errno.ENOSPC, "No space left on device")))
    assert "--out" not in full and "free space on that disk" in full
    assert "--out DIR" in out_fix(None) and "working folder" in out_fix(None)            # convert's default
    assert out_fix("edgebench-out/matrix-ab12/cell0001") == ("run from a writable working folder (edgebench "
                                                             "writes under ./edgebench-out)")       # matrix
    assert out_fix("/data/out") == "choose a writable folder for --out"
