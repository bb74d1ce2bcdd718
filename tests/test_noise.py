"""Honest under noise (issue 35), on real runs of this machine with load added by the test.

Real LiteRT worker processes time two tiny conv models (A: three 3x3 CONV_2D layers on a 12x12x12
input; B: four, ~1.3x A's compute) through ``run_bench`` -- ``bench A A2 A3 A4 A5 B --repeats 4``
(A2..A5 are copies of A's file), whose processes run interleaved (A A2 .. B, A A2 .. B, ...) -- while
busy-loop processes at normal priority compete for the cores. Every pair of rows of one command is
judged by ``stats.compare_runs``, the comparison ``results compare`` makes:

* A/A (the same model as two rows: 20 pairs): no "worse" verdict, and the intervals for a rerun
  cover 1.0 in >= 90 % of them;
* A/B (a real ~1.3x slowdown: 10 pairs): "worse" on the p50 in >= 90 % of them;
* the load signal fires under the added load, and stays silent in timed windows the kernel saw no
  preemption in (this machine is shared: "without added load" is not idle, so the silent case is
  defined by the kernel's own count, measured in the same test).

Pairs are rows of one command: that is what interleaving is for (load that comes and goes hits both
alike). Between separate commands, load that changes in between is in no run's replicates; how
often an A/A pair across commands is covered is measured by scripts/stats_power.py (README).

Cheap by design (~45-80 s on this busy 2-core machine): tiny models (~21 us), 0.25 s per process. The
models are compute-bound with cache-resident weights on purpose: a memory-bound one (three 256-wide
dense layers, 0.8 MB of weights) had per-process p50s 10-25 % apart under the other developers'
load of this machine (its last-level cache is shared), these 0.3 %.
"""

from __future__ import annotations

import contextlib
import itertools
import multiprocessing as mp
import os
import shutil
import time
from pathlib import Path

import numpy as np
import pytest

# Busy loops beside the benchmark: one more than the cores, so every core has two runnable tasks and the
# worker always shares one (with as many loops as cores, the scheduler can leave it a core of its own)
LOAD = (os.cpu_count() or 2) + 1

pytestmark = pytest.mark.serial     # its claims are about load it adds itself: run alone (scripts/test)
RUNS = 2            # bench commands, each: C(5, 2) = 10 A/A pairs and 5 A/B pairs
COPIES = 5          # rows of model A per command
# 4 processes a side: with 3, one process the shared host slowed by 10-20 % as a whole (another VM; no
# stall or preemption to see) leaves a real 1.3x change "cannot judge" -- the honest answer for that
# run, but then one in five runs of this test saw 3 of 10 pairs so; 4 carry such a process
REPEATS = 4
# Each process times for 0.25 s (and >= 662 samples: a valid p99). Not a fixed 700 samples (15 ms): a
# slow spell of the shared host (another VM, another developer's conversion) of ~50 ms then slows a
# whole process -- one of the three -- and a real 1.3x slowdown is "cannot judge" in that run
# (scripts/stats_power.py's traces: 7 of 72 processes of ~25 ms were 5-29 % off their row's median,
# 0 of 144 of 0.15-0.25 s).
PER_PROCESS_S = 0.25
ROUND_GAP_S = 4.0   # --round-gap: 4 rounds start >= 0, 4, 8, 12 s after the first


def _spin(stop_at: float) -> None:
    # a session of its own, as another user's program: Linux's autogroup scheduler shares the CPUs
    # between sessions first, and the worker runs in a session of its own, so loops left in this
    # one would share a single CPU's worth between them and seldom preempt it
    os.setsid()
    x = 0
    while time.time() < stop_at:
        x += 1


@contextlib.contextmanager
def busy_loops(n: int = LOAD):
    """``n`` busy-loop processes at normal priority for the duration of the block."""
    procs = [mp.get_context("fork").Process(target=_spin, args=(time.time() + 600,), daemon=True) for _ in range(n)]
    for p in procs:
        p.start()
    time.sleep(0.2)
    try:
        yield
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.join(5)


def _conv(path: Path, layers: int) -> Path:
    import keras
    import tensorflow as tf

    keras.utils.set_random_seed(0)
    inp = keras.Input(shape=(12, 12, 12), name="x")
    x = inp
    for _ in range(layers):
        x = keras.layers.Conv2D(12, 3, padding="same", activation="relu")(x)
    path.write_bytes(tf.lite.TFLiteConverter.from_keras_model(keras.Model(inp, x)).convert())
    return path


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, list[Path]]:
    out = tmp_path_factory.mktemp("conv")
    a = _conv(out / "conv3.tflite", 3)
    copies = [a] + [Path(shutil.copy(a, out / f"conv3_copy{k}.tflite")) for k in range(1, COPIES)]
    return {"a": copies, "b": [_conv(out / "conv4.tflite", 4)]}


