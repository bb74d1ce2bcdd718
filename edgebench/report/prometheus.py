"""Prometheus text exposition of stored results (pure: result documents in, text out).

Format: Prometheus text exposition format 0.0.4 -- one ``# HELP`` and one ``# TYPE`` line per
metric family, every sample of a family grouped under them, no timestamps (the Pushgateway and
node_exporter's textfile collector both reject samples that carry one).

Conventions (https://prometheus.io/docs/practices/naming/): ``edgebench_`` prefix, base units
(seconds, bytes, ratios 0..1), unit suffix in the name. Label values are escaped
(backslash, double quote, newline); label names are sanitised to ``[a-zA-Z_][a-zA-Z0-9_]*``.

Families written (labels ``run_id`` (textfile only; the Pushgateway adds it from the grouping
key), ``model``, ``precision``, ``target``, ``device_model`` on every row metric, plus the fields of
the configuration identity a row has: ``model_sha256`` (12 hex digits), ``keep_float`` (tensors kept
float), ``threads``, ``delegate``, ``runtime_api``, ``accelerator``, ``gpu_precision``,
``period_ms``, ``sustained``):

=============================================  ========  ==============================================
``edgebench_run_info``                          gauge     1 per run; kind, versions, host
``edgebench_run_timestamp_seconds``             gauge     run creation time (unix seconds)
``edgebench_run_ok``                            gauge     1 when every row's verdict is ok and no gate check failed
``edgebench_gate_passed``                       gauge     1 gate passed / 0 failed (runs with a gate; alert on 0);
                                                          also ``edgebench_gate_failed_checks``
``edgebench_row_ok``                            gauge     1 when the row's verdict (``outcome``) is ok, else 0
``edgebench_row_verdict``                       gauge     1, label ``verdict`` (ok, gate-failed, silent, ...)
``edgebench_inference_latency_seconds``         summary   quantile 0.5/0.9/0.95/0.99(/0.999), _sum, _count
``edgebench_inference_latency_mean_seconds``    gauge     also ``_stddev_``, ``_min_``, ``_max_``
``edgebench_inference_latency_p99_valid``       gauge     1 when the run had enough samples for a p99
``edgebench_inference_queries_per_second``      gauge     single-stream QPS (``concurrency`` label on
                                                          concurrency sweeps)
``edgebench_model_size_bytes``                  gauge     .tflite (or SavedModel) size
``edgebench_model_size_reduction_ratio``        gauge     1 - size / reference size
``edgebench_accuracy_top1_ratio``               gauge     also ``_top5_ratio``, ``_top1_drop_ratio``,
                                                          ``_top1_agreement_ratio``, ``_top5_agreement_ratio``
``edgebench_drift_psnr_db``                     gauge     per output (``output`` label); also
                                                          ``_max_abs``, ``_mean_abs``, ``_rmse``,
                                                          ``_rel_l2_ratio``, ``_cosine_similarity``,
                                                          ``_nan_values``, ``_inf_values``
``edgebench_training_examples_per_second``      gauge     labels add batch_size, xla, strategy,
                                                          input_pipeline
``edgebench_training_step_time_seconds``        summary   from ``step_time_ms``
``edgebench_timeline_latency_seconds``          summary   per window of a sustained run (``window`` label,
                                                          1-based); also ``edgebench_timeline_window_end_seconds``,
                                                          ``edgebench_timeline_hottest_celsius``,
                                                          ``edgebench_timeline_thermal_status``
``edgebench_sustained_steady_state_ratio``      gauge     last window p50 / first window p50; also
                                                          ``edgebench_sustained_time_to_throttle_seconds``
``edgebench_paced_period_seconds``              gauge     requested period; also ``_achieved_period_seconds``,
                                                          ``edgebench_paced_back_to_back_latency_seconds``
                                                          (summary), ``edgebench_paced_p50_ratio``
``edgebench_cold_start_seconds``                gauge     p50 per ``phase`` (process_start, init,
                                                          first_inference, total) and ``cache`` (none, warm)
``edgebench_energy_joules_per_inference``       gauge     net energy per inference (``source`` label); also
                                                          ``edgebench_energy_inferences_per_joule``,
                                                          ``edgebench_energy_valid`` (1/0)
=============================================  ========  ==============================================
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import re
from typing import Any, Iterable, Mapping

from edgebench.rows.identity import series_key
from edgebench.rows.metrics import REGISTRY
from edgebench.judge.outcome import RunVerdict, row_verdict, run_verdict, run_verdict_of
from edgebench.rows import Document, InferenceRow, Latency, Row, TrainRow, concurrency_levels
from edgebench.rows.row import UNTYPABLE
from edgebench.targets.base import P99_MIN_SAMPLES

# ---------------------------------------------------------------------------------------------
# escaping / sanitising

_LABEL_NAME_BAD = re.compile(r"[^a-zA-Z0-9_]")


def sanitize_label_name(name: str) -> str:
    """Any string -> a valid, non-reserved Prometheus label name.

    Invalid characters become ``_``; a leading digit gets a ``_`` prefix; names starting with
    ``__`` (reserved for Prometheus internals) lose the extra underscores.
    """
    out = _LABEL_NAME_BAD.sub("_", str(name))
    if not out:
        return "label_"
    if out[0].isdigit():
        out = "_" + out
    while out.startswith("__"):
        out = out[1:]
    return out


def sanitize_metric_name(name: str) -> str:
    """Any string -> a valid metric name (``[a-zA-Z_:][a-zA-Z0-9_:]*``)."""
    out = re.sub(r"[^a-zA-Z0-9_:]", "_", str(name))
    if not out or out[0].isdigit():
        out = "_" + out
    return out


def escape_label_value(value: Any) -> str:
    """Escape a label value per the exposition format: ``\\`` -> ``\\\\``, ``"`` -> ``\\"``, LF -> ``\\n``."""
    s = "" if value is None else str(value)
    return s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def format_value(value: float) -> str:
    """Float -> exposition text (``NaN``, ``+Inf``, ``-Inf``; integers without exponent noise)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value == int(value) and abs(value) < 1e15:
        return str(int(value))
    return repr(float(value))


