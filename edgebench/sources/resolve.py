"""Model sources: what the user gave -> a resolved ``Source`` every later stage can use.

Kinds: a SavedModel folder, a ``.keras``/``.h5`` file (exported to a SavedModel), a reference
model name (built and cached), or a ``.tflite`` file (already a variant; nothing to convert).

SavedModels are read at two levels, recorded as ``loader`` in the manifest with the reason:

* ``tf2``: the object graph (``tf.saved_model.load``), ``tf.lite.TFLiteConverter.from_saved_model``
  and the signature function as the TF reference. Tried first for every TF2 SavedModel.
* ``graph``: the MetaGraph only (``tf.compat.v1.lite.TFLiteConverter.from_saved_model`` and a
  ``tf.compat.v1.Session`` over the signature's tensors). Used for TF1 SavedModels (no object
  graph) and when restoring the object graph fails -- e.g. Keras-2-era SavedModels whose
  optimizer slot variables need Keras 2 (``'_UserObject' object has no attribute 'add_slot'``
  without ``tf-keras``). The graph converter writes no signature, so the signature's input and
  output names are written back into the .tflite (``tflite_model.restore_signature``): every later step sees
  the same names as the TF reference.

Signatures are read from ``saved_model.pb`` itself (no loading): ``--signature KEY`` picks one,
and a missing key lists the ones there are. Dynamic dimensions: a dynamic batch dimension is
converted as 1 (edgebench measures single-sample latency); any other dynamic dimension must be
fixed with ``--input-shape NAME:1,128`` and is converted as given. Both are recorded.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import io
import json
import os
import re
import zipfile
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np

from edgebench.core.atomic import ensure_dir, temp_dir
from edgebench.core.errors import BadInput, first_line
from edgebench.core.fingerprint import sha256_file
from edgebench.core.result_file import write_json
from edgebench.core.user_code import import_user_module
from edgebench.model import catalog as models
from edgebench.model.inputs import (
    InputSet,
    Signature,
    TensorSpec,
    calibration_generator,
    cast_to_signature,
    load_data,
    validate,
)
from edgebench.model.savedmodel import DEFAULT_SIGNATURE, SERVE_TAG, graph_session, quiet_v1, read_signature
from edgebench.model.tflite_model import inspect, refuse_compiled, rename_signature, restore_signature
from edgebench.model.tflite_model import precision as tflite_precision
from edgebench.model.tflite_rewrite import order_inputs
from edgebench.model.tflite_size import explain_sizes
from edgebench.sources.describe import describe_tflite
from edgebench.sources.frozen_graph import frozen_graph_savedmodel
from edgebench.sources.keras2_export import export_tf_keras
from edgebench.sources.trust import (
    TRUST_FLAG,
    check_keras_file,
    check_output_dir,
    check_saved_model,
    own_dir,
    refusal,
    safe_mode_refusal,
    tf_keras_safe_mode,
)
from edgebench.targets.host import describe_model

KERAS_SUFFIXES = (".keras", ".h5", ".hdf5")
# Most precise first: the reference among several .tflite files given without --reference.
PRECISION_RANK = ("fp32", "fp16", "dynamic", "int16x8", "int8")


@dataclass(frozen=True)
class SourceOptions:
    """How to read a source. The CLI fills these from --signature/--input-shape/--import/--reference."""
    signature_key: str = DEFAULT_SIGNATURE
    input_shapes: tuple[tuple[str, tuple[int, ...]], ...] = ()
    imports: tuple[str, ...] = ()
    reference: str | None = None          # .tflite sources: a SavedModel/.keras for the TF row
    # --static-batch (True) / --dynamic-batch (False): a dynamic batch becomes a static 1 in the .tflite;
    # None: the command's default (``for_measuring``: static where the conversion is measured)
    static_batch: bool | None = None
    # the static batch is the command's default, not asked for: when the converter cannot take the
    # model at a static batch (a Keras LSTM's TensorList wants a static element shape it cannot
    # infer then), convert keeps the dynamic batch and records why (manifest static_batch_fallback)
    static_batch_auto: bool = False
    torch: str | None = None              # --torch MODULE:FACTORY: a PyTorch source (sources_torch)
    channels_last: bool = False           # --channels-last: a PyTorch source's .tflite takes NHWC
    # --trust-model: the user's consent to run code a model file carries (edgebench.sources.trust); without
    # it a Keras Lambda's bytecode, a custom class the file names, or a SavedModel op that writes
    # files is refused before anything of the model runs
    trust_model: bool = False

    def for_measuring(self, src: str) -> "SourceOptions":
        """The options of a command that measures what it converts (convert-and-compare, diagnose):
        latency is measured at batch 1, so unless told otherwise a dynamic batch is converted as a
        static 1 -- the shape arithmetic folds and a delegate takes the graph whole. A ``.tflite``
        SRC is converted already."""
        if self.static_batch is not None or str(src).endswith(".tflite"):
            return self
        return dataclasses.replace(self, static_batch=True, static_batch_auto=True)

    def dynamic_batch(self) -> "SourceOptions":
        """The same options with the batch left dynamic (the fallback of an automatic static batch)."""
        return dataclasses.replace(self, static_batch=False, static_batch_auto=False)


@dataclass(frozen=True)
class Source:
    """A resolved source. ``saved_model_dir`` is None only for .tflite sources."""
    kind: str                     # "saved_model" | "keras" | "reference" | "tflite"
    name: str
    path: str                     # what the user gave
    saved_model_dir: Path | None
    sha256: str
    signature: Signature          # dims fixed as converted (batch kept as declared)
    calibration: InputSet | None = None   # shipped with reference models
    evaluation: InputSet | None = None
    info: dict[str, Any] = field(default_factory=dict)
    signature_key: str = DEFAULT_SIGNATURE
    loader: str = "tf2"           # "tf2" | "graph" ("tflite" for .tflite sources: nothing is loaded by TF)
    loader_reason: str | None = None
    tags: tuple[str, ...] = (SERVE_TAG,)
    graph_inputs: dict[str, str] = field(default_factory=dict)    # signature name -> graph tensor
    graph_outputs: dict[str, str] = field(default_factory=dict)
    fixed_shapes: dict[str, tuple[int, ...]] = field(default_factory=dict)  # converter input shapes
    input_shapes: dict[str, dict[str, Any]] = field(default_factory=dict)   # what was fixed, and why
    qat: bool = False             # FakeQuant ops present: INT8 from the model's own ranges

    def to_manifest(self) -> dict[str, Any]:
        return {"kind": self.kind, "name": self.name, "path": self.path, "sha256": self.sha256,
                "saved_model_dir": None if self.saved_model_dir is None else str(self.saved_model_dir),
                "signature": self.signature.to_dict(), "signature_key": self.signature_key,
                "loader": self.loader, "loader_reason": self.loader_reason, "tags": list(self.tags),
                "input_shapes": self.input_shapes, "qat": self.qat, "info": self.info}

    def to_job(self) -> dict[str, Any]:
        """The resolved source as a worker process receives it (JSON), so the worker converts what
        this process resolved instead of reading the model again; the sample sets travel as .npz."""
        return json.loads(json.dumps({
            "kind": self.kind, "name": self.name, "path": self.path, "sha256": self.sha256,
            "saved_model_dir": None if self.saved_model_dir is None else str(self.saved_model_dir),
            "signature": self.signature.to_json(), "info": self.info, "signature_key": self.signature_key,
            "loader": self.loader, "loader_reason": self.loader_reason, "tags": list(self.tags),
            "graph_inputs": self.graph_inputs, "graph_outputs": self.graph_outputs,
            "fixed_shapes": {k: list(v) for k, v in self.fixed_shapes.items()},
            "input_shapes": self.input_shapes, "qat": self.qat}, default=str))

    @classmethod
    def from_job(cls, d: dict[str, Any]) -> "Source":
        return cls(d["kind"], d["name"], d["path"], None if d["saved_model_dir"] is None else Path(d["saved_model_dir"]),
                   d["sha256"], Signature.from_json(d["signature"]), info=d["info"], signature_key=d["signature_key"],
                   loader=d["loader"], loader_reason=d["loader_reason"], tags=tuple(d["tags"]),
                   graph_inputs=d["graph_inputs"], graph_outputs=d["graph_outputs"],
                   fixed_shapes={k: tuple(v) for k, v in d["fixed_shapes"].items()},
                   input_shapes=d["input_shapes"], qat=d["qat"])


# --------------------------------------------------------------------------- options


def sample_set(src: Source, data: str | None, *, preprocess: str, seed: int, split: str,
               samples: int | None = None) -> InputSet | None:
    """The samples a command runs on: ``data`` (a path, or "synthetic") when given, else the
    source's own ``split`` ("evaluation" or "calibration": a reference model's fixed split),
    checked against the signature; None when neither exists (the caller says which flag to pass).
    ``samples``: the most the command uses -- only those are read from ``data``."""
    if data:
        return load_data(data, src.signature, preprocess=preprocess, seed=seed, n=samples)
    own = src.evaluation if split == "evaluation" else src.calibration
    if own is None:
        return None
    validate(own, src.signature)
    return own


def evaluation_set(src: Source, data: str | None, *, samples: int, preprocess: str, seed: int) -> InputSet:
    """The evaluation samples of a run (convert-and-compare, diagnose): ``data`` or the source's own
    evaluation split, cast to the signature, the first ``samples`` of them."""
    ds = sample_set(src, data, preprocess=preprocess, seed=seed, split="evaluation", samples=max(samples, 1))
    if ds is None:
        raise BadInput(f"{src.path}: no evaluation data; pass --data PATH (real samples, with a 'labels' "
                       "array for task accuracy) or --data synthetic (drift only, misleading for INT8)")
    if samples <= 0:
        raise BadInput(f"--samples {samples}: must be positive")
    return cast_to_signature(ds, src.signature).take(samples)


def parse_input_shape(spec: str) -> tuple[str, tuple[int, ...]]:
    """'tokens:1,128' -> ('tokens', (1, 128)) (raises BadInput)."""
    name, sep, dims = spec.rpartition(":")
    try:
        shape = tuple(int(d) for d in dims.split(",")) if sep and name else ()
    except ValueError:
        shape = ()
    if not shape or any(d < 1 for d in shape):
        raise BadInput(f"--input-shape {spec!r}: use NAME:DIMS with positive integer dims, e.g. "
                       "--input-shape input_ids:1,128 (batch first)")
    return name, shape


# --------------------------------------------------------------------------- resolve


def resolve_source(src: str, *, size: str = "tiny", work_dir: Path | None = None, seed: int = 0,
                   options: SourceOptions | None = None, require_static: bool = True) -> Source:
    """SavedModel dir, .keras/.h5 file, .tflite file or a reference model name -> Source (BadInput).

    ``require_static``: refuse dynamic non-batch dimensions without --input-shape (conversion
    needs them fixed; a plain TF run does not).
    """
    opts = options or SourceOptions()
    import_modules(opts.imports)
    p = Path(src)
    if not p.exists():

        if os.sep not in src and not src.endswith((*KERAS_SUFFIXES, ".tflite")) and src in models.MODELS:
            return _reference_source(src, size, seed, opts)
        if os.sep not in src and "." not in src:
            raise BadInput(f"{src}: not a path and not a reference model; choose one of "
                           f"{', '.join(models.MODELS)} or give a SavedModel folder / .keras file")
        raise BadInput(f"{src}: no such file or folder; give a SavedModel folder, a .keras file, a .tflite "
                       "file or a reference model name (edgebench models list)")
    if p.is_dir():
        return saved_model_source(p, opts, kind="saved_model", name=p.resolve().name, path=src,
                                  require_static=require_static)
    if p.suffix.lower() in KERAS_SUFFIXES:
        return _keras_source(p, work_dir, opts, require_static)
    if p.suffix.lower() == ".pb":      # a frozen TF1 graph: wrapped once as a SavedModel (frozen_graph)
        sm, frozen = frozen_graph_savedmodel(p, work_dir)
        src = saved_model_source(sm, opts, kind="saved_model", name=p.stem, path=src, sha256=sha256_file(p),
                                 require_static=require_static)
        src.info["frozen_graph"] = frozen
        return src
    if p.suffix == ".tflite":
        if opts.static_batch:
            raise BadInput(f"{src}: --static-batch changes a conversion, and this .tflite is already converted; "
                           "drop the flag, or give the SavedModel/.keras it came from")
        return tflite_source(p)
    raise BadInput(f"{src}: unsupported source '{p.suffix or p.name}'; give a SavedModel folder, a .keras/.h5 "
                   "file, a .tflite file, a frozen graph .pb or a reference model name")


def _reference_source(name: str, size: str, seed: int, opts: SourceOptions) -> Source:
    built = models.build(name, size, seed=seed)
    src = saved_model_source(Path(built.saved_model_dir), opts, kind="reference", name=f"{name}-{size}",
                             path=name)
    ranges = {i["name"]: tuple(i["range"]) for i in built.info.get("inputs", []) if i.get("range")}
    sig = Signature(src.signature.inputs, src.signature.outputs, ranges, order=src.signature.order)
    cal = InputSet.load(built.calibration_npz, f"{name} calibration split")
    ev = InputSet.load(built.evaluation_npz, f"{name} evaluation split")
    return replace(src, signature=sig, calibration=cal, evaluation=ev, info={**src.info, **built.info})


# --------------------------------------------------------------------------- SavedModel


def saved_model_source(p: Path, opts: SourceOptions, *, kind: str, name: str, path: str,
                       sha256: str | None = None, require_static: bool = True) -> Source:
    sig, mg, sd = read_signature(p, opts.signature_key)
    check_saved_model(mg, p, trusted=opts.trust_model)     # before any of its ops can run (the probes below)
    tags = tuple(mg.meta_info_def.tags) or (SERVE_TAG,)
    loader, reason = choose_loader(p, mg, opts.signature_key, tags)
    sig, fixed, notes = fix_shapes(sig, opts.input_shapes, str(path), require_static, bool(opts.static_batch))
    fake_quant = _fake_quant_ops(mg)
    info: dict[str, Any] = {}
    if mg.meta_info_def.tensorflow_version:
        info["written_by_tensorflow"] = mg.meta_info_def.tensorflow_version
    if fake_quant:
        info["qat"] = {"fake_quant_ops": fake_quant,
                       "note": "quantization-aware model: INT8 uses its FakeQuant ranges, no calibration"}
    return Source(kind, name, path, p, sha256 or sha256_file(p), sig, info=info,
                  signature_key=opts.signature_key, loader=loader, loader_reason=reason, tags=tags,
                  graph_inputs={k: v.name for k, v in sd.inputs.items()},
                  graph_outputs={k: v.name for k, v in sd.outputs.items()},
                  fixed_shapes=fixed, input_shapes=notes, qat=bool(fake_quant))


def _fake_quant_ops(mg) -> int:
    nodes = list(mg.graph_def.node) + [n for f in mg.graph_def.library.function for n in f.node_def]
    return sum(1 for n in nodes if n.op.startswith("FakeQuantWithMinMax"))


# A probe result per (folder, content hash, signature): convert and convert-and-compare resolve
# the same source twice in one process.
_LOADER_CACHE: dict[tuple[str, float, str], tuple[str, str | None]] = {}


def choose_loader(p: Path, mg, key: str, tags: tuple[str, ...]) -> tuple[str, str | None]:
    """("tf2", None), or ("graph", why). Raises BadInput when neither level can load the model."""
    pb = p / "saved_model.pb"
    ck = (str(p.resolve()), pb.stat().st_mtime if pb.exists() else 0.0, key)
    if ck in _LOADER_CACHE:
        return _LOADER_CACHE[ck]
    if not mg.object_graph_def.nodes:
        graph_err = _probe_graph(p, key, tags)
        if graph_err is not None:
            raise BadInput(f"{p}: TensorFlow cannot load this TF1 SavedModel at graph level (tf.compat.v1 "
                           f"session: {graph_err}); {_load_fix(graph_err, mg)}")
        out: tuple[str, str | None] = ("graph", "TF1 SavedModel (no object graph): read at graph level, "
                                                "its native format")
        _LOADER_CACHE[ck] = out
        return out
    tf2_err = _probe_tf2(p, key, tags)
    if tf2_err is None:
        out = ("tf2", None)
    else:
        graph_err = _probe_graph(p, key, tags)
        if graph_err is not None:
            raise BadInput(f"{p}: TensorFlow cannot load this SavedModel: tried the TF2 object graph "
                           f"({tf2_err}) and the graph level (tf.compat.v1 session: {graph_err}); "
                           f"{_load_fix(tf2_err + ' ' + graph_err, mg)}")
        out = ("graph", f"TF2 object-graph restore failed ({tf2_err}); "
                        f"{_tf2_fix(tf2_err)}read at graph level instead")
    _LOADER_CACHE[ck] = out
    return out


def _probe_tf2(p: Path, key: str, tags: tuple[str, ...]) -> str | None:
    import tensorflow as tf

    try:
        loaded = tf.saved_model.load(str(p), tags=list(tags))
        loaded.signatures[key]  # noqa: B018 -- the signature function must be restorable too
    except Exception as e:  # noqa: BLE001 -- restore failures come as every exception type
        return first_line(e)
    return None


def _probe_graph(p: Path, key: str, tags: tuple[str, ...]) -> str | None:
    try:
        sess, _ = graph_session(p, tags)
        sess.close()
    except Exception as e:  # noqa: BLE001
        return first_line(e)
    return None


def _tf2_fix(err: str) -> str:
    if "add_slot" in err or "optimizer" in err.lower():
        return "installing tf-keras (pip install tf-keras) would let TF restore it; "
    return ""


def _load_fix(err: str, mg) -> str:
    writer = mg.meta_info_def.tensorflow_version
    op = re.search(r"Op type not registered '([\w>]+)'", err)
    if op:
        return (f"the graph uses op '{op.group(1)}' from a TensorFlow add-on: install the package that "
                f"provides it (e.g. tensorflow-text) and pass --import MODULE to register it")
    if "variables" in err.lower() or "checkpoint" in err.lower() or "not found" in err.lower():
        return ("its variables/ folder is missing or incomplete: copy or download the whole SavedModel "
                "folder again")
    return (f"it was written by TensorFlow {writer or '(unknown version)'}; load and re-save it with that "
            "version (tf.saved_model.save), or ask its author for a .tflite or a fresh export")


# --------------------------------------------------------------------------- dynamic shapes


def fix_shapes(sig: Signature, given: tuple[tuple[str, tuple[int, ...]], ...], where: str,
               require_static: bool, static_batch: bool = False
               ) -> tuple[Signature, dict[str, tuple[int, ...]], dict[str, dict[str, Any]]]:
    """Apply --input-shape and the batch-1 rule: (effective signature, converter shapes, notes).

    Converter shapes are returned only when a non-batch dimension had to be fixed, or with
    ``static_batch`` (--static-batch) when a batch is dynamic: without it the converters take a
    dynamic batch as 1 for the input but keep the graph dynamic, so a Flatten/Reshape computes
    its shape at run time (SHAPE, STRIDED_SLICE, PACK), ops a delegate leaves on the CPU. Notes
    record every fixed dimension.
    """
    want = dict(given)
    unknown = [n for n in want if n not in sig.input_names]
    if unknown:
        raise BadInput(f"--input-shape {unknown[0]}: no such input in {where} (inputs: "
                       f"{', '.join(sig.input_names)})")
    inputs, notes = [], {}
    needs_fixing = False
    for t in sig.inputs:
        declared = list(t.shape)
        if t.name in want:
            shape = want[t.name]
            if declared and len(shape) != len(declared):
                raise BadInput(f"--input-shape {t.name}:{','.join(map(str, shape))}: input '{t.name}' of {where} "
                               f"has {len(declared)} dims {_show(declared)}; give all of them, batch first")
            clash = [i for i, (d, s) in enumerate(zip(declared, shape)) if d is not None and d != s]
            if clash:
                raise BadInput(f"--input-shape {t.name}:{','.join(map(str, shape))}: dim {clash[0]} of input "
                               f"'{t.name}' is fixed at {declared[clash[0]]} in {where}; only dynamic dims "
                               f"({_show(declared)}) can be set")
            if declared and declared[0] is None and shape[0] != 1:
                raise BadInput(f"--input-shape {t.name}:{','.join(map(str, shape))}: the batch dim must be 1 "
                               "(edgebench measures single-sample latency)")
            fixed_dims = [i for i, d in enumerate(declared) if d is None and i > 0] if declared else list(range(len(shape)))
            batch_dynamic = bool(declared) and declared[0] is None
            needs_fixing = needs_fixing or bool(fixed_dims) or not declared or (static_batch and batch_dynamic)
            notes[t.name] = {"declared": declared or None, "used": list(shape),
                             "how": "--input-shape" + ("; batch fixed to 1 for latency" if batch_dynamic else "")
                             + ((_STATIC_NOTE if static_batch else _DYNAMIC_NOTE) if batch_dynamic else "")}
            eff = tuple(shape) if not declared else (declared[0], *shape[1:])
            inputs.append(TensorSpec(t.name, eff, t.dtype))
            continue
        dynamic = [i for i, d in enumerate(declared) if d is None and i > 0]
        if (dynamic or not declared) and require_static:
            example = ",".join("1" if i == 0 else ("128" if d is None else str(d)) for i, d in enumerate(declared or [None, None]))
            raise BadInput(f"{where}: input '{t.name}' has dynamic dims {_show(declared)}"
                           f"{'' if declared else ' (unknown rank)'}; latency depends on them, so fix them with "
                           f"--input-shape {t.name}:{example} (batch first)")
        if declared and declared[0] is None:
            notes[t.name] = {"declared": declared, "used": [1, *declared[1:]],
                             "how": "batch fixed to 1 for latency" + (_STATIC_NOTE if static_batch else _DYNAMIC_NOTE)}
            needs_fixing = needs_fixing or (static_batch and not dynamic)
        inputs.append(t)
    eff_sig = Signature(tuple(inputs), sig.outputs, sig.ranges, order=sig.order)
    fixed = {t.name: tuple(notes[t.name]["used"]) if t.name in notes else tuple(t.shape)
             for t in sig.inputs} if needs_fixing else {}
    return eff_sig, fixed, notes


_STATIC_NOTE = "; static batch 1 in the converted model (--dynamic-batch keeps it dynamic)"
_DYNAMIC_NOTE = "; the .tflite keeps a dynamic batch"


def _show(shape: list) -> str:
    return "[" + ", ".join("?" if d is None else str(d) for d in shape) + "]"


# --------------------------------------------------------------------------- converters


def make_converter(src: Source):
    """A TFLite converter for the source's loader, signature and fixed input shapes."""
    import tensorflow as tf

    if src.saved_model_dir is None:
        raise BadInput(f"{src.path}: already a .tflite; nothing to convert")
    d = str(src.saved_model_dir)
    if src.loader == "graph":
        kw: dict[str, Any] = {}
        if src.fixed_shapes:
            kw["input_shapes"] = {_graph_name(src.graph_inputs[n]): list(s) for n, s in src.fixed_shapes.items()}

        with quiet_v1():
            c = tf.compat.v1.lite.TFLiteConverter.from_saved_model(
                d, tag_set=set(src.tags), signature_key=src.signature_key, **kw)
        if hasattr(c, "_debug_info_func"):
            # Only feeds converter error stack traces, and writes a line to stderr per function op.
            c._debug_info_func = None
        return c
    static = src.info.get("static_export")
    if src.fixed_shapes and static:      # a Keras model traced at the fixed shapes (_keras_source)
        return tf.lite.TFLiteConverter.from_saved_model(str(static), signature_keys=[src.signature_key],
                                                        tags=set(src.tags))
    if src.fixed_shapes:
        loaded = tf.saved_model.load(d, tags=list(src.tags))
        fn = loaded.signatures[src.signature_key]
        dtypes = {t.name: t.dtype for t in src.signature.inputs}
        specs = {n: tf.TensorSpec(s, dtypes[n], name=n) for n, s in src.fixed_shapes.items()}
        cf = tf.function(lambda **kw: fn(**kw)).get_concrete_function(**specs)
        return tf.lite.TFLiteConverter.from_concrete_functions([cf], loaded)
    return tf.lite.TFLiteConverter.from_saved_model(d, signature_keys=[src.signature_key], tags=set(src.tags))


