"""Every number edgebench reports about a row, described once.

A ``Metric`` says what a number is (key, label, unit), how to read it from a typed row, which way
is better, how ``results compare`` tests a change in it, its name in Prometheus, and how important
it is in a table that must fit a terminal. The store's headline columns (and the generic migration
that adds a missing one), ``results compare`` / ``history`` and their ``--metric`` choices, the
Prometheus gauges and the ``results list/show`` columns are all drawn from ``REGISTRY``; adding a
number is one entry here plus its computation where it is measured.

Comparison tests (``stats``): ``location`` (the median: Mann-Whitney U on the samples), ``mean``
(a test of means: Welch's t-test on the samples, so a slower tail that moves the mean counts),
``percentile`` (quantile test) -- each with replicate processes or stored history for the
run-to-run noise; ``ratio`` (one value per run: a change is a ratio beyond ``--min-ratio``);
``absolute`` (accuracy and drift: a change of at least ``threshold`` in the metric's own unit --
percentage points, dB, 1 - cosine -- because "ratio >= 1.1" calls 98 % -> 90 % top-1 "same");
``repeats`` (one value per worker process and no per-inference samples -- ``llm-bench``'s TTFT,
prefill/decode tok/s and init: the latency rule's between-runs half alone, a ratio >= ``--min-ratio``
and significant against the run-to-run noise of the processes or of the stored history).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

from edgebench.core.errors import BadInput
from edgebench.rows import InferenceRow, TrainRow

UNITS = ("ms", "1/s", "tok/s", "bytes", "%", "pp", "fraction", "dB", "cosine")


def _finite(v: Any) -> float | None:
    if isinstance(v, bool) or v is None:
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


@dataclass(frozen=True)
class Metric:
    key: str                                   # the stored column, the JSON key of a headline, --metric NAME
    label: str                                 # a table header ("p50 ms")
    unit: str                                  # one of UNITS: the formatter renderers use
    read: Callable[[Any], Any]                 # typed row (InferenceRow / TrainRow) -> value or None
    better: str                                # "lower" | "higher"
    row_kind: str = "inference"                # "inference" | "train"
    column: str = "float"                      # stored type: "float" | "bigint"
    test: str = "ratio"                        # "location" | "mean" | "percentile" | "ratio" | "absolute" | "repeats"
    percentile: float | None = None            # percentile tests: which one
    repeat_key: str | None = None              # the per-process summary key (bench --repeats)
    aliases: tuple[str, ...] = ()              # short names --metric also takes
    prometheus: str | None = None              # gauge name (None: drawn by a dedicated family)
    prometheus_scale: float = 1.0              # value x scale = the Prometheus base unit
    help: str = ""                             # Prometheus HELP and README text
    priority: int = 1                          # 0 = always shown; higher = dropped first from a narrow table
    summary: bool = True                       # a column of the compact tables (results list/show, pivots)
    threshold: float | None = None             # "absolute" test: the change that counts, in change units
    change_unit: str = ""                      # ... its unit ("pp", "dB", "1 - cosine")
    change_scale: float = 1.0                  # ... value x scale = change units (top-1 fraction -> pp: 100)
    compared: bool = True                      # judged by ``results compare`` (False: derived from one that is)
    valid_flag: str | None = None              # a stored boolean next to it: is the value trustworthy?
    read_valid: Callable[[Any], Any] | None = None

    @property
    def higher_is_better(self) -> bool:
        return self.better == "higher"

    def value(self, row: InferenceRow | TrainRow) -> float | None:
        """This metric of a typed row (None when the row has no such number or is another kind)."""
        if (self.row_kind == "train") != isinstance(row, TrainRow):
            return None
        v = _finite(self.read(row))
        if v is None:
            return None
        return int(v) if self.column == "bigint" else v

    def valid(self, row: InferenceRow | TrainRow) -> bool | None:
        """The validity flag's value (None when the row has no such number to judge)."""
        if self.read_valid is None or (self.row_kind == "train") != isinstance(row, TrainRow):
            return None
        v = self.read_valid(row)
        return None if v is None else bool(v)


def _lat(attr: str) -> Callable[[InferenceRow], Any]:
    return lambda r: getattr(r.latency, attr) if r.latency is not None else None


def _peak_memory(r: InferenceRow) -> Any:
    return (r.memory or {}).get("load_and_run_peak_rss_bytes")


