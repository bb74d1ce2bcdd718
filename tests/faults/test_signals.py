"""SIGTERM / SIGINT outside the measuring loops (issue 26.3): conversion, diagnose (its worker),
the keep-float search. SIGTERM means 143 and says SIGTERM; Ctrl-C (SIGINT) means 130."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import default_sigint

ROOT = Path(__file__).resolve().parents[2]


def _start(tmp_path: Path, *args: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "EDGEBENCH_DATA_DIR": str(tmp_path / "data"),
           "TF_CPP_MIN_LOG_LEVEL": "2"}
    env.pop("EDGEBENCH_DEBUG", None)
    return subprocess.Popen([sys.executable, "-m", "edgebench", *args], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=default_sigint)



def _tree(pid: int) -> list[int]:
    """``pid`` and its descendants (the command runs in a sandbox process under the launcher)."""
    children: dict[int, list[int]] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(ppid, []).append(int(d.name))
    out, todo = [], [pid]
    while todo:
        x = todo.pop()
        out.append(x)
        todo.extend(children.get(x, ()))
    return out


def _tf_loaded(pid: int) -> bool:
    for p in _tree(pid):
        try:
            if "_pywrap_tensorflow" in Path(f"/proc/{p}/maps").read_text():
                return True
        except OSError:
            continue
    return False


def _stop_after(p: subprocess.Popen, seconds: float, sig: int) -> tuple[int, str]:
    """Send ``sig`` ``seconds`` after TensorFlow is loaded (the handlers are in place long before;
    counting from TF keeps the test independent of how busy the machine is)."""
    t0 = time.monotonic()
    while not _tf_loaded(p.pid) and p.poll() is None and time.monotonic() - t0 < 120:
        time.sleep(0.1)
    time.sleep(seconds)
    assert p.poll() is None, "the command ended before the signal: give it more work"
    p.send_signal(sig)
    out, err = p.communicate(timeout=120)
    return p.returncode, err


@pytest.mark.parametrize("args,after", [
    (("convert", "digits", "-p", "fp32,fp16,int8,dynamic,int16x8"), 1.0),            # conversion
    (("diagnose", "digits"), 4.0),                                                     # worker / ranking
    (("convert", "digits", "-p", "int8", "--keep-float", "auto", "--min-psnr", "200"), 5.0),   # search
], ids=["conversion", "diagnose", "keep-float-search"])
def test_sigterm_anywhere_is_143_and_says_sigterm(tmp_path, args, after):
    code, err = _stop_after(_start(tmp_path, *args), after, signal.SIGTERM)
    assert code == 143, err[-2000:]
    last = [ln for ln in err.splitlines() if ln.strip()][-1]
    # edgebench's own line is the last one and names the signal; TensorFlow itself may print the
    # traceback of a call the signal cut short (its C++ reports it) before it -- not ours to hide
    assert last.startswith("error: interrupted (SIGTERM)") and "internal error" not in err, err[-2000:]


def test_ctrl_c_during_conversion_is_130(tmp_path):
    code, err = _stop_after(_start(tmp_path, "convert", "digits", "-p", "fp32,fp16,int8,dynamic,int16x8"),
                            1.0, signal.SIGINT)
    assert code == 130 and "interrupted (Ctrl-C)" in err, err[-2000:]
