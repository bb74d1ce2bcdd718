"""``edgebench train-baseline MODEL``: training throughput sweeps (precision x XLA x strategy x batch x pipeline)."""

from __future__ import annotations

import dataclasses
from typing import Any, Optional

import typer
from rich.console import Group
from rich.table import Table
from rich.text import Text


def _fmt(v: Any, spec: str = ".1f") -> str:
    if v is None:
        return "-"
    try:
        return format(v, spec)
    except (TypeError, ValueError):
        return str(v)


def _mib(v: Any) -> str:
    return "-" if v is None else f"{v / 2**20:.0f}"


def render_train(doc: dict[str, Any]) -> Group:
    """Pure renderer: one line per cell (reasons as numbered notes), then naive vs optimized pipelines."""
    rows = doc["rows"]
    model = rows[0]["model"] if rows else "?"
    size = rows[0].get("size", "") if rows else ""
    t = Table(title=f"training baseline: {model} ({size})", header_style="bold")
    for col, just in (("strategy", "left"), ("w", "right"), ("precision", "left"), ("xla", "left"),
                      ("batch", "right"), ("pipeline", "left"), ("status", "left"), ("ex/s", "right"),
                      ("p50 ms", "right"), ("p99 ms", "right"), ("wait %", "right"), ("startup ms", "right"),
                      ("peak MiB", "right"), ("allred ms", "right"), ("loss", "right")):
        t.add_column(col, justify=just, overflow="fold")
    notes: list[str] = []
    for r in rows:
        st = r.get("step_time_ms") or {}
        status = r.get("status", "?")
        style = {"ok": "green", "failed": "red", "skipped": "yellow"}.get(status, "")
        label = f"[{style}]{status}[/]" if style else status
        text = r.get("error") or r.get("reason") or r.get("note")
        if text:
            if text not in notes:
                notes.append(text)
            label += f" [{notes.index(text) + 1}]"
        batch = str(r.get("batch_size"))
        if r.get("global_batch_size") and r["global_batch_size"] != r.get("batch_size"):
            batch += f"x{r.get('replicas')}"
        t.add_row(str(r.get("strategy")), str(r.get("workers")), str(r.get("precision")),
                  "on" if r.get("xla") else "off", batch, str(r.get("input_pipeline")), label,
                  _fmt(r.get("examples_per_s")), _fmt(st.get("p50"), ".2f"), _fmt(st.get("p99"), ".2f"),
                  _fmt(r.get("input_wait_pct")), _fmt(r.get("startup_ms"), ".0f"),
                  _mib(r.get("peak_device_memory_bytes")), _fmt(r.get("allreduce_ms_per_step"), ".2f"),
                  _fmt(r.get("final_loss"), ".4f"))
    parts: list[Any] = [t]
    parts.extend(Text(f"[{i}] {n}") for i, n in enumerate(notes, 1))
    comps = doc.get("comparisons") or []
    if comps:
        c = Table(title="input pipeline: optimized (tf.data map+prefetch) vs naive (Python feed)",
                  header_style="bold")
        for col in ("strategy", "precision", "xla", "batch", "naive ex/s", "optim. ex/s", "speed-up",
                    "naive wait %", "optim. wait %"):
            c.add_column(col, justify="left" if col in ("strategy", "precision", "xla") else "right")
        for x in comps:
            c.add_row(x["strategy"], x["precision"], x["xla"], str(x["batch_size"]),
                      _fmt(x["naive_examples_per_s"]), _fmt(x["optimized_examples_per_s"]),
                      _fmt(x["speedup"], ".2f") + "x", _fmt(x["naive_input_wait_pct"]),
                      _fmt(x["optimized_input_wait_pct"]))
        parts.append(c)
    n_samples = max([(r.get("step_time_ms") or {}).get("samples", 0) for r in rows] or [0])
    if 0 < n_samples < 662:
        parts.append(Text(f"note: p99 from {n_samples} timed steps is not valid (needs >= 662, MLPerf LoadGen "
                          "minimum at 99% confidence); raise --steps for a trustworthy p99", style="dim"))
    return Group(*parts)


