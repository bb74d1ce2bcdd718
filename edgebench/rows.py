"""Typed result rows: what every producer builds and every reader reads.

One result type from producer to store (STYLE.md 15): ``bench``, ``convert-and-compare``,
``compare``, ``matrix``, ``import-log`` build :class:`InferenceRow`; training baselines build
:class:`TrainRow`; both travel in a :class:`Document`. Dicts exist only at the JSON/store
boundary (``to_dict`` / ``from_dict``); readers use attributes, so a misspelt field fails loudly
instead of rendering as "-".

JSON contract (README "JSON results", ARCHITECTURE.md): the keys below are what users script
against. Schema history, and how old documents are read:

* **1** (edgebench 0.1.0): ``warmup_ms`` was a dict in bench rows, a list of milliseconds in
  compare rows and a scalar mean in import-log rows.
* **2**: ``warmup_ms`` is always the summary object ``{runs, mean, min, max, total, first}``
  (``runs`` None when only a mean is known) with the raw ``warmup_samples_ns`` beside it.
  ``from_dict`` reads version 1 rows into the same typed form.

Issue 15 added, without a schema bump (rows written before simply lack them and load with
``None``/empty): ``delegation`` (:class:`Delegation`), ``op_profile`` (:class:`OpEntry` list; an
import-log row of schema 2 kept benchmark_model's "Run Order" rows there, which still load),
``op_profile_info``, ``verdicts`` (:class:`Verdict` list), ``runtime_api``, ``accelerator``,
``fully_accelerated``, ``gpu_precision``.

Fields that a reader does not know (written by a newer edgebench, or by a producer this module
does not type) are kept in ``unknown`` and written back unchanged, so a round trip never drops
data.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, ClassVar, Iterable, Mapping, Sequence

import numpy as np

from edgebench import SCHEMA_VERSION

STATUSES = ("ok", "failed", "skipped")


def _freeze(d: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return MappingProxyType(dict(d or {}))


def _f(v: Any) -> float | None:
    """A finite-or-infinite float from JSON (numbers, 'inf' strings); None otherwise."""
    if v is None or isinstance(v, bool):
        return None
    if isinstance(v, (int, float, np.integer, np.floating)):
        return float(v)
    if isinstance(v, str):
        s = v.strip().lower()
        if s in ("inf", "+inf"):
            return float("inf")
        if s == "-inf":
            return float("-inf")
        try:
            return float(s)
        except ValueError:
            return None
    return None


def _i(v: Any) -> int | None:
    f = _f(v)
    return None if f is None or f != f or f in (float("inf"), float("-inf")) else int(f)


# ------------------------------------------------------------------------------------ parts


@dataclass(frozen=True)
class Latency:
    """The ``latency_ms`` object. Contract keys are typed; the rest (validity per percentile,
    p99 CI, CV, warnings, where a summary came from ...) is kept as measured in ``details``.

    Built from raw samples with :meth:`from_samples` (``measure.LatencyStats``); only a
    summary-only source (a captured benchmark_model log) builds one without samples, and then
    ``p99`` is None and ``p99_valid`` False.
    """

    mean: float | None
    p50: float | None
    p99: float | None
    samples: int | None
    p99_valid: bool
    qps: float | None
    std: float | None = None
    min: float | None = None
    max: float | None = None
    p90: float | None = None
    p95: float | None = None
    p999: float | None = None
    details: Mapping[str, Any] = field(default_factory=dict)

    _TYPED = ("mean", "std", "min", "max", "p50", "p90", "p95", "p99", "p999", "samples", "p99_valid", "qps")

    @classmethod
    def from_samples(cls, samples_ns: Any, *, what: str = "run") -> "Latency":
        from edgebench.measure import LatencyStats

        return cls.from_dict(LatencyStats.from_samples(samples_ns, what=what).to_dict())

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Latency":
        return cls(mean=_f(d.get("mean")), std=_f(d.get("std")), min=_f(d.get("min")), max=_f(d.get("max")),
                   p50=_f(d.get("p50")), p90=_f(d.get("p90")), p95=_f(d.get("p95")), p99=_f(d.get("p99")),
                   p999=_f(d.get("p999")), samples=_i(d.get("samples")), p99_valid=bool(d.get("p99_valid")),
                   qps=_f(d.get("qps")),
                   details=_freeze({k: v for k, v in d.items() if k not in cls._TYPED}))

    def to_dict(self) -> dict[str, Any]:
        out = {k: getattr(self, k) for k in ("mean", "std", "min", "max", "p50", "p90", "p95", "p99", "p999",
                                              "samples", "p99_valid")}
        out.update(self.details)
        out["qps"] = self.qps
        return out

    @property
    def warnings(self) -> tuple[str, ...]:
        return tuple(self.details.get("warnings") or ())

    @property
    def p90_valid(self) -> bool:
        return bool(self.details.get("p90_valid", (self.details.get("valid") or {}).get("p90", False)))


@dataclass(frozen=True)
class Warmup:
    """Warm-up inferences, shown apart from the timed ones (milliseconds)."""

    runs: int | None
    mean: float | None
    min: float | None = None
    max: float | None = None
    total: float | None = None
    first: float | None = None
    samples_ns: tuple[int, ...] = ()

    @classmethod
    def from_samples(cls, samples_ns: Any) -> "Warmup | None":
        ns = np.asarray(samples_ns if samples_ns is not None else [], np.int64).ravel()
        if ns.size == 0:
            return None
        ms = ns.astype(np.float64) / 1e6
        return cls(runs=int(ms.size), mean=float(ms.mean()), min=float(ms.min()), max=float(ms.max()),
                   total=float(ms.sum()), first=float(ms[0]), samples_ns=tuple(int(x) for x in ns))

    @classmethod
    def from_json(cls, value: Any, samples_ns: Any = None) -> "Warmup | None":
        """Schema 2 object, or the schema 1 shapes (list of ms in compare rows, scalar mean)."""
        if samples_ns:
            w = cls.from_samples(samples_ns)
            if w is not None:
                return w
        if value is None:
            return None
        if isinstance(value, Mapping):
            return cls(runs=_i(value.get("runs")), mean=_f(value.get("mean")), min=_f(value.get("min")),
                       max=_f(value.get("max")), total=_f(value.get("total")), first=_f(value.get("first")))
        if isinstance(value, (list, tuple)):
            return cls.from_samples([float(x) * 1e6 for x in value if _f(x) is not None])
        return cls(runs=None, mean=_f(value))

    def to_dict(self) -> dict[str, Any]:
        return {"runs": self.runs, "mean": self.mean, "min": self.min, "max": self.max, "total": self.total,
                "first": self.first}


@dataclass(frozen=True)
class Drift:
    """Drift of one output tensor against a reference (definitions: README "Drift and accuracy")."""

    max_abs: float | None
    mean_abs: float | None
    rmse: float | None
    rel_l2: float | None
    cosine: float | None
    cosine_min: float | None
    psnr_db: float | None
    nan: int | None = None             # None: the document did not count them
    inf: int | None = None
    elements: int | None = None
    details: Mapping[str, Any] = field(default_factory=dict)

    _TYPED = ("max_abs", "mean_abs", "rmse", "rel_l2", "cosine", "cosine_min", "psnr_db", "nan", "inf", "elements")

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Drift":
        return cls(max_abs=_f(d.get("max_abs")), mean_abs=_f(d.get("mean_abs")), rmse=_f(d.get("rmse")),
                   rel_l2=_f(d.get("rel_l2")), cosine=_f(d.get("cosine")), cosine_min=_f(d.get("cosine_min")),
                   psnr_db=_f(d.get("psnr_db")), nan=_i(d.get("nan")), inf=_i(d.get("inf")),
                   elements=_i(d.get("elements")),
                   details=_freeze({k: v for k, v in d.items() if k not in cls._TYPED}))

    def to_dict(self) -> dict[str, Any]:
        out = {k: getattr(self, k) for k in self._TYPED}
        out.update(self.details)
        return out

    @property
    def nonfinite(self) -> int:
        return (self.nan or 0) + (self.inf or 0)


def drifts_from_dict(d: Mapping[str, Any] | None) -> Mapping[str, Drift] | None:
    if d is None:
        return None
    return _freeze({str(k): Drift.from_dict(v) for k, v in d.items() if isinstance(v, Mapping)})


@dataclass(frozen=True)
class Worst:
    """The worst output over all tensors: lowest PSNR and cosine, total non-finite values (in the
    compared outputs, and ``ref_nonfinite`` in the reference's). With any non-finite value the
    PSNR and cosine are None: no drift number is honest then."""

    psnr_db: float | None
    cosine: float | None
    nonfinite: int = 0
    psnr_output: str | None = None
    ref_nonfinite: int = 0

    @classmethod
    def of(cls, drifts: Mapping[str, Drift] | None) -> "Worst | None":
        """For rows written without ``worst`` (hand-made or foreign documents): the same
        definition as ``compare.worst`` -- lowest PSNR and cosine, total NaN/Inf."""
        if not drifts:
            return None
        nonfinite = sum(d.nonfinite for d in drifts.values())
        ref_bad = sum(_i(d.details.get("ref_nonfinite")) or 0 for d in drifts.values())
        if nonfinite or ref_bad:
            return cls(psnr_db=None, cosine=None, nonfinite=nonfinite, ref_nonfinite=ref_bad)
        psnrs = {k: d.psnr_db for k, d in drifts.items() if d.psnr_db is not None and d.psnr_db == d.psnr_db}
        cos = [d.cosine for d in drifts.values() if d.cosine is not None and d.cosine == d.cosine]
        out = min(psnrs, key=lambda k: psnrs[k]) if psnrs else None
        return cls(psnr_db=psnrs[out] if out else None, cosine=min(cos) if cos else None,
                   nonfinite=0, psnr_output=out)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None) -> "Worst | None":
        if d is None:
            return None
        return cls(psnr_db=_f(d.get("psnr_db")), cosine=_f(d.get("cosine")), nonfinite=_i(d.get("nonfinite")) or 0,
                   psnr_output=d.get("psnr_output"), ref_nonfinite=_i(d.get("ref_nonfinite")) or 0)

    def to_dict(self) -> dict[str, Any]:
        out = {"psnr_db": self.psnr_db, "cosine": self.cosine, "nonfinite": self.nonfinite}
        if self.psnr_output is not None:
            out["psnr_output"] = self.psnr_output
        if self.ref_nonfinite:
            out["ref_nonfinite"] = self.ref_nonfinite
        return out


@dataclass(frozen=True)
class Accuracy:
    """Classification agreement with the reference and, with labels, task top-1 and its drop."""

    output: str | None
    top1_agreement: float | None = None
    top5_agreement: float | None = None
    top1: float | None = None
    reference_top1: float | None = None
    top1_drop_pp: float | None = None      # (reference top-1 - top-1) x 100: positive = worse
    samples: int | None = None
    details: Mapping[str, Any] = field(default_factory=dict)

    _TYPED = ("output", "top1_agreement", "top5_agreement", "top1", "reference_top1", "top1_drop_pp", "samples")

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None) -> "Accuracy | None":
        if d is None:
            return None
        top1 = d.get("top1", d.get("top1_accuracy"))   # 0.1.0 import paths wrote top1_accuracy once
        return cls(output=d.get("output"), top1_agreement=_f(d.get("top1_agreement")),
                   top5_agreement=_f(d.get("top5_agreement")), top1=_f(top1),
                   reference_top1=_f(d.get("reference_top1")), top1_drop_pp=_f(d.get("top1_drop_pp")),
                   samples=_i(d.get("samples")),
                   details=_freeze({k: v for k, v in d.items() if k not in cls._TYPED and k != "top1_accuracy"}))

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {k: getattr(self, k) for k in self._TYPED if getattr(self, k) is not None
                               or k in ("output", "top1_agreement")}
        out.update(self.details)
        return out


@dataclass(frozen=True)
class Cost:
    """What one inference costs by the graph (bench): FLOPs counted from the .tflite, the achieved
    rate, and -- when the *same* target's peak is known -- the share of it."""

    flops: int | None = None
    counted_ops: Mapping[str, Any] | None = None
    quantized: bool | None = None
    quantization_coverage: float | None = None
    float_ops: tuple[str, ...] = ()
    inputs: tuple[Any, ...] = ()
    outputs: tuple[Any, ...] = ()
    achieved_gflops_per_s: float | None = None
    peak_gflops: float | None = None
    pct_of_peak: float | None = None
    peak_note: str | None = None

    KEYS = ("flops", "counted_ops", "quantized", "quantization_coverage", "float_ops", "inputs", "outputs",
            "achieved_gflops_per_s", "peak_gflops", "pct_of_peak", "peak_note")

    @property
    def gflops(self) -> float | None:
        return None if self.flops is None else self.flops / 1e9

    @classmethod
    def from_row(cls, d: Mapping[str, Any]) -> "Cost | None":
        if not any(k in d for k in cls.KEYS):
            return None
        return cls(flops=_i(d.get("flops")), counted_ops=d.get("counted_ops"), quantized=d.get("quantized"),
                   quantization_coverage=_f(d.get("quantization_coverage")),
                   float_ops=tuple(d.get("float_ops") or ()), inputs=tuple(d.get("inputs") or ()),
                   outputs=tuple(d.get("outputs") or ()), achieved_gflops_per_s=_f(d.get("achieved_gflops_per_s")),
                   peak_gflops=_f(d.get("peak_gflops")), pct_of_peak=_f(d.get("pct_of_peak")),
                   peak_note=d.get("peak_note"))

    def to_row(self) -> dict[str, Any]:
        out = {k: getattr(self, k) for k in self.KEYS}
        out["float_ops"] = list(self.float_ops)
        out["inputs"] = list(self.inputs)
        out["outputs"] = list(self.outputs)
        out["gflops"] = self.gflops
        return {k: v for k, v in out.items() if v is not None or k in ("flops", "gflops")}


# ------------------------------------------------------------------------------------ regimes
# Sustained, paced and cold-start runs and energy (issue 17): parts built by edgebench.sustain.


def _lat(v: Any) -> Latency | None:
    return Latency.from_dict(v) if isinstance(v, Mapping) else None


def _lat_dict(v: Latency | None) -> dict[str, Any] | None:
    return None if v is None else v.to_dict()


@dataclass(frozen=True)
class Window:
    """One window of a sustained run: its latency statistics and the thermal state at its end."""

    index: int
    t_start_s: float | None
    t_end_s: float | None
    samples: int
    latency: Latency | None = None
    thermal: Mapping[str, Any] | None = None
    thermal_reason: str | None = None

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Window":
        return cls(index=_i(d.get("index")) or 0, t_start_s=_f(d.get("t_start_s")), t_end_s=_f(d.get("t_end_s")),
                   samples=_i(d.get("samples")) or 0, latency=_lat(d.get("latency_ms")),
                   thermal=_freeze(d["thermal"]) if isinstance(d.get("thermal"), Mapping) else None,
                   thermal_reason=d.get("thermal_reason"))

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "t_start_s": self.t_start_s, "t_end_s": self.t_end_s, "samples": self.samples,
                "latency_ms": _lat_dict(self.latency), "thermal": None if self.thermal is None else dict(self.thermal),
                "thermal_reason": self.thermal_reason}


