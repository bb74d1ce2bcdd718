"""Driving and parsing Google's TFLite ``benchmark_model`` binary (stock Android phones).

Two halves, both pure (no device access here; ``targets/adb.py`` runs what this builds):

* **Parsing.** ``parse_log(text)`` turns captured benchmark_model output of any version
  (TFLite 1.12 to today's LiteRT nightlies; with or without ``INFO:``/logcat prefixes;
  scientific notation; ``p5/median/p95``; memory, delegate and echoed-parameter lines;
  operator-wise profiling tables) into a ``BenchmarkModelLog``. Unknown lines are kept in
  ``unparsed``; nothing in a log makes it raise. ``to_result_rows(log)`` makes edgebench
  result rows from it. The tool prints only summary statistics, so an imported row never
  has a p99: ``p99`` is None and ``p99_valid`` False ("benchmark_model prints no
  per-inference samples"); p50/p5/p95 appear only when the log printed them.
* **Driving.** ``build_argv(...)`` makes the argv of one invocation (the caller quotes it
  for the device shell). Per-inference samples -- the only source of an honest P99 -- come
  from ``build_sample_loop_script(argv, n)``: one POSIX ``sh`` loop run on the device that
  invokes the binary ``n`` times with ``--num_runs=1``; ``parse_sample_loop(text)`` reads
  the ``curr=`` of each invocation's single timed run. ``write_input_value_files`` and
  ``split_output_file`` move InputSet samples in (``--input_layer_value_files``) and
  outputs out (``--output_filepath``, raw bytes of all outputs concatenated).

benchmark_model writes its log to **stderr** (TFLITE_LOG); capture ``2>&1``.
"""

from __future__ import annotations

import math
import os
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from edgebench.errors import BadInput, EdgebenchError, InfraError

# --------------------------------------------------------------------------- where to get it

ENV_VAR = "EDGEBENCH_BENCHMARK_MODEL"
MEASUREMENT_DOCS_URL = "https://ai.google.dev/edge/litert/models/measurement"
NIGHTLY_ANDROID_AARCH64_URL = (
    "https://storage.googleapis.com/tensorflow-nightly-public/prod/tensorflow/release/"
    "lite/tools/nightly/latest/android_aarch64_benchmark_model"
)
P99_NOTE = "benchmark_model prints no per-inference samples"

_WHERE = (
    f"download Google's prebuilt android_aarch64_benchmark_model (nightly: {NIGHTLY_ANDROID_AARCH64_URL}; "
    f"listed on the LiteRT/TFLite performance measurement page {MEASUREMENT_DOCS_URL}) and pass it "
    f"with --benchmark-binary PATH, the environment variable {ENV_VAR}=PATH, or "
    "'benchmark_binary: PATH' in the config file"
)

# --------------------------------------------------------------------------- parsed structures


@dataclass(frozen=True)
class RunStats:
    """One ``count=... first=... curr=... min=... max=... avg=... std=...`` line (microseconds).

    Fields the line did not print are None (``count=1 curr=X`` prints only the current run;
    p5/median/p95 exist only in recent versions).
    """

    count: int
    first_us: float | None = None
    curr_us: float | None = None
    min_us: float | None = None
    max_us: float | None = None
    avg_us: float | None = None
    std_us: float | None = None
    p5_us: float | None = None
    median_us: float | None = None
    p95_us: float | None = None

    @property
    def mean_us(self) -> float | None:
        """avg=, or the single run's value when count=1 printed only curr=."""
        if self.avg_us is not None:
            return self.avg_us
        if self.count == 1:
            return self.curr_us
        return None

    @property
    def first_run_us(self) -> float | None:
        if self.first_us is not None:
            return self.first_us
        return self.curr_us if self.count == 1 else None

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in (
            "count", "first_us", "curr_us", "min_us", "max_us", "avg_us", "std_us",
            "p5_us", "median_us", "p95_us")}


@dataclass(frozen=True)
class OpProfileRow:
    """One row of an op-profiling table.

    ``section``: "init" (Profiling Info for Benchmark Initialization) or "regular"
    (Operator-wise Profiling Info for Regular Benchmark Runs); ``table``: "Run Order",
    "Top by Computation Time" or "Summary by node type". Times in ms, shares in percent.
    """

    section: str
    table: str
    node_type: str
    avg_ms: float | None
    pct: float | None
    cdf_pct: float | None
    mem_kb: float | None
    times_called: int | None
    start_ms: float | None = None
    first_ms: float | None = None
    count: int | None = None           # "Summary by node type" only: nodes of this type
    name: str | None = None            # Run Order / Top tables only

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in (
            "section", "table", "node_type", "name", "start_ms", "first_ms", "avg_ms", "pct",
            "cdf_pct", "mem_kb", "times_called", "count") if getattr(self, k) is not None}


@dataclass(frozen=True)
class BenchmarkModelLog:
    """Everything one benchmark_model run printed, as numbers. Times are microseconds."""

    params: dict[str, str] = field(default_factory=dict)          # echoed "Name: [value]" lines
    warmup: RunStats | None = None
    inference: RunStats | None = None
    run_stats: tuple[RunStats, ...] = ()                          # every stats line, in order
    init_us: float | None = None                                  # summary "Init:"
    first_inference_us: float | None = None                       # summary "First inference:"
    warmup_avg_us: float | None = None                            # summary "Warmup (avg):"/"Warmup:"
    inference_avg_us: float | None = None                         # "Inference (avg):"/"no stats:"/"Inference:"
    summary_format: str | None = None                             # "inference-timings" | "average-inference-timings"
    init_session_ms: float | None = None
    model_size_mb: float | None = None
    model_path: str | None = None
    mem_init_mb: float | None = None
    mem_overall_mb: float | None = None
    mem_kind: str | None = None          # "delta-from-tool-start" | "peak-footprint (TFLite <= 2.4 wording)"
    peak_mem_mb: float | None = None     # "Overall peak memory footprint (MB) via periodic monitoring"
    delegates: tuple[str, ...] = ()      # delegates created/applied, in order: "XNNPACK", "GPU", "NNAPI", ...
    delegated_nodes: tuple[int, int] | None = None   # (replaced, total) when printed
    delegate_fallback: tuple[str, ...] = ()          # delegates that were requested but not applied
    op_profile: tuple[OpProfileRow, ...] = ()
    op_profile_timings: dict[str, RunStats] = field(default_factory=dict)  # section -> "Timings (microseconds)"
    errors: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    failed: bool = False
    unparsed: tuple[str, ...] = ()
    recognized_lines: int = 0
    summary_lines: int = 0

    @property
    def is_benchmark_model(self) -> bool:
        """True when at least one line is unmistakably benchmark_model output."""
        return self.recognized_lines > 0

    def param(self, *names: str) -> str | None:
        """First echoed parameter among ``names`` (case- and space-insensitive)."""
        norm = {_norm_key(k): v for k, v in self.params.items()}
        for n in names:
            v = norm.get(_norm_key(n))
            if v is not None:
                return v
        return None

    @property
    def threads(self) -> int | None:
        v = self.param("Num threads", "#threads used for CPU inference")
        try:
            return int(v) if v is not None else None
        except ValueError:
            return None


