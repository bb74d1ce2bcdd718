"""Where a ``.tflite`` file's bytes are, and why a quantized file is not smaller than its FP32 file.

``size_breakdown(path)`` reads the flatbuffer (every subgraph) and counts, by kind:

- ``weights``: constant tensors read as an op's weights (or any other constant tensor of 16 bytes
  or more that is not a bias);
- ``biases``: constants read at a bias input (FULLY_CONNECTED, CONV_2D, DEPTHWISE_CONV_2D, CONV_3D:
  input 2; TRANSPOSE_CONV: input 3), with how many there are;
- ``quant_params``: the quantization parameters stored with the tensors (scales 4 bytes, zero points
  8 bytes, min/max 4 bytes each; one of each per channel for a per-channel tensor);
- ``names``: the tensor names (the converter's fused names can be long);
- ``other_constants``: small constants (shapes, axes);
- ``structure``: the rest -- ops, tensor records, shapes, options, signatures, the flatbuffer's
  own tables.

Buffers shared by several tensors count once; ``duplicated_bytes`` is the part of the constants
that repeats a buffer with the same bytes. ``max_weight_reuse`` is the most ops that read one
weight buffer: an unrolled loop reads its weights once per step (an int8 converter then writes one
int32 bias, with its per-channel scales and zero points, per step).

``explain_size`` compares a quantized variant's breakdown with the FP32 one when the quantized file
saves less than ``SURPRISE_PCT`` of the FP32 size, and names the kinds that grew and the built
precision that is smaller.
"""

from __future__ import annotations

import hashlib
import os
from collections import Counter
from typing import Any, Mapping

KINDS = ("weights", "biases", "quant_params", "names", "other_constants", "structure")
KIND_LABELS = {"weights": "weights", "biases": "biases", "quant_params": "quantization parameters",
               "names": "tensor names", "other_constants": "other constants", "structure": "ops and graph structure"}
# An int8 file of a model whose bytes are its weights is ~25 % of FP32, fp16 ~50 %: a quantized file
# that saves less than 10 % of FP32 has bytes that are not its weights, and that needs saying.
SURPRISE_PCT = 10.0
BIAS_SLOT = {"FULLY_CONNECTED": 2, "CONV_2D": 2, "DEPTHWISE_CONV_2D": 2, "CONV_3D": 2, "TRANSPOSE_CONV": 3}
WEIGHT_MIN_BYTES = 16
UNROLLED_MIN = 4       # ops reading one weight buffer from which it reads as an unrolled loop


def _schema():
    try:
        from ai_edge_litert import schema_py_generated as schema  # noqa: PLC0415
    except ImportError:  # pragma: no cover - TF-only installs
        from tensorflow.lite.python import schema_py_generated as schema  # noqa: PLC0415
    return schema


def _op_names(schema) -> dict[int, str]:
    return {v: k for k, v in vars(schema.BuiltinOperator).items() if not k.startswith("_") and isinstance(v, int)}


def size_breakdown(path: str | os.PathLike) -> dict[str, Any]:
    """Bytes of the file at ``path`` by kind (module docstring), plus the counts that explain them."""
    with open(path, "rb") as fh:
        raw = fh.read()
    return breakdown_of(raw)


