"""Typed result rows: round trips, old (0.1.0) documents and databases, misspelt fields fail."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from edgebench.rows import Document, InferenceRow, Latency, TrainRow, Warmup, row_from_dict
from edgebench.rows.identity import headline
from edgebench.store.db import Store

FIXTURE_DB = Path(__file__).parent / "fixtures" / "store" / "results-0.1.0.db"


def test_inference_row_round_trip_keeps_every_field_and_unknown_keys():
    lat = Latency.from_samples(np.arange(1, 801) * 1000)
    row = InferenceRow(target="host", model="m", precision="int8", latency=lat,
                       samples_ns=tuple(range(1000, 801000, 1000)), warmup=Warmup.from_samples([5000, 4000]),
                       unknown={"from_a_newer_edgebench": {"x": 1}})
    d = row.to_dict()
    assert d["latency_ms"]["p99_valid"] is True and d["latency_ms"]["samples"] == 800
    assert d["warmup_ms"] == pytest.approx({"runs": 2, "mean": 0.0045, "min": 0.004, "max": 0.005,
                                            "total": 0.009, "first": 0.005})
    assert d["warmup_samples_ns"] == [5000, 4000]
    assert d["from_a_newer_edgebench"] == {"x": 1}
    back = InferenceRow.from_dict(d)
    assert back == row
    assert back.to_dict() == d


def test_bench_run_facts_are_typed_fields_not_unknown_keys():
    reps = ({"p50": 1.0, "p90": 1.2, "p99": 1.5, "samples": 700}, {"p50": 1.1, "p90": 1.3, "p99": 1.6, "samples": 700})
    d = InferenceRow(target="host", memory={"runtime_bytes": 10, "model_bytes": 5}, gc={"frozen": True, "collections": 0},
                     repeats=reps).to_dict()
    back = InferenceRow.from_dict(d)
    assert back.unknown == {} and back.repeats == reps and back.memory["model_bytes"] == 5 and back.gc["frozen"]
    assert back.to_dict() == d and d["repeats"][1]["p50"] == 1.1
    plain = InferenceRow(target="host").to_dict()
    assert plain["repeats"] is None and plain["memory"] is None     # every key, null when not measured


def test_every_key_of_a_row_type_is_on_every_row():
    """Issue 24.9: a bench row without --energy has `energy: null` and a reason, like every other
    key of the row type; the reason does not come back as a measured fact."""
    from edgebench.rows import ENERGY_NOT_ASKED

    plain = InferenceRow(target="host").to_dict()
    full = InferenceRow(target="host", energy_reason="RAPL not readable", period_ms=2.0).to_dict()
    assert set(plain) == set(full)
    for key in ("energy", "energy_reason", "timeline", "sustained", "paced", "cold_start", "period_ms",
                "op_profile", "repeats", "memory", "gc", "drift", "worst", "accuracy", "keep_float",
                "samples_ns", "warmup_ms", "concurrency", "verdicts", "delegation"):
        assert key in plain, key
    assert plain["energy"] is None and plain["energy_reason"] == ENERGY_NOT_ASKED
    assert InferenceRow.from_dict(plain).energy_reason is None
    assert InferenceRow.from_dict(plain).to_dict() == plain


def test_a_misspelt_field_fails_instead_of_rendering_a_dash():
    row = InferenceRow(target="host")
    with pytest.raises(AttributeError):
        row.p99_ms  # noqa: B018 -- the typed row has latency.p99, not p99_ms
    with pytest.raises(TypeError):
        InferenceRow(target="host", latncy=None)
    with pytest.raises(ValueError, match="status"):
        InferenceRow(target="host", status="fine")


@pytest.mark.parametrize("old,runs,mean", [
    ([0.5, 0.25], 2, 0.375),                                   # 0.1.0 compare rows: a list of ms
    ({"runs": 10, "mean": 1.0, "min": 0.5, "max": 2, "total": 10, "first": 2}, 10, 1.0),   # bench rows
    (0.7, None, 0.7),                                          # 0.1.0 import-log rows: a scalar mean
])
def test_schema_1_warmup_shapes_read_as_one_type(old, runs, mean):
    row = InferenceRow.from_dict({"target": "host", "status": "ok", "warmup_ms": old}, schema_version=1)
    assert row.warmup.runs == runs and row.warmup.mean == pytest.approx(mean)
    assert set(row.to_dict()["warmup_ms"]) == {"runs", "mean", "min", "max", "total", "first"}


def test_train_rows_by_kind_and_by_fields():
    d = {"model": "digits", "status": "ok", "batch_size": 32, "examples_per_s": 10.0, "strategy": "none",
         "step_time_ms": {"p50": 3.0, "p99": 5.0, "samples": 20, "p99_valid": False}, "xla_requested": "off"}
    r = row_from_dict(d)
    assert isinstance(r, TrainRow) and r.step_time.p50 == 3.0 and r.facts["xla_requested"] == "off"
    assert isinstance(row_from_dict({"model": "x", "status": "failed"}, kind="train"), TrainRow)
    assert r.to_dict()["xla_requested"] == "off"


def test_the_store_still_reads_a_database_written_by_edgebench_0_1_0(tmp_path):
    """tests/fixtures/store/results-0.1.0.db was written by edgebench 0.1.0 (commit 2fa09f6):
    convert-and-compare, bench, train-baseline, compare and an imported benchmark_model log."""
    db = tmp_path / "old.db"
    shutil.copy(FIXTURE_DB, db)
    with Store(str(db)) as st:
        runs = st.list_runs(limit=None)
        assert {r["kind"] for r in runs} == {"compare", "bench", "train", "import-log"}
        for r in runs:
            raw = st.get(r["run_id"])
            doc = Document.from_dict(raw)
            assert doc.kind == raw["kind"] and len(doc.rows) == len(raw["rows"])
            for typed, old in zip(doc.rows, raw["rows"]):
                assert typed.status == old["status"]
                if isinstance(typed, InferenceRow) and old.get("latency_ms"):
                    assert typed.latency.p50 == old["latency_ms"]["p50"]
                    assert typed.latency.p99_valid == old["latency_ms"]["p99_valid"]
                if old.get("samples_ns") is not None:
                    assert list(typed.samples_ns) == old["samples_ns"]
                # the headline read through the typed row matches the columns stored by 0.1.0
                stored = [x for x in st.rows() if x["run_id"] == r["run_id"]]
                h = headline(typed)
                for col in ("p50_ms", "p99_ms", "top1", "psnr_db", "examples_per_s", "size_bytes"):
                    assert h[col] == stored[0][col] or len(stored) > 1
            if raw["kind"] == "compare" and raw.get("reference"):
                assert doc.reference is not None and doc.reference.is_reference
                assert isinstance(doc.reference.warmup, Warmup) or doc.reference.warmup is None
        # and writing a new document next to the old ones works
        new = Document.from_dict(st.get(runs[0]["run_id"]))
        rid = st.save(new)
        assert Document.from_dict(st.get(rid)).rows == new.rows


def test_sample_class_is_written_and_read_for_rows_that_predate_it():
    from edgebench.rows import sample_class_of

    assert InferenceRow(target="adb:x", sample_class="per-process").to_dict()["sample_class"] == "per-process"
    old_loop = {"target": "adb:x", "runtime": "benchmark_model", "latency_ms": {"p50": 1.0},
                "method": "benchmark_model --num_runs=1 ... repeated 662 times in one device-side sh loop; ..."}
    assert sample_class_of(old_loop) == "per-process"
    assert sample_class_of({"method": "benchmark_model summary statistics (no per-inference samples)"}) == "summary"
    assert sample_class_of({"method": "per-inference perf_counter_ns around invoke()", "latency_ms": {}}) \
        == "steady-state"
    assert sample_class_of({"target": "host", "status": "failed"}) is None


# --- diagnose rows (issue 23): the diagnose keys typed as InferenceRow.diagnosis -------------------

DIAGNOSE_INPUT = Path(__file__).parent / "goldens" / "inputs" / "diagnose.json"


def test_a_stored_diagnose_document_round_trips_byte_identically_through_the_typed_rows():
    import json

    from edgebench.core.result_file import dumps, to_jsonable
    from edgebench.rows import Diagnosis, Layer

    stored = json.loads(DIAGNOSE_INPUT.read_text(encoding="utf-8"))
    doc = Document.from_dict(stored)
    row = doc.rows[0]
    assert isinstance(row.diagnosis, Diagnosis) and row.unknown == {}      # every diagnose key is typed
    top = row.diagnosis.layers[0]
    assert isinstance(top, Layer) and top.rank == 1 and top.op == "CONV_2D" and top.unknown == {}
    assert row.diagnosis.fix_commands[0].startswith("edgebench convert-and-compare")
    assert doc.rows[1].diagnosis.layers[-1].isolated_snr_db == float("inf")   # stored as "inf"
    assert to_jsonable(doc.to_dict()) == stored
    assert dumps(doc.to_dict()) == dumps(stored)                             # key order too


def test_diagnose_keys_the_types_do_not_know_are_written_back_in_place():
    import json

    from edgebench.core.result_file import dumps

    stored = json.loads(DIAGNOSE_INPUT.read_text(encoding="utf-8"))
    row = stored["rows"][0]
    layer = row["layers"][0]
    # a newer edgebench's keys, and values a field cannot hold, anywhere in the order
    row["layers"][0] = {"from_newer": {"x": 1}, **{k: ("n/a" if k == "scale" else v) for k, v in layer.items()}}
    row["unmatched"] = None
    row["intermediates"]["new_mode"] = "x"
    row["from_newer_row_key"] = [1, 2]
    back = Document.from_dict(stored)
    d = back.rows[0].diagnosis
    assert d.layers[0].scale is None and d.layers[0].unknown == {"from_newer": {"x": 1}, "scale": "n/a"}
    assert d.unmatched == () and d.intermediates.unknown == {"new_mode": "x"}
    assert back.rows[0].unknown == {"from_newer_row_key": [1, 2]}
    assert dumps(back.to_dict()) == dumps(stored)


def test_rows_without_layers_have_no_diagnosis_and_a_misspelt_layer_field_fails():
    from edgebench.rows import Diagnosis, Layer

    skipped = InferenceRow.from_dict({"precision": "fp32", "target": "host", "status": "skipped", "samples": 3})
    assert skipped.diagnosis is None and skipped.unknown == {"samples": 3}   # another row's "samples" stays its own
    with pytest.raises(AttributeError):
        Layer(tensor="t").isolated_snr  # noqa: B018 -- the field is isolated_snr_db
    built = InferenceRow(target="host", diagnosis=Diagnosis(layers=(Layer(tensor="t", rank=1, finding=True),),
                                                            findings=1))
    d = built.to_dict()
    assert d["layers"][0]["tensor"] == "t" and d["findings"] == 1 and "verdict" not in d
    assert InferenceRow.from_dict(d) == built and InferenceRow.from_dict(d).to_dict() == d


def test_a_stored_keep_float_search_round_trips_through_its_typed_form():
    import json

    from edgebench.core.result_file import dumps
    from edgebench.rows import KeepFloatSearch

    stored = json.loads((DIAGNOSE_INPUT.parent / "keep-float.json").read_text(encoding="utf-8"))["keep_float_search"]
    search = KeepFloatSearch.from_dict(stored)
    assert search.candidates and search.candidates[0].bytes == stored["candidates"][0]["bytes"]
    assert sum(1 for c in search.candidates if c.chosen) == 1 and set(search.unknown) == {"inputs"}
    assert dumps(search.to_dict()) == dumps(stored)
