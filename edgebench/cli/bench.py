"""``edgebench bench``: latency percentiles, QPS, memory and % of peak for .tflite models."""

from __future__ import annotations

from dataclasses import fields
from typing import Any, List, Optional

import typer

from edgebench.bench import BenchSettings

_D = {f.name: f.default for f in fields(BenchSettings)}


def _fmt(v: Any, spec: str = ".3f") -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, (int, float)):
        return format(v, spec)
    return str(v)


def _mib(v: Any) -> str:
    if v is None:
        return "-"
    return f"{v / 2**20:.1f} MiB" if v >= 2**20 else f"{v / 2**10:.1f} KiB"


def render_bench(doc: dict[str, Any]) -> list:
    """Pure renderer: a side-by-side table (one column per model x target) plus load tables
    and warnings. Returns rich renderables; prints nothing."""
    from rich.table import Table
    from rich.text import Text

    rows = doc.get("rows", [])
    out: list = []
    t = Table(title="edgebench bench", show_header=True, header_style="bold")
    t.add_column("metric")
    for r in rows:
        head = r["model"] if len({x["target"] for x in rows}) == 1 else f"{r['model']} @ {r['target']}"
        t.add_column(head, justify="right")

    def lat(r, k):
        return _fmt((r.get("latency_ms") or {}).get(k), ".4g")

    def p99(r):
        lm = r.get("latency_ms") or {}
        if not lm:
            return "-"
        flag = "" if lm.get("p99_valid") else f" (not valid: {lm.get('samples')} < {lm['min_samples']['p99']})"
        return _fmt(lm.get("p99"), ".4g") + flag

    def ci(r):
        lm = r.get("latency_ms") or {}
        lo, hi = (lm.get("p99_ci") or [None, None])
        return "-" if not lm else f"[{_fmt(lo, '.4g')}, {_fmt(hi, '.4g') if hi is not None else 'unbounded'}]"

    def pct(r):
        return "-" if r.get("pct_of_peak") is None else f"{r['pct_of_peak']:.1f}%"

    spec = [
        ("status", lambda r: r["status"] if r["status"] == "ok" else f"FAILED: {r.get('error')}"),
        ("samples", lambda r: _fmt((r.get("latency_ms") or {}).get("samples"), "d")),
        ("mean ms", lambda r: lat(r, "mean")),
        ("std ms", lambda r: lat(r, "std")),
        ("min ms", lambda r: lat(r, "min")),
        ("p50 ms", lambda r: lat(r, "p50")),
        ("p90 ms", lambda r: lat(r, "p90")),
        ("p95 ms", lambda r: lat(r, "p95")),
        ("p99 ms", p99),
        ("p99 95% CI ms", ci),
        ("max ms", lambda r: lat(r, "max")),
        ("QPS (1/mean)", lambda r: _fmt((r.get("latency_ms") or {}).get("qps"), ".1f")),
        ("warmup", lambda r: "-" if not r.get("warmup_ms") else
            f"{r['warmup_ms']['runs']} runs, mean {r['warmup_ms']['mean']:.4g} ms"),
        ("init ms", lambda r: _fmt(r.get("init_ms"))),
        ("first inference ms", lambda r: _fmt(r.get("first_inference_ms"))),
        ("peak RSS", lambda r: _mib(r.get("peak_rss_bytes"))),
        ("GFLOP / inference", lambda r: _fmt(r.get("gflops"), ".4g")),
        ("achieved GFLOP/s", lambda r: _fmt(r.get("achieved_gflops_per_s"), ".2f")),
        ("% of peak", pct),
        ("int8 op coverage", lambda r: "-" if not r.get("quantized") else f"{100 * r['quantization_coverage']:.0f}%"),
        ("threads / delegate", lambda r: f"{_fmt(r.get('threads_effective') or r.get('threads'), 'd')} / {r.get('delegate')}"),
        ("runtime", lambda r: _fmt(r.get("runtime"))),
        ("size", lambda r: _mib(r.get("size_bytes"))),
        ("sha256", lambda r: (r.get("model_sha256") or "")[:12]),
    ]
    for label, fn in spec:
        t.add_row(label, *[fn(r) for r in rows])
    out.append(t)

    for r in rows:
        name = r["model"]
        if r.get("concurrency"):
            ct = Table(title=f"{name}: concurrency", header_style="bold")
            for c in ("level", "QPS", "x vs first", "p50 ms", "p99 ms", "samples", "p99 valid"):
                ct.add_column(c, justify="right")
            for c in r["concurrency"]:
                ct.add_row(str(c["level"]), _fmt(c["qps"], ".1f"), _fmt(c.get("speedup_vs_first"), ".2f"),
                           _fmt(c["p50_ms"], ".4g"), _fmt(c["p99_ms"], ".4g"), str(c["samples"]), _fmt(c["p99_valid"]))
            out.append(ct)
        if r.get("server"):
            s = r["server"]
            st = Table(title=f"{name}: server (Poisson arrivals, latency incl. queueing)", header_style="bold")
            for c in ("target QPS", "achieved QPS", "workers", "p50 ms", "p99 ms", "samples", "p99 valid", "overloaded"):
                st.add_column(c, justify="right")
            st.add_row(_fmt(s["target_qps"], ".1f"), _fmt(s["achieved_qps"], ".1f"), str(s["workers"]),
                       _fmt(s["p50_ms"], ".4g"), _fmt(s["p99_ms"], ".4g"), str(s["samples"]), _fmt(s["p99_valid"]),
                       _fmt(s["overloaded"]))
            out.append(st)
        if r.get("sla"):
            s = r["sla"]
            if s.get("met"):
                out.append(Text(f"{name}: highest QPS with p99 <= {s['sla_p99_ms']:g} ms: "
                                f"{s['max_qps']:.1f} (p99 {s['p99_at_max_ms']:.3f} ms, "
                                f"resolution {s['resolution_qps']:.1f} QPS)"))
            else:
                out.append(Text(f"{name}: SLA p99 <= {s['sla_p99_ms']:g} ms not met: {s.get('reason')}"))
        for w in r.get("warnings") or []:
            out.append(Text(f"warning ({name}): {w}", style="yellow"))
    if rows and all(r.get("pct_of_peak") is None for r in rows if r["status"] == "ok"):
        out.append(Text("% of peak: run `edgebench env --peak` once to measure this machine's peak GFLOP/s",
                        style="dim"))
    return out


