"""A SavedModel, read and called: its signatures from saved_model.pb (loading nothing), a
tf.compat.v1 session for TF1 graphs, one signature as a callable (prepare / invoke / fetch), and
``run_tf`` -- the TensorFlow reference outputs of every sample. Below ``sources`` (which decides how
a model is loaded) and the TensorFlow target (which times these calls)."""

from __future__ import annotations

import contextlib
import logging
import time
from pathlib import Path
from typing import Any

import numpy as np

from edgebench.core.errors import BadInput, first_line
from edgebench.model.inputs import InputSet, Signature, TensorSpec, cast_to_signature

DEFAULT_SIGNATURE = "serving_default"
SERVE_TAG = "serve"


def read_saved_model(p: Path):
    from tensorflow.core.protobuf import saved_model_pb2

    sm = saved_model_pb2.SavedModel()
    pb, pbtxt = p / "saved_model.pb", p / "saved_model.pbtxt"
    try:
        if pb.exists():
            sm.ParseFromString(pb.read_bytes())
        else:
            from google.protobuf import text_format

            text_format.Parse(pbtxt.read_text(), sm)
    except Exception as e:  # noqa: BLE001 -- DecodeError/ParseError/OSError
        raise BadInput(f"{p}: saved_model.pb is not a readable SavedModel protobuf ({first_line(e)}); the copy "
                       "is probably truncated: copy or download the whole folder again") from None
    if not sm.meta_graphs:
        raise BadInput(f"{p}: the SavedModel holds no MetaGraph; copy or download the whole folder again")
    return sm


def not_a_saved_model(p: Path) -> BadInput:
    nested = sorted(x.parent for x in p.rglob("saved_model.pb"))[:3] if p.is_dir() else []
    hint = (f"; found one in {nested[0]}: pass that folder" if nested else
            "; point at the folder that holds saved_model.pb and variables/ (or export one with "
            "tf.saved_model.save(obj, dir) / keras model.export(dir))")
    return BadInput(f"{p}: folder is not a SavedModel (no saved_model.pb){hint}")


def pick_meta_graph(sm, key: str):
    """The 'serve' MetaGraph, else the first one holding the signature."""
    graphs = list(sm.meta_graphs)
    for mg in graphs:
        if SERVE_TAG in mg.meta_info_def.tags:
            return mg
    return next((mg for mg in graphs if key in mg.signature_def), graphs[0])


def tensor_specs(infos, path: Path, key: str) -> tuple[TensorSpec, ...]:
    import tensorflow as tf

    out = []
    for name in sorted(infos):
        ti = infos[name]
        if ti.WhichOneof("encoding") != "name":
            raise BadInput(f"{path}: signature '{key}' tensor '{name}' is a sparse/composite tensor, which TFLite "
                           "cannot take as input or output; pick another signature with --signature")
        shape = () if ti.tensor_shape.unknown_rank else tuple(
            None if d.size < 0 else int(d.size) for d in ti.tensor_shape.dim)
        out.append(TensorSpec(name, shape, tf.dtypes.as_dtype(ti.dtype).name))
    return tuple(out)


def signature_keys(mg) -> list[str]:
    return sorted(k for k in mg.signature_def if not k.startswith("__"))


def read_signature(p: Path, key: str = DEFAULT_SIGNATURE):
    """(Signature, meta graph, signature def) of a SavedModel folder, from saved_model.pb alone."""
    if not (p / "saved_model.pb").exists() and not (p / "saved_model.pbtxt").exists():
        raise not_a_saved_model(p)
    sm = read_saved_model(p)
    mg = pick_meta_graph(sm, key)
    if key not in mg.signature_def:
        keys = signature_keys(mg)
        if not keys:
            raise BadInput(f"{p}: SavedModel has no '{key}' signature (it has no serving signatures at all); "
                           "edgebench needs one: ask the model's author for an export with signatures, or "
                           "wrap it yourself (docs/sources.md, Models from the wild)")
        raise BadInput(f"{p}: SavedModel has no '{key}' signature (has: {', '.join(keys)}); pick one with "
                       f"--signature {keys[0]}")
    sd = mg.signature_def[key]
    sig = Signature(tensor_specs(sd.inputs, p, key), tensor_specs(sd.outputs, p, key),
                    order=positional_order(mg, set(sd.inputs)))
    return sig, mg, sd