@dataclass(frozen=True)
class _Summary:
    """A summary object: typed headline fields, everything else kept as measured in ``details``."""

    details: Mapping[str, Any] = field(default_factory=dict)
    _TYPED: ClassVar[tuple[str, ...]] = ()
    _LAT: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None):
        if not isinstance(d, Mapping):
            return None
        kw: dict[str, Any] = {k: d.get(k) for k in cls._TYPED}
        kw.update({k: _lat(d.get(k)) for k in cls._LAT})
        if "invalid_reasons" in kw:
            kw["invalid_reasons"] = tuple(str(x) for x in (kw["invalid_reasons"] or ()))
        kw["details"] = _freeze({k: v for k, v in d.items() if k not in cls._TYPED and k not in cls._LAT})
        return cls(**kw)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {k: getattr(self, k) for k in self._TYPED}
        if "invalid_reasons" in out:
            out["invalid_reasons"] = list(out["invalid_reasons"])
        out.update({k: _lat_dict(getattr(self, k)) for k in self._LAT})
        out.update(self.details)
        return out


@dataclass(frozen=True)
class Sustained(_Summary):
    """Summary of a sustained run: steady-state ratio (last window p50 / first), time to throttle."""

    duration_s: float | None = None
    report_every_s: float | None = None
    steady_state_ratio: float | None = None
    time_to_throttle_s: float | None = None
    throttle_reason: str | None = None
    _TYPED = ("duration_s", "report_every_s", "steady_state_ratio", "time_to_throttle_s", "throttle_reason")


