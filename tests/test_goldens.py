"""Byte-exact goldens of the renderers (issue 23 item 5): what the terminal tables, the Markdown
and the HTML reports print today, pinned before their columns move into one metric registry.

Inputs are frozen result documents in tests/goldens/inputs/ (recorded once from real runs by
tests/goldens/inputs/record.py, timings as measured): nothing here measures or converts. Each
golden renders one of them through the renderer function the CLI calls, the way the CLI prints it
(terminal: a rich Console of fixed width, no colour, not a terminal, as ``cli._common.deliver``).

A deliberate change of the output is one command, then review the diff of tests/goldens/:

    EDGEBENCH_UPDATE_GOLDENS=1 python -m pytest tests/test_goldens.py

Older goldens of the same kind live beside their tests and honour the same variable:
tests/test_first_screen.py (convert-and-compare first screen, hand-built document),
tests/test_report_browser.py (HTML of a hand-built compare and diagnose document);
tests/test_report_markdown.py keeps its Markdown golden inline.
"""

from __future__ import annotations

import difflib
import functools
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import pytest
from rich.console import Console

GOLDENS = Path(__file__).parent / "goldens"
INPUTS = GOLDENS / "inputs"
WIDTHS = (80, 100, 120)
UPDATE = os.environ.get("EDGEBENCH_UPDATE_GOLDENS") == "1"


def load(name: str) -> dict[str, Any]:
    return json.loads((INPUTS / f"{name}.json").read_text(encoding="utf-8"))


def draw(parts: Any, width: int) -> str:
    """Renderables -> the text a ``width``-column terminal shows, printed as ``cli._common.deliver``
    prints them (a ``WholeLine`` command unwrapped). No colour and no terminal, so no escape codes.

    Nothing is normalized: every input is a frozen document (its ids, dates, paths and versions are
    the recorded ones), and the renderers read no clock, locale, time zone or environment (nor the
    hash seed: ``test_speedup_table_order_does_not_depend_on_the_hash_seed``)."""
    from edgebench.report.terminal._cells import WholeLine

    con = Console(width=width, file=io.StringIO(), record=True, color_system=None, force_terminal=False,
                  highlight=False, legacy_windows=False)
    for part in (parts if isinstance(parts, (list, tuple)) else [parts]):
        if isinstance(part, WholeLine):
            con.print(part, soft_wrap=True, markup=False, highlight=False)
        else:
            con.print(part)
    return con.export_text()


# --- terminal: each as its command draws it (edgebench/cli/*.py) ----------------------------------

def convert_and_compare(name: str, *, wide: bool = False, verbose: bool = False) -> Callable[[int], Any]:
    def render(width: int):
        from edgebench.report.terminal.compare import render_compare
        from edgebench.report.terminal.diagnose import render_keep_float_table

        doc = load(name)
        return render_keep_float_table(doc.get("keep_float_search"), width) + render_compare(
            doc, width=width, wide=wide, verbose=verbose)
    return render


def bench(name: str) -> Callable[[int], Any]:
    def render(width: int):
        from edgebench.report.terminal.bench import render_bench

        return render_bench(load(name), width=width)
    return render


def results_list(width: int):
    from edgebench.report.terminal.results import render_runs

    stored = load("results-list")
    return render_runs(stored["runs"], stored["where"], width=width)


def results_show(name: str) -> Callable[[int], Any]:
    def render(width: int):
        from edgebench.report.terminal.results import render_show

        return render_show(load(name), width=width)
    return render


def diagnose(width: int):
    from edgebench.report.terminal.diagnose import render_diagnose

    return render_diagnose(load("diagnose"), width=width)


def readiness(width: int):
    from edgebench.report.terminal.readiness import render_readiness

    return render_readiness(load("readiness"), width=width)


def readiness_no_extras(width: int):
    """A real ``readiness --soc all`` run without the NPU extras (recorded here, scrubbed as
    record.py does): every target folded into one line per vendor, no table."""
    from edgebench.report.terminal.readiness import render_readiness

    return render_readiness(load("readiness-no-extras"), width=width)


