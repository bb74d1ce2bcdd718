"""Running one job on one adb device (``AdbTarget``): the edgebench runner (``runner.py`` with
python3 + a TFLite runtime on the device) or Google's ``benchmark_model`` binary through a
device-side sample loop; staging files, the run folder, checks of what came back, cleanup."""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np

from edgebench.core import progress
from edgebench.core.errors import BadInput, EdgebenchError, InfraError
from edgebench.core.fingerprint import sha256_file
from edgebench.targets.adb import returned
from edgebench.targets.adb.battery import BatteryMonitor
from edgebench.targets.adb.remote import REMOTE_FILES, REMOTE_ROOT, AdbDevice, RemoteCommand, ShellResult, content_name
from edgebench.targets.adb.thermal import ThermalPolicy, detect_throttle, monitored_shell
from edgebench.targets.adb.thermal import cool_down as cool_down_device
from edgebench.targets.base import (
    DEFAULT_DELEGATE,
    DELEGATES,
    PER_PROCESS,
    Job,
    RunResult,
    check_job_files,
    model_state,
)
from edgebench.targets.benchmark_model.argv import (
    build_argv,
    delegate_flags,
    describe_argv,
    split_output_file,
    write_input_value_files,
)
from edgebench.targets.benchmark_model.binary import check_abi, classify_failure, resolve_binary
from edgebench.targets.benchmark_model.parse import parse_log
from edgebench.targets.benchmark_model.runtime_info import MAX_BYTES as RUNTIME_INFO_MAX_BYTES
from edgebench.targets.benchmark_model.runtime_info import read_runtime_info
from edgebench.targets.benchmark_model.sample_loop import (
    PROBE_FACTOR,
    build_sample_loop_script,
    loop_deadline_s,
    outputs_deadline_s,
    read_sample_loop,
    sample_argv,
    sample_method,
    sample_progress,
)
from edgebench.targets.delegation import delegation_from_log, delegation_from_runtime_info
from edgebench.targets.device_profiles import match_profile
from edgebench.targets.host import WORKER_FILES, describe_model
from edgebench.targets.op_profile import op_profile_from_log

# The standalone worker pushed to devices: runner.py and the modules it loads from its own folder.
RUNNER_PATH = WORKER_FILES[0]
DEVICE_DELEGATES = DELEGATES     # the one list (targets/base.py): every delegate a device may have
RUNTIME_INFO = "runtime_info.pb"   # the probe's --model_runtime_info_output_file, in its run folder
DEVICE_RUNNER_METHOD = "per-inference perf_counter_ns around invoke(), edgebench runner on the device"


# ============================================================================ the target
def _run_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S") + "-" + uuid.uuid4().hex[:8]


