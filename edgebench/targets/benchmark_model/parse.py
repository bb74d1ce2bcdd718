"""Reading captured benchmark_model text into a ``BenchmarkModelLog``: ``parse_log`` (any version,
any prefix; never raises) and ``parse_stats`` for one ``count=...`` line."""

from __future__ import annotations

import math
import re
import string
from typing import Any

from edgebench.targets.delegation import KERNEL_TO_DELEGATE
from edgebench.targets.benchmark_model.log import BenchmarkModelLog, OpProfileRow, RunStats, _norm_key

# --------------------------------------------------------------------------- line patterns

# Prefixes a captured log may carry before the tool's own text.
_LOGCAT_THREADTIME = re.compile(
    r"^\d\d-\d\d\s+\d\d:\d\d:\d\d\.\d+\s+\d+\s+\d+\s+([VDIWEF])\s+[^:]*?:\s?")
_LOGCAT_BRIEF = re.compile(r"^([VDIWEF])/[^:(]+\(\s*\d+\):\s?")   # no lazy tag + \s*: linear on long lines
_ELLIPSIS_TAG = re.compile(r"^\.\.\.\s*tflite\s*:\s?")
_GLOG = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+: ([IWEF]) \S+\] ")
_LEVEL = re.compile(r"^(INFO|WARN|WARNING|ERROR|VERBOSE|DEBUG|FATAL):\s?")
_SOURCE_TAG = re.compile(r"^\[[\w./-]+\.(?:h|cc|cpp|c):\d+\]\s?")   # LiteRT's LITERT_LOG: "[file.h:92] "
_LOGCAT_LEVEL = {"V": "VERBOSE", "D": "DEBUG", "I": "INFO", "W": "WARN", "E": "ERROR", "F": "FATAL"}

_NUM = r"([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|nan|-?inf)"
_STATS = re.compile(r"^count=(\d+)\b(.*)$")
_SUMMARY_NEW = re.compile(r"^Inference timings in us:\s*(.*)$")
_SUMMARY_OLD = re.compile(r"^Average inference timings in us:\s*(.*)$")
_MEM_DELTA = re.compile(r"^Memory footprint delta from the start of the tool \(MB\):\s*init=" + _NUM
                        + r"\s+overall=" + _NUM)
_MEM_PEAK_OLD = re.compile(r"^Peak memory footprint \(MB\):\s*init=" + _NUM + r"\s+overall=" + _NUM)
_MEM_PERIODIC = re.compile(r"^Overall peak memory footprint \(MB\) via periodic monitoring:\s*" + _NUM)
_INIT_SESSION = re.compile(r"^Initialized session in\s*" + _NUM + r"\s*ms\.?$")
_MODEL_SIZE = re.compile(r"^The input model file size \(MB\):\s*" + _NUM)
_LOADED = re.compile(r"^Loaded model\s+(.+)$")
_RUNNING = re.compile(r"^Running benchmark for (?:at least |max )?(\d+) iterations")
_REPLACING = re.compile(
    r"Replacing (\d+)(?: out of (\d+))? node\(s\) with delegate \(([^)]+)\)(?: node)?(?:, yielding (\d+) partitions?)?")
_CREATED = re.compile(r"Created TensorFlow Lite (?:(\w+) )?delegate for (\w+)")
_EXPLICIT = re.compile(r"Explicitly applied (\w+) delegate")
_NOT_EXECUTED = re.compile(r"Though (\w+) delegate is explicitly applied, the model graph will not be executed")
_UNSUPPORTED = re.compile(r"^(\w+) acceleration is unsupported on this platform")
_FAILED_APPLY = re.compile(r"Failed to apply (\w+) delegate")
_DELEGATE_CREATED = re.compile(r"^(\w+) delegate created\.?$")
# LiteRT's CompiledModel tool (benchmark_litert_model) ends with its own results block, in ms:
# "Model initialization: 23744.73 ms", "Inference (avg): 7430.20 ms (10 runs)", "Inference (std): 9.92";
# ai-edge-litert 2.3's litert-benchmark adds "Inference (median|p5|p95)".
_LITERT_RESULT = re.compile(r"^(Model initialization|Warmup \(first\)|Warmup \(avg\)|Inference \((?:avg|min|max|std|median|p5|p95)\))"
                            r":\s*" + _NUM + r"(?:\s*ms)?(?:\s*\((\d+) runs?\))?\s*$")
_LITERT_MEM = re.compile(r"^(Init footprint|Overall footprint|Peak memory):\s*" + _NUM + r"\s*MB\s*$")
_LITERT_TEXT = ("BENCHMARK RESULTS", "Memory Usage:", "Throughput:", "No throughput data available",
                "No inference runs were performed", "Peak memory usage not available", "Signature name:",
                "Saving benchmark result to", "Saved benchmark result to")
