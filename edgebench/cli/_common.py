"""Option parsing helpers shared by command modules (no business logic here)."""

from __future__ import annotations

from edgebench.errors import BadInput


def split_csv(value: str | None, *, option: str, allowed: tuple[str, ...] | None = None) -> list[str]:
    """'fp32,int8' -> ['fp32', 'int8'], validating against ``allowed``."""
    if value is None:
        return []
    items = [v.strip() for v in value.split(",") if v.strip()]
    if not items:
        raise BadInput(f"{option} is empty; give a comma-separated list" +
                       (f" of {', '.join(allowed)}" if allowed else ""))
    if allowed:
        bad = [v for v in items if v not in allowed]
        if bad:
            raise BadInput(f"{option}: unknown value {bad[0]!r}; use one or more of {', '.join(allowed)}")
    return items


def split_ints(value: str | None, *, option: str) -> list[int]:
    items = split_csv(value, option=option)
    try:
        out = [int(v) for v in items]
    except ValueError:
        raise BadInput(f"{option}: {value!r} is not a comma-separated list of integers") from None
    if any(v <= 0 for v in out):
        raise BadInput(f"{option}: values must be positive integers, got {value!r}")
    return out


def console(stderr: bool = False):
    """A rich console; when writing to a pipe/file (no terminal, no $COLUMNS) tables get 160
    columns instead of rich's 80, so logs and CI output keep one line per row."""
    import os

    from rich.console import Console

    con = Console(stderr=stderr, highlight=False)
    if not con.is_terminal and not os.environ.get("COLUMNS"):
        con = Console(stderr=stderr, highlight=False, width=160)
    return con


class progress_reporter:  # noqa: N801 -- used as a context manager
    """A rich progress bar on stderr (only on a terminal) over a command's stages.

    Yields ``say(msg)``: each call completes the previous stage and starts ``msg``;
    ``say.set_total(n)`` sizes the bar once the number of stages is known.
    """

    def __init__(self, title: str) -> None:
        self.title = title
        self._progress = None
        self._task = None

    def __enter__(self):
        import sys

        from rich.console import Console
        from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

        con = Console(stderr=True)
        if con.is_terminal and sys.stderr.isatty():
            self._progress = Progress(SpinnerColumn(), TextColumn("[bold]{task.description}"), BarColumn(),
                                      TextColumn("{task.completed}/{task.total}"), TimeElapsedColumn(),
                                      console=con, transient=True)
            self._progress.__enter__()
            self._task = self._progress.add_task(f"{self.title}: starting", total=None)
        outer = self

        class _Say:
            started = False

            def __call__(self, msg: str) -> None:
                if outer._progress is None:
                    return
                outer._progress.update(outer._task, description=f"{outer.title}: {msg}",
                                       advance=1 if self.started else 0)
                self.started = True

            def set_total(self, n: int) -> None:
                if outer._progress is not None:
                    outer._progress.update(outer._task, total=n)

        return _Say()

    def __exit__(self, *exc) -> None:
        if self._progress is not None:
            self._progress.__exit__(*exc)


def store_result(doc: dict, *, db: str | None, enabled: bool = True, matrix_hash: str | None = None,
                 cell: dict | None = None) -> str | None:
    """Save a measured result document in the results store; returns its run id (None if disabled).

    Call it AFTER writing the user's ``--json``. A store failure never loses the result: the
    document is first copied to ``<data dir>/unsaved/`` and the InfraError (exit 3) names that
    file and how to import it later (``edgebench results import FILE``).
    """
    if not enabled:
        return None
    from edgebench.store import save_or_keep

    return save_or_keep(None, doc, db=db, matrix_hash=matrix_hash, cell=cell)


def finish_result(doc: dict, *, json_path: str | None, db: str | None = None, no_store: bool = False,
                  pushgateway: str | None = None, markdown: str | None = None, junit: str | None = None) -> str | None:
    """Everything a measuring command does with its result, in loss-proof order.

    1. ``--json`` (the user's copy) 2. ``--markdown`` (+ $GITHUB_STEP_SUMMARY) 3. ``--junit``
    4. the results store (unless ``--no-store``; stamps ``doc["run_id"]``) 5. ``--pushgateway``.
    A failure in 4 or 5 raises InfraError only after 1-3 are written.
    """
    import os
    from pathlib import Path

    from edgebench.results import write_json

    if json_path:
        write_json(doc, json_path)
    if markdown or os.environ.get("GITHUB_STEP_SUMMARY"):
        from edgebench.report.markdown import render_markdown

        text = render_markdown(doc)
        if markdown:
            p = Path(markdown)
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(text)
        summary = os.environ.get("GITHUB_STEP_SUMMARY")
        if summary:
            with open(summary, "a", encoding="utf-8") as fh:
                fh.write(text + "\n")
    if junit:
        from edgebench.gate import Check, Verdict, render_junit

        checks = tuple(Check(**c) for c in (doc.get("gate") or {}).get("checks", []))
        failed = [r for r in doc.get("rows", []) if r.get("status") != "ok"]
        p = Path(junit)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(render_junit(Verdict(checks), failed, suite=f"edgebench.{doc.get('model', 'run')}"))
    run_id = store_result(doc, db=db, enabled=not no_store)
    if run_id:
        doc["run_id"] = run_id
        if json_path and json_path != "-":
            write_json(doc, json_path)   # now with its run id
    if pushgateway:
        from edgebench.export import push_result

        push_result(doc, pushgateway, run_id=run_id)
    return run_id
