#!/usr/bin/env python3
"""How often does `results compare` cry wolf, how often does it catch a real slowdown, and do its
intervals cover a rerun? BEFORE (a baseline revision) and AFTER (this tree), side by side in one
run, on real traces of this machine -- as it is, and with busy-loop load added on purpose.

1. Traces: ``bench`` commands (``run_bench``, this tree: every model's worker processes interleaved)
   of four models, each command one "run" of ``--repeats`` processes per model: the digits reference
   model's FP32 and INT8 .tflite (the issue's A/A case), and two small conv models A and B (three and
   four 3x3 CONV_2D layers on a 12x12x12 input: B has ~1.3x A's compute, a real slowdown), each
   process timing ``--seconds``. First ``--runs`` commands on the machine as it is, then as many
   beside ``--load`` busy loops.
   ``--save``/``--traces`` keep and replay them.
2. Replay, in each tree's own interpreter (``PYTHONPATH``; the baseline from ``git archive``), through
   that tree's ``stats.compare_runs`` / ``compare_stored`` -- the comparison `results compare` makes:
   * A/A across runs (each model, every pair of runs, 3 processes a side): FP = pairs with any
     latency verdict "worse" or "better"; "interval covers 1" = pairs whose p50 interval (as
     printed beside the verdict) holds 1.0;
   * A/A single runs with 10 stored runs of the configuration (history basis; every process is a
     run of its own here);
   * A/B: conv B against conv A, across runs and within one run (interleaved rows): power = p50 "worse".

The old simulation (audit W2/W4: independent processes with 5 % noise) is ``--simulate``.

    python scripts/stats_power.py [--runs 6] [--repeats 3] [--round-gap 5] [--load 2] [--baseline a4c8e93]
    PYTHONPATH=/path/to/tree python scripts/stats_power.py --simulate [--pairs 200] [--aa 500]
"""

from __future__ import annotations

import argparse
import itertools
import json
import multiprocessing as mp
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
LATENCY = ("p50 ms", "p90 ms", "p99 ms", "mean ms", "QPS")
N = 2000            # simulation: samples per run (a default run of a ~1 ms model is >= 1000)
RUN_SD = 0.05       # simulation: run-to-run noise, sd of the log of a per-process factor
TAIL = 0.025        # simulation: share of samples in the tail


# ------------------------------------------------------------------------------------------ traces


def _spin(stop_at: float) -> None:
    # a session of its own, as another user's program (Linux's autogroup scheduler shares the CPUs
    # between sessions first; the benchmark's worker runs in a session of its own)
    os.setsid()
    x = 0
    while time.time() < stop_at:
        x += 1


def _conv(path: Path, layers: int) -> str:
    import contextlib
    import io

    import keras
    import tensorflow as tf

    keras.utils.set_random_seed(0)
    inp = keras.Input(shape=(12, 12, 12), name="x")
    x = inp
    for _ in range(layers):
        x = keras.layers.Conv2D(12, 3, padding="same", activation="relu")(x)
    with contextlib.redirect_stdout(io.StringIO()):      # the converter prints its SavedModel export
        path.write_bytes(tf.lite.TFLiteConverter.from_keras_model(keras.Model(inp, x)).convert())
    return str(path)


