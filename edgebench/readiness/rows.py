"""The rows of ``edgebench readiness`` and its ``--fail-on`` gate, built from compile results.

``npu_row`` turns one ``aot.compile.CompileResult`` into a typed row (its ``delegation`` shows N/M
like any delegate's, its ``readiness`` part has the rest); ``gpu_row`` the GPU readiness
``convert`` computes; ``fail_on_verdict`` judges the rows against ``--fail-on`` rules (module
``edgebench.readiness.run`` describes them).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from edgebench.readiness.aot import vendors as vendor_lib
from edgebench.readiness.aot.compile import CompileResult
from edgebench.core.errors import BadInput
from edgebench.judge.gate import Check, Verdict
from edgebench.rows import Delegation, InferenceRow, LeftOnCpu, Readiness

GPU_TARGET = "gpu (WebGPU)"
UNNAMED = "unnamed op"    # an op the plugin's summary counts as left on the CPU without naming it
HOST_PREFIX = "host"      # host rows (the CPU baseline, the dispatch run) are not NPU targets for --fail-on


# ------------------------------------------------------------------------------------- fail-on

def parse_fail_on(rules: tuple[str, ...]) -> list[tuple[str, float]]:
    """``SM8650`` / ``SM8650=90`` / ``qualcomm`` / ``all`` -> (who, minimum % of ops on the NPU)."""
    out = []
    for raw in (r.strip() for rule in rules for r in rule.split(",")):
        if not raw:
            continue
        who, _, pct = raw.partition("=")
        try:
            need = float(pct) if pct else 100.0
        except ValueError:
            raise BadInput(f"--fail-on {raw}: the part after '=' must be a percentage (e.g. SM8650=90)") from None
        if not 0.0 <= need <= 100.0:
            raise BadInput(f"--fail-on {raw}: the percentage must be between 0 and 100")
        out.append((who.strip(), need))
    return out


def fail_on_verdict(rows: list[InferenceRow], rules: tuple[str, ...]) -> Verdict | None:
    """One check per (rule, NPU row it names); None when no rule was given."""
    parsed = parse_fail_on(rules)
    if not parsed:
        return None
    checks: list[Check] = []
    npu = [r for r in rows if r.readiness is not None and not (r.target or "").startswith(HOST_PREFIX) and r.target != GPU_TARGET]
    for who, need in parsed:
        w = who.lower()
        hits = [r for r in npu if w in ("all", (r.readiness.soc or "").lower(), (r.readiness.vendor or "").lower())
                or vendor_lib.BY_KEY.get(w) is not None and vendor_lib.BY_KEY[w].manufacturer == r.readiness.vendor]
        if w == "all":
            hits = [r for r in hits if r.readiness.checkable]
        if not hits:
            raise BadInput(f"--fail-on {who}: no row of this run is for it; name a SoC or vendor of --soc/--vendor")
        for r in hits:
            rd = r.readiness
            pct = rd.ops_pct
            rule = f"{who}={need:g}" if need < 100 else who
            if not rd.checkable:
                ok, msg = False, f"{r.precision} on {r.target}: cannot be checked here ({rd.missing})"
            elif rd.compile_status == "compile-failed":
                ok, msg = False, f"{r.precision} on {r.target}: the compile failed ({r.error})"
            elif pct is None or pct + 1e-9 < need:
                ok = False
                msg = (f"{r.precision} on {r.target}: {rd.ops_on_npu}/{rd.ops_total} ops on the NPU"
                       f" ({pct:.1f}%) < {need:g}% (--fail-on {rule})" if pct is not None else
                       f"{r.precision} on {r.target}: no op count")
            else:
                ok, msg = True, f"{r.precision} on {r.target}: {rd.ops_on_npu}/{rd.ops_total} ops on the NPU (--fail-on {rule})"
            checks.append(Check(r.precision or "?", r.target or "?", "npu_ops_pct", pct, need, ok, msg))
    return Verdict(tuple(checks))


# ------------------------------------------------------------------------------------- rows

def target_name(vendor: str, soc: str, backend: str | None = None) -> str:
    return f"{vendor} {soc}" + (f" ({backend} backend)" if backend and backend != "npu" else "")


def npu_row(res: CompileResult, *, model: str, precision: str, variant_path: str, sha: str,
            backend_label: str | None = None) -> InferenceRow:
    """A compile result as a typed row (the delegation column shows N/M like any delegate's)."""
    left = _left_on_cpu(res)
    known = res.checkable and res.ops_total is not None and res.ops_on_npu is not None
    rd = Readiness(vendor=res.vendor, soc=res.soc, checkable=res.checkable, missing=res.missing,
                   compile_status=res.status, ops_on_npu=res.ops_on_npu, ops_total=res.ops_total,
                   partitions=res.partitions, left_on_cpu=left, compiled_path=res.compiled_path,
                   compiled_bytes=res.compiled_bytes, compile_seconds=res.seconds, sdk_version=res.sdk_version,
                   sdk=res.sdk, backend=res.backend, readiness_notes=res.notes,
                   all_ops_on_npu=(res.ops_on_npu == res.ops_total) if known else None)
    # every compile class is an answer (a target that cannot compile here too); only a compile
    # process that crashed or hung failed to answer (exit 3)
    status = "failed" if res.crashed else "skipped" if res.status in ("sdk-missing", "plugin-load") else "ok"
    delegation = None
    if rd.ops_known:
        hist: dict[str, int] = {}
        for op in left:
            hist[op.op or "?"] = hist.get(op.op or "?", 0) + 1
        delegation = Delegation.from_dict({
            "delegate": f"NPU ({res.vendor} {res.soc})", "nodes_total": res.ops_total, "nodes_delegated": res.ops_on_npu,
            "partitions": res.partitions, "undelegated": res.left_histogram or hist,
            "source": "AOT compile (LiteRT apply_plugin_main)"})
    error = res.missing if not res.checkable else res.error
    return InferenceRow(target=target_name(res.vendor, res.soc, backend_label), status=status, model=model,
                        precision=precision, model_path=variant_path, model_sha256=sha, error=error,
                        size_bytes=res.compiled_bytes, runtime=res.sdk, delegation=delegation, readiness=rd,
                        exit_code=3 if res.crashed else None)


def _norm(op: str) -> str:
    return op.replace("_", "").lower()


def _left_on_cpu(res: CompileResult) -> tuple[LeftOnCpu, ...]:
    """Every op the compiled file left to the CPU, with the log's lines where the plugin gave any
    (Qualcomm names each op; a partitioner that says nothing gets a line saying so). Where no file
    was written (Intel's NPU compile fails after partitioning) and the plugin's summary counts ops it
    did not select without naming them, each gets an entry saying so: never "-" beside N < M."""
    out = [LeftOnCpu(node=o.node, op=o.op, why=o.why, plugin_line=o.plugin_line, vendor_line=o.vendor_line)
           for o in res.left]
    named = {}
    for o in res.left:
        named[_norm(o.op)] = named.get(_norm(o.op), 0) + 1
    for op, n in res.left_histogram.items():
        for _ in range(max(0, n - named.get(_norm(op), 0))):
            out.append(LeftOnCpu(op=op, why="not selected",
                                 plugin_line=f"the {res.vendor} plugin's partitioner did not select it (it logs no reason)"))
    if res.checkable and res.ops_total is not None and res.ops_on_npu is not None:
        for _ in range(max(0, res.ops_total - res.ops_on_npu - len(out))):
            out.append(LeftOnCpu(op=UNNAMED, why="not selected",
                                 plugin_line=f"the {res.vendor} plugin's summary selected {res.ops_on_npu} of "
                                             f"{res.ops_total} ops and names neither the others nor why"
                                             + ("" if res.compiled_path else " (no compiled file to read them from)")))
    return tuple(out)


def name_unnamed_from_cpu_backend(rows: list[InferenceRow]) -> list[InferenceRow]:
    """An Intel NPU row whose compile failed after partitioning counts the ops it left without
    naming them; the CPU-backend compile of the same precision (the ``host:npu`` row) runs the same
    partitioner and its compiled file names them. Where both partitions agree (same N/M and
    partitions) the NPU row's unnamed entries take those names, saying where they came from."""
    donors = {}
    for r in rows:
        rd = r.readiness
        if (r.target or "").startswith(HOST_PREFIX) and rd is not None and rd.ops_known and rd.left_on_cpu \
                and all(o.op != UNNAMED for o in rd.left_on_cpu):
            donors[(r.precision, rd.vendor, rd.soc)] = r
    out = []
    for r in rows:
        rd = r.readiness
        donor = donors.get((r.precision, rd.vendor, rd.soc)) if rd is not None and not (r.target or "").startswith(HOST_PREFIX) else None
        unnamed = [o for o in rd.left_on_cpu if o.op == UNNAMED] if donor is not None else []
        d = donor.readiness if donor is not None else None
        if unnamed and d is not None and (d.ops_on_npu, d.ops_total, d.partitions) == (rd.ops_on_npu, rd.ops_total, rd.partitions) \
                and len(d.left_on_cpu) == len(rd.left_on_cpu):
            named = tuple(LeftOnCpu(node=o.node, op=o.op, why=o.why, vendor_line=o.vendor_line,
                                    plugin_line=f"not in the plugin's NPU partitions; named by the {backend_word(d)} "
                                                f"compile of the same partitioning ({d.ops_text})")
                          for o in d.left_on_cpu)
            hist: dict[str, int] = {}
            for o in named:
                hist[o.op or "?"] = hist.get(o.op or "?", 0) + 1
            deleg = Delegation.from_dict({**r.delegation.to_dict(), "undelegated": hist}) if r.delegation else None
            r = r.replace(readiness=replace(rd, left_on_cpu=named), delegation=deleg)
        out.append(r)
    return out


def backend_word(rd: Readiness) -> str:
    return f"{rd.backend.upper()}-backend" if rd.backend else "CPU-backend"


def gpu_row(gpu: dict[str, Any], *, model: str, precision: str, variant_path: str, sha: str,
            ops_total: int) -> InferenceRow:
    """The GPU readiness ``convert`` computes, as a row of the same report."""
    web = gpu.get("webgpu") or {}
    notes = tuple(x for x in (f"model analyzer: {gpu.get('analyzer')}" if gpu.get("analyzer") else None,
                              gpu.get("analyzer_note")) if x)
    if not web.get("checked"):
        rd = Readiness(vendor="LiteRT GPU", soc="WebGPU", checkable=False, missing=web.get("reason") or "not checked",
                       compile_status="sdk-missing", readiness_notes=notes)
        return InferenceRow(target=GPU_TARGET, status="skipped", model=model, precision=precision,
                            model_path=variant_path, model_sha256=sha, error=rd.missing, readiness=rd)
    full = bool(web.get("fully_on_gpu"))
    status = "ok" if full else ("ops-rejected" if web.get("runs_with_cpu_fallback") else "compile-failed")
    rd = Readiness(vendor="LiteRT GPU", soc="WebGPU", checkable=True, compile_status=status,
                   ops_on_npu=ops_total if full else None, ops_total=ops_total, partitions=1 if full else None,
                   sdk=web.get("adapter"), readiness_notes=notes + ((f"GPU only: {web.get('error')}",) if not full else ()))
    return InferenceRow(target=GPU_TARGET, status="ok", model=model,       # a GPU that cannot compile it: an answer
                        precision=precision, model_path=variant_path, model_sha256=sha,
                        error=web.get("fallback_error") if status == "compile-failed" else None, readiness=rd,
                        fully_accelerated=full)


