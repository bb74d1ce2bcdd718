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
from typing import Any, Iterable

from edgebench.identity import series_key
from edgebench.metrics import REGISTRY
from edgebench.outcome import row_verdict_of, run_verdict_of
from edgebench.rows import typed_row
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
    ("max_abs", "edgebench_drift_max_abs", "Largest absolute difference from the reference output."),
    ("mean_abs", "edgebench_drift_mean_abs", "Mean absolute difference from the reference output."),
    ("rmse", "edgebench_drift_rmse", "Root mean squared difference from the reference output."),
    ("rel_l2", "edgebench_drift_rel_l2_ratio", "Relative L2 error ||y - ref|| / ||ref||."),
    ("cosine", "edgebench_drift_cosine_similarity", "Cosine similarity with the reference output."),
    ("psnr_db", "edgebench_drift_psnr_db", "Peak signal-to-noise ratio against the reference output, in decibels."),
    ("nan", "edgebench_drift_nan_values", "NaN values in the output."),
    ("inf", "edgebench_drift_inf_values", "Infinite values in the output."),
)

_INFO_FIELDS = ("edgebench_version", "tensorflow", "litert", "python", "os", "cpu_model", "gpu", "hostname")


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


def _doc_model(doc: dict[str, Any]) -> str:
    models = dict.fromkeys(str(r.get("model")) for r in doc.get("rows") or [] if isinstance(r, dict) and r.get("model"))
    return str(doc.get("model") or ",".join(models))


def _row_labels(row: dict[str, Any], base: dict[str, Any], doc: dict[str, Any]) -> dict[str, Any]:
    fp = row.get("fingerprint") or {}
    device_model = row.get("device_model") or fp.get("device_model") or (doc.get("fingerprint") or {}).get("device_model")
    out = dict(base)
    out.update({
        "model": row.get("model") or doc.get("model") or "",
        "precision": row.get("precision") or "",
        "target": row.get("target") or "",
        "device_model": device_model or "",
    })
    # the configuration identity (identity.series_key) beyond the four above: two rows that differ in
    # it are two series, never one (a --delegate none run, int8 with tensors kept float ...)
    ident = series_key(row)
    for name in _IDENTITY_LABELS:
        v = ident.get(name)
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
                    "gpu_precision", "period_ms", "sustained")


def _add_latency(reg: _Registry, labels: dict[str, Any], lat: dict[str, Any]) -> None:
    summ = reg.fam("edgebench_inference_latency_seconds", "summary",
                   "Per-inference latency over the timed runs (warmup excluded).")
    for key, q in _LATENCY_QUANTILES:
        v = _num(lat.get(key))
        if v is not None:
            summ.add({**labels, "quantile": q}, v / 1e3)
    mean, count = _num(lat.get("mean")), _num(lat.get("samples"))
    if mean is not None and count is not None:
        summ.add(labels, mean / 1e3 * count, suffix="_sum")
        summ.add(labels, count, suffix="_count")
    for key, stat in (("mean", "mean"), ("std", "stddev"), ("min", "min"), ("max", "max")):
        v = _num(lat.get(key))
        reg.fam(f"edgebench_inference_latency_{stat}_seconds", "gauge",
                f"Per-inference latency {stat} over the timed runs.").add(labels, None if v is None else v / 1e3)
    if "p99_valid" in lat:
        reg.fam("edgebench_inference_latency_p99_valid", "gauge",
                f"1 when the run had enough samples for a trustworthy p99 (>= {P99_MIN_SAMPLES}), else 0."
                ).add(labels, 1.0 if lat.get("p99_valid") else 0.0)


def _add_registry_gauges(reg: _Registry, labels: dict[str, Any], typed: Any) -> None:
    if typed is None:     # a malformed foreign row: its raw-dict families above still draw what they can
        return
    """One gauge per registry metric that names a Prometheus series (``metrics.REGISTRY``), in its
    base unit; a metric the row does not have (another kind of row, a part not measured) is left out."""
    for m in REGISTRY:
        if m.prometheus is None:
            continue
        v = m.value(typed)
        reg.fam(m.prometheus, "gauge", m.help).add(labels, None if v is None else v * m.prometheus_scale)


