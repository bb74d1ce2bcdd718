"""LiteRT-LM on this machine's CPU: one worker process per repeat (``worker.py``), started, bounded
and killed like the LiteRT runner (``targets.host.spawn_worker``: own session, deadline, a crash or a
hang is an ``InfraError`` naming it). The parent never imports ``litert_lm``: it only checks that the
optional extra is installed (``require_extra``), so a missing extra is one exit-2 line before anything
runs."""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from edgebench.core.errors import BadInput
from edgebench.targets.host import spawn_worker

WORKER_MODULE = "edgebench.targets.litert_lm.worker"
EXTRA = "llm"
INSTALL = f"pip install 'edgebench[{EXTRA}]'"
SOURCE = "litert_lm Python API (Benchmark: the engine's benchmark mode)"
# One process: the engine's init, the warm-ups and the measured generation of a large bundle on a
# slow machine stay far below this; a hung engine is killed at it.
DEFAULT_DEADLINE_S = 900.0


def extra_missing() -> str | None:
    """Why the ``litert_lm`` Python API cannot be imported, or None (looked up, not imported)."""
    try:
        spec = importlib.util.find_spec("litert_lm")
    except (ImportError, ValueError) as exc:       # ValueError: sys.modules["litert_lm"] is None (blocked)
        return str(exc) or "blocked"
    return None if spec is not None else "no module named litert_lm"


def require_extra(what: str = "llm-bench on the host") -> None:
    if extra_missing() is not None:
        raise BadInput(f"{what} needs the optional extra [{EXTRA}] (LiteRT-LM's Python API, litert-lm-api); "
                       f"install it with: {INSTALL}")


@dataclass(frozen=True)
class LmJob:
    """One worker process's job (``worker.py`` documents the JSON)."""

    bundle: str
    prefill_tokens: int
    decode_tokens: int
    threads: int | None = None
    max_num_tokens: int | None = None
    activation: str | None = None
    cache_dir: str = ":nocache"
    warmup: int = 1
    mode: str = "bench"
    prompt: str | None = None
    prompts: tuple[str, ...] = ()           # mode "tasks": the task set's prompts
    speculative: bool | None = None         # enable_speculative_decoding; None: the engine's default
    memory_phases: bool = False             # bench: resident memory per phase first (Engine/Session API)


def run_worker(job: LmJob, deadline_s: float = DEFAULT_DEADLINE_S) -> dict[str, Any]:
    """The worker's ``result.json`` for ``job`` (BadInput / InfraError as ``spawn_worker`` raises them)."""
    work = Path(tempfile.mkdtemp(prefix="edgebench-llm-"))
    try:
        spec = {**asdict(job), "bundle": str(Path(job.bundle).resolve()), "out_dir": str(work)}
        job_file = work / "job.json"
        job_file.write_text(json.dumps(spec))
        meta, _arrays = spawn_worker([sys.executable, "-m", WORKER_MODULE, str(job_file)], work, deadline_s, job.bundle)
        return meta
    finally:
        shutil.rmtree(work, ignore_errors=True)
