"""Where the time goes (issue 15): delegation coverage and op profiles on real LiteRT.

The model is a real keras PReLU network converted at test time (conftest_profile): int8 PRELU
has no XNNPACK kernel, so the INT8 row must show fewer delegated nodes than the FP32 row, and its
op profile must name PRELU's share of the time.
"""

from __future__ import annotations

import json

import pytest

from edgebench.bench.run import BenchSettings, run_bench
from edgebench.rows import Document, InferenceRow, OpEntry
from edgebench.targets.base import RunControl, RunOptions
from edgebench.judge.op_types import quantize_cost, speedup_by_op_type
from edgebench.targets.delegation import delegation_warning, undelegated_tail
from edgebench.targets.op_profile import by_op_type

pytest_plugins = ["conftest_profile"]

CTL = RunControl(min_runs=300, min_time_s=0.3, max_time_s=20, answer_width=None)   # timed for 0.3 s, as --min-time


@pytest.fixture(scope="module")
def profiled(prelu_models):
    """bench with --op-profile on FP32 and INT8 (one worker each, plus its profiling child)."""
    return run_bench(BenchSettings(models=(str(prelu_models["fp32"]), str(prelu_models["int8"])), data=str(prelu_models["data"]), run=RunOptions(control=CTL, op_profile=True)))


def _rows(doc) -> tuple[InferenceRow, InferenceRow]:
    fp32, int8 = doc.rows
    assert fp32.ok and int8.ok, (fp32.error, int8.error)
    return fp32, int8


def test_int8_prelu_falls_off_xnnpack(profiled):
    fp32, int8 = _rows(profiled)
    assert fp32.delegation.delegate == int8.delegation.delegate == "XNNPACK"
    assert (fp32.delegation.nodes_delegated, fp32.delegation.nodes_total, fp32.delegation.partitions) == (6, 6, 1)
    assert int8.delegation.nodes_delegated < fp32.delegation.nodes_delegated + 2   # QUANTIZE/DEQUANTIZE join
    assert int8.delegation.nodes_delegated < int8.delegation.nodes_total
    assert dict(int8.delegation.undelegated) == {"PRELU": 2}
    assert int8.delegation.partitions == 3
    assert int8.delegation.cell() == "6/8, 3 parts"
    warning = next(w for w in int8.warnings if "left on the CPU interpreter" in w)
    assert "PRELU x2" in warning and "PReLU" in warning       # names the op and the fix
    assert not any("left on the CPU" in w for w in fp32.warnings)


def test_op_profile_names_prelu_share_and_adds_up(profiled):
    fp32, int8 = _rows(profiled)
    prelu = [e for e in int8.op_profile if e.op == "PRELU"]
    assert len(prelu) == 2 and all(not e.delegated and e.share > 0 for e in prelu)
    assert {e.node for e in prelu} == {2, 4}
    parts = [e for e in int8.op_profile if e.delegated]
    assert len(parts) == 3 and all(e.op == "DELEGATE" and e.name.startswith("XNNPACK partition") for e in parts)
    assert sum(e.share for e in int8.op_profile) == pytest.approx(1.0)
    fp32_parts = [e for e in fp32.op_profile if e.delegated]
    assert len(fp32.op_profile) == 1 and len(fp32_parts) == 1       # one partition = one entry
    for row in (fp32, int8):
        info = row.op_profile_info
        print(f"{row.model}: listed ops / profiled Invoke = {info['coverage']:.3f} (medians {info['coverage_p50']:.3f}); "
              f"profiled Invoke / timed p50 = {info['profiler_overhead']:.3f}")
        # parts of the same profiled runs: never more than the whole (1-us events rounding: +5 %)
        assert 0.5 < info["coverage"] <= 1.05, info      # 0.84-0.93 here
        assert info["invoke_ms"] > 0 and info["profiler_overhead"] > 0
        assert "sum_p50_vs_p50" not in info          # the profile is not checked against another run


