"""Per-inference samples from benchmark_model, the only source of an honest P99: one device-side
``sh`` loop (``build_sample_loop_script``) invokes the binary once per sample with
``--num_runs=1`` after the job's own warm-up (``sample_argv``); ``parse_sample_loop`` reads each
invocation's single timed run.

What one sample is (``sample_method``): the first timed ``invoke()`` of a fresh process, after
that process loaded the model and ran the job's warm-up (``--warmup_runs`` and
``--warmup_min_secs`` are the job's ``--warmup-runs``/``--warmup-time``, passed to every
invocation). It is a different measurement from the edgebench runner's steady-state samples (one
process, thousands of runs): a new process starts with cold caches, fresh page mappings and, on
phones, CPU frequencies that have not ramped up, so its p50/p90 sit above the steady state.
Rows say so (``sample_class`` "per-process") and ``results compare`` never judges one class
against the other.

With a ``RunControl`` the loop obeys the same stop rule as every other target, on the device's
own clock (``date +%s``, 1 s resolution): ``runs`` invocations, else at least ``min_runs`` and
``min_time_s``; never starting a new invocation after ``max_time_s``. The loop's last line names
the count and the reason (``stop_reason``)."""

from __future__ import annotations

import math
import shlex
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from edgebench.core import progress
from edgebench.core.errors import BadInput, InfraError
from edgebench.targets.benchmark_model.argv import build_argv
from edgebench.targets.benchmark_model.binary import _EXEC_FORMAT, _NOT_FOUND, classify_failure
from edgebench.targets.benchmark_model.parse import parse_log


def sample_argv(binary: str, model: str, *, warmup_runs: int = 1, warmup_min_secs: float = 0.0,
                **kwargs: Any) -> list[str]:
    """argv for one per-inference sample: exactly one timed run after the warm-up (at least
    ``warmup_runs`` runs and ``warmup_min_secs`` seconds, the job's --warmup-runs/--warmup-time).

    ``min_secs=0`` stops the tool from adding timed runs to fill its default 1 s minimum; the
    warm-up minimum is passed explicitly (the tool's own default is 0.5 s).
    """
    for k in ("num_runs", "min_secs", "enable_op_profiling"):
        kwargs.pop(k, None)
    return build_argv(binary, model, num_runs=1, warmup_runs=warmup_runs, min_secs=0.0,
                      warmup_min_secs=float(warmup_min_secs), **kwargs)


def sample_method(n: int, warmup_runs: int = 1, warmup_min_secs: float = 0.0) -> str:
    """How per-inference samples from benchmark_model were obtained (stored with the result):
    what one sample includes and what it does not."""
    return (f"benchmark_model --num_runs=1 --warmup_runs={warmup_runs} --min_secs=0 "
            f"--warmup_min_secs={warmup_min_secs:g} repeated {n} times in one device-side sh loop "
            f"(per-process samples); each sample is the curr= invoke time of that process's single "
            f"timed run, after at least {warmup_runs} untimed warm-up run(s) and {warmup_min_secs:g} s of "
            "warm-up in the same process; process start, model load and delegate init are not in the "
            "sample, but a fresh process's cold caches and page mappings are: these samples are not "
            "steady-state samples and compare only with other per-process samples; resolution 1 us")


_BEGIN = "EDGEBENCH_SAMPLE_BEGIN"
_END = "EDGEBENCH_SAMPLE_END"
_DONE = "EDGEBENCH_SAMPLE_DONE"


