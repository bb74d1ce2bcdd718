"""Which layer breaks a quantized model, and the fix, proven.

``diagnose(settings)`` converts SRC exactly as ``convert-and-compare`` does, builds the same
InputSet, and for every requested precision compares each tensor of the quantized ``.tflite``
with its float counterpart (in an isolated worker, ``edgebench.convert.quant.tensor_worker``): accumulated error
(the whole quantized model) and isolated error (the op alone, fed the float model's values), the
float range and its outlier ratio, then ranks the layers worst first and says what to do.
``quant.search.search_keep_float`` (``--keep-float auto`` on ``convert`` / ``convert-and-compare``)
proves a fix: it keeps a few ranked tensors float until the accuracy goal is met.

**Float counterpart.** int8 / int16x8: the converter's calibrated float model (the graph the
quantizer starts from, so tensor names carry over); fp16 / dynamic: the FP32 ``.tflite``. Tensors
are matched by name, then QUANTIZE/DEQUANTIZE outputs inherit their input's match, then by op type
and order (``edgebench.convert.quant.tensor_worker.match_tensors``); unmatched tensors are listed.

The metrics per quantized tensor, the ranking rule and what makes a layer a *finding* are defined
once, in ``edgebench.convert.quant.layers`` (which the keep-float search shares). ``diagnose_tflite`` does
the same for a vendor's quantized ``.tflite`` against its float ``.tflite`` (``--reference``).
"""

from __future__ import annotations

import math
import shlex
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable

import numpy as np

from edgebench.convert.parity import run_tflite_inprocess
from edgebench.convert.quant.aeq import aeq_available
from edgebench.convert.quant.fix_trials import (
    TRIAL_CANDIDATES,
    apply_gains,
    by_cosine,
    helped,
    run_trials,
    worth_trying,
)
from edgebench.convert.quant.fix_trials import candidates as trial_candidates
from edgebench.convert.quant.keep_float import float_tensors
from edgebench.convert.quant.layers import (
    ISOLATION_RULE,
    MATCHING_RULE,
    NOISE_RATIO,
    RANKING_RULE,
    WORKER_DEADLINE_S,
    rank_layers,
    run_worker,
    suggest_keep_float,
)
from edgebench.convert.run import (
    PRECISION_NAMES,
    ConvertSettings,
    calibrated_model,
    check_manifest,
    convert_resolved,
)
from edgebench.convert.worker import prestarted as converter_prestarted
from edgebench.core.errors import BadInput
from edgebench.core.fingerprint import host_fingerprint, sha256_file
from edgebench.diagnose.accelerator import MIN_PSNR_DB, diagnose_accelerator
from edgebench.diagnose.fix import AEQ_NOTE_MISSING, prove_tflite_fix, source_flags
from edgebench.judge import drift as cmp
from edgebench.model.inputs import DEFAULT_PREPROCESS, InputSet, cast_to_signature, load_data
from edgebench.model.savedmodel import run_tf
from edgebench.model.state_rule import StateRule
from edgebench.model.state_rule import resolve as resolve_state
from edgebench.model.tflite_model import inspect, refuse_compiled
from edgebench.model.tflite_model import precision as file_precision
from edgebench.rows import Accuracy, Document, InferenceRow
from edgebench.sources.pytorch import reference_outputs
from edgebench.sources.resolve import (
    Source,
    SourceOptions,
    calibration_feed,
    evaluation_set,
    finish_tflite,
    sample_set,
    tflite_signature,
)
from edgebench.sources.trust import check_output_dir

DEFAULT_SAMPLES = 100          # per-layer statistics converge in far fewer; accuracy uses these too
DEFAULT_PRECISIONS = ("int8",)
FLOAT_REFERENCE = {"int8": "calibrated", "int16x8": "calibrated", "fp16": "fp32", "dynamic": "fp32"}
QUANTIZED = tuple(FLOAT_REFERENCE)


