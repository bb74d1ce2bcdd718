"""``edgebench diagnose MODEL.tflite --accelerator gpu``: the first op an accelerator gets wrong.

The model runs on the accelerator (LiteRT's CompiledModel: GPU = WebGPU, on a phone's GPU or on
``scripts/software_gpu``'s Mesa Vulkan; NPU where a host dispatch path exists) and on the CPU
with the same inputs; a bisection over the execution order cuts the graph after an op, exposes
every tensor alive there as an output, compiles that probe for the accelerator and compares it
with the CPU -- ``1 + ceil(log2(ops))`` compiles to name the op whose output departs while its
inputs still agree. The cutting, the comparison and the rule live in
``edgebench.diagnose.accelerator_worker`` (run in its own process, as the INT8 worker); this
module prepares the inputs, runs one bisect per ``--gpu-precision`` and builds the ``diagnose``
document: one row per precision with a ``bisect`` object (docs/json.md, docs/diagnose.md).
"""

from __future__ import annotations

import json
import re
import shutil
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any, Callable

from edgebench.core.errors import BadInput, SyntheticDataWarning
from edgebench.core.fingerprint import host_fingerprint, sha256_file
from edgebench.model.inputs import cast_to_signature, load_data
from edgebench.model.tflite_model import inspect, refuse_compiled
from edgebench.model.tflite_model import precision as file_precision
from edgebench.rows import Document, InferenceRow
from edgebench.sources.resolve import tflite_signature
from edgebench.sources.trust import check_output_dir
from edgebench.targets.host import spawn_worker

ACCELERATORS = ("gpu", "npu")
GPU_PRECISIONS = ("fp16", "fp32")
ACCELERATOR_SAMPLES = 8        # a departure (Inf, a wrong kernel) shows on every sample; each probe runs them all
MIN_PSNR_DB = 40.0             # fp16 rounding alone stays near 60-70 dB on float activations; 40 is a real departure
DEADLINE_S = 1800.0            # the whole bisect (every probe's compile and runs), then the worker is killed
BISECT_RULE = ("the model is cut after op k (execution order), every tensor alive there exposed as an output, "
               "compiled for the accelerator and run on it and on the CPU with the same inputs; a tensor departs "
               "when it has more NaN/Inf than on the CPU or its PSNR vs the CPU is below the threshold; the whole "
               "model first, then bisection: the culprit is the op whose output departs while every tensor alive "
               "before it (its inputs among them) agreed; 1 + ceil(log2(ops)) compiles")


SYNTHETIC_NOTE = ("inputs: synthetic (no --data): an overflow or a wrong kernel shows on them too, but a range "
                  "problem can depend on real inputs; pass --data with samples your model sees")


def _precisions(accelerator: str, requested: tuple[str, ...]) -> tuple[str | None, ...]:
    if accelerator != "gpu":
        if any(requested):
            raise BadInput(f"--gpu-precision applies to --accelerator gpu, not {accelerator}; drop it")
        return (None,)
    bad = [p for p in requested if p not in GPU_PRECISIONS]
    if bad:
        raise BadInput(f"--gpu-precision {bad[0]!r} is unknown; use fp16, fp32 or both (fp16,fp32)")
    return tuple(requested) or ("fp16",)


def check_accelerator(src: str, accelerator: str) -> None:
    if accelerator not in ACCELERATORS:
        hint = "the CPU is the reference it is compared with; " if accelerator == "cpu" else ""
        raise BadInput(f"--accelerator {accelerator!r}: {hint}use gpu or npu")
    if not str(src).endswith(".tflite"):
        raise BadInput(f"{src}: --accelerator bisects a .tflite; convert it first (edgebench convert {src}) and "
                       "pass the .tflite")


