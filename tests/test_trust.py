"""No code from a model file runs without consent (issue 39; edgebench/sources/trust.py).

Crafted models, built at test time with the real packages: a tf-keras (Keras 2) ``.h5`` and a Keras 3
``.keras`` whose Lambda writes a marker file when its bytecode runs, and a SavedModel whose
``serving_default`` calls ``tf.io.write_file``. Without ``--trust-model`` every command that loads
models refuses them in one exit-2 line naming the layer (or the ops) and the flag, and the marker
never appears; with the flag they run. Crafted ``.keras`` archives and output folders other users
can write to are refused too."""

from __future__ import annotations

import json
import os
import zipfile
from pathlib import Path

import pytest

from hostile_inputs import zip_bomb_member, zip_with

TESTS = Path(__file__).resolve().parent


def _lambda(marker: Path):
    """A lambda whose bytecode writes ``marker`` (the path is a constant inside the code object)."""
    return eval(f"lambda t: (open({str(marker)!r}, 'w').write('ran'), t * 2.0)[1]")   # noqa: S307


@pytest.fixture(scope="module")
def evil_keras(tmp_path_factory) -> dict[str, Path]:
    import keras
    import tf_keras

    d = tmp_path_factory.mktemp("evil_keras")
    marker = d / "PWNED"
    inp = tf_keras.Input((4,), name="x")
    out = tf_keras.layers.Dense(2, name="d")(tf_keras.layers.Lambda(_lambda(marker), name="evil")(inp))
    tf_keras.Model(inp, out).save(d / "evil.h5")
    inp = keras.Input((4,), name="x")
    out = keras.layers.Dense(2, name="d")(keras.layers.Lambda(_lambda(marker), name="evil3")(inp))
    keras.Model(inp, out).save(d / "evil.keras")
    marker.unlink()          # building the models called the lambdas once, as their author did

    return {"h5": d / "evil.h5", "keras": d / "evil.keras", "marker": marker, "dir": d}


def _one_line(err: str) -> str:
    lines = [ln for ln in err.strip().splitlines() if ln.strip()]
    assert len(lines) == 1, err
    return lines[0]


# --------------------------------------------------------------------------- Keras files

@pytest.mark.parametrize("kind, layer", [("h5", "evil"), ("keras", "evil3")])
@pytest.mark.parametrize("argv", [
    ["convert", "{src}", "-p", "fp32", "--data", "synthetic"],
    ["convert-and-compare", "{src}", "-p", "fp32", "--data", "synthetic", "--no-store"],
    ["diagnose", "{src}", "--data", "synthetic", "--no-store"],
], ids=["convert", "convert-and-compare", "diagnose"])
def test_a_lambda_runs_no_code_without_consent(run_cli, evil_keras, tmp_path, monkeypatch, kind, layer, argv):
    """On main the .h5 was retried with tf-keras after Keras 3's safe-mode refusal, which ran the
    bytecode: the marker appeared and convert exited 0 ("parity passed"). (``compare`` takes
    SavedModels and .tflite files: see the SavedModel test.)"""
    monkeypatch.chdir(tmp_path)
    code, _, err = run_cli(*[a.replace("{src}", str(evil_keras[kind])) for a in argv], "--out", str(tmp_path / "o"))
    line = _one_line(err)
    assert code == 2 and f"layer '{layer}' (Lambda)" in line and "marshalled bytecode" in line
    assert "--trust-model" in line
    assert not evil_keras["marker"].exists()


def test_with_trust_model_it_runs(run_cli, evil_keras, tmp_path):
    code, _, err = run_cli("convert", str(evil_keras["h5"]), "-p", "fp32", "--data", "synthetic",
                           "--out", str(tmp_path / "o"), "--trust-model")
    assert code == 0, err
    assert evil_keras["marker"].exists()      # consent given: its code ran, as the user asked
    evil_keras["marker"].unlink()
    m = json.loads((tmp_path / "o" / "manifest.json").read_text())
    assert m["source"]["kind"] == "keras" and m["parity"]["passed"]
    # the export cached by that run is not a way around the check afterwards
    code, _, err = run_cli("convert", str(evil_keras["h5"]), "-p", "fp32", "--data", "synthetic",
                           "--out", str(tmp_path / "o"))
    assert code == 2 and "--trust-model" in err


