"""The HTML report's building blocks (pure functions, every value from a result escaped): escaping
and number formats, tables, notes, sections, the rows of a result document, and the SVG plots.
``html``, ``html_sustain`` and ``diagnose`` draw with these."""

from __future__ import annotations

import datetime as _dt
import html
import math
from typing import Any, Iterable, Sequence

from edgebench.judge.outcome import precision_label
from edgebench.rows import Document, InferenceRow, Row
from edgebench.core.formats import num

PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2",
           "#7f7f7f", "#bcbd22", "#17becf")


def esc(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def fmt(value: Any, digits: int = 3, *, scale: float = 1.0, suffix: str = "") -> str:
    v = num(value)
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


def fmt_ms(value: Any) -> str:
    """Latency in ms: 3 decimals from 1 ms up, 3 significant digits below (sub-ms models)."""
    v = num(value)
    if v is None or not math.isfinite(v) or abs(v) >= 1 or v == 0:
        return fmt(v)
    return f"{v:.3g}"


def fmt_pct(value: Any, digits: int = 2) -> str:
    """A ratio 0..1 -> 'xx.xx%'."""
    v = num(value)
    return "-" if v is None else f"{v * 100:.{digits}f}%"


def table_html(headers: Sequence[str], rows: Iterable[Sequence[Any]], *, left: int = 1,
           raw_cols: Sequence[int] = ()) -> str:
    """An HTML table (in a box that scrolls sideways when it is wider than the page); cells are
    escaped unless their column index is in ``raw_cols``."""
    out = ['<div class="tw"><table><thead><tr>']
    for i, h in enumerate(headers):
        out.append(f'<th class="l">{esc(h)}</th>' if i < left else f"<th>{esc(h)}</th>")
    out.append("</tr></thead><tbody>")
    for r in rows:
        out.append("<tr>")
        for i, c in enumerate(r):
            cell = c if i in raw_cols else esc(c)
            out.append(f'<td class="l">{cell}</td>' if i < left else f"<td>{cell}</td>")
        out.append("</tr>")
    out.append("</tbody></table></div>")
    return "".join(out)


def note_html(text: str) -> str:
    return f'<p class="note">{esc(text)}</p>'


def rows_of(doc: Document) -> list[tuple[Row, bool]]:
    """(row, is_reference) of a typed document, the reference first (diagnose documents: none --
    their rows are per-layer analyses, drawn by the diagnose section)."""
    if doc.kind == "diagnose":
        return []
    rows = [(r, False) for r in doc.rows]
    if doc.reference is not None and doc.kind != "train":
        rows = [(doc.reference, True), *rows]
    return rows


def inference_of(doc: Document) -> list[tuple[InferenceRow, bool]]:
    """The inference rows of ``rows_of`` (none in a training document)."""
    return [(r, ref) for r, ref in rows_of(doc) if isinstance(r, InferenceRow) and doc.kind != "train"]


def row_title(r: Row, is_ref: bool = False) -> str:
    """model / precision / target [/ device] of a row (a reference without a precision: "reference")."""
    prec = precision_label(r) if r.precision or not is_ref else "reference"
    parts = [r.model or "?", prec, r.target or "-"]
    if getattr(r, "device_model", None):
        parts.append(str(r.device_model))
    return " / ".join(str(p) for p in parts)


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


def tick_label(v: float) -> str:
    if v == 0:
        return "0"
    if abs(v) >= 1e5 or abs(v) < 1e-3:
        return f"{v:.1e}"
    return f"{v:g}"


class Plot:
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
                out.append(f'<text x="{x_l - 4}" y="{y + 3.5:.1f}" text-anchor="end">{esc(tick_label(t))}</text>')
        if self.x_is_time:
            xt = [self.x0 + (self.x1 - self.x0) * k / 3 for k in range(4)]
        else:
            xt = [t for t in nice_ticks(self.x0, self.x1) if self.x0 <= t <= self.x1]
        for t in xt:
            x = self.px(t)
            lbl = (_dt.datetime.fromtimestamp(t, _dt.timezone.utc).strftime("%m-%d %H:%M")
                   if self.x_is_time else tick_label(t))
            out.append(f'<line x1="{x:.1f}" y1="{y_b}" x2="{x:.1f}" y2="{y_b + 4}" stroke="#555"/>')
            out.append(f'<text x="{x:.1f}" y="{y_b + 16}" text-anchor="middle">{esc(lbl)}</text>')
        out.append(f'<line x1="{x_l}" y1="{y_b}" x2="{x_r}" y2="{y_b}" stroke="#555"/>')
        out.append(f'<line x1="{x_l}" y1="{y_t}" x2="{x_l}" y2="{y_b}" stroke="#555"/>')
        out.append(f'<text x="{(x_l + x_r) / 2:.1f}" y="{self.h - 8}" text-anchor="middle">{esc(self.xlabel)}</text>')
        out.append(f'<text x="14" y="{(y_t + y_b) / 2:.1f}" text-anchor="middle" '
                   f'transform="rotate(-90 14 {(y_t + y_b) / 2:.1f})">{esc(self.ylabel)}</text>')
        if self.title:
            out.append(f'<text x="{x_l}" y="16" font-weight="bold">{esc(self.title)}</text>')
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
        title = f"<title>{esc(tip)}</title>" if tip else ""
        self.body.append(f'<circle cx="{self.px(x):.1f}" cy="{self.py(y):.1f}" r="{r}" fill="{fill}" '
                         f'stroke="{color}" stroke-width="1.5">{title}</circle>')

    def vline(self, x: float, color: str, label: str = "") -> None:
        if not (self.x0 <= x <= self.x1):
            return
        px = self.px(x)
        self.body.append(f'<line x1="{px:.1f}" y1="{self.mt}" x2="{px:.1f}" y2="{self.h - self.mb}" '
                         f'stroke="{color}" stroke-dasharray="4 3"/>')
        if label:
            self.body.append(f'<text x="{px + 3:.1f}" y="{self.mt + 10}" fill="{color}">{esc(label)}</text>')

    def rect(self, x0: float, x1: float, y: float, color: str) -> None:
        a, b = self.px(x0), self.px(x1)
        top, base = self.py(y), self.py(max(self.y0, 0.0))
        self.body.append(f'<rect x="{a:.1f}" y="{top:.1f}" width="{max(b - a - 0.5, 0.5):.1f}" '
                         f'height="{max(base - top, 0):.1f}" fill="{color}" fill-opacity="0.75"/>')

    def text(self, x: float, y: float, label: str, color: str = "#333", dx: float = 6, dy: float = -6) -> None:
        if math.isfinite(x) and math.isfinite(y):
            self.body.append(f'<text x="{self.px(x) + dx:.1f}" y="{self.py(y) + dy:.1f}" fill="{color}">'
                             f'{esc(label)}</text>')

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
                                 f'class="label">{esc(label)}</text>')
        return drawn

    def _legend(self) -> list[str]:
        out = []
        x = self.w - self.mr + (40 if self.x_is_time else 14)
        for i, (label, color) in enumerate(self.legend_items):
            y = self.mt + 4 + i * 14
            out.append(f'<rect x="{x}" y="{y}" width="8" height="8" fill="{color}"/>')
            out.append(f'<text x="{x + 12}" y="{y + 8}">{esc(label)}</text>')
        return out

    def svg(self, aria: str) -> str:
        parts = [f'<svg width="{self.w}" height="{self.h}" viewBox="0 0 {self.w} {self.h}" role="img" '
                 f'aria-label="{esc(aria)}">', *self._axes(), *self.body, *self._legend(), "</svg>"]
        return "".join(parts)


