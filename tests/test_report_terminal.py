"""Terminal tables at 80 columns (issue 18.12): a number or an id is never split across lines;
columns are dropped (and named) or tables split instead, and --wide keeps everything."""

from __future__ import annotations

import numpy as np
from rich.console import Console

from edgebench.rows import Cost, Document, InferenceRow, Latency, Warmup


def render(parts, width: int = 80) -> str:
    con = Console(record=True, width=width, force_terminal=False)
    for p in parts if isinstance(parts, list) else [parts]:
        con.print(p)
    return con.export_text()


def assert_intact(text: str, tokens, width: int = 80) -> None:
    lines = text.splitlines()
    assert max(len(ln) for ln in lines) <= width, max(lines, key=len)
    broken = [t for t in tokens if t and t not in text]
    assert not broken, f"split or missing: {broken}"


def _bench_doc() -> Document:
    rng = np.random.default_rng(0)
    rows = []
    for i, name in enumerate(("mobilenet_v2_035_fp32", "mobilenet_v2_035_int8", "resnet50_tiny_dynamic")):
        ns = (rng.lognormal(0, 0.2, 700) * (64_400 + 10_000 * i)).astype(np.int64)
        rows.append(InferenceRow(
            target="host", model=name, latency=Latency.from_samples(ns), samples_ns=tuple(int(x) for x in ns),
            warmup=Warmup.from_samples(ns[:10]), init_ms=12.3456, first_inference_ms=0.98765,
            peak_rss_bytes=123_456_789, threads_effective=2, threads=2, delegate="xnnpack",
            runtime="ai_edge_litert 2.3.0", size_bytes=1_861_632 + i, model_sha256=f"{i}" * 64,
            cost=Cost(flops=12_345_678, quantized=bool(i), quantization_coverage=0.97,
                      achieved_gflops_per_s=191.7, pct_of_peak=23.8)))
    rows.append(InferenceRow(target="host", model="broken_model", status="failed",
                             error="worker crashed with SIGSEGV while running broken_model.tflite"))
    return Document.new("bench", rows, {})


def test_bench_table_at_80_columns_splits_into_tables_never_numbers():
    from edgebench.report.terminal.bench import SPEC, render_bench

    doc = _bench_doc()
    text = render(render_bench(doc, width=80))
    tokens = [fn(r) for r in doc.rows for _, fn in SPEC] + [r.model for r in doc.rows]
    assert_intact(text, tokens)
    assert "edgebench bench (1 of " in text and "worker crashed with SIGSEGV" in text
    wide = render(render_bench(doc, width=None), width=400)
    assert "(1 of" not in wide
    assert_intact(wide, tokens, width=400)


def _runs():
    return [{"run_id": f"{i:02d}" * 16, "created": f"2026-12-0{i + 1}T10:00:00+00:00", "kind": "compare",
             "status": "ok" if i else "failed", "models": "mobilenet_v2_035-tiny, resnet50-tiny", "n_rows": 8 + i,
             "matrix_hash": "0123456789abcdef", "cell_key": "model=mobilenetv2,precisions=fp32,int8,target=host,"
             "threads=4,delegate=xnnpack"} for i in range(3)]


def test_results_list_and_show_at_80_columns():
    from edgebench.report.terminal.results import render_runs, render_show

    runs = _runs()
    text = render(render_runs(runs, "/tmp/r.db", width=80))
    assert_intact(text, [r["run_id"][:12] for r in runs] + [r["created"][:19].replace("T", " ") for r in runs])
    assert "hidden to fit the terminal: matrix" in text and "--wide" in text
    assert "0123456789ab" in render(render_runs(runs, "/tmp/r.db", wide=True), width=250)

    doc = _bench_doc().to_dict()
    doc["run_id"] = "ab" * 16
    text = render(render_show(doc, width=80))
    lat = [r["latency_ms"] for r in doc["rows"] if r["latency_ms"]]
    assert_intact(text, [format(v, ".3g") for lm in lat for v in (lm["p50"], lm["p99"])]
                  + [r["model"] for r in doc["rows"]])


def test_results_compare_and_history_keep_numbers_whole():
    from edgebench.report.terminal.results import render_history, render_results_compare
    from edgebench.judge.stats import Change

    rep = {"a": "a" * 32, "b": "b" * 32, "fingerprint_diff": [], "unmatched_a": [], "unmatched_b": [],
           "regressions": 1, "rule": {"min_ratio": 1.1, "alpha": 0.002, "test": "Mann-Whitney U, two-sided"},
           "pairs": [{"key": ["mobilenet_v2_035-tiny", "int8", "adb:127.0.0.1:45193"], "n_samples": [700, 700],
                      "fingerprint_diff": [],
                      "changes": [Change("p99 ms", 0.064412, 0.0823451, 1.2784, 1.234e-9, "worse", False,
                                         "a long note about the tail and the rank test pointing the same way"),
                                  Change("size", 1861632, 1861632, 1.0, None, "same", False, "")]}]}
    text = render(render_results_compare(rep, width=80, details=True))
    assert_intact(text, ["0.06441", "0.08235", "1.278x", "1.2e-09", "1861632"])
    hist = {"model": "digits-tiny", "metric": "p99", "precision": "int8", "target": "host", "batch_size": None,
            "points": [{"created": "2026-12-01T10:00:00", "run_id": "c" * 32, "value": 0.0644123, "step": False}],
            "steps": []}
    assert_intact(render(render_history(hist)), ["0.06441", "2026-12-01 10:00:00", "c" * 12])


