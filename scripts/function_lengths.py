"""The longest functions in edgebench/ (issue 43: "the house shows its plan").

Every ``def`` / ``async def`` (nested ones and methods included), measured with ``ast`` as
``end_lineno - lineno + 1`` (decorators not counted, the docstring and comments counted).

    python scripts/function_lengths.py [--top N] [--over LINES] [ROOT]

prints the N longest (default 10) and how many are over LINES lines (default 100).
"""

from __future__ import annotations

import argparse
import ast
from pathlib import Path


def lengths(root: Path) -> list[tuple[int, str, str]]:
    """(lines, file:line, qualified name) for every function under ROOT, longest first."""
    out = []
    base = root.resolve().parent
    for path in sorted(root.resolve().rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        stack: list[tuple[ast.AST, str]] = [(tree, "")]
        while stack:
            node, prefix = stack.pop()
            for child in ast.iter_child_nodes(node):
                name = prefix
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    name = f"{prefix}{child.name}."
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    out.append((child.end_lineno - child.lineno + 1, f"{path.relative_to(base)}:{child.lineno}", name[:-1]))
                stack.append((child, name))
    return sorted(out, key=lambda t: (-t[0], t[1]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("root", nargs="?", default=str(Path(__file__).resolve().parent.parent / "edgebench"))
    ap.add_argument("--top", type=int, default=10)
    ap.add_argument("--over", type=int, default=100)
    args = ap.parse_args()
    found = lengths(Path(args.root))
    for n, where, name in found[:args.top]:
        print(f"{n:5d}  {where}  {name}")
    over = sum(1 for n, _, _ in found if n > args.over)
    print(f"{over} of {len(found)} functions are over {args.over} lines")


if __name__ == "__main__":
    main()
