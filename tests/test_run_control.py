"""One run control, one target loop, one publish path: the behaviours every command shares.

Real CLI processes where the behaviour is a process's (signals, exit codes, a terminal)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path


from conftest import make_job, run_in_pty
from edgebench.core.errors import InfraError
from edgebench.targets.base import DEFAULT_DELEGATE, DELEGATES, HOST_DELEGATES, RunControl
from edgebench.targets.loop import Stop, run_on_targets

pytest_plugins = ["conftest_bench"]

EDGEBENCH = str(Path(sys.executable).with_name("edgebench"))


def _env(tmp_path):
    env = dict(os.environ)
    env.update(TF_CPP_MIN_LOG_LEVEL="2", EDGEBENCH_DATA_DIR=str(tmp_path / "data"),
               EDGEBENCH_DB=str(tmp_path / "data" / "r.db"))
    (tmp_path / "data").mkdir(exist_ok=True)
    return env


# ------------------------------------------------------------------------------ run control

def test_run_control_rule_matches_the_worker_and_caps_forced_runs():
    rc = RunControl(runs=5, max_time_s=1.0)
    assert rc.stop_reason(4, 0.1) is None and rc.stop_reason(5, 0.1) == "runs"
    assert rc.stop_reason(2, 1.0) == "max_time"            # a forced --runs is capped too
    rc = RunControl(min_runs=10, min_time_s=0.5, max_time_s=2.0)
    assert rc.stop_reason(10, 0.4) is None and rc.stop_reason(9, 0.6) is None
    assert rc.stop_reason(10, 0.5) == "min_runs_and_min_time" and rc.stop_reason(3, 2.0) == "max_time"


def test_one_default_each():
    """The defaults the CLI shows are RunControl's; the job and every settings object embed it."""
    from edgebench.bench.run import BenchSettings
    from edgebench.cli._options import RC_DEFAULTS
    from edgebench.convert_and_compare.pipeline import CompareSettings, PairSettings
    from edgebench.targets.base import Job

    from edgebench.convert.run import ConvertSettings

    for s in (BenchSettings(models=("m",)).run, CompareSettings(convert=ConvertSettings(src="x")).run,
              PairSettings(a="a", b="b")):
        assert s.control == RunControl()
    assert Job("m").control == RunControl() == RC_DEFAULTS
    assert Job("m").max_time_s == RunControl().max_time_s


def test_tf_reference_obeys_max_time(digits_model, tmp_path):
    """--runs 10**9 with --max-time 0.3: the TF reference stops at max-time and says so."""
    from edgebench.targets.tf import TFTarget

    t0 = time.perf_counter()
    res = TFTarget().run(make_job(digits_model.saved_model_dir, inputs_npz=str(digits_model.evaluation_npz),
                                  runs=10**9, max_time_s=0.3, warmup_runs=1))
    assert time.perf_counter() - t0 < 60
    assert res.extra["stop_reason"] == "max_time" and 0 < len(res.samples_ns) < 10**9
    assert "outputs not fetched" in res.method


def test_one_delegate_list():
    from edgebench.matrix import run as matrix
    from edgebench.targets import host

    assert set(HOST_DELEGATES) < set(DELEGATES) and DEFAULT_DELEGATE in HOST_DELEGATES
    assert matrix.DELEGATES is DELEGATES and matrix.HOST_DELEGATES is HOST_DELEGATES
    assert host.HOST_DELEGATES is HOST_DELEGATES


# ------------------------------------------------------------------------------ the loop

class _T:
    def __init__(self, name):
        self.name = name


def test_loop_runs_hosts_first_then_device_lanes_and_a_lost_device_fails_only_its_rows():
    order = []

    def run(t, item):
        order.append((t.name, item))
        if t.name == "adb:B":
            raise InfraError("device B lost")
        return f"{t.name}:{item}"

    out = run_on_targets([_T("adb:A"), _T("host"), _T("adb:B")], ["fp32", "int8"], run,
                         on_error=lambda t, it, err: f"FAILED {err}")
    assert order[:2] == [("host", "fp32"), ("host", "int8")]
    assert out.for_target("adb:A") == ["adb:A:fp32", "adb:A:int8"]
    assert out.for_target("adb:B") == ["FAILED device B lost"] * 2 and out.interrupted is None


def test_loop_keeps_measured_rows_on_sigterm_and_marks_the_rest():
    def run(t, item):
        if item == "c":
            raise Stop("SIGTERM")
        return item

    out = run_on_targets([_T("host")], ["a", "b", "c", "d"], run, on_error=lambda t, it, err: f"FAILED {err}")
    assert out.interrupted == "SIGTERM"
    assert out.for_target("host")[:2] == ["a", "b"]
    assert all(v.startswith("FAILED not run: interrupted (SIGTERM)") for v in out.for_target("host")[2:])