def test_results_compare_names_an_llm_shape_and_a_batch_in_the_key():
    """One llm-bench pair (key model, precision, target, prefill, decode: no batch) and a batched
    pair: each key part gets its own column name, and the shape is tokens, not a batch."""
    from edgebench.report.terminal.results import render_results_compare
    from edgebench.rows.records import ComparedPair
    from edgebench.judge.stats import Change

    assert ComparedPair.of({"key": ["tiny-llama", "dynamic", "host", 64, 16]}).identity == [
        "tiny-llama", "dynamic", "host", "64+16 tokens"]
    assert ComparedPair.of({"key": ["m", "int8", "host", 8]}).identity == ["m", "int8", "host", "batch 8"]
    assert ComparedPair.of({"key": ["m", "int8", "host", 8, 64, 16]}).identity[3:] == ["batch 8", "64+16 tokens"]
    rule = {"min_ratio": 1.1, "alpha": 0.002, "test": "Mann-Whitney U, two-sided"}
    for key, name, cell in ((["tiny-llama", "dynamic", "host", 64, 16], "tokens", "64+16 tokens"),
                            (["digits", "int8", "host", 8], "batch", "batch 8")):
        rep = {"a": "a" * 32, "b": "b" * 32, "fingerprint_diff": [], "unmatched_a": [], "unmatched_b": [],
               "regressions": 1, "rule": rule,
               "pairs": [{"key": key, "n_samples": [3, 3], "fingerprint_diff": [],
                          "changes": [Change("decode tok/s", 4000.0, 6000.0, 1.5, 1e-4, "better", True, "")]}]}
        text = render(render_results_compare(rep, width=120, details=True))
        assert name in text and cell in text, text


def test_train_table_at_80_columns_drops_columns_not_ids():
    from edgebench.report.terminal.train import render_train

    ok = {"model": "resnet50", "size": "tiny", "strategy": "multiworker", "workers": 2, "precision": "mixed_bfloat16",
          "xla": True, "batch_size": 256, "global_batch_size": 512, "replicas": 2, "status": "ok",
          "examples_per_s": 12345.6, "step_time_ms": {"p50": 41.47, "p99": 52.31, "samples": 700},
          "input_wait_pct": 13.7, "startup_ms": 4012.0, "peak_device_memory_bytes": 3 * 2**30,
          "allreduce_ms_per_step": 2.25, "final_loss": 2.3026}
    doc = {"kind": "train", "rows": [dict(ok, input_pipeline="optimized"), dict(ok, input_pipeline="naive")],
           "comparisons": [{"strategy": "multiworker", "precision": "mixed_bfloat16", "xla": "on", "batch_size": 256,
                            "naive_examples_per_s": 6172.8, "optimized_examples_per_s": 12345.6, "speedup": 2.0,
                            "naive_input_wait_pct": 61.2, "optimized_input_wait_pct": 13.7}]}
    text = render(render_train(doc, width=80))
    assert_intact(text, ["multiworker", "mixed_bfloat16", "12345.6", "41.47", "256x2", "optimized", "6172.8",
                         "2.00x"])
    assert "hidden to fit the terminal:" in text
    wide = render(render_train(doc, wide=True), width=300)
    assert "allred ms" in wide and "3.00 GiB" in wide and "hidden" not in wide


def test_matrix_table_pivots_on_the_varying_axes_at_80_columns():
    from edgebench.report.terminal.matrix import render_matrix

    cells = [{"index": i, "key": f"model=/x/tiny.tflite,target=host,threads={t},delegate={d}",
              "params": {"model": "/x/tiny.tflite", "target": "host", "threads": t, "delegate": d},
              "status": "ok", "run_id": f"{i:032d}", "reason": None, "headline": f"p99 0.0{i}44 ms"}
             for i, (t, d) in enumerate([(1, "xnnpack"), (2, "xnnpack"), (1, "none"), (2, "none")])]
    report = {"matrix": "m.yaml", "matrix_hash": "0123456789abcdef", "kind": "edge", "total_cells": 4, "shard": None,
              "cells": cells, "counts": {"ok": 4}, "db": "/tmp/r.db"}
    text = render(render_matrix(report, width=80))
    assert_intact(text, ["xnnpack", "p99 0.0344 ms", "threads", "delegate"])
    assert "every cell: model=tiny.tflite, target=host" in text
    header = next(ln for ln in text.splitlines() if "threads" in ln)
    assert "delegate" in header and "cell" not in header