@dataclass(frozen=True)
class Paced(_Summary):
    """A paced run next to back-to-back: the row's ``latency_ms`` is the paced one."""

    period_ms: float | None = None
    achieved_period_ms: float | None = None
    late_starts: int | None = None
    p50_ratio: float | None = None           # paced p50 / back-to-back p50
    back_to_back_ms: Latency | None = None
    _TYPED = ("period_ms", "achieved_period_ms", "late_starts", "p50_ratio")
    _LAT = ("back_to_back_ms",)


@dataclass(frozen=True)
class ColdStart(_Summary):
    """N fresh processes: LatencyStats of each phase over the starts without a weight cache."""

    count: int | None = None
    xnnpack_cache: bool | None = None
    process_start_ms: Latency | None = None
    init_ms: Latency | None = None
    first_inference_ms: Latency | None = None
    total_ms: Latency | None = None
    _TYPED = ("count", "xnnpack_cache")
    _LAT = ("process_start_ms", "init_ms", "first_inference_ms", "total_ms")


@dataclass(frozen=True)
class Energy(_Summary):
    """Energy per inference with its validity (edgebench.energy documents the method)."""

    source: str | None = None
    valid: bool | None = None
    mj_per_inference: float | None = None
    inferences_per_j: float | None = None
    joules: float | None = None
    invalid_reasons: tuple[str, ...] = ()
    _TYPED = ("source", "valid", "mj_per_inference", "inferences_per_j", "joules", "invalid_reasons")


