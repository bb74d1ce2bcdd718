"""Data shown on a terminal: the one helper that makes a file name, a model name, a device's
answer or an error quoted from a library safe to print.

A file may be named ``\\x1b[31mRED\\x1b[0m.tflite``; printed raw, that name recolours the
terminal (or moves the cursor, sets the window title, hides what follows). A name is data, so
every renderer and message puts it through :func:`printable`, which shows each control character
as the escape a user would type for it -- ``\\x1b`` -- instead of sending it:

- C0 controls (``\\x00``-``\\x1f``: ESC, BEL, backspace, carriage return, tab, newline...), DEL and
  the C1 controls (``\\x80``-``\\x9f``, e.g. ``\\x9b``, a one-byte CSI on some terminals);
- Unicode's bidirectional overrides and isolates (U+202A-U+202E, U+2066-U+2069), which reorder
  what is shown after them ("Trojan Source", CVE-2021-42574);
- a byte of a file name that is not UTF-8 (Python keeps it as a lone surrogate, U+DC80-U+DCFF, which
  no terminal encoding can print): the byte itself, ``\\xff``.

Text stays what it was otherwise; the output is measured by its printed width, so tables built
from it line up.
"""

from __future__ import annotations

import itertools
import re
from typing import Any

# one class: C0, DEL, C1, the bidi overrides/isolates, and lone surrogates (undecodable bytes)
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


_SHORT = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}


def _visible(m: re.Match) -> str:
    if m.group() in _SHORT:
        return _SHORT[m.group()]
    c = ord(m.group())
    if 0xDC80 <= c <= 0xDCFF:          # surrogateescape: the undecodable byte it stands for
        return f"\\x{c - 0xDC00:02x}"
    if c <= 0xFF:
        return f"\\x{c:02x}"
    return f"\\u{c:04x}"


def printable(value: Any) -> str:
    """``str(value)`` with every control character shown as its escape (``\\x1b``), never sent."""
    text = value if isinstance(value, str) else str(value)
    return _UNSAFE.sub(_visible, text) if _UNSAFE.search(text) else text


def printable_lines(text: Any) -> str:
    """:func:`printable` for a message of several lines: its own line breaks are kept."""
    return "\n".join(printable(line) for line in str(text).split("\n"))


# The longest a value from a file or an option may be when quoted in a message, and the longest any
# line edgebench prints as an error may be: a value the user wrote is shown so they can find it, not
# reproduced (a 400-byte YAML alias bomb expanded by ``repr`` was a 39 MB error line).
SHOWN_LIMIT = 200
LINE_LIMIT = 2_000
_MAX_ITEMS = 8          # items of a list / keys of a mapping shown before "..."
_MAX_DEPTH = 3          # nesting shown before "..."


def _bounded_repr(value: Any, budget: int, depth: int, cut: list[bool]) -> str:
    """``repr(value)`` built piece by piece, stopping once ``budget`` characters are out (``cut[0]``
    set when something was left out): the cost is bounded by what is shown, never by the size of
    ``value`` (a shared sub-list repeated a billion times by YAML aliases)."""
    if isinstance(value, (str, bytes, bytearray)):
        if len(value) > budget:
            cut[0] = True
        return repr(value[:budget + 1] if isinstance(value, str) else bytes(value[:budget + 1]))
    if isinstance(value, (list, tuple, set, frozenset, dict)):
        opener, closer = (("{", "}") if isinstance(value, (dict, set, frozenset)) else
                          ("(", ")") if isinstance(value, tuple) else ("[", "]"))
        if depth >= _MAX_DEPTH and len(value):
            cut[0] = True
            return opener + "..." + closer
        items = list(value.items())[:_MAX_ITEMS + 1] if isinstance(value, dict) else \
            list(itertools.islice(value, _MAX_ITEMS + 1))
        parts: list[str] = []
        used = 1
        for i, item in enumerate(items):
            if i >= _MAX_ITEMS or used > budget:
                cut[0] = True
                parts.append("...")
                break
            if isinstance(value, dict):
                k, v = item
                text = (f"{_bounded_repr(k, budget - used, depth + 1, cut)}: "
                        f"{_bounded_repr(v, budget - used, depth + 1, cut)}")
            else:
                text = _bounded_repr(item, budget - used, depth + 1, cut)
            parts.append(text)
            used += len(text) + 2
        if isinstance(value, tuple) and len(value) == 1 and parts:
            parts[0] += ","
        return opener + ", ".join(parts) + closer
    text = repr(value)
    if len(text) > budget:
        cut[0] = True
    return text[:budget + 1]


def shown(value: Any, limit: int = SHOWN_LIMIT, *, quote: bool = True) -> str:
    """A user's value as a message quotes it: its ``repr`` (control characters escaped), cut to
    ``limit`` characters with ``… (N chars)`` / ``… (a list of N items)`` saying how much there was.
    Costs what it shows, whatever the size of ``value``. ``quote=False``: a string as it is (no
    quotes), e.g. a library's reason that quotes the user's text."""
    if not quote and isinstance(value, str):
        text = printable(value[:limit])
        return text if len(value) <= limit else f"{text[:limit]}… ({len(value):,} chars)"
    cut = [False]
    text = printable(_bounded_repr(value, limit, 0, cut))
    if not cut[0] and len(text) <= limit:
        return text
    if len(text) > limit:
        text = text[:limit] + "…"
    if isinstance(value, str):
        return f"{text} ({len(value):,} chars)"
    if isinstance(value, dict):
        return f"{text} (a mapping of {len(value):,} key{'s' * (len(value) != 1)})"
    if isinstance(value, (list, tuple, set, frozenset)):
        return f"{text} (a list of {len(value):,} item{'s' * (len(value) != 1)})"
    return text


def clip_line(text: str, limit: int = LINE_LIMIT) -> str:
    """One printed line, at most ``limit`` characters: the rest is named by its length."""
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text) - limit:,} more chars)"


def clip_message(text: str, limit: int = LINE_LIMIT, max_lines: int = 100) -> str:
    """A message of one or more lines as edgebench prints it: every line through :func:`clip_line`,
    at most ``max_lines`` of them (and ``limit`` x ``max_lines`` characters in all)."""
    lines = str(text).split("\n")
    kept = [clip_line(ln, limit) for ln in lines[:max_lines]]
    if len(lines) > max_lines:
        kept.append(f"… ({len(lines) - max_lines:,} more lines)")
    return "\n".join(kept)
