"""The AWS Device Farm target against botocore's Stubber: a real boto3 client (real parameter and
response validation), every call and its parameters asserted in order, the pre-signed upload PUTs
and the artifact GET served by an http.server on 127.0.0.1 started here. Nothing leaves the machine:
the stubbed client never sends a request, the credentials are fake, instance metadata is off.

Tests that need boto3 are ``extras`` (the optional ``devicefarm`` extra); the ones that check what
happens without it, and the target-spec parsing, run in the core suite."""

from __future__ import annotations

import hashlib
import io
import json
import os
import subprocess
import sys
import threading
import zipfile
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml

from conftest import require_extra
from edgebench.core.errors import BadInput, InfraError
from edgebench.targets import loop
from edgebench.targets.base import Job, RunControl
from edgebench.targets.devicefarm import aws, package, parse_spec
from edgebench.targets.devicefarm.target import DeviceFarmTarget

ROOT = Path(__file__).resolve().parents[1]
LOG = ROOT / "tests/fixtures/benchmark_model/android_apk_logcat_cph2641_p5_median_p95.txt"   # a real capture
STANDIN = ROOT / "edgebench/targets/sim/benchmark_model_standin.py"    # a '#!' file: never run here
SECRET = "fAkE/SeCrEt+KeY0123456789abcdefEXAMPLE"
KEY_ID = "AKIAFAKEKEYID0EXAMPLE"

PROJECT_ARN = "arn:aws:devicefarm:us-west-2:123456789012:project:11111111-2222-3333-4444-555555555555"
POOL_ARN = "arn:aws:devicefarm:us-west-2:123456789012:devicepool:11111111-2222-3333-4444-555555555555/pool-1"
CURATED_ARN = "arn:aws:devicefarm:us-west-2::devicepool:082d10e5-d7d7-48a5-ba5c-b33d66efa1f5"
PKG_ARN = "arn:aws:devicefarm:us-west-2:123456789012:upload:1111/pkg"
SPEC_ARN = "arn:aws:devicefarm:us-west-2:123456789012:upload:1111/spec"
RUN_ARN = "arn:aws:devicefarm:us-west-2:123456789012:run:1111/run-1"
JOB_ARN = "arn:aws:devicefarm:us-west-2:123456789012:job:1111/run-1/00000"
DEVICE = {"arn": "arn:aws:devicefarm:us-west-2::device:PIXEL8", "name": "Google Pixel 8", "manufacturer": "Google",
          "model": "Pixel 8", "platform": "ANDROID", "os": "14", "formFactor": "PHONE", "fleetType": "PUBLIC"}


# ------------------------------------------------------------------------------ fixtures
@pytest.fixture(scope="session")
def farm_model(tmp_path_factory) -> Path:
    """A tiny real .tflite (bench inspects it before anything is uploaded)."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import keras
    import tensorflow as tf

    keras.utils.set_random_seed(0)
    inp = keras.Input(shape=(4,), name="x")
    m = keras.Model(inp, keras.layers.Dense(2, name="y")(inp))
    path = tmp_path_factory.mktemp("farm") / "tiny farm.tflite"
    path.write_bytes(tf.lite.TFLiteConverter.from_keras_model(m).convert())
    return path


@pytest.fixture()
def fake_aws(monkeypatch, tmp_path):
    """Fake credentials from the environment only: no ~/.aws, no instance metadata."""
    for k in list(os.environ):
        if k.startswith("AWS_"):
            monkeypatch.delenv(k)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", KEY_ID)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-west-2")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.delenv("EDGEBENCH_BENCHMARK_MODEL", raising=False)


class _Files(BaseHTTPRequestHandler):
    def do_PUT(self):  # noqa: N802 -- http.server's name
        n = int(self.headers.get("Content-Length") or 0)
        self.server.puts[self.path] = (self.headers.get("Content-Type"), self.rfile.read(n))
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self):  # noqa: N802
        body = self.server.gets.get(self.path)
        if body is None:
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_a):
        pass


@pytest.fixture()
def files():
    """A real HTTP server on 127.0.0.1: records PUT bodies, serves GET bodies."""
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Files)
    srv.puts, srv.gets = {}, {}
    th = threading.Thread(target=srv.serve_forever, daemon=True)
    th.start()
    srv.url = f"http://127.0.0.1:{srv.server_address[1]}"
    yield srv
    srv.shutdown()
    srv.server_close()


def artifact_zip(log_text: str) -> bytes:
    """What Device Farm returns for $DEVICEFARM_LOG_DIR: a zip of the folder's files."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("Host_Machine_Files/$DEVICEFARM_LOG_DIR/benchmark_model.log", log_text)
    return buf.getvalue()


