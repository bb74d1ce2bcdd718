"""``edgebench bench``: metrics as rows, one column per model x target, then load-mode tables
and every warning with its advice."""

from __future__ import annotations

from typing import Any, Mapping

from rich.text import Text

from edgebench.core.formats import fmt_metric
from edgebench.report.terminal._cells import (
    as_document,
    fmt_bytes,
    fmt_value,
    input_mapping_note,
    state_notes,
)
from edgebench.report.terminal.fit import Col, fit_tables
from edgebench.report.terminal.profile import render_where
from edgebench.report.terminal.sustain import render_regimes
from edgebench.rows import Document, InferenceRow
from edgebench.rows.metrics import REGISTRY


def _lat(r: InferenceRow, k: str) -> str:
    return fmt_value(getattr(r.latency, k) if r.latency else None, ".4g")


def _p99(r: InferenceRow) -> str:
    lat = r.latency
    if lat is None:
        return "-"
    need = (lat.min_samples or {}).get("p99")
    flag = "" if lat.p99_valid else f" (not valid: {lat.samples} < {need})"
    return fmt_value(lat.p99, ".4g") + flag


def _ci(r: InferenceRow) -> str:
    if r.latency is None:
        return "-"
    lo, hi = r.latency.p99_ci or (None, None)
    return f"[{fmt_value(lo, '.4g')}, {fmt_value(hi, '.4g') if hi is not None else 'unbounded'}]"


def _detail(r: InferenceRow, k: str) -> str:
    return fmt_value(getattr(r.latency, k) if r.latency else None, ".4g")


def _pct(r: InferenceRow) -> str:
    c = r.cost
    if c is None or c.pct_of_peak is None:
        return "-" if c is None or not c.peak_note else "- (device)"
    return f"{c.pct_of_peak:.1f}%"


def _warmup(r: InferenceRow) -> str:
    w = r.warmup
    if w is None:
        return "-"
    runs = "?" if w.runs is None else str(w.runs)
    return f"{runs} runs, mean {fmt_value(w.mean, '.4g')} ms"


def _api(r: InferenceRow) -> str:
    if r.runtime_api != "compiled":
        return fmt_value(r.runtime_api)
    acc = f"compiled / {r.accelerator}"
    if r.gpu_precision:
        acc += f" {r.gpu_precision}"
    if r.fully_accelerated is not None:
        acc += ", fully accelerated" if r.fully_accelerated else ", NOT fully accelerated"
    if "software" in str((r.fingerprint or {}).get("gpu_adapter") or "").lower():
        acc += " (software GPU: timing is not a GPU's)"
    return acc


SPEC = (
    ("status", lambda r: r.status if r.ok else "FAILED (below)"),
    ("samples", lambda r: fmt_value(r.latency.samples if r.latency else None, "d")),
    ("processes", lambda r: str(len(r.repeats or ()) or 1)),
    ("sample class", lambda r: fmt_value(r.sample_class)),
    ("mean ms", lambda r: _lat(r, "mean")),
    ("std ms", lambda r: _lat(r, "std")),
    ("min ms", lambda r: _lat(r, "min")),
    ("p50 ms", lambda r: _lat(r, "p50")),
    ("p90 ms", lambda r: _lat(r, "p90")),
    ("p95 ms", lambda r: _lat(r, "p95")),
    ("p99 ms", _p99),
    ("p99 95% CI ms", _ci),
    ("p99 LoadGen bound ms", lambda r: _detail(r, "p99_early_stopping")),
    ("MAD ms (robust)", lambda r: _detail(r, "mad")),
    ("max ms", lambda r: _lat(r, "max")),
    ("QPS", lambda r: fmt_value(r.latency.qps if r.latency else None, ".1f")),   # paced: the achieved rate
    ("warmup", _warmup),
    ("init ms", lambda r: fmt_value(r.init_ms, ".3f")),
    ("first inference ms", lambda r: fmt_value(r.first_inference_ms, ".3f")),
    ("peak RSS", lambda r: fmt_bytes(r.peak_rss_bytes)),
    ("GFLOP / inference", lambda r: fmt_value(r.cost.gflops if r.cost else None, ".4g")),
    ("achieved GFLOP/s", lambda r: fmt_value(r.cost.achieved_gflops_per_s if r.cost else None, ".2f")),
    ("% of peak", _pct),
    ("int8 op coverage", lambda r: "-" if not (r.cost and r.cost.quantized) else
        f"{100 * (r.cost.quantization_coverage or 0):.0f}%"),
    ("threads / delegate", lambda r: f"{fmt_value(r.threads_effective or r.threads, 'd')} / {r.delegate}"),
    ("delegated", lambda r: r.delegation.cell() if r.delegation else "-"),
    ("runtime API", lambda r: _api(r)),
    ("runtime", lambda r: fmt_value(r.runtime)),
    ("size", lambda r: fmt_bytes(r.size_bytes)),
    ("sha256", lambda r: (r.model_sha256 or "")[:12]),
)


# Registry metrics SPEC shows in its own way above; any other inference metric of the registry with
# a value in some row gets a line of its own below them (metrics.REGISTRY: label, unit).
_IN_SPEC = ("p50_ms", "p90_ms", "p99_ms", "mean_ms", "qps", "size_bytes")


