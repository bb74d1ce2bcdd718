"""Issue 35's rules on constructed inputs whose answer is known (fast; the real-run suite under added
load is tests/test_noise.py): accuracy on whole sample counts, intervals never zero-width and printed
apart when they are not for a rerun, the answer rule's guards, interleaving order, per-op-type
speed-ups from medians, change points with and without Apache Otava."""

from __future__ import annotations

import numpy as np
import pytest

from edgebench.judge.stats import classify, compare_runs


def _acc_row(correct: int, n: int, **extra) -> dict:
    return {"model": "m", "precision": "int8", "target": "host", "status": "ok",
            "accuracy": {"top1": correct / n, "samples": n, **extra}}


def _doc(rows, run_id, **meta) -> dict:
    return {"run_id": run_id, "kind": "compare", "fingerprint": {}, "rows": rows, **meta}


def _top1(ra, rb, **kw):
    (pair,) = compare_runs(_doc([ra], "a"), _doc([rb], "b"), **kw)["pairs"]
    return next(c for c in pair["changes"] if c.metric == "top-1")


def test_accuracy_is_judged_on_whole_samples():
    """A threshold of 0 counts any lost sample and leaves an unchanged top-1 "same" (it was "worse",
    exit 1); a drop of exactly the threshold is within it, as the gate's drop <= max passes it, for
    every sample count (float rounding made 89 of 97 exact 1 pp drops "worse")."""
    assert _top1(_acc_row(354, 360), _acc_row(354, 360), thresholds={"top1": 0.0}).verdict == "same"
    lost = _top1(_acc_row(354, 360), _acc_row(353, 360), thresholds={"top1": 0.0})
    assert lost.verdict == "worse" and "-1 of 360 samples" in lost.note
    exact, over = [], []
    for n in range(100, 2000, 19):              # 1 pp of n samples, n a multiple of 100 or not
        if n % 100:
            continue
        k = n // 100
        exact.append(_top1(_acc_row(n - 5, n), _acc_row(n - 5 - k, n)).verdict)       # exactly -1 pp
        over.append(_top1(_acc_row(n - 5, n), _acc_row(n - 6 - k, n)).verdict)        # one sample more
    assert set(exact) == {"within threshold"} and set(over) == {"worse"}
    for n in range(300, 400):                    # drops of whole samples around 1 pp, any n
        for lost in range(1, 6):
            pp = 100 * lost / n
            v = _top1(_acc_row(n - 10, n), _acc_row(n - 10 - lost, n)).verdict
            assert v == ("worse" if pp > 1 + 1e-12 else "within threshold"), (n, lost, v)
    # an old document without top1_correct counts from top1 x samples; a document with it uses it
    assert _top1(_acc_row(354, 360, top1_correct=354), _acc_row(350, 360, top1_correct=350)).verdict == "worse"
    gained = _top1(_acc_row(300, 360), _acc_row(310, 360))
    assert gained.verdict == "better" and gained.change == pytest.approx(100 * 10 / 360)


def test_drift_metrics_same_means_no_change():
    psnr = classify("PSNR dB", 50.0, 50.0, higher_is_better=True, kind="absolute", threshold=0.0, unit="dB")
    assert psnr.verdict == "same"
    assert classify("PSNR dB", 50.0, 49.0, higher_is_better=True, kind="absolute", threshold=3.0,
                    unit="dB").verdict == "within threshold"
    assert classify("PSNR dB", 50.0, 46.5, higher_is_better=True, kind="absolute", threshold=3.0,
                    unit="dB").verdict == "worse"


def test_intervals_are_never_zero_width_from_quantized_samples():
    """Samples on a 1 us grid (benchmark_model logs) made "p50 1.169x [1.169x, 1.169x]"."""
    from edgebench.core.latency import rerun_interval
    from edgebench.judge.stats import ratio_interval

    rng = np.random.default_rng(0)
    a = np.round(rng.normal(0.020, 0.0004, 3000), 3)     # ms on a 0.001 ms grid: 0.019, 0.020, 0.021
    b = np.round(rng.normal(0.024, 0.0004, 3000), 3)
    lo, hi = ratio_interval(a, b, "location")
    assert hi - lo > 0.05 * (0.024 / 0.020) and lo < 1.2 < hi
    lo, hi = rerun_interval(np.split(a, 3), np.split(b, 3), "location")
    assert hi - lo > 0.05 and lo < 1.2 < hi


