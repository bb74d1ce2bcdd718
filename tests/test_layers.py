"""Floors: every module of edgebench (and reference_models) sits on one floor, imports only its own
floor or lower ones, and the file-level import graph has no cycle -- counting imports inside
functions and under ``TYPE_CHECKING``, which is where cycles used to hide.

The floor map is declared here (and drawn in ARCHITECTURE.md's "Floors" section); a new module must
be placed on a floor before the suite passes. Lowest first."""
from __future__ import annotations

import ast
import fnmatch
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("edgebench", "reference_models")

# (floor name, module patterns) -- fnmatch patterns on dotted names; the first match wins.
FLOORS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("reference model builders", ("reference_models", "reference_models.*")),
    ("foundation", ("edgebench", "edgebench.errors", "edgebench.paths", "edgebench.atomic", "edgebench.ranges",
                    "edgebench.progress", "edgebench.measure", "edgebench.energy", "edgebench.fingerprint",
                    "edgebench.results", "edgebench.envlock", "edgebench.peak", "edgebench.profiles",
                    "edgebench.models", "edgebench.tflite_model", "edgebench.tflite_rewrite",
                    "edgebench.formats", "edgebench.litertlm", "edgebench.bounded", "edgebench.trust",
                    "edgebench.redact", "edgebench.printable", "edgebench.user_code")),
    ("model and data", ("edgebench.data", "edgebench.state_rule", "edgebench.savedmodel", "edgebench.compare", "edgebench.rows",
                        "edgebench.rows.*", "edgebench.metrics", "edgebench.identity")),
    ("runtimes", ("edgebench.targets", "edgebench.targets.*", "edgebench.profile", "edgebench.sustain",
                  "edgebench.load", "edgebench.diagnose_worker", "edgebench.train_worker", "edgebench.sim",
                  "edgebench.sim.*", "edgebench.train", "edgebench.train.settings", "edgebench.train.step",
                  "edgebench.train.metrics", "edgebench.train.data", "edgebench.train.cell",
                  "edgebench.train.multiworker", "edgebench.aot", "edgebench.aot.*")),
    ("records and verdicts", ("edgebench.outcome", "edgebench.verdicts", "edgebench.gate", "edgebench.store",
                              "edgebench.stats", "edgebench.llm_pairs", "edgebench.readiness_rows", "edgebench.changepoints",
                              "edgebench.stats_rows")),
    ("renderers and publishing", ("edgebench.report", "edgebench.report.*", "edgebench.export",
                                  "edgebench.publish")),
    ("sources", ("edgebench.sources", "edgebench.sources_torch", "edgebench.keras2_export", "edgebench.frozen_graph")),
    ("quantization analysis", ("edgebench.quant", "edgebench.quant.*")),
    ("conversion", ("edgebench.convert", "edgebench.convert_worker", "edgebench.converter_errors")),
    ("workflows", ("edgebench.pipeline", "edgebench.diagnose", "edgebench.bench", "edgebench.matrix",
                   "edgebench.train.sweep", "edgebench.llm_bench", "edgebench.llm_compare",
                   "edgebench.readiness", "edgebench.readiness_host", "edgebench.diagnose_fix")),
    ("command line", ("edgebench.cli", "edgebench.cli.*", "edgebench.__main__")),
)
MAX_LINES = 800            # no module outside sim/ longer than this
LONG_ALLOWED = ("edgebench.sim.*",)


