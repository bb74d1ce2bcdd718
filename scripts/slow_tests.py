"""Write tests/slow_tests.txt from a measured run: the tests that take THRESHOLD seconds or more.

    scripts/test --durations=0 2>&1 | tee /tmp/durations.log
    python scripts/slow_tests.py /tmp/durations.log [--threshold 2.0]

A test's time is its setup + call + teardown as pytest's ``--durations=0`` report prints them (a
module's first test carries the set-up of the models the module shares). ``tests/conftest.py`` marks
every listed test ``slow``: the full suite (``scripts/test``, what CI runs) runs them, the fast lane
(``scripts/test --fast``) leaves them out. Remeasure after adding slow tests.
"""

from __future__ import annotations

import re
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "slow_tests.txt"
LINE = re.compile(r"^\s*([0-9.]+)s (setup|call|teardown)\s+(\S.*?)\s*$")


def durations(log: str) -> dict[str, float]:
    total: dict[str, float] = defaultdict(float)
    for line in log.splitlines():
        m = LINE.match(line)
        if m:
            total[m.group(3)] += float(m.group(1))
    return dict(total)


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    threshold = float(argv[argv.index("--threshold") + 1]) if "--threshold" in argv else 2.0
    found = durations(Path(argv[0]).read_text(encoding="utf-8", errors="replace"))
    if not found:
        print(f"{argv[0]}: no --durations=0 report in it; run scripts/test --durations=0", file=sys.stderr)
        return 2
    slow = sorted((t, n) for n, t in found.items() if t >= threshold)
    header = (f"# Tests of {threshold:g} s or more (setup + call + teardown), measured by scripts/slow_tests.py\n"
              f"# from a full scripts/test --durations=0 run: {len(slow)} of {len(found)} tests, "
              f"{sum(t for t, _ in slow):.0f} s of {sum(found.values()):.0f} s.\n")
    OUT.write_text(header + "".join(f"{n}\n" for _t, n in sorted(slow, key=lambda x: x[1])), encoding="utf-8")
    print(f"{OUT.relative_to(ROOT)}: {len(slow)} tests, {sum(t for t, _ in slow):.0f} s of {sum(found.values()):.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