def _llm(key: str) -> Callable[[InferenceRow], Any]:
    """The median over the repeats of an llm-bench figure (``rows.llm``)."""
    return lambda r: r.llm.median(key) if r.llm is not None else None
def _npu_ops(r: InferenceRow) -> Any:
    """readiness rows: the share of ops in NPU partitions (None for a target not checked)."""
    return r.readiness.ops_pct if r.readiness is not None else None


REGISTRY: tuple[Metric, ...] = (
    Metric("p50_ms", "p50 ms", "ms", _lat("p50"), "lower", test="location", repeat_key="p50",
           aliases=("p50", "median"), priority=0, help="Median per-inference latency."),
    Metric("p90_ms", "p90 ms", "ms", _lat("p90"), "lower", test="percentile", percentile=90.0, repeat_key="p90",
           aliases=("p90",), priority=2, summary=False, help="90th percentile per-inference latency."),
    Metric("p99_ms", "p99 ms", "ms", _lat("p99"), "lower", test="percentile", percentile=99.0, repeat_key="p99",
           aliases=("p99",), priority=0, help="99th percentile per-inference latency.",
           valid_flag="p99_valid", read_valid=_lat("p99_valid")),
    Metric("mean_ms", "mean ms", "ms", _lat("mean"), "lower", test="mean", repeat_key="mean",
           aliases=("mean",), priority=3, summary=False, help="Mean per-inference latency."),
    Metric("qps", "QPS", "1/s", _lat("qps"), "higher", test="mean", repeat_key="qps", priority=1,
           prometheus="edgebench_inference_queries_per_second", help="Inferences per second."),
    Metric("size_bytes", "size", "bytes", lambda r: r.size_bytes, "lower", column="bigint", aliases=("size",),
           priority=3, prometheus="edgebench_model_size_bytes", help="Size of the model file on disk."),
    Metric("size_reduction_pct", "size red.", "%", lambda r: r.size_reduction_pct, "higher",
           aliases=("size_reduction",), priority=2, compared=False, prometheus="edgebench_model_size_reduction_ratio",
           prometheus_scale=0.01, help="Size reduction against the reference model (1 - size / reference size)."),
    Metric("quant_params_bytes", "quant params", "bytes",
           lambda r: r.size_explained.quant_params_bytes if r.size_explained is not None else None, "lower",
           column="bigint", aliases=("quant_params",), priority=5, summary=False, compared=False,
           help="Bytes of quantization parameters (scales, zero points, min/max) stored in a quantized file that is "
                "not smaller than FP32 (rows with size_explained): per-channel ones per unrolled step can outweigh "
                "the weights."),
    Metric("top1", "top-1", "fraction", lambda r: r.accuracy.top1 if r.accuracy else None, "higher", priority=1,
           test="absolute", threshold=1.0, change_unit="pp", change_scale=100.0,
           prometheus="edgebench_accuracy_top1_ratio", help="Top-1 accuracy on the labelled input set."),
    Metric("top1_drop_pp", "Δtop-1 pp", "pp", lambda r: r.accuracy.top1_drop_pp if r.accuracy else None, "lower",
           aliases=("top1_drop",), priority=1, compared=False, prometheus="edgebench_accuracy_top1_drop_ratio",
           prometheus_scale=0.01, help="Top-1 accuracy drop against the reference (percentage points / 100)."),
    Metric("psnr_db", "PSNR dB", "dB", lambda r: r.worst.psnr_db if r.worst else None, "higher",
           aliases=("psnr",), priority=2, test="absolute", threshold=3.0, change_unit="dB", help="Worst output's PSNR against the reference, in decibels."),
    Metric("cosine", "cosine", "cosine", lambda r: r.worst.cosine if r.worst else None, "higher", priority=4,
           test="absolute", threshold=0.001, change_unit="1 - cosine",
           help="Worst output's cosine similarity with the reference."),
    Metric("stream_agreement", "stream agree", "fraction", lambda r: (r.streams or {}).get("agreement"), "higher",
           priority=5, test="absolute", threshold=1.0, change_unit="pp", change_scale=100.0,
           prometheus="edgebench_stream_agreement_ratio",
           help="Share of streams whose decision (detected or not; a classifier's last-window class) equals the "
                "reference's, state carried within each stream (--state streams)."),
    Metric("peak_memory_bytes", "peak mem", "bytes", _peak_memory, "lower", column="bigint",
           aliases=("peak_memory", "memory"), priority=3, prometheus="edgebench_peak_memory_bytes",
           help="Peak resident memory of the inference process over model load and the timed run "
                "(Python + runtime + model + arena; the input and output arrays edgebench keeps excluded)."),
    Metric("ttft_ms", "TTFT ms", "ms", _llm("ttft_ms"), "lower", test="repeats", repeat_key="ttft_ms",
           aliases=("ttft",), priority=0, prometheus="edgebench_llm_time_to_first_token_seconds",
           prometheus_scale=1e-3, help="Time to first token, as the engine counts it: the first prefill turn plus "
                                       "one mean decode step (median over processes)."),
    Metric("prefill_tok_s", "prefill tok/s", "tok/s", _llm("prefill_tok_s"), "higher", test="repeats",
           repeat_key="prefill_tok_s", aliases=("prefill",), priority=1,
           prometheus="edgebench_llm_prefill_tokens_per_second",
           help="Prefill tokens per second of the engine's prefill turn (median over processes)."),
    Metric("decode_tok_s", "decode tok/s", "tok/s", _llm("decode_tok_s"), "higher", test="repeats",
           repeat_key="decode_tok_s", aliases=("decode",), priority=0,
           prometheus="edgebench_llm_decode_tokens_per_second",
           help="Decode tokens per second of the engine's decode turn, its own per-turn figure (median over "
                "processes)."),
    Metric("llm_init_ms", "init ms", "ms", _llm("init_ms"), "lower", test="repeats", repeat_key="init_ms",
           aliases=("init",), priority=2, prometheus="edgebench_llm_init_seconds", prometheus_scale=1e-3,
           help="LiteRT-LM engine and session creation time, as the engine reports it (median over processes)."),
    *(Metric(f"{phase}_{kind}_bytes", f"{phase} {kind} mem", "bytes", _llm(f"{phase}_{kind}_bytes"), "lower",
             column="bigint", test="repeats", repeat_key=f"{phase}_{kind}_bytes", priority=5, summary=False,
             prometheus=f"edgebench_llm_{phase}_{kind}_memory_bytes",
             help=f"llm-bench --memory-phases: the worker's {'peak' if kind == 'peak' else 'steady (at its end)'} "
                  f"resident memory during {phase} (Engine/Session API; median over processes).")
      for phase in ("init", "prefill", "decode") for kind in ("peak", "steady")),
    Metric("task_score", "task score", "fraction",
           lambda r: r.llm.task_score.fraction if r.llm is not None and r.llm.task_score is not None else None,
           "higher", aliases=("tasks",), priority=2, summary=False, test="absolute", threshold=1e-9,
           change_unit="pp", change_scale=100.0, prometheus="edgebench_llm_task_score_ratio",
           help="llm-bench --task-score: the share of a small exact-match task set (copy, addition; greedy) the "
                "bundle answered right; any drop is a change (on a random-weight test bundle it checks the "
                "machinery, not a model)."),
    Metric("npu_ops_pct", "on NPU", "%", _npu_ops, "higher", aliases=("npu_ops", "ops_on_npu"), priority=1,
           summary=False, test="absolute", threshold=0.5, change_unit="pp", prometheus="edgebench_npu_ops_ratio",
           prometheus_scale=0.01, help="Share of the model's ops an NPU compiler placed in NPU partitions "
                                       "(readiness rows; a target that could not be checked has none)."),
    Metric("examples_per_s", "ex/s", "1/s", lambda r: r.examples_per_s, "higher", row_kind="train",
           aliases=("throughput",), priority=0, prometheus="edgebench_training_examples_per_second",
           help="Training throughput (examples per second)."),
    Metric("step_time_p50_ms", "step p50 ms", "ms", lambda r: r.step_time.p50 if r.step_time else None, "lower",
           row_kind="train", aliases=("step_time",), priority=1, help="Median training step time."),
)
BY_KEY: dict[str, Metric] = {m.key: m for m in REGISTRY}
ALIASES: dict[str, str] = {a: m.key for m in REGISTRY for a in m.aliases}


def metric(name: str) -> Metric:
    """A metric by key or alias; an unknown name is one line listing the choices (--metric)."""
    m = BY_KEY.get(ALIASES.get(name, name))
    if m is None:
        raise BadInput(f"--metric {name!r} is not a stored metric; use one of "
                       f"{', '.join(sorted(set(ALIASES) | set(BY_KEY)))}")
    return m


def values(row: InferenceRow | TrainRow) -> dict[str, float | None]:
    """Every registry metric of one typed row (None where it has none)."""
    return {m.key: m.value(row) for m in REGISTRY}
