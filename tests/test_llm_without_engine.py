"""llm-bench parts that need no LiteRT-LM engine: the .litertlm reader on the committed tiny bundles,
the one parser of LiteRT-LM benchmark logs on real captured logs, the judge, the shape check, the
interval over processes, `results compare` of two llm-bench runs (across precisions, on the
processes), the renderers, and the missing-extra line. No torch, no litert_lm."""
from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import pytest

from edgebench.core.errors import BadInput
from edgebench.model.litertlm_file import read_bundle
from edgebench.targets.litert_lm.judge import Generation, check_shape, judge
from edgebench.targets.litert_lm.log import absl_duration_ms, parse_lm_log

FIX = Path(__file__).parent / "fixtures" / "llm"
LOGS = FIX / "logs"


# ------------------------------------------------------------------------------ the bundles
def test_committed_bundles_match_their_sums_and_stay_small():
    sums = dict(reversed(line.split()) for line in (FIX / "SHA256SUMS").read_text().splitlines())
    total = 0
    for name, digest in sums.items():
        data = (FIX / name).read_bytes()
        assert hashlib.sha256(data).hexdigest() == digest, name
        total += len(data)
    assert total < 8 * 1024 * 1024          # six bundles: tiny-llama x3, tiny-count x3


@pytest.mark.parametrize("name, context, precision", [("tiny-llama-f32", 256, "fp32"),
                                                       ("tiny-llama-q8", 256, "dynamic"),
                                                       ("tiny-llama-bad-kv", 128, "fp32")])
def test_bundle_reader_context_precision_sections(name, context, precision):
    b = read_bundle(FIX / f"{name}.litertlm")
    assert b.context_tokens == context and b.precision == precision and b.model_type == "generic"
    assert b.version.startswith("1.") and b.sha256 == hashlib.sha256((FIX / f"{name}.litertlm").read_bytes()).hexdigest()
    kinds = [s.kind for s in b.sections]
    assert kinds == ["LlmMetadataProto", "SP_Tokenizer", "TFLiteModel"]
    assert b.sections[-1].model_type == "tf_lite_prefill_decode" and b.sections[-1].size_bytes > 100_000


def test_bundle_reader_refuses_foreign_truncated_and_corrupt_files(tmp_path):
    good = (FIX / "tiny-llama-f32.litertlm").read_bytes()
    with pytest.raises(BadInput, match="not found"):
        read_bundle(tmp_path / "nope.litertlm")
    (tmp_path / "m.tflite").write_bytes(b"\x1c\x00\x00\x00TFL3" + bytes(64))
    with pytest.raises(BadInput, match=r"m\.tflite is not a LiteRT-LM bundle"):
        read_bundle(tmp_path / "m.tflite")
    (tmp_path / "cut.litertlm").write_bytes(good[:200])
    with pytest.raises(BadInput, match="cut.litertlm is truncated or corrupt"):
        read_bundle(tmp_path / "cut.litertlm")
    bad = bytearray(good)
    bad[40:200] = b"\xff" * 160                       # garbage inside the header flatbuffer
    (tmp_path / "bad.litertlm").write_bytes(bytes(bad))
    with pytest.raises(BadInput, match="bad.litertlm"):
        read_bundle(tmp_path / "bad.litertlm")


# ------------------------------------------------------------------------------ the parser
def test_absl_durations():
    assert absl_duration_ms("92.41119ms") == pytest.approx(92.41119)
    assert absl_duration_ms("3.86435584s") == pytest.approx(3864.35584)
    assert absl_duration_ms("1m2.5s") == pytest.approx(62500.0)
    assert absl_duration_ms("850us") == pytest.approx(0.85)
    assert absl_duration_ms("0") == 0.0 and absl_duration_ms("soon") is None