@dataclass(frozen=True)
class Delegation:
    """Which nodes a delegate (or accelerator) took: JSON ``delegation``.

    ``nodes_total``: nodes of the model's main graph; ``nodes_delegated``: how many of them run
    inside delegate partitions; ``partitions``: delegate kernels (each is one call into the
    delegate, and every boundary between a partition and a CPU node costs a hand-over);
    ``undelegated``: ``{OP: count}`` of the nodes left to the CPU interpreter. ``source`` says
    where the facts came from (interpreter execution plan, benchmark_model log, profiler).
    Unknown numbers stay None (a benchmark_model log may print only the replaced count).
    """

    delegate: str | None
    nodes_total: int | None
    nodes_delegated: int | None
    partitions: int | None
    undelegated: Mapping[str, int] = field(default_factory=dict)
    source: str | None = None
    details: Mapping[str, Any] = field(default_factory=dict)

    _TYPED = ("delegate", "nodes_total", "nodes_delegated", "partitions", "undelegated", "source")

    @property
    def fraction(self) -> float | None:
        if not self.nodes_total or self.nodes_delegated is None:
            return None
        return self.nodes_delegated / self.nodes_total

    @property
    def complete(self) -> bool:
        return self.nodes_total is not None and self.nodes_delegated == self.nodes_total

    def cell(self) -> str:
        """The ``delegated`` column: "19/21, 7 parts" (or "-" when nothing is known)."""
        if self.nodes_delegated is None:
            return "-"
        text = f"{self.nodes_delegated}/{self.nodes_total if self.nodes_total is not None else '?'}"
        if self.partitions is not None:
            text += f", {self.partitions} part{'s' if self.partitions != 1 else ''}"
        return text

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None) -> "Delegation | None":
        if not isinstance(d, Mapping):
            return None
        und = d.get("undelegated") if isinstance(d.get("undelegated"), Mapping) else {}
        return cls(delegate=d.get("delegate"), nodes_total=_i(d.get("nodes_total")),
                   nodes_delegated=_i(d.get("nodes_delegated")), partitions=_i(d.get("partitions")),
                   undelegated=_freeze({str(k): _i(v) or 0 for k, v in und.items()}), source=d.get("source"),
                   details=_freeze({k: v for k, v in d.items() if k not in cls._TYPED}))

    def to_dict(self) -> dict[str, Any]:
        out = {"delegate": self.delegate, "nodes_total": self.nodes_total, "nodes_delegated": self.nodes_delegated,
               "partitions": self.partitions, "undelegated": dict(self.undelegated), "source": self.source}
        out.update(self.details)
        return out


