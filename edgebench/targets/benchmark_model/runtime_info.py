"""benchmark_model's ``--model_runtime_info_output_file``: which nodes each delegate took.

Recent benchmark_model builds write, after the delegates are applied, a binary
``tflite.profiling.ModelRuntimeDetails`` protobuf (tensorflow/lite/profiling/proto/
model_runtime_info.proto): per subgraph every node -- the model's own nodes, each either left on
the interpreter or carrying ``delegated_to_node_id``, and one node per delegate partition with
``delegate_node_details {delegate_name, tflite_node_ids_replaced}`` -- plus the execution plan.
Unlike the log's "Replacing N out of M node(s)" line it names the ops the delegate left out, so a
device row says *which* ops fell off the delegate without an op-profiling run.

The schema below declares only the fields read here, with the field numbers of that .proto; the
rest (tensors as ``edges``, per-op profile data) are skipped as unknown fields by protobuf's own
parser. For a builtin op the tool writes the op's name in ``name`` (``CONV_2D``) and its enum
number in ``type``; for a custom op or a delegate kernel both hold the custom name.

This module imports nothing from edgebench: the simulated device's benchmark_model stand-in loads
it by path to write the same file.
"""

from __future__ import annotations

from typing import Any

MAX_BYTES = 16 << 20          # a runtime-info file larger than this is refused before the pull
_FILE = "edgebench_model_runtime_info.proto"
_classes: dict[str, Any] | None = None


def message_classes() -> dict[str, Any]:
    """``{"ModelRuntimeDetails": cls, "RuntimeSubgraph": cls, "Node": cls, "DelegateNodeDetails": cls}``
    built from a descriptor in a private pool (no generated code, no global registration)."""
    global _classes
    if _classes is not None:
        return _classes
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    F = descriptor_pb2.FieldDescriptorProto
    fdp = descriptor_pb2.FileDescriptorProto(name=_FILE, package="tflite.profiling", syntax="proto2")

    def message(name: str, fields: list[tuple]) -> None:
        m = fdp.message_type.add(name=name)
        for fname, number, ftype, label, *rest in fields:
            f = m.field.add(name=fname, number=number, type=ftype, label=label)
            if rest and rest[0]:
                f.type_name = f".tflite.profiling.{rest[0]}"
            if label == F.LABEL_REPEATED and ftype == F.TYPE_INT32:
                f.options.packed = True

    opt, rep = F.LABEL_OPTIONAL, F.LABEL_REPEATED
    message("DelegateNodeDetails", [("delegate_name", 1, F.TYPE_STRING, opt),
                                    ("tflite_node_ids_replaced", 2, F.TYPE_INT32, rep)])
    message("Node", [("id", 1, F.TYPE_INT32, opt), ("name", 2, F.TYPE_STRING, opt), ("type", 3, F.TYPE_STRING, opt),
                     ("inputs", 4, F.TYPE_INT32, rep), ("outputs", 5, F.TYPE_INT32, rep),
                     ("delegate_node_details", 8, F.TYPE_MESSAGE, opt, "DelegateNodeDetails"),
                     ("delegated_to_node_id", 9, F.TYPE_INT32, opt)])
    # subgraph_type is an enum in the .proto; an enum is a varint on the wire, read here as int32
    message("RuntimeSubgraph", [("subgraph_id", 1, F.TYPE_INT32, opt), ("nodes", 3, F.TYPE_MESSAGE, rep, "Node"),
                                ("execution_plan", 4, F.TYPE_INT32, rep), ("subgraph_type", 5, F.TYPE_INT32, opt)])
    message("ModelRuntimeDetails", [("model_name", 1, F.TYPE_STRING, opt),
                                    ("subgraphs", 2, F.TYPE_MESSAGE, rep, "RuntimeSubgraph")])
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    get = getattr(message_factory, "GetMessageClass", None)
    if get is None:   # protobuf < 4.21
        factory = message_factory.MessageFactory(pool)
        get = factory.GetPrototype
    _classes = {m.name: get(pool.FindMessageTypeByName(f"tflite.profiling.{m.name}")) for m in fdp.message_type}
    return _classes


def read_runtime_info(data: bytes) -> dict[str, Any]:
    """The main subgraph's delegation facts from the file's bytes:
    ``{model_name, subgraphs, nodes_total, nodes_delegated, undelegated: {OP: count},
    kernels: [{node, delegate_name, replaced}]}``. ValueError when the bytes are not such a file."""
    from google.protobuf.message import DecodeError

    msg = message_classes()["ModelRuntimeDetails"]()
    try:
        msg.ParseFromString(data)
    except DecodeError as exc:
        raise ValueError(f"not a ModelRuntimeDetails protobuf ({exc})") from None
    if not msg.subgraphs:
        raise ValueError("no subgraphs in the model runtime info")
    main = next((s for s in msg.subgraphs if s.subgraph_id == 0), msg.subgraphs[0])
    plan = set(main.execution_plan)
    kernels, original = [], []
    for n in main.nodes:
        (kernels if n.HasField("delegate_node_details") else original).append(n)
    # a delegate kernel outside the execution plan never runs (e.g. a partition later replaced)
    kernels = [k for k in kernels if not plan or k.id in plan]
    if not original:
        raise ValueError("the model runtime info lists no model nodes")
    undelegated: dict[str, int] = {}
    delegated = 0
    for n in original:
        if n.HasField("delegated_to_node_id"):
            delegated += 1
        else:
            op = n.name or n.type or "?"
            undelegated[op] = undelegated.get(op, 0) + 1
    return {
        "model_name": msg.model_name or None,
        "subgraphs": len(msg.subgraphs),
        "nodes_total": len(original),
        "nodes_delegated": delegated,
        "undelegated": undelegated,
        "kernels": [{"node": k.id, "delegate_name": k.delegate_node_details.delegate_name,
                     "replaced": list(k.delegate_node_details.tflite_node_ids_replaced)} for k in kernels],
    }