def calibration_feed(src: Source, ds: InputSet, n: int) -> Callable[[], Iterator[Any]]:
    """The representative dataset for this source's converter (the graph converter takes lists in
    its input order: sorted graph tensor names)."""
    if src.loader != "graph":
        return lambda: calibration_generator(ds, src.signature, n)
    order = sorted(src.signature.input_names, key=lambda k: src.graph_inputs[k])

    def gen():
        for sample in calibration_generator(ds, src.signature, n):
            yield [sample[k] for k in order]

    return gen


def finish_tflite(src: Source, data: bytes) -> bytes:
    """Graph-loader output gets the signature's names back; TF2 output converted from a re-traced
    function (fixed shapes: a static batch, --input-shape) gets its signature's key back (the
    converter names it serving_default); other TF2 output is already named. Every file lists its
    inputs in the source's positional order when the source records one (``order_inputs``)."""

    if src.loader != "graph":
        data = rename_signature(data, src.signature_key) if src.fixed_shapes else data
    else:
        data = restore_signature(data, src.signature_key, src.graph_inputs, src.graph_outputs)
    return order_inputs(data, src.signature.order)    # the source's positional order, as LiteRT lists inputs


def _graph_name(tensor: str) -> str:
    return tensor[:-2] if tensor.endswith(":0") else tensor


