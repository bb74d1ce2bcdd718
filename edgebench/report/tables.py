"""The inference results table, defined once: which columns, in which order, how important each
is, and every cell's text -- built from typed rows and the metric registry. The terminal,
Markdown and HTML renderers only draw it (escaping, emphasis, fitting a terminal's width); none of
them picks columns or formats a number itself.

A column with no value in any row is left out of Markdown and HTML and dropped first from a
terminal. An invalid p99 (fewer samples than its confidence interval needs) carries the one
marker ``INVALID_MARK`` everywhere, explained by the table's legend.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from edgebench.core.formats import fmt_metric
from edgebench.core.latency import MIN_SAMPLES
from edgebench.rows.metrics import BY_KEY, REGISTRY
from edgebench.judge.outcome import TOP1_CHANGE, precision_label, row_verdict
from edgebench.rows import Document, InferenceRow

INVALID_MARK = "†"
NONFINITE = "n/a"


@dataclass(frozen=True)
class Context:
    """What a cell may need beyond its row: the document's gate and whether the row is the reference."""

    gate: Mapping[str, Any] | None
    reference: bool
    run_id: str | None = None


@dataclass(frozen=True)
class Column:
    key: str
    label: str
    priority: int                          # 0 = always shown; higher = dropped first on a narrow terminal
    cell: Callable[[InferenceRow, Context], str]
    text: bool = False                     # left-aligned prose or names (else a right-aligned number)
    legend: str = ""                       # what the header means, when it is not obvious


def _metric(key: str) -> Callable[[InferenceRow, Context], str]:
    m = BY_KEY[key]
    return lambda r, _c: fmt_metric(m.unit, m.value(r))


def _nonfinite(r: InferenceRow) -> bool:
    return bool(r.worst and (r.worst.nonfinite or r.worst.ref_nonfinite))


def _drift(key: str) -> Callable[[InferenceRow, Context], str]:
    m = BY_KEY[key]
    return lambda r, _c: NONFINITE if _nonfinite(r) else fmt_metric(m.unit, m.value(r))


def _p99(r: InferenceRow, _c: Context) -> str:
    m = BY_KEY["p99_ms"]
    text = fmt_metric(m.unit, m.value(r))
    return text + INVALID_MARK if m.valid(r) is False and text != "-" else text


def _agree(r: InferenceRow, _c: Context) -> str:
    v = r.accuracy.top1_agreement if r.accuracy else None
    if v is None and r.detection_record is not None:
        v = r.detection_record.box_agreement
    return fmt_metric("fraction", v)


def _precision(r: InferenceRow, c: Context) -> str:
    label = precision_label(r) if r.precision else ("reference" if c.reference else "-")
    return label + " (ref)" if c.reference and r.precision else label


def _target(r: InferenceRow, _c: Context) -> str:
    t = str(r.target or "-")
    if r.runtime_api == "compiled":
        t += f" [{r.accelerator or 'cpu'}{' ' + r.gpu_precision if r.gpu_precision else ''}]"
    return t


def _samples(r: InferenceRow, _c: Context) -> str:
    return "-" if r.latency is None or r.latency.samples is None else str(r.latency.samples)


# Registry metrics with a place (and sometimes a cell) of their own below; any other inference metric
# of the registry follows them automatically, in registry order, with its label, unit and priority.
_PLACED = ("size_bytes", "size_reduction_pct", "p50_ms", "p90_ms", "p99_ms", "mean_ms", "qps", "top1",
           "top1_drop_pp", "psnr_db", "cosine")

