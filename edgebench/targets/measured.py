"""A run's measured facts as the fields of its result row: the one ``RunResult`` -> row builder that
``bench`` and convert-and-compare / compare share, so a fact the worker reports reaches every
row the same way (latency from the raw samples, warm-up, load and first-inference times, memory,
the collector, inputs, state, per-process repeats)."""

from __future__ import annotations

from typing import Any

from edgebench.rows import Latency, Warmup
from edgebench.targets.base import RunResult

# Worker facts that become typed row fields here (and so are not repeated in a row's ``extra``).
TYPED_FACTS = ("stop_reason", "input_source", "n_input_samples", "nonfinite_outputs", "rss_before_load_bytes",
               "memory", "gc", "input_mapping", "state", "repeats", "repeat_warnings")


def preemptions(run: RunResult) -> int | None:
    """The worker's involuntary context switches during its timed loop(s) (``timed_rusage``; the
    sum over ``--repeats``' processes), or None when the worker did not report them."""
    ru = run.extra.get("timed_rusage")
    v = ru.get("involuntary_switches") if isinstance(ru, dict) else None
    return int(v) if isinstance(v, (int, float)) else None


def measured_fields(run: RunResult, what: str, latency: Latency | None = None) -> dict[str, Any]:
    """``InferenceRow`` keyword arguments for what ``run`` measured (``what`` names the run in
    latency warnings; ``latency``: already derived from ``run.samples_ns``). Identity (model,
    precision, target, status) is the caller's."""
    ex = run.extra
    samples = tuple(int(x) for x in run.samples_ns)
    reps = ex.get("repeats")
    return {
        "latency": latency if latency is not None else Latency.from_samples(run.samples_ns, what=what,
                                                                            preemptions=preemptions(run))
        if samples else None,
        "samples_ns": samples, "warmup": Warmup.from_samples(run.warmup_ns),
        "init_ms": run.init_ms, "first_inference_ms": run.first_inference_ms,
        "peak_rss_bytes": run.peak_rss_bytes, "rss_before_load_bytes": ex.get("rss_before_load_bytes"),
        "runtime": run.runtime, "method": run.method, "sample_class": run.sample_class,
        "fingerprint": run.fingerprint, "device_model": (run.fingerprint or {}).get("device_model"),
        "threads": ex.get("threads"), "delegate": ex.get("delegate"),
        "stop_reason": ex.get("stop_reason"), "input_source": ex.get("input_source"),
        "input_samples": ex.get("n_input_samples"), "nonfinite_outputs": ex.get("nonfinite_outputs") or {},
        "outputs_saved": {k: list(v.shape) for k, v in run.outputs.items()} if run.outputs is not None else None,
        "memory": ex.get("memory"), "gc": ex.get("gc"), "input_mapping": ex.get("input_mapping"),
        "state": ex.get("state"), "repeats": None if reps is None else tuple(reps),
    }
