#!/usr/bin/env python3
"""What an ``llm-bench`` run measures and costs, on this machine (needs the [llm] extra).

1. Times one ``edgebench llm-bench F32 Q8 --prefill ... --decode ... --repeats N`` end to end (the
   wall time a user waits) and prints each row's medians with their interval over the processes and
   the side-by-side speed-ups the command computed (bundles measured one after the other).
2. A/B alternated: ``--ab`` pairs of worker processes, fp32 then int8, one shape, through the same
   host runner -- so a slow phase of a shared machine hits both sides alike -- and prints the ratio of
   the medians of each metric with the min-max of the per-pair ratios. Step 1's speed-up should fall
   inside step 2's range; when it does not, the machine's load changed during step 1.

    python scripts/bench_llm.py tests/fixtures/llm/tiny-llama-f32.litertlm tests/fixtures/llm/tiny-llama-q8.litertlm
    python scripts/build_tiny_litertlm.py --out /tmp/big --layers 4 --dim 256      # a larger model to measure
    python scripts/bench_llm.py /tmp/big/tiny-llama-f32.litertlm /tmp/big/tiny-llama-q8.litertlm --prefill 64,128

Prints the conditions (CPU count, load average) with the figures: a 2-core machine shared with other
jobs gives the spread it gives.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

KEYS = (("ttft_ms", "TTFT ms", False), ("prefill_tok_s", "prefill tok/s", True),
        ("decode_tok_s", "decode tok/s", True), ("init_ms", "init ms", False))


def _fmt(v: float) -> str:
    return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3g}"


def end_to_end(f32: str, q8: str, prefill: str, decode: str, repeats: int) -> None:
    exe = str(Path(sys.executable).with_name("edgebench"))
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "r.json"
        t0 = time.perf_counter()
        p = subprocess.run([exe, "llm-bench", f32, q8, "--prefill", prefill, "--decode", decode, "--repeats",
                            str(repeats), "--no-store", "--json", str(out)], capture_output=True, text=True,
                           env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
        wall = time.perf_counter() - t0
        if not out.is_file():
            raise SystemExit(f"llm-bench failed (exit {p.returncode}): {p.stderr.strip()[-500:]}")
        doc = json.loads(out.read_text())
    print(f"== llm-bench end to end: {wall:.1f} s wall for {len(doc['rows'])} rows x {repeats} processes "
          f"(exit {p.returncode})")
    for r in doc["rows"]:
        llm = r["llm"]
        head = f"{r['precision']:8} {llm['prefill_tokens']}+{llm['decode_tokens']}"
        if r["status"] != "ok":
            print(f"  {head}: FAILED {r['error']}")
            continue
        cells = []
        for k, label, _h in KEYS:
            s = llm["stats"][k]
            cells.append(f"{label} {_fmt(s['median'])} [{_fmt(s['lo'])}-{_fmt(s['hi'])}]")
        print(f"  {head}: " + "; ".join(cells) + f" (interval level {llm['stats']['decode_tok_s']['level']:.1%})")
        w = llm.get("warmup_stats") or {}
        if w.get("decode_tok_s"):
            print(f"  {'':8} warm-up generation: decode {_fmt(w['decode_tok_s']['median'])} tok/s, "
                  f"TTFT {_fmt(w['ttft_ms']['median'])} ms, init {_fmt(w['init_ms']['median'])} ms")
    for pair in (doc.get("comparison") or {}).get("pairs", []):
        sp = {s["metric"]: s for s in pair["speedups"]}
        ag = pair.get("agreement") or {}
        print(f"  {pair['candidate']} vs {pair['reference']} {pair['prefill_tokens']}+{pair['decode_tokens']}: "
              f"size {pair['size_ratio']:.2f}x smaller; " + "; ".join(
                  f"{k} {v['ratio']:.2f}x [{v['lo']:.2f}-{v['hi']:.2f}]" for k, v in sp.items() if v["lo"] is not None)
              + f"; greedy tokens: first divergence {ag.get('first_divergence')} of {ag.get('compared')}")


def alternated(f32: str, q8: str, prefill: int, decode: int, pairs: int) -> None:
    from edgebench.targets.litert_lm.host import LmJob
    from edgebench.targets.litert_lm.runners import HostLmRunner

    runner = HostLmRunner()
    got: dict[str, list[dict[str, float]]] = {"fp32": [], "int8": []}
    for _ in range(pairs):
        for name, bundle in (("fp32", f32), ("int8", q8)):
            m = runner.run(LmJob(bundle=bundle, prefill_tokens=prefill, decode_tokens=decode), first=False).measured
            got[name].append({"ttft_ms": m.ttft_ms, "prefill_tok_s": m.prefill_tok_s, "decode_tok_s": m.decode_tok_s,
                              "init_ms": m.init_ms})
    print(f"== A/B alternated, {pairs} pairs of processes, {prefill}+{decode} tokens (int8 over fp32, >1 = faster)")
    for k, label, higher in KEYS:
        a = [g[k] for g in got["fp32"]]
        b = [g[k] for g in got["int8"]]
        ratios = [(y / x if higher else x / y) for x, y in zip(a, b)]
        med = (statistics.median(b) / statistics.median(a)) if higher else (statistics.median(a) / statistics.median(b))
        print(f"  {label:14} fp32 median {_fmt(statistics.median(a))} ({_fmt(min(a))}-{_fmt(max(a))}), int8 median "
              f"{_fmt(statistics.median(b))} ({_fmt(min(b))}-{_fmt(max(b))}); speed-up {med:.2f}x, per pair "
              f"{min(ratios):.2f}-{max(ratios):.2f}x")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("f32")
    ap.add_argument("q8")
    ap.add_argument("--prefill", default="64")
    ap.add_argument("--decode", default="64")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--ab", type=int, default=8, help="alternated pairs of processes (0: skip)")
    args = ap.parse_args()
    print(f"conditions: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f} (1 min) at the start")
    end_to_end(args.f32, args.q8, args.prefill, args.decode, args.repeats)
    if args.ab:
        alternated(args.f32, args.q8, int(args.prefill.split(",")[0]), int(args.decode.split(",")[0]), args.ab)
    print(f"load average {os.getloadavg()[0]:.2f} (1 min) at the end")
    return 0


if __name__ == "__main__":
    sys.exit(main())