def test_speedups_under_the_profilers_resolution_have_no_ratio():

    base = [OpEntry(node=1, op="MAX_POOL_2D", name="p", ms=0.082, share=0.5, delegated=False),
            OpEntry(node=2, op="CONV_2D", name="c", ms=0.2, share=0.5, delegated=False)]
    other = [OpEntry(node=1, op="MAX_POOL_2D", name="p", ms=0.0010 / 662 * 1, share=0.01, delegated=False),
             OpEntry(node=2, op="CONV_2D", name="c", ms=0.1, share=0.99, delegated=False)]
    speed = {x["op_type"]: x for x in speedup_by_op_type(base, other)}
    assert speed["Max Pooling"]["speedup"] is None and speed["Max Pooling"]["below_resolution"]
    assert speed["Convolution"]["speedup"] == pytest.approx(2.0) and not speed["Convolution"]["below_resolution"]


def test_op_types_and_speedup_views(profiled):

    fp32, int8 = _rows(profiled)
    types = by_op_type(int8.op_profile)
    assert types["PReLU"]["cpu_ms"] > 0 and types["PReLU"]["delegated_ms"] == 0
    assert types["Convolution"]["delegated_ms"] > 0
    speed = {x["op_type"]: x for x in speedup_by_op_type(fp32.op_profile, int8.op_profile)}
    assert speed["PReLU"]["other_on_cpu_ms"] > 0
    assert quantize_cost(int8.op_profile)["ms"] >= 0


def test_profile_round_trips_through_json(profiled, tmp_path):
    data = json.loads(json.dumps(profiled.to_dict()))
    row = data["rows"][1]
    assert set(row["delegation"]) >= {"delegate", "nodes_total", "nodes_delegated", "partitions", "undelegated"}
    assert set(row["op_profile"][0]) >= {"node", "op", "name", "ms", "share", "delegated"}
    back = Document.from_dict(data)
    assert back.rows[1].delegation == profiled.rows[1].delegation
    assert back.rows[1].op_profile == profiled.rows[1].op_profile


def test_rows_without_issue15_fields_still_load():
    old = {"target": "host", "status": "ok", "latency_ms": {"p50": 1.0, "samples": 3, "p99_valid": False},
           "op_profile": [{"section": "regular", "table": "Run Order", "node_type": "CONV_2D", "name": "c",
                           "avg_ms": 0.5, "pct": 50.0}]}
    row = InferenceRow.from_dict(old)
    assert row.delegation is None and row.verdicts == ()
    assert row.op_profile == (OpEntry(node=None, op="CONV_2D", name="c", ms=0.5, share=0.5, delegated=False,
                                      details={"section": "regular", "table": "Run Order"}),)


def test_model_explorer_node_data(profiled, tmp_path):
    from edgebench.report.model_explorer import render_node_data

    files = render_node_data(profiled, str(tmp_path / "me.json"))
    assert len(files) == 2
    int8 = json.loads(files[str(tmp_path / "me_prelu_int8_host.json")])
    values = {k: v["value"] for k, v in int8["results"].items()}
    assert sum(values.values()) == pytest.approx(sum(e.ms for e in profiled.rows[1].op_profile), rel=1e-3)
    assert any("p_re_lu" in k for k in values)       # PRELU nodes, keyed by their output tensor
    assert int8["gradient"][0]["stop"] == 0


def test_profiler_crash_keeps_the_timed_run(prelu_models, monkeypatch):
    monkeypatch.setenv("EDGEBENCH_RUNNER_FAULT", "profile-abort")
    doc = run_bench(BenchSettings(models=(str(prelu_models["int8"]),), run=RunOptions(control=RunControl(runs=50), op_profile=True)))
    row = doc.rows[0]
    assert row.ok and row.latency.samples == 50 and row.delegation is not None
    assert row.op_profile is None
    assert "signal" in row.op_profile_info["error"] and "timed results are kept" in row.op_profile_info["error"]
    assert any("no op profile" in w for w in row.warnings)