def collect(runs: int, repeats: int, load: int, seconds: float, round_gap: float = 0.0) -> dict:
    """{"models": [...], "conditions": {cond: [doc, ...]}}: bench documents of this tree."""
    sys.path.insert(0, str(ROOT))
    from edgebench.bench.run import BenchSettings, run_bench
    from edgebench.targets.base import RunOptions
    from edgebench.convert.run import ConvertSettings, convert
    from edgebench.sources.resolve import SourceOptions
    from edgebench.targets.base import RunControl

    out_dir = Path(tempfile.mkdtemp(prefix="eb-power-"))
    manifest = convert(ConvertSettings(src="digits", precisions=("fp32", "int8"), out_dir=str(out_dir / "digits"),
                                       source=SourceOptions(static_batch=True)))
    models = [manifest["variants"][p]["path"] for p in ("fp32", "int8")]
    models += [_conv(out_dir / "conv_a.tflite", 3), _conv(out_dir / "conv_b.tflite", 4)]
    extra = {"round_gap_s": round_gap} if round_gap else {}       # (a baseline tree may lack it)
    settings = BenchSettings(models=tuple(models), **extra, run=RunOptions(repeats=repeats, control=RunControl(min_time_s=seconds, answer_width=None)))
    docs: dict[str, list] = {}
    for cond in ("as it is", "loaded"):
        procs = []
        if cond == "loaded":
            procs = [mp.Process(target=_spin, args=(time.time() + 3600,), daemon=True) for _ in range(load)]
            for p in procs:
                p.start()
            time.sleep(0.3)
        try:
            for k in range(runs):
                docs.setdefault(cond, []).append(run_bench(settings).to_dict())
                print(f"  {cond}: run {k + 1}/{runs}", file=sys.stderr, flush=True)
        finally:
            for p in procs:
                p.terminate()
    return {"models": [Path(m).stem for m in models], "conditions": docs}


# ------------------------------------------------------------------------------------------ replay
# (inside the interpreter of the tree under test: ``--replay TRACES``)


def _row(doc_row: dict, processes: list[np.ndarray] | None = None) -> dict:
    """A result row as the tree under test writes it, from raw samples (``processes``: a subset of
    the row's worker processes, each its own run)."""
    from edgebench.rows import Latency

    reps = doc_row.get("repeats") or []
    counts = [r["samples"] for r in reps]
    pooled = np.asarray(doc_row["samples_ns"], np.int64)
    groups = processes or np.split(pooled, np.cumsum(counts)[:-1])
    ns = np.concatenate(groups)
    row = {k: doc_row.get(k) for k in ("model", "precision", "target", "status", "threads", "delegate", "runtime",
                                       "method", "model_sha256", "sample_class", "batch_size")}
    row.update(latency_ms=Latency.from_samples(ns).to_dict(), samples_ns=ns.tolist())
    if len(groups) > 1:
        row["repeats"] = []
        for k, g in enumerate(groups):
            d = Latency.from_samples(g).to_dict()
            start = reps[k].get("started_s") if processes is None and k < len(reps) else None
            row["repeats"].append({"samples": int(g.size), **{k: d.get(k) for k in ("p50", "p90", "p99", "mean", "qps",
                                                                                     "p99_valid", "stall_share",
                                                                                     "loaded")},
                                   **({} if start is None else {"started_s": start})})
    row["latency_ms"]["loaded"] = bool(doc_row.get("latency_ms", {}).get("loaded")) or any(
        bool(r.get("loaded")) for r in reps)         # as measured (with the worker's preemption count)
    return row


def _planted(doc_row: dict, share: float = 0.03, extra_ms: float = 3.0) -> dict:
    """The row with ``share`` of its inferences ``extra_ms`` slower (a regression in a slow path),
    its processes' figures recomputed; its load signal as measured."""
    ns = np.asarray(doc_row["samples_ns"], np.int64).copy()
    pick = np.random.default_rng(0).choice(ns.size, int(ns.size * share), replace=False)
    ns[pick] += int(extra_ms * 1e6)
    counts = [r["samples"] for r in doc_row.get("repeats") or []]
    row = _row({**doc_row, "samples_ns": ns.tolist()}, np.split(ns, np.cumsum(counts)[:-1]) if counts else None)
    for r, src in zip(row.get("repeats") or [], doc_row.get("repeats") or []):
        r["loaded"] = bool(src.get("loaded"))
        if src.get("started_s") is not None:
            r["started_s"] = src["started_s"]
    return row


def _gate_passes(rep: dict) -> bool:
    """What `results compare --fail-on-regression` does with the comparison: exit 0?"""
    changes = [c for p in rep["pairs"] for c in p["changes"]]
    return not any(c.verdict in ("worse", "cannot judge") for c in changes)