# --------------------------------------------------------------------------- .keras / .h5


def import_modules(specs: tuple[str, ...] | list[str]) -> dict[str, Any]:
    """Import each --import (a module name, or a path to a .py file) and return the Keras custom
    objects it defines: classes and functions of the module, by class name and registered name."""
    objects: dict[str, Any] = {}
    for spec in specs:
        mod = _import_one(spec)
        for attr, obj in vars(mod).items():
            if attr.startswith("_") or getattr(obj, "__module__", None) != mod.__name__:
                continue
            if isinstance(obj, type) or callable(obj):
                objects[attr] = obj
                registered = _registered_name(obj)
                if registered:
                    objects[registered] = obj
    return objects


def _registered_name(obj: Any) -> str | None:
    try:
        import keras

        return keras.saving.get_registered_name(obj)
    except Exception:  # noqa: BLE001 -- not a Keras object
        return None


def _import_one(spec: str):
    return import_user_module(spec, flag="--import", file_name=lambda path: path.stem,
                              what="the module name or the path of the .py file that defines the model's custom classes")


_MISSING_CLASS = re.compile(r"Could not locate (?:class|function) '([\w.>]+)'|Unknown (?:layer|object|class)[^']*'([\w.>]+)'")
_MISSING_MODULE = re.compile(r"'module': '([\w.]+)', 'class_name': '([\w.]+)'")


