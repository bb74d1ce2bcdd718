"""Typed views of the parts of a result document and row that producers keep as small JSON
objects -- the gate's checks, how the source was read, how data was bound to inputs, stateful-graph
handling, the op profile's summary -- so a renderer reads attributes (a misspelt one fails loudly)
and never ``.get("…")`` on a result. Each is built from the stored mapping with ``of``; the
document keeps the mapping itself, so the JSON does not change."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from edgebench.rows._json import _f, _i


def _m(v: Any) -> Mapping[str, Any]:
    return v if isinstance(v, Mapping) else {}


def _s(v: Any) -> str | None:
    return None if v is None else str(v)


@dataclass(frozen=True)
class GateCheck:
    """One check of the CI gate (``gate.Check.to_dict``)."""

    precision: str | None
    target: str | None
    metric: str | None
    value: Any
    threshold: Any
    passed: bool
    message: str
    undecided: bool = False     # neither passed nor failed: the data could not decide it (exit 4)

    @classmethod
    def of(cls, d: Any) -> "GateCheck":
        d = _m(d)
        return cls(_s(d.get("precision")), _s(d.get("target")), _s(d.get("metric")), d.get("value"),
                   d.get("threshold"), bool(d.get("passed", True)), str(d.get("message") or d.get("metric") or ""),
                   bool(d.get("undecided", False)))


@dataclass(frozen=True)
class Gate:
    """The gate's result: whether it passed and its checks (empty: no threshold was set)."""

    passed: bool | None
    checks: tuple[GateCheck, ...] = ()

    @classmethod
    def of(cls, d: Any) -> "Gate | None":
        if not isinstance(d, Mapping):
            return None
        checks = tuple(GateCheck.of(c) for c in d.get("checks") or () if isinstance(c, Mapping))
        return cls(None if d.get("passed") is None else bool(d.get("passed")), checks)

    def for_row(self, precision: str | None, target: str | None) -> tuple[GateCheck, ...]:
        return tuple(c for c in self.checks if c.precision == (precision or "?") and c.target == (target or "?"))


@dataclass(frozen=True)
class InputShape:
    used: Any
    how: str | None


@dataclass(frozen=True)
class SourceRecord:
    """How a run's source model was read (the document's ``source`` object)."""

    path: str | None = None
    kind: str | None = None
    loader: str | None = None
    loader_reason: str | None = None
    signature_key: str | None = None
    input_shapes: Mapping[str, InputShape] = field(default_factory=dict)
    reference_reason: str | None = None
    static_batch_fallback: str | None = None
    reference: str | None = None           # diagnose INT8.tflite --reference FP32.tflite
    note: str | None = None

    @classmethod
    def of(cls, d: Any) -> "SourceRecord":
        d = _m(d)
        shapes = {str(k): InputShape(_m(v).get("used"), _s(_m(v).get("how"))) for k, v in _m(d.get("input_shapes")).items()}
        return cls(_s(d.get("path")), _s(d.get("kind")), _s(d.get("loader")), _s(d.get("loader_reason")),
                   _s(d.get("signature_key")), shapes, _s(d.get("reference_reason")),
                   _s(d.get("static_batch_fallback")), _s(d.get("reference")), _s(d.get("note")))


@dataclass(frozen=True)
class Binding:
    """How data arrays were paired with model inputs (``inputs.binding`` / a row's ``input_mapping``)."""

    how: str | None
    pairs: Mapping[str, str]

    @classmethod
    def of(cls, d: Any) -> "Binding | None":
        if not isinstance(d, Mapping):
            return None
        return cls(_s(d.get("how")), {str(k): str(v) for k, v in _m(d.get("pairs")).items()})


@dataclass(frozen=True)
class InputsRecord:
    """What the rows ran on (the document's ``inputs`` object)."""

    samples: int | None = None
    sha256: str | None = None
    synthetic: bool = False
    binding: Binding | None = None

    @classmethod
    def of(cls, d: Any) -> "InputsRecord":
        d = _m(d)
        return cls(_i(d.get("samples")), _s(d.get("sha256")), bool(d.get("synthetic")), Binding.of(d.get("binding")))


@dataclass(frozen=True)
class StateRecord:
    """A stateful graph and how its state was handled (a row's ``state``)."""

    kind: str | None
    ops: tuple[str, ...]
    handling: str | None

    @classmethod
    def of(cls, d: Any) -> "StateRecord | None":
        if not isinstance(d, Mapping):
            return None
        return cls(_s(d.get("kind")), tuple(str(o) for o in d.get("ops") or ()), _s(d.get("handling")))


