"""Warnings under a table, one line per cause.

Every row of a run tends to raise the same warning (four precisions on one CPU share one unstable
machine and one dynamic-shape Flatten), so the terminal groups them: the rows a cause applies to,
then its text once, with the numbers that differ between rows side by side ("XNNPACK took 6/10,
14/18 nodes"). At default verbosity a cause is one line: its finding, the options that fix it, and
``--verbose`` for the rest; ``--verbose``, the JSON and the Markdown keep every word.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Iterable

# A number as a warning prints it: 6, 0.083, 22%, 6/10, 0.0095-0.0096 (one token, so fractions and
# ranges merge whole).
_NUMBER = re.compile(r"\d+(?:\.\d+)?(?:[/\-–]\d+(?:\.\d+)?)?%?")
_SPAN = re.compile(r"(\d+(?:\.\d+)?)[\-–](\d+(?:\.\d+)?)(%?)")
# The options a warning's advice names (the fix a user can type).
_OPTION = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")


@dataclass
class Cause:
    """One cause: the rows it applies to and its text per row (same text but for the numbers)."""

    key: str
    where: list[str] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)

    @property
    def text(self) -> str:
        """The text once; a number that differs between rows is shown for each, in row order."""
        return _merge(self.texts)[0]

    def clauses(self) -> list[str]:
        """The text for one line, split at "; ": differing numbers as ranges, parentheticals that
        hold numbers left out (the per-row figures are in the table, --verbose and the JSON)."""
        split = [_clauses(t) for t in self.texts]
        if len({len(x) for x in split}) != 1:
            split = [[t] for t in self.texts]
        out = []
        for i in range(len(split[0])):
            text = _merge([x[i] for x in split], compact=True)[0]
            out.append(re.sub(r"\s*\([^()]*\d[^()]*\)", "", text))
        return out

    @property
    def options(self) -> list[str]:
        return list(dict.fromkeys(_OPTION.findall(self.texts[0])))


def _merge(texts: list[str], *, compact: bool = False) -> tuple[str, bool]:
    """Texts that differ only in their numbers -> one text with each differing number listed
    ("6/10, 14/18") or, ``compact``, as a range ("CV 17–44%"), and whether any differed."""
    slots = [_NUMBER.findall(t) for t in texts]
    parts = _NUMBER.split(texts[0])
    out, varies = [parts[0]], False
    for i, tail in enumerate(parts[1:]):
        values = list(dict.fromkeys(s[i] for s in slots if i < len(s)))
        varies |= len(values) > 1
        out.append(values[0] if len(values) == 1 else _range(values) if compact else ", ".join(values))
        out.append(tail)
    return "".join(out), varies


def _range(values: list[str]) -> str:
    """'17%', '44%', '30%' -> '17–44%'; ranges widen to span them all ('0.0095-0.0096', '0.031-0.032'
    -> '0.0095–0.032'); fractions and mixed units -> the first two and '…'."""
    ends = []
    for v in values:
        m = _SPAN.fullmatch(v)
        ends += [m.group(1) + m.group(3), m.group(2) + m.group(3)] if m else [v]
    values = ends
    try:
        nums = sorted(values, key=lambda v: float(v.rstrip("%")))
    except ValueError:
        return ", ".join(values[:2]) + (", …" if len(values) > 2 else "")
    lo, hi = nums[0], nums[-1]
    return f"{lo.rstrip('%')}–{hi}" if lo.endswith("%") == hi.endswith("%") else f"{lo}–{hi}"


def group(items: Iterable[tuple[str, ...]]) -> list[Cause]:
    """(where, warning text[, the row's long name]) -> causes in first-seen order. The row's names
    leave the text (a leading ``"int8 on host: "``, ``"the int8 on host run"`` -> ``"the run"``):
    the cause names its rows, so the same finding of four rows is one cause."""
    causes: dict[str, Cause] = {}
    for where, text, *alias in items:
        text = str(text).strip()
        for name in (*alias, where):
            while name and text.startswith(f"{name}: "):
                text = text[len(name) + 2:]
            if name:
                text = text.replace(f"the {name} run", "the run").replace(f"the {name} ", "the run ")
        key = _NUMBER.sub("#", text)
        c = causes.setdefault(key, Cause(key))
        if where not in c.where:
            c.where.append(where)
        c.texts.append(text)
    return list(causes.values())


def _finding(c: Cause) -> str:
    """The finding of a cause for one line: its clauses up to the first that gives advice (one
    that names an option)."""
    clauses = c.clauses()
    found = []
    for text in clauses:
        if _OPTION.search(text):
            break
        found.append(text)
    return "; ".join(found or clauses[:1])


def lines(items: Iterable[tuple[str, ...]], *, verbose: bool = False, width: int | None = None,
          label: str = "warning") -> list[str]:
    """Plain-text lines (the caller escapes and styles them): one per cause, cut to ``width``
    unless ``verbose``."""
    items = list(items)
    everyone = list(dict.fromkeys(it[0] for it in items))
    out = []
    for c in group(items):
        rows = "all rows" if len(everyone) > 2 and c.where == everyone else ", ".join(c.where)
        if verbose:
            out.append(f"{label} ({rows}): {c.text}")
            continue
        finding = _finding(c)
        out.append(_one_line(f"{label} ({rows}): ", finding, c.options, width, more=finding != c.text))
    return out


def _one_line(head: str, finding: str, options: list[str], width: int | None, *, more: bool) -> str:
    """head + finding + the fix options, within ``width``. Untitled clauses of the finding go
    first, then "(--verbose: why)", then options beyond the first two; only then is the
    finding cut (to no less than 20 characters), and the options last."""
    clauses = _clauses(finding)
    while width and len(clauses) > 1 and len(head) + len("; ".join(clauses)) > width - 24:
        # a titled clause ("drift: the run got slower", "left on the CPU interpreter: SHAPE")
        # is the finding; untitled ones ("took 7/12 nodes", "heat ... changed") go first, last first
        plain = [i for i, c in enumerate(clauses) if ": " not in c]
        clauses.pop(plain[-1] if plain else -1)
        more = True
    finding = "; ".join(clauses)

    def line(text: str, opts: list[str], why: bool) -> str:
        fix = f" — fix: {' '.join(opts)}" if opts else ""
        return f"{head}{text}{fix}{' (--verbose: why)' if why else ''}"

    tries = [(options, more), (options, False), (options[:2], False)]
    for opts, why in tries:
        if not width or len(line(finding, opts, why)) <= width:
            return line(finding, opts, why)
    for opts, why in ((options[:2], True), (options[:2], False), (options[:1], False)):
        room = width - len(line("", opts, why)) - 2
        if room >= 30:      # "…" says there is more; --verbose shows it
            return line(_words_within(finding, room) + " …", opts, why)
    # no room to shorten: the whole finding, which the terminal wraps between words
    return line(finding, options[:1], more)


def _words_within(text: str, room: int) -> str:
    """The words of ``text`` that fit ``room`` characters -- cut between words, never inside one
    (a number or a name is shown whole or not at all)."""
    out = ""
    for word in text.split(" "):
        nxt = f"{out} {word}" if out else word
        if len(nxt) > room:
            break
        out = nxt
    return out.rstrip(",;:") or text.split(" ", 1)[0]


def _clauses(text: str) -> list[str]:
    """``text`` split at "; " outside parentheses (a "(median ...; trend ...)" stays whole)."""
    out, depth, cur = [], 0, []
    i = 0
    while i < len(text):
        ch = text[i]
        depth += (ch == "(") - (ch == ")")
        if depth <= 0 and text.startswith("; ", i):
            out.append("".join(cur))
            cur, i = [], i + 2
            continue
        cur.append(ch)
        i += 1
    out.append("".join(cur))
    return out