def test_no_profile_without_xnnpack_says_why(prelu_models):
    doc = run_bench(BenchSettings(models=(str(prelu_models["int8"]),), run=RunOptions(control=RunControl(runs=30), delegate="none", op_profile=True)))
    row = doc.rows[0]
    assert row.ok and row.op_profile is None                  # nothing invented: no zeros
    assert "XNNPACK" in row.op_profile_info["error"]
    assert row.delegation.nodes_delegated == 0 and row.delegation.partitions == 0


def test_unmatched_partitions_become_one_entry():
    """The aggregation rule on a recorded event stream: two inner-event groups per run for one
    partition cannot be matched, so all delegated work is one entry and the note says so."""
    from edgebench.targets import runner_profile as rp

    ev = []
    for _ in range(3):
        ev += [("Invoke", 1, 50, 0, 0), ("Conv", 8, 10, 0, 0), ("PRELU", 2, 20, 1, 0), ("Conv", 8, 12, 0, 0)]
    out = rp.aggregate({"runs": 3, "events": ev}, None, {"delegate": "XNNPACK", "delegate_nodes": [5],
                                                         "partition_members": [[0, 2]]})
    assert out["runs"] == 3 and "could not be matched" in out["note"]
    delegated = [e for e in out["entries"] if e["delegated"]]
    assert len(delegated) == 1 and delegated[0]["mean_us"] == 22
    assert [e["mean_us"] for e in out["entries"] if not e["delegated"]] == [20]


def test_delegation_warning_names_the_specific_fix():
    """Ops with a known cause get their own fix: runtime shape arithmetic -> --static-batch; int8
    SOFTMAX on XNNPACK -> keep it float or move it to the app; anything else -> the generic advice."""
    from edgebench.rows import Delegation

    w = delegation_warning(Delegation("XNNPACK", 10, 6, 2, {"SHAPE": 1, "STRIDED_SLICE": 1, "PACK": 1,
                                                             "RESHAPE": 1}), "fp32 on host")
    assert w.startswith("fp32 on host: XNNPACK took 6/10 nodes in 2 partitions") and "--static-batch" in w
    w = delegation_warning(Delegation("XNNPACK", 9, 8, 2, {"SOFTMAX": 1}), "int8 on host")
    assert "SOFTMAX in float only" in w and "--static-batch" not in w
    w = delegation_warning(Delegation("XNNPACK", 5, 4, 2, {"CUSTOM_OP": 1}), "int8 on host")
    assert "each op the delegate rejects" in w
    assert delegation_warning(Delegation("XNNPACK", 5, 5, 1, {}), "int8 on host") is None


def test_an_undelegated_tail_is_not_a_warning_but_a_split_graph_is():
    """Issue 27: an int8 model's final SOFTMAX (only a DEQUANTIZE partition after it) splits nothing;
    a PRELU between two partitions does."""
    from edgebench.rows import Delegation

    tail = Delegation("XNNPACK", 9, 8, 2, {"SOFTMAX": 1}, details={
        "undelegated_nodes": [7], "partition_members": [[0, 1, 2, 3, 4, 5, 6], [8]],
        "partition_ops": [["QUANTIZE", "CONV_2D", "MAX_POOL_2D", "CONV_2D", "RESHAPE", "FULLY_CONNECTED",
                           "FULLY_CONNECTED"], ["DEQUANTIZE"]]})
    assert undelegated_tail(tail) and delegation_warning(tail) is None
    split = Delegation("XNNPACK", 8, 6, 3, {"PRELU": 2}, details={
        "undelegated_nodes": [2, 4], "partition_members": [[0, 1], [3], [5, 6, 7]],
        "partition_ops": [["QUANTIZE", "CONV_2D"], ["CONV_2D"], ["CONV_2D", "FULLY_CONNECTED", "DEQUANTIZE"]]})
    assert not undelegated_tail(split) and "PRELU x2" in delegation_warning(split)
    unknown = Delegation("XNNPACK", 9, 8, 2, {"SOFTMAX": 1})          # no node order (a benchmark_model log)
    assert not undelegated_tail(unknown) and delegation_warning(unknown)
