"""`matrix run --executor ray` on a real local Ray cluster (127.0.0.1, usage statistics off, its session
files in the test's tmp dir) with simulated adb devices behind a real adb server: one device runs one
cell at a time, a worker killed mid-matrix loses no finished cell and its cell is rerun, results land
in the store as local runs do (resume included), and bad input is one line with exit 2."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from edgebench.matrix.run import MatrixOptions, load_matrix, run_matrix
from edgebench.store.db import Store

pytest_plugins = ["conftest_adb"]

CLI = "import sys; from edgebench.cli import main; sys.exit(main(sys.argv[1:]))"
RAY_HOME = Path.home() / ".ray"


def _ray():
    from conftest import require_extra

    return require_extra("ray", "ray")


def _matrix(tmp_path, model, targets, threads=(1, 2, 3), name="m.yaml") -> str:
    p = tmp_path / name
    p.write_text(textwrap.dedent(f"""
        models: ['{model}']
        targets: [{', '.join(f"'{t}'" for t in targets)}]
        threads: [{', '.join(map(str, threads))}]
        runs: 40
        min_time_s: 0
    """).lstrip())
    return str(p)


@pytest.fixture()
def short_tmp():
    """A private folder for the cluster's session files with a short path: Ray's unix sockets live there
    (session_DATE_PID/sockets/plasma_store) and a socket path may not exceed 107 bytes, which pytest's
    tmp_path (/tmp/pytest-of-USER/pytest-N/TESTNAME0/...) does. Removed after the test."""
    import shutil
    import tempfile

    d = Path(tempfile.mkdtemp(prefix="ebt", dir="/tmp"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


def _env(tmp: Path) -> dict[str, str]:
    # TMPDIR: the private cluster's session folder (tempfile.mkdtemp) lands in this test's folder
    return dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", COLUMNS="200", RAY_USAGE_STATS_ENABLED="0", TMPDIR=str(tmp))


def _overlaps(cells: list[dict]) -> list[tuple[str, str]]:
    """Pairs of cells on one device whose [started, ended] intervals intersect."""
    by_dev: dict[str, list[dict]] = {}
    for c in cells:
        by_dev.setdefault(c["params"]["target"], []).append(c)
    bad = []
    for dev, cs in by_dev.items():
        cs.sort(key=lambda c: c["worker"]["started"])
        bad += [(a["key"], b["key"]) for a, b in zip(cs, cs[1:]) if b["worker"]["started"] < a["worker"]["ended"]]
    return bad


@pytest.mark.extras
def test_cells_never_share_a_device_and_land_in_the_store(make_sim, tiny_tflite, tmp_path, short_tmp):
    _ray()
    home_ray_before = RAY_HOME.exists()
    a, b = make_sim(has_python=True), make_sim(has_python=True, serialno="SIM00002")
    mfile = _matrix(tmp_path, tiny_tflite, [f"adb:{a.serial}", f"adb:{b.serial}"])
    db = str(tmp_path / "r.db")
    short = short_tmp
    r = subprocess.run([sys.executable, "-c", CLI, "matrix", "run", mfile, "--executor", "ray", "--db", db,
                        "--json", str(tmp_path / "rep.json")], capture_output=True, text=True, env=_env(short),
                       timeout=400)
    assert r.returncode == 0, r.stderr[-3000:]
    rep = json.loads((tmp_path / "rep.json").read_text())
    cells = rep["rows"]
    assert rep["executor"] == "ray" and len(cells) == 6 and {c["status"] for c in cells} == {"ok"}, cells
    assert _overlaps(cells) == []                 # one device, one cell at a time
    # ... while the two devices did run side by side (so the check above could have failed)
    da = [c["worker"] for c in cells if c["params"]["target"] == f"adb:{a.serial}"]
    db_ = [c["worker"] for c in cells if c["params"]["target"] == f"adb:{b.serial}"]
    assert any(x["started"] < y["ended"] and y["started"] < x["ended"] for x in da for y in db_)
    assert len({c["worker"]["pid"] for c in cells}) >= 2            # cells ran in Ray's workers, not the driver
    assert all(c["worker"]["pid"] != r for c in cells for r in (os.getpid(),))
    st = Store(db)
    runs = st.list_runs(limit=None)
    assert sorted(x["cell_key"] for x in runs) == sorted(c["key"] for c in cells)
    rows = st.rows(matrix_hash=rep["matrix_hash"])
    assert len(rows) == 6 and all(x["n_samples"] == 40 and x["p50_ms"] > 0 for x in rows)
    assert {x["target"] for x in rows} == {f"adb:{a.serial}", f"adb:{b.serial}"}
    # resume through Ray: nothing left to run, nothing stored twice
    r = subprocess.run([sys.executable, "-c", CLI, "matrix", "run", mfile, "--executor", "ray", "--db", db,
                        "--resume", "--json", "-"], capture_output=True, text=True, env=_env(short), timeout=200)
    assert r.returncode == 0, r.stderr[-3000:]
    assert json.loads(r.stdout)["counts"] == {"resumed": 6}
    assert len(st.list_runs(limit=None)) == 6
    assert RAY_HOME.exists() == home_ray_before         # no token or session written under ~/.ray
    assert not list(short.iterdir())                    # the private cluster's session folder was removed


def _cell_workers() -> dict[int, int]:
    """pid -> cell index of the Ray workers running a cell now (Ray titles them 'ray::cell N')."""
    out = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            title = (d / "cmdline").read_bytes().split(b"\0")[0].decode()
        except OSError:
            continue
        if title.startswith("ray::cell "):
            out[int(d.name)] = int(title.split()[1])
    return out


@pytest.mark.extras
def test_a_killed_worker_loses_no_finished_cell_and_its_cell_reruns(make_sim, tiny_tflite, tmp_path, short_tmp):
    _ray()
    from edgebench.matrix.ray_executor import RayExecutor, RayOptions

    a, b = make_sim(has_python=True), make_sim(has_python=True, serialno="SIM00002")
    spec = load_matrix(_matrix(tmp_path, tiny_tflite, [f"adb:{a.serial}", f"adb:{b.serial}"], threads=(1, 2, 3, 4)))
    db = str(tmp_path / "r.db")
    st = Store(db)
    box: dict = {}
    with RayExecutor(RayOptions(num_cpus=2, temp_dir=str(short_tmp))) as ex:
        worker = threading.Thread(target=lambda: box.update(rep=run_matrix(spec, MatrixOptions(db=db), executor=ex)))
        worker.start()
        killed = None
        deadline = time.monotonic() + 300
        while killed is None and worker.is_alive() and time.monotonic() < deadline:
            stored = st.list_runs(limit=None) if Path(db).exists() else []
            running = _cell_workers()
            if stored and running:
                pid, index = sorted(running.items())[0]
                before = {x["run_id"]: x["cell_key"] for x in stored}
                os.kill(pid, signal.SIGKILL)
                killed = (pid, index, time.time())
            time.sleep(0.05)
        worker.join(timeout=400)
    assert killed is not None, "the matrix ended before a worker could be killed mid-cell"
    rep = box["rep"]
    cells = {c["index"]: c for c in rep["cells"]}
    assert len(cells) == 8 and all(c["status"] == "ok" for c in cells.values()), rep["cells"]
    pid, index, at = killed
    rerun = cells[index]["worker"]
    assert rerun["pid"] != pid and rerun["started"] >= at     # its cell ran again, in another worker, after
    runs = st.list_runs(limit=None)
    assert sorted(x["cell_key"] for x in runs) == sorted(c["key"] for c in cells.values())   # each cell once
    assert {x["run_id"]: x["cell_key"] for x in runs if x["run_id"] in before} == before     # none lost
    assert _overlaps(list(cells.values())) == []


def test_bad_executor_input_is_one_line_with_exit_2(tmp_path, tiny_tflite):
    mfile = _matrix(tmp_path, tiny_tflite, ["host"], threads=(1,))
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", COLUMNS="200")

    def cli(*args, pre=""):
        return subprocess.run([sys.executable, "-c", pre + CLI, "matrix", "run", mfile, *args], capture_output=True,
                              text=True, env=env, timeout=120)

    r = cli("--executor", "dask")
    assert r.returncode == 2 and "--executor 'dask': use local or ray" in r.stderr and "Traceback" not in r.stderr
    r = cli("--address", "auto")
    assert r.returncode == 2 and "--address is for --executor ray" in r.stderr
    r = cli("--executor", "ray", "--address", "nowhere")
    assert r.returncode == 2 and "--address 'nowhere'" in r.stderr
    # Ray not importable (sys.modules[name] = None makes `import ray` raise ImportError)
    r = cli("--executor", "ray", pre="import sys; sys.modules['ray'] = None; ")
    assert r.returncode == 2, r.stderr
    assert "pip install 'edgebench[ray]'" in r.stderr and "Traceback" not in r.stderr
    assert len([ln for ln in r.stderr.splitlines() if ln.strip()]) == 1


PG_URL = os.environ.get("EDGEBENCH_TEST_PG_URL")


@pytest.mark.extras
@pytest.mark.skipif(not PG_URL, reason="EDGEBENCH_TEST_PG_URL not set (scripts/test starts PostgreSQL and sets it)")
def test_ray_cells_land_in_postgresql_as_local_ones_do(make_sim, tiny_tflite, tmp_path, short_tmp):
    """A cluster's store is PostgreSQL: the Ray run and a local run of the same matrix store the same
    cells, and resuming on the other executor finds them."""
    _ray()
    import uuid

    import sqlalchemy as sa

    admin = sa.create_engine(PG_URL, isolation_level="AUTOCOMMIT")
    name = f"edgebench_ray_{uuid.uuid4().hex[:12]}"
    with admin.connect() as c:
        c.exec_driver_sql(f'CREATE DATABASE "{name}"')
    url = sa.engine.make_url(PG_URL).set(database=name).render_as_string(hide_password=False)
    try:
        a, b = make_sim(has_python=True), make_sim(has_python=True, serialno="SIM00002")
        targets = [f"adb:{a.serial}", f"adb:{b.serial}"]
        ray_file = _matrix(tmp_path, tiny_tflite, targets, threads=(1, 2))
        r = subprocess.run([sys.executable, "-c", CLI, "matrix", "run", ray_file, "--executor", "ray", "--db", url,
                            "--json", "-"], capture_output=True, text=True, env=_env(short_tmp), timeout=400)
        assert r.returncode == 0, r.stderr[-3000:]
        rep = json.loads(r.stdout)
        assert rep["counts"] == {"ok": 4} and rep["executor"] == "ray"
        with Store(url) as st:
            runs = st.list_runs(limit=None)
            assert sorted(x["cell_key"] for x in runs) == sorted(c["key"] for c in rep["rows"])
            rows = st.rows(matrix_hash=rep["matrix_hash"])
            assert len(rows) == 4 and {x["target"] for x in rows} == set(targets)
            assert all(x["n_samples"] == 40 for x in rows)
        # the local executor resumes what Ray stored: same store, same cell keys
        r = subprocess.run([sys.executable, "-c", CLI, "matrix", "run", ray_file, "--db", url, "--resume", "--json", "-"],
                           capture_output=True, text=True, env=_env(short_tmp), timeout=200)
        assert r.returncode == 0, r.stderr[-3000:]
        assert json.loads(r.stdout)["counts"] == {"resumed": 4}
    finally:
        with admin.connect() as c:
            c.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.dispose()