def _norm_key(k: str) -> str:
    return re.sub(r"\s+", " ", k.strip().lower())


# --------------------------------------------------------------------------- line patterns

# Prefixes a captured log may carry before the tool's own text.
_LOGCAT_THREADTIME = re.compile(
    r"^\d\d-\d\d\s+\d\d:\d\d:\d\d\.\d+\s+\d+\s+\d+\s+([VDIWEF])\s+[^:]*?:\s?")
_LOGCAT_BRIEF = re.compile(r"^([VDIWEF])/[^:(]+?\s*\(\s*\d+\):\s?")
_ELLIPSIS_TAG = re.compile(r"^\.\.\.\s*tflite\s*:\s?")
_GLOG = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+: ([IWEF]) \S+\] ")
_LEVEL = re.compile(r"^(INFO|WARN|WARNING|ERROR|VERBOSE|DEBUG|FATAL):\s?")
_LOGCAT_LEVEL = {"V": "VERBOSE", "D": "DEBUG", "I": "INFO", "W": "WARN", "E": "ERROR", "F": "FATAL"}

_NUM = r"([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|nan|-?inf)"
_STATS = re.compile(r"^count=(\d+)\b(.*)$")
_KV = re.compile(r"(\w+)=(\S+)")
_SUMMARY_NEW = re.compile(r"^Inference timings in us:\s*(.*)$")
_SUMMARY_OLD = re.compile(r"^Average inference timings in us:\s*(.*)$")
_MEM_DELTA = re.compile(r"^Memory footprint delta from the start of the tool \(MB\):\s*init=" + _NUM
                        + r"\s+overall=" + _NUM)
_MEM_PEAK_OLD = re.compile(r"^Peak memory footprint \(MB\):\s*init=" + _NUM + r"\s+overall=" + _NUM)
_MEM_PERIODIC = re.compile(r"^Overall peak memory footprint \(MB\) via periodic monitoring:\s*" + _NUM)
_INIT_SESSION = re.compile(r"^Initialized session in\s*" + _NUM + r"\s*ms\.?$")
_MODEL_SIZE = re.compile(r"^The input model file size \(MB\):\s*" + _NUM)
_LOADED = re.compile(r"^Loaded model\s+(.+)$")
_PARAM = re.compile(r"^([#A-Za-z][^\[\]=]*?)\s*:\s*\[(.*)\]\s*$")
_RUNNING = re.compile(r"^Running benchmark for (?:at least |max )?(\d+) iterations")
_REPLACING = re.compile(
    r"Replacing (\d+)(?: out of (\d+))? node\(s\) with delegate \(([^)]+)\)")
_CREATED = re.compile(r"Created TensorFlow Lite (?:(\w+) )?delegate for (\w+)")
_EXPLICIT = re.compile(r"Explicitly applied (\w+) delegate")
_NOT_EXECUTED = re.compile(r"Though (\w+) delegate is explicitly applied, the model graph will not be executed")
_UNSUPPORTED = re.compile(r"^(\w+) acceleration is unsupported on this platform")
_FAILED_APPLY = re.compile(r"Failed to apply (\w+) delegate")
_DELEGATE_CREATED = re.compile(r"^(\w+) delegate created\.?$")
_SECTION_INIT = "Profiling Info for Benchmark Initialization:"
_SECTION_REGULAR = "Operator-wise Profiling Info for Regular Benchmark Runs:"
_TABLE_TITLE = re.compile(r"^=+\s*(.+?)\s*=+$")
_TIMINGS = re.compile(r"^Timings \(microseconds\):\s*(count=.*)$")
_PROFILE_MISC = re.compile(
    r"^(Memory \(bytes\): count=\d+.*|\d+ nodes observed|Number of nodes executed: \d+)$")

_KERNEL_TO_DELEGATE = {
    "tflitexnnpackdelegate": "XNNPACK",
    "tflitegpudelegatev2": "GPU",
    "tflitegpudelegate": "GPU",
    "tflitennapidelegate": "NNAPI",
    "tflitehexagondelegate": "Hexagon",
    "tflitecoremldelegate": "CoreML",
}

# Lines the tool prints that carry no number we keep; recognised so they are not "unparsed".
_KNOWN_TEXT = (
    "STARTING!", "resolved reporter", "Benchmarking failed.",
    "Note: as the benchmark tool itself affects memory footprint",
    "Initialized TensorFlow Lite runtime.", "Initialized OpenCL-based API.",
    "Created 1 GPU delegate kernels.", "Duplicate flags:", "Unconsumed cmdline flags:",
    "Memory status at the end of exeution", "The GPU delegate compile options",
)


def _f(s: str) -> float | None:
    try:
        v = float(s)
    except ValueError:
        return None
    return None if math.isnan(v) else v


def _strip_prefix(raw: str) -> tuple[str | None, str]:
    """(level or None, message) with logcat/glog/INFO: prefixes removed."""
    line = raw.strip()
    level = None
    for rx in (_LOGCAT_THREADTIME, _LOGCAT_BRIEF, _GLOG):
        m = rx.match(line)
        if m:
            level = _LOGCAT_LEVEL.get(m.group(1), level)
            line = line[m.end():]
            break
    else:
        m = _ELLIPSIS_TAG.match(line)
        if m:
            line = line[m.end():]
    m = _LEVEL.match(line)
    if m:
        level = "WARN" if m.group(1) == "WARNING" else m.group(1)
        line = line[m.end():]
    return level, line.strip()


