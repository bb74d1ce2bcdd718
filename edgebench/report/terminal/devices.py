"""``edgebench devices``: one line per adb device with the facts that matter for benchmarking."""

from __future__ import annotations

from typing import Any

from edgebench.report.terminal._cells import e
from edgebench.report.terminal.fit import Col, fit_tables, plan
from edgebench.rows.records import Device, DeviceProfile


def _or(v: Any) -> str:
    return "-" if v is None else f"{v:g}" if isinstance(v, float) else str(v)


def _khz_layout(khz: list[Any]) -> str:
    """[1704000]*4 + [2367000]*4 + [2913000] -> '4x1.70 + 4x2.37 + 1x2.91 GHz'."""
    vals = [k for k in khz if k]
    if not vals:
        return "-"
    groups: dict[int, int] = {}
    for k in vals:
        groups[k] = groups.get(k, 0) + 1
    return " + ".join(f"{n}x{k / 1e6:.2f}" for k, n in sorted(groups.items())) + " GHz"


def _profile(p: DeviceProfile | None) -> str:
    """'pixel_8: 4 threads on f0' for a known device; 'unknown (generated: ...)' otherwise."""
    if p is None:
        return "-"
    if p.error:
        return f"unknown ({p.error})"
    what = f"{p.threads} threads on {p.affinity_mask}"
    if p.generated:
        return f"unknown; suggested {what} (--save-profiles DIR)"
    return f"{p.id}: {what}"


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

    cols = [Col("serial", identity=True), *(Col(h, priority=p, num=h == "RAM") for h, p in _COLUMNS)]
    cells, problems = [], []
    for d in (Device.of(r) for r in rows):
        if not d.ready:
            cells.append([d.serial, d.state] + ["-"] * (len(_COLUMNS) - 1))
            problems.append(f"[red]{e(d.serial)} ({e(d.state)}): {e(d.error or 'not ready')}[/]")
            continue
        hot = max(d.thermal_c.items(), key=lambda kv: kv[1]) if d.thermal_c else None
        cells.append([
            d.serial, d.state, d.model or "-", f"{d.soc or '-'} / {d.board or '-'}", d.abi or "-",
            f"{d.android_version or '-'} (SDK {d.sdk or '-'})",
            f"{d.cpu_cores or '-'}: {_khz_layout(list(d.cpu_max_khz))}",
            f"{d.ram_bytes / 2**30:.1f} GiB" if d.ram_bytes else "-",
            d.governor or "-",
            f"{hot[0]} {hot[1]:.1f} °C" if hot else "-",
            (f"{_or(d.battery_level_pct)}% {_or(d.battery_temp_c)} °C {d.battery_status or ''}".strip()
             if d.has_battery else "-"),
            _profile(d.profile),
            f"edgebench (python3 + {d.tflite_runtime})" if d.has_python_runtime else "benchmark_model",
        ])
    layout = plan(cols, cells, width, wide=True)
    if len(layout.groups) == 1 or len(cells) > _TRANSPOSE_UP_TO:
        return fit_tables("adb devices", cols, cells, width=width, wide=wide, caption=problems)
    # a few devices on a narrow terminal: a column per device and a row per fact, every fact shown
    fields = [Col("", identity=True), *(Col(row[0]) for row in cells)]
    facts = [[c.header, *(row[i] for row in cells)] for i, c in enumerate(cols) if i > 0]
    return fit_tables("adb devices", fields, facts, width=width, wide=True, caption=problems)
