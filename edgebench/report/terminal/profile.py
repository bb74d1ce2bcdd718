"""Where the time goes, in the terminal: per-row op profiles (top ops, op types, the sum against
the measured p50), FP32 -> quantized speed-up per op type, and silent-failure verdicts."""

from __future__ import annotations

from typing import Sequence

from rich.table import Table
from rich.text import Text

from edgebench import profile as prof
from edgebench.report.terminal._cells import e, fmt_value, numeric_column, text_column
from edgebench.rows import InferenceRow

TOP_OPS = 10


def _label(r: InferenceRow) -> str:
    what = r.precision or r.model or "?"
    gpu = f", GPU {r.gpu_precision}" if r.gpu_precision else ""
    return f"{what} on {r.target}{gpu}"


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.1f}%"


def coverage_line(r: InferenceRow) -> str:
    """'listed ops cover 62% of the profiled Invoke (0.041 ms); profiling cost 1.10 x the timed p50'."""
    info = r.op_summary
    parts = []
    if info.coverage is not None:
        parts.append(f"listed ops cover {_pct(info.coverage)} of the profiled Invoke "
                     f"({info.invoke_ms:.4g} ms mean; the rest is work between ops and events under 1 us)")
    if info.profiler_overhead is not None:
        parts.append(f"profiled Invoke median = {info.profiler_overhead:.2f} x the timed p50 (profiler overhead)")
    return "; ".join(parts)


def render_op_profile(r: InferenceRow) -> list:
    """Top ops, op types and the coverage line for one profiled row."""
    info = r.op_summary
    entries = list(r.op_profile or ())
    t = Table(title=f"where the time goes: {e(_label(r))}  ({info.source or 'profile'}, "
                    f"{'?' if info.runs is None else info.runs} runs)", header_style="bold")
    for c in ("node",):
        numeric_column(t, c)
    text_column(t, "op")
    for c in ("ms", "p50 ms", "share"):
        numeric_column(t, c)
    text_column(t, "runs on")
    text_column(t, "name")
    for x in prof.top_ops(entries, TOP_OPS):
        where = "delegate partition (one entry)" if x.delegated else "CPU interpreter"
        t.add_row(fmt_value(x.node, "d"), e(x.op), fmt_value(x.ms, ".4f"), fmt_value(x.p50_ms, ".4f"),
                  _pct(x.share), where, e((x.name or "")[:70]))
    notes = [coverage_line(r)] if coverage_line(r) else []
    if len(entries) > TOP_OPS:
        notes.append(f"top {TOP_OPS} of {len(entries)} entries (all of them are in --json)")
    if info.note:
        notes.append(info.note)
    notes.append("a delegate partition is one entry: its inner ops are timed by the delegate itself "
                 "(the op-type table splits them)")
    t.caption = e("\n".join(notes))
    types = Table(title=f"op types: {e(_label(r))}", header_style="bold")
    text_column(types, "op type")
    for c in ("ms", "share", "CPU interpreter ms", "delegate ms"):
        numeric_column(types, c)
    for fam, v in list(prof.by_op_type(entries).items())[:TOP_OPS]:
        types.add_row(e(fam), fmt_value(v["ms"], ".4f"), _pct(v["share"]), fmt_value(v["cpu_ms"], ".4f"),
                      fmt_value(v["delegated_ms"], ".4f"))
    q = prof.quantize_cost(entries)
    types.caption = e(f"QUANTIZE/DEQUANTIZE (XNNPACK 'Convert'): {q['ms']:.4f} ms per inference, "
                      f"{_pct(q['share'])} of the profile")
    return [t, types]


def _speedup_cell(x: dict) -> str:
    if x.get("below_resolution"):
        return "< resolution"
    if x["speedup"] is None:
        return "-"
    text = f"{x['speedup']:.2f}x"
    if x.get("ci"):
        text += f" [{x['ci'][0]:.2f}, {x['ci'][1]:.2f}]"
    return text + (" unstable" if x.get("unstable") else "")


def render_speedups(rows: Sequence[InferenceRow]) -> list:
    """FP32 -> quantized speed-up per op type, for every target with both profiled."""
    out: list = []
    for base, other in prof.profile_pairs(rows):
        a, b = base.precision or base.model, other.precision or other.model
        t = Table(title=f"{e(a)} -> {e(b)} per op type on {e(base.target)} (speed-up > 1: faster)",
                  header_style="bold")
        text_column(t, "op type")
        rows_ = prof.speedup_by_op_type(base.op_profile or (), other.op_profile or (), base.op_profile_info,
                                        other.op_profile_info)
        medians = bool(rows_) and rows_[0]["basis"] == "medians"
        for c in (f"{a} ms", f"{b} ms", "speed-up" + (" [95% CI]" if medians else ""), f"{b} on CPU interp. ms"):
            numeric_column(t, c)
        for x in rows_[:TOP_OPS]:
            t.add_row(e(x["op_type"]), fmt_value(x["base_ms"], ".4f"), fmt_value(x["other_ms"], ".4f"),
                      _speedup_cell(x), fmt_value(x["other_on_cpu_ms"] or None, ".4f"))
        t.caption = ("medians over the profiled runs; unstable: the interval spans more than "
                     f"{prof.OP_UNSTABLE_SPAN:g}x" if medians else
                     "ratios of per-op means (this profile kept no per-run times): stalls move them")
        out.append(t)
    return out


def render_where(rows: Sequence[InferenceRow]) -> list:
    """Every profiled row's tables, then the speed-ups."""
    out: list = []
    for r in rows:
        if r.ok and r.op_profile:
            out.extend(render_op_profile(r))
    out.extend(render_speedups(rows))
    return out


def verdict_lines(rows: Sequence[InferenceRow]) -> list:
    out: list = []
    for r in rows:
        for v in r.verdicts:
            if v.failed:
                out.append(Text(f"SILENT FAILURE ({_label(r)}): {v.message} -- {v.advice}", style="bold red"))
    return out
