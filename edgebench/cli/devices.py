"""``edgebench devices``: every adb device with the facts that matter for benchmarking."""

from __future__ import annotations

from typing import Optional

import typer


def register(app: typer.Typer) -> None:
    @app.command("devices")
    def devices_cmd(
        json_path: Optional[str] = typer.Option(None, "--json", help="Write the device list as JSON to PATH ('-' for stdout)."),
        props: bool = typer.Option(False, "--props", help="Include every getprop property in the JSON."),
    ) -> None:
        """List adb devices: state, model, SoC/board, ABI, Android/SDK, CPU cores and max
        frequencies, RAM, governor, thermal zones, battery, and which runner edgebench will use."""
        from edgebench.fingerprint import host_fingerprint
        from edgebench.results import envelope, write_json
        from edgebench.targets.adb.devices import list_devices

        rows = list_devices(with_props=props)
        if json_path:
            write_json(envelope("devices", rows, host_fingerprint()), json_path)
            if json_path == "-":
                return
        from edgebench.cli._common import console
        from edgebench.report.terminal.devices import render_devices

        con = console()
        if not rows:
            con.print("no adb devices (adb devices lists none): connect a phone with USB debugging on, "
                      "or try the simulated device: python -m edgebench.sim.adbd --port 5599 "
                      "--sandbox /tmp/simphone --python, then adb connect 127.0.0.1:5599")
            return
        con.print(render_devices(rows))
