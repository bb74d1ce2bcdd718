"""Issue 49: what a run says, it says once and truthfully -- the SYNTHETIC-data warning once per
run however many stages load ``--data synthetic``; "not stored" with the reason it was not."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from edgebench.model.inputs import SYNTHETIC_WARNING

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def tiny_keras(tmp_path_factory) -> Path:
    """A tiny real float Keras model (Dense 6 -> 8 -> 3, softmax)."""
    import keras

    keras.utils.set_random_seed(0)
    inp = keras.Input(shape=(6,), name="x")
    out = keras.layers.Dense(3, activation="softmax")(keras.layers.Dense(8, activation="relu")(inp))
    path = tmp_path_factory.mktemp("said-once") / "tiny.keras"
    keras.Model(inp, out).save(path)
    return path


def test_a_real_run_on_synthetic_data_warns_once_and_says_why_it_was_not_stored(tiny_keras, tmp_path):
    """convert-and-compare loads --data synthetic for calibration and again for the comparison:
    its stderr carries the warning once, the table's notes no second "warning:" about it, and the
    footer says --no-store (there is no error above to point to)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
           "COLUMNS": "100", "TF_CPP_MIN_LOG_LEVEL": "2", "EDGEBENCH_DATA_DIR": str(tmp_path / "data")}
    res = subprocess.run([sys.executable, "-m", "edgebench", "convert-and-compare", str(tiny_keras),
                          "--data", "synthetic", "--no-store", "--precision", "fp32,int8", "--out", str(tmp_path / "o")],
                         capture_output=True, text=True, timeout=600, env=env, cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    both = res.stdout + res.stderr
    assert both.count("SYNTHETIC") == 1, both
    assert res.stderr.count(SYNTHETIC_WARNING[:60]) == 1, res.stderr
    assert "warning: synthetic" not in both.lower(), res.stdout
    assert "not stored (--no-store)" in res.stdout, res.stdout
    assert "see the error above" not in both


def test_not_stored_names_the_store_error_and_only_then():
    """The footer reads the reason publish() gives: --no-store, the store's own error, or nothing."""
    from edgebench.report.publish import PublishOptions, publish
    from edgebench.report.terminal.compare import footer_lines
    from edgebench.rows import Document

    doc = Document.new("compare", [], {})
    assert publish(doc, PublishOptions(store=False)).not_stored == "--no-store"
    assert footer_lines(doc.with_meta(not_stored="--no-store")) == ["not stored (--no-store)"]
    err = "could not open the results database sqlite:///x.db: disk I/O error; free space or pass --db"
    assert footer_lines(doc.with_meta(not_stored=err)) == [f"not stored: {err}"]
    assert footer_lines(doc) == ["not stored"]             # a document shown later: no reason is known
    assert footer_lines(doc.with_meta(run_id="ab" * 16)) == [f"stored as run {'ab' * 6} (edgebench results show {'ab' * 6})"]


def test_the_store_error_reaches_the_footer(tmp_path, monkeypatch):
    """A database that cannot be written: publish() keeps the result and its reason is the error."""
    from edgebench.report.publish import PublishOptions, publish
    from edgebench.rows import Document

    monkeypatch.setenv("EDGEBENCH_DATA_DIR", str(tmp_path / "data"))
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the database's folder should be")
    out = publish(Document.new("compare", [], {}), PublishOptions(db=f"sqlite:///{blocker}/r.db"))
    assert out.run_id is None and out.error is not None
    assert out.not_stored == str(out.error) and out.not_stored != "--no-store"