@dataclass(frozen=True)
class OpEntry:
    """One entry of an op profile: JSON ``op_profile[i]``. ``ms`` is the mean time per inference,
    ``share`` its part of the profile's total (0..1). A delegate partition is ONE entry
    (``delegated`` true, ``op`` "DELEGATE"; ``name`` lists the ops inside and ``members`` their
    node indices); its inner ops, when the delegate reports them, are in ``details["inner"]``."""

    node: int | None
    op: str
    name: str | None
    ms: float | None
    share: float | None
    delegated: bool = False
    details: Mapping[str, Any] = field(default_factory=dict)

    _TYPED = ("node", "op", "name", "ms", "share", "delegated")

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "OpEntry":
        if "op" not in d and "node_type" in d:    # schema 2 import-log rows: benchmark_model's "Run Order"
            pct = _f(d.get("pct"))
            return cls(node=None, op=str(d.get("node_type")), name=d.get("name"), ms=_f(d.get("avg_ms")),
                       share=None if pct is None else pct / 100.0,
                       delegated=str(d.get("node_type", "")).lower().startswith(("tflite", "delegate")),
                       details=_freeze({k: v for k, v in d.items() if k not in ("node_type", "name", "avg_ms", "pct")}))
        return cls(node=_i(d.get("node")), op=str(d.get("op") or "?"), name=d.get("name"), ms=_f(d.get("ms")),
                   share=_f(d.get("share")), delegated=bool(d.get("delegated")),
                   details=_freeze({k: v for k, v in d.items() if k not in cls._TYPED}))

    def to_dict(self) -> dict[str, Any]:
        out = {"node": self.node, "op": self.op, "name": self.name, "ms": self.ms, "share": self.share,
               "delegated": self.delegated}
        out.update(self.details)
        return out


