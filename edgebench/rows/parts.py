"""Typed parts of a row: latency, warm-up, drift per output, worst output, accuracy, cost."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np

from edgebench.rows._json import _f, _freeze, _i


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
