"""The CLI's start-up shortcut (cli/_startup.py): Keras's wrappers do not import scikit-learn,
everything else does, in a fresh process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

PROBE = """
import sys
from edgebench.cli._startup import skip_keras_sklearn
skip_keras_sklearn(); skip_keras_sklearn()
from edgebench.cli._startup import SkipKerasSklearn
assert sum(isinstance(f, SkipKerasSklearn) for f in sys.meta_path) == 1
import tensorflow
assert "sklearn" not in sys.modules, "keras imported scikit-learn"
import keras.src.wrappers.fixes as fixes
assert fixes.sklearn is None
from sklearn.datasets import load_digits     # anyone else still gets it
assert load_digits().data.shape == (1797, 64)
import sklearn.base
print("ok")
"""


def test_keras_wrappers_skip_sklearn_and_nobody_else_does():
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TF_CPP_MIN_LOG_LEVEL": "3"}
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]


def _run_entry(body: str) -> subprocess.CompletedProcess:
    code = "import atexit, sys, threading, time\nimport edgebench.cli as c\n" + body + "\nc.run()\n"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)


def test_fast_exit_keeps_the_exit_code_output_and_atexit_handlers():
    """run() (the console script, python -m edgebench) ends without interpreter teardown, but the
    exit code, buffered output and atexit handlers are as a normal exit leaves them."""
    out = _run_entry("atexit.register(lambda: print('atexit ran'))\n"
                     "def fake(argv=None):\n    sys.stdout.write('x' * 100000)\n    sys.exit(143)\n"
                     "c.main = fake")
    assert out.returncode == 143
    assert out.stdout == "x" * 100000 + "atexit ran\n"
    ok = _run_entry("c.main = lambda argv=None: 0")
    assert ok.returncode == 0
    msg = _run_entry("def fake(argv=None):\n    sys.exit('a message')\nc.main = fake")
    assert msg.returncode == 1 and msg.stderr.strip() == "a message"


def test_fast_exit_waits_for_a_running_thread_like_a_normal_exit():
    out = _run_entry("def work():\n    time.sleep(0.5)\n    print('thread done', flush=True)\n"
                     "def fake(argv=None):\n    threading.Thread(target=work).start()\n    return 0\n"
                     "c.main = fake")
    assert out.returncode == 0 and out.stdout == "thread done\n"


def test_python_m_edgebench_bad_input_is_one_line_exit_2(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TF_CPP_MIN_LOG_LEVEL": "3"}
    out = subprocess.run([sys.executable, "-m", "edgebench", "bench", str(tmp_path / "missing.tflite")],
                         capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 2, out.stderr
    lines = [x for x in out.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and "missing.tflite" in lines[0]
