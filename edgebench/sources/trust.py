"""What a model file would run, decided before anything of it runs.

Model files travel (hubs, vendors, colleagues, pull requests), so edgebench treats every one as
untrusted: nothing in this module deserializes, unmarshals, imports or executes any part of a
model. It reads the file's *description* and refuses (``BadInput``, exit 2, one line naming what
was found and ``--trust-model``) before a loader touches it:

* ``.keras`` (zip) and ``.h5`` Keras files: the model config (``config.json`` in the zip, the
  ``model_config`` attribute of the HDF5 file, read with ``h5py`` as JSON) is walked for code
  carriers -- a ``Lambda``'s marshalled bytecode (Keras 3 ``__lambda__`` objects, Keras 2
  ``function_type: lambda``), any string that is a base64 marshalled code object or pickle, and
  objects whose class or function a loader would import from a module the *file* names (any
  package outside the Keras family) rather than from ``--import``. The archive itself is bounded
  first (``check_archive``): member count, names that leave the folder (path traversal), sizes.
* SavedModels: the MetaGraph that would be loaded is scanned -- its graph and every function of its
  function library -- for ops with effects outside the model: Python callbacks (``PyFunc``), file
  writes (``WriteFile``, summary writers, ``PrintV2`` to a ``file://`` stream), network ops, and,
  where a loader can reach them, checkpoint writers and reads of anything but the model's own
  assets (``saved_model_ops``).
* Folders edgebench reads back (``--out``, a Keras file's export cache): not one another user owns
  or every user can write to (``unsafe_dir``), where files could be planted or swapped.

``--trust-model`` (``SourceOptions.trust_model``) is the user's consent: the checks are skipped and
the Keras loaders run with ``safe_mode=False``. Without it the Keras loaders also run in safe mode,
and a safe-mode refusal is reported, never retried with a more permissive loader.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import importlib
import json
import os
import re
import stat
import zipfile
from collections import Counter
from pathlib import Path
from typing import Any, Collection, Iterable, Iterator

from edgebench.core.bounded import BOMB_MIN_BYTES, BOMB_RATIO, check_archive, human_bytes, read_member
from edgebench.core.errors import BadInput
from edgebench.core.paths import cache_dir
from edgebench.sources.allowed_ops import ALLOWED_OPS

TRUST_FLAG = "--trust-model"

# Bounds on a Keras archive / HDF5 file, checked before any loader opens it. A .tflite cannot
# exceed 2 GiB (flatbuffer offsets), so a source model twice that size is not a model edgebench can
# convert.
MODEL_MAX_BYTES = 4 * 1024 ** 3
CONFIG_MAX_BYTES = 64 * 1024 ** 2          # config.json / metadata.json / the model_config attribute


def refusal(where: str, found: str, *, fix: str | None = None) -> BadInput:
    """The one-line refusal: where, what was found, and the consent flag."""
    fix = fix or (f"edgebench runs no code from a model file without consent: pass {TRUST_FLAG} only if you "
                  "trust the file's author")
    return BadInput(f"{where}: {found}; {fix}")


# --------------------------------------------------------------------------- Keras files


def read_keras_config(path: str | Path) -> Any | None:
    """The model config of a ``.keras`` archive or a Keras ``.h5`` file, as plain JSON (nothing is
    deserialized); None when the file has none (a weights-only file: Keras reports that itself)."""
    p = Path(path)
    if zipfile.is_zipfile(p):
        check_archive(p, "Keras archive", max_total=MODEL_MAX_BYTES)
        with zipfile.ZipFile(p) as zf:
            if "config.json" not in zf.namelist():
                return None
            raw = read_member(zf, "config.json", CONFIG_MAX_BYTES, p)
            if "metadata.json" in zf.namelist():
                read_member(zf, "metadata.json", CONFIG_MAX_BYTES, p)   # the loaders read it whole
    else:
        raw = _h5_model_config(p)
        if raw is None:
            return None
    try:
        return json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise BadInput(f"{p}: the model config is not valid JSON ({str(exc)[:120]}); copy or download the file "
                       "again") from None


def _h5_model_config(p: Path) -> bytes | None:
    try:
        import h5py

        with h5py.File(p, "r") as f:
            _check_h5_sizes(p, f)
            attr = f.attrs.get("model_config")
    except BadInput:
        raise
    except Exception:  # noqa: BLE001 -- not HDF5 / truncated: the Keras loader reports it in its own words
        return None
    if attr is None:
        return None
    raw = attr.encode() if isinstance(attr, str) else bytes(attr)
    if len(raw) > CONFIG_MAX_BYTES:
        raise BadInput(f"{p}: its model_config is {human_bytes(len(raw))} (edgebench reads at most "
                       f"{human_bytes(CONFIG_MAX_BYTES)}); a crafted file")
    return raw


def _check_h5_sizes(p: Path, f: Any) -> None:
    """Declared dataset sizes of an HDF5 model (metadata only): total and per-dataset inflation."""
    import h5py

    total = 0
    bad: list[str] = []

    def visit(name: str, obj: Any) -> None:
        nonlocal total
        if not isinstance(obj, h5py.Dataset) or bad:
            return
        n = int(obj.size) * obj.dtype.itemsize
        total += n
        if n >= BOMB_MIN_BYTES and obj.compression:
            stored = obj.id.get_storage_size()
            if n > BOMB_RATIO * max(stored, 1):
                bad.append(f"{p}: dataset {name!r} inflates {human_bytes(stored)} to {human_bytes(n)} (more than "
                           f"{BOMB_RATIO}:1, a decompression bomb); ask the file's author for a fresh export")

    f.visititems(visit)
    if bad:
        raise BadInput(bad[0])
    if total > MODEL_MAX_BYTES:
        raise BadInput(f"{p}: its datasets declare {human_bytes(total)}, more than the "
                       f"{human_bytes(MODEL_MAX_BYTES)} edgebench reads from one model file; a crafted file or not an "
                       "edge model (a .tflite holds at most 2 GiB)")


_B64 = re.compile(r"[A-Za-z0-9+/]+={0,2}")


def _marshalled(text: str) -> str | None:
    """What a string is when it is base64 of a marshalled code object or a pickle, else None. Only
    its first bytes are decoded and inspected; nothing is unmarshalled or unpickled."""
    if len(text) < 24:
        return None
    compact = "".join(text[:4096].split())
    if not _B64.fullmatch(compact):
        return None
    try:
        head = base64.b64decode(compact[:32] + "=" * (-len(compact[:32]) % 4))
    except (binascii.Error, ValueError):
        return None
    if len(head) < 16:
        return None
    if head[0] in (0x63, 0xE3):     # marshal TYPE_CODE ('c', with or without FLAG_REF)
        ints = [int.from_bytes(head[i:i + 4], "little") for i in (1, 5, 9)]
        if all(v < 256 for v in ints):    # argcount, posonlyargcount, kwonlyargcount
            return "marshalled Python bytecode"
    if head[0] == 0x80 and 2 <= head[1] <= 5:
        return "a pickled Python object"
    return None


def keras_code(config: Any, provided: Collection[str] = ()) -> list[tuple[str, str]]:
    """(where, what) for every code carrier in a Keras model config, in file order. ``provided``:
    names of custom objects the user's ``--import`` modules define (those are the user's code)."""
    found: list[tuple[str, str]] = []

    def walk(obj: Any, where: str) -> None:
        if isinstance(obj, list):
            for x in obj:
                walk(x, where)
            return
        if isinstance(obj, str):
            kind = _marshalled(obj)
            if kind:
                found.append((where, f"holds {kind}"))
            return
        if not isinstance(obj, dict):
            return
        cls = obj.get("class_name")
        cfg = obj.get("config")
        if isinstance(cls, str) and isinstance(cfg, dict) and isinstance(cfg.get("name"), str):
            where = f"layer {cfg['name']!r} ({cls})"
        if cls == "__lambda__":
            found.append((where, "holds a Python lambda's marshalled bytecode, which runs when the model is loaded"))
            return
        code_keys = {key[:-5] for key, value in obj.items()
                     if key.endswith("_type") and value == "lambda" and key[:-5] in obj}
        for key in sorted(code_keys):
            found.append((where, f"holds a Python lambda's marshalled bytecode ({key}), which runs when the model "
                                 "is loaded"))
        module = obj.get("module")
        names = {cls, str(obj.get("registered_name") or "")} if isinstance(cls, str) else set()
        if cls == "function" and not names & set(provided):
            fn = cfg if isinstance(cfg, str) else str(obj.get("registered_name") or "?")
            found.append((where, f"names a function ({fn!r} of module {module!r}), which a loader resolves by "
                                 "that name and calls; Keras saves its own activations as plain names"))
        elif cls == "Lambda" and (cfg or {}).get("function_type") != "lambda" \
                and "__lambda__" not in json.dumps(cfg)[:4_000_000]:
            found.append((where, "is a Lambda layer: its function is Python code the loader resolves and runs"))
        elif isinstance(cls, str) and isinstance(module, str) and not names & set(provided) \
                and not keras_builtin(module, cls):
            give = "MODULE (the .py file that defines it)" if module == "__main__" else module
            found.append((where, f"uses custom class {cls!r} of module {module!r}, which is not a Keras built-in (by its "
                                 "exact registered name in Keras' public API); a loader would import it from the "
                                 f"module the file names; pass --import {give} (your copy of that code)"))
        if isinstance(obj.get("inbound_nodes"), list) and _constant_strings(obj["inbound_nodes"]):
            found.append((where, "feeds a layer a constant string (_CONSTANT_VALUE), the way a crafted file hands "
                                 "a shell command to a function"))
        for key, value in obj.items():
            if key not in code_keys and key not in ("class_name", "module", "registered_name"):
                walk(value, where)

    walk(config, "the model config")
    return found


# Keras' public API, by exact module name as Keras writes it into a file, and the model classes it
# writes under its private modules. A class loads without consent only when it is an attribute of
# one of these modules (looked up in the module edgebench imports by this name, never the file's).
PUBLIC_MODULES = frozenset({
    "keras", "keras.layers", "keras.initializers", "keras.regularizers", "keras.constraints",
    "keras.optimizers", "keras.optimizers.schedules", "keras.losses", "keras.metrics", "keras.activations",
    "keras.models", "keras.saving", "keras.dtype_policies", "keras.mixed_precision",
})
MODEL_CLASSES = {"keras.src.models.functional": {"Functional"}, "keras.src.models.sequential": {"Sequential"},
                 "keras.src.models.model": {"Model"}, "tf_keras.src.engine.functional": {"Functional"},
                 "tf_keras.src.engine.sequential": {"Sequential"}, "tf_keras.src.engine.training": {"Model"}}


def keras_builtin(module: str, cls: str) -> bool:
    """Is ``cls`` of ``module`` one of Keras' own built-ins (``PUBLIC_MODULES``, ``MODEL_CLASSES``)?"""
    if cls in MODEL_CLASSES.get(module, ()):
        return True
    if module not in PUBLIC_MODULES or not cls.isidentifier():
        return False

    try:
        namespace = importlib.import_module(module)     # Keras' own module, named by this allow-list
    except ImportError:
        return False
    return isinstance(getattr(namespace, cls, None), type)


