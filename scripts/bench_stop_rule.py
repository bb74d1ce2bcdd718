#!/usr/bin/env python3
"""How honest is the answer rule? Coverage and bias of the adaptive stops on real traces of this
machine, BEFORE (a baseline revision) and AFTER (this tree), side by side in one run.

1. Traces (real, from this machine, in one run): worker processes of edgebench's host target time
   the digits reference model's FP32 and INT8 .tflite and a small dense model (three 256-wide
   FULLY_CONNECTED layers, ~16 us: fast enough for the p99 rule to answer before its 1 s) for
   ``--seconds`` each (every per-inference sample kept), and the TF reference times digits' batch-32
   call (the ``batch_throughput`` median) for as long; first on the machine as it is, then with
   ``--load`` busy-loop processes at normal priority beside it. ``--save FILE`` keeps them
   (``--traces FILE`` replays a saved set).
2. Replay: each tree's stop rule runs from many starting points ("windows") of every trace, as its
   timed loop would (elapsed time = the sum of the samples so far):
   * the p99 rule: ``RunControl().stop_reason(n, elapsed, samples)`` -- the default run control
     (>= 662 runs; stop at 1 s, or earlier once the p99 is answered);
   * the TF batch rule: >= 11 calls, stop once the median is answered (``quantile_answered(times,
     0.5, width)``), at most 0.5 s. BEFORE checked it after every call; AFTER on the checkpoint
     schedule (``answer_checkpoint``; a tree whose tf target uses it) -- each tree's own arithmetic
     decides each check.
   At each stop the window's quantile is compared with the same process's long-run quantile (the
   whole trace): "within ±5 %" is the share of stops whose quantile is within 5 % of it (what an
   answer width of 10 % was read as), "bias" the median of estimate / long-run, "answered" the
   share of stops made by the answer rule (not by time). "fixed n" gives the bias of windows of the
   same lengths *not* chosen by the rule (the same lengths, starting half a window later).

Each tree runs in its own interpreter (``PYTHONPATH``); the baseline is extracted with ``git
archive`` into a temporary folder.

    python scripts/bench_stop_rule.py [--seconds 3] [--processes 3] [--load 2] [--baseline a4c8e93]
"""

from __future__ import annotations

import argparse
import contextlib
import io
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
WINDOWS = 24          # starting points per trace


def _spin(stop_at: float) -> None:
    # a session of its own, as another user's program (Linux's autogroup scheduler shares the CPUs
    # between sessions first; the benchmark's worker runs in a session of its own)
    os.setsid()
    x = 0
    while time.time() < stop_at:
        x += 1


def collect(seconds: float, processes: int, load: int) -> dict[str, np.ndarray]:
    """{"<cond> <what> <k>": samples ns} for cond idle/loaded, what fp32/int8 (LiteRT) and tf-batch."""
    sys.path.insert(0, str(ROOT))
    from edgebench.model import catalog as models
    from edgebench.convert.run import ConvertSettings, convert
    from edgebench.sources.resolve import SourceOptions
    from edgebench.targets.base import Job, RunControl
    from edgebench.targets.host import HostTarget

    built = models.build("digits", "tiny")
    manifest = convert(ConvertSettings(src="digits", precisions=("fp32", "int8"), out_dir=tempfile.mkdtemp(),
                                       source=SourceOptions(static_batch=True)))
    paths = {p: v["path"] for p, v in manifest["variants"].items() if v.get("status") == "ok"}
    paths["dense"] = _dense_model(Path(manifest["out_dir"]) / "dense.tflite")
    tf_call = _tf_batch_call(built)
    out: dict[str, np.ndarray] = {}
    for cond in ("idle", "loaded"):
        procs = []
        if cond == "loaded":
            stop = time.time() + 3600
            procs = [mp.Process(target=_spin, args=(stop,), daemon=True) for _ in range(load)]
            for p in procs:
                p.start()
            time.sleep(0.3)
        try:
            for k in range(processes):
                for prec, path in paths.items():
                    ctl = RunControl(runs=10**9, min_time_s=0.0, max_time_s=seconds, answer_width=None)
                    res = HostTarget().run(Job(model_path=path, control=ctl))
                    out[f"{cond} {prec} {k}"] = np.asarray(res.samples_ns, np.int64)
                out[f"{cond} tf-batch {k}"] = tf_call(seconds)
                print(f"  traced {cond} process {k + 1}/{processes}", file=sys.stderr, flush=True)
        finally:
            for p in procs:
                p.terminate()
    return out


