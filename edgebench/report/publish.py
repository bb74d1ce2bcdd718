"""Publish a measured result: the one path every measuring command, the matrix and training use.

``publish(doc, PublishOptions(...))`` does, in loss-proof order:

1. the results store unless ``--no-store`` (stamps ``run_id``; a store failure keeps the document
   in ``<data dir>/unsaved/``),
2. ``--json`` (the user's own copy, atomically, with its run id; ``-`` is stdout),
3. ``--markdown`` (and ``$GITHUB_STEP_SUMMARY`` when set),
4. ``--junit``, ``--model-explorer`` (per-op latency as Model Explorer node data), then a command's
   own files (``extra_files``: diagnose's ``--html`` and ``--model-explorer``),
5. ``--pushgateway``.

Nothing here stops the caller from showing what was measured: every failure comes back in
``PublishOutcome`` for the command to raise *after* rendering. A file that cannot be written
(read-only folder, full disk, a path under a file) is one line naming the option, the path and
why -- exit 2, since the user can choose another path; when the result was not stored (``--no-store``
or a store failure) it is also kept in ``unsaved/`` so nothing measured is lost.
"""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from edgebench.core.atomic import write_text
from edgebench.core.errors import BadInput, EdgebenchError, InfraError
from edgebench.core.paths import data_dir
from edgebench.core.result_file import now_iso, write_json
from edgebench.report.export import push_result
from edgebench.report.junit import render_document_junit
from edgebench.report.markdown import render_markdown
from edgebench.report.model_explorer import render_node_data
from edgebench.rows import Document

if TYPE_CHECKING:
    from edgebench.store.db import Store


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
    # (option, render): render(published doc) -> {path: text}, written like --json
    extra_files: tuple[tuple[str, Callable[[Document], dict[str, str]]], ...] = field(default=(), hash=False)


@dataclass(frozen=True)
class PublishOutcome:
    doc: Document                      # with ``run_id`` in its meta when stored
    run_id: str | None = None
    error: EdgebenchError | None = None          # the store or the Pushgateway (exit 3)
    unwritten: tuple[str, ...] = ()              # one line per output file that could not be written
    kept: str | None = None                      # where an unstored result was kept, if it was
    not_stored: str | None = None                # why it was not stored: "--no-store" or the store's error

    def raise_error(self) -> None:
        lines = list(self.unwritten)
        kept = (f"the result was kept in {self.kept}; store it later with `edgebench results import {self.kept}`"
                if self.kept else None)
        stdout = [i for i, ln in enumerate(lines) if " - (standard output)" in ln]
        if stdout:         # nothing else showed the result: where it is belongs on that line
            where = kept or (f"the result is stored as run {self.run_id} (`edgebench results show {self.run_id} "
                             f"--json FILE` writes it again)" if self.run_id else None)
            if where:
                lines[stdout[0]] += f"; {where}"
                kept = None
        if kept:
            lines.append(kept)
        if self.error is not None:
            if lines:
                raise type(self.error)("; ".join([str(self.error), *lines]))
            raise self.error
        if lines:
            raise BadInput("\n".join(lines))


def check_store(opts: PublishOptions) -> None:
    """Fail on a bad ``--db`` before anything is measured (exit 2 with the fix), not after."""
    if not opts.store:
        return
    from edgebench.store.db import Store

    with Store(opts.db):
        pass


def _why(exc: OSError) -> str:
    return getattr(exc, "reason", None) or exc.strerror or type(exc).__name__


def unwritten_line(option: str, path: str, exc: OSError) -> str:
    """The one line for an output file that could not be written (the result itself is safe)."""
    if path == "-":     # standard output: no table was printed instead of the document
        return (f"could not write {option} - (standard output): {_why(exc)}; free space where it goes or give "
                f"{option} a file path")
    return f"could not write {option} {path}: {_why(exc)}; choose a writable path (the table above is the result)"