def build_sample_loop_script(argv: Sequence[str], n: int | None = None, *, control: Any = None) -> str:
    """POSIX sh text that runs ``argv`` once per sample and brackets each run's output with markers.

    Without ``control``: exactly ``n`` runs. With a ``RunControl``: its stop rule on the device's
    clock (see the module docstring); ``n`` is then ignored. Every argument is quoted here with
    shlex.quote, so file names with spaces, quotes or ';' reach the binary intact. The loop stops
    at the first failing run (its exit code is the script's). Run it as ONE device-side shell
    command (e.g. ``sh -c SCRIPT``).
    """
    if control is None and (isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1):
        raise BadInput(f"sample count must be an integer >= 1, got {n!r}")
    if not argv:
        raise BadInput("empty benchmark_model argv")
    if "--num_runs=1" not in argv:
        raise BadInput("the sample loop needs an argv with --num_runs=1 (build it with sample_argv)")
    cmd = " ".join(shlex.quote(str(a)) for a in argv)
    body = (
        f"  echo \"{_BEGIN} $i\"\n"
        f"  {cmd} 2>&1\n"
        "  rc=$?\n"
        f"  echo \"{_END} $i $rc\"\n"
        "  if [ \"$rc\" -ne 0 ]; then exit \"$rc\"; fi\n"
        "  i=$((i + 1))\n"
    )
    if control is None:
        n = int(n)
        return f"i=0\nwhile [ \"$i\" -lt {n} ]; do\n{body}done\necho \"{_DONE} {n} runs\"\n"
    # the stop rule of RunControl.stop_reason, in the same order, in whole seconds of the device clock
    max_s = max(1, math.ceil(float(control.max_time_s)))
    if control.runs is not None:
        enough = f"  if [ \"$i\" -ge {int(control.runs)} ]; then r=runs; break; fi\n"
    else:
        enough = (f"  if [ \"$i\" -ge {int(control.min_runs)} ] && [ \"$e\" -ge "
                  f"{math.ceil(float(control.min_time_s))} ]; then r=min_runs_and_min_time; break; fi\n")
    return (
        "i=0\nr=\ns=$(date +%s)\n"
        "while :; do\n"
        "  e=$(( $(date +%s) - s ))\n"
        f"{enough}"
        f"  if [ \"$e\" -ge {max_s} ]; then r=max_time; break; fi\n"
        f"{body}"
        "done\n"
        f"echo \"{_DONE} $i $r\"\n"
    )


@dataclass(frozen=True)
class SampleLoop:
    """What a sample loop returned: the samples and why it stopped (``runs``,
    ``min_runs_and_min_time`` or ``max_time``)."""

    samples_ns: np.ndarray
    stop_reason: str | None


def parse_sample_loop(text: str, n: int | None = None, *, where: str = "device") -> np.ndarray:
    """Per-run latencies (int64 ns) from the output of ``build_sample_loop_script``.

    Each sample is the ``curr=`` of that invocation's timed run (``count=1``). Raises
    InfraError when a run failed (wrong ABI, missing binary, crash), when the output ends
    before the loop's final marker (a dropped connection looks like a short clean output),
    or when a run printed no single-run stats line. ``n``: the count a fixed loop must return.
    """
    return read_sample_loop(text, n, where=where).samples_ns


def read_sample_loop(text: str, n: int | None = None, *, where: str = "device") -> SampleLoop:
    """``parse_sample_loop`` plus the loop's stop reason."""
    samples: list[int] = []
    cur: list[str] | None = None
    idx = -1
    done = None
    reason = None
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
            parts = s.split()
            done = int(parts[1])
            reason = parts[2] if len(parts) > 2 else None
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
    return SampleLoop(np.asarray(samples, dtype=np.int64), reason)


# A later invocation may take this many times the probe's wall time (a phone that heats up, a
# busy adb link) before the loop's deadline calls it hung; the margin covers adb's own latency.
PROBE_FACTOR = 4.0
DEADLINE_MARGIN_S = 30.0


def loop_deadline_s(control: Any, probe_wall_s: float) -> float:
    """Device-side deadline of the timed sample loop, from a probe invocation's wall time: the
    loop starts no invocation after ``max_time_s`` (1 s clock resolution), and the last one it
    started is given ``PROBE_FACTOR`` x the probe's time to finish."""
    return float(control.max_time_s) + 1.0 + PROBE_FACTOR * float(probe_wall_s) + DEADLINE_MARGIN_S


def outputs_deadline_s(n_invocations: int, probe_wall_s: float) -> float:
    """Device-side deadline of the outputs pass (one invocation per input sample, no warm-up)."""
    return int(n_invocations) * PROBE_FACTOR * float(probe_wall_s) + DEADLINE_MARGIN_S


def sample_progress(total: int | None) -> Callable[[bytes], None]:
    """A stdout callback for the running sample loop: counts finished samples (a marker split
    across two chunks is counted once) and reports them to ``edgebench.core.progress``."""

    marker = _END.encode()
    state = {"n": 0, "tail": b""}

    def feed(chunk: bytes) -> None:
        buf = state["tail"] + chunk
        state["n"] += buf.count(marker)
        state["tail"] = buf[-(len(marker) - 1):]   # too short to hold a whole (already counted) marker
        progress.update(state["n"], total, "samples")

    return feed