def readiness_all_targets_doc():
    """``--soc all`` with both NPU extras, as typed rows (the compiles need onnxruntime-qnn and
    openvino; tests/test_readiness_npu.py runs them): every (vendor, SoC) of the recorded run without
    extras, Qualcomm's and Intel's compiled through ``npu_row`` from compile results shaped like the
    recorded real run's (readiness.json): fp16 on five SoCs without FP16, SM8350's CumulativeSum
    compile failure, Intel's NPU compile failing after partitioning; the other vendors not checkable."""
    from edgebench.readiness.aot.compile import CompileResult
    from edgebench.readiness.aot.plugin_log import LeftOp
    from edgebench.readiness.rows import npu_row
    from edgebench.rows import Document, InferenceRow

    base = Document.from_dict(load("readiness-no-extras"))
    qnn = dict(sdk_version="v2.51.0.260929181845", sdk="onnxruntime-qnn 2.7.0", ops_total=21, seconds=0.4)
    no_fp16 = ("SA8255", "SA8295", "SM8450", "SM8475", "SM8550")
    rows: list[InferenceRow] = []
    for precision in ("fp16", "int8"):
        for r in base.rows:
            rd = r.readiness
            kw = dict(model=r.model, precision=precision, variant_path=f"cnn.{precision}.tflite", sha="ab" * 32)
            if rd is not None and rd.vendor == "Qualcomm":
                if rd.soc == "SM8350":
                    res = CompileResult("Qualcomm", rd.soc, "compile-failed", True, ops_on_npu=20, partitions=2,
                                        error="could not create op: q::QNN_CumulativeSum; Op creation failure",
                                        left=(LeftOp(8, "Atan2", "LiteRT Op #8 'Atan2' (code=156) is not "
                                                                 "supported in Qualcomm Compiler."),), **qnn)
                elif precision == "fp16" and rd.soc in no_fp16:
                    res = CompileResult("Qualcomm", rd.soc, "ops-rejected", True, ops_on_npu=20, partitions=2,
                                        compiled_bytes=160_000, compiled_path=f"{rd.soc}.tflite",
                                        left=(LeftOp(10, "Cumsum", "LiteRT Op #10 'Cumsum' (code=128) is not "
                                                     "supported in Qualcomm Compiler.",
                                                     "The SocModel doesn't support FP16"),), **qnn)
                else:
                    res = CompileResult("Qualcomm", rd.soc, "ok", True, ops_on_npu=21, partitions=1,
                                        compiled_bytes=158_000, compiled_path=f"{rd.soc}.tflite", **qnn)
                rows.append(npu_row(res, **kw))
            elif rd is not None and rd.vendor == "IntelOpenVINO":
                res = CompileResult("IntelOpenVINO", rd.soc, "compile-failed", True, ops_total=21, ops_on_npu=19,
                                    partitions=3, left_histogram={"ATAN2": 1, "BUCKETIZE": 1}, seconds=1.2,
                                    sdk="openvino 2026.3.1",
                                    error="OpenVINO could not compile partition 0 for NPU: to_shape was called "
                                          "on a dynamic shape.")
                rows.append(npu_row(res, **kw))
            else:
                rows.append(r.replace(precision=precision))
    return base.with_rows(rows)


def readiness_all_targets(width: int):
    from edgebench.report.terminal.readiness import render_readiness

    return render_readiness(readiness_all_targets_doc(), width=width)


def matrix(width: int):
    from edgebench.report.terminal.matrix import render_matrix

    return render_matrix(load("matrix-report"), width=width)


def results_list_wide(width: int):
    from edgebench.report.terminal.results import render_runs

    stored = load("results-list")
    return render_runs(stored["runs"], stored["where"], width=width, wide=True)


def results_show_wide(width: int):
    from edgebench.report.terminal.results import render_show

    return render_show(load("gate-failed"), width=width, wide=True)


