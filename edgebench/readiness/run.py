"""``edgebench readiness SRC``: which NPUs take the model, op by op, before any phone exists.

For every precision of the model (a SavedModel/.keras is converted first, exactly as ``convert``
does; a .tflite is taken as it is) and every (vendor, SoC) target asked for, one row: whether the
target can be checked on this host (else the missing library by name -- never 0/M), the compile
status class, the ops in NPU partitions (N/M and partitions, also when the compile then fails),
each op left on the CPU with the plugin's and the vendor validator's reason, the compiled file's
bytes, the compile's seconds and the vendor SDK that compiled. The GPU readiness ``convert``
already computes (model analyzer, WebGPU compile where a Vulkan driver exists) joins as a row per
precision; where LiteRT's NPU dispatch path runs on this host (Intel OpenVINO's CPU backend) the
compiled file is run too, with drift against the same precision on the host's CPU
(``readiness_host``).

What "ready" means: the vendor's ahead-of-time compiler accepted the graph for that SoC and placed
N of M ops on its NPU. It is not a run on the phone (driver, firmware, memory and the runtime's
performance mode -- burst vs default -- decide speed there); docs/readiness.md.

``--fail-on RULE`` turns answers into a CI gate (exit 1): ``SM8650`` (that SoC must take every
op and compile), ``SM8650=90`` (at least 90 % of the ops), a vendor key (each of its SoCs), or
``all`` (every target that could be checked here). A target named by a rule that cannot be
checked here fails it: a gate that cannot look must not pass.
"""

from __future__ import annotations

import concurrent.futures
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from edgebench.convert.run import INT8_IO, ConvertSettings, check_manifest, convert
from edgebench.core.errors import BadInput, GateFailed, InfraError
from edgebench.core.fingerprint import host_fingerprint, sha256_file
from edgebench.model import tflite_model
from edgebench.readiness.aot import vendors as vendor_lib
from edgebench.readiness.aot.compile import COMPILE_TIMEOUT_S, CompileResult, compile_one, not_checkable
from edgebench.readiness.host import host_rows
from edgebench.readiness.rows import fail_on_verdict, gpu_row, name_unnamed_from_cpu_backend, npu_row, parse_fail_on
from edgebench.rows import Document, InferenceRow
from edgebench.sources.describe import gpu_readiness

DEFAULT_PRECISIONS = ("fp32", "int8")


@dataclass(frozen=True)
class ReadinessSettings:
    """readiness's settings: the conversion of a source (``ConvertSettings``: the model, the
    precisions -- sources only, a .tflite is what it is -- the calibration data, which also feeds the
    host run, integer I/O, the output folder) and what only this command has: the targets, the
    compile, the GPU row, the host run, the gate."""
    convert: ConvertSettings
    socs: str = "all"                                     # all | SM8650,MT6989,...
    vendors: str | None = None                            # qualcomm,intel,... (None: every vendor)
    compile_timeout_s: float = COMPILE_TIMEOUT_S
    gpu: bool = True                                      # the GPU readiness row per precision
    host_run: bool = True                                 # run what this host's NPU dispatch can run
    # inputs of the host dispatch run's drift: the claim is one worst-output PSNR/cosine of the same
    # graph on two runtimes (no interval), so a few inputs find a systematic difference; 32 (from 8)
    # also reach input-dependent paths (saturation, clipped activations). Cost: runs = max(20, n), so
    # 12 more inferences, ~3 ms at the probe CNN's 0.26 ms p50 (tests/goldens/inputs/readiness.json)
    host_samples: int = 32
    fail_on: tuple[str, ...] = ()
    jobs: int = 2                                         # compiles at once (one process each)

    def validate(self) -> None:
        if self.convert.int8_io not in INT8_IO:
            raise BadInput(f"--int8-io {self.convert.int8_io}: use one of {', '.join(INT8_IO)}")
        if not self.compile_timeout_s > 0:
            raise BadInput(f"--compile-timeout {self.compile_timeout_s}: must be > 0 seconds")
        if self.jobs < 1:
            raise BadInput(f"--jobs {self.jobs}: must be >= 1")
        if self.host_samples < 1:
            raise BadInput(f"--samples {self.host_samples}: the host run's drift needs at least 1 input (default "
                           f"{ReadinessSettings.host_samples})")
        parse_fail_on(self.fail_on)


