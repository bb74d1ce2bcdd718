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