@dataclass(frozen=True)
class DiagnoseSettings:
    """diagnose's settings: the conversion (``ConvertSettings``: the model, the precisions asked for,
    the calibration data, integer I/O, output folder, the state rule -- as convert-and-compare converts)
    and what only this command has: the evaluation data, the worker, the fix trials, the accelerator
    bisect. ``convert.data`` calibrates (``--calibration-data``, else ``--data``)."""
    convert: ConvertSettings
    data: str | None = None          # evaluation data (also the calibration data unless convert.data differs)
    eval_samples: int = DEFAULT_SAMPLES
    class_output: str | None = None
    output_kind: str | None = None   # --output-kind NAME:ordinal,tolerance=N (judge.drift.parse_output_kind)
    isolated: bool = True
    deadline_s: float = WORKER_DEADLINE_S
    reference: str | None = None   # SRC is a vendor's quantized .tflite: its float .tflite (--reference)
    fix_trials: int = TRIAL_CANDIDATES   # int8: layers re-quantized with them kept float to measure the gain
    accelerator: str | None = None       # --accelerator gpu|npu: bisect the .tflite against the CPU instead
    gpu_precisions: tuple[str, ...] = ()  # --gpu-precision (GPU bisect; none given: fp16)
    min_psnr_db: float = MIN_PSNR_DB     # --min-psnr (GPU bisect): a tensor below it vs the CPU departs

    def with_convert(self, **changes: Any) -> "DiagnoseSettings":
        return replace(self, convert=replace(self.convert, **changes))

    @property
    def calibration_data(self) -> str | None:
        """``--calibration-data`` as given: the calibration data where it is not the evaluation data."""
        return self.convert.data if self.convert.data != self.data else None


# --------------------------------------------------------------------------- the command


def _precisions(requested: tuple[str, ...]) -> tuple[list[str], list[str]]:
    bad = [p for p in requested if p not in PRECISION_NAMES]
    if bad:
        raise BadInput(f"--precision: unknown value {bad[0]!r}; use one or more of {', '.join(QUANTIZED)}")
    quantized = [p for p in requested if p in QUANTIZED]
    skipped = [p for p in requested if p not in QUANTIZED]
    if not quantized:
        raise BadInput("--precision fp32: fp32 against the float model quantizes nothing, so there is no "
                       "quantization error to diagnose; pass --precision int8 (or int16x8, fp16, dynamic)")
    return quantized, skipped


def diagnose_command(src: str, precisions: list[str], *, data: str | None = None,
                     calibration_data: str | None = None, samples: int | None = None, size: str = "tiny",
                     preprocess: str | None = None, int8_io: str = "float", source: SourceOptions | None = None) -> str:
    """The exact ``edgebench diagnose`` command line for a run (gate-failure messages point to it)."""
    parts = ["edgebench", "diagnose", *source_flags(src, source), "--precision", ",".join(precisions)]
    for flag, value in (("--data", data), ("--calibration-data", calibration_data),
                        ("--samples", samples), ("--preprocess", preprocess)):
        if value is not None:
            parts += [flag, str(value)]
    if size != "tiny":
        parts += ["--size", size]
    if int8_io != "float":
        parts += ["--int8-io", int8_io]
    return " ".join(shlex.quote(p) for p in parts)


def diagnose(settings: DiagnoseSettings, progress: Callable[[str], None] | None = None) -> Document:
    """Convert, run the per-tensor comparison for each quantized precision, rank. Returns the
    result document (kind "diagnose"); see the module docstring for every definition. With
    ``accelerator``: the accelerator bisect (``edgebench.diagnose.accelerator``)."""
    if settings.accelerator:
        return diagnose_accelerator(settings, progress)
    if str(settings.convert.src).endswith(".tflite") or settings.reference:
        return diagnose_tflite(settings, progress)
    with converter_prestarted(any(p in ("int8", "int16x8") for p in settings.convert.precisions)):   # TF import overlaps
        return _diagnose(settings, progress)


@dataclass(frozen=True)
class _Reference:
    """What every diagnosed precision is compared against: the saved evaluation inputs, the state
    rule, the float model's outputs on them and, for a classifier, its top-1."""
    ds: InputSet
    inputs_path: Path
    inputs_sha: str
    rule: StateRule
    ref_out: dict[str, np.ndarray]
    kind: cmp.OutputKind | None
    class_out: str | None
    ref_acc: Any


