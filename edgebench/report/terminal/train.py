"""``edgebench train-baseline``: one line per training cell, then naive vs optimized pipelines."""

from __future__ import annotations

from typing import Any, Mapping

from rich.console import Group
from rich.table import Table
from rich.text import Text

from edgebench.report.terminal._cells import as_document, e, fmt_bytes, fmt_value
from edgebench.rows import Document, TrainRow
from edgebench.targets.base import P99_MIN_SAMPLES


def render_train(doc: Document | Mapping[str, Any]) -> Group:
    """One line per cell (reasons as numbered notes), then naive vs optimized pipelines."""
    doc = as_document(doc)
    rows = [r for r in doc.rows if isinstance(r, TrainRow)]
    model = rows[0].model if rows else "?"
    size = (rows[0].size or "") if rows else ""
    t = Table(title=f"training baseline: {e(model)} ({e(size)})", header_style="bold")
    for col, just in (("strategy", "left"), ("w", "right"), ("precision", "left"), ("xla", "left"),
                      ("batch", "right"), ("pipeline", "left"), ("status", "left"), ("ex/s", "right"),
                      ("p50 ms", "right"), ("p99 ms", "right"), ("wait %", "right"), ("startup ms", "right"),
                      ("peak mem", "right"), ("allred ms", "right"), ("loss", "right")):
        if just == "right":
            t.add_column(col, justify=just, no_wrap=True)
        else:
            t.add_column(col, justify=just, overflow="fold")
    notes: list[str] = []
    for r in rows:
        st = r.step_time
        style = {"ok": "green", "failed": "red", "skipped": "yellow"}.get(r.status, "")
        label = f"[{style}]{r.status}[/]" if style else r.status
        text = r.error or r.reason or r.note
        if text:
            if text not in notes:
                notes.append(text)
            label += f" [{notes.index(text) + 1}]"
        batch = str(r.batch_size)
        if r.global_batch_size and r.global_batch_size != r.batch_size:
            batch += f"x{r.replicas}"
        t.add_row(e(r.strategy), e(r.workers), e(r.precision), "on" if r.xla else "off", batch,
                  e(r.input_pipeline), label, fmt_value(r.examples_per_s, ".1f"),
                  fmt_value(st.p50 if st else None, ".2f"), fmt_value(st.p99 if st else None, ".2f"),
                  fmt_value(r.input_wait_pct, ".1f"), fmt_value(r.startup_ms, ".0f"),
                  fmt_bytes(r.peak_device_memory_bytes), fmt_value(r.allreduce_ms_per_step, ".2f"),
                  fmt_value(r.final_loss, ".4f"))
    parts: list[Any] = [t]
    parts.extend(Text(f"[{i}] {n}") for i, n in enumerate(notes, 1))
    comps = doc.get("comparisons") or []
    if comps:
        c = Table(title="input pipeline: optimized (tf.data map+prefetch) vs naive (Python feed)",
                  header_style="bold")
        for col in ("strategy", "precision", "xla", "batch", "naive ex/s", "optim. ex/s", "speed-up",
                    "naive wait %", "optim. wait %"):
            c.add_column(col, justify="left" if col in ("strategy", "precision", "xla") else "right")
        for x in comps:
            c.add_row(e(x["strategy"]), e(x["precision"]), e(x["xla"]), str(x["batch_size"]),
                      fmt_value(x["naive_examples_per_s"], ".1f"), fmt_value(x["optimized_examples_per_s"], ".1f"),
                      fmt_value(x["speedup"], ".2f") + "x", fmt_value(x["naive_input_wait_pct"], ".1f"),
                      fmt_value(x["optimized_input_wait_pct"], ".1f"))
        parts.append(c)
    n_samples = max([(r.step_time.samples or 0) if r.step_time else 0 for r in rows] or [0])
    if 0 < n_samples < P99_MIN_SAMPLES:
        parts.append(Text(f"note: p99 from {n_samples} timed steps is not valid (needs >= {P99_MIN_SAMPLES}, "
                          "MLPerf LoadGen minimum at 99% confidence); raise --steps for a trustworthy p99",
                          style="dim"))
    return Group(*parts)