def _dense_model(path: Path) -> str:
    """Three 256-wide dense layers with ReLU, converted to an FP32 .tflite (seeded weights)."""
    import keras
    import tensorflow as tf

    keras.utils.set_random_seed(0)
    inp = keras.Input(shape=(256,), name="x")
    x = inp
    for _ in range(3):
        x = keras.layers.Dense(256, activation="relu")(x)
    with contextlib.redirect_stdout(io.StringIO()):      # the converter prints its SavedModel export
        path.write_bytes(tf.lite.TFLiteConverter.from_keras_model(keras.Model(inp, x)).convert())
    return str(path)


def _tf_batch_call(built):
    """A function timing the digits SavedModel's batch-32 call for S seconds (after 0.1 s of warm-up)."""
    import tensorflow as tf

    from edgebench.model.inputs import InputSet

    fn = tf.saved_model.load(str(built.saved_model_dir)).signatures["serving_default"]
    ds = InputSet.load(str(built.evaluation_npz))
    feed = {k: tf.constant(v[:32]) for k, v in ds.arrays.items()}

    def run(seconds: float) -> np.ndarray:
        end = time.perf_counter() + 0.1
        while time.perf_counter() < end:
            fn(**feed)
        times = []
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            t0 = time.perf_counter_ns()
            fn(**feed)
            times.append(time.perf_counter_ns() - t0)
        return np.asarray(times, np.int64)

    return run


# ------------------------------------------------------------------------------------------ replay
# (runs inside the interpreter of the tree under test: ``--replay TRACES``)


def replay(traces_path: str, width: float) -> dict:
    import math

    from edgebench.targets import base

    ctl = base.RunControl()
    traces = dict(np.load(traces_path, allow_pickle=False))
    tf_mod = None
    try:
        from edgebench.targets import tf as tf_mod  # noqa: F811
    except Exception:  # noqa: BLE001 -- a tree whose tf target cannot import: skip that rule
        tf_mod = None
    scheduled = tf_mod is not None and "answer_checkpoint" in Path(tf_mod.__file__).read_text()
    results: dict[str, dict] = {}
    for name, ns in traces.items():
        cond, what, _k = name.split()
        x = ns.astype(np.float64)
        el = np.cumsum(x) / 1e9
        batch = what == "tf-batch"
        q = 0.5 if batch else 0.99
        truth = float(np.percentile(x, q * 100))
        span = int(np.searchsorted(el, el[-1] - (0.6 if batch else 1.05)))   # room for the longest stop
        starts = np.linspace(0, max(span, 0), WINDOWS).astype(int)
        rows = results.setdefault(f"{what} {cond}", {"est": [], "fixed": [], "est_answered": [], "n": [], "s": []})
        for s in starts:
            w = x[s:]
            wel = np.cumsum(w) / 1e9
            if batch:
                n, why = _batch_stop(w, wel, width, base, scheduled, tf_mod)
            else:
                n, why = _p99_stop(w, wel, ctl, base, math)
            if n is None:
                continue
            est = float(np.percentile(w[:n], q * 100)) / truth
            rows["est"].append(est)
            if why == "answer_valid":
                rows["est_answered"].append(est)
            shifted = x[s + n // 2: s + n // 2 + n]
            if shifted.size == n:
                rows["fixed"].append(float(np.percentile(shifted, q * 100)) / truth)
            rows["n"].append(n)
            rows["s"].append(float(wel[n - 1]))
    return results


def _p99_stop(w, wel, ctl, base, math):
    """The p99 rule as the worker's loop applies it: checked at the answer checkpoints and where
    min_runs and min_time are both met (stop_reason is None everywhere else)."""
    n_time = max(ctl.min_runs, int(np.searchsorted(wel, ctl.min_time_s)) + 1)
    c = ctl.min_runs
    cands = set()
    while c <= min(n_time, w.size):
        cands.add(c)
        c = int(math.ceil(c * base.ANSWER_CHECK_GROWTH))
    cands.add(min(n_time, w.size))
    for n in sorted(cands):
        why = ctl.stop_reason(n, float(wel[n - 1]), w[:n])
        if why is not None:
            return n, why
    return None, None


def _batch_stop(w, wel, width, base, scheduled, tf_mod):
    """The TF batch rule: from 11 calls (LoadGen's minimum for a median), at most 0.5 s."""
    first = tf_mod.THROUGHPUT_MIN_CALLS if tf_mod is not None else 11
    cap = tf_mod.THROUGHPUT_CAP_S if tf_mod is not None else 0.5
    for n in range(first, w.size + 1):
        if wel[n - 1] >= cap:
            return n, "time"
        if scheduled and not base.answer_checkpoint(n, first):
            continue
        if base.quantile_answered(w[:n], 0.5, width):
            return n, "answer_valid"
    return None, None


# ------------------------------------------------------------------------------------------ driver


def _tree_env(tree: Path) -> dict:
    return {**os.environ, "PYTHONPATH": str(tree), "TF_CPP_MIN_LOG_LEVEL": "2"}


def _baseline_tree(rev: str) -> Path:
    dest = Path(tempfile.mkdtemp(prefix="eb-baseline-"))
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "edgebench"], check=True, capture_output=True)
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive.stdout, check=True)
    return dest