def stubbed():
    """A real boto3 Device Farm client with a Stubber activated on it."""
    boto3 = require_extra("boto3", "devicefarm")
    from botocore.stub import Stubber

    client = boto3.client("devicefarm", region_name="us-west-2")
    stub = Stubber(client)
    stub.activate()
    return client, stub


def expect_resolve(stub, devices=(DEVICE,)):
    stub.add_response("list_projects", {"projects": [{"arn": PROJECT_ARN, "name": "bench"}]}, {})
    stub.add_response("list_device_pools", {"devicePools": [{"arn": POOL_ARN, "name": "pixels"}]},
                      {"arn": PROJECT_ARN, "type": "PRIVATE"})
    stub.add_response("list_device_pools", {"devicePools": [{"arn": CURATED_ARN, "name": "Top Devices"}]},
                      {"arn": PROJECT_ARN, "type": "CURATED"})
    stub.add_response("get_device_pool_compatibility",
                      {"compatibleDevices": [{"device": d, "compatible": True} for d in devices]},
                      {"devicePoolArn": POOL_ARN, "testType": "APPIUM_WEB_PYTHON"})


def expect_uploads(stub, files, *, package_polls=("PROCESSING", "SUCCEEDED")):
    from botocore.stub import ANY

    stub.add_response("create_upload", {"upload": {"arn": PKG_ARN, "url": f"{files.url}/put/pkg",
                                                   "status": "INITIALIZED"}},
                      {"projectArn": PROJECT_ARN, "name": ANY, "type": "APPIUM_WEB_PYTHON_TEST_PACKAGE",
                       "contentType": "application/octet-stream"})
    for status in package_polls:
        stub.add_response("get_upload", {"upload": {"arn": PKG_ARN, "status": status}}, {"arn": PKG_ARN})
    stub.add_response("create_upload", {"upload": {"arn": SPEC_ARN, "url": f"{files.url}/put/spec",
                                                   "status": "INITIALIZED"}},
                      {"projectArn": PROJECT_ARN, "name": ANY, "type": "APPIUM_WEB_PYTHON_TEST_SPEC",
                       "contentType": "application/octet-stream"})
    stub.add_response("get_upload", {"upload": {"arn": SPEC_ARN, "status": "SUCCEEDED"}}, {"arn": SPEC_ARN})


def expect_schedule(stub, model_name: str, timeout_min: int):
    stub.add_response("schedule_run", {"run": {"arn": RUN_ARN, "status": "SCHEDULING"}},
                      {"projectArn": PROJECT_ARN, "devicePoolArn": POOL_ARN, "name": f"edgebench {model_name}",
                       "test": {"type": "APPIUM_WEB_PYTHON", "testPackageArn": PKG_ARN, "testSpecArn": SPEC_ARN},
                       "executionConfiguration": {"jobTimeoutMinutes": timeout_min, "videoCapture": False}})