def _constant_strings(nodes: Any) -> bool:
    """A Keras 2 functional node that hands a layer a constant string: ``["_CONSTANT_VALUE", -1, "...", ...]``."""
    if isinstance(nodes, list):
        for i, x in enumerate(nodes):
            if x == "_CONSTANT_VALUE" and i + 2 < len(nodes) and isinstance(nodes[i + 2], str):
                return True
            if _constant_strings(x):
                return True
    elif isinstance(nodes, dict):
        return any(_constant_strings(v) for v in nodes.values())
    return False


def check_keras_file(path: str | Path, *, trusted: bool, provided: Collection[str] = ()) -> None:
    """Refuse a ``.keras``/``.h5`` file that carries code (module docstring); a no-op with consent.
    The archive and size bounds apply with consent too: they protect memory, not against code."""
    config = read_keras_config(path)
    if trusted or config is None:
        return
    found = keras_code(config, provided)
    if not found:
        return
    where, what = found[0]
    more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
    if what.startswith("uses custom class"):
        # --import is the fix, and the only one: Keras 3 resolves a custom class only from a module
        # imported before the load (its registration), never from the module name the file holds,
        # so --trust-model would fail the same way (issue 45) and is not offered
        raise BadInput(f"{path}: {where}: {what}{more}")
    raise refusal(f"{path}: {where}", what + more)


