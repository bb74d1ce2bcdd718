"""The docs site and the README front door: generated pages current, the site builds with every
link and anchor checked, the README small and its links live, the architecture page names every
floor, and the fast lane's slow list names real tests."""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README_MAX_BYTES = 15 * 1024


def _build_docs():
    spec = importlib.util.spec_from_file_location("build_docs", ROOT / "scripts" / "build_docs.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _mkdocs(config: Path) -> subprocess.CompletedProcess:
    mkdocs = shutil.which("mkdocs", path=str(Path(sys.executable).parent)) or "mkdocs"
    return subprocess.run([mkdocs, "build", "--strict", "-f", str(config), "-d", str(config.parent / "site")],
                          capture_output=True, text=True, timeout=300)


def test_generated_pages_are_current():
    build = _build_docs()
    for path, text in build.pages().items():
        assert path.read_text(encoding="utf-8") == text, \
            f"{path.relative_to(ROOT)} is not current: run python scripts/build_docs.py"


def test_check_names_a_stale_page(tmp_path, monkeypatch):
    build = _build_docs()
    (tmp_path / "docs").mkdir()
    monkeypatch.setattr(build, "DOCS", tmp_path / "docs")
    monkeypatch.setattr(build, "ROOT", tmp_path)
    (tmp_path / "README.md").write_text("# x\n\nsee [the gate](docs/gate.md) and [ci](scripts/ci/x.yml)\n")
    monkeypatch.setattr(build, "cli_page", lambda: "# cli\n")
    assert build.main([]) == 0
    index = (tmp_path / "docs" / "index.md").read_text()
    assert "[the gate](gate.md)" in index and "ci (`scripts/ci/x.yml`)" in index
    assert build.main(["--check"]) == 0
    (tmp_path / "README.md").write_text("# changed\n")
    assert build.main(["--check"]) == 1


def test_every_command_and_option_is_on_the_cli_page():
    build = _build_docs()
    page = (ROOT / "docs" / "cli.md").read_text()
    _root, commands = build._command_tree()
    assert len(commands) >= 20
    for name, cmd in commands:
        at = page.index(f"## `edgebench {name}`")
        end = page.find("\n## ", at + 1)
        section = page[at:end if end > 0 else None]
        for p in cmd.params:
            if p.param_type_name == "option" and not p.hidden:
                assert f"`{p.opts[0]}`" in section, f"{name}: {p.opts[0]} not on docs/cli.md"


def test_the_site_builds_strict_with_every_link_checked():
    p = _mkdocs(ROOT / "mkdocs.yml")
    assert p.returncode == 0, p.stderr[-3000:]
    assert "WARNING" not in p.stderr, p.stderr[-3000:]


@pytest.mark.parametrize("link", ["[x](no-such-page.md)", "[y](gate.md#no-such-anchor)"])
def test_a_broken_link_fails_the_build(tmp_path, link):
    shutil.copytree(ROOT / "docs", tmp_path / "docs")
    shutil.copy(ROOT / "mkdocs.yml", tmp_path / "mkdocs.yml")
    with (tmp_path / "docs" / "limits.md").open("a") as f:
        f.write(f"\n{link}\n")
    p = _mkdocs(tmp_path / "mkdocs.yml")
    assert p.returncode != 0 and link.split("(")[1].rstrip(")").split("#")[-1] in p.stderr, p.stderr[-2000:]


def test_the_readme_is_a_front_door():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.encode()) <= README_MAX_BYTES, f"README.md is {len(readme.encode())} bytes (at most 15 KB)"
    for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", readme):
        if not target.startswith(("http://", "https://")):
            assert (ROOT / target).exists(), f"README links to {target}, which is not there"
    for section in ("## Install", "## Commands", "## Exit codes", "## Documentation", "## First screen"):
        assert section in readme, section


def test_the_architecture_page_names_every_floor_and_folder():
    spec = importlib.util.spec_from_file_location("test_layers_floors", ROOT / "tests" / "test_layers.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    page = (ROOT / "docs" / "architecture.md").read_text()
    for name, folders in mod.FLOORS:
        assert f"| {name} |" in page, f"docs/architecture.md has no row for the floor {name!r}"
        for folder in folders:
            assert f"`{folder}/`" in page, f"docs/architecture.md does not name {folder}/"


def test_the_slow_list_names_tests_that_exist():
    from conftest import slow_tests

    listed = slow_tests()
    assert len(listed) > 20
    files = {n.split("::")[0] for n in listed}
    missing = [f for f in files if not (ROOT / f).exists()]
    assert not missing, f"tests/slow_tests.txt names files that are gone: {missing}; rerun scripts/slow_tests.py"
    for nodeid in sorted(listed)[:: max(1, len(listed) // 15)]:
        path, _, name = nodeid.partition("::")
        func = name.split("[")[0].split("::")[-1]
        assert re.search(rf"def {re.escape(func)}\b", (ROOT / path).read_text()), nodeid


def test_a_listed_test_is_left_out_of_the_fast_lane():
    from conftest import slow_tests

    nodeid = sorted(slow_tests())[0]
    p = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                        "-m", "not extras and not slow", nodeid], capture_output=True, text=True, cwd=ROOT,
                       timeout=600)
    assert "deselected" in p.stdout and nodeid not in p.stdout.replace(" deselected", ""), p.stdout[-2000:]
