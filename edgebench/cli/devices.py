"""``edgebench devices``: every adb device with the facts that matter for benchmarking."""

from __future__ import annotations

from typing import Any, Optional

import typer


def _khz_layout(khz: list[Any]) -> str:
    """[1704000]*4 + [2367000]*4 + [2913000] -> '4x1.70 + 4x2.37 + 1x2.91 GHz'."""
    vals = [k for k in khz if k]
    if not vals:
        return "-"
    groups: dict[int, int] = {}
    for k in vals:
        groups[k] = groups.get(k, 0) + 1
    return " + ".join(f"{n}x{k / 1e6:.2f}" for k, n in sorted(groups.items())) + " GHz"


def render_devices(rows: list[dict[str, Any]]):
    """Pure renderer: one table row per device."""
    from rich.table import Table

    t = Table(title="adb devices", show_header=True, header_style="bold")
    for col in ("serial", "state", "model", "SoC / board", "ABI", "Android", "CPU cores", "RAM",
                "governor", "hottest zone", "battery", "runner"):
        t.add_column(col, overflow="fold")
    for r in rows:
        if r.get("state") != "device" or r.get("error"):
            t.add_row(r["serial"], r.get("state", "?"), f"[red]{r.get('error', '')}[/]", *["-"] * 9)
            continue
        zones = r.get("thermal_c") or {}
        hot = max(zones.items(), key=lambda kv: kv[1]) if zones else None
        bat = r.get("battery") or {}
        ram = r.get("ram_bytes")
        t.add_row(
            r["serial"], r["state"], r.get("model") or "-",
            f"{r.get('soc') or '-'} / {r.get('board') or '-'}",
            r.get("abi") or "-",
            f"{r.get('android_version') or '-'} (SDK {r.get('sdk') or '-'})",
            f"{r.get('cpu_cores') or '-'}: {_khz_layout(r.get('cpu_max_khz') or [])}",
            f"{ram / 2**30:.1f} GiB" if ram else "-",
            r.get("governor") or "-",
            f"{hot[0]} {hot[1]:.1f} °C" if hot else "-",
            (f"{bat.get('level_pct', '-')}% {bat.get('temp_c', '-')} °C {bat.get('status', '')}".strip()
             if bat else "-"),
            "edgebench (python3 + " + r["tflite_runtime"] + ")" if r.get("has_python_runtime")
            else "benchmark_model",
        )
    return t


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

        con = console()
        if not rows:
            con.print("no adb devices (adb devices lists none): connect a phone with USB debugging on, "
                      "or try the simulated device: python -m edgebench.sim.adbd --port 5599 "
                      "--sandbox /tmp/simphone --python, then adb connect 127.0.0.1:5599")
            return
        con.print(render_devices(rows))
