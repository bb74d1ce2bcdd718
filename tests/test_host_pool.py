"""Pre-started host workers (targets/host_pool.py): a row takes a ready worker and gets the same
result a fresh worker gives; workers nobody took are stopped and their folders removed; a dead
one is never handed a job; EDGEBENCH_PRESTART=0 turns the pool off."""

from __future__ import annotations

import os

import pytest

from conftest import make_job
from edgebench.core.errors import BadInput
from edgebench.targets import host_pool
from edgebench.targets.host import HostTarget
from edgebench.targets.runner import WAIT_FLAG

pytest_plugins = ["conftest_bench"]

QUICK = dict(min_runs=20, min_time_s=0.0, max_time_s=5.0, warmup_runs=2)


def _waiting() -> list:
    with host_pool._LOCK:
        return list(host_pool._WAITING)


def test_a_row_takes_a_ready_worker_and_the_rest_are_stopped(bench_models):
    assert host_pool.WAIT_FLAG == WAIT_FLAG                 # the worker cannot import the parent's name
    with host_pool.prestarted(3):
        host_pool.wait_ready()
        started = _waiting()
        assert len(started) == 3 and all(w.ready() and w.proc.poll() is None for w in started)
        res = HostTarget().run(make_job(str(bench_models["fp32"]), save_outputs=True, **QUICK))
        assert res.status == "ok" and res.extra.get("prestarted") is True
        assert len(res.samples_ns) >= 20 and res.outputs
        fresh = HostTarget().run(make_job(str(bench_models["fp32"]), save_outputs=True, **QUICK))
        assert fresh.extra.get("prestarted") is True                # the second waiting worker
        for k, v in res.outputs.items():
            assert (v == fresh.outputs[k]).all()
        assert not started[0].work.exists()                        # its run folder went with the row
        left = _waiting()
        assert len(left) == 1
    assert left[0].proc.poll() == 0 and not left[0].work.exists()     # told to exit; exited cleanly
    assert _waiting() == []
    after = HostTarget().run(make_job(str(bench_models["fp32"]), **QUICK))
    assert after.status == "ok" and "prestarted" not in after.extra   # outside the block: a fresh worker


def test_a_bad_model_fails_the_same_way_in_a_prestarted_worker(bench_models, tmp_path):
    bad = tmp_path / "bad.tflite"
    bad.write_bytes(b"not a flatbuffer at all" * 10)
    with pytest.raises(BadInput) as fresh:
        HostTarget().run(make_job(str(bad), **QUICK))
    with host_pool.prestarted(1):
        host_pool.wait_ready()
        with pytest.raises(BadInput) as pooled:
            HostTarget().run(make_job(str(bad), **QUICK))
        assert _waiting() == []
    assert str(pooled.value) == str(fresh.value)


def test_a_dead_worker_is_never_handed_a_job_and_the_switch_turns_the_pool_off(monkeypatch):
    with host_pool.prestarted(1):
        host_pool.wait_ready()
        (w,) = _waiting()
        os.killpg(w.proc.pid, 9)
        w.proc.wait()
        assert host_pool.take() is None and _waiting() == [] and not w.work.exists()
    monkeypatch.setenv(host_pool.OFF_ENV, "0")
    with host_pool.prestarted(2):
        host_pool.wait_ready()
        assert host_pool.take() is None


def test_a_host_run_is_marked_as_measuring_so_progress_bars_hold(bench_models, monkeypatch):
    """progress.measuring() covers a host worker's run (the CLI's bar holds its redraws then)."""
    from edgebench.core import progress
    from edgebench.targets import host as host_mod

    seen = []
    real = host_mod.spawn_worker

    def spy(*a, **kw):
        seen.append(progress.is_measuring())
        return real(*a, **kw)

    monkeypatch.setattr(host_mod, "spawn_worker", spy)
    assert not progress.is_measuring()
    HostTarget().run(make_job(str(bench_models["fp32"]), **QUICK))
    assert seen == [True] and not progress.is_measuring()


def test_the_pool_is_capped(monkeypatch):
    monkeypatch.setattr(host_pool, "MAX_WAITING", 2)
    with host_pool.prestarted(5):
        host_pool.wait_ready()
        assert len(_waiting()) == 2