def _add_inference_row(reg: _Registry, doc: dict[str, Any], row: dict[str, Any], base: dict[str, Any]) -> None:
    labels = _row_labels(row, base, doc)
    if row.get("status") is not None:
        v = row_verdict_of(doc, row)
        reg.fam("edgebench_row_ok", "gauge", "1 when the row's verdict is ok; 0 when it failed, was skipped, "
                "had NaN/Inf outputs, a silent failure or a failed gate check."
                ).add(labels, 1.0 if v.ok else 0.0)
        reg.fam("edgebench_row_verdict", "gauge", "1 for the row's verdict (label verdict: ok, gate-failed, "
                "silent, nonfinite, failed, skipped)."
                ).add({**labels, "verdict": v.state}, 1.0)
    lat = row.get("latency_ms")
    if isinstance(lat, dict):
        _add_latency(reg, labels, lat)
    _add_registry_gauges(reg, labels, typed_row(row, kind=doc.get("kind")))
    acc = row.get("accuracy")
    if isinstance(acc, dict):
        reg.fam("edgebench_accuracy_top5_ratio", "gauge", "Top-5 accuracy on the labelled input set."
                ).add(labels, _num(acc.get("top5")))
        reg.fam("edgebench_accuracy_top1_agreement_ratio", "gauge",
                "Share of inputs whose top-1 class matches the reference."
                ).add(labels, _num(acc.get("top1_agreement")))
        reg.fam("edgebench_accuracy_top5_agreement_ratio", "gauge",
                "Share of inputs whose top-5 classes match the reference."
                ).add(labels, _num(acc.get("top5_agreement")))
    drift = row.get("drift")
    if isinstance(drift, dict):
        for output, stats in drift.items():
            if not isinstance(stats, dict):
                continue
            dl = {**labels, "output": output}
            for key, name, help_text in _DRIFT_STATS:
                reg.fam(name, "gauge", help_text).add(dl, _num(stats.get(key)))
    _add_regimes(reg, labels, row)
    conc = row.get("concurrency")
    if isinstance(conc, list):
        for item in conc:
            if not isinstance(item, dict):
                continue
            n = item.get("level", item.get("concurrency", item.get("streams", item.get("threads"))))
            if n is None:
                continue
            cl = {**labels, "concurrency": n}
            lat_c = item.get("latency_ms") if isinstance(item.get("latency_ms"), dict) else {}
            reg.fam("edgebench_inference_concurrent_queries_per_second", "gauge",
                    "Inferences per second with N concurrent streams."
                    ).add(cl, _num(item.get("qps", lat_c.get("qps"))))
            p99 = _num(lat_c.get("p99", item.get("p99_ms")))
            reg.fam("edgebench_inference_concurrent_latency_p99_seconds", "gauge",
                    "p99 per-inference latency with N concurrent streams."
                    ).add(cl, None if p99 is None else p99 / 1e3)


