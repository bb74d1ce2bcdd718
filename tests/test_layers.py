"""Floors: every module of edgebench (and reference_models) sits on one floor -- its folder's, imports only its own
floor or lower ones, and the file-level import graph has no cycle -- counting imports inside
functions and under ``TYPE_CHECKING``, which is where cycles used to hide.

The floor map is declared here (and drawn in docs/architecture.md); a new folder must be placed on a
floor before the suite passes. Lowest first."""
from __future__ import annotations

import ast
import fnmatch
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("edgebench", "reference_models")

# The floors are the folders: (floor name, folders of edgebench/ on that floor), lowest first. A module's
# floor is its folder's; ``edgebench/__init__.py`` (the version) is the ground floor and
# ``edgebench/__main__.py`` the command line's. A new folder takes its floor here in the same commit.
FLOORS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("reference model builders", ("reference_models",)),
    ("foundation", ("core",)),
    ("model and data", ("model", "rows")),
    ("runtimes", ("targets",)),
    ("records and verdicts", ("judge", "store")),
    ("renderers and publishing", ("report",)),
    ("sources", ("sources",)),
    ("conversion", ("convert",)),
    ("workflows", ("bench", "convert_and_compare", "diagnose", "readiness", "llm", "matrix", "train")),
    ("command line", ("cli",)),
)
MAX_LINES = 800            # no module outside targets/sim/ longer than this
LONG_ALLOWED = ("edgebench.targets.sim.*",)


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


def import_graph(root: Path = ROOT, children: bool = False) -> dict[str, dict[str, int]]:
    """module -> {imported module: first line}, every import statement anywhere in the file; with
    ``children`` also every module the file starts as a child process (``[python, "-m", "edgebench.x"]``):
    those must respect the floors too, but are no load-order cycle (the child is another process)."""
    known = modules(root)
    graph: dict[str, dict[str, int]] = defaultdict(dict)
    for mod, path in known.items():
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for t in _targets(mod, path.name == "__init__.py", node, known):
                    graph[mod].setdefault(t, node.lineno)
            elif children and isinstance(node, (ast.List, ast.Tuple)):
                # A child process started as ``[python, "-m", "edgebench.x", ...]`` runs module x: an
                # edge too, so a worker started by name sits on the floors like an import.
                items = [e.value if isinstance(e, ast.Constant) else None for e in node.elts]
                for k in range(len(items) - 1):
                    if items[k] == "-m" and isinstance(items[k + 1], str) and items[k + 1] in known \
                            and items[k + 1] != mod:
                        graph[mod].setdefault(items[k + 1], node.lineno)
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


def folder_of(mod: str) -> str | None:
    """The folder that decides a module's floor: ``edgebench.judge.stats`` -> ``judge``."""
    parts = mod.split(".")
    if parts[0] == "reference_models":
        return "reference_models"
    if mod == "edgebench":
        return "core"
    if mod == "edgebench.__main__":
        return "cli"
    return parts[1] if len(parts) > 2 or (ROOT / "edgebench" / parts[1]).is_dir() else None


def floor_of(mod: str) -> int | None:
    folder = folder_of(mod)
    for i, (_name, folders) in enumerate(FLOORS):
        if folder in folders:
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
    assert not missing, ("a module of edgebench/ lives in a folder, and every folder has a floor in "
                         f"tests/test_layers.py FLOORS: {missing}")


def test_the_tree_is_the_map():
    """``ls edgebench`` is the architecture: only folders that are floors, plus ``__init__``/``__main__``."""
    entries = sorted(p.name for p in (ROOT / "edgebench").iterdir() if p.name != "__pycache__")
    folders = {f for _name, fs in FLOORS for f in fs}
    stray = [e for e in entries if e not in folders and e not in ("__init__.py", "__main__.py", "py.typed")]
    assert not stray, f"edgebench/ holds only floor folders; move these into one: {stray}"
    assert len(entries) <= 20, entries


def test_no_import_cycles():
    found = cycles(import_graph())
    assert not found, "import cycles (counting imports inside functions): " + "; ".join(" <-> ".join(c) for c in found)


def test_no_upward_imports():
    bad = upward(import_graph(children=True))     # a worker started by name counts like an import
    assert not bad, "imports (or child processes) from a lower floor to a higher one:\n" + "\n".join(bad)


def test_no_module_too_long():
    long = {m: n for m, p in modules().items()
            if (n := len(p.read_text().splitlines())) > MAX_LINES
            and not any(fnmatch.fnmatchcase(m, pat) for pat in LONG_ALLOWED)}
    assert not long, f"modules over {MAX_LINES} lines (split them by what they do): {long}"


@pytest.mark.parametrize("plant, expect", [
    ("def f():\n    from edgebench.cli import app\n", "upward"),           # a function-level upward import
    ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from edgebench.convert_and_compare.pipeline import CompareSettings\n", "upward"),
    ("import sys\nCHILD = [sys.executable, '-m', 'edgebench.convert.quant.tensor_worker', 'job.json']\n", "upward"),  # a worker by name
])
def test_the_check_catches_a_planted_import(tmp_path, plant, expect):
    """Copy the packages, plant an import in measure.py (foundation floor), and see the checks fail."""
    import shutil

    for pkg in PACKAGES:
        shutil.copytree(ROOT / pkg, tmp_path / pkg, ignore=shutil.ignore_patterns("__pycache__"))
    target = tmp_path / "edgebench" / "core" / "latency.py"
    target.write_text(target.read_text() + "\n\n" + plant)
    graph = import_graph(tmp_path, children=True)
    assert any(b.startswith("edgebench.core.latency:") for b in upward(graph))


