"""The profile fields of a row (delegation, op profile, accelerator) from a run's facts, and their warnings."""

from __future__ import annotations

from typing import Any, Mapping

from edgebench.rows import OpEntry
from edgebench.targets.delegation import delegation_from_worker, delegation_warning
from edgebench.targets.op_profile import coverage, op_profile_from_worker


def runtime_row_parts(extra: Mapping[str, Any], latency: Any, where: str) -> tuple[dict[str, Any], list[str]]:
    """The issue-15 fields of a row from a run's facts (``RunResult.extra``), and its warnings.

    Host and device runners report ``delegation`` and ``op_profile_raw``/``op_profile_error``;
    the benchmark_model runner reports ready ``op_profile`` entries parsed from its log."""
    parts: dict[str, Any] = {
        "runtime_api": extra.get("runtime_api"), "accelerator": extra.get("accelerator"),
        "fully_accelerated": extra.get("fully_accelerated"), "gpu_precision": extra.get("gpu_precision"),
        "delegation": delegation_from_worker(extra.get("delegation")),
    }
    warnings: list[str] = []
    raw = extra.get("op_profile_raw")
    ready = extra.get("op_profile")
    if isinstance(raw, Mapping):
        entries, info = op_profile_from_worker(raw, latency)
        parts["op_profile"], parts["op_profile_info"] = entries, info
    elif isinstance(ready, Mapping) and ready.get("entries") is not None:
        entries = tuple(OpEntry.from_dict(e) for e in ready["entries"])
        info = dict(ready.get("info") or {})
        info.update(coverage(sum(e.ms or 0.0 for e in entries), sum(e.ms or 0.0 for e in entries), latency))
        parts["op_profile"], parts["op_profile_info"] = entries, info
    elif extra.get("op_profile_error"):
        parts["op_profile_info"] = {"error": extra["op_profile_error"]}
        warnings.append(f"no op profile: {extra['op_profile_error']}")
    w = delegation_warning(parts["delegation"])        # the row's own warning: renderers name the row
    if w:
        warnings.append(w)
    if extra.get("gpu_adapter") and "software" in str(extra["gpu_adapter"]).lower():
        warnings.append(f"the GPU is a software Vulkan driver ({extra['gpu_adapter']}): its outputs check "
                        "correctness; its timing is 'software GPU', not a GPU's speed")
    return parts, warnings
