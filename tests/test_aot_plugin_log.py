"""The plugin-log parser on real captured compiles (tests/fixtures/aot, made by
scripts/capture_aot_logs.py with onnxruntime-qnn 2.7.0 / openvino 2026.3.1 and ai-edge-litert 2.3.0)."""

from __future__ import annotations

import gzip
from pathlib import Path

from edgebench.readiness.aot import plugin_log

FIX = Path(__file__).parent / "fixtures" / "aot"


def _log(case: str, failed: bool) -> plugin_log.PluginLog:
    out = gzip.decompress((FIX / f"{case}.stdout.gz").read_bytes()).decode(errors="replace")
    err = gzip.decompress((FIX / f"{case}.stderr.gz").read_bytes()).decode(errors="replace")
    return plugin_log.parse(out, err, failed=failed)


def test_unmapped_ops_are_named_with_the_plugins_line_and_no_vendor_line():
    log = _log("qualcomm_sm8650_unsupported_int8", failed=False)
    assert (log.ops_selected, log.ops_total, log.partitions) == (19, 21, 3)
    assert [(o.op, o.why) for o in log.left] == [("Atan2", "unmapped"), ("Bucketize", "unmapped")]
    assert "is not supported in Qualcomm Compiler" in log.left[0].plugin_line and log.left[0].vendor_line is None
    assert log.sdk_version and log.sdk_version.startswith("v2.51")
    assert any("Qnn library version" in n for n in log.notes)      # version skew is kept as a note


def test_rejected_ops_carry_the_qnn_validators_reason():
    log = _log("qualcomm_sm7550_mobilenet_fp32", failed=True)
    assert (log.ops_selected, log.ops_total, log.partitions) == (0, 16, 0)
    assert len(log.left) == 16
    assert {o.why for o in log.left} == {"rejected"}
    assert all(o.vendor_line == "The SocModel doesn't support FP16" for o in log.left)


def test_a_compile_failure_after_partitioning_names_the_op_qnn_could_not_create():
    log = _log("qualcomm_sm8350_unsupported_int8", failed=True)
    assert (log.ops_selected, log.ops_total) == (19, 21)
    assert "could not create op: q::QNN_CumulativeSum" in log.error
    assert "Cumsum" in log.error                                   # the model's own op name


def test_intel_partitions_then_says_the_npu_compiler_is_absent():
    log = _log("intel_lnl_mobilenet_int8", failed=True)
    assert (log.ops_selected, log.ops_total, log.partitions) == (18, 18, 1)
    assert log.devices == ("NPU",)
    assert "libopenvino_intel_npu_compiler_loader.so" in log.error and "NPU compiler is not in the openvino wheel" in log.error


def test_a_plugin_that_does_not_load_partitions_nothing():
    log = _log("samsung_e9965_mobilenet_int8", failed=True)
    assert not log.partitioned and log.ops_selected is None


def test_interleaved_streams_are_not_needed_a_streams_own_lines_suffice():
    """The validator's reason is joined by QNN op name, not by position in one merged stream."""
    reasons = plugin_log._vendor_reasons(
        "x <I> QnnBackend_validateOpConfig started\n"
        "     0.0ms [ ERROR ]   <E> The SocModel doesn't support FP16\n"
        "     0.0ms [ ERROR ]   <E> QnnBackend_validateOpConfig failed 3110\n"
        "     0.0ms [ ERROR ]   <E> Failed to validate op Conv2d_1 with error 0xc26\n")
    assert reasons == {"Conv2d_1": "The SocModel doesn't support FP16"}
