"""Reference model registry: build (and cache) SavedModels plus matching input sets.

``build(name, size)`` returns a :class:`BuiltModel`: a SavedModel with a ``serving_default``
signature whose input and output names are stable, a calibration ``.npz`` and an evaluation
``.npz`` keyed by those input names, and an ``info`` dict describing the signature.

Builds are cached under ``<cache>/models/<name>-<size>-<confighash>/`` where the hash covers the
size's config, the seed, the builder version and the TensorFlow/Keras versions. A build is made
in a hidden sibling folder, moved into place, and only then marked complete (``.complete``,
written last): a killed build is never reused, it is rebuilt.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import time
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any, Iterator

from edgebench.core import paths
from edgebench.core.errors import BadInput, InfraError
from reference_models import BUILDERS, _export

SIZES = ("tiny", "full")
MARKER = ".complete"
INFO_FILE = "info.json"


@dataclass(frozen=True)
class ModelSpec:
    """A registered reference model."""
    name: str
    description: str
    task: str  # "classification" | "detection" | "embedding"
    sizes: tuple[str, ...] = SIZES


@dataclass(frozen=True)
class BuiltModel:
    """A finished (cached) build. ``info`` keys: see docs/models.md."""
    name: str
    size: str
    saved_model_dir: Path
    calibration_npz: Path
    evaluation_npz: Path
    info: dict[str, Any] = field(default_factory=dict)
    reused: bool = False  # True when this call found a complete cached build

    @property
    def directory(self) -> Path:
        return self.saved_model_dir.parent


def _builders() -> dict[str, Any]:
    return BUILDERS


MODELS: dict[str, ModelSpec] = {
    name: ModelSpec(name=name, description=mod.DESCRIPTION, task=mod.TASK) for name, mod in _builders().items()
}


def resolve(name: str) -> ModelSpec:
    """The spec for ``name``; BadInput naming the choices otherwise."""
    try:
        return MODELS[name]
    except KeyError:
        raise BadInput(f"unknown reference model {name!r}; choose one of {', '.join(MODELS)}") from None


def _config(name: str, size: str) -> dict[str, Any]:
    resolve(name)
    if size not in SIZES:
        raise BadInput(f"unknown size {size!r} for reference model {name!r}; use one of {', '.join(SIZES)}")
    return dict(_builders()[name].CONFIGS[size])


def input_specs(name: str, size: str = "tiny") -> list[dict[str, Any]]:
    """Static description of the serving inputs (no TensorFlow import)."""
    return _builders()[name].inputs(_config(name, size))


def _dist_version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def _versions() -> dict[str, str | None]:
    return {"tf_version": _dist_version("tensorflow") or _dist_version("tensorflow-cpu"),
            "keras_version": _dist_version("keras")}


def config_hash(name: str, size: str, seed: int = 0) -> str:
    """Hash of everything that determines a build's bytes (config, seed, builder and TF versions)."""
    key = {"name": name, "size": size, "seed": seed, "config": _config(name, size),
           "builder_version": _builders()[name].BUILDER_VERSION, "export_version": _export.EXPORT_VERSION,
           **_versions()}
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:12]


def _models_root(cache_dir: Path | None) -> Path:
    root = (Path(cache_dir) if cache_dir is not None else paths.cache_dir()) / "models"
    root.mkdir(parents=True, exist_ok=True)
    return root


def build_dir(name: str, size: str = "tiny", *, cache_dir: Path | None = None, seed: int = 0) -> Path:
    """Where the build of (name, size, seed) lives (whether or not it exists yet)."""
    return _models_root(cache_dir) / f"{name}-{size}-{config_hash(name, size, seed)}"