@contextlib.contextmanager
def tf_keras_safe_mode(enabled: bool) -> Iterator[None]:
    """tf-keras' safe mode around a load: its ``load_model(safe_mode=...)`` reaches only the
    ``.keras`` path, while its legacy ``.h5`` path unmarshals a Lambda unless this scope is set."""
    if not enabled:
        yield
        return
    try:
        from tf_keras.src.saving.serialization_lib import SafeModeScope
    except ImportError:     # pragma: no cover -- a tf-keras without the scope: the config check above stands
        yield
        return
    with SafeModeScope(True):
        yield


def safe_mode_refusal(exc: BaseException) -> bool:
    """Did a Keras loader refuse because of safe mode (a lambda, an unsafe object)?"""
    cur: BaseException | None = exc
    for _ in range(5):
        if cur is None:
            break
        if "safe_mode" in str(cur):
            return True
        cur = cur.__cause__ or cur.__context__
    return False


# --------------------------------------------------------------------------- folders read back


def unsafe_dir(path: str | os.PathLike) -> str | None:
    """Why another local user could plant or swap files in the existing folder ``path`` -- a symlink
    someone else owns, a folder someone else owns, a world-writable folder -- or None. edgebench
    reads back what it wrote into an output folder (manifest.json, the run marker, cached Keras
    exports), so such a folder must be the user's own."""
    p = Path(path)
    me = os.geteuid()
    try:
        st = os.lstat(p)
    except OSError:
        return None                                   # not there yet: edgebench creates it, as the user
    if stat.S_ISLNK(st.st_mode) and st.st_uid not in (me, 0):
        return f"a symlink owned by user {st.st_uid}, not you (uid {me})"
    try:
        st = os.stat(p)
    except OSError:
        return None
    if not stat.S_ISDIR(st.st_mode):
        return None                                   # the writer reports "not a folder" in its words
    if st.st_uid != me and not (st.st_uid == 0 and not st.st_mode & stat.S_IWOTH):
        return f"a folder owned by user {st.st_uid}, not you (uid {me})"
    if st.st_mode & stat.S_IWOTH:
        return "a folder every user can write to"
    return None


