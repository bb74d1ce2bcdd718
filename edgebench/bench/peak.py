"""This machine's peak float32 GFLOP/s, measured once and cached, for "% of peak".

Method: a large float32 matrix multiply (numpy -> its BLAS, FMA-vectorised), n x n with
n = 2048 (2 n^3 FLOPs, about 17 GFLOP), best of several repeats, measured in a fresh Python
process with the BLAS thread count pinned (``OPENBLAS_NUM_THREADS``/``OMP_NUM_THREADS``/
``MKL_NUM_THREADS``) -- once with 1 thread and once with every core; on AVX-512 CPUs also with
OpenBLAS's AVX-512 kernels forced (it picks AVX2 ones on CPUs it does not recognise), keeping
the faster. It is an attainable
peak for dense float32 GEMM on this machine, not the datasheet number; INT8 kernels can beat
it (so INT8 "% of peak" can exceed what FP32 can reach -- read it as FP32-equivalent).

Cached as JSON at ``cache_dir()/peak_gflops.json``; ``edgebench env --peak`` (re)measures.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

from edgebench.core.atomic import write_text
from edgebench.core.errors import InfraError
from edgebench.core.fingerprint import host_fingerprint
from edgebench.core.paths import cache_dir
from edgebench.core.result_file import now_iso

CACHE_NAME = "peak_gflops.json"
DEFAULT_N = 2048
DEFAULT_REPEATS = 5

_PROBE = r"""
import json, sys, time
import numpy as np
n, repeats = int(sys.argv[1]), int(sys.argv[2])
rng = np.random.default_rng(0)
a = rng.standard_normal((n, n), dtype=np.float32)
b = rng.standard_normal((n, n), dtype=np.float32)
a @ b  # warm up BLAS threads and caches
best = float("inf")
for _ in range(repeats):
    t0 = time.perf_counter()
    a @ b
    best = min(best, time.perf_counter() - t0)
print(json.dumps({"seconds": best, "gflops": 2.0 * n ** 3 / best / 1e9}))
"""


def cache_path():
    return cache_dir() / CACHE_NAME


def _cpu_flags() -> set[str]:
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def _coretypes() -> list[str | None]:
    """OpenBLAS kernels to try: the configured one (None = $OPENBLAS_CORETYPE or autodetect)
    and, on AVX-512 CPUs, 'SkylakeX'. OpenBLAS falls back to its AVX2 'Haswell' kernels on CPUs
    it does not know (e.g. AMD family 26), which halves the attainable peak there; the faster
    kernel is kept, and a kernel whose probe fails is skipped."""
    out: list[str | None] = [None]
    if "avx512f" in _cpu_flags() and os.environ.get("OPENBLAS_CORETYPE", "").lower() != "skylakex":
        out.append("SkylakeX")
    return out


def _probe(threads: int, n: int, repeats: int, coretype: str | None = None) -> float:
    env = dict(os.environ)
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        env[var] = str(threads)
    if coretype:
        env["OPENBLAS_CORETYPE"] = coretype
    try:
        out = subprocess.run([sys.executable, "-c", _PROBE, str(n), str(repeats)],  # noqa: S603
                             capture_output=True, text=True, env=env, timeout=600, check=False)
    except subprocess.TimeoutExpired:
        raise InfraError("peak GFLOP/s probe took over 600 s; the machine is overloaded, retry later") from None
    if out.returncode != 0:
        last = (out.stderr.strip().splitlines() or ["no output"])[-1]
        raise InfraError(f"peak GFLOP/s probe failed: {last}")
    return float(json.loads(out.stdout.strip().splitlines()[-1])["gflops"])


def measure_peak(n: int = DEFAULT_N, repeats: int = DEFAULT_REPEATS) -> dict[str, Any]:
    """Measure and cache {peak_gflops (all cores), peak_gflops_1thread, ...}."""
    cores = os.cpu_count() or 1
    best = {}
    first_error: InfraError | None = None
    for ct in _coretypes():
        try:
            one_ct = _probe(1, n, repeats, ct)
            all_ct = _probe(cores, n, repeats, ct) if cores > 1 else one_ct
        except InfraError as err:
            first_error = first_error or err
            continue
        best[ct or os.environ.get("OPENBLAS_CORETYPE") or "default"] = (one_ct, all_ct)
    if not best:
        raise first_error or InfraError("peak GFLOP/s probe failed")
    kernel = max(best, key=lambda k: best[k][1])
    one, allc = best[kernel]
    fp = host_fingerprint()
    doc = {
        "peak_gflops": max(allc, one),
        "peak_gflops_1thread": one,
        "cores": cores,
        "method": f"numpy float32 matmul {n}x{n}, best of {repeats}, BLAS threads pinned, "
                  f"OpenBLAS kernel {kernel}",
        "by_kernel": {k: {"1thread": v[0], "all": v[1]} for k, v in best.items()},
        "numpy": fp.get("numpy"),
        "cpu_model": fp.get("cpu_model"),
        "hostname": fp.get("hostname"),
        "measured": now_iso(),
    }
    p = cache_path()

    write_text(p, json.dumps(doc, indent=2) + "\n")
    return doc


def load_cached() -> dict[str, Any] | None:
    """The cached measurement for this machine, or None (then bench prints no % of peak)."""
    p = cache_path()
    if not p.is_file():
        return None
    try:
        doc = json.loads(p.read_text())
    except (OSError, ValueError):
        return None

    fp = host_fingerprint()
    if doc.get("cpu_model") != fp.get("cpu_model") or doc.get("hostname") != fp.get("hostname"):
        return None  # measured on another machine (shared cache dir): do not reuse
    return doc


def peak_for_threads(peak: dict[str, Any], threads: int | None) -> float:
    """Peak GFLOP/s matching a thread count: 1 thread -> single-core peak, None or >= cores ->
    all-core peak, in between -> linear in threads (capped at the all-core peak)."""
    cores = int(peak.get("cores") or 1)
    full = float(peak["peak_gflops"])
    one = float(peak.get("peak_gflops_1thread") or full / cores)
    if threads is None or threads >= cores:
        return full
    return min(full, one * threads)
