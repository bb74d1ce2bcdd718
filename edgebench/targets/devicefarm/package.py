"""What edgebench uploads to Device Farm for one model: a test package that carries the .tflite
and the benchmark_model binary, and a custom-environment test spec whose commands push both to the
phone with ``adb``, run the binary there and keep its log as a customer artifact.

The test type is ``APPIUM_WEB_PYTHON``: a web test needs no app upload (every Android test type
with an app needs an .apk to install), and in a custom environment Device Farm runs only the
spec's shell commands on its test host, where ``adb`` reaches the phone (``$DEVICEFARM_DEVICE_UDID``)
and the unzipped package is ``$DEVICEFARM_TEST_PACKAGE_PATH``. The package has the layout Device
Farm's upload validation asks of Appium Python packages (``requirements.txt``, a ``wheelhouse/``
with at least one wheel, ``tests/``): its one wheel and its one test are edgebench's own and hold
the payload's checksums; the spec checks the same checksums with ``sha256sum -c`` before pushing.
Files written to ``$DEVICEFARM_LOG_DIR`` come back zipped as the job's ``CUSTOMER_ARTIFACT``."""

from __future__ import annotations

import base64
import hashlib
import io
import shlex
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import yaml

from edgebench import __version__
from edgebench.targets.adb.remote import RemoteCommand

TEST_TYPE = "APPIUM_WEB_PYTHON"
PACKAGE_TYPE = "APPIUM_WEB_PYTHON_TEST_PACKAGE"
SPEC_TYPE = "APPIUM_WEB_PYTHON_TEST_SPEC"
CONTENT_TYPE = "application/octet-stream"
TEST_HOST = "amazon_linux_2"        # the current Android test host of custom environments
DEVICE_DIR = "/data/local/tmp/edgebench-devicefarm"   # executable storage on any Android device
PAYLOAD_DIR = "tests/edgebench"     # inside the package
MODEL_NAME = "model.tflite"         # the model's name on the device (the row keeps the user's)
BINARY_NAME = "benchmark_model"
LOG_NAME = "benchmark_model.log"    # in $DEVICEFARM_LOG_DIR, so in the CUSTOMER_ARTIFACT zip
WHEEL_NAME = "edgebench_devicefarm_payload"
WHEEL_FILE = f"{WHEEL_NAME}-1.0-py3-none-any.whl"
# One fixed timestamp for every zip entry: the same inputs give the same bytes (and the same upload).
_ZIP_TIME = (2020, 1, 1, 0, 0, 0)


@dataclass(frozen=True)
class Payload:
    """The two uploads for one model: the package bytes and the spec text."""
    package: bytes
    package_name: str
    spec: str
    spec_name: str
    checksums: dict[str, str]       # file in the payload -> sha256


def _entry(zf: zipfile.ZipFile, name: str, data: bytes, mode: int = 0o644) -> None:
    info = zipfile.ZipInfo(name, date_time=_ZIP_TIME)
    info.compress_type = zipfile.ZIP_DEFLATED
    info.external_attr = (0o100000 | mode) << 16
    zf.writestr(info, data)


def _wheel(checksums: dict[str, str]) -> bytes:
    """A valid pure-Python wheel (PEP 427: METADATA, WHEEL, RECORD) whose module holds the
    payload's checksums: the wheel Device Farm's package validation wants to find."""
    module = ("\"\"\"Checksums of the files edgebench packed for this Device Farm run.\"\"\"\n"
              f"CHECKSUMS = {dict(sorted(checksums.items()))!r}\n").encode()
    dist = f"{WHEEL_NAME}-1.0.dist-info"
    files = {
        f"{WHEEL_NAME}/__init__.py": module,
        f"{dist}/METADATA": (f"Metadata-Version: 2.1\nName: {WHEEL_NAME}\nVersion: 1.0\n"
                             f"Summary: payload checksums packed by edgebench {__version__}\n").encode(),
        f"{dist}/WHEEL": (f"Wheel-Version: 1.0\nGenerator: edgebench {__version__}\nRoot-Is-Purelib: true\n"
                          "Tag: py3-none-any\n").encode(),
    }

    def digest(data: bytes) -> str:
        return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()

    record = "".join(f"{n},{digest(d)},{len(d)}\n" for n, d in files.items()) + f"{dist}/RECORD,,\n"
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, data in {**files, f"{dist}/RECORD": record.encode()}.items():
            _entry(zf, name, data)
    return buf.getvalue()