def results_compare_rep() -> dict[str, Any]:
    """`results compare` of two ordinary runs of digits (frozen): B is run A with int8's top-1 down
    8.33 pp, dynamic's PSNR up 10 dB and another LiteRT, so the comparison has something to lead with."""
    import copy

    from edgebench.judge.stats import compare_runs

    a = load("compare")
    b = copy.deepcopy(a)
    b["run_id"] = "b7e1c0de5eed4a11b0b7e1c0de5eed4a"
    b["fingerprint"] = {**b["fingerprint"], "litert": "2.4.0"}
    for r in b["rows"]:
        if r["precision"] == "int8":
            r["accuracy"]["top1"] = 0.9
            r["accuracy"]["top1_drop_pp"] = 8.33
        if r["precision"] == "dynamic":
            for d in r["drift"].values():
                d["psnr_db"] += 10.0
            r["worst"]["psnr_db"] += 10.0
    return compare_runs(a, b)


def results_compare(details: bool = False) -> Callable[[int], Any]:
    def render(width: int):
        from edgebench.report.terminal.results import render_results_compare

        return render_results_compare(results_compare_rep(), width=width, details=details)
    return render


def bench_regimes(width: int):
    """Sustained, paced, cold starts with and without the XNNPACK cache, energy: the regime tables."""
    from edgebench.report.terminal.bench import render_bench

    return render_bench(regimes_doc(), width=width)


def convert_manifest(width: int):
    from edgebench.report.terminal.compare import render_manifest

    return render_manifest(load("manifest"), width=width)


def import_log(width: int):
    """A real benchmark_model log (tests/fixtures/benchmark_model, op profiling on) as imported."""
    from edgebench.report.terminal.import_log import render_import_log
    from edgebench.targets.benchmark_model.log_rows import import_log_file

    log = Path(__file__).parent / "fixtures" / "benchmark_model" / "tflite2.4_xiaomi_mi11_nnapi_gpu_opprofile.txt"
    return render_import_log(import_log_file(log).with_meta(source=log.name), width=width)   # no machine's path


def devices(wide: bool = False) -> Callable[[int], Any]:
    def render(width: int):
        from edgebench.report.terminal.devices import render_devices

        return render_devices(load("devices")["rows"], width=width, wide=wide)
    return render



def train(width: int):
    """A multi-worker training baseline with its pipeline comparison and a skipped cell (hand-built:
    a real one needs two workers)."""
    from edgebench.report.terminal.train import render_train

    ok = {"model": "resnet50", "size": "tiny", "strategy": "multiworker", "workers": 2, "precision": "mixed_bfloat16",
          "xla": True, "batch_size": 256, "global_batch_size": 512, "replicas": 2, "status": "ok",
          "examples_per_s": 12345.6, "step_time_ms": {"p50": 41.47, "p99": 52.31, "samples": 700},
          "input_wait_pct": 13.7, "startup_ms": 4012.0, "peak_device_memory_bytes": 3 * 2**30,
          "allreduce_ms_per_step": 2.25, "final_loss": 2.3026}
    skipped = dict(ok, strategy="mirrored", status="skipped", examples_per_s=None, step_time_ms=None,
                   reason="mirrored needs 2 GPUs; this host has none", input_pipeline="optimized")
    doc = {"kind": "train", "rows": [dict(ok, input_pipeline="optimized"), dict(ok, input_pipeline="naive"), skipped],
           "comparisons": [{"strategy": "multiworker", "precision": "mixed_bfloat16", "xla": "on", "batch_size": 256,
                            "naive_examples_per_s": 6172.8, "optimized_examples_per_s": 12345.6, "speedup": 2.0,
                            "naive_input_wait_pct": 61.2, "optimized_input_wait_pct": 13.7}]}
    return render_train(doc, width=width)


def models_list(width: int):
    """``models list`` of the real catalog (what is cached here set to none: not this machine's)."""
    from edgebench.model.catalog import list_models
    from edgebench.report.terminal.models import render_list

    return render_list([{**r, "cached": {k: False for k in r["cached"]}} for r in list_models()], width=width)