def expect_finish(stub, files, *, result="PASSED", job_message=None, run_message=None):
    stub.add_response("get_run", {"run": {"arn": RUN_ARN, "status": "RUNNING"}}, {"arn": RUN_ARN})
    run = {"arn": RUN_ARN, "status": "COMPLETED", "result": result,
           "deviceMinutes": {"total": 3.5, "metered": 3.5, "unmetered": 0.0}}
    if run_message:
        run["message"] = run_message
    stub.add_response("get_run", {"run": run}, {"arn": RUN_ARN})
    job = {"arn": JOB_ARN, "name": "Google Pixel 8", "status": "COMPLETED", "result": result, "device": DEVICE,
           "deviceMinutes": {"total": 3.5, "metered": 3.5, "unmetered": 0.0}}
    if job_message:
        job["message"] = job_message
    stub.add_response("list_jobs", {"jobs": [job]}, {"arn": RUN_ARN})
    stub.add_response("list_artifacts", {"artifacts": [
        {"arn": JOB_ARN + "/a1", "name": "TestSpec Output", "type": "TESTSPEC_OUTPUT", "extension": "txt",
         "url": f"{files.url}/get/testspec"},
        {"arn": JOB_ARN + "/a2", "name": "Customer Artifacts", "type": "CUSTOMER_ARTIFACT", "extension": "zip",
         "url": f"{files.url}/get/customer"}]}, {"arn": JOB_ARN, "type": "FILE"})


def target(client, binary=STANDIN, **kw) -> DeviceFarmTarget:
    kw = {"poll_interval_s": 0.0, "upload_interval_s": 0.0, **kw}
    return DeviceFarmTarget("devicefarm:bench/pixels", benchmark_binary=str(binary), client_factory=lambda: client,
                            **kw)


def job_for(model: Path) -> Job:
    return Job(model_path=str(model), control=RunControl(min_runs=50, min_time_s=1.0, max_time_s=30.0))


# ------------------------------------------------------------------------------ no boto3 needed
def test_parse_spec_names_and_arns():
    assert parse_spec("devicefarm:bench/Top Devices") == ("bench", "Top Devices")
    assert parse_spec(f"devicefarm:{PROJECT_ARN}/pixels") == (PROJECT_ARN, "pixels")
    assert parse_spec(f"devicefarm:bench/{POOL_ARN}") == ("bench", POOL_ARN)      # a private pool ARN has a '/'
    assert parse_spec(f"devicefarm:{PROJECT_ARN}/{POOL_ARN}") == (PROJECT_ARN, POOL_ARN)
    for bad in ("devicefarm:", "devicefarm:bench", "devicefarm:bench/", "devicefarm:/pool"):
        with pytest.raises(BadInput, match="devicefarm:PROJECT/POOL"):
            parse_spec(bad)


def test_resolve_targets_names_devicefarm_and_keeps_it_to_bench(monkeypatch):
    monkeypatch.delenv("EDGEBENCH_BENCHMARK_MODEL", raising=False)
    with pytest.raises(BadInput, match=r"use host, adb, adb:SERIAL, adb:all or devicefarm:PROJECT/POOL"):
        loop.resolve_targets("tpu0", allow_farm=True)
    with pytest.raises(BadInput, match=r"use host, adb, adb:SERIAL or adb:all$"):     # unchanged where no farm
        loop.resolve_targets("tpu0")
    with pytest.raises(BadInput, match="run in `edgebench bench` only"):
        loop.resolve_targets("devicefarm:bench/pixels", benchmark_binary=str(STANDIN))
    with pytest.raises(BadInput, match="--benchmark-binary PATH"):
        loop.resolve_targets("devicefarm:bench/pixels", allow_farm=True)
    (t,) = loop.resolve_targets("devicefarm:bench/pixels", benchmark_binary=str(STANDIN), allow_farm=True)
    assert t.name == "devicefarm:bench/pixels" and t.binary.path == STANDIN


def test_upload_urls_must_be_https_or_loopback():
    with pytest.raises(InfraError, match="not HTTPS"):
        aws.put_bytes("http://example.com/upload", b"x", "application/octet-stream", "the package")
    with pytest.raises(InfraError, match="not HTTPS"):
        aws.get_bytes("ftp://example.com/a.zip", "an artifact")


