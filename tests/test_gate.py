"""Gate thresholds, gate files and JUnit XML."""

from __future__ import annotations

from xml.etree import ElementTree as ET

import pytest

from edgebench.core.errors import BadInput
from edgebench.judge.gate import Thresholds, evaluate, load_gate_file
from edgebench.report.junit import render_junit
from edgebench.rows import InferenceRow

ROWS_D = [
    {"precision": "fp32", "target": "host", "status": "ok", "accuracy": {"top1_drop_pp": 0.0},
     "worst": {"psnr_db": 120.0, "nonfinite": 0}, "latency_ms": {"p99": 0.2, "p99_valid": True},
     "size_reduction_pct": 0.0},
    {"precision": "int8", "target": "host", "status": "ok", "accuracy": {"top1_drop_pp": 1.5},
     "worst": {"psnr_db": 31.0, "nonfinite": 0}, "latency_ms": {"p99": 0.1, "p99_valid": True},
     "size_reduction_pct": 74.0},
]
ROWS = [InferenceRow.from_dict(d) for d in ROWS_D]


def row(d):
    return InferenceRow.from_dict(d)


def test_accuracy_drop_gate_names_precision_metric_value_threshold():
    v = evaluate(ROWS, Thresholds(max_accuracy_drop_pp=1.0))
    assert not v.passed and len(v.checks) == 2
    (fail,) = v.failures
    assert fail.precision == "int8" and fail.metric == "accuracy_drop_pp"
    assert "int8 on host: top-1 drop 1.50 pp vs TF reference > max 1 pp" == fail.message
    assert evaluate(ROWS, Thresholds(max_accuracy_drop_pp=2.0)).passed


def test_other_thresholds():
    v = evaluate(ROWS, Thresholds(min_psnr_db=40, max_p99_ms=0.15, min_size_reduction_pct=70))
    failed = {(c.precision, c.metric) for c in v.failures}
    assert failed == {("int8", "psnr_db"), ("fp32", "p99_ms"), ("fp32", "size_reduction_pct")}


def test_a_p99_from_too_few_samples_never_passes_a_p99_gate():
    """Issue 44: a gate never passes what it could not judge. A p99 of 0.1 ms under a 1 ms limit, from
    200 samples (a valid p99 needs 662), is no p99: the check does not pass and says what to rerun."""
    short = row(dict(ROWS_D[1], latency_ms={"p99": 0.1, "p99_valid": False, "samples": 200}))
    v = evaluate([short], Thresholds(max_p99_ms=1.0))
    (fail,) = v.failures
    assert fail.metric == "p99_ms" and "cannot judge" in fail.message and "--min-runs 662" in fail.message
    assert "200 samples" in fail.message
    assert evaluate([row(ROWS_D[1])], Thresholds(max_p99_ms=1.0)).passed


def test_nan_fails_every_gate():
    rows = [row(dict(ROWS_D[1], worst={"psnr_db": 50.0, "nonfinite": 3}))]
    v = evaluate(rows, Thresholds(min_psnr_db=10))
    assert not v.passed and any(c.metric == "nonfinite_outputs" for c in v.failures)


def test_accuracy_gate_without_labels_is_an_error_not_a_pass():
    rows = [row(dict(ROWS_D[1], accuracy={"top1_agreement": 1.0}))]
    with pytest.raises(BadInput, match="no labels"):
        evaluate(rows, Thresholds(max_accuracy_drop_pp=1.0))


def test_gate_file_per_precision(tmp_path):
    f = tmp_path / "gate.yaml"
    f.write_text("default:\n  max_accuracy_drop: 0.5\nint8:\n  max_accuracy_drop: 2.0\n  min_size_reduction: 80\n")
    th = load_gate_file(f)
    v = evaluate(ROWS, Thresholds(), th)
    assert {(c.precision, c.metric, c.passed) for c in v.checks} == {
        ("fp32", "accuracy_drop_pp", True), ("int8", "accuracy_drop_pp", True),
        ("int8", "size_reduction_pct", False)}


