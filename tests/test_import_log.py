"""``edgebench import-log``: every real fixture to the right numbers, JSON envelope, bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from edgebench import SCHEMA_VERSION
from edgebench.cli import main

FIX = Path(__file__).parent / "fixtures" / "benchmark_model"

# (file, mean ms, std ms, samples, p50 ms or None, init ms, delegate, status)
CASES = [
    ("tflite1.12_ti_am57xx_linux.txt", 137.722, 0.896, 50, None, 4.452, None, "ok"),
    ("tflite2019_zedboard_armv7.txt", 747.733, 0.293, 50, None, 21.039, None, "ok"),
    ("tflite2.4_xiaomi_mi11_cpu_fp32.txt", 249.684, 1.442, 50, None, 16.242, None, "ok"),
    ("tflite2.4_xiaomi_mi11_nnapi_gpu_opprofile.txt", 158.715, 2.931, 50, None, None, "nnapi", "ok"),
    ("tflite2.8_riscv64_qemu_opprofile.txt", 2950.34, 109.798, 50, None, 17.187, None, "ok"),
    ("chromeos_tast_cpu_xnnpack.txt", 56.2658, 0.982, 1061, None, 3.337, "xnnpack", "ok"),
    ("chromeos_tast_gpu_opencl.txt", 35.1349, 1.733, 1694, None, 842.225, "gpu", "ok"),
    ("android_apk_logcat_cph2641_p5_median_p95.txt", 145.528, 13.583, 25, 141.253, 92.318, "xnnpack", "ok"),
]


def _run(argv, capsys):
    with pytest.raises(SystemExit) as e:
        main(argv)
        raise SystemExit(0)
    out = capsys.readouterr()
    return e.value.code, out.out, out.err


@pytest.mark.parametrize("name,mean,std,samples,p50,init,delegate,status", CASES)
def test_import_log_json_numbers(name, mean, std, samples, p50, init, delegate, status, capsys):
    code, out, _ = _run(["import-log", str(FIX / name), "--json", "-"], capsys)
    assert code == 0
    doc = json.loads(out)
    assert doc["schema_version"] == SCHEMA_VERSION and doc["kind"] == "import-log"
    assert doc["source"] == str(FIX / name) and doc["fingerprint"]["source"] == "imported benchmark_model log"
    (row,) = doc["rows"]
    lat = row["latency_ms"]
    assert row["status"] == status and row["delegate"] == delegate
    assert lat["mean"] == pytest.approx(mean) and lat["std"] == pytest.approx(std)
    assert lat["samples"] == samples
    assert lat["p50"] == (pytest.approx(p50) if p50 is not None else None)
    assert lat["p99"] is None and lat["p99_valid"] is False
    assert "benchmark_model prints no per-inference samples" in lat["p99_note"]
    assert row["init_ms"] == (pytest.approx(init) if init is not None else None)


def test_import_log_failed_run_is_a_failed_row(capsys, tmp_path):
    out_file = tmp_path / "r.json"
    code, _, _ = _run(["import-log", str(FIX / "tflite2.4_xiaomi_mi11_nnapi_failed.txt"), "--json", str(out_file)],
                      capsys)
    assert code == 0
    (row,) = json.loads(out_file.read_text())["rows"]
    assert row["status"] == "failed" and "ANEURALNETWORKS_OP_FAILED" in row["error"]
    assert row["latency_ms"] is None and row["delegate_fallback"] == ["NNAPI"]


def test_import_log_table(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "250")        # the table's width, whatever an earlier test left
    code, out, _ = _run(["import-log", str(FIX / "tflite2.8_riscv64_qemu_opprofile.txt"), "--top-ops", "2"], capsys)
    assert code == 0
    assert "2950" in out and "top 2 operators" in out and "CONV_2D" in out
    assert "prints no per-inference" in out


@pytest.mark.parametrize("content,needle", [
    (b"", "is empty"),
    (b"   \n\n", "is empty"),
    (b"\x00\x01\x02ELF", "binary file"),
    (b"Hello, this is some other program's output\nall good\n", "no benchmark_model output"),
])
def test_import_log_bad_files_exit_2(tmp_path, capsys, content, needle):
    f = tmp_path / "log.txt"
    f.write_bytes(content)
    code, _, err = _run(["import-log", str(f)], capsys)
    assert code == 2
    assert needle in err and str(f) in err
    assert len(err.strip().splitlines()) <= 3  # one message (rich may wrap it)


def test_import_log_missing_file_exit_2(tmp_path, capsys):
    code, _, err = _run(["import-log", str(tmp_path / "nope.txt")], capsys)
    assert code == 2 and "no such file" in err


def test_import_log_console_script_end_to_end(tmp_path):
    exe = Path(sys.executable).with_name("edgebench")
    p = subprocess.run([str(exe), "import-log", str(FIX / "android_apk_logcat_cph2641_p5_median_p95.txt"),
                        "--json", "-"], capture_output=True, text=True, timeout=120, check=False)
    assert p.returncode == 0, p.stderr
    row = json.loads(p.stdout)["rows"][0]
    assert row["latency_ms"]["p95"] == pytest.approx(187.533) and row["memory_mb"]["overall"] == 73.4102
    bad = tmp_path / "x.txt"
    bad.write_text("nothing here")
    p = subprocess.run([str(exe), "import-log", str(bad)], capture_output=True, text=True, timeout=120, check=False)
    assert p.returncode == 2 and "no benchmark_model output" in p.stderr
