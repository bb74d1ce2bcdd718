"""A hostile device end to end (issue 39): what a device reports -- its model name, thermal zone
names, a runner's error text -- is data, never a terminal control sequence, a shell command or a
path; and what it sends is bounded. Real adb server, simulated device (edgebench.targets.sim.adbd)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest_plugins = ["conftest_adb"]

# OSC 52 writes the terminal's clipboard, CSI 2J clears the screen, BEL, a bidi override, CR;
# plus a command substitution and a path, should anything ever paste them into a shell or a file name.
HOSTILE = "Evil\x1b]52;c;cHduZWQ=\x07\x1b[2J\u202e $(touch /tmp/eb-hostile-device) ../../../x\r" + "y" * 300


def _clean(*texts: str) -> None:
    for t in texts:
        for bad in ("\x1b", "\x07", "\u202e", "\r"):
            assert bad not in t, (bad, t[:500])


def test_hostile_device_names_stay_inert(run_cli, make_sim, tiny_tflite, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    dev = make_sim(has_python=True, model=HOSTILE, thermal_zones={"cpu\x1b[31m-big": 38.0, "battery": 30.0},
                   name="evil", device="evil", board="evilboard", hardware="evilhw", manufacturer="Evil",
                   soc_manufacturer="Evil", soc_model="X\x1b[5m1")
    profiles = tmp_path / "profiles"
    code, out, err = run_cli("devices", "--save-profiles", str(profiles))
    assert code == 0, err
    _clean(out, err)
    saved = list(profiles.iterdir())
    assert len(saved) == 1 and saved[0].parent == profiles and len(saved[0].name) <= 80, saved
    code, out, err = run_cli("devices", "--json", "-", "--props")
    assert code == 0, err
    doc = json.loads(out)
    (row,) = [r for r in doc["rows"] if r.get("serial") == dev.serial]
    assert "\\x1b]52" in json.dumps(row) and "\x1b" not in json.dumps(row, ensure_ascii=False)
    code, out, err = run_cli("bench", str(tiny_tflite), "--targets", f"adb:{dev.serial}", "--runs", "5",
                             "--warmup-runs", "1", "--no-store")
    assert code == 0, err
    _clean(out, err)
    assert not Path("/tmp/eb-hostile-device").exists() and not (dev.root / "x").exists() and not any(dev.root.rglob("eb-hostile-device"))


def test_device_output_is_bounded(make_sim, monkeypatch):
    import edgebench.targets.adb.remote as remote
    from edgebench.core.errors import InfraError

    dev = make_sim()
    monkeypatch.setattr(remote, "SHELL_OUTPUT_MAX_BYTES", 64 * 1024)
    device = remote.AdbDevice(dev.serial)
    assert device.shell("echo ok").stdout.strip() == "ok"
    with pytest.raises(InfraError, match="sent more than 0 MiB of output for one command"):
        device.shell("i=0; while [ $i -lt 4000 ]; do echo 0123456789012345678901234567890123456789; i=$((i+1)); done")