def _bench(models, repeats: int = REPEATS, seconds: float = PER_PROCESS_S) -> dict:
    from edgebench.bench.run import BenchSettings, run_bench
    from edgebench.targets.base import RunOptions
    from edgebench.targets.base import RunControl

    # rounds ROUND_GAP_S apart: a row's processes spread over >= 10 s on any machine, so their
    # interval counts as one for a rerun (judge.stats.SPREAD_MIN_S; back to back they are one run)
    doc = run_bench(BenchSettings(models=tuple(str(m) for m in models), run=RunOptions(repeats=repeats, control=RunControl(min_time_s=seconds, answer_width=None), round_gap_s=ROUND_GAP_S)))
    return doc.to_dict()


@pytest.fixture(scope="module")
def loaded_runs(models) -> list[dict]:
    """RUNS commands of `bench A A2 A3 A4 A5 B --repeats 4`, one after another, LOAD busy loops beside them."""
    with busy_loops():
        return [_bench((*models["a"], *models["b"])) for _ in range(RUNS)]


def _pair(doc: dict, i: int, j: int) -> tuple[dict, dict]:
    """Rows i and j of one document as two one-row documents, j's row named as i's (rows are paired
    by model, precision, target)."""
    ri, rj = dict(doc["rows"][i]), dict(doc["rows"][j])
    rj["model"] = ri["model"]
    return {**doc, "run_id": "a", "rows": [ri]}, {**doc, "run_id": "b", "rows": [rj]}


def _verdicts(rep: dict) -> dict:
    (pair,) = rep["pairs"]
    return {c.metric: c for c in pair["changes"]}


def test_replicates_are_interleaved_and_the_order_is_recorded(loaded_runs):
    """bench A A2 A3 A4 A5 B --repeats 4 runs every row's k-th process before any row's next, and each
    process says where it ran."""
    from edgebench.targets.loop import PROCESS_ORDER

    doc = loaded_runs[0]
    assert doc["settings"]["process_order"] == PROCESS_ORDER
    orders = [[p["order"] for p in row["repeats"]] for row in doc["rows"]]
    rows = COPIES + 1
    assert orders == [[k + r * rows for r in range(REPEATS)] for k in range(1, rows + 1)]


def test_a_model_compared_with_itself_is_never_worse_under_load(loaded_runs):
    """A/A: no "worse" (a mean/QPS/tail under load is "cannot judge"), and the intervals printed as
    intervals for a rerun (hierarchical bootstrap over the processes) cover 1.0 in >= 90 % of pairs."""
    from edgebench.judge.stats import compare_runs

    worse, covered, intervals, pairs = [], 0, 0, 0
    for doc in loaded_runs:
        for i, j in itertools.combinations(range(COPIES), 2):
            pairs += 1
            rep = compare_runs(*_pair(doc, i, j))
            for c in _verdicts(rep).values():
                if c.verdict == "worse":
                    worse.append(c)
                if c.rerun_interval:
                    intervals += 1
                    covered += c.ci[0] <= 1.0 <= c.ci[1]
            assert rep["regressions"] == len([c for c in _verdicts(rep).values() if c.verdict == "worse"])
    assert pairs >= 10 and not worse, worse
    assert intervals >= pairs and covered >= 0.9 * intervals, (covered, intervals)


def _process_spread(docs: list[dict]) -> float:
    """The run-to-run noise of one process's p50 on this machine right now: the pooled sd of the log
    per-process p50s of every A row (the same model, COPIES rows a command)."""
    dev = []
    for doc in docs:
        for row in doc["rows"][:COPIES]:
            logs = np.log([p["p50"] for p in row["repeats"]])
            dev += list(logs - logs.mean())
    return float(np.sqrt(np.sum(np.square(dev)) / (len(dev) - RUNS * COPIES)))


