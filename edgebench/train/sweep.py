"""The sweep: ``run_train_baseline`` runs (or skips, with the reason) every cell in order and
returns the ``train`` document; the pipeline comparison, the stored baseline lookup and the
failure summary read it."""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Callable

from edgebench.core.errors import BadInput
from edgebench.core.fingerprint import host_fingerprint
from edgebench.model import catalog as models
from edgebench.report.publish import PublishOptions, publish
from edgebench.rows import Document, TrainRow
from edgebench.train.cell import _error_text, _profile_dir_for, _profile_root, base_row, run_cell
from edgebench.train.data import load_pool
from edgebench.train.metrics import visible_gpus
from edgebench.train.multiworker import _run_multiworker_local, run_worker_cells
from edgebench.train.settings import GPU_STRATEGIES, SIZES, Cell, TrainSettings
from edgebench.train.step import _enable_memory_growth, _set_determinism, make_strategy

# --------------------------------------------------------------------------------------------
# skip reasons


def _skip_reason(settings: TrainSettings, cell: Cell, gpus: list) -> str | None:
    if cell.strategy in GPU_STRATEGIES and not gpus:
        return (f"strategy {cell.strategy!r} needs GPUs and TensorFlow sees none "
                "(tf.config.list_physical_devices('GPU') is empty); use --strategy none or multiworker on CPU")
    return None


def _training_skip_reason(settings: TrainSettings) -> str | None:
    """Why the model cannot be trained at all (e.g. no training loss), or None."""
    try:
        models.training_loss(settings.model, settings.size)
    except BadInput:
        raise
    except Exception as e:  # noqa: BLE001 -- any builder error: the cell is skipped with it
        return f"{settings.model} does not support training baselines: {_error_text(e)}"
    return None


# --------------------------------------------------------------------------------------------
# the sweep