_SECTION_INIT = "Profiling Info for Benchmark Initialization:"
_SECTION_REGULAR = "Operator-wise Profiling Info for Regular Benchmark Runs:"
_TABLE_TITLE = re.compile(r"^=+\s*(.+?)\s*=+$")
# A line longer than this is no table title, and the title pattern backtracks quadratically on one.
_TITLE_MAX = 512
# Warning and error lines kept per log (the rest are counted).
_MESSAGES_MAX = 100
# Lines are parsed up to this many characters (the longest the tool prints is a path, < 4096).
_LINE_MAX = 16384
_TIMINGS = re.compile(r"^Timings \(microseconds\):\s*(count=.*)$")
_PROFILE_MISC = re.compile(
    r"^(Memory \(bytes\): count=\d+.*|\d+ nodes observed|Number of nodes executed: \d+)$")


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
    m = _SOURCE_TAG.match(line)
    if m:
        line = line[m.end():]
    return level, line.strip()


def parse_stats(text: str) -> RunStats | None:
    """``count=N first=.. curr=.. ...`` -> RunStats (None when the text is not a stats line)."""
    m = _STATS.match(text.strip())
    if not m:
        return None
    kv = _kv_pairs(m.group(2))
    names = {"first": "first_us", "curr": "curr_us", "min": "min_us", "max": "max_us",
             "avg": "avg_us", "std": "std_us", "p5": "p5_us", "median": "median_us", "p95": "p95_us"}
    vals = {names[k]: _f(v) for k, v in kv.items() if k in names}
    return RunStats(count=int(m.group(1)), **vals)


def _kv_pairs(text: str) -> dict[str, str]:
    """``first=1 curr=2 ...`` -> {"first": "1", ...}: what ``(\\w+)=(\\S+)`` finds in each
    whitespace-separated token, in linear time (the regex backtracks quadratically on a long token)."""
    out: dict[str, str] = {}
    for tok in text.split():
        head, sep, value = tok.partition("=")
        j = len(head)
        while j and (head[j - 1].isalnum() or head[j - 1] == "_"):
            j -= 1
        if sep and value and j < len(head):
            out[head[j:]] = value
    return out


def _param(msg: str) -> tuple[str, str] | None:
    """An echoed parameter ``Name: [value]`` -> (name, value), in linear time. The name starts with a
    letter or '#', holds no '[', ']' or '=', and the value runs to the last ']' of the line."""
    if not msg or not (msg[0] == "#" or msg[0] in string.ascii_letters):
        return None
    bracket = msg.find("[")
    if bracket < 0:
        return None
    head = msg[:bracket].rstrip()
    if not head.endswith(":"):
        return None
    name = head[:-1]
    rest = msg[bracket + 1:].rstrip()
    if "]" in name or "=" in name or not rest.endswith("]"):
        return None
    return name.strip(), rest[:-1].strip()


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
    reader = _LogReader()
    for raw in text.splitlines():
        reader.line(raw)
    return reader.result()


_DELEGATE_NAMES = {"xnnpack": "XNNPACK", "gpu": "GPU", "nnapi": "NNAPI", "hexagon": "Hexagon", "coreml": "CoreML"}
# the one-value lines: regex, the key in BenchmarkModelLog, and the memory wording they imply
_ONE_VALUE = ((_MEM_PERIODIC, "peak_mem_mb"), (_INIT_SESSION, "init_session_ms"), (_MODEL_SIZE, "model_size_mb"))
_MEMORY = ((_MEM_DELTA, "delta-from-tool-start"), (_MEM_PEAK_OLD, "peak-footprint (TFLite <= 2.4 wording)"))