@dataclass(frozen=True)
class Verdict:
    """A silent-failure finding on one output (or the whole row): JSON ``verdicts[i]``.

    ``kind``: ``zero_output``, ``constant_output``, ``nonfinite``, ``low_cosine``,
    ``low_delegation``; ``failed`` decides whether it fails the gate (every kind does when its
    threshold is set; the first three always do). ``message`` says what happened, ``advice``
    what to try."""

    kind: str
    output: str | None
    failed: bool
    message: str
    advice: str = ""
    value: float | None = None
    threshold: float | None = None

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Verdict":
        return cls(kind=str(d.get("kind")), output=d.get("output"), failed=bool(d.get("failed")),
                   message=str(d.get("message") or ""), advice=str(d.get("advice") or ""), value=_f(d.get("value")),
                   threshold=_f(d.get("threshold")))

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "output": self.output, "failed": self.failed, "message": self.message,
                "advice": self.advice, "value": self.value, "threshold": self.threshold}


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
    precision: str | None = None
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
    runtime_api: str | None = None                  # "interpreter" | "compiled" (LiteRT CompiledModel)
    accelerator: str | None = None                  # compiled runtime: "cpu" | "gpu" | "npu"
    fully_accelerated: bool | None = None           # CompiledModel.is_fully_accelerated()
    gpu_precision: str | None = None                # GPU rows: "fp16" | "fp32"
    delegation: Delegation | None = None
    op_profile: tuple[OpEntry, ...] | None = None
    op_profile_info: Mapping[str, Any] | None = None   # source, runs, total/sum ms, sum vs p50, notes
    verdicts: tuple[Verdict, ...] = ()
    keep_float: tuple[str, ...] | None = None       # int8 with these tensors kept float (--keep-float)
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
    unknown: Mapping[str, Any] = field(default_factory=dict)

    kind = "inference"

    # Keys written flat at the top level, straight from same-named fields.
    _PLAIN = ("target", "status", "model", "precision", "role", "model_path", "model_sha256", "device_model",
              "error", "exit_code", "error_type", "size_bytes", "size_reduction_pct", "runtime", "method",
              "sample_class", "threads", "threads_effective", "delegate", "init_ms", "first_inference_ms", "peak_rss_bytes",
              "rss_before_load_bytes", "detection", "server", "sla", "stop_reason", "input_source",
              "input_samples", "nonfinite_outputs", "outputs_saved", "batch_throughput", "output_mapping", "extra",
              "runtime_api", "accelerator", "fully_accelerated", "gpu_precision", "op_profile_info")
    _LOG_KEYS = ("memory_mb", "delegates", "delegate_fallback", "delegated_nodes", "model_size_mb", "params",
                 "op_summary", "op_profile_timings", "errors", "unparsed_lines", "source", "warmup")
    _STRUCT = ("latency_ms", "samples_ns", "warmup_ms", "warmup_samples_ns", "drift", "worst", "drift_vs_host",
               "worst_vs_host", "accuracy", "concurrency", "fingerprint", "warnings", "gflops", "delegation",
               "op_profile", "verdicts", "keep_float")
    _REGIMES = ("timeline", "sustained", "period_ms", "paced", "cold_start", "energy", "energy_reason")

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
        if self.samples_ns is not None:
            out["samples_ns"] = list(self.samples_ns)
        if self.warmup is not None:
            out["warmup_ms"] = self.warmup.to_dict()
            if self.warmup.samples_ns:
                out["warmup_samples_ns"] = list(self.warmup.samples_ns)
        for k in ("drift", "drift_vs_host"):
            v = getattr(self, k)
            if v is not None:
                out[k] = {n: d.to_dict() for n, d in v.items()}
        for k in ("worst", "worst_vs_host"):
            v = getattr(self, k)
            if v is not None:
                out[k] = v.to_dict()
        if self.accuracy is not None or "drift" in out:
            out["accuracy"] = None if self.accuracy is None else self.accuracy.to_dict()
        if self.cost is not None:
            out.update(self.cost.to_row())
        if self.concurrency is not None:
            out["concurrency"] = [dict(c) for c in self.concurrency]
        if self.keep_float is not None:
            out["keep_float"] = list(self.keep_float)
        if self.log is not None:
            out.update(self.log)
        # issue 15: every row says what the delegate took; profiles and verdicts where measured
        out["delegation"] = None if self.delegation is None else self.delegation.to_dict()
        if self.op_profile is not None:
            out["op_profile"] = [e.to_dict() for e in self.op_profile]
        if self.verdicts or "drift" in out:
            out["verdicts"] = [v.to_dict() for v in self.verdicts]
        if self.timeline is not None:
            out["timeline"] = [w.to_dict() for w in self.timeline]
        for k in ("sustained", "paced", "cold_start"):
            if getattr(self, k) is not None:
                out[k] = getattr(self, k).to_dict()
        if self.period_ms is not None:
            out["period_ms"] = self.period_ms
        if self.energy is not None or self.energy_reason is not None:
            out["energy"] = None if self.energy is None else self.energy.to_dict()
            out["energy_reason"] = self.energy_reason
        out["fingerprint"] = dict(self.fingerprint)
        if self.warnings or self.status == "ok":
            out["warnings"] = list(self.warnings)
        out.update(self.unknown)
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], schema_version: int = SCHEMA_VERSION) -> "InferenceRow":
        known = set(cls._PLAIN) | set(cls._STRUCT) | set(cls._LOG_KEYS) | set(Cost.KEYS) | set(cls._REGIMES)
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
        kw["concurrency"] = tuple(_freeze(c) for c in conc) if isinstance(conc, list) else None
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
        kw["energy_reason"] = d.get("energy_reason")
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


