"""Run the NPU dispatch path on this host where one exists: Intel OpenVINO's CPU backend.

LiteRT's Intel plugin compiles a partition for an OpenVINO device (``--intel_openvino_graph_
backends=cpu``); the compiled file then runs through LiteRT's CompiledModel with ``NPU|CPU`` and
the Intel dispatch library (``vendors/intel_openvino/dispatch``) -- the same path an NPU run takes
(DISPATCH_OP partitions, the ops left over on XNNPACK), with OpenVINO's CPU plugin as the device.
Two rows per precision: ``host`` (the uncompiled .tflite on the host's CPU, XNNPACK) and
``host:npu`` (the compiled file through the dispatch path), the second with drift against the
first over ``drift_inputs`` inputs (``--samples``, default 32), ``fully_accelerated`` (LiteRT's word:
XNNPACK counts as accelerated) and its readiness part (compile status, N/M, ``all_ops_on_npu``,
the ops left on the CPU, bytes, seconds). Both run
in the usual host worker process (``targets.host``) on the same inputs.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any, Callable

from edgebench.core.errors import EdgebenchError
from edgebench.judge import drift as cmp
from edgebench.model.inputs import cast_to_signature, load_data, synthetic
from edgebench.readiness.aot import vendors as vendor_lib
from edgebench.readiness.aot.compile import CPU_BACKEND, compile_one
from edgebench.readiness.rows import npu_row, target_name
from edgebench.rows import Delegation, InferenceRow, Worst, drifts_from_dict
from edgebench.sources.resolve import tflite_signature
from edgebench.targets.base import Job, RunControl, RunResult
from edgebench.targets.host import HostTarget
from edgebench.targets.measured import measured_fields

HOST_NPU = "host:npu"


def host_rows(settings, *, model: str, precision: str, variant: dict[str, Any], targets, out_dir: Path,
              progress: Callable[[str], None]) -> list[InferenceRow]:
    """The two host rows of one precision, or none when no asked-for target's dispatch runs here."""
    intel = next((t for t in targets if t.vendor.key == "intel"), None)
    if intel is None:
        return []
    found = vendor_lib.find("intel")
    if not found.checkable:
        return []
    progress(f"{precision}: {intel.vendor.manufacturer} {intel.soc} CPU backend, run on this host")
    keep = out_dir / f"{Path(variant['path']).stem}.intel_{intel.soc}.cpu.tflite"
    res = compile_one(variant["path"], found, intel.soc, ops_total=variant["op_count"], keep_as=keep,
                      timeout_s=settings.compile_timeout_s, backend=CPU_BACKEND)
    compiled = npu_row(res, model=model, precision=precision, variant_path=variant["path"], sha=variant["sha256"],
                       backend_label=CPU_BACKEND)
    name = f"{HOST_NPU} ({target_name(res.vendor, res.soc)}, OpenVINO CPU backend)"
    compiled = compiled.replace(target=name)
    if res.compiled_path is None:
        return [compiled]
    try:
        inputs, n_inputs = _inputs(settings, variant["path"], out_dir)
    except EdgebenchError as err:
        return [compiled.replace(status="failed", error=f"no inputs for the host run: {err}")]
    control = RunControl(runs=max(20, settings.host_samples), min_runs=1, min_time_s=0.0, max_time_s=60.0,
                         warmup_runs=2, answer_width=None)
    host = HostTarget()
    cpu = _run(host, Job(model_path=variant["path"], inputs_npz=inputs, control=control, save_outputs=True))
    npu = _run(host, Job(model_path=res.compiled_path, inputs_npz=inputs, control=control, save_outputs=True,
                         runtime_api="compiled", accelerator="npu"))
    base = dict(model=model, precision=precision)
    cpu_row = InferenceRow(target="host", model_path=variant["path"], model_sha256=variant["sha256"],
                           status=cpu.status, error=cpu.error, size_bytes=Path(variant["path"]).stat().st_size, **base)
    if cpu.status == "ok":
        cpu_row = cpu_row.replace(**measured_fields(cpu, f"{precision} on host"))
    npu_row_ = compiled.replace(status=npu.status if compiled.status == "ok" else compiled.status,
                                error=npu.error or compiled.error, runtime_api="compiled", accelerator="npu")
    if npu.status != "ok":
        return [cpu_row, npu_row_]
    npu_row_ = npu_row_.replace(**{k: v for k, v in measured_fields(npu, f"{precision} on {name}").items()
                                   if k != "runtime"},
                                fully_accelerated=npu.extra.get("fully_accelerated"))
    if compiled.delegation is not None:
        d = compiled.delegation.to_dict()
        npu_row_ = npu_row_.replace(delegation=Delegation.from_dict({**d, "delegate": "NPU dispatch (OpenVINO CPU)"}))
    if cpu.outputs is not None and npu.outputs is not None:
        got, mapping = cmp.align_outputs(cpu.outputs, npu.outputs)
        raw = cmp.compare_outputs(cpu.outputs, got)
        npu_row_ = npu_row_.replace(drift_vs_host=drifts_from_dict(raw), worst_vs_host=Worst.from_dict(cmp.worst(raw)),
                                    output_mapping=mapping if mapping["how"] != "name" else None,
                                    readiness=replace(npu_row_.readiness, drift_inputs=n_inputs))
    return [cpu_row, npu_row_]


def _run(host: HostTarget, job: Job) -> RunResult:
    try:
        return host.run(job)
    except EdgebenchError as err:
        return RunResult.failed("host", job.model_path, str(err))


def _inputs(settings, path: str, out_dir: Path) -> tuple[str, int]:
    """The host run's inputs: the first --samples of --data, else seeded synthetic ones (the drift
    between two runs of the same file on the same inputs needs no real data)."""

    sig = tflite_signature(path)
    data = settings.convert.data
    if data and data != "synthetic":
        ds = cast_to_signature(load_data(data, sig, preprocess=settings.convert.preprocess,
                                         n=settings.host_samples), sig)     # only the rows the host run uses
    else:
        ds = synthetic(sig, settings.host_samples, seed=0)
    ds = ds.take(settings.host_samples)
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / f"host-inputs-{Path(path).stem}.npz"
    ds.save(target)
    return str(target), ds.n
