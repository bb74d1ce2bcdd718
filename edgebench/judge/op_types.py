"""Comparing two op profiles: speed-up per op type with its interval, QUANTIZE's cost, and which rows pair."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from edgebench.rows import InferenceRow, OpEntry
from edgebench.targets.op_profile import RESOLUTION_MS, by_op_type

# A per-op-type speed-up whose 95 % interval spans more than this factor (hi / lo) is "unstable": the
# op's time moved between the profiled runs (stalls, frequency) more than the ratio can carry.
OP_UNSTABLE_SPAN = 1.25


def speedup_by_op_type(base: Sequence[OpEntry], other: Sequence[OpEntry], base_info: Mapping[str, Any] | None = None,
                       other_info: Mapping[str, Any] | None = None, *, base_flops: Mapping[int, int] | None = None,
                       other_flops: Mapping[int, int] | None = None) -> list[dict[str, Any]]:
    """Per op type (``by_op_type``: the model's op types): base ms, other ms and base/other (> 1: the
    other precision is faster).

    From medians where both profiles carry that op type's median over the profiled runs
    (``op_profile_info["op_types"]``: ``op_type_medians``, keyed like ``by_op_type``): the ratio of the
    medians (a stall in a few runs moves a mean, not a median), with ``ci`` -- its interval from the
    two medians' intervals ([lo_a / hi_b, hi_a / lo_b]) -- and ``unstable`` when that spans more than
    OP_UNSTABLE_SPAN or a median cannot be bounded at all; ``basis`` "medians". Else (benchmark_model's
    table, older rows, an op type whose delegated time was split by FLOPs) from the per-entry means,
    ``basis`` "means". A side under the profiler's resolution (< 1 us per inference: mostly 0-us
    events) has no honest ratio: ``speedup`` is None and ``below_resolution`` True."""
    a, b = by_op_type(base, base_flops), by_op_type(other, other_flops)
    ta = (base_info or {}).get("op_types") or {}
    tb = (other_info or {}).get("op_types") or {}
    rows = []
    for fam in sorted(set(a) | set(b), key=lambda f: (-max(a.get(f, {}).get("ms", 0.0), b.get(f, {}).get("ms", 0.0)), f)):
        ci, unstable = None, False
        medians = fam in ta and fam in tb
        if medians:
            xa, xb = ta.get(fam) or {}, tb.get(fam) or {}
            ma, mb = xa.get("p50_ms"), xb.get("p50_ms")
            (la, ha), (lb, hb) = (xa.get("ci_ms") or (None, None)), (xb.get("ci_ms") or (None, None))
            if None not in (la, ha, lb, hb) and lb > 0 and hb > 0:
                ci = (la / hb, ha / lb)
                unstable = ci[0] <= 0 or ci[1] / ci[0] > OP_UNSTABLE_SPAN
            else:     # a median the runs cannot bound (its time moved during the profile) is unstable too
                unstable = True
        else:
            ma, mb = a.get(fam, {}).get("ms"), b.get(fam, {}).get("ms")
        tiny = any(m is not None and m < RESOLUTION_MS for m in (ma, mb))
        ok = bool(ma and mb and not tiny)
        rows.append({"op_type": fam, "base_ms": ma, "other_ms": mb,
                     "speedup": (ma / mb) if ok else None, "below_resolution": tiny,
                     "ci": ci if ok else None, "unstable": unstable if ok else False,
                     "basis": "medians" if medians else "means",
                     "other_on_cpu_ms": b.get(fam, {}).get("cpu_ms")})
    return rows


def quantize_cost(entries: Sequence[OpEntry]) -> dict[str, Any]:
    """What QUANTIZE/DEQUANTIZE (XNNPACK: Convert) cost per inference, and their share."""
    types = by_op_type(entries)
    total = sum(e.ms or 0.0 for e in entries)
    ms = types["Convert"]["ms"] if "Convert" in types else 0.0
    return {"ms": ms, "share": ms / total if total > 0 else None}


def profile_pairs(rows: Sequence[InferenceRow]) -> list[tuple[InferenceRow, InferenceRow]]:
    """(fp32 row, quantized row) pairs on the same target that both carry a profile; rows
    without a precision (bench) pair the first profiled model with each later one."""
    by_target: dict[str, list[InferenceRow]] = {}
    for r in rows:
        if r.ok and r.op_profile:
            by_target.setdefault(str(r.target), []).append(r)
    pairs = []
    for group in by_target.values():
        precs = {r.precision: r for r in group if r.precision}
        base = precs.get("fp32")
        if base is not None:
            pairs.extend((base, precs[p]) for p in ("int8", "fp16", "dynamic") if p in precs)
        elif not precs and len(group) > 1:
            pairs.extend((group[0], r) for r in group[1:])
    return pairs
