"""Markdown report for PR comments (edgebench.report.markdown): golden output and escaping."""

from __future__ import annotations

import pytest

pytest.register_assert_rewrite("conftest_report")
from conftest_report import evil_doc  # noqa: E402,F401 -- fixture

from edgebench.report.markdown import md_escape, render_markdown

FP = {"tensorflow": "2.21.0", "litert": "2.3.0", "cpu_model": "AMD EPYC 7B13", "cpu_count": 2}

GOLDEN_DOCS = [
    {
        "schema_version": 1, "kind": "compare", "created": "2026-12-02T10:00:00+00:00", "edgebench_version": "0.1.0",
        "run_id": "4be1c0de9a8f4f3e8d2b7c6a5e4f3d2c", "fingerprint": FP,
        "reference": {"model": "mobilenet_v2_035", "precision": "fp32", "target": "tf", "status": "ok",
                      "size_bytes": 7340120,
                      "latency_ms": {"mean": 9.91, "p50": 9.80, "p99": 12.64, "samples": 700, "p99_valid": True,
                                     "qps": 100.9},
                      "accuracy": {"top1": 0.7125}},
        "rows": [
            {"model": "mobilenet_v2_035", "precision": "fp16", "target": "host", "status": "ok",
             "size_bytes": 3489792, "size_reduction_pct": 52.46,
             "latency_ms": {"mean": 4.35, "p50": 4.31, "p99": 5.71, "samples": 700, "p99_valid": True, "qps": 229.9},
             "accuracy": {"top1": 0.7125, "top1_drop_pp": 0.0, "top1_agreement": 0.998, "top5_agreement": 1.0},
             "drift": {"logits": {"max_abs": 0.0019, "mean_abs": 0.00022, "rmse": 0.0003, "rel_l2": 0.00081,
                                  "cosine": 0.99999, "psnr_db": 70.4, "nan": 0, "inf": 0}}},
            {"model": "mobilenet_v2_035", "precision": "int8", "target": "adb:R58N", "device_model": "Galaxy A52",
             "status": "ok", "size_bytes": 1861632, "size_reduction_pct": 74.64,
             "latency_ms": {"mean": 11.2, "p50": 11.02, "p99": 14.93, "samples": 300, "p99_valid": False, "qps": 89.3},
             "accuracy": {"top1": 0.6975, "top1_drop_pp": 1.5, "top1_agreement": 0.953},
             "drift": {"logits": {"max_abs": 0.081, "mean_abs": 0.0063, "rmse": 0.0099, "rel_l2": 0.031,
                                  "cosine": 0.9995, "psnr_db": 40.1, "nan": 0, "inf": 0},
                       "features": {"psnr_db": "inf", "cosine": 1.0}}},
            {"model": "mobilenet_v2_035", "precision": "int8", "target": "host", "status": "ok",
             "size_bytes": 1861632, "size_reduction_pct": 74.64,
             "latency_ms": {"mean": 0.0207, "p50": 0.01976, "p99": 0.02668, "samples": 5000, "p99_valid": True,
                            "qps": 48309.2}},
            {"model": "mobilenet_v2_035", "precision": "dynamic", "target": "adb:R58N", "device_model": "Galaxy A52",
             "status": "failed", "error": "device lost | adb: no devices"},
        ],
    },
    {
        "schema_version": 1, "kind": "train", "created": "2026-12-02T11:00:00+00:00", "run_id": "77aa",
        "fingerprint": {"gpu": "NVIDIA H200"},
        "rows": [
            {"model": "resnet_tiny", "precision": "mixed_float16", "xla": True, "strategy": "mirrored",
             "input_pipeline": "optimized", "target": "train:mirrored", "batch_size": 256, "status": "ok", "examples_per_s": 18342.5,
             "step_time_ms": {"p50": 13.9, "p99": 15.2}},
            {"model": "resnet_tiny", "precision": "fp32", "xla": False, "strategy": "none", "input_pipeline": "naive",
             "batch_size": 512, "status": "failed", "error": "OOM"},
        ],
    },
]

