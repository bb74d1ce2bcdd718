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