def test_real_litert_lm_cli_log_parses_to_its_numbers_and_passes_the_judge():
    text = (LOGS / "litert-lm-0.18.1_benchmark_x86_64_tiny-f32_p64_d32_runs3.txt").read_text()
    log = parse_lm_log(text)
    assert log.format == "litert-lm-cli"
    assert log.asked == {"prefill": 64, "decode": 32, "max_num_tokens": 4096, "runs": 3, "backend": "cpu"}
    assert log.prefill_tok_s == 46476.15 and log.decode_tok_s == 8132.70
    assert log.init_ms == pytest.approx(8.5) and log.ttft_ms == pytest.approx(1.6)
    assert (log.prefill_tokens, log.decode_tokens) == (64, 32)
    assert judge(log.generation(), prefill=64, decode=32, context=256, bundle="tiny") is None
    q8 = parse_lm_log((LOGS / "litert-lm-0.18.1_benchmark_x86_64_tiny-q8_p128_d64_runs2.txt").read_text())
    assert (q8.prefill_tok_s, q8.decode_tok_s, q8.asked["max_num_tokens"]) == (17609.50, 1980.85, 256)


def test_the_cli_trap_exit_0_and_zero_tokens_is_a_failure_naming_the_limit():
    """Captured on this project's host: `litert-lm benchmark -p 300` against the 256-token bundle exits 0,
    prints 'Max number of tokens: 4096' and 0.00 tokens/s; the engine's own line says why."""
    log = parse_lm_log((LOGS / "litert-lm-0.18.1_benchmark_x86_64_tiny-f32_p300_over_context.txt").read_text())
    assert log.prefill_tok_s == 0.0 and log.decode_tok_s == 0.0 and log.asked["max_num_tokens"] == 4096
    assert log.engine_errors[0]["code"] == "INVALID_ARGUMENT"
    fail = judge(log.generation(), prefill=300, decode=16, context=256, bundle="tiny-llama-f32")
    assert fail is not None and fail.exit_code == 2
    assert "300 >= 256" in fail.message and "at most 255 prefill tokens" in fail.message


def test_real_phone_log_without_turns_is_a_failure_not_zeros():
    """LiteRT-LM#1396 (MediaTek phone): BenchmarkInfo with init phases but no prefill/decode turn."""
    log = parse_lm_log((LOGS / "litert_lm_main_mediatek_issue1396_no_turns.txt").read_text())
    assert log.format == "benchmark_info" and log.blocks == 1
    assert log.init_ms == pytest.approx(1922.03) and log.init_phases["Executor"] == pytest.approx(1787.68)
    assert log.prefill_tokens == 0 and log.decode_tokens == 0
    fail = judge(log.generation(), prefill=256, decode=256, context=4096, bundle="gemma")
    assert fail is not None and fail.exit_code == 3 and "0 prefill and 0 decode tokens" in fail.message


# The older BenchmarkInfo layout (io_types.cc before the TTFT line: "Prefill Turns (Total: 1)",
# "Executor initialization"), written to that format with made-up numbers.
BLOCK = """I0000 00:00:1700000000.000001   4242 litert_lm_main.cc:193] BenchmarkInfo:
  Init Phases (2):
    - Executor initialization: 215.50 ms
    - Tokenizer initialization: 0.00 ms
    Total init time: 215.50 ms
--------------------------------------------------
  Prefill Turns (Total: 1):
    Prefill Turn 1: Processed 20 tokens in 101.5ms duration.
      Prefill Speed: 197.04 tokens/sec.
--------------------------------------------------
  Decode Turns (Total: 1):
    Decode Turn 1: Processed 120 tokens in 4.1s duration.
      Decode Speed: 29.27 tokens/sec.
--------------------------------------------------
I0000 00:00:1700000004.300002   4242 litert_lm_lib.cc:1] Peak system ram usage: 1234.5MB.
"""


def test_benchmark_info_block_old_format_ttft_from_turns_and_peak_memory():
    log = parse_lm_log("the model's reply\n" + BLOCK)
    assert (log.prefill_tokens, log.decode_tokens) == (20, 120)
    assert (log.prefill_tok_s, log.decode_tok_s, log.init_ms) == (197.04, 29.27, 215.5)
    assert log.ttft_derived and log.ttft_ms == pytest.approx(101.5 + 4100.0 / 120)
    assert log.peak_rss_bytes == int(1234.5 * (1 << 20))
    assert judge(log.generation(), prefill=20, decode=120, context=None, bundle="m") is None
    short = judge(log.generation(), prefill=20, decode=200, context=140, bundle="m")
    assert short.exit_code == 2 and "stopped decoding after 120 of 200 tokens" in short.message


