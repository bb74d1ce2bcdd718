"""``edgebench train-baseline``: one line per training cell, then naive vs optimized pipelines."""

from __future__ import annotations

from typing import Any, Mapping

from rich.console import Group
from rich.text import Text

from edgebench.report.terminal._cells import as_document, fmt_bytes, fmt_value
from edgebench.report.terminal.fit import Col, fit_tables
from edgebench.rows import Document, TrainRow
from edgebench.targets.base import P99_MIN_SAMPLES


# (column, justify, drop priority: 0 = always shown, higher = dropped first on a narrow terminal)
TRAIN_COLUMNS = (("strategy", "left", 0), ("w", "right", 4), ("precision", "left", 0), ("xla", "left", 1),
                 ("batch", "right", 0), ("pipeline", "left", 1), ("status", "left", 0), ("ex/s", "right", 0),
                 ("p50 ms", "right", 0), ("p99 ms", "right", 2), ("wait %", "right", 3), ("startup ms", "right", 5),
                 ("peak mem", "right", 5), ("allred ms", "right", 6), ("loss", "right", 3))


def render_train(doc: Document | Mapping[str, Any], *, width: int | None = None, wide: bool = False) -> Group:
    """One line per cell (reasons as numbered notes), then naive vs optimized pipelines. At a
    narrow ``width`` low-priority columns are dropped (and named) instead of splitting a value."""
    doc = as_document(doc)
    rows = [r for r in doc.rows if isinstance(r, TrainRow)]
    model = rows[0].model if rows else "?"
    size = (rows[0].size or "") if rows else ""
    notes: list[str] = []
    cells, styles = [], []
    for r in rows:
        st = r.step_time
        label = r.status
        text = r.error or r.reason or r.note
        if text:
            if text not in notes:
                notes.append(text)
            label += f" [{notes.index(text) + 1}]"
        batch = str(r.batch_size)
        if r.global_batch_size and r.global_batch_size != r.batch_size:
            batch += f"x{r.replicas}"
        cells.append([str(r.strategy), fmt_value(r.workers), str(r.precision), "on" if r.xla else "off", batch,
                      str(r.input_pipeline), label, fmt_value(r.examples_per_s, ".1f"),
                      fmt_value(st.p50 if st else None, ".2f"), fmt_value(st.p99 if st else None, ".2f"),
                      fmt_value(r.input_wait_pct, ".1f"), fmt_value(r.startup_ms, ".0f"),
                      fmt_bytes(r.peak_device_memory_bytes), fmt_value(r.allreduce_ms_per_step, ".2f"),
                      fmt_value(r.final_loss, ".4f")])
        styles.append({"ok": "green", "failed": "red", "skipped": "yellow"}.get(r.status, ""))
    # through the width engine (report/terminal/fit.py): strategy and precision say what a row is,
    # numbers and ids (mixed_bfloat16) are never split, low-priority columns go first (and are named)
    cols = [Col(c, num=just == "right", identity=c in ("strategy", "precision"), priority=p)
            for c, just, p in TRAIN_COLUMNS]
    status = [c for c, _j, _p in TRAIN_COLUMNS].index("status")
    body = [[Text(v, style=style) if i == status and style else v for i, v in enumerate(row)]
            for row, style in zip(cells, styles)]
    parts: list[Any] = list(fit_tables(f"training baseline: {model} ({size})", cols, body, width=width, wide=wide))
    parts.extend(Text(f"[{i}] {n}") for i, n in enumerate(notes, 1))
    comps = doc.get("comparisons") or []
    if comps:
        ccols = (("strategy", 0), ("precision", 0), ("xla", 1), ("batch", 0), ("naive ex/s", 0), ("optim. ex/s", 0),
                 ("speed-up", 0), ("naive wait %", 2), ("optim. wait %", 2))
        ccells = [[str(x["strategy"]), str(x["precision"]), str(x["xla"]), str(x["batch_size"]),
                   fmt_value(x["naive_examples_per_s"], ".1f"), fmt_value(x["optimized_examples_per_s"], ".1f"),
                   fmt_value(x["speedup"], ".2f") + "x", fmt_value(x["naive_input_wait_pct"], ".1f"),
                   fmt_value(x["optimized_input_wait_pct"], ".1f")] for x in comps]
        parts.extend(fit_tables("input pipeline: optimized (tf.data map+prefetch) vs naive (Python feed)",
                                [Col(c, num=i >= 3, identity=i < 2, priority=p) for i, (c, p) in enumerate(ccols)],
                                ccells, width=width, wide=wide))
    n_samples = max([(r.step_time.samples or 0) if r.step_time else 0 for r in rows] or [0])
    if 0 < n_samples < P99_MIN_SAMPLES:
        parts.append(Text(f"note: p99 from {n_samples} timed steps is not valid (needs >= {P99_MIN_SAMPLES}, "
                          "MLPerf LoadGen minimum at 99% confidence); raise --steps for a trustworthy p99",
                          style="dim"))
    return Group(*parts)