# Order = the order of the columns in every output. The product's answer first: size reduction,
# p50/p99, the accuracy change and the verdict always fit 80 columns.
INFERENCE_COLUMNS: tuple[Column, ...] = (
    Column("run", "run", 8, lambda r, c: (c.run_id or "-")[:12], text=True),
    Column("model", "model", 7, lambda r, c: str(r.model or "-"), text=True),
    Column("precision", "precision", 0, _precision, text=True),
    Column("target", "target", 0, _target, text=True),
    Column("device", "device", 6, lambda r, c: str(r.device_model or "-"), text=True),
    Column("llm_tokens", "tokens", 0, lambda r, c: r.llm.shape if r.llm is not None else "-", text=True,
           legend="tokens = prefill + decode tokens of an llm-bench row; its numbers are medians over processes"),
    Column("size_bytes", BY_KEY["size_bytes"].label, 3, _metric("size_bytes")),
    Column("size_reduction_pct", BY_KEY["size_reduction_pct"].label, 0, _metric("size_reduction_pct")),
    Column("p50_ms", BY_KEY["p50_ms"].label, 0, _metric("p50_ms")),
    Column("p90_ms", BY_KEY["p90_ms"].label, 8, _metric("p90_ms")),
    Column("p99_ms", BY_KEY["p99_ms"].label, 0, _p99,
           legend=f"{INVALID_MARK} p99 from fewer than {MIN_SAMPLES['p99']} samples: not valid (raise --runs or "
                  "--min-time)"),
    Column("qps", BY_KEY["qps"].label, 6, _metric("qps")),
    Column("samples", "samples", 8, _samples),
    Column("top1", BY_KEY["top1"].label, 4, _metric("top1")),
    Column("top1_drop_pp", TOP1_CHANGE, 0, _metric("top1_drop_pp"),
           legend=f"{TOP1_CHANGE} = top-1 minus the reference's (negative: accuracy lost)"),
    Column("agree", "agree", 5, _agree, legend="agree = top-1 agreement with TF (box agreement for detection)"),
    Column("top5_agree", "top-5 agree", 8, lambda r, c: fmt_metric("fraction", r.accuracy.top5_agreement
                                                                     if r.accuracy else None)),
    Column("psnr_db", BY_KEY["psnr_db"].label, 2, _drift("psnr_db"),
           legend="PSNR dB = the worst output's PSNR against the reference (n/a: NaN/Inf outputs)"),
    Column("cosine", BY_KEY["cosine"].label, 5, _drift("cosine"),
           legend="cosine = the worst output's cosine similarity with the reference"),
    *(Column(m.key, m.label, m.priority, _metric(m.key)) for m in REGISTRY   # every other inference metric
      if m.row_kind == "inference" and m.key not in _PLACED),
    Column("delegated", "delegated", 7, lambda r, c: r.delegation.cell() if r.delegation else "-",
           legend="delegated = nodes the delegate took / all nodes, partitions"),
    Column("status", "status", 0, lambda r, c: row_verdict(r, c.gate).text, text=True),
)


@dataclass(frozen=True)
class Table:
    """A drawn-anywhere table: columns, one list of cell texts per row, and per row whether its
    verdict is not ok (renderers emphasise those rows)."""

    columns: tuple[Column, ...]
    cells: tuple[tuple[str, ...], ...]
    bad: tuple[bool, ...]

    def legend(self) -> list[str]:
        """The legends of the columns shown (the p99 one only when a p99 is marked)."""
        out = []
        for i, col in enumerate(self.columns):
            if not col.legend or col.legend in out:
                continue
            if col.key == "p99_ms" and not any(row[i].endswith(INVALID_MARK) for row in self.cells):
                continue
            out.append(col.legend)
        return out

    def without_empty(self) -> "Table":
        """Columns with a value in some row (text columns stay while any row names something)."""
        keep = [i for i, col in enumerate(self.columns)
                if col.key in ("precision", "status") or any(row[i] not in ("-", "") for row in self.cells)]
        return Table(tuple(self.columns[i] for i in keep), tuple(tuple(row[i] for i in keep) for row in self.cells),
                     self.bad)


def inference_rows(doc: Document) -> list[tuple[InferenceRow, bool]]:
    """(row, is_reference) for the inference rows of a document, the reference (TF) row first."""
    rows = [(r, r.is_reference) for r in doc.rows if isinstance(r, InferenceRow)]
    ref = doc.reference
    if ref is not None and ref not in [r for r, _ in rows]:
        rows = [(ref, True), *rows]
    return rows


def inference_table(docs: Sequence[Document], *, hide: Sequence[str] = ()) -> Table:
    """The inference rows of one or more documents as one table: every column but ``hide`` (the
    run column only for several documents)."""
    wanted = [c for c in INFERENCE_COLUMNS if c.key not in hide and (c.key != "run" or len(docs) > 1)]
    cells, bad = [], []
    for doc in docs:
        gate = doc.gate
        for r, is_ref in inference_rows(doc):
            ctx = Context(gate=gate, reference=is_ref, run_id=doc.run_id)
            cells.append(tuple(col.cell(r, ctx) for col in wanted))
            bad.append(not row_verdict(r, gate).ok)
    return Table(tuple(wanted), tuple(cells), tuple(bad))
