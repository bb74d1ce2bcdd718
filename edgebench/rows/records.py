"""Typed views of the records that are not result rows but are rendered like them: a convert
manifest's variants, an adb device, a stored run (a line of ``results list``), a matrix run's
cells, a benchmark_model log's own facts, and a ``results compare`` of two runs.

As with the result rows, a renderer reads attributes -- a misspelt one fails loudly -- and never
``.get("…")`` on the producer's JSON; each record is built once with ``of`` from the mapping the
producer, the store or the JSON file holds (which stays as it is: the JSON does not change).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from edgebench.rows._json import _f, _i


def _m(v: Any) -> Mapping[str, Any]:
    return v if isinstance(v, Mapping) else {}


def _s(v: Any) -> str | None:
    return None if v is None else str(v)


def _counts(v: Any) -> dict[str, int]:
    return {str(k): int(n) for k, n in _m(v).items() if _i(n) is not None}


# --------------------------------------------------------------------------- convert manifest

@dataclass(frozen=True)
class Variant:
    """One precision of a convert manifest (``convert.convert``'s ``variants[precision]``)."""

    precision: str
    status: str
    bytes: int | None = None
    size_reduction_pct: float | None = None
    seconds: float | None = None
    ops: int | None = None                       # every op of the file
    float_ops: dict[str, int] = field(default_factory=dict)   # ops left in float, by type
    quantized: bool = False
    parity: str | None = None
    quantization_mode: str | None = None
    precision_found: str | None = None           # read from the tensors, when it differs
    keep_float: tuple[str, ...] = ()
    keep_float_ops: int = 0
    error: str | None = None
    size_explained: str | None = None            # a quantized file not smaller than FP32: where the bytes went

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @classmethod
    def of(cls, precision: str, d: Any) -> "Variant":
        d = _m(d)
        hist = _counts(d.get("op_histogram"))
        found = _s(d.get("precision_from_tensors"))
        return cls(precision, str(d.get("status") or "?"), _i(d.get("bytes")), _f(d.get("size_reduction_pct")),
                   _f(d.get("seconds")), sum(hist.values()) if hist else None, _counts(d.get("float_op_histogram")),
                   bool(d.get("quantized")), _s(d.get("parity")) if d.get("parity") else None,
                   _s(_m(d.get("quantization")).get("mode")), found if found not in (None, precision) else None,
                   tuple(str(x) for x in d.get("keep_float") or ()), len(d.get("keep_float_ops") or ()),
                   _s(d.get("error")), _s(_m(d.get("size_explained")).get("line")))


@dataclass(frozen=True)
class Manifest:
    """A convert manifest (``manifest.json``): its source, variants, folder and calibration."""

    name: str | None
    sha256: str | None
    source: Mapping[str, Any]                    # for rows.envelope.SourceRecord.of
    variants: tuple[Variant, ...]
    out_dir: str | None
    calibration_warning: str | None = None
    calibration_not_needed: str | None = None    # why no calibration was needed, when none was

    @classmethod
    def of(cls, d: Any) -> "Manifest":
        d = _m(d)
        src = _m(d.get("source"))
        cal = _m(d.get("calibration"))
        return cls(_s(src.get("name")), _s(src.get("sha256")), src,
                   tuple(Variant.of(str(p), v) for p, v in _m(d.get("variants")).items()), _s(d.get("out_dir")),
                   _s(cal.get("warning")) if cal.get("warning") else None,
                   str(cal.get("reason")) if cal.get("needed") is False else None)


# --------------------------------------------------------------------------- adb devices

@dataclass(frozen=True)
class DeviceProfile:
    id: str | None
    threads: int | None
    affinity_mask: str | None
    generated: bool = False
    error: str | None = None

    @classmethod
    def of(cls, d: Any) -> "DeviceProfile | None":
        if not isinstance(d, Mapping) or not d:
            return None
        return cls(_s(d.get("id")), _i(d.get("threads")), _s(d.get("affinity_mask")), bool(d.get("generated")),
                   _s(d.get("error")))


@dataclass(frozen=True)
class Device:
    """One row of ``edgebench devices`` (``targets.adb.devices.list_devices``)."""

    serial: str
    state: str
    error: str | None = None
    model: str | None = None
    soc: str | None = None
    board: str | None = None
    abi: str | None = None
    android_version: str | None = None
    sdk: int | None = None
    cpu_cores: int | None = None
    cpu_max_khz: tuple[int, ...] = ()
    ram_bytes: int | None = None
    governor: str | None = None
    thermal_c: dict[str, float] = field(default_factory=dict)
    battery_level_pct: int | None = None
    battery_temp_c: float | None = None
    battery_status: str | None = None
    has_battery: bool = False
    profile: DeviceProfile | None = None
    tflite_runtime: str | None = None
    has_python_runtime: bool = False

    @property
    def ready(self) -> bool:
        return self.state == "device" and not self.error

    @classmethod
    def of(cls, d: Any) -> "Device":
        d = _m(d)
        bat = _m(d.get("battery"))
        return cls(str(d.get("serial") or "?"), str(d.get("state") or "?"), _s(d.get("error")), _s(d.get("model")),
                   _s(d.get("soc")), _s(d.get("board")), _s(d.get("abi")), _s(d.get("android_version")),
                   _i(d.get("sdk")), _i(d.get("cpu_cores")),
                   tuple(k for k in (_i(x) for x in d.get("cpu_max_khz") or ()) if k),
                   _i(d.get("ram_bytes")), _s(d.get("governor")),
                   {str(k): v for k, v in ((k, _f(v)) for k, v in _m(d.get("thermal_c")).items()) if v is not None},
                   _i(bat.get("level_pct")), _f(bat.get("temp_c")), _s(bat.get("status")), bool(bat),
                   DeviceProfile.of(d.get("profile")), _s(d.get("tflite_runtime")), bool(d.get("has_python_runtime")))


# --------------------------------------------------------------------------- the results store

@dataclass(frozen=True)
class StoredRun:
    """One line of ``results list`` (``Store.list_runs``)."""

    run_id: str
    created: str
    kind: str
    status: str
    verdict: str | None = None
    gate: str | None = None
    models: tuple[str, ...] = ()
    n_rows: int | None = None
    matrix_hash: str | None = None
    cell_key: str | None = None

    @classmethod
    def of(cls, d: Any) -> "StoredRun":
        d = _m(d)
        models = d.get("models")
        names = tuple(x.strip() for x in (models.split(",") if isinstance(models, str) else models or ()) if x)
        return cls(str(d.get("run_id") or "?"), str(d.get("created") or ""), str(d.get("kind") or "?"),
                   str(d.get("status") or "?"), _s(d.get("verdict")), _s(d.get("gate")), tuple(str(x) for x in names),
                   _i(d.get("n_rows")), _s(d.get("matrix_hash")), _s(d.get("cell_key")))


# --------------------------------------------------------------------------- matrix runs

@dataclass(frozen=True)
class MatrixCell:
    index: int
    params: Mapping[str, Any]
    status: str
    run_id: str | None = None
    headline: str | None = None
    reason: str | None = None

    @classmethod
    def of(cls, d: Any) -> "MatrixCell":
        d = _m(d)
        return cls(_i(d.get("index")) or 0, dict(_m(d.get("params"))), str(d.get("status") or "?"),
                   _s(d.get("run_id")), _s(d.get("headline")), _s(d.get("reason")))


@dataclass(frozen=True)
class MatrixReport:
    """What ``matrix run`` reports (``matrix.run_matrix``)."""

    matrix: str
    kind: str
    matrix_hash: str
    total_cells: int
    cells: tuple[MatrixCell, ...]
    counts: dict[str, int]
    shard: str | None = None
    db: str | None = None

    @classmethod
    def of(cls, d: Any) -> "MatrixReport":
        d = _m(d)
        return cls(str(d.get("matrix") or "?"), str(d.get("kind") or "?"), str(d.get("matrix_hash") or "?"),
                   _i(d.get("total_cells")) or 0, tuple(MatrixCell.of(c) for c in d.get("cells") or ()),
                   _counts(d.get("counts")), _s(d.get("shard")) if d.get("shard") else None,
                   _s(d.get("db")) if d.get("db") else None)


# --------------------------------------------------------------------------- benchmark_model logs

@dataclass(frozen=True)
class LogFacts:
    """What a parsed benchmark_model log says beyond the row's latency: memory as the tool prints
    it, its delegated-node line, the lines no parser understood, and the latency's own extras."""

    memory_init_mb: float | None = None
    memory_overall_mb: float | None = None
    memory_kind: str | None = None
    memory_peak_periodic_mb: float | None = None
    delegated_nodes: str | None = None
    unparsed_lines: int | None = None
    p5_ms: float | None = None
    p99_note: str | None = None
    latency_source: str | None = None

    @classmethod
    def of(cls, log: Any, latency_details: Any) -> "LogFacts":
        log, d = _m(log), _m(latency_details)
        mem = _m(log.get("memory_mb"))
        unparsed = log.get("unparsed_lines")
        return cls(_f(mem.get("init")), _f(mem.get("overall")), _s(mem.get("kind")), _f(mem.get("peak_periodic")),
                   _s(log.get("delegated_nodes")), len(unparsed) if isinstance(unparsed, (list, tuple)) else _i(unparsed),
                   _f(d.get("p5")), _s(d.get("p99_note")), _s(d.get("source")))


# --------------------------------------------------------------------------- results compare

@dataclass(frozen=True)
class Difference:
    field: str
    a: Any
    b: Any

    @classmethod
    def of(cls, d: Any) -> "Difference":
        d = _m(d)
        return cls(str(d.get("field")), d.get("a"), d.get("b"))


@dataclass(frozen=True)
class ComparedPair:
    """One row pair of ``results compare`` (``stats.compare_runs``): its key, its metrics' changes
    (``stats.Change``), and how the two rows differ besides their numbers."""

    key: tuple[str, ...]
    changes: tuple[Any, ...]
    n_samples: tuple[Any, Any] = (None, None)
    repeats: tuple[Any, Any] = (1, 1)
    basis: tuple[str, ...] = ()
    fingerprint_diff: tuple[Difference, ...] = ()
    config_diff: tuple[Difference, ...] = ()
    mixed_methods: bool = False
    sample_class: tuple[Any, Any] = (None, None)
    loaded: tuple[bool, bool] = (False, False)      # the load signal fired on A / B (measure.load_signal)

    @property
    def identity(self) -> list[str]:
        """model, precision, target, then "batch N" when batched and "P+D tokens" for an llm-bench
        row's shape (``stats._row_key``; the stored key leaves out what a row does not have, and an
        llm-bench row has no batch, so two trailing parts are a shape, one or three start with a batch)."""
        rest = [k for k in self.key[3:] if k not in ("None", "")]
        batch, shape = (rest[:1], rest[1:]) if len(rest) % 2 else ([], rest)
        return (list(self.key[:3]) + [f"batch {k}" for k in batch]
                + [f"{p}+{d} tokens" for p, d in zip(shape[::2], shape[1::2])])

    @classmethod
    def of(cls, d: Any) -> "ComparedPair":
        d = _m(d)
        return cls(tuple(str(k) for k in d.get("key") or ()), tuple(d.get("changes") or ()),
                   tuple(d.get("n_samples") or (None, None)), tuple(d.get("repeats") or (1, 1)),
                   tuple(str(b) for b in d.get("basis") or ()),
                   tuple(Difference.of(x) for x in d.get("fingerprint_diff") or ()),
                   tuple(Difference.of(x) for x in d.get("config_diff") or ()), bool(d.get("mixed_methods")),
                   tuple(d.get("sample_class") or (None, None)),
                   tuple(bool(x) for x in (d.get("loaded") or (False, False))))


@dataclass(frozen=True)
class Comparison:
    """``results compare A B`` (``stats.compare_stored``)."""

    a: str
    b: str
    pairs: tuple[ComparedPair, ...]
    fingerprint_diff: tuple[Difference, ...]
    unmatched_a: tuple[tuple[Any, ...], ...]
    unmatched_b: tuple[tuple[Any, ...], ...]
    regressions: int
    undecided: int
    ci_level: float
    min_ratio: Any
    alpha: Any
    test: str
    thresholds: dict[str, float]

    @classmethod
    def of(cls, d: Any) -> "Comparison":
        d = _m(d)
        rule = _m(d.get("rule"))
        return cls(str(d.get("a")), str(d.get("b")), tuple(ComparedPair.of(p) for p in d.get("pairs") or ()),
                   tuple(Difference.of(x) for x in d.get("fingerprint_diff") or ()),
                   tuple(tuple(k) for k in d.get("unmatched_a") or ()), tuple(tuple(k) for k in d.get("unmatched_b") or ()),
                   _i(d.get("regressions")) or 0, _i(d.get("undecided")) or 0, _f(rule.get("ci_level")) or 0.95,
                   rule.get("min_ratio"), rule.get("alpha"), str(rule.get("test") or ""),
                   {str(k): float(v) for k, v in _m(rule.get("thresholds")).items() if _f(v) is not None})
