"""Inputs that were accepted without a word (issue 37 item 6): each is one line naming the option
and the fix, exit 2, before anything runs -- or, where the value is harmless but unused, a warning."""

from __future__ import annotations

import numpy as np
import pytest

pytest_plugins = ["conftest_bench"]


def _err(err: str) -> str:
    return [ln for ln in err.splitlines() if ln.strip()][-1]


@pytest.mark.parametrize("args,line", [
    (("convert-and-compare", "m.tflite", "--preprocess", "bogus"),
     "error: --preprocess bogus: unknown; use one of scale01, mobilenet, imagenet-caffe, none"),
    (("convert", "digits", "--preprocess", "bogus"),
     "error: --preprocess bogus: unknown; use one of scale01, mobilenet, imagenet-caffe, none"),
    (("bench", "m.tflite", "--json", ""), "error: --json '': empty; give a file path, or - for standard output"),
    (("results", "list", "--json", ""), "error: --json '': empty; give a file path, or - for standard output"),
    (("results", "list", "--db", ""), "error: --db '': empty; give a database file or URL (or leave the option "
                                      "out for the default store)"),
    (("convert-and-compare", "m.tflite", "--markdown", ""),
     "error: --markdown '': empty; give a file path, or - for standard output"),
    (("convert-and-compare", "m.tflite", "-p", "fp32,int8,fp32"),
     "error: --precision fp32,int8,fp32: 'fp32' is given twice; list each once"),
    (("convert-and-compare", "m.tflite", "--targets", "host,host"),
     "error: --targets host,host: 'host' is given twice; list each once"),
])
def test_refused_before_anything_runs(run_cli, args, line):
    code, out, err = run_cli(*args)
    assert code == 2 and _err(err) == line, err
    assert out == ""


def test_bench_targets_twice_nan_inputs_and_a_missing_binary_are_refused(run_cli, bench_models, tmp_path):
    m = str(bench_models["fp32"])
    code, out, err = run_cli("bench", m, "--targets", "host,host", "--runs", "20", "--no-store")
    assert code == 2 and _err(err) == "error: --targets host,host: 'host' is given twice; list each target once"
    x = np.random.default_rng(0).uniform(0, 1, (4, 8, 8, 1)).astype(np.float32)
    x[2, 1, 1, 0] = np.nan
    x[3, 0, 0, 0] = np.inf
    np.savez(tmp_path / "nan.npz", image=x)
    code, out, err = run_cli("bench", m, "--data", str(tmp_path / "nan.npz"), "--runs", "20", "--no-store")
    assert code == 2 and _err(err) == (f"error: --data {tmp_path / 'nan.npz'}: input 'image' holds 2 NaN/Inf "
                                       "value(s) (the first in sample 2); clean the data"), err
    assert out == ""                                               # nothing was measured
    code, out, err = run_cli("bench", m, "--benchmark-binary", str(tmp_path / "nope"), "--runs", "20", "--no-store")
    assert code == 2 and f"benchmark_model binary {tmp_path / 'nope'} does not exist" in _err(err), err
    # a real file given where no device can use it: measured, with a warning saying it is unused
    (tmp_path / "benchmark_model").write_text("#!/bin/sh\n")
    code, out, err = run_cli("bench", m, "--benchmark-binary", str(tmp_path / "benchmark_model"), "--runs", "20",
                             "--no-store")
    assert code == 0 and "--benchmark-binary" in err and "so it is not used" in err, err