@pytest.mark.parametrize("text,msg", [
    ("int4:\n  min_psnr: 3\n", "unknown precision key"),
    ("int8:\n  max_drop: 3\n", "unknown threshold int8.max_drop"),
    ("int8:\n  min_psnr: high\n", "must be a number"),
    ("[1, 2", "not valid YAML"),
    ("- 1\n", "expected a mapping"),
])
def test_bad_gate_files(tmp_path, text, msg):
    f = tmp_path / "g.yaml"
    f.write_text(text)
    with pytest.raises(BadInput, match=msg):
        load_gate_file(f)


def test_junit_structure():
    v = evaluate(ROWS, Thresholds(max_accuracy_drop_pp=1.0, min_psnr_db=30))
    xml = render_junit(v, [row({"precision": "fp16", "target": "adb:x", "status": "failed",
                                "error": "device lost <&>"})])
    root = ET.fromstring(xml)
    suite = root.find("testsuite")
    assert suite.get("tests") == "5" and suite.get("failures") == "1" and suite.get("errors") == "1"
    cases = suite.findall("testcase")
    assert {c.get("classname") for c in cases} >= {"edgebench.int8.host", "edgebench.fp32.host"}
    failure = [c for c in cases if c.find("failure") is not None]
    assert len(failure) == 1 and "1.50 pp" in failure[0].find("failure").get("message")
    assert suite.findall("testcase")[-1].find("error").get("message") == "device lost <&>"


def test_junit_validates_against_the_junit_schema(tmp_path):
    from pathlib import Path

    from lxml import etree

    schema = etree.XMLSchema(etree.parse(str(Path(__file__).parent / "fixtures" / "junit-10.xsd")))
    v = evaluate(ROWS, Thresholds(max_accuracy_drop_pp=1.0, min_psnr_db=30, max_p99_ms=1))
    xml = render_junit(v, [row({"precision": "int8", "target": "adb:emulator-5554", "status": "failed",
                                "error": "device offline"})])
    doc = etree.fromstring(xml.encode())
    assert schema.validate(doc), schema.error_log
    broken = etree.fromstring(b"<testsuites><testsuite tests='1'><testcase/></testsuite></testsuites>")
    assert not schema.validate(broken)   # the schema is strict enough to reject a bad report


def test_nan_fails_without_any_threshold():
    # Issue 18.4: NaN outputs exit non-zero even when no gate was asked for.
    rows = [row(ROWS_D[0]), row(dict(ROWS_D[1], worst={"psnr_db": None, "cosine": None, "nonfinite": 40}))]
    v = evaluate(rows, Thresholds())
    (fail,) = v.failures
    assert fail.precision == "int8" and fail.metric == "nonfinite_outputs" and "always fail" in fail.message
    ref_nan = [row(dict(ROWS_D[0], worst={"psnr_db": None, "nonfinite": 0, "ref_nonfinite": 8}))]
    assert evaluate(ref_nan, Thresholds()).failures[0].metric == "reference_nonfinite_outputs"
    assert evaluate(ROWS, Thresholds()).passed
    # --min-psnr on a NaN row: a failed check, not "needs drift" bad input
    v = evaluate(rows, Thresholds(min_psnr_db=30))
    assert {c.metric for c in v.failures} == {"nonfinite_outputs", "psnr_db"}


@pytest.mark.parametrize("text,msg", [
    # the same ranges as the command-line options (issue 37 item 4), file and line named
    ("default:\n  min_psnr: .nan\n", "g.yaml:2: default.min_psnr: nan must be >= 0 and <= 1,000 (the range of --min-psnr)"),
    ("int8:\n  min_psnr: 30\n  max_accuracy_drop: -5\n",
     "g.yaml:3: int8.max_accuracy_drop: -5 must be >= 0 and <= 100 (the range of --max-accuracy-drop)"),
    ("int8:\n  max_p99_ms: .inf\n", "g.yaml:2: int8.max_p99_ms: inf must be > 0"),
    ("fp16:\n  min_cosine: 2\n", "g.yaml:2: fp16.min_cosine: 2 must be >= -1 and <= 1 (the range of --min-cosine)"),
    ("int8:\n  min_delegated: 150\n", "g.yaml:2: int8.min_delegated: 150 must be >= 0 and <= 100"),
    ("int8:\n  min_size_reduction: 101\n", "g.yaml:2: int8.min_size_reduction: 101 must be <= 100"),
    ("int8:\n  min_psnr: 30\n  min_psnr: 40\n", "g.yaml:3: int8.min_psnr appears twice"),
    ("int8:\n  min_psnr: 1\nint8:\n  min_psnr: 2\n", "g.yaml:3: precision 'int8' appears twice"),
    ("int8:\n\n  max_drop: 3\n", "g.yaml:3: unknown threshold int8.max_drop"),
])
def test_gate_file_numbers_are_range_checked_naming_file_and_line(tmp_path, text, msg):
    f = tmp_path / "g.yaml"
    f.write_text(text)
    with pytest.raises(BadInput) as err:
        load_gate_file(f)
    assert f"--gate {tmp_path / msg}" in str(err.value), str(err.value)


