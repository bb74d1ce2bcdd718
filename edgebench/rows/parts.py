"""Typed parts of a row: latency, warm-up, drift per output, worst output, accuracy, cost."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Mapping

import numpy as np

from edgebench.core import latency as m
from edgebench.rows._json import _f, _freeze, _i

# ------------------------------------------------------------------------------------ parts


# How a statistic is read from and written to JSON: (reader of the stored value, writer of the field).
def _same(v: Any) -> Any:
    return v


def _bool(v: Any) -> bool:
    return bool(v)


def _text(v: Any) -> str | None:
    return None if v is None else str(v)


def _texts(v: Any) -> tuple[str, ...]:
    return tuple(str(x) for x in v) if isinstance(v, (list, tuple)) else ()


def _flags(v: Any) -> Mapping[str, bool] | None:
    return _freeze({str(k): bool(x) for k, x in v.items()}) if isinstance(v, Mapping) else None


def _counts(v: Any) -> Mapping[str, int | None] | None:
    return _freeze({str(k): _i(x) for k, x in v.items()}) if isinstance(v, Mapping) else None


def _pair(v: Any) -> tuple[float | None, float | None] | None:
    return (_f(v[0]), _f(v[1])) if isinstance(v, (list, tuple)) and len(v) == 2 else None


def _dict_or_none(v: Mapping[str, Any] | None) -> dict[str, Any] | None:
    return None if v is None else dict(v)


def _list_or_none(v: tuple | None) -> list | None:
    return None if v is None else list(v)


FLOAT, INT, BOOL, TEXT = (_f, _same), (_i, _same), (_bool, _same), (_text, _same)
TEXTS, FLAGS, COUNTS, PAIR = (_texts, list), (_flags, _dict_or_none), (_counts, _dict_or_none), (_pair, _list_or_none)


def stat(kind: tuple[Any, Any], default: Any = None, *, contract: bool = False) -> Any:
    """A statistic of ``Latency``: a JSON key of ``latency_ms`` (the field's name) read and written
    as ``kind``. ``contract`` keys (docs/json.md) are always written; the others are written
    unless the document they were read from lacked them."""
    return field(default=default, metadata={"read": kind[0], "write": kind[1], "contract": contract})


@dataclass(frozen=True)
class Latency:
    """The ``latency_ms`` object: per-inference latency statistics in milliseconds.

    One type from producer to store: :meth:`from_samples` derives every statistic from the raw
    per-inference samples (definitions: ``edgebench.core.latency``), :meth:`to_dict` / :meth:`from_dict`
    write and read the JSON object, driven by the one list of fields below (field name = JSON key,
    in the order written). A new statistic is one ``stat(...)`` field and its line in
    :meth:`from_samples`. Keys a stored document has that no field knows (older or foreign
    documents: a benchmark_model summary's ``p5``/``source``, a training ``steps_per_s``) are kept
    in ``extra`` and written back before ``qps``, which closes the object.

    Only a summary-only source (a captured benchmark_model log) builds one without samples, and then
    ``p99`` is None and ``p99_valid`` False.
    """

    mean: float | None = stat(FLOAT, contract=True)
    std: float | None = stat(FLOAT, contract=True)
    min: float | None = stat(FLOAT, contract=True)
    max: float | None = stat(FLOAT, contract=True)
    p50: float | None = stat(FLOAT, contract=True)
    p90: float | None = stat(FLOAT, contract=True)
    p95: float | None = stat(FLOAT, contract=True)
    p99: float | None = stat(FLOAT, contract=True)
    p999: float | None = stat(FLOAT, contract=True)
    samples: int | None = stat(INT, contract=True)
    p99_valid: bool = stat(BOOL, False, contract=True)   # n >= MIN_SAMPLES["p99"] (662)
    p90_valid: bool = stat(BOOL, False)
    valid: Mapping[str, bool] | None = stat(FLAGS)       # per percentile: n >= MIN_SAMPLES[name]
    min_samples: Mapping[str, int | None] | None = stat(COUNTS)
    p99_ci: tuple[float | None, float | None] | None = stat(PAIR)
    p99_ci_confidence: float | None = stat(FLOAT)
    p99_ci_n_eff: float | None = stat(FLOAT)
    p99_ci_method: str | None = stat(TEXT)
    p90_early_stopping: float | None = stat(FLOAT)
    p99_early_stopping: float | None = stat(FLOAT)
    early_stopping_confidence: float | None = stat(FLOAT)
    cv: float | None = stat(FLOAT)
    mad: float | None = stat(FLOAT)
    rmad: float | None = stat(FLOAT)
    first_third_p50: float | None = stat(FLOAT)
    last_third_p50: float | None = stat(FLOAT)
    trend: float | None = stat(FLOAT)                    # Theil-Sen relative change over the run
    stall_share: float | None = stat(FLOAT)              # share of the timed wall time in stalls (load signal)
    mean_over_p50: float | None = stat(FLOAT)
    p99_over_p50: float | None = stat(FLOAT)
    preemptions: int | None = stat(INT)                 # involuntary context switches in the timed loop(s)
    loaded: bool | None = stat((lambda v: None if v is None else bool(v), _same))   # the load signal fired
    percentile_method: str | None = stat(TEXT)
    warnings: tuple[str, ...] = stat(TEXTS, ())
    qps: float | None = stat(FLOAT, contract=True)       # last: unknown keys are written before it
    extra: Mapping[str, Any] = field(default_factory=dict)
    absent: frozenset[str] = frozenset()                 # statistics the document read had no key for

    @classmethod
    def from_samples(cls, samples_ns: Any, *, what: str = "run", preemptions: int | None = None) -> "Latency":
        """Derive the statistics from raw per-inference latencies in nanoseconds (run order);
        ``preemptions``: the worker's involuntary context switches while it timed them, when known
        (the load signal's evidence that slow samples were other work: ``measure.load_signal``)."""

        ms = m.validated_ms(samples_ns, what)
        n = int(ms.size)
        srt = np.sort(ms)
        pct = {name: float(np.percentile(srt, p)) for name, p in m.PERCENTILES.items()}
        mean = float(ms.mean())
        std = float(ms.std(ddof=1)) if n > 1 else 0.0
        valid = {name: n >= m.MIN_SAMPLES[name] for name in m.PERCENTILES}
        tau = m.autocorrelation_time(ms > pct["p99"]) if n >= m.DRIFT_MIN_SAMPLES else 1.0
        mad = float(np.median(np.abs(ms - pct["p50"])))
        first, last = m.thirds_medians(ms)
        trend = m.trend_change(ms)
        load = m.load_signal(ms, preemptions)
        return cls(
            **pct, mean=mean, std=std, min=float(srt[0]), max=float(srt[-1]), samples=n,
            p99_valid=valid["p99"], p90_valid=valid["p90"], valid=_freeze(valid),
            min_samples=_freeze(m.MIN_SAMPLES),
            p99_ci=m.order_stat_ci(srt, m.PERCENTILES["p99"], n_eff=n / tau),
            p99_ci_confidence=m.CI_CONFIDENCE, p99_ci_n_eff=n / tau, p99_ci_method=m.P99_CI_METHOD,
            p90_early_stopping=m.early_stopping_estimate(srt, m.PERCENTILES["p90"]),
            p99_early_stopping=m.early_stopping_estimate(srt, m.PERCENTILES["p99"]),
            early_stopping_confidence=m.EARLY_STOPPING_CONFIDENCE,
            cv=std / mean if mean > 0 else 0.0, mad=mad,
            rmad=m.MAD_TO_SD * mad / pct["p50"] if pct["p50"] > 0 else 0.0,
            first_third_p50=first, last_third_p50=last, trend=trend, percentile_method=m.PERCENTILE_METHOD,
            stall_share=None if load is None else load["stall_share"],
            mean_over_p50=None if load is None else load["mean_over_p50"],
            p99_over_p50=None if load is None else load["p99_over_p50"],
            preemptions=preemptions, loaded=None if load is None else load["fired"],
            warnings=tuple(m.latency_warnings(n, pct["p50"], m.window_median_spread(ms), first, last, trend, what,
                                              load)),
            qps=(1000.0 / mean) if mean > 0 else None,
        )

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Latency":
        kw = {f.name: f.metadata["read"](d.get(f.name)) for f in _STATS if f.name in d or f.metadata["contract"]}
        if "p90_valid" not in d:   # documents that kept only the per-percentile map
            kw["p90_valid"] = bool((d.get("valid") or {}).get("p90", False))
        return cls(**kw, extra=_freeze({k: v for k, v in d.items() if k not in _KEYS}),
                   absent=frozenset(f.name for f in _STATS if f.name not in d and not f.metadata["contract"]))

    def to_dict(self) -> dict[str, Any]:
        """The ``latency_ms`` JSON object (docs/json.md contract keys first, ``qps`` last)."""
        out: dict[str, Any] = {}
        for f in _STATS:
            if f.name == "qps":
                out.update(self.extra)
            if f.metadata["contract"] or f.name not in self.absent:
                out[f.name] = f.metadata["write"](getattr(self, f.name))
        return out

    @property
    def details(self) -> Mapping[str, Any]:
        """Read-only view of the JSON object without the contract keys (what the renderers written
        against the older two-type design read, e.g. ``details.get("p99_ci")``); new code reads the
        typed fields."""
        return _freeze({k: v for k, v in self.to_dict().items() if k not in _CONTRACT})

    @property
    def other_work(self) -> bool:
        """True when the load signal fired: the tail, mean and QPS reflect other work on the
        machine (``measure.load_signal``); documents without the signal read as False."""
        return bool(self.loaded)

    @property
    def drifting(self) -> bool:
        """True when the drift rule fired (first vs last third, or the fitted trend; ``measure``)."""
        return any(w.startswith("drift:") for w in self.warnings)


_STATS = tuple(f for f in fields(Latency) if "read" in f.metadata)
_KEYS = frozenset(f.name for f in _STATS)
_CONTRACT = frozenset(f.name for f in _STATS if f.metadata["contract"])


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
    """Drift of one output tensor against a reference (definitions: docs/gate.md, "Drift and accuracy definitions")."""
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

    @property
    def ref_nonfinite(self) -> int:
        """NaN/Inf values in the reference's output (``compare.compare_outputs``; kept in ``details``)."""
        return _i(self.details.get("ref_nonfinite")) or 0

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

    @property
    def top5(self) -> float | None:
        """Task top-5 accuracy (``compare.classification`` writes it; kept in ``details``)."""
        return _f(self.details.get("top5"))

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
    flops_note: str | None = None       # how ops in other subgraphs (a loop body) were counted

    KEYS = ("flops", "counted_ops", "quantized", "quantization_coverage", "float_ops", "inputs", "outputs",
            "achieved_gflops_per_s", "peak_gflops", "pct_of_peak", "peak_note", "flops_note")

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
                   peak_note=d.get("peak_note"), flops_note=d.get("flops_note"))

    def to_row(self) -> dict[str, Any]:
        out = {k: getattr(self, k) for k in self.KEYS}
        out["float_ops"] = list(self.float_ops)
        out["inputs"] = list(self.inputs)
        out["outputs"] = list(self.outputs)
        out["gflops"] = self.gflops
        return {k: v for k, v in out.items() if v is not None or k in ("flops", "gflops")}


@dataclass(frozen=True)
class SizeExplained:
    """Why a quantized file is not smaller than the FP32 one (``model.tflite_size.explain_size``):
    bytes by kind in this file and in FP32, their change, and the smallest precision built."""

    line: str
    smaller: str | None = None                       # the built precision that is smaller, if any
    quant_params_bytes: int | None = None
    kinds: Mapping[str, int] = field(default_factory=dict)       # this file: weights, biases, quant_params ...
    fp32_kinds: Mapping[str, int] = field(default_factory=dict)
    delta: Mapping[str, int] = field(default_factory=dict)       # this file minus FP32, per kind
    bias_tensors: int | None = None
    max_weight_reuse: int | None = None              # most ops reading one weight buffer (unrolled steps)
    duplicated_bytes: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"line": self.line, "smaller": self.smaller, "quant_params_bytes": self.quant_params_bytes,
                "kinds": dict(self.kinds), "fp32_kinds": dict(self.fp32_kinds), "delta": dict(self.delta),
                "bias_tensors": self.bias_tensors, "max_weight_reuse": self.max_weight_reuse,
                "duplicated_bytes": self.duplicated_bytes}

    @classmethod
    def from_dict(cls, d: Any) -> "SizeExplained | None":
        if not isinstance(d, Mapping) or not d.get("line"):
            return None

        def ints(v: Any) -> Mapping[str, int]:
            return _freeze({str(k): _i(n) for k, n in (v.items() if isinstance(v, Mapping) else ()) if _i(n) is not None})

        return cls(str(d["line"]), None if d.get("smaller") is None else str(d["smaller"]),
                   _i(d.get("quant_params_bytes")), ints(d.get("kinds")), ints(d.get("fp32_kinds")),
                   ints(d.get("delta")), _i(d.get("bias_tensors")), _i(d.get("max_weight_reuse")),
                   _i(d.get("duplicated_bytes")))
