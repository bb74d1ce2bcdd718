"""A plain non-editable install carries the data dirs (reference models, device profiles, runner)."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_wheel_installs_with_data_dirs(tmp_path):
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                    str(ROOT), "-w", str(tmp_path / "dist")], check=True, capture_output=True, timeout=300)
    (wheel,) = (tmp_path / "dist").glob("edgebench-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "edgebench/targets/runner.py" in names and "reference_models/digits.py" in names
    assert any(n.startswith("device_profiles/") and n.endswith(".yaml") for n in names)
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), str(wheel)],
                   check=True, capture_output=True, timeout=300)
    code = ("import edgebench, reference_models, edgebench.targets.device_profiles as p, edgebench.model.catalog as m;"
            "assert edgebench.__file__.startswith(%r);"
            "assert len(p.load_profiles()) >= 7; assert set(m.MODELS) >= {'digits', 'bert', 'ssd_mobilenet'}"
            % str(target))
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                       env={"PYTHONPATH": str(target), "PATH": "/usr/bin:/bin"}, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