def results_history(width: int):
    """``results history`` of one series with a change point (hand-built values)."""
    from edgebench.report.terminal.results import render_history

    values = (0.0644, 0.0651, 0.0647, 0.0823, 0.0819, 0.0830)
    hist = {"model": "mobilenet_v2_035-tiny", "metric": "p99_ms", "series": {"precision": "int8", "target": "adb:R5CT1234"},
            "points": [{"created": f"2026-12-0{i + 1}T10:00:00", "run_id": f"{i:x}" * 32, "value": v,
                        "step": i == 3} for i, v in enumerate(values)],
            "steps": [{"run_id": "3" * 32, "ratio": 1.27, "before": 0.0647, "after": 0.0823, "p_value": 1.2e-9}],
            "method": "PELT on the log values, min segment 2"}
    return render_history(hist, width=width)


TERMINAL: dict[str, tuple[Callable[[int], Any], tuple[int, ...]]] = {
    "convert-and-compare": (convert_and_compare("compare"), WIDTHS),
    "convert-and-compare-wide": (convert_and_compare("compare", wide=True), (80,)),
    "convert-and-compare-keep-float": (convert_and_compare("keep-float"), WIDTHS),
    "convert-and-compare-keep-float-verbose": (convert_and_compare("keep-float", verbose=True), (100,)),
    "convert-and-compare-gate-failed": (convert_and_compare("gate-failed"), WIDTHS),
    "bench": (bench("bench"), WIDTHS),
    "bench-sustained": (bench("sustained"), WIDTHS),
    "results-list": (results_list, WIDTHS),
    "results-show-compare": (results_show("compare"), WIDTHS),
    "results-show-gate-failed": (results_show("gate-failed"), WIDTHS),
    "results-show-matrix-cell": (results_show("results-show-cell"), WIDTHS),
    "diagnose": (diagnose, WIDTHS),
    "matrix": (matrix, WIDTHS),
    "readiness": (lambda width: readiness(width), WIDTHS),
    # issue 49: readiness over every target, with and without the NPU extras
    "readiness-all-targets": (readiness_all_targets, WIDTHS),
    "readiness-no-extras": (readiness_no_extras, WIDTHS),
    "train": (train, WIDTHS),
    "models-list": (models_list, WIDTHS),
    "results-history": (results_history, WIDTHS),
    # issue 37 item 2: --wide honest, results compare first screen, regimes, devices at every width
    "convert-and-compare-wide-all": (convert_and_compare("compare", wide=True), WIDTHS),
    "results-list-wide": (results_list_wide, WIDTHS),
    "results-show-wide": (results_show_wide, WIDTHS),
    "results-compare": (results_compare(), WIDTHS),
    "results-compare-details": (results_compare(details=True), (80,)),
    "bench-regimes": (bench_regimes, WIDTHS),
    "devices": (devices(), WIDTHS),
    "devices-wide": (devices(wide=True), WIDTHS),
    # issue 37 item 10: the renderers of typed records (rows/records.py) under the same width rules
    "convert-manifest": (convert_manifest, WIDTHS),
    "import-log": (import_log, WIDTHS),
}

# --- nothing cut, identity kept (issue 37 item 2): every word and number a narrow terminal shows is
# one the unconstrained rendering shows whole (a "0.0…" or "Disch"/"argin"/"g" would not be), and
# what each row is can be read at every width -----------------------------------------------------

_BOX = re.compile(r"[\u2500-\u257f]")
# words the fitting itself adds: the hidden-columns line, a table's "(2 of 3)", a shortened warning
_FIT_WORDS = "hidden to fit the terminal: (--wide shows every column) … (--verbose: why)"


def _tokens(text: str) -> set[str]:
    return {t.strip(",;:") for t in _BOX.sub(" ", text).split()} - {""}