def test_a_matrix_cell_refuses_it_too(run_cli, evil_keras, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    m = tmp_path / "m.yaml"
    m.write_text(f"models: [{evil_keras['h5']}]\nprecisions: [fp32]\ndata: [synthetic]\nruns: 5\n")
    code, out, err = run_cli("matrix", "run", str(m), "--json", "-", "--db", str(tmp_path / "r.db"))
    assert code == 3, err
    (cell,) = json.loads(out)["rows"]
    assert cell["status"] == "failed" and "layer 'evil' (Lambda)" in cell["reason"] and "--trust-model" in cell["reason"]
    assert not evil_keras["marker"].exists()


def test_safe_mode_refusals_are_never_retried_with_a_permissive_loader(run_cli, evil_keras, tmp_path, monkeypatch):
    """Defense in depth, with the config check switched off: Keras 3 refuses in safe mode and that is
    final; and when Keras 3 fails for another reason, tf-keras runs in safe mode too (its legacy .h5
    path ignores ``safe_mode=`` and ran the bytecode on main)."""
    import keras

    import edgebench.sources.resolve as sources

    monkeypatch.setattr(sources, "check_keras_file", lambda *a, **k: None)
    for kind in ("h5", "keras"):
        code, _, err = run_cli("convert", str(evil_keras[kind]), "-p", "fp32", "--data", "synthetic",
                               "--out", str(tmp_path / kind))
        assert code == 2 and "refused it in safe mode" in err and "--trust-model" in err, err
    real = keras.models.load_model

    def keras3_cannot_read(*a, **k):   # Keras 3's refusal of a Keras 2 config for a non-code reason
        raise ValueError("Unrecognized keyword arguments passed to LSTM: {'time_major': False}")

    monkeypatch.setattr(keras.models, "load_model", keras3_cannot_read)
    code, _, err = run_cli("convert", str(evil_keras["h5"]), "-p", "fp32", "--data", "synthetic",
                           "--out", str(tmp_path / "tfk"))
    assert code == 2 and "tf-keras refused it in safe mode" in err and "--trust-model" in err, err
    assert not evil_keras["marker"].exists()
    monkeypatch.setattr(keras.models, "load_model", real)


def test_config_scan_finds_every_code_carrier_and_nothing_else():
    """Unit level, on crafted configs: nothing here is deserialized. An allow-list: only Keras'
    own built-ins (by exact name in its public API) pass; any function object, any class of a module
    outside that API, any Lambda and any constant string fed to a layer is found."""
    import base64
    import marshal
    import pickle

    from edgebench.sources.trust import keras_code

    code = base64.b64encode(marshal.dumps((lambda x: x).__code__)).decode()
    legit = {"module": "keras.src.models.functional", "class_name": "Functional", "config": {"name": "m", "layers": [
        {"module": "keras.layers", "class_name": "Dense", "config": {"name": "d", "activation": "relu",
                                                                    "kernel_initializer": {"module": "keras.initializers",
                                                                                           "class_name": "GlorotUniform",
                                                                                           "config": {"seed": None}}}},
        {"module": "keras", "class_name": "DTypePolicy", "config": {"name": "float32"}},
        {"module": "tf_keras.src.engine.functional", "class_name": "Functional", "config": {"name": "inner"}},
        {"class_name": "Conv2D", "config": {"name": "keras2_style", "activation": "relu"}}]}}
    assert keras_code(legit) == []
    crafted = {"class_name": "Functional", "config": {"name": "m", "layers": [
        {"class_name": "Dense", "config": {"name": "d1", "activation": {"module": "os", "class_name": "function",
                                                                         "config": "system"}}},
        {"class_name": "Dense", "config": {"name": "d2", "activation": {"module": "builtins", "class_name": "function",
                                                                         "config": "exec"}}},
        {"class_name": "Dense", "config": {"name": "d3", "note": code}},
        {"class_name": "Dense", "config": {"name": "d4", "note": base64.b64encode(pickle.dumps({"a": 1})).decode()}},
        {"class_name": "Lambda", "config": {"name": "l", "function": [code, None, None], "function_type": "lambda",
                                            "output_shape": [code, None, None], "output_shape_type": "lambda"}},
        {"class_name": "TimeDistributed", "config": {"name": "td", "layer": {"class_name": "Lambda", "config": {
            "name": "inner", "function": {"class_name": "__lambda__", "config": {"code": code}}}}}},
        {"module": "my_layers", "class_name": "Block", "registered_name": "Mine>Block", "config": {"name": "b"}},
        # the review's exploit: a function resolved through a Keras module's namespace
        {"class_name": "Dense", "config": {"name": "d5", "activation": {
            "module": "keras.src.saving.saving_api", "class_name": "function", "config": "os.system"}}},
        # a Keras module that is not its public API, a public module's non-class attribute
        {"module": "keras.src.saving.saving_api", "class_name": "Dense", "config": {"name": "p1"}},
        {"module": "keras.layers", "class_name": "deserialize", "config": {"name": "p2"}},
        {"module": "keras_hub.src.layers", "class_name": "Tok", "config": {"name": "t"}},
        # a Lambda whose function is named, not bytecode (tf-keras resolves it in a module's namespace)
        {"class_name": "Lambda", "config": {"name": "named", "function": "system", "function_type": "function",
                                            "module": "os"}},
        # a Keras 2 functional node feeding a constant string to a layer
        {"class_name": "Lambda", "name": "c", "config": {"name": "c", "function": {"class_name": "__lambda__",
                                                                                  "config": {"code": "x"}}},
         "inbound_nodes": [[["input_1", 0, 0, {"y": ["_CONSTANT_VALUE", -1, "touch /tmp/pwned", {}]}]]]}]}}
    found = keras_code(crafted)
    wheres = [w for w, _ in found]
    assert wheres[:8] == ["layer 'd1' (Dense)", "layer 'd2' (Dense)", "layer 'd3' (Dense)",
                          "layer 'd4' (Dense)", "layer 'l' (Lambda)", "layer 'l' (Lambda)",
                          "layer 'inner' (Lambda)", "layer 'b' (Block)"]
    for name in ("d5", "p1", "p2", "t", "named", "c"):
        assert any(f"layer '{name}'" in w for w in wheres), (name, found)
    whats = [w for _, w in found]
    assert "names a function ('system' of module 'os')" in whats[0]
    assert "names a function ('exec'" in whats[1]
    assert whats[2] == "holds marshalled Python bytecode" and whats[3] == "holds a pickled Python object"
    assert "(function)" in whats[4] and "(output_shape)" in whats[5]
    assert "--import my_layers" in whats[7]
    assert any("'os.system' of module 'keras.src.saving.saving_api'" in w for w in whats)
    assert any("_CONSTANT_VALUE" in w for w in whats)
    # a custom class the user gives with --import is the user's code
    assert keras_code(crafted["config"]["layers"][6], provided={"Mine>Block"}) == []


def test_keras_2_files_without_code_still_load_with_tf_keras(tmp_path):
    """The rule refuses code, not the tf-keras path: a Keras 2 LSTM .h5 (which Keras 3 refuses for
    its config, e.g. time_major) carries none (issue 33 loads such files through tf-keras)."""
    import tf_keras

    from edgebench.sources.trust import keras_code, read_keras_config

    m = tf_keras.Sequential([tf_keras.layers.Input((5, 3)), tf_keras.layers.LSTM(4), tf_keras.layers.Dense(2)])
    m.save(tmp_path / "lstm.h5")
    assert keras_code(read_keras_config(tmp_path / "lstm.h5")) == []


@pytest.mark.parametrize("case", ["traversal", "bomb", "entries", "config"])
def test_crafted_keras_archives_are_refused_before_any_loader(run_cli, tmp_path, case):
    path = tmp_path / f"{case}.keras"
    meta = json.dumps({"keras_version": "3.15.1"}).encode()
    config = json.dumps({"class_name": "Sequential", "config": {"name": "s", "layers": []}}).encode()
    if case == "traversal":
        zip_with(path, {"metadata.json": meta, "config.json": config, "../../../../tmp/evil.py": b"print(1)"})
        want = "holds a member named '../../../../tmp/evil.py', which points outside the folder"
    elif case == "bomb":
        zip_bomb_member(path, {"metadata.json": meta, "config.json": config}, "model.weights.h5", 64 * 1024 ** 2)
        want = "member 'model.weights.h5' of the Keras archive inflates"
    elif case == "entries":
        zip_with(path, {"metadata.json": meta, "config.json": config})
        data = bytearray(path.read_bytes())
        data[-12:-10] = (60000).to_bytes(2, "little")      # the EOCD's total-entries field
        path.write_bytes(bytes(data))
        want = "declares 60,000 entries (edgebench reads at most 10,000)"
    else:
        zip_bomb_member(path, {"metadata.json": meta}, "config.json", 80 * 1024 ** 2)
        want = "inflates"
    code, _, err = run_cli("convert", str(path), "--out", str(tmp_path / "o"))
    assert code == 2 and want in _one_line(err), err
    assert not Path("/tmp/evil.py").exists()


# --------------------------------------------------------------------------- SavedModels


@pytest.fixture(scope="module")
def evil_savedmodels(tmp_path_factory) -> dict[str, Path]:
    import tensorflow as tf

    d = tmp_path_factory.mktemp("evil_sm")
    marker = d / "written_by_the_graph.txt"

    class Writer(tf.Module):
        def __init__(self):
            super().__init__()
            self.w = tf.Variable(tf.ones((4, 2)))

        @tf.function(input_signature=[tf.TensorSpec([None, 4], tf.float32, name="x")])
        def serve(self, x):
            tf.io.write_file(str(marker), "the model ran")
            return {"y": tf.matmul(x, self.w)}

    m = Writer()
    tf.saved_model.save(m, str(d / "writer"), signatures={"serving_default": m.serve})

    vocab = d / "vocab.txt"
    vocab.write_text("a\nb\nc\n")

    class Vocab(tf.Module):
        """A clean serving function: a vocabulary asset lookup (reads a file, its own asset)."""

        def __init__(self):
            super().__init__()
            init = tf.lookup.TextFileInitializer(str(vocab), tf.string, tf.lookup.TextFileIndex.WHOLE_LINE,
                                                 tf.int64, tf.lookup.TextFileIndex.LINE_NUMBER)
            self.table = tf.lookup.StaticHashTable(init, -1)

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
        def serve(self, x):
            return {"ids": self.table.lookup(x)}

    class Sink(Vocab):
        """The same, beside a function that acts outside the model."""

        @tf.function(input_signature=[tf.TensorSpec([], tf.float32)])
        def hooks(self, x):
            y = tf.py_function(lambda v: v * 2, [x], tf.float32)
            tf.print("leak", x, output_stream=f"file://{d}/printed.txt")
            n = tf.strings.length(tf.io.read_file("/etc/hostname")) + tf.size(tf.io.matching_files("/etc/*"))
            return y + tf.cast(n, tf.float32)

    s = Sink()
    tf.saved_model.save(s, str(d / "sink"), signatures={"serving_default": s.serve, "hooks": s.hooks})
    clean = Vocab()
    tf.saved_model.save(clean, str(d / "vocab"), signatures={"serving_default": clean.serve})
    return {"writer": d / "writer", "sink": d / "sink", "vocab": d / "vocab", "marker": marker}


def test_a_savedmodel_that_writes_files_is_refused_before_any_op_runs(run_cli, evil_savedmodels, tmp_path):
    """On main the TF reference ran serving_default, which created the file."""
    code, _, err = run_cli("convert-and-compare", str(evil_savedmodels["writer"]), "-p", "fp32", "--data",
                           "synthetic", "-n", "5", "--runs", "5", "--no-store", "--out", str(tmp_path / "o"))
    line = _one_line(err)
    assert code == 2 and "WriteFile (writes files" in line and "--trust-model" in line
    code, _, err = run_cli("compare", str(evil_savedmodels["writer"]), str(evil_savedmodels["writer"]), "--data",
                           "synthetic", "-n", "5", "--no-store")
    assert code == 2 and "WriteFile (writes files" in _one_line(err)
    assert not evil_savedmodels["marker"].exists()
    code, _, err = run_cli("convert-and-compare", str(evil_savedmodels["writer"]), "-p", "fp32", "--data",
                           "synthetic", "-n", "5", "--runs", "5", "--no-store", "--out", str(tmp_path / "t"),
                           "--trust-model")
    assert evil_savedmodels["marker"].exists() and "--trust-model" not in err   # it ran (TFLite cannot convert it)


def test_graph_scan_names_every_side_effect_and_spares_assets(evil_savedmodels):
    from edgebench.model.savedmodel import pick_meta_graph, read_saved_model
    from edgebench.sources.trust import saved_model_ops

    def ops(name: str) -> set[tuple[str, str]]:
        p = evil_savedmodels[name]
        return {(op, what) for op, what, _ in saved_model_ops(pick_meta_graph(read_saved_model(p), ""), p)}

    got = ops("sink")
    assert {op for op, _ in got} == {"EagerPyFunc", "PrintV2", "ReadFile", "MatchingFiles"}, got
    assert ("ReadFile", "reads files outside the model") in got
    assert any(w.startswith("writes to file://") for op, w in got if op == "PrintV2")
    assert ops("vocab") == set()        # InitializeTableFromTextFileV2 reads its own asset: fine


# --------------------------------------------------------------------------- output folders


def test_output_folders_other_users_can_write_are_refused(run_cli, tmp_path):
    from edgebench.sources.trust import own_dir, unsafe_dir

    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    code, _, err = run_cli("convert", "digits", "--out", str(shared))
    assert code == 2 and "a folder every user can write to" in _one_line(err) and "--out" in err
    mine = tmp_path / "mine"
    mine.mkdir()
    assert unsafe_dir(mine) is None and unsafe_dir(tmp_path / "not-yet") is None
    link = tmp_path / "link"
    link.symlink_to(mine)
    assert unsafe_dir(link) is None                       # my own symlink to my own folder
    assert own_dir(shared, "keras-exports").name == "keras-exports" and own_dir(mine, "x") == mine
    if os.geteuid() != 0:
        pytest.skip("changing a folder's owner needs root; the world-writable case above ran")
    other = tmp_path / "other"
    other.mkdir()
    os.chown(other, 65534, 65534)
    code, _, err = run_cli("convert", "digits", "--out", str(other))
    assert code == 2 and "owned by user 65534, not you" in err
    trap = tmp_path / "trap"
    trap.symlink_to(mine)
    os.lchown(trap, 65534, 65534)
    assert "a symlink owned by user 65534" in unsafe_dir(trap)


def test_keras_archive_zip_members_unit(tmp_path):
    from edgebench.core.bounded import unsafe_member_name

    assert [n for n in ("a/b.h5", "assets/vocab.txt", "../x", "/etc/x", "a/../../x", "C:/x", "..\\x")
            if unsafe_member_name(n)] == ["../x", "/etc/x", "a/../../x", "C:/x", "..\\x"]
    z = zipfile.ZipFile(zip_with(tmp_path / "ok.zip", {"config.json": b"{}"}))
    assert z.namelist() == ["config.json"]


def test_a_savedmodel_with_a_dataset_graph_is_refused_naming_the_op(run_cli, tmp_path):
    """The review's route past the op-name deny-list: a tf.data pipeline inside the serving function
    (``Dataset.cache(path)`` creates files at any prefix; a dataset graph can be rebuilt from a
    string). The allow-list names the first op that is not a pure tensor op; nothing is written."""
    import tensorflow as tf

    cache = tmp_path / "planted-cache"

    class Cached(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([1, 4], tf.float32, name="x")])
        def serve(self, x):
            ds = tf.data.Dataset.from_tensors(x).cache(str(cache))
            return {"y": ds.reduce(tf.zeros([1, 4]), lambda acc, v: acc + v)}

    m = Cached()
    tf.saved_model.save(m, str(tmp_path / "cached"), signatures={"serving_default": m.serve})
    for leftover in tmp_path.glob("planted-cache*"):
        leftover.unlink()
    code, _, err = run_cli("convert-and-compare", str(tmp_path / "cached"), "-p", "fp32", "--data", "synthetic",
                           "-n", "2", "--runs", "3", "--no-store", "--out", str(tmp_path / "o"))
    line = _one_line(err)
    assert code == 2 and "not on edgebench's list of pure tensor ops" in line and "--trust-model" in line, line
    assert "Dataset" in line, line
    assert not list(tmp_path.glob("planted-cache*"))
