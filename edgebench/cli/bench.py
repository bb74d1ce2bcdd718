"""``edgebench bench``: latency percentiles, QPS, memory and % of peak for .tflite models."""

from __future__ import annotations

from typing import Annotated, List, Optional

import typer

from edgebench.bench.run import BenchSettings, raise_for_failures, run_bench
from edgebench.cli._common import console, deliver, progress_reporter, split_ints
from edgebench.cli._groups import ControlGroup, TargetGroup, grouped
from edgebench.cli._options import (
    ENERGY_DEFAULTS,
    ColdStartsOpt,
    DbOpt,
    DurationOpt,
    EnergyIdleOpt,
    EnergyOpt,
    JsonOpt,
    ModelExplorerOpt,
    NoStoreOpt,
    PeriodMsOpt,
    PushgatewayOpt,
    ReportEveryOpt,
    WideOpt,
    XnnpackCacheOpt,
    check_model_explorer,
    energy_settings,
    publish_options,
    schedule,
)
from edgebench.report.publish import check_store
from edgebench.report.terminal.bench import render_bench


def register(app: typer.Typer) -> None:
    @app.command("bench")
    @grouped
    def bench_cmd(
        models: Annotated[List[str], typer.Argument(help="One or more .tflite files (several -> side-by-side table).")],
        model_explorer: ModelExplorerOpt = None,
        data: Annotated[Optional[str], typer.Option(
            "--data", help="InputSet .npz (keys = signature input names); default: seeded synthetic inputs.")] = None,
        concurrency: Annotated[Optional[str], typer.Option(
            "--concurrency", help="Comma-separated parallel interpreter counts, e.g. 1,2,4.")] = None,
        server_qps: Annotated[Optional[float], typer.Option(
            "--server-qps", help="Poisson arrivals at Q queries/s; latency includes queueing.")] = None,
        server_workers: Annotated[int, typer.Option(
            "--server-workers", help="Interpreters serving the server-mode queue.")] = 1,
        sla_p99_ms: Annotated[Optional[float], typer.Option(
            "--sla-p99-ms", help="Search the highest QPS whose p99 stays under X ms.")] = None,
        duration: DurationOpt = None,
        report_every: ReportEveryOpt = None,
        period_ms: PeriodMsOpt = None,
        cold_starts: ColdStartsOpt = 0,
        xnnpack_cache: XnnpackCacheOpt = False,
        energy: EnergyOpt = False,
        energy_idle: EnergyIdleOpt = ENERGY_DEFAULTS.idle_s,
        seed: Annotated[int, typer.Option("--seed", help="Seed for synthetic inputs and Poisson arrivals.")] = 0,
        json_path: JsonOpt = None,
        db: DbOpt = None,
        no_store: NoStoreOpt = False,
        pushgateway: PushgatewayOpt = None,
        wide: WideOpt = False,
        target: TargetGroup = TargetGroup(),
        control: ControlGroup = ControlGroup(),
    ) -> None:
        """Benchmark .tflite models: per-inference latency percentiles with validity, QPS, memory, % of peak."""
        settings = BenchSettings(
            models=tuple(models), targets=target.targets, run=target.run(control.control()), data=data,
            concurrency=tuple(split_ints(concurrency, option="--concurrency")),
            server_qps=server_qps, server_workers=server_workers, sla_p99_ms=sla_p99_ms, seed=seed,
            schedule=schedule(duration, report_every, period_ms), cold_starts=cold_starts,
            xnnpack_cache=xnnpack_cache, energy=energy_settings(energy, energy_idle),
        )
        check_model_explorer(model_explorer, target.op_profile)
        opts = publish_options(json_path=json_path, db=db, no_store=no_store, pushgateway=pushgateway,
                               model_explorer=model_explorer)
        check_store(opts)
        with progress_reporter("bench") as say:
            doc = run_bench(settings, progress=say)
        width = None if wide else console().width
        doc = deliver(doc, opts, lambda d: render_bench(d, width=width), json_path=json_path)
        raise_for_failures(doc)
