"""Device profiles: what edgebench knows about a phone or board before it benchmarks it.

A profile (``device_profiles/*.yaml``, one per device, loaded with ``yaml.safe_load`` into
frozen dataclasses) names the SoC, the CPU core layout (clusters "prime"/"big"/"mid"/
"little" with cpu ids and max MHz), the recommended thread count and affinity mask, and the
delegates that exist on it. ``match_profile(props)`` picks the profile of a connected device
from its properties (``getprop`` keys such as ``ro.product.model``; Linux boards report their
device-tree model as ``model``). Unknown devices get ``generate_profile(props, cpu_facts)``:
a plain dict in the same schema, which the user can save as YAML and edit.
"""

from __future__ import annotations

import fnmatch
import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import yaml

import device_profiles
from edgebench.core.atomic import write_text
from edgebench.core.bounded import load_yaml_text, read_bytes
from edgebench.core.errors import BadInput
from edgebench.core.paths import data_dir
from edgebench.core.printable import shown

CLUSTER_NAMES = ("prime", "big", "mid", "little")
KINDS = ("phone", "board")
DELEGATES = ("xnnpack", "gpu", "nnapi", "hexagon", "coreml")
# Properties that identify the device itself (a profile must match one of these); the others
# (e.g. ro.board.platform, shared by every phone on the same SoC) only break ties.
IDENTITY_KEYS = ("ro.product.model", "ro.product.device", "model")
ENV_DIRS = "EDGEBENCH_DEVICE_PROFILES"
# A profile is ~40 lines (~1 KiB); 256 KiB leaves room for long comments and source lists.
PROFILE_MAX_BYTES = 256 * 1024


@dataclass(frozen=True)
class CoreCluster:
    name: str
    cpu_ids: tuple[int, ...]
    max_mhz: int
    core: str | None = None

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"name": self.name, "cpu_ids": list(self.cpu_ids)}
        if self.core:
            d["core"] = self.core
        d["max_mhz"] = self.max_mhz
        return d


@dataclass(frozen=True)
class Profile:
    id: str
    name: str
    kind: str
    soc: str
    abi: str
    clusters: tuple[CoreCluster, ...]
    threads: int
    affinity_mask: str
    delegates: tuple[str, ...]
    match: dict[str, tuple[str, ...]]
    gpu: str | None = None
    npu: str | None = None
    ram_gb: float | None = None
    sources: tuple[str, ...] = ()
    path: Path | None = field(default=None, compare=False)

    @property
    def cpu_ids(self) -> tuple[int, ...]:
        return tuple(sorted(i for c in self.clusters for i in c.cpu_ids))

    @property
    def affinity_cpus(self) -> tuple[int, ...]:
        m = int(self.affinity_mask, 16)
        return tuple(i for i in range(m.bit_length()) if m >> i & 1)

    def cluster_of(self, cpu: int) -> CoreCluster | None:
        return next((c for c in self.clusters if cpu in c.cpu_ids), None)

    def to_dict(self) -> dict[str, Any]:
        """The YAML schema (what ``load_profile_file`` reads back)."""
        return {
            "name": self.name, "kind": self.kind, "soc": self.soc, "abi": self.abi,
            "gpu": self.gpu, "npu": self.npu, "ram_gb": self.ram_gb,
            "match": {k: list(v) for k, v in self.match.items()},
            "clusters": [c.to_dict() for c in self.clusters],
            "recommended": {"threads": self.threads, "affinity_mask": self.affinity_mask},
            "delegates": list(self.delegates),
            "sources": list(self.sources),
        }


# --------------------------------------------------------------------------- loading


def _bad(path: Path | str, key: str, problem: str) -> BadInput:
    return BadInput(f"device profile {path}: key '{key}' {problem}; fix the file (see docs/benchmark_model.md)")