def _identities(name: str) -> list[str]:
    """What the rows of golden ``name`` are: the words that must be on screen at every width."""
    from edgebench.report.tables import inference_table
    from edgebench.rows import Document

    def inference(doc_name: str) -> list[str]:
        t = inference_table([Document.from_dict(load(doc_name))])
        keys = [i for i, c in enumerate(t.columns) if c.key in ("precision", "target")]
        return [row[i] for row in t.cells for i in keys]

    if name.startswith("convert-and-compare-gate"):
        return inference("gate-failed")
    if name.startswith("convert-and-compare-keep"):
        return inference("keep-float")
    if name.startswith("convert-and-compare"):
        return inference("compare")
    if name.startswith("results-list"):
        return [r["run_id"][:12] for r in load("results-list")["runs"]]
    if name.startswith("results-show"):
        doc = {"results-show-compare": "compare", "results-show-matrix-cell": "results-show-cell"}.get(name, "gate-failed")
        return [str(r.get(k)) for r in load(doc)["rows"] for k in ("model", "precision", "target")]
    if name.startswith("results-compare"):
        return ["int8", "dynamic", "top-1", "PSNR dB", "worse", "better"]
    if name.startswith("devices"):
        return [r["serial"] for r in load("devices")["rows"]]
    if name == "bench-regimes":
        return ["window", "no cache (p50)", "writes cache", "warm cache (p50)", "paced", "back-to-back"]
    if name.startswith("bench"):
        return ["p50 ms", "p99 ms", "window"] if name == "bench-sustained" else ["p50 ms", "p99 ms"]
    return []


# diagnose's layer table breaks a tensor name after "/" or "_" (its full name follows whole, under
# the table, with the advice): the one table this rule does not hold for yet
_NOT_YET = ("diagnose",)


@pytest.mark.parametrize("name,width", [(n, w) for n, (_, ws) in TERMINAL.items() for w in ws
                                        if n not in _NOT_YET], ids=lambda v: str(v))
def test_nothing_is_cut_and_identity_columns_stay(name, width):
    render, _ = TERMINAL[name]
    narrow = draw(render(width), width)
    whole = _tokens(draw(render(None), 4000)) | _tokens(_FIT_WORDS)
    cut = sorted(t for t in _tokens(narrow) if t not in whole and not re.fullmatch(r"\(?\d+\)?|of", t))
    assert not cut, f"{name} at {width} columns shows cut words or numbers: {cut[:12]}"
    assert not re.search(r"\w…|…\w", narrow), f"{name} at {width} columns: an ellipsis inside a word"
    assert max(len(ln) for ln in narrow.splitlines()) <= width
    shown = _tokens(narrow)
    missing = [w for ident in _identities(name) for w in ident.split() if w.strip(",;:") not in shown]
    assert not missing, f"{name} at {width} columns lost identity words {missing[:12]}"


# --- documents: one per frozen input (the report of `report`, `--markdown`, diagnose `--html`) -----

DOCUMENTS = ("compare", "keep-float", "gate-failed", "bench", "sustained", "diagnose", "readiness")


def check(got: str, path: Path) -> None:
    """``got`` equals the golden byte for byte; with EDGEBENCH_UPDATE_GOLDENS=1 it becomes the golden."""
    if UPDATE:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(got.encode("utf-8"))
        return
    rel = path.relative_to(GOLDENS.parent.parent)
    assert path.is_file(), f"{rel} is missing; create it with EDGEBENCH_UPDATE_GOLDENS=1 (see this module's docstring)"
    want = path.read_bytes().decode("utf-8")
    if got != want:
        diff = "".join(difflib.unified_diff(want.splitlines(keepends=True), got.splitlines(keepends=True),
                                            fromfile=f"{rel} (golden)", tofile=f"{rel} (rendered now)", n=2))
        pytest.fail(f"{rel} differs from today's rendering; if the change is deliberate, regenerate with "
                    f"EDGEBENCH_UPDATE_GOLDENS=1 and review the diff:\n{diff}", pytrace=False)