def test_a_within_run_interval_is_printed_apart_from_the_verdict():
    from rich.console import Console

    from edgebench.report.terminal.results import render_results_compare

    rng = np.random.default_rng(1)
    rows = []
    for scale in (1.0, 1.25):
        ns = (rng.lognormal(0, 0.05, 2000) * scale * 1e6).astype(np.int64)
        ms = ns / 1e6
        rows.append({"model": "m", "precision": "fp32", "target": "host", "status": "ok", "samples_ns": ns.tolist(),
                     "latency_ms": {"p50": float(np.median(ms)), "mean": float(ms.mean()), "loaded": False}})
    rep = compare_runs(_doc([rows[0]], "a"), _doc([rows[1]], "b"))
    p50 = next(c for c in rep["pairs"][0]["changes"] if c.metric.startswith("p50"))
    # 1.25x far beyond the threshold: called, on a within-run interval named as such
    assert p50.verdict == "worse" and p50.ci_basis == "within-run" and not p50.rerun_interval
    con = Console(record=True, width=250)
    for part in render_results_compare(rep, width=250, details=True):      # every metric, with its note
        con.print(part)
    text = con.export_text()
    line = next(x for x in text.splitlines() if "p50 ms" in x)
    assert "1.250x [" not in line and "within-run only: 95% interval" in text


def test_history_interval_and_noise_band():
    """With stored history the interval is the ratio widened by the measured run-to-run noise, and a
    1.3x change inside a 20 % noise is not a verdict even where p < 0.002 would allow it."""
    rng = np.random.default_rng(2)
    a, b = rng.lognormal(0, 0.05, 3000), 1.3 * rng.lognormal(0, 0.05, 3000)
    quiet = classify("p50", np.median(a), np.median(b), higher_is_better=False, samples_a=a, samples_b=b,
                     noise=(0.01, 12, 11))
    assert quiet.verdict == "worse" and quiet.ci_basis == "history" and quiet.ci[0] < 1.3 < quiet.ci[1]
    noisy = classify("p50", np.median(a), np.median(b), higher_is_better=False, samples_a=a, samples_b=b,
                     noise=(0.12, 40, 39))
    assert noisy.verdict == "cannot judge" and noisy.noise_band > 1.3
    assert noisy.reason == "spread wider than the threshold"


def test_replicates_and_history_must_agree():
    """Replicates of one run cannot see load that changed between runs; with stored history too, the
    larger p and band and the hull of both intervals decide (basis "repeats+history")."""
    rng = np.random.default_rng(6)
    ga = [rng.lognormal(0, 0.02, 800) for _ in range(3)]
    gb = [1.12 * rng.lognormal(0, 0.02, 800) for _ in range(3)]
    a, b = np.concatenate(ga), np.concatenate(gb)
    kw = dict(higher_is_better=False, samples_a=a, samples_b=b, repeats_a=[float(np.median(g)) for g in ga],
              repeats_b=[float(np.median(g)) for g in gb], groups_a=ga, groups_b=gb, spread_s=30.0)
    reps = classify("p50", np.median(a), np.median(b), **kw)
    both = classify("p50", np.median(a), np.median(b), noise=(0.08, 12, 11), **kw)
    assert reps.verdict == "worse" and reps.basis == "repeats" and reps.ci_basis == "processes"
    assert both.basis == "repeats+history" and both.rerun_interval and both.verdict == "cannot judge"
    assert both.ci[0] <= reps.ci[0] and both.ci[1] >= reps.ci[1] and both.noise_band > reps.noise_band


