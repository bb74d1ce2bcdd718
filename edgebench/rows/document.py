"""The result document: the envelope every producer writes."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

from edgebench import SCHEMA_VERSION, __version__
from edgebench.core.result_file import now_iso
from edgebench.rows._json import STATUSES, _freeze, _i
from edgebench.rows.envelope import Gate, InputsRecord, SourceRecord
from edgebench.rows.row import UNTYPABLE, InferenceRow, Row, row_from_dict, typed_row

# ------------------------------------------------------------------------------------ document


@dataclass(frozen=True)
class Document:
    """A result document: the envelope every producer writes (docs/json.md).

    ``meta`` holds the kind-specific keys (``reference``, ``gate``, ``inputs``, ``manifest``,
    ``timings``, ``settings`` ...); ``reference`` (the TF row of a compare) is typed.
    """

    kind: str
    rows: tuple[Row, ...]
    fingerprint: Mapping[str, Any]
    created: str
    edgebench_version: str
    schema_version: int = SCHEMA_VERSION
    reference: InferenceRow | None = None
    meta: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def new(cls, kind: str, rows: Iterable[Row], fingerprint: Mapping[str, Any], *,
            reference: InferenceRow | None = None, **meta: Any) -> "Document":
        return cls(kind=kind, rows=tuple(rows), fingerprint=_freeze(fingerprint), created=now_iso(),
                   edgebench_version=__version__, reference=reference, meta=_freeze(meta))

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "schema_version": self.schema_version, "kind": self.kind, "created": self.created,
            "edgebench_version": self.edgebench_version, "fingerprint": dict(self.fingerprint),
            "rows": [r.to_dict() for r in self.rows],
        }
        if self.reference is not None:
            out["reference"] = self.reference.to_dict()
        out.update(self.meta)
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Document":
        ver = _i(d.get("schema_version")) or 1
        kind = str(d.get("kind") or "")
        rows = tuple(row_from_dict(r, kind=kind, schema_version=ver) for r in (d.get("rows") or ())
                     if isinstance(r, Mapping))
        ref = d.get("reference")
        reserved = ("schema_version", "kind", "created", "edgebench_version", "fingerprint", "rows", "reference")
        return cls(kind=kind, rows=rows, fingerprint=_freeze(d.get("fingerprint") or {}),
                   created=str(d.get("created") or ""), edgebench_version=str(d.get("edgebench_version") or ""),
                   schema_version=SCHEMA_VERSION,
                   reference=InferenceRow.from_dict(ref, ver) if isinstance(ref, Mapping) else None,
                   meta=_freeze({k: v for k, v in d.items() if k not in reserved}))

    @classmethod
    def read(cls, d: Mapping[str, Any]) -> "Document":
        """``from_dict`` for a document edgebench may not have written (imported, hand-edited): of a
        row too malformed to type only its identity and outcome are kept (``_outcome_only``), and
        such a reference is left out, instead of failing the whole document; a renderer shows what
        can be read."""
        try:
            return cls.from_dict(d)
        except UNTYPABLE:
            pass
        safe = {k: v for k, v in d.items() if k not in ("rows", "reference")}
        if not isinstance(safe.get("fingerprint"), Mapping):
            safe["fingerprint"] = {}
        envelope = cls.from_dict(safe)
        rows = tuple(r for r in (typed_row(x, kind=envelope.kind) or _outcome_only(x, envelope.kind)
                                 for x in (d.get("rows") or ())) if r is not None)
        ref = typed_row(d.get("reference"), kind="reference")
        return dataclasses.replace(envelope, rows=rows, reference=ref if isinstance(ref, InferenceRow) else None)

    def with_meta(self, **meta: Any) -> "Document":
        return dataclasses.replace(self, meta=_freeze({**self.meta, **meta}))

    def with_rows(self, rows: Sequence[Row]) -> "Document":
        return dataclasses.replace(self, rows=tuple(rows))

    def get(self, key: str, default: Any = None) -> Any:
        return self.meta.get(key, default)

    # Typed accessors of the envelope keys every renderer reads (a misspelt one fails loudly).
    @property
    def run_id(self) -> str | None:
        v = self.meta.get("run_id")
        return None if v is None else str(v)

    @property
    def gate(self) -> Mapping[str, Any] | None:
        """The gate result (``gate.Verdict.to_dict``), None when no gate ran."""
        v = self.meta.get("gate")
        return v if isinstance(v, Mapping) else None

    @property
    def inputs(self) -> Mapping[str, Any]:
        """What the rows ran on: path, sha256, samples, source, synthetic, labels ({} if unknown)."""
        v = self.meta.get("inputs")
        return v if isinstance(v, Mapping) else {}

    @property
    def model(self) -> str | None:
        """The document's model name (else None: the rows name theirs)."""
        v = self.meta.get("model")
        return None if v is None else str(v)

    @property
    def report_source(self) -> str | None:
        """Why this run is in a report (``edgebench report``), None outside reports."""
        v = self.meta.get("report_source")
        return None if v is None else str(v)

    @property
    def gate_result(self) -> Gate | None:
        """The gate, typed (its checks as ``GateCheck``); None when no gate ran."""
        return Gate.of(self.meta.get("gate"))

    @property
    def source_record(self) -> SourceRecord:
        return SourceRecord.of(self.meta.get("source"))

    @property
    def inputs_record(self) -> InputsRecord:
        return InputsRecord.of(self.meta.get("inputs"))

    @property
    def saved_models(self) -> tuple[SourceRecord, ...]:
        """``compare A B``: how each SavedModel was read."""
        return tuple(SourceRecord.of(x) for x in self.meta.get("saved_models") or () if isinstance(x, Mapping))

    @property
    def error_sources_text(self) -> str | None:
        """The one line that says whether int8 error comes from weights or activations, if any."""
        v = self.meta.get("error_sources")
        return str(v["text"]) if isinstance(v, Mapping) and v.get("text") else None

    @property
    def data_warnings(self) -> tuple[str, ...]:
        return tuple(str(w) for w in self.meta.get("data_warnings") or ())

    @property
    def manifest(self) -> str | None:
        """The convert manifest this run's files are described by."""
        v = self.meta.get("manifest")
        return None if v is None else str(v)

    @property
    def state_rule_note(self) -> str | None:
        """The state rule's one line (``edgebench.model.state_rule``) when it mattered: some row's model
        keeps state, or the samples were streams; None for stateless runs."""
        rule = self.meta.get("state_rule")
        if not isinstance(rule, Mapping) or not rule.get("line"):
            return None
        rows = [r for r in (*self.rows, self.reference) if isinstance(r, InferenceRow)]
        if rule.get("mode") == "streams":
            return str(rule["line"])
        if any(r.state_record and r.state_record.kind in ("resource_variables", "tf_variables") for r in rows):
            return (f"{rule['line']}; this model keeps variables between calls: if its samples are consecutive "
                    "windows of a stream (a streaming model), evaluate it as deployed with streams (a 'stream_id' "
                    "array or a [streams, windows, ...] axis in --data)")
        if any(r.state for r in rows):
            return str(rule["line"])
        return None

    @property
    def cell(self) -> Mapping[str, Any] | None:
        """A matrix cell's axis values, None outside matrices."""
        v = self.meta.get("cell")
        return v if isinstance(v, Mapping) else None

def _outcome_only(d: Any, kind: str) -> Row | None:
    """What can be read of a row too malformed to type: who/what/where and its outcome (a status
    that is not one of STATUSES is a failure, as ``outcome.row_verdict_of`` reads it)."""
    if not isinstance(d, Mapping):
        return None
    status = str(d.get("status") or "ok")
    keep = {k: d[k] for k in ("model", "precision", "target", "device_model", "error") if isinstance(d.get(k), str)}
    return typed_row({**keep, "status": status if status in STATUSES else "failed"}, kind=kind)
