"""Read a .tflite flatbuffer without running it: ops, dtypes, I/O, quantization, FLOPs.

``inspect(path)`` parses the file with the LiteRT flatbuffer schema
(``ai_edge_litert.schema_py_generated``, else TensorFlow's copy). Subgraph 0 is the model: its
I/O, ``ops`` (node = index) and ``op_histogram``. The subgraphs its ops run -- a WHILE's cond and
body, an IF's branches, CALL_ONCE's init, a composite's decomposition: every ``*SubgraphIndex`` the
schema gives an op -- are read too (``subgraph_roles``), and the ones every inference runs
(``subgraph_ops``: all but CALL_ONCE's init) count in the precision, the quantization coverage,
the float ops and the FLOPs: int8 weights inside a loop body make a dynamic-range file.

FLOPs count one multiply-add as 2 FLOPs, for these ops only (``COUNTED_OPS``)::

    CONV_2D            2 * N*Ho*Wo*Cout * KH*KW*Cin_per_group
    DEPTHWISE_CONV_2D  2 * N*Ho*Wo*Cout * KH*KW
    FULLY_CONNECTED    2 * output_elements * K           (K = weight's last dim)
    BATCH_MATMUL       2 * output_elements * K           (K from lhs, honouring adj_x)
    TRANSPOSE_CONV     2 * N*Hi*Wi*Cin * KH*KW*Cout
    CONV_3D            2 * output_elements * KD*KH*KW*Cin

Element-wise ops, pooling, activations and softmax are not counted (typically < 2% of a CNN's
arithmetic); the result lists the counted types so a reader knows what "GFLOP" means here.
Dynamic dimensions (-1) are taken at their stored size (1 for a dynamic batch). An op in a loop
body counts once (the trip count is decided at run time) and ``flops_note`` says so.

Quantization coverage is integer compute ops / compute ops; compute leaves out QUANTIZE/DEQUANTIZE
and bookkeeping (``BOOKKEEPING_OPS``: shape reads and reshapes, control flow, variable handles,
and ops on int32/int64/bool tensors only -- a dynamic batch's SHAPE -> STRIDED_SLICE -> PACK ->
RESHAPE is no float op of a dynamic-range file and no int8 op of an int8 one).

``precision(info)`` names the precision a file actually has, from its kernels and constants.
One writer: ``restore_signature`` adds a SignatureDef to a model converted without one.

Ahead-of-time compiled files (LiteRT's AOT compiler, ``edgebench readiness``): every NPU partition
is one custom op ``DISPATCH_OP`` whose vendor bytecode sits after the flatbuffer, the ops left on
the CPU stay ordinary builtins, and the metadata entry ``LiteRtStamp`` names the vendor and SoC
(two NUL-padded strings). ``inspect`` reports it as ``aot`` (None for an ordinary model) and
``refuse_compiled`` turns it into the one line every reader of a ``.tflite`` gives.

Untrusted files: flatbuffers let many tables point at one vector, so a small hostile file can
make a reader decode the same long vector thousands of times. Every vector and string read here
is charged to a budget of ``READ_BUDGET_FACTOR`` x the file size (a converter-produced model
never shares them, so it reads at most its own size); a file that needs more is refused as bad
input, as is any dangling or negative tensor index and any missing required name.
"""

from __future__ import annotations

import os
import re
import struct
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from edgebench.core.errors import BadInput, ConversionFailed
from edgebench.core.paths import require_file

COUNTED_OPS = ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "BATCH_MATMUL", "TRANSPOSE_CONV", "CONV_3D")
FLOAT_TYPES = ("float32", "float16", "float64", "bfloat16")
QUANT_TYPES = ("int8", "uint8", "int16", "int4")
# Ops that only move data between float and integer domains.
BOUNDARY_OPS = ("QUANTIZE", "DEQUANTIZE")
READ_BUDGET_FACTOR = 4      # bytes decoded per byte of file (slack for vectors read twice)
READ_BUDGET_MIN = 1 << 16   # ... and at least this many, for tiny files
DISPATCH_OP = "DISPATCH_OP"         # LiteRT's custom op for one compiled NPU partition
STAMP_KEY = "LiteRtStamp"           # metadata: the vendor and SoC a file was compiled for
# The vendors whose compiled files run on this kind of host: LiteRT's Intel OpenVINO dispatch
# library runs a partition compiled with the OpenVINO CPU backend (``--accelerator npu``).
HOST_DISPATCH_VENDORS = ("IntelOpenVINO",)
MAX_RANK = 16               # no TFLite kernel takes more dimensions; longer shapes are not FLOP-counted


class _Hostile(ValueError):
    """The file asks for more work than its size allows (shared/overlapping vectors)."""


def _schema():
    try:
        from ai_edge_litert import schema_py_generated as schema  # noqa: PLC0415
    except ImportError:  # pragma: no cover - TF-only installs
        from tensorflow.lite.python import schema_py_generated as schema  # noqa: PLC0415
    return schema


def _enum_names(cls) -> dict[int, str]:
    return {v: k for k, v in vars(cls).items() if not k.startswith("_") and isinstance(v, int)}


def _tensor_type_name(code: int, names: dict[int, str]) -> str:
    name = names.get(code, f"type{code}").lower()
    return {"bool": "bool", "string": "string"}.get(name, name)