def check_output_dir(path: str | os.PathLike, option: str = "--out") -> None:
    """BadInput when ``path`` is ``unsafe_dir``, naming the option and the fix."""
    why = unsafe_dir(path)
    if why:
        raise BadInput(f"{option} {path}: {why}; another user could plant or swap the files edgebench reads back "
                       "from it (manifest.json, cached exports): choose a folder of your own")


def own_dir(preferred: Path, cache_name: str) -> Path:
    """``preferred`` when no other user can plant files in it, else the user's own cache folder
    ``<cache>/<cache_name>`` (a Keras file in a shared /tmp gets its export cached there)."""
    if unsafe_dir(preferred) is None:
        return preferred

    return cache_dir() / cache_name


# --------------------------------------------------------------------------- SavedModels

# Ops with effects outside the model, by what they do. Sources: tensorflow/core/ops/*.cc
# (io_ops, script_ops, summary_ops, logging_ops, dataset_ops, rpc_ops, debug_ops).
PYTHON_OPS = frozenset({"PyFunc", "PyFuncStateless", "EagerPyFunc"})
CHECKPOINT_WRITERS = frozenset({"Save", "SaveV2", "SaveSlices", "MergeV2Checkpoints"})
WRITERS = CHECKPOINT_WRITERS | frozenset({
    "WriteFile", "CreateSummaryFileWriter", "CreateSummaryDbWriter", "WriteSummary", "WriteScalarSummary",
    "WriteHistogramSummary", "WriteImageSummary", "WriteAudioSummary", "WriteRawProtoSummary",
    "WriteGraphSummary", "ImportEvent", "FlushSummaryWriter", "CloseSummaryWriter", "DatasetToTFRecord",
    "ExperimentalDatasetToTFRecord", "SaveDataset", "SaveDatasetV2", "SnapshotDataset", "SnapshotDatasetV2",
    "DistributedSave", "DebugIdentity", "DebugIdentityV2", "DebugIdentityV3", "DebugNanCount",
    "DebugNumericSummary", "DebugNumericSummaryV2", "FileSystemSetConfiguration"})
NETWORK_OPS = frozenset({"Rpc", "TryRpc", "RpcCall", "RpcClient", "RpcServer", "RpcServerRegister",
                         "RpcServerStart", "RpcCheckStatus", "RpcGetValue", "DataServiceDataset",
                         "DataServiceDatasetV2", "DataServiceDatasetV3", "DataServiceDatasetV4",
                         "RegisterDataset", "RegisterDatasetV2"})
