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

from edgebench.core.formats import fmt_metric
from edgebench.judge.op_types import speedup_by_op_type
from edgebench.rows import Document, InferenceRow, Row, row_from_dict
from edgebench.rows.row import UNTYPABLE

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
    return fmt_metric("pp", drop_pp)


def precision_label(row: Row | Mapping[str, Any]) -> str:
    """The precision as every output names it: ``int8 +1 float`` when tensors were kept float, the
    file's ``precision_detail`` (``tflite_model.MixedFile.text``) when it keeps float ops by itself
    (a typed row or its JSON form)."""
    if isinstance(row, Mapping):
        prec, keep, found = row.get("precision"), row.get("keep_float"), row.get("precision_found")
        detail = row.get("precision_detail")
        keep = keep if isinstance(keep, (list, tuple)) else None
    else:
        prec, keep, found = row.precision, getattr(row, "keep_float", None), getattr(row, "precision_found", None)
        detail = getattr(row, "precision_detail", None)
    label = f"{prec or '-'} +{len(keep)} float" if keep else str(prec or "-")
    detail = detail if isinstance(detail, str) and detail else None
    if not keep and detail and prec and detail.startswith(prec) and (not found or found == prec):
        label = detail    # a mixed file says what it is: "int8, 13 float ops: ELU x9, CONCATENATION x4"
    # the file is another precision than asked (a QAT model's "fp16" is int8; a small model's
    # "dynamic" keeps float weights below the converter's size threshold): every output says so
    if found and prec and found != prec:
        return f"{label} ({detail if detail and detail.startswith(found) else found} file)"
    return label


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
    interrupted: str | None = None    # the signal that stopped the run ("SIGTERM", "Ctrl-C"), if one did
    measured: tuple[int, int] = (0, 0)   # rows measured, rows in all (for an interrupted run)
    undecided: bool = False           # the gate did not pass, and every check that did not pass was undecided

    @property
    def text(self) -> str:
        """One headline line: ``GATE FAILED (2 checks): ...`` / ``gate passed (4 checks)`` / ..."""
        if self.gate == "failed":
            head = "GATE CANNOT JUDGE" if self.undecided else "GATE FAILED"
            return f"{head} ({len(self.failing)} check{'s' * (len(self.failing) != 1)}): " + "; ".join(self.failing)
        if self.interrupted:      # the rows it did not reach are "failed: not run", but the news is the stop
            done, total = self.measured
            return f"interrupted ({self.interrupted}): {done} of {total} rows measured, the rest not run"
        head = {"failed": "a row FAILED", "nonfinite": "NaN/Inf outputs", "silent": "SILENT failure",
                "gate-failed": "GATE FAILED", "skipped": "skipped", "ok": "ok"}[self.state]
        return head + (" — gate passed" if self.gate == "passed" and self.state != "ok" else
                       " (gate passed)" if self.gate == "passed" else "")

    def to_dict(self) -> dict[str, Any]:
        return {"state": self.state, "gate": self.gate, "failing": list(self.failing),
                "diagnose_command": self.diagnose, "interrupted": self.interrupted, "text": self.text}


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
        head = "GATE CANNOT JUDGE: " if all(c.get("undecided") for c in misses) else "GATE FAILED: "
        return RowVerdict("gate-failed", head + ", ".join(dict.fromkeys(
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
    stopped = (str(doc.meta.get("interrupted_by") or "Ctrl-C")) if doc.meta.get("interrupted") else None
    return RunVerdict(state, gate_state, tuple(str(c.get("message") or c.get("metric")) for c in misses),
                      str(diag) if diag else None, stopped, (sum(1 for r in doc.rows if r.ok), len(doc.rows)),
                      undecided=bool(misses) and all(c.get("undecided") for c in misses))


# The renderers of stored JSON (HTML, Prometheus) and the store read documents that may come from
# older versions or other tools: a row too malformed to type gets the verdict its status gives.
_UNTYPABLE = UNTYPABLE


def row_verdict_of(doc: Mapping[str, Any], row: Mapping[str, Any]) -> RowVerdict:
    """``row_verdict`` of a row in its JSON form, within its document (for the gate)."""
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


# ---------------------------------------------------------------------------- where int8 error comes from

WEIGHTS_CLOSE_DB = 3.0       # dynamic (8-bit weights only) within this of int8: the weights are the loss
ACTIVATIONS_GAIN_DB = 6.0    # int16x8 this much better than int8: the 8-bit activations are
EXPLAIN_BELOW_DB = 40.0      # int8 at or above this worst-output PSNR has no loss worth explaining


def error_sources(rows: list[InferenceRow]) -> dict[str, Any] | None:
    """Weight-only vs activation error from rows that isolate them (host rows, worst-output PSNR):
    ``dynamic`` quantizes only the weights (float activations), ``int16x8`` keeps 8-bit weights with
    16-bit activations, ``int8`` quantizes both. None without an int8 row and one of the others, or
    when int8 loses little (worst-output PSNR >= EXPLAIN_BELOW_DB).
    A "dynamic" conversion that is really an fp32 file (weights under the converter's size
    threshold) isolates nothing and is left out."""
    psnr: dict[str, float] = {}
    for r in rows:
        if r.target != "host" or not r.ok or not r.drift or r.keep_float:
            continue
        if r.precision == "dynamic" and r.precision_found not in (None, "dynamic"):
            continue
        values = [d.psnr_db for d in r.drift.values() if d.psnr_db is not None]
        if r.precision in ("int8", "dynamic", "int16x8") and values:
            psnr[r.precision] = min(values)
    if "int8" not in psnr or not ({"dynamic", "int16x8"} & set(psnr)) or psnr["int8"] >= EXPLAIN_BELOW_DB:
        return None
    full, weights, act16 = psnr["int8"], psnr.get("dynamic"), psnr.get("int16x8")
    parts = [f"int8 {full:.1f} dB"]
    if weights is not None:
        parts.append(f"8-bit weights only (dynamic) {weights:.1f} dB")
    if act16 is not None:
        parts.append(f"8-bit weights + 16-bit activations (int16x8) {act16:.1f} dB")
    if weights is not None and weights - full < WEIGHTS_CLOSE_DB:
        cause, fix = "weights", ("the 8-bit weights cause most of the int8 error (quantizing the weights alone "
                                 "loses about as much): keeping activations float or 16-bit will not fix it; "
                                 "quantization-aware training or fp16 will")
    elif act16 is not None and act16 - full >= ACTIVATIONS_GAIN_DB:
        cause, fix = "activations", (f"the 8-bit activations cause most of it (16-bit activations recover "
                                     f"{act16 - full:.1f} dB): int16x8, or keep the worst layers float "
                                     "(edgebench diagnose)")
    else:
        cause, fix = "both", "weights and activations both lose: see edgebench diagnose for the layers"
    return {"cause": cause, "psnr_db": psnr, "text": f"where int8 loses (worst-output PSNR): {'; '.join(parts)} "
                                                     f"-- {fix}"}


# ---------------------------------------------------------------------------- why a quantized row is slower

SLOWER_RATIO = 1.1           # p50 this much above fp32's on the same target needs a reason


def no_integer16_kernels(r: InferenceRow) -> str | None:
    """The real cause when an int16x8 file gets nothing delegated: XNNPACK has no 16x8 kernels."""
    d = r.delegation
    if r.precision != "int16x8" or d is None or d.nodes_delegated != 0 or not d.nodes_total:
        return None
    return (f"{d.delegate or 'the delegate'} has no int16x8 (16-bit activation) kernels: 0/{d.nodes_total} nodes "
            "delegated, every op runs on LiteRT's reference CPU kernels; int16x8 buys accuracy, not speed "
            "(expect it many times slower than int8)")


def slower_reason(r: InferenceRow, base: InferenceRow) -> str | None:
    """'p50 1.5x slower than fp32: <why>' for a row slower than fp32 on the same target, from what
    the rows know (delegation, per-op profiles); None when it is not slower."""
    if not (r.latency and base.latency and r.latency.p50 and base.latency.p50):
        return None
    ratio = r.latency.p50 / base.latency.p50
    if ratio < SLOWER_RATIO:
        return None
    head = f"p50 {ratio:.1f}x slower than fp32 on {r.target}"
    d, b = r.delegation, base.delegation
    why = (f"{d.delegate or 'the delegate'} has no int16x8 kernels ({d.nodes_delegated}/{d.nodes_total} nodes "
           "delegated)" if d is not None and no_integer16_kernels(r) else None)
    if why is None and d and b and d.nodes_total and b.nodes_total and None not in (d.nodes_delegated,
                                                                                      b.nodes_delegated):
        if (d.nodes_delegated / d.nodes_total < b.nodes_delegated / b.nodes_total
                or (d.partitions or 1) > (b.partitions or 1)):
            left = ", ".join(f"{op} x{n}" if n > 1 else op for op, n in sorted(d.undelegated.items())) or "?"
            why = (f"{d.delegate} took {d.nodes_delegated}/{d.nodes_total} nodes in {d.partitions} partition(s) "
                   f"(fp32: {b.nodes_delegated}/{b.nodes_total} in {b.partitions}); left on the CPU interpreter: {left}")
    if why is None and r.op_profile and base.op_profile:
        slow = [x for x in speedup_by_op_type(base.op_profile, r.op_profile, base.op_profile_info, r.op_profile_info)
                if x["speedup"] is not None and x["speedup"] < 1 / SLOWER_RATIO and not x["unstable"]]
        slow.sort(key=lambda x: (x["other_ms"] or 0.0) - (x["base_ms"] or 0.0), reverse=True)
        if slow:
            why = "slower op types (--op-profile): " + ", ".join(
                f"{x['op_type']} {x['base_ms']:.3g} -> {x['other_ms']:.3g} ms" for x in slow[:3])
    return f"{head}: {why or 'the delegate took the same nodes; --op-profile shows which ops are slower'}"