@dataclass(frozen=True)
class Target:
    vendor: vendor_lib.Vendor
    soc: str


# ------------------------------------------------------------------------------------- targets

def select_targets(socs: str, vendor_keys: str | None) -> list[Target]:
    """``--soc all`` -> every SoC LiteRT registers for the vendors asked; ``--soc A,B`` -> each SoC
    of the vendor whose registry or loaded plugin lists it (case-insensitive)."""
    chosen = vendor_lib.vendors(vendor_keys)
    names = [s.strip() for s in (socs or "all").split(",") if s.strip()]
    if not names or [n.lower() for n in names] == ["all"]:
        return [Target(v, s) for v in chosen for s in vendor_lib.enum_socs(v)]
    out: list[Target] = []
    for name in names:
        hit = None
        for v in chosen:
            known = vendor_lib.enum_socs(v) + (vendor_lib.find(v.key).socs if _loads(v) else ())
            match = next((s for s in known if s.lower() == name.lower()), None)
            if match is not None:
                hit = Target(v, match if match in vendor_lib.enum_socs(v) else vendor_lib.resolve_soc(vendor_lib.find(v.key), match))
                break
        if hit is None:
            known = ", ".join(s for v in chosen for s in vendor_lib.enum_socs(v))
            blind = [f"{v.manufacturer} ({vendor_lib.find(v.key).missing or vendor_lib.find(v.key).load_error})"
                     for v in chosen if not _loads(v)]
            unknown = (f"; the full SoC lists of plugins that cannot load here are unknown: {'; '.join(blind)}"
                       if blind else "")
            raise BadInput(f"--soc {name}: no {'/'.join(v.manufacturer for v in chosen)} compiler here knows this SoC; "
                           f"use all or one of {known} (or another SoC a loaded plugin lists, e.g. Qualcomm's "
                           f"SM7550){unknown}")
        if hit not in out:
            out.append(hit)
    return out


def _loads(v: vendor_lib.Vendor) -> bool:
    return vendor_lib.find(v.key).checkable


# ------------------------------------------------------------------------------------- variants

def variants(settings: ReadinessSettings, progress: Callable[[str], None]) -> tuple[str, dict[str, dict[str, Any]], Path]:
    """(model name, precision -> {path, sha256, gpu_compatibility?}, output folder)."""
    conv = settings.convert
    src = Path(conv.src)
    if src.suffix == ".tflite":
        info = tflite_model.inspect(src)
        if info.get("aot"):
            raise BadInput(f"{src} is already compiled for {tflite_model.compiled_for(info['aot'])}; give the source "
                           ".tflite (or SavedModel) it was compiled from")
        out = Path(conv.out_dir) if conv.out_dir else Path("edgebench-out") / src.stem / "readiness"
        prec = tflite_model.precision(info)
        return src.stem, {prec: {"path": str(src), "sha256": sha256_file(src), "op_count": info["op_count"],
                                 "precision_detail": tflite_model.precision_detail(info)}}, out
    progress("converting")
    manifest = convert(conv, progress=progress)
    check_manifest(manifest)
    out = Path(manifest["out_dir"])
    model = str((manifest.get("source") or {}).get("name") or Path(conv.src).name)
    found = {}
    for key, v in manifest["variants"].items():
        if v.get("status") == "ok" and key in conv.precisions:
            found[key] = {"path": v["path"], "sha256": v.get("sha256") or sha256_file(v["path"]),
                          "op_count": v.get("op_count") or tflite_model.inspect(v["path"])["op_count"],
                          "gpu_compatibility": v.get("gpu_compatibility"), "precision_detail": v.get("precision_detail")}
    return model, found, out / "readiness"


# ------------------------------------------------------------------------------------- the run