def _summary(r: dict) -> str:
    est = np.asarray(r["est"])
    if est.size == 0:
        return "no stops"
    fixed = np.asarray(r["fixed"])
    ans = np.asarray(r["est_answered"])
    answered = (f"{np.mean(np.abs(ans - 1) <= 0.05):8.0%} {np.median(ans):6.3f}" if ans.size else f"{'-':>8} {'-':>6}")
    return (f"{est.size:4d} {ans.size / est.size:8.0%} {int(np.median(r['n'])):8d} {np.median(r['s']):6.2f} "
            f"{np.mean(np.abs(est - 1) <= 0.05):10.0%} {np.median(est):6.3f} "
            f"{np.percentile(est, 5):6.3f}-{np.percentile(est, 95):5.3f} {answered} "
            f"{(np.median(fixed) if fixed.size else float('nan')):8.3f}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=3.0, help="length of each trace")
    ap.add_argument("--processes", type=int, default=3, help="traced worker processes per model and condition")
    ap.add_argument("--load", type=int, default=2, help="busy-loop processes for the loaded condition")
    ap.add_argument("--baseline", default="a4c8e93", help="the BEFORE revision (git archive of it)")
    ap.add_argument("--save", help="keep the traces in this .npz")
    ap.add_argument("--traces", help="replay a saved .npz instead of tracing")
    ap.add_argument("--replay", help=argparse.SUPPRESS)
    ap.add_argument("--width", type=float, default=0.10, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.replay:
        print(json.dumps(replay(args.replay, args.width)))
        return 0
    if args.traces:
        path = args.traces
    else:
        t0 = time.time()
        traces = collect(args.seconds, args.processes, args.load)
        path = args.save or str(Path(tempfile.mkdtemp()) / "traces.npz")
        np.savez(path, **traces)
        print(f"traced in {time.time() - t0:.0f} s: {len(traces)} traces of {args.seconds:g} s", file=sys.stderr)
    got = {}
    for label, tree in (("before", _baseline_tree(args.baseline)), ("after", ROOT)):
        proc = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--replay", path],
                              capture_output=True, text=True, env=_tree_env(tree), cwd=str(tree))
        if proc.returncode:
            raise SystemExit(f"replay in {tree} failed: {proc.stderr[-2000:]}")
        got[label] = json.loads(proc.stdout.strip().splitlines()[-1])
    print(f"baseline {args.baseline} (before) vs this tree (after); {WINDOWS} windows per trace; "
          f"loaded = +{args.load} busy loops; long-run = the whole trace of that process")
    print(f"{'':<26} {'':>4} {'':>8} {'':>8} {'':>6} {'every stop':<31} {'answered stops':<15}")
    print(f"{'trace':<18} {'rule':<7} {'stops':>4} {'answered':>8} {'median n':>8} {'med s':>6} "
          f"{'within ±5%':>10} {'bias':>6} {'5-95% est/long':>12} {'±5%':>8} {'bias':>6} {'fixed n':>8}")
    for key in got["after"]:
        for label in ("before", "after"):
            print(f"{key:<18} {label:<7} {_summary(got[label].get(key, {'est': []}))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
