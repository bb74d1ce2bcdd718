"""Shared test setup: quiet TF, isolated cache/data dirs, and small real SavedModels.

Every test uses real TensorFlow conversions and real LiteRT on tiny models. The cache dir
(reference model builds) comes from $EDGEBENCH_CACHE_DIR when scripts/test sets it, else a
session temp dir; the results DB always goes to a temp dir so tests never touch the user's.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
_SESSION_TMP = Path(tempfile.mkdtemp(prefix="edgebench-tests-"))
os.environ.setdefault("EDGEBENCH_CACHE_DIR", str(_SESSION_TMP / "cache"))
os.environ["EDGEBENCH_DATA_DIR"] = str(_SESSION_TMP / "data")
os.environ["EDGEBENCH_DB"] = str(_SESSION_TMP / "data" / "results.db")
(_SESSION_TMP / "data").mkdir(parents=True, exist_ok=True)
from edgebench.convert.worker import ISOLATION_ENV  # noqa: E402 -- after the env above; no TensorFlow import

# Conversions run in the pytest process, which has TensorFlow imported already. The default, a
# conversion worker per command (edgebench/convert/worker.py), costs every conversion a second
# TensorFlow import and a second load of the source: 75 s -> 176 s for test_pipeline.py plus
# test_convert.py. The worker path is tested where it matters, through the `isolated_conversions`
# fixture: models that keep state in variables (a calibrator crash must be one failed row), and
# every reference model end to end. EDGEBENCH_CONVERT_ISOLATED=1 scripts/test runs all of it so.
os.environ.setdefault(ISOLATION_ENV, "0")


SLOW_LIST = Path(__file__).with_name("slow_tests.txt")


def slow_tests() -> frozenset[str]:
    """The node ids of tests measured at 2 s or more (tests/slow_tests.txt, scripts/slow_tests.py)."""
    if not SLOW_LIST.exists():
        return frozenset()
    lines = SLOW_LIST.read_text(encoding="utf-8").splitlines()
    return frozenset(ln.strip() for ln in lines if ln.strip() and not ln.startswith("#"))


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Mark the measured slow tests ``slow`` (before ``-m`` deselects); skip tests that need absent
    hardware, with the reason on the marker's own terms."""
    slow = slow_tests()
    for item in items:
        if item.nodeid in slow:
            item.add_marker(pytest.mark.slow)
    gpu = None
    for item in items:
        if "gpu" in item.keywords:
            if gpu is None:
                import tensorflow as tf

                gpu = bool(tf.config.list_physical_devices("GPU"))
            if not gpu:
                item.add_marker(pytest.mark.skip(reason="needs a visible GPU; none on this machine"))
        if "extras" in item.keywords and not _extras_selected(config):
            item.add_marker(pytest.mark.skip(reason="needs an optional extra; scripts/test installs the "
                                                    "extras and runs these apart (pytest -m extras)"))
        if "phone" in item.keywords and not os.environ.get("EDGEBENCH_TEST_PHONE_SERIAL"):
            item.add_marker(pytest.mark.skip(reason="needs a physical phone over adb; set "
                                                    "EDGEBENCH_TEST_PHONE_SERIAL to run"))


def _extras_selected(config) -> bool:
    """Tests of optional extras (torch, vendor NPU libraries, LLM engine...) run only when asked for
    by marker (``-m extras``), which is what scripts/test's second step does after installing them."""
    return "extras" in (config.getoption("-m") or "")


def require_extra(module: str, extra: str):
    """Import an optional extra's module for a test, or skip saying which extra; under scripts/test
    ($EDGEBENCH_REQUIRE_EXTRAS=1, the extras are installed) a missing one is a failure instead."""
    try:
        return __import__(module)
    except ImportError as e:
        if os.environ.get("EDGEBENCH_REQUIRE_EXTRAS") == "1":
            pytest.fail(f"EDGEBENCH_REQUIRE_EXTRAS=1 but {module} does not import ({e}); pip install '.[{extra}]'")
        pytest.skip(f"needs the optional extra [{extra}] ({module}: {e})")


@pytest.fixture(scope="session")
def session_tmp() -> Path:
    return _SESSION_TMP


@pytest.fixture()
def isolated_conversions(monkeypatch):
    """Calibrated precisions convert in the conversion worker, as they do by default outside tests."""
    monkeypatch.setenv(ISOLATION_ENV, "1")


@pytest.fixture(scope="session")
def digits_model():
    """The digits reference model (trained on scikit-learn digits), built once per session."""
    from edgebench.model import catalog as models

    return models.build("digits", "tiny")