def parse_stats(text: str) -> RunStats | None:
    """``count=N first=.. curr=.. ...`` -> RunStats (None when the text is not a stats line)."""
    m = _STATS.match(text.strip())
    if not m:
        return None
    kv = dict(_KV.findall(m.group(2)))
    names = {"first": "first_us", "curr": "curr_us", "min": "min_us", "max": "max_us",
             "avg": "avg_us", "std": "std_us", "p5": "p5_us", "median": "median_us", "p95": "p95_us"}
    vals = {names[k]: _f(v) for k, v in kv.items() if k in names}
    return RunStats(count=int(m.group(1)), **vals)


def _summary_pairs(body: str) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    for part in body.split(","):
        if ":" not in part:
            continue
        k, v = part.rsplit(":", 1)
        out[_norm_key(k)] = _f(v.strip())
    return out


def _split_row(line: str) -> list[str]:
    if "\t" in line:
        return [t.strip() for t in line.split("\t") if t.strip()]
    return [t for t in re.split(r"\s{2,}", line.strip()) if t]


def _pct(s: str) -> float | None:
    return _f(s.rstrip("%"))


def _profile_row(section: str, table: str, header: list[str], cells: list[str]) -> OpProfileRow | None:
    if len(cells) < len(header):
        return None
    if len(cells) > len(header):  # a name containing the separator
        cells = cells[: len(header) - 1] + [" ".join(cells[len(header) - 1:])]
    d = dict(zip(header, cells))
    try:
        times = d.get("times called")
        cnt = d.get("count")
        return OpProfileRow(
            section=section, table=table, node_type=d.get("node type", ""),
            avg_ms=_f(d.get("avg ms", "")), pct=_pct(d.get("%", d.get("avg %", ""))),
            cdf_pct=_pct(d.get("cdf%", d.get("cdf %", ""))), mem_kb=_f(d.get("mem kb", "")),
            times_called=int(times) if times is not None else None,
            start_ms=_f(d["start"]) if "start" in d else None,
            first_ms=_f(d["first"]) if "first" in d else None,
            count=int(cnt) if cnt is not None else None,
            name=d.get("name"),
        )
    except ValueError:
        return None


def parse_log(text: str) -> BenchmarkModelLog:
    """Parse one captured benchmark_model run (stdout+stderr) of any version. Never raises.

    When the text holds several runs, the summary numbers are those of the last one and a
    warning says so.
    """
    params: dict[str, str] = {}
    stats: list[tuple[int | None, RunStats]] = []   # (phase index from "Running benchmark" markers, stats)
    phase = -1
    markers = 0
    summary: dict[str, float | None] = {}
    summary_format = None
    summary_lines = 0
    out: dict[str, Any] = {}
    delegates: list[str] = []
    fallback: list[str] = []
    ops: list[OpProfileRow] = []
    op_timings: dict[str, RunStats] = {}
    errors: list[str] = []
    warnings: list[str] = []
    unparsed: list[str] = []
    failed = False
    recognized = 0

    section: str | None = None
    table: str | None = None
    header: list[str] | None = None

    def add_delegate(name: str) -> None:
        name = {"xnnpack": "XNNPACK", "gpu": "GPU", "nnapi": "NNAPI", "hexagon": "Hexagon",
                "coreml": "CoreML"}.get(name.lower(), name)
        if name not in delegates:
            delegates.append(name)

    for raw in text.splitlines():
        level, msg = _strip_prefix(raw)
        if not msg:
            table = header = None   # a blank line ends an op-profiling table
            continue

        # ---- op-profiling tables
        if msg == _SECTION_INIT or msg == _SECTION_REGULAR:
            section = "init" if msg == _SECTION_INIT else "regular"
            table = header = None
            recognized += 1
            continue
        m = _TABLE_TITLE.match(msg)
        if m:
            section = section or "regular"   # very old logs print the tables without a section title
            table, header = m.group(1), None
            recognized += 1
            continue
        if table is not None and msg.startswith("["):
            header = [h.strip().lower() for h in re.findall(r"\[([^\]]+)\]", msg)]
            continue
        if table is not None and header is not None:
            row = _profile_row(section or "regular", table, header, _split_row(msg))
            if row is not None:
                ops.append(row)
                continue
            table = header = None
        m = _TIMINGS.match(msg)
        if m:
            st = parse_stats(m.group(1))
            if st is not None:
                op_timings[section or "regular"] = st
            recognized += 1
            continue
        if _PROFILE_MISC.match(msg):
            recognized += 1
            continue

        # ---- run statistics and summaries
        st = parse_stats(msg)
        if st is not None:
            stats.append((phase if markers else None, st))
            recognized += 1
            continue
        m = _RUNNING.match(msg)
        if m:
            markers += 1
            phase += 1
            recognized += 1
            continue
        m = _SUMMARY_NEW.match(msg) or _SUMMARY_OLD.match(msg)
        if m:
            summary = _summary_pairs(m.group(1))
            summary_format = "inference-timings" if msg.startswith("Inference") else "average-inference-timings"
            summary_lines += 1
            recognized += 1
            continue
        m = _MEM_DELTA.match(msg)
        if m:
            out.update(mem_init_mb=_f(m.group(1)), mem_overall_mb=_f(m.group(2)),
                       mem_kind="delta-from-tool-start")
            recognized += 1
            continue
        m = _MEM_PEAK_OLD.match(msg)
        if m:
            out.update(mem_init_mb=_f(m.group(1)), mem_overall_mb=_f(m.group(2)),
                       mem_kind="peak-footprint (TFLite <= 2.4 wording)")
            recognized += 1
            continue
        m = _MEM_PERIODIC.match(msg)
        if m:
            out["peak_mem_mb"] = _f(m.group(1))
            recognized += 1
            continue
        m = _INIT_SESSION.match(msg)
        if m:
            out["init_session_ms"] = _f(m.group(1))
            recognized += 1
            continue
        m = _MODEL_SIZE.match(msg)
        if m:
            out["model_size_mb"] = _f(m.group(1))
            recognized += 1
            continue
        m = _LOADED.match(msg)
        if m:
            out["model_path"] = m.group(1).strip()
            recognized += 1
            continue

        # ---- delegates
        hit = False
        m = _REPLACING.search(msg)
        if m:
            replaced = int(m.group(1))
            total = int(m.group(2)) if m.group(2) else None
            out["delegated_nodes"] = (replaced, total) if total is not None else (replaced, replaced)
            add_delegate(_KERNEL_TO_DELEGATE.get(m.group(3).lower(), m.group(3)))
            hit = True
        m = _CREATED.search(msg)
        if m:
            add_delegate(m.group(1) or m.group(2))
            hit = True
        m = _EXPLICIT.search(msg)
        if m:
            add_delegate(m.group(1))
            hit = True
        m = _DELEGATE_CREATED.match(msg)
        if m:
            add_delegate(m.group(1))
            hit = True
        m = _NOT_EXECUTED.search(msg)
        if m:
            fallback.append(m.group(1).upper())
            warnings.append(msg)
            hit = True
        m = _UNSUPPORTED.match(msg)
        if m:
            fallback.append(m.group(1).upper())
            warnings.append(msg)
            hit = True
        m = _FAILED_APPLY.search(msg)
        if m:
            fallback.append(m.group(1).upper())
            errors.append(msg)
            failed = True
            hit = True
        if hit:
            recognized += 1
            continue

        if msg.startswith("Benchmarking failed"):
            failed = True
            errors.append(msg)
            recognized += 1
            continue

        # ---- echoed parameters
        m = _PARAM.match(msg)
        if m:
            params[m.group(1).strip()] = m.group(2).strip()
            recognized += 1
            continue

        if level in ("ERROR", "FATAL"):
            errors.append(msg)
            continue
        if level == "WARN":
            warnings.append(msg)
            continue
        if any(msg.startswith(k) for k in _KNOWN_TEXT):
            recognized += 1
            continue
        unparsed.append(raw.rstrip("\n"))

    for row in ops:   # delegate kernels show up as node types in the profile
        d = _KERNEL_TO_DELEGATE.get(row.node_type.lower())
        if d:
            add_delegate(d)
    warmup, inference = _assign_phases(stats, markers, summary)
    if summary_lines > 1:
        warnings.append(f"the log holds {summary_lines} benchmark runs; the summary numbers are the last run's")

    first_inf = summary.get("first inference")
    warm_avg = summary.get("warmup (avg)", summary.get("warmup"))
    inf_avg = summary.get("inference (avg)", summary.get("no stats", summary.get("inference")))
    if first_inf is None and warmup is not None:
        first_inf = warmup.first_run_us
    if not failed and errors and inference is None and inf_avg is None:
        failed = True

    return BenchmarkModelLog(
        params=params, warmup=warmup, inference=inference,
        run_stats=tuple(s for _, s in stats),
        init_us=summary.get("init"), first_inference_us=first_inf,
        warmup_avg_us=warm_avg, inference_avg_us=inf_avg, summary_format=summary_format,
        delegates=tuple(delegates), delegate_fallback=tuple(dict.fromkeys(fallback)),
        op_profile=tuple(ops), op_profile_timings=op_timings,
        errors=tuple(errors), warnings=tuple(warnings), failed=failed,
        unparsed=tuple(unparsed), recognized_lines=recognized, summary_lines=summary_lines,
        **out,
    )


