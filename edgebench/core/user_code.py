"""A user's own Python named on the command line (``--import``, ``--torch``): a module name or a
.py path, imported once per process; every failure is a one-line BadInput naming the flag."""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType

from edgebench.core.errors import BadInput, first_line


def import_user_module(spec: str, *, flag: str, file_name: str, what: str) -> ModuleType:
    """Import ``spec`` for ``flag``: a .py path (registered as ``file_name(path)``, reused while that
    name still holds the same file) or a module name searched on PYTHONPATH and the working folder.
    ``what`` finishes the hint: "give {what}"."""
    if spec.endswith(".py") or os.sep in spec:
        path = Path(spec).resolve()
        if not path.is_file():
            raise BadInput(f"{flag} {spec}: no such file; give {what}")
        name = file_name(path)
        held = sys.modules.get(name)
        if held is not None and getattr(held, "__file__", None) == str(path):
            return held
        loader = importlib.util.spec_from_file_location(name, path)
        if loader is None or loader.loader is None:
            raise BadInput(f"{flag} {spec}: not a Python module file")
        mod = importlib.util.module_from_spec(loader)
        sys.modules[name] = mod
        try:
            loader.loader.exec_module(mod)
        except Exception as e:  # noqa: BLE001 -- the user's module failed to run
            sys.modules.pop(name, None)
            raise BadInput(f"{flag} {spec}: importing it failed ({type(e).__name__}: {first_line(e)}); fix the "
                           "module or its dependencies") from None
        return mod
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.append(cwd)   # `edgebench` run from the folder holding the user's module
    try:
        return importlib.import_module(spec)
    except ModuleNotFoundError as e:
        raise BadInput(f"{flag} {spec}: no module named {e.name!r} (searched PYTHONPATH and {cwd}); give {what}") from None
    except Exception as e:  # noqa: BLE001
        raise BadInput(f"{flag} {spec}: importing it failed ({type(e).__name__}: {first_line(e)}); fix the "
                       "module or its dependencies") from None
