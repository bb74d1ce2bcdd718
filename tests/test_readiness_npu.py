"""Real NPU compiles on this host with the vendors' own libraries (optional extras npu-qualcomm and
npu-intel: onnxruntime-qnn's QNN libraries, the openvino wheel). Probe CNNs from
reference_models/npu_probe.py, converted by edgebench itself as `readiness` does for a SavedModel."""

from __future__ import annotations

import json
import re
import os
from pathlib import Path

import pytest

from conftest import require_extra

pytestmark = pytest.mark.extras


@pytest.fixture(scope="module")
def qnn():
    require_extra("onnxruntime_qnn", "npu-qualcomm")


@pytest.fixture(scope="module")
def openvino():
    require_extra("openvino", "npu-intel")


@pytest.fixture(scope="module")
def clean_tmp(tmp_path_factory):
    """A system temp folder of the suite's own, to see what the compiles leave behind in it."""
    tmp = tmp_path_factory.mktemp("system-tmp")
    old = os.environ.get("TMPDIR")
    os.environ["TMPDIR"] = str(tmp)
    import tempfile

    tempfile.tempdir = None
    yield tmp
    if old is None:
        os.environ.pop("TMPDIR", None)
    else:
        os.environ["TMPDIR"] = old
    tempfile.tempdir = None


def _readiness(src: str, out: Path, *args: str) -> tuple[int, dict, str]:
    from edgebench.cli import _main as main
    import contextlib
    import io

    js = out.with_suffix(".json")
    buf, err = io.StringIO(), io.StringIO()
    code = 0
    with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(err):
        try:
            main(["readiness", src, "--no-store", "--out", str(out), "--json", str(js), "--wide", *args])
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 0
    return code, json.loads(js.read_text()) if js.is_file() else {}, buf.getvalue() + err.getvalue()


@pytest.fixture(scope="module")
def probes(tmp_path_factory, clean_tmp):
    from reference_models.npu_probe import export

    out = tmp_path_factory.mktemp("probes")
    return {name: export(name, out) for name in ("mobilenet_like", "unsupported_ops_cnn")}


@pytest.fixture(scope="module")
def mobilenet(probes, qnn, openvino, tmp_path_factory):
    p = probes["mobilenet_like"]
    out = tmp_path_factory.mktemp("mobilenet") / "r"
    code, doc, text = _readiness(p["saved_model"], out, "--data", p["data"], "--precision", "fp32,int8",
                                 "--vendor", "qualcomm,intel", "--soc", "all")
    assert code == 0, text
    code7550, doc7550, text7550 = _readiness(p["saved_model"], out.with_name("r7550"), "--data", p["data"],
                                             "--precision", "fp32", "--soc", "SM7550", "--no-gpu", "--no-host-run")
    assert code7550 == 0, text7550
    return doc, text, doc7550


@pytest.fixture(scope="module")
def unsupported(probes, qnn, openvino, tmp_path_factory):
    p = probes["unsupported_ops_cnn"]
    out = tmp_path_factory.mktemp("unsupported") / "r"
    code, doc, text = _readiness(p["saved_model"], out, "--data", p["data"], "--precision", "int8",
                                 "--soc", "SM8650,SM8350,LNL", "--no-gpu", "--fail-on", "SM8650")
    return code, doc, text


def _rows(doc, precision=None):
    return [r for r in doc["rows"] if r.get("compile_status") and (precision is None or r["precision"] == precision)]


def test_int8_mobilenet_like_takes_every_op_on_every_qualcomm_enum_soc(mobilenet):
    doc, _text, _ = mobilenet
    from edgebench.readiness.aot.vendors import BY_KEY, enum_socs

    qualcomm = [r for r in _rows(doc, "int8") if r["vendor"] == "Qualcomm"]
    assert sorted(r["soc"] for r in qualcomm) == sorted(enum_socs(BY_KEY["qualcomm"]))
    for r in qualcomm:
        assert (r["compile_status"], r["ops_on_npu"], r["ops_total"], r["partitions"]) == ("ok", 18, 18, 1), r["soc"]
        assert r["compiled_bytes"] > 0 and r["sdk_version"].startswith("v2.") and r["compile_seconds"] > 0
        assert Path(r["compiled_path"]).is_file()


