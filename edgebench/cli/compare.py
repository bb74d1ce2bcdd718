"""``edgebench compare A B --data ...``: the same inputs through two models; A is the reference."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from edgebench.cli._common import console, deliver, progress_reporter
from edgebench.cli._options import (
    OutputKindOpt,
    DbOpt,
    DelegateOpt,
    InputShapeOpt,
    JsonOpt,
    MarkdownOpt,
    NoSandboxOpt,
    NoStoreOpt,
    PushgatewayOpt,
    SignatureOpt,
    StateOpt,
    StreamThresholdOpt,
    ThreadsOpt,
    TrustModelOpt,
    VerboseOpt,
    WideOpt,
    publish_options,
    source_options,
)
from edgebench.cli._options import check_state
from edgebench.judge.drift import parse_output_kind
from edgebench.convert_and_compare.pipeline import PairSettings, compare_pair, raise_for_compare
from edgebench.report.publish import check_store
from edgebench.report.terminal.compare import render_compare
from edgebench.targets.base import DEFAULT_DELEGATE


def register(app: typer.Typer) -> None:
    d = PairSettings(a="", b="")

    @app.command("compare")
    def compare_cmd(
        a: Annotated[str, typer.Argument(help="Reference: a .tflite file or a SavedModel folder (run with TF).")],
        b: Annotated[str, typer.Argument(help="Compared model: a .tflite file or a SavedModel folder.")],
        data: Annotated[Optional[str], typer.Option(
            "--data", help="Inputs: .npz (optional 'labels'), .npy, image folder or 'synthetic'.")] = None,
        samples: Annotated[int, typer.Option("--samples", "-n", help="Use the first N samples.")] = d.samples,
        preprocess: Annotated[str, typer.Option(
            "--preprocess", help="Image folders: scale01, mobilenet, imagenet-caffe, none.")] = d.preprocess,
        threads: ThreadsOpt = None,
        delegate: DelegateOpt = DEFAULT_DELEGATE,
        class_output: Annotated[Optional[str], typer.Option(
            "--class-output", help="Output holding class scores.")] = None,
        output_kind: OutputKindOpt = None,
        json_path: JsonOpt = None,
        markdown: MarkdownOpt = None,
        db: DbOpt = None,
        no_store: NoStoreOpt = False,
        pushgateway: PushgatewayOpt = None,
        wide: WideOpt = False,
        verbose: VerboseOpt = False,
        signature: SignatureOpt = None,
        input_shape: InputShapeOpt = None,
        trust_model: TrustModelOpt = False,
        no_sandbox: NoSandboxOpt = False,
        state: StateOpt = d.state,
        stream_threshold: StreamThresholdOpt = d.stream_threshold,
    ) -> None:
        """Drift (max/mean abs, RMSE, rel L2, cosine, PSNR, NaN/Inf) and top-k agreement of B against A."""
        parse_output_kind(output_kind)     # a bad --output-kind is exit 2 before anything runs
        settings = PairSettings(a=a, b=b, data=data, samples=samples, preprocess=preprocess, threads=threads,
                                delegate=delegate, class_output=class_output, output_kind=output_kind,
                                source=source_options(signature, input_shape, trust_model=trust_model),
                                state=check_state(state), stream_threshold=stream_threshold)
        opts = publish_options(json_path=json_path, db=db, no_store=no_store, pushgateway=pushgateway,
                               markdown=markdown)
        check_store(opts)
        with progress_reporter("compare") as say:
            doc = compare_pair(settings, progress=say)
        width = console().width
        doc = deliver(doc, opts, lambda x: render_compare(x, width=width, wide=wide, verbose=verbose), json_path=json_path)
        raise_for_compare(doc)
