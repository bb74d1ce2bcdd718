"""The HTML report's ``sustained`` section (pure; part of ``render_html``): per sustained row,
latency (p50, p99) and temperature (hottest zone) over time from its timeline, with the
steady-state ratio and time to throttle; then tables for paced runs, cold starts and energy.
Everything from a result is escaped (``html_parts.esc`` / ``html_parts.table_html``)."""

from __future__ import annotations

from typing import Any

from edgebench.rows import ENERGY_NOT_ASKED
from edgebench.report.html_parts import esc, fmt, fmt_ms, is_train_row, note_html, row_name, doc_rows, section_html, table_html, svg_lines


def _timeline_plots(r: dict[str, Any]) -> str:
    wins = [w for w in r.get("timeline") or [] if isinstance(w, dict)]
    t = [float(w.get("t_end_s") or 0.0) for w in wins]
    lat = [(x, w["latency_ms"]) for x, w in zip(t, wins) if isinstance(w.get("latency_ms"), dict)]
    series = [(k, [x for x, _ in lat], [float(d[k]) for _, d in lat]) for k in ("p50", "p99")
              if all(d.get(k) is not None for _, d in lat)]
    out = []
    if lat and series:
        out.append(svg_lines(series, xlabel="time into the run (s)", ylabel="latency (ms)",
                             title="latency per window", y0=False))
    temps = [(x, (w.get("thermal") or {}).get("hottest_c")) for x, w in zip(t, wins)]
    temps = [(x, float(c)) for x, c in temps if c is not None]
    if temps:
        out.append(svg_lines([("hottest zone", [x for x, _ in temps], [c for _, c in temps])],
                             xlabel="time into the run (s)", ylabel="temperature (C)",
                             title="temperature per window", y0=False))
    body = '<div class="plots">' + "".join(out) + "</div>" if out else ""
    if not temps:
        reasons = sorted({w.get("thermal_reason") for w in wins if w.get("thermal_reason")})
        body += note_html("no temperatures: " + ("; ".join(reasons) or "no thermal readings"))
    s = r.get("sustained") or {}
    ttt = s.get("time_to_throttle_s")
    body += note_html(f"steady-state ratio (last / first window p50) {fmt(s.get('steady_state_ratio'), 3)}; time to "
                  f"throttle: {'never' if ttt is None else fmt(ttt, 1) + ' s (' + str(s.get('throttle_reason')) + ')'}")
    return body


def sustained_section(docs: list[dict[str, Any]]) -> str:
    parts: list[str] = []
    paced, cold, energy = [], [], []
    for d in docs:
        for r in doc_rows(d):
            if is_train_row(d, r):
                continue
            name = row_name(r)
            if r.get("timeline"):
                parts.append(f"<h3>{esc(name)}: sustained {esc(fmt((r.get('sustained') or {}).get('duration_s'), 0))} s"
                             "</h3>" + _timeline_plots(r))
            p = r.get("paced")
            if isinstance(p, dict):
                b = p.get("back_to_back_ms") or {}
                lat = r.get("latency_ms") or {}
                paced.append((name, fmt(r.get("period_ms"), 3), fmt_ms(lat.get("p50")), fmt_ms(b.get("p50")),
                              fmt(p.get("p50_ratio"), 2), fmt_ms(lat.get("p99")), fmt_ms(b.get("p99")),
                              fmt(p.get("achieved_period_ms"), 3), fmt(p.get("late_starts"), 0)))
            c = r.get("cold_start")
            if isinstance(c, dict):
                def p50(key: str, src: dict = c) -> str:
                    return fmt_ms((src.get(key) or {}).get("p50"))

                warm = c.get("warm_cache") or {}
                cold.append((name, c.get("runtime") or "-", fmt(c.get("count"), 0), p50("process_start_ms"),
                             p50("init_ms"), p50("first_inference_ms"), p50("total_ms"),
                             p50("init_ms", warm) if c.get("xnnpack_cache") else "-"))
            if r.get("energy") is not None or r.get("energy_reason") not in (None, ENERGY_NOT_ASKED):
                e = r.get("energy")
                if isinstance(e, dict):
                    energy.append((name, e.get("source") or "-", fmt(e.get("mj_per_inference"), 4),
                                   fmt(e.get("inferences_per_j"), 1), fmt(e.get("run_power_w"), 3),
                                   fmt(e.get("idle_power_w"), 3),
                                   "valid" if e.get("valid") else "not valid: " + "; ".join(e.get("invalid_reasons") or [])))
                else:
                    energy.append((name, "-", "-", "-", "-", "-", f"not measured: {r.get('energy_reason')}"))
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