def test_the_package_and_spec_carry_the_files_and_quote_the_argv(tmp_path):
    model = tmp_path / "m.tflite"
    model.write_bytes(b"TFL3-not-really-but-bytes")
    argv = ["/data/local/tmp/edgebench-devicefarm/benchmark_model", "--graph=/data/local/tmp/x y;rm.tflite"]
    pay = package.build_payload(model, STANDIN, argv)
    zf = zipfile.ZipFile(io.BytesIO(pay.package))
    assert zf.read("tests/edgebench/model.tflite") == model.read_bytes()
    assert zf.read("tests/edgebench/benchmark_model") == STANDIN.read_bytes()
    sums = dict(line.split("  ")[::-1] for line in zf.read("tests/edgebench/SHA256SUMS").decode().splitlines())
    assert sums["model.tflite"] == hashlib.sha256(model.read_bytes()).hexdigest()
    assert zf.read("requirements.txt") == b"edgebench_devicefarm_payload==1.0\n"
    wheel = zipfile.ZipFile(io.BytesIO(zf.read(f"wheelhouse/{package.WHEEL_FILE}")))
    assert {"edgebench_devicefarm_payload/__init__.py", "edgebench_devicefarm_payload-1.0.dist-info/RECORD"} <= set(
        wheel.namelist())
    spec = yaml.safe_load(pay.spec)
    assert spec["version"] == 0.1 and spec["android_test_host"] == "amazon_linux_2"
    assert spec["artifacts"] == ["$DEVICEFARM_LOG_DIR"]
    (run_cmd,) = spec["phases"]["test"]["commands"]
    assert run_cmd.endswith('> "$DEVICEFARM_LOG_DIR"/benchmark_model.log 2>&1')
    # quoted twice: the host shell gives adb one word, the phone's shell gets each argument whole
    import shlex

    host_words = shlex.split(run_cmd.split(" > ")[0])
    assert host_words[:4] == ["adb", "-s", "$DEVICEFARM_DEVICE_UDID", "shell"] and len(host_words) == 5
    assert shlex.split(host_words[4]) == argv


def test_without_boto3_bench_says_how_to_install_it(farm_model, tmp_path):
    """boto3 missing (an import of it fails) -> exit 2 and the one install line."""
    prelude = ("import sys; sys.modules['boto3'] = None; sys.modules['botocore'] = None; "
               "from edgebench.cli import run; sys.argv = ['edgebench'] + sys.argv[1:]; run()")
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(PYTHONPATH=str(ROOT), EDGEBENCH_HOME=str(tmp_path / "home"), TF_CPP_MIN_LOG_LEVEL="2")
    p = subprocess.run([sys.executable, "-c", prelude, "bench", str(farm_model), "--targets", "devicefarm:bench/pixels",
                        "--benchmark-binary", str(STANDIN), "--no-store"],
                       capture_output=True, text=True, env=env, timeout=300, cwd=tmp_path)
    assert p.returncode == 2, p.stderr
    assert "pip install 'edgebench[devicefarm]'" in p.stderr
    assert "Traceback" not in p.stderr


