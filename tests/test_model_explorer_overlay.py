"""Model Explorer overlays that inform (issue 38): inside a delegate partition each member node gets
its own measured time (the delegate's inner operators aligned in order, else its op type's share
by FLOPs) or is marked "delegated, not timed per node" -- never N identical values -- and the
numbers still add up to the profile. With the optional adapter installed, every node-data key
resolves to a node of Model Explorer's own graph of the same .tflite."""

from __future__ import annotations

import json

import pytest

from edgebench.bench.run import BenchSettings, run_bench
from edgebench.report.model_explorer import model_explorer_node_data
from edgebench.targets.op_profile import NOT_TIMED, partition_split
from edgebench.rows import OpEntry
from edgebench.targets.base import RunControl, RunOptions

pytest_plugins = ["conftest_profile"]


@pytest.fixture(scope="module")
def fp32_profile(prelu_models):
    """The PReLU net's FP32 file: one XNNPACK partition of 6 nodes (conv, PReLU, conv, PReLU, ...)."""
    doc = run_bench(BenchSettings(models=(str(prelu_models["fp32"]),), run=RunOptions(control=RunControl(runs=30), op_profile=True)))
    row = doc.rows[0]
    assert row.ok and row.op_profile, row.error
    return row


def test_partition_members_get_their_own_times(fp32_profile):
    (part,) = [e for e in fp32_profile.op_profile if e.delegated]
    members = part.details["member_names"]
    assert len(members) == 6 and len(part.details["member_ops"]) == 6
    values, how = partition_split(part)
    assert how == "inner operators in order"
    data = model_explorer_node_data(fp32_profile)["results"]
    got = [data[m]["value"] for m in members]
    assert len(set(got)) > 1, got                          # not the partition's time spread evenly
    assert sum(got) == pytest.approx(part.ms, abs=1e-5)
    total = sum(e.ms for e in fp32_profile.op_profile)
    assert sum(v["value"] for v in data.values()) == pytest.approx(total, abs=1e-5)


def _part(inner, ops, members, ms=1.0):
    return OpEntry(node=9, op="DELEGATE", name="XNNPACK partition", ms=ms, share=1.0, delegated=True,
                   details={"members": members, "member_names": [f"t{m}" for m in members], "member_ops": ops,
                            **({"inner": inner} if inner is not None else {})})


def test_op_type_share_by_flops_when_the_order_does_not_line_up():
    # two convs and an add, but the delegate reports its operators in an order that cannot be aligned
    inner = [{"op": "Add (ND, F32)", "ms": 0.2}, {"op": "Add (ND, F32)", "ms": 0.2},
             {"op": "Add (ND, F32)", "ms": 0.2}, {"op": "Convolution (NHWC, F32) IGEMM", "ms": 0.4}]
    values, how = partition_split(_part(inner, ["CONV_2D", "CONV_2D", "ADD", "SOFTMAX", "TANH"], [0, 1, 2, 3, 4]),
                                  {0: 300, 1: 100, 2: 0})
    assert how == "op type share"
    assert values[0] == pytest.approx(3 * values[1])         # the convs split Convolution time 3:1 by FLOPs
    assert sum(values) == pytest.approx(1.0)


def test_untimed_partition_is_marked_not_spread():
    from edgebench.rows import InferenceRow

    row = InferenceRow(target="host", status="ok", op_profile=(
        _part(None, ["CONV_2D", "ADD"], [0, 1], ms=0.5),
        OpEntry(node=2, op="SOFTMAX", name="probs", ms=0.1, share=0.2)))
    data = model_explorer_node_data(row)["results"]
    assert data["t0"]["value"] == data["t1"]["value"] == NOT_TIMED
    assert data["probs"]["value"] == 0.1


@pytest.mark.extras
def test_every_key_resolves_in_model_explorers_own_graph(prelu_models, fp32_profile, run_cli, tmp_path):
    from conftest import require_extra

    adapter = require_extra("ai_edge_model_explorer_adapter", "model-explorer")
    doc = run_bench(BenchSettings(models=(str(prelu_models["int8"]),), run=RunOptions(control=RunControl(runs=30), op_profile=True)))
    for row, model in ((fp32_profile, prelu_models["fp32"]), (doc.rows[0], prelu_models["int8"])):
        graph = json.loads(adapter.ConvertFlatbufferDirectlyToJson(
            adapter.VisualizeConfig(add_tensor_name_attribute=True), str(model)))
        nodes = [n for g in graph for sg in g["subgraphs"] for n in sg["nodes"]]
        ops = [n for n in nodes if n["label"] not in ("pseudo_const", "GraphInputs", "GraphOutputs")]
        names = {a["value"] for n in ops for o in n.get("outputsMetadata", []) for a in o["attrs"]
                 if a["key"] == "tensor_name"}
        keys = set(model_explorer_node_data(row)["results"])
        assert keys and keys <= names, sorted(keys - names)
        assert len(keys) == len(ops)                     # every op of the graph has a value (or the mark)
