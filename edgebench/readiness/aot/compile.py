"""One ahead-of-time compile of one .tflite for one (vendor, SoC), in a process of its own.

``compile_one`` runs LiteRT's ``apply_plugin_main --cmd=apply`` with the vendor's libraries on
``LD_LIBRARY_PATH`` (``vendors.find``), in a new session (so a hang is killed with all it started),
with a time limit, and with a private temporary folder as its working folder and ``TMPDIR``: the
0-byte output a failed compile leaves, MediaTek's ``tempdir_dla.*`` folders and any ``*.error``
log stay in it and are removed with it, so nothing is left in the system's temporary folder. A
plugin that crashes or hangs fails its own row only.

The result's N/M is read from the compiled file itself (``tflite_model.inspect``: one
``DISPATCH_OP`` per NPU partition, the builtins left are the CPU's) when one was written, else from
the plugin's partition summary; each op left on the CPU carries the plugin's line and the vendor
validator's (``plugin_log``).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from edgebench.core.errors import BadInput
from edgebench.model.tflite_model import inspect
from edgebench.readiness.aot import plugin_log
from edgebench.readiness.aot.vendors import Found, apply_plugin_binary

COMPILE_TIMEOUT_S = 300.0       # a 2-core host compiles a small CNN in < 1 s; a large LLM graph in minutes
CPU_BACKEND = "cpu"             # Intel: --intel_openvino_graph_backends=cpu (compiles and runs on this host)


@dataclass(frozen=True)
class CompileResult:
    """One (model, vendor, SoC) compile; ``status`` is a ``rows.readiness.COMPILE_STATUSES`` class."""
    vendor: str
    soc: str
    status: str
    checkable: bool
    missing: str | None = None
    ops_total: int | None = None
    ops_on_npu: int | None = None
    partitions: int | None = None
    left: tuple[plugin_log.LeftOp, ...] = ()
    left_histogram: dict[str, int] = field(default_factory=dict)
    compiled_path: str | None = None
    compiled_bytes: int | None = None
    seconds: float | None = None
    sdk_version: str | None = None
    sdk: str | None = None
    backend: str | None = None
    error: str | None = None
    crashed: bool = False                 # the compile process died of a signal or hung (infrastructure)
    notes: tuple[str, ...] = ()


def not_checkable(found: Found, soc: str) -> CompileResult:
    return CompileResult(found.vendor.manufacturer, soc, found.status or "sdk-missing", False,
                         missing=found.missing or found.load_error, sdk=found.sdk, notes=found.notes)


def compile_one(model_path: str | os.PathLike, found: Found, soc: str, *, ops_total: int,
                keep_as: str | os.PathLike | None = None, timeout_s: float = COMPILE_TIMEOUT_S,
                backend: str | None = None) -> CompileResult:
    """Compile ``model_path`` for ``soc`` of ``found``'s vendor; the compiled file is moved to
    ``keep_as`` when given (else discarded). ``ops_total``: the source model's op count (what M is)."""
    if not found.checkable:
        return not_checkable(found, soc)
    tool = apply_plugin_binary()
    vendor = found.vendor.manufacturer
    argv = [str(tool), "--cmd=apply", f"--model={Path(model_path).resolve()}", "--o=compiled.tflite",
            f"--soc_manufacturer={vendor}", f"--soc_model={soc}", f"--libs={found.plugin_dir}", "--err=--"]
    if backend and found.vendor.key == "intel":
        argv.append(f"--intel_openvino_graph_backends={backend}")
    with tempfile.TemporaryDirectory(prefix="edgebench-aot-") as tmp:
        work = Path(tmp)
        env = {**os.environ, "TMPDIR": tmp, "TMP": tmp, "TEMP": tmp,
               "LD_LIBRARY_PATH": os.pathsep.join([*found.lib_dirs, os.environ.get("LD_LIBRARY_PATH", "")]).strip(os.pathsep)}
        t0 = time.perf_counter()
        with open(work / "stdout.log", "wb") as out, open(work / "stderr.log", "wb") as err:
            proc = subprocess.Popen(argv, cwd=tmp, env=env, stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                                    start_new_session=True)
            try:
                rc = proc.wait(timeout=timeout_s)
                hung = False
            except subprocess.TimeoutExpired:
                _kill_group(proc)
                rc, hung = proc.wait(), True
        seconds = time.perf_counter() - t0
        stdout = (work / "stdout.log").read_text(errors="replace")
        stderr = (work / "stderr.log").read_text(errors="replace")
        log = plugin_log.parse(stdout, stderr, failed=rc != 0)
        out_file = work / "compiled.tflite"
        compiled = out_file if rc == 0 and out_file.is_file() and out_file.stat().st_size > 0 else None
        base = dict(vendor=vendor, soc=soc, checkable=True, sdk=found.sdk, sdk_version=log.sdk_version,
                    seconds=round(seconds, 3), backend=backend or (log.devices[0].lower() if log.devices else None),
                    notes=tuple(dict.fromkeys(found.notes + log.notes)), left=log.left)
        if hung or rc < 0:
            why = (f"the compile did not finish in {timeout_s:g} s (killed; raise --compile-timeout)" if hung
                   else f"the compile process crashed ({_signal_name(-rc)})")
            return CompileResult(**base, status="compile-failed", error=_join(why, log.error), crashed=True,
                                 ops_total=log.ops_total, ops_on_npu=log.ops_selected, partitions=log.partitions)
        if compiled is None:
            if log.partitioned and log.ops_selected == 0:
                return CompileResult(**base, status="ops-rejected", ops_total=log.ops_total, ops_on_npu=0, partitions=0,
                                     error=None)
            if not log.partitioned:
                if "Unsupported SoC model" in stderr:
                    raise BadInput(f"--soc {soc}: the {vendor} plugin does not know this SoC; use one it lists "
                                   f"({', '.join(found.socs[:12])}{' ...' if len(found.socs) > 12 else ''})")
                return CompileResult(**base, status="plugin-load" if "Failed to load plugin" in stderr else "compile-failed",
                                     error=log.error or f"apply_plugin_main exited {rc} before partitioning")
            return CompileResult(**base, status="compile-failed", error=log.error or f"apply_plugin_main exited {rc}",
                                 ops_total=log.ops_total, ops_on_npu=log.ops_selected, partitions=log.partitions)

        info = inspect(str(compiled))
        aot = info.get("aot") or {"partitions": 0, "cpu_ops": info["op_count"], "cpu_op_histogram": info["op_histogram"]}
        on_npu = ops_total - int(aot["cpu_ops"])
        notes = base.pop("notes")
        if log.ops_total is not None and (log.ops_total != ops_total or log.ops_selected != on_npu):
            notes += (f"the plugin's summary says {log.ops_selected}/{log.ops_total}; the compiled file holds "
                      f"{on_npu}/{ops_total}",)
        size = compiled.stat().st_size
        kept = None
        if keep_as is not None:
            dest = Path(keep_as)
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(str(compiled), str(dest))
            kept = str(dest)
        return CompileResult(**base, status="ok" if on_npu == ops_total else "ops-rejected", ops_total=ops_total,
                             ops_on_npu=on_npu, partitions=int(aot["partitions"]),
                             left_histogram=dict(aot["cpu_op_histogram"]), compiled_path=kept, compiled_bytes=size,
                             notes=notes)


def _join(*parts: str | None) -> str:
    return "; ".join(p for p in parts if p)


def _signal_name(sig: int) -> str:
    try:
        return signal.Signals(sig).name
    except ValueError:
        return f"signal {sig}"


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()
