"""One verdict per row and per run, told the same by every output.

A pipeline reads the PR Markdown, the store, the HTML report and Prometheus, not the terminal, so
what a result *means* is decided here once and every renderer draws it:

``row_verdict(row, gate)``   the state of one row, worst first: ``failed`` (the target crashed:
                             infrastructure, exit 3), ``nonfinite`` (NaN/Inf outputs, the row or the
                             reference), ``silent`` (a silent-failure finding: zero / constant output,
                             low cosine, low delegation — ``verdicts.py``), ``gate-failed`` (a gate check
                             of this precision x target missed its threshold), ``skipped``, ``ok``; with
                             one line of text saying why.
``run_verdict(doc)``         the run: the worst row state, the gate (``passed`` / ``failed`` / None when
                             no gate ran) with its failing checks, and the ``edgebench diagnose``
                             command when an accuracy or drift check failed.
``precision_label(row)``     ``int8 +2 float`` for int8 with tensors kept float (``--keep-float``);
                             ``fp16 (int8 file)`` when the file is not the precision asked for.
``TOP1_CHANGE``              the one sign convention for accuracy: the change in percentage points,
                             negative = worse (``top1_change``); the JSON keeps ``top1_drop_pp``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from edgebench.rows import Document, InferenceRow, Row

# Row states, worst first. A run's state is the worst of its rows'.
STATES = ("failed", "nonfinite", "silent", "gate-failed", "skipped", "ok")

# Gate checks whose failure is about accuracy or drift: ``diagnose`` finds the layer behind them.
QUALITY_CHECKS = ("accuracy_drop_pp", "psnr_db", "cosine", "nonfinite_outputs")

# Short names of gate checks for a table cell (the run verdict carries the full messages).
CHECK_NAMES = {"accuracy_drop_pp": "top-1 drop", "psnr_db": "PSNR", "p99_ms": "p99", "cosine": "cosine",
               "size_reduction_pct": "size reduction", "delegated_pct": "delegated",
               "nonfinite_outputs": "NaN/Inf", "reference_nonfinite_outputs": "reference NaN/Inf"}

TOP1_CHANGE = "Δtop-1 pp"    # the column header everywhere: negative = worse


def top1_change(drop_pp: float | None) -> str:
    """The top-1 change vs the reference in percentage points, signed as it reads: a drop of
    63.33 pp is "-63.33", a gain "+0.50" (the JSON keeps ``top1_drop_pp``, positive = worse)."""
    if drop_pp is None:
        return "-"
    return f"{0.0 - float(drop_pp) + 0.0:+.2f}"


def precision_label(row: Row | Mapping[str, Any]) -> str:
    """The precision as every output names it: ``int8 +1 float`` when tensors were kept float
    (a typed row or its JSON form)."""
    if isinstance(row, Mapping):
        prec, keep, found = row.get("precision"), row.get("keep_float"), row.get("precision_found")
        keep = keep if isinstance(keep, (list, tuple)) else None
    else:
        prec, keep, found = row.precision, getattr(row, "keep_float", None), getattr(row, "precision_found", None)
    label = f"{prec or '-'} +{len(keep)} float" if keep else str(prec or "-")
    # the file is another precision than asked (a QAT model's "fp16" is int8; a small model's
    # "dynamic" keeps float weights below the converter's size threshold): every output says so
    return f"{label} ({found} file)" if found and prec and found != prec else label


@dataclass(frozen=True)
class RowVerdict:
    state: str            # one of STATES
    text: str             # one line: "ok", "gate failed: top-1 drop 88.33 pp > max 1 pp", ...

    @property
    def ok(self) -> bool:
        return self.state == "ok"


@dataclass(frozen=True)
class RunVerdict:
    state: str                        # the worst row state (STATES)
    gate: str | None                  # "passed" | "failed" | None (no gate ran)
    failing: tuple[str, ...] = ()     # the failing gate checks' messages
    diagnose: str | None = None       # the command that finds the layer, when quality failed

    @property
    def text(self) -> str:
        """One headline line: ``GATE FAILED (2 checks): ...`` / ``gate passed (4 checks)`` / ..."""
        if self.gate == "failed":
            return f"GATE FAILED ({len(self.failing)} check{'s' * (len(self.failing) != 1)}): " \
                + "; ".join(self.failing)
        head = {"failed": "a row FAILED", "nonfinite": "NaN/Inf outputs", "silent": "SILENT failure",
                "gate-failed": "GATE FAILED", "skipped": "skipped", "ok": "ok"}[self.state]
        return head + (" — gate passed" if self.gate == "passed" and self.state != "ok" else
                       " (gate passed)" if self.gate == "passed" else "")

    def to_dict(self) -> dict[str, Any]:
        return {"state": self.state, "gate": self.gate, "failing": list(self.failing),
                "diagnose_command": self.diagnose, "text": self.text}


def _checks(gate: Mapping[str, Any] | None) -> list[Mapping[str, Any]]:
    if not isinstance(gate, Mapping):
        return []
    return [c for c in gate.get("checks") or () if isinstance(c, Mapping)]


def row_verdict(row: Row, gate: Mapping[str, Any] | None = None) -> RowVerdict:
    """The verdict of one row; ``gate`` is the document's ``gate`` object (checks carry the
    precision and target they judged)."""
    if row.status == "skipped":
        return RowVerdict("skipped", f"skipped: {getattr(row, 'reason', None) or row.error or ''}".rstrip(": "))
    if not row.ok:
        return RowVerdict("failed", f"FAILED: {row.error}" if row.error else "FAILED")
    if not isinstance(row, InferenceRow):
        return RowVerdict("ok", "ok")
    if row.worst is not None and row.worst.nonfinite:
        return RowVerdict("nonfinite", f"NaN/Inf x{row.worst.nonfinite}: drift n/a, fails")
    if row.worst is not None and row.worst.ref_nonfinite:
        return RowVerdict("nonfinite", f"reference NaN/Inf x{row.worst.ref_nonfinite}: drift n/a")
    bad = [f"{v.kind}({v.output})" if v.output else v.kind for v in row.verdicts if v.failed]
    if bad:
        return RowVerdict("silent", "SILENT: " + ", ".join(bad))
    misses = [c for c in _checks(gate) if not c.get("passed", True)
              and c.get("precision") == (row.precision or "?") and c.get("target") == (row.target or "?")]
    if misses and not row.is_reference:
        return RowVerdict("gate-failed", "GATE FAILED: " + ", ".join(dict.fromkeys(
            CHECK_NAMES.get(str(c.get("metric")), str(c.get("metric"))) for c in misses)))
    return RowVerdict("ok", "ok")


def run_verdict(doc: Document) -> RunVerdict:
    """The verdict of a whole run (a result document)."""
    gate = doc.meta.get("gate") if isinstance(doc.meta.get("gate"), Mapping) else None
    states = [row_verdict(r, gate).state for r in doc.rows] or ["ok"]
    state = min(states, key=STATES.index)
    if states and all(s == "skipped" for s in states):
        state = "skipped"
    elif state == "skipped":
        state = "ok"
    misses = [c for c in _checks(gate) if not c.get("passed", True)]
    gate_state = None if gate is None or not _checks(gate) else ("passed" if not misses else "failed")
    if gate is not None and gate.get("passed") is False:
        gate_state = "failed"
    quality = any(str(c.get("metric", "")).startswith(QUALITY_CHECKS + ("verdict:",)) for c in misses) \
        or state in ("silent", "nonfinite")
    diag = doc.meta.get("diagnose_command") if quality else None
    return RunVerdict(state, gate_state, tuple(str(c.get("message") or c.get("metric")) for c in misses),
                      str(diag) if diag else None)


# The renderers of stored JSON (HTML, Prometheus) and the store read documents that may come from
# older versions or other tools: a row too malformed to type gets the verdict its status gives.
_UNTYPABLE = (TypeError, ValueError, AttributeError, KeyError)


def row_verdict_of(doc: Mapping[str, Any], row: Mapping[str, Any]) -> RowVerdict:
    """``row_verdict`` of a row in its JSON form, within its document (for the gate)."""
    from edgebench.rows import row_from_dict

    gate = doc.get("gate") if isinstance(doc.get("gate"), Mapping) else None
    try:
        return row_verdict(row_from_dict(row, kind=doc.get("kind")), gate)
    except _UNTYPABLE:
        status = str(row.get("status") or "ok")
        if status == "ok":
            return RowVerdict("ok", "ok")
        return RowVerdict("skipped" if status == "skipped" else "failed", f"{status.upper()}: {row.get('error')}"
                          if row.get("error") else status.upper())


def run_verdict_of(doc: Mapping[str, Any]) -> RunVerdict:
    """``run_verdict`` of a document in its JSON form (malformed rows: their status decides)."""
    try:
        return run_verdict(Document.from_dict(doc))
    except _UNTYPABLE:
        rows = [r for r in doc.get("rows") or () if isinstance(r, Mapping)]
        states = [row_verdict_of(doc, r).state for r in rows] or ["ok"]
        gate = doc.get("gate") if isinstance(doc.get("gate"), Mapping) else None
        failing = tuple(str(c.get("message")) for c in _checks(gate) if not c.get("passed", True))
        return RunVerdict(min(states, key=STATES.index), None if gate is None else
                          ("failed" if failing or gate.get("passed") is False else "passed"), failing)