@functools.lru_cache(maxsize=None)
def drawn_in_child(name: str, hash_seed: str) -> dict[int, str]:
    """``TERMINAL[name]`` at each of its widths, drawn by a fresh Python with PYTHONHASHSEED=hash_seed."""
    code = ("import json, sys, test_goldens as g; render, widths = g.TERMINAL[sys.argv[1]]; "
            "sys.stdout.write(json.dumps({w: g.draw(render(w), w) for w in widths}))")
    here = Path(__file__).resolve().parent
    path = os.pathsep.join([str(here.parent), str(here), os.environ.get("PYTHONPATH", "")])
    res = subprocess.run([sys.executable, "-c", code, name], cwd=here, capture_output=True, timeout=120,
                         env={**os.environ, "PYTHONHASHSEED": hash_seed, "PYTHONPATH": path,
                              "PYTHONIOENCODING": "utf-8"})
    assert res.returncode == 0, res.stderr.decode("utf-8", "replace")[-2000:]
    return {int(w): text for w, text in json.loads(res.stdout.decode("utf-8")).items()}


@pytest.mark.parametrize("name,width", [(n, w) for n, (_, ws) in TERMINAL.items() for w in ws],
                         ids=lambda v: str(v))
def test_terminal_golden(name, width):
    render, _ = TERMINAL[name]
    text = draw(render(width), width)
    check(text, GOLDENS / "terminal" / f"{name}-{width}.txt")


def test_speedup_table_order_does_not_depend_on_the_hash_seed():
    """Op types with equal times (Reshape and Convert, 0.0000 ms) sort by name, not by a set's order."""
    assert drawn_in_child("bench", "0") == drawn_in_child("bench", "4")


@pytest.mark.parametrize("name", DOCUMENTS)
def test_markdown_golden(name):
    from edgebench.report.markdown import render_markdown

    check(render_markdown(load(name)), GOLDENS / "markdown" / f"{name}.md")


@pytest.mark.parametrize("name", DOCUMENTS)
def test_html_golden(name):
    from edgebench.report.html import render_html

    check(render_html(load(name)), GOLDENS / "html" / f"{name}.html")


def test_html_report_of_several_runs_golden():
    """`edgebench report --html RUN RUN ...`: related runs side by side on one page."""
    from edgebench.report.html import render_html

    check(render_html([load(n) for n in ("compare", "bench", "sustained")]), GOLDENS / "html" / "report.html")


# --- Prometheus: the exposition (textfile and push form) of every frozen input, the report tests'
# fixtures, a typed document with every regime, and foreign/malformed input -----------------------

PROMETHEUS_INPUTS = ("compare", "keep-float", "gate-failed", "bench", "sustained", "diagnose", "results-show-cell")


def _lat(ms: float, n: int, step: float = 0.01) -> Any:
    from edgebench.rows import Latency

    return Latency.from_samples([int((ms + step * (i % 7)) * 1e6) for i in range(n)])