def _close(a: float | None, b: float | None) -> bool:
    return a is not None and b is not None and abs(a - b) <= max(1.0, 1e-4 * abs(b))


def _assign_phases(stats: list[tuple[int | None, RunStats]], markers: int,
                   summary: dict[str, float | None]) -> tuple[RunStats | None, RunStats | None]:
    """Which stats line is the warmup and which the timed run.

    The tool prints "Running benchmark for ... iterations" before each phase (warmup first);
    logs quoted without those lines are resolved by order (first = warmup, last = timed)
    and, for a single line, by matching the summary's averages.
    """
    if not stats:
        return None, None
    if markers >= 2:
        warm = [s for p, s in stats if p is not None and p % 2 == 0]
        timed = [s for p, s in stats if p is not None and p % 2 == 1]
        return (warm[-1] if warm else None), (timed[-1] if timed else None)
    if len(stats) >= 2:
        return stats[-2][1], stats[-1][1]
    only = stats[0][1]
    inf_avg = summary.get("inference (avg)", summary.get("no stats", summary.get("inference")))
    warm_avg = summary.get("warmup (avg)", summary.get("warmup"))
    if _close(only.mean_us, inf_avg):
        return None, only
    if _close(only.mean_us, warm_avg):
        return only, None
    if markers == 1:   # only the warmup phase was reached
        return only, None
    return None, only


# --------------------------------------------------------------------------- result rows


def _ms(us: float | None) -> float | None:
    return None if us is None else us / 1000.0


def primary_delegate(log: BenchmarkModelLog) -> str | None:
    """The delegate that ran the graph: an accelerator when one was applied, else XNNPACK/CPU."""
    applied = [d for d in log.delegates if d not in log.delegate_fallback]
    for d in applied:
        if d != "XNNPACK":
            return d.lower()
    if "XNNPACK" in applied:
        return "xnnpack"
    xnn = log.param("Use xnnpack")
    if xnn is not None and xnn.strip() in ("0", "false"):
        return "none"
    return None


