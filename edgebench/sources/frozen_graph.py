"""A frozen TF1 graph (a GraphDef ``.pb`` with its weights as constants: the classic TF1 model-zoo
format, e.g. ``mobilenet_v1_1.0_224_frozen.pb``) wrapped once as a SavedModel, so it is read by the
graph loader like any TF1 SavedModel.

Inputs are the graph's ``Placeholder`` nodes; outputs are the tensors nothing in the graph consumes
(its sinks), excluding control-flow and bookkeeping ops. The wrapper is written beside the run's
files (``.NAME.savedmodel-<sha256[:12]>``, cached by the file's content) with one ``serving_default``
signature keyed by the node names ('/' becomes '_'); ``source.info.frozen_graph`` records which
nodes were taken. A file that is not a GraphDef, or a graph without placeholders or outputs, is one
line saying what to do.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from edgebench.core.atomic import temp_dir
from edgebench.core.errors import BadInput, first_line
from edgebench.core.fingerprint import sha256_file

NOT_OUTPUTS = ("NoOp", "Const", "Assert", "Placeholder", "PlaceholderWithDefault", "SaveV2", "RestoreV2",
               "VarHandleOp", "VariableV2", "Identity_n")


def _key(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]", "_", name)


def frozen_graph_savedmodel(p: Path, work_dir: Path | None) -> tuple[Path, dict[str, Any]]:
    """(the SavedModel folder wrapping the frozen graph ``p``, what was taken as inputs/outputs)."""
    digest = sha256_file(p)
    out = (work_dir or p.parent) / f".{p.stem}.savedmodel-{digest[:12]}"
    note = out / "edgebench-frozen.json"
    if (out / "saved_model.pb").exists() and note.exists():
        return out, json.loads(note.read_text())
    if p.name in ("saved_model.pb", "saved_model.pbtxt"):
        raise BadInput(f"{p}: this is a SavedModel's graph file; pass the folder that holds it ({p.parent})")
    import tensorflow as tf

    gd = tf.compat.v1.GraphDef()
    try:
        gd.ParseFromString(p.read_bytes())
    except Exception as e:  # noqa: BLE001 -- DecodeError and friends
        raise BadInput(f"{p}: not a frozen TensorFlow graph (GraphDef protobuf: {first_line(e)}); give a SavedModel "
                       "folder, a .keras/.h5 file, a .tflite file, or a frozen graph .pb") from None
    placeholders = [n.name for n in gd.node if n.op == "Placeholder"]
    consumed = {i.split(":")[0].lstrip("^") for n in gd.node for i in n.input}
    sinks = [n.name for n in gd.node if n.name not in consumed and n.op not in NOT_OUTPUTS]
    if not gd.node or not placeholders or not sinks:
        raise BadInput(f"{p}: a frozen graph with {len(placeholders)} input placeholder(s) and {len(sinks)} output(s) "
                       "edgebench can find; export the model as a SavedModel with a serving signature instead "
                       "(tf.compat.v1.saved_model.simple_save with its input and output tensors)")

    g = tf.Graph()
    with g.as_default():
        tf.import_graph_def(gd, name="")
    info = {"inputs": placeholders, "outputs": sinks,
            "how": "inputs: the Placeholder nodes; outputs: the nodes nothing in the graph consumes"}
    with temp_dir(out) as tmp, tf.compat.v1.Session(graph=g) as sess:
        ins = {_key(n): g.get_tensor_by_name(n + ":0") for n in placeholders}
        outs = {_key(n): g.get_tensor_by_name(n + ":0") for n in sinks}
        tf.compat.v1.saved_model.simple_save(sess, str(tmp / "sm"), ins, outs)
        for f in (tmp / "sm").iterdir():
            f.rename(tmp / f.name)
        (tmp / "sm").rmdir()
        (tmp / "edgebench-frozen.json").write_text(json.dumps(info))
    return out, info