# File readers -> the input positions holding the file name(s). Allowed when that name is one of
# the model's own assets (what the loader points at the copy inside the SavedModel folder).
READERS: dict[str, tuple[int, ...]] = {
    "ReadFile": (0,), "MatchingFiles": (0,), "MatchingFilesDataset": (0,),
    "InitializeTableFromTextFile": (1,), "InitializeTableFromTextFileV2": (1,),
    "TextLineDataset": (0,), "TFRecordDataset": (0,), "TFRecordDatasetV2": (0,),
    "FixedLengthRecordDataset": (0,), "FixedLengthRecordDatasetV2": (0,), "CSVDataset": (0,),
    "CSVDatasetV2": (0,), "ExperimentalCSVDataset": (0,), "LMDBDataset": (0,), "ExperimentalLMDBDataset": (0,),
    "LoadDataset": (0,), "LoadAndRemapMatrix": (0,), "GenerateVocabRemapping": (0, 1),
    "RestoreV2": (0,), "Restore": (0,), "RestoreSlice": (0,),
    "SqlDataset": (), "ExperimentalSqlDataset": (), "ReaderRead": (), "ReaderReadV2": (),
    "ReaderReadUpTo": (), "ReaderReadUpToV2": (), "WholeFileReader": (), "WholeFileReaderV2": (),
    "ImmutableConst": (),
}
_IDENTITY = frozenset({"Identity", "IdentityN", "Snapshot", "StopGradient", "PreventGradient", "ReadVariableOp"})


def _strip(ref: str) -> str:
    return ref.lstrip("^").split(":")[0]


def _func_refs(node: Any, library: dict[str, Any]) -> Iterable[str]:
    """Functions a NodeDef calls: ``f``/branch/body attributes, lists of them, or its op by name."""
    if node.op in library:
        yield node.op
    for attr in node.attr.values():
        if attr.HasField("func") and attr.func.name:
            yield attr.func.name
        elif attr.HasField("list"):
            for f in attr.list.func:
                yield f.name


def _closure(start: Iterable[str], edges: dict[str, set[str]]) -> set[str]:
    seen: set[str] = set()
    todo = list(start)
    while todo:
        x = todo.pop()
        if x in seen:
            continue
        seen.add(x)
        todo.extend(edges.get(x, ()))
    return seen


# Collections whose ops the loaders run on load (tf.compat.v1 loader: main op / legacy init op; table
# and local initializers), beside every signature's outputs and the saver's restore op.
_INIT_COLLECTIONS = ("saved_model_main_op", "legacy_init_op", "main_op", "init_op", "local_init_op",
                     "table_initializer")


def saved_model_ops(mg: Any, model_dir: str | Path) -> list[tuple[str, str, str]]:
    """(op, what it does, where) for every side-effecting op of the MetaGraph ``mg``.

    Python callbacks, file writes and network ops are refused wherever they are: every graph node
    and every function of the function library. Checkpoint writers and file readers count only where
    a loader can reach them -- from any signature's outputs, the saver's restore op, the init
    collections, and every function the object graph restores (followed through calls, branches,
    bodies) -- so the saver's own save function, a stale second saver or a training graph's input
    pipeline left in a TF1 export do not make a model untrusted."""
    graph = mg.graph_def
    library = {f.signature.name: f for f in graph.library.function}
    nodes = {n.name: n for n in graph.node}
    inputs = {n.name: {_strip(i) for i in n.input} for n in graph.node}
    roots = {_strip(t.name) for sd in mg.signature_def.values() for t in sd.outputs.values()}
    if mg.HasField("saver_def"):
        roots.add(_strip(mg.saver_def.restore_op_name))
    for key in _INIT_COLLECTIONS:
        col = mg.collection_def.get(key)
        if col is not None:
            roots |= {_strip(v) for v in col.node_list.value}
    reached = _closure([r for r in roots if r in nodes], inputs)
    calls = {name: {r for n in f.node_def for r in _func_refs(n, library)} for name, f in library.items()}
    run_fns = _closure({r for name in reached for r in _func_refs(nodes[name], library)}
                       | {k for k in mg.object_graph_def.concrete_functions if k in library}, calls)
    assets = _asset_names(mg)
    if mg.HasField("saver_def") and mg.saver_def.filename_tensor_name:
        assets.add(_strip(mg.saver_def.filename_tensor_name))   # the loader feeds it the model's variables
    bound = _bound_args(mg, library)
    root = Path(model_dir).resolve()
    # A function called from the graph with a model file (the saver's restore: saver_filename) gets
    # that argument as a model file too (TF2's __inference__traced_restore reads its prefix so).
    for node in graph.node:
        callee = library.get(node.attr["f"].func.name) if "f" in node.attr else None
        if callee is None:
            continue
        args = [a.name for a in callee.signature.input_arg]
        data = [i for i in node.input if not i.startswith("^")]
        for arg, ref in zip(args, data):
            if _graph_source(ref, nodes, assets, root):
                bound.setdefault(callee.signature.name, {})[arg] = "asset"
    found: list[tuple[str, str, str]] = []
    for name, node in nodes.items():
        what = _effect(node, name not in reached, lambda ref: _graph_source(ref, nodes, assets, root)) \
            or _not_allowed(node.op, library)
        if what:
            found.append((node.op, what, "the graph"))
    for fname, f in library.items():
        local = {n.name: n for n in f.node_def}
        args = [a.name for a in f.signature.input_arg]
        for node in f.node_def:
            what = _effect(node, fname not in run_fns,
                           lambda ref: _function_source(ref, local, args, bound.get(fname, {}), nodes, assets, root)) \
                or _not_allowed(node.op, library)
            if what:
                found.append((node.op, what, f"function {fname}"))
    return found