def _req(d: Mapping[str, Any], key: str, typ: type | tuple[type, ...], path: Path | str, prefix: str = "") -> Any:
    if key not in d or d[key] is None:
        raise _bad(path, prefix + key, "is missing")
    v = d[key]
    if not isinstance(v, typ) or isinstance(v, bool) and typ is not bool:
        raise _bad(path, prefix + key, f"must be {getattr(typ, '__name__', typ)}, got {type(v).__name__} {shown(v)}")
    return v


def profile_from_dict(d: Any, path: Path | str = "<dict>", profile_id: str | None = None) -> Profile:
    """Validate a parsed YAML document into a Profile (BadInput names the file and the key)."""
    if not isinstance(d, Mapping):
        raise _bad(path, "<top level>", f"must be a mapping, got {type(d).__name__}")
    known = {"name", "kind", "soc", "abi", "gpu", "npu", "ram_gb", "match", "clusters", "recommended",
             "delegates", "sources"}
    unknown = sorted(set(d) - known, key=str)
    if unknown:
        raise _bad(path, shown(str(unknown[0]), 80, quote=False),
                   f"is not a profile key (known: {', '.join(sorted(known))})")
    name = _req(d, "name", str, path)
    kind = _req(d, "kind", str, path)
    if kind not in KINDS:
        raise _bad(path, "kind", f"must be one of {KINDS}, got {shown(kind)}")
    soc = _req(d, "soc", str, path)
    abi = _req(d, "abi", str, path)

    raw_match = _req(d, "match", dict, path)
    match: dict[str, tuple[str, ...]] = {}
    for k, v in raw_match.items():
        vals = [v] if isinstance(v, str) else v
        if not isinstance(vals, list) or not vals or not all(isinstance(x, (str, int)) for x in vals):
            raise _bad(path, f"match.{shown(str(k), 80, quote=False)}", "must be a non-empty list of strings")
        match[str(k)] = tuple(str(x) for x in vals)
    if not any(k in match for k in IDENTITY_KEYS):
        raise _bad(path, "match", f"needs at least one of {', '.join(IDENTITY_KEYS)}")

    raw_clusters = _req(d, "clusters", list, path)
    if not raw_clusters:
        raise _bad(path, "clusters", "must list at least one cluster")
    clusters = []
    seen: set[int] = set()
    for i, c in enumerate(raw_clusters):
        pre = f"clusters[{i}]."
        if not isinstance(c, Mapping):
            raise _bad(path, f"clusters[{i}]", "must be a mapping")
        cname = _req(c, "name", str, path, pre)
        if cname not in CLUSTER_NAMES:
            raise _bad(path, pre + "name", f"must be one of {CLUSTER_NAMES}, got {shown(cname)}")
        ids = _req(c, "cpu_ids", list, path, pre)
        if not ids or not all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in ids):
            raise _bad(path, pre + "cpu_ids", "must be a non-empty list of cpu numbers >= 0")
        dup = seen.intersection(ids)
        if dup:
            raise _bad(path, pre + "cpu_ids", f"repeats cpu {sorted(dup)[0]} of another cluster")
        seen.update(ids)
        mhz = _req(c, "max_mhz", (int, float), path, pre)
        if mhz <= 0:
            raise _bad(path, pre + "max_mhz", f"must be > 0, got {shown(mhz)}")
        core = c.get("core")
        clusters.append(CoreCluster(cname, tuple(int(x) for x in ids), int(mhz), str(core) if core else None))

    rec = _req(d, "recommended", dict, path)
    threads = _req(rec, "threads", int, path, "recommended.")
    mask = _req(rec, "affinity_mask", (str, int), path, "recommended.")
    mask = format(mask, "x") if isinstance(mask, int) else mask.lower().removeprefix("0x")
    try:
        m = int(mask, 16)
    except ValueError:
        raise _bad(path, "recommended.affinity_mask", f"must be a hex cpu mask like 'f0', got {shown(mask)}") from None
    cpus = {i for i in range(m.bit_length()) if m >> i & 1}
    if not cpus or not cpus <= seen:
        raise _bad(path, "recommended.affinity_mask",
                   f"{shown(mask)} selects cpus {sorted(cpus)} but the clusters have {sorted(seen)}")
    if not 1 <= threads <= len(cpus):
        raise _bad(path, "recommended.threads", f"must be between 1 and the {len(cpus)} cpus of the mask, got {shown(threads)}")

    dels = _req(d, "delegates", list, path)
    bad = [x for x in dels if x not in DELEGATES]
    if bad or not dels:
        raise _bad(path, "delegates", f"must list some of {DELEGATES}, got {shown(dels)}")
    ram = d.get("ram_gb")
    if ram is not None and (not isinstance(ram, (int, float)) or isinstance(ram, bool) or ram <= 0):
        raise _bad(path, "ram_gb", f"must be a positive number, got {shown(ram)}")
    sources = d.get("sources") or []
    if not isinstance(sources, list) or not all(isinstance(s, str) for s in sources):
        raise _bad(path, "sources", "must be a list of strings (URLs)")
    for opt in ("gpu", "npu"):
        if d.get(opt) is not None and not isinstance(d[opt], str):
            raise _bad(path, opt, "must be a string or null")
    pid = profile_id or (Path(path).stem if isinstance(path, (str, Path)) and str(path) != "<dict>" else name)
    return Profile(
        id=pid, name=name, kind=kind, soc=soc, abi=abi,
        clusters=tuple(sorted(clusters, key=lambda c: -c.max_mhz)), threads=threads, affinity_mask=mask,
        delegates=tuple(dels), match=match, gpu=d.get("gpu"), npu=d.get("npu"),
        ram_gb=float(ram) if ram is not None else None, sources=tuple(sources),
        path=Path(path) if isinstance(path, Path) else None,
    )


