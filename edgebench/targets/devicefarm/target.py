"""``DeviceFarmTarget``: one ``--targets devicefarm:PROJECT/POOL`` item, run on AWS Device Farm.

For each model the target (1) resolves PROJECT and POOL, names or ARNs, through ``list_projects``
and ``list_device_pools`` (PRIVATE and CURATED pools) and counts the pool's compatible Android
devices (``get_device_pool_compatibility``); (2) says before anything is scheduled what the run
may cost and which quotas apply (``cost_note``); (3) uploads the test package and the test spec
(``create_upload``, a PUT of the bytes to the pre-signed URL, ``get_upload`` until SUCCEEDED);
(4) ``schedule_run``s an ``APPIUM_WEB_PYTHON`` run with a job timeout derived from the run control;
(5) polls ``get_run`` every ``poll_interval_s`` until COMPLETED or the deadline (then ``stop_run``);
(6) per job (one per device) lists its FILE artifacts, fetches the ``CUSTOMER_ARTIFACT`` zip and
parses ``benchmark_model.log`` inside with edgebench's one benchmark_model parser into a summary
row (``log_rows.to_result_rows``: no per-inference samples, so p99 is None and invalid, exactly
like ``import-log``). What is packed and run on the phone: ``package``.

Sources for the call sequence (facts, not code): the Device Farm API reference and developer guide
(custom test environments: test spec syntax, ``$DEVICEFARM_DEVICE_UDID``/``$DEVICEFARM_LOG_DIR``/
``$DEVICEFARM_TEST_PACKAGE_PATH``, the Appium Python package layout; limits page: 150-minute run
limit, default metered concurrency 5, 24 h queueing, 4 GB uploads, 1 GB customer artifacts) and
pytorch/test-infra's ``tools/device-farm-runner/run_on_aws_devicefarm.py`` (create_upload with
``contentType`` then a PUT, get_upload polling, schedule_run with a test spec, list_jobs and
artifacts afterwards). None of it has run against a real account here (docs/devicefarm.md says
what that leaves unverified).
"""

from __future__ import annotations

import io
import math
import os
import threading
import time
import warnings
import zipfile
from pathlib import Path
from typing import Any, Callable

from edgebench.core.bounded import printable, read_member
from edgebench.core.errors import BadInput, EdgebenchError, InfraError
from edgebench.rows import InferenceRow
from edgebench.targets.base import DEFAULT_DELEGATE, Job, check_job_files
from edgebench.targets.benchmark_model.argv import build_argv, delegate_flags
from edgebench.targets.benchmark_model.binary import _WHERE, resolve_binary
from edgebench.targets.benchmark_model.binary import ENV_VAR as BINARY_ENV
from edgebench.targets.benchmark_model.log_rows import LOG_MAX_BYTES, to_result_rows
from edgebench.targets.benchmark_model.parse import parse_log
from edgebench.targets.devicefarm import aws, package

PREFIX = "devicefarm:"
SPEC_HELP = "devicefarm:PROJECT/POOL"
# Pricing and quotas as published at the time of writing (aws.amazon.com/device-farm/pricing and
# the developer guide's "Limits" page); the note says so, and a real account's own plan decides.
PRICE_PER_DEVICE_MINUTE_USD = 0.17     # metered; unmetered slots are a flat monthly price instead
MAX_RUN_MINUTES = 150                  # hard limit of one automated test run (jobTimeoutMinutes <= 150)
DEFAULT_CONCURRENCY = 5                # default account-level metered concurrency (devices at once)
QUOTAS = (
    f"jobs time out after jobTimeoutMinutes (the account's defaultJobTimeoutMinutes unless the run sets it; "
    f"at most {MAX_RUN_MINUTES} min)",
    f"devices run in parallel up to the account's concurrency (metered default {DEFAULT_CONCURRENCY}; unmetered: "
    "the slots bought); the rest wait",
    "a scheduled run may wait in the queue for up to 24 hours",
    "at most 250 jobs in flight per account (a soft limit)",
    "uploads up to 4 GB; customer artifacts up to 1 GB per job",
)
FINISHED = "COMPLETED"
OK_RESULTS = ("PASSED", "WARNED")
QUEUE_ALLOWANCE_MIN = 30               # the default deadline's allowance for queueing and device setup