def test_fp32_on_a_soc_without_fp16_rejects_every_op_with_the_validators_reason(mobilenet):
    _doc, _text, doc7550 = mobilenet
    (r,) = _rows(doc7550, "fp32")
    assert (r["soc"], r["compile_status"], r["ops_on_npu"], r["ops_total"]) == ("SM7550", "ops-rejected", 0, 16)
    assert len(r["left_on_cpu"]) == 16
    assert {x["vendor_line"] for x in r["left_on_cpu"]} == {"The SocModel doesn't support FP16"}


def test_unsupported_ops_are_named_and_a_compile_failure_names_cumulativesum(unsupported):
    code, doc, text = unsupported
    rows = {r["soc"]: r for r in _rows(doc) if not r["target"].startswith("host")}
    r = rows["SM8650"]
    assert (r["compile_status"], r["ops_on_npu"], r["ops_total"], r["partitions"]) == ("ops-rejected", 19, 21, 3)
    assert [x["op"] for x in r["left_on_cpu"]] == ["Atan2", "Bucketize"]
    assert all("not supported in Qualcomm Compiler" in x["plugin_line"] for x in r["left_on_cpu"])
    f = rows["SM8350"]
    assert f["status"] == "ok" and f["compile_status"] == "compile-failed"    # an answer, not a failed run
    assert (f["ops_on_npu"], f["ops_total"]) == (19, 21)                   # N/M also when the compile then fails
    assert "CumulativeSum" in f["error"]
    lnl = [r for r in _rows(doc) if r["vendor"] == "IntelOpenVINO"]
    assert lnl
    for r in lnl:                                # the Intel rows list every op they left (never "-" beside N < M)
        assert len(r["left_on_cpu"]) == r["ops_total"] - r["ops_on_npu"], r["target"]
        assert r["all_ops_on_npu"] is (r["ops_on_npu"] == r["ops_total"])
        if r["target"].startswith("host:npu") and r["ops_on_npu"] < r["ops_total"]:
            # the placement cell may wrap inside its column at the test's terminal width: its words, in order
            assert re.search(r"rest on\b.*\bthe CPU\b.*\(XNNPACK\):", text, re.S), text
            assert r["fully_accelerated"] is False
    assert code == 1 and "FAIL-ON FAILED: int8 on Qualcomm SM8650: 19/21 ops on the NPU (90.5%)" in text   # --fail-on SM8650


def test_intel_partitions_and_says_the_npu_compiler_is_absent(mobilenet):
    doc, _text, _ = mobilenet
    for r in [r for r in _rows(doc) if r["vendor"] == "IntelOpenVINO" and not r["target"].startswith("host")]:
        assert r["compile_status"] == "compile-failed" and r["ops_total"] == r["ops_on_npu"] and r["partitions"] == 1
        assert r["status"] == "ok" and r["all_ops_on_npu"] is True       # a compile this wheel cannot do: an answer
        assert "libopenvino_intel_npu_compiler_loader.so" in r["error"] and "NPU compiler" in r["error"]


def test_the_intel_cpu_backend_file_runs_on_this_host_with_drift_against_the_cpu(mobilenet):
    doc, _text, _ = mobilenet
    for prec in ("fp32", "int8"):
        host = [r for r in doc["rows"] if r["precision"] == prec and r["target"] == "host"]
        npu = [r for r in doc["rows"] if r["precision"] == prec and r["target"].startswith("host:npu")]
        assert len(host) == len(npu) == 1
        r = npu[0]
        assert r["status"] == "ok" and r["fully_accelerated"] is True and r["accelerator"] == "npu"
        assert r["all_ops_on_npu"] is True and r["drift_inputs"] == 32
        assert r["latency_ms"]["samples"] >= 20 and host[0]["latency_ms"]["samples"] >= 20
        worst = r["worst_vs_host"]
        assert worst["cosine"] > 0.999, worst            # the same graph on OpenVINO's CPU plugin vs XNNPACK


