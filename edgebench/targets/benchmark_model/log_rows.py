"""edgebench result rows from a parsed benchmark_model log: ``latency_from_log``,
``to_result_rows`` and ``import_log_file`` (``edgebench import-log``). The tool prints only
summary statistics, so these rows never carry a p99."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from edgebench import __version__
from edgebench.core.bounded import printable, read_bytes
from edgebench.core.errors import BadInput
from edgebench.core.paths import require_file
from edgebench.rows import Document, InferenceRow, Latency, Warmup
from edgebench.targets.benchmark_model.litert_json import import_litert_json, is_litert_benchmark_json
from edgebench.targets.benchmark_model.log import BenchmarkModelLog
from edgebench.targets.benchmark_model.parse import parse_log
from edgebench.targets.delegation import delegation_from_log
from edgebench.targets.op_profile import op_profile_from_log

P99_NOTE = "benchmark_model prints no per-inference samples"
# The largest log import-log reads: one run with op profiling of a 10,000-node model prints ~5 MB.
LOG_MAX_BYTES = 64 * 1024 ** 2

# --------------------------------------------------------------------------- result rows


def _ms(us: float | None) -> float | None:
    return None if us is None else us / 1000.0


def primary_delegate(log: BenchmarkModelLog) -> str | None:
    """The delegate that ran the graph: an accelerator when one was applied, else XNNPACK/CPU."""
    applied = [d for d in log.delegates if d not in log.delegate_fallback]
    for d in applied:
        if d != "XNNPACK":
            return d.lower()
    if "XNNPACK" in applied:
        return "xnnpack"
    xnn = log.param("Use xnnpack")
    if xnn is not None and xnn.strip() in ("0", "false"):
        return "none"
    return None


def latency_from_log(log: BenchmarkModelLog) -> dict[str, Any] | None:
    """The ``latency_ms`` object from the timed run's summary statistics (no invented numbers)."""
    st = log.inference
    source = "benchmark_model summary statistics"
    if st is None and log.inference_avg_us is None and "regular" in log.op_profile_timings:
        # logs quoted with only the op-profiling tables: the profiler's own per-run timings
        st = log.op_profile_timings["regular"]
        source = "benchmark_model op profiler 'Timings (microseconds)' of the regular runs"
    mean_us = st.mean_us if st is not None else None
    if mean_us is None:
        mean_us = log.inference_avg_us
    if mean_us is None:
        return None
    lat: dict[str, Any] = {
        "mean": _ms(mean_us),
        "std": _ms(st.std_us) if st else None,
        "min": _ms(st.min_us) if st else None,
        "max": _ms(st.max_us) if st else None,
        "p50": _ms(st.median_us) if st else None,
        "p5": _ms(st.p5_us) if st else None,
        "p90": None,
        "p95": _ms(st.p95_us) if st else None,
        "p99": None,
        "samples": st.count if st else None,
        "p99_valid": False,
        "p90_valid": False,
        "p99_note": P99_NOTE + "; p99 needs per-inference samples (run through edgebench's "
                               "device-side sample loop instead)",
        "qps": 1e6 / mean_us if mean_us > 0 else None,
        "source": source,
    }
    if st is not None and st.count == 1 and st.min_us is None:
        lat["min"] = lat["max"] = lat["mean"]
        lat["std"] = 0.0
    if lat["std"] is not None and lat["mean"]:
        lat["cv"] = lat["std"] / lat["mean"]
    return lat


def _warmup(log: BenchmarkModelLog) -> Warmup | None:
    warm = log.warmup
    if warm is not None and warm.mean_us is not None:
        return Warmup(runs=warm.count, mean=_ms(warm.mean_us), min=_ms(warm.min_us), max=_ms(warm.max_us),
                      total=_ms(warm.mean_us * warm.count) if warm.count else None, first=_ms(warm.first_us))
    if log.warmup_avg_us is not None:
        return Warmup(runs=None, mean=_ms(log.warmup_avg_us))
    return None