def latency_from_log(log: BenchmarkModelLog) -> dict[str, Any] | None:
    """The ``latency_ms`` object from the timed run's summary statistics (no invented numbers)."""
    st = log.inference
    source = "benchmark_model summary statistics"
    if st is None and log.inference_avg_us is None and "regular" in log.op_profile_timings:
        # logs quoted with only the op-profiling tables: the profiler's own per-run timings
        st = log.op_profile_timings["regular"]
        source = "benchmark_model op profiler 'Timings (microseconds)' of the regular runs"
    mean_us = st.mean_us if st is not None else None
    if mean_us is None:
        mean_us = log.inference_avg_us
    if mean_us is None:
        return None
    lat: dict[str, Any] = {
        "mean": _ms(mean_us),
        "std": _ms(st.std_us) if st else None,
        "min": _ms(st.min_us) if st else None,
        "max": _ms(st.max_us) if st else None,
        "p50": _ms(st.median_us) if st else None,
        "p5": _ms(st.p5_us) if st else None,
        "p90": None,
        "p95": _ms(st.p95_us) if st else None,
        "p99": None,
        "samples": st.count if st else None,
        "p99_valid": False,
        "p90_valid": False,
        "p99_note": P99_NOTE + "; p99 needs per-inference samples (run through edgebench's "
                               "device-side sample loop instead)",
        "qps": 1e6 / mean_us if mean_us > 0 else None,
        "source": source,
    }
    if st is not None and st.count == 1 and st.min_us is None:
        lat["min"] = lat["max"] = lat["mean"]
        lat["std"] = 0.0
    if lat["std"] is not None and lat["mean"]:
        lat["cv"] = lat["std"] / lat["mean"]
    return lat


def to_result_rows(log: BenchmarkModelLog, *, source: str | None = None,
                   target: str = "benchmark_model") -> list[dict[str, Any]]:
    """edgebench result rows (one per run) from a parsed log."""
    lat = latency_from_log(log)
    status = "failed" if (log.failed or lat is None) else "ok"
    error = None
    if status == "failed":
        error = (log.errors[0] if log.errors else "the log has no timed run (no stats line and no summary)")
    model_path = log.param("Graph") or log.model_path
    warm = log.warmup
    row: dict[str, Any] = {
        "model": Path(model_path).name if model_path else None,
        "model_path": model_path,
        "target": target,
        "runtime": "benchmark_model",
        "status": status,
        "error": error,
        "method": "benchmark_model summary statistics (no per-inference samples)",
        "latency_ms": lat,
        "init_ms": _ms(log.init_us) if log.init_us is not None else log.init_session_ms,
        "first_inference_ms": _ms(log.first_inference_us),
        "warmup_ms": _ms(log.warmup_avg_us if log.warmup_avg_us is not None
                         else (warm.mean_us if warm else None)),
        "warmup": warm.to_dict() if warm else None,
        "memory_mb": {
            "init": log.mem_init_mb, "overall": log.mem_overall_mb, "kind": log.mem_kind,
            "peak_periodic": log.peak_mem_mb,
        } if (log.mem_overall_mb is not None or log.peak_mem_mb is not None) else None,
        "delegate": primary_delegate(log),
        "delegates": list(log.delegates),
        "delegate_fallback": list(log.delegate_fallback),
        "delegated_nodes": (f"{log.delegated_nodes[0]}/{log.delegated_nodes[1]}"
                            if log.delegated_nodes else None),
        "threads": log.threads,
        "model_size_mb": log.model_size_mb,
        "params": dict(log.params),
        "op_profile": [r.to_dict() for r in log.op_profile
                       if r.section == "regular" and r.table == "Run Order"],
        "op_summary": [r.to_dict() for r in log.op_profile
                       if r.section == "regular" and r.table.startswith("Summary")],
        "op_profile_timings": {k: v.to_dict() for k, v in log.op_profile_timings.items()},
        "warnings": list(log.warnings),
        "errors": list(log.errors),
        "unparsed_lines": len(log.unparsed),
        "source": source,
    }
    row["fingerprint"] = {k: v for k, v in {
        "threads": row["threads"], "delegate": row["delegate"], "runtime": "benchmark_model",
        "gpu_precision_loss_allowed": log.param("gpu_precision_loss_allowed",
                                                "Allow lower precision in gpu"),
    }.items() if v is not None}
    return [row]


def import_log_file(path: str | os.PathLike) -> dict[str, Any]:
    """``edgebench import-log FILE``: read, parse and wrap a captured log as a result document."""
    from edgebench import __version__
    from edgebench.results import envelope

    p = Path(path)
    if not p.is_file():
        raise BadInput(f"{p}: no such file; give the path of a captured benchmark_model output")
    data = p.read_bytes()
    if not data.strip():
        raise BadInput(f"{p} is empty; capture benchmark_model's output with 2>&1 into the file")
    if b"\x00" in data[:4096]:
        raise BadInput(f"{p} is a binary file, not benchmark_model text output; give the captured log")
    log = parse_log(data.decode("utf-8", errors="replace"))
    if not log.is_benchmark_model:
        raise BadInput(f"{p}: no benchmark_model output found (expected lines like 'count=50 ... avg=...' "
                       "or 'Inference timings in us: ...'); capture with 'benchmark_model ... > log.txt 2>&1'")
    rows = to_result_rows(log, source=str(p))
    fingerprint = {"source": "imported benchmark_model log", "log_file": str(p),
                   "importer": f"edgebench {__version__}",
                   "device": "unknown (not recorded in the log)"}
    fingerprint.update(rows[0]["fingerprint"])
    return envelope("import-log", rows, fingerprint, source=str(p))


# --------------------------------------------------------------------------- the binary


@dataclass(frozen=True)
class BinaryInfo:
    path: Path
    kind: str            # "elf" | "script"
    machine: str | None  # "aarch64", "arm", "x86_64", "x86", "riscv64" or None


_ELF_MACHINES = {0xB7: "aarch64", 0x28: "arm", 0x3E: "x86_64", 0x03: "x86", 0xF3: "riscv64"}
_ABI_MACHINES = {"arm64-v8a": "aarch64", "armeabi-v7a": "arm", "armeabi": "arm", "x86_64": "x86_64",
                 "x86": "x86", "riscv64": "riscv64", "aarch64": "aarch64"}


