"""Standard output redirected onto a disk that fills (issue 37 item 1): every command that can write
JSON to stdout says so in one line and exits 2 -- never a document cut short with exit 0 -- and a
measured result is still kept (the store, or ``unsaved/`` with ``--no-store``).

A real full disk: a 4 KiB tmpfs in a private mount namespace (``unshare -rm``, as in
test_output_paths.py) holds the redirected stdout, with one page free (the output is cut mid-way:
the short write Python's unbuffered stdout used to ignore) or none (the first write fails). The
commands run through the console script's entry (``edgebench.cli.run``) in children forked from one
process that imported TensorFlow once (tests/faults/full_disk_driver.py), under PYTHONUNBUFFERED=1
as CI runners and containers set it (the case that lost output silently).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest_plugins = ["conftest_bench", "conftest_adb"]

HERE = Path(__file__).parent
ROOT = HERE.parents[1]
LOG = ROOT / "tests" / "fixtures" / "benchmark_model" / "tflite2.4_xiaomi_mi11_cpu_fp32.txt"
FAST = ["--runs", "20", "--warmup-runs", "1"]
PAGE = 4096
GOLDEN_INPUTS = ROOT / "tests" / "goldens" / "inputs"



def _can_unshare() -> str | None:
    import shutil

    if not shutil.which("unshare"):
        return "no unshare(1) on this machine"
    r = subprocess.run(["unshare", "-rm", "sh", "-c", "mount -t tmpfs -o size=64k tmpfs /mnt"],
                       capture_output=True, text=True)
    return None if r.returncode == 0 else f"unshare -rm cannot mount a tmpfs here ({r.stderr.strip()[:120]})"


NO_NS = _can_unshare()
needs_ns = pytest.mark.skipif(NO_NS is not None, reason=str(NO_NS))


def _jobs(tmp: Path, models: dict[str, Path], db: Path, run_a: str, run_b: str) -> dict[str, dict]:
    """name -> argv and the bytes left free: one page where the document is larger than a page
    (it is cut mid-way), none where it is smaller (the first write fails)."""
    m = str(models["fp32"])
    (tmp / "m.yaml").write_text(f"models: [{m}]\nruns: 20\n")
    import numpy as np

    np.savez(tmp / "d.npz", image=np.random.default_rng(0).uniform(0, 1, (4, 8, 8, 1)).astype(np.float32))
    d = ["--db", str(db)]
    return {
        "bench": dict(argv=["bench", m, *FAST, *d, "--json", "-"], free=PAGE, stored=True),
        "bench --no-store": dict(argv=["bench", m, *FAST, "--no-store", "--json", "-"], free=PAGE, unsaved=True),
        "convert-and-compare": dict(argv=["convert-and-compare", m, *FAST, "-n", "4", "--data", "synthetic", *d,
                                          "--json", "-"], free=PAGE, stored=True),
        "compare": dict(argv=["compare", m, str(models["int8"]), "--data", str(tmp / "d.npz"), *d, "--json", "-"],
                        free=PAGE, stored=True),
        "convert": dict(argv=["convert", "digits", "-p", "fp32", "--out", str(tmp / "conv"), "--json", "-"],
                        free=PAGE),
        "diagnose": dict(argv=["diagnose", "digits", "-p", "int8", "-n", "8", "--calibration-samples", "8",
                               "--no-isolated", *d, "--json", "-"], free=PAGE, stored=True),
        "train-baseline": dict(argv=["train-baseline", "digits", "--steps", "2", "--warmup-steps", "1",
                                     "--batch-sizes", "8", *d, "--json", "-"], free=0, stored=True),
        "matrix run": dict(argv=["matrix", "run", str(tmp / "m.yaml"), *d, "--json", "-"], free=0, stored=True),
        "import-log": dict(argv=["import-log", str(LOG), "--json", "-"], free=0),
        "devices": dict(argv=["devices", "--json", "-"], free=0),
        "env": dict(argv=["env", "--json", "-"], free=0),
        "models list": dict(argv=["models", "list", "--json", "-"], free=PAGE),
        "models build": dict(argv=["models", "build", "digits", "--json", "-"], free=0),
        "results list": dict(argv=["results", "list", *d, "--json", "-"], free=0),
        "results show": dict(argv=["results", "show", run_a, *d, "--json", "-"], free=PAGE),
        "results compare": dict(argv=["results", "compare", run_a, run_b, *d, "--json", "-"], free=0),
        "results history": dict(argv=["results", "history", "--metric", "p50", "--model", "digits-tiny_fp32",
                                      *d, "--json", "-"], free=0),
        "results export": dict(argv=["results", "export", "--format", "json", *d], free=PAGE),
        "results import": dict(argv=["results", "import", str(GOLDEN_INPUTS / "sustained.json"), *d, "--json", "-"],
                               free=0),
    }


@pytest.fixture(scope="module")
def full_disk(tmp_path_factory, bench_models, adb_server, digits_model):
    from edgebench.store.db import Store

    tmp = tmp_path_factory.mktemp("stdout-full")
    db = tmp / "r.db"
    with Store(str(db)) as st:
        run_a = st.save(json.loads((GOLDEN_INPUTS / "bench.json").read_text()))
        doc = json.loads((GOLDEN_INPUTS / "bench.json").read_text())
        doc["created"] = "2027-01-01T00:00:00+00:00"
        run_b = st.save(doc)
    with Store(str(db)) as st:
        before = len(st.list_runs(limit=None))
    jobs = _jobs(tmp, bench_models, db, run_a, run_b)
    (tmp / "spec.json").write_text(json.dumps({"root": str(tmp), "jobs": list(jobs.values())}))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1", "COLUMNS": "160",
           "EDGEBENCH_DATA_DIR": str(tmp / "data"), "TF_CPP_MIN_LOG_LEVEL": "2"}
    env.pop("EDGEBENCH_DEBUG", None)
    p = subprocess.run(["unshare", "-rm", sys.executable, str(HERE / "full_disk_driver.py"), str(tmp / "spec.json")],
                       capture_output=True, text=True, env=env, cwd=tmp, timeout=900)
    assert p.returncode == 0, p.stderr[-3000:]
    results = json.loads((tmp / "results.json").read_text())
    print({" ".join(r["argv"][:2])[:30]: (r["seconds"], r["cpu_s"]) for r in results})
    return {"tmp": tmp, "db": db, "before": before,
            "by_name": {name: (job, res) for (name, job), res in zip(jobs.items(), results)}}


NAMES = ["bench", "bench --no-store", "convert-and-compare", "compare", "convert", "diagnose", "train-baseline",
         "matrix run", "import-log", "devices", "env", "models list", "models build", "results list",
         "results show", "results compare", "results history", "results export", "results import"]


@needs_ns
@pytest.mark.parametrize("name", NAMES)
def test_json_to_a_full_disk_is_one_line_exit_2(full_disk, name):
    job, res = full_disk["by_name"][name]
    lines = [ln for ln in res["stderr"].splitlines() if ln.strip()]
    assert res["rc"] == 2, res
    # what fit on the disk reached it (a page, or nothing), and the user is told the rest did not
    assert res["written"] == job["free"], res
    assert lines and lines[-1].startswith("error: could not write") and "No space left on device" in lines[-1], res
    assert "standard output" in lines[-1], res
    assert "Traceback" not in res["stderr"] and "internal error" not in res["stderr"], res
    if job.get("stored"):
        assert " is stored" in lines[-1], lines[-1]          # and says where
    if job.get("unsaved"):
        kept = list((full_disk["tmp"] / "data" / "unsaved").glob("bench-*.json"))
        assert len(kept) == 1 and f"results import {kept[0]}" in lines[-1], lines[-1]
        assert json.loads(kept[0].read_text())["rows"][0]["status"] == "ok"


@needs_ns
def test_every_measured_result_is_in_the_store(full_disk):
    """bench, convert-and-compare, compare, diagnose, train-baseline, the matrix's cell and the
    imported document: each stored although its stdout copy failed."""
    from edgebench.store.db import Store

    with Store(str(full_disk["db"])) as st:
        kinds = sorted(r["kind"] for r in st.list_runs(limit=None))
    assert len(kinds) == full_disk["before"] + 7, kinds
    assert {"bench", "compare", "diagnose", "train"} <= set(kinds), kinds


def test_results_list_to_dev_full_is_exit_2_not_internal_error(tmp_path):
    """A table (not JSON) to /dev/full: the documented exit 2 (was: internal error, exit 3)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "EDGEBENCH_DATA_DIR": str(tmp_path)}
    with open("/dev/full", "w") as full:
        p = subprocess.run([sys.executable, "-m", "edgebench", "results", "list", "--db", str(tmp_path / "r.db")],
                           stdout=full, stderr=subprocess.PIPE, text=True, env=env, timeout=120)
    assert p.returncode == 2, p.stderr
    assert p.stderr.strip().splitlines() == ["error: could not write to standard output: No space left on device; "
                                             "free space on that disk or redirect the output elsewhere"]