def _keras_error(p: Path, e: BaseException, imports: tuple[str, ...]) -> BadInput:
    texts = []
    cur: BaseException | None = e
    while cur is not None and len(texts) < 5:
        texts.append(str(cur))
        cur = cur.__cause__ or cur.__context__
    text = "\n".join(texts)
    m = _MISSING_CLASS.search(text)
    if m:
        cls = m.group(1) or m.group(2)
        mod = next((mm.group(1) for mm in _MISSING_MODULE.finditer(text) if mm.group(2) == cls), None)
        where = f" (saved from module '{mod}')" if mod and not mod.startswith("keras") else ""
        tried = f"; --import {', '.join(imports)} did not define it" if imports else ""
        return BadInput(f"{p}: the model uses custom class '{cls}'{where} that Keras cannot find{tried}; pass "
                        f"--import {mod if where else 'MODULE'} (a module on PYTHONPATH or the path of the .py file "
                        "that defines it)")
    if "zip" in text.lower() or "not a valid" in text.lower() or "file signature" in text.lower():
        return BadInput(f"{p}: cannot load this {p.suffix} file ({first_line(e)}); it is not a complete Keras "
                        "archive: copy or download it again")
    return BadInput(f"{p}: cannot load this {p.suffix} file with Keras {_keras_version()} ({first_line(e)}); if it "
                    "uses custom layers pass --import MODULE, else load it where it was written and save it as a "
                    "SavedModel (model.export(dir))")


