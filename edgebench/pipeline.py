"""convert-and-compare and compare: the same inputs on TF and every target, drift, gate.

``convert_and_compare(settings)`` converts (all precisions by default), builds ONE InputSet
(saved as .npz with its sha256, fed byte-identically to every target), runs the TF reference
and every precision x target, computes drift/accuracy, and evaluates the gate. It returns the
result document (kind "compare"); exit-code decisions stay in the CLI.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from edgebench import compare as cmp
from edgebench.data import InputSet, Signature, cast_to_signature, load_data, validate
from edgebench.errors import BadInput, EdgebenchError
from edgebench.fingerprint import host_fingerprint, sha256_file
from edgebench.gate import Thresholds, evaluate
from edgebench.results import envelope
from edgebench.targets.base import P99_MIN_SAMPLES, Job, RunResult

DEFAULT_EVAL_SAMPLES = 1000


@dataclass(frozen=True)
class CompareSettings:
    src: str
    precisions: tuple[str, ...] = ("fp32", "fp16", "int8", "dynamic")
    targets: tuple[str, ...] = ("host",)
    data: str | None = None               # evaluation data (else the reference model's split)
    calibration_data: str | None = None   # else --data, else the reference model's calibration split
    eval_samples: int = DEFAULT_EVAL_SAMPLES
    calibration_samples: int = 100
    int8_io: str = "float"
    out_dir: str | None = None
    preprocess: str = "scale01"
    size: str = "tiny"
    seed: int = 0
    threads: int | None = None
    delegate: str = "xnnpack"
    runs: int | None = None
    min_runs: int = P99_MIN_SAMPLES
    min_time_s: float = 1.0
    max_time_s: float = 30.0
    warmup_runs: int = 10
    class_output: str | None = None
    thresholds: Thresholds = field(default_factory=Thresholds)
    gate_file: dict | None = None
    tf_batch: int = 32
    benchmark_binary: str | None = None   # adb devices without Python: Google's benchmark_model


def _latency(samples_ns: np.ndarray) -> dict[str, Any] | None:
    from edgebench.measure import LatencyStats

    if samples_ns is None or len(samples_ns) == 0:
        return None
    return LatencyStats.from_samples(samples_ns).to_dict()


def resolve_targets(specs: tuple[str, ...], settings: CompareSettings) -> list[Any]:
    """'host', 'adb:SERIAL', 'adb:all' -> Target objects ('tf' is the reference and always runs)."""
    from edgebench.bench import make_targets

    rest = [s for s in specs if s != "tf"]
    if not rest:
        return []
    return make_targets(",".join(rest), threads=settings.threads, delegate=settings.delegate,
                        benchmark_binary=settings.benchmark_binary)


def _eval_set(settings: CompareSettings, src, out_dir: Path) -> InputSet:
    if settings.data:
        ds = load_data(settings.data, src.signature, preprocess=settings.preprocess, seed=settings.seed)
    elif src.evaluation is not None:
        ds = src.evaluation
        validate(ds, src.signature)
    else:
        raise BadInput(f"{settings.src}: no evaluation data; pass --data PATH (real samples, with a 'labels' "
                       "array for task accuracy) or --data synthetic (drift only, misleading for INT8)")
    if settings.eval_samples <= 0:
        raise BadInput(f"--samples {settings.eval_samples}: must be positive")
    return cast_to_signature(ds, src.signature).take(settings.eval_samples)


def _accuracy(ref: dict[str, np.ndarray], got: dict[str, np.ndarray], labels, class_out: str | None,
              ref_acc: dict[str, Any] | None) -> dict[str, Any] | None:
    if class_out is None:
        return None
    acc = cmp.classification(ref[class_out], got[class_out], labels)
    acc["output"] = class_out
    if ref_acc is not None and "top1" in acc and "top1" in ref_acc:
        acc["reference_top1"] = ref_acc["top1"]
        acc["top1_drop_pp"] = round((ref_acc["top1"] - acc["top1"]) * 100.0, 6)
    return acc


def _row_from_run(run: RunResult, *, precision: str, variant: dict[str, Any], ref_out, labels, class_out,
                  ref_acc, task: str, host_out: dict[str, np.ndarray] | None) -> dict[str, Any]:
    row: dict[str, Any] = {
        "precision": precision,
        "target": run.target,
        "model": variant.get("model"),
        "model_path": run.model_path,
        "model_sha256": run.model_sha256,
        "size_bytes": variant.get("bytes"),
        "size_reduction_pct": variant.get("size_reduction_pct"),
        "status": run.status,
        "error": run.error,
        "runtime": run.runtime,
        "method": run.method,
        "device_model": (run.fingerprint or {}).get("device_model"),
        "fingerprint": run.fingerprint,
        "init_ms": run.init_ms,
        "first_inference_ms": run.first_inference_ms,
        "peak_rss_bytes": run.peak_rss_bytes,
        "extra": run.extra,
    }
    if run.status != "ok":
        return row
    row["latency_ms"] = _latency(run.samples_ns)
    row["samples_ns"] = [int(x) for x in run.samples_ns]
    row["warmup_ms"] = [x / 1e6 for x in run.warmup_ns]
    if run.outputs is not None:
        drifts = cmp.compare_outputs(ref_out, run.outputs)
        row["drift"] = drifts
        row["worst"] = cmp.worst(drifts)
        row["accuracy"] = _accuracy(ref_out, run.outputs, labels, class_out, ref_acc)
        if task == "detection":
            row["detection"] = cmp.detection(ref_out, run.outputs)
        if host_out is not None:
            hd = cmp.compare_outputs(host_out, run.outputs)
            row["drift_vs_host"] = hd
            row["worst_vs_host"] = cmp.worst(hd)
    return row


def convert_and_compare(settings: CompareSettings, progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Convert, run the reference and every precision x target, compare, gate. Returns the doc."""
    from edgebench.convert import ConvertSettings, convert

    say = progress or (lambda _m: None)
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    if settings.thresholds.max_accuracy_drop_pp is not None or any(
            (t.max_accuracy_drop_pp is not None) for t in (settings.gate_file or {}).values()):
        accuracy_gate = True
    else:
        accuracy_gate = False
    targets = resolve_targets(settings.targets, settings)   # fail fast on bad target names
    timings["resolve_targets_s"] = time.perf_counter() - t0
    t = time.perf_counter()
    import tensorflow  # noqa: F401 -- timed on its own: a fixed cost of every run

    timings["tf_import_s"] = time.perf_counter() - t

    if hasattr(say, "set_total"):   # convert stages + parity + inputs + reference + every row
        say.set_total(2 + len(settings.precisions) + 1 + 1 + len(settings.precisions) * max(len(targets), 1))
    t = time.perf_counter()
    manifest = convert(ConvertSettings(
        src=settings.src, precisions=settings.precisions,
        data=settings.calibration_data or settings.data, calibration_samples=settings.calibration_samples,
        int8_io=settings.int8_io, out_dir=settings.out_dir, preprocess=settings.preprocess,
        size=settings.size, seed=settings.seed), progress=say)
    timings["convert_s"] = time.perf_counter() - t
    from edgebench.convert import resolve_source

    out_dir = Path(manifest["out_dir"])
    src = resolve_source(settings.src, size=settings.size, work_dir=out_dir, seed=settings.seed)
    task = (src.info or {}).get("task", "classification")

    say("evaluation inputs")
    ds = _eval_set(settings, src, out_dir)
    if accuracy_gate and ds.labels is None:
        raise BadInput(f"--max-accuracy-drop needs labelled data but {ds.source} has no 'labels'; pass --data "
                       "with a 'labels' array (one class id per sample) or drop the accuracy gate")
    inputs_path = out_dir / "inputs.npz"
    inputs_sha = ds.save(inputs_path)

    say("TensorFlow reference")
    t = time.perf_counter()
    from edgebench.targets.tf import TFTarget

    tft = TFTarget(batch=settings.tf_batch)
    ref_job = Job(model_path=str(src.saved_model_dir), inputs_npz=str(inputs_path), runs=settings.runs,
                  min_runs=settings.min_runs, min_time_s=settings.min_time_s, max_time_s=settings.max_time_s,
                  warmup_runs=settings.warmup_runs, save_outputs=True, seed=settings.seed)
    ref_run = tft.run(ref_job, src.signature)
    timings["reference_s"] = time.perf_counter() - t
    ref_out = ref_run.outputs or {}

    declared = settings.class_output or (src.info or {}).get("class_output")
    class_out = cmp.pick_class_output(ref_out, declared) if task == "classification" or declared else None
    if accuracy_gate and class_out is None:
        raise BadInput(f"--max-accuracy-drop needs class scores, but no output of {settings.src} is [samples, "
                       "classes]; pass --class-output NAME or use --min-psnr instead")
    ref_acc = None
    if class_out is not None and ds.labels is not None:
        ref_acc = cmp.classification(ref_out[class_out], ref_out[class_out], ds.labels)
    ref_row = {
        "role": "reference",
        "precision": "tf",
        "target": f"tf ({ref_run.extra.get('device')})",
        "model": src.name,
        "model_path": str(src.saved_model_dir),
        "model_sha256": src.sha256,
        "status": "ok",
        "runtime": ref_run.runtime,
        "method": ref_run.method,
        "latency_ms": _latency(ref_run.samples_ns),
        "samples_ns": [int(x) for x in ref_run.samples_ns],
        "init_ms": ref_run.init_ms,
        "first_inference_ms": ref_run.first_inference_ms,
        "accuracy": None if ref_acc is None else {**ref_acc, "output": class_out},
        "batch_throughput": ref_run.extra.get("batch_throughput"),
        "fingerprint": ref_run.fingerprint,
    }

    ok_variants = [(p, {**v, "model": src.name}) for p, v in manifest["variants"].items()
                   if p in settings.precisions and v.get("status") == "ok"]

    def run_one(tgt, prec: str, v: dict[str, Any]) -> RunResult:
        say(f"{prec} on {tgt.name}")
        job = Job(model_path=v["path"], inputs_npz=str(inputs_path), threads=settings.threads,
                  delegate=settings.delegate, runs=settings.runs, min_runs=settings.min_runs,
                  min_time_s=settings.min_time_s, max_time_s=settings.max_time_s,
                  warmup_runs=settings.warmup_runs, save_outputs=True, seed=settings.seed)
        try:
            return tgt.run(job)
        except EdgebenchError as e:
            if e.exit_code == 2 and tgt.name == "host":
                raise
            return RunResult(target=tgt.name, model_path=v["path"], model_sha256=v.get("sha256", ""),
                             samples_ns=np.zeros(0, np.int64), status="failed", error=str(e))

    # Host rows first (alone on this machine's cores), then every device in its own lane, in
    # parallel: a lost device fails only its own rows.
    t = time.perf_counter()
    results: dict[tuple[str, str], RunResult] = {}
    hosts = [tg for tg in targets if tg.name == "host"]
    devices = [tg for tg in targets if tg.name != "host"]
    stop = threading.Event()   # Ctrl-C: finish nothing new, keep every row already measured
    try:
        for tgt in hosts:
            for prec, v in ok_variants:
                results[(prec, tgt.name)] = run_one(tgt, prec, v)
        if devices:
            from concurrent.futures import ThreadPoolExecutor

            def lane(tgt) -> None:
                for prec, v in ok_variants:
                    if stop.is_set():
                        return
                    results[(prec, tgt.name)] = run_one(tgt, prec, v)

            with ThreadPoolExecutor(max_workers=len(devices), thread_name_prefix="edgebench-lane") as pool:
                futures = [pool.submit(lane, tg) for tg in devices]
                try:
                    for f in futures:
                        f.result()
                except KeyboardInterrupt:
                    stop.set()   # lanes stop after their current run (and clean up on the device)
                    raise
    except KeyboardInterrupt:
        interrupted = True
        stop.set()
    else:
        interrupted = False
    for tgt in targets:
        for prec, v in ok_variants:
            results.setdefault((prec, tgt.name), RunResult(
                target=tgt.name, model_path=v["path"], model_sha256=v.get("sha256", ""),
                samples_ns=np.zeros(0, np.int64), status="failed",
                error="interrupted (Ctrl-C) before this row finished"))
    timings["targets_s"] = time.perf_counter() - t

    rows: list[dict[str, Any]] = []
    for prec, v in manifest["variants"].items():
        if prec not in settings.precisions:
            continue
        if v.get("status") != "ok":
            for tgt in targets:
                rows.append({"precision": prec, "target": getattr(tgt, "name", "?"), "model": src.name,
                             "status": "failed", "error": f"conversion failed: {v.get('error')}",
                             "size_bytes": v.get("bytes")})
            continue
        v = {**v, "model": src.name}
        host_run = next((results[(prec, h.name)] for h in hosts if results[(prec, h.name)].status == "ok"), None)
        for tgt in targets:
            run = results[(prec, tgt.name)]
            rows.append(_row_from_run(run, precision=prec, variant=v, ref_out=ref_out, labels=ds.labels,
                                      class_out=class_out, ref_acc=ref_acc, task=task,
                                      host_out=host_run.outputs if (host_run and tgt.name != "host") else None))

    verdict = evaluate(rows, settings.thresholds, settings.gate_file)
    timings["total_s"] = time.perf_counter() - t0
    doc = envelope(
        "compare", rows, host_fingerprint(with_tf=True, threads=settings.threads, delegate=settings.delegate),
        model=src.name,
        source={"path": settings.src, "sha256": src.sha256, "kind": src.kind, "task": task},
        reference=ref_row,
        inputs={"path": str(inputs_path), "sha256": inputs_sha, "content_sha256": ds.sha256, "samples": ds.n,
                "source": ds.source, "synthetic": ds.synthetic, "labels": ds.labels is not None},
        manifest=str(out_dir / "manifest.json"),
        conversion={p: {k: v.get(k) for k in ("status", "error", "bytes", "size_reduction_pct", "seconds",
                                               "float_ops", "quantization")}
                    for p, v in manifest["variants"].items()},
        parity=manifest.get("parity"),
        gate=verdict.to_dict(),
        timings=timings,
        interrupted=interrupted,
    )
    return doc


