"""Markdown report for pull-request comments (pure: result documents in, text out).

GitHub-flavoured tables: one headline table per run (inference rows: size, latency, accuracy,
worst drift; training rows: throughput and step time), then a per-output drift table. Cell text
is escaped for tables (``|`` -> ``\\|``, newlines -> spaces) and for the HTML GitHub renders
inside comments (``<``, ``>``, ``&``), so a model name can never break the layout or inject
markup.
"""

from __future__ import annotations

import html
import math
from edgebench.report._values import fmt_bytes, num
from typing import Any, Sequence

P99_MIN_SAMPLES = 662  # MLPerf LoadGen early-stopping minimum for a p99 at 99% confidence


def md_escape(value: Any) -> str:
    """Make any value safe inside a GitHub table cell."""
    s = "" if value is None else str(value)
    s = html.escape(s, quote=False)
    s = s.replace("\\", "\\\\").replace("|", "\\|").replace("`", "\\`")
    s = " ".join(s.splitlines()) if ("\n" in s or "\r" in s) else s
    return s or "-"


_num = num



def _f(value: Any, digits: int = 2, *, scale: float = 1.0, suffix: str = "") -> str:
    v = _num(value)
    if v is None:
        return "-"
    if math.isinf(v):
        return ("∞" if v > 0 else "-∞")
    if math.isnan(v):
        return "NaN"
    v *= scale
    if v != 0 and abs(v) < 10 ** -digits:
        return f"{v:.1e}{suffix}"
    return f"{v:,.{digits}f}{suffix}"


def _g(value: Any, sig: int = 3) -> str:
    """Significant-digit format for drift magnitudes that span many decades."""
    v = _num(value)
    if v is None:
        return "-"
    if math.isinf(v) or math.isnan(v):
        return _f(v)
    return f"{v:.{sig}g}"


def _ms(value: Any) -> str:
    """Latency in ms: 2 decimals from 1 ms up, 3 significant digits below (sub-ms models)."""
    v = _num(value)
    if v is None or math.isinf(v) or math.isnan(v) or abs(v) >= 1 or v == 0:
        return _f(v)
    return f"{v:.3g}"


