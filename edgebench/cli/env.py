"""``edgebench env``: print the environment fingerprint recorded with every result."""

from __future__ import annotations

from typing import Optional

import typer
from rich.markup import escape

from edgebench.bench.peak import measure_peak
from edgebench.cli._common import console
from edgebench.core.errors import BadInput
from edgebench.core.fingerprint import host_fingerprint
from edgebench.core.result_file import envelope, write_json
from edgebench.matrix.envlock import describe, enforce_lock, write_lock
from edgebench.report.terminal.compare import render_fingerprint
from edgebench.targets.adb.devices import resolve_adb_targets


def register(app: typer.Typer) -> None:
    @app.command("env")
    def env_cmd(
        json_path: Optional[str] = typer.Option(None, "--json", help="Write the fingerprint as JSON to PATH ('-' for stdout)."),
        no_tf: bool = typer.Option(False, "--no-tf", help="Skip importing TensorFlow (no CUDA/cuDNN/XLA/AMP facts)."),
        peak: bool = typer.Option(False, "--peak", help="Measure this machine's peak float32 GFLOP/s (cached; bench prints % of peak)."),
        lock: Optional[str] = typer.Option(None, "--lock", help="Write the expected environment (key fields) to this YAML lock FILE."),
        check_lock: Optional[str] = typer.Option(None, "--check-lock", help="Compare this machine with a lock FILE: warn on differences (exit 0)."),
        strict: bool = typer.Option(False, "--strict", help="With --check-lock: a difference fails with exit 1."),
        targets: Optional[str] = typer.Option(None, "--targets", help="With --lock/--check-lock: also lock/check these adb devices (adb:SERIAL,... or adb:all)."),
    ) -> None:
        """Print this machine's environment fingerprint (OS, CPU, Python, TF, LiteRT, GPU/CUDA, XLA/AMP)."""
        fp = host_fingerprint(with_tf=not no_tf)
        if peak:

            measured = measure_peak()
            fp = {**fp, "peak_gflops": round(measured["peak_gflops"], 2),
                  "peak_gflops_1thread": round(measured["peak_gflops_1thread"], 2),
                  "peak_method": measured["method"]}
        lock_diffs = None
        devices = None
        if targets:
            if not (lock or check_lock):

                raise BadInput("--targets needs --lock FILE or --check-lock FILE")

            devices = {t.serial: t.fingerprint() for t in resolve_adb_targets(targets)}
        if lock:

            write_lock(lock, fp, devices)
        if check_lock:

            lock_diffs = enforce_lock(check_lock, fp, strict=strict, devices=devices)
        elif strict:

            raise BadInput("--strict needs --check-lock FILE")

        if lock:
            console(stderr=True).print(f"wrote environment lock {lock}")
        if lock_diffs:


            console(stderr=True).print(f"[bold yellow]warning:[/] environment differs from lock {escape(check_lock)}: "
                                       f"{escape(describe(lock_diffs))} (--strict makes this fail)")
        elif check_lock:
            console(stderr=True).print(f"environment matches lock {check_lock}")
        if json_path:
            extra = {} if lock_diffs is None else {"lock": check_lock, "lock_differences": lock_diffs}
            write_json(envelope("env", [], fp, **extra), json_path)
            if json_path == "-":
                return
        console().print(render_fingerprint(fp))