def readiness(settings: ReadinessSettings, progress: Callable[[str], None] | None = None) -> Document:
    """Compile every precision for every target; rows in (precision, target) order. Library code:
    bad input raises; every compile outcome, also a crash, is a row."""
    say = progress or (lambda _m: None)
    settings.validate()
    t0 = time.perf_counter()
    targets = select_targets(settings.socs, settings.vendors)
    model, found_variants, out_dir = variants(settings, say)
    if hasattr(progress, "set_total"):
        progress.set_total(len(found_variants) * (len(targets) + int(settings.gpu) + int(settings.host_run)))
    jobs = [(prec, v, t) for prec, v in found_variants.items() for t in targets]
    for v in dict.fromkeys(t.vendor for t in targets):
        vendor_lib.find(v.key)             # once, before the compile threads ask (probe, stand-in build)

    def one(item) -> InferenceRow:
        prec, v, t = item
        f = vendor_lib.find(t.vendor.key)
        keep = out_dir / f"{Path(v['path']).stem}.{t.vendor.key}_{t.soc}.tflite"
        res = (compile_one(v["path"], f, t.soc, ops_total=v["op_count"], keep_as=keep,
                           timeout_s=settings.compile_timeout_s) if f.checkable else not_checkable(f, t.soc))
        say(f"{prec} {t.vendor.manufacturer} {t.soc}: {res.status}")
        return npu_row(res, model=model, precision=prec, variant_path=v["path"], sha=v["sha256"])

    with concurrent.futures.ThreadPoolExecutor(max_workers=settings.jobs) as pool:
        npu_rows = list(pool.map(one, jobs))
    rows: list[InferenceRow] = []
    for prec, v in found_variants.items():
        rows += [r for r in npu_rows if r.precision == prec]
        if settings.gpu:
            say(f"{prec}: GPU readiness")
            gpu = v.get("gpu_compatibility") or gpu_readiness(v["path"])
            rows.append(gpu_row(gpu, model=model, precision=prec, variant_path=v["path"], sha=v["sha256"],
                                ops_total=v["op_count"]))
        if settings.host_run:
            rows += host_rows(settings, model=model, precision=prec, variant=v, targets=targets, out_dir=out_dir,
                              progress=say)
    # a mixed file says what it is on every row ("int8, 13 float ops: ELU x9, ..."; tflite_model.MixedFile)
    rows = [r.replace(precision_detail=found_variants[r.precision].get("precision_detail"))
            if r.precision in found_variants and r.precision_detail is None else r for r in rows]
    rows = name_unnamed_from_cpu_backend(rows)
    verdict = fail_on_verdict(rows, settings.fail_on)
    meta: dict[str, Any] = {
        "model": model, "out_dir": str(out_dir), "seconds": round(time.perf_counter() - t0, 3),
        "vendors": [_vendor_record(v) for v in dict.fromkeys(t.vendor for t in targets)],
        "settings": {"socs": settings.socs, "vendors": settings.vendors, "precisions": list(found_variants),
                     "compile_timeout_s": settings.compile_timeout_s, "fail_on": list(settings.fail_on)},
    }
    if verdict is not None:
        meta["gate"] = verdict.to_dict()
    return Document.new("readiness", rows, host_fingerprint(), **meta)


def _vendor_record(v: vendor_lib.Vendor) -> dict[str, Any]:
    f = vendor_lib.find(v.key)
    return {"vendor": v.manufacturer, "key": v.key, "checkable": f.checkable, "status": f.status,
            "missing": f.missing or f.load_error, "sdk": f.sdk, "lib_dirs": list(f.lib_dirs), "notes": list(f.notes),
            "extra": v.extra}


def raise_for_readiness(doc: Document) -> None:
    """After the table: a failed --fail-on rule is exit 1; a compile process that crashed or hung
    is exit 3 (its row says which); answers themselves -- rejected ops, a failed compile, a target
    that cannot be checked here -- are results, exit 0."""

    gate = doc.gate_result
    if gate is not None and gate.passed is False:
        bad = [c.message for c in gate.checks if not c.passed]
        raise GateFailed(f"--fail-on: {bad[0]}" + (f" (+{len(bad) - 1} more)" if len(bad) > 1 else ""))
    crashed = [r for r in doc.rows if r.exit_code == 3]
    if crashed:
        raise InfraError(f"{crashed[0].precision} on {crashed[0].target}: {crashed[0].error}"
                         + (f" (+{len(crashed) - 1} more)" if len(crashed) > 1 else ""))
