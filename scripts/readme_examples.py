"""Regenerate the example outputs of the README and the docs pages from the program's real output.

    python scripts/readme_examples.py            # run every example, rewrite its block in its page
    python scripts/readme_examples.py first-screen   # one of them

Each example lives in one page (``Example.page``: the README's first screen, diagnose's planted
model in docs/diagnose.md); its block follows a marker line ``<!-- example: NAME (scripts/readme_examples.py) -->``
and is the fenced block right after it: the commands (``$ ...``, with the ``cd`` they need) and what
each printed -- stdout, then stderr's ``error:`` line -- at the example's terminal width
(``COLUMNS``), nothing edited by hand. The results store is a fresh SQLite file per run, so run
ids differ between runs; timings are this machine's, as measured.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MARKER = "<!-- example: {name} (scripts/readme_examples.py) -->"


@dataclass(frozen=True)
class Example:
    name: str
    columns: int
    commands: tuple[str, ...]          # as the user types them (after ``cd`` into the work folder)
    setup: tuple[str, ...] = ()        # run first, not shown
    cd: str | None = None              # the folder the commands run in, shown as ``$ cd DIR``
    env: dict[str, str] = field(default_factory=dict)
    page: str = "README.md"            # the file (relative to the repository) that shows it


def examples(work: Path) -> list[Example]:
    planted = work / "planted"
    return [
        Example("first-screen", 80, ("edgebench convert-and-compare digits --max-accuracy-drop 1.0",)),
        Example("planted", 100, (
            "edgebench convert-and-compare planted --precision fp32,int8 --data eval.npz --calibration-data cal.npz "
            "--max-accuracy-drop 1",
            "edgebench diagnose planted --precision int8 --data eval.npz --calibration-data cal.npz --top 5",
        ), setup=(f"{sys.executable} -m reference_models.planted_outlier {planted}",), cd=str(planted),
            page="docs/diagnose.md"),
        Example("planted-fix", 100, (
            "edgebench convert-and-compare planted --precision fp32,int8,int16x8 --data eval.npz "
            "--calibration-data cal.npz --max-accuracy-drop 1 --keep-float auto",
        ), setup=(f"{sys.executable} -m reference_models.planted_outlier {planted}",), cd=str(planted),
            page="docs/diagnose.md"),
    ]


def run(ex: Example, work: Path) -> str:
    env = {**os.environ, "COLUMNS": str(ex.columns), "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONPATH": str(ROOT),
           "EDGEBENCH_DB": str(work / f"{ex.name}.db"), **ex.env}
    env.pop("EDGEBENCH_DEBUG", None)
    if ex.setup and not (ex.cd and Path(ex.cd).exists()):     # once per run: the examples share it
        for cmd in ex.setup:
            subprocess.run(shlex.split(cmd), check=True, cwd=ROOT, env=env, capture_output=True)
    out = [f"$ cd {ex.cd}"] if ex.cd else []
    for cmd in ex.commands:
        argv = shlex.split(cmd)
        argv[0:1] = [sys.executable, "-m", "edgebench"]
        p = subprocess.run(argv, cwd=ex.cd or work, env=env, capture_output=True, text=True, timeout=1800)
        out.append(f"$ {cmd}")
        out.extend(ln.rstrip() for ln in p.stdout.rstrip("\n").splitlines())
        out.extend(ln.rstrip() for ln in p.stderr.splitlines() if ln.startswith(("error:", "warning:")))
        out.append("")
    return "\n".join(out).rstrip("\n")


def replace_block(text: str, name: str, body: str) -> str:
    marker = MARKER.format(name=name)
    at = text.find(marker)
    if at < 0:
        raise SystemExit(f"no marker {marker!r} in the example's page")
    start = text.index("```", at)
    start = text.index("\n", start) + 1
    end = text.index("\n```", start)
    return text[:start] + body + text[end:]


def main(argv: list[str]) -> int:
    with tempfile.TemporaryDirectory(prefix="edgebench-readme-") as tmp:
        work = Path(tmp)
        chosen = [e for e in examples(work) if not argv or e.name in argv]
        for ex in chosen:
            print(f"==> {ex.name} ({ex.page})", file=sys.stderr)
            page = ROOT / ex.page
            text = replace_block(page.read_text(encoding="utf-8"), ex.name, run(ex, work).replace(str(work), "/tmp"))
            page.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
