"""``host`` or ``adb:SERIAL`` -> the ``LmRunner`` that measures there (``runners.HostLmRunner``,
``device.DeviceLmRunner``)."""

from __future__ import annotations

from edgebench.core.errors import BadInput
from edgebench.targets.litert_lm.device import DeviceLmRunner
from edgebench.targets.litert_lm.runners import HostLmRunner, LmRunner


def resolve_runner(target: str, binary: str | None = None, *, deadline_s: float | None = None) -> LmRunner:
    """``host`` or ``adb:SERIAL`` -> its runner (a missing extra or binary is BadInput before anything runs)."""
    t = (target or "host").strip()
    if t == "host":
        return HostLmRunner(deadline_s)
    if t.startswith("adb:") and len(t) > 4 and "," not in t and t != "adb:all":
        return DeviceLmRunner(t[4:], binary, deadline_s=deadline_s)
    raise BadInput(f"--target {target!r}: llm-bench runs on one target, host or adb:SERIAL")