def load_profile_file(path: str | os.PathLike) -> Profile:
    p = Path(path)
    fix = "fix the file (see docs/benchmark_model.md)"
    try:
        text = read_bytes(p, PROFILE_MAX_BYTES, "a device profile", fix).decode("utf-8")
    except BadInput as exc:
        raise BadInput(f"device profile {exc}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInput(f"device profile {p}: cannot read it ({shown(str(exc), quote=False)}); check the "
                       "path") from None
    try:
        doc = load_yaml_text(text, f"device profile {p}", "write the values out (no &anchors/*aliases)")
    except yaml.YAMLError as exc:
        where = getattr(exc, "problem_mark", None)
        loc = f" at line {where.line + 1}" if where is not None else ""
        problem = str(getattr(exc, "problem", None) or exc)
        raise BadInput(f"device profile {p}: invalid YAML{loc} ({shown(problem, quote=False)}); fix the "
                       "file") from None
    return profile_from_dict(doc, p)


def builtin_dir() -> Path:
    return Path(device_profiles.__file__).resolve().parent


def user_dir() -> Path:
    """Where saved (generated, edited) profiles live: <data dir>/device_profiles."""
    return data_dir() / "device_profiles"


def profile_dirs() -> list[Path]:
    dirs = [builtin_dir()]
    extra = os.environ.get(ENV_DIRS)
    if extra:
        dirs += [Path(x) for x in extra.split(os.pathsep) if x]
    dirs.append(user_dir())
    return dirs


def load_profiles(dirs: Iterable[str | os.PathLike] | None = None) -> list[Profile]:
    """Every profile in ``dirs`` (default: built-in, $EDGEBENCH_DEVICE_PROFILES, user dir).

    A later directory's file with the same file name overrides an earlier one, so a user
    can correct a built-in profile by saving one with the same name.
    """
    by_id: dict[str, Profile] = {}
    for d in (profile_dirs() if dirs is None else [Path(x) for x in dirs]):
        d = Path(d)
        if not d.is_dir():
            continue
        for f in sorted(list(d.glob("*.yaml")) + list(d.glob("*.yml"))):
            prof = load_profile_file(f)
            by_id[prof.id] = prof
    return sorted(by_id.values(), key=lambda p: p.id)