def _add_regimes(reg: _Registry, labels: dict[str, Any], row: dict[str, Any]) -> None:
    """Sustained timeline, paced, cold-start and energy families (edgebench.sustain)."""
    for w in row.get("timeline") or []:
        if not isinstance(w, dict):
            continue
        wl = {**labels, "window": (w.get("index") or 0) + 1}
        lat = w.get("latency_ms") if isinstance(w.get("latency_ms"), dict) else {}
        fam = reg.fam("edgebench_timeline_latency_seconds", "summary",
                      "Per-inference latency in one window of a sustained run.")
        for key, q in _LATENCY_QUANTILES[:4]:
            v = _num(lat.get(key))
            if v is not None:
                fam.add({**wl, "quantile": q}, v / 1e3)
        mean, count = _num(lat.get("mean")), _num(w.get("samples"))
        if count is not None:
            fam.add(wl, (mean or 0.0) / 1e3 * count, suffix="_sum")
            fam.add(wl, count, suffix="_count")
        reg.fam("edgebench_timeline_window_end_seconds", "gauge", "End of the window, seconds into the sustained run."
                ).add(wl, _num(w.get("t_end_s")))
        th = w.get("thermal") if isinstance(w.get("thermal"), dict) else {}
        reg.fam("edgebench_timeline_hottest_celsius", "gauge", "Hottest CPU/SoC thermal zone at the window's end."
                ).add(wl, _num(th.get("hottest_c")))
        reg.fam("edgebench_timeline_thermal_status", "gauge", "Android thermal status at the window's end (0 none .. 6)."
                ).add(wl, _num(th.get("thermal_status")))
    s = row.get("sustained") if isinstance(row.get("sustained"), dict) else {}
    reg.fam("edgebench_sustained_steady_state_ratio", "gauge", "Last window p50 / first window p50 of a sustained run."
            ).add(labels, _num(s.get("steady_state_ratio")))
    reg.fam("edgebench_sustained_time_to_throttle_seconds", "gauge",
            "Seconds into a sustained run when throttling was first seen (absent: never)."
            ).add(labels, _num(s.get("time_to_throttle_s")))
    p = row.get("paced") if isinstance(row.get("paced"), dict) else {}
    if p:
        per, ach = _num(row.get("period_ms")), _num(p.get("achieved_period_ms"))
        reg.fam("edgebench_paced_period_seconds", "gauge", "Requested period between paced invokes."
                ).add(labels, None if per is None else per / 1e3)
        reg.fam("edgebench_paced_achieved_period_seconds", "gauge", "Achieved period between paced invokes."
                ).add(labels, None if ach is None else ach / 1e3)
        b2b = p.get("back_to_back_ms") if isinstance(p.get("back_to_back_ms"), dict) else {}
        fam = reg.fam("edgebench_paced_back_to_back_latency_seconds", "summary",
                      "Back-to-back latency of the same model next to a paced run.")
        for key, q in _LATENCY_QUANTILES[:4]:
            v = _num(b2b.get(key))
            fam.add({**labels, "quantile": q}, None if v is None else v / 1e3)
        mean, count = _num(b2b.get("mean")), _num(b2b.get("samples"))
        if mean is not None and count is not None:
            fam.add(labels, mean / 1e3 * count, suffix="_sum")
            fam.add(labels, count, suffix="_count")
        reg.fam("edgebench_paced_p50_ratio", "gauge", "Paced p50 / back-to-back p50.").add(labels, _num(p.get("p50_ratio")))
    c = row.get("cold_start") if isinstance(row.get("cold_start"), dict) else {}
    for cache, src in (("none", c), ("warm", c.get("warm_cache") if isinstance(c.get("warm_cache"), dict) else {})):
        for phase in ("process_start", "init", "first_inference", "total"):
            v = _num((src.get(f"{phase}_ms") or {}).get("p50")) if isinstance(src.get(f"{phase}_ms"), dict) else None
            reg.fam("edgebench_cold_start_seconds", "gauge", "Median over fresh processes of one cold-start phase."
                    ).add({**labels, "phase": phase, "cache": cache}, None if v is None else v / 1e3)
    e = row.get("energy")
    if isinstance(e, dict):
        el = {**labels, "source": e.get("source") or ""}
        mj = _num(e.get("mj_per_inference"))
        reg.fam("edgebench_energy_joules_per_inference", "gauge",
                "Net energy per inference (run minus idle baseline); see edgebench_energy_valid."
                ).add(el, None if mj is None else mj / 1e3)
        reg.fam("edgebench_energy_inferences_per_joule", "gauge", "Inferences per joule of net energy."
                ).add(el, _num(e.get("inferences_per_j")))
        reg.fam("edgebench_energy_valid", "gauge", "1 when the energy figure passed every validity check, else 0."
                ).add(el, 1.0 if e.get("valid") else 0.0)


