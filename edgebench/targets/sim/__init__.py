"""A simulated Android device for tests and for trying edgebench without a phone.

``edgebench.targets.sim.adbd.SimDevice`` speaks the adb transport protocol over TCP, so the real
``adb`` server connects to it with ``adb connect 127.0.0.1:PORT``. Plain mode runs shell
commands on the host in a sandbox folder (not confined); board mode (``edgebench.targets.sim.board``) runs them chrooted as uid 2000 in an
emulated arm64 userland. See ``docs/devices.md``.
Run it with ``python -m edgebench.targets.sim.adbd --port P --sandbox DIR --model "Pixel 8"``.
"""

from __future__ import annotations

from typing import Any

from edgebench.targets.sim import adbd

__all__ = ["SimConfig", "SimDevice"]


def __getattr__(name: str) -> Any:
    # Lazy, so that ``python -m edgebench.targets.sim.adbd`` does not import the module twice.
    if name in __all__:

        return getattr(adbd, name)
    raise AttributeError(name)
