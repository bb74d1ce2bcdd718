"""``edgebench devices``: one line per adb device with the facts that matter for benchmarking."""

from __future__ import annotations

from typing import Any

from edgebench.report.terminal._cells import e


def _khz_layout(khz: list[Any]) -> str:
    """[1704000]*4 + [2367000]*4 + [2913000] -> '4x1.70 + 4x2.37 + 1x2.91 GHz'."""
    vals = [k for k in khz if k]
    if not vals:
        return "-"
    groups: dict[int, int] = {}
    for k in vals:
        groups[k] = groups.get(k, 0) + 1
    return " + ".join(f"{n}x{k / 1e6:.2f}" for k, n in sorted(groups.items())) + " GHz"


def _profile(p: Any) -> str:
    """'pixel_8: 4 threads on f0' for a known device; 'unknown (generated: ...)' otherwise."""
    if not p:
        return "-"
    if p.get("error"):
        return e(f"unknown ({p['error']})")
    what = f"{p.get('threads')} threads on {p.get('affinity_mask')}"
    if p.get("generated"):
        return e(f"unknown; suggested {what} (--save-profiles DIR)")
    return e(f"{p['id']}: {what}")


def render_devices(rows: list[dict[str, Any]]):
    """Pure renderer: one table row per device."""
    from rich.table import Table

    t = Table(title="adb devices", show_header=True, header_style="bold")
    t.add_column("serial", no_wrap=True)    # an id is never split across lines
    for col in ("state", "model", "SoC / board", "ABI", "Android", "CPU cores", "RAM",
                "governor", "hottest zone", "battery", "profile", "runner"):
        t.add_column(col, overflow="fold")
    for r in rows:
        if r.get("state") != "device" or r.get("error"):
            t.add_row(e(r["serial"]), e(r.get("state", "?")), f"[red]{e(r.get('error', ''))}[/]", *["-"] * 10)
            continue
        zones = r.get("thermal_c") or {}
        hot = max(zones.items(), key=lambda kv: kv[1]) if zones else None
        bat = r.get("battery") or {}
        ram = r.get("ram_bytes")
        t.add_row(
            e(r["serial"]), e(r["state"]), e(r.get("model") or "-"),
            e(f"{r.get('soc') or '-'} / {r.get('board') or '-'}"),
            e(r.get("abi") or "-"),
            f"{r.get('android_version') or '-'} (SDK {r.get('sdk') or '-'})",
            f"{r.get('cpu_cores') or '-'}: {_khz_layout(r.get('cpu_max_khz') or [])}",
            f"{ram / 2**30:.1f} GiB" if ram else "-",
            e(r.get("governor") or "-"),
            e(f"{hot[0]} {hot[1]:.1f} °C") if hot else "-",
            (f"{bat.get('level_pct', '-')}% {bat.get('temp_c', '-')} °C {bat.get('status', '')}".strip()
             if bat else "-"),
            _profile(r.get("profile")),
            e("edgebench (python3 + " + str(r["tflite_runtime"]) + ")") if r.get("has_python_runtime")
            else "benchmark_model",
        )
    return t