def breakdown_of(raw: bytes) -> dict[str, Any]:
    schema = _schema()
    model = schema.Model.GetRootAs(raw, 0)
    names = _op_names(schema)
    codes = []
    for i in range(model.OperatorCodesLength()):
        oc = model.OperatorCodes(i)
        codes.append(names.get(max(int(oc.BuiltinCode()), int(oc.DeprecatedBuiltinCode())), "CUSTOM"))
    buffer_role: dict[int, str] = {}
    readers: Counter[int] = Counter()
    q_bytes = name_bytes = per_channel = quantized = n_tensors = 0
    bias_tensors = 0
    for k in range(model.SubgraphsLength()):
        sg = model.Subgraphs(k)
        roles: dict[int, str] = {}
        for j in range(sg.OperatorsLength()):
            op = sg.Operators(j)
            kind = codes[op.OpcodeIndex()] if op.OpcodeIndex() < len(codes) else "CUSTOM"
            for slot in range(op.InputsLength()):
                t = op.Inputs(slot)
                if t < 0:
                    continue
                if BIAS_SLOT.get(kind) == slot:
                    roles[t] = "biases"
                elif slot == 1 and kind in BIAS_SLOT:
                    roles.setdefault(t, "weights")
                    readers[sg.Tensors(t).Buffer()] += 1
        for i in range(sg.TensorsLength()):
            t = sg.Tensors(i)
            n_tensors += 1
            name = t.Name()
            name_bytes += len(name) if name else 0
            qp = t.Quantization()
            if qp is not None:
                n = qp.ScaleLength()
                q_bytes += 4 * n + 8 * qp.ZeroPointLength() + 4 * (qp.MinLength() + qp.MaxLength())
                quantized += n > 0
                per_channel += n > 1
            b = t.Buffer()
            if b > 0:
                role = roles.get(i)
                if role == "biases" and buffer_role.get(b) != "biases":
                    bias_tensors += 1
                if role is not None or b not in buffer_role:
                    buffer_role[b] = role or buffer_role.get(b) or ""
    data: Counter[str] = Counter()
    seen: dict[str, int] = {}
    dup = 0
    for b, role in buffer_role.items():
        if b >= model.BuffersLength():
            continue
        buf = model.Buffers(b)
        n = buf.DataLength()
        if n:
            chunk = buf.DataAsNumpy().tobytes()
        elif buf.Offset() > 1 and buf.Size():          # files over 2 GB keep the data after the flatbuffer
            n = int(buf.Size())
            chunk = raw[buf.Offset():buf.Offset() + n]
        else:
            continue
        kind = role or ("weights" if n >= WEIGHT_MIN_BYTES else "other_constants")
        data[kind] += n
        h = hashlib.sha256(chunk).hexdigest()
        if h in seen:
            dup += n
        else:
            seen[h] = b
    kinds = {"weights": data["weights"], "biases": data["biases"], "quant_params": q_bytes, "names": name_bytes,
             "other_constants": data["other_constants"]}
    kinds["structure"] = max(0, len(raw) - sum(kinds.values()))
    return {"bytes": len(raw), "kinds": kinds, "tensors": n_tensors, "quantized_tensors": quantized,
            "per_channel_tensors": per_channel, "bias_tensors": bias_tensors, "duplicated_bytes": dup,
            "max_weight_reuse": max(readers.values()) if readers else 0,
            "ops": sum(model.Subgraphs(k).OperatorsLength() for k in range(model.SubgraphsLength()))}


def surprising(reduction_pct: float | None, precision: str) -> bool:
    """A quantized variant that saves less than ``SURPRISE_PCT`` of the FP32 size (or grew)."""
    return precision != "fp32" and reduction_pct is not None and reduction_pct < SURPRISE_PCT


def _kib(n: float) -> str:
    return f"{n / 1024:+.1f} KiB" if abs(n) >= 1024 or n == 0 else f"{n:+.0f} B"