def pipeline_comparison(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """optimized / naive examples/s for every pair of ok cells that differ only in the pipeline."""
    by_key: dict[tuple, dict[str, dict]] = {}
    for r in rows:
        if r.get("status") != "ok":
            continue
        key = (r["model"], r["strategy"], r["precision"], r["xla_requested"], r["batch_size"])
        by_key.setdefault(key, {})[r["input_pipeline"]] = r
    out = []
    for key, pair in by_key.items():
        if "naive" in pair and "optimized" in pair:
            n, o = pair["naive"], pair["optimized"]
            out.append({"model": key[0], "strategy": key[1], "precision": key[2], "xla": key[3],
                        "batch_size": key[4],
                        "naive_examples_per_s": n["examples_per_s"], "optimized_examples_per_s": o["examples_per_s"],
                        "speedup": o["examples_per_s"] / n["examples_per_s"] if n["examples_per_s"] else None,
                        "naive_input_wait_pct": n["input_wait_pct"], "optimized_input_wait_pct": o["input_wait_pct"]})
    return out


def run_train_baseline(settings: TrainSettings, progress: Callable[[str], None] | None = None) -> Document:
    """Run the sweep and return the ``train`` result document (one TrainRow per cell, in sweep order).

    ``progress(msg)`` is told each stage (TensorFlow import, the local multiworker group, every
    cell); ``progress.set_total(n)``, when it has one, gets the number of stages first.

    Raises BadInput for an unknown model or unusable options; per-cell failures (OOM, NaN loss,
    unsupported precision, a dying worker) are rows with status "failed"; cells needing absent
    hardware are rows with status "skipped" and the reason.
    """

    settings.validate()
    models.resolve(settings.model)
    if settings.size not in getattr(models, "SIZES", SIZES):
        raise BadInput(f"--size: unknown value {settings.size!r}; use tiny or full")
    cells = settings.cells()
    external_cluster = "TF_CONFIG" in os.environ and "multiworker" in settings.strategies
    if external_cluster and set(settings.strategies) != {"multiworker"}:
        raise BadInput("TF_CONFIG is set (this process is one worker of a cluster): run only "
                       "--strategy multiworker, or unset TF_CONFIG for local runs")
    if settings.data != "synthetic" and not external_cluster:
        load_pool(settings, 1)  # validate --data before any training (BadInput names the problem)

    say = progress or (lambda _m: None)
    if external_cluster:
        rows = run_worker_cells(settings, cells)  # creates the strategy before any other TF op
        gpus = visible_gpus()
    else:
        local = [c for c in cells if c.strategy != "multiworker"]
        if hasattr(say, "set_total"):
            say.set_total(1 + (len(cells) > len(local)) + len(local))
        say("importing TensorFlow")
        import tensorflow as tf  # noqa: F401  -- heavy import only once settings are valid

        gpus = visible_gpus()
        _enable_memory_growth(gpus)
        skip_all = _training_skip_reason(settings)
        _set_determinism(settings.deterministic)
        profile_root = _profile_root(settings)
        rows = []
        mw_cells = [c for c in cells if c.strategy == "multiworker"]
        mw_rows: dict[str, dict] = {}
        if mw_cells and not skip_all:
            say(f"{len(mw_cells)} multiworker cell(s) with {settings.workers} local workers")
            for cell, row in zip(mw_cells, _run_multiworker_local(settings, mw_cells, len(gpus))):
                mw_rows[cell.key] = row
        try:
            n = 0
            for cell in cells:
                if cell.strategy != "multiworker":
                    n += 1
                    say(f"cell {n}/{len(local)}: {cell.key}")
                reason = skip_all or _skip_reason(settings, cell, gpus)
                if reason:
                    row = base_row(settings, cell)
                    row.update(status="skipped", error=None, reason=reason)
                elif cell.strategy == "multiworker":
                    row = mw_rows[cell.key]
                else:
                    row = run_cell(settings, cell, make_strategy(cell.strategy),
                                   profile_dir=_profile_dir_for(settings, cell, profile_root), gpus=gpus)
                rows.append(row)
        finally:
            _set_determinism(False)

    fp = host_fingerprint(with_tf=True)
    # Cells are built as dicts inside the training package (they also cross worker processes as
    # JSON); they leave it as typed rows.
    doc = Document.new("train", [TrainRow.from_dict(r) for r in rows], fp,
                       settings={k: v for k, v in dataclasses.asdict(settings).items() if k != "db"},
                       comparisons=pipeline_comparison(rows),
                       method=("custom loop, tf.function step under strategy.run; per-step perf_counter_ns "
                               "from input fetch to host read of loss and an updated weight; warm-up excluded"))
    if settings.db:   # library callers: the one publish path (store, keep unsaved on failure)

        outcome = publish(doc, PublishOptions(db=settings.db))
        outcome.raise_error()
        doc = outcome.doc
    return doc


def latest_baseline(model: str, *, db: str | None = None) -> dict[str, Any] | None:
    """The newest stored ``ok`` training row of ``model`` (headline columns + run_id), or None.

    For reports that show a deployment result next to the training baseline of the same model
    (e.g. convert-and-compare). ``db`` defaults to the results store's default URL.
    """
    from edgebench.store.db import Store, default_url

    store = Store(db or default_url())
    try:
        rows = [r for r in store.rows(kind="train", model=model) if r.get("status") == "ok"]
    finally:
        store.close()
    return rows[-1] if rows else None


def failed_cells(doc: Document | dict[str, Any]) -> list[dict[str, Any]]:
    d = doc.to_dict() if isinstance(doc, Document) else doc
    return [r for r in d.get("rows", []) if r.get("status") == "failed"]


def _row_label(r: dict[str, Any]) -> str:
    return (f"{r.get('strategy')}/{r.get('precision')}/xla {r.get('xla_requested')}/bs {r.get('batch_size')}/"
            f"{r.get('input_pipeline')}")


def failure_summary(doc: Document | dict[str, Any]) -> str | None:
    """One line naming the failed cells, or None when none failed."""
    bad = failed_cells(doc)
    if not bad:
        return None
    first = bad[0]
    n = len(doc.rows) if isinstance(doc, Document) else len(doc["rows"])
    return (f"{len(bad)} of {n} training cells failed; first: {_row_label(first)}: "
            f"{first.get('error')}")