# ------------------------------------------------------------------------------ boto3 + Stubber
@pytest.mark.extras
def test_happy_path_every_call_in_order(fake_aws, files, farm_model, recwarn):
    client, stub = stubbed()
    files.gets["/get/customer"] = artifact_zip(LOG.read_text())
    expect_resolve(stub)
    expect_uploads(stub, files)
    job = job_for(farm_model)
    # jobTimeoutMinutes: ceil((the job's worker deadline 30*2 + 120 s, + 300 s for pushing) / 60) = 8
    expect_schedule(stub, farm_model.name, 8)
    expect_finish(stub, files)
    (row,) = target(client).bench_rows(job)
    stub.assert_no_pending_responses()
    assert row.status == "ok" and row.target == "devicefarm:bench/pixels@Google Pixel 8"
    assert row.latency.mean == pytest.approx(145.528) and row.latency.p50 == pytest.approx(141.253)
    assert row.latency.p99 is None and row.latency.p99_valid is False          # summary statistics only
    assert row.sample_class == "summary" and row.device_model == "Google Pixel 8"
    df = row.extra["devicefarm"]
    assert df["run_arn"] == RUN_ARN and df["job_arn"] == JOB_ARN and df["job_device_minutes"]["metered"] == 3.5
    assert df["cost"]["max_cost_usd_metered"] == round(1 * 8 * 0.17, 2) and df["cost"]["quotas"]
    notes = [str(w.message) for w in recwarn if "device-minute" in str(w.message)]
    assert notes and "$0.17/device-minute" in notes[0] and "at most 8 min" in notes[0]
    # what went up: the model and the binary, byte for byte, and a spec that runs the argv
    ctype, pkg = files.puts["/put/pkg"]
    assert ctype == "application/octet-stream"
    zf = zipfile.ZipFile(io.BytesIO(pkg))
    assert zf.read("tests/edgebench/model.tflite") == farm_model.read_bytes()
    assert zf.read("tests/edgebench/benchmark_model") == STANDIN.read_bytes()
    spec = yaml.safe_load(files.puts["/put/spec"][1])
    cmd = spec["phases"]["test"]["commands"][0]
    for flag in ("--graph=/data/local/tmp/edgebench-devicefarm/model.tflite", "--num_runs=50", "--min_secs=1",
                 "--max_secs=30", "--use_xnnpack=true"):
        assert flag in cmd


@pytest.mark.extras
def test_project_or_pool_not_found_names_what_exists(fake_aws, files):
    client, stub = stubbed()
    stub.add_response("list_projects", {"projects": [{"arn": PROJECT_ARN, "name": "other"}]}, {})
    with pytest.raises(BadInput, match=r"no Device Farm project 'bench' in us-west-2 \(projects: other\)"):
        target(client).resolve()
    stub.assert_no_pending_responses()
    client, stub = stubbed()
    stub.add_response("list_projects", {"projects": [{"arn": PROJECT_ARN, "name": "bench"}]}, {})
    stub.add_response("list_device_pools", {"devicePools": [{"arn": POOL_ARN, "name": "tablets"}]},
                      {"arn": PROJECT_ARN, "type": "PRIVATE"})
    stub.add_response("list_device_pools", {"devicePools": [{"arn": CURATED_ARN, "name": "Top Devices"}]},
                      {"arn": PROJECT_ARN, "type": "CURATED"})
    with pytest.raises(BadInput, match=r"has no device pool 'pixels' \(pools: Top Devices, tablets\)"):
        target(client).resolve()
    stub.assert_no_pending_responses()


@pytest.mark.extras
def test_upload_failed_is_one_line_with_its_message(fake_aws, files, farm_model):
    from botocore.stub import ANY

    client, stub = stubbed()
    expect_resolve(stub)
    stub.add_response("create_upload", {"upload": {"arn": PKG_ARN, "url": f"{files.url}/put/pkg"}},
                      {"projectArn": PROJECT_ARN, "name": ANY, "type": "APPIUM_WEB_PYTHON_TEST_PACKAGE",
                       "contentType": "application/octet-stream"})
    stub.add_response("get_upload", {"upload": {"arn": PKG_ARN, "status": "FAILED", "message":
                                                "We could not find the dependency wheel files"}}, {"arn": PKG_ARN})
    with pytest.raises(InfraError, match=r"refused the upload edgebench-[0-9a-f]{12}\.zip "
                                         r"\(APPIUM_WEB_PYTHON_TEST_PACKAGE\): We could not find") as exc:
        target(client).bench_rows(job_for(farm_model))
    assert "\n" not in str(exc.value)
    stub.assert_no_pending_responses()


