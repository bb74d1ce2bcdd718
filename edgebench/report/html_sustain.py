"""The HTML report's ``sustained`` section (pure; part of ``render_html``): per sustained row,
latency (p50, p99) and temperature (hottest zone) over time from its timeline, with the
steady-state ratio and time to throttle; then tables for paced runs, cold starts and energy.
Everything from a result is escaped (``html_parts.esc`` / ``html_parts.table_html``).

Each document is read once into typed rows (``Document.read``: a foreign row too malformed to
type is left out); everything below reads attributes."""

from __future__ import annotations

from typing import Any, Mapping

from edgebench.report.html_parts import (esc, fmt, fmt_ms, inference_of, note_html, row_title, section_html, svg_lines,
                                         table_html)
from edgebench.rows import Document, InferenceRow


def _rows(doc: Document | Mapping[str, Any]) -> list[InferenceRow]:
    """Inference rows of a document, the reference first (``html_parts.inference_of``)."""
    d = doc if isinstance(doc, Document) else Document.read(doc)
    return [r if r.precision is not None or not ref else r.replace(precision="reference")
            for r, ref in inference_of(d)]


def _timeline_plots(r: InferenceRow) -> str:
    wins = r.timeline or ()
    t = [float(w.t_end_s or 0.0) for w in wins]
    lat = [(x, w.latency) for x, w in zip(t, wins) if w.latency is not None]
    series = [(k, [x for x, _ in lat], [float(getattr(d, k)) for _, d in lat]) for k in ("p50", "p99")
              if all(getattr(d, k) is not None for _, d in lat)]
    out = []
    if lat and series:
        out.append(svg_lines(series, xlabel="time into the run (s)", ylabel="latency (ms)",
                             title="latency per window", y0=False))
    temps = [(x, w.hottest_c) for x, w in zip(t, wins) if w.hottest_c is not None]
    if temps:
        out.append(svg_lines([("hottest zone", [x for x, _ in temps], [c for _, c in temps])],
                             xlabel="time into the run (s)", ylabel="temperature (C)",
                             title="temperature per window", y0=False))
    body = '<div class="plots">' + "".join(out) + "</div>" if out else ""
    if not temps:
        reasons = sorted({w.thermal_reason for w in wins if w.thermal_reason})
        body += note_html("no temperatures: " + ("; ".join(reasons) or "no thermal readings"))
    s = r.sustained
    ratio, ttt = (None, None) if s is None else (s.steady_state_ratio, s.time_to_throttle_s)
    body += note_html(f"steady-state ratio (last / first window p50) {fmt(ratio, 3)}; time to "
                      f"throttle: {'never' if ttt is None else fmt(ttt, 1) + ' s (' + str(s.throttle_reason) + ')'}")
    return body


def sustained_section(docs: list[Document | Mapping[str, Any]]) -> str:
    parts: list[str] = []
    paced, cold, energy = [], [], []
    for d in docs:
        for r in _rows(d):
            name = row_title(r)
            if r.timeline:
                duration = None if r.sustained is None else r.sustained.duration_s
                parts.append(f"<h3>{esc(name)}: sustained {esc(fmt(duration, 0))} s</h3>" + _timeline_plots(r))
            p = r.paced
            if p is not None:
                b, lat = p.back_to_back_ms, r.latency
                paced.append((name, fmt(r.period_ms, 3), fmt_ms(lat and lat.p50), fmt_ms(b and b.p50),
                              fmt(p.p50_ratio, 2), fmt_ms(lat and lat.p99), fmt_ms(b and b.p99),
                              fmt(p.achieved_period_ms, 3), fmt(p.late_starts, 0)))
            c = r.cold_start
            if c is not None:
                def p50(phase: str, starts: Any = c) -> str:
                    lat = None if starts is None else getattr(starts, phase)
                    return fmt_ms(None if lat is None else lat.p50)

                cold.append((name, c.runtime or "-", fmt(c.count, 0), p50("process_start_ms"),
                             p50("init_ms"), p50("first_inference_ms"), p50("total_ms"),
                             p50("init_ms", c.warm) if c.xnnpack_cache else "-"))
            e = r.energy
            if e is not None:
                energy.append((name, e.source or "-", fmt(e.mj_per_inference, 4), fmt(e.inferences_per_j, 1),
                               fmt(e.run_power_w, 3), fmt(e.idle_power_w, 3),
                               "valid" if e.valid else "not valid: " + "; ".join(e.invalid_reasons)))
            elif r.energy_reason is not None:      # asked for, not measurable (ENERGY_NOT_ASKED reads as None)
                energy.append((name, "-", "-", "-", "-", "-", f"not measured: {r.energy_reason}"))
    if paced:
        parts.append("<h3>Paced vs back-to-back</h3>" + table_html(
            ["row", "period ms", "paced p50 ms", "back-to-back p50 ms", "p50 ratio", "paced p99 ms",
             "back-to-back p99 ms", "achieved period ms", "late starts"], paced))
    if cold:
        parts.append("<h3>Cold starts (p50 over fresh processes)</h3>" + table_html(
            ["row", "runtime", "starts", "process start ms", "load + allocate ms", "first inference ms",
             "spawn to result ms", "warm-cache load ms"], cold))
    if energy:
        parts.append("<h3>Energy per inference</h3>" + table_html(
            ["row", "source", "mJ / inference", "inferences / J", "run W", "idle W", "validity"], energy))
    if not parts:
        return ""
    return section_html("sustained", "Sustained, paced, cold start, energy", "".join(parts))
