"""Environment lock: write the expected environment once, check every later run against it.

"Two teams on the same GPU differed 30% because one had cuDNN 8.6 and the other 8.9": a lock
file pins the fingerprint's ``KEY_FIELDS`` (TF / LiteRT / numpy / CUDA / cuDNN / driver
versions, GPU, CPU model and count, XLA, AMP, threads, delegate, SoC, device model, governor,
OS). ``edgebench env --lock FILE`` writes it; ``edgebench env --check-lock FILE`` (and
``edgebench matrix run --check-lock FILE``) compare this machine with it and warn, or with
``--strict`` fail with exit 1 (``GateFailed``: the environment gate was missed).

The lock is YAML (``yaml.safe_dump``)::

    edgebench_env_lock: 1
    created: '2026-12-02T10:00:00+00:00'
    hostname: ci-runner-3
    key_fields: {tensorflow: 2.21.0, litert: 2.3.0, cuda: null, ...}
    devices: {SERIAL: {soc: ..., device_model: ...}}     # optional, device fingerprints
    fingerprint: {...the full host fingerprint, for reference only...}

Only ``key_fields`` (and ``devices`` when checked against a device fingerprint) are compared.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from edgebench.core.atomic import write_text
from edgebench.core.bounded import read_yaml
from edgebench.core.errors import BadInput, GateFailed
from edgebench.core.fingerprint import KEY_FIELDS, diff_fingerprints
from edgebench.core.printable import shown
from edgebench.core.result_file import now_iso, to_jsonable

LOCK_VERSION = 1
# A lock is a few dozen lines per device; 1 MiB holds hundreds of devices.
LOCK_MAX_BYTES = 1024 ** 2
# Fields only known when TensorFlow was imported (``host_fingerprint(with_tf=True)``); compared
# only when both the lock and this check gathered them, so `--no-tf` never fakes a difference.
TF_FIELDS = ("cuda", "cudnn", "xla", "amp")


def _has_tf(fp: dict[str, Any]) -> bool:
    return "tf_visible_gpus" in fp


def make_lock(fp: dict[str, Any], devices: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    """The lock document for a host fingerprint (and optional device fingerprints by serial)."""
    lock: dict[str, Any] = {
        "edgebench_env_lock": LOCK_VERSION,
        "created": now_iso(),
        "hostname": fp.get("hostname"),
        "with_tf": _has_tf(fp),
        "key_fields": {f: fp.get(f) for f in KEY_FIELDS},
    }
    if devices:
        lock["devices"] = {s: {f: d.get(f) for f in KEY_FIELDS if d.get(f) is not None}
                           for s, d in devices.items()}
    lock["fingerprint"] = fp
    return to_jsonable(lock)


def write_lock(path: str, fp: dict[str, Any], devices: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    lock = make_lock(fp, devices)
    p = Path(path)
    if p.is_dir():
        raise BadInput(f"--lock {path} is a directory; give a file name such as {p / 'env.lock.yaml'}")

    write_text(p, yaml.safe_dump(lock, sort_keys=False))
    return lock


def read_lock(path: str) -> dict[str, Any]:
    p = Path(path)
    rewrite = f"rewrite it with `edgebench env --lock {path}`"
    try:
        lock = read_yaml(p, LOCK_MAX_BYTES, "an environment lock", rewrite, where=f"--check-lock {path}")
    except FileNotFoundError:
        raise BadInput(f"--check-lock {path}: no such file; write one with `edgebench env --lock {path}`") from None
    except BadInput as exc:
        text = str(exc)
        raise BadInput(text if text.startswith("--check-lock") else f"--check-lock {text}") from None
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        reason = shown(str(exc).splitlines()[0] if str(exc) else type(exc).__name__, quote=False)
        raise BadInput(f"--check-lock {path}: not a readable YAML lock file ({reason}); {rewrite}") from None
    if not isinstance(lock, dict) or "edgebench_env_lock" not in lock or not isinstance(lock.get("key_fields"), dict):
        raise BadInput(f"--check-lock {path}: not an edgebench environment lock (no 'edgebench_env_lock' / "
                       f"'key_fields'); write one with `edgebench env --lock {path}`")
    if lock["edgebench_env_lock"] != LOCK_VERSION:
        raise BadInput(f"--check-lock {path}: lock format {shown(lock['edgebench_env_lock'])}, this edgebench "
                       f"reads {LOCK_VERSION}; rewrite it with `edgebench env --lock {path}`")
    unknown = sorted(set(lock["key_fields"]) - set(KEY_FIELDS), key=str)
    if unknown:
        names = shown(", ".join(map(str, unknown)), quote=False)
        raise BadInput(f"--check-lock {path}: unknown key field(s) {names}; allowed: {', '.join(KEY_FIELDS)}")
    return lock


def check_lock(lock: dict[str, Any], fp: dict[str, Any], *, device: str | None = None,
               device_fp: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """Key-field differences [{field, expected, actual, where}] between a lock and this machine."""
    expected = lock["key_fields"]
    fields = tuple(expected)
    if not (lock.get("with_tf", True) and _has_tf(fp)):
        fields = tuple(f for f in fields if f not in TF_FIELDS)
    out = [{"field": f, "expected": a, "actual": b, "where": "host"}
           for f, a, b in diff_fingerprints(expected, fp, fields=fields)]
    if device and device_fp is not None:
        dev_lock = (lock.get("devices") or {}).get(device)
        if dev_lock is None:
            out.append({"field": "device", "expected": sorted(lock.get("devices") or {}, key=str), "actual": device,
                        "where": device})
        else:
            out += [{"field": f, "expected": a, "actual": b, "where": device}
                    for f, a, b in diff_fingerprints(dev_lock, device_fp, fields=tuple(dev_lock))]
    return out


def describe(diffs: list[dict[str, Any]]) -> str:
    return "; ".join(f"{shown(d['where'], quote=False)} {shown(d['field'], quote=False)}: expected "
                     f"{shown(d['expected'])}, found {shown(d['actual'])}" for d in diffs)


def enforce_lock(path: str, fp: dict[str, Any], *, strict: bool = False,
                 devices: dict[str, dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """Check this machine (and the given adb devices' fingerprints, by serial) against a lock
    file. Returns the differences (empty: identical) for the caller to warn about; with
    ``strict`` a difference raises GateFailed (exit 1)."""
    lock = read_lock(path)
    diffs = check_lock(lock, fp)
    for serial, dev_fp in (devices or {}).items():
        diffs += [d for d in check_lock(lock, fp, device=serial, device_fp=dev_fp) if d["where"] == serial]
    if diffs and strict:
        raise GateFailed(f"environment differs from lock {path}: {describe(diffs)}; fix the machine, "
                         f"or re-lock with `edgebench env --lock {path}`, or drop --strict to only warn")
    return diffs