@pytest.fixture(scope="session")
def small_savedmodels(session_tmp: Path) -> dict[str, Path]:
    """Tiny SavedModels: multi-input/multi-output float, int32 token ids, broken (random), no signature."""
    import tensorflow as tf

    out = session_tmp / "savedmodels"
    paths: dict[str, Path] = {}


    class Multi(tf.Module):
        def __init__(self):
            super().__init__()
            self.w = tf.Variable(tf.random.stateless_normal([6, 3], seed=[1, 2]))
            self.v = tf.Variable(tf.random.stateless_normal([6, 4], seed=[3, 4]))

        @tf.function(input_signature=[tf.TensorSpec([None, 6], tf.float32, name="a"),
                                      tf.TensorSpec([None, 6], tf.float32, name="b")])
        def serve(self, a, b):
            h = tf.nn.relu(a * 2.0 - b)
            return {"logits": tf.nn.softmax(tf.matmul(h, self.w)), "embedding": tf.matmul(a + b, self.v)}

    m = Multi()
    paths["multi"] = out / "multi"
    tf.saved_model.save(m, str(paths["multi"]), signatures={"serving_default": m.serve})

    class Tokens(tf.Module):
        def __init__(self):
            super().__init__()
            self.emb = tf.Variable(tf.random.stateless_normal([50, 8], seed=[5, 6]))
            self.w = tf.Variable(tf.random.stateless_normal([8, 3], seed=[7, 8]))

        @tf.function(input_signature=[tf.TensorSpec([None, 5], tf.int32, name="ids")])
        def serve(self, ids):
            e = tf.reduce_mean(tf.gather(self.emb, ids), axis=1)
            return {"scores": tf.nn.softmax(tf.matmul(e, self.w))}

    t = Tokens()
    paths["tokens"] = out / "tokens"
    tf.saved_model.save(t, str(paths["tokens"]), signatures={"serving_default": t.serve})

    class Broken(tf.Module):
        """Converts without error into a wrong model: the serving function draws random noise, which
        TF and the .tflite draw differently. (A variable updated at call time is state, which the
        state rule makes TF and the .tflite follow alike: tests/test_state_rule.py.)"""

        def __init__(self):
            super().__init__()
            self.w = tf.Variable(tf.random.stateless_normal([4, 2], seed=[9, 9]))

        @tf.function(input_signature=[tf.TensorSpec([None, 4], tf.float32, name="x")])
        def serve(self, x):
            return {"y": tf.matmul(x + tf.random.uniform(tf.shape(x)), self.w)}

    tf.random.set_seed(None)   # a global seed (set by an earlier test) would bake one seed into both TF and TFLite
    b = Broken()
    paths["broken"] = out / "broken"
    tf.saved_model.save(b, str(paths["broken"]), signatures={"serving_default": b.serve})

    class NoSig(tf.Module):
        def __init__(self):
            super().__init__()
            self.w = tf.Variable(1.0)

    paths["nosig"] = out / "nosig"
    tf.saved_model.save(NoSig(), str(paths["nosig"]))
    return paths


@pytest.fixture()
def run_cli(tmp_path, monkeypatch):
    """Run the edgebench CLI in-process; returns (exit_code, stdout, stderr)."""

    def _run(*args: str, capsys=None):
        import contextlib
        import io

        from edgebench.cli import _main as main  # in-process: no fd-level stderr filter

        out, err = io.StringIO(), io.StringIO()
        code = 0
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                main(list(args))
            except SystemExit as e:
                code = e.code if isinstance(e.code, int) else 0
        return code, out.getvalue(), err.getvalue()

    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.delenv("EDGEBENCH_DEBUG", raising=False)
    return _run


def rng_images(n: int, shape, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(0, 1, size=(n, *shape)).astype(np.float32)


def default_sigint() -> None:
    """``preexec_fn`` for a child a test will Ctrl-C: SIGINT's default disposition, as a terminal
    gives it. A suite started in the background of a non-interactive shell inherits SIGINT
    *ignored*, and Python keeps an ignored SIGINT ignored, so the command would never see it."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)


def make_job(model_path, **kw):
    """A Job from flat keyword arguments: run-control fields (runs, min_runs, min_time_s, ...)
    go into its RunControl, ``deadline_s`` into its deadline, the rest onto the job."""
    from dataclasses import fields

    from edgebench.targets.base import Job, RunControl

    ctl = {f.name: kw.pop(f.name) for f in fields(RunControl) if f.name in kw}
    if "deadline_s" in kw:
        kw["deadline"] = kw.pop("deadline_s")
    return Job(model_path=str(model_path), control=RunControl(**ctl), **kw)


def run_in_pty(argv: list[str], env: dict, timeout: float = 300) -> tuple[int, str]:
    """Run ``argv`` with stdout and stderr on a pseudo-terminal (a real terminal to the program);
    (exit code, everything it drew)."""
    import pty
    import select
    import time

    pid, fd = pty.fork()
    if pid == 0:   # child: its terminal is the pty
        os.execve(argv[0], argv, env)
    chunks = []
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        r, _, _ = select.select([fd], [], [], 1.0)
        if r:
            try:
                data = os.read(fd, 65536)
            except OSError:
                break
            if not data:
                break
            chunks.append(data)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status), b"".join(chunks).decode(errors="replace")
