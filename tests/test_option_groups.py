"""Option groups (``cli._groups``): a command's options defined once per group, flattened for typer."""
from __future__ import annotations

from dataclasses import dataclass, fields

import pytest
import typer
from typer.testing import CliRunner

from edgebench.cli import app
from edgebench.cli._groups import ControlGroup, ConvertGroup, SourceGroup, TargetGroup, grouped, option_group
from edgebench.cli._options import RepeatsOpt, ThreadsOpt


def _app_with(fn) -> typer.Typer:
    a = typer.Typer()
    a.command("one")(fn)
    a.command("two")(lambda: None)           # two commands: typer keeps the subcommand name
    return a


def test_a_group_arrives_as_one_instance_with_the_parsed_values():
    seen = {}

    @grouped
    def cmd(name: str = typer.Option("x", "--name"), target: TargetGroup = TargetGroup(),
            control: ControlGroup = ControlGroup()) -> None:
        seen.update(name=name, target=target, control=control)

    r = CliRunner().invoke(_app_with(cmd), ["one", "--name", "m", "--threads", "3", "--repeats", "4", "--runs", "7",
                                            "--targets", "host,adb:x"])
    assert r.exit_code == 0, r.output
    assert seen["name"] == "m" and isinstance(seen["target"], TargetGroup)
    assert (seen["target"].threads, seen["target"].repeats, seen["target"].targets) == (3, 4, "host,adb:x")
    assert seen["control"].runs == 7 and seen["control"].control().runs == 7
    # defaults are the group's own
    r = CliRunner().invoke(_app_with(cmd), ["one"])
    assert r.exit_code == 0 and seen["target"] == TargetGroup() and seen["control"] == ControlGroup()


@option_group
@dataclass
class Other:
    """A group that names two options TargetGroup has too."""
    threads: ThreadsOpt = None
    repeats: RepeatsOpt = 1


def test_an_option_defined_twice_is_refused_when_the_command_is_defined():
    with pytest.raises(TypeError, match="threads"):
        @grouped
        def cmd(target: TargetGroup = TargetGroup(), other: Other = Other()) -> None:
            pass


@pytest.mark.parametrize("command, groups", [
    ("convert-and-compare", (ConvertGroup, SourceGroup, TargetGroup, ControlGroup)),
    ("convert", (ConvertGroup,)),
    ("bench", (TargetGroup, ControlGroup))])
def test_the_commands_take_their_options_from_the_groups(command, groups):
    """Every field of each group is an option of the command, with the group's default."""
    cmd = typer.main.get_command(app).commands[command]
    params = {p.name: p for p in cmd.params}
    for g in groups:
        for f in fields(g):
            assert f.name in params, (command, g.__name__, f.name)
            assert params[f.name].default == f.default, (command, f.name)


def test_the_conversion_part_is_built_once_for_convert_and_convert_and_compare():
    """The same conversion options give the same ConvertSettings, whichever command parses them."""
    from edgebench.sources.resolve import SourceOptions

    seen = {}

    @grouped
    def cmd(conversion: ConvertGroup = ConvertGroup()) -> None:
        seen["c"] = conversion.settings("m.keras", data="d.npz", source=SourceOptions())

    args = ["one", "-p", "fp32,int8", "--calibration-samples", "7", "--int8-io", "int8", "--keep-float", "dense.*",
            "--size", "full", "--out", "o", "--state", "independent"]
    r = CliRunner().invoke(_app_with(cmd), args)
    assert r.exit_code == 0, r.output
    c = seen["c"]
    assert (c.src, c.precisions, c.data, c.calibration_samples, c.int8_io, c.keep_float, c.size, c.out_dir,
            c.state) == ("m.keras", ("fp32", "int8"), "d.npz", 7, "int8", "dense.*", "full", "o", "independent")
    r = CliRunner().invoke(_app_with(cmd), ["one", "--int8-io", "int4"])
    assert r.exit_code != 0 and "--int8-io int4: use float or int8" in str(r.exception)