def test_the_check_catches_a_planted_cycle(tmp_path):
    import shutil

    for pkg in PACKAGES:
        shutil.copytree(ROOT / pkg, tmp_path / pkg, ignore=shutil.ignore_patterns("__pycache__"))
    target = tmp_path / "edgebench" / "core" / "errors.py"
    target.write_text(target.read_text() + "\n\ndef _late():\n    from edgebench.core import atomic\n")
    assert any("edgebench.core.errors" in c and "edgebench.core.atomic" in c for c in cycles(import_graph(tmp_path)))


# Imports sit at the top of a file. One inside a function needs a reason the test can check: a heavy or
# optional package (loaded only by the commands that need it; `edgebench --help` must not pay for
# TensorFlow), an optional-dependency probe (inside ``try`` ... ``except ImportError``), a file that runs
# on its own (the runner scripts pushed to a device import their siblings by path), or a ``# lazy: why``
# comment on the line or the one above.
LAZY_PACKAGES = {
    **dict.fromkeys(("tensorflow", "keras", "tf_keras", "tensorflow_model_optimization", "tensorboard",
                     "tensorboard_plugin_profile"), "TensorFlow: seconds to import, only for converting/running TF"),
    **dict.fromkeys(("torch", "litert_torch", "torchvision"), "the torch extra"),
    **dict.fromkeys(("ai_edge_litert", "tflite_runtime", "flatbuffers"), "the LiteRT runtime, loaded by the workers"),
    **dict.fromkeys(("ai_edge_quantizer", "litert_lm", "openvino", "onnxruntime", "otava", "apache_otava",
                     "ai_edge_model_explorer_adapter", "model_explorer", "psycopg2", "pynvml"), "an optional extra"),
    **dict.fromkeys(("scipy", "sklearn", "h5py", "PIL", "google", "adbutils", "sqlalchemy", "lxml", "ctypes",
                     "resource"), "heavy or platform-specific, only on the path that uses it"),
}
LAZY_MODULES = {"edgebench.store.db": "sqlalchemy (~0.2 s of every command's start), only for commands that store"}
STANDALONE = ("edgebench/targets/runner*.py", "edgebench/targets/model_io.py", "edgebench/targets/sim/*")


def function_level_imports(root: Path = ROOT) -> list[str]:
    """Imports inside functions without a reason this file accepts (see LAZY_PACKAGES)."""
    bad = []
    for path in sorted((root / "edgebench").rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if any(fnmatch.fnmatchcase(rel, pat) for pat in STANDALONE):
            continue
        text = path.read_text()
        lines = text.splitlines()
        tree = ast.parse(text)
        parent = {c: n for n in ast.walk(tree) for c in ast.iter_child_nodes(n)}
        for node in ast.walk(tree):
            if not isinstance(node, (ast.Import, ast.ImportFrom)) or getattr(node, "level", 0):
                continue
            chain, x = [], parent.get(node)
            while x is not None:
                chain.append(x)
                x = parent.get(x)
            if not any(isinstance(c, (ast.FunctionDef, ast.AsyncFunctionDef)) for c in chain):
                continue
            names = [node.module] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
            if all(n.split(".")[0] in LAZY_PACKAGES or n in LAZY_MODULES for n in names):
                continue
            probe = any(isinstance(c, ast.Try) and any(
                h.type is not None and any(isinstance(t, ast.Name) and t.id in ("ImportError", "ModuleNotFoundError")
                                           for t in (h.type.elts if isinstance(h.type, ast.Tuple) else [h.type]))
                for h in c.handlers) for c in chain)
            said = " ".join(lines[max(0, node.lineno - 2):node.end_lineno])
            reason = said.split("lazy:", 1)[1].split() if "lazy:" in said else []
            if probe or len(reason) >= 3:
                continue
            bad.append(f"{rel}:{node.lineno}: {lines[node.lineno - 1].strip()}")
    return bad


def test_imports_sit_at_the_top_unless_a_reason_says_why():
    bad = function_level_imports()
    assert not bad, ("imports inside functions with no reason (move them to the top of the file, or say why with "
                     "'# lazy: <why>'):\n" + "\n".join(bad))


def test_the_import_check_catches_a_planted_lazy_import(tmp_path):
    import shutil

    shutil.copytree(ROOT / "edgebench", tmp_path / "edgebench", ignore=shutil.ignore_patterns("__pycache__"))
    target = tmp_path / "edgebench" / "core" / "latency.py"
    target.write_text(target.read_text() + "\n\ndef _late():\n    import json\n    return json\n")
    assert any(b.startswith("edgebench/core/latency.py:") for b in function_level_imports(tmp_path))