def _doc(rows: list[dict], run_id: str, fp: dict) -> dict:
    return {"schema_version": 2, "kind": "bench", "run_id": run_id, "created": "2026-12-01T00:00:00+00:00",
            "fingerprint": fp, "rows": rows}


def _changes(rep: dict) -> dict:
    (pair,) = rep["pairs"]
    return {c.metric: c for c in pair["changes"]}


def _judged(ch: dict) -> bool:
    return any(ch[m].verdict in ("worse", "better") for m in LATENCY if m in ch)


def _covers(c) -> bool | None:
    """Whether the p50's interval, as printed beside the verdict, holds 1.0 (None: none printed there)."""
    if c.ci is None:
        return None
    beside = getattr(c, "rerun_interval", True)     # the baseline printed every interval beside it
    return (c.ci[0] <= 1.0 <= c.ci[1]) if beside else None


def replay(path: str) -> dict:
    from edgebench.judge import stats

    data = json.loads(Path(path).read_text())
    models = data["models"]
    digits, conv_a, conv_b = models[:2], models[2], models[3]
    out: dict = {}
    for cond, docs in data["conditions"].items():
        fp = docs[0]["fingerprint"]
        rows = [{r["model"]: r for r in d["rows"]} for d in docs]
        res = out.setdefault(cond, {})
        # A/A across runs
        for m in [*digits, conv_a]:
            fp_, cov, n, same = 0, [], 0, 0
            for i, j in itertools.combinations(range(len(docs)), 2):
                ch = _changes(stats.compare_runs(_doc([_row(rows[i][m])], "a", fp), _doc([_row(rows[j][m])], "b", fp)))
                n += 1
                fp_ += _judged(ch)
                same += ch["p50 ms"].verdict == "same"
                cov.append(_covers(ch["p50 ms"]))
            shown = [c for c in cov if c is not None]
            res[f"A/A {m}, runs of 3 processes"] = {"pairs": n, "flagged": fp_, "ci_shown": len(shown),
                                                  "ci_covers": sum(shown), "p50 same": same}
        # A/A single runs with stored history (each process its own run)
        for m in [*digits, conv_a]:
            singles = []
            for d in rows:
                r = d[m]
                counts = [p["samples"] for p in r["repeats"]]
                for g in np.split(np.asarray(r["samples_ns"], np.int64), np.cumsum(counts)[:-1]):
                    singles.append(_row(r, [g]))
            res[f"A/A {m}, single runs + 10 stored"] = _history_pairs(stats, singles, fp)
        # A/B: conv B vs conv A
        for label, pairs in (("across runs", [(i, j) for i in range(len(docs)) for j in range(len(docs)) if i != j]),
                             ("same run (interleaved)", [(i, i) for i in range(len(docs))])):
            hits, same99, n = 0, 0, 0
            for i, j in pairs:
                b = dict(rows[j][conv_b], model=conv_a)
                ch = _changes(stats.compare_runs(_doc([_row(rows[i][conv_a])], "a", fp), _doc([_row(b)], "b", fp)))
                n += 1
                hits += ch["p50 ms"].verdict == "worse"
                same99 += ch["p99 ms"].verdict == "same"
            res[f"A/B conv 1.3x, {label}"] = {"pairs": n, "worse": hits, "p99 same": same99}
    # a tail planted on a quiet B (3 % of inferences 3 ms slower) against a loaded A (the issue-44 case)
    if "loaded" in data["conditions"] and "as it is" in data["conditions"]:
        loaded = [{r["model"]: r for r in d["rows"]} for d in data["conditions"]["loaded"]]
        quiet = [{r["model"]: r for r in d["rows"]} for d in data["conditions"]["as it is"]]
        fp = data["conditions"]["loaded"][0]["fingerprint"]
        passes, n = 0, 0
        for m in [*digits, conv_a]:
            for i, j in itertools.product(range(len(loaded)), range(len(quiet))):
                rep = stats.compare_runs(_doc([_row(loaded[i][m])], "a", fp), _doc([_planted(quiet[j][m])], "b", fp))
                n += 1
                passes += _gate_passes(rep)
        out.setdefault("loaded A", {})["planted tail on quiet B: gate passes"] = {"pairs": n, "passes": passes}
    return out