def _keras_version() -> str:
    try:
        import keras

        return keras.__version__
    except Exception:  # noqa: BLE001
        return "?"


def _keras_source(p: Path, work_dir: Path | None, opts: SourceOptions, require_static: bool) -> Source:
    """Load with Keras 3; a Keras 2 file Keras 3 cannot read is loaded with tf-keras when installed.
    Either way the model is exported once to a SavedModel (cached by the file's sha256)."""

    digest = sha256_file(p)
    custom = import_modules(opts.imports)
    # before the export cache too: an export made once with --trust-model is not reused without it
    check_keras_file(p, trusted=opts.trust_model, provided=custom)
    out = (work_dir or own_dir(p.parent, "keras-exports")) / f".{p.stem}.savedmodel-{digest[:12]}"
    note = out / "edgebench-export.json"
    if not (out / "saved_model.pb").exists():

        with temp_dir(out) as tmp:
            loaded_with = _export_keras(p, custom, opts.imports, tmp, trusted=opts.trust_model)
            (tmp / "edgebench-export.json").write_text(json.dumps({"loaded_with": loaded_with}))
    src = saved_model_source(out, opts, kind="keras", name=p.stem, path=str(p), sha256=digest,
                             require_static=require_static)
    if note.exists():
        src.info.update(json.loads(note.read_text()))
    if src.fixed_shapes and str(src.info.get("loaded_with", "")).startswith(("keras ", "tf-keras ")):
        # Re-trace the Keras model itself at the fixed shapes: re-calling the exported signature keeps
        # its inner traces (a Keras 3 or 2 LSTM's TensorList then has no static element shape to convert)
        static = out.with_name(out.name + "-" + _shape_tag(src.fixed_shapes))
        if not (static / "saved_model.pb").exists():

            with temp_dir(static) as tmp:
                _export_keras(p, custom, opts.imports, tmp, shapes=src.fixed_shapes, trusted=opts.trust_model)
        src.info["static_export"] = str(static)
    return src