def parse_spec(name: str) -> tuple[str, str]:
    """``devicefarm:PROJECT/POOL`` -> (PROJECT, POOL); each a name or an ARN. A private pool's ARN
    holds a '/' itself, so the split is at ``/arn:`` when the pool is an ARN, else at the first '/'
    (a project ARN has none)."""
    body = name[len(PREFIX):]
    i = body.find("/arn:")
    project, pool = (body[:i], body[i + 1:]) if i >= 0 else body.partition("/")[::2]
    if not project.strip() or not pool.strip():
        raise BadInput(f"--targets {name!r}: use {SPEC_HELP} (a Device Farm project and one of its device pools, "
                       "names or ARNs), e.g. 'devicefarm:my-project/Top Devices'")
    return project.strip(), pool.strip()


def job_timeout_minutes(job: Job) -> int:
    """Minutes a device job may take: the run control's own worker deadline (timed loop, warm-up,
    load) plus 5 min for pushing and setup, within Device Farm's 150-minute limit."""
    return max(5, min(MAX_RUN_MINUTES, math.ceil((job.deadline_s + 300.0) / 60.0)))


def cost_note(devices: int, timeout_min: int) -> dict[str, Any]:
    """What the run may cost and which quotas apply, before it is scheduled."""
    upper = devices * timeout_min * PRICE_PER_DEVICE_MINUTE_USD
    text = (f"AWS Device Farm meters device minutes (${PRICE_PER_DEVICE_MINUTE_USD:.2f}/device-minute metered at "
            f"the time of writing; unmetered slots are a flat monthly price): this run uses {devices} device(s) "
            f"for at most {timeout_min} min each (the job timeout), so at most {devices * timeout_min} device "
            f"minutes = ${upper:.2f} metered; "
            f"quotas: {QUOTAS[0]}; {QUOTAS[1]}")
    return {"price_per_device_minute_usd": PRICE_PER_DEVICE_MINUTE_USD, "devices": devices,
            "job_timeout_minutes": timeout_min, "max_device_minutes": devices * timeout_min,
            "max_cost_usd_metered": round(upper, 2), "quotas": list(QUOTAS), "note": text,
            "pricing_source": "aws.amazon.com/device-farm/pricing and the Device Farm developer guide's Limits page, "
                              "as published at the time of writing; your account's plan decides"}


class DeviceFarmNote(UserWarning):
    """A fact the user should see before money is spent (the cost note)."""