def test_a_real_slowdown_is_still_worse_under_load(loaded_runs):
    """A ~1.3x slower model (one more layer), interleaved with A in the same commands: its p50 is
    "worse" in >= 90 % of the pairs, on replicates, with an interval for a rerun that clears the
    measured run-to-run spread -- on a machine whose processes agree to 3 % (the added busy loops
    alone leave them within 0.3 %). When the other developers' suites push this 2-core machine to a
    load average of ~7, whole processes run 10-20 % slow (another task on the other core slows this
    one's inferences: no stall, no preemption to see) and 4 processes a side cannot resolve 1.3x at
    p < 0.002: then every pair that is not "worse" must say why ("cannot judge": its p or the
    spread; "same" only for an interval inside 1.1x), none may read "better", and a warning names
    the spread it saw."""
    from edgebench.judge.stats import compare_runs

    changes = [_verdicts(compare_runs(*_pair(doc, i, COPIES)))["p50 ms"]
               for doc in loaded_runs for i in range(COPIES)]
    spread = _process_spread(loaded_runs)
    worse = [c for c in changes if c.verdict == "worse"]
    assert len(changes) >= 10 and not any(c.verdict == "better" for c in changes), changes
    for c in worse:
        assert c.ratio > 1.1 and c.basis == "repeats" and c.rerun_interval and c.ci[0] > c.noise_band, c
    if spread <= 0.03:
        assert all(1.15 < c.ratio < 1.6 for c in changes), changes            # the slowdown is real
        assert len(worse) >= 0.9 * len(changes), (len(worse), spread, [c for c in changes if c not in worse])
    else:
        import warnings

        warnings.warn(f"this machine's processes were {spread:.1%} apart (other work): {len(worse)}/{len(changes)} "
                      "pairs could be called worse; the rest said why they could not")
        for c in changes:
            if c.verdict != "worse":    # the honest answers: too little evidence, or a ratio under 1.1x
                assert (c.verdict == "cannot judge" and c.reason) or (
                    c.verdict == "same" and c.ci[1] < 1.1), c


def test_the_load_signal_fires_under_added_load(loaded_runs):
    """Every loaded run's rows carry the load signal: the share of wall time in stalls, and the
    warning that the tail, mean and QPS reflect other work."""
    rows = [r for d in loaded_runs for r in d["rows"]]
    fired = [r for r in rows if r["latency_ms"]["loaded"] or any(p["loaded"] for p in r["repeats"])]
    assert len(fired) >= 0.9 * len(rows)
    warned = [r for r in fired if any("reflect other work on this machine" in w for w in r["warnings"])]
    assert len(warned) == len(fired)


def test_the_load_signal_stays_silent_without_preemption(models):
    """Short timed windows of real LiteRT invokes (60 inferences, ~1 ms), each with the kernel's count
    of this process's preemptions around it: alternately without and with the busy loops. In the
    windows the kernel saw no preemption in -- "without load", on a shared machine -- the signal,
    from the samples alone, is silent: the model's own tail does not trip it."""
    import resource

    from ai_edge_litert.interpreter import Interpreter

    from edgebench.rows import Latency

    it = Interpreter(str(models["a"][0]))
    it.allocate_tensors()
    it.set_tensor(it.get_input_details()[0]["index"], np.ones((1, 12, 12, 12), np.float32))
    for _ in range(200):
        it.invoke()

    def window() -> tuple[Latency, int]:
        before = resource.getrusage(resource.RUSAGE_SELF).ru_nivcsw
        ns = []
        for _ in range(60):
            t0 = time.perf_counter_ns()
            it.invoke()
            ns.append(time.perf_counter_ns() - t0)
        return Latency.from_samples(ns), resource.getrusage(resource.RUSAGE_SELF).ru_nivcsw - before

    quiet, loaded = [], []
    for _ in range(4):
        quiet += [window() for _ in range(40)]
        with busy_loops():
            loaded += [window() for _ in range(40)]
    unpreempted = [lat for lat, n in quiet + loaded if n == 0]
    assert len(unpreempted) >= 20, "the machine preempted nearly every 1 ms window: no silent case to see"
    # >= 90 %, not all: on a VM the hypervisor's own scheduling (steal) and interrupts stall a window
    # without a switch the guest counts (seen here: 2 of ~150 windows)
    assert sum(not lat.loaded for lat in unpreempted) >= 0.9 * len(unpreempted), \
        [lat.stall_share for lat in unpreempted if lat.loaded]
    # (that it fires under the busy loops is test_the_load_signal_fires_under_added_load, on whole runs:
    # a 1 ms window preempted between two invokes, or for less than 3x the median, has no stall to see)


def test_rows_carry_the_workers_preemption_count(loaded_runs):
    rows = [r for d in loaded_runs for r in d["rows"]]
    assert all(isinstance(r["latency_ms"]["preemptions"], int) for r in rows)
    assert all(isinstance(p["preemptions"], int) for r in rows for p in r["repeats"])
