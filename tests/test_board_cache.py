"""The board cache protocol (edgebench.targets.sim.board.ensure): keyed by inputs, a killed build is
never reused. The build step itself is exercised for real by the board tests' session fixture."""

from __future__ import annotations

import json
import os

import pytest

from edgebench.targets.sim import board


def test_key_changes_with_every_input():
    base = board.BoardSpec(wheels=("numpy==2.0.0", "ai-edge-litert==2.3.0"), mirror="http://m/debian",
                           security_mirror="http://m/debian-security")
    keys = {base.key(),
            board.BoardSpec(**{**base.__dict__, "wheels": ("numpy==2.0.1", "ai-edge-litert==2.3.0")}).key(),
            board.BoardSpec(**{**base.__dict__, "packages": base.packages + ("busybox",)}).key(),
            board.BoardSpec(**{**base.__dict__, "suite": "trixie"}).key(),
            board.BoardSpec(**{**base.__dict__, "mirror": "http://other/debian"}).key()}
    assert len(keys) == 5
    assert base.key() == board.BoardSpec(**base.__dict__).key()


def test_killed_build_is_never_reused(tmp_path, monkeypatch):
    monkeypatch.setenv("EDGEBENCH_BOARD_CACHE", str(tmp_path))
    monkeypatch.setattr(board, "unavailable_reason", lambda: None)
    spec = board.BoardSpec(wheels=("numpy==1",), mirror="http://m/debian", security_mirror="http://m/s")
    calls = []

    def killed(spec_, dest, *, apt_dir, log):
        dest.mkdir(parents=True)
        (dest / "half-extracted").write_text("x")
        raise KeyboardInterrupt          # the build is killed here

    def complete(spec_, dest, *, apt_dir, log):
        calls.append(dest.name)
        (dest / "etc").mkdir(parents=True)
        (dest / board.MANIFEST).write_text(json.dumps({"key": spec_.key()}))

    monkeypatch.setattr(board, "build", killed)
    with pytest.raises(KeyboardInterrupt):
        board.ensure(spec)
    partials = list(tmp_path.glob(f"{spec.key()}.partial-*"))
    assert partials and not (tmp_path / spec.key()).exists()
    # a folder with the final name but no COMPLETE marker (e.g. copied by hand) is not used either
    (tmp_path / spec.key()).mkdir()
    monkeypatch.setattr(board, "build", complete)
    root = board.ensure(spec)
    assert root == tmp_path / spec.key() and board.is_complete(root)
    assert not list(tmp_path.glob(f"{spec.key()}.partial-*")) and calls == [f"{spec.key()}.partial-{os.getpid()}"]
    assert board.manifest(root)["build_s"] >= 0
    assert board.ensure(spec) == root and len(calls) == 1         # cached: not built again


def test_unavailable_reason_names_the_fix(monkeypatch, tmp_path):
    monkeypatch.setattr(board.shutil, "which", lambda tool: f"/usr/bin/{tool}")
    monkeypatch.setattr(board, "KEYRING", __file__)
    monkeypatch.setattr(board, "BINFMT_ENTRY", tmp_path / "qemu-aarch64")
    reason = board.unavailable_reason()
    assert reason and "qemu-user-static" in reason and "update-binfmts --enable qemu-aarch64" in reason
    (tmp_path / "qemu-aarch64").write_text("enabled\ninterpreter /x\nflags: P\n")
    assert "F (fix-binary)" in board.unavailable_reason()