def regimes_doc() -> Any:
    """A typed bench document with every regime (sustained, paced, cold starts with and without the
    XNNPACK cache, valid and unmeasurable energy) and a concurrency sweep under each alias key."""
    from edgebench.rows import ColdStart, Document, Energy, InferenceRow, Paced, Sustained, Window

    lat = _lat(2.0, 50)
    wins = (Window(index=0, t_start_s=0.0, t_end_s=1.0, samples=40, latency=_lat(1.0, 40),
                   thermal={"hottest_c": 41.5, "cpu_cur_khz": [1800000, None], "cpu_cap_khz": [2000000, 0],
                            "thermal_status": 0}),
            Window(index=1, t_start_s=1.0, t_end_s=2.0, samples=40, latency=_lat(1.3, 40),
                   thermal={"hottest_c": 47.0, "cpu_cur_khz": [1500000], "cpu_cap_khz": [1500000],
                            "thermal_status": 2}),
            Window(index=2, t_start_s=2.0, t_end_s=3.0, samples=0, latency=None, thermal=None,
                   thermal_reason="no thermal reading fell in or before this window"))
    phases = {k: _lat(v, 3, 0.5) for k, v in (("process_start_ms", 30.0), ("init_ms", 12.0),
                                                ("first_inference_ms", 4.0), ("other_ms", 1.0), ("total_ms", 47.0))}
    warm = {k: v.to_dict() for k, v in {**phases, "init_ms": _lat(3.0, 3, 0.5)}.items()}
    full = InferenceRow(
        target="adb:S1", model="m<x>", precision="int8", device_model="Pixel 7", model_sha256="ab" * 32,
        threads=2, delegate="xnnpack", latency=lat, timeline=wins,
        sustained=Sustained(duration_s=3.0, report_every_s=1.0, steady_state_ratio=1.3, time_to_throttle_s=2.0,
                            throttle_reason="a CPU frequency cap fell below its value in the first window"),
        period_ms=5.0,
        paced=Paced(period_ms=5.0, achieved_period_ms=5.1, late_starts=2, p50_ratio=1.4, back_to_back_ms=_lat(1.4, 50),
                    details={"capacity_qps": 480.5, "start_lag_ms": {"p50": 0.02, "p99": 0.4, "max": 0.9}}),
        cold_start=ColdStart(count=3, xnnpack_cache=True, **phases,
                             details={"runtime": "ai_edge_litert 2.3.0", "cache_bytes": 123456,
                                      "cache_build": {k: 10.0 + i for i, k in enumerate(phases)}, "warm_cache": warm,
                                      "warm_vs_no_cache_init_ratio": 0.25, "note": "fresh processes"}),
        energy=Energy(source="rapl", valid=True, mj_per_inference=2.5, inferences_per_j=400.0, joules=1.0,
                      details={"run_power_w": 12.5, "idle_power_w": 8.0, "run_s": 10.0,
                               "samples": {"run": 40, "idle": 20}}),
        concurrency=({"level": 1, "qps": 500.0, "latency_ms": {"p99": 2.5}},
                     {"concurrency": 2, "latency_ms": {"qps": 900.0, "p99": 3.0}},
                     {"streams": 3, "qps": 1200, "p99_ms": 4.0},
                     {"threads": 4, "qps": None, "latency_ms": {"qps": 1.0}},
                     {"qps": 7.0}))
    plain = InferenceRow(target="host", model="m<x>", precision="fp32", latency=_lat(3.0, 700),
                         energy_reason="no RAPL package zones: not an Intel/AMD host",
                         cold_start=ColdStart(count=2, xnnpack_cache=False, init_ms=_lat(9.0, 2),
                                              total_ms=_lat(20.0, 2), details={"runtime": "tflite_runtime"}),
                         energy=Energy(source="battery", valid=False, mj_per_inference=None,
                                       invalid_reasons=("the battery was <charging>",)))
    return Document(kind="bench", rows=(full, plain), fingerprint={"hostname": "h", "device_model": "Pixel 7"},
                    created="2026-12-03T08:00:00+00:00", edgebench_version="0.3.0", meta={"run_id": "r-regimes"})


def foreign_docs() -> list[dict[str, Any]]:
    """Documents edgebench did not write: tests/test_prometheus.py's malformed one, a kind-less one
    (rows told apart by their fields), a compare whose reference names no precision."""
    import copy

    from test_prometheus import MALFORMED

    malformed = copy.deepcopy(MALFORMED)
    kindless = {
        "created": "2026-12-01T00:00:00Z", "model": "doc-model", "run_id": "r-foreign",
        "rows": [{"model": "t", "examples_per_s": 10.0, "batch_size": 8, "xla": 1, "status": "ok",
                  "step_time_ms": {"mean": 100.0, "p50": 99.0, "steps": 20}},
                 {"model": "t", "examples_per_s": 11.0, "batch_size": 16, "step_time_ms": 90.0, "status": "skipped"},
                 {"precision": "int8", "target": "host", "status": "ok", "fingerprint": {"device_model": "row-fp"},
                  "latency_ms": {"p50": "1.5", "p99": "inf", "mean": 1.6, "samples": 100, "p99_valid": False},
                  "accuracy": {"top1": 0.5, "top5": 0.9, "top1_agreement": 0.8}}],
    }
    ref_unnamed = {
        "kind": "compare", "created": "2026-12-01T00:00:00+00:00", "edgebench_version": "0.1.0",
        "fingerprint": {"device_model": "doc-fp", "hostname": "h"}, "run_id": "r-ref",
        "reference": {"model": "m", "target": "tf", "status": "ok", "latency_ms": {"p50": 9.0, "mean": 9.5,
                                                                                   "samples": 10, "p99_valid": False}},
        "rows": [{"model": "m", "precision": "int8", "target": "host", "status": "ok",
                  "drift": {"y": {"psnr_db": 30.0, "cosine": 0.99, "nan": 0, "inf": 0}}}],
    }
    return [malformed, kindless, ref_unnamed]


