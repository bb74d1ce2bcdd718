"""What a simulated device looks like (``SimConfig``) and how a config file becomes one."""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from edgebench.targets.sim import board as _board


# What Android's emulator reports about itself (ro.kernel.qemu up to Android 11, ro.boot.qemu
# from Android 12); the simulator reports the same, because it is no more a real phone than it.
EMULATOR_PROPS = {"ro.kernel.qemu": "1", "ro.boot.qemu": "1"}


@dataclass
class SimConfig:
    """What the simulated device looks like. Every field can be changed while it runs."""

    model: str = "Pixel 8"
    name: str = "shiba"                      # ro.product.name
    device: str = "shiba"                    # ro.product.device
    board: str = "zuma"                      # ro.product.board
    hardware: str = "zuma"                   # ro.hardware
    soc_manufacturer: str = "Google"
    soc_model: str = "Tensor G3"
    manufacturer: str = "Google"
    abi: str = "arm64-v8a"
    release: str = "14"
    sdk: int = 34
    serialno: str = "SIM00001"
    # per-core max frequency (kHz): Tensor G3's 4 little + 4 mid + 1 big
    cpu_max_khz: tuple[int, ...] = (1704000,) * 4 + (2367000,) * 4 + (2913000,)
    governor: str = "schedutil"
    mem_total_kb: int = 8 * 1024 * 1024
    thermal_zones: dict[str, float] = field(default_factory=lambda: {"cpu-big": 38.0, "battery": 30.0})
    battery_level: int = 80
    battery_temp_c: float = 29.5
    battery_status: str = "Discharging"     # with battery={"enabled": False}; else the battery model decides
    has_python: bool = False                 # python3 + a TFLite runtime (the host's venv)
    python: str = sys.executable
    storage_free_bytes: int | None = None    # None: unlimited; pushes past this fail ENOSPC
    auth: str = "ok"                         # "ok" | "unauthorized" | "offline"
    die_on: str | None = None                # regex: the daemon dies when a shell command matches
    thermal_script: dict[str, list[float]] = field(default_factory=dict)  # zone -> next temps
    freq_script: dict[int, list[int]] = field(default_factory=dict)       # cpu -> next cur kHz
    # power (edgebench.targets.sim.power): battery whose current follows the load; dumpsys battery/thermalservice
    battery: dict[str, Any] = field(default_factory=dict)                 # BatteryConfig keys
    thermal_status: int = 0                                               # dumpsys thermalservice
    thermal_status_script: list[int] = field(default_factory=list)        # next statuses, one per command
    extra_props: dict[str, str] = field(default_factory=dict)
    # Say what it is, as Android's emulator does (ro.kernel.qemu=1, ro.boot.qemu=1): edgebench (and
    # any tool that reads those properties) then labels the device and its results "emulated" and
    # never calls its modelled battery energy valid. False makes it pass as a real phone; only tests
    # of the real-phone path should turn it off.
    advertise_emulator: bool = True
    features: str | None = None              # adb features the banner announces (None: adbd.FEATURES); drop shell_v2 to test v1
    # Board mode: a built arm64 root filesystem (python -m edgebench.targets.sim.board build); the sandbox
    # becomes a clone of it and shell commands run inside it, emulated as this qemu CPU model.
    rootfs: str | None = None
    qemu_cpu: str = _board.DEFAULT_QEMU_CPU

    @classmethod
    def for_board(cls, rootfs: str | os.PathLike, **overrides: Any) -> "SimConfig":
        """A board-flavoured config: an arm64 device whose facts name the emulated CPU."""
        cpu = overrides.get("qemu_cpu", _board.DEFAULT_QEMU_CPU)
        base: dict[str, Any] = dict(
            model=f"arm64 board (qemu {cpu})", name="edgebench_board", device="board", board="qemu",
            hardware=f"qemu-{cpu}", soc_manufacturer="QEMU", soc_model=f"{cpu} (emulated)",
            manufacturer="edgebench", serialno="BOARD0001", cpu_max_khz=(2000000,) * 4, has_python=True,
            thermal_zones={"cpu-big": 38.0, "battery": 30.0}, rootfs=str(rootfs), qemu_cpu=cpu)
        base.update(overrides)
        return cls(**base)

    def props(self) -> dict[str, str]:
        p = {
            "ro.product.model": self.model,
            "ro.product.name": self.name,
            "ro.product.device": self.device,
            "ro.product.board": self.board,
            "ro.product.manufacturer": self.manufacturer,
            "ro.hardware": self.hardware,
            "ro.board.platform": self.board,
            "ro.soc.manufacturer": self.soc_manufacturer,
            "ro.soc.model": self.soc_model,
            "ro.product.cpu.abi": self.abi,
            "ro.product.cpu.abilist": self.abi + (",armeabi-v7a,armeabi" if self.abi == "arm64-v8a" else ""),
            "ro.build.version.release": self.release,
            "ro.build.version.sdk": str(self.sdk),
            "ro.serialno": self.serialno,
            "ro.build.fingerprint": f"{self.manufacturer.lower()}/{self.name}/{self.device}:{self.release}/SIM/1:user/release-keys",
            "ro.build.type": "user",
            "ro.debuggable": "1" if self.battery.get("debuggable") else "0",
        }
        if self.advertise_emulator:
            p.update(EMULATOR_PROPS)
        p.update(self.extra_props)
        return p


def load_config(path: str | None, rootfs: str | None = None, **overrides: Any) -> SimConfig:
    """A SimConfig from a JSON file (keys = SimConfig fields) plus command-line overrides;
    with ROOTFS, board-flavoured defaults (``SimConfig.for_board``) under them."""
    data: dict[str, Any] = {}
    if path:
        data = json.loads(Path(path).read_text())
        known = {f.name for f in fields(SimConfig)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise SystemExit(f"{path}: unknown simulated-device keys {unknown}; known: {sorted(known)}")
    data.update({k: v for k, v in overrides.items() if v is not None})
    if "cpu_max_khz" in data:
        data["cpu_max_khz"] = tuple(int(x) for x in data["cpu_max_khz"])
    rootfs = rootfs or data.pop("rootfs", None)
    return SimConfig.for_board(rootfs, **data) if rootfs else SimConfig(**data)