def test_gate_file_in_range_values_still_load(tmp_path):
    f = tmp_path / "g.yaml"
    f.write_text("int8:\n  min_size_reduction: -20\n  min_cosine: -1\n  max_accuracy_drop: 0\n  min_psnr: 1000\n")
    th = load_gate_file(f)["int8"]
    assert (th.min_size_reduction_pct, th.min_cosine, th.max_accuracy_drop_pp, th.min_psnr_db) == (-20, -1, 0, 1000)


def test_cli_refuses_an_out_of_range_gate_file_before_measuring(run_cli, tmp_path):
    f = tmp_path / "gate.yaml"
    f.write_text("default:\n  min_psnr: .nan\n")
    code, out, err = run_cli("convert-and-compare", str(tmp_path / "m.tflite"), "--gate", str(f))
    assert code == 2, err
    assert err.strip() == (f"error: --gate {f}:2: default.min_psnr: nan must be >= 0 and <= 1,000 (the range of "
                           "--min-psnr)")


def test_a_p99_gate_that_cannot_judge_exits_4_and_a_real_miss_still_exits_1():
    """A p99 over the limit measured while the load signal fired, or from too few samples, is
    undecided: exit 4 (rerun), never 0; beside a decided miss the exit is 1. Unloaded and over: 1."""
    from edgebench.convert_and_compare.pipeline import raise_for_compare
    from edgebench.core.errors import GateFailed, Undecided
    from edgebench.rows import Document

    def doc(*rows):
        v = evaluate(list(rows), Thresholds(max_p99_ms=0.05))
        return Document.new("compare", list(rows), {}, gate=v.to_dict())

    loaded = row(dict(ROWS_D[1], latency_ms={"p99": 0.1, "p99_valid": True, "loaded": True}))
    short = row(dict(ROWS_D[1], latency_ms={"p99": 0.01, "p99_valid": False, "samples": 200}))
    quiet = row(dict(ROWS_D[1], latency_ms={"p99": 0.1, "p99_valid": True, "loaded": False}))
    under_load = row(dict(ROWS_D[1], latency_ms={"p99": 0.01, "p99_valid": True, "loaded": True}))
    (c,) = evaluate([loaded], Thresholds(max_p99_ms=0.05)).checks
    assert not c.passed and c.undecided and c.to_dict()["undecided"] is True and "load signal" in c.message
    for d in (doc(loaded), doc(short), doc(loaded, short)):
        with pytest.raises(Undecided, match="gate cannot judge"):
            raise_for_compare(d)
    for d in (doc(quiet), doc(loaded, quiet)):
        with pytest.raises(GateFailed):
            raise_for_compare(d)
    (c,) = evaluate([under_load], Thresholds(max_p99_ms=0.05)).checks
    assert c.passed and not c.undecided and "undecided" not in c.to_dict()   # a tail under the limit despite load
    raise_for_compare(doc(under_load))


def test_an_undecided_gate_is_named_so_in_the_headline_and_markdown():
    from edgebench.judge.outcome import run_verdict
    from edgebench.report.markdown import render_markdown
    from edgebench.rows import Document

    loaded = row(dict(ROWS_D[1], latency_ms={"p99": 0.1, "p99_valid": True, "loaded": True}))
    d = Document.new("compare", [loaded], {}, gate=evaluate([loaded], Thresholds(max_p99_ms=0.05)).to_dict())
    v = run_verdict(d)
    assert v.gate == "failed" and v.undecided and v.text.startswith("GATE CANNOT JUDGE (1 check)")
    assert "gate cannot judge" in render_markdown(d) and "gate passed" not in render_markdown(d)