def axis_cut(xs: Sequence[float]) -> int:
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

    The x axis stops at ``axis_cut`` (as the histogram's does); the title says how many runs
    lie beyond it and the max.
    """
    xs = sorted(float(s) for s in samples_ms)
    n = len(xs)
    cut = axis_cut(xs)
    # Thin to <= 400 points so huge runs keep the file small; the shape is unchanged at this size.
    step = max(1, cut // 400)
    idx = list(range(0, cut, step))
    if idx[-1] != cut - 1:
        idx.append(cut - 1)
    px = [xs[i] for i in idx]
    py = [(i + 1) / n for i in idx]
    if cut < n:
        title = f"{title} ({n - cut} slower runs off-axis; max {xs[-1]:.3g} ms)"
    plot = Plot(px, [0.0, 1.0], xlabel="latency (ms)", ylabel="fraction of runs <= x", title=title)
    plot.polyline(px, py, PALETTE[0])
    if p50 is not None:
        plot.vline(p50, "#2ca02c", "p50")
    if p99 is not None:
        plot.vline(p99, "#d62728", "p99")
    return plot.svg(f"latency CDF {title}")


def svg_histogram(samples_ms: Sequence[float], *, bins: int = 40, title: str = "") -> str:
    """Histogram of latencies (ms); values beyond ``axis_cut`` are folded into the last bin."""
    xs = sorted(float(s) for s in samples_ms)
    lo = xs[0]
    hi = xs[axis_cut(xs) - 1]
    if hi <= lo:
        hi = lo + (abs(lo) * 0.01 or 1e-3)
    width = (hi - lo) / bins
    counts = [0] * bins
    for x in xs:
        k = min(bins - 1, max(0, int((x - lo) / width)))
        counts[k] += 1
    edges = [lo + i * width for i in range(bins + 1)]
    plot = Plot([lo, hi], [0.0, float(max(counts))], xlabel="latency (ms)", ylabel="runs", title=title, y0=True)
    for i, c in enumerate(counts):
        if c:
            plot.rect(edges[i], edges[i + 1], float(c), PALETTE[0])
    return plot.svg(f"latency histogram {title}")


def svg_lines(series: Sequence[tuple[str, Sequence[float], Sequence[float]]], *, xlabel: str, ylabel: str,
              title: str = "", x_is_time: bool = False, y0: bool = True,
              marks: Sequence[tuple[float, str]] = ()) -> str:
    """Several labelled line series with markers; ``marks``: (x, label) vertical lines (a history's
    change points)."""
    allx = [x for _, xs, _ in series for x in xs]
    ally = [y for _, _, ys in series for y in ys]
    legend = [(name, PALETTE[i % len(PALETTE)]) for i, (name, _, _) in enumerate(series)]
    plot = Plot(allx, ally, xlabel=xlabel, ylabel=ylabel, title=title, x_is_time=x_is_time, y0=y0,
                 legend=legend if len(series) > 1 else ())
    for (name, xs, ys), (_, color) in zip(series, legend):
        pairs = sorted(zip(xs, ys))
        plot.polyline([p[0] for p in pairs], [p[1] for p in pairs], color)
        for x, y in pairs:
            plot.point(x, y, color, r=3.0, tip=f"{name}: {tick_label(y)}")
    for x, label in marks:
        plot.vline(x, "#d62728", f"change {label}")
    return plot.svg(title or ylabel)


# ---------------------------------------------------------------------------------------------
# sections


def section_html(sid: str, title: str, body: str) -> str:
    return f'<section id="{sid}"><h2>{esc(title)}</h2>{body}</section>'