NOT_ALLOWED = "not on edgebench's list of pure tensor ops"


def _not_allowed(op: str, library: dict[str, Any]) -> str | None:
    """The allow-list (``sources/allowed_ops.py``): an op neither on it nor a function of the model's
    own library is refused, whatever it does -- edgebench does not guess what an unknown op does."""
    if op in ALLOWED_OPS or op in library:
        return None
    from tensorflow.python.framework import op_def_registry  # heavy: TensorFlow is loaded by now anyway

    if op_def_registry.get(op) is None:
        return None        # an op TensorFlow does not know: its loader refuses it, naming it (nothing runs)
    return NOT_ALLOWED


def _asset_names(mg: Any) -> set[str]:
    """Graph tensors the loader feeds with a path inside the SavedModel's assets/ folder."""
    names = {_strip(a.tensor_info.name) for a in mg.asset_file_def}
    col = mg.collection_def.get("asset_filepaths")           # tf.compat.v1.GraphKeys.ASSET_FILEPATHS
    if col is not None:
        names |= {_strip(v) for v in col.node_list.value}
    col = mg.collection_def.get("saved_model_assets")        # TF1 Builder: AssetFileDef protos
    if col is not None and col.any_list.value:
        from tensorflow.core.protobuf import meta_graph_pb2

        for value in col.any_list.value:
            asset = meta_graph_pb2.AssetFileDef()
            try:
                asset.ParseFromString(value.value)
            except Exception:  # noqa: BLE001 -- DecodeError: not an asset, so nothing is allowed by it
                continue
            names.add(_strip(asset.tensor_info.name))
    return names


def _bound_args(mg: Any, library: dict[str, Any]) -> dict[str, dict[str, str]]:
    """function -> {captured argument name: object-graph kind ('asset', 'constant:NODE', ...)}: a
    captured argument is one of the last ``len(bound_inputs)`` inputs of a concrete function."""
    og = mg.object_graph_def
    out: dict[str, dict[str, str]] = {}
    for fname, cf in og.concrete_functions.items():
        if fname not in library or not cf.bound_inputs:
            continue
        args = [a.name for a in library[fname].signature.input_arg]
        tail = args[len(args) - len(cf.bound_inputs):]
        kinds = {}
        for arg, idx in zip(tail, cf.bound_inputs):
            obj = og.nodes[idx] if 0 <= idx < len(og.nodes) else None
            kind = obj.WhichOneof("kind") if obj is not None else None
            kinds[arg] = f"constant:{obj.constant.operation}" if kind == "constant" else str(kind)
        out[fname] = kinds
    return out


def _inside(value: bytes | str, root: Path) -> bool:
    text = value.decode("utf-8", "replace") if isinstance(value, bytes) else value
    try:
        return Path(text).is_absolute() and Path(text).resolve().is_relative_to(root)
    except (OSError, ValueError):
        return False


def _const_path_ok(node: Any, root: Path) -> bool:
    vals = list(node.attr["value"].tensor.string_val) if "value" in node.attr else []
    return bool(vals) and all(_inside(v, root) for v in vals)


