"""Terminal tables for sustained, paced and cold-start runs and energy (pure: rows in, rich
renderables out). Latencies in ms, temperatures in C, frequencies in MHz, energy in mJ."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text

from edgebench.core.latency import MIN_SAMPLES
from edgebench.report.tables import INVALID_MARK
from edgebench.report.terminal._cells import fmt_value
from edgebench.report.terminal.fit import Col, fit_tables
from edgebench.rows import COLD_START_PHASES, InferenceRow, Latency

STATUS_NAMES = {0: "none", 1: "light", 2: "moderate", 3: "severe", 4: "critical", 5: "emergency", 6: "shutdown"}


def _ms(lat: Latency | None, key: str) -> str:
    return fmt_value(getattr(lat, key) if lat is not None else None, ".4g")


def _mhz(khz: tuple) -> str:
    vals = [k for k in khz if k]
    return "-" if not vals else f"{max(vals) / 1000:.0f}"


def timeline_table(r: InferenceRow, width: int | None = None, wide: bool = False) -> list:
    cols = [Col("window", num=True, identity=True), Col("end s", num=True), Col("samples", num=True, priority=3),
            Col("p50 ms", num=True), Col("p90 ms", num=True, priority=2), Col("p99 ms", num=True),
            Col("hottest C", num=True, priority=1), Col("max CPU MHz", num=True, priority=4),
            Col("min CPU cap MHz", num=True, priority=4), Col("thermal status", priority=1)]
    rows = []
    for w in r.timeline or ():
        caps = [c for c in w.cpu_cap_khz if c]
        st = w.thermal_status
        rows.append([str(w.index + 1), fmt_value(w.t_end_s, ".1f"), str(w.samples), _ms(w.latency, "p50"),
                     _ms(w.latency, "p90"), _ms(w.latency, "p99") + ("" if w.latency is None or w.latency.p99_valid
                                                                     else INVALID_MARK),
                     fmt_value(w.hottest_c, ".1f"), _mhz(w.cpu_cur_khz), "-" if not caps else f"{min(caps) / 1000:.0f}",
                     "-" if st is None else f"{st} ({STATUS_NAMES.get(st, '?')})"])
    tables = fit_tables(f"{r.model} @ {r.target}: sustained {fmt_value(r.sustained.duration_s, 'g')} s "
                        f"(window {fmt_value(r.sustained.report_every_s, 'g')} s)", cols, rows, width=width, wide=wide)
    s = r.sustained
    out: list = list(tables)
    ttt = "never" if s.time_to_throttle_s is None else f"{s.time_to_throttle_s:.1f} s ({s.throttle_reason})"
    starred = any(w.latency is not None and not w.latency.p99_valid for w in r.timeline or ())
    out.append(Text(f"steady-state ratio (last / first window p50): "
                    f"{fmt_value(s.steady_state_ratio, '.3f', none='- (one window)')}; time to throttle: {ttt}"
                    + (f"; {INVALID_MARK} p99 from fewer than {MIN_SAMPLES['p99']} samples: not valid"
                       if starred else "")))
    reasons = {w.thermal_reason for w in r.timeline or () if w.thermal_reason}
    for why in sorted(reasons):
        out.append(Text(f"thermal: {why}", style="dim"))
    return out


def paced_table(r: InferenceRow, width: int | None = None, wide: bool = False) -> list:
    p = r.paced
    cols = [Col("run", identity=True), *(Col(c, num=True) for c in ("p50 ms", "p90 ms", "p99 ms", "mean ms")),
            Col("samples", num=True, priority=1)]
    rows = [[label, _ms(lat, "p50"), _ms(lat, "p90"), _ms(lat, "p99"), _ms(lat, "mean"),
             fmt_value(lat.samples if lat else None, "d")]
            for label, lat in (("paced", r.latency), ("back-to-back", p.back_to_back_ms if p else None))]
    t = fit_tables(f"{r.model} @ {r.target}: paced every {fmt_value(r.period_ms, 'g')} ms vs back-to-back",
                   cols, rows, width=width, wide=wide)
    lag = p.start_lag if p else None
    capacity = p.capacity_qps if p else None
    return [*t, Text(f"paced / back-to-back p50: {fmt_value(p.p50_ratio if p else None, '.2f')}x; QPS "
                    f"{fmt_value(r.latency.qps if r.latency else None, '.1f')} achieved (capacity 1/back-to-back mean "
                    f"{fmt_value(capacity, '.1f')}); achieved period "
                    f"{fmt_value(p.achieved_period_ms if p else None, '.4g')} ms; late starts "
                    f"{fmt_value(p.late_starts if p else None, 'd')}; start lag p50/p99 "
                    f"{fmt_value(None if lag is None else lag.p50, '.3g')}/"
                    f"{fmt_value(None if lag is None else lag.p99, '.3g')} ms")]


def cold_start_table(r: InferenceRow, width: int | None = None, wide: bool = False) -> list:
    c = r.cold_start
    # the row label says what the row is (p50 of the starts, the one that wrote the cache, ...): kept
    cols = [Col("starts of", identity=True), Col("starts", num=True),
            *(Col(h, num=True, priority=p) for h, p in (("process start ms", 1), ("load + allocate ms", 0),
                                                         ("first inference ms", 0), ("other ms", 2),
                                                         ("spawn to result ms", 0)))]
    rows: list[list[str]] = []

    def row(label: str, n, *phases) -> None:
        rows.append([label, fmt_value(n, "d"), *(fmt_value(v, ".4g") for v in phases)])

    label = "no cache (p50)" if c.xnnpack_cache else "p50"
    row(label, c.count, *(getattr(c, k).p50 if getattr(c, k) else None for k in COLD_START_PHASES))
    if c.xnnpack_cache:
        b = c.cache_build
        row("writes cache", 1 if b else 0, *(b[k] if b else None for k in COLD_START_PHASES))
        w = c.warm
        n = w.init_ms.samples if w and w.init_ms else None
        row("warm cache (p50)", n, *(getattr(w, k).p50 if w and getattr(w, k) else None for k in COLD_START_PHASES))
    tables = fit_tables(f"{r.model} @ {r.target}: cold starts ({c.runtime})", cols, rows, width=width, wide=wide)
    out: list = list(tables)
    note = c.note
    ratio = c.warm_vs_no_cache_init_ratio
    if c.xnnpack_cache and ratio is not None:
        out.append(Text(f"warm-cache / no-cache load + allocate p50: {ratio:.2f}x; "
                        f"cache file {fmt_value(c.cache_bytes, 'd')} bytes"))
    if note:
        out.append(Text(note, style="dim"))
    return out


def energy_lines(r: InferenceRow) -> list:
    if r.energy is None:
        return [Text(f"energy ({r.model} @ {r.target}): not measured: {r.energy_reason}", style="yellow")]
    en = r.energy
    units = en.units
    unit_txt = f"; units {units.current}/{units.voltage}" + (" (assumed)" if units.assumed else "") if units else ""
    head = (f"energy ({r.model} @ {r.target}, {en.source}): {fmt_value(en.mj_per_inference, '.4g')} mJ/inference, "
            f"{fmt_value(en.inferences_per_j, '.4g')} inferences/J; run {fmt_value(en.run_power_w, '.3g')} W vs "
            f"idle {fmt_value(en.idle_power_w, '.3g')} W over {fmt_value(en.run_s, '.3g')} s; readings "
            f"run/idle {fmt_value(en.run_readings, 'd')}/{fmt_value(en.idle_readings, 'd')}{unit_txt}; "
            + ("valid" if en.valid else "NOT VALID"))
    out: list = [Text(head, style=None if en.valid else "yellow")]
    for why in en.invalid_reasons:
        out.append(Text(f"  not valid: {why}", style="yellow"))
    return out


def render_regimes(r: InferenceRow, width: int | None = None, wide: bool = False) -> list:
    """Every regime table the row has (empty when it has none), fitted to ``width``."""
    out: list = []
    if r.timeline and r.sustained is not None:
        out.extend(timeline_table(r, width, wide))
    if r.paced is not None:
        out.extend(paced_table(r, width, wide))
    if r.cold_start is not None:
        out.extend(cold_start_table(r, width, wide))
    if r.energy is not None or r.energy_reason is not None:
        out.extend(energy_lines(r))
    return out
