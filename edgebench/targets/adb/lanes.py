"""Device lanes: run one piece of work per target in parallel, where a lost device fails only
its own lane."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Callable

from edgebench.core.errors import EdgebenchError, InfraError


@dataclass
class LaneOutcome:
    target: Any
    value: Any = None
    error: EdgebenchError | None = None


def run_lanes(targets: list[Any], work: Callable[[Any], Any]) -> list[LaneOutcome]:
    """Run ``work(target)`` for every target in parallel, one thread per device lane.

    An ``EdgebenchError`` (device lost, ...) fails only its own lane; every other lane's value
    is kept. Outcomes come back in the order of ``targets``."""
    outcomes = [LaneOutcome(t) for t in targets]

    def lane(o: LaneOutcome) -> None:
        try:
            o.value = work(o.target)
        except EdgebenchError as exc:
            o.error = exc
        except Exception as exc:  # noqa: BLE001 -- a lane's crash must not lose the others
            o.error = InfraError(f"{getattr(o.target, 'name', o.target)}: internal error "
                                 f"{type(exc).__name__}: {exc}")

    threads = [threading.Thread(target=lane, args=(o,), name=f"lane-{getattr(o.target, 'name', i)}")
               for i, o in enumerate(outcomes)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return outcomes