def _diagnose(settings: DiagnoseSettings, progress: Callable[[str], None] | None) -> Document:
    say = progress or (lambda _m: None)
    settings = settings.with_convert(source=settings.convert.source.for_measuring(settings.convert.src))   # as c-a-c
    quantized, skipped = _precisions(tuple(settings.convert.precisions))
    if settings.eval_samples <= 0:
        raise BadInput(f"--samples {settings.eval_samples}: must be positive")
    t0 = time.perf_counter()
    if hasattr(say, "set_total"):
        say.set_total(4 + 3 * len(quantized))
    converted = convert_resolved(replace(settings.convert, precisions=tuple(quantized)), progress=say)
    manifest, src = converted.manifest, converted.source     # the model is read once, by the conversion
    check_manifest(manifest)
    out_dir = Path(manifest["out_dir"])
    task = (src.info or {}).get("task", "classification")
    torch_src = src.kind == "torch"     # PyTorch: its own outputs; variants re-quantized from the FP32 .tflite
    ref = _reference(settings, src, out_dir, task, say)
    calib = None
    if any(FLOAT_REFERENCE[p] == "calibrated" for p in quantized) and not src.qat and not torch_src:
        cal_ds = sample_set(src, settings.convert.data, preprocess=settings.convert.preprocess,
                            seed=settings.convert.seed, split="calibration",
                            samples=max(settings.convert.calibration_samples, 1))
        calib = calibration_feed(src, cal_ds, min(settings.convert.calibration_samples, cal_ds.n))

    # Rows are built in their JSON form (the diagnose keys -- layers, suggested_keep_float ... -- ride
    # through InferenceRow's round trip unchanged) and typed once at the end.
    rows: list[dict[str, Any]] = [{"precision": p, "target": "host", "model": src.name, "status": "skipped",
                                   "error": f"{p} is the float reference: nothing is quantized"} for p in skipped]
    rows += [_diagnose_precision(settings, prec, manifest, src, calib, ref, out_dir, say) for prec in quantized]
    dyn = next((r for r in rows if r["precision"] == "dynamic" and r.get("status") == "ok"), None)
    floor = _psnr((dyn or {}).get("worst"))         # 8-bit weights alone: what keeping activations float can reach
    for row in rows:
        if row.get("status") == "ok":
            row["fix_commands"] = fix_commands(settings, row, qat=bool(src.qat), aeq=torch_src, floor_db=floor)
    reference = InferenceRow(role="reference", precision="torch" if torch_src else "tf",
                             target="torch" if torch_src else "tf", model=src.name,
                             model_path=str(src.saved_model_dir or src.path), model_sha256=src.sha256,
                             accuracy=None if ref.ref_acc is None
                             else Accuracy.from_dict({**ref.ref_acc, "output": ref.class_out}))
    return Document.new(
        "diagnose", [InferenceRow.from_dict(r) for r in rows], host_fingerprint(with_tf=True),
        reference=reference,
        model=src.name,
        source={"path": settings.convert.src, "sha256": src.sha256, "kind": src.kind, "task": task},
        inputs=ref.ds.record(ref.inputs_path, ref.inputs_sha),
        manifest=str(out_dir / "manifest.json"),
        state_rule=ref.rule.to_dict(),
        method={"matching": MATCHING_RULE, "isolated": ISOLATION_RULE, "ranking": RANKING_RULE,
                "noise_ratio": f"rmse_over_scale ~ 1/sqrt(12) = {NOISE_RATIO:.4f} for rounding alone",
                "outlier_ratio": next((r.get("outlier_ratio_method") for r in rows if r.get("outlier_ratio_method")), None),
                "float_reference": {p: "fp32" for p in quantized} if torch_src else FLOAT_REFERENCE},
        timings={"total_s": time.perf_counter() - t0},
    )