def inspect(path: str | os.PathLike) -> dict[str, Any]:
    """Describe a .tflite file. Raises ``BadInput`` for a missing, truncated or non-flatbuffer file."""
    p = require_file(path, "a .tflite file", "give the path of an existing .tflite file",
                         missing="model not found")
    return inspect_bytes(p.read_bytes(), p)


def inspect_bytes(buf: bytes, p: Path) -> dict[str, Any]:
    """``inspect`` of a model already in memory (a section of a LiteRT-LM bundle); ``p`` names it."""
    if len(buf) < 16 or buf[4:8] != b"TFL3":
        raise BadInput(f"{p} is not a TFLite flatbuffer (no 'TFL3' identifier); give a .tflite file "
                       "produced by the TFLite converter")
    try:
        return _inspect(buf, p)
    except _Hostile:
        raise BadInput(f"{p} asks for more data than its {len(buf)} bytes hold (flatbuffer vectors shared "
                       "between tables; a converter never writes that); give a .tflite produced by the TFLite "
                       "converter") from None
    except (IndexError, struct.error, ValueError, TypeError, UnicodeDecodeError, AttributeError,
            KeyError, OverflowError) as exc:
        raise BadInput(f"{p} is truncated or corrupt (reading the flatbuffer failed: {exc or type(exc).__name__}); "
                       "re-export or re-download the model") from None