def _num(value: Any) -> float | None:
    """Stored JSON number -> float; ``"inf"``/``"-inf"`` strings (from to_jsonable) -> inf; else None."""
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        v = value.strip().lower()
        if v in ("inf", "+inf", "infinity"):
            return math.inf
        if v in ("-inf", "-infinity"):
            return -math.inf
        if v == "nan":
            return math.nan
        try:
            return float(v)
        except ValueError:
            return None
    if hasattr(value, "item"):  # numpy scalar
        try:
            return float(value.item())
        except (TypeError, ValueError):
            return None
    return None


# ---------------------------------------------------------------------------------------------
# metric families


class _Family:
    def __init__(self, name: str, mtype: str, help_text: str):
        self.name = sanitize_metric_name(name)
        self.type = mtype
        self.help = help_text
        # series key -> (suffix, labels) ; insertion-ordered, first writer wins
        self.samples: dict[tuple, tuple[str, list[tuple[str, str]], float]] = {}

    def add(self, labels: dict[str, Any], value: float | None, *, suffix: str = "") -> None:
        if value is None:
            return
        items: list[tuple[str, str]] = []
        seen: set[str] = set()
        for k, v in labels.items():
            name = sanitize_label_name(k)
            if name in seen:  # two raw names sanitised to the same label: keep the first
                continue
            seen.add(name)
            items.append((name, "" if v is None else str(v)))
        key = (suffix, tuple(items))
        if key not in self.samples:  # duplicate series would make the exposition invalid
            self.samples[key] = (suffix, items, float(value))

    def render(self) -> list[str]:
        if not self.samples:
            return []
        lines = [f"# HELP {self.name} {_escape_help(self.help)}", f"# TYPE {self.name} {self.type}"]
        for suffix, items, value in self.samples.values():
            lbl = ",".join(f'{k}="{escape_label_value(v)}"' for k, v in items)
            lines.append(f"{self.name}{suffix}{{{lbl}}} {format_value(value)}" if lbl
                         else f"{self.name}{suffix} {format_value(value)}")
        return lines


