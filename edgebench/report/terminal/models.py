"""``edgebench models list|build``: the reference models."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from edgebench.report.terminal.fit import Col, fit_tables, group


def _shape(shape: list) -> str:
    return "x".join("N" if d is None else str(d) for d in shape)


def render_list(rows: list[dict[str, Any]], *, width: int | None = None):
    """Pure renderer: one line per model, inputs shown for tiny and full sizes, fitted to ``width``
    by the width engine (report/terminal/fit.py; the name says what a row is)."""
    cols = [Col("name", identity=True), Col("cached"), Col("task"), Col("inputs"), Col("tiny"), Col("full")]
    body = []
    for r in rows:
        tiny, full = r["inputs"]["tiny"], r["inputs"]["full"]
        names = ", ".join(f"{i['name']} ({i['dtype']})" for i in tiny)
        cached = ", ".join(size for size, ok in r["cached"].items() if ok) or "-"
        body.append([r["name"], cached, r["task"], names, "; ".join(_shape(i["shape"]) for i in tiny),
                     "; ".join(_shape(i["shape"]) for i in full)])
    return group(fit_tables("reference models", cols, body, width=width))


def render_build(row: dict[str, Any]) -> Table:
    """Pure renderer for one build: paths, timing, signature, accuracy where labels are real."""
    info = row["info"]
    t = Table(title=f"{row['model']} ({row['size']})", show_header=False)
    t.add_column("field", style="bold")
    t.add_column("value", overflow="fold")
    t.add_row("task", str(row["task"]))
    t.add_row("saved model", row["saved_model_dir"])
    t.add_row("calibration", row["calibration_npz"])
    t.add_row("evaluation", row["evaluation_npz"])
    secs = f"{row['build_seconds']:.1f} s" if row["build_seconds"] is not None else "-"
    t.add_row("build time", secs + (" (cached build reused)" if row["reused"] else ""))
    for i in info["inputs"]:
        rng = i.get("range")
        t.add_row(f"input {i['name']}", f"{_shape(i['shape'])} {i['dtype']}" + (f" range {rng}" if rng else ""))
    for o in info["outputs"]:
        t.add_row(f"output {o['name']}", f"{_shape(o['shape'])} {o['dtype']}")
    if row["test_accuracy"] is not None:
        t.add_row("test top-1", f"{100 * row['test_accuracy']:.2f} % ({info.get('test_samples')} real test images)")
    if not row["labels_real"]:
        t.add_row("labels", "none: random weights, synthetic inputs (no accuracy)")
    return t