class AdbTarget:
    """Runs jobs on one adb device. ``runner``: "auto" (edgebench runner when the device has
    python3 + a TFLite runtime, else benchmark_model), "edgebench" or "benchmark_model"."""

    def __init__(self, serial: str, *, threads: int | None = None, delegate: str = DEFAULT_DELEGATE,
                 runner: str = "auto", benchmark_binary: str | None = None,
                 thermal: ThermalPolicy | None = None, keep_files: bool = False) -> None:
        if delegate not in DEVICE_DELEGATES and not delegate.endswith(".so"):
            raise BadInput(f"--delegate {delegate!r} is unknown for adb targets; use one of "
                           f"{', '.join(DEVICE_DELEGATES)} or a path to a delegate .so on the device")
        if runner not in ("auto", "edgebench", "benchmark_model"):
            raise BadInput(f"runner {runner!r} is unknown; use auto, edgebench or benchmark_model")
        if threads is not None and threads < 1:
            raise BadInput(f"--threads must be >= 1, got {threads}")
        self.serial = serial
        self.name = f"adb:{serial}"
        self.threads = threads
        self.delegate = delegate
        self.runner = runner
        self.benchmark_binary = benchmark_binary
        self.thermal = thermal or ThermalPolicy()
        self.keep_files = keep_files
        self.device = AdbDevice(serial)
        self._facts: dict[str, Any] | None = None

    # -- protocol ------------------------------------------------------------------------------
    def facts(self, refresh: bool = False) -> dict[str, Any]:
        if self._facts is None or refresh:
            self._facts = self.device.probe()
        return self._facts

    @property
    def profile(self):
        """The device profile matching this device (``device_profiles/*.yaml`` or the user's), or None."""
        if not hasattr(self, "_profile"):
            try:
                self._profile = match_profile(self.facts().get("props") or {})
            except EdgebenchError:
                self._profile = None
        return self._profile

    def settings_used(self, job_threads: int | None, delegate: str) -> dict[str, Any]:
        """Threads and CPU affinity for a run: what the user set, else the matching profile's
        recommendation (recorded as such), else the runtime default. Warns when the profile
        says the device has no such delegate."""
        prof = self.profile
        threads = job_threads if job_threads is not None else self.threads
        out: dict[str, Any] = {"profile": prof.id if prof else None, "threads_source": "user"}
        if threads is None and prof is not None:
            threads, out["threads_source"] = prof.threads, f"profile {prof.id}"
        elif threads is None:
            out["threads_source"] = "runtime default"
        out["threads"] = threads
        if prof is not None and out["threads_source"] != "user":
            out["cpu_affinity"] = list(prof.affinity_cpus)
        if prof is not None and delegate not in ("none",) and delegate not in prof.delegates \
                and not delegate.endswith(".so"):
            out["profile_warning"] = (f"profile {prof.id} lists delegates {', '.join(prof.delegates)}; "
                                      f"{delegate} may not exist on {prof.name}")
        return out

    def fingerprint(self) -> dict[str, Any]:
        f = self.facts()
        return {
            "target": self.name,
            "serial": self.serial,
            "device_model": f["model"],          # "... (emulated)" on an emulator (facts.device_label)
            "emulated": f["emulated"],
            "emulation": f["emulation"],         # the properties that say so, or None
            "manufacturer": f["manufacturer"],
            "soc": f["soc"],
            "board": f["board"],
            "abi": f["abi"],
            "os": f"Android {f['android_version']} (SDK {f['sdk']})" if f["android_version"] else None,
            "build_fingerprint": f["build_fingerprint"],
            "cpu_model": f["soc"],
            "cpu_count": f["cpu_cores"],
            "cpu_max_khz": f["cpu_max_khz"],
            "mem_total_bytes": f["ram_bytes"],
            "governor": f["governor"],
            "threads": self.threads,
            "delegate": self.delegate,
            "device_runtime": f["tflite_runtime"],
            "device_profile": self.profile.id if self.profile else None,
        }

    def choose_runner(self) -> str:
        if self.runner != "auto":
            return self.runner
        return "edgebench" if self.facts()["has_python_runtime"] else "benchmark_model"

    def run(self, job: Job) -> RunResult:
        return self._run(job, None)

    def run_load(self, job: Job, load: dict[str, Any]) -> RunResult:
        """Load modes (concurrency / server) through the edgebench runner on the device."""
        if self.choose_runner() != "edgebench":
            raise BadInput(f"adb device {self.serial}: load modes (--concurrency, --server-qps, --sla-p99-ms, "
                           "--cold-starts) need python3 with a TFLite runtime on the device; benchmark_model has "
                           "no load modes")
        return self._run(job, load)

    def _run(self, job: Job, load: dict[str, Any] | None) -> RunResult:
        check_job_files(job)
        runner = self.choose_runner()
        if runner == "edgebench":
            if not self.facts()["has_python_runtime"]:
                raise BadInput(f"adb device {self.serial} has no python3 with a TFLite runtime, so the edgebench "
                               "runner cannot run there; use the benchmark_model runner (--benchmark-binary)")
            return self._run_edgebench(job, load)
        if job.schedule.sustained or job.schedule.paced:
            raise BadInput(f"adb device {self.serial}: --duration and --period-ms need the edgebench runner "
                           "(python3 with a TFLite runtime on the device); the benchmark_model runner starts one "
                           "process per sample, so it can neither pace nor sustain one interpreter")
        return self._run_benchmark_model(job)

    # -- cool-down and sampling (edgebench.targets.adb.thermal) ------------------------------------
    def cool_down(self) -> dict[str, Any]:
        """Poll until the hottest CPU/SoC zone is below the threshold, or the timeout passes."""
        return cool_down_device(self.device, self.thermal)

    # -- edgebench runner -------------------------------------------------------------------------
    def _stage_runner(self, pushed: dict[str, bool]) -> str:
        """The edgebench runner and the modules it loads by name from its own folder
        (``WORKER_FILES``) in a folder of ``files/`` named by their contents (``runner-<sha256>``):
        cached like every other file, never overwritten by a different version, and the names stay
        what runner.py expects. Returns the folder's name in ``files/``."""
        shas = [sha256_file(p) for p in WORKER_FILES]
        name = "runner-" + hashlib.sha256("".join(shas).encode()).hexdigest()[:16]
        folder = f"{REMOTE_FILES}/{name}"
        self.device.check(RemoteCommand.mkdir(folder), what="creating the runner folder")
        for path in WORKER_FILES:
            pushed[path.stem] = self.device.push_if_changed(path, f"{folder}/{path.name}")
        return name

    def _stage(self, local: Path, pushed: dict[str, bool], key: str, *, mode: int = 0o644,
               sha256: str | None = None) -> str:
        """Push LOCAL into the device's content-addressed cache (``files/<sha256><suffix>``) unless
        those bytes are already there; returns the file's name in ``files/``. Two jobs whose models
        share a basename never overwrite each other's file."""
        sha = sha256 or sha256_file(local)
        name = content_name(local, sha)
        pushed[key] = self.device.push_if_changed(local, f"{REMOTE_FILES}/{name}", mode=mode, sha256=sha)
        return name

    def _job_spec(self, job: Job, model_rel: str, inputs_rel: str | None,
                  load: dict[str, Any] | None = None) -> dict[str, Any]:
        spec = job.worker_spec()
        spec["delegate"] = job.delegate or self.delegate
        used = self.settings_used(job.threads, spec["delegate"])
        spec["threads"] = used["threads"]
        if used.get("cpu_affinity"):
            spec["cpu_affinity"] = used["cpu_affinity"]
        if spec["delegate"] == "nnapi":
            raise BadInput("delegate 'nnapi' is only available through the benchmark_model runner; "
                           "use --delegate xnnpack, none or gpu with the edgebench runner")
        spec["model_path"] = model_rel       # relative to the run folder: the runner runs there
        spec["inputs_npz"] = inputs_rel
        spec["load"] = load
        return spec

    def _run_edgebench(self, job: Job, load: dict[str, Any] | None = None) -> RunResult:
        dev = self.device
        model = Path(job.model_path)
        model_sha = sha256_file(model)     # the device runs the file named by these bytes
        run_dir = f"{REMOTE_ROOT}/run-{_run_id()}"
        pushed: dict[str, bool] = {}
        dev.check(RemoteCommand.mkdir(REMOTE_FILES, run_dir), what="creating the run folder")
        local_tmp = Path(tempfile.mkdtemp(prefix="edgebench-adb-"))
        thermal: dict[str, Any] = {}
        battery = (BatteryMonitor(dev, job.energy, run_dir, job.deadline_s, emulation=self.facts()["emulation"])
                   if job.energy is not None and load is None else None)
        try:
            runner_dir = self._stage_runner(pushed)
            model_name = self._stage(model, pushed, "model", sha256=model_sha)
            inputs_name = self._stage(Path(job.inputs_npz), pushed, "inputs") if job.inputs_npz else None
            spec = self._job_spec(job, "../files/" + model_name,
                                  "../files/" + inputs_name if inputs_name else None, load)
            job_file = local_tmp / "job.json"
            job_file.write_text(json.dumps(spec))
            dev.push(job_file, f"{run_dir}/job.json")

            if battery is not None:
                battery.prepare()
            r, wall = monitored_shell(
                dev, self.thermal, RemoteCommand.in_dir(run_dir, ["python3", f"../files/{runner_dir}/runner.py", "job.json"]),
                deadline_s=job.deadline_s, what=f"the run of {model.name}", thermal=thermal,
                status=job.schedule.sustained, before_run=battery.start if battery is not None else None)
            if battery is not None:
                battery.finish()

            self._check_deadline(r, job, model)
            expected = [f"{run_dir}/result.json", f"{run_dir}/result.npz"]
            listing = dev.check(RemoteCommand.test_files(expected), what="checking result files")
            present = {expected[int(ln[3:])] for ln in listing.stdout.splitlines()
                       if ln.startswith("OK ") and ln[3:].strip().isdigit()}
            if expected[0] not in present:
                tail = (r.stderr.strip().splitlines() or [""])[-1][:300]
                raise InfraError(f"adb device {self.serial}: the runner exited {r.rc} and wrote no result.json"
                                 f"{': ' + tail if tail else ''}; run it by hand: adb -s {self.serial} shell "
                                 f"'cd {run_dir} && python3 ../files/{runner_dir}/runner.py job.json'")
            where = f"adb device {self.serial}"
            dev.pull(f"{run_dir}/result.json", local_tmp / "result.json", max_bytes=returned.RESULT_JSON_MAX_BYTES)
            meta = returned.load_json(local_tmp / "result.json", where)
            if r.rc != 0 or meta.get("status") != "ok":
                msg = meta.get("error") or f"runner exited with status {r.rc}"
                msg = f"adb device {self.serial}: {msg}"
                if meta.get("error_kind") == "bad_input" or r.rc == 2:
                    raise BadInput(msg)
                raise InfraError(msg)
            if f"{run_dir}/result.npz" not in present:
                raise InfraError(f"adb device {self.serial}: the runner reported success but result.npz is "
                                 "missing (connection or storage problem); rerun")
            dev.pull(f"{run_dir}/result.npz", local_tmp / "result.npz", max_bytes=returned.npz_limit(job))
            arrays = returned.load_npz(local_tmp / "result.npz", job, where)
        finally:
            if battery is not None:
                battery.finish()        # idempotent: stops the sampler, undoes unplug/suspend_input
            self._cleanup(run_dir)
            shutil.rmtree(local_tmp, ignore_errors=True)

        samples = np.asarray(arrays.get("samples_ns", np.zeros(0)), np.int64)
        thermal.update(detect_throttle(thermal.get("before"), thermal["during"], thermal.get("after"), samples))
        extra: dict[str, Any] = {"runner": "edgebench", "serial": self.serial, "pushed": pushed,
                                 "remote_run_dir": run_dir, "device_wall_s": round(wall, 3), "thermal": thermal,
                                 "throttled": thermal["throttled"],
                                 **{k: v for k, v in self.settings_used(job.threads, spec["delegate"]).items()
                                    if k in ("profile", "threads_source", "profile_warning")}}
        if job.schedule.sustained:
            extra["sensor_readings"] = [{"t": s.get("uptime_s"), "zones_c": s.get("zones_c"), "cpus": s.get("cpus"),
                                         "thermal_status": s.get("thermal_status")}
                                        for s in [thermal.get("before"), *thermal["during"], thermal.get("after")] if s]
            extra["thermal_reason"] = None
        if battery is not None:
            energy, reason = battery.energy(meta.get("timed_span_boottime_s"), int(samples.size))
            extra.update(energy=energy, energy_reason=reason)
        return RunResult.from_worker(
            meta, arrays, target=self.name, model_path=str(job.model_path), model_sha256=model_sha,
            spec=spec, fingerprint=self.fingerprint(), method=DEVICE_RUNNER_METHOD, extra=extra)

    def _cleanup(self, run_dir: str) -> None:
        if self.keep_files:
            return
        try:
            self.device.shell(RemoteCommand.rm_rf(run_dir), what="cleanup")
        except EdgebenchError:
            pass   # the device is gone; the run's own error says so

    # -- benchmark_model runner ---------------------------------------------------------------------
    def _bm_flags(self, delegate: str, job: Job | None = None) -> dict[str, Any]:
        """Delegate -> benchmark_model flags. GPU precision loss is always explicit (off unless
        --gpu-precision fp16): the tool's own default (on, fp16) would silently change the numbers.
        ``--runtime compiled`` -> LiteRT's CompiledModel tool flags (``--benchmark-binary`` must then
        be ``benchmark_litert_model``)."""
        if job is None:
            return delegate_flags(delegate)
        return delegate_flags(delegate, job.runtime_api, job.accelerator, job.gpu_precision)

    def _host_io(self, job: Job):
        """Model I/O and the InputSet prepared exactly as the edgebench runner prepares them
        (same synthetic seed, same quantization), so outputs compare with the host's. The model is
        loaded in the isolated model-I/O worker, never in this process (an untrusted model may
        allocate gigabytes or crash the runtime)."""

        meta, arrays = describe_model(str(job.model_path), inputs_npz=job.inputs_npz, seed=job.seed, prepare=True)
        n = int(meta["n"])
        # benchmark_model reads inputs and writes outputs in the interpreter's order, under tensor names
        by_index = {d["index"]: d for d in meta["outputs"]}
        out_details = [{"name": by_index[d["index"]]["name"] if d["index"] in by_index else d["name"],
                        "shape": d["shape"], "dtype": d["dtype"], "quantization": (d["scale"], d["zero_point"])}
                       for d in meta["tensor_outputs"]]
        tensor_name = {d["index"]: d["name"] for d in meta["tensor_inputs"]}
        in_details = [{"name": tensor_name[d["index"]], "shape": d["shape"], "shape_signature": d["shape_signature"],
                       "dtype": d["dtype"], "index": d["index"]} for d in meta["inputs"]]
        prepared = {}
        for d in meta["inputs"]:
            stacked = arrays[f"in::{d['index']}"]
            step = stacked.shape[0] // n
            prepared[d["index"]] = [stacked[i * step:(i + 1) * step] for i in range(n)]
        return in_details, out_details, prepared, n, meta["source"]

    def _push_inputs(self, in_details, prepared, i: int, local_tmp: Path, run_dir: str,
                     relative: bool = False):
        """Value files of input sample i, pushed to RUN_DIR/in<i>/; their argv paths are
        absolute, or relative to the run folder when ``relative``."""
        arrays = {d["name"]: prepared[d["index"]][i] for d in in_details}
        details = [{k: v for k, v in d.items() if k != "index"} for d in in_details]
        ivf = write_input_value_files(arrays, details, local_tmp / f"in{i}",
                                      remote_dir=f"in{i}" if relative else f"{run_dir}/in{i}")
        for local, remote in zip(ivf.local_paths, ivf.remote_paths):
            self.device.push(Path(local), remote if remote.startswith("/") else f"{run_dir}/{remote}")
        return ivf

    def _run_benchmark_model(self, job: Job) -> RunResult:
        """Probe, outputs pass, timed sample loop (see ``benchmark_model.sample_loop``).

        1. a probe: one sample invocation with the job's warm-up; its wall time sets the
           deadlines below, its log gives init time, delegates and memory;
        2. with ``save_outputs``: one invocation per input sample (no warm-up, outputs only);
        3. the timed loop: one invocation per sample, each after the job's warm-up, under the
           job's stop rule (``--runs``, else ``--min-runs`` and ``--min-time``; never past ``--max-time``)."""
        if job.state_rule is not None and job.state_rule.streams and model_state(str(job.model_path)):
            raise BadInput(f"{job.model_path} keeps state between calls and the run streams it (--state streams), "
                           "but benchmark_model computes every sample in a process of its own, so state cannot be "
                           "carried; run this device with the Python runner (a device with python3 and LiteRT, "
                           "without --benchmark-binary) or use --state independent")
        dev = self.device
        facts = self.facts()
        info = resolve_binary(self.benchmark_binary)
        abis = (facts["props"].get("ro.product.cpu.abilist") or facts["abi"] or "").split(",")
        check_abi(info, abis, self.serial)
        model = Path(job.model_path)
        model_sha = sha256_file(model)
        delegate = job.delegate or self.delegate
        used = self.settings_used(job.threads, delegate)
        threads = used["threads"]
        flags = self._bm_flags(delegate, job)
        in_details, out_details, prepared, n_inputs, source = self._host_io(job)
        where = f"adb device {self.serial}"
        ctl = job.control

        def cap(deadline: float) -> float:   # an explicit job deadline bounds every command
            return min(deadline, job.deadline) if job.deadline is not None else deadline

        run_dir = f"{REMOTE_ROOT}/run-{_run_id()}"
        pushed: dict[str, bool] = {}
        dev.check(RemoteCommand.mkdir(REMOTE_FILES, run_dir), what="creating the run folder")
        local_tmp = Path(tempfile.mkdtemp(prefix="edgebench-adb-"))
        thermal: dict[str, Any] = {}
        outputs: dict[str, np.ndarray] | None = None
        try:
            binary_name = self._stage(info.path, pushed, "binary", mode=0o755)
            binary = f"{REMOTE_FILES}/{binary_name}"
            dev.check(RemoteCommand.chmod_exec(binary), what="making benchmark_model executable")
            model_name = self._stage(model, pushed, "model", sha256=model_sha)
            model_remote = f"{REMOTE_FILES}/{model_name}"
            ivf0 = self._push_inputs(in_details, prepared, 0, local_tmp, run_dir)
            sample_kw = dict(threads=threads, warmup_runs=ctl.warmup_runs, warmup_min_secs=ctl.warmup_time_s,
                             **flags, **ivf0.argv_kwargs())
            argv = sample_argv(binary, model_remote, **sample_kw)

            # 1. probe (which also asks the tool for its model runtime info: every node, delegated or not)
            progress.update(0, None, "probe")
            probe_argv = sample_argv(binary, model_remote, model_runtime_info_output_file=RUNTIME_INFO, **sample_kw)
            t0 = time.monotonic()
            r = dev.shell(RemoteCommand.in_dir_script(run_dir, build_sample_loop_script(probe_argv, 1)),
                          deadline_s=cap(ctl.max_time_s + ctl.warmup_time_s + 120.0),
                          what=f"the benchmark_model probe of {model.name}")
            probe_wall = time.monotonic() - t0
            self._check_deadline(r, job, model)
            read_sample_loop(r.stdout, 1, where=where)       # fails loudly on a wrong ABI, a crash ...
            first = parse_log(_first_sample_body(r.stdout))
            runtime_info = self._runtime_info(run_dir, local_tmp)

            # 2. outputs (one invocation per input sample), relative paths inside the run folder
            if job.save_outputs:
                outputs = self._bm_outputs(job, model, binary_name, model_name, threads, flags, in_details,
                                           out_details, prepared, n_inputs, local_tmp, run_dir,
                                           cap(outputs_deadline_s(n_inputs, probe_wall)))

            # 3. the timed loop
            deadline = cap(loop_deadline_s(ctl, probe_wall))
            r, wall = monitored_shell(
                dev, self.thermal, RemoteCommand.in_dir_script(run_dir, build_sample_loop_script(argv, control=ctl)),
                deadline_s=deadline, what=f"the benchmark_model sample loop of {model.name}", thermal=thermal,
                on_stdout=sample_progress(ctl.runs if ctl.runs is not None else ctl.min_runs))
            if r.rc in (124, 137):
                raise InfraError(f"adb device {self.serial}: the benchmark_model sample loop of {model.name} ran "
                                 f"past its deadline of {deadline:.0f} s (--max-time {ctl.max_time_s:g} s plus "
                                 f"{PROBE_FACTOR:g} x the probe's {probe_wall:.1f} s per invocation) and was killed "
                                 f"(exit {r.rc}); the device slowed down sharply (heat?); rerun after a cool-down")
            loop = read_sample_loop(r.stdout, where=where)   # needs rc 0 and the DONE marker
            if r.rc != 0:
                raise classify_failure(r.stdout + r.stderr, r.rc, where=where)
            samples = loop.samples_ns
            profile, profile_log = (self._bm_op_profile(job, binary, model_remote, threads, flags, ivf0, run_dir)
                                    if job.op_profile else (None, None))
        finally:
            self._cleanup(run_dir)
            shutil.rmtree(local_tmp, ignore_errors=True)

        thermal.update(detect_throttle(thermal.get("before"), thermal["during"], thermal.get("after"), samples))
        settings = describe_argv(argv)
        method = sample_method(len(samples), ctl.warmup_runs, ctl.warmup_time_s)
        extra: dict[str, Any] = {
            "runner": "benchmark_model", "serial": self.serial, "threads": threads, "delegate": delegate,
            "profile": used["profile"], "threads_source": used["threads_source"],
            **({"profile_warning": used["profile_warning"]} if "profile_warning" in used else {}),
            **({"cpu_affinity_note": "benchmark_model has no affinity flag: the profile's cores are not pinned"}
               if used.get("cpu_affinity") else {}),
            "runtime_api": job.runtime_api, "accelerator": flags.get("accelerator"),
            "gpu_precision": job.gpu_precision,
            "benchmark_model_flags": settings, "benchmark_binary": str(info.path),
            "benchmark_binary_sha256": sha256_file(info.path), "p99_method": method,
            "stop_reason": loop.stop_reason, "probe_wall_s": round(probe_wall, 3), "loop_deadline_s": round(deadline, 1),
            "input_source": source, "n_input_samples": n_inputs,
            "delegates_applied": list(first.delegates), "delegate_fallback": list(first.delegate_fallback),
            "mem_overall_mb": first.mem_overall_mb, "pushed": pushed, "remote_run_dir": run_dir,
            "device_wall_s": round(wall, 3), "thermal": thermal, "throttled": thermal["throttled"],
        }
        d = _bm_delegation(runtime_info, profile_log, first)
        extra["delegation"] = d.to_dict() if d is not None else None
        extra["model_runtime_info"] = ({"read": True} if isinstance(runtime_info, dict) and "error" not in runtime_info
                                       else runtime_info)
        if profile is not None:
            extra.update(profile)
        if job.energy is not None:
            extra.update(energy=None, energy_reason=(
                "the benchmark_model runner starts one process per sample, so battery energy would be mostly "
                "process start and model load; energy per inference needs the edgebench runner (python3 with "
                "a TFLite runtime on the device)"))
        fp = self.fingerprint()
        fp.update({"threads": threads, "delegate": delegate, "runtime": "benchmark_model",
                   "gpu_precision_loss_allowed": settings.get("gpu_precision_loss_allowed")})
        return RunResult(
            target=self.name, model_path=str(job.model_path), model_sha256=model_sha,
            samples_ns=samples, warmup_ns=np.zeros(0, np.int64),
            init_ms=first.init_us / 1e3 if first.init_us is not None else None,
            first_inference_ms=first.first_inference_us / 1e3 if first.first_inference_us is not None else None,
            outputs=outputs, runtime="benchmark_model", method=method, sample_class=PER_PROCESS,
            fingerprint=fp, extra=extra,
        )

    def _bm_outputs(self, job: Job, model: Path, binary_name: str, model_name: str, threads, flags: dict[str, Any],
                    in_details, out_details, prepared, n_inputs: int, local_tmp: Path, run_dir: str,
                    deadline_s: float) -> dict[str, np.ndarray]:
        """The outputs pass: one benchmark_model invocation per input sample (no warm-up), run from one
        pushed script with paths relative to the run folder; the output files pulled and joined."""
        dev = self.device
        where = f"adb device {self.serial}"
        progress.update(0, None, f"outputs of {n_inputs} input samples")
        binary_rel, model_rel = f"../files/{binary_name}", f"../files/{model_name}"
        files = []
        lines = []
        for i in range(n_inputs):
            ivf = self._push_inputs(in_details, prepared, i, local_tmp, run_dir, relative=True)
            oargv = build_argv(binary_rel, model_rel, threads=threads, num_runs=1, warmup_runs=0,
                               min_secs=0.0, warmup_min_secs=0.0, output_filepath=f"out{i}.bin",
                               **flags, **ivf.argv_kwargs())
            lines.append(RemoteCommand.script_line(oargv, quiet=True))
            files.append(f"{run_dir}/out{i}.bin")
        script = local_tmp / "outputs.sh"
        script.write_text("\n".join(lines) + "\n")
        dev.push(script, f"{run_dir}/outputs.sh")
        r = dev.shell(RemoteCommand.in_dir(run_dir, ["sh", "outputs.sh"]),
                      deadline_s=deadline_s,
                      what=f"benchmark_model outputs of {model.name}")
        self._check_deadline(r, job, model)
        if r.rc != 0:
            raise classify_failure(r.stdout + r.stderr, r.rc, where=where)
        listing = dev.check(RemoteCommand.test_files(files), what="checking output files")
        ok = {int(ln[3:]) for ln in listing.stdout.splitlines() if ln.startswith("OK ") and ln[3:].isdigit()}
        missing = [f for i, f in enumerate(files) if i not in ok]
        if missing:
            raise InfraError(f"{where}: benchmark_model exited 0 but wrote no {missing[0]}; the binary "
                             "ignored --output_filepath (too old?) or storage is full; rerun")
        expected = sum(int(np.prod(d["shape"], dtype=np.int64)) * np.dtype(d["dtype"]).itemsize
                       for d in out_details)
        per_sample: list[dict[str, np.ndarray]] = []
        for i, f in enumerate(files):
            dev.pull(f, local_tmp / f"out{i}.bin", max_bytes=expected)
            per_sample.append(split_output_file((local_tmp / f"out{i}.bin").read_bytes(),
                                                out_details, dequantize=True))
        outputs = {d["name"]: np.concatenate([s[d["name"]] for s in per_sample], axis=0)
                   for d in out_details}
        return outputs

    def _runtime_info(self, run_dir: str, local_tmp: Path) -> dict[str, Any]:
        """The probe's ``--model_runtime_info_output_file`` read back (``read_runtime_info``), or
        ``{"error": why}``: a binary without the flag logs it as unconsumed and writes nothing."""
        remote = f"{run_dir}/{RUNTIME_INFO}"
        listing = self.device.check(RemoteCommand.test_files([remote]), what="checking the model runtime info")
        if "OK 0" not in [ln.strip() for ln in listing.stdout.splitlines()]:
            return {"error": "this benchmark_model wrote no model runtime info (a build without "
                             "--model_runtime_info_output_file); delegation is read from its log"}
        local = local_tmp / RUNTIME_INFO
        try:
            self.device.pull(remote, local, max_bytes=RUNTIME_INFO_MAX_BYTES)
            return read_runtime_info(local.read_bytes())
        except (InfraError, ValueError) as exc:
            return {"error": f"the model runtime info could not be read: {exc}; delegation is read from the log"}

    def _bm_op_profile(self, job: Job, binary: str, model_remote: str, threads, flags, ivf0,
                       run_dir: str):
        """A separate benchmark_model run with ``--enable_op_profiling`` after the sample loop (so
        the timed samples never carry the profiler): ``({"op_profile": {entries, info}}, its log)`` or
        ``({"op_profile_error": why}, log)`` -- a tool that prints no table says so, never zeros."""
        runs = int(job.runs or min(job.min_runs, 200))
        argv = build_argv(binary, model_remote, threads=threads, num_runs=runs, warmup_runs=1, min_secs=0.0,
                          enable_op_profiling=True, **flags, **ivf0.argv_kwargs())
        r = self.device.shell(RemoteCommand.in_dir(run_dir, argv), deadline_s=job.deadline_s,
                              what=f"benchmark_model op profiling of {Path(job.model_path).name}")
        if r.rc != 0:
            return {"op_profile_error": f"benchmark_model --enable_op_profiling exited {r.rc}: "
                                        f"{(r.stderr.strip().splitlines() or [''])[-1][:200]} (the timed results "
                                        "are kept)"}, None
        log = parse_log(r.stdout + "\n" + r.stderr)
        got = op_profile_from_log(log)
        if got is None:
            return {"op_profile_error": "benchmark_model ran with --enable_op_profiling but printed no operator-wise "
                                        "table (this binary or build has no op profiler)"}, log
        entries, info = got
        info["flags"] = describe_argv(argv)
        return {"op_profile": {"entries": [e.to_dict() for e in entries], "info": info}}, log

    def _check_deadline(self, r: ShellResult, job: Job, model: Path) -> None:
        if r.rc in (124, 137):
            raise InfraError(f"adb device {self.serial}: the run of {model.name} exceeded its device-side "
                             f"deadline of {job.deadline_s:g} s and was killed (exit {r.rc}); raise the "
                             "deadline or lower the number of runs")


def _first_sample_body(text: str) -> str:
    """The output of the first invocation in a benchmark_model sample loop."""
    lines = text.splitlines()
    try:
        b = next(i for i, ln in enumerate(lines) if ln.strip().startswith("EDGEBENCH_SAMPLE_BEGIN 0"))
        e = next(i for i, ln in enumerate(lines) if ln.strip().startswith("EDGEBENCH_SAMPLE_END 0"))
    except StopIteration:
        return ""
    return "\n".join(lines[b + 1:e])


def _bm_delegation(runtime_info, profile_log, first):
    """What benchmark_model delegated: the model runtime info (every node), else the op profile's log
    (the "Replacing ..." line plus the nodes left undelegated), else the probe's log (only the counts)."""
    d = None
    if isinstance(runtime_info, dict) and "error" not in runtime_info:
        d = delegation_from_runtime_info(runtime_info)
        if d.partitions == 0 and first.delegated_nodes is not None:
            d = None   # kernels outside the file's main graph: the log's counts are the better fact
    if d is None:
        d = (delegation_from_log(profile_log) if profile_log is not None else None) or delegation_from_log(first)
    return d