_CHECK_TEST = '''"""The payload edgebench packed is intact (the same check the test spec runs with sha256sum -c)."""
import hashlib
import pathlib

from {wheel} import CHECKSUMS


def test_payload_checksums():
    here = pathlib.Path(__file__).resolve().parent / "edgebench"
    for name, sha in CHECKSUMS.items():
        assert hashlib.sha256((here / name).read_bytes()).hexdigest() == sha, name
'''


def build_package(model: Path, binary: Path) -> tuple[bytes, dict[str, str]]:
    """The test package zip: the model and the binary under ``tests/edgebench/`` with their
    ``SHA256SUMS``, plus the wheel, requirements and test the Appium Python layout needs."""
    blobs = {MODEL_NAME: model.read_bytes(), BINARY_NAME: binary.read_bytes()}
    checksums = {n: hashlib.sha256(b).hexdigest() for n, b in blobs.items()}
    sums = "".join(f"{sha}  {name}\n" for name, sha in sorted(checksums.items())).encode()
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        _entry(zf, "requirements.txt", f"{WHEEL_NAME}==1.0\n".encode())
        _entry(zf, f"wheelhouse/{WHEEL_FILE}", _wheel(checksums))
        _entry(zf, "tests/test_edgebench_payload.py", _CHECK_TEST.format(wheel=WHEEL_NAME).encode())
        _entry(zf, f"{PAYLOAD_DIR}/{MODEL_NAME}", blobs[MODEL_NAME])
        _entry(zf, f"{PAYLOAD_DIR}/{BINARY_NAME}", blobs[BINARY_NAME], 0o755)
        _entry(zf, f"{PAYLOAD_DIR}/SHA256SUMS", sums)
    return buf.getvalue(), checksums


def build_spec(argv: Sequence[str]) -> str:
    """The custom-environment test spec (YAML). ``argv`` is benchmark_model's argv with device
    paths; it is quoted once for the phone's shell (``RemoteCommand.join``) and that string once
    more for the test host's shell, so no argument is ever split or expanded on the way."""
    adb = 'adb -s "$DEVICEFARM_DEVICE_UDID"'
    payload = f'"$DEVICEFARM_TEST_PACKAGE_PATH"/{PAYLOAD_DIR}'
    dev_bin, dev_model = f"{DEVICE_DIR}/{BINARY_NAME}", f"{DEVICE_DIR}/{MODEL_NAME}"
    q = shlex.quote
    device_cmd = RemoteCommand.join(argv)
    spec = {
        "version": 0.1,
        "android_test_host": TEST_HOST,
        "phases": {
            "pre_test": {"commands": [
                f"cd {payload} && sha256sum -c SHA256SUMS",
                f"{adb} shell {q(RemoteCommand.join(['rm', '-rf', DEVICE_DIR]))}",
                f"{adb} shell {q(RemoteCommand.join(['mkdir', '-p', DEVICE_DIR]))}",
                f"{adb} push {payload}/{BINARY_NAME} {q(dev_bin)}",
                f"{adb} push {payload}/{MODEL_NAME} {q(dev_model)}",
                f"{adb} shell {q(RemoteCommand.join(['chmod', '755', dev_bin]))}",
            ]},
            "test": {"commands": [
                # benchmark_model logs to stderr; the exit status of `adb shell` is the binary's,
                # so a failing run fails the test (and the log still comes back)
                f'{adb} shell {q(device_cmd)} > "$DEVICEFARM_LOG_DIR"/{LOG_NAME} 2>&1',
            ]},
            "post_test": {"commands": [
                f"{adb} shell {q(RemoteCommand.join(['rm', '-rf', DEVICE_DIR]))}",
            ]},
        },
        "artifacts": ["$DEVICEFARM_LOG_DIR"],
    }
    return yaml.safe_dump(spec, sort_keys=False, width=100_000)


def build_payload(model: Path, binary: Path, argv: Sequence[str]) -> Payload:
    package, checksums = build_package(model, binary)
    tag = hashlib.sha256(package).hexdigest()[:12]
    return Payload(package=package, package_name=f"edgebench-{tag}.zip", spec=build_spec(argv),
                   spec_name=f"edgebench-{tag}.yml", checksums=checksums)