def test_the_last_of_several_blocks_counts():
    second = BLOCK.replace("Processed 120 tokens in 4.1s", "Processed 120 tokens in 1.5s").replace(
        "29.27 tokens/sec", "80.00 tokens/sec")
    log = parse_lm_log(BLOCK + second)
    assert log.blocks == 2 and log.decode_tok_s == 80.0 and log.decode_turns == ((120, 1500.0),)


def test_no_benchmark_output_is_no_format():
    log = parse_lm_log("sh: litert_lm_advanced_main: not found\n")
    assert log.format is None and log.generation().decode_tokens is None


# ------------------------------------------------------------------------------ judge and shape
def test_shape_check_names_the_limit():
    assert check_shape(300, 64, 256) == "prefill 300 tokens > the bundle's context 256"
    assert "the engine needs room for the first decode step" in check_shape(256, 1, 256)
    assert "prefill 200 + decode 100 = 300 tokens > the bundle's context 256" in check_shape(200, 100, 256)
    assert "after 56 tokens" in check_shape(200, 100, 256)
    assert check_shape(200, 56, 256) is None and check_shape(10 ** 6, 1, None) is None


def test_judge_names_a_kv_layout_the_engine_misreads():
    """The engine reads a wrongly exported KV cache as a 1-token context (what the committed
    tiny-llama-bad-kv bundle does): the failure says so and how to re-export."""
    gen = Generation(prefill_tokens=0, decode_tokens=0, prefill_tok_s=0.0, decode_tok_s=0.0, engine_errors=(
        {"what": "generate content", "code": "INVALID_ARGUMENT",
         "message": "Input token ids are too long. Exceeding the maximum number of tokens allowed: 16 >= 1"},),
        engine_context_limit=1)
    fail = judge(gen, prefill=16, decode=8, context=128, bundle="tiny-llama-bad-kv")
    assert fail.exit_code == 2 and "reads a context of 1 token(s)" in fail.message
    assert "declares 128" in fail.message and "KV_LAYOUT_TRANSPOSED" in fail.message


def test_judge_refuses_zero_nan_and_short_outputs():
    ok = dict(init_ms=10.0, ttft_ms=2.0, prefill_tokens=64, prefill_tok_s=1e4, decode_tokens=32, decode_tok_s=500.0)
    assert judge(Generation(**ok), prefill=64, decode=32, context=256, bundle="b") is None
    assert "prefilled 10 tokens, not the 64" in judge(Generation(**{**ok, "prefill_tokens": 10}), prefill=64,
                                                      decode=32, context=256, bundle="b").message
    assert "decode tok/s = nan" in judge(Generation(**{**ok, "decode_tok_s": float("nan")}), prefill=64, decode=32,
                                         context=256, bundle="b").message
    crash = judge(Generation(exception="RuntimeError: Failed to create engine"), prefill=64, decode=32, context=256,
                  bundle="b")
    assert crash.exit_code == 3 and "Failed to create engine" in crash.message


# ------------------------------------------------------------------------------ intervals and names
def test_median_interval_over_processes_states_its_level():
    from edgebench.rows.llm import Spread, median_interval

    lo, hi, level = median_interval([3.0, 1.0, 2.0])
    assert (lo, hi) == (1.0, 3.0) and level == pytest.approx(0.75)
    lo, hi, level = median_interval(list(range(1, 11)))           # 10 processes: x(2)..x(9), 97.9 %
    assert (lo, hi) == (2.0, 9.0) and level == pytest.approx(1 - 2 * 11 / 1024)
    s = Spread.of([10.0, None, 12.0, 11.0])
    assert s.median == 11.0 and s.values == (10.0, 12.0, 11.0) and s.rel_width == pytest.approx(2 / 11)
    assert Spread.of([None]) is None


def test_model_name_drops_precision_and_context_tags():
    from edgebench.llm.bench import model_name

    assert model_name("x/tiny-llama-f32.litertlm") == "tiny-llama"
    assert model_name("tiny-llama-q8.litertlm") == "tiny-llama"
    assert model_name("TinyLlama_multi-prefill-seq_q8_ekv1280.litertlm") == "TinyLlama_multi-prefill-seq"
    assert model_name("gemma3-1b-it-int4.litertlm") == "gemma3-1b-it"
    assert model_name("Gemma3-1B-IT_multi-prefill-seq_f32_ekv4096.litertlm") == "Gemma3-1B-IT_multi-prefill-seq"
    assert model_name("plain.litertlm") == "plain"