def to_result_rows(log: BenchmarkModelLog, *, source: str | None = None,
                   target: str = "benchmark_model") -> list[InferenceRow]:
    """edgebench result rows (one per run) from a parsed log."""
    lat = latency_from_log(log)
    status = "failed" if (log.failed or lat is None) else "ok"
    error = None
    if status == "failed":
        error = (log.errors[0] if log.errors else "the log has no timed run (no stats line and no summary)")
    model_path = log.param("Graph") or log.model_path
    warm = log.warmup
    delegate = primary_delegate(log)
    facts = {
        "warmup": warm.to_dict() if warm else None,
        "memory_mb": {
            "init": log.mem_init_mb, "overall": log.mem_overall_mb, "kind": log.mem_kind,
            "peak_periodic": log.peak_mem_mb,
        } if (log.mem_overall_mb is not None or log.peak_mem_mb is not None) else None,
        "delegates": list(log.delegates),
        "delegate_fallback": list(log.delegate_fallback),
        "delegated_nodes": (f"{log.delegated_nodes[0]}/{log.delegated_nodes[1]}"
                            if log.delegated_nodes else None),
        "model_size_mb": log.model_size_mb,
        "params": dict(log.params),
        "op_summary": [r.to_dict() for r in log.op_profile
                       if r.section == "regular" and r.table.startswith("Summary")],
        "op_profile_timings": {k: v.to_dict() for k, v in log.op_profile_timings.items()},
        "errors": list(log.errors),
        "unparsed_lines": len(log.unparsed),
        "source": source,
    }
    fingerprint = {k: v for k, v in {
        "threads": log.threads, "delegate": delegate, "runtime": "benchmark_model",
        "gpu_precision_loss_allowed": log.param("gpu_precision_loss_allowed",
                                                "Allow lower precision in gpu"),
    }.items() if v is not None}
    profile = op_profile_from_log(log)
    return [InferenceRow(
        delegation=delegation_from_log(log), op_profile=profile[0] if profile else None,
        op_profile_info=profile[1] if profile else None,
        model=Path(model_path).name if model_path else None, model_path=model_path, target=target,
        runtime="benchmark_model", status=status, error=error,
        method="benchmark_model summary statistics (no per-inference samples)", sample_class="summary",
        latency=Latency.from_dict(lat) if lat is not None else None,
        init_ms=_ms(log.init_us) if log.init_us is not None else log.init_session_ms,
        first_inference_ms=_ms(log.first_inference_us), warmup=_warmup(log), delegate=delegate,
        threads=log.threads, warnings=tuple(log.warnings), log=facts, fingerprint=fingerprint)]


def import_log_file(path: str | os.PathLike) -> Document:
    """``edgebench import-log FILE``: read, parse and wrap a captured log as a result document
    (a ``litert-benchmark --result_json`` file becomes a summary row: ``litert_json``)."""


    p = require_file(path, "a captured log file", "give the path of a captured benchmark_model output")
    data = read_bytes(p, LOG_MAX_BYTES, "a benchmark_model log", "give the log of one run (a run with op "
                      "profiling of a large model prints a few MB)")
    if not data.strip():
        raise BadInput(f"{p} is empty; capture benchmark_model's output with 2>&1 into the file")
    if b"\x00" in data[:4096]:
        raise BadInput(f"{p} is a binary file, not benchmark_model text output; give the captured log")
    if data.lstrip()[:1] == b"{":       # litert-benchmark --result_json (a JSON summary, not a log)


        try:
            parsed = json.loads(data.decode("utf-8", errors="replace"))
        except ValueError as e:
            raise BadInput(f"{p}: starts like JSON but does not parse ({e}); give litert-benchmark's --result_json "
                           "file unedited, or a captured benchmark_model log") from None
        if not is_litert_benchmark_json(parsed):
            raise BadInput(f"{p}: a JSON file without litert-benchmark's latency summary (latency.avg_ms, "
                           "median_ms, num_runs); give the file `litert-benchmark --model M --result_json FILE` "
                           "wrote, or a captured benchmark_model log")
        return import_litert_json(parsed, p)
    log = parse_log(printable(data.decode("utf-8", errors="replace")))   # its lines reach the terminal
    if not log.is_benchmark_model:
        raise BadInput(f"{p}: no benchmark_model output found (expected lines like 'count=50 ... avg=...' "
                       "or 'Inference timings in us: ...'); capture with 'benchmark_model ... > log.txt 2>&1'")
    rows = to_result_rows(log, source=str(p))
    fingerprint = {"source": "imported benchmark_model log", "log_file": str(p),
                   "importer": f"edgebench {__version__}",
                   "device": "unknown (not recorded in the log)"}
    fingerprint.update(rows[0].fingerprint)
    return Document.new("import-log", rows, fingerprint, source=str(p))