class DeviceFarmTarget:
    """Runs ``benchmark_model`` on every Android device of one Device Farm pool, one model per run.

    ``bench_rows(job)`` returns one summary row per device job (``edgebench bench``); ``run`` is
    refused (no per-inference samples, no outputs: nothing for convert-and-compare to judge)."""

    summary_rows = True       # the bench loop asks for rows, not RunResults

    def __init__(self, name: str, *, benchmark_binary: str | None, threads: int | None = None,
                 delegate: str = DEFAULT_DELEGATE, poll_interval_s: float = 15.0,
                 upload_interval_s: float = 5.0, upload_deadline_s: float = 600.0,
                 deadline_s: float | None = None, client_factory: Callable[[], Any] | None = None,
                 sleep: Callable[[float], Any] | None = None) -> None:
        self.name = name
        self.project_ref, self.pool_ref = parse_spec(name)
        if threads is not None and threads < 1:
            raise BadInput(f"--threads must be >= 1, got {threads}")
        delegate_flags(delegate)      # an unknown delegate fails now, not after an upload
        if benchmark_binary is None and not os.environ.get(BINARY_ENV):
            raise BadInput(f"--targets {name} runs Google's benchmark_model on the farm's phones: give the Android "
                           f"build with --benchmark-binary PATH; {_WHERE}")
        self.binary = resolve_binary(benchmark_binary)
        if self.binary.kind == "elf" and self.binary.machine not in ("aarch64", "arm"):
            raise BadInput(f"--benchmark-binary {self.binary.path} is a {self.binary.machine} binary; Device Farm's "
                           "Android phones are arm64-v8a: use android_aarch64_benchmark_model")
        self.threads = threads
        self.delegate = delegate
        self.poll_interval_s = poll_interval_s
        self.upload_interval_s = upload_interval_s
        self.upload_deadline_s = upload_deadline_s
        self.deadline_s = deadline_s
        self._factory = client_factory
        self._client: Any = None
        self._resolved: dict[str, Any] | None = None
        self._cancelled = threading.Event()
        # waiting between polls ends early when the run is cancelled (Ctrl-C: ``loop.run_lanes``)
        self._sleep = sleep or self._cancelled.wait

    def cancel(self) -> None:
        """Stop waiting: the current upload or run is abandoned (a scheduled run is stopped)."""
        self._cancelled.set()

    # -- the Target protocol ---------------------------------------------------------------------
    def fingerprint(self) -> dict[str, Any]:
        r = self._resolved or {}
        return {"target": self.name, "farm": f"AWS Device Farm ({aws.REGION})", "project_arn": r.get("project_arn"),
                "device_pool_arn": r.get("pool_arn"), "threads": self.threads, "delegate": self.delegate,
                "runtime": "benchmark_model"}

    def run(self, job: Job):
        raise BadInput(f"{self.name}: Device Farm targets run in `edgebench bench` only (benchmark_model's summary "
                       "statistics, no per-inference samples or outputs); use host or adb:SERIAL here")

    # -- AWS ------------------------------------------------------------------------------------
    def client(self) -> Any:
        if self._client is None:
            self._client = (self._factory or aws.client_factory)()
        return self._client

    def resolve(self) -> dict[str, Any]:
        """Project and pool ARNs, and the pool's compatible Android devices (once per target)."""
        if self._resolved is not None:
            return self._resolved
        c = self.client()
        projects = aws.pages(c, "list_projects", "projects")
        project = _pick(projects, self.project_ref)
        if project is None:
            names = ", ".join(sorted(str(p.get("name")) for p in projects)) or "none"
            raise BadInput(f"--targets {self.name}: no Device Farm project {self.project_ref!r} in {aws.REGION} "
                           f"(projects: {names}); use one of those names or its ARN")
        pools = [p for kind in ("PRIVATE", "CURATED")
                 for p in aws.pages(c, "list_device_pools", "devicePools", arn=project["arn"], type=kind)]
        pool = _pick(pools, self.pool_ref)
        if pool is None:
            names = ", ".join(sorted({str(p.get("name")) for p in pools})) or "none"
            raise BadInput(f"--targets {self.name}: project {project.get('name')!r} has no device pool "
                           f"{self.pool_ref!r} (pools: {names}); use one of those names or its ARN")
        compat = aws.call(c, "get_device_pool_compatibility", devicePoolArn=pool["arn"],
                          testType=package.TEST_TYPE)
        devices = [d.get("device") or {} for d in compat.get("compatibleDevices") or [] if d.get("compatible", True)]
        android = [d for d in devices if str(d.get("platform", "ANDROID")).upper() == "ANDROID"]
        if not android:
            why = "; ".join(m.get("message", "") for d in compat.get("incompatibleDevices") or []
                            for m in d.get("incompatibilityMessages") or [] if m.get("message"))[:200]
            raise BadInput(f"--targets {self.name}: pool {pool.get('name')!r} has no Android device that can run a "
                           f"custom-environment test{f' ({why})' if why else ''}; benchmark_model runs on Android: "
                           "choose or create a pool of Android phones")
        if len(android) < len(devices):
            raise BadInput(f"--targets {self.name}: pool {pool.get('name')!r} holds {len(devices) - len(android)} "
                           "iOS device(s); benchmark_model runs on Android only: use a pool of Android phones")
        self._resolved = {"project_arn": project["arn"], "project": project.get("name"), "pool_arn": pool["arn"],
                          "pool": pool.get("name"), "devices": len(android),
                          "device_names": [str(d.get("name")) for d in android]}
        return self._resolved

    def _upload(self, project_arn: str, name: str, kind: str, data: bytes) -> str:
        c = self.client()
        up = aws.call(c, "create_upload", projectArn=project_arn, name=name, type=kind,
                      contentType=package.CONTENT_TYPE)["upload"]
        aws.put_bytes(up["url"], data, package.CONTENT_TYPE, f"{name} ({kind})")
        start = time.monotonic()
        while True:
            got = aws.call(c, "get_upload", arn=up["arn"])["upload"]
            status = got.get("status")
            if status == "SUCCEEDED":
                return up["arn"]
            if status == "FAILED":
                why = printable(str(got.get("message") or got.get("metadata") or "no message"))[:300]
                raise InfraError(f"Device Farm refused the upload {name} ({kind}): {why}")
            if self._cancelled.is_set():
                raise InfraError(f"{self.name}: interrupted while Device Farm processed the upload {name}; "
                                 "nothing was scheduled")
            if time.monotonic() - start > self.upload_deadline_s:
                raise InfraError(f"Device Farm did not process the upload {name} within {self.upload_deadline_s:g} s "
                                 f"(status {status}); rerun later")
            self._sleep(self.upload_interval_s)

    # -- one model ------------------------------------------------------------------------------
    def argv(self, job: Job) -> list[str]:
        ctl = job.control
        flags = delegate_flags(job.delegate or self.delegate, job.runtime_api, job.accelerator, job.gpu_precision)
        dev = package.DEVICE_DIR
        return build_argv(f"{dev}/{package.BINARY_NAME}", f"{dev}/{package.MODEL_NAME}",
                          threads=job.threads if job.threads is not None else self.threads,
                          num_runs=ctl.runs if ctl.runs is not None else ctl.min_runs,
                          warmup_runs=ctl.warmup_runs, min_secs=None if ctl.runs is not None else ctl.min_time_s,
                          max_secs=ctl.max_time_s, warmup_min_secs=ctl.warmup_time_s or None, **flags)

    def bench_rows(self, job: Job) -> list[InferenceRow]:
        """Upload, schedule, wait, fetch and parse: one summary row per device job."""
        model = check_job_files(job)
        if self._cancelled.is_set():
            raise InfraError(f"{self.name}: not run: interrupted before anything was uploaded")
        if job.inputs_npz:
            raise BadInput(f"{self.name}: --data is not sent to Device Farm (benchmark_model feeds random inputs "
                           "there); drop --data for this target")
        if job.schedule.sustained or job.schedule.paced or job.energy is not None or job.op_profile:
            raise BadInput(f"{self.name}: --duration, --period-ms, --energy and --op-profile are not available on "
                           "Device Farm (one benchmark_model run per device); drop them for this target")
        argv = self.argv(job)
        where = self.resolve()
        timeout_min = job_timeout_minutes(job)
        costs = cost_note(where["devices"], timeout_min)
        warnings.warn(f"{self.name}: {costs['note']}", DeviceFarmNote, stacklevel=2)
        payload = package.build_payload(model, self.binary.path, argv)
        pkg_arn = self._upload(where["project_arn"], payload.package_name, package.PACKAGE_TYPE, payload.package)
        spec_arn = self._upload(where["project_arn"], payload.spec_name, package.SPEC_TYPE, payload.spec.encode())
        c = self.client()
        run = aws.call(c, "schedule_run", projectArn=where["project_arn"], devicePoolArn=where["pool_arn"],
                       name=f"edgebench {Path(job.model_path).name}"[:250],
                       test={"type": package.TEST_TYPE, "testPackageArn": pkg_arn, "testSpecArn": spec_arn},
                       executionConfiguration={"jobTimeoutMinutes": timeout_min, "videoCapture": False})["run"]
        run = self._wait(run["arn"], timeout_min, where["devices"])
        facts = {"project_arn": where["project_arn"], "device_pool_arn": where["pool_arn"], "run_arn": run["arn"],
                 "run_result": run.get("result"), "run_device_minutes": run.get("deviceMinutes"),
                 "test_type": package.TEST_TYPE, "test_package_arn": pkg_arn, "test_spec_arn": spec_arn,
                 "payload_sha256": payload.checksums, "argv": argv, "cost": costs}
        jobs = aws.pages(c, "list_jobs", "jobs", arn=run["arn"])
        if not jobs:
            raise InfraError(f"{self.name}: run {run['arn']} ended {run.get('result')} with no device jobs"
                             f"{': ' + _message(run) if run.get('message') else ''}")
        return [self._job_row(j, run, facts, job) for j in jobs]

    def _wait(self, run_arn: str, timeout_min: int, devices: int) -> dict[str, Any]:
        """get_run until COMPLETED; past the deadline stop_run and say so."""
        deadline = self.deadline_s
        if deadline is None:     # every wave of DEFAULT_CONCURRENCY devices, plus queueing and setup
            deadline = 60.0 * (timeout_min * math.ceil(devices / DEFAULT_CONCURRENCY) + QUEUE_ALLOWANCE_MIN)
        c = self.client()
        start = time.monotonic()
        while True:
            run = aws.call(c, "get_run", arn=run_arn)["run"]
            if run.get("status") == FINISHED:
                return run
            if self._cancelled.is_set():
                aws.call(c, "stop_run", arn=run_arn)
                raise InfraError(f"{self.name}: interrupted; edgebench stopped run {run_arn} (stop_run; the device "
                                 "minutes used so far are billed)")
            if time.monotonic() - start >= deadline:
                aws.call(c, "stop_run", arn=run_arn)
                raise InfraError(f"{self.name}: run {run_arn} was still {run.get('status')} after {deadline:g} s; "
                                 "edgebench stopped it (stop_run; the device minutes used so far are billed): "
                                 "rerun when the pool's devices are free")
            self._sleep(self.poll_interval_s)

    def _job_row(self, dj: dict[str, Any], run: dict[str, Any], facts: dict[str, Any], job: Job) -> InferenceRow:
        device = dj.get("device") or {}
        label = f"{self.name}@{device.get('name') or device.get('model') or dj.get('name') or 'device'}"
        extra = {"devicefarm": {**facts, "job_arn": dj.get("arn"), "job_result": dj.get("result"),
                                "job_device_minutes": dj.get("deviceMinutes"),
                                "device": {k: device.get(k) for k in ("arn", "name", "manufacturer", "model", "os",
                                                                      "platform", "formFactor", "fleetType")}}}
        fingerprint = {"target": label, "farm": f"AWS Device Farm ({aws.REGION})", "device_model": device.get("model"),
                       "manufacturer": device.get("manufacturer"), "os": _os(device), "device_arn": device.get("arn")}
        model = Path(job.model_path)

        def failed(reason: str) -> InferenceRow:
            err = InfraError(f"{label}: {reason}")
            return InferenceRow(target=label, model=model.stem, model_path=str(model), status="failed",
                                error=str(err), exit_code=err.exit_code, error_type="InfraError",
                                device_model=device.get("name"), fingerprint=fingerprint, extra=extra)

        try:
            text, fetch_error = self._fetch_log(dj), None
        except EdgebenchError as err:
            text, fetch_error = None, str(err)
        if dj.get("result") not in OK_RESULTS:
            reason = _message(dj) or _message(run) or "no message"
            log = parse_log(text) if text else None
            if log is not None and log.errors:
                reason = f"{reason}; benchmark_model: {log.errors[0]}"
            return failed(f"Device Farm job {dj.get('result')}: {reason}")
        if text is None:
            return failed(str(fetch_error))
        log = parse_log(text)
        if not log.is_benchmark_model:
            first = text.strip().splitlines()[0][:120] if text.strip() else "empty"
            return failed(f"the job passed but its {package.LOG_NAME} holds no benchmark_model output (first line: "
                          f"{first})")
        (row,) = to_result_rows(log, source=f"Device Farm artifact of job {dj.get('arn')}", target=label)
        return row.replace(model=model.stem, model_path=str(model), device_model=device.get("name"),
                           fingerprint={**row.fingerprint, **fingerprint}, extra=extra,
                           method="benchmark_model summary statistics on an AWS Device Farm phone "
                                  "(no per-inference samples)")

    def _fetch_log(self, dj: dict[str, Any]) -> str:
        """The benchmark_model log from the job's CUSTOMER_ARTIFACT zip ($DEVICEFARM_LOG_DIR)."""
        arts = aws.pages(self.client(), "list_artifacts", "artifacts", arn=dj["arn"], type="FILE")
        zips = [a for a in arts if a.get("type") == "CUSTOMER_ARTIFACT" and a.get("url")]
        if not zips:
            kinds = ", ".join(sorted({str(a.get("type")) for a in arts})) or "none"
            raise InfraError(f"Device Farm job has no CUSTOMER_ARTIFACT (artifacts: {kinds}); the test spec's "
                             f"{package.LOG_NAME} did not come back")
        for art in zips:
            data = aws.get_bytes(art["url"], f"artifact {art.get('name') or art.get('arn')}")
            try:
                zf = zipfile.ZipFile(io.BytesIO(data))
            except zipfile.BadZipFile:
                continue
            with zf:
                names = [n for n in zf.namelist() if n.rsplit("/", 1)[-1] == package.LOG_NAME]
                if names:
                    raw = read_member(zf, names[0], LOG_MAX_BYTES, f"artifact {art.get('name')}")
                    return printable(raw.decode("utf-8", errors="replace"))
        raise InfraError(f"Device Farm job's customer artifacts hold no {package.LOG_NAME}")


def _pick(items: list[dict[str, Any]], ref: str) -> dict[str, Any] | None:
    """The item whose ARN or name is ``ref`` (an ARN first; a name must be unambiguous)."""
    for it in items:
        if it.get("arn") == ref:
            return it
    named = [it for it in items if it.get("name") == ref]
    if len(named) > 1:
        raise BadInput(f"{len(named)} Device Farm items are named {ref!r}; give its ARN instead "
                       f"({', '.join(str(it.get('arn')) for it in named)})")
    return named[0] if named else None


def _message(obj: dict[str, Any]) -> str:
    return printable(str(obj.get("message") or "")).strip()[:300]


def _os(device: dict[str, Any]) -> str | None:
    if not device.get("os"):
        return None
    return f"{str(device.get('platform', 'ANDROID')).title()} {device['os']}"
