"""PyTorch sources: a saved ``torch.export`` program (``.pt2``) or ``--torch MODULE:FACTORY``, as
the same ``Source`` every later stage reads, converted to FP32 ``.tflite`` by litert-torch.

``resolve_any`` is the one entry point of the conversion floor and the workflows: a ``.pt2`` SRC
or ``SourceOptions.torch`` gives a PyTorch ``Source`` (``kind`` "torch", ``loader`` "torch",
``saved_model_dir`` None); anything else goes to ``sources.resolve_source`` unchanged.

* **Signature**: input names are the model's (a factory module's ``forward`` parameters, a
  program's user inputs) and so are the converted ``.tflite``'s: litert-torch is given the sample
  inputs by keyword. Shapes: a program records them; a factory module needs ``--input-shape
  NAME:1,3,32,32`` for each input (batch first, batch 1, in the module's own NCHW layout). Outputs
  are ``output_0``... (litert-torch's names), their shapes from one forward on zeros.
* **``--channels-last``**: the ``.tflite`` takes and returns NHWC (``litert_torch.to_channel_last_io``
  on every input and output of rank >= 3): no leading TRANSPOSE, and delegates get their native
  layout. The InputSet, the data and the signature are then NHWC; the PyTorch reference transposes.
* **What runs**: ``--torch`` imports the module and calls the factory -- user code, by explicit
  request, as ``--import`` does. A ``.pt2`` is a serialized graph plus weights; ``torch.export.load``
  (torch 2.13) reads plain tensors as raw bytes but unpickles what the archive marks as pickled
  (tensor-subclass weights with ``weights_only=False``, custom/opaque constants with
  ``pickle.loads``), which can run code; an AOTInductor package inside it is native code. So a
  ``.pt2`` is read before it is loaded (``check_pt2``): without ``--trust-model`` every member the
  loader would unpickle -- named as torch names it, read through torch's own archive reader -- must
  pass PyTorch's own restricted unpickler (``torch.load(..., weights_only=True)``: tensors, storages,
  plain containers, no callables), and archives holding custom/opaque objects, compiled code, the
  older whole-pickle format, or anything that makes torch read another member than the one checked
  (a payload name that is absolute, ``..`` or nested; two roots; names equal but for case) are
  refused (docs/security.md).
* **Identity** (``sha256``): the ``.pt2`` file's; for a factory, the digest of the module's class
  name and every weight and buffer (``targets.torch_ref.state_digest``).

Integer precisions come from the FP32 file through ai-edge-quantizer (``quant.aeq``), with the
calibration data; the FP32 parity check and the drift reference are PyTorch's own outputs on the
same InputSet (``targets.torch_ref``).
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import re
import warnings
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

from edgebench.core.bounded import check_archive, human_bytes
from edgebench.core.errors import BadInput, PrecisionFailed, first_line
from edgebench.core.fingerprint import sha256_file
from edgebench.model.inputs import InputSet, Signature, TensorSpec
from edgebench.model.tflite_rewrite import rename_tensors
from edgebench.sources.resolve import Source, SourceOptions, resolve_source
from edgebench.sources.trust import CONFIG_MAX_BYTES, MODEL_MAX_BYTES, refusal
from edgebench.targets.torch_ref import INSTALL, TorchSpec, call, load_model, require_torch, run_torch, state_digest

LITERT_TORCH_TESTED = "0.10.0"
TORCH_SUFFIX = ".pt2"


def torch_spec(src: str, options: SourceOptions) -> TorchSpec | None:
    """The PyTorch source a command was given, or None (SRC is something else)."""
    if options.torch:
        return TorchSpec("factory", options.torch, options.channels_last)
    if str(src).endswith(TORCH_SUFFIX):
        return TorchSpec("pt2", str(src), options.channels_last)
    return None


def resolve_any(src: str, *, size: str = "tiny", work_dir: Path | None = None, seed: int = 0,
                options: SourceOptions | None = None, require_static: bool = True) -> Source:
    """``sources.resolve_source``, plus PyTorch sources (a ``.pt2`` SRC or ``--torch``)."""
    opts = options or SourceOptions()
    spec = torch_spec(src, opts)
    if spec is None:
        if opts.channels_last:
            raise BadInput("--channels-last sets the layout of a PyTorch model's converted I/O; give a .pt2 or "
                           "--torch MODULE:FACTORY (or drop the flag)")
        return resolve_source(src, size=size, work_dir=work_dir, seed=seed, options=opts,
                              require_static=require_static)
    if spec.kind == "pt2" and not Path(src).is_file():
        raise BadInput(f"{src}: no such file; give a torch.export program saved with torch.export.save")
    if spec.kind == "pt2":
        check_pt2(src, trusted=opts.trust_model)
    return torch_source(spec, opts)


# The payload names torch.export.save writes (``weight_0``, ``tensor_0``, ``custom_obj_0``...): one
# plain component, so ``os.path.join(folder, name)`` (torch's join) stays inside ``folder``.
_PAYLOAD_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")


def _plain_member_name(name: Any) -> bool:
    """A payload name torch joins to its own folder: one component of letters, digits, ``_ . -``, not
    starting with a dot -- no leading '/', no '..', no backslash, no folder, nothing outside ASCII."""
    return isinstance(name, str) and _PAYLOAD_NAME.fullmatch(name) is not None


_TRUST_FIX = "re-save it with torch.export.save(), or pass --trust-model if you trust its author"


def _pt2_root(path: str | Path, names: list[str]) -> str:
    """The archive folder torch's reader (``PyTorchStreamReader``) reads: the first member's top
    folder; refused when a member lies outside it (a second root, a top-level file) -- torch either
    reads another root than a check of "the" root would, or fails and ``torch.export.load`` falls back
    to the older format, which it unpickles whole."""
    first = names[0] if names else ""
    if "/" not in first:
        raise refusal(str(path), f"member {first!r} lies at the top of the archive, outside any folder: torch's "
                                 "reader then fails and torch.export.load falls back to the older format, which it "
                                 "unpickles whole", fix=_TRUST_FIX)
    root = first.split("/", 1)[0] + "/"
    outside = [n for n in names if not n.startswith(root)]
    if outside:
        roots = sorted({n.split("/", 1)[0] + ("/" if "/" in n else "") for n in names})
        raise refusal(str(path), f"{len(roots)} archive roots ({', '.join(repr(r) for r in roots[:3])}): member "
                                 f"{outside[0]!r} lies outside {root!r}, the folder torch reads (its first member's); "
                                 "a check of one root is not a check of what loads", fix=_TRUST_FIX)
    return root


def check_pt2(path: str | Path, *, trusted: bool) -> None:
    """Refuse a ``.pt2`` whose loading could run code (module docstring), before ``torch.export.load``
    sees it; a no-op with consent except for the archive's size and path bounds.

    The members checked are the ones torch 2.13's loader (``torch.export.pt2_archive._package``)
    reads, named as it names them and read through its own reader (``torch._C.PyTorchFileReader``):
    the bytes checked are the bytes that load. That reader looks names up ignoring case and takes
    one of two equal names, so an archive whose names collide that way is refused too."""
    torch = require_torch(f"the PyTorch source {path}")     # the missing extra is the first thing to fix
    infos = check_archive(path, ".pt2 archive", max_total=MODEL_MAX_BYTES)
    if trusted:
        return
    from torch.export.pt2_archive import constants as c

    root = _pt2_root(path, [i.filename for i in infos])
    try:
        reader = torch._C.PyTorchFileReader(str(path))     # noqa: SLF001 -- the reader torch.export.load uses
        records = list(reader.get_all_records())
    except (RuntimeError, UnicodeDecodeError) as e:
        raise refusal(str(path), f"torch's own archive reader cannot read it ({first_line(e)[:160]}), and "
                                 "torch.export.load then falls back to the older format, which it unpickles whole",
                      fix=_TRUST_FIX) from None
    seen: dict[str, str] = {}
    for r in records:
        other = seen.setdefault(r.lower(), r)
        if other is not r:
            raise refusal(str(path), f"members {root + other!r} and {root + r!r} have the same name but for case: torch's "
                                     "reader looks names up ignoring case, so the member that loads need not be the "
                                     "one checked", fix=_TRUST_FIX)
        if r.lower().startswith(c.AOTINDUCTOR_DIR):
            raise refusal(str(path), f"{r}: an AOTInductor package (compiled native code the loader runs)")
    if c.ARCHIVE_VERSION_PATH not in seen:
        raise refusal(str(path), "an archive without 'archive_version' (torch.export's older format, which "
                                 "torch unpickles whole)", fix="re-save it with torch.export.save() from a current "
                                                               "torch, or pass --trust-model if you trust its author")

    def read(name: str, limit: int) -> bytes:
        try:
            size = reader.get_record_size(name)
            if size > limit:
                raise BadInput(f"{path}: {root + name} declares {human_bytes(size)} (edgebench reads at most "
                               f"{human_bytes(limit)} of it); a crafted archive")
            return bytes(reader.get_record(name))
        except RuntimeError as e:
            raise BadInput(f"{path}: member {root + name!r} cannot be read ({first_line(e)[:120]}); re-save the "
                           "program with torch.export.save()") from None

    checked: set[str] = set()

    def restricted(name: str, what: str) -> None:
        if name.lower() in checked:
            return
        checked.add(name.lower())
        try:
            torch.load(io.BytesIO(read(name, MODEL_MAX_BYTES)), weights_only=True)
        except BadInput:
            raise
        except Exception as e:  # noqa: BLE001 -- the restricted unpickler refused: a pickle with callables
            why = next((ln.strip() for ln in str(e).splitlines() if "Unsupported" in ln), first_line(e))
            raise refusal(str(path), f"{name} ({what}) is a pickle PyTorch's restricted loader refuses "
                                     f"({why[:120]}), and torch.export.load would unpickle it in full") from None

    def payloads(config: str, folder: str) -> None:
        """One payload config, as ``_load_state_dict``/``_load_constants`` read it."""
        try:
            entries = json.loads(read(config, CONFIG_MAX_BYTES).decode("utf-8")).get("config", {}).items()
            entries = [(k, v.get("path_name"), bool(v.get("use_pickle"))) for k, v in entries]
        except (ValueError, AttributeError):
            raise BadInput(f"{path}: {config} is not torch.export's payload config; re-save the program with "
                           "torch.export.save()") from None
        for fqn, file, pickled in entries:
            if not _plain_member_name(file):
                raise refusal(str(path), f"{config} names the member {file!r} for {fqn!r}: torch joins it to "
                                         f"{folder!r} as it is, so an absolute, '..' or nested name makes torch read "
                                         "another member than the one a check would", fix=_TRUST_FIX)
            if file.startswith((c.CUSTOM_OBJ_FILENAME_PREFIX, c.OPAQUE_OBJ_FILENAME_PREFIX)):
                raise refusal(str(path), f"constant {fqn!r} is a pickled Python/TorchScript object "
                                         "(loading it runs its code)")
            if pickled:
                restricted(os.path.join(folder, file), f"pickled {fqn!r}")     # torch's own join

    # what torch.export.load reads (_load_exported_programs): per models/NAME.json, its sample inputs,
    # its weights and its constants -- each a pickle, a legacy whole-file pickle, or a payload config
    prefix, suffix = c.MODELS_FILENAME_FORMAT.split("{}")
    for f in records:
        if not f.startswith(c.MODELS_DIR):
            continue
        model = f[len(prefix):-len(suffix)]
        sample = c.SAMPLE_INPUTS_FILENAME_FORMAT.format(model)
        if sample.lower() in seen:
            restricted(sample, "sample inputs")
        for folder, config_format in ((c.WEIGHTS_DIR, c.WEIGHTS_CONFIG_FILENAME_FORMAT),
                                      (c.CONSTANTS_DIR, c.CONSTANTS_CONFIG_FILENAME_FORMAT)):
            legacy, config = f"{folder}{model}.pt", config_format.format(model)
            if legacy in records:
                restricted(legacy, "weights in the older format")
            elif config in records:
                payloads(config, folder)
    # and, whatever a later torch reads, every other pickle-like member and payload config
    for r in records:
        low = r.lower()
        if low.endswith(".pt") and low.startswith((c.SAMPLE_INPUTS_DIR, c.WEIGHTS_DIR, c.CONSTANTS_DIR)):
            restricted(r, "a pickle the loader reads")
        elif low.endswith("_config.json") and low.startswith((c.WEIGHTS_DIR, c.CONSTANTS_DIR)):
            payloads(r, c.CONSTANTS_DIR if low.startswith(c.CONSTANTS_DIR) else c.WEIGHTS_DIR)


def _shape_of(meta_val: Any) -> tuple[int | None, ...] | None:
    try:
        return tuple(int(d) if str(d).lstrip("-").isdigit() else None for d in meta_val.shape)
    except Exception:  # noqa: BLE001 -- not a tensor placeholder
        return None


def torch_source(spec: TorchSpec, opts: SourceOptions) -> Source:
    """A PyTorch model as a ``Source`` (see the module docstring)."""
    torch = require_torch(f"the PyTorch source {spec.ref}")
    model, names, program = load_model(spec)
    given = dict(opts.input_shapes)
    unknown = [n for n in given if n not in names]
    if unknown:
        raise BadInput(f"--input-shape {unknown[0]}: no such input of {spec.ref} (inputs: {', '.join(names)})")
    declared: dict[str, tuple[int | None, ...] | None] = {n: None for n in names}
    dtypes: dict[str, str] = {n: "float32" for n in names}
    if program is not None:
        metas = {n.name: n.meta.get("val") for n in program.graph.nodes if n.op == "placeholder"}
        for n in names:
            val = metas.get(n)
            declared[n] = _shape_of(val) if val is not None else None
            if val is not None and hasattr(val, "dtype"):
                dtypes[n] = str(val.dtype).removeprefix("torch.")
    shapes, notes = {}, {}
    for n in names:
        shape = given.get(n) or declared[n]
        if shape is None or any(d is None for d in shape):
            where = "a --torch module records no input shapes" if program is None else "its shape is dynamic"
            raise BadInput(f"{spec.ref}: input '{n}' needs --input-shape {n}:1,3,224,224 (batch first, batch 1, in the "
                           f"model's own layout): {where}")
        if declared[n] is not None and given.get(n) and len(given[n]) != len(declared[n]):
            raise BadInput(f"--input-shape {n}:{','.join(map(str, given[n]))}: input '{n}' of {spec.ref} has "
                           f"{len(declared[n])} dims")
        if shape[0] != 1:
            raise BadInput(f"--input-shape {n}:{','.join(map(str, shape))}: the batch dim must be 1 (edgebench "
                           "measures single-sample latency)")
        shapes[n] = tuple(int(d) for d in shape)
        notes[n] = {"declared": list(declared[n]) if declared[n] else None, "used": list(shapes[n]),
                    "how": ("--input-shape" if n in given else "the program's recorded shape")
                    + ("; NHWC in the .tflite and the data (--channels-last)" if spec.channels_last
                       and len(shapes[n]) >= 3 else "")}
    if any(not dtypes[n].startswith("float") for n in names):
        bad = next(n for n in names if not dtypes[n].startswith("float"))
        raise BadInput(f"{spec.ref}: input '{bad}' is {dtypes[bad]}; edgebench feeds PyTorch sources float inputs "
                       "only (convert this model with litert-torch yourself and measure the .tflite)")

    def layout(shape: tuple[int, ...]) -> tuple[int, ...]:
        if not spec.channels_last or len(shape) < 3:
            return shape
        return (shape[0], *shape[2:], shape[1])

    sample = {n: np.zeros(layout(shapes[n]), np.float32) for n in names}
    try:
        outs = call(model, names, sample, spec.channels_last)
    except Exception as e:  # noqa: BLE001 -- the model does not run at these shapes
        raise BadInput(f"{spec.ref}: the model fails on zeros of shape "
                       f"{', '.join(f'{n}:{list(shapes[n])}' for n in names)} ({type(e).__name__}: {first_line(e)}); "
                       "check --input-shape") from None
    inputs = tuple(TensorSpec(n, layout(shapes[n]), "float32") for n in names)
    outputs = tuple(TensorSpec(k, tuple(v.shape), str(v.dtype)) for k, v in outs.items())
    sig = Signature(tuple(sorted(inputs, key=lambda t: t.name)), outputs, order=tuple(names))
    if spec.kind == "pt2":
        name, sha = Path(spec.ref).stem, sha256_file(spec.ref)
    else:
        name, sha = spec.ref.rpartition(":")[2], state_digest(model)
    info = {"torch": {"source": spec.kind, "ref": spec.ref, "channels_last": spec.channels_last,
                      "torch_version": torch.__version__, "input_names": list(names),
                      "runs": ("user code: MODULE:FACTORY imported and called (--torch, by request)" if spec.kind ==
                               "factory" else "torch.export.load: the graph, plain tensors as bytes, and any "
                               "entries the archive marks as pickled unpickled (trusted like a pickle)")}}
    return Source("torch", name, spec.ref, None, sha, sig, info=info, loader="torch",
                  loader_reason="PyTorch model: converted by litert-torch, referenced by PyTorch itself",
                  input_shapes=notes)


def spec_of(src: Source) -> TorchSpec:
    t = src.info["torch"]
    return TorchSpec(t["source"], t["ref"], bool(t["channels_last"]))


def litert_torch_version() -> str | None:
    try:
        return metadata.version("litert-torch")
    except Exception:  # noqa: BLE001
        return None


@contextlib.contextmanager
def _quiet():
    """litert-torch prints a progress tree per conversion (stdout) and torchao its optional
    kernels at import (stderr); absl and Python warnings add more."""
    sink = io.StringIO()
    level = logging.getLogger().level
    logging.getLogger().setLevel(logging.ERROR)
    try:
        with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield sink
    finally:
        logging.getLogger().setLevel(level)


def wrapper_free(wrappers: list[tuple[str, str]]):
    """Tensor name -> the name without the modules edgebench wraps the user's module in. litert-torch
    names a tensor by its module path from the module it converts: ``torch_fp32``'s keyword wrapper
    (``edgebench.sources.pytorch.torch_fp32.<locals>.ByName/pkg.Net_inner/torch.nn...Conv2d_conv``), and
    with --channels-last litert-torch's ``ChannelLastIOWrapper/pkg.Net_wrapped/...``. Users see and type
    the path from their own module (``pkg.Net/torch.nn...Conv2d_conv``). ``wrappers``: (the wrapper
    class's dotted path, the attribute that holds the wrapped module)."""
    rules = []
    for path, attr in wrappers:
        rules.append((re.compile(re.escape(path) + r"/([^/;]*?)_" + re.escape(attr) + r"(?=[/;]|$)"), r"\1"))
        rules.append((re.compile(re.escape(path) + r"/?"), ""))

    def rename(name: str) -> str:
        for rx, to in rules:
            name = rx.sub(to, name)
        return name

    return rename


def torch_fp32(src: Source) -> tuple[bytes, dict[str, Any]]:
    """The FP32 ``.tflite`` of a PyTorch source, converted by litert-torch (inputs by keyword, so
    the file's input names are the model's; ``to_channel_last_io`` with --channels-last)."""
    torch = require_torch(f"converting {src.path}")
    spec = spec_of(src)
    try:
        with _quiet():
            import litert_torch
    except ImportError as e:
        raise BadInput(f"converting the PyTorch model {src.path} needs litert-torch, which is not installed "
                       f"({e.name or e}); {INSTALL} (tested with litert-torch {LITERT_TORCH_TESTED})") from None
    model, names, _ = load_model(spec)
    sample = {t.name: np.zeros(t.shape, np.float32) for t in src.signature.inputs}
    inner = model
    if spec.channels_last:
        ranks = [len(next(t.shape for t in src.signature.inputs if t.name == n)) for n in names]
        outs = call(model, names, sample, True)
        inner = litert_torch.to_channel_last_io(model, args=[i for i, r in enumerate(ranks) if r >= 3],
                                                outputs=[i for i, v in enumerate(outs.values()) if v.ndim >= 3])

    class ByName(torch.nn.Module):
        """Positional inner model, keyword inputs: litert-torch names the .tflite inputs by keyword."""

        def __init__(self) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, **kw):
            return self.inner(*[kw[n] for n in names])

    kwargs = {n: torch.from_numpy(sample[n]) for n in names}
    try:
        with _quiet():
            edge = litert_torch.convert(ByName(), sample_kwargs=kwargs)   # (an exported program refuses .eval())
            data = bytes(edge.model_content())
    except Exception as e:  # noqa: BLE001 -- export/lowering errors of every kind
        raise PrecisionFailed(f"{src.path}: litert-torch {litert_torch_version()} cannot convert this model "
                       f"({type(e).__name__}: {first_line(e)[:300]})") from None
    wrappers = [(f"{ByName.__module__}.{ByName.__qualname__}", "inner")]
    if inner is not model:      # --channels-last: litert-torch's I/O wrapper around the user's module
        attr = next((n for n, m in inner.named_children() if m is model), "wrapped")
        wrappers.append((f"{type(inner).__module__}.{type(inner).__qualname__}", attr))
    data = rename_tensors(data, wrapper_free(wrappers))
    return data, {"weights": "float32", "activations": "float32",
                  "converter": f"litert-torch {litert_torch_version()}",
                  "layout": "NHWC I/O (to_channel_last_io)" if spec.channels_last else "the model's own (NCHW)"}


def reference_outputs(src: Source, ds: InputSet) -> dict[str, np.ndarray]:
    """PyTorch's own outputs for every sample (the FP32 parity check and diagnose's reference)."""
    return run_torch(spec_of(src), ds)


__all__ = ["LITERT_TORCH_TESTED", "reference_outputs", "resolve_any", "spec_of", "torch_fp32", "torch_source",
           "torch_spec", "litert_torch_version"]
