"""``edgebench convert-and-compare SRC``: convert, run TF + every target on the same inputs, gate."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer


def register(app: typer.Typer) -> None:
    from edgebench.convert import INT8_IO, PRECISION_NAMES
    from edgebench.pipeline import CompareSettings

    d = CompareSettings(src="")

    @app.command("convert-and-compare")
    def cac_cmd(
        src: str = typer.Argument(..., help="SavedModel folder, .keras file, or reference model name."),
        precision: str = typer.Option(",".join(PRECISION_NAMES), "--precision", "-p", help="Comma-separated: fp32,fp16,int8,dynamic."),
        targets: str = typer.Option("host", "--targets", "-t", help="Comma-separated: host, adb:SERIAL, adb:all (TF reference always runs)."),
        data: Optional[str] = typer.Option(None, "--data", help="Evaluation data (.npz with optional 'labels', .npy, image folder, or 'synthetic'); also calibrates INT8 unless --calibration-data."),
        calibration_data: Optional[str] = typer.Option(None, "--calibration-data", help="Separate calibration data for INT8."),
        samples: int = typer.Option(d.eval_samples, "--samples", "-n", help="Evaluation samples (first N of the data)."),
        calibration_samples: int = typer.Option(d.calibration_samples, "--calibration-samples"),
        int8_io: str = typer.Option(d.int8_io, "--int8-io", help="INT8 model input/output type: float or int8."),
        preprocess: str = typer.Option(d.preprocess, "--preprocess", help="Image folders: scale01, mobilenet, imagenet-caffe, none."),
        size: str = typer.Option(d.size, "--size", help="Reference models: tiny or full."),
        out: Optional[str] = typer.Option(None, "--out", "-o", help="Output folder for .tflite files, inputs.npz and manifest."),
        benchmark_binary: Optional[str] = typer.Option(None, "--benchmark-binary", help="Path of Google's android_aarch64_benchmark_model for devices without Python (or $EDGEBENCH_BENCHMARK_MODEL)."),
        threads: Optional[int] = typer.Option(None, "--threads", help="Interpreter threads (default: runtime default)."),
        delegate: str = typer.Option(d.delegate, "--delegate", help="xnnpack or none."),
        runs: Optional[int] = typer.Option(None, "--runs", help="Force this many timed runs per row (default: >= 662 and >= --min-time)."),
        min_time: float = typer.Option(d.min_time_s, "--min-time", help="Minimum timed seconds per row."),
        class_output: Optional[str] = typer.Option(None, "--class-output", help="Output holding class scores (for top-k / accuracy)."),
        max_accuracy_drop: Optional[float] = typer.Option(None, "--max-accuracy-drop", help="Gate: max task top-1 drop vs TF, in percentage points."),
        min_psnr: Optional[float] = typer.Option(None, "--min-psnr", help="Gate: min worst-output PSNR (dB)."),
        max_p99_ms: Optional[float] = typer.Option(None, "--max-p99-ms", help="Gate: max p99 latency (ms)."),
        min_size_reduction: Optional[float] = typer.Option(None, "--min-size-reduction", help="Gate: min size reduction vs FP32 (%)."),
        gate: Optional[Path] = typer.Option(None, "--gate", help="YAML with per-precision thresholds."),
        json_path: Optional[str] = typer.Option(None, "--json", help="Write the full result JSON to PATH ('-' for stdout)."),
        markdown: Optional[str] = typer.Option(None, "--markdown", help="Write a PR-comment-ready Markdown table to PATH."),
        junit: Optional[str] = typer.Option(None, "--junit", help="Write JUnit XML (one case per precision x target x threshold)."),
        db: Optional[str] = typer.Option(None, "--db", help="Results database (path or SQLAlchemy URL; default $EDGEBENCH_DB or the user data dir)."),
        no_store: bool = typer.Option(False, "--no-store", help="Do not write the result to the results database."),
        pushgateway: Optional[str] = typer.Option(None, "--pushgateway", help="Also push the metrics to this Prometheus Pushgateway URL."),
    ) -> None:
        """Convert SRC, run the TF reference and every precision x target on ONE input set, report and gate.

        Exit codes: 0 passed, 1 a gate threshold missed, 2 bad input, 3 a target failed (its rows say FAILED;
        everything else is still reported and saved).
        """
        from edgebench.cli._common import console, finish_result, progress_reporter, split_csv
        from edgebench.gate import Thresholds, load_gate_file
        from edgebench.pipeline import convert_and_compare
        from edgebench.report.table import render_compare

        from edgebench.cli.convert import _size

        if int8_io not in INT8_IO:
            from edgebench.errors import BadInput

            raise BadInput(f"--int8-io {int8_io}: use float or int8")
        settings = CompareSettings(
            src=src,
            precisions=tuple(split_csv(precision, option="--precision", allowed=PRECISION_NAMES)),
            targets=tuple(split_csv(targets, option="--targets")),
            data=data, calibration_data=calibration_data, eval_samples=samples,
            calibration_samples=calibration_samples, int8_io=int8_io, out_dir=out, preprocess=preprocess,
            size=_size(size), threads=threads, delegate=delegate, runs=runs, min_time_s=min_time,
            class_output=class_output, benchmark_binary=benchmark_binary,
            thresholds=Thresholds(max_accuracy_drop, min_psnr, max_p99_ms, min_size_reduction),
            gate_file=load_gate_file(gate) if gate else None,
        )
        with progress_reporter("convert-and-compare") as say:
            doc = convert_and_compare(settings, progress=say)
        finish_result(doc, json_path=json_path, db=db, no_store=no_store, pushgateway=pushgateway,
                      markdown=markdown, junit=junit)
        if json_path != "-":
            console().print(render_compare(doc))
        raise_for_compare(doc)


def raise_for_compare(doc: dict) -> None:
    """Exit-code policy: a failed target row -> 3 (infra); else a missed threshold -> 1."""
    from edgebench.errors import GateFailed, InfraError

    from edgebench.errors import ConversionFailed, Interrupted

    if doc.get("interrupted"):
        done = sum(1 for r in doc.get("rows", []) if r.get("status") == "ok")
        where = f"run {doc['run_id']}" if doc.get("run_id") else "--json output"
        raise Interrupted(f"interrupted (Ctrl-C): {done} of {len(doc.get('rows', []))} rows were measured and "
                          f"kept ({where}); rerun to measure the rest")

    failed = [r for r in doc.get("rows", []) if r.get("status") != "ok"
              and not str(r.get("error", "")).startswith("conversion failed")]
    conv = [r for r in doc.get("rows", []) if str(r.get("error", "")).startswith("conversion failed")]
    gate = doc.get("gate") or {}
    misses = [c for c in gate.get("checks", []) if not c.get("passed")]
    if failed:
        first = failed[0]
        raise InfraError(f"{len(failed)} row(s) FAILED, e.g. {first.get('precision')} on {first.get('target')}: "
                         f"{first.get('error')} (other rows were reported and saved)")
    if conv:
        raise ConversionFailed(f"{conv[0].get('precision')}: {conv[0].get('error')} (other rows were reported and saved)")
    if misses:
        raise GateFailed("gate failed: " + "; ".join(c["message"] for c in misses))