# --------------------------------------------------------------------------- matching


def _norm(v: Any) -> str:
    return " ".join(str(v).split()).lower()


def _value_matches(prop: Any, patterns: Sequence[str]) -> bool:
    pv = _norm(prop)
    return any(fnmatch.fnmatchcase(pv, _norm(p)) for p in patterns)


def match_score(profile: Profile, props: Mapping[str, Any]) -> int:
    """0 when an identity key does not match; else 10 per matching identity key + 1 per other key."""
    identity = [k for k in IDENTITY_KEYS if k in profile.match and props.get(k) not in (None, "")]
    hits = [k for k in identity if _value_matches(props[k], profile.match[k])]
    if not hits:
        return 0
    others = sum(1 for k, pats in profile.match.items()
                 if k not in IDENTITY_KEYS and props.get(k) not in (None, "") and _value_matches(props[k], pats))
    return 10 * len(hits) + others


def match_profile(props: Mapping[str, Any], profiles: Sequence[Profile] | None = None) -> Profile | None:
    """The best profile for a device's properties, or None when no identity key matches."""
    profs = load_profiles() if profiles is None else profiles
    scored = [(match_score(p, props), p.id, p) for p in profs]
    scored = [s for s in scored if s[0] > 0]
    if not scored:
        return None
    scored.sort(key=lambda s: (-s[0], s[1]))
    return scored[0][2]


# --------------------------------------------------------------------------- unknown devices


def _cpu_freqs(cpu_facts: Any) -> dict[int, int]:
    """cpu id -> max MHz from {id: khz} or [{"cpu"|"id": n, "max_khz"|"max_freq_khz"|"max_mhz": f}]."""
    out: dict[int, int] = {}
    if isinstance(cpu_facts, Mapping):
        items = [(k, v) for k, v in cpu_facts.items()]
        for k, v in items:
            if isinstance(v, Mapping):
                v = v.get("max_khz", v.get("max_freq_khz", (v.get("max_mhz") or 0) * 1000))
            out[int(k)] = int(round(int(v) / 1000))
    else:
        for c in cpu_facts or []:
            cid = c.get("cpu", c.get("id"))
            if "max_mhz" in c and c["max_mhz"] is not None:
                mhz = int(c["max_mhz"])
            else:
                mhz = int(round(int(c.get("max_khz", c.get("max_freq_khz", 0)) or 0) / 1000))
            out[int(cid)] = mhz
    if not out or any(v <= 0 for v in out.values()):
        raise BadInput("cpu facts have no max frequency for some cpu; read "
                       "/sys/devices/system/cpu/cpu*/cpufreq/cpuinfo_max_freq from the device")
    return out


