"""``edgebench readiness``: one row per (precision, vendor, SoC), then why each op stayed on the CPU."""

from __future__ import annotations

import re
from pathlib import PurePosixPath
from typing import Any, Mapping

from edgebench.report.readiness import COLUMNS, details, headline, table, unchecked_lines
from edgebench.report.terminal._cells import as_document, e
from edgebench.report.terminal.fit import Col, fit_tables
from edgebench.rows import Document

_NUMERIC = ("on NPU", "compiled", "s", "p50 ms")
_IDENTITY = ("precision", "target")
_LONG_PATH = 48     # a library path longer than this is shown by its file name (--json keeps it whole)


def _short_paths(line: str) -> str:
    """A line under the table with long file paths cut to '…/NAME': a path is one word, and a word
    wider than the terminal would be folded mid-word."""
    return re.sub(r"\S*/\S+", lambda m: m.group() if len(m.group()) <= _LONG_PATH
                  else "…/" + PurePosixPath(m.group()).name, line)


# lines kept whole (report/terminal/fit.py ``Col.whole``): every header ("vs CPU"), a target such as
# "IntelOpenVINO LNL"; "left on CPU" at most two lines ("left on" over "CPU", never three), which at
# 80 columns keeps the column on screen
_WHOLE = {"target": len("IntelOpenVINO LNL"), "left on CPU": len("left on")}


def readiness_tables(doc: Document, title: str, *, width: int | None = None, wide: bool = False) -> list:
    """The answer through the width engine (report/terminal/fit.py: precision and target stay,
    columns dropped on a narrow terminal are named under it); ``results show`` draws it too.

    First the headline per vendor (``report.readiness.headline``), then one line per vendor whose
    targets cannot be checked here (the library it lacks, how to install it), then the table of the
    targets that were checked, problems first."""
    headers, body = table(doc, fold=True)
    prio = dict(COLUMNS)
    cols = [Col(h, num=h in _NUMERIC, identity=h in _IDENTITY, priority=prio[h], whole=_WHOLE.get(h, len(h)))
            for h in headers]
    head = [f"[bold]{e(title)}[/]"] + [e(line) for line in headline(doc)] \
        + [e(_short_paths(line)) for line in unchecked_lines(doc)]
    if not body:
        return head
    return head + list(fit_tables("", cols, body, width=width, wide=wide))


def readiness_lines(doc: Document) -> list:
    """The lines under the table (why ops stayed on the CPU, notes, the verdict)."""
    return [e(_short_paths(line)) for line in details(doc, fold=True)]


def render_readiness(doc: Document | Mapping[str, Any], *, width: int | None = None, wide: bool = False) -> list:
    """The headline, the table and the lines that say why ops stayed on the CPU."""
    doc = as_document(doc)
    return readiness_tables(doc, f"NPU readiness: {doc.model or '?'}", width=width, wide=wide) + readiness_lines(doc)
