"""``python -m edgebench`` == the ``edgebench`` console script (``launch``).

A command that opens a model file with a loader that can run code (Keras, tf-keras, SavedModel
restore, the TFLite converter, ``torch.export.load``, the TF and PyTorch references, diagnose's
workers) runs confined (``core/confine.py``): this launcher decides what the command may write
(its output paths, edgebench's cache and data folders), what of the user's home it may read (what
the command names), and whether it keeps the network (only when it names a destination), then runs
``python -m edgebench ...`` inside the sandbox. Everything else runs here, unconfined. ``--no-sandbox``
(or ``EDGEBENCH_SANDBOX=off``) runs a confined command without the sandbox, by name only:
``--trust-model`` lifts the consent checks, never the confinement.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

from edgebench.cli import run
from edgebench.core.confine import CONFINED_ENV, MECHANISM, Sandbox, available, python_paths, run_confined
from edgebench.core.paths import cache_dir_path, data_dir_path

# Commands that open a model through a loader that can run code. The others read .tflite files
# (LiteRT runs no Python), logs, bundles or the store.
CONFINED_COMMANDS = frozenset({"convert", "convert-and-compare", "diagnose", "compare", "readiness", "matrix"})
# Options whose value is a path the command writes: a folder (bound itself) or a file (its folder).
FOLDER_OUTPUTS = frozenset({"--out", "-o", "--profile-dir"})
FILE_OUTPUTS = frozenset({"--json", "--markdown", "--junit", "--html", "--model-explorer", "--textfile", "--lock"})
NO_SANDBOX = "--no-sandbox"


def _options(args: list[str]) -> list[tuple[str, str]]:
    """(option, value) pairs of ``--opt value`` and ``--opt=value`` (a flag pairs with what follows;
    harmless: only known names are looked up)."""
    pairs = []
    for i, a in enumerate(args):
        if a.startswith("-") and "=" in a:
            name, _, value = a.partition("=")
            pairs.append((name, value))
        elif a.startswith("-") and i + 1 < len(args):
            pairs.append((a, args[i + 1]))
    return pairs


def _is_url(value: str) -> bool:
    return "://" in value and not value.startswith(("sqlite", "file:"))


def network_reason(args: list[str], env: dict[str, str]) -> str | None:
    """Why the command needs the network, or None: a destination it names."""
    for name, value in _options(args):
        if name == "--pushgateway" and value:
            return "--pushgateway"
        if name == "--db" and _is_url(value):
            return "--db (a database server)"
        if name in ("--targets", "-t") and "adb" in value:
            return "--targets (adb devices)"
    if "--db" not in args and _is_url(env.get("EDGEBENCH_DB", "")):
        return "$EDGEBENCH_DB (a database server)"
    if args and args[0] == "matrix":
        for a in args[1:]:
            if a.endswith((".yaml", ".yml")) and os.path.isfile(a):
                try:
                    text = Path(a).read_text(encoding="utf-8", errors="replace")[:1_000_000]
                except OSError:
                    continue
                if "adb" in text or "pushgateway" in text or "://" in text:
                    return f"{a} names adb devices or a network store"
    return None


def sandbox_for(args: list[str], env: dict[str, str]) -> Sandbox:
    """The sandbox of one command line: what it may write, read and reach."""
    writable: list[str] = []
    for name, value in _options(args):
        if not value or value == "-":
            continue
        if name in FOLDER_OUTPUTS:
            _mkdir(value) and writable.append(value)
        elif name in FILE_OUTPUTS or (name == "--db" and not _is_url(value)):
            path = value.split("///", 1)[1] if value.startswith("sqlite") and "///" in value else value
            writable.append(str(Path(path).parent))
            if os.path.isdir(path):           # a folder given as a file: the command says so itself
                writable.append(path)
    if not any(name in FOLDER_OUTPUTS for name, _ in _options(args)) and _mkdir("edgebench-out"):
        writable.append("edgebench-out")
    for folder in (cache_dir_path(), data_dir_path()):
        if _mkdir(str(folder)):
            writable.append(str(folder))
    db = env.get("EDGEBENCH_DB", "")
    if db and not _is_url(db):
        writable.append(str(Path(db.split("///", 1)[-1]).parent))
    summary = env.get("GITHUB_STEP_SUMMARY")
    if summary:
        writable.append(str(Path(summary).parent))
    readable = [os.getcwd(), *python_paths()]
    readable += [a.partition("=")[2] if a.startswith("-") else a for a in args]
    if args and args[0] == "matrix":
        readable += _paths_named_in(args[1:])
    for value in env.values():                 # paths the environment names (PYTHONPATH, a Vulkan ICD, ...)
        readable += [v for v in value.split(os.pathsep) if v.startswith("/")]
    return Sandbox(writable=tuple(writable), readable=tuple(readable),
                   network=network_reason(args, env) is not None)


def _paths_named_in(args: list[str]) -> list[str]:
    """Existing paths a matrix file names (its models, data, gate files), read-only in the sandbox."""
    found: list[str] = []
    for a in args:
        if not a.endswith((".yaml", ".yml")) or not os.path.isfile(a):
            continue
        try:
            text = Path(a).read_text(encoding="utf-8", errors="replace")[:1_000_000]
        except OSError:
            continue
        for token in re.split(r"[\s\[\],:'\"{}]+", text):
            if "/" in token or token.endswith((".tflite", ".keras", ".h5", ".npz", ".npy", ".yaml", ".pt2")):
                for base in (Path(a).parent, Path.cwd()):
                    p = base / token
                    if p.exists():
                        found.append(str(p))
        found.append(str(Path(a).resolve().parent))
    return found


def _mkdir(path: str) -> bool:
    try:
        Path(path).mkdir(parents=True, exist_ok=True)
    except OSError:
        return False                           # the command itself says why it cannot write there
    return True


def launch(argv: list[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    env = dict(os.environ)
    command = args[0] if args else ""
    wanted = (command in CONFINED_COMMANDS and CONFINED_ENV not in env and NO_SANDBOX not in args
              and env.get("EDGEBENCH_SANDBOX", "on").lower() not in ("off", "0", "no")
              and "--help" not in args and "-h" not in args)
    if wanted:
        works, why = available()
        if works:
            code = run_confined([sys.executable, "-m", "edgebench", *args], sandbox_for(args, env))
            sys.stdout.flush()
            os._exit(code)
        print(f"warning: {command} runs without a sandbox: {why}; the model checks still apply "
              "(docs/security.md)", file=sys.stderr)
        os.environ[CONFINED_ENV] = "none"

    run()


if __name__ == "__main__":
    launch()
