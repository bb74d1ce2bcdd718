"""``edgebench readiness`` without vendor libraries, and AOT-compiled files everywhere a .tflite is
read (core suite: no optional extra needed; tests/test_readiness_npu.py has the real compiles)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from edgebench.readiness.aot import plugin_log, vendors
from edgebench.readiness.aot.compile import CompileResult
from edgebench.rows import Document

COMPILED_FOR = "compiled for Qualcomm SM8650: runs only on that SoC's NPU"


@pytest.fixture(scope="module")
def tiny_tflite(tmp_path_factory) -> Path:
    """A tiny real float model (Dense 6 -> 8 -> 3, softmax), converted with real TF."""
    import keras
    import tensorflow as tf

    keras.utils.set_random_seed(0)
    inp = keras.Input(shape=(6,), name="x")
    out = keras.layers.Dense(3, activation="softmax", name="probs")(keras.layers.Dense(8, activation="relu")(inp))
    path = tmp_path_factory.mktemp("readiness") / "tiny.tflite"
    path.write_bytes(tf.lite.TFLiteConverter.from_keras_model(keras.Model(inp, out)).convert())
    return path


@pytest.fixture()
def no_vendor_libraries(monkeypatch):
    """This host as a plain `pip install edgebench` sees it: no onnxruntime-qnn, no openvino, no SDK."""
    for var in (*vendors.QNN_SDK_VARS, "GOOGLE_TENSOR_COMPILER_LIB", "EDGEBENCH_MEDIATEK_LIBS", "EDGEBENCH_SAMSUNG_LIBS"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(vendors, "_package_dir", lambda name: None)
    vendors.find.cache_clear()
    yield
    vendors.find.cache_clear()


def test_without_vendor_libraries_every_row_is_not_checkable_and_names_the_library(
        no_vendor_libraries, run_cli, tiny_tflite, tmp_path):
    out = tmp_path / "r.json"
    code, stdout, err = run_cli("readiness", str(tiny_tflite), "--no-store", "--json", str(out), "--out", str(tmp_path / "o"))
    assert code == 0, err
    doc = Document.from_dict(json.loads(out.read_text()))
    npu = [r for r in doc.rows if r.readiness is not None and r.target != "gpu (WebGPU)"]
    expected = sum(len(vendors.enum_socs(v)) for v in vendors.VENDORS)
    assert len(npu) == expected == 33                       # every (vendor, SoC) LiteRT 2.3 registers
    by_vendor = {}
    for r in npu:
        rd = r.readiness
        assert r.status == "skipped" and rd.checkable is False
        assert rd.ops_on_npu is None and rd.ops_pct is None and r.delegation is None      # never 0/M
        assert rd.compile_status in ("sdk-missing", "plugin-load")
        by_vendor.setdefault(rd.vendor, set()).add(rd.missing)
    assert any("libQnnHtp.so" in m for m in by_vendor["Qualcomm"])
    assert any("libopenvino.so.2631" in m and "npu-intel" in m for m in by_vendor["IntelOpenVINO"])
    assert any("libneuronusdk_adapter.mtk.so" in m for m in by_vendor["MediaTek"])
    assert any("liblitert_plugin_compiler.so" in m for m in by_vendor["Google"])
    assert any("Samsung" in m for m in by_vendor["Samsung"])
    assert not [r for r in doc.rows if (r.target or "").startswith("host")]     # nothing runs the dispatch path
    assert "not checkable here: libQnnHtp.so" in stdout
    assert " 0/" not in stdout


def _compiled_looking(src: Path, dest: Path, vendor: str = "Qualcomm", soc: str = "SM8650") -> Path:
    """``src`` with its first op turned into a DISPATCH_OP and a LiteRtStamp added, as LiteRT's
    AOT compiler writes them (124-byte NUL-padded vendor and SoC)."""
    import flatbuffers
    from ai_edge_litert import schema_py_generated as s

    m = s.ModelT.InitFromPackedBuf(bytearray(src.read_bytes()), 0)
    code = s.OperatorCodeT()
    code.builtinCode = code.deprecatedBuiltinCode = s.BuiltinOperator.CUSTOM
    code.customCode = "DISPATCH_OP"
    code.version = 1
    m.operatorCodes.append(code)
    m.subgraphs[0].operators[0].opcodeIndex = len(m.operatorCodes) - 1
    buf = s.BufferT()
    buf.data = list(vendor.encode().ljust(124, b"\0") + soc.encode().ljust(124, b"\0") + b"\0\0")
    m.buffers.append(buf)
    md = s.MetadataT()
    md.name, md.buffer = "LiteRtStamp", len(m.buffers) - 1
    m.metadata = [*(m.metadata or []), md]
    b = flatbuffers.Builder(4096)
    b.Finish(m.Pack(b), file_identifier=b"TFL3")
    dest.write_bytes(bytes(b.Output()))
    return dest


def test_inspect_reads_the_stamp_and_the_dispatch_ops(tiny_tflite, tmp_path):
    from edgebench.model.tflite_model import inspect

    info = inspect(_compiled_looking(tiny_tflite, tmp_path / "c.tflite"))
    assert info["aot"]["vendor"] == "Qualcomm" and info["aot"]["soc"] == "SM8650"
    assert info["aot"]["partitions"] == 1 and info["aot"]["cpu_ops"] == info["op_count"] - 1
    assert inspect(tiny_tflite)["aot"] is None


@pytest.mark.parametrize("argv", [
    ("bench", "{c}", "--no-store", "--runs", "5"),
    ("compare", "{t}", "{c}", "--data", "synthetic", "--no-store"),
    ("convert-and-compare", "{c}", "--data", "synthetic", "--no-store", "--out", "{o}"),
    ("diagnose", "{c}", "--reference", "{t}", "--data", "synthetic", "--no-store", "--out", "{o}"),
    ("readiness", "{c}", "--no-store", "--out", "{o}"),
])
def test_every_reader_of_a_tflite_names_the_soc_it_was_compiled_for(argv, run_cli, tiny_tflite, tmp_path):
    c = _compiled_looking(tiny_tflite, tmp_path / "model.SM8650.tflite")
    code, _out, err = run_cli(*[a.format(c=c, t=tiny_tflite, o=tmp_path / "o") for a in argv])
    assert code == 2, err
    assert "compiled for Qualcomm SM8650" in err and "allow_custom_ops" not in err
    if argv[0] != "readiness":
        assert COMPILED_FOR in err and "--accelerator npu" in err


def test_an_intel_compiled_file_is_pointed_at_the_host_dispatch_path(run_cli, tiny_tflite, tmp_path):
    c = _compiled_looking(tiny_tflite, tmp_path / "m.LNL.tflite", vendor="IntelOpenVINO", soc="LNL")
    code, _out, err = run_cli("bench", str(c), "--no-store", "--runs", "5")
    assert code == 2 and "compiled for IntelOpenVINO LNL" in err and "--runtime compiled --accelerator npu" in err


# Lines LiteRT 2.3.0 logs for CompiledModel.from_file(..., NPU|CPU) on this CPU-only host (captured
# with a venv without openvino, with the openvino wheel, and for a file AOT-compiled for Intel's CPU
# backend). "NPU accelerator registered" comes first on every machine: it is no vendor library.
_REGISTERED = ("INFO: [npu_registry.cc:30] NPU accelerator registered.\n"
               "WARNING: [npu_registry.cc:34] NPU accelerator could not be loaded and registered: "
               "kLiteRtStatusErrorNotFound.\n")


def test_npu_is_there_only_when_a_vendor_plugin_or_dispatch_library_did_the_work():
    from edgebench.targets.runner_profile import accelerator_problem

    no_sdk = _REGISTERED + ("WARNING: [compiler_plugin.cc:312] Failed to load plugin at: .../libLiteRtCompilerPlugin_"
                            "IntelOpenvino.so with error: libopenvino.so.2631: cannot open shared object file\n"
                            "WARNING: [compiled_model.cc:1393] Failed to apply compiler plugins: No compiler plugin found\n"
                            "INFO: Created TensorFlow Lite XNNPACK delegate for CPU.\n")
    assert "LiteRT found no NPU dispatch library" in accelerator_problem("npu", no_sdk)   # a CPU run, never an NPU row
    assert "LiteRT found no NPU dispatch library" in accelerator_problem("npu", _REGISTERED)
    jit = _REGISTERED + ("INFO: [compiled_model.cc:1397] 0 compiler plugins were applied successfully: \n"
                         "ERROR: [compiled_model.cc:1400] Plugin errs: IntelOpenVINO compiler plugin (ver 0.1.0) ERROR\n")
    assert "could not compile the model" in accelerator_problem("npu", jit)
    aot = _REGISTERED + ("WARNING: [compiled_model.cc:815] Compiler plugin path is provided in the environment, but the "
                         "model is pre-compiled. Plugins won't be applied.\n"
                         "INFO: [litert_dispatch.cc:186] Loading shared library: /venv/site-packages/ai_edge_litert/"
                         "vendors/intel_openvino/dispatch/libLiteRtDispatch_IntelOpenvino.so\n")
    assert accelerator_problem("npu", aot) is None
    applied = _REGISTERED + "INFO: [compiled_model.cc:1397] 1 compiler plugins were applied successfully: Qualcomm\n"
    assert accelerator_problem("npu", applied) is None
    assert accelerator_problem("cpu", no_sdk) is None


# ------------------------------------------------------------------------------ rows, gate, renderers

def _result(soc: str, **kw) -> CompileResult:
    base = dict(vendor="Qualcomm", soc=soc, status="ok", checkable=True, ops_total=21, ops_on_npu=21, partitions=1,
                compiled_bytes=160_000, seconds=0.4, sdk_version="v2.51.0", sdk="onnxruntime-qnn 2.7.0")
    return CompileResult(**{**base, **kw})


def _doc(fail_on=()):
    from edgebench.readiness.rows import fail_on_verdict, npu_row

    left = (plugin_log.LeftOp(8, "Atan2", "LiteRT Op #8 'Atan2' (code=156) is not supported in Qualcomm Compiler."),
            plugin_log.LeftOp(14, "Sign", "LiteRT Op #14 'Sign' (code=158) is not supported in Qualcomm Compiler.",
                              "The SocModel doesn't support FP16"))
    results = [_result("SM8650", status="ops-rejected", ops_on_npu=19, partitions=3, left=left),
               _result("SM8350", status="compile-failed", ops_on_npu=19, partitions=3, compiled_bytes=None,
                       error="could not create op: q::QNN_CumulativeSum"),
               _result("SM8850"),
               CompileResult("MediaTek", "MT6989", "sdk-missing", False, missing="libneuronusdk_adapter.mtk.so (SDK)")]
    rows = [npu_row(r, model="m", precision="int8", variant_path="m.tflite", sha="ab" * 32) for r in results]
    doc = Document.new("readiness", rows, {}, model="m", seconds=1.5, out_dir="o")
    verdict = fail_on_verdict(rows, fail_on)
    return doc.with_meta(gate=verdict.to_dict()) if verdict else doc


def test_rows_round_trip_and_the_metric_reads_ops_on_npu():
    from edgebench.rows.metrics import BY_KEY

    doc = _doc()
    again = Document.from_dict(json.loads(json.dumps(doc.to_dict())))
    assert [r.to_dict() for r in again.rows] == [r.to_dict() for r in doc.rows]
    m = BY_KEY["npu_ops_pct"]
    assert [None if v is None else round(v, 2) for v in (m.value(r) for r in again.rows)] == [90.48, 90.48, 100.0, None]
    assert again.rows[0].delegation.nodes_delegated == 19 and again.rows[3].delegation is None
    assert again.rows[1].status == "ok" and again.rows[1].readiness.compile_status == "compile-failed"   # an answer
    assert again.rows[3].status == "skipped"


@pytest.mark.parametrize("rules,passed", [(("SM8650",), False), (("SM8650=90",), True), (("SM8850",), True),
                                          (("SM8350=50",), False), (("MT6989",), False), (("all=90",), False),
                                          (("qualcomm=90",), False), (("SM8650=90,SM8850",), True)])
def test_fail_on(rules, passed):
    gate = _doc(rules).gate_result
    assert gate.passed is passed, [c.message for c in gate.checks]


def test_fail_on_refuses_what_it_cannot_read():
    from edgebench.core.errors import BadInput
    from edgebench.readiness.rows import parse_fail_on

    with pytest.raises(BadInput, match="percentage"):
        parse_fail_on(("SM8650=most",))
    with pytest.raises(BadInput, match="no row"):
        _doc(("SM9999",))


def test_markdown_html_and_the_store_show_the_readiness_rows(tmp_path):
    from edgebench.report.html import render_html
    from edgebench.report.markdown import render_markdown
    from edgebench.store.db import Store

    doc = _doc(("SM8650",))
    md = render_markdown(doc)
    assert "19/21, 3 parts" in md and "#8 Atan2 stays on the CPU" in md and "The SocModel doesn't support FP16" in md
    assert "no: libneuronusdk_adapter.mtk.so" in md and "FAIL-ON FAILED" in md
    html = render_html(doc)
    assert '<section id="readiness">' in html and "could not create op: q::QNN_CumulativeSum" in html
    with Store(f"sqlite:///{tmp_path / 'r.db'}") as st:
        run = st.save(doc)
        rows = st.rows(kind="readiness")
        assert {round(r["npu_ops_pct"], 1) for r in rows if r.get("npu_ops_pct") is not None} == {90.5, 100.0}
        assert Document.from_dict(st.get(run)).rows[0].readiness.left_on_cpu[1].vendor_line == "The SocModel doesn't support FP16"


def test_bad_soc_and_vendor_are_one_line(run_cli, tiny_tflite, tmp_path):
    code, _o, err = run_cli("readiness", str(tiny_tflite), "--samples", "0", "--no-store")
    assert code == 2 and "--samples 0" in err and "Traceback" not in err
    code, _o, err = run_cli("readiness", str(tiny_tflite), "--soc", "SM9999", "--no-store")
    assert code == 2 and "--soc SM9999" in err and "SM8650" in err
    code, _o, err = run_cli("readiness", str(tiny_tflite), "--vendor", "nokia", "--no-store")
    assert code == 2 and "--vendor 'nokia'" in err


# ------------------------------------------------------------------------------ vendors, compile process

def test_a_wrong_openvino_release_is_named_with_the_one_the_plugin_links(no_vendor_libraries, monkeypatch, tmp_path):
    libs = tmp_path / "openvino" / "libs"
    libs.mkdir(parents=True)
    (libs / "libopenvino.so.2641").write_bytes(b"")
    monkeypatch.setattr(vendors, "_package_dir", lambda name: tmp_path / "openvino" if name == "openvino" else None)
    monkeypatch.setattr(vendors, "_version", lambda dist: "2026.4.1" if dist == "openvino" else None)
    f = vendors.find("intel")
    assert f.status == "sdk-missing"
    assert "libopenvino.so.2631 (openvino 2026.4.1 provides libopenvino.so.2641)" in f.missing
    assert "openvino==2026.3.1" in f.missing


def test_qnn_libraries_and_the_stand_in(no_vendor_libraries, monkeypatch, tmp_path):
    sdk = tmp_path / "qairt"
    (sdk / vendors.QNN_SDK_SUBDIR).mkdir(parents=True)
    monkeypatch.setenv("QNN_SDK_ROOT", str(sdk))
    assert "libQnnHtp.so (not in" in vendors.find("qualcomm").missing          # an SDK folder without the libraries
    vendors.find.cache_clear()
    monkeypatch.setenv("QNN_SDK_ROOT", str(tmp_path / "nowhere"))
    assert "QNN_SDK_ROOT" in vendors.find("qualcomm").missing
    monkeypatch.setenv("EDGEBENCH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(vendors.shutil, "which", lambda name: None)
    folder, why = vendors.stand_in_dir()
    assert folder is None and "apt-get install gcc" in why


def test_the_plugin_links_libqnnlpai_which_the_stand_in_replaces():
    plugin = vendors.litert_dir() / "vendors" / "qualcomm" / "compiler" / "libLiteRtCompilerPlugin_Qualcomm.so"
    assert vendors.QNN_STAND_IN in vendors.needed(plugin) and "libQnnHtp.so" in vendors.needed(plugin)


def test_a_plugin_that_crashes_fails_only_its_own_row(monkeypatch, tmp_path, tiny_tflite):
    """One compile = one process: a crash is a compile-failed row that says so, nothing else dies."""
    from edgebench.readiness.aot import compile as aot_compile

    crash = tmp_path / "apply_plugin_main"
    crash.write_text("#!/bin/sh\necho 'Partitioned subgraph<0>, selected 2 ops, from a total of 3 ops. "
                     "resulted in 1 partitions.' >&2\nkill -SEGV $$\n")
    crash.chmod(0o755)
    monkeypatch.setattr(aot_compile, "apply_plugin_binary", lambda: crash)
    found = vendors.Found(vendors.BY_KEY["qualcomm"], str(tmp_path))
    res = aot_compile.compile_one(tiny_tflite, found, "SM8650", ops_total=3)
    assert res.status == "compile-failed" and res.crashed and "SIGSEGV" in res.error
    assert (res.ops_on_npu, res.ops_total) == (2, 3)               # what the plugin said before it died


# ------------------------------------------------------------------------------ answers, words, results show

_INTEL_NO_NPU_COMPILER = """#!/bin/sh
# apply_plugin_main as the Intel plugin runs it with the openvino wheel: it partitions, then
# OpenVINO cannot load the NPU compiler (the lines are the real tool's, the sums this model's)
echo 'INFO: [apply_plugin.cc:412] Partitioned subgraph<0>, selected 2 ops, from a total of 3 ops. resulted in 1 partitions.' >&2
echo 'INFO: [openvino_compiler_plugin.cc:301] Compiling partition 0 for device NPU' >&2
echo 'ERROR: [openvino_compiler_plugin.cc:340] Exception in compilation: Exception from src/inference/src/cpp/core.cpp:117:' >&2
echo 'Cannot load library "libopenvino_intel_npu_compiler_loader.so": cannot open shared object file' >&2
echo 'ERROR: [apply_plugin.cc:520] Failed to compile' >&2
exit 1
"""


@pytest.fixture()
def intel_without_npu_compiler(monkeypatch, tmp_path):
    """This host with the Intel plugin loadable and an apply_plugin_main that fails the NPU compile the
    way the openvino wheel does (a real process, its real log lines; vendor libraries absent here)."""
    from edgebench.readiness.aot import compile as aot_compile

    tool = tmp_path / "apply_plugin_main"
    tool.write_text(_INTEL_NO_NPU_COMPILER)
    tool.chmod(0o755)
    monkeypatch.setattr(aot_compile, "apply_plugin_binary", lambda: tool)
    found = vendors.Found(vendors.BY_KEY["intel"], str(tmp_path), sdk="openvino 2026.3.1")
    monkeypatch.setattr(vendors, "find", lambda key: found)
    return found


def test_a_target_that_cannot_compile_here_is_an_answer_stored_ok_and_shown_by_results_show(
        intel_without_npu_compiler, run_cli, tiny_tflite, tmp_path, monkeypatch):
    db = f"sqlite:///{tmp_path / 'r.db'}"
    js = tmp_path / "r.json"
    code, stdout, err = run_cli("readiness", str(tiny_tflite), "--vendor", "intel", "--soc", "LNL", "--no-gpu",
                                "--no-host-run", "--db", db, "--json", str(js), "--out", str(tmp_path / "o"))
    assert code == 0, stdout + err                     # an answer: exit 0, as docs/exit-codes.md says
    doc = json.loads(js.read_text())
    (row,) = doc["rows"]
    assert (row["compile_status"], row["status"]) == ("compile-failed", "ok")
    assert (row["ops_on_npu"], row["ops_total"], row["all_ops_on_npu"]) == (2, 3, False)
    assert "libopenvino_intel_npu_compiler_loader.so" in row["error"]
    assert [x["op"] for x in row["left_on_cpu"]] == ["unnamed op"]         # the Intel row lists what it left
    assert "selected 2 of 3 ops" in row["left_on_cpu"][0]["plugin_line"]
    from edgebench.store.db import Store

    with Store(db) as st:
        (run,) = st.list_runs(kind="readiness")
        run_id = run["run_id"] if isinstance(run, dict) else run.run_id
        status = run["status"] if isinstance(run, dict) else run.status
    assert status == "ok"                               # not "failed": every answer was given
    for cols in (80, 100, 120):
        monkeypatch.setenv("COLUMNS", str(cols))
        code, out, err = run_cli("results", "show", run_id, "--db", db)
        assert code == 0, err
        lines = out.splitlines()
        assert max(len(ln) for ln in lines) <= cols, (cols, out)
        head = next(ln for ln in lines if "precision" in ln)
        assert "target" in head and "status" in head and "on NPU" in head, (cols, out)
        body = next(ln for ln in lines if "compile-failed" in ln)
        assert "fp32" in body and "2/3, 1 part" in body and "IntelOpenVINO" in body and "unnamed" in body, (cols, out)
        assert "LNL" in out and "unnamed op stays on the CPU" in " ".join(out.split()), (cols, out)


def test_placement_words_say_where_the_ops_went_not_litert_fully_accelerated():
    from edgebench.readiness.rows import npu_row
    from edgebench.report.readiness import table
    from edgebench.report.markdown import render_markdown
    from edgebench.report.html import render_html

    res = _result("LNL", vendor="IntelOpenVINO", status="ops-rejected", ops_total=6, ops_on_npu=5,
                  left_histogram={"ELU": 1}, compiled_path="m.cpu.tflite", backend="cpu")
    rejected = npu_row(res, model="m", precision="fp32", variant_path="m.tflite", sha="ab" * 32)
    full = npu_row(_result("LNL", vendor="IntelOpenVINO", ops_total=6, ops_on_npu=6, compiled_path="f.tflite"),
                   model="m", precision="int8", variant_path="m.tflite", sha="ab" * 32)
    from dataclasses import replace

    from edgebench.rows import Worst

    rows = [r.replace(target="host:npu (IntelOpenVINO LNL, OpenVINO CPU backend)", fully_accelerated=True,
                      worst_vs_host=Worst(psnr_db=71.2, cosine=1.0), readiness=replace(r.readiness, drift_inputs=32))
            for r in (rejected, full)]
    doc = Document.new("readiness", rows, {}, model="m")
    headers, body = table(doc)
    assert "fully accel." not in headers and "placement" in headers
    cell = dict(zip(headers, body[0]))
    assert cell["placement"] == "rest on the CPU (XNNPACK): ELU" and cell["left on CPU"] == "ELU"
    assert cell["vs CPU"] == "PSNR 71.2 dB, 32 inputs"
    assert dict(zip(headers, body[1]))["placement"] == "all ops on the NPU"
    again = Document.from_dict(json.loads(json.dumps(doc.to_dict())))
    js = [r.to_dict() for r in again.rows]
    assert [(r["all_ops_on_npu"], r["fully_accelerated"], r["drift_inputs"]) for r in js] == [(False, True, 32),
                                                                                              (True, True, 32)]
    for text in (render_markdown(doc), render_html(doc)):
        assert "rest on the CPU (XNNPACK): ELU" in text and "all ops on the NPU" in text and "32 inputs" in text
    from edgebench.rows import drifts_from_dict

    with_drift = doc.with_rows([r.replace(drift_vs_host=drifts_from_dict(
        {"out": {"max_abs": 0.0, "mean_abs": 0.0, "rmse": 0.0, "rel_l2": 0.0, "cosine": 1.0, "psnr_db": 71.2}}))
        for r in rows])
    assert "host (32 inputs)" in render_html(with_drift)          # the HTML drift section says the count too


def test_the_intel_npu_row_takes_the_names_of_the_ops_its_cpu_backend_compile_left():
    from edgebench.readiness.rows import name_unnamed_from_cpu_backend, npu_row

    kw = dict(vendor="IntelOpenVINO", ops_total=21, ops_on_npu=19, partitions=3, sdk="openvino 2026.3.1")
    npu = npu_row(_result("LNL", status="compile-failed", compiled_bytes=None, error="OpenVINO could not compile", **kw),
                  model="m", precision="int8", variant_path="m.tflite", sha="ab" * 32)
    assert [o.op for o in npu.readiness.left_on_cpu] == ["unnamed op", "unnamed op"]
    cpu = npu_row(_result("LNL", status="ops-rejected", compiled_path="m.cpu.tflite", backend="cpu",
                          left_histogram={"ATAN2": 1, "BUCKETIZE": 1}, **kw),
                  model="m", precision="int8", variant_path="m.tflite", sha="ab" * 32, backend_label="cpu")
    cpu = cpu.replace(target="host:npu (IntelOpenVINO LNL, OpenVINO CPU backend)")
    other = npu_row(_result("LNL", status="compile-failed", compiled_bytes=None, **{**kw, "ops_on_npu": 18}),
                    model="m", precision="fp32", variant_path="m.tflite", sha="ab" * 32)
    got, _cpu, kept = name_unnamed_from_cpu_backend([npu, cpu, other])
    assert [o.op for o in got.readiness.left_on_cpu] == ["ATAN2", "BUCKETIZE"]
    assert "CPU-backend compile of the same partitioning (19/21, 3 parts)" in got.readiness.left_on_cpu[0].plugin_line
    assert got.delegation.undelegated == {"ATAN2": 1, "BUCKETIZE": 1}
    assert [o.op for o in kept.readiness.left_on_cpu] == ["unnamed op"] * 3       # another precision: not a donor


@pytest.mark.parametrize("cols", [80, 100, 120])
def test_results_show_of_a_recorded_readiness_run_draws_its_answer_table(cols, run_cli, tmp_path, monkeypatch):
    """The real readiness run the goldens keep (tests/goldens/inputs/readiness.json), stored and shown."""
    from edgebench.store.db import Store

    recorded = json.loads((Path(__file__).parent / "goldens" / "inputs" / "readiness.json").read_text())
    db = f"sqlite:///{tmp_path / 'r.db'}"
    with Store(db) as st:
        run_id = st.save(Document.from_dict(recorded))
    monkeypatch.setenv("COLUMNS", str(cols))
    code, out, err = run_cli("results", "show", run_id, "--db", db)
    assert code == 0, err
    lines = out.splitlines()
    assert max(len(ln) for ln in lines) <= cols
    head = [ln for ln in lines if "precision" in ln]
    assert head and all(h in head[0] for h in ("precision", "target", "status", "on NPU")), out
    assert "model unsupported_ops_cnn" in " ".join(out.split())                 # the model, in the title
    table = [ln for ln in lines if ln.startswith("│")]
    checked = [r for r in recorded["rows"] if r.get("checkable") is not False]      # the others: one line per vendor
    assert sum("int8" in ln for ln in table) == len(checked) == 6, out            # precision is never 0 wide
    flat = " ".join(out.split())
    for want in ("19/21, 3 parts", "17/21, 4 parts", "compile-failed", "not checkable here: libneuronusdk_adapter.mtk.so",
                 "#8 Atan2 stays on the CPU"):
        assert want in flat, (want, out)
    intel = next(i for i, ln in enumerate(table) if "IntelOpenVINO LNL" in ln)
    assert "2 unnamed" in table[intel] and "ops" in table[intel + 1], out       # never "-" beside 19/21


# ------------------------------------------------------------------- issue 49: the first screen

def test_the_headline_is_computed_from_the_rows_and_problems_come_first():
    from edgebench.report.readiness import headline, table, unchecked_lines

    doc = _doc()
    assert headline(doc) == ["Qualcomm, int8: ready on 1 of 3 SoCs; SM8350: compile fails: could not create op: "
                             "q::QNN_CumulativeSum; SM8650: Atan2, Sign stay on the CPU (Sign: no FP16 on this SoC)"]
    assert unchecked_lines(doc) == ["MediaTek (MT6989): not checkable here: libneuronusdk_adapter.mtk.so (SDK)"]
    headers, body = table(doc, fold=True)
    assert "checkable" not in headers and [b[1] for b in body] == ["Qualcomm SM8350", "Qualcomm SM8650", "Qualcomm SM8850"]
    # another row, another headline: SM8850 rejecting an op moves it out of "ready"
    rows = [r.replace(readiness=r.readiness.__class__.from_dict({**r.readiness.to_dict(), "ops_on_npu": 20,
                                                                  "all_ops_on_npu": False, "compile_status": "ops-rejected"}))
            if r.target == "Qualcomm SM8850" else r for r in doc.rows]
    assert headline(doc.with_rows(rows))[0].startswith("Qualcomm, int8: ready on 0 of 3 SoCs")
    # fp16 on a SoC without FP16: the headline says what to do
    fp16 = [r.replace(precision="fp16") for r in doc.rows]
    assert "(Sign: no FP16 on this SoC -- quantize to int8)" in headline(doc.with_rows(fp16))[0]


def test_nothing_checkable_is_said_in_one_line_per_vendor_and_no_empty_table():
    from edgebench.readiness.rows import npu_row
    from edgebench.report.terminal.readiness import render_readiness
    from test_goldens import draw

    results = [CompileResult("Qualcomm", soc, "sdk-missing", False, missing="libQnnHtp.so (Qualcomm QNN): pip install "
                             "'edgebench[npu-qualcomm]'") for soc in ("SM8650", "SM8350", "SM8450", "SM8550")]
    rows = [npu_row(r, model="m", precision="int8", variant_path="m.tflite", sha="ab" * 32) for r in results]
    text = draw(render_readiness(Document.new("readiness", rows, {}, model="m"), width=100), 100)
    assert "┏" not in text, text
    assert text.count("not checkable here") == 1
    assert "Qualcomm (4 SoCs: SM8650, SM8350, SM8450, SM8550): not checkable here: libQnnHtp.so" in " ".join(text.split())
    assert "no NPU target could be checked here" in text


@pytest.mark.parametrize("width", [80, 100, 120])
@pytest.mark.parametrize("case", ["readiness", "readiness-all-targets", "readiness-no-extras"])
def test_the_first_screen_answers_and_fits(case, width):
    """Over every target, with and without the NPU extras: the headline before the table, the
    'left on CPU' header on one line, every line within the terminal, unchecked vendors one line each."""
    import test_goldens as g

    render, _ = g.TERMINAL[case]
    text = g.draw(render(width), width)
    lines = text.splitlines()
    assert max(len(ln) for ln in lines) <= width
    head = next((i for i, ln in enumerate(lines) if ln.startswith("┏")), len(lines))
    top = " ".join(" ".join(lines[:head]).split())
    if case != "readiness-no-extras":
        header = [ln for ln in lines[head + 1:head + 4] if ln.startswith("┃")]
        assert "ready on" in top and len(header) <= 2, text                 # "left on CPU": never 3 lines
        assert any("left on CPU" in ln for ln in header) or ("left on" in header[0] and "CPU" in header[1]), text
        table = [ln for ln in lines if ln.startswith("│")]
        assert not any("sdk-missing" in ln or "plugin-load" in ln for ln in table), text
    for vendor in ("MediaTek", "Google", "Samsung") if case != "readiness" else ("MediaTek", "Samsung"):
        assert sum(ln.startswith(f"{vendor} (") for ln in lines) == 1, (vendor, text)      # one line per vendor
        assert len(re.findall(rf"{vendor} \([^)]*\): not checkable here: \S+", top)) == 1, (vendor, text)
