"""``edgebench devices``: every adb device with the facts that matter for benchmarking."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from edgebench.cli._common import console, escape_markup
from edgebench.cli._options import JsonOpt, WideOpt
from edgebench.core.fingerprint import host_fingerprint
from edgebench.core.result_file import envelope, write_json
from edgebench.report.terminal.devices import render_devices
from edgebench.targets.adb.devices import list_devices
from edgebench.targets.device_profiles import profile_id_for, save_profile


def register(app: typer.Typer) -> None:
    @app.command("devices")
    def devices_cmd(
        json_path: JsonOpt = None,
        props: Annotated[bool, typer.Option("--props", help="Include every getprop property in the JSON.")] = False,
        wide: WideOpt = False,
        save_profiles: Annotated[Optional[str], typer.Option(
            "--save-profiles", help="Write a generated profile (YAML) for every device no profile matches into "
                                    "DIR (edit it, then edgebench uses its threads/affinity).")] = None,
    ) -> None:
        """List adb devices: state, model, SoC/board, ABI, Android/SDK, CPU cores and max frequencies, RAM,
        governor, thermal zones, battery, the matching device profile, and which runner edgebench will use."""


        rows = list_devices(with_props=True)
        saved = []
        if save_profiles:
            for r in rows:
                prof = r.get("profile") or {}
                if prof.get("generated") and prof.get("document"):
                    path = Path(save_profiles) / f"{profile_id_for(r.get('props') or {})}.yaml"
                    saved.append(str(save_profile(prof["document"], path)))
        if not props:
            for r in rows:
                r.pop("props", None)
        if json_path:
            write_json(envelope("devices", rows, host_fingerprint()), json_path)
            if json_path == "-":
                return
        con = console()
        if not rows:
            con.print("no adb devices (adb devices lists none): connect a phone with USB debugging on, "
                      "or try the simulated device: python -m edgebench.targets.sim.adbd --port 5599 "
                      "--sandbox /tmp/simphone --python, then adb connect 127.0.0.1:5599")
            return
        for part in render_devices(rows, width=con.width, wide=wide):
            con.print(part)
        for path in saved:
            con.print(escape_markup(f"saved a generated profile to {path}; check it against the maker's spec "
                                    f"sheet, then put it in {Path(path).parent} (or $EDGEBENCH_DEVICE_PROFILES)"))