def register(app: typer.Typer) -> None:
    from edgebench.train.settings import TrainSettings

    d = {f.name: f.default for f in dataclasses.fields(TrainSettings) if f.default is not dataclasses.MISSING}

    @app.command("train-baseline")
    def train_cmd(
        model: str = typer.Argument(..., help="Reference model name (see 'edgebench models list')."),
        size: Optional[str] = typer.Option(None, "--size", help=f"tiny | full (default {d['size']})."),
        batch_sizes: Optional[str] = typer.Option(
            None, "--batch-sizes", help="Per-replica batch sizes, e.g. 32,64,128,256 "
                                        f"(default {','.join(map(str, d['batch_sizes']))})."),
        precision: Optional[str] = typer.Option(
            None, "--precision", help=f"fp32,mixed_float16,mixed_bfloat16 (default {','.join(d['precisions'])})."),
        xla: Optional[str] = typer.Option(None, "--xla", help=f"on,off: jit_compile passed explicitly "
                                                               f"(default {','.join(d['xla'])})."),
        strategy: Optional[str] = typer.Option(
            None, "--strategy", help=f"none,mirrored,multiworker (default {','.join(d['strategies'])})."),
        steps: Optional[int] = typer.Option(None, "--steps", help=f"Timed steps per cell (default {d['steps']})."),
        warmup_steps: Optional[int] = typer.Option(
            None, "--warmup-steps", help=f"Untimed warm-up steps, >= 1 (default {d['warmup_steps']})."),
        data: Optional[str] = typer.Option(
            None, "--data", help="'synthetic' (seeded, from the model registry) or an .npz with the inputs and "
                                 "'labels' (default synthetic)."),
        input_pipeline: Optional[str] = typer.Option(
            None, "--input-pipeline", help="naive (plain Python feed),optimized (tf.data parallel map + "
                                           f"prefetch) (default {','.join(d['input_pipelines'])})."),
        seed: Optional[int] = typer.Option(None, "--seed", help=f"Weights and data seed (default {d['seed']})."),
        deterministic: bool = typer.Option(False, "--deterministic", help="tf.config.experimental.enable_op_determinism()."),
        workers: Optional[int] = typer.Option(
            None, "--workers", help=f"Local worker processes for --strategy multiworker (default {d['workers']})."),
        learning_rate: Optional[float] = typer.Option(
            None, "--learning-rate", help=f"SGD (momentum 0.9) learning rate (default {d['learning_rate']})."),
        profile_steps: Optional[str] = typer.Option(
            None, "--profile-steps", help="START,END: capture a TensorBoard profile of these steps (0-based, "
                                          "warm-up included); needs 'pip install edgebench\\[profile]'."),
        profile_dir: Optional[str] = typer.Option(None, "--profile-dir", help="Where profiles go (default: "
                                                  "<data dir>/profiles/MODEL-TIMESTAMP)."),
        timeout_s: Optional[float] = typer.Option(
            None, "--timeout", help=f"Seconds per multiworker cell before the workers are stopped "
                                    f"(default {d['worker_timeout_s']:.0f})."),
        db: Optional[str] = typer.Option(None, "--db", help="Results database (path or SQLAlchemy URL; default "
                                                            "$EDGEBENCH_DB or the user data dir)."),
        no_store: bool = typer.Option(False, "--no-store", help="Do not write the result to the results database."),
        pushgateway: Optional[str] = typer.Option(None, "--pushgateway", help="Also push the metrics to this Prometheus Pushgateway URL."),
        json_path: Optional[str] = typer.Option(None, "--json", help="Write the result JSON to PATH ('-' for stdout)."),
    ) -> None:
        """Train MODEL with a custom loop and report examples/s, step-time percentiles, input wait, memory.

        Cells that fail (out of memory, NaN loss, unsupported precision) are reported and the sweep
        continues; the exit status is then 3. Strategies needing absent GPUs are skipped with the reason.
        """
        from edgebench.cli._common import console, split_csv, split_ints
        from edgebench.errors import BadInput, InfraError
        from edgebench.train.settings import PIPELINES, PRECISIONS, STRATEGIES, XLA_CHOICES
        from edgebench.train.sweep import failure_summary, run_train_baseline

        kw: dict[str, Any] = {"model": model}
        if size is not None:
            kw["size"] = size
        if batch_sizes is not None:
            kw["batch_sizes"] = tuple(split_ints(batch_sizes, option="--batch-sizes"))
        if precision is not None:
            kw["precisions"] = tuple(split_csv(precision, option="--precision", allowed=tuple(PRECISIONS)))
        if xla is not None:
            kw["xla"] = tuple(split_csv(xla, option="--xla", allowed=tuple(XLA_CHOICES)))
        if strategy is not None:
            kw["strategies"] = tuple(split_csv(strategy, option="--strategy", allowed=STRATEGIES))
        if input_pipeline is not None:
            kw["input_pipelines"] = tuple(split_csv(input_pipeline, option="--input-pipeline", allowed=PIPELINES))
        if profile_steps is not None:
            items = split_csv(profile_steps, option="--profile-steps")
            try:
                kw["profile_steps"] = tuple(int(v) for v in items)
            except ValueError:
                raise BadInput(f"--profile-steps: {profile_steps!r} is not START,END (two integers)") from None
            if len(kw["profile_steps"]) != 2:
                raise BadInput(f"--profile-steps: {profile_steps!r} is not START,END (two integers)")
        for name, value in (("steps", steps), ("warmup_steps", warmup_steps), ("data", data), ("seed", seed),
                            ("workers", workers), ("learning_rate", learning_rate), ("profile_dir", profile_dir),
                            ("worker_timeout_s", timeout_s)):
            if value is not None:
                kw[name] = value
        if deterministic:
            kw["deterministic"] = True

        doc = run_train_baseline(TrainSettings(**kw))
        from edgebench.cli._common import finish_result

        finish_result(doc, json_path=json_path, db=db, no_store=no_store, pushgateway=pushgateway)
        if json_path != "-":
            console().print(render_train(doc))
        summary = failure_summary(doc)
        if summary:
            raise InfraError(summary + ("; results were written to " + json_path if json_path and json_path != "-"
                                        else "; results are shown above"))
