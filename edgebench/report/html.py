"""Self-contained HTML report (pure: result documents in, one HTML string out).

Everything is inline: CSS in a ``<style>`` element, plots as inline ``<svg>`` drawn here from
the raw samples -- no JavaScript, no fonts, no ``src``/``href`` to anything outside the file, so
the report opens offline and can be attached to a CI run. Every string from a result (model
names, targets, output names, fingerprint values, errors) goes through ``html.escape``.

Sections, in this order, each a ``<section id=...>``; a section with nothing to show is left out
(and from the navigation line), so the report opens with its verdict and holds no empty headings.
Tables scroll sideways inside their own box and plots scale down, so nothing is wider than the
page (1280 px checked in headless Chromium by the tests); the environment is collapsed:

``verdict``      first: each run's verdict (``outcome.run_verdict``: gate passed/failed with the
                 failing checks, silent failures, failed rows) and the ``diagnose`` command
``fingerprint``  environment fingerprint of the first run, plus the key fields that differ
                 between runs (they make numbers not directly comparable)
``results``      precision x target grid per model (p99 / size / top-1) and the full row table
``latency``      per row: latency CDF and histogram from the raw ``samples_ns``
``sustained``    latency and temperature over time of sustained runs, paced vs back-to-back, cold
                 starts, energy per inference (``report/html_sustain.py``)
``pareto``       size vs p99 scatter, accuracy annotated, Pareto-optimal rows filled
``where``        where the time goes: delegated nodes, ops left on the CPU, silent-failure verdicts, top ops
``drift``        per-output drift table (max/mean abs, RMSE, rel L2, cosine, PSNR, NaN/Inf)
``training``     training throughput vs batch size, one line per (model, precision, xla, strategy,
                 input pipeline)
``diagnose``     per-layer quantization error along the graph order and the worst layers
                 (``edgebench diagnose`` results; rendered by ``report.diagnose``)
``history``      metric over time for each series with earlier stored runs
"""

from __future__ import annotations

import datetime as _dt
import html
import math
import re
from edgebench.report._values import fmt_bytes, num
from typing import Any, Iterable, Sequence

from edgebench.fingerprint import KEY_FIELDS, diff_fingerprints
from edgebench.outcome import TOP1_CHANGE, RowVerdict, precision_label, row_verdict_of, run_verdict_of, top1_change
from edgebench.report.diagnose import accuracy_text as diagnose_accuracy
from edgebench.report.pivot import SUBCOLUMNS, cell_values, matrix_pivots, short_value, varying_axes

SECTIONS = ("verdict", "fingerprint", "results", "where", "latency", "sustained", "pareto", "drift", "training", "diagnose",
            "history")

_PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2",
            "#7f7f7f", "#bcbd22", "#17becf")

_CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:2rem;color:#222;max-width:1200px}
h1{font-size:1.6rem}h2{border-bottom:1px solid #ccc;padding-bottom:.2rem;margin-top:2.2rem}
h3{font-size:1rem;margin:1.2rem 0 .4rem}
table{border-collapse:collapse;margin:.5rem 0;font-size:.85rem}.tw{max-width:100%;overflow-x:auto}
details>summary{cursor:pointer;color:#444}
th,td{border:1px solid #ddd;padding:.25rem .5rem;text-align:right;vertical-align:top}
th{background:#f3f3f3}td.l,th.l{text-align:left}
.note{color:#666;font-style:italic}.bad{color:#b00020;font-weight:600}.good{color:#1b7e2c;font-weight:600}.warn{color:#a15c00}
.plots{display:flex;flex-wrap:wrap;gap:1rem}
svg{background:#fff;border:1px solid #eee;max-width:100%;height:auto}
svg text{font-family:system-ui,sans-serif;font-size:11px;fill:#333}
.ok{color:#1b7f2a}
"""


# ---------------------------------------------------------------------------------------------
# small helpers


def _e(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)


_num = num



def _fmt(value: Any, digits: int = 3, *, scale: float = 1.0, suffix: str = "") -> str:
    v = _num(value)
    if v is None:
        return "-"
    if math.isinf(v):
        return ("∞" if v > 0 else "-∞") + suffix
    if math.isnan(v):
        return "NaN"
    v *= scale
    if v != 0 and (abs(v) < 10 ** -(digits) or abs(v) >= 1e7):
        return f"{v:.{max(digits - 1, 1)}e}{suffix}"
    return f"{v:,.{digits}f}{suffix}" if abs(v) < 1000 else f"{v:,.0f}{suffix}"


def _fmt_ms(value: Any) -> str:
    """Latency in ms: 3 decimals from 1 ms up, 3 significant digits below (sub-ms models)."""
    v = _num(value)
    if v is None or not math.isfinite(v) or abs(v) >= 1 or v == 0:
        return _fmt(v)
    return f"{v:.3g}"


_fmt_bytes = fmt_bytes


def _fmt_pct(value: Any, digits: int = 2) -> str:
    """A ratio 0..1 -> 'xx.xx%'."""
    v = _num(value)
    return "-" if v is None else f"{v * 100:.{digits}f}%"


def _table(headers: Sequence[str], rows: Iterable[Sequence[Any]], *, left: int = 1,
           raw_cols: Sequence[int] = ()) -> str:
    """An HTML table (in a box that scrolls sideways when it is wider than the page); cells are
    escaped unless their column index is in ``raw_cols``."""
    out = ['<div class="tw"><table><thead><tr>']
    for i, h in enumerate(headers):
        out.append(f'<th class="l">{_e(h)}</th>' if i < left else f"<th>{_e(h)}</th>")
    out.append("</tr></thead><tbody>")
    for r in rows:
        out.append("<tr>")
        for i, c in enumerate(r):
            cell = c if i in raw_cols else _e(c)
            out.append(f'<td class="l">{cell}</td>' if i < left else f"<td>{cell}</td>")
        out.append("</tr>")
    out.append("</tbody></table></div>")
    return "".join(out)


def _note(text: str) -> str:
    return f'<p class="note">{_e(text)}</p>'


def _rows(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """Inference rows of a doc: the reference row first (if any), then ``rows`` (none for a
    diagnose document: its rows are per-layer analyses, drawn by the diagnose section)."""
    if doc.get("kind") == "diagnose":
        return []
    rows = [r for r in (doc.get("rows") or []) if isinstance(r, dict)]
    ref = doc.get("reference")
    if isinstance(ref, dict) and doc.get("kind") != "train":
        ref = dict(ref)
        ref.setdefault("precision", "reference")
        ref["_is_reference"] = True
        rows = [ref, *rows]
    return rows


def _is_train_row(doc: dict[str, Any], row: dict[str, Any]) -> bool:
    return doc.get("kind") == "train" or ("examples_per_s" in row and "latency_ms" not in row)


def _verdict(doc: dict[str, Any], row: dict[str, Any]) -> RowVerdict:
    """The row's verdict (``outcome.row_verdict``), the same words as every other output."""
    return row_verdict_of(doc, row)


def _verdict_section(docs: list[dict[str, Any]]) -> str:
    lines = []
    for d in docs:
        v = run_verdict_of(d)
        models = ", ".join(dict.fromkeys(str(r.get("model")) for r in _rows(d) if r.get("model"))) or "-"
        if d.get("kind") == "diagnose":       # its verdict is the diagnosis: findings per precision
            rid = str(d.get("run_id") or "")[:12]
            said = "; ".join(f"{r.get('precision')}: {r.get('findings', 0)} finding(s), {diagnose_accuracy(r)}"
                             if r.get("status") == "ok" else f"{r.get('precision')}: {r.get('status')} "
                             f"({r.get('error')})" for r in d.get("rows") or [] if isinstance(r, dict))
            lines.append(f"<li><strong>{_e(d.get('model') or '-')}</strong>" + (f" (run {_e(rid)})" if rid else "")
                         + f": diagnosed — {_e(said)}</li>")
            continue
        cls = "good" if v.state == "ok" and v.gate != "failed" else "bad"
        head = f'<span class="{cls}">{_e(v.text if v.gate != "failed" else "GATE FAILED")}</span>'
        rid = str(d.get("run_id") or "")[:12]
        item = f"<strong>{_e(models)}</strong>" + (f" (run {_e(rid)})" if rid else "") + f": {head}"
        if v.gate == "failed":
            item += "<ul>" + "".join(f"<li>{_e(m)}</li>" for m in v.failing) + "</ul>"
        if v.diagnose:
            item += f"<p>find the layer that breaks it: <code>{_e(v.diagnose)}</code></p>"
        lines.append(f"<li>{item}</li>")
    return _section("verdict", "Verdict", "<ul>" + "".join(lines) + "</ul>") if lines else ""


def _row_name(row: dict[str, Any]) -> str:
    parts = [row.get("model") or "?", precision_label(row), row.get("target") or "-"]
    if row.get("device_model"):
        parts.append(str(row["device_model"]))
    return " / ".join(str(p) for p in parts)


def _lat(row: dict[str, Any]) -> dict[str, Any]:
    lat = row.get("latency_ms")
    return lat if isinstance(lat, dict) else {}


def _acc(row: dict[str, Any]) -> dict[str, Any]:
    acc = row.get("accuracy")
    return acc if isinstance(acc, dict) else {}


# ---------------------------------------------------------------------------------------------
# SVG plotting (inline, dependency-free)


def nice_ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    """About ``n`` round tick values inside [lo, hi] (1/2/2.5/5 x 10^k steps)."""
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return []
    if hi <= lo:
        hi = lo + (abs(lo) * 0.1 or 1.0)
    raw = (hi - lo) / max(n, 1)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    k = math.ceil(lo / step - 1e-9)
    ticks = []
    while k * step <= hi + step * 1e-9:
        ticks.append(round(k * step, 12))
        k += 1
    return ticks


def _tick_label(v: float) -> str:
    if v == 0:
        return "0"
    if abs(v) >= 1e5 or abs(v) < 1e-3:
        return f"{v:.1e}"
    return f"{v:g}"


class _Plot:
    """A cartesian plot area mapping data coordinates to SVG pixels."""

    def __init__(self, xs: Sequence[float], ys: Sequence[float], *, width: int = 460, height: int = 260,
                 xlabel: str = "", ylabel: str = "", title: str = "", y0: bool = False,
                 x_is_time: bool = False, legend: Sequence[tuple[str, str]] = (),
                 x_pad: tuple[float, float] = (0.04, 0.04)):
        self.legend_items = list(legend)[:12]
        # The legend sits in the right margin, so it never covers data.
        extra = int(max((len(lbl) for lbl, _ in self.legend_items), default=0) * 6.3 + 24) \
            if self.legend_items else 0
        self.w, self.h = width + extra, height
        self.ml, self.mr, self.mt, self.mb = 62, (40 if x_is_time else 14) + extra, 26, 42
        fx = [x for x in xs if math.isfinite(x)] or [0.0, 1.0]
        fy = [y for y in ys if math.isfinite(y)] or [0.0, 1.0]
        self.x0, self.x1 = min(fx), max(fx)
        self.y0, self.y1 = (min(0.0, min(fy)) if y0 else min(fy)), max(fy)
        if self.x1 <= self.x0:
            pad = abs(self.x0) * 0.05 or 1.0
            self.x0, self.x1 = self.x0 - pad, self.x1 + pad
        if self.y1 <= self.y0:
            pad = abs(self.y0) * 0.05 or 1.0
            self.y0, self.y1 = self.y0 - pad, self.y1 + pad
        span = self.x1 - self.x0
        self.x0, self.x1 = self.x0 - span * x_pad[0], self.x1 + span * x_pad[1]
        pad = (self.y1 - self.y0) * 0.06
        self.y0 = self.y0 if (y0 and self.y0 == 0) else self.y0 - pad
        self.y1 += pad
        self.xlabel, self.ylabel, self.title, self.x_is_time = xlabel, ylabel, title, x_is_time
        self.body: list[str] = []

    def px(self, x: float) -> float:
        return self.ml + (x - self.x0) / (self.x1 - self.x0) * (self.w - self.ml - self.mr)

    def py(self, y: float) -> float:
        return self.h - self.mb - (y - self.y0) / (self.y1 - self.y0) * (self.h - self.mt - self.mb)

    def _axes(self) -> list[str]:
        out = []
        x_l, x_r, y_t, y_b = self.ml, self.w - self.mr, self.mt, self.h - self.mb
        for t in nice_ticks(self.y0, self.y1):
            if self.y0 <= t <= self.y1:
                y = self.py(t)
                out.append(f'<line x1="{x_l}" y1="{y:.1f}" x2="{x_r}" y2="{y:.1f}" stroke="#eee"/>')
                out.append(f'<text x="{x_l - 4}" y="{y + 3.5:.1f}" text-anchor="end">{_e(_tick_label(t))}</text>')
        if self.x_is_time:
            xt = [self.x0 + (self.x1 - self.x0) * k / 3 for k in range(4)]
        else:
            xt = [t for t in nice_ticks(self.x0, self.x1) if self.x0 <= t <= self.x1]
        for t in xt:
            x = self.px(t)
            lbl = (_dt.datetime.fromtimestamp(t, _dt.timezone.utc).strftime("%m-%d %H:%M")
                   if self.x_is_time else _tick_label(t))
            out.append(f'<line x1="{x:.1f}" y1="{y_b}" x2="{x:.1f}" y2="{y_b + 4}" stroke="#555"/>')
            out.append(f'<text x="{x:.1f}" y="{y_b + 16}" text-anchor="middle">{_e(lbl)}</text>')
        out.append(f'<line x1="{x_l}" y1="{y_b}" x2="{x_r}" y2="{y_b}" stroke="#555"/>')
        out.append(f'<line x1="{x_l}" y1="{y_t}" x2="{x_l}" y2="{y_b}" stroke="#555"/>')
        out.append(f'<text x="{(x_l + x_r) / 2:.1f}" y="{self.h - 8}" text-anchor="middle">{_e(self.xlabel)}</text>')
        out.append(f'<text x="14" y="{(y_t + y_b) / 2:.1f}" text-anchor="middle" '
                   f'transform="rotate(-90 14 {(y_t + y_b) / 2:.1f})">{_e(self.ylabel)}</text>')
        if self.title:
            out.append(f'<text x="{x_l}" y="16" font-weight="bold">{_e(self.title)}</text>')
        return out

    def polyline(self, xs: Sequence[float], ys: Sequence[float], color: str, *, width: float = 1.6) -> None:
        pts = " ".join(f"{self.px(x):.1f},{self.py(y):.1f}" for x, y in zip(xs, ys)
                       if math.isfinite(x) and math.isfinite(y))
        if pts:
            self.body.append(f'<polyline points="{pts}" fill="none" stroke="{color}" stroke-width="{width}"/>')

    def point(self, x: float, y: float, color: str, *, filled: bool = True, r: float = 4.0,
              tip: str = "") -> None:
        if not (math.isfinite(x) and math.isfinite(y)):
            return
        fill = color if filled else "#fff"
        title = f"<title>{_e(tip)}</title>" if tip else ""
        self.body.append(f'<circle cx="{self.px(x):.1f}" cy="{self.py(y):.1f}" r="{r}" fill="{fill}" '
                         f'stroke="{color}" stroke-width="1.5">{title}</circle>')

    def vline(self, x: float, color: str, label: str = "") -> None:
        if not (self.x0 <= x <= self.x1):
            return
        px = self.px(x)
        self.body.append(f'<line x1="{px:.1f}" y1="{self.mt}" x2="{px:.1f}" y2="{self.h - self.mb}" '
                         f'stroke="{color}" stroke-dasharray="4 3"/>')
        if label:
            self.body.append(f'<text x="{px + 3:.1f}" y="{self.mt + 10}" fill="{color}">{_e(label)}</text>')

    def rect(self, x0: float, x1: float, y: float, color: str) -> None:
        a, b = self.px(x0), self.px(x1)
        top, base = self.py(y), self.py(max(self.y0, 0.0))
        self.body.append(f'<rect x="{a:.1f}" y="{top:.1f}" width="{max(b - a - 0.5, 0.5):.1f}" '
                         f'height="{max(base - top, 0):.1f}" fill="{color}" fill-opacity="0.75"/>')

    def text(self, x: float, y: float, label: str, color: str = "#333", dx: float = 6, dy: float = -6) -> None:
        if math.isfinite(x) and math.isfinite(y):
            self.body.append(f'<text x="{self.px(x) + dx:.1f}" y="{self.py(y) + dy:.1f}" fill="{color}">'
                             f'{_e(label)}</text>')

    # 11 px sans-serif (see _CSS): a conservative advance per character, and the box around a
    # baseline, for placing labels that never overlap each other or a point.
    CHAR_W, ASCENT, DESCENT = 6.8, 9.0, 3.0

    def labels(self, items: Sequence[tuple[float, float, str, str]], *, point_r: float = 5.0) -> list[bool]:
        """Place text labels next to their points so that no two overlap, none covers a point and
        none leaves the plot area; a label with no free spot among eight candidates is left out.
        Returns, per item, whether its label was drawn."""
        pts = [(self.px(x), self.py(y)) for x, y, _, _ in items]
        taken = [(px - point_r - 1, py - point_r - 1, px + point_r + 1, py + point_r + 1) for px, py in pts]
        lo_x, hi_x, lo_y, hi_y = self.ml, self.w - self.mr, self.mt, self.h - self.mb
        drawn = []
        for (x, y, label, color), (px, py) in zip(items, pts):
            w = len(label) * self.CHAR_W
            placed = None
            for dx, dy, anchor in ((7, -7, "start"), (7, 13, "start"), (-7, -7, "end"), (-7, 13, "end"),
                                   (0, -10, "middle"), (0, 19, "middle"), (7, -20, "start"), (7, 26, "start")):
                left = px + dx - (w if anchor == "end" else w / 2 if anchor == "middle" else 0)
                box = (left, py + dy - self.ASCENT, left + w, py + dy + self.DESCENT)
                inside = box[0] >= lo_x and box[2] <= hi_x and box[1] >= lo_y and box[3] <= hi_y
                if inside and not any(box[0] < b[2] and b[0] < box[2] and box[1] < b[3] and b[1] < box[3]
                                      for b in taken):
                    placed = (px + dx, py + dy, anchor, box)
                    break
            drawn.append(placed is not None and math.isfinite(px) and math.isfinite(py))
            if drawn[-1]:
                tx, ty, anchor, box = placed
                taken.append(box)
                self.body.append(f'<text x="{tx:.1f}" y="{ty:.1f}" text-anchor="{anchor}" fill="{color}" '
                                 f'class="label">{_e(label)}</text>')
        return drawn

    def _legend(self) -> list[str]:
        out = []
        x = self.w - self.mr + (40 if self.x_is_time else 14)
        for i, (label, color) in enumerate(self.legend_items):
            y = self.mt + 4 + i * 14
            out.append(f'<rect x="{x}" y="{y}" width="8" height="8" fill="{color}"/>')
            out.append(f'<text x="{x + 12}" y="{y + 8}">{_e(label)}</text>')
        return out

    def svg(self, aria: str) -> str:
        parts = [f'<svg width="{self.w}" height="{self.h}" viewBox="0 0 {self.w} {self.h}" role="img" '
                 f'aria-label="{_e(aria)}">', *self._axes(), *self.body, *self._legend(), "</svg>"]
        return "".join(parts)


def _axis_cut(xs: Sequence[float]) -> int:
    """How many sorted samples to draw: up to the 99.9th percentile, and never past 3 x p99, so
    a handful of preempted runs (multi-ms on a sub-ms model) cannot squash the distribution.
    What is cut is named in the plot title."""
    n = len(xs)
    if n < 2:
        return n
    p999 = xs[max(1, int(math.ceil(0.999 * n))) - 1]
    p99 = xs[max(1, int(math.ceil(0.99 * n))) - 1]
    hi = min(p999, 3 * p99) if p99 > 0 else p999
    return max(1, sum(1 for x in xs if x <= hi))


def svg_cdf(samples_ms: Sequence[float], *, title: str = "", p50: float | None = None,
            p99: float | None = None) -> str:
    """Empirical CDF of latencies (ms) with p50/p99 markers.

    The x axis stops at ``_axis_cut`` (as the histogram's does); the title says how many runs
    lie beyond it and the max.
    """
    xs = sorted(float(s) for s in samples_ms)
    n = len(xs)
    cut = _axis_cut(xs)
    # Thin to <= 400 points so huge runs keep the file small; the shape is unchanged at this size.
    step = max(1, cut // 400)
    idx = list(range(0, cut, step))
    if idx[-1] != cut - 1:
        idx.append(cut - 1)
    px = [xs[i] for i in idx]
    py = [(i + 1) / n for i in idx]
    if cut < n:
        title = f"{title} ({n - cut} slower runs off-axis; max {xs[-1]:.3g} ms)"
    plot = _Plot(px, [0.0, 1.0], xlabel="latency (ms)", ylabel="fraction of runs <= x", title=title)
    plot.polyline(px, py, _PALETTE[0])
    if p50 is not None:
        plot.vline(p50, "#2ca02c", "p50")
    if p99 is not None:
        plot.vline(p99, "#d62728", "p99")
    return plot.svg(f"latency CDF {title}")


def svg_histogram(samples_ms: Sequence[float], *, bins: int = 40, title: str = "") -> str:
    """Histogram of latencies (ms); values beyond ``_axis_cut`` are folded into the last bin."""
    xs = sorted(float(s) for s in samples_ms)
    lo = xs[0]
    hi = xs[_axis_cut(xs) - 1]
    if hi <= lo:
        hi = lo + (abs(lo) * 0.01 or 1e-3)
    width = (hi - lo) / bins
    counts = [0] * bins
    for x in xs:
        k = min(bins - 1, max(0, int((x - lo) / width)))
        counts[k] += 1
    edges = [lo + i * width for i in range(bins + 1)]
    plot = _Plot([lo, hi], [0.0, float(max(counts))], xlabel="latency (ms)", ylabel="runs", title=title, y0=True)
    for i, c in enumerate(counts):
        if c:
            plot.rect(edges[i], edges[i + 1], float(c), _PALETTE[0])
    return plot.svg(f"latency histogram {title}")


def svg_lines(series: Sequence[tuple[str, Sequence[float], Sequence[float]]], *, xlabel: str, ylabel: str,
              title: str = "", x_is_time: bool = False, y0: bool = True) -> str:
    """Several labelled line series with markers."""
    allx = [x for _, xs, _ in series for x in xs]
    ally = [y for _, _, ys in series for y in ys]
    legend = [(name, _PALETTE[i % len(_PALETTE)]) for i, (name, _, _) in enumerate(series)]
    plot = _Plot(allx, ally, xlabel=xlabel, ylabel=ylabel, title=title, x_is_time=x_is_time, y0=y0,
                 legend=legend if len(series) > 1 else ())
    for (name, xs, ys), (_, color) in zip(series, legend):
        pairs = sorted(zip(xs, ys))
        plot.polyline([p[0] for p in pairs], [p[1] for p in pairs], color)
        for x, y in pairs:
            plot.point(x, y, color, r=3.0, tip=f"{name}: {_tick_label(y)}")
    return plot.svg(title or ylabel)


# ---------------------------------------------------------------------------------------------
# sections


def _section(sid: str, title: str, body: str) -> str:
    return f'<section id="{sid}"><h2>{_e(title)}</h2>{body}</section>'


def _fingerprint_section(docs: list[dict[str, Any]]) -> str:
    if not docs:
        return ""
    fp = docs[0].get("fingerprint") or {}
    parts = []
    if not fp:
        parts.append(_note("this run recorded no environment fingerprint"))
    else:
        keys = [k for k in KEY_FIELDS if k in fp] + [k for k in fp if k not in KEY_FIELDS]
        summary = " · ".join(str(fp[k]) for k in ("hostname", "cpu_model", "tensorflow", "litert") if fp.get(k))
        parts.append(f"<details><summary>{_e(summary or 'environment')} ({len(keys)} fields)</summary>"
                     + _table(["field", "value"], [(k, "-" if fp[k] is None else fp[k]) for k in keys], left=2)
                     + "</details>")
    diffs = []
    for d in docs[1:]:
        for field, a, b in diff_fingerprints(fp, d.get("fingerprint") or {}):
            diffs.append((d.get("run_id") or "-", field, "-" if a is None else a, "-" if b is None else b))
    if len(docs) > 1:
        if diffs:
            parts.append("<h3>Key fields that differ between runs (numbers are not directly comparable)</h3>")
            parts.append(_table(["run", "field", "first run", "this run"], diffs, left=4))
        else:
            parts.append(_note(f"all {len(docs)} runs share the key fingerprint fields"))
    runs = [(d.get("run_id") or "-", d.get("report_source") or "-", d.get("kind") or "-", d.get("created") or "-",
             d.get("edgebench_version") or "-", len(d.get("rows") or [])) for d in docs]
    parts.append("<h3>Runs (only those asked for)</h3>")
    parts.append(_table(["run id", "in this report because", "kind", "created", "edgebench", "rows"], runs, left=5))
    return _section("fingerprint", "Environment", "".join(parts))


def _pivot_table(p: dict[str, Any]) -> str:
    """A matrix pivot (``report.pivot``): rows model x precision, two header rows -- each
    varying-axis value over its sub-columns."""
    subs = SUBCOLUMNS[p["kind"]]
    out = ['<div class="tw"><table><thead><tr><th class="l" rowspan="2">precision</th>']
    out += [f'<th colspan="{len(subs)}">{_e(c)}</th>' for c in p["columns"]]
    out.append("</tr><tr>")
    out += [f"<th>{_e(sc)}</th>" for _ in p["columns"] for sc in subs]
    out.append("</tr></thead><tbody>")
    for row in p["rows"]:
        out.append(f'<tr><td class="l">{_e(row["precision"])}</td>')
        for cell in row["cells"]:
            vals = cell_values(p, cell)
            bad = cell is not None and cell["status"] != "ok"
            out += [f'<td><span class="bad">{_e(v)}</span></td>' if bad and i == 0 else f"<td>{_e(v)}</td>"
                    for i, v in enumerate(vals)]
        out.append("</tr>")
    out.append("</tbody></table></div>")
    return "".join(out)


def _results_section(docs: list[dict[str, Any]]) -> str:
    parts = []
    pivots = matrix_pivots(docs)
    for p in pivots:          # a matrix: one table per model, a column group per varying-axis value
        parts.append(f"<h3>{_e(p['model'])}: by {_e(', '.join(p['axes']))}</h3>")
        parts.append(_pivot_table(p))
    if pivots:
        parts.append(_note("matrix runs: each column group is one value of the axes that vary; the ratio "
                           "is to the row's first column (p50 for inference, examples/s for training); "
                           "† p99 from too few samples"))
    pivoted = {p["model"] for p in pivots}
    inf_rows = [(d, r) for d in docs for r in _rows(d) if not _is_train_row(d, r)]
    if not inf_rows:
        return _section("results", "Precision × target", "".join(parts)) if parts else ""
    # precision x target grid per model (a matrix model is shown by its pivot above)
    models: dict[str, list[tuple[dict[str, Any], dict[str, Any]]]] = {}
    for d, r in inf_rows:
        if str(r.get("model") or "?") not in pivoted:
            models.setdefault(str(r.get("model") or "?"), []).append((d, r))
    for model, rows in models.items():
        precs = list(dict.fromkeys(precision_label(r) for _, r in rows))
        targets = list(dict.fromkeys(str(r.get("target") or "-") for _, r in rows))
        grid: dict[tuple[str, str], list[tuple[dict[str, Any], RowVerdict]]] = {}
        for d, r in rows:
            grid.setdefault((precision_label(r), str(r.get("target") or "-")), []).append((r, _verdict(d, r)))
        body = []
        for p in precs:
            cells = [p]
            for t in targets:
                runs = grid.get((p, t))
                if not runs:
                    cells.append("-")
                    continue
                # a cell never hides a failed run behind a good one: every non-ok verdict is shown
                bad = [v for _, v in runs if not v.ok]
                good = [r for r, v in runs if v.ok]
                bits = [f'<span class="bad">{_e(v.text)}</span>' for v in bad]
                if good:
                    r, acc = good[0], _acc(good[0])
                    bits += [f"p99 {_e(_fmt_ms(_lat(r).get('p99')))} ms", _e(_fmt_bytes(r.get("size_bytes")))]
                    if acc.get("top1") is not None:
                        bits.append(f"top-1 {_e(_fmt_pct(acc.get('top1')))}")
                if len(runs) > 1:
                    bits.append(f'<span class="note">{len(runs)} runs ({len(bad)} not ok), see all rows</span>')
                cells.append("<br>".join(bits))
            body.append(cells)
        parts.append(f"<h3>{_e(model)}</h3>")
        parts.append(_table(["precision \\ target", *targets], body, left=1,
                            raw_cols=tuple(range(1, len(targets) + 1))))
    # full table
    table_rows = []
    multi = len(docs) > 1
    for d, r in inf_rows:
        lat, acc = _lat(r), _acc(r)
        status = _verdict(d, r).text
        table_rows.append(((str(d.get("run_id") or "-")[:12],) if multi else ()) + (
            r.get("model") or "-", precision_label(r), r.get("target") or "-",
            r.get("device_model") or "-", status, _fmt_bytes(r.get("size_bytes")),
            _fmt(r.get("size_reduction_pct"), 1, suffix="%"), _fmt_ms(lat.get("p50")), _fmt_ms(lat.get("p90")),
            _fmt_ms(lat.get("p99")) + ("" if lat.get("p99_valid", True) else " (few samples)"),
            _fmt(lat.get("qps"), 1), _fmt(lat.get("samples"), 0), _fmt_pct(acc.get("top1")),
            top1_change(num(acc.get("top1_drop_pp"))), _fmt_pct(acc.get("top1_agreement")),
            _fmt_pct(acc.get("top5_agreement")),
        ))
    parts.append("<h3>All rows</h3>")
    parts.append(_table((["run"] if multi else []) + [
        "model", "precision", "target", "device", "status", "size", "size red.", "p50 ms", "p90 ms", "p99 ms",
        "QPS", "samples", "top-1", TOP1_CHANGE, "top-1 agree", "top-5 agree"], table_rows,
        left=6 if multi else 5))
    return _section("results", "Precision × target", "".join(parts))


def _where_section(docs: list[dict[str, Any]]) -> str:
    """Delegation, silent-failure verdicts and the top ops of every row that has them (issue 15)."""
    rows = [r for d in docs for r in _rows(d) if not _is_train_row(d, r)
            and (r.get("delegation") or r.get("verdicts") or r.get("op_profile"))]
    if not rows:
        return ""
    body = []
    for r in rows:
        d = r.get("delegation") or {}
        cell = "-"
        if d.get("nodes_delegated") is not None:
            cell = f"{d['nodes_delegated']}/{d.get('nodes_total', '?')}"
            if d.get("partitions") is not None:
                cell += f", {d['partitions']} parts"
        left = ", ".join(f"{k} x{v}" for k, v in (d.get("undelegated") or {}).items()) or "-"
        verdicts = "; ".join(str(v.get("message")) for v in (r.get("verdicts") or []) if v.get("failed")) or "-"
        ops = sorted((o for o in (r.get("op_profile") or []) if _num(o.get("ms")) is not None),
                     key=lambda o: -float(o["ms"]))[:5]
        top = "; ".join(f"{o.get('op')} {_fmt(o.get('ms'), 4)} ms ({_fmt_pct(o.get('share'), 1)})" for o in ops) or "-"
        body.append((r.get("model") or "-", r.get("precision") or "-", r.get("target") or "-",
                     str(d.get("delegate") or "-"), cell, left, verdicts, top))
    return _section("where", "Where the time goes", _table(
        ["model", "precision", "target", "delegate", "delegated", "left on the CPU", "silent failures",
         "top ops (mean ms per inference; a delegate partition is one entry)"], body, left=8))


def _latency_section(docs: list[dict[str, Any]]) -> str:
    parts = []
    any_rows = False
    for d in docs:
        for r in _rows(d):
            if _is_train_row(d, r):
                continue
            any_rows = True
            name = _row_name(r)
            if len(docs) > 1 and d.get("run_id"):
                name += f" (run {str(d['run_id'])[:12]})"
            samples = r.get("samples_ns")
            parts.append(f"<h3>{_e(name)}</h3>")
            vals = [float(s) / 1e6 for s in samples] if isinstance(samples, list) and samples else []
            vals = [v for v in vals if math.isfinite(v)]
            if not vals:
                parts.append(_note("no raw latency samples stored for this row"))
                continue
            lat = _lat(r)
            parts.append('<div class="plots">')
            parts.append(svg_cdf(vals, title=f"CDF, {len(vals)} runs", p50=_num(lat.get("p50")),
                                 p99=_num(lat.get("p99"))))
            parts.append(svg_histogram(vals, title="histogram"))
            parts.append("</div>")
    if not any_rows:
        return ""
    return _section("latency", "Latency distributions", "".join(parts))


def pareto_front(points: Sequence[tuple[float, float, float | None]]) -> list[bool]:
    """For (size, p99, accuracy-or-None) points: True where no other point is at least as good in
    every dimension and better in one (smaller size, smaller p99, higher accuracy)."""
    out = []
    for i, (s, p, a) in enumerate(points):
        dominated = False
        for j, (s2, p2, a2) in enumerate(points):
            if i == j:
                continue
            acc_ge = a is None or (a2 is not None and a2 >= a)
            acc_gt = a is not None and a2 is not None and a2 > a
            if s2 <= s and p2 <= p and acc_ge and (s2 < s or p2 < p or acc_gt):
                dominated = True
                break
        out.append(not dominated)
    return out


def _pareto_section(docs: list[dict[str, Any]]) -> str:
    pts, excluded = [], []
    for d in docs:
        for r in _rows(d):
            if _is_train_row(d, r):
                continue
            v = _verdict(d, r)
            if not v.ok:       # a failed gate, a silent failure or a crash is never a trade-off
                if r.get("status") in (None, "ok"):
                    excluded.append([_row_name(r), _e(v.text)])
                continue
            size, p99 = _num(r.get("size_bytes")), _num(_lat(r).get("p99"))
            if size is None or p99 is None:
                continue
            acc = _acc(r)
            a = _num(acc.get("top1"))
            if a is None:
                a = _num(acc.get("top1_agreement"))
            pts.append((r, d, size, p99, a))
    if not pts:
        return _section("pareto", "Size – p99 – accuracy trade-off", _excluded(excluded)) if excluded else ""
    # one front per model: rows of different models are never traded off against each other
    front = [False] * len(pts)
    for model in dict.fromkeys(str(r.get("model")) for r, *_ in pts):
        idx = [i for i, (r, *_) in enumerate(pts) if str(r.get("model")) == model]
        for i, opt in zip(idx, pareto_front([pts[i][2:] for i in idx])):
            front[i] = opt
    axes = varying_axes(docs)
    targets = list(dict.fromkeys(str(r.get("target") or "-") for r, *_ in pts))
    legend = [(t, _PALETTE[i % len(_PALETTE)]) for i, t in enumerate(targets)]
    plot = _Plot([s / 2**20 for _, _, s, _, _ in pts], [p for _, _, _, p, _ in pts], xlabel="model size (MiB)",
                 ylabel="p99 latency (ms)", title="filled = Pareto-optimal (size, p99, top-1)",
                 width=620, height=340, y0=True, legend=legend, x_pad=(0.05, 0.22))
    # Pareto front: connect optimal points by size for orientation.
    fp = sorted((s / 2**20, p) for (_, _, s, p, _), f in zip(pts, front) if f)
    if len(fp) > 1:
        plot.polyline([x for x, _ in fp], [y for _, y in fp], "#bbb", width=1.0)
    rows, items = [], []
    for (r, d, s, p, a), opt in zip(pts, front):
        color = _PALETTE[targets.index(str(r.get("target") or "-")) % len(_PALETTE)]
        axis = " ".join(f"{k}={short_value(d['cell'].get(k))}" for k in axes if isinstance(d.get("cell"), dict))
        label = " ".join(x for x in (precision_label(r), axis) if x) + (
            "" if a is None else f" {a * 100:.1f}%")
        plot.point(s / 2**20, p, color, filled=opt, r=5.0, tip=f"{_row_name(r)} {axis}".strip())
        items.append((s / 2**20, p, label, color))
        rows.append([_row_name(r) + (f" ({axis})" if axis else ""), _fmt_bytes(s), _fmt_ms(p), _fmt_pct(a),
                     "yes" if opt else "no"])
    for row, shown in zip(rows, plot.labels(items)):
        row.append("yes" if shown else "no (crowded: see this row)")
    models = list(dict.fromkeys(str(r.get("model")) for r, *_ in pts))
    body = plot.svg("size vs p99 latency") + _table(
        ["row", "size", "p99 ms", "top-1 (or agreement)", "Pareto-optimal", "labelled in the plot"], rows, left=1)
    if len(models) > 1:
        body += _note(f"one Pareto front per model ({', '.join(models)}): rows of different models are "
                      "never compared")
    return _section("pareto", "Size – p99 – accuracy trade-off", body + _excluded(excluded))


def _excluded(rows: list[list[str]]) -> str:
    """Rows left out of the Pareto front because their verdict is not ok (cells already escaped)."""
    if not rows:
        return ""
    return _note("left out of the trade-off (their verdict is not ok):") + _table(
        ["row", "verdict"], rows, left=2, raw_cols=(1,))


_DRIFT_COLS = (("max_abs", "max |Δ|"), ("mean_abs", "mean |Δ|"), ("rmse", "RMSE"), ("rel_l2", "rel L2"),
               ("cosine", "cosine"), ("psnr_db", "PSNR dB"), ("nan", "NaN"), ("inf", "Inf"))


def _drift_cells(stats: dict[str, Any]) -> list[str]:
    cells: list[str] = []
    bad = any((_num(stats.get(k)) or 0) > 0 for k in ("nan", "inf", "ref_nonfinite"))
    for key, _ in _DRIFT_COLS:
        v = stats.get(key)
        if bad and key not in ("nan", "inf"):
            cells.append("n/a")   # NaN/Inf outputs: no drift number is honest
        elif key in ("nan", "inf"):
            cells.append("-" if v is None else (str(v).lower() if isinstance(v, bool) else str(v)))
        elif key == "cosine":
            cells.append(_fmt(v, 6))
        elif key == "psnr_db":
            cells.append(_fmt(v, 1))
        else:
            g = _num(v)
            cells.append("-" if g is None else (_fmt(g) if not math.isfinite(g) else f"{g:.3g}"))
    return cells


def _drift_section(docs: list[dict[str, Any]]) -> str:
    """Per-output drift vs the TF reference and, for device rows, vs the host LiteRT result;
    detection rows add their box agreement."""
    rows, det_rows = [], []
    for d in docs:
        for r in _rows(d):
            name = [r.get("model") or "-", r.get("precision") or "-", r.get("target") or "-"]
            for against, key in (("reference", "drift"), ("host", "drift_vs_host")):
                drift = r.get(key)
                if not isinstance(drift, dict):
                    continue
                for out, stats in drift.items():
                    if isinstance(stats, dict):
                        rows.append([*name, against, out, *_drift_cells(stats)])
            det = r.get("detection")
            if isinstance(det, dict):
                det_rows.append([*name, _fmt_pct(_num(det.get("box_agreement"))), str(det.get("matched", "-")),
                                 str(det.get("reference_detections", "-")), _fmt(det.get("score_mae"), 4)])
    if not rows:
        return ""
    body = _table(["model", "precision", "target", "vs", "output", *[h for _, h in _DRIFT_COLS]], rows, left=5)
    if det_rows:
        body += _table(["model", "precision", "target", "box agreement", "matched", "reference boxes",
                        "score MAE"], det_rows, left=3)
    return _section("drift", "Per-output drift vs reference", body)


def _training_section(docs: list[dict[str, Any]]) -> str:
    series: dict[str, list[tuple[float, float]]] = {}
    rows = []
    for d in docs:
        for r in (d.get("rows") or []):
            if not isinstance(r, dict) or not _is_train_row(d, r):
                continue
            xla = r.get("xla")
            key = " / ".join(str(x) for x in (r.get("model") or "?", r.get("precision") or "-",
                                               "xla" if xla else "no-xla", r.get("strategy") or "-",
                                               r.get("input_pipeline")) if x)
            bs, eps = _num(r.get("batch_size")), _num(r.get("examples_per_s"))
            if bs is not None and eps is not None and r.get("status") in (None, "ok"):
                series.setdefault(key, []).append((bs, eps))
            st = r.get("step_time_ms") if isinstance(r.get("step_time_ms"), dict) else {}
            status = r.get("status") or "-"
            if r.get("error"):
                status = f"{status}: {r['error']}"
            rows.append((r.get("model") or "-", r.get("precision") or "-", "-" if xla is None else str(bool(xla)).lower(),
                         r.get("strategy") or "-", r.get("input_pipeline") or "-", r.get("target") or "-", status, _fmt(bs, 0), _fmt(eps, 1),
                         _fmt_ms(st.get("p50", st.get("mean"))), _fmt_ms(st.get("p99"))))
    if not rows:
        return ""
    body = ""
    if series:
        body += svg_lines([(k, [x for x, _ in v], [y for _, y in v]) for k, v in series.items()],
                          xlabel="batch size", ylabel="examples / s", title="throughput vs batch size")
    body += _table(["model", "precision", "xla", "strategy", "input pipeline", "target", "status", "batch",
                    "examples/s", "step p50 ms", "step p99 ms"], rows, left=7)
    return _section("training", "Training throughput", body)


def _diagnose_section(docs: list[dict[str, Any]]) -> str:
    from edgebench.report.diagnose import html_section

    diag = [d for d in docs if d.get("kind") == "diagnose"]
    if not diag:
        return ""
    return _section("diagnose", "Quantization diagnosis", html_section(diag))


def _epoch(created: Any) -> float | None:
    try:
        t = _dt.datetime.fromisoformat(str(created).replace("Z", "+00:00"))
    except ValueError:
        return None
    if t.tzinfo is None:
        t = t.replace(tzinfo=_dt.timezone.utc)
    return t.timestamp()


def _history_section(history: dict[str, list[dict[str, Any]]] | None) -> str:
    charts = []
    for name, points in (history or {}).items():
        pts = [(_epoch(p.get("created")), _num(p.get("value"))) for p in points]
        pts = [(x, y) for x, y in pts if x is not None and y is not None and math.isfinite(y)]
        if len(pts) < 2:
            continue
        ylabel = name.rsplit(" — ", 1)[-1] if " — " in name else "value"
        charts.append(svg_lines([(name, [x for x, _ in pts], [y for _, y in pts])], xlabel="run time (UTC)",
                                ylabel=ylabel, title=name, x_is_time=True, y0=False))
    if not charts:
        return ""
    return _section("history", "History", '<div class="plots">' + "".join(charts) + "</div>")


# ---------------------------------------------------------------------------------------------


def render_html(docs: dict[str, Any] | Sequence[dict[str, Any]], *,
                history: dict[str, list[dict[str, Any]]] | None = None, title: str | None = None) -> str:
    """Result document(s) -> one self-contained HTML page.

    ``history``: ``{series label: [{"created": iso, "value": float, ...}, ...]}`` (e.g. from
    ``Store.history``); series with fewer than two points are not drawn. The label's text after
    " — " is used as the y-axis label.
    """
    if isinstance(docs, dict) or hasattr(docs, "to_dict"):
        docs = [docs]
    docs = [d.to_dict() if hasattr(d, "to_dict") else d for d in docs]   # the stored (JSON) form
    if title is None:
        kinds = sorted({str(d.get("kind") or "?") for d in docs})
        models = list(dict.fromkeys(str(r.get("model")) for d in docs for r in (d.get("rows") or [])
                                    if isinstance(r, dict) and r.get("model")))
        title = f"edgebench {'/'.join(kinds)} report" + (f": {', '.join(models[:4])}" if models else "")
        if len(models) > 4:
            title += f" (+{len(models) - 4} more)"
    from edgebench.report.html_sustain import sustained_section

    generated = max((str(d.get("created") or "") for d in docs), default="")
    sections = [
        _verdict_section(docs),
        _fingerprint_section(docs),
        _results_section(docs),
        _where_section(docs),
        _latency_section(docs),
        sustained_section(docs),
        _pareto_section(docs),
        _drift_section(docs),
        _training_section(docs),
        _diagnose_section(docs),
        _history_section(history),
    ]
    sections = [x for x in sections if x]          # a section with nothing to show is left out
    nav = " · ".join(f'<a href="#{sid}">{sid}</a>' for x in sections
                     for sid in re.findall(r'^<section id="([^"]+)"', x))
    return ("<!DOCTYPE html>\n"
            f'<html lang="en"><head><meta charset="utf-8"><title>{_e(title)}</title>'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<style>{_CSS}</style></head><body>"
            f"<h1>{_e(title)}</h1><p>{len(docs)} run(s); newest created {_e(generated or '-')}. "
            f"{nav}</p>" + "".join(sections) + "</body></html>\n")