def prometheus_cases() -> dict[str, Callable[[], str]]:
    def render_prometheus(*args: Any, **kw: Any) -> str:
        from edgebench.report.prometheus import render_prometheus

        return render_prometheus(*args, **kw)

    def fixtures() -> str:
        from conftest_report import make_bench_doc, make_compare_doc, make_train_doc   # imported when run, not collected

        evil = make_compare_doc(model='<script>alert("x")</script> m\\o|d\nel ünï/códe', run_id="run/with/slashes")
        evil["rows"][0]["drift"]['out"put\\1'] = json.loads(json.dumps(evil["rows"][0]["drift"]["logits"]))
        evil["rows"][1]["device_model"] = 'Pixel "7" Pro\\a/b'
        return render_prometheus([make_compare_doc(), make_bench_doc(), make_train_doc(), evil])

    cases: dict[str, Callable[[], str]] = {name: functools.partial(lambda n: render_prometheus(load(n)), name)
                                           for name in PROMETHEUS_INPUTS}
    cases["fixtures"] = fixtures
    cases["push-compare"] = lambda: render_prometheus(load("compare"), run_id_label=False)
    cases["several-runs"] = lambda: render_prometheus([load(n) for n in ("compare", "bench", "sustained")])
    cases["regimes"] = lambda: render_prometheus(regimes_doc())
    for i, name in enumerate(("malformed", "kindless", "reference-unnamed")):
        cases[name] = functools.partial(lambda k: render_prometheus(foreign_docs()[k]), i)
    return cases


PROMETHEUS = tuple(prometheus_cases())


@pytest.mark.parametrize("name", PROMETHEUS)
def test_prometheus_golden(name):
    """The exposition (``export prometheus``, the Pushgateway body), pinned before the renderer moved
    from raw JSON dicts to typed rows (issue 23)."""
    check(prometheus_cases()[name](), GOLDENS / "prometheus" / f"{name}.prom")


def test_every_golden_file_is_checked():
    """A golden whose case was renamed or removed is stale: delete it (none is left behind)."""
    expected = {f"terminal/{n}-{w}.txt" for n, (_, ws) in TERMINAL.items() for w in ws}
    expected |= {f"markdown/{n}.md" for n in DOCUMENTS} | {f"html/{n}.html" for n in DOCUMENTS}
    expected |= {"html/report.html"} | {f"prometheus/{n}.prom" for n in PROMETHEUS}
    present = {p.relative_to(GOLDENS).as_posix() for p in GOLDENS.rglob("*") if p.is_file()
               and p.parent != INPUTS}
    assert present == expected, {"stale (delete)": sorted(present - expected), "missing": sorted(expected - present)}


@pytest.mark.parametrize("name,width", [(n, w) for n, (_, ws) in TERMINAL.items() for w in ws
                                        if n.startswith("convert-and-compare")], ids=lambda v: str(v))
def test_the_reference_rows_target_is_one_line(name, width):
    """Issue 49: ``tf (/CPU:0)`` was drawn as "tf" over "(/CPU:0)" at 80, 100 and 120 columns."""
    render, _ = TERMINAL[name]
    text = draw(render(width), width)
    ref = [ln for ln in text.splitlines() if ln.startswith("│ tf (ref)")]
    assert ref and all("tf (/CPU:0)" in ln for ln in ref), text
