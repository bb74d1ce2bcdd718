"""The JSON result envelope shared by every producer (bench, compare, train, import-log).

A result is a plain dict so that the store can hold it unchanged::

    {
      "schema_version": 1,
      "kind": "bench" | "compare" | "train" | "import-log",
      "created": "2026-12-02T10:00:00+00:00",
      "edgebench_version": "0.1.0",
      "fingerprint": {...host fingerprint...},
      "rows": [ {...one row per model x precision x target (or training cell)...} ],
      ...kind-specific keys ("reference", "gate", "inputs", "manifest", ...)
    }

Row keys understood by the store and reports (all optional except ``status``):
``model, model_path, model_sha256, precision, target, device_model, status ("ok"|"failed"|
"skipped"), error, latency_ms {mean std min max p50 p90 p95 p99 p999 samples p99_valid qps ...},
samples_ns [int...], size_bytes, size_reduction_pct, accuracy {top1, top1_drop_pp, ...},
drift {output_name: {...}}, batch_size, examples_per_s, step_time_ms {...}, fingerprint``.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from edgebench import SCHEMA_VERSION, __version__
from edgebench.core.atomic import write_stdout, write_text
from edgebench.core.bounded import printable_data, read_json
from edgebench.core.errors import BadInput


def now_iso() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def envelope(kind: str, rows: list[dict[str, Any]], fingerprint: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """Wrap rows into the versioned result document."""
    doc = {
        "schema_version": SCHEMA_VERSION,
        "kind": kind,
        "created": now_iso(),
        "edgebench_version": __version__,
        "fingerprint": fingerprint,
        "rows": rows,
    }
    doc.update(extra)
    return doc


def to_jsonable(obj: Any) -> Any:
    """Recursively convert numpy scalars/arrays, Paths, tuples and non-finite floats."""
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return to_jsonable(obj.tolist())
    if isinstance(obj, np.generic):
        return to_jsonable(obj.item())
    if isinstance(obj, float):
        if math.isnan(obj) or math.isinf(obj):
            return None if math.isnan(obj) else ("inf" if obj > 0 else "-inf")
        return obj
    if isinstance(obj, Path):
        return str(obj)
    if hasattr(obj, "to_dict"):
        return to_jsonable(obj.to_dict())
    return obj


def dumps(doc: dict[str, Any]) -> str:
    return json.dumps(to_jsonable(doc), indent=2, sort_keys=False)


def write_json(doc: dict[str, Any], path: str) -> None:
    """Write a result to PATH, or to stdout when PATH is '-' (all of it, or ``StdoutNotWritable``)."""
    text = dumps(doc)
    if path == "-":

        write_stdout(text + "\n")
        return

    write_text(path, text + "\n")


# The largest result file ``results import`` reads: a sustained bench of 10,000,000 raw samples
# writes ~200 MB of JSON.
RESULT_MAX_BYTES = 512 * 1024 ** 2


def load_result_file(path: str) -> dict[str, Any]:
    """Read a result JSON written by ``--json`` (an envelope with ``kind`` and ``rows``), within
    ``RESULT_MAX_BYTES``; its strings come back without terminal control characters (they are shown
    in tables later), and nothing it names (paths, files) is opened."""
    p = Path(path)
    try:
        doc = read_json(p, RESULT_MAX_BYTES, "a result document", "give a file written with --json")
    except FileNotFoundError:
        raise BadInput(f"{path}: no such file; give a result JSON written with --json") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BadInput(f"{path}: not a readable JSON result ({exc}); give a file written with --json") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("rows"), list) or not doc.get("kind"):
        raise BadInput(f"{path}: not an edgebench result (needs 'kind' and a 'rows' list); give a file "
                       "written with --json")
    return printable_data(doc)
