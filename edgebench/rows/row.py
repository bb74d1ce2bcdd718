"""The two row types, InferenceRow and TrainRow, and reading either from JSON."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np

from edgebench import SCHEMA_VERSION
from edgebench.rows._json import STATUSES, _f, _freeze, _i
from edgebench.rows.diagnosis import Diagnosis
from edgebench.rows.llm import LlmPart
from edgebench.rows.readiness import Readiness
from edgebench.rows.parts import Accuracy, Cost, Drift, Latency, SizeExplained, Warmup, Worst, drifts_from_dict
from edgebench.rows.regimes import ColdStart, Delegation, Energy, OpEntry, Paced, Sustained, Verdict, Window
from edgebench.rows.envelope import (Binding, DetectionRecord, LoadLevel, OpProfileSummary, ServerRun, SlaSearch,
                                     StateRecord, StreamsRecord)

# ------------------------------------------------------------------------------------ rows


class _RowMixin:
    """What both row types share: a validated status and copy-with-changes."""

    status: str

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"row status {self.status!r} is not one of {STATUSES}")

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def replace(self, **changes: Any):
        return dataclasses.replace(self, **changes)


def _samples(v: Any) -> tuple[int, ...] | None:
    if v is None:
        return None
    return tuple(int(x) for x in np.asarray(v, np.int64).ravel())


def sample_class_of(d: Mapping[str, Any]) -> str | None:
    """A row's ``sample_class``; for rows written before the field existed (schema 2 rows of
    edgebench <= 0.2.0) it is read from the method they recorded: the benchmark_model sample loop
    ("repeated N times in one device-side sh loop") is per-process, a summary-only import has no
    samples, anything else with latency is steady-state."""
    given = d.get("sample_class")
    if given:
        return str(given)
    method = str(d.get("method") or "")
    if "device-side sh loop" in method:
        return "per-process"
    if "no per-inference samples" in method:
        return "summary"
    lat = d.get("latency_ms")
    return "steady-state" if isinstance(lat, Mapping) or d.get("samples_ns") else None


# The energy_reason of a row nobody asked to measure energy for (bench --energy does).
ENERGY_NOT_ASKED = "not measured: --energy was not given"


@dataclass(frozen=True)
class InferenceRow(_RowMixin):
    """One model x precision x target measurement (or the TF reference, ``role="reference"``).

    ``samples_ns`` are the raw per-inference latencies ``latency`` was derived from (None for a
    summary-only import); ``warmup`` is shown apart. ``drift``/``worst``/``accuracy`` compare the
    outputs with the reference (``*_vs_host`` with the host row, for device rows).
    """

    target: str | None
    status: str = "ok"
    model: str | None = None
    precision: str | None = None            # the precision asked for (bench: the one found in the file)
    precision_found: str | None = None      # read from the file's tensors (tflite_model.precision)
    precision_detail: str | None = None     # a mixed file: "int8 with 2 float ops (SOFTMAX, MUL)"
    role: str | None = None                  # "reference" | "compared" | None
    model_path: str | None = None
    model_sha256: str | None = None
    device_model: str | None = None
    error: str | None = None
    exit_code: int | None = None
    error_type: str | None = None
    size_bytes: int | None = None
    size_reduction_pct: float | None = None
    runtime: str | None = None
    method: str | None = None                # what one latency sample includes
    sample_class: str | None = None          # steady-state | per-process | summary (targets.base.SAMPLE_CLASSES)
    threads: int | None = None
    threads_effective: int | None = None
    delegate: str | None = None
    latency: Latency | None = None
    samples_ns: tuple[int, ...] | None = None
    warmup: Warmup | None = None
    init_ms: float | None = None
    first_inference_ms: float | None = None
    peak_rss_bytes: int | None = None
    rss_before_load_bytes: int | None = None
    drift: Mapping[str, Drift] | None = None
    worst: Worst | None = None
    drift_vs_host: Mapping[str, Drift] | None = None
    worst_vs_host: Worst | None = None
    accuracy: Accuracy | None = None
    detection: Mapping[str, Any] | None = None
    cost: Cost | None = None
    concurrency: tuple[Mapping[str, Any], ...] | None = None
    server: Mapping[str, Any] | None = None
    sla: Mapping[str, Any] | None = None
    stop_reason: str | None = None
    input_source: str | None = None
    input_samples: int | None = None
    nonfinite_outputs: Mapping[str, int] | None = None
    outputs_saved: Mapping[str, Any] | None = None
    batch_throughput: Mapping[str, Any] | None = None
    output_mapping: Mapping[str, Any] | None = None  # {how, pairs} when outputs were not paired by name
    input_mapping: Mapping[str, Any] | None = None   # {how, pairs: data key -> model input} when not by name
    state: Mapping[str, Any] | None = None           # stateful graphs: {kind, ops, handling}; None: stateless
    streams: Mapping[str, Any] | None = None         # --state streams: per-stream decisions (state_rule.stream_decisions)
    runtime_api: str | None = None                  # "interpreter" | "compiled" (LiteRT CompiledModel)
    accelerator: str | None = None                  # compiled runtime: "cpu" | "gpu" | "npu"
    fully_accelerated: bool | None = None           # CompiledModel.is_fully_accelerated()
    gpu_precision: str | None = None                # GPU rows: "fp16" | "fp32"
    delegation: Delegation | None = None
    op_profile: tuple[OpEntry, ...] | None = None
    op_profile_info: Mapping[str, Any] | None = None   # source, runs, sums, coverage of the profiled Invoke, notes
    verdicts: tuple[Verdict, ...] = ()
    keep_float: tuple[str, ...] | None = None       # int8 with these tensors kept float (--keep-float)
    size_explained: SizeExplained | None = None     # a quantized file not smaller than FP32: where the bytes went
    fingerprint: Mapping[str, Any] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()
    extra: Mapping[str, Any] | None = None          # target-specific facts (thermal, device runner ...)
    log: Mapping[str, Any] | None = None            # what a parsed benchmark_model log adds (import-log)
    timeline: tuple[Window, ...] | None = None      # sustained runs (--duration)
    sustained: Sustained | None = None
    period_ms: float | None = None                  # paced runs (--period-ms): latency is the paced one
    paced: Paced | None = None
    cold_start: ColdStart | None = None             # --cold-starts
    energy: Energy | None = None                    # --energy; None with energy_reason when unmeasurable
    energy_reason: str | None = None
    memory: Mapping[str, Any] | None = None         # what the peak RSS holds (runtime, model, arenas ...)
    gc: Mapping[str, Any] | None = None             # Python's collector around the timed loop (frozen, collections)
    repeats: tuple[Mapping[str, Any], ...] | None = None  # bench --repeats: one summary per worker process
    diagnosis: Diagnosis | None = None              # diagnose rows: layers, findings ... (flat keys, Diagnosis.KEYS)
    llm: LlmPart | None = None                      # llm-bench rows: shape, context, each metric over the repeats
    readiness: Readiness | None = None              # readiness rows: vendor, SoC, compile status ... (Readiness.KEYS)
    unknown: Mapping[str, Any] = field(default_factory=dict)

    kind = "inference"

    @property
    def binding(self) -> Binding | None:
        """``input_mapping`` typed: how the data's arrays were paired with the model's inputs."""
        return Binding.of(self.input_mapping)

    @property
    def load_levels(self) -> tuple[LoadLevel, ...]:
        """The concurrency sweep, typed (empty without --concurrency)."""
        return tuple(LoadLevel.of(c) for c in self.concurrency or ())

    @property
    def server_run(self) -> ServerRun | None:
        return ServerRun.of(self.server)

    @property
    def sla_search(self) -> SlaSearch | None:
        return SlaSearch.of(self.sla)

    @property
    def detection_record(self) -> DetectionRecord | None:
        return DetectionRecord.of(self.detection)

    @property
    def state_record(self) -> StateRecord | None:
        return StateRecord.of(self.state)

    @property
    def stream_record(self) -> StreamsRecord | None:
        return StreamsRecord.of(self.streams)

    @property
    def op_summary(self) -> OpProfileSummary:
        return OpProfileSummary.of(self.op_profile_info)

    # Keys written flat at the top level, straight from same-named fields.
    _PLAIN = ("target", "status", "model", "precision", "precision_found", "precision_detail", "role", "model_path", "model_sha256", "device_model",
              "error", "exit_code", "error_type", "size_bytes", "size_reduction_pct", "runtime", "method",
              "sample_class", "threads", "threads_effective", "delegate", "init_ms", "first_inference_ms", "peak_rss_bytes",
              "rss_before_load_bytes", "detection", "server", "sla", "stop_reason", "input_source",
              "input_samples", "nonfinite_outputs", "outputs_saved", "batch_throughput", "output_mapping",
              "input_mapping", "state", "streams", "extra",
              "runtime_api", "accelerator", "fully_accelerated", "gpu_precision", "op_profile_info")
    _LOG_KEYS = ("memory_mb", "delegates", "delegate_fallback", "delegated_nodes", "model_size_mb", "params",
                 "op_summary", "op_profile_timings", "errors", "unparsed_lines", "source", "warmup")
    _STRUCT = ("latency_ms", "samples_ns", "warmup_ms", "warmup_samples_ns", "drift", "worst", "drift_vs_host",
               "worst_vs_host", "accuracy", "concurrency", "fingerprint", "warnings", "gflops", "delegation",
               "op_profile", "verdicts", "keep_float")
    _REGIMES = ("timeline", "sustained", "period_ms", "paced", "cold_start", "energy", "energy_reason")
    _RUN_FACTS = ("memory", "gc", "repeats", "llm", "size_explained")

    # -- views ----------------------------------------------------------------------------
    @property
    def is_reference(self) -> bool:
        return self.role == "reference"

    @property
    def top1_drop_pp(self) -> float | None:
        return None if self.accuracy is None else self.accuracy.top1_drop_pp

    # -- JSON boundary --------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for k in self._PLAIN:     # every key on every row (None when unknown): readers never guess
            v = getattr(self, k)
            out[k] = dict(v) if isinstance(v, Mapping) else v
        out["latency_ms"] = None if self.latency is None else self.latency.to_dict()
        # every key of the row type on every row, None when not measured (docs/json.md)
        out["samples_ns"] = None if self.samples_ns is None else list(self.samples_ns)
        out["warmup_ms"] = None if self.warmup is None else self.warmup.to_dict()
        if self.warmup is not None and self.warmup.samples_ns:
            out["warmup_samples_ns"] = list(self.warmup.samples_ns)
        for k in ("drift", "drift_vs_host"):
            v = getattr(self, k)
            out[k] = None if v is None else {n: d.to_dict() for n, d in v.items()}
        for k in ("worst", "worst_vs_host"):
            v = getattr(self, k)
            out[k] = None if v is None else v.to_dict()
        out["accuracy"] = None if self.accuracy is None else self.accuracy.to_dict()
        if self.cost is not None:
            out.update(self.cost.to_row())
        out["concurrency"] = None if self.concurrency is None else [dict(c) for c in self.concurrency]
        out["keep_float"] = None if self.keep_float is None else list(self.keep_float)
        if self.log is not None:
            out.update(self.log)
        # issue 15: every row says what the delegate took; profiles and verdicts where measured
        out["delegation"] = None if self.delegation is None else self.delegation.to_dict()
        out["op_profile"] = None if self.op_profile is None else [e.to_dict() for e in self.op_profile]
        out["verdicts"] = [v.to_dict() for v in self.verdicts]
        out["timeline"] = None if self.timeline is None else [w.to_dict() for w in self.timeline]
        for k in ("sustained", "paced", "cold_start"):
            out[k] = None if getattr(self, k) is None else getattr(self, k).to_dict()
        out["period_ms"] = self.period_ms
        out["energy"] = None if self.energy is None else self.energy.to_dict()
        out["energy_reason"] = self.energy_reason if (self.energy is not None or self.energy_reason) \
            else ENERGY_NOT_ASKED
        for k in ("memory", "gc"):
            out[k] = None if getattr(self, k) is None else dict(getattr(self, k))
        out["repeats"] = None if self.repeats is None else [dict(r) for r in self.repeats]
        if self.llm is not None:             # llm-bench rows only: other documents round-trip byte for byte
            out["llm"] = self.llm.to_dict()
        if self.size_explained is not None:  # only a size surprise has it (model.tflite_size)
            out["size_explained"] = self.size_explained.to_dict()
        out["fingerprint"] = dict(self.fingerprint)
        if self.warnings or self.status == "ok":
            out["warnings"] = list(self.warnings)
        if self.diagnosis is not None:
            out.update(self.diagnosis.to_dict())
        if self.readiness is not None:
            out.update(self.readiness.to_dict())
        out.update(self.unknown)
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], schema_version: int = SCHEMA_VERSION) -> "InferenceRow":
        known = set(cls._PLAIN) | set(cls._STRUCT) | set(cls._LOG_KEYS) | set(Cost.KEYS) | set(cls._REGIMES) | set(cls._RUN_FACTS)
        kw: dict[str, Any] = {k: d.get(k) for k in cls._PLAIN}
        kw["status"] = str(d.get("status") or "ok")
        for k in ("exit_code", "size_bytes", "threads", "threads_effective", "peak_rss_bytes",
                  "rss_before_load_bytes", "input_samples"):
            kw[k] = _i(kw[k])
        for k in ("size_reduction_pct", "init_ms", "first_inference_ms"):
            kw[k] = _f(kw[k])
        if kw["fully_accelerated"] is not None:
            kw["fully_accelerated"] = bool(kw["fully_accelerated"])
        lat = d.get("latency_ms")
        kw["latency"] = Latency.from_dict(lat) if isinstance(lat, Mapping) else None
        kw["samples_ns"] = _samples(d.get("samples_ns"))
        kw["warmup"] = Warmup.from_json(d.get("warmup_ms"), d.get("warmup_samples_ns"))
        kw["drift"] = drifts_from_dict(d.get("drift"))
        kw["drift_vs_host"] = drifts_from_dict(d.get("drift_vs_host"))
        kw["worst"] = Worst.from_dict(d["worst"]) if d.get("worst") is not None else Worst.of(kw["drift"])
        kw["worst_vs_host"] = (Worst.from_dict(d["worst_vs_host"]) if d.get("worst_vs_host") is not None
                               else Worst.of(kw["drift_vs_host"]))
        kw["accuracy"] = Accuracy.from_dict(d.get("accuracy"))
        kw["cost"] = Cost.from_row(d)
        conc = d.get("concurrency")
        kw["concurrency"] = tuple(_freeze(c) for c in conc if isinstance(c, Mapping)) if isinstance(conc, list) else None
        kw["delegation"] = Delegation.from_dict(d.get("delegation"))
        ops = d.get("op_profile")
        kw["op_profile"] = (tuple(OpEntry.from_dict(e) for e in ops if isinstance(e, Mapping))
                            if isinstance(ops, list) else None)
        kw["verdicts"] = tuple(Verdict.from_dict(v) for v in (d.get("verdicts") or ()) if isinstance(v, Mapping))
        kf = d.get("keep_float")
        kw["keep_float"] = tuple(str(x) for x in kf) if isinstance(kf, (list, tuple)) else None
        log = {k: d[k] for k in cls._LOG_KEYS if k in d}
        kw["log"] = _freeze(log) if log else None
        kw["fingerprint"] = _freeze(d.get("fingerprint") if isinstance(d.get("fingerprint"), Mapping) else {})
        kw["warnings"] = tuple(str(w) for w in (d.get("warnings") or ()))
        tl = d.get("timeline")
        kw["timeline"] = tuple(Window.from_dict(w) for w in tl if isinstance(w, Mapping)) if isinstance(tl, list) else None
        kw["sustained"] = Sustained.from_dict(d.get("sustained"))
        kw["period_ms"] = _f(d.get("period_ms"))
        kw["paced"] = Paced.from_dict(d.get("paced"))
        kw["cold_start"] = ColdStart.from_dict(d.get("cold_start"))
        kw["energy"] = Energy.from_dict(d.get("energy"))
        kw["energy_reason"] = None if d.get("energy_reason") == ENERGY_NOT_ASKED else d.get("energy_reason")
        for k in ("memory", "gc"):
            kw[k] = _freeze(d[k]) if isinstance(d.get(k), Mapping) else None
        reps = d.get("repeats")
        kw["repeats"] = tuple(_freeze(r) for r in reps if isinstance(r, Mapping)) if isinstance(reps, list) else None
        kw["llm"] = LlmPart.from_dict(d.get("llm"))
        kw["size_explained"] = SizeExplained.from_dict(d.get("size_explained"))
        kw["diagnosis"] = Diagnosis.from_row(d)
        if kw["diagnosis"] is not None:
            known |= set(Diagnosis.KEYS)
        kw["readiness"] = Readiness.from_row(d)
        if kw["readiness"] is not None:
            known |= set(Readiness.KEYS)
        kw["unknown"] = _freeze({k: v for k, v in d.items() if k not in known})
        return cls(**kw)


@dataclass(frozen=True)
class TrainRow(_RowMixin):
    """One training cell (batch x precision x XLA x strategy x input pipeline) of a baseline."""

    model: str | None
    target: str | None
    status: str = "ok"
    error: str | None = None
    reason: str | None = None            # why a cell was skipped
    exit_code: int | None = None
    error_type: str | None = None
    size: str | None = None
    batch_size: int | None = None
    global_batch_size: int | None = None
    replicas: int | None = None
    precision: str | None = None
    xla: bool | None = None
    strategy: str | None = None
    workers: int | None = None
    input_pipeline: str | None = None
    device: str | None = None
    examples_per_s: float | None = None
    step_time: Latency | None = None     # JSON "step_time_ms"; steps_per_s in its details
    samples_ns: tuple[int, ...] | None = None
    input_wait_pct: float | None = None
    startup_ms: float | None = None
    peak_device_memory_bytes: int | None = None
    allreduce_ms_per_step: float | None = None
    final_loss: float | None = None
    note: str | None = None
    fingerprint: Mapping[str, Any] = field(default_factory=dict)
    facts: Mapping[str, Any] = field(default_factory=dict)   # every other recorded setting/fact

    kind = "train"

    _PLAIN = ("model", "target", "status", "error", "reason", "exit_code", "error_type", "size", "batch_size",
              "global_batch_size", "replicas", "precision", "xla", "strategy", "workers", "input_pipeline",
              "device", "examples_per_s", "input_wait_pct", "startup_ms", "peak_device_memory_bytes",
              "allreduce_ms_per_step", "final_loss", "note")

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {k: getattr(self, k) for k in self._PLAIN}
        out["step_time_ms"] = None if self.step_time is None else self.step_time.to_dict()
        if self.samples_ns is not None:
            out["samples_ns"] = list(self.samples_ns)
        out["fingerprint"] = dict(self.fingerprint)
        for k, v in self.facts.items():
            out.setdefault(k, v)
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], schema_version: int = SCHEMA_VERSION) -> "TrainRow":
        kw: dict[str, Any] = {k: d.get(k) for k in cls._PLAIN}
        kw["status"] = str(d.get("status") or "ok")
        for k in ("exit_code", "batch_size", "global_batch_size", "replicas", "workers", "peak_device_memory_bytes"):
            kw[k] = _i(kw[k])
        for k in ("examples_per_s", "input_wait_pct", "startup_ms", "allreduce_ms_per_step", "final_loss"):
            kw[k] = _f(kw[k])
        st = d.get("step_time_ms")
        kw["step_time"] = Latency.from_dict(st) if isinstance(st, Mapping) else None
        kw["samples_ns"] = _samples(d.get("samples_ns"))
        kw["fingerprint"] = _freeze(d.get("fingerprint") if isinstance(d.get("fingerprint"), Mapping) else {})
        skip = set(cls._PLAIN) | {"step_time_ms", "samples_ns", "fingerprint"}
        kw["facts"] = _freeze({k: v for k, v in d.items() if k not in skip})
        return cls(**kw)


Row = InferenceRow | TrainRow

_TRAIN_KINDS = ("train",)
_TRAIN_FIELDS = ("examples_per_s", "step_time_ms", "strategy")   # for documents that lack a kind


def row_from_dict(d: Mapping[str, Any], *, kind: str | None = None,
                  schema_version: int = SCHEMA_VERSION) -> Row:
    """A stored/JSON row -> its typed row (training rows by document kind or by their fields)."""
    is_train = kind in _TRAIN_KINDS or (not kind and any(k in d for k in _TRAIN_FIELDS))
    return (TrainRow if is_train else InferenceRow).from_dict(d, schema_version)


UNTYPABLE = (TypeError, ValueError, AttributeError, KeyError)   # what a malformed foreign row raises


def typed_row(d: Any, *, kind: str | None = None) -> Row | None:
    """``row_from_dict`` for input edgebench did not write (an imported or hand-edited document):
    None when the row is not a mapping or is malformed, so a renderer leaves that row's typed
    numbers out instead of failing the whole report."""
    if not isinstance(d, Mapping):
        return None
    try:
        return row_from_dict(d, kind=kind)
    except UNTYPABLE:
        return None
