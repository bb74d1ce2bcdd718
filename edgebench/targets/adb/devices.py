"""Which devices: ``--targets adb[:SERIAL|:all]`` resolved to ``AdbTarget``s (with the fix for
every unusable state), and the rows of ``edgebench devices``."""

from __future__ import annotations

from typing import Any

from edgebench.core.errors import BadInput, EdgebenchError
from edgebench.targets.adb.client import _state_fix, list_states
from edgebench.targets.adb.lanes import run_lanes
from edgebench.targets.adb.remote import AdbDevice
from edgebench.targets.adb.runners import AdbTarget
from edgebench.targets.device_profiles import generate_profile, match_profile

SIM_HINT = ("or try the simulated device: python -m edgebench.targets.sim.adbd --port 5599 --sandbox /tmp/simphone "
            "--python & adb connect 127.0.0.1:5599")


# ============================================================================ choosing devices
def resolve_adb_targets(spec: str, **target_kwargs: Any) -> list[AdbTarget]:
    """``adb``, ``adb:SERIAL[,adb:SERIAL]`` or ``adb:all`` -> targets (other items ignored).

    No device, several devices with no choice, an unknown serial, or an unauthorized/offline
    device raise BadInput with the fix."""
    items = [s.strip() for s in spec.split(",") if s.strip().startswith("adb")]
    if not items:
        return []
    states = list_states()
    usable = [s for s, st in states if st == "device"]
    if not states:
        raise BadInput("no adb device found (adb devices lists none): connect a phone with USB debugging on, "
                       f"or a board with 'adb connect HOST:PORT', {SIM_HINT}")
    serials: list[str] = []
    for item in items:
        if item == "adb:all":
            if not usable:
                raise BadInput(_state_fix(*states[0]))
            serials.extend(usable)
        elif item == "adb":
            if len(states) > 1:
                raise BadInput(f"several adb devices are attached ({', '.join(s for s, _ in states)}); choose one "
                               f"with --targets adb:SERIAL (e.g. adb:{states[0][0]}) or all with --targets adb:all")
            serial, st = states[0]
            if st != "device":
                raise BadInput(_state_fix(serial, st))
            serials.append(serial)
        elif item.startswith("adb:"):
            serial = item[4:]
            st = dict(states).get(serial)
            if st is None:
                raise BadInput(f"adb device {serial!r} is not attached (adb devices lists: "
                               f"{', '.join(f'{s} ({t})' for s, t in states)}); use one of those serials or adb:all")
            if st != "device":
                raise BadInput(_state_fix(serial, st))
            serials.append(serial)
        else:
            raise BadInput(f"--targets item {item!r} is not understood; use adb, adb:SERIAL or adb:all")
    seen: list[str] = []
    for s in serials:
        if s not in seen:
            seen.append(s)
    return [AdbTarget(s, **target_kwargs) for s in seen]


# ============================================================================ edgebench devices
def device_info(serial: str, state: str) -> dict[str, Any]:
    """One row of ``edgebench devices``: facts for an online device, the state and fix otherwise."""
    row: dict[str, Any] = {"serial": serial, "state": state}
    if state != "device":
        row["error"] = _state_fix(serial, state)
        return row
    try:
        facts = AdbDevice(serial).probe()
    except EdgebenchError as exc:
        row["error"] = str(exc)
        return row
    facts.pop("probe_complete", None)
    row.update(facts)
    row["profile"] = _profile_summary(facts)
    return row


def _profile_summary(facts: dict[str, Any]) -> dict[str, Any]:
    """The matching device profile (what edgebench uses when the user sets no --threads), or, for
    an unknown device, the generated profile the user can save (``edgebench devices --save-profiles``)."""

    props = facts.get("props") or {}
    prof = match_profile(props)
    if prof is not None:
        return {"id": prof.id, "name": prof.name, "threads": prof.threads, "affinity_mask": prof.affinity_mask,
                "delegates": list(prof.delegates), "generated": False}
    cpus = [{"id": i, "max_mhz": int(k) // 1000} for i, k in enumerate(facts.get("cpu_max_khz") or []) if k]
    try:
        doc = generate_profile(props, cpus)
    except EdgebenchError as exc:
        return {"id": None, "generated": False, "error": str(exc)}
    rec = doc.get("recommended") or {}
    return {"id": None, "name": doc.get("name"), "threads": rec.get("threads"),
            "affinity_mask": rec.get("affinity_mask"), "delegates": doc.get("delegates"), "generated": True,
            "document": doc}


def list_devices(with_props: bool = True) -> list[dict[str, Any]]:
    """Every device ``adb devices`` lists, with its facts (probed in parallel)."""
    states = list_states()
    outcomes = run_lanes([(s, st) for s, st in states], lambda ss: device_info(*ss))
    rows = [o.value if o.error is None else {"serial": o.target[0], "state": o.target[1], "error": str(o.error)}
            for o in outcomes]
    if not with_props:
        for r in rows:
            r.pop("props", None)
    return rows