def _shape_tag(shapes: dict[str, tuple[int, ...]]) -> str:
    """'b' + a short digest of the fixed shapes: the folder of a Keras model exported at them."""
    text = ";".join(f"{k}:{','.join(map(str, v))}" for k, v in sorted(shapes.items()))
    return "static-" + hashlib.sha256(text.encode()).hexdigest()[:8]


def _export_keras(p: Path, custom: dict[str, Any], imports: tuple[str, ...], tmp: Path,
                  shapes: dict[str, tuple[int, ...]] | None = None, trusted: bool = False) -> str:
    """Export the Keras model to a SavedModel in ``tmp`` (``shapes``: traced at these input shapes,
    keyed by the exported signature's input names; tf-keras: ``keras2_export``). Both loaders run in
    safe mode unless ``trusted`` (--trust-model); a safe-mode refusal is reported, never retried."""

    import keras

    try:
        model = keras.models.load_model(p, compile=False, custom_objects=custom or None, safe_mode=not trusted)
        kw: dict[str, Any] = {}
        if shapes:
            import tensorflow as tf

            names = [getattr(t, "name", None) for t in model.inputs]
            specs = [tf.TensorSpec(shapes.get(n) or shapes[list(shapes)[i]], t.dtype, name=n)
                     for i, (n, t) in enumerate(zip(names, model.inputs))]
            kw["input_signature"] = [specs[0] if len(specs) == 1 else specs]
        export = lambda: model.export(str(tmp), format="tf_saved_model", verbose=False, **kw)  # noqa: E731
        loaded_with = f"keras {keras.__version__}"
    except Exception as e:  # noqa: BLE001 -- zip/h5/json/deserialization errors of all kinds
        if not trusted and safe_mode_refusal(e):
            raise refusal(str(p), f"Keras {keras.__version__} refused it in safe mode ({first_line(e)})") from None
        err = _keras_error(p, e, imports)
        written_by = _written_by_keras(p)
        if "custom class" in str(err) or not (written_by or "").startswith("2."):
            raise err from None
        if not trusted and zipfile.is_zipfile(p):
            raise refusal(str(p), f"written by Keras {written_by}, and Keras {keras.__version__} cannot read it "
                                  f"({first_line(e)}); tf-keras would, but it resolves a .keras archive's names "
                                  "through module namespaces, outside Keras' safe mode",
                          fix=f"pass {TRUST_FLAG} to load it with tf-keras if you trust the file's author, or "
                              "re-save it with Keras 3") from None
        try:
            import tf_keras
        except ImportError:
            raise BadInput(f"{p}: written by Keras {written_by}, and Keras {keras.__version__} cannot read it "
                           f"({first_line(e)}); pip install tf-keras and edgebench loads it with Keras 2") from None
        try:
            with tf_keras_safe_mode(not trusted):   # its legacy .h5 path ignores safe_mode= otherwise
                model = tf_keras.models.load_model(p, compile=False, custom_objects=custom or None)
        except Exception as e2:  # noqa: BLE001
            if not trusted and safe_mode_refusal(e2):
                raise refusal(str(p), f"tf-keras refused it in safe mode ({first_line(e2)})") from None
            legacy = os.environ.get("TF_USE_LEGACY_KERAS", "").lower() in ("1", "true", "yes")
            fix = ("if it uses custom layers pass --import MODULE" if not imports else
                   "the --import module's classes were not accepted by tf-keras: a module written with tf.keras "
                   "defines Keras 3 classes under TensorFlow >= 2.16; run with TF_USE_LEGACY_KERAS=1 so its tf.keras "
                   "is tf-keras (Keras 2)" if not legacy else
                   "the --import module must define the file's custom classes (TF_USE_LEGACY_KERAS=1 is set)")
            raise BadInput(f"{p}: written by Keras {written_by}; neither Keras {keras.__version__} "
                           f"({first_line(e)}) nor tf-keras {tf_keras.__version__} ({first_line(e2)}) can load it; "
                           f"{fix}") from None
        export = lambda: export_tf_keras(model, tmp, shapes)  # noqa: E731
        loaded_with = f"tf-keras {tf_keras.__version__} (Keras 2; Keras {keras.__version__} cannot read this file)"
    try:
        with contextlib.redirect_stdout(io.StringIO()):   # tf-keras prints the exported endpoints
            export()
    except Exception as e:  # noqa: BLE001
        raise BadInput(f"{p}: loaded, but Keras cannot trace it for export ({first_line(e)}); a custom layer's "
                       "call() must be traceable by tf.function (no Python-side state or numpy calls)") from None
    return loaded_with


