"""``edgebench train-baseline MODEL``: training throughput sweeps (precision x XLA x strategy x batch x pipeline)."""

from __future__ import annotations

import dataclasses
from typing import Any, Optional

import typer

from edgebench.cli._common import console, deliver, progress_reporter, split_csv, split_ints
from edgebench.cli._options import DbOpt, JsonOpt, NoStoreOpt, PushgatewayOpt, WideOpt, publish_options
from edgebench.core.errors import BadInput, InfraError
from edgebench.report.publish import check_store
from edgebench.report.terminal._cells import as_document
from edgebench.report.terminal.train import render_train
from edgebench.train.settings import PIPELINES, PRECISIONS, STRATEGIES, XLA_CHOICES, TrainSettings
from edgebench.train.sweep import failure_summary, run_train_baseline


def register(app: typer.Typer) -> None:
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
        db: DbOpt = None,
        no_store: NoStoreOpt = False,
        pushgateway: PushgatewayOpt = None,
        json_path: JsonOpt = None,
        wide: WideOpt = False,
    ) -> None:
        """Train MODEL with a custom loop and report examples/s, step-time percentiles, input wait, memory.

        Cells that fail (out of memory, NaN loss, unsupported precision) are reported and the sweep
        continues; the exit status is then 3. Strategies needing absent GPUs are skipped with the reason.
        """

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

        settings = TrainSettings(**kw)
        opts = publish_options(json_path=json_path, db=db, no_store=no_store, pushgateway=pushgateway)
        check_store(opts)

        with progress_reporter("train-baseline") as say:
            measured = run_train_baseline(settings, progress=say)

        width = console().width
        doc = deliver(as_document(measured), opts, lambda d: render_train(d, width=width, wide=wide),
                      json_path=json_path)
        summary = failure_summary(doc.to_dict())
        if summary:
            raise InfraError(summary + ("; results were written to " + json_path if json_path and json_path != "-"
                                        else "; results are shown above"))
