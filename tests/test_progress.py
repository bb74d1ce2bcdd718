"""Progress on the long runs (issue 18.10): train-baseline, matrix, device lanes -- each checked in
a real pseudo-terminal (the bar, per stage/cell/device, with an ETA) and piped (quiet)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from conftest import run_in_pty

pytest_plugins = ["conftest_adb"]

CLI = "import sys; from edgebench.cli import main; sys.exit(main(sys.argv[1:]))"


def _env(tmp_path):
    (tmp_path / "data").mkdir(exist_ok=True)
    return {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "EDGEBENCH_DATA_DIR": str(tmp_path / "data"),
            "EDGEBENCH_DB": str(tmp_path / "data" / "r.db"), "COLUMNS": "150", "TERM": "xterm"}


def in_pty(args: list[str], env: dict, timeout: float = 300) -> tuple[int, str]:
    """Run the CLI with stdout and stderr on a pseudo-terminal; (exit code, everything it drew)."""
    return run_in_pty([sys.executable, "-c", CLI, *args], env, timeout)


def piped(args: list[str], env: dict, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", CLI, *args], env=env, capture_output=True, text=True,
                          timeout=timeout)


def _quiet(p: subprocess.CompletedProcess) -> bool:
    return "eta" not in p.stderr and "\x1b[" not in p.stderr and "━" not in p.stderr


def test_train_baseline_shows_a_bar_per_cell_with_eta(tmp_path):
    args = ["train-baseline", "digits", "--batch-sizes", "16", "--input-pipeline", "naive,optimized",
            "--steps", "8", "--warmup-steps", "2", "--no-store"]
    code, text = in_pty(args, _env(tmp_path))
    assert code == 0, text[-2000:]
    assert "train-baseline: importing TensorFlow" in text and "train-baseline: cell 2/2: none-fp32" in text
    assert "eta" in text and "/3" in text                 # 3 stages: the import and two cells
    p = piped(args, _env(tmp_path))
    assert p.returncode == 0 and _quiet(p), p.stderr[-1000:]


def test_matrix_bar_moves_per_cell_in_a_terminal(tmp_path, tiny_tflite):
    m = tmp_path / "m.yaml"
    m.write_text(textwrap.dedent(f"""
        models: ['{tiny_tflite}']
        targets: [host]
        threads: [1, 2]
        runs: 300
        min_time_s: 0
    """).lstrip())
    args = ["matrix", "run", str(m)]
    code, text = in_pty(args, _env(tmp_path))
    assert code == 0, text[-2000:]
    assert "matrix: cell 0:" in text and "matrix: cell 1:" in text and "eta" in text and "/2" in text
    p = piped([*args, "--resume"], _env(tmp_path))
    assert p.returncode == 0 and _quiet(p), p.stderr[-1000:]


def test_device_lane_shows_its_samples_with_eta(make_sim, tiny_tflite, tmp_path):
    """benchmark_model on a device: minutes of one remote command -- the lane's line counts samples."""
    from edgebench.targets.sim import benchmark_model_standin as standin

    binary = standin.install(str(tmp_path / "benchmark_model"), sys.executable)
    dev = make_sim(has_python=False)
    args = ["bench", str(tiny_tflite), "--targets", f"adb:{dev.serial}", "--benchmark-binary", binary,
            "--runs", "10", "--warmup-runs", "1", "--no-store"]
    code, text = in_pty(args, _env(tmp_path))
    assert code == 0, text[-2000:]
    lane = f"adb:{dev.serial}: tiny on adb:{dev.serial}"
    assert f"{lane} (probe)" in text and f"{lane} (samples)" in text
    assert any(f"{k}/10" in text for k in range(1, 10)) and "eta" in text     # samples counted as they finish
    p = piped(args, _env(tmp_path))
    assert p.returncode == 0 and _quiet(p), p.stderr[-1000:]


@pytest.mark.parametrize("chunks", [[b"EDGEBENCH_SAMPLE_END 0 0\nEDGEBENCH_SAMPLE_END 1 0\n"],
                                    [b"EDGEBENCH_SAM", b"PLE_END 0 0\nEDGEBENCH_SAMPLE_E", b"ND 1 0\n"]])
def test_sample_counter_counts_markers_split_across_chunks(chunks):
    from edgebench.core import progress
    from edgebench.targets.benchmark_model.sample_loop import sample_progress

    seen = []
    feed = sample_progress(5)
    with progress.reporting_to(lambda done, total, note: seen.append((done, total, note))):
        for c in chunks:
            feed(c)
    assert seen[-1] == (2, 5, "samples")


def test_the_bar_holds_its_redraws_while_the_machine_is_timed(monkeypatch):
    """The CLI's bar redraws itself (our thread, ~10/s) except inside progress.measuring(): a timed
    loop in this process (the TF reference) or a host worker's run never shares the interpreter
    lock or a core with it."""
    import io
    import time

    from edgebench.core import progress
    from edgebench.cli import _common

    class Counting(io.StringIO):
        writes = 0

        def write(self, s):
            Counting.writes += 1
            return super().write(s)

        def isatty(self):
            return True

    stream = Counting()
    monkeypatch.setattr(_common, "terminal_stderr", lambda: stream)
    with _common.progress_reporter("t") as say:
        say("one")
        time.sleep(0.35)
        assert Counting.writes > 0                    # it animates on its own
        with progress.measuring():
            time.sleep(0.05)                          # a redraw already under way may finish
            before = Counting.writes
            say("two")                                # an event while timed: recorded, not drawn
            time.sleep(0.45)
            assert Counting.writes == before
        time.sleep(0.35)
        assert Counting.writes > before
