"""The conversion worker converts the source the command resolved (``Source.to_job``), not a
second reading of the model file (issue 43: one resolved source from the workflow to the workers)."""
from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from edgebench.convert.run import ConvertSettings, convert
from edgebench.model.inputs import Signature, TensorSpec
from edgebench.sources.resolve import Source, SourceOptions, resolve_source

pytestmark = pytest.mark.usefixtures("isolated_conversions")


def _same(a: Source, b: Source) -> None:
    for f in dataclasses.fields(Source):
        if f.name in ("calibration", "evaluation"):      # sample sets travel as .npz
            continue
        assert getattr(a, f.name) == getattr(b, f.name), f.name


def test_a_signature_survives_json_whole():
    sig = Signature((TensorSpec("x", (None, 8), "float32"), TensorSpec("ids", (1, 4), "int32")),
                    (TensorSpec("y", (None, 3), "float32"),), ranges={"ids": (0.0, 99.0)}, order=("ids", "x"),
                    quantized={"x": ("int8", 0.5, -3)})
    assert Signature.from_json(json.loads(json.dumps(sig.to_json()))) == sig


def test_resolved_sources_round_trip_through_the_job(tmp_path):
    import keras

    m = keras.Sequential([keras.Input((6,), name="x"), keras.layers.Dense(3, name="d")])
    m.save(tmp_path / "m.keras")
    for name in ("digits", str(tmp_path / "m.keras")):
        src = resolve_source(name, size="tiny", work_dir=tmp_path / "w", seed=0,
                             options=SourceOptions().for_measuring(name))
        _same(Source.from_job(json.loads(json.dumps(src.to_job()))), src)


def test_the_worker_converts_the_handed_source_without_reading_the_file_again(tmp_path):
    """int8 goes to the worker process. The .keras file is replaced by garbage after the command
    resolved it: a worker that read the model again would fail; the handed source converts."""
    import keras

    m = keras.Sequential([keras.Input((6,), name="x"), keras.layers.Dense(8, activation="relu"),
                          keras.layers.Dense(3)])
    path = tmp_path / "m.keras"
    m.save(path)
    data = tmp_path / "cal.npz"
    np.savez(data, x=np.random.default_rng(0).normal(size=(16, 6)).astype(np.float32))

    from edgebench.convert import run as convert_run

    real = convert_run.job_for

    def job_then_break_the_file(*a, **kw):      # the job is made: the model file is gone from now on
        job = real(*a, **kw)
        shutil.copy(path, tmp_path / "kept.keras")
        path.write_bytes(b"not a keras file")
        return job

    mp = pytest.MonkeyPatch()
    mp.setattr(convert_run, "job_for", job_then_break_the_file)
    try:
        manifest = convert(ConvertSettings(src=str(path), precisions=("fp32", "int8"), data=str(data),
                                           calibration_samples=16, out_dir=str(tmp_path / "o")))
    finally:
        mp.undo()
    v = manifest["variants"]["int8"]
    assert v["status"] == "ok", v.get("error")
    assert Path(v["path"]).is_file() and v["bytes"] > 0