def test_answer_rule_guards():
    from edgebench.core.latency import quantile_answered

    rng = np.random.default_rng(3)
    steady = rng.normal(1.0, 0.01, 4000)
    assert quantile_answered(steady, 0.99, 0.10) and quantile_answered(steady, 0.5, 0.02)
    stalled = steady.copy()
    stalled[rng.choice(4000, 60, replace=False)] = 40.0     # 1.5 % stalls: the tail is the machine's
    assert not quantile_answered(stalled, 0.99, 0.9) and quantile_answered(stalled, 0.5, 0.05)
    shifted = np.r_[rng.normal(1.0, 0.01, 2000), rng.normal(1.08, 0.01, 2000)]   # the halves disagree
    assert not quantile_answered(shifted, 0.5, 0.05) and quantile_answered(shifted[:2000], 0.5, 0.05)


def test_rounds_interleave_processes_and_record_their_order():
    from edgebench.core.errors import InfraError
    from edgebench.targets.base import RunResult
    from edgebench.targets.loop import measure_in_rounds

    calls = []

    class Fake:
        name = "host"

        def run(self, item, r):
            calls.append((item, r))
            if item == "bad" and r == 1:
                raise InfraError("crashed")
            return RunResult(target="host", model_path=item, model_sha256="", samples_ns=np.ones(3, np.int64))

    got = measure_in_rounds([Fake()], ["a", "b", "bad"], 3, lambda t, it, r: t.run(it, r),
                            lambda t, it, err: RunResult.failed("host", it, str(err)))
    assert calls == [("a", 0), ("b", 0), ("bad", 0), ("a", 1), ("b", 1), ("bad", 1), ("a", 2), ("b", 2)]
    assert got.order[("host", 0)] == [1, 4, 7] and got.order[("host", 1)] == [2, 5, 8]
    assert [r.status for r in got.processes[("host", 2)]] == ["ok", "failed"]      # no third process
    pooled = RunResult.pooled(got.processes[("host", 0)], "a", got.order[("host", 0)])
    assert [p["order"] for p in pooled.extra["repeats"]] == [1, 4, 7]


def _raw(per_run_fc_us, per_run_conv_us):
    return {"runs": len(per_run_fc_us), "entries": [
        {"node": 0, "op": "FULLY_CONNECTED", "delegated": False, "mean_us": float(np.mean(per_run_fc_us)),
         "p50_us": float(np.median(per_run_fc_us)), "us_per_run": list(per_run_fc_us)},
        {"node": 1, "op": "DELEGATE", "delegated": True, "mean_us": float(np.mean(per_run_conv_us)),
         "p50_us": float(np.median(per_run_conv_us)), "us_per_run": list(per_run_conv_us),
         "inner": [{"op": "Convolution (NHWC, F32) IGEMM", "us": int(np.sum(per_run_conv_us)),
                    "us_per_run": list(per_run_conv_us)}]}], "invoke": {"mean_us": 1.0, "p50_us": 1.0}}


def test_per_op_type_speedups_come_from_medians_with_an_interval():
    """A few stalled profiled runs (a 20 ms one) move a per-op mean 30x; the median-based speed-up
    holds, with an interval; an op whose time moves from run to run says "unstable"."""
    from edgebench.judge.op_types import speedup_by_op_type
    from edgebench.targets.op_profile import op_profile_from_worker
    rng = np.random.default_rng(4)
    fc_a = rng.normal(100, 2, 700).round()
    fc_b = rng.normal(25, 1, 700).round()
    fc_b[::100] = 20000                                 # 7 stalled runs on B's side
    conv_a = rng.normal(60, 1, 700).round()
    conv_b = np.r_[rng.normal(30, 1, 350), rng.normal(60, 1, 350)].round()   # moved half way through
    ea, ia = op_profile_from_worker(_raw(fc_a, conv_a))
    eb, ib = op_profile_from_worker(_raw(fc_b, conv_b))
    rows = {r["op_type"]: r for r in speedup_by_op_type(ea, eb, ia, ib)}
    fc, conv = rows["Fully Connected"], rows["Convolution"]
    assert fc["basis"] == "medians" and fc["speedup"] == pytest.approx(4.0, rel=0.05)
    assert fc["ci"][0] < fc["speedup"] < fc["ci"][1] and not fc["unstable"]
    means = {r["op_type"]: r for r in speedup_by_op_type(ea, eb)}     # the old view: ratios of means
    assert means["Fully Connected"]["speedup"] < 0.6
    assert conv["unstable"]


