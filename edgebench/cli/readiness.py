"""``edgebench readiness SRC``: per-SoC NPU compile, the ops each NPU takes, and why the rest fell back."""

from __future__ import annotations

from typing import Optional

import typer

from edgebench.cli._common import console, deliver, progress_reporter, split_csv
from edgebench.cli._options import (
    DbOpt,
    DynamicBatchOpt,
    ImportOpt,
    InputShapeOpt,
    JsonOpt,
    MarkdownOpt,
    NoSandboxOpt,
    NoStoreOpt,
    SignatureOpt,
    StaticBatchOpt,
    WideOpt,
    publish_options,
    source_options,
)
from edgebench.cli._groups import CalibrationGroup, grouped
from edgebench.convert.run import ConvertSettings
from edgebench.readiness.run import DEFAULT_PRECISIONS, ReadinessSettings, raise_for_readiness, readiness
from edgebench.report.html import render_html
from edgebench.report.publish import check_store
from edgebench.report.terminal.readiness import render_readiness


def register(app: typer.Typer) -> None:
    d = ReadinessSettings(convert=ConvertSettings(src=""))

    @app.command("readiness")
    @grouped
    def readiness_cmd(
        src: str = typer.Argument(..., help="SavedModel folder, .keras file, reference model name (converted first, as `convert` does) or a .tflite."),
        soc: str = typer.Option(d.socs, "--soc", help="all (every SoC LiteRT registers) or comma-separated SoCs, e.g. SM8650,MT6989,Tensor_G4,LNL; any SoC a loaded plugin lists (Qualcomm's SM7550) works too."),
        vendor: Optional[str] = typer.Option(None, "--vendor", help="Comma-separated: qualcomm, mediatek, google, intel, samsung (default: all)."),
        precision: str = typer.Option(",".join(DEFAULT_PRECISIONS), "--precision", "-p", help="Sources only: the precisions to convert and check (a .tflite is checked as it is)."),
        data: Optional[str] = typer.Option(None, "--data", help="Calibration data for int8 (as convert: .npz/.npy/image folder/synthetic); also the host run's inputs."),
        conversion: CalibrationGroup = CalibrationGroup(),
        out: Optional[str] = typer.Option(None, "--out", "-o", help="Folder for the converted and the compiled .tflite files."),
        fail_on: Optional[list[str]] = typer.Option(None, "--fail-on", help="CI gate (exit 1): SOC (every op on its NPU and a compile), SOC=PCT (at least PCT % of the ops), a vendor, or all (every target checkable here). Repeatable or comma-separated."),
        compile_timeout: float = typer.Option(d.compile_timeout_s, "--compile-timeout", help="Seconds one compile may take before its process is killed (its row fails)."),
        jobs: int = typer.Option(d.jobs, "--jobs", help="Compiles at once, each in its own process."),
        samples: int = typer.Option(d.host_samples, "--samples", "-n", help="Inputs for the host run of the NPU dispatch path (Intel OpenVINO CPU backend); its drift vs the CPU is over this many, and the table says so."),
        no_gpu: bool = typer.Option(False, "--no-gpu", help="Leave out the GPU readiness row."),
        no_host_run: bool = typer.Option(False, "--no-host-run", help="Do not run the compiled file on this host where LiteRT's NPU dispatch can (Intel OpenVINO CPU backend)."),
        json_path: JsonOpt = None,
        html_path: Optional[str] = typer.Option(None, "--html", help="Write a self-contained HTML report to PATH."),
        markdown: MarkdownOpt = None,
        db: DbOpt = None,
        no_store: NoStoreOpt = False,
        signature: SignatureOpt = None,
        input_shape: InputShapeOpt = None,
        static_batch: StaticBatchOpt = False,
        dynamic_batch: DynamicBatchOpt = False,
        imports: ImportOpt = None,
        wide: WideOpt = False,
        no_sandbox: NoSandboxOpt = False,
    ) -> None:
        """Compile the model ahead of time for each vendor's SoCs on this host: ops on the NPU (N/M,
        partitions), each op left on the CPU with the reason, compiled bytes, seconds, SDK version.

        Exit codes: 0 answered (whatever the answers), 1 a --fail-on rule failed, 2 bad input,
        3 a compile process crashed or hung (its row says so; the others are kept).
        """

        precisions = tuple(split_csv(precision, option="--precision"))
        source = source_options(signature, input_shape, imports, static_batch=static_batch, dynamic_batch=dynamic_batch)
        settings = ReadinessSettings(
            convert=conversion.settings(src, precisions=precisions, data=data, out=out, source=source),
            socs=soc, vendors=vendor, compile_timeout_s=compile_timeout, gpu=not no_gpu,
            host_run=not no_host_run, host_samples=samples, fail_on=tuple(fail_on or ()), jobs=jobs)
        settings.validate()
        extra = (("--html", lambda doc: {html_path: _html(doc)}),) if html_path else ()
        opts = publish_options(json_path=json_path, db=db, no_store=no_store, markdown=markdown, extra_files=extra)
        check_store(opts)
        with progress_reporter("readiness") as say:
            doc = readiness(settings, progress=say)
        width = console().width
        doc = deliver(doc, opts, lambda d: render_readiness(d, width=width, wide=wide), json_path=json_path)
        raise_for_readiness(doc)


def _html(doc) -> str:
    return render_html(doc)