def resolve_binary(cli_value: str | None = None, config_value: str | None = None) -> BinaryInfo:
    """The host path of benchmark_model: --benchmark-binary, else $EDGEBENCH_BENCHMARK_MODEL, else config."""
    value = cli_value or os.environ.get(ENV_VAR) or config_value
    if not value:
        raise BadInput(f"no benchmark_model binary given; {_WHERE}")
    p = Path(value).expanduser()
    if not p.is_file():
        raise BadInput(f"benchmark_model binary {p} does not exist; {_WHERE}")
    head = p.read_bytes()[:20]
    if head[:4] == b"\x7fELF":
        little = head[5] == 1
        machine = int.from_bytes(head[18:20], "little" if little else "big")
        return BinaryInfo(p, "elf", _ELF_MACHINES.get(machine, f"elf-machine-0x{machine:x}"))
    if head[:2] == b"#!":
        return BinaryInfo(p, "script", None)
    raise BadInput(f"{p} is not an executable (no ELF header, no #! line); {_WHERE}")


def check_abi(info: BinaryInfo, device_abis: Sequence[str], serial: str = "device") -> None:
    """Refuse before pushing when the binary's ELF machine is not among the device's ABIs."""
    if info.kind != "elf" or info.machine is None:
        return
    machines = {_ABI_MACHINES.get(a.strip(), a.strip()) for a in device_abis if a.strip()}
    if machines and info.machine not in machines:
        raise BadInput(f"{info.path} is a {info.machine} binary but {serial} runs {', '.join(device_abis)}; "
                       f"use the matching build (android_aarch64_benchmark_model for arm64-v8a); {_WHERE}")


_NOT_FOUND = re.compile(r"(not found|No such file or directory|inaccessible or not found)", re.I)
_EXEC_FORMAT = re.compile(r"(Exec format error|not executable: (?:32|64)-bit ELF|cannot execute binary file|"
                          r"syntax error: .*unexpected|ELF: not found)", re.I)
_PERMISSION = re.compile(r"Permission denied", re.I)


def classify_failure(output: str, rc: int | None, *, binary: str = "benchmark_model",
                     where: str = "device") -> EdgebenchError:
    """The error for a failed invocation, from its output and exit code (never raises itself)."""
    tail = " ".join(output.strip().splitlines()[-3:])[-300:]
    if rc is None:
        return InfraError(f"{binary} on {where} returned no exit status (connection lost or killed); "
                          "rerun, and check the USB/network link")
    if _EXEC_FORMAT.search(output) or rc == 126 and not _PERMISSION.search(output):
        return InfraError(f"{binary} cannot run on {where}: wrong ABI/architecture (exec format error); "
                          f"push the build for the device's ABI (getprop ro.product.cpu.abi), e.g. "
                          f"android_aarch64_benchmark_model for arm64-v8a; output: {tail}")
    if _PERMISSION.search(output):
        return InfraError(f"{binary} on {where} is not executable (permission denied); chmod 755 it "
                          f"after pushing and keep it under /data/local/tmp; output: {tail}")
    if rc == 127 or (_NOT_FOUND.search(output) and not parse_log(output).is_benchmark_model):
        return InfraError(f"{binary} is missing on {where} (exit {rc}); push it first; {_WHERE}")
    log = parse_log(output)
    reason = log.errors[0] if log.errors else (tail or "no output")
    if rc in (-9, 137):
        reason = f"killed (exit {rc}: deadline or out of memory); {reason}"
    return InfraError(f"{binary} failed on {where} (exit {rc}): {reason}")


# --------------------------------------------------------------------------- argv


def _b(v: bool) -> str:
    return "true" if v else "false"


def _check_name(name: str, what: str) -> str:
    if not name or any(c in name for c in ",\n\r"):
        raise BadInput(f"{what} {name!r} cannot be passed to benchmark_model: names must be non-empty "
                       "and contain no ',' or newline (its flags are comma-separated)")
    return name


def build_argv(
    binary: str,
    model: str,
    *,
    threads: int | None = None,
    use_xnnpack: bool | None = None,
    use_gpu: bool = False,
    gpu_precision_loss_allowed: bool = False,
    use_nnapi: bool = False,
    num_runs: int | None = None,
    warmup_runs: int | None = None,
    min_secs: float | None = None,
    max_secs: float | None = None,
    warmup_min_secs: float | None = None,
    run_delay: float | None = None,
    input_layers: Sequence[str] = (),
    input_shapes: Sequence[Sequence[int]] = (),
    input_value_files: Sequence[str] = (),
    output_filepath: str | None = None,
    enable_op_profiling: bool = False,
    report_peak_memory_footprint: bool = False,
    extra: Sequence[str] = (),
) -> list[str]:
    """argv for one benchmark_model invocation (strings only; the adb layer quotes them).

    ``gpu_precision_loss_allowed`` is always passed when ``use_gpu``: the tool's own default
    is true (fp16 arithmetic), which edgebench never leaves implicit. ``use_xnnpack`` None
    leaves the tool's default (on in current builds) and passes nothing.
    """
    if not binary:
        raise BadInput(f"no benchmark_model binary given; {_WHERE}")
    if not model:
        raise BadInput("no model path given to benchmark_model")
    argv = [binary, f"--graph={model}"]

    def pos_int(name: str, v: int | None, minimum: int = 1) -> None:
        if v is None:
            return
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < minimum:
            raise BadInput(f"benchmark_model --{name} must be an integer >= {minimum}, got {v!r}")
        argv.append(f"--{name}={int(v)}")

    def secs(name: str, v: float | None) -> None:
        if v is None:
            return
        if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v) or v < 0:
            raise BadInput(f"benchmark_model --{name} must be a number of seconds >= 0, got {v!r}")
        argv.append(f"--{name}={float(v):g}")

    pos_int("num_threads", threads)
    pos_int("num_runs", num_runs)
    pos_int("warmup_runs", warmup_runs, minimum=0)
    secs("min_secs", min_secs)
    secs("max_secs", max_secs)
    secs("warmup_min_secs", warmup_min_secs)
    if run_delay is not None:
        argv.append(f"--run_delay={float(run_delay):g}")
    if use_xnnpack is not None:
        argv.append(f"--use_xnnpack={_b(use_xnnpack)}")
    if use_gpu and use_nnapi:
        raise BadInput("choose one accelerator delegate: GPU or NNAPI, not both")
    if use_gpu:
        argv.append("--use_gpu=true")
        argv.append(f"--gpu_precision_loss_allowed={_b(gpu_precision_loss_allowed)}")
    if use_nnapi:
        argv.append("--use_nnapi=true")

    layers = [_check_name(n, "input layer") for n in input_layers]
    if input_shapes and len(input_shapes) != len(layers):
        raise BadInput(f"{len(input_shapes)} input shapes for {len(layers)} input layers; give one shape per layer")
    if input_value_files and len(input_value_files) != len(layers):
        raise BadInput(f"{len(input_value_files)} value files for {len(layers)} input layers; give one file per layer")
    if layers:
        argv.append("--input_layer=" + ",".join(layers))
    if input_shapes:
        parts = []
        for n, shape in zip(layers, input_shapes):
            dims = [int(d) for d in shape]
            if any(d <= 0 for d in dims):
                raise BadInput(f"input {n!r} shape {tuple(shape)} has a non-positive dimension; give the concrete shape")
            parts.append(",".join(str(d) for d in dims))
        argv.append("--input_layer_shape=" + ":".join(parts))
    if input_value_files:
        pairs = []
        for n, f in zip(layers, input_value_files):
            if "," in f:
                raise BadInput(f"value file path {f!r} contains ',', which benchmark_model cannot parse; rename it")
            # benchmark_model splits "name:path" at ':' and reads '::' as a literal ':' in the name
            pairs.append(n.replace(":", "::") + ":" + f)
        argv.append("--input_layer_value_files=" + ",".join(pairs))
    if output_filepath:
        argv.append(f"--output_filepath={output_filepath}")
    if enable_op_profiling:
        argv.append("--enable_op_profiling=true")
    if report_peak_memory_footprint:
        argv.append("--report_peak_memory_footprint=true")
    argv.extend(str(a) for a in extra)
    return argv


