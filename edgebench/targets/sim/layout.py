"""What the simulated device's file system holds, written from its ``SimConfig``.

Both modes get the same facts: ``getprop`` properties, ``/proc/cpuinfo`` (ARM format) and
``/proc/meminfo``, ``/sys`` CPU frequencies, thermal zones and battery. Every file is written
through ``DeviceFS.put`` (replaced, never written through a link a device command left there).

* plain mode: ``/system/bin`` holds *copies* of a toybox-like set of host tools (a copy, so a
  push or a device command that overwrites ``/system/bin/cat`` changes the copy, never the
  host's ``cat``), a ``getprop`` script and, with ``has_python``, a ``python3`` wrapper for the
  host's interpreter;
* board mode (``edgebench.targets.sim.board``): the clone already has mksh, toybox and the board's
  python; this adds ``/system/build.prop``, the ``python3`` link, device nodes for
  ``/dev/null``, ``zero``, ``random``, ``urandom`` (no mounts) and ``/data/local/tmp`` owned
  by the shell user.
"""

from __future__ import annotations

import os
import shlex
import shutil
from typing import TYPE_CHECKING

from edgebench.targets.sim import board
from edgebench.targets.sim.devicefs import DeviceFS

if TYPE_CHECKING:
    from edgebench.targets.sim.config import SimConfig

# Host tools copied into SANDBOX/system/bin in plain mode (a toybox-like set; never python).
PLAIN_TOOLS = (
    "sh", "cat", "ls", "mkdir", "rm", "rmdir", "cp", "mv", "ln", "chmod", "touch", "echo",
    "printf", "test", "true", "false", "sleep", "timeout", "sha256sum", "md5sum", "head", "tail",
    "wc", "grep", "sed", "awk", "cut", "tr", "sort", "uniq", "find", "xargs", "df", "du", "stat",
    "id", "uname", "date", "env", "kill", "nproc", "dd", "sync", "basename", "dirname",
    "readlink", "realpath", "seq", "expr", "tee", "ps", "getconf", "mktemp", "which", "nice",
    "taskset", "od", "cmp",
)
_DEV_NODES = {"null": (1, 3), "zero": (1, 5), "random": (1, 8), "urandom": (1, 9)}


def write_plain(fs: DeviceFS, c: "SimConfig") -> None:
    """The plain sandbox's /system/bin: tool copies, getprop, the python3 wrapper."""
    for d in ("/data/local/tmp", "/sdcard", "/system/bin", "/.sim"):
        fs.makedirs(d)
    for tool in PLAIN_TOOLS:
        src = shutil.which(tool, path="/usr/bin:/bin:/usr/sbin:/sbin")
        dest = f"/system/bin/{tool}"
        if src:
            try:
                fs.lstat(dest)
                continue
            except OSError:
                pass
            with open(src, "rb") as fh:
                fs.put(dest, fh.read(), mode=0o755)
    prop_file = shlex.quote(fs.host_path("/.sim/build.prop"))
    fs.put("/.sim/build.prop", _props_text(c))
    fs.put("/system/bin/getprop", f"""#!/bin/sh
# getprop for the simulated device: reads {prop_file}
if [ $# -eq 0 ]; then
  while IFS='=' read -r k v; do printf '[%s]: [%s]\\n' "$k" "$v"; done < {prop_file}
  exit 0
fi
while IFS='=' read -r k v; do
  if [ "$k" = "$1" ]; then printf '%s\\n' "$v"; exit 0; fi
done < {prop_file}
printf '%s\\n' "${{2:-}}"
""", mode=0o755)
    _python(fs, c.has_python, f"#!/bin/sh\nexec {shlex.quote(c.python)} \"$@\"\n")


def write_board(fs: DeviceFS, c: "SimConfig") -> None:
    """The board clone's per-device files."""
    fs.makedirs("/data/local/tmp", owner=board.SHELL_UID, mode=0o771)
    fs.makedirs("/sdcard", owner=board.SHELL_UID, mode=0o770)
    fs.makedirs("/.sim", owner=board.SHELL_UID, mode=0o770)    # dumpsys (run as shell) sets flags here
    fs.makedirs("/dev")
    for name, dev in _DEV_NODES.items():
        fs.special(f"/dev/{name}", chardev=dev)
    fs.put("/system/build.prop", _props_text(c))
    _python(fs, c.has_python, None)


def _python(fs: DeviceFS, wanted: bool, wrapper: str | None) -> None:
    if wanted:
        if wrapper is None:
            fs.special("/system/bin/python3", link=f"../../usr/bin/python{board.BOARD_PYTHON}")
        else:
            fs.put("/system/bin/python3", wrapper, mode=0o755)
        return
    fs.remove("/system/bin/python3")


def _props_text(c: "SimConfig") -> str:
    return "".join(f"{k}={v}\n" for k, v in c.props().items())


def write_system(fs: DeviceFS, c: "SimConfig") -> None:
    """/proc and /sys from the config (both modes)."""
    ncpu = len(c.cpu_max_khz)
    fs.put("/proc/cpuinfo", board.cpuinfo(ncpu, c.qemu_cpu, f"{c.soc_manufacturer} {c.soc_model}"))
    fs.put("/proc/meminfo", f"MemTotal:       {c.mem_total_kb} kB\nMemFree:        {c.mem_total_kb // 4} kB\n"
                            f"MemAvailable:   {c.mem_total_kb // 2} kB\n")
    cpu_root = "/sys/devices/system/cpu"
    for f in ("possible", "present", "online"):
        fs.put(f"{cpu_root}/{f}", f"0-{ncpu - 1}\n")
    for i, khz in enumerate(c.cpu_max_khz):
        f = f"{cpu_root}/cpu{i}/cpufreq"
        fs.put(f"{f}/cpuinfo_max_freq", f"{khz}\n")
        fs.put(f"{f}/cpuinfo_min_freq", f"{min(khz, 300000)}\n")
        fs.put(f"{f}/scaling_max_freq", f"{khz}\n")
        fs.put(f"{f}/scaling_cur_freq", f"{khz}\n")
        fs.put(f"{f}/scaling_governor", f"{c.governor}\n")
    # thermal zones (millidegrees C) and battery (tenths of a degree)
    th = fs.host_path("/sys/class/thermal")
    if os.path.isdir(th) and not os.path.islink(th):
        shutil.rmtree(th)
    for i, (zone, temp) in enumerate(c.thermal_zones.items()):
        fs.put(f"/sys/class/thermal/thermal_zone{i}/type", f"{zone}\n")
        fs.put(f"/sys/class/thermal/thermal_zone{i}/temp", f"{int(round(temp * 1000))}\n")
    bat = "/sys/class/power_supply/battery"
    fs.put(f"{bat}/capacity", f"{c.battery_level}\n")
    fs.put(f"{bat}/temp", f"{int(round(c.battery_temp_c * 10))}\n")
    fs.put(f"{bat}/status", f"{c.battery_status}\n")


def set_temperature(fs: DeviceFS, zone: str, celsius: float) -> None:
    for name, _ in fs.listdir("/sys/class/thermal"):
        if name.startswith("thermal_zone") and fs.read_text(f"/sys/class/thermal/{name}/type").strip() == zone:
            fs.put(f"/sys/class/thermal/{name}/temp", f"{int(round(celsius * 1000))}\n")
            return
    raise KeyError(zone)


def set_cur_freq(fs: DeviceFS, cpu: int, khz: int) -> None:
    fs.put(f"/sys/devices/system/cpu/cpu{cpu}/cpufreq/scaling_cur_freq", f"{khz}\n")
