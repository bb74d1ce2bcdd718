"""The PyTorch reference target: a PyTorch model's own outputs and batch-1 latency on the CPU.

What a PyTorch source is (``TorchSpec``): a saved ``torch.export`` program (``.pt2``, read with
``torch.export.load``) or ``MODULE:FACTORY`` (``--torch``): a module on ``PYTHONPATH``, in the
current folder or a ``.py`` path, whose ``FACTORY()`` returns an ``nn.Module`` -- user code run by
explicit request, like ``--import``. The model runs in ``eval()`` mode under
``torch.inference_mode()``. Inputs are bound by name: a factory module's ``forward`` parameter
names, a program's user input names; outputs are the flattened return value in order, named
``output_0``, ``output_1``... as litert-torch names the converted model's outputs.

``channels_last``: the converted ``.tflite`` takes NHWC (``litert_torch.to_channel_last_io`` on every
input and output of rank >= 3) while the PyTorch model takes NCHW, so those inputs are transposed
(N, ..., C) -> (N, C, ...) before the call and those outputs back after it: both sides see the
same InputSet.

Needs the optional extra ``[torch]``; without it one line names the install command (exit 2).
(Not named ``torch.py``: the LiteRT worker runs with this folder on ``sys.path``, where that name
would shadow the real package.)
"""

from __future__ import annotations

import hashlib
import inspect as pyinspect
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from edgebench.core import progress
from edgebench.model.inputs import InputSet, Signature, cast_to_signature
from edgebench.core.errors import BadInput, first_line
from edgebench.core.fingerprint import host_fingerprint
from edgebench.targets.base import Job, RunResult
from edgebench.targets.runner_io import GcPaused
from edgebench.core.user_code import import_user_module

INSTALL = "pip install 'edgebench[torch]'"
TORCH_VERSION = "2.13.0"       # the CPU wheel the [torch] extra pins (a plain install resolves a CUDA build)
TORCH_METHOD = ("per-call perf_counter_ns around the PyTorch model's forward at batch 1 (eval mode, "
                "torch.inference_mode, CPU), inputs built before the loop")


@dataclass(frozen=True)
class TorchSpec:
    """A PyTorch source: ``pt2`` (a saved torch.export program's path) or ``factory``
    (``MODULE:FACTORY``), and whether the converted model's I/O is channels-last."""

    kind: str                 # "pt2" | "factory"
    ref: str                  # the .pt2 path, or MODULE:FACTORY
    channels_last: bool = False


def require_torch(why: str):
    try:
        import torch
    except ImportError as e:
        raise BadInput(f"{why} needs PyTorch, which is not installed ({e.name or e}); {INSTALL} (the CPU wheel: "
                       f"torch=={TORCH_VERSION})") from None
    return torch


def _import_user_module(spec: str):
    return import_user_module(spec, flag="--torch", what="MODULE:FACTORY with a module name or a .py path",
                              file_name=lambda path: f"_edgebench_torch_{hashlib.sha256(str(path).encode()).hexdigest()[:12]}")


_LOADED: dict[TorchSpec, tuple[Any, tuple[str, ...], Any]] = {}


def load_model(spec: TorchSpec) -> tuple[Any, tuple[str, ...], Any]:
    """(the model in eval mode, its input names in positional order, the ExportedProgram or None),
    cached per process (convert, the parity check and the reference run share one load)."""
    if spec in _LOADED:
        return _LOADED[spec]
    torch = require_torch(f"the PyTorch source {spec.ref}")
    program = None
    if spec.kind == "pt2":
        try:
            program = torch.export.load(spec.ref)
        except Exception as e:  # noqa: BLE001 -- not a .pt2 archive, a newer format, missing file
            raise BadInput(f"{spec.ref}: cannot load this torch.export program with torch {torch.__version__} "
                           f"({type(e).__name__}: {first_line(e)}); save it with torch.export.save(program, PATH) "
                           "from torch.export.export(model, args)") from None
        names = tuple(program.graph_signature.user_inputs)
        model = program.module()
    else:
        mod_name, sep, factory = spec.ref.rpartition(":")
        if not sep or not mod_name or not factory.isidentifier():
            raise BadInput(f"--torch {spec.ref}: give MODULE:FACTORY (e.g. my_models:make_net), where FACTORY() "
                           "returns a torch.nn.Module")
        mod = _import_user_module(mod_name)
        fn = getattr(mod, factory, None)
        if not callable(fn):
            raise BadInput(f"--torch {spec.ref}: {mod_name} has no callable {factory!r}")
        try:
            model = fn()
        except Exception as e:  # noqa: BLE001 -- the user's factory failed
            raise BadInput(f"--torch {spec.ref}: {factory}() failed ({type(e).__name__}: {first_line(e)})") from None
        if not isinstance(model, torch.nn.Module):
            raise BadInput(f"--torch {spec.ref}: {factory}() returned {type(model).__name__}, not a torch.nn.Module")
        params = [p for p in pyinspect.signature(model.forward).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty]
        names = tuple(p.name for p in params)
        model.eval()
    if not names:
        raise BadInput(f"{spec.ref}: the model takes no tensor inputs edgebench can feed")
    _LOADED[spec] = (model, names, program)
    return _LOADED[spec]