def positional_order(mg, names: set[str]) -> tuple[str, ...] | None:
    """The positional order of a signature's inputs, from the functions saved with it: a function
    whose positional arguments are TensorSpecs named exactly the signature's inputs (a Keras
    export's ``serve``/``__call__``) gives it; None when none does, or two disagree."""
    if len(names) < 2:
        return tuple(names) or None
    try:
        from tensorflow.python.saved_model import nested_structure_coder
    except ImportError:           # pragma: no cover -- TF without the private coder
        return None
    found = set()
    for fn in mg.object_graph_def.concrete_functions.values():
        try:
            args, _kwargs = nested_structure_coder.decode_proto(fn.canonicalized_input_signature)
        except Exception:  # noqa: BLE001 -- an input signature this TF cannot decode tells nothing
            continue
        flat = list(args[0]) if len(args) == 1 and isinstance(args[0], (list, tuple)) else list(args)
        got = tuple(getattr(s, "name", None) for s in flat)
        if len(got) == len(names) and set(got) == names:
            found.add(got)
    return next(iter(found)) if len(found) == 1 else None


def saved_model_signature(saved_model_dir: str | Path, signature_key: str = DEFAULT_SIGNATURE) -> Signature:
    """The declared signature of a SavedModel (reads saved_model.pb; loads nothing)."""
    return read_signature(Path(saved_model_dir), signature_key)[0]


@contextlib.contextmanager
def quiet_v1():
    """Silence TensorFlow's deprecation log lines for the tf.compat.v1 APIs the graph loader uses
    (every call would print 'load (from ...) is deprecated' and freezing advice)."""

    from tensorflow.python.util import deprecation

    logger = logging.getLogger("tensorflow")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        with deprecation.silence():
            yield
    finally:
        logger.setLevel(level)


def graph_session(model_dir: str | Path, tags: tuple[str, ...] = ("serve",), device: str | None = None):
    """A tf.compat.v1 session holding the SavedModel's MetaGraph with its variables restored:
    (session, meta graph def)."""
    import tensorflow as tf

    g = tf.Graph()
    sess = tf.compat.v1.Session(graph=g, config=tf.compat.v1.ConfigProto(allow_soft_placement=True))
    try:
        with g.as_default(), g.device(device), quiet_v1():
            mg = tf.compat.v1.saved_model.loader.load(sess, list(tags), str(model_dir))
    except Exception:
        sess.close()
        raise
    return sess, mg


class SignatureFunction:
    """One signature of a SavedModel: ``prepare`` builds a call's inputs (ahead of a timed loop),
    ``invoke`` runs it leaving the outputs where they are, ``fetch`` runs it and returns numpy."""

    def __init__(self, model_dir: str | Path, *, signature_key: str = "serving_default", loader: str = "tf2",
                 tags: tuple[str, ...] = ("serve",), device: str | None = None) -> None:
        import tensorflow as tf

        self._tf = tf
        self.loader = loader
        self.device = device
        if loader == "graph":
            self._sess, mg = graph_session(model_dir, tags, device)
            sd = mg.signature_def[signature_key]
            self._feeds = {k: v.name for k, v in sd.inputs.items()}
            self._fetches = {k: v.name for k, v in sd.outputs.items()}
            g = self._sess.graph
            self._targets = sorted({g.get_tensor_by_name(n).op for n in self._fetches.values()}, key=lambda o: o.name)
        else:
            with self._placed():
                # the loaded object stays referenced: its variables are the signature's state (VariableState)
                self._obj = tf.saved_model.load(str(model_dir), tags=list(tags))
                self._fn = self._obj.signatures[signature_key]

    def _placed(self):
        return self._tf.device(self.device) if self.device else contextlib.nullcontext()

    def prepare(self, arrays: dict[str, np.ndarray]) -> dict[Any, Any]:
        if self.loader == "graph":
            return {self._feeds[k]: v for k, v in arrays.items()}
        with self._placed():
            return {k: self._tf.constant(v) for k, v in arrays.items()}

    def invoke(self, prepared: dict[Any, Any]) -> None:
        if self.loader == "graph":
            self._sess.run(self._targets, prepared)   # ops as targets: outputs are not copied out
        else:
            with self._placed():
                self._fn(**prepared)

    def fetch(self, prepared: dict[Any, Any]) -> dict[str, np.ndarray]:
        if self.loader == "graph":
            return self._sess.run(self._fetches, prepared)
        with self._placed():
            res = self._fn(**prepared)
        return {k: v.numpy() for k, v in res.items()}  # .numpy() syncs the device


# Ops by which a graph changes a variable while it runs: a signature containing one keeps state
# between calls (a Keras stateful=True layer, a streaming model's ring buffer).
ASSIGN_OPS = ("AssignVariableOp", "AssignAddVariableOp", "AssignSubVariableOp", "Assign", "AssignAdd", "AssignSub")


