"""The console every terminal renderer's output is printed on: data never reaches the terminal raw.

``DataConsole`` is a rich ``Console`` that puts every string it renders -- a table cell, a title,
a line, a progress description, an error -- through ``printable`` (edgebench/core/printable.py) before
rich measures and lays it out, and every ``Text`` handed to ``print`` too. A model file named
``\\x1b[31mRED\\x1b[0m.tflite`` shows as that text, in a column as wide as the text; the terminal is
not recoloured. Rich's own styling (colours of a status, the table's borders) is added after this,
so it is untouched. The command line prints everything it shows on one of these.
"""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.text import Text

from edgebench.core.printable import printable, printable_lines


def safe_text(text: Text) -> Text:
    """A rich ``Text`` with its control characters shown as escapes, styles kept."""
    plain = text.plain
    if printable_lines(plain) == plain:
        return text
    cuts = sorted({i for i, c in enumerate(plain) if c != "\n" and printable(c) != c}
                  | {i + 1 for i, c in enumerate(plain) if c != "\n" and printable(c) != c})
    out = Text(end=text.end, justify=text.justify, overflow=text.overflow, no_wrap=text.no_wrap, style=text.style)
    for piece in text.divide(cuts):
        p = piece.plain
        if len(p) == 1 and p != "\n" and printable(p) != p:
            out.append(printable(p), style=piece.spans[0].style if piece.spans else None)
        else:
            out.append_text(piece)
    return out


class DataConsole(Console):
    """A rich Console that shows data's control characters as escapes (see the module doc)."""

    def render_str(self, text: str, *args: Any, **kwargs: Any) -> Text:
        return super().render_str(printable_lines(text), *args, **kwargs)

    def print(self, *objects: Any, **kwargs: Any) -> None:
        super().print(*(safe_text(o) if isinstance(o, Text) else o for o in objects), **kwargs)
