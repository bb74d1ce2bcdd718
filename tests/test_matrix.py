"""YAML matrix: validation with line numbers, expansion, shards, skip reasons, real cells,
kill (SIGKILL) and --resume with a real subprocess."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from edgebench.core.errors import BadInput
from edgebench.matrix.run import Probe, MatrixOptions, expand, load_matrix, parse_overrides, run_matrix, shard
from edgebench.store.db import Store

ROOT = Path(__file__).resolve().parent.parent
GUIDE = ROOT / "matrices" / "resnet50_training.yaml"
CLI = "import sys; from edgebench.cli import main; sys.exit(main(sys.argv[1:]))"


def _write(tmp_path, text, name="m.yaml"):
    p = tmp_path / name
    p.write_text(textwrap.dedent(text).lstrip())
    return str(p)


def _cli(*args, timeout=300):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", COLUMNS="200")
    return subprocess.run([sys.executable, "-c", CLI, *args], capture_output=True, text=True, env=env,
                          timeout=timeout)


# ---------------------------------------------------------------------------------- loading


def test_guide_matrix_loads_unmodified():
    text = GUIDE.read_text()
    for line in ("model: resnet50", "backbone: keras.applications", "batch_sizes: [32, 64, 128, 256]",
                 "devices: ['gpu', 'tpu']", "precision: ['fp32', 'mixed_float16']",
                 "strategies: ['none', 'mirrored']", "metrics: [throughput, memory_usage, step_time]"):
        assert line in text.splitlines()
    spec = load_matrix(str(GUIDE))
    assert spec.kind == "train"
    assert spec.axes["batch_sizes"] == [32, 64, 128, 256]
    assert spec.axes["train_precisions"] == ["fp32", "mixed_float16"]
    cells = expand(spec)
    assert len(cells) == 4 * 2 * 2 * 2
    assert len({c.key for c in cells}) == len(cells)
    probe = Probe()
    for c in cells:
        if c.params["device"] == "tpu":
            assert c.skip and "TPU" in c.skip
        if c.params["device"] == "gpu" and not probe.gpu():
            assert c.skip == "no GPU on this machine (nvidia-smi reports none)"
    assert cells[0].key == "model=resnet50,batch_size=32,device=gpu,precision=fp32,strategy=none"


def test_hash_is_stable_and_covers_overrides():
    a, b = load_matrix(str(GUIDE)), load_matrix(str(GUIDE))
    assert a.hash == b.hash and len(a.hash) == 16
    c = load_matrix(str(GUIDE), {"steps": 20, "size": "tiny"})
    assert c.hash != a.hash and c.settings["steps"] == 20
    d = load_matrix(str(GUIDE), parse_overrides(["devices=[cpu, gpu, tpu]"]))
    assert d.axes["devices"] == ["cpu", "gpu", "tpu"] and len(expand(d)) == 48


def test_shards_partition_the_matrix():
    cells = expand(load_matrix(str(GUIDE), {"devices": ["cpu", "gpu", "tpu"]}))
    parts = [shard(cells, f"{k}/5") for k in range(1, 6)]
    keys = [c.key for p in parts for c in p]
    assert sorted(keys) == sorted(c.key for c in cells)      # every cell exactly once
    assert [c.key for c in shard(cells, "2/5")] == [c.key for c in parts[1]]  # deterministic
    for bad in ("0/3", "4/3", "x", "1/0", "1-2"):
        with pytest.raises(BadInput, match="--shard"):
            shard(cells, bad)


@pytest.mark.parametrize("text,match", [
    ("model: resnet50\nbatch_sizes: [32, 64\n", r"m.yaml:\d+: invalid YAML"),
    ("model: resnet50\ndevices: [gpu, fpga]\n", r"m.yaml:2: devices: 'fpga' is not allowed; allowed: cpu, gpu, tpu"),
    ("model: resnet50\nbatch_sizes: [32, -1]\n", r"m.yaml:2: batch_sizes: -1 is not a positive integer"),
    ("model: resnet50\nstrategies: []\n", r"m.yaml:2: strategies is empty, so the matrix has no cells"),
    ("model: resnet50\ndevices: [cpu]\nlearning_rat: 3\n", r"m.yaml:3: unknown key 'learning_rat' for a train matrix; "
                                                        r"allowed keys: .*batch_sizes"),
    ("model: resnet50\nmodel: digits\n", r"m.yaml:2: key 'model' appears twice \(first on line 1\)"),
    ("- model: resnet50\n", r"m.yaml:1: a matrix must be a mapping"),
    ("", r"m.yaml: the matrix file is empty"),
    ("precisions: [fp32]\n", r"m.yaml: no model"),
    ("models: [nosuchmodel]\n", r"m.yaml:1: model 'nosuchmodel' is neither a reference model"),
    ("models: [digits]\nprecisions: [fp32, int4]\n", r"m.yaml:2: precisions: 'int4' is not allowed; allowed: fp32, fp16"),
    ("models: [digits]\ntargets: [host, cloud]\n", r"m.yaml:2: targets: 'cloud' is not allowed; allowed: host, tf, adb"),
    ("models: [digits]\nthreads: [1, 1]\n", r"m.yaml:2: threads lists 1 more than once"),
    ("models: [digits]\nruns: [1, 2]\n", r"m.yaml:2: runs takes one value"),
    ("model: digits\nbatch_sizes: [8]\nthreads: [1]\n", r"mixes training keys \(batch_sizes, line 2\) and edge keys "
                                                        r"\(threads, line 3\)"),
    ("kind: cloud\nmodel: digits\n", r"m.yaml:1: kind 'cloud' is not allowed"),
])
def test_validation_errors_name_file_line_and_allowed(tmp_path, text, match):
    path = _write(tmp_path, text)
    with pytest.raises(BadInput, match=match):
        load_matrix(path)


def test_override_errors_name_the_option(tmp_path):
    with pytest.raises(BadInput, match=r"^--steps: steps: 0 is not a positive integer"):
        load_matrix(str(GUIDE), {"steps": 0}, {"steps": "--steps"})
    with pytest.raises(BadInput, match=r"^--set devices: devices: 'quantum'"):
        load_matrix(str(GUIDE), parse_overrides(["devices=[quantum]"]))
    with pytest.raises(BadInput, match="use KEY=VALUE"):
        parse_overrides(["devices"])
    edge = _write(tmp_path, "models: [digits]\n")
    with pytest.raises(BadInput, match=r"^--steps: unknown key 'steps' for an edge matrix"):
        load_matrix(edge, {"steps": 3}, {"steps": "--steps"})


def test_shipped_matrices_load():
    for p in sorted((ROOT / "matrices").glob("*.yaml")):
        spec = load_matrix(str(p))
        assert expand(spec), p


def test_edge_expansion_and_skip_reasons(tmp_path):
    path = _write(tmp_path, """
        models: [digits, resnet50]
        precisions: [fp32, int8]
        targets: [host, tf]
        delegates: [xnnpack, gpu]
    """)
    cells = expand(load_matrix(path))
    assert len(cells) == 2 * 2 * 2
    gpu = [c for c in cells if c.params["delegate"] == "gpu"]
    assert gpu and all("runs only on adb devices" in c.skip for c in gpu)
    assert all(c.params["precisions"] == "fp32,int8" for c in cells)
    assert cells[0].key == "model=digits,target=host,delegate=xnnpack"


def test_dry_run_stores_nothing_and_cli_exit_codes(tmp_path):
    db = str(tmp_path / "r.db")
    r = _cli("matrix", "run", str(GUIDE), "--dry-run", "--db", db, "--json", "-")
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    assert rep["kind"] == "matrix" and rep["matrix_kind"] == "train" and len(rep["rows"]) == 32
    assert all(c["status"] in ("skipped", "planned") and (c["status"] == "planned" or c["reason"])
               for c in rep["rows"])
    assert not Path(db).exists()
    bad = _write(tmp_path, "model: resnet50\ndevices: [gpu, fpga]\n", "bad.yaml")
    r = _cli("matrix", "run", bad, "--dry-run")
    assert r.returncode == 2
    assert "bad.yaml:2" in r.stderr and "allowed: cpu, gpu, tpu" in r.stderr and "Traceback" not in r.stderr


# ---------------------------------------------------------------------------------- real cells


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory) -> Path:
    """A tiny real .tflite (Dense 16 -> 8 -> 4), converted with real TF."""
    import keras
    import tensorflow as tf

    keras.utils.set_random_seed(0)
    inp = keras.Input(shape=(16,), name="x")
    out = keras.layers.Dense(4, name="y")(keras.layers.Dense(8, activation="relu")(inp))
    path = tmp_path_factory.mktemp("matrix_models") / "tiny.tflite"
    path.write_bytes(tf.lite.TFLiteConverter.from_keras_model(keras.Model(inp, out)).convert())
    return path


@pytest.mark.slow
def test_reference_and_train_cells_run_and_store(tmp_path, monkeypatch):
    """Real convert-and-compare cells (host + tf reference) and a real training cell."""
    monkeypatch.chdir(tmp_path)              # cells convert into ./edgebench-out/matrix-HASH/
    db = str(tmp_path / "r.db")
    edge = load_matrix(_write(tmp_path, """
        models: [digits]
        precisions: [int8]
        targets: [host, tf]
        runs: 30
        samples: 30
        min_time_s: 0
    """, "edge.yaml"))
    rep = run_matrix(edge, MatrixOptions(db=db))
    assert [c["status"] for c in rep["cells"]] == ["ok", "ok"], rep["cells"]
    st = Store(db)
    host = st.get(rep["cells"][0]["run_id"])
    assert host["cell"]["key"] == "model=digits,target=host" and host["matrix_hash"] == edge.hash
    (row,) = [r for r in st.rows(matrix_hash=edge.hash) if r["target"] == "host"]
    assert row["precision"] == "int8" and row["p50_ms"] > 0 and row["top1"] is not None
    assert row["n_samples"] == 30
    ref = st.get(rep["cells"][1]["run_id"])
    assert ref["rows"][0]["role"] == "reference" and len(ref["rows"][0]["samples_ns"]) == 30
    assert (tmp_path / "edgebench-out" / f"matrix-{edge.hash}" / "cell0000" / "manifest.json").is_file()

    train = load_matrix(_write(tmp_path, """
        model: digits
        batch_sizes: [16]
        devices: [cpu]
        precision: [fp32]
        strategies: [none, mirrored]
        steps: 3
        warmup_steps: 1
    """, "train.yaml"))
    rep = run_matrix(train, MatrixOptions(db=db))
    by = {c["params"]["strategy"]: c for c in rep["cells"]}
    assert by["none"]["status"] == "ok", by["none"]
    assert by["mirrored"]["status"] == "skipped" and "GPU" in by["mirrored"]["reason"]
    (trow,) = st.rows(matrix_hash=train.hash)
    assert trow["examples_per_s"] > 0 and trow["batch_size"] == 16


def test_kill_mid_matrix_then_resume(tmp_path, tiny_model):
    """SIGKILL a real `matrix run` after some cells were stored; nothing stored is lost and
    --resume runs exactly the rest."""
    db = str(tmp_path / "r.db")
    mfile = _write(tmp_path, f"""
        models: ['{tiny_model}']
        targets: [host]
        threads: [1, 2, 3, 4]
        delegates: [xnnpack, none]
        runs: 200
        min_time_s: 0
    """)
    n_cells = 8
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    proc = subprocess.Popen([sys.executable, "-c", CLI, "matrix", "run", mfile, "--db", db],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, start_new_session=True)

    def stored() -> int:
        if not Path(db).exists():
            return 0
        con = sqlite3.connect(db, timeout=5)
        try:
            return con.execute("select count(*) from runs").fetchone()[0]
        except sqlite3.OperationalError:   # schema not created yet
            return 0
        finally:
            con.close()

    deadline = time.monotonic() + 240
    while stored() < 2 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert proc.poll() is None, f"matrix ended before it could be killed: {proc.stderr.read()}"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    k = stored()
    assert 2 <= k < n_cells
    st = Store(db)
    first = {r["cell_key"] for r in st.list_runs(limit=None)}
    assert len(first) == k                                   # what was written is intact and readable

    r = _cli("matrix", "run", mfile, "--db", db, "--resume", "--json", str(tmp_path / "resume.json"))
    assert r.returncode == 0, r.stderr
    rep = json.loads((tmp_path / "resume.json").read_text())
    assert rep["counts"] == {"resumed": k, "ok": n_cells - k}
    runs = st.list_runs(limit=None)
    assert len(runs) == n_cells and len({r["cell_key"] for r in runs}) == n_cells
    assert first <= {r["cell_key"] for r in runs}
    assert all(r["status"] == "ok" for r in runs)
    # a second --resume has nothing left to do
    r = _cli("matrix", "run", mfile, "--db", db, "--resume", "--json", "-")
    assert json.loads(r.stdout)["counts"] == {"resumed": n_cells}
