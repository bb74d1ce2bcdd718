"""``litert-benchmark --result_json FILE`` (the console script of the ai-edge-litert wheel) as an
edgebench summary row, so edgebench's p50 and Google's tool's median can sit in one store.

The tool runs the CompiledModel API and writes only summary statistics, each rounded to 0.01 ms:
``latency`` {``init_ms``, ``warmup_first_ms``, ``warmup_avg_ms``, ``num_warmup_runs``, ``avg_ms``,
``min_ms``, ``max_ms``, ``median_ms``, ``std_ms``, ``p5_ms``, ``p95_ms``, ``num_runs``} plus
``model``, ``model_size_mb``, ``accelerators``, ``signature``, ``fully_accelerated``,
``num_threads``, ``throughput_mb_s`` (ai-edge-litert 2.3.0). There are no per-inference samples,
so the row has no ``samples_ns``, no p90 and no p99 (``p99_valid`` false, and ``p99_note`` says
why); ``latency_ms.samples`` is the number of runs the tool summarised.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Mapping

from edgebench import __version__
from edgebench.core.errors import BadInput
from edgebench.rows import Document, InferenceRow, Latency, Warmup

TOOL = "litert-benchmark"
P99_NOTE = ("litert-benchmark writes a summary (avg, min, max, median, std, p5, p95 of its runs, rounded to "
            "0.01 ms), no per-inference samples; p99 needs them (measure with edgebench bench)")
RESOLUTION_MS = 0.01      # the tool rounds every time it writes to 2 decimals of a millisecond
_REQUIRED = ("avg_ms", "median_ms", "num_runs")


def is_litert_benchmark_json(doc: Any) -> bool:
    """True for the object ``litert-benchmark --result_json`` writes (a ``latency`` object with
    ``avg_ms``, ``median_ms`` and ``num_runs``)."""
    lat = doc.get("latency") if isinstance(doc, Mapping) else None
    return isinstance(lat, Mapping) and all(k in lat for k in _REQUIRED)


def _num(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        return None
    return float(v)


def latency_from_json(lat: Mapping[str, Any]) -> dict[str, Any]:
    """The ``latency_ms`` object from the tool's ``latency`` summary (nothing invented: p90/p99 null)."""
    mean = _num(lat.get("avg_ms"))
    runs = lat.get("num_runs")
    out: dict[str, Any] = {
        "mean": mean, "std": _num(lat.get("std_ms")), "min": _num(lat.get("min_ms")),
        "max": _num(lat.get("max_ms")), "p50": _num(lat.get("median_ms")), "p5": _num(lat.get("p5_ms")),
        "p90": None, "p95": _num(lat.get("p95_ms")), "p99": None,
        "samples": int(runs) if isinstance(runs, int) and not isinstance(runs, bool) else None,
        "p99_valid": False, "p90_valid": False, "p99_note": P99_NOTE,
        "qps": 1e3 / mean if mean else None,
        "resolution_ms": RESOLUTION_MS,
        "source": f"{TOOL} --result_json summary statistics",
    }
    if out["std"] is not None and mean:
        out["cv"] = out["std"] / mean
    return out


def litert_benchmark_row(doc: Mapping[str, Any], *, source: str | None = None) -> InferenceRow:
    """One summary row from a parsed ``--result_json`` object (see the module docstring)."""
    lat = doc["latency"]
    latency = latency_from_json(lat)
    if latency["mean"] is None or latency["p50"] is None:
        raise BadInput(f"{source or 'the JSON'}: litert-benchmark's latency has no numeric avg_ms/median_ms; "
                       "give the file the tool wrote with --result_json, unedited")
    accel = [str(a) for a in (doc.get("accelerators") or [])]
    threads = doc.get("num_threads") if isinstance(doc.get("num_threads"), int) else None
    warm = None
    if _num(lat.get("warmup_avg_ms")) is not None:
        runs = lat.get("num_warmup_runs") if isinstance(lat.get("num_warmup_runs"), int) else None
        warm = Warmup(runs=runs, mean=_num(lat.get("warmup_avg_ms")), first=_num(lat.get("warmup_first_ms")),
                      total=_num(lat.get("warmup_avg_ms")) * runs if runs else None)
    model = doc.get("model")
    facts = {"tool": TOOL, "accelerators": accel, "signature": doc.get("signature"),
             "fully_accelerated": doc.get("fully_accelerated"), "model_size_mb": _num(doc.get("model_size_mb")),
             "throughput_mb_s": _num(doc.get("throughput_mb_s")), "source": source,
             "fields": sorted(doc)}
    delegate = ",".join(a.lower() for a in accel) or None
    fingerprint = {k: v for k, v in {"threads": threads, "delegate": delegate, "runtime": TOOL,
                                     "accelerators": accel or None}.items() if v is not None}
    return InferenceRow(
        model=Path(str(model)).name if model else None, model_path=str(model) if model else None,
        target=TOOL, runtime=f"{TOOL} (LiteRT CompiledModel API)", status="ok",
        method=f"{TOOL} summary statistics (no per-inference samples; times rounded to {RESOLUTION_MS} ms)",
        sample_class="summary", latency=Latency.from_dict(latency), init_ms=_num(lat.get("init_ms")),
        first_inference_ms=_num(lat.get("warmup_first_ms")), warmup=warm, delegate=delegate, threads=threads,
        accelerator=",".join(a.lower() for a in accel) or None,
        fully_accelerated=doc.get("fully_accelerated") if isinstance(doc.get("fully_accelerated"), bool) else None,
        warnings=(f"summary only: {P99_NOTE}",), log=facts, fingerprint=fingerprint)


def import_litert_json(doc: Mapping[str, Any], path: Path) -> Document:
    """``edgebench import-log FILE.json``: the result document of one litert-benchmark JSON."""
    row = litert_benchmark_row(doc, source=str(path))
    fingerprint = {"source": f"imported {TOOL} --result_json", "log_file": str(path),
                   "importer": f"edgebench {__version__}", "device": "unknown (not recorded by the tool)",
                   **row.fingerprint}
    return Document.new("import-log", [row], fingerprint, source=str(path), tool=TOOL)