def register(app: typer.Typer) -> None:
    @app.command("bench")
    def bench_cmd(
        models: List[str] = typer.Argument(..., help="One or more .tflite files (several -> side-by-side table)."),
        targets: str = typer.Option(_D["targets"], "--targets", "-t", help="Comma-separated: host, adb:SERIAL, adb:all."),
        benchmark_binary: Optional[str] = typer.Option(None, "--benchmark-binary", help="Google's android_aarch64_benchmark_model for devices without Python (or $EDGEBENCH_BENCHMARK_MODEL)."),
        threads: Optional[int] = typer.Option(_D["threads"], "--threads", help="Interpreter threads (default: runtime default, 1 for LiteRT Python)."),
        delegate: str = typer.Option(_D["delegate"], "--delegate", help="xnnpack | none (| gpu | path/to/delegate.so)."),
        data: Optional[str] = typer.Option(_D["data"], "--data", help="InputSet .npz (keys = signature input names); default: seeded synthetic inputs."),
        runs: Optional[int] = typer.Option(_D["runs"], "--runs", help="Force exactly N timed runs (overrides --min-runs/--min-time; still capped by --max-time)."),
        min_runs: int = typer.Option(_D["min_runs"], "--min-runs", help="Run at least N timed inferences (662 = valid p99)."),
        min_time: float = typer.Option(_D["min_time_s"], "--min-time", help="...and at least S seconds."),
        max_time: float = typer.Option(_D["max_time_s"], "--max-time", help="Stop after S seconds even if --min-runs is not reached."),
        warmup_runs: int = typer.Option(_D["warmup_runs"], "--warmup-runs", help="Untimed warmup inferences."),
        warmup_time: float = typer.Option(_D["warmup_time_s"], "--warmup-time", help="...and warm up for at least S seconds."),
        concurrency: Optional[str] = typer.Option(None, "--concurrency", help="Comma-separated parallel interpreter counts, e.g. 1,2,4."),
        server_qps: Optional[float] = typer.Option(_D["server_qps"], "--server-qps", help="Poisson arrivals at Q queries/s; latency includes queueing."),
        server_workers: int = typer.Option(_D["server_workers"], "--server-workers", help="Interpreters serving the server-mode queue."),
        sla_p99_ms: Optional[float] = typer.Option(_D["sla_p99_ms"], "--sla-p99-ms", help="Search the highest QPS whose p99 stays under X ms."),
        seed: int = typer.Option(_D["seed"], "--seed", help="Seed for synthetic inputs and Poisson arrivals."),
        json_path: Optional[str] = typer.Option(None, "--json", help="Write the result as JSON to PATH ('-' for stdout)."),
        db: Optional[str] = typer.Option(None, "--db", help="Results database (path or SQLAlchemy URL; default $EDGEBENCH_DB or the user data dir)."),
        no_store: bool = typer.Option(False, "--no-store", help="Do not write the result to the results database."),
        pushgateway: Optional[str] = typer.Option(None, "--pushgateway", help="Also push the metrics to this Prometheus Pushgateway URL."),
    ) -> None:
        """Benchmark .tflite models: per-inference latency percentiles with validity, QPS, memory, % of peak."""
        from edgebench.bench import raise_for_failures, run_bench
        from edgebench.cli._common import console, finish_result, progress_reporter, split_ints

        settings = BenchSettings(
            models=tuple(models), targets=targets, benchmark_binary=benchmark_binary, threads=threads, delegate=delegate, data=data, runs=runs,
            min_runs=min_runs, min_time_s=min_time, max_time_s=max_time, warmup_runs=warmup_runs,
            warmup_time_s=warmup_time, concurrency=tuple(split_ints(concurrency, option="--concurrency")),
            server_qps=server_qps, server_workers=server_workers, sla_p99_ms=sla_p99_ms, seed=seed,
        )
        with progress_reporter("bench") as say:
            doc = run_bench(settings, progress=say)
        finish_result(doc, json_path=json_path, db=db, no_store=no_store, pushgateway=pushgateway)
        if json_path != "-":
            con = console()
            for part in render_bench(doc):
                con.print(part)
        raise_for_failures(doc)