_LATENCY_QUANTILES = (("p50", "0.5"), ("p90", "0.9"), ("p95", "0.95"), ("p99", "0.99"), ("p999", "0.999"))

_DRIFT_STATS = (
    (lambda d: d.max_abs, "edgebench_drift_max_abs", "Largest absolute difference from the reference output."),
    (lambda d: d.mean_abs, "edgebench_drift_mean_abs", "Mean absolute difference from the reference output."),
    (lambda d: d.rmse, "edgebench_drift_rmse", "Root mean squared difference from the reference output."),
    (lambda d: d.rel_l2, "edgebench_drift_rel_l2_ratio", "Relative L2 error ||y - ref|| / ||ref||."),
    (lambda d: d.cosine, "edgebench_drift_cosine_similarity", "Cosine similarity with the reference output."),
    (lambda d: d.psnr_db, "edgebench_drift_psnr_db",
     "Peak signal-to-noise ratio against the reference output, in decibels."),
    (lambda d: d.nan, "edgebench_drift_nan_values", "NaN values in the output."),
    (lambda d: d.inf, "edgebench_drift_inf_values", "Infinite values in the output."),
)

_INFO_FINGERPRINT = ("tensorflow", "litert", "python", "os", "cpu_model", "gpu", "hostname")


class _Registry:
    def __init__(self) -> None:
        self.families: dict[str, _Family] = {}

    def fam(self, name: str, mtype: str, help_text: str) -> _Family:
        f = self.families.get(name)
        if f is None:
            f = self.families[name] = _Family(name, mtype, help_text)
        return f

    def render(self) -> str:
        lines: list[str] = []
        for f in self.families.values():
            lines.extend(f.render())
        return "\n".join(lines) + ("\n" if lines else "")


def _created_epoch(created: Any) -> float | None:
    if not isinstance(created, str) or not created:
        return None
    try:
        t = _dt.datetime.fromisoformat(created.replace("Z", "+00:00"))
    except ValueError:
        return None
    if t.tzinfo is None:
        t = t.replace(tzinfo=_dt.timezone.utc)
    return t.timestamp()


def _row_labels(row: Row, run: dict[str, Any]) -> dict[str, Any]:
    """The labels of a row's series: ``run``'s (the run_id, if any), then model, precision, target
    and device model (the row's, else the document's: ``run["model"]``, ``run["device_model"]``),
    then the configuration identity."""
    device_model = (isinstance(row, InferenceRow) and row.device_model) or row.fingerprint.get("device_model") \
        or run["device_model"]
    out = dict(run["base"])
    out.update({
        "model": row.model or run["model"] or "",
        "precision": row.precision or "",
        "target": row.target or "",
        "device_model": device_model or "",
    })
    # the configuration identity (identity.series_key) beyond the four above: two rows that differ in
    # it are two series, never one (a --delegate none run, int8 with tensors kept float ...)
    ident = series_key(row.to_dict())
    for name in _IDENTITY_LABELS:
        v = ident[name]
        if v is None or v is False:
            continue
        if name == "model_sha256":
            v = str(v)[:12]
        elif name == "keep_float":
            v = len(json.loads(v))
            if not v:
                continue
        out[name] = v
    return out


# identity fields added as labels when a row has them (model_sha256 as 12 hex digits, keep_float
# as the number of tensors kept float)
_IDENTITY_LABELS = ("model_sha256", "keep_float", "threads", "delegate", "runtime_api", "accelerator",
                    "gpu_precision", "period_ms", "sustained", "prefill_tokens", "decode_tokens", "context_tokens")


def _add_quantiles(fam: _Family, labels: dict[str, Any], lat: Latency | None,
                   quantiles: Iterable[tuple[str, str]]) -> None:
    for key, q in quantiles:
        v = None if lat is None else _num(getattr(lat, key))
        fam.add({**labels, "quantile": q}, None if v is None else v / 1e3)


