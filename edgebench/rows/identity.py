"""What a result row is, apart from its numbers: the headline columns every output and the store
share (who/what/where: model, precision, target ...; then every registry metric), and the
configuration identity -- the fields two rows must share to be points of one history line, one
``results compare`` pair without a "configuration differs" note, or one Prometheus series."""

from __future__ import annotations

import json
import re
from typing import Any

from edgebench.rows.metrics import REGISTRY
from edgebench.rows import InferenceRow, Row, TrainRow, row_from_dict

# The row's own identity columns of a headline, with their stored types ("str<N>", "int", "bool");
# the registry's metrics (and their validity flags) follow them.
IDENTITY_COLUMNS: tuple[tuple[str, str], ...] = (
    ("model", "str512"), ("model_sha256", "str64"), ("precision", "str32"), ("target", "str128"),
    ("device_model", "str256"), ("status", "str16"), ("batch_size", "int"))


def headline_columns() -> tuple[tuple[str, str], ...]:
    """Every headline column in display order with its stored type: identity, then each registry
    metric followed by its validity flag when it has one."""
    out = list(IDENTITY_COLUMNS)
    for m in REGISTRY:
        out.append((m.key, m.column))
        if m.valid_flag:
            out.append((m.valid_flag, "bool"))
    return tuple(out)


HEADLINE: tuple[str, ...] = tuple(name for name, _ in headline_columns())


def headline(row: "Row | dict[str, Any]", *, kind: str | None = None) -> dict[str, Any]:
    """The headline columns of one result row (None where the row lacks the value), read through
    the typed rows (``edgebench.rows``) and the metric registry: one name per quantity."""
    r = row if isinstance(row, (InferenceRow, TrainRow)) else row_from_dict(row, kind=kind)
    out: dict[str, Any] = {k: None for k in HEADLINE}
    out.update(model=None if r.model is None else str(r.model), precision=r.precision, target=r.target,
               status=r.status, batch_size=r.batch_size if isinstance(r, TrainRow) else None)
    if isinstance(r, TrainRow):
        out["device_model"] = r.fingerprint.get("device_model")
    else:
        out.update(model_sha256=r.model_sha256, device_model=r.device_model or r.fingerprint.get("device_model"))
    for m in REGISTRY:
        out[m.key] = m.value(r)
        if m.valid_flag:
            out[m.valid_flag] = m.valid(r)
    return out


# Fields that change a measured number: two rows that differ in any of them are never points of
# one history series (``series_key``). The runtime counts by name (ai_edge_litert, tflite_runtime,
# benchmark_model, tensorflow ...); its version does not split a series, because a version upgrade
# is exactly the kind of change a history exists to show (the fingerprint records it).
# This is the configuration identity (docs/gate.md, "Configuration identity"): history lines, ``results
# compare`` (a pair whose keys differ says so), the HTML charts and Pareto fronts, and Prometheus
# labels all use it. ``model_sha256`` makes int8 with ``keep_float`` tensors (another file) and a
# retrained model other configurations than the plain int8 of the same name. An LLM's numbers also
# depend on its shape (prefill, decode tokens) and on the context the engine allocates (LiteRT-LM#2568:
# 4x decode speed between contexts), so those are identity too; so is the LLM engine's release
# (``llm.engine_version``: LiteRT-LM 0.14.0 took twice the memory of 0.13.1, LiteRT-LM#2966), so
# ``results compare`` of runs across an engine upgrade names the upgrade as a configuration difference.
SERIES_FIELDS = ("model_sha256", "precision", "keep_float", "target", "device_model", "batch_size", "size",
                 "threads", "delegate", "runtime", "runtime_api", "accelerator", "gpu_precision", "method",
                 "input_source", "period_ms", "sustained", "strategy", "xla", "input_pipeline", "workers",
                 "prefill_tokens", "decode_tokens", "context_tokens", "activation", "weight_cache",
                 "engine_version", "speculative", "memory_phases")


def _row_field(row: dict[str, Any], name: str) -> Any:
    """A row's value of ``name``: the row itself, else its ``extra``, its LLM part (``llm-bench``: the
    shape, the context the engine enforced, activation type, weight cache), else its fingerprint."""
    for src in (row, row.get("extra"), row.get("llm"), row.get("fingerprint")):
        if isinstance(src, dict) and src.get(name) is not None:
            return src[name]
    return None


def series_key(row: dict[str, Any]) -> dict[str, Any]:
    """The configuration of a result row that its numbers depend on (see ``SERIES_FIELDS``).

    ``threads`` is the effective thread count where the row records it; ``method`` has its
    numbers blanked (a sample count in a method string does not change what is measured).
    """
    key: dict[str, Any] = {}
    if not isinstance(row, dict):
        return {name: None for name in SERIES_FIELDS}
    for name in SERIES_FIELDS:
        v = _row_field(row, "threads_effective") if name == "threads" else None
        if name == "sustained":      # a --duration run (timeline) measures a hot, long-running device
            v = bool(row.get("timeline"))
        elif v is None:
            v = _row_field(row, name)
        if name == "runtime" and isinstance(v, str):
            v = v.split()[0] if v.split() else v
        if name == "method" and isinstance(v, str):
            v = re.sub(r"\d+(\.\d+)?", "N", v)
        if isinstance(v, (dict, list)):
            v = json.dumps(v, sort_keys=True)
        key[name] = v
    return key


def series_label(key: dict[str, Any], *, skip: tuple[str, ...] = ("precision", "target")) -> str:
    """The identity fields that are set, as a short label: ``sha256 3f2a9c1b, delegate none,
    threads 2`` (``skip``: fields the caller names already)."""
    parts = []
    for name in SERIES_FIELDS:
        v = key.get(name)
        if name in skip or v in (None, False, "[]"):
            continue
        if name == "model_sha256":
            parts.append(f"sha256 {str(v)[:8]}")
        elif name == "keep_float":
            parts.append(f"+{len(json.loads(v))} float")
        elif name == "method":
            continue            # long text; the row says it
        else:
            parts.append(f"{name.replace('_', ' ')} {v}" if v is not True else name)
    return ", ".join(parts)