GOLDEN = """\
### edgebench compare: mobilenet_v2_035

run 4be1c0de9a8f4f3e8d2b7c6a5e4f3d2c · 2026-12-02T10:00:00+00:00 · TF 2.21.0 · LiteRT 2.3.0 · AMD EPYC 7B13 ×2 · edgebench 0.1.0

**❌ a row FAILED**

| model | precision | target | device | size | size red. | p50 ms | p99 ms | QPS | top-1 | Δtop-1 pp | agree | PSNR dB | status |
|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|
| mobilenet_v2_035 | fp32 (ref) | tf | - | 7.00 MiB | - | 9.80 | 12.6 | 101 | 71.25% | - | - | - | ok |
| mobilenet_v2_035 | fp16 | host | - | 3.33 MiB | 52.5% | 4.31 | 5.71 | 230 | 71.25% | +0.00 | 99.80% | 70.4 | ok |
| mobilenet_v2_035 | int8 | adb:R58N | Galaxy A52 | 1.78 MiB | 74.6% | 11.0 | 14.9† | 89.3 | 69.75% | -1.50 | 95.30% | 40.1 | ok |
| mobilenet_v2_035 | int8 | host | - | 1.78 MiB | 74.6% | 0.0198 | 0.0267 | 48309 | - | - | - | - | ok |
| mobilenet_v2_035 | dynamic | adb:R58N | Galaxy A52 | - | - | - | - | - | - | - | - | - | **FAILED: device lost \\| adb: no devices** |

<details><summary>per-output drift vs reference</summary>

| model | precision | target | output | max abs | mean abs | RMSE | rel L2 | cosine | PSNR dB | NaN | Inf |
|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|
| mobilenet_v2_035 | fp16 | host | logits | 0.0019 | 0.00022 | 0.0003 | 0.00081 | 0.999990 | 70.4 | 0 | 0 |
| mobilenet_v2_035 | int8 | adb:R58N | logits | 0.081 | 0.0063 | 0.0099 | 0.031 | 0.999500 | 40.1 | 0 | 0 |
| mobilenet_v2_035 | int8 | adb:R58N | features | - | - | - | - | 1.000000 | ∞ | - | - |

</details>

† p99 from fewer than 662 samples: not valid (raise --runs or --min-time); Δtop-1 pp = top-1 minus the reference's (negative: accuracy lost); agree = top-1 agreement with TF (box agreement for detection); PSNR dB = the worst output's PSNR against the reference (n/a: NaN/Inf outputs)

### edgebench train: resnet_tiny

run 77aa · 2026-12-02T11:00:00+00:00 · NVIDIA H200

**❌ a row FAILED**

| model | precision | xla | strategy | pipeline | target | status | batch | examples/s | step p50 ms | step p99 ms |
|---|---|---|---|---|---|---|---:|---:|---:|---:|
| resnet_tiny | mixed_float16 | true | mirrored | optimized | train:mirrored | ok | 256 | 18,342.5 | 13.90 | 15.20 |
| resnet_tiny | fp32 | false | none | naive | - | **FAILED: OOM** | 512 | - | - | - |
"""


def test_markdown_golden():
    assert render_markdown(GOLDEN_DOCS) == GOLDEN


def test_markdown_escapes_cells():
    assert md_escape("a|b") == "a\\|b"
    assert md_escape("<script>x</script>") == "&lt;script&gt;x&lt;/script&gt;"
    assert md_escape("two\nlines") == "two lines"
    assert md_escape("`code`") == "\\`code\\`"
    assert md_escape(None) == "-" and md_escape("") == "-"


def test_markdown_hostile_model_name_keeps_table_shape(evil_doc):
    text = render_markdown(evil_doc)
    assert "<script" not in text and "&lt;script&gt;" in text
    header = next(ln for ln in text.splitlines() if ln.startswith("| model"))
    ncols = header.count(" | ") + 1
    for ln in text.splitlines():
        if ln.startswith("| ") and "<details>" not in ln:
            # unescaped pipes only at cell borders: count them after removing escaped ones
            cells = ln.replace("\\|", "").strip("|").split("|")
            assert len(cells) in (ncols, 12), ln  # main table or the 12-column drift table


@pytest.mark.parametrize("doc", [{}, {"kind": "compare", "rows": []}, {"kind": "compare", "rows": [{}, "x"]}])
def test_markdown_robust_to_missing_keys(doc):
    text = render_markdown(doc)
    assert text.startswith("### edgebench") and text.endswith("\n")


def test_top1_change_reads_right_in_the_terminal_table():
    # Issue 18.7: a 63-point accuracy drop printed as "+63.33".
    from edgebench.report.terminal.compare import compare_table
    from edgebench.rows import Document, InferenceRow

    rows = [InferenceRow.from_dict({"precision": p, "target": "host", "status": "ok",
                                    "accuracy": {"top1": t, "top1_drop_pp": d}})
            for p, t, d in (("int8", 0.3, 63.33), ("fp16", 0.94, -0.5), ("fp32", 0.935, 0.0))]
    table = compare_table(Document.new("compare", rows, {}))
    col = [c.label for c in table.columns].index("Δtop-1 pp")
    assert [cells[col] for cells in table.cells] == ["-63.33", "+0.50", "+0.00"]


HOSTILE = ["[click](https://evil.example/x)", "![img](https://evil.example/p.png)", "**bold** _it_ ~~s~~",
           "@octocat please look", "closes #12", "www.evil.example", "$x^2$ <img src=x onerror=1>",
           "a\u202etxt.exe", "`tick` | pipe"]


@pytest.mark.parametrize("name", HOSTILE)
def test_markdown_injection_is_inert(name):
    # Audit S3: device/model names and error text reach PR comments and step summaries.
    from markdown_it import MarkdownIt

    doc = {"kind": "compare", "run_id": "r1", "fingerprint": {"cpu_model": name},
           "rows": [{"model": name, "precision": "int8", "target": "adb:" + name, "device_model": name,
                     "status": "failed", "error": name}]}
    text = render_markdown(doc)
    html = MarkdownIt("commonmark").enable("table").render(text)
    for bad in ("<a ", "<img", "<em>", "<s>", "<del>", "\u202e"):
        assert bad not in html, (bad, text)
    assert html.count("<strong>") == 2      # only edgebench's own: the run verdict line and the row status
    if any(t in name for t in ("@", "#1", "www.", "://")):   # GitHub would link/notify: code span
        assert "<code>" in html
    rows = [ln for ln in text.splitlines() if ln.startswith("| ")]
    assert len({ln.replace("\\|", "").count("|") for ln in rows}) == 1   # the table keeps its shape