def _reference(settings: DiagnoseSettings, src: Source, out_dir: Path, task: str,
               say: Callable[[str], None]) -> _Reference:
    """The evaluation inputs (saved beside the conversion) and the float model's outputs on them."""
    say("evaluation inputs")
    ds = evaluation_set(src, settings.data, samples=settings.eval_samples, preprocess=settings.convert.preprocess,
                        seed=settings.convert.seed)
    inputs_path = out_dir / "diagnose_inputs.npz"
    inputs_sha = ds.save(inputs_path)
    rule = resolve_state(settings.convert.state, ds.streams, ds.n, how=ds.stream_how, source=ds.source)
    torch_src = src.kind == "torch"
    say("PyTorch reference" if torch_src else "TensorFlow reference")
    if torch_src:
        ref_out = reference_outputs(src, ds)
    else:
        ref_out = run_tf(src.saved_model_dir, src.signature, ds, signature_key=src.signature_key, loader=src.loader,
                         tags=src.tags, rule=rule)
    kind = cmp.parse_output_kind(settings.output_kind)
    cmp.check_output_kind(kind, ref_out)
    declared = (kind.output if kind else None) or settings.class_output or (src.info or {}).get("class_output")
    class_out = cmp.pick_class_output(ref_out, declared) if task == "classification" or declared else None
    ref_acc = (cmp.reference_accuracy(ref_out[class_out], ds.labels, class_out, kind)
               if class_out is not None and ds.labels is not None else None)
    return _Reference(ds, inputs_path, inputs_sha, rule, ref_out, kind, class_out, ref_acc)


def _diagnose_precision(settings: DiagnoseSettings, prec: str, manifest: dict[str, Any], src: Source,
                        calib: Callable | None, ref: _Reference, out_dir: Path,
                        say: Callable[[str], None]) -> dict[str, Any]:
    """One quantized precision's row: its float counterpart, the per-tensor comparison, the ranking
    and (int8) the keep-float trials."""
    fp32 = manifest["variants"]["fp32"]
    v = manifest["variants"][prec]
    t_p = time.perf_counter()
    if FLOAT_REFERENCE[prec] == "calibrated" and calib is not None:   # (QAT int8: the FP32 model)
        say(f"{prec}: calibrated float model")
        qinfo = v.get("quantization", {})   # integer-only ops asked for (a mixed file's float ops came anyway)
        strict = qinfo.get("mode") == "full-integer" or bool(qinfo.get("integer_only_ops"))
        float_path = out_dir / f"{src.name}_{prec}_calibrated.tflite"
        float_path.write_bytes(finish_tflite(src, calibrated_model(src, calib, prec, settings.convert.int8_io,
                                                                   strict=strict)))
    else:
        float_path = Path(fp32["path"])
    ds = ref.ds
    say(f"{prec}: per-tensor comparison ({ds.n} samples)")
    t_w = time.perf_counter()
    meta, arrays = run_worker(float_path, v["path"], ref.inputs_path, samples=ds.n, isolated=settings.isolated,
                              deadline_s=settings.deadline_s, state_rule=ref.rule)
    meta["worker_seconds"] = round(time.perf_counter() - t_w, 3)
    say(f"{prec}: ranking")
    row = _row(prec, v, src.name, meta, arrays, ref.ref_out, ds.labels, ref.class_out, ref.ref_acc,
               str(float_path), time.perf_counter() - t_p, keep_float=not src.qat, qat=bool(src.qat), kind=ref.kind)
    if prec == "int8" and not src.qat and settings.fix_trials and float_path != Path(fp32["path"]) \
            and worth_trying(row["layers"], _psnr(row.get("worst"))):
        say(f"{prec}: keep-float trials")
        measure_fixes(row, float_path, out_dir=out_dir, inputs_path=ref.inputs_path, ref_out=ref.ref_out,
                      labels=ds.labels, class_out=ref.class_out, ref_acc=ref.ref_acc, int8_io=settings.convert.int8_io,
                      rule=ref.rule, limit=settings.fix_trials, kind=ref.kind)
    if src.qat:       # convert-and-compare refuses --keep-float for QAT: nothing to suggest or prove here
        row["suggested_keep_float"] = []
        row["verdict"] = ((row.get("verdict") + "; ") if row.get("verdict") else "") + QAT_NOTE
    return row


QAT_NOTE = ("a quantization-aware-trained model: its int8 ranges come from training, so the fix for a "
            "layer named here is in training (keep it float in the QAT model, or train longer with "
            "representative data); convert-and-compare cannot re-quantize it with tensors kept float")