def state_digest(model: Any) -> str:
    """sha256 of a module's weights and buffers (name, dtype, shape, bytes): the model's identity
    when it comes from a factory rather than a file."""
    h = hashlib.sha256(type(model).__qualname__.encode())
    for k, v in sorted(model.state_dict().items()):
        t = v.detach().cpu().contiguous()
        h.update(f"{k}:{t.dtype}:{tuple(t.shape)}".encode())
        h.update((t.float() if str(t.dtype) == "torch.bfloat16" else t).numpy().tobytes())   # numpy has no bfloat16
    return h.hexdigest()


def to_model_layout(x: np.ndarray, channels_last: bool) -> np.ndarray:
    """(N, ..., C) -> (N, C, ...) for tensors of rank >= 3, as litert_torch.to_channel_last_io does."""
    if not channels_last or x.ndim < 3:
        return x
    return np.ascontiguousarray(np.transpose(x, (0, x.ndim - 1, *range(1, x.ndim - 1))))


def from_model_layout(y: np.ndarray, channels_last: bool) -> np.ndarray:
    """(N, C, ...) -> (N, ..., C) for tensors of rank >= 3."""
    if not channels_last or y.ndim < 3:
        return y
    return np.ascontiguousarray(np.transpose(y, (0, *range(2, y.ndim), 1)))


def flat_outputs(result: Any) -> list[Any]:
    """The model's return value flattened in order (a tensor, a tuple/list, a dict by insertion)."""
    import torch.utils._pytree as pytree

    return list(pytree.tree_leaves(result))


def call(model: Any, names: tuple[str, ...], sample: dict[str, np.ndarray], channels_last: bool) -> dict[str, np.ndarray]:
    """One forward on one batch-1 sample (numpy, the InputSet's layout) -> {output_i: numpy}."""
    import torch

    args = [torch.from_numpy(to_model_layout(np.asarray(sample[n]), channels_last)) for n in names]
    with torch.inference_mode():
        out = flat_outputs(model(*args))
    return {f"output_{i}": from_model_layout(o.detach().cpu().numpy(), channels_last) for i, o in enumerate(out)}


def run_torch(spec: TorchSpec, ds: InputSet) -> dict[str, np.ndarray]:
    """The model's outputs for every sample of ``ds``, one batch-1 call each, stacked per output."""
    model, names, _ = load_model(spec)
    missing = [n for n in names if n not in ds.arrays]
    if missing:
        raise BadInput(f"{spec.ref}: input {missing[0]!r} is not in the data (has {', '.join(ds.arrays)}); key the "
                       "arrays by the model's input names")
    outs: dict[str, list[np.ndarray]] = {}
    for i in range(ds.n):
        for k, v in call(model, names, {n: ds.arrays[n][i:i + 1] for n in names}, spec.channels_last).items():
            outs.setdefault(k, []).append(v)
    return {k: np.concatenate(v, axis=0) for k, v in outs.items()}


class TorchTarget:
    """Runs a PyTorch source on the CPU: the reference row of a PyTorch model, as ``tf`` is for
    a TensorFlow one (outputs for every sample, per-call latency samples at batch 1)."""

    name = "torch"

    def __init__(self, spec: TorchSpec, model_sha256: str = "") -> None:
        self.spec = spec
        self.model_sha256 = model_sha256

    def run(self, job: Job, signature: Signature) -> RunResult:
        torch = require_torch(f"the PyTorch reference of {self.spec.ref}")
        ds = cast_to_signature(InputSet.load(job.inputs_npz), signature)
        t0 = time.perf_counter_ns()
        model, names, _ = load_model(self.spec)
        init_ms = (time.perf_counter_ns() - t0) / 1e6
        s = time.perf_counter_ns()
        outputs = run_torch(self.spec, ds)
        first_ms = (time.perf_counter_ns() - s) / 1e6 / max(ds.n, 1)
        feeds = [[torch.from_numpy(to_model_layout(np.asarray(ds.arrays[n][j:j + 1]), self.spec.channels_last))
                  for n in names] for j in range(min(ds.n, 256))]
        ctl = job.control

        def timed(j: int) -> int:
            s = time.perf_counter_ns()
            with torch.inference_mode():
                model(*feeds[j % len(feeds)])
            return time.perf_counter_ns() - s

        warm: list[int] = []
        samples: list[int] = []
        with progress.measuring():
            w_start = time.perf_counter()
            while len(warm) < ctl.warmup_runs or time.perf_counter() - w_start < ctl.warmup_time_s:
                warm.append(timed(len(warm)))
            with GcPaused() as paused:
                start = time.perf_counter()
                while (stop := ctl.stop_reason(len(samples), time.perf_counter() - start, samples)) is None:
                    samples.append(timed(len(samples)))
        fp = host_fingerprint()
        fp["torch"] = torch.__version__
        return RunResult(
            target="torch", model_path=self.spec.ref, model_sha256=self.model_sha256,
            samples_ns=np.asarray(samples, np.int64), warmup_ns=np.asarray(warm, np.int64), init_ms=init_ms,
            first_inference_ms=first_ms, outputs=outputs, runtime=f"torch {torch.__version__} (CPU, eager)",
            method=TORCH_METHOD, fingerprint=fp,
            extra={"device": "cpu", "threads": torch.get_num_threads(), "stop_reason": stop, "gc": paused.facts(),
                   "channels_last": self.spec.channels_last, "source_kind": self.spec.kind})