@pytest.mark.extras
def test_run_errored_gives_a_failed_row_with_the_reason(fake_aws, files, farm_model):
    client, stub = stubbed()
    files.gets["/get/customer"] = artifact_zip("ERROR: Could not open '/data/local/tmp/x.tflite'.\n")
    expect_resolve(stub)
    expect_uploads(stub, files, package_polls=("SUCCEEDED",))
    expect_schedule(stub, farm_model.name, 8)
    expect_finish(stub, files, result="ERRORED", job_message="Device setup failed: adb offline",
                  run_message="One or more jobs errored")
    (row,) = target(client).bench_rows(job_for(farm_model))
    stub.assert_no_pending_responses()
    assert row.status == "failed" and row.exit_code == 3 and row.latency is None
    assert "Device Farm job ERRORED: Device setup failed: adb offline" in row.error


@pytest.mark.extras
def test_poll_deadline_stops_the_run(fake_aws, files, farm_model):
    client, stub = stubbed()
    expect_resolve(stub)
    expect_uploads(stub, files, package_polls=("SUCCEEDED",))
    expect_schedule(stub, farm_model.name, 8)
    stub.add_response("get_run", {"run": {"arn": RUN_ARN, "status": "PENDING_DEVICE"}}, {"arn": RUN_ARN})
    stub.add_response("stop_run", {"run": {"arn": RUN_ARN, "status": "STOPPING"}}, {"arn": RUN_ARN})
    with pytest.raises(InfraError, match=r"still PENDING_DEVICE after 0 s; edgebench stopped it \(stop_run"):
        target(client, deadline_s=0.0).bench_rows(job_for(farm_model))
    stub.assert_no_pending_responses()


@pytest.mark.extras
def test_cli_bench_on_devicefarm(fake_aws, files, farm_model, run_cli, monkeypatch, tmp_path):
    """``edgebench bench ... --targets devicefarm:bench/pixels`` through the real CLI, the stubbed
    client handed in through the module's one client factory."""
    client, stub = stubbed()
    monkeypatch.setattr(aws, "client_factory", lambda: client)
    monkeypatch.setenv("EDGEBENCH_HOME", str(tmp_path / "home"))
    files.gets["/get/customer"] = artifact_zip(LOG.read_text())
    expect_resolve(stub)
    expect_uploads(stub, files, package_polls=("SUCCEEDED",))
    expect_schedule(stub, farm_model.name, 8)
    stub.add_response("get_run", {"run": {"arn": RUN_ARN, "status": "COMPLETED", "result": "PASSED"}},
                      {"arn": RUN_ARN})
    stub.add_response("list_jobs", {"jobs": [{"arn": JOB_ARN, "result": "PASSED", "device": DEVICE}]},
                      {"arn": RUN_ARN})
    stub.add_response("list_artifacts", {"artifacts": [{"arn": JOB_ARN + "/a2", "type": "CUSTOMER_ARTIFACT",
                                                        "url": f"{files.url}/get/customer"}]},
                      {"arn": JOB_ARN, "type": "FILE"})
    out_json = tmp_path / "doc.json"
    code, out, err = run_cli("bench", str(farm_model), "--targets", "devicefarm:bench/pixels", "--benchmark-binary",
                             str(STANDIN), "--max-time", "30", "--no-store", "--json", str(out_json))
    assert code == 0, err
    stub.assert_no_pending_responses()
    assert "$0.17/device-minute" in err and SECRET not in out + err and KEY_ID not in out + err
    (row,) = json.loads(out_json.read_text())["rows"]
    assert row["target"] == "devicefarm:bench/pixels@Google Pixel 8" and row["status"] == "ok"
    assert row["latency_ms"]["p50"] == pytest.approx(141.253) and row["latency_ms"]["p99"] is None
    assert row["model_sha256"] == hashlib.sha256(farm_model.read_bytes()).hexdigest()
    assert row["extra"]["devicefarm"]["cost"]["max_cost_usd_metered"] == 1.36       # 1 phone x 8 min x $0.17
    assert row["extra"]["devicefarm"]["run_arn"] == RUN_ARN and row["sample_class"] == "summary"