def describe_argv(argv: Sequence[str]) -> dict[str, str]:
    """The ``--flag=value`` settings of an argv, for the fingerprint (records GPU precision)."""
    out: dict[str, str] = {}
    for a in argv[1:]:
        if a.startswith("--") and "=" in a:
            k, v = a[2:].split("=", 1)
            out[k] = v
    return out


def sample_argv(binary: str, model: str, *, warmup_runs: int = 1, **kwargs: Any) -> list[str]:
    """argv for one per-inference sample: exactly one timed run after ``warmup_runs`` warmups.

    ``min_secs=0``/``warmup_min_secs=0`` stop the tool from adding runs to fill its default
    1 s / 0.5 s minimum durations.
    """
    for k in ("num_runs", "min_secs", "warmup_min_secs", "enable_op_profiling"):
        kwargs.pop(k, None)
    return build_argv(binary, model, num_runs=1, warmup_runs=warmup_runs, min_secs=0.0,
                      warmup_min_secs=0.0, **kwargs)


def sample_method(n: int, warmup_runs: int = 1) -> str:
    """How per-inference samples from benchmark_model were obtained (stored with the result)."""
    return (f"benchmark_model --num_runs=1 --warmup_runs={warmup_runs} --min_secs=0 "
            f"--warmup_min_secs=0 repeated {n} times in one device-side sh loop; each sample is the "
            f"curr= invoke time of that process's single timed run (process start, model load and "
            f"delegate init are not in the sample; {warmup_runs} untimed warmup run(s) precede it in "
            "the same process); resolution 1 us")


_BEGIN = "EDGEBENCH_SAMPLE_BEGIN"
_END = "EDGEBENCH_SAMPLE_END"
_DONE = "EDGEBENCH_SAMPLE_DONE"


def build_sample_loop_script(argv: Sequence[str], n: int) -> str:
    """POSIX sh text that runs ``argv`` n times and brackets each run's output with markers.

    Every argument is quoted here with shlex.quote, so file names with spaces, quotes or ';'
    reach the binary intact. The loop stops at the first failing run (its exit code is
    the script's). Run it as ONE device-side shell command (e.g. ``sh -c SCRIPT``).
    """
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise BadInput(f"sample count must be an integer >= 1, got {n!r}")
    if not argv:
        raise BadInput("empty benchmark_model argv")
    if "--num_runs=1" not in argv:
        raise BadInput("the sample loop needs an argv with --num_runs=1 (build it with sample_argv)")
    cmd = " ".join(shlex.quote(str(a)) for a in argv)
    n = int(n)
    return (
        "i=0\n"
        f"while [ \"$i\" -lt {n} ]; do\n"
        f"  echo \"{_BEGIN} $i\"\n"
        f"  {cmd} 2>&1\n"
        "  rc=$?\n"
        f"  echo \"{_END} $i $rc\"\n"
        "  if [ \"$rc\" -ne 0 ]; then exit \"$rc\"; fi\n"
        "  i=$((i + 1))\n"
        "done\n"
        f"echo \"{_DONE} {n}\"\n"
    )


def parse_sample_loop(text: str, n: int | None = None, *, where: str = "device") -> np.ndarray:
    """Per-run latencies (int64 ns) from the output of ``build_sample_loop_script``.

    Each sample is the ``curr=`` of that invocation's timed run (``count=1``). Raises
    InfraError when a run failed (wrong ABI, missing binary, crash), when the output ends
    before the loop's final marker (a dropped connection looks like a short clean output),
    or when a run printed no single-run stats line.
    """
    samples: list[int] = []
    cur: list[str] | None = None
    idx = -1
    done = None
    for line in text.splitlines():
        s = line.strip()
        if s.startswith(_BEGIN):
            cur, idx = [], int(s.split()[1])
            continue
        if s.startswith(_END):
            parts = s.split()
            rc = int(parts[2]) if len(parts) > 2 else None
            body = "\n".join(cur or [])
            if rc != 0:
                raise classify_failure(body, rc, where=where)
            log = parse_log(body)
            st = log.inference
            if st is None or st.count != 1 or st.mean_us is None:
                raise InfraError(f"sample {idx} on {where}: benchmark_model printed no single-run "
                                 "'count=1 curr=...' line; the binary ignored --num_runs=1 or crashed; "
                                 f"output: {' '.join(body.splitlines()[-3:])[-200:]}")
            samples.append(int(round(st.mean_us * 1000)))
            cur = None
            continue
        if s.startswith(_DONE):
            done = int(s.split()[1])
            continue
        if cur is not None:
            cur.append(line)
        elif s and not samples and (_EXEC_FORMAT.search(s) or _NOT_FOUND.search(s)):
            raise classify_failure(s, 127, where=where)
    if cur is not None:
        raise InfraError(f"the sample loop on {where} ended inside sample {idx} (connection lost or the "
                         f"binary hung and was killed); {len(samples)} samples were complete; rerun")
    if done is None:
        raise InfraError(f"the sample loop on {where} did not finish ({len(samples)} samples, no "
                         f"{_DONE} marker): the connection dropped or the deadline killed it; rerun")
    expected = n if n is not None else done
    if len(samples) != expected or done != expected:
        raise InfraError(f"the sample loop on {where} returned {len(samples)} samples, expected {expected}; rerun")
    return np.asarray(samples, dtype=np.int64)


