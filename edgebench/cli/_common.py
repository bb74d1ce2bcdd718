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
    from rich.console import Console

    return Console(stderr=stderr, highlight=False)


class progress_reporter:  # noqa: N801 -- used as a context manager
    """A rich status line on stderr for long stages; yields ``say(msg)``."""

    def __init__(self, title: str) -> None:
        self.title = title
        self._status = None

    def __enter__(self):
        import sys

        from rich.console import Console

        con = Console(stderr=True)
        if con.is_terminal and sys.stderr.isatty():
            self._status = con.status(f"{self.title}: starting")
            self._status.__enter__()

        def say(msg: str) -> None:
            if self._status is not None:
                self._status.update(f"{self.title}: {msg}")

        return say

    def __exit__(self, *exc) -> None:
        if self._status is not None:
            self._status.__exit__(*exc)


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