_bytes = fmt_bytes


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]], right_from: int) -> list[str]:
    out = ["| " + " | ".join(headers) + " |",
           "|" + "|".join("---" if i < right_from else "---:" for i in range(len(headers))) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return out


def _worst(drift: Any, key: str, lowest: bool) -> float | None:
    if not isinstance(drift, dict):
        return None
    vals = [_num(s.get(key)) for s in drift.values() if isinstance(s, dict)]
    vals = [v for v in vals if v is not None]
    if not vals:
        return None
    return min(vals) if lowest else max(vals)


def _inference_rows(doc: dict[str, Any]) -> list[dict[str, Any]]:
    rows = [r for r in (doc.get("rows") or []) if isinstance(r, dict)]
    ref = doc.get("reference")
    if isinstance(ref, dict):
        ref = {**ref, "precision": ref.get("precision") or "reference"}
        ref["_reference"] = True
        rows = [ref, *rows]
    return [r for r in rows if not (doc.get("kind") == "train" or ("examples_per_s" in r and "latency_ms" not in r))]


def _status(row: dict[str, Any]) -> str:
    st = row.get("status") or "-"
    if st == "ok":
        return "ok"
    err = row.get("error")
    return f"**{md_escape(st)}**" + (f": {md_escape(err)}" if err else "")


def _header(doc: dict[str, Any]) -> list[str]:
    kind = doc.get("kind") or "result"
    models = list(dict.fromkeys(str(r.get("model")) for r in (doc.get("rows") or [])
                                if isinstance(r, dict) and r.get("model")))
    title = f"### edgebench {md_escape(kind)}"
    if models:
        title += ": " + ", ".join(md_escape(m) for m in models)
    fp = doc.get("fingerprint") or {}
    facts = []
    if doc.get("run_id"):
        facts.append(f"run {md_escape(doc['run_id'])}")
    if doc.get("created"):
        facts.append(md_escape(doc["created"]))
    for label, key in (("TF", "tensorflow"), ("LiteRT", "litert")):
        if fp.get(key):
            facts.append(f"{label} {md_escape(fp[key])}")
    if fp.get("cpu_model"):
        cpu = md_escape(fp["cpu_model"])
        facts.append(f"{cpu} ×{fp['cpu_count']}" if fp.get("cpu_count") else cpu)
    if fp.get("gpu"):
        facts.append(md_escape(fp["gpu"]))
    if doc.get("edgebench_version"):
        facts.append(f"edgebench {md_escape(doc['edgebench_version'])}")
    out = [title, ""]
    if facts:
        out += [" · ".join(facts), ""]
    return out


def _inference_table(rows: list[dict[str, Any]]) -> tuple[list[str], bool]:
    few = False
    body = []
    for r in rows:
        lat = r.get("latency_ms") if isinstance(r.get("latency_ms"), dict) else {}
        acc = r.get("accuracy") if isinstance(r.get("accuracy"), dict) else {}
        p99 = _ms(lat.get("p99"))
        if lat and lat.get("p99_valid") is False:
            p99 += " †"
            few = True
        prec = md_escape(r.get("precision"))
        if r.get("_reference"):
            prec += " (ref)"
        red = _num(r.get("size_reduction_pct"))
        body.append([
            md_escape(r.get("model")), prec, md_escape(r.get("target")), md_escape(r.get("device_model")),
            _status(r), _bytes(r.get("size_bytes")),
            "-" if red is None else f"{red:.1f}%",
            _ms(lat.get("p50")), p99, _f(lat.get("qps"), 1),
            _f(acc.get("top1"), 2, scale=100, suffix="%"), _f(acc.get("top1_drop_pp"), 2),
            _f(acc.get("top1_agreement"), 2, scale=100, suffix="%"),
            _f(_worst(r.get("drift"), "psnr_db", True), 1),
        ])
    headers = ["model", "precision", "target", "device", "status", "size", "size red.", "p50 ms", "p99 ms",
               "QPS", "top-1", "top-1 drop pp", "top-1 agree", "min PSNR dB"]
    return _table(headers, body, right_from=5), few


def _drift_table(rows: list[dict[str, Any]]) -> list[str]:
    body = []
    for r in rows:
        drift = r.get("drift")
        if not isinstance(drift, dict):
            continue
        for out, s in drift.items():
            if not isinstance(s, dict):
                continue
            body.append([md_escape(r.get("model")), md_escape(r.get("precision")), md_escape(r.get("target")),
                         md_escape(out), _g(s.get("max_abs")), _g(s.get("mean_abs")), _g(s.get("rmse")),
                         _g(s.get("rel_l2")), _f(s.get("cosine"), 6), _f(s.get("psnr_db"), 1),
                         md_escape(s.get("nan")) if s.get("nan") is not None else "-",
                         md_escape(s.get("inf")) if s.get("inf") is not None else "-"])
    if not body:
        return []
    return _table(["model", "precision", "target", "output", "max abs", "mean abs", "RMSE", "rel L2", "cosine",
                   "PSNR dB", "NaN", "Inf"], body, right_from=4)


def _train_table(doc: dict[str, Any]) -> list[str]:
    body = []
    for r in (doc.get("rows") or []):
        if not isinstance(r, dict) or not (doc.get("kind") == "train" or "examples_per_s" in r and "latency_ms" not in r):
            continue
        st = r.get("step_time_ms") if isinstance(r.get("step_time_ms"), dict) else {}
        xla = r.get("xla")
        body.append([md_escape(r.get("model")), md_escape(r.get("precision")),
                     "-" if xla is None else str(bool(xla)).lower(), md_escape(r.get("strategy")),
                     md_escape(r.get("input_pipeline")), md_escape(r.get("target")), _status(r), _f(r.get("batch_size"), 0),
                     _f(r.get("examples_per_s"), 1), _ms(st.get("p50", st.get("mean"))), _ms(st.get("p99"))])
    if not body:
        return []
    return _table(["model", "precision", "xla", "strategy", "pipeline", "target", "status", "batch", "examples/s",
                   "step p50 ms", "step p99 ms"], body, right_from=7)


def render_markdown(docs: dict[str, Any] | Sequence[dict[str, Any]]) -> str:
    """Result document(s) -> GitHub-flavoured Markdown (ends with one newline)."""
    if isinstance(docs, dict):
        docs = [docs]
    out: list[str] = []
    for doc in docs:
        if out:
            out.append("")
        out += _header(doc)
        inf = _inference_rows(doc)
        few = False
        if inf:
            table, few = _inference_table(inf)
            out += table
        train = _train_table(doc)
        if train:
            if inf:
                out.append("")
            out += train
        if not inf and not train:
            out.append("_no result rows_")
        drift = _drift_table(inf)
        if drift:
            out += ["", "<details><summary>per-output drift vs reference</summary>", ""] + drift + ["", "</details>"]
        if few:
            out += ["", f"† fewer than {P99_MIN_SAMPLES} timed runs: the p99 is not trustworthy; "
                        "raise --runs or --min-time."]
    return "\n".join(out) + "\n"