def diagnose_accelerator(settings, progress: Callable[[str], None] | None = None) -> Document:
    """One bisect per GPU precision (``settings``: a ``DiagnoseSettings`` with ``accelerator``)."""
    say = progress or (lambda _m: None)
    path = Path(settings.convert.src)
    check_accelerator(settings.convert.src, settings.accelerator)
    refuse_compiled(path, inspect(str(path)))      # missing / not a flatbuffer / AOT-compiled: one line
    precisions = _precisions(settings.accelerator, tuple(settings.gpu_precisions))
    if settings.eval_samples <= 0:
        raise BadInput(f"--samples {settings.eval_samples}: must be positive")
    t0 = time.perf_counter()
    out_dir = Path(settings.convert.out_dir) if settings.convert.out_dir else Path("edgebench-out") / path.stem / "diagnose"
    check_output_dir(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    sig = tflite_signature(str(path))
    say("inputs")
    with warnings.catch_warnings():     # the INT8 warning about synthetic data is not this command's: see SYNTHETIC_NOTE
        warnings.simplefilter("ignore", SyntheticDataWarning)
        ds = cast_to_signature(load_data(settings.data or "synthetic", sig, preprocess=settings.convert.preprocess,
                                         seed=settings.convert.seed, n=settings.eval_samples), sig).take(settings.eval_samples)
    inputs_path = out_dir / "diagnose_inputs.npz"
    inputs_sha = ds.save(inputs_path)
    sha = sha256_file(path)
    rows = []
    for prec in precisions:
        label = settings.accelerator + (f" {prec}" if prec else "")
        say(f"{label}: bisect")
        keep = out_dir / f"{path.stem}_{settings.accelerator}{'_' + prec if prec else ''}_culprit.tflite"
        meta = run_bisect(path, inputs_path, samples=ds.n, accelerator=settings.accelerator, gpu_precision=prec,
                          min_psnr_db=settings.min_psnr_db, keep_probe=keep, deadline_s=DEADLINE_S)
        rows.append(_row(path, sha, prec, settings.accelerator, meta, None if settings.data else SYNTHETIC_NOTE))
    return Document.new(
        "diagnose", [InferenceRow.from_dict(r) for r in rows], host_fingerprint(), model=path.stem,
        source={"path": str(path), "sha256": sha, "kind": "tflite"},
        inputs=ds.record(inputs_path, inputs_sha),
        method={"bisect": BISECT_RULE, "min_psnr_db": settings.min_psnr_db,
                "reference": "the CPU (LiteRT Interpreter, XNNPACK) on the same probe"},
        timings={"total_s": time.perf_counter() - t0},
    )


def run_bisect(model: Path, inputs_npz: Path, *, samples: int, accelerator: str, gpu_precision: str | None,
               min_psnr_db: float = MIN_PSNR_DB, keep_probe: Path | None = None,
               deadline_s: float = DEADLINE_S) -> dict[str, Any]:
    """The bisect worker's result (``accelerator_worker``) for one accelerator setting; BadInput when
    the accelerator is not there or cannot compile the model (the worker's one line), InfraError
    when it crashed or hung."""
    work = Path(tempfile.mkdtemp(prefix="edgebench-bisect-"))
    try:
        job = {"model": str(model.resolve()), "inputs_npz": str(Path(inputs_npz).resolve()), "samples": int(samples),
               "accelerator": accelerator, "gpu_precision": gpu_precision, "min_psnr_db": float(min_psnr_db),
               "out_dir": str(work), "keep_probe": None if keep_probe is None else str(Path(keep_probe).resolve())}
        job_file = work / "job.json"
        job_file.write_text(json.dumps(job))
        try:
            meta, _ = spawn_worker([sys.executable, "-m", "edgebench.diagnose.accelerator_worker", str(job_file)],
                                   work, deadline_s, model)
        except BadInput as e:     # the worker names its probe (a cut of MODEL in a temporary folder): name MODEL
            raise BadInput(re.sub(re.escape(str(work)) + r"/probe_\d+\.tflite", f"{model} (its probe)", str(e))) from None
        return meta
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _row(path: Path, sha: str, prec: str | None, accelerator: str, meta: dict[str, Any],
         inputs_note: str | None) -> dict[str, Any]:
    bisect = {k: meta[k] for k in ("ops", "samples", "compiles", "compile_bound", "min_psnr_db", "culprit", "probes",
                                   "seconds", "op_types") if k in meta}
    facts = meta.get("accelerator_facts") or {}
    bisect["adapter"] = facts.get("gpu_adapter")
    warnings = []
    adapter = str(facts.get("gpu_adapter") or "")
    if "software" in adapter.lower():
        bisect["software_gpu"] = True
        warnings.append(f"software GPU ({adapter}): it checks precision and lowering (what this bisect finds), "
                        "not a vendor driver's own bugs or a GPU's speed")
    c = meta.get("culprit")
    if c is None:
        whole = (meta.get("probes") or [{}])[0]
        w = whole.get("worst") or {}
        verdict = (f"no divergence: the {accelerator}{' ' + prec if prec else ''} outputs agree with the CPU "
                   f"(worst PSNR {_db(w.get('psnr_db'))}, no NaN/Inf the CPU lacks; threshold "
                   f"{meta.get('min_psnr_db')} dB) in {meta.get('compiles')} compile(s)")
    else:
        verdict = (f"first departure at {c['op']}#{c['node']} ({c['tensor']}, shape {c['shape']}): {c['why']}; "
                   f"found in {meta.get('compiles')} compiles for {meta.get('ops')} ops")
    bisect["verdict"] = verdict
    bisect["inputs_note"] = inputs_note
    return {"precision": file_precision(inspect(str(path))), "target": "host", "model": path.stem,
            "model_path": str(path), "model_sha256": sha, "status": "ok", "error": None,
            "runtime_api": "compiled", "accelerator": accelerator, "gpu_precision": prec,
            "warnings": warnings, "bisect": bisect}


def _db(v: Any) -> str:
    return "-" if v is None else ("inf" if v == float("inf") else f"{float(v):.1f} dB")
