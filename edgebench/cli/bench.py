"""``edgebench bench``: latency percentiles, QPS, memory and % of peak for .tflite models."""

from __future__ import annotations

from typing import Annotated, List, Optional

import typer

from edgebench.cli._options import (
    ENERGY_DEFAULTS,
    RC_DEFAULTS,
    AcceleratorOpt,
    BenchmarkBinaryOpt,
    ColdStartsOpt,
    DbOpt,
    DelegateOpt,
    DurationOpt,
    EnergyIdleOpt,
    EnergyOpt,
    GpuPrecisionOpt,
    JsonOpt,
    MaxTimeOpt,
    MinRunsOpt,
    MinTimeOpt,
    ModelExplorerOpt,
    NoStoreOpt,
    OpProfileOpt,
    PeriodMsOpt,
    PushgatewayOpt,
    RepeatsOpt,
    RoundGapOpt,
    ReportEveryOpt,
    RunsOpt,
    RuntimeOpt,
    TargetsOpt,
    ThreadsOpt,
    WarmupRunsOpt,
    WarmupTimeOpt,
    WideOpt,
    XnnpackCacheOpt,
)
from edgebench.targets.base import DEFAULT_DELEGATE


def register(app: typer.Typer) -> None:
    @app.command("bench")
    def bench_cmd(
        models: Annotated[List[str], typer.Argument(help="One or more .tflite files (several -> side-by-side table).")],
        targets: TargetsOpt = "host",
        benchmark_binary: BenchmarkBinaryOpt = None,
        threads: ThreadsOpt = None,
        delegate: DelegateOpt = DEFAULT_DELEGATE,
        runtime: RuntimeOpt = "interpreter",
        accelerator: AcceleratorOpt = None,
        gpu_precision: GpuPrecisionOpt = None,
        op_profile: OpProfileOpt = False,
        model_explorer: ModelExplorerOpt = None,
        data: Annotated[Optional[str], typer.Option(
            "--data", help="InputSet .npz (keys = signature input names); default: seeded synthetic inputs.")] = None,
        runs: RunsOpt = None,
        min_runs: MinRunsOpt = RC_DEFAULTS.min_runs,
        min_time: MinTimeOpt = None,
        max_time: MaxTimeOpt = RC_DEFAULTS.max_time_s,
        warmup_runs: WarmupRunsOpt = RC_DEFAULTS.warmup_runs,
        warmup_time: WarmupTimeOpt = RC_DEFAULTS.warmup_time_s,
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
        repeats: RepeatsOpt = 1,
        round_gap: RoundGapOpt = 0.0,
        json_path: JsonOpt = None,
        db: DbOpt = None,
        no_store: NoStoreOpt = False,
        pushgateway: PushgatewayOpt = None,
        wide: WideOpt = False,
    ) -> None:
        """Benchmark .tflite models: per-inference latency percentiles with validity, QPS, memory, % of peak."""
        from edgebench.bench.run import BenchSettings, raise_for_failures, run_bench
        from edgebench.cli._common import (
            console,
            deliver,
            progress_reporter,
            split_ints,
        )
        from edgebench.cli._options import (
            check_model_explorer,
            energy_settings,
            gpu_precisions,
            publish_options,
            run_control,
            schedule,
        )
        from edgebench.report.publish import check_store
        from edgebench.report.terminal.bench import render_bench

        settings = BenchSettings(
            models=tuple(models), targets=targets, benchmark_binary=benchmark_binary, threads=threads,
            delegate=delegate, data=data,
            control=run_control(runs, min_runs, min_time, max_time, warmup_runs, warmup_time),
            concurrency=tuple(split_ints(concurrency, option="--concurrency")),
            server_qps=server_qps, server_workers=server_workers, sla_p99_ms=sla_p99_ms, seed=seed,
            schedule=schedule(duration, report_every, period_ms), cold_starts=cold_starts,
            xnnpack_cache=xnnpack_cache, energy=energy_settings(energy, energy_idle), repeats=repeats, round_gap_s=round_gap,
            runtime_api=runtime, accelerator=accelerator, gpu_precisions=gpu_precisions(gpu_precision),
            op_profile=op_profile,
        )
        check_model_explorer(model_explorer, op_profile)
        opts = publish_options(json_path=json_path, db=db, no_store=no_store, pushgateway=pushgateway,
                               model_explorer=model_explorer)
        check_store(opts)
        with progress_reporter("bench") as say:
            doc = run_bench(settings, progress=say)
        width = None if wide else console().width
        doc = deliver(doc, opts, lambda d: render_bench(d, width=width), json_path=json_path)
        raise_for_failures(doc)
