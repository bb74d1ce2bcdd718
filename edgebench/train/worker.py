"""One worker of a multi-worker training baseline: ``python -m edgebench.train.worker``.

Started by ``edgebench train-baseline --strategy multiworker`` (``edgebench.train.multiworker.WorkerGroup``)
with ``TF_CONFIG`` naming every worker on loopback ports, or by hand on each machine of a real
cluster with that cluster's ``TF_CONFIG``. It reads the sweep from ``--spec`` (JSON: ``settings``
as ``TrainSettings`` fields and ``cells``), runs every cell under one
MultiWorkerMirroredStrategy and rewrites ``--out`` after each cell, so a later crash keeps the
rows already measured. Exit status: 0 when every cell produced a row (ok or failed), 2 for bad
input, 3 when the worker itself could not run.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from edgebench.core.errors import EdgebenchError
from edgebench.core.result_file import dumps
from edgebench.train.multiworker import run_worker_cells
from edgebench.train.settings import Cell, TrainSettings


def _write(out: Path, rows: list) -> None:
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(dumps({"rows": rows}) + "\n")
    tmp.replace(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m edgebench.train.worker", description=__doc__.splitlines()[0])
    ap.add_argument("--spec", required=True, help="JSON file: {'settings': {...}, 'cells': [...]}")
    ap.add_argument("--out", required=True, help="where this worker writes its rows (JSON)")
    args = ap.parse_args(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


    try:
        spec = json.loads(Path(args.spec).read_text())
        settings = TrainSettings.from_dict(spec["settings"])
        cells = [Cell(**c) for c in spec["cells"]]
    except (OSError, ValueError, KeyError, TypeError) as e:
        print(f"error: --spec {args.spec}: not a train-baseline worker spec ({e})", file=sys.stderr)
        return 2
    if "TF_CONFIG" not in os.environ:
        print("error: TF_CONFIG is not set; it names the cluster and this worker's index", file=sys.stderr)
        return 2
    out = Path(args.out)
    try:
        run_worker_cells(settings, cells, on_row=lambda rows: _write(out, rows))
    except EdgebenchError as e:
        print(f"error: {e}", file=sys.stderr)
        return e.exit_code
    return 0


if __name__ == "__main__":
    sys.exit(main())