# ------------------------------------------------------------------------------ compare, render
def _llm_doc(run_id: str, precision: str, decode: list[float], sha: str, size: int = 1000) -> dict:
    from edgebench.rows import Document, InferenceRow, LlmPart, Spread

    recs = [{"process": i + 1, "init_ms": 10.0 + i, "ttft_ms": 2.0 + 0.01 * i, "prefill_tokens": 64,
             "prefill_tok_s": 3e4 + i, "decode_tokens": 32, "decode_tok_s": v, "peak_rss_bytes": 10 ** 8}
            for i, v in enumerate(decode)]
    stats = {k: Spread.of([r[k] for r in recs]) for k in ("init_ms", "ttft_ms", "prefill_tok_s", "decode_tok_s",
                                                           "peak_rss_bytes")}
    row = InferenceRow(target="host", model="tiny-llama", precision=precision, model_sha256=sha, size_bytes=size,
                       repeats=tuple(recs), memory={"load_and_run_peak_rss_bytes": 10 ** 8},
                       llm=LlmPart(prefill_tokens=64, decode_tokens=32, context_tokens=256, bundle_context_tokens=256,
                                   max_num_tokens=None, backend="cpu", activation=None, weight_cache="disk",
                                   warmup=1, stats=stats))
    return {**Document.new("llm-bench", [row], {"cpu_model": "x"}).to_dict(), "run_id": run_id}


def test_results_compare_pairs_fp32_and_int8_runs_and_tests_the_processes():
    from edgebench.judge.stats import compare_runs

    a = _llm_doc("a", "fp32", [1000.0, 1010.0, 990.0], "a" * 64, 2000)
    b = _llm_doc("b", "dynamic", [2000.0, 2030.0, 1985.0], "b" * 64, 900)
    rep = compare_runs(a, b)
    (pair,) = rep["pairs"]
    assert pair["key"] == ["tiny-llama", "dynamic", "host", 64, 32]
    assert {"field": "precision", "a": "fp32", "b": "dynamic"} in pair["config_diff"]
    ch = {c.metric: c for c in pair["changes"]}
    dec = ch["decode tok/s"]
    assert dec.verdict == "better" and dec.basis == "repeats" and dec.ratio == pytest.approx(2.0, rel=0.01)
    assert dec.ci is not None and dec.ci[0] > 1.5
    assert ch["TTFT ms"].verdict == "same" and ch["size"].verdict == "better"
    one = _llm_doc("c", "dynamic", [2000.0], "b" * 64)
    lonely = {c.metric: c for c in compare_runs(a, one)["pairs"][0]["changes"]}["decode tok/s"]
    assert lonely.verdict == "cannot judge" and lonely.reason == "within-run only" and "--repeats 3" in lonely.note
    same_shape_other = _llm_doc("d", "fp32", [1000.0, 1005.0, 995.0], "a" * 64)
    d2 = compare_runs(a, same_shape_other)
    assert {c.metric: c.verdict for c in d2["pairs"][0]["changes"]}["decode tok/s"] == "same"


def test_renderers_show_medians_intervals_and_the_comparison():
    from edgebench.report.markdown import render_markdown
    from edgebench.report.prometheus import render_prometheus
    from edgebench.report.terminal.llm import render_llm_bench
    from edgebench.rows import Document

    a, b = _llm_doc("a", "fp32", [1000.0, 1010.0, 990.0], "a" * 64), _llm_doc("b", "dynamic", [2000.0, 2030.0, 1985.0],
                                                                              "b" * 64)
    doc = Document.from_dict({**a, "rows": a["rows"] + b["rows"]})
    md = render_markdown(doc)
    assert "| tokens |" in md.replace("| tokens | size", "| tokens |") and "64+32" in md
    assert "1000 \\[990-1010\\]" in md and "dynamic vs fp32" in md and "2.00x" in md
    prom = render_prometheus(doc)
    dec = [ln for ln in prom.splitlines() if ln.startswith("edgebench_llm_decode_tokens_per_second{")]
    assert len(dec) == 2 and any('precision="dynamic"' in ln and ln.endswith(" 2000") for ln in dec)
    assert all('prefill_tokens="64",decode_tokens="32",context_tokens="256"' in ln for ln in dec)
    from rich.console import Console

    con = Console(width=200, record=True)
    for part in render_llm_bench(doc):
        con.print(part)
    text = con.export_text()
    assert "1000 [990-1010]" in text and "confidence 75.0%" in text


