"""Hand-built result documents (realistic values) for the report/export tests.

Shapes follow edgebench/core/result_file.py: a "compare" doc from convert-and-compare (reference row on
the TF target, one row per precision on host LiteRT), a "bench" doc with a concurrency sweep and
a "train" doc with a batch-size sweep.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest


def _samples(median_ms: float, n: int, seed: int) -> list[int]:
    rng = np.random.default_rng(seed)
    s = rng.lognormal(mean=np.log(median_ms * 1e6), sigma=0.12, size=n)
    return [int(x) for x in s]


def _latency(samples_ns: list[int]) -> dict:
    a = np.asarray(samples_ns, dtype=np.float64) / 1e6
    return {
        "mean": float(a.mean()), "std": float(a.std()), "min": float(a.min()), "max": float(a.max()),
        "p50": float(np.percentile(a, 50)), "p90": float(np.percentile(a, 90)),
        "p95": float(np.percentile(a, 95)), "p99": float(np.percentile(a, 99)),
        "samples": int(a.size), "p99_valid": a.size >= 662, "qps": float(1e3 / a.mean()),
    }


FINGERPRINT = {
    "hostname": "ci-runner-7", "os": "Linux 6.1.0-27-amd64", "arch": "x86_64",
    "cpu_model": "AMD EPYC 7B13", "cpu_count": 2, "python": "3.11.2", "numpy": "2.4.0",
    "tensorflow": "2.21.0", "litert": "2.3.0", "edgebench": "0.1.0", "cuda": None, "cudnn": None,
    "governor": None, "threads": 2, "delegate": "xnnpack",
}


def make_compare_doc(model: str = "mobilenet_v2_035", run_id: str = "r-compare-1",
                     created: str = "2026-12-02T10:00:00+00:00", seed: int = 0,
                     p99_scale: float = 1.0) -> dict:
    ref_samples = _samples(9.8 * p99_scale, 700, seed)
    ref = {
        "model": model, "precision": "fp32", "target": "tf", "status": "ok",
        "model_sha256": "3f" * 32, "size_bytes": 7_340_120,
        "latency_ms": _latency(ref_samples), "samples_ns": ref_samples,
        "accuracy": {"top1": 0.7125},
    }
    rows = []
    specs = [
        ("fp32", 6_952_448, 4.1, 0.7125, 0.0, 1.0, 1.0,
         {"max_abs": 2.4e-6, "mean_abs": 3.1e-7, "rmse": 4.4e-7, "rel_l2": 1.2e-6, "cosine": 1.0, "psnr_db": 131.2, "nan": 0, "inf": 0}),
        ("fp16", 3_489_792, 4.3, 0.7125, 0.0, 0.998, 1.0,
         {"max_abs": 1.9e-3, "mean_abs": 2.2e-4, "rmse": 3.0e-4, "rel_l2": 8.1e-4, "cosine": 0.99999, "psnr_db": 70.4, "nan": 0, "inf": 0}),
        ("int8", 1_861_632, 2.6, 0.6975, 1.5, 0.953, 0.991,
         {"max_abs": 0.081, "mean_abs": 6.3e-3, "rmse": 9.9e-3, "rel_l2": 0.031, "cosine": 0.9995, "psnr_db": 40.1, "nan": 0, "inf": 0}),
        ("dynamic", 1_902_080, 5.9, 0.7100, 0.25, 0.981, 0.998,
         {"max_abs": 0.021, "mean_abs": 1.4e-3, "rmse": 2.2e-3, "rel_l2": 7.0e-3, "cosine": 0.99997, "psnr_db": 53.0, "nan": 0, "inf": 0}),
    ]
    for i, (prec, size, med, top1, drop, agree1, agree5, drift) in enumerate(specs):
        s = _samples(med * p99_scale, 700, seed + i + 1)
        rows.append({
            "model": model, "model_path": f"/tmp/build/{model}_{prec}.tflite",
            "model_sha256": f"{i:02x}" * 32, "precision": prec, "target": "host",
            "device_model": None, "status": "ok", "size_bytes": size,
            "size_reduction_pct": round(100.0 * (1 - size / ref["size_bytes"]), 2),
            "latency_ms": _latency(s), "samples_ns": s,
            "accuracy": {"top1": top1, "top1_drop_pp": drop, "top1_agreement": agree1, "top5_agreement": agree5},
            "drift": {"logits": drift, "features": {**{k: v * 2 for k, v in drift.items() if k in ("max_abs", "mean_abs", "rmse", "rel_l2")},
                                                    "cosine": drift["cosine"], "psnr_db": drift["psnr_db"] - 6.0,
                                                    "nan": 0, "inf": 0}},
        })
    return {
        "schema_version": 1, "kind": "compare", "created": created, "edgebench_version": "0.1.0",
        "fingerprint": dict(FINGERPRINT), "rows": rows, "reference": ref, "run_id": run_id,
    }


def make_bench_doc(model: str = "mobilenet_v2_035", run_id: str = "r-bench-1") -> dict:
    rows = []
    for i, (target, dev, med) in enumerate([("host", None, 4.2), ("adb:emulator-5554", "Pixel 7", 11.5)]):
        s = _samples(med, 800, 40 + i)
        lat = _latency(s)
        rows.append({
            "model": model, "precision": "int8", "target": target, "device_model": dev, "status": "ok",
            "size_bytes": 1_861_632, "latency_ms": lat, "samples_ns": s,
            "concurrency": [
                {"level": c, "qps": lat["qps"] * c * 0.85 ** (c - 1), "completed": 800 * c,
                 "p50_ms": lat["p50"] * (1 + 0.25 * (c - 1)), "p99_ms": lat["p99"] * (1 + 0.3 * (c - 1)),
                 "latency_ms": {"p99": lat["p99"] * (1 + 0.3 * (c - 1)), "samples": 800 * c}}
                for c in (1, 2, 4)
            ],
        })
    rows.append({"model": model, "precision": "int8", "target": "adb:0123ABCD", "device_model": "Galaxy A52",
                 "status": "failed", "error": "device lost"})
    return {"schema_version": 1, "kind": "bench", "created": "2026-12-02T10:05:00+00:00",
            "edgebench_version": "0.1.0", "fingerprint": dict(FINGERPRINT), "rows": rows, "run_id": run_id}


def make_train_doc(model: str = "resnet_tiny", run_id: str = "r-train-1") -> dict:
    rows = []
    for xla in (False, True):
        for bs, eps in ((16, 410.0), (32, 702.5), (64, 1093.0), (128, 1311.9)):
            eps = eps * (1.18 if xla else 1.0)
            rows.append({
                "model": model, "precision": "fp32", "target": "train:none", "batch_size": bs, "xla": xla,
                "strategy": "none", "input_pipeline": "optimized", "status": "ok", "examples_per_s": round(eps, 1),
                "step_time_ms": {"mean": 1e3 * bs / eps, "p50": 1e3 * bs / eps * 0.99,
                                 "p99": 1e3 * bs / eps * 1.2, "samples": 50},
            })
    return {"schema_version": 1, "kind": "train", "created": "2026-12-02T10:10:00+00:00",
            "edgebench_version": "0.1.0", "fingerprint": dict(FINGERPRINT), "rows": rows, "run_id": run_id}


@pytest.fixture
def compare_doc() -> dict:
    return make_compare_doc()


@pytest.fixture
def bench_doc() -> dict:
    return make_bench_doc()


@pytest.fixture
def train_doc() -> dict:
    return make_train_doc()


@pytest.fixture
def evil_doc() -> dict:
    """A compare doc whose names hold every character Prometheus/HTML/Markdown must escape."""
    doc = make_compare_doc(model='<script>alert("x")</script> m\\o|d\nel ünï/códe', run_id="run/with/slashes")
    doc["rows"][0]["drift"]['out"put\\1'] = copy.deepcopy(doc["rows"][0]["drift"]["logits"])
    doc["rows"][1]["device_model"] = 'Pixel "7" Pro\\a/b'
    return doc


def parse_exposition(text: str) -> list[tuple[str, dict[str, str], str]]:
    """Prometheus text exposition -> [(metric name, labels (unescaped), value text)].

    An independent reader for the tests: it walks label values character by character and
    undoes the three escapes the format defines (backslash, double quote, newline).
    """
    out = []
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        i = 0
        while i < len(line) and line[i] not in "{ ":
            i += 1
        name, labels = line[:i], {}
        if i < len(line) and line[i] == "{":
            i += 1
            while line[i] != "}":
                j = line.index("=", i)
                lname = line[i:j]
                assert line[j + 1] == '"', line
                k, val = j + 2, []
                while line[k] != '"':
                    if line[k] == "\\":
                        nxt = line[k + 1]
                        val.append({"n": "\n", "\\": "\\", '"': '"'}[nxt])
                        k += 2
                    else:
                        val.append(line[k])
                        k += 1
                labels[lname] = "".join(val)
                i = k + 1
                if line[i] == ",":
                    i += 1
            i += 1
        value = line[i:].strip().split()[0]
        out.append((name, labels, value))
    return out


def run_cli(*args: str) -> int:
    """Run the edgebench CLI in-process; return its exit code."""
    from edgebench.cli import main

    try:
        return main([str(a) for a in args])
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 1


@pytest.fixture
def sqlite_store(tmp_path):
    """A real SQLite results store in tmp_path; yields (url, Store)."""
    from edgebench.store.db import Store

    url = str(tmp_path / "results.db")
    with Store(url) as st:
        yield url, st