def _graph_source(ref: str, nodes: dict[str, Any], assets: set[str], root: Path, depth: int = 0) -> bool:
    """Is graph tensor ``ref`` a file name inside the model (an asset, or a constant path into the
    model folder), following identity-like ops?"""
    name = _strip(ref)
    if name in assets:
        return True
    node = nodes.get(name)
    if node is None or depth > 32:
        return False
    if node.op == "Const":
        return _const_path_ok(node, root)
    if node.op in _IDENTITY and node.input:
        if node.op == "ReadVariableOp":     # a variable assigned from an asset placeholder (TF2 graphs)
            src = _strip(node.input[0])
            assigns = [n for n in nodes.values() if n.op == "AssignVariableOp" and len(n.input) > 1
                       and _strip(n.input[0]) == src]
            return bool(assigns) and all(_graph_source(n.input[1], nodes, assets, root, depth + 1) for n in assigns)
        return _graph_source(node.input[0], nodes, assets, root, depth + 1)
    return False


def _function_source(ref: str, local: dict[str, Any], args: list[str], bound: dict[str, str],
                     nodes: dict[str, Any], assets: set[str], root: Path, depth: int = 0) -> bool:
    name = _strip(ref)
    if name in args:
        kind = bound.get(name, "")
        if kind == "asset":
            return True
        if kind.startswith("constant:"):
            return _graph_source(kind.split(":", 1)[1], nodes, assets, root)
        return False
    node = local.get(name)
    if node is None or depth > 32:
        return False
    if node.op == "Const":
        return _const_path_ok(node, root)
    if node.op in _IDENTITY - {"ReadVariableOp"} and node.input:
        return _function_source(node.input[0], local, args, bound, nodes, assets, root, depth + 1)
    return False


def _effect(node: Any, unreached: bool, is_model_file: Any) -> str | None:
    """What ``node`` does outside the model, or None (``unreached``: no loader runs it)."""
    op = node.op
    if op in PYTHON_OPS:
        return "runs a Python function"
    if unreached and (op in CHECKPOINT_WRITERS or op in READERS):
        return None
    if op.startswith("Debug") and op in WRITERS:
        urls = list(node.attr["debug_urls"].list.s) if "debug_urls" in node.attr else []
        return "writes debug dumps" if urls else None
    if op in WRITERS:
        return "writes files"
    if op == "PrintV2":
        stream = node.attr["output_stream"].s.decode("utf-8", "replace") if "output_stream" in node.attr else ""
        return f"writes to {stream}" if stream.startswith("file://") else None
    if op in NETWORK_OPS:
        return "talks to the network"
    if op == "DecodeProtoV2":
        src = node.attr["descriptor_source"].s.decode("utf-8", "replace") if "descriptor_source" in node.attr else ""
        return None if src in ("", "local://") else "reads a protobuf descriptor file"
    if op in READERS:
        positions = READERS[op]
        if positions and all(i < len(node.input) and is_model_file(node.input[i]) for i in positions):
            return None
        return "reads files outside the model"
    return None


def check_saved_model(mg: Any, model_dir: str | Path, *, trusted: bool) -> None:
    """Refuse a SavedModel whose graph could act outside the model (see ``saved_model_ops``); the
    refusal names the ops (at most five kinds) and the flag. A no-op with consent."""
    if trusted:
        return
    found = saved_model_ops(mg, model_dir)
    if not found:
        return
    counts = Counter((op, what) for op, what, _ in found)
    first_where = {}
    for op, what, where in found:
        first_where.setdefault((op, what), where)
    parts = [f"{op} ({what}{'' if n == 1 else f', {n}x'}; in {first_where[(op, what)]})"
             for (op, what), n in list(counts.items())[:5]]
    more = f" and {len(counts) - 5} more kinds" if len(counts) > 5 else ""
    kinds = ("ops with effects outside the model" if all(w != NOT_ALLOWED for _o, w, _ in found) else
             "ops that are not pure tensor ops" if all(w == NOT_ALLOWED for _o, w, _ in found) else
             "ops with effects outside the model or not pure tensor ops")
    raise refusal(str(model_dir), f"the SavedModel's graph holds {kinds}, which would run when TensorFlow loads or "
                                  f"calls it: {', '.join(parts)}{more}")


__all__ = ["CONFIG_MAX_BYTES", "MODEL_MAX_BYTES", "TRUST_FLAG", "check_keras_file", "check_output_dir", "own_dir",
           "check_saved_model", "keras_code", "read_keras_config", "refusal", "safe_mode_refusal", "saved_model_ops",
           "tf_keras_safe_mode", "unsafe_dir"]
