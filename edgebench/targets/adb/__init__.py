"""Target "adb:SERIAL": phones and boards over adb (on adbutils), plus ``edgebench devices``.

Contract:

* Every string that reaches a device shell is built by ``RemoteCommand`` (``remote.py``, one
  place) and every argument in it is ``shlex.quote``d: a file name with spaces, quotes or ``;``
  reaches the device intact and is never interpreted.
* Every remote command runs under a device-side deadline (toybox/coreutils ``timeout``):
  adbutils' own timeout is an idle timeout, not a deadline. A command succeeded only when its
  exit code came back (shell v2) AND the files it must write are there: a dropped connection
  can look like a clean, partial output.
* Files go into ``/data/local/tmp/edgebench/``: models, inputs and the runner are cached by
  name in ``files/`` and pushed again only when their remote sha256 differs; job and results
  live in a per-run folder ``run-<id>/`` that is removed afterwards.
* Thermal: zones and CPU frequencies are sampled before, during and after each run; before it,
  the device cools down until its hottest zone is below a threshold (with a timeout), never a
  fixed sleep. A run is flagged ``throttled`` when a CPU frequency cap drops, the peak CPU
  frequency falls, or latency trends upward. All of it is in ``RunResult.extra["thermal"]``.
* Runner: the edgebench runner (``runner.py``) when the device has ``python3`` with a TFLite
  runtime; otherwise Google's ``benchmark_model`` binary (``edgebench.targets.benchmark_model``).

Modules, one idea each: ``client`` (adb server, device states), ``facts`` (pure parsers of
device output), ``remote`` (``RemoteCommand``, the one shell-string builder, and ``AdbDevice``:
deadlines, push, pull), ``thermal`` (cool-down, sampling, throttle verdict), ``runners``
(``AdbTarget``: edgebench runner and benchmark_model paths), ``lanes`` (parallel device lanes),
``devices`` (resolving ``--targets adb...``, ``edgebench devices``). The names below are
re-exported for users and tests; code inside edgebench imports from the submodule.
"""

from edgebench.targets.adb.client import DEFAULT_SERVER_PORT, list_states
from edgebench.targets.adb.devices import SIM_HINT, device_info, list_devices, resolve_adb_targets
from edgebench.targets.adb.facts import parse_cpufreq, parse_probe, parse_thermal
from edgebench.targets.adb.lanes import LaneOutcome, run_lanes
from edgebench.targets.adb.remote import (
    HOST_MARGIN_S,
    KILL_GRACE_S,
    MAX_COMMAND_BYTES,
    REMOTE_FILES,
    REMOTE_ROOT,
    SHORT_DEADLINE_S,
    AdbDevice,
    RemoteCommand,
    ShellResult,
)
from edgebench.targets.adb.runners import DEVICE_DELEGATES, RUNNER_PATH, AdbTarget
from edgebench.targets.adb.thermal import ThermalPolicy, detect_throttle, hottest_c

__all__ = [
    "DEFAULT_SERVER_PORT", "DEVICE_DELEGATES", "HOST_MARGIN_S", "KILL_GRACE_S", "MAX_COMMAND_BYTES",
    "REMOTE_FILES", "REMOTE_ROOT", "RUNNER_PATH", "SHORT_DEADLINE_S", "SIM_HINT",
    "AdbDevice", "AdbTarget", "LaneOutcome", "RemoteCommand", "ShellResult", "ThermalPolicy",
    "detect_throttle", "device_info", "hottest_c", "list_devices", "list_states", "parse_cpufreq",
    "parse_probe", "parse_thermal", "resolve_adb_targets", "run_lanes",
]
