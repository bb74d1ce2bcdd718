#!/usr/bin/env python3
"""A stand-in for LiteRT-LM's benchmark binary (``litert_lm_advanced_main --benchmark``) on the
simulated adb device.

It runs the bundle with this machine's LiteRT-LM engine (the ``litert_lm`` Python API's
``Benchmark``: the same engine benchmark mode the binary uses) and prints what the binary prints
after a generation -- the ``BenchmarkInfo:`` block of runtime/engine/io_types.cc, with absl
durations, and the ``Peak system ram usage: X MB.`` line of ``--report_peak_memory_footprint`` (this
process's VmHWM) -- so edgebench's device path (push, argv, quoting, deadline, the log parser and the
judge) runs end to end without a phone. The engine's own error lines (``Failed to generate content:
INVALID_ARGUMENT: ...``) reach stderr as they would on a phone.

Honoured flags: --model_path --backend (cpu) --benchmark --benchmark_prefill_tokens
--benchmark_decode_tokens --num_cpu_threads --max_num_tokens --cache_dir --disable_cache
--force_f32 --report_peak_memory_footprint. Unknown flags are an error, as absl's are.

What it cannot be: a phone. The timings are this host CPU's, and the Python API reports the total
init time only, so ``Init Phases`` carries the total (``Total init time``, as releases before 0.11
print it) and no per-phase breakdown. Needs the standard library and ``litert_lm``.
"""

from __future__ import annotations

import sys

FLAGS = {"model_path": "", "backend": "cpu", "benchmark": "false", "benchmark_prefill_tokens": "0",
         "benchmark_decode_tokens": "0", "num_cpu_threads": "0", "max_num_tokens": "0", "cache_dir": "",
         "disable_cache": "false", "force_f32": "false", "report_peak_memory_footprint": "false"}
SEP = "-" * 50


def parse(argv: list[str]) -> dict[str, str]:
    out = dict(FLAGS)
    for a in argv:
        if not a.startswith("--"):
            raise SystemExit(f"ERROR: positional argument {a!r} is not accepted")
        key, eq, value = a[2:].partition("=")
        if key not in FLAGS:
            raise SystemExit(f"ERROR: Unknown command line flag '{key}'")
        out[key] = value if eq else "true"
    return out


def absl_duration(seconds: float) -> str:
    """absl::Duration's text: 850.5us, 92.41119ms, 3.86435584s, 1m2.5s."""
    if seconds <= 0:
        return "0"
    if seconds < 1e-3:
        return f"{seconds * 1e6:.3f}".rstrip("0").rstrip(".") + "us"
    if seconds < 1:
        return f"{seconds * 1e3:.6f}".rstrip("0").rstrip(".") + "ms"
    if seconds < 60:
        return f"{seconds:.8f}".rstrip("0").rstrip(".") + "s"
    m, s = divmod(seconds, 60)
    return f"{int(m)}m" + f"{s:.6f}".rstrip("0").rstrip(".") + "s"


def peak_mib() -> float:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
    return 0.0


def block(info) -> str:
    """The BenchmarkInfo block (io_types.cc operator<<, fixed with two decimals)."""
    lines = ["BenchmarkInfo:", "  Init Phases (0):", "    No init phases recorded.",
             f"    Total init time: {info.init_time_in_second * 1e3:.2f} ms", SEP,
             f"  Time to first token: {info.time_to_first_token_in_second:.2f} s", SEP]
    for kind, n, tps in (("Prefill", info.last_prefill_token_count, info.last_prefill_tokens_per_second),
                         ("Decode", info.last_decode_token_count, info.last_decode_tokens_per_second)):
        turns = 1 if n else 0
        lines.append(f"  {kind} Turns (Total {turns} turns):")
        if not turns:
            lines.append(f"    No {kind.lower()} turns recorded.")
        else:
            lines.append(f"    {kind} Turn 1: Processed {n} tokens in {absl_duration(n / tps if tps else 0)} duration.")
            lines.append(f"      {kind} Speed: {tps:.2f} tokens/sec.")
        lines.append(SEP)
    lines += ["  TextToTokenIds Turns (Total 0 turns):", "    No text to token ids turns recorded.", SEP, SEP]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    flags = parse(argv)
    if flags["backend"] != "cpu":
        print(f"ERROR: the stand-in runs the CPU backend only, not {flags['backend']}", file=sys.stderr)
        return 1
    import litert_lm  # noqa: PLC0415

    def num(key: str) -> int | None:
        v = int(flags[key] or 0)
        return v if v > 0 else None

    cache = ":nocache" if flags["disable_cache"] == "true" else (flags["cache_dir"] or None)
    bench = litert_lm.Benchmark(
        flags["model_path"], backend=litert_lm.interfaces.CPU(thread_count=num("num_cpu_threads")),
        prefill_tokens=num("benchmark_prefill_tokens") or 256, decode_tokens=num("benchmark_decode_tokens") or 256,
        max_num_tokens=num("max_num_tokens"), cache_dir=cache,
        activation_data_type=litert_lm.ActivationDataType.FLOAT32 if flags["force_f32"] == "true" else None)
    try:
        info = bench.run()
    except RuntimeError as exc:
        print(f"F0000 litert_lm_advanced_main.cc] Check failed: {exc}", file=sys.stderr)
        return 1
    print(f"I0000 00:00:0.000000 0 litert_lm_lib.cc:0] {block(info)}", file=sys.stderr)
    if flags["report_peak_memory_footprint"] == "true":
        print(f"I0000 00:00:0.000000 0 litert_lm_lib.cc:0] Peak system ram usage: {peak_mib():.2f}MB.", file=sys.stderr)
    return 0


def install(dest: str, python: str | None = None) -> str:
    """Copy this script to ``dest`` with a #! line naming ``python`` (default: this interpreter)."""
    import os

    with open(os.path.abspath(__file__), encoding="utf-8") as fh:
        body = fh.read().split("\n", 1)[1]
    with open(dest, "w", encoding="utf-8") as fh:
        fh.write(f"#!{python or sys.executable}\n{body}")
    os.chmod(dest, 0o755)
    return dest


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