# ------------------------------------------------------------------------------ the extra
def test_missing_extra_is_one_exit_2_line(monkeypatch, capsys):
    from edgebench.cli import main

    monkeypatch.setitem(sys.modules, "litert_lm", None)     # what an install without [llm] looks like
    with pytest.raises(SystemExit) as exc:
        main(["llm-bench", str(FIX / "tiny-llama-f32.litertlm"), "--no-store"])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "optional extra [llm]" in err[0] and "pip install 'edgebench[llm]'" in err[0]


def test_store_history_keeps_shapes_and_contexts_apart(tmp_path):
    """Stored llm-bench rows: the registry's columns, and one history line per configuration -- a
    different context or shape is never a point of the same line."""
    import copy

    from edgebench.judge.stats import history_series
    from edgebench.store.db import Store

    a = _llm_doc("a", "fp32", [1000.0, 1010.0, 990.0], "a" * 64)
    b = copy.deepcopy(a)
    b["rows"][0]["llm"]["context_tokens"] = 128
    with Store(str(tmp_path / "r.db")) as st:
        ids = [st.save({k: v for k, v in d.items() if k != "run_id"}) for d in (a, a, b)]
        rows = st.rows(model="tiny-llama")
        assert [r["decode_tok_s"] for r in rows] == [1000.0] * 3 and rows[0]["ttft_ms"] == pytest.approx(2.01)
        series = history_series(st, "decode", model="tiny-llama")
    assert len(ids) == 3 and sorted(len(s["points"]) for s in series) == [1, 2]
    assert {s["series"]["context_tokens"] for s in series} == {128, 256}


def test_speed_ups_state_a_real_95_percent_interval():
    """Issue 44: `decode 0.31x [0.29-1.21]` was [min/max, max/min] of 3 processes at no level. Now a
    Student-t interval of the geometric means' ratio, its level printed beside it; one process a
    side has none and says so."""
    from edgebench.judge.llm_pairs import precision_pairs
    from edgebench.rows import Document

    a = _llm_doc("a", "fp32", [1000.0, 1010.0, 990.0], "a" * 64, 2000)
    b = _llm_doc("b", "dynamic", [2000.0, 2030.0, 1985.0], "b" * 64, 900)
    rows = [*Document.from_dict(a).rows, *Document.from_dict(b).rows]
    (pair,) = precision_pairs(rows)
    s = pair.speedup("decode_tok_s")
    assert s.level == 0.95 and s.processes == (3, 3)
    assert s.lo < s.ratio < s.hi and (s.lo, s.hi) != (1985 / 1010, 2030 / 990)
    assert s.cell.endswith(" 95%") and s.to_dict()["interval"].startswith("95% Student-t")
    one = _llm_doc("c", "dynamic", [2000.0], "b" * 64)
    (pair,) = precision_pairs([*Document.from_dict(a).rows, *Document.from_dict(one).rows])
    assert pair.speedup("decode_tok_s").cell.startswith("2.00x (no interval: 1 process")


def test_engine_version_is_part_of_the_configuration_identity():
    """An engine upgrade (LiteRT-LM 0.13.1 -> 0.14.0 doubled memory, LiteRT-LM#2966) is another
    configuration: the series keys differ and the label names the release."""
    from edgebench.rows.identity import series_key, series_label

    row = {"model": "m", "model_sha256": "ab" * 32, "precision": "fp32", "target": "host", "runtime": "litert_lm 0.13.1",
           "llm": {"prefill_tokens": 64, "decode_tokens": 16, "context_tokens": 256, "engine_version": "0.13.1"}}
    new = {**row, "runtime": "litert_lm 0.14.0", "llm": {**row["llm"], "engine_version": "0.14.0"}}
    a, b = series_key(row), series_key(new)
    assert a != b and {k for k in a if a[k] != b[k]} == {"engine_version"}
    assert "engine version 0.14.0" in series_label(b)