def _history_pairs(stats, singles: list[dict], fp: dict) -> dict:
    """Store the first 10 single runs, then compare each later consecutive pair with that history."""
    from edgebench.store.db import Store

    history, rest = singles[:10], singles[10:]
    flagged, cov, n = 0, [], 0
    with Store(str(Path(tempfile.mkdtemp(prefix="eb-power-")) / "r.db")) as st:
        for k, r in enumerate(history):
            st.save(dict(_doc([r], f"h{k}", fp), created=f"2026-11-01T10:{k:02d}:00+00:00"))
        for k in range(0, len(rest) - 1, 2):
            ia = st.save(dict(_doc([rest[k]], f"a{k}", fp), created=f"2026-11-02T10:{k:02d}:00+00:00"))
            ib = st.save(dict(_doc([rest[k + 1]], f"b{k}", fp), created=f"2026-11-02T11:{k:02d}:00+00:00"))
            rep = stats.compare_stored(st, ia, ib) if hasattr(stats, "compare_stored") else stats.compare_runs(
                st.get(ia), st.get(ib))
            ch = _changes(rep)
            n += 1
            flagged += _judged(ch)
            cov.append(_covers(ch["p50 ms"]))
    shown = [c for c in cov if c is not None]
    return {"pairs": n, "flagged": flagged, "ci_shown": len(shown), "ci_covers": sum(shown)}


# ------------------------------------------------------------------------------------------ driver


def _baseline_tree(rev: str) -> Path:
    dest = Path(tempfile.mkdtemp(prefix="eb-baseline-"))
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "edgebench"], check=True, capture_output=True)
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive.stdout, check=True)
    return dest


def _cell(r: dict) -> str:
    if "passes" in r:
        return f"exit 0 in {r['passes']}/{r['pairs']}"
    if "worse" in r:
        return f"p50 worse {r['worse']}/{r['pairs']}, p99 same {r['p99 same']}/{r['pairs']}"
    cov = f"{r['ci_covers']}/{r['ci_shown']}" if r["ci_shown"] else "none shown"
    same = f"; p50 same {r['p50 same']}" if "p50 same" in r else ""
    return f"flagged {r['flagged']}/{r['pairs']} ({r['flagged'] / r['pairs']:.0%}); p50 CI covers 1: {cov}{same}"


def real(args) -> int:
    if args.traces:
        path = args.traces
    else:
        t0 = time.time()
        data = collect(args.runs, args.repeats, args.load, args.seconds, args.round_gap)
        path = args.save or str(Path(tempfile.mkdtemp()) / "traces.json")
        Path(path).write_text(json.dumps(data))
        print(f"traced in {time.time() - t0:.0f} s", file=sys.stderr)
    got = {}
    for label, tree in (("before", _baseline_tree(args.baseline)), ("after", ROOT)):
        env = {**os.environ, "PYTHONPATH": str(tree), "TF_CPP_MIN_LOG_LEVEL": "2"}
        proc = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--replay", path], capture_output=True,
                              text=True, env=env, cwd=str(tree))
        if proc.returncode:
            raise SystemExit(f"replay in {tree} failed: {proc.stderr[-3000:]}")
        got[label] = json.loads(proc.stdout.strip().splitlines()[-1])
    print(f"baseline {args.baseline} (before) vs this tree (after); {args.runs} bench runs per condition, "
          f"{args.repeats} processes per model per run, {args.seconds:g} s each; loaded = +{args.load} busy loops")
    for cond in got["after"]:
        for design in got["after"][cond]:
            print(f"{cond:<9} {design:<44} before: {_cell(got['before'][cond][design]):<48} "
                  f"after: {_cell(got['after'][cond][design])}")
    return 0


# ------------------------------------------------------------------------------------------ simulation