TFLITE_PAIR_NOTE = ("a quantized .tflite made elsewhere, against its float .tflite (--reference): tensors are "
                    "matched by name, then by op type and shape; fixes are built from the float .tflite with "
                    "ai-edge-quantizer (the culprits kept float, or 16-bit activations on their scope) and proven "
                    "on the same inputs")


def diagnose_tflite(settings: DiagnoseSettings, progress: Callable[[str], None] | None = None) -> Document:
    """``diagnose INT8.tflite --reference FP32.tflite``: the per-layer error of a quantized file
    against its float counterpart when both came from someone else (no SavedModel to convert).
    The same worker, matching, metrics and ranking as ``diagnose``; accuracy and drift are against
    the float file's outputs; tensors that could not be matched are listed."""

    say = progress or (lambda _m: None)
    quant, ref = Path(settings.convert.src), settings.reference
    if not str(quant).endswith(".tflite"):
        raise BadInput(f"--reference {ref}: a float .tflite reference is for diagnosing a quantized .tflite; "
                       f"{quant} is not one (give SRC as INT8.tflite, or drop --reference to convert {quant})")
    if not ref:
        raise BadInput(f"{quant}: diagnosing a .tflite needs its float counterpart to compare every tensor "
                       "with: pass --reference FP32.tflite (the float model it was quantized from)")
    ref_path = Path(ref)
    if ref_path.suffix != ".tflite":
        raise BadInput(f"--reference {ref}: give the float .tflite the quantized file was made from")

    for pth in (quant, ref_path):
        refuse_compiled(pth, inspect(str(pth)))   # missing / not a flatbuffer / AOT-compiled: one line
    ref_prec, prec = file_precision(inspect(str(ref_path))), file_precision(inspect(str(quant)))
    if ref_prec != "fp32":
        raise BadInput(f"--reference {ref}: the file is {ref_prec}, not float; give the fp32 .tflite")
    if prec == "fp32":
        raise BadInput(f"{quant}: the file is fp32, so there is no quantization error to diagnose; give the "
                       "quantized .tflite as SRC")
    if settings.eval_samples <= 0:
        raise BadInput(f"--samples {settings.eval_samples}: must be positive")
    if not settings.data:
        raise BadInput(f"{quant}: no evaluation data for a .tflite; pass --data PATH (real samples; a 'labels' "
                       "array adds top-1) or --data synthetic (misleading for int8 activations)")
    t0 = time.perf_counter()
    out_dir = Path(settings.convert.out_dir) if settings.convert.out_dir else Path("edgebench-out") / quant.stem / "diagnose"

    check_output_dir(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    sig = tflite_signature(str(ref_path))
    say("evaluation inputs")
    ds = cast_to_signature(load_data(settings.data, sig, preprocess=settings.convert.preprocess, seed=settings.convert.seed,
                                     n=settings.eval_samples), sig).take(settings.eval_samples)
    inputs_path = out_dir / "diagnose_inputs.npz"
    inputs_sha = ds.save(inputs_path)
    rule = resolve_state(settings.convert.state, ds.streams, ds.n, how=ds.stream_how, source=ds.source)
    say("float reference (the --reference .tflite)")
    ref_out = run_tflite_inprocess(ref_path, ds, sig, rule=rule)
    kind = cmp.parse_output_kind(settings.output_kind)
    cmp.check_output_kind(kind, ref_out)
    class_out = cmp.pick_class_output(ref_out, (kind.output if kind else None) or settings.class_output)
    ref_acc = (cmp.reference_accuracy(ref_out[class_out], ds.labels, class_out, kind)
               if class_out is not None and ds.labels is not None else None)
    say(f"{prec}: per-tensor comparison ({ds.n} samples)")
    t_w = time.perf_counter()
    meta, arrays = run_worker(ref_path, quant, inputs_path, samples=ds.n, isolated=settings.isolated,
                              deadline_s=settings.deadline_s, state_rule=rule)
    meta["worker_seconds"] = round(time.perf_counter() - t_w, 3)
    size, ref_size = quant.stat().st_size, ref_path.stat().st_size
    v = {"path": str(quant), "sha256": sha256_file(quant), "bytes": size,
         "size_reduction_pct": round(100.0 * (1 - size / ref_size), 2) if ref_size else None}
    say(f"{prec}: ranking")

    aeq_ok = aeq_available()      # the fix is built from the float file with ai-edge-quantizer
    row = _row(prec, v, quant.stem, meta, arrays, ref_out, ds.labels, class_out, ref_acc, str(ref_path),
               time.perf_counter() - t0, keep_float=aeq_ok, kind=kind)
    row["fix_commands"] = []
    if not aeq_ok:
        row["suggested_keep_float"] = []      # nothing here can re-quantize from the float file
        row["verdict"] = ((row.get("verdict") + "; ") if row.get("verdict") else "") + AEQ_NOTE_MISSING
    elif prec in ("int8", "int16x8") and row.get("suggested_keep_float"):
        say("proving a fix: ai-edge-quantizer from the float .tflite")
        proof = prove_tflite_fix(settings, row, ref_path, sig, ds, ref_out, class_out, ref_acc, out_dir,
                                 proof_goal(row), kind=kind)
        if proof:
            row["fix_proof"] = proof
            row["fix_commands"] = [c["command"] for c in proof["candidates"] if c.get("offered", True)]
            kept = next((c for c in proof["candidates"] if c["option"] == "--keep-float"), None)
            if kept is not None and not kept["offered"]:     # measured: keeping them float is no fix
                row["tried_keep_float"], row["suggested_keep_float"] = row["suggested_keep_float"], []
                for l in row["layers"]:
                    if l.get("float_tensor") in row["tried_keep_float"] and l.get("finding"):
                        l["advice"] = f"{l['advice']}; measured: keeping it float is no fix ({kept['tried']})"
    reference = InferenceRow(role="reference", precision="fp32", target="host", model=ref_path.stem,
                             model_path=str(ref_path), model_sha256=sha256_file(ref_path),
                             accuracy=None if ref_acc is None else Accuracy.from_dict({**ref_acc, "output": class_out}))
    return Document.new(
        "diagnose", [InferenceRow.from_dict(row)], host_fingerprint(),
        reference=reference, model=quant.stem,
        source={"path": str(quant), "sha256": v["sha256"], "kind": "tflite", "reference": str(ref_path),
                "note": TFLITE_PAIR_NOTE},
        inputs=ds.record(inputs_path, inputs_sha),
        state_rule=rule.to_dict(),
        method={"matching": MATCHING_RULE, "isolated": ISOLATION_RULE, "ranking": RANKING_RULE,
                "noise_ratio": f"rmse_over_scale ~ 1/sqrt(12) = {NOISE_RATIO:.4f} for rounding alone",
                "outlier_ratio": row.get("outlier_ratio_method"),
                "float_reference": {prec: "the --reference .tflite"}},
        timings={"total_s": time.perf_counter() - t0},
    )


def _row(prec: str, v: dict[str, Any], model: str, meta: dict[str, Any], arrays: dict[str, np.ndarray],
         ref_out: dict[str, np.ndarray], labels, class_out: str | None, ref_acc, float_path: str,
         seconds: float, keep_float: bool = True, qat: bool = False,
         kind: cmp.OutputKind | None = None) -> dict[str, Any]:
    outputs = {k.split("::", 1)[1]: a for k, a in arrays.items() if k.startswith("out::")}
    layers = rank_layers(meta["tensors"], prec, keep_float=keep_float, qat=qat)
    drift = cmp.compare_outputs(ref_out, outputs) if outputs else {}
    suggested = suggest_keep_float(layers, prec)
    row: dict[str, Any] = {
        "precision": prec, "target": "host", "model": model, "model_path": v["path"],
        "model_sha256": v.get("sha256"), "status": "ok", "error": None,
        "size_bytes": v.get("bytes"), "size_reduction_pct": v.get("size_reduction_pct"),
        "float_model_path": float_path, "samples": meta.get("samples"), "graph_id": meta.get("graph_id"),
        "drift": drift, "worst": cmp.worst(drift) if drift else None,
        "accuracy": _acc_dict(cmp.accuracy_vs_reference(ref_out, outputs, labels, class_out, ref_acc, kind))
        if outputs else None,
        "layers": layers,
        "findings": sum(1 for l in layers if l["finding"]),
        "unmatched": meta.get("unmatched", []),
        "suggested_keep_float": suggested,
        "intermediates": meta.get("intermediates"),
        "memory": meta.get("memory"),
        "outlier_ratio_method": meta.get("outlier_ratio"),
        "tensors_float": meta.get("float_tensors"), "tensors_quantized": meta.get("quantized_tensors"),
        "runtime": meta.get("runtime"),
        "seconds": round(seconds, 3), "worker_seconds": meta.get("worker_seconds"),
    }
    if not any(l["finding"] for l in layers):
        row["verdict"] = "no layer stands out: the error is spread evenly (rounding only)"
    return row


def measure_fixes(row: dict[str, Any], calibrated_path: Path, *, out_dir: Path, inputs_path: Path, ref_out,
                  labels, class_out, ref_acc, int8_io: str, rule, limit: int,
                  kind: cmp.OutputKind | None = None) -> None:
    """Keep-float trials for the top candidates (``quant.fix_trials``): the layers re-ranked by the
    measured gain, ``fix_trials`` recorded, and the suggested tensors the ones that gained."""

    graph = float_tensors(calibrated_path)
    tried = trial_candidates(row["layers"], graph, limit)
    trials = run_trials(tried, calibrated=calibrated_path.read_bytes(), graph=graph, out_dir=out_dir,
                        inputs_npz=str(inputs_path), ref_out=ref_out, labels=labels, class_out=class_out,
                        ref_acc=ref_acc, int8_io=int8_io, state_rule=rule, kind=kind)
    base = _psnr(row.get("worst"))
    cos = (row.get("worst") or {}).get("cosine")
    row["layers"] = apply_gains(row["layers"], trials, base, cos)
    row["fix_trials"] = [{"tensor": ft, **{k: v for k, v in t.items() if k != "path"},
                          "gain_db": None if base is None or t.get("psnr_db") is None else round(t["psnr_db"] - base, 2)}
                         for ft, t in trials.items()]
    gained = [l["float_tensor"] for l in row["layers"] if helped(l, base, cos)]
    if any(t.get("psnr_db") is not None for t in trials.values()):
        row["suggested_keep_float"] = list(dict.fromkeys(gained))[:3]
    row["findings"] = sum(1 for l in row["layers"] if l["finding"])


def _acc_dict(acc: Accuracy | None) -> dict[str, Any] | None:
    return None if acc is None else acc.to_dict()


def proof_goal(row: dict[str, Any], floor_db: float | None = None) -> list[str] | None:
    """The goal a "prove it" command sets: stricter than what plain int8 already reaches, or the
    command proves nothing -- half the top-1 points lost (with labels, when at least 0.2 are lost),
    else 6 dB more worst-output PSNR (4x less noise power) -- and never beyond what was measured to be
    reachable: the best keep-float trial (``fix_trials``) and the 8-bit-weight floor (``floor_db``: the
    dynamic-range file's PSNR, when diagnosed too). None when int8 is already float-exact or no
    measured fix beats it (``row["proof_note"]`` then says why)."""
    trials = [t for t in row.get("fix_trials") or () if t.get("psnr_db") is not None]
    drop = (row.get("accuracy") or {}).get("top1_drop_pp")
    if drop is not None and drop >= 0.2:
        goal = max(0.1, round(drop / 2, 1))
        best = min((t["top1_drop_pp"] for t in trials if t.get("top1_drop_pp") is not None), default=None)
        if best is not None:
            if best > drop - 0.1:
                row["proof_note"] = (f"no tensor kept float lowers the top-1 drop (best measured {best:.2f} pp against "
                                     f"{drop:.2f} pp): the loss is spread over the model; try int16x8, QAT or fp16")
                return None
            goal = max(goal, math.ceil(best * 10) / 10)
        return ["--max-accuracy-drop", f"{goal:g}"]
    psnr = (row.get("worst") or {}).get("psnr_db")
    try:
        psnr = float(psnr)
    except (TypeError, ValueError):
        return None
    cos = (row.get("worst") or {}).get("cosine")
    if by_cosine(psnr, cos):       # the finding is the direction (zeros, sign flips): prove it with cosine
        goal_cos = 0.99
        best = max((t["cosine"] for t in trials if t.get("cosine") is not None), default=None)
        if best is not None:
            if best < cos + 0.05:
                row["proof_note"] = (f"no tensor kept float moves the worst output's cosine ({cos:.3f}; best measured "
                                     f"{best:.3f}): try int16x8 or fp16")
                return None
            goal_cos = min(goal_cos, math.floor(best * 100) / 100)
        row["proof_note"] = (f"proved by cosine (the finding's metric: {cos:.3f} while PSNR reads {psnr:.1f} dB, "
                             "which a few large values set and keeping layers float may not move)")
        return ["--min-cosine", f"{goal_cos:g}"]
    if math.isinf(psnr) or psnr >= 100.0:
        return None
    goal = math.floor(psnr) + 6
    caps = [(max(t["psnr_db"] for t in trials), "the best single tensor kept float")] if trials else []
    if floor_db is not None:
        caps.append((floor_db, "the 8-bit-weight floor (the dynamic-range file)"))
    if caps:
        cap, what = min(caps)
        if math.floor(cap) <= psnr:
            row["proof_note"] = (f"no goal to prove: int8's worst-output PSNR {psnr:.1f} dB is already at {what} "
                                 f"({cap:.1f} dB, measured); keeping layers float cannot do better -- int16x8, QAT "
                                 "or fp16 can")
            return None
        if math.floor(cap) < goal:
            goal = math.floor(cap)
            row["proof_note"] = f"goal {goal} dB: {what} reaches {cap:.1f} dB (measured)"
    return ["--min-psnr", f"{goal:g}"]


def _psnr(worst: dict[str, Any] | None) -> float | None:
    try:
        v = float((worst or {}).get("psnr_db"))
    except (TypeError, ValueError):
        return None
    return None if math.isinf(v) or math.isnan(v) else v


def fix_commands(settings: DiagnoseSettings, row: dict[str, Any], *, qat: bool = False, aeq: bool = False,
                 floor_db: float | None = None) -> list[str]:
    """Commands that prove a fix for one diagnosed precision (convert-and-compare measures it),
    each with a goal plain int8 does not already meet. None for a QAT model: its int8 ranges come
    from training, and convert-and-compare refuses --keep-float for it (the fix is in training)."""
    if row.get("status") != "ok" or row["precision"] != "int8" or qat:
        return []
    goal = proof_goal(row, floor_db)
    if goal is None:
        return []
    conv = settings.convert
    base = ["edgebench", "convert-and-compare", *source_flags(settings.convert.src, settings.convert.source)]
    for flag, value in (("--data", settings.data), ("--calibration-data", settings.calibration_data),
                        ("--preprocess", conv.preprocess if conv.preprocess != DEFAULT_PREPROCESS else None),
                        ("--int8-io", conv.int8_io if conv.int8_io != "float" else None),
                        ("--size", conv.size if conv.size != "tiny" else None)):
        if value is not None:
            base += [flag, str(value)]
    if not conv.source.static_batch and not str(conv.src).endswith(".tflite"):
        base.append("--dynamic-batch")      # convert as diagnose did
    drop = goal
    out = []
    if row.get("suggested_keep_float"):
        out.append(base + ["--precision", "fp32,int8", "--keep-float", ",".join(row["suggested_keep_float"])] + drop)
        if aeq:     # ai-edge-quantizer (PyTorch sources): 16-bit activations on the same scope
            out.append(base + ["--precision", "fp32,int8", "--a16", ",".join(row["suggested_keep_float"])] + drop)
    if not aeq:     # the search needs TensorFlow's converter
        out.append(base + ["--precision", "fp32,int8", "--keep-float", "auto"] + drop)
    out.append(base + ["--precision", "fp32,int8,int16x8"] + drop)
    return [" ".join(shlex.quote(x) for x in c) for c in out]