def modules(root: Path = ROOT) -> dict[str, Path]:
    out = {}
    for pkg in PACKAGES:
        for p in sorted((root / pkg).rglob("*.py")):
            parts = list(p.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = p
    return out


def _targets(mod: str, is_pkg: bool, node: ast.AST, known: dict[str, Path]) -> list[str]:
    """Modules of ours an import statement loads (``from pkg import submodule`` is the submodule)."""
    names: list[str] = []
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    elif isinstance(node, ast.ImportFrom):
        base = node.module or ""
        if node.level:
            parts = mod.split(".") if is_pkg else mod.split(".")[:-1]
            parts = parts[:len(parts) - (node.level - 1)]
            base = ".".join(parts + ([base] if base else []))
        names = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
    out = []
    for n in names:
        while n and n not in known:
            n = n.rpartition(".")[0]
        if n and n != mod:
            out.append(n)
            # Loading a.b.c runs a/b/__init__.py first: a re-exporting package's imports are this
            # module's too, unless the importer is inside that package (then it is already loading).
            pkg = n.rpartition(".")[0]
            while pkg and pkg in known and not (mod == pkg or mod.startswith(pkg + ".")):
                out.append(pkg)
                pkg = pkg.rpartition(".")[0]
    return out


def import_graph(root: Path = ROOT) -> dict[str, dict[str, int]]:
    """module -> {imported module: first line}, every import statement anywhere in the file."""
    known = modules(root)
    graph: dict[str, dict[str, int]] = defaultdict(dict)
    for mod, path in known.items():
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for t in _targets(mod, path.name == "__init__.py", node, known):
                    graph[mod].setdefault(t, node.lineno)
        graph.setdefault(mod, {})
    return graph


def cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on.add(start)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph.get(w, {})))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    found.append(sorted(comp))
    return found


def floor_of(mod: str) -> int | None:
    for i, (_name, patterns) in enumerate(FLOORS):
        if any(fnmatch.fnmatchcase(mod, p) for p in patterns):
            return i
    return None


def upward(graph: dict[str, dict[str, int]]) -> list[str]:
    bad = []
    for mod, deps in sorted(graph.items()):
        for dep, line in sorted(deps.items()):
            a, b = floor_of(mod), floor_of(dep)
            if a is not None and b is not None and b > a:
                bad.append(f"{mod}:{line} imports {dep} ({FLOORS[a][0]} -> {FLOORS[b][0]})")
    return bad


def test_every_module_has_a_floor():
    missing = [m for m in modules() if floor_of(m) is None]
    assert not missing, f"place these modules on a floor in tests/test_layers.py FLOORS: {missing}"


def test_no_import_cycles():
    found = cycles(import_graph())
    assert not found, "import cycles (counting imports inside functions): " + "; ".join(" <-> ".join(c) for c in found)


def test_no_upward_imports():
    bad = upward(import_graph())
    assert not bad, "imports from a lower floor to a higher one:\n" + "\n".join(bad)


def test_no_module_too_long():
    long = {m: n for m, p in modules().items()
            if (n := len(p.read_text().splitlines())) > MAX_LINES
            and not any(fnmatch.fnmatchcase(m, pat) for pat in LONG_ALLOWED)}
    assert not long, f"modules over {MAX_LINES} lines (split them by what they do): {long}"


@pytest.mark.parametrize("plant, expect", [
    ("def f():\n    from edgebench.cli import app\n", "upward"),           # a function-level upward import
    ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from edgebench.pipeline import CompareSettings\n", "upward"),
])
def test_the_check_catches_a_planted_import(tmp_path, plant, expect):
    """Copy the packages, plant an import in measure.py (foundation floor), and see the checks fail."""
    import shutil

    for pkg in PACKAGES:
        shutil.copytree(ROOT / pkg, tmp_path / pkg, ignore=shutil.ignore_patterns("__pycache__"))
    target = tmp_path / "edgebench" / "measure.py"
    target.write_text(target.read_text() + "\n\n" + plant)
    graph = import_graph(tmp_path)
    assert any(b.startswith("edgebench.measure:") for b in upward(graph))


def test_the_check_catches_a_planted_cycle(tmp_path):
    import shutil

    for pkg in PACKAGES:
        shutil.copytree(ROOT / pkg, tmp_path / pkg, ignore=shutil.ignore_patterns("__pycache__"))
    target = tmp_path / "edgebench" / "errors.py"
    target.write_text(target.read_text() + "\n\ndef _late():\n    from edgebench import atomic\n")
    assert any("edgebench.errors" in c and "edgebench.atomic" in c for c in cycles(import_graph(tmp_path)))
