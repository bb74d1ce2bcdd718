"""Multi-worker cells: one worker's side (``run_worker_cells``, run by ``train_worker``) and the
local ``WorkerGroup`` of ``python -m edgebench.train.worker`` processes on loopback ports that
never hangs on a dead peer."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

from edgebench.train.cell import ERROR_MAX_CHARS, _profile_dir_for, _profile_root, base_row, run_cell
from edgebench.train.metrics import visible_gpus
from edgebench.train.settings import Cell, TrainSettings
from edgebench.train.step import _enable_memory_growth, _set_determinism, make_strategy

WORKER_STARTUP_S = 180.0  # TF import + rendezvous allowance per worker group, on top of per-cell time
WORKER_STOP_GRACE_S = 5.0


def run_worker_cells(settings: TrainSettings, cells: list[Cell], *,
                     on_row: Callable[[list[dict[str, Any]]], None] | None = None) -> list[dict[str, Any]]:
    """Run multiworker cells as one worker of the cluster described by TF_CONFIG.

    The MultiWorkerMirroredStrategy is created first, before any other TensorFlow op (it must
    configure the collective runtime). Every worker runs the same cells in the same order.
    """
    _enable_memory_growth(visible_gpus())  # lists devices only: creates no op before the strategy
    strategy = make_strategy("multiworker", timeout_s=settings.worker_timeout_s)
    _set_determinism(settings.deterministic)
    tf_config = json.loads(os.environ.get("TF_CONFIG", "{}"))
    task = tf_config.get("task", {})
    is_chief = task.get("type", "worker") == "chief" or (
        task.get("type", "worker") == "worker" and int(task.get("index", 0)) == 0
        and "chief" not in tf_config.get("cluster", {}))
    root = _profile_root(settings) if is_chief else None
    gpus = visible_gpus()
    rows = []
    for cell in cells:
        row = run_cell(settings, cell, strategy, profile_dir=_profile_dir_for(settings, cell, root), gpus=gpus)
        row["task"] = f"{task.get('type', 'worker')}:{task.get('index', 0)}"
        row["is_chief"] = is_chief
        row["workers"] = int(sum(len(v) for k, v in tf_config.get("cluster", {}).items() if k in ("worker", "chief")))
        rows.append(row)
        if on_row:
            on_row(rows)
    return rows


def _free_ports(n: int) -> list[int]:
    """n distinct free TCP ports on 127.0.0.1 (held open together so none repeats)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


class WorkerGroup:
    """N local ``python -m edgebench.train.worker`` processes with TF_CONFIG on loopback ports.

    ``wait()`` returns once every worker exited 0, or stops all of them as soon as one dies or the
    deadline passes (no hang: a peer stuck in a collective is killed, not waited for).
    """

    def __init__(self, settings: TrainSettings, cells: list[Cell], run_dir: Path, *, deadline_s: float,
                 gpu_count: int = 0):
        self.settings = settings
        self.cells = cells
        self.run_dir = Path(run_dir)
        self.deadline_s = deadline_s
        self.gpu_count = gpu_count
        self.n = settings.workers
        self.procs: list[subprocess.Popen] = []
        self.logs: list[Path] = []
        self.outs: list[Path] = []
        self.note: str | None = None

    def start(self) -> "WorkerGroup":
        spec = self.run_dir / "spec.json"
        spec.write_text(json.dumps({"settings": dataclasses.asdict(self.settings),
                                    "cells": [dataclasses.asdict(c) for c in self.cells]}))
        ports = _free_ports(self.n)
        cluster = {"worker": [f"127.0.0.1:{p}" for p in ports]}
        for i in range(self.n):
            env = dict(os.environ)
            env["TF_CONFIG"] = json.dumps({"cluster": cluster, "task": {"type": "worker", "index": i}})
            env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
            env["PYTHONUNBUFFERED"] = "1"
            if self.gpu_count >= self.n:
                env["CUDA_VISIBLE_DEVICES"] = str(i)  # one GPU per worker: NCCL needs distinct devices
            elif self.gpu_count > 0:
                env["CUDA_VISIBLE_DEVICES"] = "-1"
                self.note = (f"{self.n} local workers but {self.gpu_count} GPU(s): workers ran on CPU "
                             "(NCCL cannot share one GPU between workers)")
            out = self.run_dir / f"worker{i}.json"
            log = self.run_dir / f"worker{i}.log"
            self.outs.append(out)
            self.logs.append(log)
            with open(log, "wb") as fh:
                self.procs.append(subprocess.Popen(
                    [sys.executable, "-m", "edgebench.train.worker", "--spec", str(spec), "--out", str(out)],
                    env=env, stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL))
        return self

    def _log_tail(self, i: int, lines: int = 3) -> str:
        try:
            text = self.logs[i].read_text(errors="replace").splitlines()
        except OSError:
            return ""
        keep = [ln.strip() for ln in text if ln.strip() and not ln.startswith(("I0000", "W0000", "WARNING: All"))]
        return " | ".join(keep[-lines:])[-ERROR_MAX_CHARS:]

    def wait(self, poll_s: float = 0.2) -> str | None:
        """None when every worker exited 0; otherwise the reason (the rest were stopped)."""
        deadline = time.monotonic() + self.deadline_s
        try:
            while True:
                codes = [p.poll() for p in self.procs]
                bad = [(i, c) for i, c in enumerate(codes) if c not in (None, 0)]
                if bad:
                    i, c = bad[0]
                    how = f"was killed by signal {-c}" if c < 0 else f"exited with code {c}"
                    tail = self._log_tail(i)
                    return f"worker {i} {how}; the other workers were stopped" + (f" (log: {tail})" if tail else "")
                if all(c == 0 for c in codes):
                    return None
                if time.monotonic() > deadline:
                    return (f"multiworker group did not finish within {self.deadline_s:.0f} s; all workers were "
                            "stopped (raise the timeout or lower --steps)")
                time.sleep(poll_s)
        finally:
            self.stop()

    def stop(self) -> None:
        """Terminate every worker still running, then kill what ignores it."""
        alive = [p for p in self.procs if p.poll() is None]
        for p in alive:
            try:
                p.send_signal(signal.SIGTERM)
            except ProcessLookupError:
                pass
        end = time.monotonic() + WORKER_STOP_GRACE_S
        for p in alive:
            try:
                p.wait(timeout=max(0.0, end - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()

    def read_rows(self, i: int = 0) -> list[dict[str, Any]]:
        try:
            return json.loads(self.outs[i].read_text())["rows"]
        except (OSError, ValueError, KeyError):
            return []


def _run_multiworker_local(settings: TrainSettings, cells: list[Cell], gpu_count: int) -> list[dict[str, Any]]:
    run_dir = Path(tempfile.mkdtemp(prefix="edgebench-train-"))
    try:
        group = WorkerGroup(settings, cells, run_dir,
                            deadline_s=WORKER_STARTUP_S + settings.worker_timeout_s * len(cells),
                            gpu_count=gpu_count).start()
        failure = group.wait()
        chief = group.read_rows(0)
        others = [group.read_rows(i) for i in range(1, group.n)]
        rows = []
        for k, cell in enumerate(cells):
            if k < len(chief):
                row = chief[k]
                row["workers_examples_per_s"] = [row.get("examples_per_s")] + [
                    (o[k].get("examples_per_s") if k < len(o) else None) for o in others]
                if group.note:
                    row["note"] = group.note
            else:
                row = base_row(settings, cell)
                row.update(status="failed", error=failure or "worker 0 wrote no result for this cell")
            rows.append(row)
        return rows
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)
