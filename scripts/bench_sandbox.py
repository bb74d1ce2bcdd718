"""What the sandbox costs a command: the same command confined and with --no-sandbox, alternated.

    python scripts/bench_sandbox.py [--rounds 5] [--model digits]

Each round runs ``edgebench convert MODEL -p fp32`` (a real conversion: TensorFlow import, load,
convert, parity check) once confined and once with ``--no-sandbox``, in alternating order (ABAB...,
so load that comes and goes hits both alike), and prints each wall time, the medians, their ratio
and the difference: the sandbox's cost per command. The mechanism is what ``core/confine.available``
finds on this machine.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def once(model: str, out: Path, sandboxed: bool) -> float:
    argv = [sys.executable, "-m", "edgebench", "convert", model, "-p", "fp32", "--out", str(out)]
    t0 = time.perf_counter()
    p = subprocess.run(argv + ([] if sandboxed else ["--no-sandbox"]), capture_output=True, text=True, cwd=ROOT)
    dt = time.perf_counter() - t0
    if p.returncode != 0:
        raise SystemExit(f"convert failed ({p.returncode}): {p.stderr[-500:]}")
    return dt


def main(argv: list[str]) -> int:
    from edgebench.core.confine import MECHANISM, available

    rounds = int(argv[argv.index("--rounds") + 1]) if "--rounds" in argv else 5
    model = argv[argv.index("--model") + 1] if "--model" in argv else "digits"
    works, why = available()
    if not works:
        print(f"no sandbox on this machine: {why}", file=sys.stderr)
        return 2
    times: dict[bool, list[float]] = {True: [], False: []}
    with tempfile.TemporaryDirectory() as tmp:
        once(model, Path(tmp) / "warm", False)          # the model's build cache, outside the timing
        for r in range(rounds):
            for sandboxed in ((True, False) if r % 2 == 0 else (False, True)):
                dt = once(model, Path(tmp) / f"r{r}-{sandboxed}", sandboxed)
                times[sandboxed].append(dt)
                print(f"round {r + 1}: {'confined' if sandboxed else 'no sandbox'} {dt:.2f} s")
    a, b = statistics.median(times[True]), statistics.median(times[False])
    print(f"mechanism: {MECHANISM}; convert {model} -p fp32, {rounds} rounds alternated")
    print(f"median confined {a:.2f} s, without {b:.2f} s: ratio {a / b:.3f}, cost {a - b:+.2f} s per command")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