@pytest.mark.extras
def test_refused_credentials_exit_3_without_key_material(fake_aws, farm_model, run_cli, monkeypatch, tmp_path):
    client, stub = stubbed()
    monkeypatch.setattr(aws, "client_factory", lambda: client)
    monkeypatch.setenv("EDGEBENCH_HOME", str(tmp_path / "home"))
    stub.add_client_error("list_projects", service_error_code="UnrecognizedClientException",
                          service_message="The security token included in the request is invalid.",
                          http_status_code=400, expected_params={})
    code, out, err = run_cli("bench", str(farm_model), "--targets", "devicefarm:bench/pixels", "--benchmark-binary",
                             str(STANDIN), "--no-store")
    assert code == 3, err
    stub.assert_no_pending_responses()
    assert "credentials were refused (UnrecognizedClientException)" in out + err and "AWS_ACCESS_KEY_ID" in out + err
    assert SECRET not in out + err and KEY_ID not in out + err


@pytest.mark.extras
@pytest.mark.parametrize("half", [False, True], ids=["none", "key-id-without-secret"])
def test_no_credentials_exit_3_one_line(farm_model, tmp_path, half):
    """The real default client (no Stubber): boto3 finds no credentials before anything is sent."""
    require_extra("boto3", "devicefarm")
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(PYTHONPATH=str(ROOT), EDGEBENCH_HOME=str(tmp_path / "home"), TF_CPP_MIN_LOG_LEVEL="2",
               AWS_CONFIG_FILE=str(tmp_path / "none"), AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "none"),
               AWS_EC2_METADATA_DISABLED="true", AWS_SESSION_TOKEN=SECRET)
    if half:
        env["AWS_ACCESS_KEY_ID"] = KEY_ID
    p = subprocess.run([sys.executable, "-m", "edgebench", "bench", str(farm_model), "--targets",
                        "devicefarm:bench/pixels", "--benchmark-binary", str(STANDIN), "--no-store"],
                       capture_output=True, text=True, env=env, timeout=300, cwd=tmp_path)
    assert p.returncode == 3, p.stderr
    said = [ln for ln in p.stderr.splitlines() if "credentials" in ln]
    assert len(said) == 1 and "no usable AWS credentials" in said[0] and "aws configure" in said[0], p.stderr
    assert SECRET not in p.stdout + p.stderr and KEY_ID not in p.stdout + p.stderr
    assert "Traceback" not in p.stderr


@pytest.mark.extras
def test_ctrl_c_while_waiting_stops_the_run(fake_aws, files, farm_model):
    """``loop.run_lanes`` calls ``cancel()`` on Ctrl-C; the next poll stops the scheduled run."""
    client, stub = stubbed()
    expect_resolve(stub)
    expect_uploads(stub, files, package_polls=("SUCCEEDED",))
    expect_schedule(stub, farm_model.name, 8)
    stub.add_response("get_run", {"run": {"arn": RUN_ARN, "status": "RUNNING"}}, {"arn": RUN_ARN})
    stub.add_response("get_run", {"run": {"arn": RUN_ARN, "status": "RUNNING"}}, {"arn": RUN_ARN})
    stub.add_response("stop_run", {"run": {"arn": RUN_ARN, "status": "STOPPING"}}, {"arn": RUN_ARN})
    t = target(client)
    t._sleep = lambda _s: t.cancel()      # the interrupt arrives while the lane waits between polls
    with pytest.raises(InfraError, match=r"interrupted; edgebench stopped run .*run-1 \(stop_run"):
        t.bench_rows(job_for(farm_model))
    stub.assert_no_pending_responses()
    with pytest.raises(InfraError, match="not run: interrupted before anything was uploaded"):
        t.bench_rows(job_for(farm_model))     # the lane's next model: nothing more is sent