class _LogReader:
    """What one pass over a log has read so far. ``line`` hands each line to the readers of its
    families in a fixed order (op-profiling tables, run statistics and summaries, delegates, echoed
    parameters, then levels); each reader returns None when the line is not its own, else whether the
    line counts as recognized."""

    def __init__(self) -> None:
        self.params: dict[str, str] = {}
        self.stats: list[tuple[int | None, RunStats]] = []   # (phase index from "Running benchmark" markers, stats)
        self.phase = -1
        self.markers = 0
        self.summary: dict[str, float | None] = {}
        self.summary_format: str | None = None
        self.summary_lines = 0
        self.litert: dict[str, Any] = {}    # benchmark_litert_model's results block (ms), where nothing finer exists
        self.out: dict[str, Any] = {}
        self.delegates: list[str] = []
        self.fallback: list[str] = []
        self.ops: list[OpProfileRow] = []
        self.op_timings: dict[str, RunStats] = {}
        self.errors: list[str] = []
        self.warnings: list[str] = []
        self.unparsed: list[str] = []
        self.failed = False
        self.recognized = 0
        self.section: str | None = None
        self.table: str | None = None
        self.header: list[str] | None = None

    def line(self, raw: str) -> None:
        level, msg = _strip_prefix(raw[:_LINE_MAX])
        if not msg:
            self.table = self.header = None   # a blank line ends an op-profiling table
            return
        for read in (self._profile, self._run_stats, self._litert, self._memory, self._delegate, self._param):
            counted = read(msg)
            if counted is not None:
                self.recognized += counted
                return
        if level in ("ERROR", "FATAL"):
            self.errors.append(msg)
        elif level == "WARN":
            self.warnings.append(msg)
        elif any(msg.startswith(k) for k in _KNOWN_TEXT):
            self.recognized += 1
        else:
            self.unparsed.append(raw.rstrip("\n"))

    def add_delegate(self, name: str) -> None:
        name = _DELEGATE_NAMES.get(name.lower(), name)
        if name not in self.delegates:
            self.delegates.append(name)

    def _profile(self, msg: str) -> bool | None:
        """The op-profiling tables: section titles, table titles, headers, rows, timings."""
        if msg == _SECTION_INIT or msg == _SECTION_REGULAR:
            self.section = "init" if msg == _SECTION_INIT else "regular"
            self.table = self.header = None
            return True
        m = _TABLE_TITLE.match(msg) if len(msg) <= _TITLE_MAX else None
        if m:
            self.section = self.section or "regular"   # very old logs print the tables without a section title
            self.table, self.header = m.group(1), None
            return True
        if self.table is not None and msg.startswith("["):
            self.header = [h.strip().lower() for h in re.findall(r"\[([^\]]+)\]", msg)]
            return False
        if self.table is not None and self.header is not None:
            row = _profile_row(self.section or "regular", self.table, self.header, _split_row(msg))
            if row is not None:
                self.ops.append(row)
                return False
            self.table = self.header = None
        m = _TIMINGS.match(msg)
        if m:
            st = parse_stats(m.group(1))
            if st is not None:
                self.op_timings[self.section or "regular"] = st
            return True
        return True if _PROFILE_MISC.match(msg) else None

    def _run_stats(self, msg: str) -> bool | None:
        """count=... statistics, "Running benchmark" phase markers and the summary line."""
        st = parse_stats(msg)
        if st is not None:
            self.stats.append((self.phase if self.markers else None, st))
            return True
        if _RUNNING.match(msg):
            self.markers += 1
            self.phase += 1
            return True
        m = _SUMMARY_NEW.match(msg) or _SUMMARY_OLD.match(msg)
        if m:
            self.summary = _summary_pairs(m.group(1))
            self.summary_format = "inference-timings" if msg.startswith("Inference") else "average-inference-timings"
            self.summary_lines += 1
            return True
        return None

    def _litert(self, msg: str) -> bool | None:
        """benchmark_litert_model's results block."""
        m = _LITERT_RESULT.match(msg)
        if m:
            self.litert[m.group(1).lower()] = _f(m.group(2))
            if m.group(3):
                self.litert[m.group(1).lower() + " runs"] = int(m.group(3))
            return True
        m = _LITERT_MEM.match(msg)
        if m:
            self.litert[m.group(1).lower()] = _f(m.group(2))
            return True
        return True if any(t in msg for t in _LITERT_TEXT) or (set(msg) == {"="}) else None

    def _memory(self, msg: str) -> bool | None:
        """Memory footprints, session init, model size, the model path."""
        for rx, kind in _MEMORY:
            m = rx.match(msg)
            if m:
                self.out.update(mem_init_mb=_f(m.group(1)), mem_overall_mb=_f(m.group(2)), mem_kind=kind)
                return True
        for rx, key in _ONE_VALUE:
            m = rx.match(msg)
            if m:
                self.out[key] = _f(m.group(1))
                return True
        m = _LOADED.match(msg)
        if m:
            self.out["model_path"] = m.group(1).strip()
            return True
        return None

    def _delegate(self, msg: str) -> bool | None:
        """Delegate lines; one line may say several things (replaced nodes and the delegate's name)."""
        hit = False
        m = _REPLACING.search(msg)
        if m:
            replaced = int(m.group(1))
            total = int(m.group(2)) if m.group(2) else None
            self.out["delegated_nodes"] = (replaced, total) if total is not None else (replaced, replaced)
            self.out["delegate_partitions"] = int(m.group(4)) if m.group(4) else None
            self.add_delegate(KERNEL_TO_DELEGATE.get(m.group(3).lower(), m.group(3)))
            hit = True
        for rx in (_CREATED, _EXPLICIT, _DELEGATE_CREATED):
            m = rx.search(msg) if rx is not _DELEGATE_CREATED else rx.match(msg)
            if m:
                self.add_delegate(m.group(1) or (m.group(2) if rx is _CREATED else None))
                hit = True
        for rx, into in ((_NOT_EXECUTED, self.warnings), (_UNSUPPORTED, self.warnings), (_FAILED_APPLY, self.errors)):
            m = rx.search(msg) if rx is not _UNSUPPORTED else rx.match(msg)
            if m:
                self.fallback.append(m.group(1).upper())
                into.append(msg)
                self.failed = self.failed or rx is _FAILED_APPLY
                hit = True
        if hit:
            return True
        if msg.startswith("Benchmarking failed"):
            self.failed = True
            self.errors.append(msg)
            return True
        return None

    def _param(self, msg: str) -> bool | None:
        kv = _param(msg)
        if kv:
            self.params[kv[0]] = kv[1]
            return True
        return None

    def result(self) -> BenchmarkModelLog:
        for row in self.ops:   # delegate kernels show up as node types in the profile
            d = KERNEL_TO_DELEGATE.get(row.node_type.lower())
            if d:
                self.add_delegate(d)
        summary, summary_format, out = self.summary, self.summary_format, self.out
        warmup, inference = _assign_phases(self.stats, self.markers, summary)
        summary_lines = self.summary_lines
        if self.litert:
            inference, summary, summary_format = _litert_block(self.litert, inference, summary, summary_format, out)
            summary_lines = max(summary_lines, 1)
        warnings = list(self.warnings)
        if summary_lines > 1:
            warnings.append(f"the log holds {summary_lines} benchmark runs; the summary numbers are the last run's")

        first_inf = summary.get("first inference")
        warm_avg = summary.get("warmup (avg)", summary.get("warmup"))
        inf_avg = summary.get("inference (avg)", summary.get("no stats", summary.get("inference")))
        if first_inf is None and warmup is not None:
            first_inf = warmup.first_run_us
        failed = self.failed or bool(self.errors and inference is None and inf_avg is None)
        return BenchmarkModelLog(
            params=self.params, warmup=warmup, inference=inference,
            run_stats=tuple(s for _, s in self.stats),
            init_us=summary.get("init"), first_inference_us=first_inf,
            warmup_avg_us=warm_avg, inference_avg_us=inf_avg, summary_format=summary_format,
            delegates=tuple(self.delegates), delegate_fallback=tuple(dict.fromkeys(self.fallback)),
            op_profile=tuple(self.ops), op_profile_timings=self.op_timings,
            errors=_capped(self.errors, "error"), warnings=_capped(warnings, "warning"), failed=failed,
            unparsed=tuple(self.unparsed), recognized_lines=self.recognized, summary_lines=summary_lines,
            **out,
        )