def try_write(option: str, path: str, write: Callable[[], Any]) -> str | None:
    """``write()``; None when it worked, else ``unwritten_line`` -- for commands that show their
    result before saying which of its files could not be written."""
    try:
        write()
    except OSError as exc:
        return unwritten_line(option, path, exc)
    return None


def publish(doc: Document, opts: PublishOptions) -> PublishOutcome:
    run_id = None
    error: EdgebenchError | None = None
    if opts.store:

        try:
            run_id = save_or_keep(None, doc, db=opts.db, matrix_hash=opts.matrix_hash, cell=opts.cell)
        except EdgebenchError as err:
            error = err
        if run_id:
            doc = doc.with_meta(run_id=run_id)

    unwritten: list[str] = []

    def attempt(option: str, path: str, write) -> None:
        line = try_write(option, path, write)
        if line:
            unwritten.append(line)

    if opts.json_path:
        attempt("--json", opts.json_path, lambda: write_json(doc, opts.json_path))
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if opts.markdown or summary:

        text = render_markdown(doc)
        if opts.markdown:
            attempt("--markdown", opts.markdown, lambda: write_text(opts.markdown, text))
        if summary:
            def append() -> None:
                with open(summary, "a", encoding="utf-8") as fh:   # appended to, by design (CI step summary)
                    fh.write(text + "\n")

            attempt("$GITHUB_STEP_SUMMARY", summary, append)
    if opts.junit:

        attempt("--junit", opts.junit, lambda: write_text(opts.junit, render_document_junit(doc)))
    if opts.model_explorer:

        for path, text in render_node_data(doc, opts.model_explorer).items():
            attempt("--model-explorer", path, lambda p=path, t=text: write_text(p, t))
    for option, render in opts.extra_files:
        for path, text in render(doc).items():
            attempt(option, path, lambda p=path, t=text: write_text(p, t))
    kept = None
    if unwritten and not run_id and error is None:      # --no-store: the printed table would be all

        try:
            kept = str(keep_unsaved(doc))
        except OSError as exc:
            unwritten.append(f"the result could not be kept in unsaved/ either ({_why(exc)})")
    if opts.pushgateway:

        try:
            push_result(doc.to_dict(), opts.pushgateway, run_id=run_id)
        except EdgebenchError as err:
            error = error or err
    return PublishOutcome(doc=doc, run_id=run_id, error=error, unwritten=tuple(unwritten), kept=kept,
                          not_stored=None if run_id else "--no-store" if not opts.store else
                          str(error) if error is not None else None)


def keep_unsaved(doc: "Document | dict[str, Any]") -> Path:
    """Write a result the database could not take to ``<data dir>/unsaved/KIND-TIME-ID.json``
    (``edgebench results import FILE`` stores it later). Raises OSError if that fails too."""
    if not isinstance(doc, dict):
        doc = doc.to_dict()
    stamp = now_iso().replace(":", "").replace("+0000", "Z")
    path = data_dir() / "unsaved" / f"{doc.get('kind', 'result')}-{stamp}-{uuid.uuid4().hex[:8]}.json"
    write_json(doc, str(path))
    return path


def save_or_keep(store: "Store | None", doc: "Document | dict[str, Any]", *, db: str | None = None,
                 matrix_hash: str | None = None, cell: dict[str, Any] | None = None) -> str:
    """``Store.save`` that never loses the result: on a database error the document is kept with
    ``keep_unsaved`` and the InfraError names the file to import later."""
    from edgebench.store.db import Store  # sqlalchemy: loaded only when a result is stored

    try:
        if store is None:
            with Store(db) as st:
                return st.save(doc, matrix_hash=matrix_hash, cell=cell)
        return store.save(doc, matrix_hash=matrix_hash, cell=cell)
    except (BadInput, InfraError) as err:
        try:
            path = keep_unsaved(doc)
            kept = f"the result was kept in {path}; store it later with `edgebench results import {path}`"
        except OSError as exc:
            kept = f"and the result could not be kept either ({exc}); use --json PATH to keep it"
        raise InfraError(f"result measured but not stored: {err}; {kept}") from None
