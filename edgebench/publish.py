"""Publish a measured result: the one path every measuring command, the matrix and training use.

``publish(doc, PublishOptions(...))`` does, in loss-proof order:

1. ``--json`` (the user's own copy, atomically; ``-`` is stdout),
2. ``--markdown`` (and ``$GITHUB_STEP_SUMMARY`` when set),
3. ``--junit``, ``--model-explorer`` (per-op latency as Model Explorer node data),
4. the results store unless ``--no-store`` (stamps ``run_id`` and rewrites the ``--json`` copy
   with it; a store failure keeps the document in ``<data dir>/unsaved/``),
5. ``--pushgateway``.

A failure in 4 or 5 never loses 1-3 and never stops the caller from showing what was measured:
it comes back in ``PublishOutcome.error`` for the command to raise *after* rendering.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from edgebench.errors import EdgebenchError
from edgebench.rows import Document


@dataclass(frozen=True)
class PublishOptions:
    json_path: str | None = None
    markdown: str | None = None
    junit: str | None = None
    db: str | None = None
    store: bool = True
    pushgateway: str | None = None
    model_explorer: str | None = None
    matrix_hash: str | None = None
    cell: dict[str, Any] | None = field(default=None, hash=False)


@dataclass(frozen=True)
class PublishOutcome:
    doc: Document                      # with ``run_id`` in its meta when stored
    run_id: str | None = None
    error: EdgebenchError | None = None

    def raise_error(self) -> None:
        if self.error is not None:
            raise self.error


def check_store(opts: PublishOptions) -> None:
    """Fail on a bad ``--db`` before anything is measured (exit 2 with the fix), not after."""
    if not opts.store:
        return
    from edgebench.store import Store

    with Store(opts.db):
        pass


def publish(doc: Document, opts: PublishOptions) -> PublishOutcome:
    from edgebench.atomic import write_text
    from edgebench.results import write_json

    if opts.json_path:
        write_json(doc, opts.json_path)
    if opts.markdown or os.environ.get("GITHUB_STEP_SUMMARY"):
        from edgebench.report.markdown import render_markdown

        text = render_markdown(doc)
        if opts.markdown:
            write_text(opts.markdown, text)
        summary = os.environ.get("GITHUB_STEP_SUMMARY")
        if summary:
            with open(summary, "a", encoding="utf-8") as fh:   # appended to, by design (CI step summary)
                fh.write(text + "\n")
    if opts.junit:
        from edgebench.report.junit import render_document_junit

        write_text(opts.junit, render_document_junit(doc))
    if opts.model_explorer:
        from edgebench.report.model_explorer import render_node_data

        for path, text in render_node_data(doc, opts.model_explorer).items():
            write_text(path, text)
    run_id = None
    error: EdgebenchError | None = None
    if opts.store:
        from edgebench.store import save_or_keep

        try:
            run_id = save_or_keep(None, doc, db=opts.db, matrix_hash=opts.matrix_hash, cell=opts.cell)
        except EdgebenchError as err:
            error = err
        if run_id:
            doc = doc.with_meta(run_id=run_id)
            if opts.json_path and opts.json_path != "-":
                write_json(doc, opts.json_path)   # now with its run id
    if opts.pushgateway:
        from edgebench.export import push_result

        try:
            push_result(doc.to_dict(), opts.pushgateway, run_id=run_id)
        except EdgebenchError as err:
            error = error or err
    return PublishOutcome(doc=doc, run_id=run_id, error=error)