def test_change_points_without_the_extra_say_how_to_get_otava(monkeypatch):
    from edgebench.judge import changepoints

    monkeypatch.setattr(changepoints, "_otava", lambda: None)
    y = [1.0, 1.01, 0.99, 1.0, 1.02, 1.3, 1.31, 1.29, 1.3, 1.3]
    steps, method, note = changepoints.change_points(y)
    assert [s.index for s in steps] == [5] and method == changepoints.BUILTIN
    assert "pip install 'edgebench[changepoints]'" in note
    h = changepoints.history_with_steps([{"run_id": f"r{i}", "created": f"t{i}", "value": v} for i, v in enumerate(y)])
    assert h["steps"][0]["run_id"] == "r5" and h["note"] == note


@pytest.mark.extras
def test_change_points_come_from_apache_otava_when_installed(tmp_path):
    """With the extra, `results history` (terminal and --json) and the HTML history charts mark the
    change points Apache Otava's E-divisive means finds, and the run that began each."""
    from conftest import require_extra

    require_extra("otava", "changepoints")
    from rich.console import Console

    from edgebench.judge import changepoints
    from edgebench.report.html_parts import svg_lines
    from edgebench.report.terminal.results import render_history

    rng = np.random.default_rng(5)
    y = list(np.r_[rng.normal(1.0, 0.01, 12), rng.normal(1.3, 0.01, 8)])
    steps, method, note = changepoints.change_points(y)
    assert method == changepoints.OTAVA and note is None
    (s,) = steps
    assert s.index == 12 and s.ratio == pytest.approx(1.3, rel=0.03)
    assert changepoints.change_points(list(rng.normal(1.0, 0.02, 30)))[0] == []
    series = [{"run_id": f"r{i}", "created": f"2026-11-{i + 1:02d}T10:00:00+00:00", "value": v} for i, v in enumerate(y)]
    h = changepoints.history_with_steps(series)
    assert h["steps"][0]["run_id"] == "r12" and h["method"] == changepoints.OTAVA
    con = Console(record=True, width=160)
    con.print(render_history({"model": "m", "metric": "p50", "series": {}, **h}))
    text = con.export_text()
    assert "shifted 1.30x here" in text and "change points: Apache Otava E-divisive means" in text
    svg = svg_lines([("m", list(range(20)), y)], xlabel="x", ylabel="y", marks=[(12.0, "x1.30")])
    assert "change x1.30" in svg


def test_html_history_charts_mark_the_change_points(tmp_path, monkeypatch):
    """The HTML report's history series carry their change points (``export.collect_history``) and the
    chart draws a dashed line at each, labelled with the shift."""
    from edgebench.judge import changepoints
    from edgebench.report.export import collect_history
    from edgebench.report.html import render_html
    from edgebench.core.result_file import envelope
    from edgebench.store.db import Store

    monkeypatch.setattr(changepoints, "_otava", lambda: None)       # the same without the extra
    rng = np.random.default_rng(7)
    with Store(str(tmp_path / "r.db")) as st:
        docs = []
        for i in range(12):
            p99 = (2.0 if i < 6 else 2.6) * float(rng.lognormal(0, 0.01))
            ns = (rng.lognormal(0, 0.05, 700) * 1e6).astype(np.int64)
            row = {"model": "m", "precision": "int8", "target": "host", "status": "ok", "samples_ns": ns,
                   "latency_ms": {"p50": 1.0, "p99": p99, "mean": 1.0, "samples": 700, "p99_valid": True}}
            doc = dict(envelope("bench", [row], {}), created=f"2026-11-{i + 1:02d}T10:00:00+00:00")
            doc["run_id"] = st.save(doc)
            docs.append(doc)
        history = collect_history(st, [docs[-1]])
    (points,) = history.values()
    marked = [p for p in points if p["step"]]
    assert len(marked) == 1 and marked[0]["run_id"] == docs[6]["run_id"] and marked[0]["shift"] == pytest.approx(1.3, rel=0.03)
    html = render_html([docs[-1]], history=history)
    assert "change x1.30" in html or "change x1.29" in html or "change x1.31" in html
