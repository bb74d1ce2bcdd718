"""Environment lock: write, check, warn, --strict failure (exit 1), bad lock files (exit 2)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import yaml

from edgebench.matrix.envlock import check_lock, enforce_lock, make_lock, read_lock, write_lock
from edgebench.core.errors import BadInput, GateFailed
from edgebench.core.fingerprint import KEY_FIELDS, host_fingerprint


def _cli(*args, cwd=None):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    return subprocess.run([sys.executable, "-c", "import sys; from edgebench.cli import main; sys.exit(main(sys.argv[1:]))",
                           *args], capture_output=True, text=True, env=env, cwd=cwd, timeout=120)


def test_lock_round_trip_matches_this_machine(tmp_path):
    fp = host_fingerprint()
    path = tmp_path / "env.lock.yaml"
    write_lock(str(path), fp)
    lock = read_lock(str(path))
    assert set(lock["key_fields"]) == set(KEY_FIELDS)
    assert lock["key_fields"]["cpu_model"] == fp["cpu_model"]
    assert check_lock(lock, fp) == []
    assert enforce_lock(str(path), fp, strict=True) == []


def test_difference_warns_or_fails(tmp_path):
    # a fingerprint taken without TF (other tests may have imported TF into this process)
    fp = {k: v for k, v in host_fingerprint().items() if k != "tf_visible_gpus"}
    path = tmp_path / "env.lock.yaml"
    write_lock(str(path), {**fp, "tensorflow": "2.15.0", "cudnn": "8.6"})
    diffs = enforce_lock(str(path), fp)                       # warn mode: returned, not raised
    assert {"field": "tensorflow", "expected": "2.15.0", "actual": fp["tensorflow"], "where": "host"} in diffs
    # cudnn is a TF-derived field; this fingerprint was taken without TF -> not compared
    assert all(d["field"] != "cudnn" for d in diffs)
    with pytest.raises(GateFailed, match="tensorflow: expected '2.15.0'"):
        enforce_lock(str(path), fp, strict=True)


def test_tf_fields_compared_when_both_have_them():
    fp = {"cpu_model": "x", "tf_visible_gpus": 0, "cudnn": "8.9", "xla": False}
    lock = make_lock({**fp, "cudnn": "8.6"})
    assert [d["field"] for d in check_lock(lock, fp)] == ["cudnn"]


def test_device_section():
    lock = make_lock({"cpu_model": "x"}, devices={"emulator-5554": {"soc": "sdm845", "device_model": "Pixel 3"}})
    diffs = check_lock(lock, {"cpu_model": "x"}, device="emulator-5554",
                       device_fp={"soc": "sm8550", "device_model": "Pixel 3"})
    assert diffs == [{"field": "soc", "expected": "sdm845", "actual": "sm8550", "where": "emulator-5554"}]
    assert check_lock(lock, {"cpu_model": "x"}, device="other", device_fp={})[0]["field"] == "device"


@pytest.mark.parametrize("content,match", [
    ("key_fields: [1, 2\n", "not a readable YAML"),
    ("just: a mapping\n", "not an edgebench environment lock"),
    ("edgebench_env_lock: 9\nkey_fields: {}\n", "lock format 9"),
    ("edgebench_env_lock: 1\nkey_fields: {gpu_colour: red}\n", "unknown key field"),
])
def test_bad_lock_files(tmp_path, content, match):
    p = tmp_path / "lock.yaml"
    p.write_text(content)
    with pytest.raises(BadInput, match=match):
        read_lock(str(p))
    with pytest.raises(BadInput, match="no such file"):
        read_lock(str(tmp_path / "missing.yaml"))


def test_env_cli_lock_check_strict_exit_codes(tmp_path):
    lock = tmp_path / "env.lock.yaml"
    r = _cli("env", "--no-tf", "--lock", str(lock), "--json", str(tmp_path / "env.json"))
    assert r.returncode == 0, r.stderr
    assert yaml.safe_load(lock.read_text())["edgebench_env_lock"] == 1
    r = _cli("env", "--no-tf", "--check-lock", str(lock), "--strict", "--json", "-")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["lock_differences"] == []
    data = yaml.safe_load(lock.read_text())
    data["key_fields"]["litert"] = "0.0.1"
    lock.write_text(yaml.safe_dump(data))
    r = _cli("env", "--no-tf", "--check-lock", str(lock), "--json", "-")
    assert r.returncode == 0
    assert "warning" in r.stderr and "litert" in r.stderr
    r = _cli("env", "--no-tf", "--check-lock", str(lock), "--strict")
    assert r.returncode == 1
    assert "litert: expected '0.0.1'" in r.stderr
    r = _cli("env", "--no-tf", "--check-lock", str(tmp_path / "nope.yaml"))
    assert r.returncode == 2 and "no such file" in r.stderr
