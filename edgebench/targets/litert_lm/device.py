"""LiteRT-LM on a phone or board over adb: the user's LiteRT-LM benchmark binary
(``litert_lm_advanced_main`` / ``litert_lm_main`` from a LiteRT-LM release, for the device's ABI),
pushed once with the bundle (both cached on the device by content, ``files/<sha256><suffix>``), run
once per repeat with ``--benchmark`` and exactly the asked prefill/decode token counts, its output
parsed by ``log.parse_lm_log`` into the same ``ProcessRun`` a host worker gives. Every device shell
string is built by ``adb.remote.RemoteCommand`` (quoted there), under a device-side deadline.

Warm-up on a device is ``--warmup`` whole invocations before the first repeat (a process does one
generation); the row says so. Peak memory is the binary's own ``--report_peak_memory_footprint``.
Greedy token agreement is a host measurement (``llm_compare``).
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Any

from edgebench.core.errors import BadInput, EdgebenchError, InfraError
from edgebench.core.fingerprint import sha256_file
from edgebench.targets.adb.remote import REMOTE_FILES, REMOTE_ROOT, RemoteCommand, content_name
from edgebench.targets.adb.runners import AdbTarget
from edgebench.targets.benchmark_model.binary import _ELF_MACHINES, BinaryInfo, check_abi
from edgebench.targets.litert_lm.host import DEFAULT_DEADLINE_S, LmJob
from edgebench.targets.litert_lm.log import parse_lm_log
from edgebench.targets.litert_lm.runners import ProcessRun

ENV_VAR = "EDGEBENCH_LITERT_LM_BINARY"
RELEASES_URL = "https://github.com/google-ai-edge/LiteRT-LM/releases"
_WHERE = (f"build or download LiteRT-LM's benchmark binary for the device's ABI (litert_lm_advanced_main, or "
          f"litert_lm_main; {RELEASES_URL}) and pass it with --llm-binary PATH or {ENV_VAR}=PATH")
_FLAG_ACTIVATION = {"fp32": "--force_f32=true"}   # the binaries' only activation switch


def resolve_lm_binary(value: str | None) -> BinaryInfo:
    """The host path of the LiteRT-LM binary (--llm-binary, else $EDGEBENCH_LITERT_LM_BINARY)."""
    value = value or os.environ.get(ENV_VAR)
    if not value:
        raise BadInput(f"llm-bench on an adb device needs LiteRT-LM's benchmark binary; {_WHERE}")
    p = Path(value).expanduser()
    if not p.is_file():
        raise BadInput(f"LiteRT-LM binary {p} does not exist; {_WHERE}")
    head = p.read_bytes()[:20]
    if head[:4] == b"\x7fELF":

        machine = int.from_bytes(head[18:20], "little" if head[5] == 1 else "big")
        return BinaryInfo(p, "elf", _ELF_MACHINES.get(machine, f"elf-machine-0x{machine:x}"))
    if head[:2] == b"#!":
        return BinaryInfo(p, "script", None)
    raise BadInput(f"{p} is not an executable (no ELF header, no #! line); {_WHERE}")


def lm_argv(binary: str, bundle: str, job: LmJob, cache: str | None) -> list[str]:
    """The binary's arguments for one benchmark generation (flags of runtime/engine/shared_flags.cc)."""
    argv = [binary, "--backend=cpu", f"--model_path={bundle}", "--benchmark",
            f"--benchmark_prefill_tokens={int(job.prefill_tokens)}", f"--benchmark_decode_tokens={int(job.decode_tokens)}",
            "--report_peak_memory_footprint"]
    if job.threads is not None:
        argv.append(f"--num_cpu_threads={int(job.threads)}")
    if job.max_num_tokens is not None:
        argv.append(f"--max_num_tokens={int(job.max_num_tokens)}")
    argv.append(f"--cache_dir={cache}" if cache else "--disable_cache=true")
    if job.speculative is not None:
        raise BadInput("--speculative: edgebench passes speculative decoding to the host's Python API only; "
                       "drop --speculative for a device target")
    if job.activation is not None:
        if job.activation not in _FLAG_ACTIVATION:
            raise BadInput(f"--activation {job.activation}: LiteRT-LM's binary only forces fp32 (--force_f32); "
                           "drop --activation or use fp32 on a device")
        argv.append(_FLAG_ACTIVATION[job.activation])
    return argv