def registry_rows(rows: list[InferenceRow]) -> list[tuple[str, Any]]:
    return [(m.label, lambda r, m=m: fmt_metric(m.unit, m.value(r))) for m in REGISTRY
            if m.row_kind == "inference" and m.key not in _IN_SPEC and any(m.value(r) is not None for r in rows)]


def render_bench(doc: Document | Mapping[str, Any], *, width: int | None = None) -> list:
    """A side-by-side table plus load tables and warnings (rich renderables; prints nothing).

    At a given terminal ``width`` the model columns are split over several tables rather than
    folding a number or an id across lines."""
    doc = as_document(doc)
    rows = [r for r in doc.rows if isinstance(r, InferenceRow)]
    out: list = []
    one_target = len({x.target for x in rows}) == 1
    heads = [(r.model if one_target else f"{r.model} @ {r.target}") + (f" (GPU {r.gpu_precision})" if r.gpu_precision
                                                                          else "") for r in rows]
    spec = list(SPEC) + registry_rows(rows)
    # a column per model, every one shown: the ones that do not fit go to a table of their own
    # under the first, the metric names repeated (report/terminal/fit.py)
    cols = [Col("metric", identity=True), *(Col(h, num=True) for h in heads)]
    out.extend(fit_tables("edgebench bench", cols, [[label, *(fn(r) for r in rows)] for label, fn in spec],
                          width=width, wide=True))
    for r in rows:
        if not r.ok:
            out.append(Text(f"FAILED ({r.model} @ {r.target}): {r.error}", style="bold red"))

    per_process = [r for r in rows if r.sample_class == "per-process"]
    if per_process and len(per_process) < len([r for r in rows if r.ok]):
        out.append(Text("sample class: per-process samples (benchmark_model: each the first timed run of a fresh "
                        "process) are slower than steady-state ones; do not compare the two directly", style="yellow"))
    for r in rows:
        name = str(r.model if one_target else f"{r.model} @ {r.target}")     # a title: fit_tables escapes it
        if r.load_levels:
            cols = [Col("level", num=True, identity=True),
                    *(Col(c, num=True) for c in ("QPS", "x vs first", "p50 ms", "p99 ms", "samples", "p99 valid"))]
            out.extend(fit_tables(f"{name}: concurrency", cols, [
                [fmt_value(c.level, "d"), fmt_value(c.qps, ".1f"), fmt_value(c.speedup_vs_first, ".2f"),
                 fmt_value(c.p50_ms, ".4g"), fmt_value(c.p99_ms, ".4g"), fmt_value(c.samples, "d"),
                 fmt_value(c.p99_valid)] for c in r.load_levels], width=width, wide=True))
        s = r.server_run
        if s is not None:
            lb = "> " if s.latency_lower_bound else ""   # backlog at the stop: a lower bound only
            cols = [Col(c, num=True, identity=c == "target QPS") for c in (
                "target QPS", "achieved QPS", "workers", "p50 ms", "p99 ms", "samples", "p99 valid", "overloaded")]
            out.extend(fit_tables(f"{name}: server (Poisson arrivals, latency incl. queueing)", cols, [[
                fmt_value(s.target_qps, ".1f"), fmt_value(s.achieved_qps, ".1f"), fmt_value(s.workers, "d"),
                lb + fmt_value(s.p50_ms, ".4g"), lb + fmt_value(s.p99_ms, ".4g"), fmt_value(s.samples, "d"),
                fmt_value(s.p99_valid), fmt_value(s.overloaded)]], width=width, wide=True))
        sla = r.sla_search
        if sla is not None:
            if sla.met:
                out.append(Text(f"{r.model}: highest QPS with p99 <= {sla.sla_p99_ms:g} ms: "
                                f"{sla.max_qps:.1f} (p99 {sla.p99_at_max_ms:.3f} ms, "
                                f"resolution {sla.resolution_qps:.1f} QPS)"))
            else:
                out.append(Text(f"{r.model}: SLA p99 <= {sla.sla_p99_ms:g} ms not met: {sla.reason}"))
        out.extend(render_regimes(r, width))
        out.extend(Text.from_markup(n, style="dim") for n in input_mapping_note(r) + state_notes([r]))
        for w in r.warnings:
            out.append(Text(f"warning ({r.model if one_target else f'{r.model} @ {r.target}'}): {w}", style="yellow"))
        if r.cost is not None and r.cost.peak_note:
            out.append(Text(f"% of peak ({r.model} @ {r.target}): {r.cost.peak_note}", style="dim"))
        if r.cost is not None and r.cost.flops_note:
            out.append(Text(f"GFLOP ({r.model}): {r.cost.flops_note}", style="dim"))

    out.extend(render_where(rows, width))
    host_rows = [r for r in rows if r.ok and not (r.cost and r.cost.peak_note)]
    if host_rows and all(r.cost is None or r.cost.pct_of_peak is None for r in host_rows):
        out.append(Text("% of peak: run `edgebench env --peak` once to measure this machine's peak GFLOP/s",
                        style="dim"))
    return out
