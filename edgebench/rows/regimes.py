"""Typed parts of a row from the other regimes and diagnostics: sustained windows, paced and
cold-start summaries, energy, concurrency sweeps, delegation, op profiles, silent-failure verdicts.

The summaries keep what they measured beyond their headline fields in ``details``; the facts a
renderer shows from there are read through the typed properties below (``Window.hottest_c``,
``ColdStart.warm``, ``Energy.units`` ...), so no renderer reads ``details`` by key."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Mapping


from edgebench.rows._json import _f, _freeze, _i
from edgebench.rows.parts import Latency


# ------------------------------------------------------------------------------------ regimes
# Sustained, paced and cold-start runs and energy (issue 17): parts built by edgebench.bench.sustain.


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

    # the thermal state at the window's end (edgebench.bench.sustain: hottest zone, per-CPU current
    # frequency and cap, Android thermal status); None / empty without a reading
    @property
    def hottest_c(self) -> float | None:
        return _f((self.thermal or {}).get("hottest_c"))

    @property
    def thermal_status(self) -> int | None:
        """Android thermal status 0 (none) .. 6 (shutdown)."""
        return _i((self.thermal or {}).get("thermal_status"))

    @property
    def cpu_cur_khz(self) -> tuple[int | None, ...]:
        return tuple((self.thermal or {}).get("cpu_cur_khz") or ())

    @property
    def cpu_cap_khz(self) -> tuple[int | None, ...]:
        return tuple((self.thermal or {}).get("cpu_cap_khz") or ())

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

    @property
    def capacity_qps(self) -> float | None:
        """1 / mean of the paced latencies: what back-to-back would do (the row's QPS is the offered rate)."""
        return _f(self.details.get("capacity_qps"))

    @property
    def start_lag(self) -> Latency | None:
        """How late invokes started against the schedule, ms (``p50``, ``p99``, ``max``)."""
        return _lat(self.details.get("start_lag_ms"))


# The phases of one cold start, in order; they add up to total_ms (other_ms holds what none of
# the named phases does: reading the job and the inputs).
COLD_START_PHASES = ("process_start_ms", "init_ms", "first_inference_ms", "other_ms", "total_ms")


@dataclass(frozen=True)
class ColdStart(_Summary):
    """N fresh processes: the ``Latency`` of each phase over the starts without a weight cache."""

    count: int | None = None
    xnnpack_cache: bool | None = None
    process_start_ms: Latency | None = None
    init_ms: Latency | None = None
    first_inference_ms: Latency | None = None
    other_ms: Latency | None = None      # what no phase holds (reading the job and inputs): phases add up
    total_ms: Latency | None = None
    _TYPED = ("count", "xnnpack_cache")
    _LAT = COLD_START_PHASES

    @property
    def runtime(self) -> str | None:
        v = self.details.get("runtime")
        return None if v is None else str(v)

    @property
    def note(self) -> str | None:
        v = self.details.get("note")
        return None if v is None else str(v)

    @property
    def cache_bytes(self) -> int | None:
        """Size of the XNNPACK weight-cache file the first cached start wrote."""
        return _i(self.details.get("cache_bytes"))

    @property
    def cache_build(self) -> Mapping[str, float | None] | None:
        """The start that wrote the weight cache: ms per phase (every key of COLD_START_PHASES)."""
        b = self.details.get("cache_build")
        return _freeze({k: _f(b.get(k)) for k in COLD_START_PHASES}) if isinstance(b, Mapping) and b else None

    @property
    def warm(self) -> "ColdStart | None":
        """The starts that read the weight cache: their phases (``count`` is not recorded)."""
        return ColdStart.from_dict(self.details.get("warm_cache"))

    @property
    def warm_vs_no_cache_init_ratio(self) -> float | None:
        return _f(self.details.get("warm_vs_no_cache_init_ratio"))


@dataclass(frozen=True)
class Energy(_Summary):
    """Energy per inference with its validity (edgebench.targets.energy documents the method)."""

    source: str | None = None
    valid: bool | None = None
    mj_per_inference: float | None = None
    inferences_per_j: float | None = None
    joules: float | None = None
    invalid_reasons: tuple[str, ...] = ()
    _TYPED = ("source", "valid", "mj_per_inference", "inferences_per_j", "joules", "invalid_reasons")

    @property
    def run_power_w(self) -> float | None:
        return _f(self.details.get("run_power_w"))

    @property
    def idle_power_w(self) -> float | None:
        return _f(self.details.get("idle_power_w"))

    @property
    def run_s(self) -> float | None:
        return _f(self.details.get("run_s"))

    @property
    def run_readings(self) -> int | None:
        """Power readings taken during the run (battery gauge / RAPL counter)."""
        return self._readings("run")

    @property
    def idle_readings(self) -> int | None:
        return self._readings("idle")

    def _readings(self, span: str) -> int | None:
        n = self.details.get("samples")
        return _i(n.get(span)) if isinstance(n, Mapping) else None

    @property
    def units(self) -> "EnergyUnits | None":
        """The battery gauge's units as detected (None when the source has none, e.g. RAPL)."""
        u = self.details.get("units")
        return EnergyUnits.from_dict(u) if isinstance(u, Mapping) and u else None


@dataclass(frozen=True)
class EnergyUnits:
    """Units of a battery gauge's current and voltage readings (``edgebench.targets.energy.detect_units``);
    ``assumed`` when the current's magnitude fitted both and the voltage's unit was taken."""

    current: str | None
    voltage: str | None
    assumed: bool = False

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "EnergyUnits":
        return cls(current=d.get("current"), voltage=d.get("voltage"), assumed=bool(d.get("assumed")))


@dataclass(frozen=True)
class ConcurrencyLevel:
    """One level of a concurrency sweep (JSON ``concurrency[i]``, ``edgebench.bench.load.concurrency``):
    ``level`` streams, their total ``qps`` and p99 latency (ms). Rows that name the level
    ``concurrency``, ``streams`` or ``threads``, or keep qps/p99 only in ``latency_ms``, are read too."""

    level: int | None
    qps: float | None
    p99_ms: float | None

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "ConcurrencyLevel":
        lat = d.get("latency_ms") if isinstance(d.get("latency_ms"), Mapping) else {}
        level = next((d[k] for k in ("level", "concurrency", "streams", "threads") if k in d), None)
        return cls(level=_i(level), qps=_f(d["qps"] if "qps" in d else lat.get("qps")),
                   p99_ms=_f(lat["p99"] if "p99" in lat else d.get("p99_ms")))


def concurrency_levels(items: Any) -> tuple[ConcurrencyLevel, ...]:
    """A row's ``concurrency`` sweep (its mappings), typed."""
    return tuple(ConcurrencyLevel.from_dict(c) for c in items or () if isinstance(c, Mapping))


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

    @property
    def p50_ms(self) -> float | None:
        """The op's median time per inference (profilers that report one; kept in ``details``)."""
        return _f(self.details.get("p50_ms"))

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
