"""The one parser of LiteRT-LM's benchmark output: ``parse_lm_log(text) -> LmLog``.

Two formats, whatever else the log holds (absl ``I0000 ...]`` prefixes, the model's reply, logcat
lines):

* **BenchmarkInfo** -- what LiteRT-LM's binaries (``litert_lm_main``, ``litert_lm_advanced_main`` with
  ``--benchmark``) print after a generation (runtime/engine/io_types.cc ``operator<<``): ``Init Phases
  (N):`` with ``- <phase>: <ms> ms`` lines (and ``Total init time`` / ``- Init Total`` in older
  releases), ``Time to first token: <s> s`` (absent before 2025-10: then derived the engine's way, the
  first prefill turn plus one mean decode step), ``Prefill Turn i: Processed N tokens in <absl
  duration> duration.`` with ``Prefill Speed: X tokens/sec.``, the same for decode; ``Prefill Turns
  (Total N turns)`` and the older ``(Total: N)``. With ``--report_peak_memory_footprint`` a ``Peak
  system ram usage: X MB`` line (MiB). Several blocks (``--num_iterations``): the last one counts, the
  count is kept.
* **litert-lm benchmark** -- the pip CLI's summary: ``Number of tokens in prefill/decode``, ``Max
  number of tokens``, then ``Prefill speed: X tokens/s``, ``Decode speed``, ``Init time: X s``, ``Time
  to first token: X s``: means over ``--runs``, with no token counts of the engine's (a speed of 0.00
  is a failed generation -- the CLI still exits 0).

Either way the engine's own error lines (``Failed to generate content: INVALID_ARGUMENT: ...``) and its
"static model supports (N)" warning are collected, and ``generation()`` gives the judge
(``targets.litert_lm.judge``) the same record a host worker gives it. Numbers the log does not have stay
None: nothing is derived from what is absent except the documented TTFT above.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from edgebench.targets.litert_lm.judge import Generation

_NUM = r"([0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?)"
_DURATION_PART = re.compile(r"([0-9]+(?:\.[0-9]+)?)(ms|us|µs|ns|h|m|s)")
_TURN = re.compile(r"(Prefill|Decode) Turn (\d+): Processed (\d+) tokens in (\S+) duration")
_SPEED = re.compile(r"(Prefill|Decode) Speed: " + _NUM + r" tokens/sec")
_TURNS_HEADER = re.compile(r"(Prefill|Decode) Turns \(Total:? (\d+)(?: turns)?\)")
_PHASE = re.compile(r"^\s*- (.+?): " + _NUM + r" ms\s*$")
_TOTAL_INIT = re.compile(r"Total init time: " + _NUM + r" ms")
_TTFT = re.compile(r"Time to first token:\s+" + _NUM + r" s")
_PEAK = re.compile(r"Peak system ram usage: " + _NUM + r" ?MB", re.I)
_ENGINE_ERROR = re.compile(r"Failed to (generate content|create engine|create session)[^:\n]*: ([A-Z_]+): ([^\n]*)")
_MODEL_LIMIT = re.compile(r"larger than what the static model supports \((\d+)\)")
# the pip CLI (litert_lm_cli/commands/benchmark.py)
_CLI = {
    "prefill_asked": re.compile(r"Number of tokens in prefill:\s*(\d+)"),
    "decode_asked": re.compile(r"Number of tokens in decode\s*:\s*(\d+)"),
    "max_num_tokens": re.compile(r"Max number of tokens\s*:\s*(\d+)"),
    "backend": re.compile(r"^Backend\s*:\s*(\S+)", re.M),
    "runs": re.compile(r"Running iteration \d+ of (\d+)"),
    "prefill_tok_s": re.compile(r"Prefill speed:\s*" + _NUM + r" tokens/s"),
    "decode_tok_s": re.compile(r"Decode speed:\s*" + _NUM + r" tokens/s"),
    "init_s": re.compile(r"Init time:\s*" + _NUM + r" s"),
}
MIB = 1 << 20


def absl_duration_ms(text: str) -> float | None:
    """An absl::Duration as printed (``92.41119ms``, ``3.86435584s``, ``1m2.5s``, ``850us``, ``0``) in ms."""
    t = text.strip().rstrip(".")
    if t == "0":
        return 0.0
    scale = {"h": 3.6e6, "m": 6e4, "s": 1e3, "ms": 1.0, "us": 1e-3, "µs": 1e-3, "ns": 1e-6}
    parts = _DURATION_PART.findall(t)
    if not parts or "".join(n + u for n, u in parts) != t:
        return None
    return sum(float(n) * scale[u] for n, u in parts)


@dataclass(frozen=True)
class LmLog:
    """What one LiteRT-LM benchmark log says (None: the log does not say)."""

    format: str | None                        # "benchmark_info" | "litert-lm-cli" | None (neither found)
    init_ms: float | None = None
    init_phases: dict[str, float] = field(default_factory=dict)
    ttft_ms: float | None = None
    ttft_derived: bool = False                # computed from the turns (old BenchmarkInfo without the line)
    prefill_turns: tuple[tuple[int, float | None], ...] = ()   # (tokens, ms)
    decode_turns: tuple[tuple[int, float | None], ...] = ()
    prefill_tok_s: float | None = None
    decode_tok_s: float | None = None
    prefill_tokens: int | None = None
    decode_tokens: int | None = None
    peak_rss_bytes: int | None = None
    blocks: int = 0                           # BenchmarkInfo blocks seen (the last is used)
    asked: dict[str, Any] = field(default_factory=dict)   # the CLI's header: prefill/decode/max_num_tokens/backend/runs
    engine_errors: tuple[dict[str, str], ...] = ()
    engine_context_limit: int | None = None

    def generation(self) -> Generation:
        return Generation(init_ms=self.init_ms, ttft_ms=self.ttft_ms, prefill_tokens=self.prefill_tokens,
                          prefill_tok_s=self.prefill_tok_s, decode_tokens=self.decode_tokens,
                          decode_tok_s=self.decode_tok_s, engine_errors=self.engine_errors,
                          engine_context_limit=self.engine_context_limit,
                          facts={"log_format": self.format, "ttft_derived": self.ttft_derived or None})

    def to_dict(self) -> dict[str, Any]:
        return {"format": self.format, "init_ms": self.init_ms, "init_phases": dict(self.init_phases),
                "ttft_ms": self.ttft_ms, "ttft_derived": self.ttft_derived,
                "prefill_turns": [list(t) for t in self.prefill_turns], "decode_turns": [list(t) for t in self.decode_turns],
                "prefill_tok_s": self.prefill_tok_s, "decode_tok_s": self.decode_tok_s,
                "prefill_tokens": self.prefill_tokens, "decode_tokens": self.decode_tokens,
                "peak_rss_bytes": self.peak_rss_bytes, "blocks": self.blocks, "asked": dict(self.asked),
                "engine_errors": [dict(e) for e in self.engine_errors], "engine_context_limit": self.engine_context_limit}


def _errors(text: str) -> tuple[dict[str, str], ...]:
    out: list[dict[str, str]] = []
    for what, code, msg in _ENGINE_ERROR.findall(text):
        item = {"what": what, "code": code, "message": msg.strip()}
        if item not in out:
            out.append(item)
    return tuple(out)


def _last_block(text: str) -> tuple[str | None, int]:
    """The text of the last ``BenchmarkInfo:`` block (to the end of the log) and the block count."""
    starts = [m.end() for m in re.finditer(r"BenchmarkInfo:", text)]
    return (text[starts[-1]:] if starts else None), len(starts)


def _benchmark_info(block: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    phases: dict[str, float] = {}
    in_phases = False
    for line in block.splitlines():
        if "Init Phases" in line:
            in_phases = True
            continue
        if in_phases:
            m = _PHASE.match(line)
            if m and not m.group(1).startswith("Init Total"):
                phases[m.group(1)] = float(m.group(2))
                continue
            if m:
                out["init_ms"] = float(m.group(2))
                continue
            if line.strip().startswith("---"):
                in_phases = False
    m = _TOTAL_INIT.search(block)
    if m:
        out["init_ms"] = float(m.group(1))
    elif "init_ms" not in out and phases:
        out["init_ms"] = sum(phases.values())       # the current format prints the phases only
    out["init_phases"] = phases
    turns: dict[str, list[tuple[int, float | None]]] = {"Prefill": [], "Decode": []}
    for kind, _i, n, dur in _TURN.findall(block):
        turns[kind].append((int(n), absl_duration_ms(dur)))
    speeds: dict[str, list[float]] = {"Prefill": [], "Decode": []}
    for kind, v in _SPEED.findall(block):
        speeds[kind].append(float(v))
    headers = {kind: int(n) for kind, n in _TURNS_HEADER.findall(block)}
    for kind, key in (("Prefill", "prefill"), ("Decode", "decode")):
        if turns[kind]:
            out[f"{key}_tokens"] = turns[kind][-1][0]
        elif headers.get(kind) == 0:
            out[f"{key}_tokens"] = 0
        if speeds[kind]:
            out[f"{key}_tok_s"] = speeds[kind][-1]
        elif headers.get(kind) == 0:
            out[f"{key}_tok_s"] = 0.0
    out["prefill_turns"], out["decode_turns"] = tuple(turns["Prefill"]), tuple(turns["Decode"])
    derived = None
    if turns["Prefill"] and turns["Decode"]:
        (_pn, pms), (dn, dms) = turns["Prefill"][0], turns["Decode"][0]
        if pms is not None and dms is not None and dn:
            derived = pms + dms / dn        # GetTimeToFirstToken: first prefill turn + one mean decode step
    m = _TTFT.search(block)
    printed = float(m.group(1)) * 1e3 if m else None
    # the block prints seconds with two decimals (10 ms steps): the turns give the same figure unrounded
    if derived is not None and (printed is None or abs(derived - printed) <= 5.0 + 1e-6):
        out["ttft_ms"], out["ttft_derived"] = derived, True
    elif printed is not None:
        out["ttft_ms"] = printed
    return out


def _cli_summary(text: str) -> dict[str, Any]:
    got = {k: rx.findall(text) for k, rx in _CLI.items()}
    out: dict[str, Any] = {"asked": {}}
    for k in ("prefill_asked", "decode_asked", "max_num_tokens", "runs"):
        if got[k]:
            out["asked"][k.replace("_asked", "")] = int(got[k][-1])
    if got["backend"]:
        out["asked"]["backend"] = got["backend"][-1]
    for k in ("prefill_tok_s", "decode_tok_s"):
        if got[k]:
            out[k] = float(got[k][-1])
    if got["init_s"]:
        out["init_ms"] = float(got["init_s"][-1]) * 1e3
    ttft = re.findall(r"Time to first token:\s*" + _NUM + r" s", text)
    if ttft:
        out["ttft_ms"] = float(ttft[-1]) * 1e3
    # the CLI prints the counts it asked for, not the engine's: a zero speed is a generation that made none
    for key in ("prefill", "decode"):
        speed = out.get(f"{key}_tok_s")
        if speed is not None:
            out[f"{key}_tokens"] = out["asked"].get(key) if speed > 0 else 0
    return out


def parse_lm_log(text: str) -> LmLog:
    """Parse a LiteRT-LM benchmark log of either format (module docstring)."""
    block, n_blocks = _last_block(text)
    peak = _PEAK.findall(text)
    limits = _MODEL_LIMIT.findall(text)
    common = dict(engine_errors=_errors(text), engine_context_limit=int(limits[0]) if limits else None,
                  peak_rss_bytes=int(float(peak[-1]) * MIB) if peak else None)
    if block is not None:
        return LmLog(format="benchmark_info", blocks=n_blocks, **_benchmark_info(block), **common)
    if "----- Results -----" in text or "Benchmarking model:" in text:
        return LmLog(format="litert-lm-cli", **_cli_summary(text), **common)
    return LmLog(format=None, **common)
