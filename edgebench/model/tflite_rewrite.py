"""Rewrite a .tflite for diagnosis: one op alone, intermediates as outputs (flatbuffer object API).

Used by ``edgebench.convert.quant.tensor_worker``. The LiteRT flatbuffer schema (``ai_edge_litert.
schema_py_generated``, else TensorFlow's copy) is read into its object form (``ModelT``), changed
and packed again with the ``TFL3`` file identifier; nothing here runs a model.

``order_inputs`` (used when a conversion is written) puts a converted file's inputs in its source's
positional order, in place: the same bytes but for the order of one vector.
"""

from __future__ import annotations

import copy
import struct
from typing import Callable, Sequence

import numpy as np


def _schema():
    try:
        from ai_edge_litert import schema_py_generated as schema  # noqa: PLC0415
    except ImportError:  # pragma: no cover - TF-only installs
        from tensorflow.lite.python import schema_py_generated as schema  # noqa: PLC0415
    return schema


def graph_id(raw: bytes) -> str:
    """Model Explorer's id for subgraph 0: its name, else its signature key, else "main"."""
    schema = _schema()
    m = schema.Model.GetRootAs(raw, 0)
    name = m.Subgraphs(0).Name() if m.SubgraphsLength() else None
    if name:
        return name.decode(errors="replace")
    for i in range(m.SignatureDefsLength()):
        sd = m.SignatureDefs(i)
        if sd.SubgraphIndex() == 0 and sd.SignatureKey():
            return sd.SignatureKey().decode(errors="replace")
    return "main"


def load_model_t(raw: bytes):
    schema = _schema()
    return schema.ModelT.InitFromObj(schema.Model.GetRootAs(raw, 0))


def _pack(model_t) -> bytes:
    import flatbuffers  # noqa: PLC0415

    b = flatbuffers.Builder(1024)
    b.Finish(model_t.Pack(b), file_identifier=b"TFL3")
    return bytes(b.Output())


def _buffer_data(model_t, raw: bytes, idx: int):
    if idx <= 0 or idx >= len(model_t.buffers or []):
        return None
    buf = model_t.buffers[idx]
    if buf.data is not None and len(buf.data):
        return np.asarray(buf.data, np.uint8)
    if getattr(buf, "offset", 0) > 1 and getattr(buf, "size", 0):   # models > 2 GB keep data outside
        return np.frombuffer(raw, np.uint8, count=int(buf.size), offset=int(buf.offset))
    return None


def single_op_model(model_t, raw: bytes, op_index: int) -> tuple[bytes, list[int], list[int]]:
    """A model holding op ``op_index`` of subgraph 0 alone: its non-constant inputs become graph
    inputs, its outputs graph outputs, its constants (weights) are copied with their quantization.
    Returns (flatbuffer, original input tensor ids in graph-input order, original output ids)."""
    schema = _schema()
    sg = model_t.subgraphs[0]
    op = copy.copy(sg.operators[op_index])
    op_inputs = _ints(op.inputs)
    used = []
    for t in op_inputs + _ints(op.outputs) + _ints(op.intermediates):
        if t >= 0 and t not in used:
            used.append(t)
    remap = {t: i for i, t in enumerate(used)}
    tensors, buffers = [], [schema.BufferT()]
    graph_inputs = []
    for t in used:
        tt = copy.copy(sg.tensors[t])
        data = _buffer_data(model_t, raw, tt.buffer)
        if data is not None:
            nb = schema.BufferT()
            nb.data = data
            buffers.append(nb)
            tt.buffer = len(buffers) - 1
        else:
            tt.buffer = 0
            if t in op_inputs and not tt.isVariable:
                graph_inputs.append(t)
        tensors.append(tt)
    op.opcodeIndex = 0
    op.inputs = [remap[t] if t >= 0 else -1 for t in op_inputs]
    op.outputs = [remap[t] for t in _ints(op.outputs)]
    if op.intermediates is not None:
        op.intermediates = [remap[t] for t in _ints(op.intermediates)]
    sub = schema.SubGraphT()
    sub.tensors = tensors
    sub.inputs = [remap[t] for t in graph_inputs]
    sub.outputs = list(op.outputs)
    sub.operators = [op]
    sub.name = "op"
    m = schema.ModelT()
    m.version = model_t.version or 3
    m.operatorCodes = [model_t.operatorCodes[sg.operators[op_index].opcodeIndex]]
    m.subgraphs = [sub]
    m.buffers = buffers
    m.description = "edgebench diagnose: one op in isolation"
    return _pack(m), graph_inputs, _ints(sg.operators[op_index].outputs)