def explain_size(precision: str, mine: Mapping[str, Any], fp32: Mapping[str, Any],
                 built: Mapping[str, int]) -> dict[str, Any]:
    """Why ``precision``'s file (breakdown ``mine``) is not smaller than FP32's (``fp32``): the change
    of each kind, the biggest growths named first, and the smallest built precision (``built``:
    {precision: bytes} of the variants that were converted) -- or None when none is smaller."""
    total, base = int(mine["bytes"]), int(fp32["bytes"])
    delta = {k: int(mine["kinds"].get(k, 0)) - int(fp32["kinds"].get(k, 0)) for k in KINDS}
    grew = sorted((k for k in KINDS if delta[k] > 0), key=lambda k: -delta[k])
    parts = []
    for k in grew[:3]:
        what = f"{KIND_LABELS[k]} {_kib(delta[k])}"
        if k == "quant_params":
            what += f" ({mine['quantized_tensors']} quantized tensors, {mine['per_channel_tensors']} per channel)"
        elif k == "biases":
            what += f" ({mine['bias_tensors']} bias tensors"
            if mine["bias_tensors"] > fp32.get("bias_tensors", 0) and mine.get("max_weight_reuse", 0) >= UNROLLED_MIN:
                what += f": one per unrolled step, {mine['max_weight_reuse']} ops read the same weights"
            what += ")"
        elif k == "names":
            what += (f" ({mine['tensors']} tensors, {mine['kinds']['names'] / max(1, mine['tensors']):.0f} bytes each "
                     f"vs {fp32['kinds']['names'] / max(1, fp32['tensors']):.0f} in fp32: the converter's fused names)")
        elif k == "structure":
            what += f" ({mine['ops']} ops vs {fp32['ops']})"
        parts.append(what)
    if delta["weights"] < 0:
        parts.append(f"weights {_kib(delta['weights'])}")
    if mine.get("duplicated_bytes"):
        parts.append(f"{_kib(mine['duplicated_bytes'])[1:]} of duplicated constants")
    smaller = sorted(((b, p) for p, b in built.items() if p not in ("fp32", precision) and b < base and b < total))
    best = smaller[0][1] if smaller else None
    pct = 100.0 * (total - base) / base if base else 0.0
    head = (f"{precision} is {pct:.0f}% larger than fp32" if pct >= 0.5 else
            f"{precision} is the same size as fp32" if pct > -0.5 else f"{precision} is only {-pct:.0f}% smaller than fp32")
    if not mine.get("quantized_tensors") and mine["kinds"]["weights"] >= fp32["kinds"]["weights"]:
        parts.insert(0, "nothing in it is quantized (the converter left every weight float)")
    missing = [p for p in ("dynamic", "fp16") if p not in built]
    tail = (f"; {best} is smaller ({100.0 * (built[best] - base) / base:+.0f}% vs fp32, built)" if best
            else "; no precision built here is smaller than fp32"
            + (f" (not built: {', '.join(missing)}; -p {','.join(missing)} measures them)" if missing else ""))
    share = mine["kinds"]["weights"] / total if total else 0.0
    line = f"{head}: {', '.join(parts) or 'no kind of bytes grew'}; weights are {share:.0%} of the file{tail}"
    return {"line": line, "delta": delta, "smaller": best, "kinds": dict(mine["kinds"]),
            "fp32_kinds": dict(fp32["kinds"]), "quant_params_bytes": int(mine["kinds"]["quant_params"]),
            "bias_tensors": int(mine["bias_tensors"]), "max_weight_reuse": int(mine.get("max_weight_reuse", 0)),
            "duplicated_bytes": int(mine.get("duplicated_bytes", 0))}


def explain_sizes(variants: dict[str, dict[str, Any]]) -> None:
    """Each quantized variant that saves less than ``SURPRISE_PCT`` of the FP32 file (or
    grew) gets ``size_explained``: where its bytes went against FP32 (weights, biases, quantization
    parameters, names, structure) and the smallest precision built here (``explain_size``)."""
    fp32 = variants.get("fp32") or {}
    if fp32.get("status") != "ok" or not fp32.get("path"):
        return
    odd = [p for p, v in variants.items() if v.get("status") == "ok" and surprising(v.get("size_reduction_pct"), p)]
    if not odd:
        return
    base = size_breakdown(fp32["path"])
    built = {p: int(v["bytes"]) for p, v in variants.items() if v.get("status") == "ok"}
    for p in odd:
        variants[p]["size_explained"] = explain_size(p, size_breakdown(variants[p]["path"]), base, built)


__all__ = ["KINDS", "SURPRISE_PCT", "breakdown_of", "explain_size", "explain_sizes", "size_breakdown", "surprising"]
