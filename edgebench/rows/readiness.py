"""The typed part of an ``edgebench readiness`` row: one (model, vendor, SoC) ahead-of-time compile.

A readiness row is an :class:`~edgebench.rows.InferenceRow` (model, precision, target, status,
error, ``size_bytes`` = the compiled file, ``delegation`` = what the NPU took) whose readiness keys
sit flat beside the row's own, as a diagnose row's do; ``InferenceRow.readiness`` holds them typed.

``compile_status`` is one of ``COMPILE_STATUSES``:

* ``sdk-missing``: the vendor's compiler library is not on this host (``missing`` names it) -- not
  checkable, so no op count is shown (a target that cannot be checked is never 0/M);
* ``plugin-load``: LiteRT's plugin for the vendor does not load here (``missing`` says why);
* ``ops-rejected``: the compile worked, but the vendor took only ``ops_on_npu`` of ``ops_total`` ops
  (``left_on_cpu`` names each other op with the plugin's line and the vendor validator's);
* ``compile-failed``: the plugin partitioned (N/M known) and then the vendor compiler failed
  (``error`` has its words), or the compile process crashed or hung;
* ``ok``: every op is in an NPU partition and the compiled file was written.

Every class is an answer: a row whose compile failed (also the Intel NPU compile the ``openvino``
wheel cannot do) is stored with row status ``ok``; only a compile process that crashed or hung
is ``failed`` (exit 3).

``all_ops_on_npu`` says where the ops went, in the words every output prints: True "all ops on the
NPU" (N = M), False "rest on the CPU (XNNPACK)" (``left_on_cpu`` names them), None when not known.
It is not the row's ``fully_accelerated``: that key keeps LiteRT's
``CompiledModel.is_fully_accelerated()``, which counts an op run by XNNPACK as accelerated, so it
reads True beside ops left on the CPU. ``drift_inputs``: how many inputs the host dispatch run's
drift against the CPU was computed over (host:npu rows only).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Mapping

from edgebench.rows.diagnosis import _META, _Keyed, _bool, _int, _real, _record, _str, _tuple_of

COMPILE_STATUSES = ("sdk-missing", "plugin-load", "ops-rejected", "compile-failed", "ok")
NOT_CHECKABLE = ("sdk-missing", "plugin-load")
ALL_ON_NPU = "all ops on the NPU"
REST_ON_CPU = "rest on the CPU (XNNPACK)"


@dataclass(frozen=True)
class LeftOnCpu(_Keyed):
    """One op the NPU compiler left to the CPU. ``why``: ``unmapped`` (the vendor has no such op)
    or ``rejected`` (its validator refused this instance: ``vendor_line`` says why)."""

    node: int | None = None
    op: str | None = None
    why: str | None = None
    plugin_line: str | None = None
    vendor_line: str | None = None
    keys: tuple[str, ...] | None = _META["keys"]
    unknown: Mapping[str, Any] = _META["unknown"]

    _KINDS: ClassVar[dict[str, Any]] = {"node": _int, "op": _str, "why": _str, "plugin_line": _str,
                                        "vendor_line": _str}


@dataclass(frozen=True)
class Readiness(_Keyed):
    """The readiness keys of one row (module docstring)."""

    vendor: str | None = None
    soc: str | None = None
    checkable: bool | None = None
    missing: str | None = None
    compile_status: str | None = None
    ops_on_npu: int | None = None
    ops_total: int | None = None
    partitions: int | None = None
    left_on_cpu: tuple[LeftOnCpu, ...] = ()
    compiled_path: str | None = None
    compiled_bytes: int | None = None
    compile_seconds: float | None = None
    sdk_version: str | None = None
    sdk: str | None = None
    backend: str | None = None              # Intel: the OpenVINO device the partitions target
    readiness_notes: tuple[str, ...] = ()
    all_ops_on_npu: bool | None = None      # N = M (module docstring; not LiteRT's fully_accelerated)
    drift_inputs: int | None = None         # host:npu rows: inputs the drift vs the CPU is over
    keys: tuple[str, ...] | None = _META["keys"]
    unknown: Mapping[str, Any] = _META["unknown"]

    _OPTIONAL: ClassVar[tuple[str, ...]] = ("drift_inputs",)
    _KINDS: ClassVar[dict[str, Any]] = {
        "vendor": _str, "soc": _str, "checkable": _bool, "missing": _str, "compile_status": _str,
        "ops_on_npu": _int, "ops_total": _int, "partitions": _int, "left_on_cpu": _tuple_of(_record(LeftOnCpu)),
        "compiled_path": _str, "compiled_bytes": _int, "compile_seconds": _real, "sdk_version": _str, "sdk": _str,
        "backend": _str, "readiness_notes": _tuple_of(_str), "all_ops_on_npu": _bool, "drift_inputs": _int,
    }
    KEYS: ClassVar[tuple[str, ...]] = tuple(_KINDS)

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> "Readiness | None":
        """The readiness part of a row in its JSON form; None for any other command's row."""
        if "compile_status" not in row:
            return None
        return cls.from_dict({k: v for k, v in row.items() if k in cls._KINDS})

    @property
    def ops_known(self) -> bool:
        """N/M may be shown: the target was checked and the plugin partitioned."""
        return bool(self.checkable) and self.ops_total is not None and self.ops_on_npu is not None

    @property
    def ops_pct(self) -> float | None:
        """Share of the model's ops in NPU partitions, 0-100 (None when not checked)."""
        if not self.ops_known or not self.ops_total:
            return None
        return 100.0 * self.ops_on_npu / self.ops_total

    @property
    def placement(self) -> str:
        """Where the ops went, in words: 'all ops on the NPU', 'rest on the CPU (XNNPACK): ELU'."""
        on = self.all_ops_on_npu if self.all_ops_on_npu is not None else (
            self.ops_on_npu == self.ops_total if self.ops_known else None)
        if on is None:
            return "-"
        if on:
            return ALL_ON_NPU
        named = [o.op for o in self.left_on_cpu if o.op]
        counts = {op: named.count(op) for op in dict.fromkeys(named)}
        ops = ", ".join(f"{op} x{n}" if n > 1 else op for op, n in counts.items())
        return REST_ON_CPU + (f": {ops}" if ops else "")

    @property
    def ops_text(self) -> str:
        """'19/21, 3 parts'; 'not checkable' for a target that was not checked (never 0/M)."""
        if not self.checkable:
            return "not checkable"
        if not self.ops_known:
            return "-"
        parts = f", {self.partitions} part{'s' * (self.partitions != 1)}" if self.partitions is not None else ""
        return f"{self.ops_on_npu}/{self.ops_total}{parts}"
