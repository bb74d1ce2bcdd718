"""Every terminal table's width rules, in one place: what a row is stays, nothing is cut.

A renderer describes its columns (:class:`Col`: a header, whether it is a number or text, whether
it says what the row *is*, how dispensable it is) and hands its cells to :func:`fit_tables`, which
returns rich tables that fit the terminal's width by these rules:

- **Nothing is cut.** A number is one line, as wide as its widest cell. Text wraps only between
  words, and a column is never narrower than its longest word -- rich never folds or crops a cell.
  A header wraps between its words too ("size" over "red.").
- **Identity columns stay** (``identity=True``: precision and target, a run id, a window number,
  a device serial): in every table, first.
- **A narrow terminal drops columns, lowest value first** (highest ``priority``; 0 = never dropped)
  and the caption names them -- or, with ``wide``, **every column is shown**: the columns that do not
  fit go to a second (third ...) table under the first, each with the identity columns again.
  When even the must-have columns do not fit one table, they are split the same way, ``wide`` or not.
- A column may keep its short lines whole (``whole``: a cell or header of at most that many columns
  is one line), so a target such as ``tf (/CPU:0)`` or a header such as ``left on CPU`` never wraps.
- Spare width goes to the identity columns, then to text, then to headers of numbers, so names,
  verdicts and headers take fewer lines.

``width`` None (output to a file or a pipe with no ``$COLUMNS``) lays every column on one line.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from rich.cells import cell_len
from rich.console import Group
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from edgebench.core.printable import printable

# what a column costs beyond its text: one space each side and a rule on its right (+1 for the table's left edge)
_PAD = 3


@dataclass(frozen=True)
class Col:
    header: str
    num: bool = False                 # a number: right-aligned, one line, never wrapped
    identity: bool = False            # what the row is: kept in every table, never dropped
    priority: int = 0                 # 0: always shown; higher: hidden first on a narrow terminal
    style: str | None = None          # the column's style (rich)
    whole: int = 0                    # a cell or header line at most this wide is never wrapped


Cell = "str | Text"


def _plain(cell: Any) -> str:
    return cell.plain if isinstance(cell, Text) else _text(cell)


def _text(cell: Any) -> str:
    """A cell as printed: control characters shown (``printable``), no edge spaces (rich would
    count a leading space in a line and fold the word after it)."""
    return "\n".join(printable(ln).strip() for ln in str(cell).split("\n"))


def _words(text: str) -> list[str]:
    return [w for line in text.split("\n") for w in line.split()] or [""]


def _lines(text: str) -> list[str]:
    return text.split("\n") or [""]


def measure(col: Col, cells: Sequence[Any]) -> tuple[int, int]:
    """(narrowest, widest) a column can be drawn without cutting: a number's widest cell for both;
    text from its longest word to its longest line. The header counts with its longest word."""
    texts = [_plain(c) for c in cells]
    head = max((cell_len(w) for w in _words(col.header)), default=1)
    if col.whole:    # a header's short lines stay whole: "left on CPU", "iso ch"
        head = max([head, *(n for ln in _lines(col.header) if (n := cell_len(ln)) <= col.whole)])
    if col.num:      # as wide as its widest number; the header on one line when there is room
        w = max([head, *(cell_len(ln) for t in texts for ln in _lines(t))])
        return w, max(w, cell_len(col.header))
    lo = max([head, *(cell_len(w) for t in texts for w in _words(t))])
    if col.whole:    # short lines stay whole: "tf (/CPU:0)", "left on CPU"
        lo = max([lo, *(n for t in texts for ln in _lines(t) if (n := cell_len(ln)) <= col.whole)])
    hi = max([lo, cell_len(col.header), *(cell_len(ln) for t in texts for ln in _lines(t))])
    return lo, hi


def table_width(widths: Sequence[int]) -> int:
    return sum(widths) + _PAD * len(widths) + 1


@dataclass(frozen=True)
class Fit:
    """Which columns go into which table, and how wide each is."""
    groups: tuple[tuple[int, ...], ...]    # column indices per table (identity first)
    widths: dict[int, int]                 # column index -> width
    hidden: tuple[int, ...]                # columns dropped to fit (not ``wide``)


def plan(cols: Sequence[Col], rows: Sequence[Sequence[Any]], width: int | None, wide: bool = False) -> Fit:
    """The layout :func:`fit_tables` draws (pure; the tests check it against every rule)."""
    span = [measure(c, [r[i] for r in rows]) for i, c in enumerate(cols)]
    ids = [i for i, c in enumerate(cols) if c.identity]
    rest = [i for i, c in enumerate(cols) if not c.identity]
    if width is None:
        return Fit((tuple(ids + rest),), {i: span[i][1] for i in range(len(cols))}, ())

    def fits(idx: Sequence[int]) -> bool:     # data first: a name may wrap between words to keep a number
        return table_width([span[i][0] for i in idx]) <= width

    hidden: list[int] = []
    if not wide:
        order = sorted((i for i in rest if cols[i].priority > 0), key=lambda i: (-cols[i].priority, -i))
        shown = list(rest)
        for i in order:
            if fits(ids + shown):
                break
            shown.remove(i)
            hidden.append(i)
        rest = shown
    groups: list[list[int]] = [[]]
    for i in rest:       # fill each table in order; a column that does not fit starts the next one
        if groups[-1] and not fits(ids + groups[-1] + [i]):
            groups.append([])
        groups[-1].append(i)
    widths: dict[int, int] = {}
    for g in groups:
        idx = ids + g
        w = {i: span[i][0] for i in idx}
        spare = width - table_width(list(w.values()))
        # spare width: identity columns first, then text, then numbers' headers, in column order
        for i in sorted(idx, key=lambda i: (not cols[i].identity, cols[i].num, i)):
            give = max(0, min(spare, span[i][1] - w[i]))
            w[i] += give
            spare -= give
        for i, v in w.items():
            widths[i] = max(widths.get(i, 0), v) if cols[i].identity else v
    # an identity column is as wide in every table (the widest it got); recheck each table still fits
    for g in groups:
        idx = ids + g
        while table_width([widths[i] for i in idx]) > width:
            grown = [i for i in idx if widths[i] > span[i][0]]
            if not grown:
                break
            widths[grown[-1]] -= 1
    return Fit(tuple(tuple(ids + g) for g in groups if g or not rest), widths, tuple(hidden))


def fit_tables(title: str, cols: Sequence[Col], rows: Sequence[Sequence[Any]], *, width: int | None,
               wide: bool = False, row_styles: Sequence[str | None] | None = None,
               caption: Sequence[str] = (), markup_title: bool = False, **table_kw: Any) -> list[Table]:
    """``rows`` (plain strings, escaped here, or rich ``Text``) as one or more rich tables that fit
    ``width`` by the module's rules. ``caption`` lines (rich markup) go under the last table, after
    the line naming what was hidden; the title is data unless ``markup_title``."""
    layout = plan(cols, rows, width, wide)
    styles = list(row_styles or [None] * len(rows))
    out: list[Table] = []
    head = title if markup_title else escape(title)
    for n, idx in enumerate(layout.groups):
        more = f" ({n + 1} of {len(layout.groups)})" if len(layout.groups) > 1 else ""
        t = Table(title=head + escape(more) if head else None, header_style="bold", **table_kw)
        for i in idx:
            c = cols[i]
            # no no_wrap even for numbers: rich applies it to the header too, which would crop
            # "size red." to "size"; a number cannot wrap anyway, its column is as wide as it
            t.add_column(c.header, justify="right" if c.num else "left", overflow="fold",
                         width=layout.widths[i], style=c.style)
        for r, style in zip(rows, styles):
            t.add_row(*(r[i] if isinstance(r[i], Text) else escape(_text(r[i])) for i in idx), style=style)
        out.append(t)
    notes = list(caption)
    if layout.hidden:
        names = ", ".join(cols[i].header for i in layout.hidden)
        notes.insert(0, escape(f"hidden to fit the terminal: {names} (--wide shows every column)"))
    if notes:
        out[-1].caption = "\n".join(notes)
        out[-1].caption_justify = "left"
    return out


def group(tables: Sequence[Table]) -> Any:
    """Several tables as one renderable (for a renderer whose callers print one thing)."""
    return tables[0] if len(tables) == 1 else Group(*tables)