def test_bench_ctrl_c_keeps_and_stores_the_rows_already_measured(run_cli, bench_models, tmp_path, monkeypatch):
    """`edgebench bench` used to lose every row on Ctrl-C; now it stores what was measured."""
    from edgebench.targets.host import HostTarget

    real_run = HostTarget.run
    calls = []

    def run_then_interrupt(self, job):
        calls.append(job.model_path)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real_run(self, job)

    monkeypatch.setattr(HostTarget, "run", run_then_interrupt)
    out = tmp_path / "b.json"
    code, _, err = run_cli("bench", str(bench_models["fp32"]), str(bench_models["int8"]), "--runs", "30",
                           "--json", str(out), "--db", str(tmp_path / "r.db"))
    assert code == 130 and "1 of 2 rows were measured and kept" in err
    doc = json.loads(out.read_text())
    assert doc["interrupted"] is True and doc["interrupted_by"] == "Ctrl-C" and doc["run_id"]
    assert [r["status"] for r in doc["rows"]] == ["ok", "failed"]
    assert len(doc["rows"][0]["samples_ns"]) == 30


def test_sigterm_stores_what_was_measured_and_exits_143(bench_models, tmp_path):
    """`timeout`/CI cancellation send SIGTERM: a real CLI process keeps its finished rows."""
    out = tmp_path / "t.json"
    work = tmp_path / "tmp"
    work.mkdir()
    models = [str(bench_models["fp32"])] * 6
    proc = subprocess.Popen([EDGEBENCH, "bench", *models, "--min-time", "0.5", "--warmup-runs", "1",
                             "--json", str(out)], env={**_env(tmp_path), "TMPDIR": str(work)},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # each host run works in its own edgebench-host-* folder: the second one means row 1 is done
    seen: set[str] = set()
    deadline = time.monotonic() + 150
    while time.monotonic() < deadline and proc.poll() is None and len(seen) < 2:
        seen.update(p.name for p in work.glob("edgebench-host-*"))
        time.sleep(0.02)
    assert len(seen) >= 2, "the second row never started"
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 143, err
    assert "interrupted (SIGTERM)" in err and "rows were measured and kept" in err
    doc = json.loads(out.read_text())
    assert doc["interrupted_by"] == "SIGTERM" and doc["run_id"]
    done = [r for r in doc["rows"] if r["status"] == "ok"]
    assert 1 <= len(done) < 6 and all(len(r["samples_ns"]) >= 1 for r in done)
    assert "not run: interrupted (SIGTERM)" in doc["rows"][-1]["error"]


# ------------------------------------------------------------------------------ publish

def test_bad_db_is_bad_input_before_anything_is_measured(bench_models, tmp_path):
    r = subprocess.run([EDGEBENCH, "bench", str(bench_models["fp32"]), "--db", str(tmp_path)],
                       env=_env(tmp_path), capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "is a directory" in r.stderr and "Traceback" not in r.stderr
    assert "p99" not in r.stdout        # nothing was measured


def test_store_failure_still_shows_the_table_then_the_error(run_cli, bench_models, tmp_path, monkeypatch):
    from edgebench.store import db as store

    def broken(*a, **k):
        raise InfraError("results database is on fire")

    monkeypatch.setattr(store.Store, "save", broken)
    code, out, err = run_cli("bench", str(bench_models["fp32"]), "--runs", "20", "--db", str(tmp_path / "r.db"))
    assert code == 3 and "p99 ms" in out and "not stored" in err


def test_atomic_writer_never_follows_a_planted_temp_symlink(tmp_path):
    from edgebench.core.atomic import write_text
    from edgebench.core.result_file import write_json

    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    target = tmp_path / "out.json"
    (tmp_path / "out.json.tmp").symlink_to(victim)       # what the old fixed PATH.tmp would follow
    write_json({"a": 1}, str(target))
    write_text(tmp_path / "x.md", "hello")
    assert victim.read_text() == "precious"
    assert json.loads(target.read_text()) == {"a": 1} and (tmp_path / "x.md").read_text() == "hello"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".") and p.name.endswith(".tmp")]


def test_progress_bar_shows_in_a_real_terminal_and_not_when_piped(bench_models, tmp_path):
    """The TF-log filter makes stderr a pipe; the bar must still reach a real terminal."""
    args = [EDGEBENCH, "bench", str(bench_models["fp32"]), str(bench_models["int8"]), "--min-time", "1.5",
            "--no-store"]
    code, text = run_in_pty(args, {**_env(tmp_path), "COLUMNS": "120", "TERM": "xterm"}, timeout=180)
    assert code == 0, text[-2000:]
    assert "bench: conv_fp32 on host" in text and "eta" in text      # the bar, with an ETA
    piped = subprocess.run(args, env=_env(tmp_path), capture_output=True, text=True, timeout=180)
    assert piped.returncode == 0 and "eta" not in piped.stderr and "\x1b[" not in piped.stderr
