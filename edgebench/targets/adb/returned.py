"""What a device sends back is bounded before it is loaded: a corrupted run or a hostile device
must not make the host allocate or write more than the job can legitimately produce.

* ``result.json`` is at most ``RESULT_JSON_MAX_BYTES``;
* ``result.npz`` is at most ``npz_limit(job)`` bytes on the wire (``AdbDevice.pull`` refuses a
  larger file before the transfer and stops one that grows past it), and every member is checked
  from its ``.npy`` header *before* any array is read: a plain numeric dtype (never objects), the
  declared size within the limit, per-inference sample arrays one-dimensional int64 and no longer
  than the job can time (``max_samples(job)``).
"""

from __future__ import annotations

import json
import math
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from edgebench.core.bounded import printable_data
from edgebench.core.errors import InfraError

RESULT_JSON_MAX_BYTES = 16 * 1024 * 1024
# Output tensors of every input sample (the drift pass): 256 MiB is ~1000 samples of a
# 224x224x64 float feature map; larger outputs need a smaller --samples.
OUTPUTS_MAX_BYTES = 256 * 1024 * 1024
# The fastest inference counted when only a time budget bounds the sample count: 1 us (an
# empty LiteRT invoke() costs more than that on any CPU this runs on).
MIN_INFERENCE_S = 1e-6
SAMPLE_ARRAYS = ("samples_ns", "warmup_ns", "service_ns")


def max_samples(job: Any) -> int:
    """The most per-inference samples one array of this job can hold: its ``runs`` when given
    (warm-up runs counted too), else every run its time budgets allow at 1 us each."""
    warm = int(job.warmup_runs) + math.ceil(float(job.warmup_time_s) / MIN_INFERENCE_S)
    timed = int(job.runs) if job.runs is not None else math.ceil(float(job.max_time_s) / MIN_INFERENCE_S)
    return max(timed, int(job.min_runs)) + warm


def npz_limit(job: Any) -> int:
    """Bytes a result.npz of this job can legitimately hold (samples arrays + outputs + zip overhead)."""
    return 8 * max_samples(job) * len(SAMPLE_ARRAYS) + OUTPUTS_MAX_BYTES + 64 * 1024


def load_json(path: Path, where: str) -> dict[str, Any]:
    size = path.stat().st_size
    if size > RESULT_JSON_MAX_BYTES:
        raise InfraError(f"{where}: result.json is {size} bytes (limit {RESULT_JSON_MAX_BYTES}); refusing to "
                         "parse it; rerun, and check the device if it repeats")
    try:
        meta = json.loads(path.read_text(encoding="utf-8", errors="replace"))
    except RecursionError:
        raise InfraError(f"{where}: result.json is nested too deeply to be a runner's result; rerun") from None
    except ValueError as exc:
        raise InfraError(f"{where}: result.json is not valid JSON ({exc}); the transfer was cut or the runner "
                         "crashed while writing it; rerun") from None
    if not isinstance(meta, dict):
        raise InfraError(f"{where}: result.json holds a {type(meta).__name__}, not an object; rerun")
    return printable_data(meta)     # its strings reach messages and tables: no terminal control codes


def load_npz(path: Path, job: Any, where: str) -> dict[str, np.ndarray]:
    """The arrays of a device's result.npz, after checking every member's header against the job."""
    limit = npz_limit(job)
    n_max = max_samples(job)
    size = path.stat().st_size
    if size > limit:
        raise InfraError(f"{where}: result.npz is {size} bytes, more than the {limit} this run can produce; "
                         "refusing to load it")

    def bad(msg: str) -> InfraError:
        return InfraError(f"{where}: result.npz {msg}; refusing to load it (a corrupted run or a hostile "
                          "device); rerun, and check the device if it repeats")

    total = 0
    try:
        with zipfile.ZipFile(path) as zf:
            for info in zf.infolist():
                name = info.filename
                if not name.endswith(".npy"):
                    raise bad(f"member {name!r} is not an .npy array")
                if info.file_size > limit:
                    raise bad(f"member {name!r} declares {info.file_size} bytes (limit {limit})")
                with zf.open(info) as fh:
                    version = np.lib.format.read_magic(fh)
                    read_header = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                                   else np.lib.format.read_array_header_2_0)
                    shape, _fortran, dtype = read_header(fh)
                if dtype.hasobject or dtype.kind not in "biuf":
                    raise bad(f"array {name[:-4]!r} has dtype {dtype}, not plain numbers")
                n_bytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize if shape else dtype.itemsize
                total += n_bytes
                if n_bytes > info.file_size or total > limit:
                    raise bad(f"array {name[:-4]!r} declares shape {shape} ({n_bytes} bytes) but the member holds "
                              f"{info.file_size} bytes, or the arrays exceed {limit} bytes together")
                key = name[:-4]
                if key in SAMPLE_ARRAYS and (len(shape) != 1 or dtype != np.dtype("<i8") or shape[0] > n_max):
                    raise bad(f"array {key!r} has shape {shape} and dtype {dtype}; a run of this job has at most "
                              f"{n_max} int64 samples")
    except zipfile.BadZipFile as exc:
        raise bad(f"is not a zip archive ({exc})") from None
    except ValueError as exc:     # a malformed .npy header
        raise bad(f"has a malformed array header ({exc})") from None
    with np.load(path, allow_pickle=False) as z:
        return {k: z[k] for k in z.files}
