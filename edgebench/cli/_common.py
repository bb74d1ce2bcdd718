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