class VariableState:
    """The state a SavedModel signature keeps in its variables, and the way back to the initial
    state -- the values the variables had when the model was loaded (what the converter also
    writes into a .tflite's init subgraph). ``stateful`` is False for a signature that assigns no
    variable; then ``restore`` does nothing. Restoring re-assigns every variable whose value
    differs from its loaded value (checked on each call, so a variable the graph changes only
    sometimes is never missed)."""

    def __init__(self, fn: SignatureFunction) -> None:
        self._fn = fn
        self.variables: list[Any] = []
        self.restores = 0
        if fn.loader == "graph":
            import tensorflow as tf

            g = fn._sess.graph  # noqa: SLF001 -- the session is the graph loader's own
            ops = {n.op for n in g.as_graph_def().node} | {
                n.op for f in g.as_graph_def().library.function for n in f.node_def}
            if any(op in ASSIGN_OPS for op in ops):
                self.variables = list(g.get_collection(tf.compat.v1.GraphKeys.GLOBAL_VARIABLES))
                self._initial = fn._sess.run(self.variables) if self.variables else []  # noqa: SLF001
        else:
            gd = fn._fn.graph.as_graph_def()  # noqa: SLF001
            ops = {n.op for n in gd.node} | {n.op for f in gd.library.function for n in f.node_def}
            if any(op in ASSIGN_OPS for op in ops):
                self.variables = list(fn._fn.variables)  # noqa: SLF001
                self._initial = [v.numpy() for v in self.variables]

    @property
    def stateful(self) -> bool:
        return bool(self.variables)

    def restore(self) -> None:
        if not self.variables:
            return
        fn = self._fn
        if fn.loader == "graph":
            now = fn._sess.run(self.variables)  # noqa: SLF001
            for v, cur, init in zip(self.variables, now, self._initial):
                if not np.array_equal(cur, init):
                    v.load(init, fn._sess)  # noqa: SLF001
        else:
            for v, init in zip(self.variables, self._initial):
                if not np.array_equal(v.numpy(), init):
                    v.assign(init)
        self.restores += 1

    def record(self, rule) -> dict[str, Any] | None:
        """A row's ``state`` for the TF reference (None: the signature keeps no state)."""
        if not self.stateful:
            return None
        streams = rule is not None and rule.streams
        return {"kind": "tf_variables", "ops": [f"{len(self.variables)} TF variables"], "variables": len(self.variables),
                "rule": "streams" if streams else "independent",
                "handling": ("variables restored to their loaded values before "
                             + ("each stream's first window; state carried between its windows" if streams
                                else "each sample's outputs") + "; timed loop keeps state")}


def outputs_by_rule(fn: SignatureFunction, signature: Signature, ds: InputSet, batch: int | None, rule=None,
                    state: VariableState | None = None, first_ms: list | None = None) -> dict[str, np.ndarray]:
    """Outputs of every sample: name -> [N, ...]. A stateless signature runs in batches of
    ``batch`` when its inputs allow; a stateful one (``state``) runs one sample at a time and starts
    from the loaded state where ``rule`` (``edgebench.model.state_rule.StateRule``; None: independent)
    says a sample or stream starts. ``first_ms`` receives the first call's time."""

    all_batched = all(t.batched for t in signature.inputs)
    fixed_one = any(t.shape and t.shape[0] == 1 for t in signature.inputs)
    stateful = state is not None and state.stateful
    step = 1 if (not all_batched or fixed_one or stateful) else (batch or ds.n)
    outs: dict[str, list[np.ndarray]] = {}
    for i in range(0, ds.n, step):
        if stateful and (rule is None or rule.resets_before(i)):
            state.restore()
        feed = {t.name: ds.arrays[t.name][i : i + step] if t.batched else ds.arrays[t.name][i]
                for t in signature.inputs}
        t0 = time.perf_counter_ns()
        got = fn.fetch(fn.prepare(feed))
        if first_ms is not None and not first_ms:
            first_ms.append((time.perf_counter_ns() - t0) / 1e6)
        for k, v in got.items():
            out_spec = next((o for o in signature.outputs if o.name == k), None)
            if step == 1 and out_spec is not None and not out_spec.batched:
                v = v[None, ...]
            outs.setdefault(k, []).append(v)
    return {k: np.concatenate(v, axis=0) for k, v in outs.items()}


def run_tf(saved_model_dir: Path, signature: Signature, ds: InputSet, batch: int | None = None, *,
           signature_key: str = "serving_default", loader: str = "tf2",
           tags: tuple[str, ...] = ("serve",), rule=None) -> dict[str, np.ndarray]:
    """Outputs of one SavedModel signature for every sample: name -> [N, ...] (TF2 or graph
    loader), a stateful signature's following the state ``rule`` (``outputs_by_rule``)."""
    sig_fn = SignatureFunction(saved_model_dir, signature_key=signature_key, loader=loader, tags=tags)
    return outputs_by_rule(sig_fn, signature, cast_to_signature(ds, signature), batch, rule, VariableState(sig_fn))