# --------------------------------------------------------------------------- inputs and outputs


@dataclass(frozen=True)
class InputValueFiles:
    """Raw input files written for one benchmark_model invocation."""

    names: tuple[str, ...]
    shapes: tuple[tuple[int, ...], ...]
    local_paths: tuple[Path, ...]
    remote_paths: tuple[str, ...]

    def argv_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for ``build_argv``."""
        return {"input_layers": list(self.names), "input_shapes": [list(s) for s in self.shapes],
                "input_value_files": list(self.remote_paths)}


def _dtype(d: Any) -> np.dtype:
    return np.dtype(d)


def _quant(detail: Mapping[str, Any]) -> tuple[float, int]:
    q = detail.get("quantization") or (0.0, 0)
    return float(q[0]), int(q[1])


def write_input_value_files(arrays: Mapping[str, np.ndarray], input_details: Sequence[Mapping[str, Any]],
                            out_dir: str | os.PathLike, *, remote_dir: str | None = None) -> InputValueFiles:
    """Write one sample per model input as the raw little-endian bytes benchmark_model reads.

    ``arrays`` maps input name -> one sample with the model's input shape (a dynamic
    dimension, -1 in ``shape_signature``, takes the array's size and is passed through
    ``--input_layer_shape``). Float data for an integer-quantized input is quantized with
    the tensor's scale/zero point; float64 data is rounded to the model's float32; integer
    changes must be lossless.
    """
    from edgebench.data import quantize

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    want = [str(d["name"]) for d in input_details]
    missing = [n for n in want if n not in arrays]
    if missing:
        raise BadInput(f"no data for model input {missing[0]!r}; the InputSet has {sorted(arrays)}")
    extra = sorted(set(arrays) - set(want))
    if extra:
        raise BadInput(f"InputSet key {extra[0]!r} is not an input of the model (inputs: {want})")
    names, shapes, local, remote = [], [], [], []
    for i, d in enumerate(input_details):
        name = _check_name(str(d["name"]), "model input")
        a = np.asarray(arrays[name])
        sig = [int(x) for x in (d.get("shape_signature") if d.get("shape_signature") is not None else d["shape"])]
        if len(sig) != a.ndim or any(s not in (-1, x) for s, x in zip(sig, a.shape)):
            raise BadInput(f"input {name!r}: sample shape {a.shape} does not fit the model's {tuple(sig)}")
        dt = _dtype(d["dtype"])
        if dt.kind in "OSU":
            raise BadInput(f"input {name!r} is a string tensor; benchmark_model value files hold raw numbers only")
        if a.dtype != dt:
            scale, zp = _quant(d)
            if dt.kind in "iu" and a.dtype.kind == "f" and scale > 0:
                a = quantize(a, scale, zp, dt)
            elif np.can_cast(a.dtype, dt, casting="safe") or a.dtype.kind == dt.kind == "f" or (
                    a.dtype.kind in "iu" and dt.kind in "iu"
                    and np.array_equal(a.astype(dt).astype(a.dtype), a)):
                a = a.astype(dt)
            else:
                raise BadInput(f"input {name!r}: data is {a.dtype} but the model takes {dt}; "
                               "convert the InputSet (or use the matching precision variant)")
        a = np.ascontiguousarray(a, dtype=dt.newbyteorder("<"))
        fname = f"input_{i}.bin"
        path = out / fname
        path.write_bytes(a.tobytes(order="C"))
        names.append(name)
        shapes.append(tuple(int(x) for x in a.shape))
        local.append(path)
        remote.append(f"{remote_dir.rstrip('/')}/{fname}" if remote_dir else str(path))
    return InputValueFiles(tuple(names), tuple(shapes), tuple(local), tuple(remote))


def split_output_file(data: bytes, output_details: Sequence[Mapping[str, Any]], *,
                      dequantize: bool = False) -> dict[str, np.ndarray]:
    """Split ``--output_filepath`` bytes (all outputs' raw bytes, in output order) into arrays.

    ``output_details`` are the interpreter's output details in order (name, shape, dtype,
    quantization). A size mismatch means a truncated transfer or a different model: InfraError.
    """
    sizes = []
    for d in output_details:
        dt = _dtype(d["dtype"])
        if dt.kind in "OSU":
            raise BadInput(f"output {d['name']!r} is a string tensor; it cannot be read from raw bytes")
        shape = tuple(int(x) for x in d["shape"])
        sizes.append((str(d["name"]), dt, shape, int(np.prod(shape, dtype=np.int64)) * dt.itemsize))
    expected = sum(s[3] for s in sizes)
    if len(data) != expected:
        raise InfraError(f"benchmark_model output file has {len(data)} bytes, expected {expected} for outputs "
                         f"{[s[0] for s in sizes]}; the pull was truncated or the model differs; rerun")
    out: dict[str, np.ndarray] = {}
    off = 0
    for (name, dt, shape, nbytes), d in zip(sizes, output_details):
        arr = np.frombuffer(data, dtype=dt.newbyteorder("<"), count=nbytes // dt.itemsize, offset=off)
        arr = arr.reshape(shape).astype(dt)
        off += nbytes
        scale, zp = _quant(d)
        if dequantize and dt.kind in "iu" and scale > 0:
            arr = ((arr.astype(np.float32) - np.float32(zp)) * np.float32(scale)).astype(np.float32)
        out[name] = arr
    return out