def test_per_process_rows_are_named_under_the_tables():
    from edgebench.report.terminal.bench import render_bench
    from edgebench.report.terminal.compare import render_compare

    doc = _bench_doc()
    rows = list(doc.rows)
    rows[1] = rows[1].replace(target="adb:SIM1", sample_class="per-process", runtime="benchmark_model")
    rows[0] = rows[0].replace(sample_class="steady-state")
    doc = doc.with_rows(rows)
    text = render(render_bench(doc, width=None), width=300)
    assert "sample class" in text and "per-process" in text and "steady-state" in text
    assert "do not compare the two directly" in text
    cmp_doc = Document.new("compare", rows[:2], {}, inputs={"samples": 10, "sha256": "0" * 64})
    text = render(render_compare(cmp_doc, width=200), width=200)
    assert "latency on adb:SIM1: per-process samples" in text


# --- diagnose (issue 23) ---------------------------------------------------------------------------

LONG = "functional_1/block_12_expand_relu/Relu6;functional_1/block_12_expand_bn/FusedBatchNormV3"


def _draw(parts, width: int) -> str:
    """As cli._common.deliver prints: a WholeLine (a command) whole, without wrapping."""
    from edgebench.report.terminal._cells import WholeLine

    con = Console(record=True, width=width, force_terminal=False, color_system=None)
    for p in parts:
        if isinstance(p, WholeLine):
            con.print(p, soft_wrap=True, markup=False, highlight=False)
        else:
            con.print(p)
    return con.export_text()


def _diagnose_doc_with_a_finding() -> dict:
    import json
    from pathlib import Path

    doc = json.loads((Path(__file__).parent / "goldens" / "inputs" / "diagnose.json").read_text(encoding="utf-8"))
    row = doc["rows"][0]
    top = row["layers"][0]
    top.update(tensor=LONG, float_tensor=LONG, op="UNIDIRECTIONAL_SEQUENCE_LSTM", finding=True, isolated_channel_snr_db=3.14159,
               advice=f"activation outliers in channel 27: range 3,210x the typical channel's 99.9th percentile "
                      f"(~12 of 8 bits spent on them): keep float (--keep-float {LONG.split(';')[0]}), or int16x8")
    row.update(findings=1, suggested_keep_float=[LONG, "functional_1/block_13/conv/Conv2D"])
    row.pop("verdict")
    row["fix_commands"] = [f"edgebench convert-and-compare mobilenet_v2 --precision fp32,int8 --keep-float "
                           f"'{LONG},functional_1/block_13/conv/Conv2D' --max-accuracy-drop 1"] + row["fix_commands"]
    return doc


def test_diagnose_layer_table_at_80_100_120_columns_never_splits_a_number():
    from edgebench.report.diagnose import LAYER_COLUMNS, _layer_cells
    from edgebench.report.terminal.diagnose import render_diagnose

    doc = Document.from_dict(_diagnose_doc_with_a_finding())
    for width in (80, 100, 120):
        text = _draw(render_diagnose(doc, width=width), width)
        table = [ln for ln in text.splitlines() if ln.startswith(("│", "┃"))]
        assert table and max(len(ln) for ln in table) <= width
        caption = " ".join(ln.strip() for ln in text.splitlines())
        hidden = caption.partition("hidden to fit the terminal: ")[2].partition(" (--wide shows every column)")[0]
        assert hidden, caption                 # the fixture is wider than 120 columns: something is hidden
        blocks = text.split("┏")[1:]                     # one table per diagnosed precision, in order
        assert len(blocks) == len(doc.rows)
        for row, block in zip(doc.rows, blocks):
            for layer in row.diagnosis.layers:
                line = next(ln for ln in block.splitlines() if ln.startswith(f"│ {layer.rank:>4} │"))
                for name, cell in zip(LAYER_COLUMNS, _layer_cells(layer)):
                    if name not in hidden.split(", ") and name not in ("tensor", "op#node"):   # names may wrap
                        assert f" {cell} " in line, (width, name, cell, line)     # whole, on the layer's line
        assert "iso ch" in text and "3.1" in text           # the ranking number is always shown
        assert not any(frag in text for frag in ("scal\n", "0.00\n", "op#n ", "rmse/s ")), text
    wide = _draw(render_diagnose(doc, width=80, wide=True), 300)
    assert "hidden to fit" not in wide and "outliers" in wide and "cosine" in wide


def test_diagnose_commands_and_keep_float_names_are_never_cropped():
    from edgebench.report.terminal.diagnose import render_diagnose

    doc = _diagnose_doc_with_a_finding()
    for width in (80, 100, 120):
        lines = _draw(render_diagnose(doc, width=width), width).splitlines()
        for cmd in doc["rows"][0]["fix_commands"][:2]:
            assert cmd in lines                                        # a line of its own, whole
        assert f"suggested: --keep-float '{LONG},functional_1/block_13/conv/Conv2D'" in lines
        advice = doc["rows"][0]["layers"][0]["advice"]
        assert any(ln.startswith("#1 ") and ln.endswith(advice) for ln in lines)
        assert f"--keep-float {LONG.split(';')[0]})" in "\n".join(lines)