def _written_by_keras(p: Path) -> str | None:
    """The keras_version recorded in a .h5 (root attribute) or .keras (metadata.json) file."""
    try:
        if zipfile.is_zipfile(p):
            with zipfile.ZipFile(p) as z:
                return str(json.loads(z.read("metadata.json")).get("keras_version") or "") or None
        import h5py

        with h5py.File(p, "r") as f:
            v = f.attrs.get("keras_version")
            return v.decode() if isinstance(v, bytes) else (str(v) if v is not None else None)
    except Exception:  # noqa: BLE001 -- unreadable: the caller reports Keras' own error
        return None


# --------------------------------------------------------------------------- .tflite


def tflite_source(p: Path) -> Source:
    """A .tflite given as a source: its signature (quantized I/O read as float), nothing to convert."""
    sig = tflite_signature(str(p))

    return Source("tflite", p.stem, str(p), None, sha256_file(p), sig, loader="tflite",
                  info={"precision": tflite_precision(inspect(str(p)))})


def tflite_signature(path: str) -> Signature:
    """Input/output names, shapes (dynamic as None) and dtypes of a .tflite's first signature.

    Read by the isolated model-I/O worker (``targets/model_io.py``): building and allocating an
    interpreter for an untrusted model can take gigabytes or crash the runtime, so it never
    happens in this process."""


    refuse_compiled(path, inspect(path))   # missing / truncated / not a flatbuffer / AOT-compiled: one line
    meta, _ = describe_model(path)

    def spec(d):
        dt = np.dtype(d["dtype"])
        if dt in (np.int8, np.uint8, np.int16) and d["scale"]:
            dt = np.dtype(np.float32)
        return TensorSpec(d["name"], tuple(int(x) if x >= 0 else None for x in d["shape_signature"]), dt.name)

    def codes(dets) -> dict[str, tuple[str, float, int]]:
        return {d["name"]: (np.dtype(d["dtype"]).name, float(d["scale"]), int(d["zero_point"])) for d in dets
                if np.dtype(d["dtype"]) in (np.int8, np.uint8, np.int16) and d["scale"]}

    if meta.get("has_signature"):
        # the subgraph's inputs are in the model's positional order; the signature names them
        position = {d["index"]: k for k, d in enumerate(meta["tensor_inputs"])}
        named = sorted(meta["inputs"], key=lambda d: position.get(d["index"], len(position)))
        return Signature(tuple(spec(d) for d in sorted(meta["inputs"], key=lambda d: d["name"])),
                         tuple(spec(d) for d in sorted(meta["outputs"], key=lambda d: d["name"])),
                         order=tuple(d["name"] for d in named), quantized=codes(meta["inputs"]))
    # No signature (e.g. written by the TF1 converter): tensor names, in the model's order.
    return Signature(tuple(spec(d) for d in meta["tensor_inputs"]), tuple(spec(d) for d in meta["tensor_outputs"]),
                     order=tuple(d["name"] for d in meta["tensor_inputs"]), quantized=codes(meta["tensor_inputs"]))