def generate_profile(props: Mapping[str, Any], cpu_facts: Any) -> dict[str, Any]:
    """A profile dict (the YAML schema) for a device no built-in profile matches.

    Clusters group cpus of equal max frequency (fastest first: big; slowest: little); the
    recommendation is up to 4 threads on the fastest non-little cores (all cores of a
    single-cluster board). It is marked unverified; save it with ``save_profile`` and edit.
    """
    freqs = _cpu_freqs(cpu_facts)
    by_mhz: dict[int, list[int]] = {}
    for cpu, mhz in sorted(freqs.items()):
        by_mhz.setdefault(mhz, []).append(cpu)
    speeds = sorted(by_mhz, reverse=True)
    names = {1: ["big"], 2: ["big", "little"], 3: ["big", "mid", "little"]}.get(
        len(speeds), ["prime", "big"] + ["mid"] * (len(speeds) - 3) + ["little"])
    clusters = []
    for mhz, nm in zip(speeds, names):
        clusters.append({"name": nm, "cpu_ids": by_mhz[mhz], "max_mhz": mhz})
    # merge duplicate "mid" clusters (5+ frequency steps) so names stay unique
    merged: list[dict[str, Any]] = []
    for c in clusters:
        if merged and merged[-1]["name"] == c["name"]:
            merged[-1]["cpu_ids"] = sorted(merged[-1]["cpu_ids"] + c["cpu_ids"])
            merged[-1]["max_mhz"] = max(merged[-1]["max_mhz"], c["max_mhz"])
        else:
            merged.append(c)
    fast = [cpu for c in merged if c["name"] != "little" for cpu in sorted(c["cpu_ids"], key=lambda x: -freqs[x])]
    if len(merged) == 1:
        chosen = sorted(freqs)[:8]
    else:
        chosen = sorted(fast, key=lambda x: (-freqs[x], x))[:4]
    mask = 0
    for cpu in chosen:
        mask |= 1 << cpu

    model = str(props.get("ro.product.model") or props.get("model") or "unknown device").strip()
    maker = str(props.get("ro.product.manufacturer") or "").strip()
    android = bool(props.get("ro.build.version.sdk") or props.get("ro.product.model"))
    match: dict[str, list[str]] = {}
    for k in ("ro.product.model", "ro.product.device", "model", "ro.board.platform"):
        if props.get(k):
            match[k] = [str(props[k]).strip()]
    if not any(k in match for k in IDENTITY_KEYS):
        match["ro.product.model"] = [model]
    delegates = ["xnnpack"]
    try:
        gles = int(str(props.get("ro.opengles.version") or 0))
    except ValueError:
        gles = 0
    if gles >= 0x30001:   # OpenGL ES 3.1: what the TFLite GPU delegate needs
        delegates.append("gpu")
    try:
        sdk = int(str(props.get("ro.build.version.sdk") or 0))
    except ValueError:
        sdk = 0
    if sdk >= 27:         # NNAPI 1.1 (Android 8.1) is the first the TFLite NNAPI delegate supports
        delegates.append("nnapi")
    soc = (props.get("ro.soc.model") or props.get("ro.board.platform") or props.get("ro.hardware")
           or props.get("soc") or "unknown")
    abi = str(props.get("ro.product.cpu.abi") or props.get("abi") or ("arm64-v8a" if android else "aarch64"))
    return {
        "name": f"{maker} {model}".strip(),
        "kind": "phone" if android else "board",
        "soc": str(soc),
        "abi": abi,
        "gpu": None,
        "npu": None,
        "ram_gb": None,
        "match": match,
        "clusters": merged,
        "recommended": {"threads": len(chosen), "affinity_mask": format(mask, "x")},
        "delegates": delegates,
        "sources": ["generated by edgebench from the device's properties and cpufreq (unverified)"],
    }


def profile_id_for(props: Mapping[str, Any]) -> str:
    """A file-name-safe id from the device's model name (letters and digits; at most 64 characters,
    the rest a digest of the whole name: a device chooses its name, and a 300-character one made
    ``devices --save-profiles`` fail with "File name too long")."""
    raw = str(props.get("ro.product.model") or props.get("model") or "device")
    pid = "".join(ch if ch.isalnum() else "_" for ch in raw.lower()).strip("_") or "device"
    if len(pid) > 64:

        pid = pid[:55] + "_" + hashlib.sha256(raw.encode()).hexdigest()[:8]
    return pid


def save_profile(doc: Mapping[str, Any], path: str | os.PathLike | None = None,
                 props: Mapping[str, Any] | None = None) -> Path:
    """Validate ``doc`` and write it as YAML (default: the user profile dir). Returns the path."""
    if path is None:
        path = user_dir() / f"{profile_id_for(props or {'model': doc.get('name', 'device')})}.yaml"
    p = Path(path)
    profile_from_dict(doc, p)   # refuse to save what would not load

    header = "# Generated by edgebench; check the facts against the maker's spec sheet and cite it.\n"
    return write_text(p, header + yaml.safe_dump(dict(doc), sort_keys=False, allow_unicode=True))