def _add_summary(fam: _Family, labels: dict[str, Any], lat: Latency | None,
                 quantiles: Iterable[tuple[str, str]] = _LATENCY_QUANTILES) -> None:
    """A latency (ms) as a summary in seconds: its quantiles, and ``_sum``/``_count`` when its mean
    and sample count are known."""
    _add_quantiles(fam, labels, lat, quantiles)
    mean, count = (None, None) if lat is None else (_num(lat.mean), _num(lat.samples))
    if mean is not None and count is not None:
        fam.add(labels, mean / 1e3 * count, suffix="_sum")
        fam.add(labels, count, suffix="_count")


def _add_latency(reg: _Registry, labels: dict[str, Any], lat: Latency) -> None:
    _add_summary(reg.fam("edgebench_inference_latency_seconds", "summary",
                         "Per-inference latency over the timed runs (warmup excluded)."), labels, lat)
    for stat, v in (("mean", lat.mean), ("stddev", lat.std), ("min", lat.min), ("max", lat.max)):
        v = _num(v)
        reg.fam(f"edgebench_inference_latency_{stat}_seconds", "gauge",
                f"Per-inference latency {stat} over the timed runs.").add(labels, None if v is None else v / 1e3)
    reg.fam("edgebench_inference_latency_p99_valid", "gauge",
            f"1 when the run had enough samples for a trustworthy p99 (>= {P99_MIN_SAMPLES}), else 0."
            ).add(labels, 1.0 if lat.p99_valid else 0.0)


def _add_registry_gauges(reg: _Registry, labels: dict[str, Any], row: Row) -> None:
    """One gauge per registry metric that names a Prometheus series (``metrics.REGISTRY``), in its
    base unit; a metric the row does not have (another kind of row, a part not measured) is left out."""
    for m in REGISTRY:
        if m.prometheus is None:
            continue
        v = m.value(row)
        reg.fam(m.prometheus, "gauge", m.help).add(labels, None if v is None else v * m.prometheus_scale)


def _add_inference_row(reg: _Registry, run: dict[str, Any], row: InferenceRow) -> None:
    labels = _row_labels(row, run)
    v = row_verdict(row, run["gate"])
    reg.fam("edgebench_row_ok", "gauge", "1 when the row's verdict is ok; 0 when it failed, was skipped, "
            "had NaN/Inf outputs, a silent failure or a failed gate check."
            ).add(labels, 1.0 if v.ok else 0.0)
    reg.fam("edgebench_row_verdict", "gauge", "1 for the row's verdict (label verdict: ok, gate-failed, "
            "silent, nonfinite, failed, skipped)."
            ).add({**labels, "verdict": v.state}, 1.0)
    if row.latency is not None:
        _add_latency(reg, labels, row.latency)
    _add_registry_gauges(reg, labels, row)
    acc = row.accuracy
    if acc is not None:
        reg.fam("edgebench_accuracy_top5_ratio", "gauge", "Top-5 accuracy on the labelled input set."
                ).add(labels, acc.top5)   # compare.accuracy writes it; Accuracy keeps it untyped
        reg.fam("edgebench_accuracy_top1_agreement_ratio", "gauge",
                "Share of inputs whose top-1 class matches the reference."
                ).add(labels, _num(acc.top1_agreement))
        reg.fam("edgebench_accuracy_top5_agreement_ratio", "gauge",
                "Share of inputs whose top-5 classes match the reference."
                ).add(labels, _num(acc.top5_agreement))
    for output, drift in (row.drift or {}).items():
        dl = {**labels, "output": output}
        for read, name, help_text in _DRIFT_STATS:
            reg.fam(name, "gauge", help_text).add(dl, _num(read(drift)))
    _add_regimes(reg, labels, row)
    for c in concurrency_levels(row.concurrency):
        if c.level is None:
            continue
        cl = {**labels, "concurrency": c.level}
        reg.fam("edgebench_inference_concurrent_queries_per_second", "gauge",
                "Inferences per second with N concurrent streams.").add(cl, c.qps)
        reg.fam("edgebench_inference_concurrent_latency_p99_seconds", "gauge",
                "p99 per-inference latency with N concurrent streams."
                ).add(cl, None if c.p99_ms is None else c.p99_ms / 1e3)


