"""Where the time goes, in the terminal: per-row op profiles (top ops, op types, the sum against
the measured p50), FP32 -> quantized speed-up per op type, and silent-failure verdicts."""

from __future__ import annotations

from typing import Sequence

from rich.text import Text

from edgebench.judge.op_types import OP_UNSTABLE_SPAN, profile_pairs, quantize_cost, speedup_by_op_type
from edgebench.report.model_explorer import node_flops
from edgebench.targets.op_profile import GEMM_TYPE, by_op_type, top_ops
from edgebench.report.terminal._cells import e, fmt_value
from edgebench.report.terminal.fit import Col, fit_tables
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


def render_op_profile(r: InferenceRow, width: int | None = None, wide: bool = False) -> list:
    """Top ops, op types and the coverage line for one profiled row (report/terminal/fit.py widths:
    the node and op stay, names whole -- dropped before a number on a narrow terminal)."""
    info = r.op_summary
    entries = list(r.op_profile or ())
    cols = [Col("node", num=True, identity=True), Col("op", identity=True), Col("ms", num=True),
            Col("p50 ms", num=True, priority=1), Col("share", num=True), Col("runs on", priority=2),
            Col("name", priority=3)]
    rows = [[fmt_value(x.node, "d"), str(x.op), fmt_value(x.ms, ".4f"), fmt_value(x.p50_ms, ".4f"), _pct(x.share),
             "delegate partition (one entry)" if x.delegated else "CPU interpreter", str(x.name or "-")]
            for x in top_ops(entries, TOP_OPS)]
    notes = [coverage_line(r)] if coverage_line(r) else []
    if len(entries) > TOP_OPS:
        notes.append(f"top {TOP_OPS} of {len(entries)} entries (all of them are in --json)")
    if info.note:
        notes.append(info.note)
    notes.append("a delegate partition is one entry: its inner ops are timed by the delegate itself "
                 "(the op-type table splits them)")
    out = fit_tables(f"where the time goes: {_label(r)}  ({info.source or 'profile'}, "
                     f"{'?' if info.runs is None else info.runs} runs)", cols, rows, width=width, wide=wide,
                     caption=[e(n) for n in notes])
    q = quantize_cost(entries)
    by_type = by_op_type(entries, node_flops(r.model_path) if r.model_path else None)
    types = [[str(fam), fmt_value(v["ms"], ".4f"), _pct(v["share"]), fmt_value(v["cpu_ms"], ".4f"),
              fmt_value(v["delegated_ms"], ".4f")] for fam, v in list(by_type.items())[:TOP_OPS]]
    out += fit_tables(f"time by op type: {_label(r)}", [Col("op type", identity=True), Col("ms", num=True),
                                                        Col("share of op time", num=True),
                                                        Col("CPU interpreter ms", num=True),
                                                        Col("delegate ms", num=True)], types, width=width, wide=True,
                      caption=[e(split_note(by_type)),
                               e(f"QUANTIZE/DEQUANTIZE (XNNPACK 'Convert'): {q['ms']:.4f} ms per inference, "
                                 f"{_pct(q['share'])} of the profile")])
    return out


def split_note(by_type: dict) -> str:
    """What the op-type table's numbers are: measured time (not FLOPs), shared out of the profile's
    sum, and how a delegate partition's time reached the model's ops."""
    hows = list(dict.fromkeys(h for v in by_type.values() for h in v.get("split") or ()))
    text = "share = of the profiled op time (measured, not FLOPs)"
    if "the delegate's operator names" in hows:
        return (f"{text}; delegated time goes by the delegate's own operator names (this profile has no node "
                f"list): '{GEMM_TYPE}' is XNNPACK's GEMM, which runs fully connected layers and 1x1 convolutions")
    how = {"inner operators in order": "matched to the partition's nodes in order",
           "op type share": "split over the partition's nodes by op family, then by FLOPs"}
    if hows:
        text += ("; op types are the model's ops: a partition's inner operators " + ", ".join(how.get(h, h) for h in hows)
                 + " (XNNPACK runs a 1x1 convolution as a 'Fully Connected' GEMM: it counts as Convolution here)")
    return text


def _speedup_cell(x: dict) -> str:
    if x.get("below_resolution"):
        return "< resolution"
    if x["speedup"] is None:
        return "-"
    text = f"{x['speedup']:.2f}x"
    if x.get("ci"):
        text += f" [{x['ci'][0]:.2f}, {x['ci'][1]:.2f}]"
    return text + (" unstable" if x.get("unstable") else "")


def render_speedups(rows: Sequence[InferenceRow], width: int | None = None) -> list:
    """FP32 -> quantized speed-up per op type, for every target with both profiled."""
    out: list = []
    for base, other in profile_pairs(rows):
        a, b = base.precision or base.model, other.precision or other.model
        flops = [node_flops(x.model_path) if x.model_path else None for x in (base, other)]
        rows_ = speedup_by_op_type(base.op_profile or (), other.op_profile or (), base.op_profile_info,
                                        other.op_profile_info, base_flops=flops[0], other_flops=flops[1])
        medians = any(x["basis"] == "medians" for x in rows_)
        cols = [Col("op type", identity=True),
                *(Col(c, num=True) for c in (f"{a} ms", f"{b} ms", "speed-up" + (" [95% CI]" if medians else ""),
                                             f"{b} on CPU interp. ms"))]
        cells = [[str(x["op_type"]), fmt_value(x["base_ms"], ".4f"), fmt_value(x["other_ms"], ".4f"),
                  _speedup_cell(x), fmt_value(x["other_on_cpu_ms"] or None, ".4f")] for x in rows_[:TOP_OPS]]
        caption = ("medians over the profiled runs; unstable: the interval spans more than "
                   f"{OP_UNSTABLE_SPAN:g}x" if medians else
                   "ratios of per-op means (this profile kept no per-run times): stalls move them")
        out += fit_tables(f"{a} -> {b} per op type on {base.target} (speed-up > 1: faster)", cols, cells,
                          width=width, wide=True, caption=[e(caption)])
    return out


def render_where(rows: Sequence[InferenceRow], width: int | None = None) -> list:
    """Every profiled row's tables, then the speed-ups."""
    out: list = []
    for r in rows:
        if r.ok and r.op_profile:
            out.extend(render_op_profile(r, width))
    out.extend(render_speedups(rows, width))
    return out


def verdict_lines(rows: Sequence[InferenceRow]) -> list:
    out: list = []
    for r in rows:
        for v in r.verdicts:
            if v.failed:
                out.append(Text(f"SILENT FAILURE ({_label(r)}): {v.message} -- {v.advice}", style="bold red"))
    return out
