"""Shared cell helpers for the terminal renderers: escaping, numbers, widths."""

from __future__ import annotations

from typing import Any, Mapping

from rich.markup import escape

from edgebench.core.formats import fmt_bytes, fmt_value, num  # noqa: F401 -- re-exported for renderers
from edgebench.rows import Document, InferenceRow


class WholeLine(str):
    """A line that must reach the terminal whole: a command to copy and paste. The CLI prints it
    without markup and with soft wrapping (no newline is ever inserted into it, whatever the
    terminal's width; the terminal itself folds it for display)."""


def e(v: Any) -> str:
    """User data in a rich cell: markup escaped ('[x]' is text, not a style)."""
    return escape("-" if v is None else str(v))


def as_document(doc: Document | Mapping[str, Any]) -> Document:
    return doc if isinstance(doc, Document) else Document.from_dict(doc)


def numeric_column(table, name: str, **kw) -> None:
    """A right-aligned column whose cells never wrap mid-number (rich would fold "0.0644" into
    "0.0" over "644" at 80 columns): the table shrinks other columns instead."""
    table.add_column(name, justify="right", no_wrap=True, **kw)


def text_column(table, name: str, **kw) -> None:
    table.add_column(name, overflow="fold", **kw)


def chunk_columns(widths: list[int], width: int | None, fixed: int) -> list[list[int]]:
    """Split columns (their widths in characters) into groups that each fit ``width`` next to a
    ``fixed``-wide first column: a side-by-side table becomes several tables rather than folding
    numbers. One group when ``width`` is None."""
    if not width:
        return [list(range(len(widths)))]
    groups: list[list[int]] = [[]]
    used = 1 + fixed + 3
    for i, w in enumerate(widths):
        if groups[-1] and used + w + 3 > width:
            groups.append([])
            used = 1 + fixed + 3
        groups[-1].append(i)
        used += w + 3
    return groups


def fit_columns(columns: list[tuple[str, int]], rows: list[list[str]], width: int | None,
                wide: bool = False, flex: dict[int, int] | None = None) -> tuple[list[int], list[str]]:
    """Which columns fit ``width`` without splitting a number or an id.

    ``columns`` are ``(name, priority)`` (0 = always shown, higher = dropped first). ``flex``:
    columns of prose that may wrap at spaces, counted at most this many characters wide. Returns
    the indices to show and the names dropped (the caller says so, and ``--wide`` keeps all)."""
    keep = list(range(len(columns)))
    if wide or not width:
        return keep, []
    flex = flex or {}

    def need(idx: list[int]) -> int:
        total = 1
        for i in idx:
            cells = [len(columns[i][0])] + [len(r[i]) for r in rows]
            total += min(max(cells), flex.get(i, 10 ** 6)) + 3      # padding and the rule on each side
        return total

    dropped: list[str] = []
    order = sorted((i for i in keep if columns[i][1] > 0), key=lambda i: (-columns[i][1], -i))
    for i in order:
        if need(keep) <= width:
            break
        keep.remove(i)
        dropped.append(columns[i][0])
    return keep, dropped


def state_notes(rows) -> list[str]:
    """One line per way state was handled: 'stateful graph (UNIDIRECTIONAL_SEQUENCE_LSTM) in fp32,
    int8: state reset before every sample's outputs ...' (rich markup, escaped)."""
    groups: dict[tuple[str, str], list[str]] = {}
    rows = [r for r in rows if isinstance(r, InferenceRow)]
    labels = [str(r.precision or r.model) for r in rows]
    if len(set(labels)) < len(labels):         # one precision on two targets: "int8 on host, int8 on adb:..."
        labels = [f"{r.precision or r.model} on {r.target}" for r in rows]
    if len(set(labels)) < len(labels):         # compare A B: two fp32 files on the host -- name them by model
        labels = [str(r.model or r.precision) for r in rows]
    for r, label in zip(rows, labels):
        st = r.state_record
        if st is not None:
            key = (", ".join(st.ops) or str(st.kind), str(st.handling or "not reset"))
            groups.setdefault(key, []).append(label)
    return [f"stateful graph ({e(ops)}) in {e(', '.join(who))}: {e(how)}" for (ops, how), who in groups.items()]


def stream_notes(rows) -> list[str]:
    """--state streams: one line per row with per-stream decisions (rich markup, escaped)."""
    out = []
    for r in rows:
        st = r.stream_record if isinstance(r, InferenceRow) else None
        if st is not None and not r.is_reference:
            out.append(f"streams, {e(r.precision or r.model)}: {e(st.text())}")
    return out


def input_mapping_note(r: InferenceRow) -> list[str]:
    """'inputs of int8 matched to the data by converter names: img -> serving_default_img' when a
    model's inputs were not paired with the data's arrays by name (rich markup, escaped)."""
    mp = r.binding
    if mp is None or mp.how in (None, "name", "single input"):
        return []
    pairs = ", ".join(f"{k} -> {n}" for k, n in mp.pairs.items())
    return [f"inputs of {e(r.precision or r.model)} matched to the data by {e(mp.how)}: {e(pairs)}"]
