"""The typed part of an ``edgebench diagnose`` row: its ranked layers and what the diagnosis says.

A diagnose row is an :class:`~edgebench.rows.InferenceRow` whose diagnose keys (``layers``,
``findings``, ``suggested_keep_float``, ``fix_commands``, ``verdict`` ...) sit flat beside the
row's own keys (docs/json.md, docs/diagnose.md); ``InferenceRow.diagnosis`` holds them
typed. :class:`Layer` is one ranked layer (the definitions of its numbers are in
``edgebench.diagnose.run`` and ``edgebench.convert.quant.layers``, which build them as dicts);
:class:`Diagnosis` is the rest of the part.

Round trip: ``from_dict`` then ``to_dict`` gives back the same JSON, byte for byte once written
(``results.dumps``): the keys come back in the order they were read, keys this module does not
type are kept in ``unknown`` and written back in place, and a value a field cannot hold (a string
where a number belongs, ``null`` where a list belongs) leaves the field at its default and is
written back as it was. Infinities read from stored ``"inf"`` strings are floats here and are
written as ``"inf"`` again by the JSON writer, as every other typed number.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass, field
from typing import Any, ClassVar, Mapping

import numpy as np

from edgebench.rows._json import _freeze

_BAD = object()    # a value the field's kind cannot hold: kept raw


def _str(v: Any) -> Any:
    return v if isinstance(v, str) else _BAD


def _int(v: Any) -> Any:
    if isinstance(v, (bool, np.bool_)):
        return _BAD
    if isinstance(v, (int, np.integer)):
        return int(v)
    return _BAD


def _real(v: Any) -> Any:
    """A number as written (an int stays an int: the JSON does not change); "inf"/"-inf" strings
    (how the JSON writer stores infinities) read as floats."""
    if isinstance(v, (bool, np.bool_)):
        return _BAD
    if isinstance(v, (int, np.integer)):
        return int(v)
    if isinstance(v, (float, np.floating)):
        return float(v)
    if isinstance(v, str) and v.strip().lower() in ("inf", "+inf", "-inf"):
        return float("-inf") if v.strip().startswith("-") else float("inf")
    return _BAD


def _bool(v: Any) -> Any:
    return bool(v) if isinstance(v, (bool, np.bool_)) else _BAD


def _tuple_of(read):
    def rd(v: Any) -> Any:
        if not isinstance(v, (list, tuple)):
            return _BAD
        out = tuple(read(x) for x in v)
        return _BAD if any(x is _BAD for x in out) else out
    return rd


def _record(cls):
    return lambda v: cls.from_dict(v) if isinstance(v, Mapping) else _BAD


def _write(v: Any) -> Any:
    if isinstance(v, _Keyed):
        return v.to_dict()
    if isinstance(v, tuple):
        return [_write(x) for x in v]
    if isinstance(v, Mapping):
        return dict(v)
    return v


class _Keyed:
    """A JSON object read into typed fields, written back unchanged (this module's docstring).

    Subclasses are frozen dataclasses with ``keys`` and ``unknown`` fields and a ``_KINDS`` map of
    JSON key (= field name) -> reader; ``_OPTIONAL`` keys are left out when None on an object built
    in code (``keys`` None)."""

    _KINDS: ClassVar[dict[str, Any]] = {}
    _OPTIONAL: ClassVar[tuple[str, ...]] = ()
    keys: tuple[str, ...] | None
    unknown: Mapping[str, Any]

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]):
        kw: dict[str, Any] = {}
        raw: dict[str, Any] = {}
        for k, v in d.items():
            read = cls._KINDS.get(k)
            got = _BAD if read is None else (None if v is None and _nullable(cls, k) else read(v))
            if got is _BAD:
                raw[k] = v
            else:
                kw[k] = got
        return cls(**kw, keys=tuple(d), unknown=_freeze(raw))

    def to_dict(self) -> dict[str, Any]:
        if self.keys is None:     # built in code: every field, then what is unknown
            keys = [k for k in self._KINDS if not (k in self._OPTIONAL and getattr(self, k) is None)]
            keys += [k for k in self.unknown if k not in keys]
        else:
            keys = list(self.keys)
        return {k: self.unknown[k] if k in self.unknown else _write(getattr(self, k)) for k in keys}


@functools.cache
def _nullable_fields(cls) -> frozenset[str]:
    return frozenset(f.name for f in dataclasses.fields(cls) if f.default is None)


def _nullable(cls, key: str) -> bool:
    """A field whose default is None holds a JSON null as None; a list field (default ()) keeps it raw."""
    return key in _nullable_fields(cls)


_META = dict(keys=field(default=None, compare=False, repr=False), unknown=field(default_factory=dict))


@dataclass(frozen=True)
class Layer(_Keyed):
    """One layer of a diagnosed model (the quantized op and its output tensor), ranked.

    ``rank`` 1 is the worst; ``finding`` says the layer stands out (``z``: its modified z-score);
    ``ranking_snr_db`` is the number the ranking used; ``inherits_from`` names the input tensor
    whose error it carries; ``advice`` is one sentence of what to do. ``isolated_*``: the op alone,
    fed the float model's values."""

    tensor: str | None = None
    float_tensor: str | None = None
    op: str | None = None
    node: int | None = None
    shape: tuple[int, ...] | None = None
    dtype: str | None = None
    scale: float | None = None
    zero_point: int | None = None
    rmse_over_scale: float | None = None
    snr_db: float | None = None
    channel_snr_db: float | None = None
    cosine: float | None = None
    max_abs: float | None = None
    isolated_rmse_over_scale: float | None = None
    isolated_snr_db: float | None = None
    isolated_channel_snr_db: float | None = None
    isolated_skipped: str | None = None      # why the op could not run alone
    outlier_ratio: float | None = None
    outlier_channel: int | None = None
    float_min: float | None = None
    float_max: float | None = None
    match: str | None = None                 # how the float counterpart was found (name, requantize, op order)
    nonfinite: int | None = None
    ranking_snr_db: float | None = None
    input_tensors: tuple[str, ...] | None = None
    z: float | None = None
    finding: bool = False
    inherits_from: str | None = None
    rank: int | None = None
    advice: str | None = None
    converter_defect: Mapping[str, Any] | None = None   # a copy op whose input/output quantization differ
    fix_gain_db: float | None = None          # measured: worst-output PSNR gained with it kept float (int8)
    fix_psnr_db: float | None = None          # ... the PSNR that trial reached
    keys: tuple[str, ...] | None = _META["keys"]
    unknown: Mapping[str, Any] = _META["unknown"]

    _OPTIONAL: ClassVar[tuple[str, ...]] = ("fix_gain_db", "fix_psnr_db", "converter_defect")
    _KINDS: ClassVar[dict[str, Any]] = {
        "tensor": _str, "float_tensor": _str, "op": _str, "node": _int, "shape": _tuple_of(_int), "dtype": _str,
        "scale": _real, "zero_point": _int, "rmse_over_scale": _real, "snr_db": _real, "channel_snr_db": _real,
        "cosine": _real, "max_abs": _real, "isolated_rmse_over_scale": _real, "isolated_snr_db": _real,
        "isolated_channel_snr_db": _real, "isolated_skipped": _str, "outlier_ratio": _real,
        "outlier_channel": _int, "float_min": _real, "float_max": _real, "match": _str, "nonfinite": _int,
        "ranking_snr_db": _real, "input_tensors": _tuple_of(_str), "z": _real, "finding": _bool,
        "inherits_from": _str, "rank": _int, "advice": _str, "fix_gain_db": _real, "fix_psnr_db": _real,
        "converter_defect": lambda v: _freeze(v) if isinstance(v, Mapping) else _BAD,
    }


@dataclass(frozen=True)
class Unmatched(_Keyed):
    """A quantized tensor without a float counterpart (so it has no layer row), and why."""

    tensor: str | None = None
    op: str | None = None
    node: int | None = None
    reason: str | None = None
    keys: tuple[str, ...] | None = _META["keys"]
    unknown: Mapping[str, Any] = _META["unknown"]

    _KINDS: ClassVar[dict[str, Any]] = {"tensor": _str, "op": _str, "node": _int, "reason": _str}


@dataclass(frozen=True)
class Intermediates(_Keyed):
    """How the intermediate tensors were read (google-ai-edge/LiteRT#413): ``float``/``quantized``
    say "preserve_all_tensors" when preserving them left the final outputs unchanged, else the
    fallback used; ``deployed_vs_builtin_max_diff``: how far the deployed run (default delegate,
    whose accuracy is shown) is from the builtin kernels the per-layer numbers use."""

    float: str | None = None
    quantized: str | None = None
    float_preserve_max_diff: float | None = None
    quantized_preserve_max_diff: float | None = None
    deployed_vs_builtin_max_diff: float | None = None
    caveat: str | None = None
    keys: tuple[str, ...] | None = _META["keys"]
    unknown: Mapping[str, Any] = _META["unknown"]

    _KINDS: ClassVar[dict[str, Any]] = {
        "float": _str, "quantized": _str, "float_preserve_max_diff": _real, "quantized_preserve_max_diff": _real,
        "deployed_vs_builtin_max_diff": _real, "caveat": _str}

    @property
    def preserved(self) -> bool:
        """Both models' intermediates were read as they run (no fallback)."""
        return self.float == "preserve_all_tensors" and self.quantized == "preserve_all_tensors"


@dataclass(frozen=True)
class Diagnosis(_Keyed):
    """The diagnose part of one row: the layers worst first and what they add up to.

    ``findings`` counts the layers that stand out; ``verdict`` is set when none does;
    ``suggested_keep_float`` are float tensor names worth keeping float (int8); ``fix_commands``
    are the command lines that prove a fix, each runnable as written."""

    float_model_path: str | None = None
    samples: int | None = None
    graph_id: str | None = None
    layers: tuple[Layer, ...] = ()
    findings: int | None = None
    unmatched: tuple[Unmatched, ...] = ()
    suggested_keep_float: tuple[str, ...] = ()
    intermediates: Intermediates | None = None
    outlier_ratio_method: str | None = None
    tensors_float: int | None = None
    tensors_quantized: int | None = None
    seconds: float | None = None
    worker_seconds: float | None = None
    verdict: str | None = None
    fix_commands: tuple[str, ...] = ()
    # keep-float trials (quant.fix_trials): {tensor, psnr_db, gain_db, top1_drop_pp} per layer tried, and
    # why the proof goal is what it is (or why no proof command is offered)
    fix_trials: tuple[Mapping[str, Any], ...] = ()
    proof_note: str | None = None
    keys: tuple[str, ...] | None = _META["keys"]
    unknown: Mapping[str, Any] = _META["unknown"]

    _KINDS: ClassVar[dict[str, Any]] = {
        "float_model_path": _str, "samples": _int, "graph_id": _str, "layers": _tuple_of(_record(Layer)),
        "findings": _int, "unmatched": _tuple_of(_record(Unmatched)), "suggested_keep_float": _tuple_of(_str),
        "intermediates": _record(Intermediates), "outlier_ratio_method": _str, "tensors_float": _int,
        "tensors_quantized": _int, "seconds": _real, "worker_seconds": _real, "verdict": _str,
        "fix_commands": _tuple_of(_str), "fix_trials": _tuple_of(lambda v: _freeze(v) if isinstance(v, Mapping) else _BAD),
        "proof_note": _str,
    }
    _OPTIONAL: ClassVar[tuple[str, ...]] = ("verdict", "proof_note")
    KEYS: ClassVar[tuple[str, ...]] = tuple(_KINDS)      # the row keys this part owns

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> "Diagnosis | None":
        """The diagnose part of a row in its JSON form; None for a row without ``layers`` (not a
        diagnosed precision: a skipped one, or any other command's row)."""
        if "layers" not in row:
            return None
        return cls.from_dict({k: v for k, v in row.items() if k in cls._KINDS})

    @property
    def finding_layers(self) -> tuple[Layer, ...]:
        return tuple(l for l in self.layers if l.finding)


# ------------------------------------------------------------------ the --keep-float auto search


@dataclass(frozen=True)
class Candidate(_Keyed):
    """One model the ``--keep-float auto`` search measured: int8 with ``keep_float`` tensors float."""

    keep_float: tuple[str, ...] = ()
    ops: tuple[int, ...] | None = None
    bytes: int | None = None
    size_reduction_pct: float | None = None
    psnr_db: float | None = None
    top1: float | None = None
    top1_drop_pp: float | None = None
    meets_goal: bool | None = None
    p50_ms: float | None = None
    p99_ms: float | None = None
    p99_valid: bool | None = None
    chosen: bool | None = None
    keys: tuple[str, ...] | None = _META["keys"]
    unknown: Mapping[str, Any] = _META["unknown"]

    _KINDS: ClassVar[dict[str, Any]] = {
        "keep_float": _tuple_of(_str), "ops": _tuple_of(_int), "bytes": _int, "size_reduction_pct": _real,
        "psnr_db": _real, "top1": _real, "top1_drop_pp": _real, "meets_goal": _bool, "p50_ms": _real,
        "p99_ms": _real, "p99_valid": _bool, "chosen": _bool}


@dataclass(frozen=True)
class KeepFloatSearch(_Keyed):
    """The ``--keep-float auto`` search (``quant.search``; a convert / convert-and-compare
    document's ``keep_float_search``): the goal, whether it was met, the candidates measured
    (``chosen`` marks the one kept) and the ranked layers it drew from (a :class:`Layer`'s
    ``rank``, ``tensor``, ``float_tensor``, ``op``, ``ranking_snr_db``, ``finding``)."""

    method: str | None = None
    goal: str | None = None
    met: bool | None = None
    stopped_early: str | None = None
    chosen: tuple[str, ...] = ()
    candidates: tuple[Candidate, ...] = ()
    evaluated: int | None = None
    ranking: tuple[Layer, ...] = ()
    reference_top1: float | None = None
    seconds: float | None = None
    keys: tuple[str, ...] | None = _META["keys"]
    unknown: Mapping[str, Any] = _META["unknown"]      # inputs {source, samples, sha256} and newer keys

    _KINDS: ClassVar[dict[str, Any]] = {
        "method": _str, "goal": _str, "met": _bool, "stopped_early": _str, "chosen": _tuple_of(_str),
        "candidates": _tuple_of(_record(Candidate)), "evaluated": _int, "ranking": _tuple_of(_record(Layer)),
        "reference_top1": _real, "seconds": _real}


# ------------------------------------------------------------------ the accelerator bisect


@dataclass(frozen=True)
class Probe(_Keyed):
    """One probe of ``diagnose --accelerator`` (``edgebench.diagnose.accelerator_worker``): the model
    cut after op ``node``, compiled for the accelerator and compared with the CPU. ``output`` is op
    ``node``'s own output tensor, ``worst`` the worst tensor the probe exposed (each: ``tensor``,
    ``shape``, ``max_abs``, ``finite_max_abs``, ``psnr_db``, ``cosine``, ``nan``, ``inf``,
    ``ref_nonfinite``, ``ref_min``/``ref_max`` (CPU), ``acc_min``/``acc_max``, ``departs``)."""

    probe: int | None = None
    node: int | None = None
    op: str | None = None
    tensor: str | None = None
    exposed: int | None = None
    departs: bool | None = None
    fully_accelerated: bool | None = None
    compile_s: float | None = None
    output: Mapping[str, Any] | None = None
    worst: Mapping[str, Any] | None = None
    departed: tuple[str, ...] = ()
    keys: tuple[str, ...] | None = _META["keys"]
    unknown: Mapping[str, Any] = _META["unknown"]

    _KINDS: ClassVar[dict[str, Any]] = {
        "probe": _int, "node": _int, "op": _str, "tensor": _str, "exposed": _int, "departs": _bool,
        "fully_accelerated": _bool, "compile_s": _real,
        "output": lambda v: _freeze(v) if isinstance(v, Mapping) else _BAD,
        "worst": lambda v: _freeze(v) if isinstance(v, Mapping) else _BAD, "departed": _tuple_of(_str)}


@dataclass(frozen=True)
class Bisect(_Keyed):
    """A ``diagnose --accelerator`` row's ``bisect``: the probes in the order run, the culprit (None:
    no divergence; else ``node``, ``op``, ``tensor``, ``shape``, ``inputs``, the drift numbers of a
    :class:`Probe` output, ``why``), the compiles it took against ``compile_bound``
    (1 + ceil(log2(ops))), and the verdict sentence."""

    ops: int | None = None
    samples: int | None = None
    compiles: int | None = None
    compile_bound: int | None = None
    min_psnr_db: float | None = None
    culprit: Mapping[str, Any] | None = None
    probes: tuple[Probe, ...] = ()
    seconds: float | None = None
    adapter: str | None = None
    software_gpu: bool | None = None
    verdict: str | None = None
    inputs_note: str | None = None       # synthetic inputs: what that means for the finding
    keys: tuple[str, ...] | None = _META["keys"]
    unknown: Mapping[str, Any] = _META["unknown"]     # op_types and newer keys

    _KINDS: ClassVar[dict[str, Any]] = {
        "ops": _int, "samples": _int, "compiles": _int, "compile_bound": _int, "min_psnr_db": _real,
        "culprit": lambda v: _freeze(v) if isinstance(v, Mapping) else _BAD,
        "probes": _tuple_of(_record(Probe)), "seconds": _real, "adapter": _str, "software_gpu": _bool,
        "verdict": _str, "inputs_note": _str}