class _Reader:
    """One flatbuffer read under its byte budget (``READ_BUDGET_FACTOR`` x the file, at least
    ``READ_BUDGET_MIN``): every vector and string is charged before it is decoded, so a file whose
    vectors are shared between tables (a converter never writes that) raises ``_Hostile`` instead of
    decoding without end. The steps of ``_inspect`` are its methods."""

    def __init__(self, buf: bytes):
        self.buf = buf
        self.schema = _schema()
        self.model = self.schema.Model.GetRootAs(buf, 0)
        self.op_names = _enum_names(self.schema.BuiltinOperator)
        self.type_names = _enum_names(self.schema.TensorType)
        self.budget = max(READ_BUDGET_FACTOR * len(buf), READ_BUDGET_MIN)
        self.codes: list[str] = []
        self.n_sub = 0
        self.opt_names: tuple[dict[int, str], dict[int, str]] = ({}, {})

    def charge(self, nbytes: int) -> None:
        self.budget -= max(int(nbytes), 0)
        if self.budget < 0:
            raise _Hostile()

    def ints(self, length: int, read) -> list[int]:
        """A vector of 4-byte ints, charged before it is decoded."""
        if not length:
            return []
        self.charge(4 * length)
        return [int(x) for x in read()]

    def text(self, raw: bytes | None, what: str) -> str:
        if raw is None:
            raise ValueError(f"{what} has no name")
        self.charge(len(raw))
        return raw.decode()

    def check_buffers(self) -> None:
        """Touch every buffer so that a file cut short fails here, not at run time."""
        model = self.model
        for b in range(model.BuffersLength()):
            buffer = model.Buffers(b)
            n = buffer.DataLength()
            if n:
                buffer.Data(n - 1)
            if buffer.Offset() > 1 and buffer.Offset() + buffer.Size() > len(self.buf):
                raise ValueError("external buffer beyond end of file")

    def read_codes(self) -> None:
        """The operator codes' names (``CUSTOM:name`` for custom ops) and the subgraph count."""
        for i in range(self.model.OperatorCodesLength()):
            oc = self.model.OperatorCodes(i)
            code = max(oc.BuiltinCode(), oc.DeprecatedBuiltinCode())
            name = self.op_names.get(code, f"BUILTIN_{code}")
            if name == "CUSTOM":
                custom = oc.CustomCode()
                name = f"CUSTOM:{self.text(custom, 'custom op') if custom else '?'}"
            self.codes.append(name)
        self.n_sub = self.model.SubgraphsLength()
        if self.n_sub < 1:
            raise ValueError("no subgraph")
        self.opt_names = (_enum_names(self.schema.BuiltinOptions),
                          _enum_names(getattr(self.schema, "BuiltinOptions2", object)))

    def tensor(self, sg, i: int) -> dict[str, Any]:
        t = sg.Tensors(i)
        shape = self.ints(t.ShapeLength(), t.ShapeAsNumpy)
        sig = self.ints(t.ShapeSignatureLength(), t.ShapeSignatureAsNumpy) or list(shape)
        q = t.Quantization()
        scales: list[float] = []
        zps: list[int] = []
        if q is not None and q.ScaleLength():
            self.charge(4 * q.ScaleLength())
            scales = [float(x) for x in q.ScaleAsNumpy()]
        if q is not None and q.ZeroPointLength():
            self.charge(8 * q.ZeroPointLength())
            zps = [int(x) for x in q.ZeroPointAsNumpy()]
        raw_name = t.Name()
        if raw_name:
            self.charge(len(raw_name))
        buffer_idx = t.Buffer()
        is_const = False
        if 0 < buffer_idx < self.model.BuffersLength():
            bb = self.model.Buffers(buffer_idx)
            is_const = bb.DataLength() > 0 or bb.Offset() > 1
        return {
            "index": i,
            "name": (raw_name or b"").decode(errors="replace"),
            "shape": shape,
            "shape_signature": sig,
            "dtype": _tensor_type_name(t.Type(), self.type_names),
            "scale": scales[0] if len(scales) == 1 else (scales or None),
            "zero_point": zps[0] if len(zps) == 1 else (zps or None),
            "constant": is_const,
            "variable": bool(t.IsVariable()),
        }

    def operator(self, sg, j: int, k: int, tensors: list[dict[str, Any]],
                 refs: list[tuple[str, int]]) -> dict[str, Any]:
        """Operator ``j`` of subgraph ``k``: its dtypes, kernel kind and FLOPs; the subgraphs it runs
        go to ``refs``."""
        op = sg.Operators(j)
        name = self.codes[op.OpcodeIndex()]
        ins = self.ints(op.InputsLength(), op.InputsAsNumpy)
        outs = self.ints(op.OutputsLength(), op.OutputsAsNumpy)
        # -1 marks an omitted optional input; any other index must exist
        in_t = [tensors[_tensor_index(tensors, i, f"operator {j}")] if i != -1 else None for i in ins]
        out_t = [tensors[_tensor_index(tensors, i, f"operator {j}")] for i in outs]
        if name == "CALL_ONCE":
            refs.append((INIT_ROLE, _call_once_target(op, self.schema, self.n_sub)))
        else:
            refs.extend(_subgraph_refs(name, op, self.opt_names, self.schema, self.n_sub))
        act_in = [t["dtype"] for t in in_t if t is not None and not t["constant"]]
        weight_in = [t["dtype"] for t in in_t if t is not None and t["constant"]]
        out_dtypes = [t["dtype"] for t in out_t]
        if name in BOUNDARY_OPS:
            kind = "boundary"
        elif any(d in FLOAT_TYPES for d in act_in + out_dtypes):
            kind = "hybrid" if any(d in QUANT_TYPES for d in weight_in) else "float"
        else:
            kind = "integer"
        entry = {"index": j, "op": name, "inputs": [t["dtype"] if t else None for t in in_t],
                 "outputs": out_dtypes, "kind": kind, "flops": _flops(name, in_t, out_t, op, self.schema),
                 "bookkeeping": _bookkeeping(name, act_in + out_dtypes),
                 "input_names": [t["name"] for t in in_t if t is not None and not t["constant"]],
                 "output_names": [t["name"] for t in out_t]}
        if k:
            entry["subgraph"] = k
        return entry

    def subgraph(self, k: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[tuple[str, int]]]:
        """(tensors, ops, [(role, subgraph)] its ops run: a WHILE's cond and body, an IF's branches,
        CALL_ONCE's init ...) of subgraph ``k``."""
        sg = self.model.Subgraphs(k)
        self.charge(4 * sg.TensorsLength())
        tensors = [self.tensor(sg, i) for i in range(sg.TensorsLength())]
        ops: list[dict[str, Any]] = []
        refs: list[tuple[str, int]] = []
        self.charge(4 * sg.OperatorsLength())
        for j in range(sg.OperatorsLength()):
            ops.append(self.operator(sg, j, k, tensors, refs))
        return tensors, ops, refs

    def signatures(self, tensors: list[dict[str, Any]]) -> tuple[list[str], dict[int, str], dict[int, str]]:
        """(signature keys, input and output names of the main subgraph's tensors by index)."""
        model = self.model
        sig_in: dict[int, str] = {}
        sig_out: dict[int, str] = {}
        signature_keys = []
        self.charge(4 * model.SignatureDefsLength())
        for s in range(model.SignatureDefsLength()):
            sd = model.SignatureDefs(s)
            key = sd.SignatureKey()
            signature_keys.append(self.text(key, "a signature") if key else "")
            if sd.SubgraphIndex() != 0 or sig_in:
                continue
            self.charge(4 * (sd.InputsLength() + sd.OutputsLength()))
            for j in range(sd.InputsLength()):
                tm = sd.Inputs(j)
                sig_in[_tensor_index(tensors, tm.TensorIndex(), "a signature input")] = self.text(
                    tm.Name(), "a signature input")
            for j in range(sd.OutputsLength()):
                tm = sd.Outputs(j)
                sig_out[_tensor_index(tensors, tm.TensorIndex(), "a signature output")] = self.text(
                    tm.Name(), "a signature output")
        return signature_keys, sig_in, sig_out

    def io(self, tensors: list[dict[str, Any]], sig_in: dict[int, str],
           sig_out: dict[int, str]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """The main subgraph's inputs and outputs, by their signature names."""
        sg0 = self.model.Subgraphs(0)
        inputs = [_io(tensors, _tensor_index(tensors, i, "a subgraph input"), sig_in)
                  for i in self.ints(sg0.InputsLength(), sg0.InputsAsNumpy)]
        outputs = [_io(tensors, _tensor_index(tensors, i, "a subgraph output"), sig_out)
                   for i in self.ints(sg0.OutputsLength(), sg0.OutputsAsNumpy)]
        return inputs, outputs

    def stamp(self) -> list[str] | None:
        """The AOT compiler's metadata stamp (``STAMP_KEY``), split at NULs; None without one."""
        model = self.model
        stamp = None
        self.charge(4 * model.MetadataLength())
        for m in range(model.MetadataLength()):
            md = model.Metadata(m)
            if md.Name() != STAMP_KEY.encode():
                continue
            idx = md.Buffer()
            if 0 <= idx < model.BuffersLength() and model.Buffers(idx).DataLength():
                b = model.Buffers(idx)
                self.charge(b.DataLength())
                raw = bytes(b.DataAsNumpy().tobytes())
                stamp = [x.decode(errors="replace") for x in raw.split(b"\0") if x.strip()]
        return stamp


def _tensor_index(tensors: list[dict[str, Any]], i: int, what: str) -> int:
    if not 0 <= i < len(tensors):
        raise ValueError(f"{what} refers to tensor {i}, but the subgraph has {len(tensors)}")
    return i


def _io(tensors: list[dict[str, Any]], idx: int, names: dict[int, str]) -> dict[str, Any]:
    t = tensors[idx]
    return {"name": names.get(idx, t["name"]), "tensor_name": t["name"], "index": idx,
            "shape": t["shape"], "shape_signature": t["shape_signature"], "dtype": t["dtype"],
            "quantization": ({"scale": t["scale"], "zero_point": t["zero_point"]}
                             if t["scale"] not in (None, 0.0) else None)}


def _reachable(reader: _Reader, refs0: list[tuple[str, int]]) -> tuple[dict[int, dict[str, Any]], list[int], list[int]]:
    """(every subgraph the model's ops run, read once: {k: role, tensors, ops, refs}; those that run on
    every invoke, in order; the CALL_ONCE init subgraphs)."""
    # Subgraph 0 is the model. The subgraphs its ops run are read too: a dynamic-range matmul inside
    # a WHILE body is the model's math as much as one in subgraph 0. Each is read once (a subgraph two
    # ops run, or one that runs itself, is not read again).
    subgraphs: dict[int, dict[str, Any]] = {}
    queue = list(refs0)
    while queue:
        role, k = queue.pop(0)
        if k in subgraphs:
            continue
        sub_t, sub_o, sub_refs = reader.subgraph(k)
        subgraphs[k] = {"role": role, "tensors": sub_t, "ops": sub_o, "refs": sub_refs}
        queue.extend(sub_refs)
    # What runs on every invoke: subgraph 0 and what it reaches other than through CALL_ONCE (whose
    # init subgraph runs once per interpreter and only gives resource variables their first values).
    per_inference: list[int] = []
    pending = [k for role, k in refs0 if role != INIT_ROLE]
    while pending:
        k = pending.pop(0)
        if k in per_inference:
            continue
        per_inference.append(k)
        pending.extend(kk for role, kk in subgraphs[k]["refs"] if role != INIT_ROLE)
    init_subgraphs = [k for role, k in refs0 if role == INIT_ROLE] + [
        kk for k in per_inference for role, kk in subgraphs[k]["refs"] if role == INIT_ROLE]
    return subgraphs, per_inference, init_subgraphs


def _output_steps(ops: list[dict[str, Any]], tensors: list[dict[str, Any]],
                  outputs: list[dict[str, Any]]) -> dict[str, float]:
    """The grid each output's values lie on: its own scale (integer outputs), else the scale of the
    integer tensor a final DEQUANTIZE reads (a float-I/O int8 model): a value below one step is 0."""
    produced = {o: op for op in ops for o in op["output_names"]}
    by_name = {t["name"]: t for t in tensors}
    output_steps: dict[str, float] = {}
    for out in outputs:
        q = out["quantization"]
        op = produced.get(out["tensor_name"])
        src = by_name.get(op["input_names"][0]) if op and op["op"] == "DEQUANTIZE" and op["input_names"] else None
        scale = (q or {}).get("scale") or (src or {}).get("scale")
        if isinstance(scale, (int, float)) and scale > 0:
            output_steps[out["name"]] = float(scale)
    return output_steps


def _inspect(buf: bytes, p: Path) -> dict[str, Any]:
    reader = _Reader(buf)
    model = reader.model
    reader.check_buffers()
    reader.read_codes()
    n_sub = reader.n_sub
    tensors, ops, refs0 = reader.subgraph(0)
    subgraphs, per_inference, init_subgraphs = _reachable(reader, refs0)
    sub_ops = [o for k in per_inference for o in subgraphs[k]["ops"]]
    run_tensors = tensors + [t for k in per_inference for t in subgraphs[k]["tensors"]]
    signature_keys, sig_in, sig_out = reader.signatures(tensors)
    inputs, outputs = reader.io(tensors, sig_in, sig_out)

    hist = Counter(o["op"] for o in ops)
    flops_by_op: Counter[str] = Counter()
    for o in ops + sub_ops:
        if o["flops"]:
            flops_by_op[o["op"]] += o["flops"]
    quantized_model = any(t["dtype"] in QUANT_TYPES and t["scale"] not in (None, 0.0) for t in run_tensors)
    stamp = reader.stamp()
    output_steps = _output_steps(ops, tensors, outputs)

    # Quantization coverage counts compute: not the QUANTIZE/DEQUANTIZE boundaries, not bookkeeping
    # (shape arithmetic, control flow, variable handles: no arithmetic on the model's values).
    compute_ops = [o for o in ops + sub_ops if o["kind"] != "boundary" and not o["bookkeeping"]]
    integer_ops = [o for o in compute_ops if o["kind"] == "integer"]
    float_ops = [o for o in compute_ops if o["kind"] in ("float", "hybrid")] if quantized_model else []
    total = int(sum(flops_by_op.values()))
    return {
        "path": str(p),
        "size_bytes": len(buf),
        "schema_version": int(model.Version()),
        "subgraphs": int(n_sub),
        "signatures": signature_keys,
        "inputs": inputs,
        "outputs": outputs,
        "op_count": len(ops),
        "op_histogram": dict(sorted(hist.items(), key=lambda kv: (-kv[1], kv[0]))),
        "ops": ops,
        "subgraph_ops": sub_ops,
        "subgraph_roles": {k: subgraphs[k]["role"] for k in sorted(subgraphs)},
        "subgraph_op_histogram": dict(Counter(o["op"] for k in sorted(subgraphs) for o in subgraphs[k]["ops"])),
        "quantized": quantized_model,
        "variable_tensors": sum(1 for t in tensors if t["variable"]) + sum(
            1 for k in subgraphs for t in subgraphs[k]["tensors"] if t["variable"]),
        "init_subgraphs": sorted(set(init_subgraphs)),
        "output_steps": output_steps,
        "float_ops": float_ops,
        "float_op_histogram": dict(Counter(o["op"] for o in float_ops)),
        "quantization_coverage": (len(integer_ops) / len(compute_ops)) if compute_ops and quantized_model else 0.0,
        "flops": total,
        "flops_by_op": dict(flops_by_op),
        "flops_note": _flops_note(sub_ops, {k: subgraphs[k]["role"] for k in per_inference}),
        "counted_ops": list(COUNTED_OPS),
        "aot": _aot(stamp, ops),
    }


def _aot(stamp: list[str] | None, ops: list[dict[str, Any]]) -> dict[str, Any] | None:
    """What an AOT-compiled file holds: vendor and SoC from its stamp, its NPU partitions
    (``DISPATCH_OP``) and the ops left on the CPU (everything else); None for an ordinary model."""
    dispatch = sum(1 for o in ops if o["op"] == f"CUSTOM:{DISPATCH_OP}")
    if not stamp and not dispatch:
        return None
    left = [o["op"] for o in ops if o["op"] != f"CUSTOM:{DISPATCH_OP}"]
    return {"vendor": stamp[0] if stamp else None, "soc": stamp[1] if stamp and len(stamp) > 1 else None,
            "partitions": dispatch, "cpu_ops": len(left), "cpu_op_histogram": dict(Counter(left))}


def compiled_for(aot: dict[str, Any] | None) -> str:
    """'Qualcomm SM8650' (what the stamp says; 'an NPU' when the file has no stamp)."""
    if not aot:
        return "an NPU"
    return " ".join(x for x in (aot.get("vendor"), aot.get("soc")) if x) or "an NPU"


def refuse_compiled(path: str | os.PathLike, info: dict[str, Any], *, host_npu: bool = False) -> None:
    """An AOT-compiled file is bad input for every host reader (bench, compare,
    convert-and-compare, diagnose): its partitions are vendor bytecode for one SoC's NPU, not ops
    LiteRT's CPU kernels run. ``host_npu``: the caller runs it through LiteRT's NPU dispatch on this
    host (``--runtime compiled --accelerator npu``), which a vendor in ``HOST_DISPATCH_VENDORS`` has."""
    aot = info.get("aot")
    if not aot:
        return
    where = compiled_for(aot)
    if host_npu and aot.get("vendor") in HOST_DISPATCH_VENDORS:
        return
    if aot.get("vendor") in HOST_DISPATCH_VENDORS:
        fix = (f"run it through LiteRT's NPU dispatch on this host with `edgebench bench {Path(path).name} --runtime "
               "compiled --accelerator npu` (pip install 'edgebench[npu-intel]'), or `edgebench readiness SOURCE` for "
               "its drift against the CPU")
    else:
        fix = ("measure the source file on the host, or run it on that phone with "
               "`--runtime compiled --accelerator npu`")
    raise BadInput(f"{path} is compiled for {where}: runs only on that SoC's NPU "
                   f"({aot.get('partitions', 0)} NPU partition(s) of vendor bytecode); {fix}")


def _call_once_target(op, schema, n_subgraphs: int) -> int:
    """The subgraph a CALL_ONCE op runs (the resource variables' initializer)."""
    opts = op.BuiltinOptions()
    if opts is None:
        raise ValueError("a CALL_ONCE op has no options")
    o = schema.CallOnceOptions()
    o.Init(opts.Bytes, opts.Pos)
    k = int(o.InitSubgraphIndex())
    if not 0 < k < n_subgraphs:
        raise ValueError(f"a CALL_ONCE op runs subgraph {k}, but the model has {n_subgraphs}")
    return k


INIT_ROLE = "CALL_ONCE init"
_REF_FIELDS: dict[Any, list[str]] = {}     # options class -> its subgraph-index fields (read once)


def _subgraph_refs(name: str, op, opt_names, schema, n_subgraphs: int) -> list[tuple[str, int]]:
    """The subgraphs an op runs, each with its role ("WHILE body", "IF then", "STABLEHLO_COMPOSITE
    decomposition" ...): every ``*SubgraphIndex`` field (and CALL's ``subgraph``) of its options
    table, read from the schema, so an op that gains such a field is followed without a list here.
    Subgraph 0 is the model itself, not a callee; an index past the last subgraph is a corrupt file."""
    out = []
    for union, kind, table in ((opt_names[0], op.BuiltinOptionsType(), op.BuiltinOptions),
                               (opt_names[1], getattr(op, "BuiltinOptions2Type", lambda: 0)(),
                                getattr(op, "BuiltinOptions2", lambda: None))):
        cls = getattr(schema, union.get(kind, ""), None) if kind else None
        if cls is not None and cls not in _REF_FIELDS:
            _REF_FIELDS[cls] = [f for f in dir(cls) if f.endswith("SubgraphIndex") or f == "Subgraph"]
        fields = _REF_FIELDS.get(cls, []) if cls is not None else []
        tab = table() if fields else None
        if tab is None:
            continue
        opts = cls()
        opts.Init(tab.Bytes, tab.Pos)
        for f in sorted(fields):
            k = int(getattr(opts, f)())
            if not 0 <= k < n_subgraphs:
                raise ValueError(f"a {name} op runs subgraph {k}, but the model has {n_subgraphs}")
            if k:
                what = f[:-len("SubgraphIndex")] if f.endswith("SubgraphIndex") else "callee"
                out.append((f"{name} {re.sub(r'(?<!^)(?=[A-Z])', ' ', what).lower()}", k))
    return out


# Ops that do no arithmetic on the model's values whatever their dtypes: reading or changing a
# tensor's shape (the bytes stay as they are), running other subgraphs (their ops are counted
# themselves), handling resource variables.
BOOKKEEPING_OPS = frozenset({
    "SHAPE", "RANK", "RESHAPE", "SQUEEZE", "EXPAND_DIMS", "BROADCAST_ARGS",
    "WHILE", "IF", "CALL", "CALL_ONCE", "STABLEHLO_WHILE", "STABLEHLO_CASE", "STABLEHLO_COMPOSITE",
    "VAR_HANDLE", "READ_VARIABLE", "ASSIGN_VARIABLE",
})
_VALUE_TYPES = FLOAT_TYPES + QUANT_TYPES


def _bookkeeping(name: str, dtypes: list[str]) -> bool:
    """An op that is not compute in any precision: a ``BOOKKEEPING_OPS`` op, or one whose
    non-constant inputs and outputs are all int32/int64/bool -- the shape arithmetic of a dynamic
    batch (STRIDED_SLICE of a SHAPE, PACK of shape ints), a loop's counter and its condition."""
    return name in BOOKKEEPING_OPS or not any(d in _VALUE_TYPES for d in dtypes)


def _flops_note(sub_ops: list[dict[str, Any]], roles: dict[int, str]) -> str | None:
    """How ops in other subgraphs were counted, when some hold FLOPs: a loop body once (its trip
    count is decided at run time), every branch of a conditional (one runs)."""
    counted = sorted({roles[o["subgraph"]] for o in sub_ops if o.get("flops")})
    if not counted:
        return None
    parts = [f"ops in the {', '.join(counted)} subgraph{'s' * (len(counted) > 1)} counted once each"]
    if any("WHILE" in r for r in counted):
        parts.append("a loop runs its body as often as its condition decides at run time: multiply that part "
                     "by the trip count")
    if any(r.startswith(("IF ", "STABLEHLO_CASE")) for r in counted):
        parts.append("every branch of a conditional is counted, though one runs")
    return "; ".join(parts)


def _prod(xs) -> int:
    out = 1
    for x in xs:
        out *= max(int(x), 1)
    return out


def _flops(name: str, ins: list, outs: list, op, schema) -> int:
    if name not in COUNTED_OPS or not outs:
        return 0
    if any(t is not None and len(t["shape"]) > MAX_RANK for t in (*ins, *outs)):
        return 0   # no kernel takes that rank: a hostile file, not a model to count
    out_shape = outs[0]["shape"]
    try:
        if name == "CONV_2D":
            w = ins[1]["shape"]  # [Cout, KH, KW, Cin/groups]
            return 2 * _prod(out_shape) * w[1] * w[2] * w[3]
        if name == "DEPTHWISE_CONV_2D":
            w = ins[1]["shape"]  # [1, KH, KW, Cout]
            return 2 * _prod(out_shape) * w[1] * w[2]
        if name == "FULLY_CONNECTED":
            w = ins[1]["shape"]  # [units, K]
            return 2 * _prod(out_shape) * w[-1]
        if name == "BATCH_MATMUL":
            lhs = ins[0]["shape"]
            adj_x = False
            table = op.BuiltinOptions()
            if table is not None:
                opts = schema.BatchMatMulOptions()
                opts.Init(table.Bytes, table.Pos)
                adj_x = bool(opts.AdjX())
            k = lhs[-2] if adj_x else lhs[-1]
            return 2 * _prod(out_shape) * max(k, 1)
        if name == "TRANSPOSE_CONV":
            w = ins[1]["shape"]  # [Cout, KH, KW, Cin]
            x = ins[2]["shape"]  # [N, H, W, Cin]
            return 2 * _prod(x) * w[0] * w[1] * w[2]
        if name == "CONV_3D":
            w = ins[1]["shape"]  # [KD, KH, KW, Cin, Cout]
            return 2 * _prod(out_shape) * w[0] * w[1] * w[2] * w[3]
    except (IndexError, TypeError):
        return 0
    return 0


# Ops that move, index or reshape data -- the int32 shape arithmetic of a dynamic batch (SHAPE,
# STRIDED_SLICE, PACK before a RESHAPE), an Embedding's row lookup (GATHER of int8 rows): their
# dtypes say nothing about the precision the model computes in.
DATA_OPS = frozenset({
    "SHAPE", "STRIDED_SLICE", "PACK", "UNPACK", "RESHAPE", "CONCATENATION", "GATHER", "GATHER_ND", "SLICE",
    "SQUEEZE", "EXPAND_DIMS", "TRANSPOSE", "CAST", "FILL", "RANGE", "ZEROS_LIKE", "ONES_LIKE", "TILE",
    "SPLIT", "SPLIT_V", "BROADCAST_TO", "BROADCAST_ARGS", "SELECT", "SELECT_V2", "WHERE", "ARG_MAX", "ARG_MIN",
})


def run_ops(info: dict[str, Any]) -> list[dict[str, Any]]:
    """Every op an inference runs: subgraph 0's and those of the subgraphs it runs (loop bodies,
    branches; not CALL_ONCE's init)."""
    return list(info.get("ops", [])) + list(info.get("subgraph_ops", []))


def math_ops(info: dict[str, Any]) -> list[dict[str, Any]]:
    """The ops that carry the model's math (not boundaries, not data movement: ``DATA_OPS``, not
    bookkeeping: ``BOOKKEEPING_OPS`` and integer index arithmetic), in every subgraph an inference runs."""
    return [o for o in run_ops(info) if o["kind"] != "boundary" and o["op"] not in DATA_OPS
            and not o.get("bookkeeping")]


# Fused recurrent kernels keep their state in variable tensors across invoke() calls; resource
# variables (tf.Variable kept in the graph) persist too, and only a new interpreter forgets them.
RECURRENT_OPS = ("UNIDIRECTIONAL_SEQUENCE_LSTM", "BIDIRECTIONAL_SEQUENCE_LSTM", "UNIDIRECTIONAL_SEQUENCE_RNN",
                 "BIDIRECTIONAL_SEQUENCE_RNN", "LSTM", "RNN", "SVDF")
RESOURCE_VARIABLE_OPS = ("VAR_HANDLE", "READ_VARIABLE", "ASSIGN_VARIABLE")


def state(info: dict[str, Any]) -> dict[str, Any] | None:
    """What carries over from one ``invoke()`` to the next, or None for a stateless graph.

    ``kind`` is ``variable_tensors`` (fused LSTM/RNN/SVDF state: ``reset_all_variables()`` clears
    it) or ``resource_variables`` (VAR_HANDLE/ASSIGN_VARIABLE survive that reset; running the
    subgraphs in ``init_subgraphs`` -- what CALL_ONCE ran when the interpreter was new -- gives them
    their initial values again, else only a fresh interpreter starts over)."""
    hist = {**(info.get("subgraph_op_histogram") or {}), **(info.get("op_histogram") or {})}
    resource = [op for op in RESOURCE_VARIABLE_OPS if op in hist]
    recurrent = [op for op in RECURRENT_OPS if op in hist]
    nvar = int(info.get("variable_tensors") or 0)
    if not resource and not nvar:
        return None
    return {"kind": "resource_variables" if resource else "variable_tensors", "ops": recurrent + resource,
            "variable_tensors": nvar, "init_subgraphs": list(info.get("init_subgraphs") or ())}


def precision(info: dict[str, Any]) -> str:
    """fp32 | fp16 | dynamic | int8 | int16x8, read from the ops that carry the model's math.

    Integer compute kernels with quantized (int8/int16) outputs decide int8 or int16x8 (int16
    activations); else float kernels with int8 weights (hybrid ops or DEQUANTIZE of int8
    constants) are dynamic-range; else DEQUANTIZE of float16 constants is fp16; else fp32. The int32
    shape arithmetic of a dynamic batch and an Embedding's int8 row lookup are data movement
    (``DATA_OPS``), not int8 math.
    """
    quant = [o for o in math_ops(info) if o["kind"] == "integer" and any(d in QUANT_TYPES for d in o["outputs"])]
    if quant:
        # int16x8 only when 16-bit activations are the rule: a mostly-int8 file with a few int16 ops
        # (ai-edge-quantizer's a16w8 on a scope) is int8, and precision_detail says "+ a16 on N ops"
        wide = sum(1 for o in quant if "int16" in o["outputs"])
        return "int16x8" if wide * 2 > len(quant) else "int8"
    ops = run_ops(info)
    if any(o["kind"] == "hybrid" for o in ops) or any(
            o["op"] == "DEQUANTIZE" and "int8" in o["inputs"] for o in ops):
        return "dynamic"
    if any(o["op"] == "DEQUANTIZE" and "float16" in o["inputs"] for o in ops):
        return "fp16"
    return "fp32"


@dataclass(frozen=True)
class MixedFile:
    """How an integer file is mixed, counted once (``mixed_file``) and read by every output: the
    float compute ops it keeps, by type (most first), and the ops whose activations have the other
    integer width (an int8 file's a16 ops, an int16x8 file's a8 ops)."""

    precision: str
    float_ops: tuple[tuple[str, int], ...] = ()
    other_width: str = ""                                # "a16" / "a8"
    other_ops: tuple[tuple[str, int], ...] = ()

    @property
    def float_count(self) -> int:
        return sum(n for _op, n in self.float_ops)

    @property
    def mixed(self) -> bool:
        return bool(self.float_ops or self.other_ops)

    def text(self) -> str | None:
        """"int8, 13 float ops: ELU x9, CONCATENATION x4" (and "int8 + a16 on 2 ops (CONV_2D)"
        for 16-bit-activation ops); None for a file that is not mixed."""
        if not self.mixed:
            return None
        head = self.precision
        if self.other_ops:
            n = sum(k for _op, k in self.other_ops)
            head += f" + {self.other_width} on {n} op{'s' * (n != 1)} ({', '.join(op for op, _k in self.other_ops)})"
        if not self.float_ops:
            return head
        n = self.float_count
        return (f"{head}, {n} float op{'s' * (n != 1)}: "
                + ", ".join(f"{op} x{k}" for op, k in self.float_ops))

    def to_dict(self) -> dict[str, Any]:
        return {"precision": self.precision, "float_ops": dict(self.float_ops), "float_count": self.float_count,
                "other_width": self.other_width or None, "other_ops": dict(self.other_ops), "text": self.text()}


def _counts(names: list[str]) -> tuple[tuple[str, int], ...]:
    return tuple(sorted(Counter(names).items(), key=lambda kv: (-kv[1], kv[0])))


def mixed_file(info: dict[str, Any]) -> MixedFile | None:
    """The one count of what an int8 / int16x8 file keeps float (None for other precisions).

    Float ops are the compute ops of every subgraph an inference runs -- not the QUANTIZE/DEQUANTIZE
    boundaries, not bookkeeping (shape arithmetic, control flow) -- that run a float or hybrid
    kernel: ops the converter left without an integer kernel (ELU, a float CONCATENATION between
    them), kept-float islands, a quantizer's float leftovers (LEAKY_RELU)."""
    prec = precision(info)
    if prec not in ("int8", "int16x8"):
        return None
    compute = [o for o in run_ops(info) if o["kind"] != "boundary"
               and not o.get("bookkeeping", _bookkeeping(o["op"], list(o.get("inputs") or ()) + list(o["outputs"])))]
    other = "int16" if prec == "int8" else "int8"
    odd = [o["op"] for o in math_ops(info) if o["kind"] == "integer" and other in o["outputs"]
           and not any(d in o["outputs"] for d in QUANT_TYPES if d != other)]
    # ``inspect``'s own list when there is one (its float_op_histogram and the manifest's float_ops are
    # the same count), else the same rule on a bare op list
    floats = [o["op"] for o in (info["float_ops"] if "float_ops" in info else compute)
              if o["kind"] in ("float", "hybrid")]
    return MixedFile(prec, _counts(floats), f"a{other[3:]}" if odd else "", _counts(odd))


def precision_detail(info: dict[str, Any]) -> str | None:
    """A mixed file says it is mixed (``MixedFile.text``): "int8, 2 float ops: SOFTMAX x1, MUL x1",
    "int8 + a16 on 2 ops (CONV_2D)", both parts when both apply; None otherwise."""
    m = mixed_file(info)
    return m.text() if m is not None else None


def rename_signature(data: bytes, key: str) -> bytes:
    """The .tflite with its one SignatureDef named ``key`` (a converter given concrete functions
    calls it serving_default whatever signature it came from); unchanged when already so."""
    import flatbuffers

    schema = _schema()
    model = schema.ModelT.InitFromPackedBuf(bytearray(data), 0)
    sigs = model.signatureDefs or []
    if len(sigs) != 1:
        return data
    current = sigs[0].signatureKey
    if (current.decode() if isinstance(current, bytes) else current) == key:
        return data
    sigs[0].signatureKey = key
    builder = flatbuffers.Builder(max(1024, len(data) + 4096))
    builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
    return bytes(builder.Output())


def restore_signature(data: bytes, key: str, inputs: dict[str, str], outputs: dict[str, str]) -> bytes:
    """Add a SignatureDef (``key``: signature name -> tensor) to a .tflite without one.

    Tensors are matched by graph tensor name ('x:0' is written 'x'), else by the converter's
    order (sorted graph tensor names).
    """
    import flatbuffers


    schema = _schema()
    model = schema.ModelT.InitFromPackedBuf(bytearray(data), 0)
    if model.signatureDefs:
        return data
    sg = model.subgraphs[0]

    def tensor_name(i: int) -> str:
        n = sg.tensors[i].name
        return n.decode() if isinstance(n, bytes) else str(n)

    def mapping(wanted: dict[str, str], indices, what: str) -> list:
        idx = [int(i) for i in (indices if indices is not None else [])]
        by_name = {tensor_name(i): i for i in idx}
        pairs = [(k, by_name.get((t[:-2] if t.endswith(':0') else t), by_name.get(t))) for k, t in wanted.items()]
        if any(i is None for _, i in pairs):
            if len(idx) != len(wanted):
                raise ConversionFailed(f"cannot restore signature {what}: the model has {len(idx)}, the signature "
                                       f"{len(wanted)} ({', '.join(wanted)})")
            pairs = [(k, i) for (k, _), i in zip(sorted(wanted.items(), key=lambda kv: kv[1]), idx)]
        maps = []
        for k, i in sorted(pairs):
            tm = schema.TensorMapT()
            tm.name, tm.tensorIndex = k, i
            maps.append(tm)
        return maps

    sd = schema.SignatureDefT()
    sd.signatureKey = key
    sd.subgraphIndex = 0
    sd.inputs = mapping(inputs, sg.inputs, "inputs")
    sd.outputs = mapping(outputs, sg.outputs, "outputs")
    model.signatureDefs = [sd]
    builder = flatbuffers.Builder(max(1024, len(data) + 4096))
    builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
    return bytes(builder.Output())