# --------------------------------------------------------------------------- compare A B


@dataclass(frozen=True)
class PairSettings:
    a: str
    b: str
    data: str | None = None
    samples: int = DEFAULT_EVAL_SAMPLES
    preprocess: str = "scale01"
    threads: int | None = None
    delegate: str = "xnnpack"
    class_output: str | None = None
    seed: int = 0


def _model_kind(path: str) -> str:
    p = Path(path)
    if not p.exists():
        raise BadInput(f"{path}: no such file or folder; give a .tflite file or a SavedModel folder")
    if p.is_dir():
        if not (p / "saved_model.pb").exists():
            raise BadInput(f"{path}: folder is not a SavedModel (no saved_model.pb)")
        return "saved_model"
    if p.suffix != ".tflite":
        raise BadInput(f"{path}: expected a .tflite file or a SavedModel folder")
    return "tflite"


def _tflite_signature(path: str) -> Signature:
    from edgebench.data import TensorSpec

    from ai_edge_litert.interpreter import Interpreter

    try:
        it = Interpreter(model_path=path)
        r = it.get_signature_runner()
    except Exception as e:  # noqa: BLE001
        raise BadInput(f"{path}: LiteRT cannot load this model ({str(e).splitlines()[0][:160]}); is it a "
                       ".tflite flatbuffer?") from None

    def spec(name, d, quantized_is_float=True):
        dt = np.dtype(d["dtype"])
        if quantized_is_float and dt in (np.int8, np.uint8, np.int16) and d["quantization"][0]:
            dt = np.dtype(np.float32)
        return TensorSpec(name, tuple(int(x) if x >= 0 else None for x in d["shape_signature"]), dt.name)

    return Signature(tuple(spec(k, d) for k, d in sorted(r.get_input_details().items())),
                     tuple(spec(k, d) for k, d in sorted(r.get_output_details().items())))


