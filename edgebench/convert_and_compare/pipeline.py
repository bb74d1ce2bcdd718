"""convert-and-compare and compare: the same inputs on TF and every target, drift, gate.

``convert_and_compare(settings)`` converts (all precisions by default), builds ONE InputSet
(saved as .npz with its sha256, fed byte-identically to every target), runs the TF reference
and every precision x target, computes drift/accuracy, and evaluates the gate. It returns the
result document (kind "compare"); exit-code decisions stay in the CLI.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import time
import uuid
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

import numpy as np

from edgebench.convert.quant.search import KeepFloatGoal
from edgebench.convert.run import DEFAULT_PRECISIONS, OUT_ROOT, ConvertSettings, convert_resolved
from edgebench.convert.worker import prestarted as converter_prestarted
from edgebench.core.errors import BadInput, ConversionFailed, EdgebenchError, GateFailed, InfraError, Undecided
from edgebench.core.fingerprint import emulation_warning, host_fingerprint, sha256_file
from edgebench.diagnose.run import DEFAULT_SAMPLES, diagnose_command
from edgebench.judge import drift as cmp
from edgebench.judge.gate import Thresholds, evaluate, thresholds_for
from edgebench.judge.outcome import error_sources, no_integer16_kernels, slower_reason
from edgebench.judge.verdicts import delegation_verdict, metric_disagreement, output_verdicts
from edgebench.model.inputs import (
    DEFAULT_PREPROCESS,
    InputSet,
    cast_to_signature,
    input_mismatch,
    load_data,
    range_warnings,
    value_ranges,
)
from edgebench.model.state_rule import DEFAULT_STATE, DEFAULT_STREAM_THRESHOLD, StateRule, stream_decisions
from edgebench.model.state_rule import resolve as resolve_state
from edgebench.model.tflite_model import inspect, precision
from edgebench.rows import Accuracy, Document, InferenceRow, SizeExplained, Worst, drifts_from_dict
from edgebench.sources.pytorch import resolve_any, spec_of
from edgebench.sources.resolve import SourceOptions, evaluation_set, resolve_source, tflite_variants
from edgebench.targets.base import DEFAULT_DELEGATE, Job, RunControl, RunOptions, RunResult
from edgebench.targets.host import HostTarget
from edgebench.targets.host_pool import prestarted, wait_ready
from edgebench.targets.loop import (
    HOST_TARGETS,
    PROCESS_ORDER,
    LoopOutcome,
    is_device,
    measure_in_rounds,
    resolve_targets,
    run_on_targets,
)
from edgebench.targets.measured import TYPED_FACTS, measured_fields
from edgebench.targets.row_parts import runtime_row_parts
from edgebench.targets.tf import TFTarget
from edgebench.targets.torch_ref import TorchTarget

DEFAULT_EVAL_SAMPLES = 1000


@dataclass(frozen=True)
class CompareSettings:
    """convert-and-compare's settings: the conversion (``ConvertSettings``: the model, its precisions,
    calibration, output folder), how each row runs (``RunOptions``), and what only this command has:
    the targets, the evaluation data and the gate."""
    convert: ConvertSettings
    targets: tuple[str, ...] = ("host",)
    run: RunOptions = field(default_factory=RunOptions)
    data: str | None = None               # evaluation data (else the reference model's split)
    eval_samples: int = DEFAULT_EVAL_SAMPLES
    class_output: str | None = None
    output_kind: str | None = None        # --output-kind NAME:ordinal,tolerance=N (judge.drift.parse_output_kind)
    thresholds: Thresholds = field(default_factory=Thresholds)
    gate_file: dict | None = None
    tf_batch: int = 32
    more_tflite: tuple[str, ...] = ()     # further .tflite SRCs (with a .tflite src: variants of one run)
    precisions_given: bool = False        # --precision was given: a single float .tflite SRC is quantized
    stream_threshold: float = DEFAULT_STREAM_THRESHOLD   # a detector's per-window firing score (streams)

    def with_convert(self, **changes: Any) -> "CompareSettings":
        return replace(self, convert=replace(self.convert, **changes))


def keep_float_goal(settings: CompareSettings):
    """The int8 thresholds (command line over --gate file) as the goal of --keep-float auto,
    measured on the same InputSet and run control as the rows."""
    th = thresholds_for("int8", settings.thresholds, settings.gate_file)
    return KeepFloatGoal(max_accuracy_drop_pp=th.max_accuracy_drop_pp, min_psnr_db=th.min_psnr_db,
                         eval_data=settings.data, eval_samples=settings.eval_samples,
                         preprocess=settings.convert.preprocess,
                         seed=settings.convert.seed, class_output=settings.class_output, threads=settings.run.threads,
                         delegate=settings.run.delegate, control=settings.run.control, state=settings.convert.state)


def save_inputs(ds: InputSet, out_dir: Path) -> tuple[Path, str]:
    """Save the InputSet as ``OUT/inputs-<sha256[:12]>.npz`` (named by its bytes, so two runs with
    different evaluation data never overwrite each other's inputs); returns (path, file sha256)."""

    tmp = out_dir / f".inputs-{uuid.uuid4().hex[:12]}.npz"
    sha = ds.save(tmp)
    final = out_dir / f"inputs-{sha[:12]}.npz"
    os.replace(tmp, final)
    return final, sha


def _row_from_run(run: RunResult, *, precision: str, variant: dict[str, Any], ref_out, labels, class_out,
                  ref_acc, task: str, host_out: dict[str, np.ndarray] | None, thresholds: Thresholds | None = None,
                  gpu_precision: str | None = None, streams: Callable | None = None,
                  kind: cmp.OutputKind | None = None) -> InferenceRow:
    if run.status == "ok" and variant.get("sha256") and run.model_sha256 != variant["sha256"]:
        # the row's size and conversion facts describe the converted file; the measured file is another
        run = RunResult.failed(
            run.target, run.model_path, f"the file measured ({run.model_path}, sha256 {run.model_sha256[:12]}) is not "
            f"the one this run converted (sha256 {variant['sha256'][:12]}): another run replaced it; give each run its "
            "own --out (or omit --out)", model_sha256=run.model_sha256, exit_code=2)
    row = InferenceRow(
        precision=precision, target=run.target, model=variant.get("model"), model_path=run.model_path,
        model_sha256=run.model_sha256, size_bytes=variant.get("bytes"),
        size_reduction_pct=variant.get("size_reduction_pct"), status=run.status, error=run.error,
        runtime=run.runtime, method=run.method, device_model=(run.fingerprint or {}).get("device_model"),
        fingerprint=run.fingerprint, init_ms=run.init_ms, first_inference_ms=run.first_inference_ms,
        peak_rss_bytes=run.peak_rss_bytes, extra=_extra(run.extra), exit_code=run.extra.get("exit_code"),
        gpu_precision=gpu_precision,
        keep_float=tuple(variant["keep_float"]) if variant.get("keep_float") is not None else None,
        precision_found=variant.get("precision_from_tensors") or variant.get("precision"),
        precision_detail=variant.get("precision_detail"),
        size_explained=SizeExplained.from_dict(variant.get("size_explained")),
    )
    if run.status != "ok":
        return row

    th = thresholds or Thresholds()
    where = f"{precision} on {run.target}" + (f" (GPU {gpu_precision})" if gpu_precision else "")
    row = row.replace(**measured_fields(run, where), extra=_extra(run.extra))
    if run.extra.get("repeats"):
        row = row.replace(warnings=tuple(run.extra["repeat_warnings"]))
    parts, warnings = runtime_row_parts(run.extra, row.latency, where)
    emulated = emulation_warning(run.fingerprint)     # as bench: an emulator's numbers are not a phone's
    if emulated:
        warnings.append(emulated)
    cause = no_integer16_kernels(row.replace(delegation=parts.get("delegation"), precision=precision))
    if cause:      # not "left on the CPU: SOFTMAX, SHAPE ...": there are no 16x8 kernels at all
        warnings = [w for w in warnings if " left on the CPU interpreter: " not in w] + [cause]
    row = row.replace(**{k: v for k, v in parts.items() if v is not None}, warnings=tuple(row.warnings) + tuple(warnings))
    verdicts = delegation_verdict(row.delegation, th.min_delegated_pct)
    if run.outputs is not None:
        got, mapping = cmp.align_outputs(ref_out, run.outputs)
        raw = cmp.compare_outputs(ref_out, got)
        acc = cmp.accuracy_vs_reference(ref_out, got, labels, class_out, ref_acc, kind)
        row = row.replace(drift=drifts_from_dict(raw), worst=Worst.from_dict(cmp.worst(raw)), accuracy=acc,
                          output_mapping=mapping if mapping["how"] != "name" else None)
        note = cmp.ordinal_note(acc, kind)        # top-1 moves mostly to a neighbouring bin: say so once
        if note:
            row = row.replace(warnings=tuple(row.warnings) + (note,))
        if task == "detection":
            row = row.replace(detection=cmp.detection(ref_out, got))
        if streams is not None:
            row = row.replace(streams=streams(got))
        if host_out is not None:
            hd = cmp.compare_outputs(host_out, run.outputs)
            row = row.replace(drift_vs_host=drifts_from_dict(hd), worst_vs_host=Worst.from_dict(cmp.worst(hd)))
        verdicts = output_verdicts(ref_out, got, row.drift, th.min_cosine, _output_steps(run.model_path)) + verdicts
        row = row.replace(warnings=tuple(row.warnings) + tuple(metric_disagreement(row.drift, row.accuracy)))
    return row.replace(verdicts=tuple(verdicts))


def stream_judge(rule: StateRule, ref_out: dict[str, np.ndarray], class_out: str | None, stream_labels,
                 threshold: float) -> Callable[[dict[str, np.ndarray]], dict[str, Any] | None] | None:
    """Streams mode: a row's outputs (aligned to the reference's) -> its per-stream decisions
    against the reference's (``state_rule.stream_decisions``); None otherwise. Without a
    classification output, the first output with one score per window is the detector."""
    if not rule.streams:
        return None
    name = class_out or next((k for k, v in ref_out.items() if int(np.prod(np.shape(v)[1:])) == 1), None)
    if name is None:
        return None
    return lambda got: stream_decisions(rule, ref_out[name], got.get(name), threshold=threshold,
                                        stream_labels=stream_labels, output=name)


def _quantized_inputs(paths: list[str]) -> dict[str, tuple[str, float, int]]:
    """Inputs some of the given .tflite files take quantized (name -> dtype, scale, zero point): data
    given as those codes is dequantized with them (``data.Signature.quantized``), so a vendor's int8
    set and its float file are fed the same values."""

    out: dict[str, tuple[str, float, int]] = {}
    for p in paths:
        for d in inspect(p)["inputs"]:
            q = d.get("quantization") or {}
            if d["dtype"] in ("int8", "uint8", "int16") and isinstance(q.get("scale"), float) and q["scale"]:
                out.setdefault(d["name"], (d["dtype"], q["scale"], int(q.get("zero_point") or 0)))
    return out


def _output_steps(model_path: str) -> dict[str, float]:
    """The quantization step of each output of a .tflite (``tflite_model`` ``output_steps``)."""
    try:
        return dict(inspect(model_path).get("output_steps") or {}) if str(model_path).endswith(".tflite") else {}
    except EdgebenchError:
        return {}


def _row_job(settings: CompareSettings, item: tuple[str, dict[str, Any], str | None], inputs_path: Path,
             rule: StateRule | None = None) -> Job:
    """The job of one precision x target row (its first worker process: outputs saved)."""
    _prec, v, gp = item
    return Job(model_path=v["path"], inputs_npz=str(inputs_path), threads=settings.run.threads,
               delegate=settings.run.delegate, control=settings.run.control, save_outputs=True,
               seed=settings.convert.seed,
               runtime_api=settings.run.runtime_api, accelerator=settings.run.accelerator, gpu_precision=gp,
               op_profile=settings.run.op_profile, state_rule=rule)


def _explain_slower(rows: list[InferenceRow]) -> list[InferenceRow]:
    """A quantized row slower than fp32 on its target gets a warning saying why, where the rows
    know (delegation, per-op profiles)."""
    fp32 = {r.target: r for r in rows if r.precision == "fp32" and r.ok}
    out = []
    for r in rows:
        base = fp32.get(r.target)
        why = slower_reason(r, base) if (r.ok and base is not None and r is not base) else None
        out.append(r.replace(warnings=tuple(r.warnings) + (why,)) if why else r)
    return out


def _extra(extra: dict[str, Any]) -> dict[str, Any]:
    """Run facts kept on the row, minus what became typed fields (delegation, op profile, input mapping)."""
    return {k: v for k, v in extra.items() if k not in ("delegation", "op_profile_raw", "op_profile", "service_ns",
                                                          *TYPED_FACTS)}


def _tflite_run_dir(files: list[str]) -> Path:
    """Without --out, .tflite sources get a folder of their own, named by the files' contents
    (``edgebench-out/<stem>/<key>/``), like conversions: two runs never share a manifest."""


    key = hashlib.sha256("".join(sha256_file(f) if Path(f).is_file() else f for f in files).encode()).hexdigest()[:12]
    return Path(OUT_ROOT) / Path(files[0]).stem / key


def convert_and_compare(settings: CompareSettings, progress: Callable[[str], None] | None = None) -> Document:
    """Convert, run the reference and every precision x target, compare, gate. Returns the doc.

    Ctrl-C/SIGTERM during the target runs keep every row already measured (the rest are
    failed "not run" rows); ``meta["interrupted"]`` is then true and ``interrupted_by`` names the signal.

    The host rows' workers are started first (``targets.host_pool``): they import their runtime on
    the core TensorFlow's import leaves idle, and are all ready before anything is timed."""
    hosts = sum(1 for name in settings.targets for n in str(name).split(",") if n.strip() in HOST_TARGETS)
    conv, run = settings.convert, settings.run
    rows = hosts * len(conv.precisions) * max(1, len(run.gpu_precisions)) * max(1, run.repeats)
    calibrated = any(p in ("int8", "int16x8") for p in conv.precisions) and not conv.src.endswith(".tflite")
    with prestarted(rows), converter_prestarted(calibrated):   # ... and the conversion worker (convert_worker)
        return _convert_and_compare(settings, progress)


def _convert_and_compare(settings: CompareSettings, progress: Callable[[str], None] | None) -> Document:
    say = progress or (lambda _m: None)
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    # batch 1 is measured
    settings = settings.with_convert(source=settings.convert.source.for_measuring(settings.convert.src))
    settings.run.validate()
    if settings.thresholds.max_accuracy_drop_pp is not None or any(
            (t.max_accuracy_drop_pp is not None) for t in (settings.gate_file or {}).values()):
        accuracy_gate = True
    else:
        accuracy_gate = False
    targets = resolve_targets(settings.targets, threads=settings.run.threads, delegate=settings.run.delegate,
                              benchmark_binary=settings.run.benchmark_binary, allow_tf=True)   # fail fast
    timings["resolve_targets_s"] = time.perf_counter() - t0
    t = time.perf_counter()
    import tensorflow  # noqa: F401 -- timed on its own: a fixed cost of every run

    timings["tf_import_s"] = time.perf_counter() - t

    if hasattr(say, "set_total"):   # convert stages + parity + inputs + reference + every row
        n = len(settings.convert.precisions)
        say.set_total(2 + n + 1 + 1 + n * max(len(targets), 1)
                      * max(1, len(settings.run.gpu_precisions)) * settings.run.repeats)
    t = time.perf_counter()
    settings, manifest, src = _variants(settings, say)
    timings["convert_s"] = time.perf_counter() - t
    out_dir = Path(manifest["out_dir"])
    task = (src.info or {}).get("task", "classification")

    say("evaluation inputs")
    ds = evaluation_set(src, settings.data, samples=settings.eval_samples, preprocess=settings.convert.preprocess,
                        seed=settings.convert.seed)
    if accuracy_gate and ds.labels is None:
        raise BadInput(f"--max-accuracy-drop needs labelled data but {ds.source} has no 'labels'; pass --data "
                       "with a 'labels' array (one class id per sample) or drop the accuracy gate")
    inputs_path, inputs_sha = save_inputs(ds, out_dir)
    data_warnings = range_warnings((manifest.get("calibration") or {}).get("value_ranges") or {},
                                   value_ranges(ds, src.signature))
    rule = resolve_state(settings.convert.state, ds.streams, ds.n, how=ds.stream_how, source=ds.source)

    say("TensorFlow reference" if src.saved_model_dir is not None else "PyTorch reference" if src.kind == "torch"
        else "reference .tflite on the host")
    t = time.perf_counter()
    ref_run, ref_label, ref_target = _run_reference(settings, src, manifest, inputs_path, rule)
    timings["reference_s"] = time.perf_counter() - t
    ref_out = ref_run.outputs or {}
    judge = _judge(settings, src, task, ref_out, ds, rule, accuracy_gate)
    ref_row = InferenceRow(
        role="reference", precision=ref_label, target=ref_target, model=src.name,
        model_path=str(src.saved_model_dir or src.path), model_sha256=src.sha256,
        accuracy=None if judge.ref_acc is None else Accuracy.from_dict({**judge.ref_acc, "output": judge.class_out}),
        batch_throughput=ref_run.extra.get("batch_throughput"),
        streams=judge.streams(ref_out) if judge.streams else None,
        **measured_fields(ref_run, "TF reference run"))

    ok_variants = [(p, {**v, "model": src.name}, gp) for p, v in manifest["variants"].items()
                   if p in settings.convert.precisions and v.get("status") == "ok"
                   for gp in (settings.run.gpu_precisions or (None,))]
    t = time.perf_counter()
    outcome = _measure(settings, targets, ok_variants, src, ref_run, ref_label, inputs_path, rule, say)
    results = {(ok_variants[i][0], ok_variants[i][2], name): r for (name, i), r in outcome.results.items()}
    timings["targets_s"] = time.perf_counter() - t

    rows = _explain_slower(_rows(settings, manifest, src, targets, results, ref_out, ds.labels, judge, task))
    verdict = evaluate(rows, settings.thresholds, settings.gate_file,
                       "TF reference" if src.saved_model_dir is not None else f"reference {ref_label} .tflite")
    timings["total_s"] = time.perf_counter() - t0
    return Document.new(
        "compare", rows, host_fingerprint(with_tf=True, threads=settings.run.threads, delegate=settings.run.delegate),
        reference=ref_row,
        model=src.name,
        source=_source_record(settings, src, manifest, task),
        inputs=ds.record(inputs_path, inputs_sha),
        manifest=str(out_dir / "manifest.json"),
        conversion={p: {k: v.get(k) for k in ("status", "error", "bytes", "size_reduction_pct", "seconds",
                                               "float_ops", "quantization")}
                    for p, v in manifest["variants"].items()},
        parity=manifest.get("parity"),
        gate=verdict.to_dict(),
        timings=timings,
        interrupted=outcome.interrupted is not None, interrupted_by=outcome.interrupted,
        run_control=settings.run.control.to_dict(),
        state_rule=rule.to_dict(),
        runtime={"api": settings.run.runtime_api, "accelerator": settings.run.accelerator,
                 "gpu_precisions": list(settings.run.gpu_precisions), "op_profile": settings.run.op_profile},
        **({"process_order": PROCESS_ORDER} if settings.run.repeats > 1 else {}),
        **_advice(settings, manifest, rows, verdict),
        data_warnings=data_warnings,
    )


def _variants(settings: CompareSettings, say: Callable[[str], None]) -> tuple[CompareSettings, dict[str, Any], Any]:
    """(the settings as the variants make them, the manifest, the resolved source): the given
    .tflite files as the variants, or SRC converted (the model read once, by the conversion)."""
    if not ((settings.convert.src.endswith(".tflite") or settings.more_tflite) and not _quantizes_tflite(settings)):
        goal = keep_float_goal(settings) if settings.convert.keep_float == "auto" else None
        converted = convert_resolved(replace(settings.convert, keep_float_goal=goal), progress=say)
        manifest, src = converted.manifest, converted.source     # the model is read once, by the conversion
        if manifest.get("static_batch_fallback"):     # converted with the dynamic batch after all
            settings = settings.with_convert(source=settings.convert.source.dynamic_batch())
        return settings, manifest, src
    # .tflite SRC(s): the given files are the variants; TF runs only with --reference.
    if settings.convert.keep_float:
        raise BadInput("--keep-float re-quantizes while converting; a .tflite SRC is measured as given: pass "
                       "the SavedModel/.keras it came from")

    files = [settings.convert.src, *settings.more_tflite]
    out = settings.convert.out_dir
    manifest = tflite_variants(files, Path(out) if out else _tflite_run_dir(files))
    settings = settings.with_convert(precisions=tuple(manifest["variants"]))
    ref_variant = manifest["variants"][manifest["reference_variant"]]
    src = resolve_any(settings.convert.source.reference or ref_variant["path"], size=settings.convert.size,
                      work_dir=Path(manifest["out_dir"]), seed=settings.convert.seed,
                      options=settings.convert.source)
    src = replace(src, signature=replace(src.signature, quantized={
        **_quantized_inputs([v["path"] for v in manifest["variants"].values()]), **src.signature.quantized}))
    if settings.convert.source.reference:        # another model than the files: say so, not "reshape the data"
        given = resolve_any(ref_variant["path"], size=settings.convert.size, work_dir=Path(manifest["out_dir"]),
                               seed=settings.convert.seed, options=settings.convert.source)
        why = input_mismatch(src.signature, given.signature)
        if why:
            raise BadInput(f"{ref_variant['path']} {why} (--reference {settings.convert.source.reference}): the "
                           "reference must be the model the .tflite files were converted from")
    return settings, manifest, src


def _run_reference(settings: CompareSettings, src, manifest: dict[str, Any], inputs_path: Path,
                   rule: StateRule) -> tuple[RunResult, str, str]:
    """(the reference's run, its precision label, its target label): TF for a TF model, the PyTorch
    model for a PyTorch one, else the most precise .tflite on the host."""
    ref_job = Job(model_path=str(src.saved_model_dir or src.path), inputs_npz=str(inputs_path),
                  control=settings.run.control, save_outputs=True, seed=settings.convert.seed, state_rule=rule)
    wait_ready()             # no pre-started worker is still importing while the reference is timed
    if src.kind == "torch":   # the PyTorch model itself is the reference, as TF is for a TF model

        ref_run = TorchTarget(spec_of(src), src.sha256).run(ref_job, src.signature)
        return ref_run, "torch", f"torch ({ref_run.extra.get('device')})"
    if src.saved_model_dir is not None:
        tft = TFTarget(batch=settings.tf_batch, signature_key=src.signature_key, loader=src.loader, tags=src.tags)
        ref_run = tft.run(ref_job, src.signature)
        return ref_run, "tf", f"tf ({ref_run.extra.get('device')})"
    # .tflite files only: the most precise one, on the host, is the reference

    ref_run = HostTarget(threads=settings.run.threads, delegate=settings.run.delegate).run(
        replace(ref_job, threads=settings.run.threads, delegate=settings.run.delegate))
    return ref_run, manifest.get("reference_variant", "fp32"), "host"   # (a quantized float .tflite: fp32)


@dataclass(frozen=True)
class _Judge:
    """How a row's outputs are judged against the reference's: the output kind, the class output,
    the reference's own accuracy and the streams judge (``stream_judge``)."""
    kind: cmp.OutputKind | None
    class_out: str | None
    ref_acc: dict[str, Any] | None
    streams: Callable[[dict[str, np.ndarray]], dict[str, Any] | None] | None


def _judge(settings: CompareSettings, src, task: str, ref_out: dict[str, np.ndarray], ds: InputSet,
           rule: StateRule, accuracy_gate: bool) -> _Judge:
    kind = cmp.parse_output_kind(settings.output_kind)
    cmp.check_output_kind(kind, ref_out)
    declared = (kind.output if kind else None) or settings.class_output or (src.info or {}).get("class_output")
    class_out = cmp.pick_class_output(ref_out, declared) if task == "classification" or declared else None
    if accuracy_gate and class_out is None:
        raise BadInput(f"--max-accuracy-drop needs class scores, but no output of {settings.convert.src} is [samples, "
                       "classes]; pass --class-output NAME or use --min-psnr instead")
    ref_acc = None
    if class_out is not None and ds.labels is not None:
        ref_acc = cmp.reference_accuracy(ref_out[class_out], ds.labels, class_out, kind)
    streams = stream_judge(rule, ref_out, class_out, ds.stream_labels, settings.stream_threshold)
    return _Judge(kind, class_out, ref_acc, streams)


_Item = tuple[str, dict[str, Any], str | None]     # (precision, variant, GPU precision): one row per target


def _measure(settings: CompareSettings, targets: list, ok_variants: list[_Item], src, ref_run: RunResult,
             ref_label: str, inputs_path: Path, rule: StateRule, say: Callable[[str], None]) -> LoopOutcome:
    """Every precision x target row measured (``--repeats``: in rounds, each row's processes pooled)."""

    def run_one(tgt, item: _Item) -> RunResult:
        prec, v, gp = item
        if src.saved_model_dir is None and prec == ref_label and gp is None and not is_device(tgt) \
                and settings.run.runtime_api == "interpreter" and not settings.run.op_profile and settings.run.repeats == 1:
            return ref_run   # the reference .tflite was just measured on this host with the same job
        return tgt.run(_row_job(settings, item, inputs_path, rule))

    def failed(tgt, item: _Item, err: EdgebenchError) -> RunResult:
        return RunResult.failed(tgt.name, item[1]["path"], str(err), model_sha256=item[1].get("sha256", ""),
                                exit_code=err.exit_code)

    def describe(tg, item: _Item) -> str:
        return f"{item[0]} on {tg.name}" + (f" (GPU {item[2]})" if item[2] else "")

    if settings.run.repeats <= 1:
        return run_on_targets(targets, ok_variants, run_one, failed, progress=say, describe=describe)

    # replicates that are replicates: every row's k-th worker process runs before any row's next
    # (ABAB...), so load that comes and goes hits every precision alike; the first process of a
    # row saves the outputs (drift, accuracy), the others time only
    def one_process(tgt, item: _Item, r: int) -> RunResult:
        job = _row_job(settings, item, inputs_path, rule)
        return tgt.run(job if r == 0 else replace(job, save_outputs=False, op_profile=False))

    rounds = measure_in_rounds(targets, ok_variants, settings.run.repeats, one_process, failed, progress=say,
                               describe=describe, round_gap_s=settings.run.round_gap_s)
    outcome = LoopOutcome(interrupted=rounds.interrupted)
    for tg in targets:
        for i, item in enumerate(ok_variants):
            runs = rounds.processes.get((tg.name, i)) or [failed(tg, item, InfraError(
                f"not run: interrupted ({rounds.interrupted}) before this row was measured"))]
            res = RunResult.pooled(runs, describe(tg, item), rounds.order.get((tg.name, i)),
                                   rounds.started.get((tg.name, i)))
            if res.status == "ok" and len(runs) < settings.run.repeats:
                res = replace(res, extra={**res.extra, "repeat_warnings": [
                    *res.extra.get("repeat_warnings", ()), f"interrupted: {len(runs)} of {settings.run.repeats} "
                    "worker processes were measured; the row pools those"]})
            outcome.results[(tg.name, i)] = res
    return outcome


def _rows(settings: CompareSettings, manifest: dict[str, Any], src, targets: list,
          results: dict[tuple[str, str | None, str], RunResult], ref_out: dict[str, np.ndarray], labels,
          judge: _Judge, task: str) -> list[InferenceRow]:
    """One row per precision x GPU precision x target, in the manifest's order (a failed conversion:
    one failed row per target)."""
    rows: list[InferenceRow] = []
    for prec, v in manifest["variants"].items():
        if prec not in settings.convert.precisions:
            continue
        if v.get("status") != "ok":
            for tgt in targets:
                rows.append(InferenceRow(precision=prec, target=tgt.name, model=src.name, status="failed",
                                         error=f"conversion failed: {v.get('error')}", size_bytes=v.get("bytes"),
                                         error_type="ConversionFailed", exit_code=2))
            continue
        v = {**v, "model": src.name}
        th = thresholds_for(prec, settings.thresholds, settings.gate_file)
        for gp in (settings.run.gpu_precisions or (None,)):
            host_run = next((results[(prec, gp, h.name)] for h in targets
                             if not is_device(h) and results[(prec, gp, h.name)].status == "ok"), None)
            for tgt in targets:
                run = results[(prec, gp, tgt.name)]
                rows.append(_row_from_run(run, precision=prec, variant=v, ref_out=ref_out, labels=labels,
                                          class_out=judge.class_out, ref_acc=judge.ref_acc, task=task,
                                          host_out=host_run.outputs if (host_run and is_device(tgt)) else None,
                                          thresholds=th, gpu_precision=gp, streams=judge.streams, kind=judge.kind))
    return rows


def _advice(settings: CompareSettings, manifest: dict[str, Any], rows: list[InferenceRow], verdict) -> dict[str, Any]:
    """The result's further keys: the keep-float search, where the error comes from, and what to try
    when a quality threshold was missed (the diagnose command, or a keep-float hint)."""
    extra: dict[str, Any] = {}
    search = (manifest["variants"].get("int8") or {}).get("keep_float_search")
    if search:
        extra["keep_float_search"] = search
    split = error_sources(rows)
    if split:
        extra["error_sources"] = split
    quality_misses = sorted({c.precision for c in verdict.failures
                             if c.metric in ("accuracy_drop_pp", "psnr_db", "nonfinite_outputs")
                             and c.precision in ("int8", "int16x8", "fp16", "dynamic")})
    if quality_misses == ["int8"] and settings.convert.keep_float:
        # int8 already kept the diagnosed tensors float: diagnose would name them again (a loop)
        extra["keep_float_hint"] = (
            "the --keep-float auto search met no goal it tried (see its table): try --precision int16x8 or a "
            "looser goal" if settings.convert.keep_float == "auto" else
            f"keeping {len(next((r.keep_float for r in rows if r.precision == 'int8' and r.keep_float), ()))} "
            "tensor(s) float did not reach it: let --keep-float auto "
            "search measured sets of the ranked tensors, or try --precision int16x8")
    elif quality_misses:

        extra["diagnose_command"] = diagnose_command(   # same data; diagnose's own default sample count
            settings.convert.src, quality_misses, data=settings.data,
            calibration_data=settings.convert.data if settings.convert.data != settings.data else None,
            samples=settings.eval_samples if settings.eval_samples < DEFAULT_SAMPLES else None,
            size=settings.convert.size, int8_io=settings.convert.int8_io,
            preprocess=settings.convert.preprocess if settings.convert.preprocess != DEFAULT_PREPROCESS else None,
            source=settings.convert.source)
    return extra


def _quantizes_tflite(settings: CompareSettings) -> bool:
    """A single float .tflite SRC given with --precision, --keep-float or --a16 is converted (quantized
    with ai-edge-quantizer) rather than measured as given; a quantized file, several files or a
    --reference keep the given-variants path."""
    conv = settings.convert
    if settings.more_tflite or conv.source.reference or not (settings.precisions_given or conv.keep_float
                                                              or conv.a16):
        return False

    return Path(settings.convert.src).is_file() and precision(inspect(settings.convert.src)) == "fp32"


def _source_record(settings: CompareSettings, src, manifest: dict[str, Any], task: str) -> dict[str, Any]:
    """The result's ``source``: what was converted (or the .tflite files given) and how it was read."""
    rec = {"path": settings.convert.src, "sha256": src.sha256, "kind": src.kind, "task": task, "loader": src.loader,
           "loader_reason": src.loader_reason, "signature_key": src.signature_key, "input_shapes": src.input_shapes,
           "static_batch_fallback": manifest.get("static_batch_fallback")}
    if manifest.get("kind") == "tflite":   # src is the reference: a --reference SavedModel or the chosen file
        first = next(v for v in manifest["variants"].values() if v["path"] == settings.convert.src)
        rec.update(kind="tflite", sha256=first["sha256"], tflite_files=[settings.convert.src, *settings.more_tflite],
                   reference={"path": src.path, "kind": src.kind, "sha256": src.sha256},
                   reference_reason=None if settings.convert.source.reference else manifest.get("reference_reason"))
    return rec


# --------------------------------------------------------------------------- compare A B


@dataclass(frozen=True)
class PairSettings:
    a: str
    b: str
    data: str | None = None
    samples: int = DEFAULT_EVAL_SAMPLES
    preprocess: str = DEFAULT_PREPROCESS
    threads: int | None = None
    delegate: str = DEFAULT_DELEGATE
    control: RunControl = field(default_factory=RunControl)
    class_output: str | None = None
    output_kind: str | None = None        # --output-kind NAME:ordinal,tolerance=N
    seed: int = 0
    source: SourceOptions = field(default_factory=SourceOptions)   # SavedModels: --signature/--input-shape
    state: str = DEFAULT_STATE            # --state (edgebench.model.state_rule)
    stream_threshold: float = DEFAULT_STREAM_THRESHOLD


def _model_kind(path: str) -> str:
    p = Path(path)
    if not p.exists():
        raise BadInput(f"{path}: no such file or folder; give a .tflite file or a SavedModel folder")
    if p.is_dir():
        return "saved_model"
    if p.suffix != ".tflite":
        raise BadInput(f"{path}: expected a .tflite file or a SavedModel folder")
    return "tflite"


def compare_pair(settings: PairSettings, progress: Callable[[str], None] | None = None) -> Document:
    """Run A and B (each .tflite on the host, or a SavedModel with TF) on the same inputs; A is the reference."""
    say = progress or (lambda _m: None)
    kinds = [_model_kind(settings.a), _model_kind(settings.b)]
    srcs = [resolve_source(x, options=settings.source, require_static=False) for x in (settings.a, settings.b)]
    sig = srcs[0].signature
    sig = replace(sig, quantized={**_quantized_inputs([x for x in (settings.a, settings.b) if x.endswith(".tflite")]),
                                  **sig.quantized})
    why = input_mismatch(sig, srcs[1].signature)
    if why:       # the data is fine for A: B is another model, and feeding it would blame the data
        raise BadInput(f"{settings.b} {why} ({settings.a}): compare runs the same inputs through two forms of "
                       "one model (e.g. its SavedModel and its int8 .tflite); give B converted from A")
    if settings.data is None:
        raise BadInput("compare needs --data (an .npz/.npy/image folder of real samples, or 'synthetic')")
    ds = load_data(settings.data, sig, preprocess=settings.preprocess, seed=settings.seed, n=max(settings.samples, 1))
    ds = cast_to_signature(ds, sig).take(settings.samples)
    rule = resolve_state(settings.state, ds.streams, ds.n, how=ds.stream_how, source=ds.source)
    tmp = Path(tempfile.mkdtemp(prefix="edgebench-compare-"))
    inputs_path = tmp / "inputs.npz"
    inputs_sha = ds.save(inputs_path)
    runs: list[RunResult] = []
    for path, kind, src in zip((settings.a, settings.b), kinds, srcs):
        say(f"running {path}")
        job = Job(model_path=path, inputs_npz=str(inputs_path), threads=settings.threads,
                  delegate=settings.delegate, control=settings.control, save_outputs=True, seed=settings.seed,
                  state_rule=rule)
        if kind == "saved_model":

            runs.append(TFTarget(signature_key=src.signature_key, loader=src.loader, tags=src.tags)
                        .run(job, src.signature))
        else:

            runs.append(HostTarget(threads=settings.threads, delegate=settings.delegate).run(job))
    ref, other = runs
    if ref.status != "ok":
        raise BadInput(f"{settings.a}: run failed: {ref.error}")
    kind = cmp.parse_output_kind(settings.output_kind)
    cmp.check_output_kind(kind, ref.outputs or {})
    class_out = cmp.pick_class_output(ref.outputs or {}, (kind.output if kind else None) or settings.class_output)
    ref_acc = (cmp.reference_accuracy(ref.outputs[class_out], ds.labels, class_out, kind)
               if class_out is not None and ds.labels is not None else None)
    streams = stream_judge(rule, ref.outputs or {}, class_out, ds.stream_labels, settings.stream_threshold)
    rows = []
    for path, run, src in zip((settings.a, settings.b), runs, srcs):
        row = InferenceRow(
            model=Path(path).name, model_path=path, model_sha256=run.model_sha256 or sha256_file(path),
            target=run.target, precision="tf" if src.saved_model_dir is not None else src.info.get("precision"),
            status=run.status, error=run.error, runtime=run.runtime,
            role="reference" if run is ref else "compared",
            size_bytes=Path(path).stat().st_size if Path(path).is_file() else None)
        if run.status == "ok":
            got, mapping = cmp.align_outputs(ref.outputs, run.outputs)
            raw = cmp.compare_outputs(ref.outputs, got)
            acc = cmp.accuracy_vs_reference(ref.outputs, got, ds.labels, class_out, ref_acc, kind)
            note = cmp.ordinal_note(acc, kind) if run is not ref else None
            row = row.replace(**measured_fields(run, f"run of {path}"), drift=drifts_from_dict(raw),
                              worst=Worst.from_dict(cmp.worst(raw)), output_mapping=mapping, accuracy=acc,
                              streams=streams(got) if streams else None)
            if note:
                row = row.replace(warnings=tuple(row.warnings) + (note,))
        rows.append(row)
    loaders = [{"path": x.path, "loader": x.loader, "loader_reason": x.loader_reason, "signature_key": x.signature_key}
               for x in srcs if x.saved_model_dir is not None]
    return Document.new("compare", rows, host_fingerprint(threads=settings.threads, delegate=settings.delegate),
                        reference=rows[0], model=Path(settings.b).name, saved_models=loaders,
                        output_mapping=rows[1].output_mapping, state_rule=rule.to_dict(),
                        gate=evaluate(rows, Thresholds()).to_dict(),   # no thresholds: NaN/Inf outputs still fail
                        inputs={"path": str(inputs_path), "sha256": inputs_sha, "samples": ds.n, "source": ds.source,
                                "synthetic": ds.synthetic, "labels": ds.labels is not None,
                                "binding": ds.binding, "streams": ds.record(inputs_path, inputs_sha)["streams"]})


def raise_for_compare(doc: Document) -> None:
    """After the result was stored and shown: a failed target row -> its error (3, or 2 for bad
    input such as a model LiteRT refuses); a conversion failure -> 2; a missed threshold -> 1."""

    failed = [r for r in doc.rows if not r.ok and r.error_type != "ConversionFailed"]
    conv = [r for r in doc.rows if not r.ok and r.error_type == "ConversionFailed"]
    misses = [c for c in (doc.get("gate") or {}).get("checks", []) if not c.get("passed")]
    if failed:
        first = failed[0]
        msg = (f"{len(failed)} row(s) FAILED, e.g. {first.precision} on {first.target}: {first.error} "
               "(other rows were reported and saved)")
        if all(r.exit_code == 2 for r in failed):
            raise BadInput(msg)
        raise InfraError(msg)
    if conv:
        raise ConversionFailed(f"{conv[0].precision}: {conv[0].error} (other rows were reported and saved)")
    if misses and all(c.get("undecided") for c in misses):     # nothing failed, something could not be judged
        raise Undecided("gate cannot judge: " + "; ".join(c["message"] for c in misses))
    if misses:
        hint = (f"; find the layer: {doc.get('diagnose_command')}" if doc.get("diagnose_command") else
                f"; {doc.get('keep_float_hint')}" if doc.get("keep_float_hint") else "")
        raise GateFailed("gate failed: " + "; ".join(c["message"] for c in misses) + hint)
