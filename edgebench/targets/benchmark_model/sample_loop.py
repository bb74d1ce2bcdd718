"""Per-inference samples from benchmark_model, the only source of an honest P99: one device-side
``sh`` loop (``build_sample_loop_script``) invokes the binary n times with ``--num_runs=1``
(``sample_argv``); ``parse_sample_loop`` reads each invocation's single timed run."""

from __future__ import annotations

import shlex
from typing import Any, Sequence

import numpy as np

from edgebench.errors import BadInput, InfraError
from edgebench.targets.benchmark_model.argv import build_argv
from edgebench.targets.benchmark_model.binary import _EXEC_FORMAT, _NOT_FOUND, classify_failure
from edgebench.targets.benchmark_model.parse import parse_log


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