def _ints(v) -> list[int]:
    """Object-API index vectors arrive as numpy arrays, lists or None."""
    return [] if v is None else [int(x) for x in v]


def expose_outputs(model_t, tensor_ids: list[int]) -> bytes:
    """The same model with ``tensor_ids`` appended to subgraph 0's outputs (never reused memory)."""
    m = copy.copy(model_t)
    sg = copy.copy(m.subgraphs[0])
    outs = _ints(sg.outputs)
    sg.outputs = outs + [t for t in tensor_ids if t not in outs]
    m.subgraphs = [sg] + list(m.subgraphs[1:])
    return _pack(m)


def order_inputs(data: bytes, order: Sequence[str] | None) -> bytes:
    """The .tflite with subgraph 0's inputs listed in ``order`` (the source model's positional order,
    by signature input name); unchanged when it already is, or when the file or the order cannot
    say (no SignatureDef for subgraph 0, names that differ, a vector shared with another table).

    Why: TF 2.21's converter lists a SavedModel's inputs in an order of its own -- neither the
    model's positional order nor the alphabetical one (a Keras model with inputs ``alpha, zeta``
    gets ``zeta, alpha``) -- and LiteRT's positional views (``get_input_details()``, a C++ app's
    ``inputs()``, positional ``arr_0, arr_1`` data) follow that list. In place: the vector keeps its
    length, so every offset in the file stays valid; the SignatureDef maps names to tensors and
    does not change."""
    if not order or len(order) < 2:
        return data
    schema = _schema()
    m = schema.Model.GetRootAs(data, 0)
    if not m.SubgraphsLength():
        return data
    sg = m.Subgraphs(0)
    name_of = {}
    for i in range(m.SignatureDefsLength()):
        sd = m.SignatureDefs(i)
        if sd.SubgraphIndex() == 0:
            name_of = {sd.Inputs(j).TensorIndex(): (sd.Inputs(j).Name() or b"").decode(errors="replace")
                       for j in range(sd.InputsLength())}
            break
    current = [int(sg.Inputs(j)) for j in range(sg.InputsLength())]
    names = [name_of.get(t) for t in current]
    if None in names or sorted(names) != sorted(order) or len(set(names)) != len(names) or names == list(order):
        return data
    offset = sg._tab.Offset(6)          # SubGraph.inputs (the schema's field 1)
    start = sg._tab.Vector(offset)
    shared = [sg._tab.Vector(sg._tab.Offset(8))] if sg.OutputsLength() else []
    for j in range(sg.OperatorsLength()):
        op = sg.Operators(j)
        shared += [op._tab.Vector(op._tab.Offset(f)) for f in (6, 8) if op._tab.Offset(f)]
    if start in shared:                 # a writer that deduplicates vectors: rewriting would move an op's too
        return data
    tensor_of = dict(zip(names, current))
    out = bytearray(data)
    struct.pack_into(f"<{len(order)}i", out, start, *(tensor_of[n] for n in order))
    return bytes(out)


# --------------------------------------------------------------------------- prefix cuts (accelerator bisect)


def op_names(model_t) -> list[str]:
    """Subgraph 0's ops in execution order (the flatbuffer's order), by builtin name (a custom op by its code)."""
    schema = _schema()
    names = {v: k for k, v in vars(schema.BuiltinOperator).items() if not k.startswith("_")}
    out = []
    for op in model_t.subgraphs[0].operators or ():
        code = model_t.operatorCodes[op.opcodeIndex]
        b = max(int(code.builtinCode or 0), int(code.deprecatedBuiltinCode or 0))
        custom = code.customCode.decode(errors="replace") if isinstance(code.customCode, bytes) else code.customCode
        out.append(custom if names.get(b) == "CUSTOM" and custom else names.get(b, f"OP{b}"))
    return out


def tensor_name(model_t, t: int) -> str:
    n = model_t.subgraphs[0].tensors[t].name
    return n.decode(errors="replace") if isinstance(n, bytes) else str(n)


