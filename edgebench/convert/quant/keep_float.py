"""Keeping chosen tensors of an int8 model float: from the converter's calibrated model, which
tensors exist (``float_tensors``), a user's spec resolved to them, the ops that must run float
around them, the re-quantization that leaves them float, and a check that the file really did."""

from __future__ import annotations

import difflib
import re
from pathlib import Path
from typing import Any

from edgebench.core.errors import BadInput
from edgebench.model.tflite_model import inspect

KEEP_FLOAT_MECHANISM = ("calibrate once (converter._experimental_calibrate_only), then mlir_quantize("
                        "calibrated, denylisted_nodes=producer + consumers of each kept tensor)")


def float_tensors(calibrated_path: str | Path) -> dict[str, dict[str, Any]]:
    """Name -> {producer, consumers} of every float activation tensor (graph inputs and op outputs)."""
    info = inspect(str(calibrated_path))
    graph: dict[str, dict[str, Any]] = {}
    for t in info["inputs"]:
        graph[t["tensor_name"]] = {"producer": None, "consumers": []}
    for o in info["ops"]:
        for name, dt in zip(o["output_names"], o["outputs"]):
            if dt in ("float32", "float16"):
                graph.setdefault(name, {"producer": o, "consumers": []})
    for o in info["ops"]:
        for name in o["input_names"]:
            if name in graph:
                graph[name]["consumers"].append(o)
    return graph


def resolve_keep_float(spec: str | tuple[str, ...], graph: dict[str, dict[str, Any]]) -> list[str]:
    """``NAME,NAME`` (exact tensor names, as ``edgebench diagnose`` lists them) or a regex searched
    in every float tensor name -> the tensor names to keep float (graph order)."""

    names = list(graph)
    if isinstance(spec, tuple):
        items = list(spec)
    else:
        items = [x.strip() for x in spec.split(",") if x.strip()]
    if items and all(x in graph for x in items):
        return [n for n in names if n in items]
    text = spec if isinstance(spec, str) else "|".join(re.escape(x) for x in spec)
    try:
        rx = re.compile(text)
    except re.error as e:
        raise BadInput(f"--keep-float {text!r}: neither tensor names nor a valid regex ({e}); list the "
                       "tensor names with `edgebench diagnose SRC`") from None
    hits = [n for n in names if rx.search(n)]
    if not hits:
        close = difflib.get_close_matches(items[0] if items else text, names, n=3, cutoff=0.3)
        raise BadInput(f"--keep-float {text!r}: matches no float tensor of the model"
                       + (f" (close: {'; '.join(close)})" if close else "")
                       + "; use the tensor names `edgebench diagnose SRC` lists, a regex, or 'auto'")
    return hits


def keep_float_nodes(tensors: list[str], graph: dict[str, dict[str, Any]]) -> list[str]:
    """The op output names to denylist so that ``tensors`` stay float end to end."""
    nodes: list[str] = []
    for t in tensors:
        ops = ([graph[t]["producer"]] if graph[t]["producer"] else []) + graph[t]["consumers"]
        for o in ops:
            for n in o["output_names"]:
                if n not in nodes:
                    nodes.append(n)
    return nodes


def quantize_keep_float(calibrated: bytes, nodes: list[str], int8_io: str = "float") -> tuple[bytes, dict]:
    """int8 with the ops in ``nodes`` (output tensor names) left float."""
    import tensorflow as tf
    from tensorflow.lite.python import convert as tfl_convert

    io = tf.int8 if int8_io == "int8" else tf.float32
    data = tfl_convert.mlir_quantize(calibrated, input_data_type=io, output_data_type=io,
                                     denylisted_nodes=list(nodes) or None)
    if not nodes:   # --keep-float auto found plain int8 good enough
        return data, {"weights": "int8", "activations": "int8", "io": int8_io, "mode": "full-integer",
                      "mechanism": KEEP_FLOAT_MECHANISM}
    return data, {"weights": "int8 (float in kept ops)", "activations": "int8 with float islands",
                  "io": int8_io, "mode": "int8 with float islands", "mechanism": KEEP_FLOAT_MECHANISM}


def verify_keep_float(path: str | Path, nodes: list[str]) -> list[str]:
    """Problems (empty when fine): every denylisted op must exist in the .tflite and run in float."""
    kinds = {}
    for o in inspect(str(path))["ops"]:
        for n in o["output_names"]:
            kinds[n] = (o["op"], o["kind"])
    problems = []
    for n in nodes:
        if n not in kinds:
            problems.append(f"{n}: no op with this output in the converted model")
        elif kinds[n][1] not in ("float",):
            problems.append(f"{n}: {kinds[n][0]} is still {kinds[n][1]}")
    return problems