def test_ops_on_npu_equal_what_the_compiled_file_holds(mobilenet, unsupported):
    """Read every compiled file with the flatbuffer schema alone (not edgebench's reader): DISPATCH_OP
    ops are the NPU partitions, every other op stays on the CPU."""
    from ai_edge_litert import schema_py_generated as s

    names = {v: k for k, v in vars(s.BuiltinOperator).items() if not k.startswith("_")}
    seen = 0
    for doc in (mobilenet[0], mobilenet[2], unsupported[1]):
        for r in _rows(doc):
            if not r.get("compiled_path"):
                continue
            m = s.ModelT.InitFromPackedBuf(bytearray(Path(r["compiled_path"]).read_bytes()), 0)
            ops = [m.operatorCodes[o.opcodeIndex] for o in m.subgraphs[0].operators]
            dispatch = sum(1 for c in ops if c.customCode == b"DISPATCH_OP")
            cpu = [names[max(c.builtinCode, c.deprecatedBuiltinCode)] for c in ops if c.customCode != b"DISPATCH_OP"]
            assert dispatch == r["partitions"], r["target"]
            assert r["ops_total"] - len(cpu) == r["ops_on_npu"], r["target"]
            stamp = next(bytes(m.buffers[md.buffer].data) for md in m.metadata if md.name == b"LiteRtStamp")
            assert r["soc"].encode() in stamp and r["vendor"].encode() in stamp
            seen += 1
    assert seen >= 20          # 10 Qualcomm SoCs x 2 precisions, the Intel CPU-backend files, SM8650


def test_nothing_is_left_in_the_system_temp_folder(mobilenet, unsupported, clean_tmp):
    for doc in (mobilenet[0], mobilenet[2], unsupported[1]):          # nor a 0-byte file of a failed compile in --out
        assert not [p for p in Path(doc["out_dir"]).rglob("*") if p.is_file() and p.stat().st_size == 0]
    left = [p.name for p in clean_tmp.iterdir()]
    assert not [n for n in left if n.startswith("tempdir_dla") or n.endswith(".error") or n.startswith("edgebench-aot")], left
    assert not [p for p in clean_tmp.rglob("*.tflite") if p.stat().st_size == 0]


def test_a_compile_that_hangs_is_killed_and_fails_only_its_own_row(probes, qnn, tmp_path):
    p = probes["mobilenet_like"]
    code, doc, text = _readiness(p["saved_model"], tmp_path / "r", "--data", p["data"], "--precision", "fp32",
                                 "--soc", "SM8650,SM8350", "--compile-timeout", "0.001", "--no-gpu", "--no-host-run")
    rows = _rows(doc)
    assert code == 3, text
    assert rows and all(r["status"] == "failed" and "did not finish in 0.001 s" in r["error"] for r in rows)


def test_bench_runs_the_intel_compiled_file_through_the_npu_dispatch_path(mobilenet, run_cli):
    doc, _text, _ = mobilenet
    path = next(r["compiled_path"] for r in doc["rows"] if r["target"].startswith("host:npu") and r["precision"] == "int8")
    code, out, err = run_cli("bench", path, "--runtime", "compiled", "--accelerator", "npu", "--runs", "30", "--no-store",
                             "--json", "-")
    assert code == 0, err
    row = json.loads(out)["rows"][0]
    assert row["status"] == "ok" and row["fully_accelerated"] is True
    code, _out, err = run_cli("bench", path, "--runs", "5", "--no-store")
    assert code == 2 and "compiled for IntelOpenVINO LNL" in err
