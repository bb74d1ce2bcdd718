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
        return f"unknown ({p['error']})"
    what = f"{p.get('threads')} threads on {p.get('affinity_mask')}"
    if p.get("generated"):
        return f"unknown; suggested {what} (--save-profiles DIR)"
    return f"{p['id']}: {what}"


# (header, drop priority): the serial says which device a row is (kept); what decides a benchmark
# (state, model, SoC, cores, runner) goes last on a narrow terminal
_COLUMNS = (("state", 0), ("model", 0), ("SoC / board", 1), ("ABI", 3), ("Android", 2), ("CPU cores", 1),
            ("RAM", 3), ("governor", 4), ("hottest zone", 2), ("battery", 4), ("profile", 3), ("runner", 1))


_TRANSPOSE_UP_TO = 6    # devices shown as columns (one row per fact) when a row each does not fit


def render_devices(rows: list[dict[str, Any]], width: int | None = None, wide: bool = False) -> list:
    """Pure renderer: one table row per device (``report/terminal/fit.py``: the serial stays, no word
    is cut, ``wide`` shows every column); when that does not fit ``width`` and there are a few
    devices, a column per device and a row per fact instead, every fact shown. A device that could
    not be read is a line under the table with its reason, whole."""
    from edgebench.report.terminal.fit import Col, fit_tables, plan

    cols = [Col("serial", identity=True), *(Col(h, priority=p, num=h == "RAM") for h, p in _COLUMNS)]
    cells, problems = [], []
    for r in rows:
        if r.get("state") != "device" or r.get("error"):
            cells.append([str(r["serial"]), str(r.get("state", "?"))] + ["-"] * (len(_COLUMNS) - 1))
            problems.append(f"[red]{e(r['serial'])} ({e(r.get('state', '?'))}): {e(r.get('error') or 'not ready')}[/]")
            continue
        zones = r.get("thermal_c") or {}
        hot = max(zones.items(), key=lambda kv: kv[1]) if zones else None
        bat = r.get("battery") or {}
        ram = r.get("ram_bytes")
        cells.append([
            str(r["serial"]), str(r["state"]), str(r.get("model") or "-"),
            f"{r.get('soc') or '-'} / {r.get('board') or '-'}",
            str(r.get("abi") or "-"),
            f"{r.get('android_version') or '-'} (SDK {r.get('sdk') or '-'})",
            f"{r.get('cpu_cores') or '-'}: {_khz_layout(r.get('cpu_max_khz') or [])}",
            f"{ram / 2**30:.1f} GiB" if ram else "-",
            str(r.get("governor") or "-"),
            f"{hot[0]} {hot[1]:.1f} °C" if hot else "-",
            (f"{bat.get('level_pct', '-')}% {bat.get('temp_c', '-')} °C {bat.get('status', '')}".strip()
             if bat else "-"),
            _profile(r.get("profile")),
            f"edgebench (python3 + {r['tflite_runtime']})" if r.get("has_python_runtime") else "benchmark_model",
        ])
    layout = plan(cols, cells, width, wide=True)
    if len(layout.groups) == 1 or len(cells) > _TRANSPOSE_UP_TO:
        return fit_tables("adb devices", cols, cells, width=width, wide=wide, caption=problems)
    # a few devices on a narrow terminal: a column per device and a row per fact, every fact shown
    fields = [Col("", identity=True), *(Col(row[0]) for row in cells)]
    facts = [[c.header, *(row[i] for row in cells)] for i, c in enumerate(cols) if i > 0]
    return fit_tables("adb devices", fields, facts, width=width, wide=True, caption=problems)