def compare_pair(settings: PairSettings, progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Run A and B (each .tflite on the host, or a SavedModel with TF) on the same inputs; A is the reference."""
    import tempfile

    from edgebench.data import saved_model_signature

    say = progress or (lambda _m: None)
    kinds = [_model_kind(settings.a), _model_kind(settings.b)]
    sig = saved_model_signature(settings.a) if kinds[0] == "saved_model" else _tflite_signature(settings.a)
    if settings.data is None:
        raise BadInput("compare needs --data (an .npz/.npy/image folder of real samples, or 'synthetic')")
    ds = load_data(settings.data, sig, preprocess=settings.preprocess, seed=settings.seed)
    ds = cast_to_signature(ds, sig).take(settings.samples)
    tmp = Path(tempfile.mkdtemp(prefix="edgebench-compare-"))
    inputs_path = tmp / "inputs.npz"
    inputs_sha = ds.save(inputs_path)
    runs: list[RunResult] = []
    for path, kind in zip((settings.a, settings.b), kinds):
        say(f"running {path}")
        job = Job(model_path=path, inputs_npz=str(inputs_path), threads=settings.threads,
                  delegate=settings.delegate, save_outputs=True, seed=settings.seed)
        if kind == "saved_model":
            from edgebench.targets.tf import TFTarget

            runs.append(TFTarget().run(job))
        else:
            from edgebench.targets.host import HostTarget

            runs.append(HostTarget(threads=settings.threads, delegate=settings.delegate).run(job))
    ref, other = runs
    if ref.status != "ok":
        raise BadInput(f"{settings.a}: run failed: {ref.error}")
    class_out = cmp.pick_class_output(ref.outputs or {}, settings.class_output)
    ref_acc = (cmp.classification(ref.outputs[class_out], ref.outputs[class_out], ds.labels)
               if class_out is not None and ds.labels is not None else None)
    rows = []
    for path, run in zip((settings.a, settings.b), runs):
        row: dict[str, Any] = {
            "model": Path(path).name, "model_path": path, "model_sha256": run.model_sha256 or sha256_file(path),
            "target": run.target, "precision": None, "status": run.status, "error": run.error,
            "runtime": run.runtime, "role": "reference" if run is ref else "compared",
            "size_bytes": Path(path).stat().st_size if Path(path).is_file() else None,
        }
        if run.status == "ok":
            row["latency_ms"] = _latency(run.samples_ns)
            row["samples_ns"] = [int(x) for x in run.samples_ns]
            drifts = cmp.compare_outputs(ref.outputs, run.outputs)
            row["drift"] = drifts
            row["worst"] = cmp.worst(drifts)
            row["accuracy"] = _accuracy(ref.outputs, run.outputs, ds.labels, class_out, ref_acc)
        rows.append(row)
    return envelope("compare", rows, host_fingerprint(threads=settings.threads, delegate=settings.delegate),
                    model=Path(settings.b).name, reference=rows[0],
                    inputs={"path": str(inputs_path), "sha256": inputs_sha, "samples": ds.n, "source": ds.source,
                            "synthetic": ds.synthetic, "labels": ds.labels is not None})