def _add_regimes(reg: _Registry, labels: dict[str, Any], row: InferenceRow) -> None:
    """Sustained timeline, paced, cold-start and energy families (edgebench.bench.sustain)."""
    for w in row.timeline or ():
        wl = {**labels, "window": w.index + 1}
        fam = reg.fam("edgebench_timeline_latency_seconds", "summary",
                      "Per-inference latency in one window of a sustained run.")
        _add_quantiles(fam, wl, w.latency, _LATENCY_QUANTILES[:4])
        mean = None if w.latency is None else w.latency.mean
        fam.add(wl, (mean or 0.0) / 1e3 * w.samples, suffix="_sum")     # a window without samples: 0 and 0
        fam.add(wl, w.samples, suffix="_count")
        reg.fam("edgebench_timeline_window_end_seconds", "gauge", "End of the window, seconds into the sustained run."
                ).add(wl, w.t_end_s)
        reg.fam("edgebench_timeline_hottest_celsius", "gauge", "Hottest CPU/SoC thermal zone at the window's end."
                ).add(wl, w.hottest_c)
        reg.fam("edgebench_timeline_thermal_status", "gauge", "Android thermal status at the window's end (0 none .. 6)."
                ).add(wl, w.thermal_status)
    s = row.sustained
    reg.fam("edgebench_sustained_steady_state_ratio", "gauge", "Last window p50 / first window p50 of a sustained run."
            ).add(labels, None if s is None else _num(s.steady_state_ratio))
    reg.fam("edgebench_sustained_time_to_throttle_seconds", "gauge",
            "Seconds into a sustained run when throttling was first seen (absent: never)."
            ).add(labels, None if s is None else _num(s.time_to_throttle_s))
    p = row.paced
    if p is not None:
        per, ach = _num(row.period_ms), _num(p.achieved_period_ms)
        reg.fam("edgebench_paced_period_seconds", "gauge", "Requested period between paced invokes."
                ).add(labels, None if per is None else per / 1e3)
        reg.fam("edgebench_paced_achieved_period_seconds", "gauge", "Achieved period between paced invokes."
                ).add(labels, None if ach is None else ach / 1e3)
        _add_summary(reg.fam("edgebench_paced_back_to_back_latency_seconds", "summary",
                             "Back-to-back latency of the same model next to a paced run."),
                     labels, p.back_to_back_ms, _LATENCY_QUANTILES[:4])
        reg.fam("edgebench_paced_p50_ratio", "gauge", "Paced p50 / back-to-back p50.").add(labels, _num(p.p50_ratio))
    c = row.cold_start
    for cache, starts in (("none", c), ("warm", None if c is None else c.warm)):
        for phase in ("process_start", "init", "first_inference", "total"):
            lat = None if starts is None else getattr(starts, f"{phase}_ms")
            v = None if lat is None else _num(lat.p50)
            reg.fam("edgebench_cold_start_seconds", "gauge", "Median over fresh processes of one cold-start phase."
                    ).add({**labels, "phase": phase, "cache": cache}, None if v is None else v / 1e3)
    e = row.energy
    if e is not None:
        el = {**labels, "source": e.source or ""}
        mj = _num(e.mj_per_inference)
        reg.fam("edgebench_energy_joules_per_inference", "gauge",
                "Net energy per inference (run minus idle baseline); see edgebench_energy_valid."
                ).add(el, None if mj is None else mj / 1e3)
        reg.fam("edgebench_energy_inferences_per_joule", "gauge", "Inferences per joule of net energy."
                ).add(el, _num(e.inferences_per_j))
        reg.fam("edgebench_energy_valid", "gauge", "1 when the energy figure passed every validity check, else 0."
                ).add(el, 1.0 if e.valid else 0.0)


