"""Where an ``llm-bench`` process runs: this machine's CPU (``HostLmRunner``, the litert_lm Python API in
a worker process) or a phone/board over adb (``device.DeviceLmRunner``, LiteRT-LM's own benchmark
binary). Both hand back a ``ProcessRun`` -- one process's measured generation, its warm-ups and its
memory -- so the workflow and the judge never know which one measured."""

from __future__ import annotations

import platform
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from edgebench.targets.litert_lm.host import DEFAULT_DEADLINE_S, SOURCE, LmJob, require_extra, run_worker
from edgebench.targets.litert_lm.judge import Generation


@dataclass(frozen=True)
class ProcessRun:
    measured: Generation
    warmups: tuple[Generation, ...] = ()
    peak_rss_bytes: int | None = None
    rss_before_bytes: int | None = None
    version: str | None = None
    facts: dict[str, Any] = field(default_factory=dict)


class LmRunner(Protocol):
    name: str
    source: str
    runtime: str
    memory_note: str
    device_model: str | None

    def fingerprint(self) -> dict[str, Any]: ...

    def run(self, job: LmJob, *, first: bool) -> ProcessRun: ...

    def greedy(self, job: LmJob) -> tuple[list[str], int | None]: ...

    def tasks(self, job: LmJob) -> list[str]: ...

    def close(self) -> None: ...


class HostLmRunner:
    """Each ``run`` is a fresh worker process on this machine (``worker.py``)."""

    name = "host"
    source = SOURCE
    runtime = "litert_lm"
    device_model = None
    memory_note = ("peak resident memory of the worker process (VmHWM): Python, the litert_lm library, the "
                   "engine, its weights and KV cache; rss_before_engine_bytes is the process before the first engine")

    def __init__(self, deadline_s: float | None = None) -> None:
        require_extra()
        self.deadline_s = deadline_s or DEFAULT_DEADLINE_S

    def fingerprint(self) -> dict[str, Any]:
        return {"target": "host", "machine": platform.machine(), "llm_runtime": "litert_lm (python api)"}

    def run(self, job: LmJob, *, first: bool) -> ProcessRun:
        meta = run_worker(job, self.deadline_s)
        return ProcessRun(measured=Generation.from_worker(meta.get("measured") or {}),
                          warmups=tuple(Generation.from_worker(w) for w in meta.get("warmups") or ()),
                          peak_rss_bytes=meta.get("peak_rss_bytes"), rss_before_bytes=meta.get("rss_before_bytes"),
                          version=meta.get("litert_lm_version"),
                          facts={"phases": meta["phases"]} if isinstance(meta.get("phases"), dict) else {})

    def greedy(self, job: LmJob) -> tuple[list[str], int | None]:
        meta = run_worker(replace(job, mode="greedy"), self.deadline_s)
        return [str(p) for p in meta.get("pieces") or ()], meta.get("prompt_tokens")

    def tasks(self, job: LmJob) -> list[str]:
        """Each of ``job.prompts`` greedily decoded (one worker process, one engine, a session per prompt)."""
        meta = run_worker(replace(job, mode="tasks"), self.deadline_s)
        return [str(o) for o in meta.get("outputs") or ()]

    def close(self) -> None:
        """Nothing to clean: each worker removes its own folder."""
