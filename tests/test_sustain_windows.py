"""Sustained windows (issue 37 item 8): a --duration without --report-every gets at least three
windows (was: one 10-s window for --duration 10, steady-state ratio 1.000; --duration 3 refused
for a --report-every 10 nobody typed), and one window has no steady-state ratio."""

from __future__ import annotations

import json

import pytest

from edgebench.core.errors import BadInput
from edgebench.targets.base import Schedule

pytest_plugins = ["conftest_bench"]


@pytest.mark.parametrize("duration,window", [(3.0, 1.0), (10.0, 10 / 3), (30.0, 10.0), (600.0, 10.0)])
def test_default_window_gives_at_least_three(duration, window):
    s = Schedule(duration_s=duration).validate()
    assert s.window_s == pytest.approx(window) and duration / s.window_s >= 3
    assert s.worker_keys()["timeline"]["report_every_s"] == pytest.approx(window)


def test_a_typed_window_that_leaves_one_window_is_refused_with_the_fix():
    with pytest.raises(BadInput, match=r"--report-every 10 with --duration 10 gives 1 window, and the steady-state "
                                       r"ratio compares the first window with the last: use --report-every 5 or less"):
        Schedule(duration_s=10.0, report_every_s=10.0).validate()
    assert Schedule(duration_s=10.0, report_every_s=5.0).validate().window_s == 5.0


def test_one_window_has_no_ratio():
    from edgebench.rows import Latency
    from edgebench.rows.regimes import Window
    from edgebench.bench.sustain import _summary

    lat = Latency.from_samples([1_000_000 + i for i in range(50)])
    one = [Window(index=0, t_start_s=0.0, t_end_s=1.0, samples=50, latency=lat)]
    assert _summary(one, {"duration_s": 1.0, "report_every_s": 1.0}).steady_state_ratio is None
    two = one + [Window(index=1, t_start_s=1.0, t_end_s=2.0, samples=50, latency=lat)]
    assert _summary(two, {"duration_s": 2.0, "report_every_s": 1.0}).steady_state_ratio == 1.0


def test_bench_duration_alone_reports_three_windows(run_cli, bench_models, tmp_path):
    out = tmp_path / "r.json"
    code, _, err = run_cli("bench", str(bench_models["fp32"]), "--duration", "0.9", "--warmup-runs", "2",
                           "--no-store", "--json", str(out))
    assert code == 0, err
    row = json.loads(out.read_text())["rows"][0]
    assert len(row["timeline"]) == 3 and row["sustained"]["report_every_s"] == pytest.approx(0.3)
    assert row["sustained"]["steady_state_ratio"] is not None