def _add_train_row(reg: _Registry, run: dict[str, Any], row: TrainRow) -> None:
    labels = _row_labels(row, run)
    labels.update({
        "batch_size": row.batch_size,
        "xla": "" if row.xla is None else str(bool(row.xla)).lower(),
        "strategy": row.strategy or "",
        "input_pipeline": row.input_pipeline or "",
    })
    reg.fam("edgebench_training_cell_ok", "gauge", "1 when the training cell's status is ok, else 0."
            ).add(labels, 1.0 if row.ok else 0.0)
    _add_registry_gauges(reg, labels, row)
    if row.step_time is not None:
        _add_summary(reg.fam("edgebench_training_step_time_seconds", "summary",
                             "Training step time (warmup steps excluded)."), labels, row.step_time)


def _typed(doc: Document | Mapping[str, Any]) -> tuple[Document, RunVerdict]:
    """A result document read once into its typed form, with the run's verdict. A document
    edgebench did not write may hold rows too malformed to type: they are left out of the
    exposition (``Document.read``) but still count in the run's verdict by their status
    (``outcome.run_verdict_of``)."""
    if isinstance(doc, Document):
        return doc, run_verdict(doc)
    try:
        typed = Document.from_dict(doc)
    except UNTYPABLE:
        return Document.read(doc), run_verdict_of(doc)
    return typed, run_verdict(typed)


def render_prometheus(docs: Document | Mapping[str, Any] | Iterable[Document | Mapping[str, Any]], *,
                      run_id_label: bool = True) -> str:
    """Result document(s) -> Prometheus text exposition (ends with a newline; '' for no data).

    ``run_id_label``: add a ``run_id`` label (from ``doc["run_id"]``) to every series, so several
    runs can share one textfile. Pushes turn it off: the Pushgateway adds ``run_id`` from the
    grouping key.
    """
    if isinstance(docs, (Mapping, Document)):
        docs = [docs]
    reg = _Registry()
    for doc, verdict in map(_typed, docs):
        base: dict[str, Any] = {}
        run_id = doc.run_id
        if run_id_label and run_id:
            base["run_id"] = run_id
        info = {**base, "kind": doc.kind}
        if doc.edgebench_version:
            info["edgebench_version"] = doc.edgebench_version
        for f in _INFO_FINGERPRINT:
            v = doc.fingerprint.get(f)
            if v is not None:
                info[f] = v
        reg.fam("edgebench_run_info", "gauge", "Facts about a result run; the value is always 1.").add(info, 1.0)
        reg.fam("edgebench_run_timestamp_seconds", "gauge", "When the run was created (unix time)."
                ).add({**base, "kind": doc.kind}, _created_epoch(doc.created))
        doc_model = doc.model
        models = dict.fromkeys(str(r.model) for r in doc.rows if r.model)
        run_labels = {**base, "kind": doc.kind, "model": str(doc_model or ",".join(models))}
        reg.fam("edgebench_run_ok", "gauge", "1 when every row's verdict is ok and no gate check failed, else 0."
                ).add(run_labels, 1.0 if verdict.state == "ok" and verdict.gate != "failed" else 0.0)
        if verdict.gate is not None:
            reg.fam("edgebench_gate_passed", "gauge", "1 when the CI gate passed, 0 when it failed (alert on 0)."
                    ).add(run_labels, 1.0 if verdict.gate == "passed" else 0.0)
            reg.fam("edgebench_gate_failed_checks", "gauge", "Number of gate checks that missed their threshold."
                    ).add(run_labels, float(len(verdict.failing)))
        # what every row's series share: the document's free-form envelope (meta: run_id, model, gate)
        # and fingerprint supply the fallbacks the rows leave open
        run = {"base": base, "model": doc_model, "device_model": doc.fingerprint.get("device_model"),
               "gate": doc.gate}
        rows: list[Row] = list(doc.rows)
        if doc.reference is not None and doc.kind != "train":
            ref = doc.reference
            rows.insert(0, ref if ref.precision is not None else ref.replace(precision="reference"))
        for row in rows:
            if isinstance(row, TrainRow):
                _add_train_row(reg, run, row)
            else:
                _add_inference_row(reg, run, row)
    return reg.render()