@dataclass(frozen=True)
class StreamsRecord:
    """A row's per-stream decisions against the reference's (``--state streams``; a row's
    ``streams``, ``state_rule.stream_decisions``)."""

    streams: int | None
    agreement: float | None
    rule: str | None
    output: str | None
    detected: int | None
    reference_detected: int | None
    accuracy: float | None
    reference_accuracy: float | None

    @classmethod
    def of(cls, d: Any) -> "StreamsRecord | None":
        if not isinstance(d, Mapping):
            return None
        return cls(_i(d.get("streams")), _f(d.get("agreement")), _s(d.get("rule")), _s(d.get("output")),
                   _i(d.get("detected")), _i(d.get("reference_detected")), _f(d.get("accuracy")),
                   _f(d.get("reference_accuracy")))

    def text(self) -> str:
        """'12 streams (detected when ...): decisions agree with the reference on 100% of them; detected 9
        (reference 9); stream accuracy 75% (reference 75%)'."""
        out = f"{self.streams} streams, decision = {self.rule} ({self.output})"
        if self.agreement is not None:
            out += f": agrees with the reference on {100 * self.agreement:.1f}% of streams"
        if self.detected is not None:
            out += f"; detected {self.detected} of {self.streams} (reference {self.reference_detected})"
        if self.accuracy is not None:
            out += f"; stream accuracy {100 * self.accuracy:.1f}% (reference {100 * (self.reference_accuracy or 0):.1f}%)"
        return out


@dataclass(frozen=True)
class OpProfileSummary:
    """The op profile's own summary (a row's ``op_profile_info``): source, runs, how much of the
    profiled Invoke the listed ops cover, what profiling cost, a note."""

    source: str | None = None
    runs: int | None = None
    invoke_ms: float | None = None
    coverage: float | None = None
    coverage_p50: float | None = None
    profiler_overhead: float | None = None
    note: str | None = None

    @classmethod
    def of(cls, d: Any) -> "OpProfileSummary":
        d = _m(d)
        return cls(_s(d.get("source")), _i(d.get("runs")), _f(d.get("invoke_ms")), _f(d.get("coverage")),
                   _f(d.get("coverage_p50")), _f(d.get("profiler_overhead")), _s(d.get("note")))


@dataclass(frozen=True)
class DetectionRecord:
    """Detection outputs against the reference (a row's ``detection``, ``compare.detection``)."""

    box_agreement: float | None = None
    matched: int | None = None
    reference_detections: int | None = None
    score_mae: float | None = None

    @classmethod
    def of(cls, d: Any) -> "DetectionRecord | None":
        if not isinstance(d, Mapping):
            return None
        return cls(_f(d.get("box_agreement")), _i(d.get("matched")), _i(d.get("reference_detections")),
                   _f(d.get("score_mae")))


@dataclass(frozen=True)
class LoadLevel:
    """One level of a concurrency sweep (a row's ``concurrency[i]``, ``edgebench.bench.load.concurrency``)."""

    level: int | None = None
    qps: float | None = None
    speedup_vs_first: float | None = None
    p50_ms: float | None = None
    p99_ms: float | None = None
    samples: int | None = None
    p99_valid: bool | None = None

    @classmethod
    def of(cls, d: Any) -> "LoadLevel":
        d = _m(d)
        return cls(_i(d.get("level")), _f(d.get("qps")), _f(d.get("speedup_vs_first")), _f(d.get("p50_ms")),
                   _f(d.get("p99_ms")), _i(d.get("samples")),
                   None if d.get("p99_valid") is None else bool(d.get("p99_valid")))


@dataclass(frozen=True)
class ServerRun:
    """A Poisson server run (a row's ``server``, ``edgebench.bench.load.server``)."""

    target_qps: float | None = None
    achieved_qps: float | None = None
    workers: int | None = None
    p50_ms: float | None = None
    p99_ms: float | None = None
    samples: int | None = None
    p99_valid: bool | None = None
    overloaded: bool | None = None
    latency_lower_bound: bool = False   # backlog at the stop: the latencies are lower bounds

    @classmethod
    def of(cls, d: Any) -> "ServerRun | None":
        if not isinstance(d, Mapping):
            return None
        return cls(_f(d.get("target_qps")), _f(d.get("achieved_qps")), _i(d.get("workers")), _f(d.get("p50_ms")),
                   _f(d.get("p99_ms")), _i(d.get("samples")),
                   None if d.get("p99_valid") is None else bool(d.get("p99_valid")),
                   None if d.get("overloaded") is None else bool(d.get("overloaded")),
                   bool(d.get("latency_lower_bound")))


@dataclass(frozen=True)
class SlaSearch:
    """The highest QPS that kept a p99 target (a row's ``sla``, ``edgebench.bench.load.sla_search``)."""

    met: bool = False
    sla_p99_ms: float | None = None
    max_qps: float | None = None
    p99_at_max_ms: float | None = None
    resolution_qps: float | None = None
    reason: str | None = None

    @classmethod
    def of(cls, d: Any) -> "SlaSearch | None":
        if not isinstance(d, Mapping):
            return None
        return cls(bool(d.get("met")), _f(d.get("sla_p99_ms")), _f(d.get("max_qps")), _f(d.get("p99_at_max_ms")),
                   _f(d.get("resolution_qps")), _s(d.get("reason")))