def live_after(model_t, k: int) -> list[int]:
    """Tensors alive after op ``k`` of subgraph 0 (ops run in file order): produced by ops 0..k and
    read by a later op or a graph output, in the order they were produced; op ``k``'s own outputs
    always. Every input of op ``k + 1`` is one of them, a graph input, or a constant."""
    sg = model_t.subgraphs[0]
    ops = sg.operators or []
    later = set(_ints(sg.outputs))
    for op in ops[k + 1:]:
        later |= set(_ints(op.inputs))
    own = _ints(ops[k].outputs)
    out: list[int] = []
    for j, op in enumerate(ops[:k + 1]):
        for t in _ints(op.outputs):
            if t >= 0 and (t in later or j == k) and t not in out:
                out.append(t)
    return [t for t in out if t in later or t in own]


def prefix_model(model_t, k: int) -> tuple[bytes, list[int]]:
    """Subgraph 0 cut after op ``k``: ops 0..k, the same inputs, every tensor alive after op ``k``
    (``live_after``) as an output; one SignatureDef (the original key and input names, outputs named
    ``t<tensor id>``). Other subgraphs (control flow bodies) are kept as they are.
    Returns (flatbuffer, exposed tensor ids)."""
    schema = _schema()
    live = live_after(model_t, k)
    sg0 = model_t.subgraphs[0]
    sg = copy.copy(sg0)
    sg.operators = list(sg0.operators[:k + 1])
    sg.outputs = list(live)
    m = copy.copy(model_t)
    m.subgraphs = [sg] + list(model_t.subgraphs[1:])
    old = next((s for s in (model_t.signatureDefs or ()) if int(s.subgraphIndex or 0) == 0), None)
    sd = schema.SignatureDefT()
    sd.signatureKey = (old.signatureKey if old is not None and old.signatureKey else b"serving_default")
    sd.subgraphIndex = 0
    if old is not None and old.inputs:
        sd.inputs = [copy.copy(x) for x in old.inputs]
    else:
        sd.inputs = []
        for t in _ints(sg0.inputs):
            tm = schema.TensorMapT()
            tm.name, tm.tensorIndex = tensor_name(model_t, t).encode(), t
            sd.inputs.append(tm)
    sd.outputs = []
    for t in live:
        tm = schema.TensorMapT()
        tm.name, tm.tensorIndex = f"t{t}".encode(), t
        sd.outputs.append(tm)
    m.signatureDefs = [sd]
    return _pack(m), live


def unique_tensor_names(raw: bytes) -> tuple[bytes, list[dict[str, object]]]:
    """The file with every tensor name unique across all its subgraphs, and what was renamed.

    The format names tensors per subgraph: an IF's two branch subgraphs may both call their
    arguments ``arg0``..``arg4`` (legal; LiteRT binds tensors by index, signatures by index too).
    ai-edge-quantizer keys its calibration and parameters by name across the whole file and
    refuses such a file ("Tensor name arg0 is not unique in the model"). The first tensor to use a
    name keeps it; a later one becomes ``<subgraph name or sgK>/<name>`` (``#n`` added while that
    is taken too). Only names change, so the model computes what it did (tests run both files).
    Returns ``(raw, [])`` unchanged when the names are already unique."""
    m = load_model_t(raw)
    seen: set[bytes] = set()
    clashes = False
    for sg in m.subgraphs or []:
        for t in sg.tensors or []:
            name = t.name or b""
            clashes |= name in seen
            seen.add(name)
    if not clashes:
        return raw, []
    taken: set[bytes] = set()
    renamed: list[dict[str, object]] = []
    for k, sg in enumerate(m.subgraphs or []):
        prefix = (sg.name or f"sg{k}".encode()) + b"/"
        for i, t in enumerate(sg.tensors or []):
            name = t.name or b""
            if name in taken:
                new, n = prefix + name, 1
                while new in taken or new in seen:
                    n += 1
                    new = prefix + name + f"#{n}".encode()
                renamed.append({"subgraph": k, "tensor": i, "name": name.decode(errors="replace"),
                                "renamed": new.decode(errors="replace")})
                t.name = new
                name = new
            taken.add(name)
    return _pack(m), renamed


def rename_tensors(data: bytes, rename: Callable[[str], str]) -> bytes:
    """The .tflite with every tensor of every subgraph named ``rename(name)``; unchanged (the same
    bytes) when no name changes. Values, ops and signatures are untouched."""
    m = load_model_t(data)
    changed = False
    for sg in m.subgraphs or []:
        for t in sg.tensors or []:
            old = t.name.decode(errors="replace") if isinstance(t.name, bytes) else str(t.name or "")
            new = rename(old)
            if new != old:
                t.name, changed = new.encode(), True
    return _pack(m) if changed else data