class DeviceLmRunner:
    """``run`` = one invocation of the binary on ``adb:SERIAL`` (see the module docstring)."""
    runtime = "litert_lm benchmark binary"
    memory_note = "the binary's own peak system RAM report (--report_peak_memory_footprint), MiB"

    def __init__(self, serial: str, binary: str | None, *, deadline_s: float | None = None) -> None:
        self.binary = resolve_lm_binary(binary)
        self.target = AdbTarget(serial)
        self.device = self.target.device
        self.name = self.target.name
        self.source = f"LiteRT-LM benchmark binary ({self.binary.path.name}) over adb, BenchmarkInfo parsed"
        self.deadline_s = deadline_s or DEFAULT_DEADLINE_S
        facts = self.target.facts()
        check_abi(self.binary, [a for a in str(facts.get("abi") or "").split(",") if a], serial)
        self.device_model = facts.get("model")
        self._remote: dict[str, str] = {}
        self.run_dir = f"{REMOTE_ROOT}/llm-{uuid.uuid4().hex[:12]}"

    def fingerprint(self) -> dict[str, Any]:
        return {**self.target.fingerprint(), "llm_runtime": self.binary.path.name}

    def _stage(self, local: Path, mode: int) -> str:
        key = str(local.resolve())
        if key not in self._remote:
            remote = f"{REMOTE_FILES}/{content_name(local, sha256_file(local))}"
            self.device.check(RemoteCommand.mkdir(REMOTE_FILES, self.run_dir, f"{self.run_dir}/cache"),
                              what="creating edgebench's device folders")
            self.device.push_if_changed(local, remote, mode=mode)
            if mode & 0o111:
                self.device.check(RemoteCommand.chmod_exec(remote), what="making the LiteRT-LM binary executable")
            self._remote[key] = remote
        return self._remote[key]

    def _invoke(self, job: LmJob) -> ProcessRun:
        binary = self._stage(self.binary.path, 0o755)
        bundle = self._stage(Path(job.bundle), 0o644)
        cache = f"{self.run_dir}/cache" if job.cache_dir != ":nocache" else None
        argv = lm_argv(binary, bundle, job, cache)
        r = self.device.shell(RemoteCommand.in_dir(self.run_dir, argv), deadline_s=self.deadline_s,
                              what=f"LiteRT-LM's benchmark of {Path(job.bundle).name}")
        text = r.stdout + "\n" + r.stderr
        if r.rc in (124, 137):
            raise InfraError(f"{self.name}: LiteRT-LM's benchmark of {Path(job.bundle).name} exceeded its "
                             f"{self.deadline_s:g} s deadline and was killed (exit {r.rc})")
        log = parse_lm_log(text)
        if log.format is None:
            tail = (r.stderr or r.stdout).strip().splitlines()[-1:] or [""]
            if r.rc == 127 or "not found" in tail[0] or "Exec format error" in tail[0]:
                raise BadInput(f"{self.name} cannot run {self.binary.path.name}: {tail[0][:300]}; {_WHERE}")
            raise InfraError(f"{self.name}: {self.binary.path.name} exited with status {r.rc} and printed no "
                             f"BenchmarkInfo: {tail[0][:300]}")
        return ProcessRun(measured=log.generation(), peak_rss_bytes=log.peak_rss_bytes,
                          facts={"exit_code": r.rc, "log": log.to_dict()})

    def run(self, job: LmJob, *, first: bool) -> ProcessRun:
        warm = []
        if first:
            warm = [self._invoke(job).measured for _ in range(int(job.warmup or 0))]
        run = self._invoke(job)
        return ProcessRun(measured=run.measured, warmups=tuple(warm), peak_rss_bytes=run.peak_rss_bytes,
                          facts=run.facts)

    def greedy(self, job: LmJob) -> tuple[list[str], int | None]:
        raise BadInput("greedy token agreement runs on the host; use --target host or --no-agreement")

    def tasks(self, job: LmJob) -> list[str]:
        raise BadInput("the task score runs on the host (greedy decoding through the Python API); use --target host "
                       "or leave out --task-score")

    def close(self) -> None:
        try:
            self.device.shell(RemoteCommand.rm_rf(self.run_dir), what="removing the run folder")
        except EdgebenchError:
            pass