# ------------------------------------------------------------------------------------ document


@dataclass(frozen=True)
class Document:
    """A result document: the envelope every producer writes (README "JSON results").

    ``meta`` holds the kind-specific keys (``reference``, ``gate``, ``inputs``, ``manifest``,
    ``timings``, ``settings`` ...); ``reference`` (the TF row of a compare) is typed.
    """

    kind: str
    rows: tuple[Row, ...]
    fingerprint: Mapping[str, Any]
    created: str
    edgebench_version: str
    schema_version: int = SCHEMA_VERSION
    reference: InferenceRow | None = None
    meta: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def new(cls, kind: str, rows: Iterable[Row], fingerprint: Mapping[str, Any], *,
            reference: InferenceRow | None = None, **meta: Any) -> "Document":
        from edgebench import __version__
        from edgebench.results import now_iso

        return cls(kind=kind, rows=tuple(rows), fingerprint=_freeze(fingerprint), created=now_iso(),
                   edgebench_version=__version__, reference=reference, meta=_freeze(meta))

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "schema_version": self.schema_version, "kind": self.kind, "created": self.created,
            "edgebench_version": self.edgebench_version, "fingerprint": dict(self.fingerprint),
            "rows": [r.to_dict() for r in self.rows],
        }
        if self.reference is not None:
            out["reference"] = self.reference.to_dict()
        out.update(self.meta)
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Document":
        ver = _i(d.get("schema_version")) or 1
        kind = str(d.get("kind") or "")
        rows = tuple(row_from_dict(r, kind=kind, schema_version=ver) for r in (d.get("rows") or ())
                     if isinstance(r, Mapping))
        ref = d.get("reference")
        reserved = ("schema_version", "kind", "created", "edgebench_version", "fingerprint", "rows", "reference")
        return cls(kind=kind, rows=rows, fingerprint=_freeze(d.get("fingerprint") or {}),
                   created=str(d.get("created") or ""), edgebench_version=str(d.get("edgebench_version") or ""),
                   schema_version=SCHEMA_VERSION,
                   reference=InferenceRow.from_dict(ref, ver) if isinstance(ref, Mapping) else None,
                   meta=_freeze({k: v for k, v in d.items() if k not in reserved}))

    def with_meta(self, **meta: Any) -> "Document":
        return dataclasses.replace(self, meta=_freeze({**self.meta, **meta}))

    def with_rows(self, rows: Sequence[Row]) -> "Document":
        return dataclasses.replace(self, rows=tuple(rows))

    def get(self, key: str, default: Any = None) -> Any:
        return self.meta.get(key, default)