def _capped(lines: list[str], what: str) -> tuple[str, ...]:
    """The first ``_MESSAGES_MAX`` lines and one that counts the rest: a log of 300,000 warnings
    made a 19 MB result and a table that took minutes to draw."""
    if len(lines) <= _MESSAGES_MAX:
        return tuple(lines)
    rest = len(lines) - _MESSAGES_MAX
    return (*lines[:_MESSAGES_MAX], f"... and {rest:,} more {what} lines (not kept; the log has them all)")


def _litert_block(b: dict[str, Any], inference: RunStats | None, summary: dict[str, float | None],
                  summary_format: str | None, out: dict[str, Any]):
    """Fold benchmark_litert_model's results block (ms, two decimals) into the log: it fills only
    what no finer line gave (a stats line in us, the classic summary, the memory lines)."""
    us = {k: (v * 1000.0 if v is not None else None) for k, v in b.items() if not k.endswith(" runs")}
    if inference is None and b.get("inference (avg) runs"):
        inference = RunStats(count=int(b["inference (avg) runs"]), avg_us=us.get("inference (avg)"),
                             min_us=us.get("inference (min)"), max_us=us.get("inference (max)"),
                             std_us=us.get("inference (std)"), median_us=us.get("inference (median)"),
                             p5_us=us.get("inference (p5)"), p95_us=us.get("inference (p95)"))
    filled = dict(summary)
    for key, src in (("init", "model initialization"), ("first inference", "warmup (first)"),
                     ("warmup (avg)", "warmup (avg)"), ("inference (avg)", "inference (avg)")):
        if filled.get(key) is None and us.get(src) is not None:
            filled[key] = us[src]
    if "mem_overall_mb" not in out and b.get("overall footprint") is not None:
        out.update(mem_init_mb=b.get("init footprint"), mem_overall_mb=b["overall footprint"],
                   mem_kind="footprint (benchmark_litert_model results block)")
    if "peak_mem_mb" not in out and b.get("peak memory") is not None:
        out["peak_mem_mb"] = b["peak memory"]
    return inference, filled, summary_format or "litert-benchmark-results"


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