def run_samples(rng, tail_ms: float, run_sd: float, n: int = N) -> np.ndarray:
    x = rng.lognormal(0.0, 0.05, n)
    k = int(n * TAIL)
    x[rng.choice(n, k, replace=False)] = rng.uniform(0.9 * tail_ms, 1.1 * tail_ms, k)
    return x * rng.lognormal(0.0, run_sd)


def sim_row(runs: list[np.ndarray]) -> dict:
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


def sim_compare(docs_history: list[dict], a: dict, b: dict):
    from edgebench.judge import stats
    from edgebench.core.result_file import envelope
    from edgebench.store.db import Store

    with Store(str(Path(tempfile.mkdtemp(prefix="eb-power-")) / "r.db")) as st:
        for i, d in enumerate(docs_history):
            st.save(dict(envelope("bench", [d], {}), created=f"2026-11-01T10:{i:02d}:00+00:00"))
        ia = st.save(dict(envelope("bench", [a], {}), created="2026-11-02T10:00:00+00:00"))
        ib = st.save(dict(envelope("bench", [b], {}), created="2026-11-02T11:00:00+00:00"))
        if hasattr(stats, "compare_stored"):
            return stats.compare_stored(st, ia, ib)
        return stats.compare_runs(st.get(ia), st.get(ib))


def simulate(args) -> int:
    import edgebench

    print(f"edgebench: {edgebench.__file__}")
    rng = np.random.default_rng(2026)
    designs = ("single runs", "single runs + 10 stored runs", "3 processes per side")
    for title, n, tails, sd in (("W2 p99 doubled, same body", args.pairs, (1.5, 3.0), args.w2_run_sd),
                                ("W4 A/A, same model", args.aa, (1.5, 1.5), RUN_SD)):
        for design in designs if n else ():
            hits = 0
            for _ in range(n):
                reps = 3 if design.startswith("3") else 1
                history = [sim_row([run_samples(rng, tails[0], sd)]) for _ in range(10)] if "stored" in design else []
                a = sim_row([run_samples(rng, tails[0], sd) for _ in range(reps)])
                b = sim_row([run_samples(rng, tails[1], sd) for _ in range(reps)])
                v = {c.metric: c.verdict for c in sim_compare(history, a, b)["pairs"][0]["changes"]}
                if title.startswith("W2"):
                    hits += v.get("p99 ms") == "worse"
                else:
                    hits += any(v.get(m) in ("worse", "better") for m in LATENCY)
            what = "p99 'worse'" if title.startswith("W2") else "any latency verdict"
            print(f"{title:<28} run-to-run sd {sd:.0%}  {design:<30} {what}: {hits}/{n} ({hits / n:.1%})", flush=True)
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=6, help="bench commands per condition")
    ap.add_argument("--repeats", type=int, default=3, help="worker processes per model per command")
    ap.add_argument("--round-gap", type=float, default=5.0, help="bench --round-gap: a row's k-th process starts "
                                                                    ">= k x this many seconds after its first")
    ap.add_argument("--seconds", type=float, default=0.25, help="timed seconds per process (>= 662 samples)")
    ap.add_argument("--load", type=int, default=2, help="busy-loop processes for the loaded condition")
    ap.add_argument("--baseline", default="a4c8e93", help="the BEFORE revision (git archive of it)")
    ap.add_argument("--save", help="keep the traces in this .json")
    ap.add_argument("--traces", help="replay a saved .json instead of tracing")
    ap.add_argument("--replay", help=argparse.SUPPRESS)
    ap.add_argument("--simulate", action="store_true", help="the old simulation (this interpreter's edgebench)")
    ap.add_argument("--pairs", type=int, default=200, help="--simulate: p99 regressions (W2)")
    ap.add_argument("--aa", type=int, default=500, help="--simulate: A/A pairs (W4)")
    ap.add_argument("--w2-run-sd", type=float, default=0.0, help="--simulate: run-to-run noise of the W2 runs")
    args = ap.parse_args()
    if args.replay:
        print(json.dumps(replay(args.replay)))
        return 0
    return simulate(args) if args.simulate else real(args)


if __name__ == "__main__":
    sys.exit(main())