def tflite_variants(paths: list[str], out_dir: Path) -> dict[str, Any]:
    """Several .tflite files as the variants of one run: a manifest-like document.

    Variant keys are the precision read from each file, or ``precision:file-stem`` when two
    files share a precision. ``reference_variant`` is the most precise one (the first given
    among equals): the reference when no --reference SavedModel is given.
    """

    entries = []
    for path in paths:
        p = Path(path)
        if p.suffix != ".tflite":
            raise BadInput(f"{path}: several sources are only for .tflite files (a SavedModel or .keras goes "
                           "alone, or as --reference)")
        info = inspect(str(p))

        refuse_compiled(p, info)
        prec = tflite_precision(info)
        entries.append((p, prec, info))
    seen = Counter(prec for _, prec, _ in entries)
    variants: dict[str, dict[str, Any]] = {}
    for p, prec, _info in entries:
        key = prec if seen[prec] == 1 else f"{prec}:{p.stem}"
        if key in variants:
            raise BadInput(f"{p}: given twice; give each .tflite file once")
        variants[key] = {"precision": prec, "status": "ok", "path": str(p), "bytes": p.stat().st_size,
                         "sha256": sha256_file(p), "requested": True, "given": True, **describe_tflite(p)}
    fp32 = next((v["bytes"] for v in variants.values() if v["precision"] == "fp32"), None)
    for v in variants.values():
        if fp32:
            v["size_reduction_pct"] = round(100.0 * (1 - v["bytes"] / fp32), 2)
    explain_sizes(variants)      # a quantized file not smaller than the fp32 one: where its bytes went
    ref = min(variants, key=lambda k: (PRECISION_RANK.index(variants[k]["precision"])
                                       if variants[k]["precision"] in PRECISION_RANK else len(PRECISION_RANK),
                                       list(variants).index(k)))
    if len(variants) == 1:
        why = (f"{Path(variants[ref]['path']).name} is the only file given, so there is nothing to compare it "
               "against (its drift is against itself); give a second .tflite or --reference SAVEDMODEL")
    else:
        why = (f"{ref} ({Path(variants[ref]['path']).name}) is the most precise of the files given "
               f"({', '.join(variants)}; read from their tensors); --reference SAVEDMODEL compares against "
               "TensorFlow instead")

    check_output_dir(out_dir)
    ensure_dir(out_dir, "choose a writable folder with --out DIR, or run from a writable working folder")
    doc = {"schema_version": 1, "kind": "tflite", "variants": variants, "reference_variant": ref,
           "reference_reason": why,
           "out_dir": str(out_dir), "parity": {"passed": None, "skipped": "no conversion: .tflite sources"}}

    write_json(doc, str(out_dir / "manifest.json"))
    return doc


__all__ = ["DEFAULT_SIGNATURE", "Source", "SourceOptions", "calibration_feed", "choose_loader",
           "finish_tflite", "import_modules", "make_converter", "parse_input_shape",
           "resolve_source", "tflite_signature", "tflite_source", "tflite_variants"]
