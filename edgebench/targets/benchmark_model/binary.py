"""The benchmark_model binary itself: where to get it, which file it is (ELF machine vs the
device's ABIs), and what a failed invocation means (``classify_failure``)."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from edgebench.core.errors import BadInput, EdgebenchError, InfraError
from edgebench.targets.benchmark_model.parse import parse_log

# --------------------------------------------------------------------------- where to get it

ENV_VAR = "EDGEBENCH_BENCHMARK_MODEL"
MEASUREMENT_DOCS_URL = "https://ai.google.dev/edge/litert/models/measurement"
NIGHTLY_ANDROID_AARCH64_URL = (
    "https://storage.googleapis.com/tensorflow-nightly-public/prod/tensorflow/release/"
    "lite/tools/nightly/latest/android_aarch64_benchmark_model"
)

_WHERE = (
    f"download Google's prebuilt android_aarch64_benchmark_model (nightly: {NIGHTLY_ANDROID_AARCH64_URL}; "
    f"listed on the LiteRT/TFLite performance measurement page {MEASUREMENT_DOCS_URL}) and pass it "
    f"with --benchmark-binary PATH, the environment variable {ENV_VAR}=PATH, or "
    "'benchmark_binary: PATH' in the config file"
)

# --------------------------------------------------------------------------- the binary


@dataclass(frozen=True)
class BinaryInfo:
    path: Path
    kind: str            # "elf" | "script"
    machine: str | None  # "aarch64", "arm", "x86_64", "x86", "riscv64" or None


_ELF_MACHINES = {0xB7: "aarch64", 0x28: "arm", 0x3E: "x86_64", 0x03: "x86", 0xF3: "riscv64"}
_ABI_MACHINES = {"arm64-v8a": "aarch64", "armeabi-v7a": "arm", "armeabi": "arm", "x86_64": "x86_64",
                 "x86": "x86", "riscv64": "riscv64", "aarch64": "aarch64"}


def resolve_binary(cli_value: str | None = None, config_value: str | None = None) -> BinaryInfo:
    """The host path of benchmark_model: --benchmark-binary, else $EDGEBENCH_BENCHMARK_MODEL, else config."""
    value = cli_value or os.environ.get(ENV_VAR) or config_value
    if not value:
        raise BadInput(f"no benchmark_model binary given; {_WHERE}")
    p = Path(value).expanduser()
    if not p.is_file():
        raise BadInput(f"benchmark_model binary {p} does not exist; {_WHERE}")
    head = p.read_bytes()[:20]
    if head[:4] == b"\x7fELF":
        little = head[5] == 1
        machine = int.from_bytes(head[18:20], "little" if little else "big")
        return BinaryInfo(p, "elf", _ELF_MACHINES.get(machine, f"elf-machine-0x{machine:x}"))
    if head[:2] == b"#!":
        return BinaryInfo(p, "script", None)
    raise BadInput(f"{p} is not an executable (no ELF header, no #! line); {_WHERE}")


def check_abi(info: BinaryInfo, device_abis: Sequence[str], serial: str = "device") -> None:
    """Refuse before pushing when the binary's ELF machine is not among the device's ABIs."""
    if info.kind != "elf" or info.machine is None:
        return
    machines = {_ABI_MACHINES.get(a.strip(), a.strip()) for a in device_abis if a.strip()}
    if machines and info.machine not in machines:
        raise BadInput(f"{info.path} is a {info.machine} binary but {serial} runs {', '.join(device_abis)}; "
                       f"use the matching build (android_aarch64_benchmark_model for arm64-v8a); {_WHERE}")


_NOT_FOUND = re.compile(r"(not found|No such file or directory|inaccessible or not found)", re.I)
# What shells and loaders print for a binary of another architecture: the kernel (Exec format
# error), Android's mksh/toybox, bash, dash, and qemu-user when binfmt_misc hands a foreign ELF
# to an emulator that then cannot load it ("Invalid ELF image for this architecture").
_EXEC_FORMAT = re.compile(r"(Exec format error|not executable: (?:32|64)-bit ELF|cannot execute binary file|"
                          r"syntax error: .*unexpected|ELF: not found|Invalid ELF image for this architecture)",
                          re.I)
_PERMISSION = re.compile(r"Permission denied", re.I)


def classify_failure(output: str, rc: int | None, *, binary: str = "benchmark_model",
                     where: str = "device") -> EdgebenchError:
    """The error for a failed invocation, from its output and exit code (never raises itself)."""
    tail = " ".join(output.strip().splitlines()[-3:])[-300:]
    if rc is None:
        return InfraError(f"{binary} on {where} returned no exit status (connection lost or killed); "
                          "rerun, and check the USB/network link")
    if _EXEC_FORMAT.search(output) or rc == 126 and not _PERMISSION.search(output):
        return InfraError(f"{binary} cannot run on {where}: wrong ABI/architecture (exec format error); "
                          f"push the build for the device's ABI (getprop ro.product.cpu.abi), e.g. "
                          f"android_aarch64_benchmark_model for arm64-v8a; output: {tail}")
    if _PERMISSION.search(output):
        return InfraError(f"{binary} on {where} is not executable (permission denied); chmod 755 it "
                          f"after pushing and keep it under /data/local/tmp; output: {tail}")
    if rc == 127 or (_NOT_FOUND.search(output) and not parse_log(output).is_benchmark_model):
        return InfraError(f"{binary} is missing on {where} (exit {rc}); push it first; {_WHERE}")
    if "NPU accelerator could not be loaded" in output:
        return BadInput(f"accelerator 'npu' is not available on {where}: LiteRT found no NPU dispatch library "
                        "for its SoC; available there: cpu (and gpu with --accelerator gpu); push the vendor's "
                        "dispatch library or run --accelerator cpu")
    log = parse_log(output)
    reason = log.errors[0] if log.errors else (tail or "no output")
    if rc in (-9, 137):
        reason = f"killed (exit {rc}: deadline or out of memory); {reason}"
    return InfraError(f"{binary} failed on {where} (exit {rc}): {reason}")