def is_built(name: str, size: str = "tiny", *, cache_dir: Path | None = None, seed: int = 0) -> bool:
    """True when a complete cached build exists."""
    return (build_dir(name, size, cache_dir=cache_dir, seed=seed) / MARKER).is_file()


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Exclusive advisory lock so two processes never build the same model at once."""
    with open(path, "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _load(d: Path, name: str, size: str, *, reused: bool) -> BuiltModel:
    info = json.loads((d / INFO_FILE).read_text())
    return BuiltModel(name=name, size=size, saved_model_dir=d / "saved_model",
                      calibration_npz=d / "calibration.npz", evaluation_npz=d / "evaluation.npz", info=info,
                      reused=reused)


def _signature_io(saved_model_dir: Path) -> tuple[dict[str, dict], list[dict]]:
    """Input and output specs as the exported ``serving_default`` signature reports them."""
    import tensorflow as tf  # noqa: PLC0415

    sig = tf.saved_model.load(str(saved_model_dir)).signatures["serving_default"]
    _, kwargs = sig.structured_input_signature
    ins = {k: {"name": k, "shape": v.shape.as_list(), "dtype": v.dtype.name} for k, v in kwargs.items()}
    outs = [{"name": k, "shape": v.shape.as_list(), "dtype": v.dtype.name}
            for k, v in sorted(sig.structured_outputs.items())]
    return ins, outs


def build(name: str, size: str = "tiny", *, cache_dir: Path | None = None, force: bool = False,
          seed: int = 0) -> BuiltModel:
    """Build (or reuse the cached build of) reference model ``name`` at ``size``.

    ``cache_dir`` replaces the user cache root (builds go to ``cache_dir/models/``);
    ``force`` rebuilds even when a complete build exists.
    """
    cfg = _config(name, size)
    mod = _builders()[name]
    final = build_dir(name, size, cache_dir=cache_dir, seed=seed)
    with _locked(final.parent / f".{final.name}.lock"):
        if not force and (final / MARKER).is_file():
            return _load(final, name, size, reused=True)
        tmp = final.parent / f".{final.name}.building-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        try:
            t0 = time.perf_counter()
            try:
                extras = mod.build(cfg, seed, tmp)
            except MemoryError as exc:
                raise InfraError(f"building reference model {name!r} ({size}) ran out of memory; "
                                 "use --size tiny or free memory") from exc
            build_seconds = time.perf_counter() - t0
            sig_in, sig_out = _signature_io(tmp / "saved_model")
            static_in = {s["name"]: s for s in mod.inputs(cfg)}
            if set(sig_in) != set(static_in):
                raise InfraError(f"reference model {name!r}: exported inputs {sorted(sig_in)} differ from "
                                 f"declared {sorted(static_in)} (builder bug; report it)")
            inputs = [{**static_in[k], **sig_in[k]} for k in static_in]
            info = {
                "name": name,
                "size": size,
                "seed": seed,
                "task": mod.TASK,
                "description": mod.DESCRIPTION,
                "inputs": inputs,
                "outputs": sig_out,
                "class_output": None,
                "num_classes": None,
                "labels_real": False,
                **extras,
                "build_seconds": round(build_seconds, 3),
                "config": cfg,
                "config_hash": final.name.rsplit("-", 1)[1],
                "builder_version": mod.BUILDER_VERSION,
                **_versions(),
            }
            (tmp / INFO_FILE).write_text(json.dumps(info, indent=2) + "\n")
            if final.exists():  # stale (unmarked) or forced rebuild
                shutil.rmtree(final)
            tmp.rename(final)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        # Written last: only a build that got this far is ever reused.
        (final / MARKER).write_text(info["config_hash"] + "\n")
        return _load(final, name, size, reused=False)


def build_keras(name: str, size: str = "tiny", seed: int = 0):
    """A fresh, untrained Keras model of the architecture (single output; for training baselines).

    Classification models output softmax ``scores``; ``bert`` is the encoder with a 2-class
    sentence-classification head on ``pooled_output``; ``ssd_mobilenet`` outputs the raw SSD head
    tensor ``[batch, anchors, 4 + classes]`` (box offsets then class logits, no NMS).
    """
    return _builders()[name].build_keras(_config(name, size), seed)


def training_batch(name: str, size: str, batch_size: int, seed: int = 0):
    """(x, y) matching ``build_keras``'s inputs and ``training_loss``. Only digits has real labels."""
    if batch_size <= 0:
        raise BadInput(f"batch size must be a positive integer, got {batch_size}")
    return _builders()[name].training_batch(_config(name, size), batch_size, seed)


def training_loss(name: str, size: str = "tiny"):
    """A ``keras.losses.Loss`` for ``training_batch``'s y against ``build_keras``'s output
    (the same loss fits every size of a model; ``size`` is accepted for symmetry)."""
    return _builders()[name].training_loss(_config(name, size))


def list_models(*, cache_dir: Path | None = None, seed: int = 0) -> list[dict[str, Any]]:
    """One row per reference model: name, task, description, inputs per size, cached per size."""
    rows = []
    for name, spec in MODELS.items():
        rows.append({
            "name": name,
            "task": spec.task,
            "description": spec.description,
            "inputs": {size: input_specs(name, size) for size in spec.sizes},
            "cached": {size: is_built(name, size, cache_dir=cache_dir, seed=seed) for size in spec.sizes},
        })
    return rows


def build_row(built: BuiltModel) -> dict[str, Any]:
    """The JSON row ``edgebench models build`` reports for one build."""
    info = built.info
    return {
        "model": built.name,
        "size": built.size,
        "status": "ok",
        "task": info.get("task"),
        "reused": built.reused,
        "saved_model_dir": str(built.saved_model_dir),
        "calibration_npz": str(built.calibration_npz),
        "evaluation_npz": str(built.evaluation_npz),
        "build_seconds": info.get("build_seconds"),
        "test_accuracy": info.get("test_accuracy"),
        "labels_real": info.get("labels_real"),
        "info": info,
    }