def _add_train_row(reg: _Registry, doc: dict[str, Any], row: dict[str, Any], base: dict[str, Any]) -> None:
    labels = _row_labels(row, base, doc)
    labels.update({
        "batch_size": row.get("batch_size", ""),
        "xla": "" if row.get("xla") is None else str(bool(row.get("xla"))).lower(),
        "strategy": row.get("strategy") or "",
        "input_pipeline": row.get("input_pipeline") or "",
    })
    status = row.get("status")
    if status is not None:
        reg.fam("edgebench_training_cell_ok", "gauge", "1 when the training cell's status is ok, else 0."
                ).add(labels, 1.0 if status == "ok" else 0.0)
    _add_registry_gauges(reg, labels, typed_row(row, kind="train"))
    st = row.get("step_time_ms")
    if isinstance(st, dict):
        fam = reg.fam("edgebench_training_step_time_seconds", "summary", "Training step time (warmup steps excluded).")
        for key, q in _LATENCY_QUANTILES:
            v = _num(st.get(key))
            if v is not None:
                fam.add({**labels, "quantile": q}, v / 1e3)
        mean, count = _num(st.get("mean")), _num(st.get("samples", st.get("steps")))
        if mean is not None and count is not None:
            fam.add(labels, mean / 1e3 * count, suffix="_sum")
            fam.add(labels, count, suffix="_count")
    elif _num(st) is not None:
        reg.fam("edgebench_training_step_time_mean_seconds", "gauge", "Mean training step time."
                ).add(labels, _num(st) / 1e3)


def render_prometheus(docs: dict[str, Any] | Iterable[dict[str, Any]], *, run_id_label: bool = True) -> str:
    """Result document(s) -> Prometheus text exposition (ends with a newline; '' for no data).

    ``run_id_label``: add a ``run_id`` label (from ``doc["run_id"]``) to every series, so several
    runs can share one textfile. Pushes turn it off: the Pushgateway adds ``run_id`` from the
    grouping key.
    """
    if isinstance(docs, dict) or hasattr(docs, "to_dict"):
        docs = [docs]
    docs = [d.to_dict() if hasattr(d, "to_dict") else d for d in docs]   # the stored (JSON) form
    reg = _Registry()
    for doc in docs:
        base: dict[str, Any] = {}
        if run_id_label and doc.get("run_id"):
            base["run_id"] = doc["run_id"]
        fp = doc.get("fingerprint") or {}
        info = {**base, "kind": doc.get("kind") or ""}
        for f in _INFO_FIELDS:
            v = doc.get(f) if f == "edgebench_version" else fp.get(f)
            if v is not None:
                info[f] = v
        reg.fam("edgebench_run_info", "gauge", "Facts about a result run; the value is always 1.").add(info, 1.0)
        reg.fam("edgebench_run_timestamp_seconds", "gauge", "When the run was created (unix time)."
                ).add({**base, "kind": doc.get("kind") or ""}, _created_epoch(doc.get("created")))
        verdict = run_verdict_of(doc)
        run_labels = {**base, "kind": doc.get("kind") or "", "model": _doc_model(doc)}
        reg.fam("edgebench_run_ok", "gauge", "1 when every row's verdict is ok and no gate check failed, else 0."
                ).add(run_labels, 1.0 if verdict.state == "ok" and verdict.gate != "failed" else 0.0)
        if verdict.gate is not None:
            reg.fam("edgebench_gate_passed", "gauge", "1 when the CI gate passed, 0 when it failed (alert on 0)."
                    ).add(run_labels, 1.0 if verdict.gate == "passed" else 0.0)
            reg.fam("edgebench_gate_failed_checks", "gauge", "Number of gate checks that missed their threshold."
                    ).add(run_labels, float(len(verdict.failing)))
        kind = doc.get("kind")
        rows = [r for r in (doc.get("rows") or []) if isinstance(r, dict)]
        if kind == "train":
            for row in rows:
                _add_train_row(reg, doc, row, base)
            continue
        ref = doc.get("reference")
        if isinstance(ref, dict):
            ref = dict(ref)
            ref.setdefault("precision", "reference")
            rows = [ref, *rows]
        for row in rows:
            if "examples_per_s" in row and "latency_ms" not in row:
                _add_train_row(reg, doc, row, base)
            else:
                _add_inference_row(reg, doc, row, base)
    return reg.render()
