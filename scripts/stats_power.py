#!/usr/bin/env python3
"""How often does `results compare` catch a real tail regression, and how often does it cry wolf?

Reproduces the audit's two figures on simulated latency runs (audit W2 and W4), end to end
through the results store and the comparison `edgebench results compare` runs:

* W2 -- 200 regressions where the p99 doubled under an unchanged body (2.5 % of the samples form
  a tail; the tail moved from ~1.5 ms to ~3 ms): how many get the p99 verdict "worse"?
* W4 -- same-model A/A pairs: how many get any latency verdict ("worse" or "better")?

The A/A runs carry 5 % run-to-run noise (a per-process factor), as the audit assumed; the W2 runs
carry none (``--w2-run-sd`` sets it), so only the tail differs, as in the audit. Each pair is compared (1) as single runs with nothing else stored, (2) as single runs with 10 earlier runs
of the same configuration in the store, and (3) with 3 worker processes per side (`bench
--repeats 3`). The tree under test decides what it can use: an edgebench without
`stats.compare_stored` (before the fix) compares the documents alone.

    PYTHONPATH=/path/to/tree python scripts/stats_power.py [--pairs 200] [--aa 500]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

N = 2000            # samples per run (a default run of a ~1 ms model is >= 1000)
RUN_SD = 0.05       # run-to-run noise: sd of the log of a per-process factor
TAIL = 0.025        # share of samples in the tail


def run_samples(rng, tail_ms: float, run_sd: float, n: int = N) -> np.ndarray:
    x = rng.lognormal(0.0, 0.05, n)
    k = int(n * TAIL)
    x[rng.choice(n, k, replace=False)] = rng.uniform(0.9 * tail_ms, 1.1 * tail_ms, k)
    return x * rng.lognormal(0.0, run_sd)


def row(runs: list[np.ndarray]) -> dict:
    ms = np.concatenate(runs)
    r = {"model": "m", "precision": "fp32", "target": "host", "status": "ok", "threads": 1,
         "latency_ms": {"p50": float(np.median(ms)), "p90": float(np.percentile(ms, 90)),
                        "p99": float(np.percentile(ms, 99)), "mean": float(ms.mean()), "qps": float(1e3 / ms.mean()),
                        "samples": int(ms.size), "p99_valid": ms.size >= 662},
         "samples_ns": (ms * 1e6).astype(np.int64).tolist()}
    if len(runs) > 1:
        r["repeats"] = [{"samples": len(x), "p50": float(np.median(x)), "p90": float(np.percentile(x, 90)),
                         "p99": float(np.percentile(x, 99)), "mean": float(x.mean()), "qps": float(1e3 / x.mean())}
                        for x in runs]
    return r


def compare(docs_history: list[dict], a: dict, b: dict):
    """Store everything, compare A and B the way the CLI does in this tree."""
    from edgebench import stats
    from edgebench.results import envelope
    from edgebench.store import Store

    with Store(str(Path(tempfile.mkdtemp(prefix="eb-power-")) / "r.db")) as st:
        for i, d in enumerate(docs_history):
            st.save(dict(envelope("bench", [d], {}), created=f"2026-11-01T10:{i:02d}:00+00:00"))
        ia = st.save(dict(envelope("bench", [a], {}), created="2026-11-02T10:00:00+00:00"))
        ib = st.save(dict(envelope("bench", [b], {}), created="2026-11-02T11:00:00+00:00"))
        if hasattr(stats, "compare_stored"):
            return stats.compare_stored(st, ia, ib)
        return stats.compare_runs(st.get(ia), st.get(ib))


def verdicts(rep) -> dict[str, str]:
    return {c.metric: c.verdict for c in rep["pairs"][0]["changes"]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=200, help="simulated p99 regressions (W2)")
    ap.add_argument("--aa", type=int, default=500, help="simulated A/A pairs (W4)")
    ap.add_argument("--w2-run-sd", type=float, default=0.0, help="run-to-run noise of the W2 runs")
    args = ap.parse_args()
    import edgebench

    print(f"edgebench: {edgebench.__file__}")
    rng = np.random.default_rng(2026)
    latency = ("p50 ms", "p90 ms", "p99 ms", "mean ms", "QPS")
    designs = ("single runs", "single runs + 10 stored runs", "3 processes per side")
    for title, n, tails, sd in (("W2 p99 doubled, same body", args.pairs, (1.5, 3.0), args.w2_run_sd),
                                ("W4 A/A, same model", args.aa, (1.5, 1.5), RUN_SD)):
        for design in designs if n else ():
            hits = 0
            for _ in range(n):
                reps = 3 if design.startswith("3") else 1
                history = [row([run_samples(rng, tails[0], sd)]) for _ in range(10)] if "stored" in design else []
                a = row([run_samples(rng, tails[0], sd) for _ in range(reps)])
                b = row([run_samples(rng, tails[1], sd) for _ in range(reps)])
                v = verdicts(compare(history, a, b))
                if title.startswith("W2"):
                    hits += v.get("p99 ms") == "worse"
                else:
                    hits += any(v.get(m) in ("worse", "better") for m in latency)
            what = "p99 'worse'" if title.startswith("W2") else "any latency verdict"
            print(f"{title:<28} run-to-run sd {sd:.0%}  {design:<30} {what}: {hits}/{n} ({hits / n:.1%})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
