"""``run_llm_bench(settings)``: LiteRT-LM bundles (``.litertlm``) measured into rows, with repeats.

One row per bundle x (prefill, decode) shape; with several bundles their processes alternate (process
1 of each bundle, then process 2 of each ...), so a change of a shared machine's load reaches every
bundle alike instead of biasing their comparison. Each repeat is a separate process -- on the host a
``targets.litert_lm`` worker, on a phone one invocation of LiteRT-LM's own benchmark binary -- and
every process's init, TTFT, prefill and decode tok/s and peak memory are kept (``row.repeats``);
the row's numbers are their medians, each with the order-statistic interval of the median over the
processes (``rows.llm.Spread``). Warm-up is declared: ``warmup`` generations per host process (one
extra invocation per warm-up on a device) run first and are shown apart (``llm.warmup_stats``).

Nothing is ever a row of zeros: a shape the context cannot hold is a failed row before anything
runs ("prefill 300 tokens > the bundle's context 256"), and every generation goes through
``targets.litert_lm.judge`` (zero tokens, fewer tokens than asked, the engine's INVALID_ARGUMENT).
A failed row carries ``exit_code`` (2: the bundle or the shape, 3: the engine or the device) and the
command exits with the worst one after storing and showing everything measured.

Several bundles of one model (fp32 and dynamic int8) are compared side by side
(``llm_compare``): speed-up per shape with an interval, size, and the greedy token agreement.
"""

from __future__ import annotations

import re
import shutil
import statistics
import tempfile
import time
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Callable, Sequence

from edgebench.core.errors import BadInput, EdgebenchError, InfraError
from edgebench.core.fingerprint import emulation_warning, host_fingerprint
from edgebench.core.formats import fmt_metric
from edgebench.llm import compare as llm_compare
from edgebench.llm import tasks as llm_tasks
from edgebench.model.litertlm_file import BundleInfo, read_bundle
from edgebench.rows import Document, InferenceRow, LlmPart, Spread
from edgebench.rows.llm import LLM_METRICS, PHASE_METRICS
from edgebench.targets.litert_lm.host import LmJob
from edgebench.targets.litert_lm.judge import check_shape, judge
from edgebench.targets.litert_lm.resolve import resolve_runner
from edgebench.targets.litert_lm.runners import LmRunner, ProcessRun
from edgebench.targets.loop import interrupt_name

DEFAULT_PREFILL = (64, 256)
DEFAULT_DECODE = (64,)
DEFAULT_REPEATS = 3
WEIGHT_CACHES = ("disk", "none")
ACTIVATIONS = ("fp32", "fp16", "int16", "int8")
# Processes further apart than this (max / min of a metric) get a warning: the machine was busy,
# throttling or migrating the process -- the issue's own measurement was 2.9x apart on a shared box.
SPREAD_WARN_RATIO = 1.25
METHOD = ("the engine's own BenchmarkInfo of one generation per process (exactly N prefill and M decode "
          "tokens); repeats are processes, the row holds their medians")
# Stem tags naming a precision or an exported context (litert-torch's converter names files
# <prefix>_<quant>_ekv<context>): stripped so bundles of one model share one model name.
_TAIL = re.compile(r"([_-](ekv\d+|f32|fp32|float32|f16|fp16|float16|q8|int8|q8_wo|dynamic[_-]?int8|int4|q4|"
                   r"q4_block32|q4_block128|q4_ekv\d+|mixed[_-]int4|w8a8|w4a8))+$", re.I)


def model_name(bundle: str) -> str:
    """The model a bundle holds: its file stem without a trailing precision / ``ekv`` context tag
    (``gemma3-1b-it-int4`` -> ``gemma3-1b-it``, ``tiny-llama-q8`` -> ``tiny-llama``), so the fp32 and
    the int8 bundle of one model are rows of one model, told apart by precision and sha256."""
    stem = Path(bundle).name
    stem = stem[:-len(".litertlm")] if stem.endswith(".litertlm") else Path(stem).stem
    return _TAIL.sub("", stem) or stem


@dataclass(frozen=True)
class LlmBenchSettings:
    """Everything ``edgebench llm-bench`` can be told (defaults written once, here)."""
    bundles: tuple[str, ...]
    prefill: tuple[int, ...] = DEFAULT_PREFILL
    decode: tuple[int, ...] = DEFAULT_DECODE
    repeats: int = DEFAULT_REPEATS
    warmup: int = 1
    threads: int | None = None
    max_num_tokens: int | None = None
    activation: str | None = None
    weight_cache: str = "disk"
    target: str = "host"                   # "host" | "adb:SERIAL"
    binary: str | None = None              # LiteRT-LM's benchmark binary for a device
    name: str | None = None                # the model name rows carry (default: from the file name)
    agreement: bool = True                 # greedy token agreement between bundles (host only)
    prompt: str = ("edgebench measures how fast a language model reads a prompt and writes its answer on "
                   "this machine and on phones")
    deadline_s: float | None = None        # per process; None: the runner's default
    context: tuple[int, ...] = ()          # --context: prefill depths of a context curve (replace --prefill)
    activations: tuple[str, ...] = ()      # --activation fp32,fp16: an axis (rows per value); () : `activation`
    speculative: tuple[bool, ...] = ()     # --speculative off,on: one value sets it, two are an axis; (): the engine's
    memory_phases: bool = False            # --memory-phases: peak and steady memory of init, prefill, decode
    task_score: int = 0                    # --task-score N: N generated exact-match items per bundle (0: none)
    task_file: str | None = None           # --task-file: the user's own items instead (JSON lines)

    def validate(self) -> None:
        if not self.bundles:
            raise BadInput("no bundle given; pass one or more .litertlm files")
        if not self.prefill or not self.decode:
            raise BadInput("--prefill and --decode need at least one token count each (e.g. --prefill 64,256)")
        if self.repeats < 1:
            raise BadInput(f"--repeats must be >= 1, got {self.repeats}")
        if self.weight_cache not in WEIGHT_CACHES:
            raise BadInput(f"--weight-cache {self.weight_cache!r}: use one of {', '.join(WEIGHT_CACHES)}")
        for act in (self.activation, *self.activations):
            if act is not None and act not in ACTIVATIONS:
                raise BadInput(f"--activation {act!r}: use one of {', '.join(ACTIVATIONS)} (comma-separated for an "
                               "axis: fp32,fp16)")
        if len(set(self.activations)) != len(self.activations) or len(set(self.speculative)) != len(self.speculative):
            raise BadInput("--activation / --speculative: each value once (e.g. --activation fp32,fp16)")
        if any(c < 1 for c in self.context):
            raise BadInput(f"--context depths must be positive token counts, got {list(self.context)}")
        if self.threads is not None and self.threads < 1:
            raise BadInput(f"--threads must be >= 1, got {self.threads}")
        if self.memory_phases and self.target != "host":
            raise BadInput(f"--memory-phases runs on the host (the Engine/Session API); this run's target is "
                           f"{self.target}: use --target host or leave out --memory-phases")
        if self.task_score < 0:
            raise BadInput(f"--task-score must be a number of items >= 0, got {self.task_score}")
        if self.wants_task_score and self.target != "host":
            raise BadInput(f"--task-score runs on the host (greedy decoding through the Python API); this run's "
                           f"target is {self.target}: use --target host or leave out --task-score/--task-file")

    @property
    def variants(self) -> list[tuple[str | None, bool | None]]:
        """(activation, speculative) of each engine-option combination; the first is the reference."""
        acts = self.activations or (self.activation,)
        specs: tuple[bool | None, ...] = self.speculative or (None,)
        return [(a, sp) for sp in specs for a in acts]

    def with_variant(self, variant: tuple[str | None, bool | None]) -> "LlmBenchSettings":
        return replace(self, activation=variant[0], activations=(), speculative=() if variant[1] is None
                       else (variant[1],))

    @property
    def speculative_one(self) -> bool | None:
        return self.speculative[0] if len(self.speculative) == 1 else None

    @property
    def wants_task_score(self) -> bool:
        return self.task_score > 0 or self.task_file is not None

    @property
    def shapes(self) -> list[tuple[int, int]]:
        return [(p, d) for p in (self.context or self.prefill) for d in self.decode]

    def to_dict(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out.update(bundles=list(self.bundles), prefill=list(self.context or self.prefill), decode=list(self.decode),
                   context=list(self.context), activations=list(self.activations), speculative=list(self.speculative))
        return out


def effective_context(bundle: BundleInfo, max_num_tokens: int | None) -> tuple[int | None, str | None]:
    """The context the engine will enforce and, when ``--max-num-tokens`` asks for more than the
    bundle holds, the warning that says it is ignored (the engine "uses the model limit")."""
    ctx = bundle.context_tokens
    if max_num_tokens is None:
        return ctx, None
    if ctx is None:
        return max_num_tokens, None
    if max_num_tokens > ctx:
        return ctx, (f"--max-num-tokens {max_num_tokens} > the bundle's context {ctx}: the engine keeps the "
                     f"bundle's {ctx} (its KV cache is exported at that size)")
    return max_num_tokens, None


def _failed(base: dict[str, Any], llm: LlmPart, message: str, exit_code: int, *, error_type: str = "BadInput",
            repeats: list[dict[str, Any]] | None = None, warnings: tuple[str, ...] = ()) -> InferenceRow:
    return InferenceRow(**base, status="failed", error=message, exit_code=exit_code, error_type=error_type,
                        llm=llm, repeats=tuple(repeats) if repeats else None, warnings=warnings)


def job_for(settings: LlmBenchSettings, bundle: BundleInfo, prefill: int, decode: int, cache_dir: str) -> LmJob:
    return LmJob(bundle=bundle.path, prefill_tokens=prefill, decode_tokens=decode, threads=settings.threads,
                 max_num_tokens=settings.max_num_tokens, activation=settings.activation, cache_dir=cache_dir,
                 warmup=settings.warmup, speculative=settings.speculative_one, memory_phases=settings.memory_phases)


def _spread_warnings(stats: dict[str, Spread], n: int) -> list[str]:
    out = []
    for key, label in (("decode_tok_s", "decode tok/s"), ("prefill_tok_s", "prefill tok/s"), ("ttft_ms", "TTFT")):
        s = stats.get(key)
        if s is None or len(s.values) < 2 or min(s.values) <= 0:
            continue
        ratio = max(s.values) / min(s.values)
        if ratio >= SPREAD_WARN_RATIO:
            unit = "ms" if key == "ttft_ms" else "tok/s"
            out.append(f"processes disagree: {label} {fmt_metric(unit, min(s.values))}-{fmt_metric(unit, max(s.values))} "
                       f"{unit} ({ratio:.2f}x apart) "
                       f"over {n} processes; the machine was busy or changing clocks: rerun on an idle machine or "
                       "with more --repeats before trusting a small change")
    return out


class ShapeRun:
    """One bundle at one shape: its processes, added one at a time (``step``) so several bundles can
    alternate process by process, and the row they make (``row``)."""

    def __init__(self, runner: LmRunner, bundle: BundleInfo, prefill: int, decode: int, settings: LlmBenchSettings,
                 cache_dir: str) -> None:
        self.runner, self.bundle, self.prefill, self.decode, self.settings = runner, bundle, prefill, decode, settings
        self.cache_dir = cache_dir
        self.name = settings.name or model_name(bundle.path)
        self.ctx, ctx_warning = effective_context(bundle, settings.max_num_tokens)
        self.warnings = [w for w in (ctx_warning, emulation_warning(runner.fingerprint())) if w]
        self.llm = LlmPart(prefill_tokens=prefill, decode_tokens=decode, context_tokens=self.ctx,
                           bundle_context_tokens=bundle.context_tokens, max_num_tokens=settings.max_num_tokens,
                           backend="cpu", activation=settings.activation, weight_cache=settings.weight_cache,
                           warmup=settings.warmup, source=runner.source, model_type=bundle.model_type,
                           bundle_version=bundle.version, speculative=settings.speculative_one,
                           memory_phases=True if settings.memory_phases else None)
        self.base = dict(target=runner.name, model=self.name, model_path=bundle.path, model_sha256=bundle.sha256,
                         size_bytes=bundle.size_bytes, precision=bundle.precision, precision_found=bundle.precision,
                         precision_detail=bundle.precision_detail, threads=settings.threads, method=METHOD,
                         device_model=runner.device_model, fingerprint=runner.fingerprint())
        self.runs: list[ProcessRun] = []
        self.records: list[dict[str, Any]] = []
        self.first_started: float | None = None     # time.monotonic() of this row's first process
        self.failed: InferenceRow | None = None
        limit = "--max-num-tokens" if settings.max_num_tokens is not None and self.ctx == settings.max_num_tokens \
            and self.ctx != bundle.context_tokens else "the bundle's context"
        why = check_shape(prefill, decode, self.ctx, limit_from=limit)
        if why is not None:
            self.failed = _failed(self.base, self.llm, f"{why} ({bundle.name}); ask for fewer tokens "
                                  "(--prefill/--decode)", 2, warnings=tuple(self.warnings))

    @property
    def done(self) -> bool:
        return self.failed is not None or len(self.records) >= self.settings.repeats

    def step(self, progress: Callable[[str], None] | None = None) -> None:
        """Run the next process; a failure ends this row (a failed row keeping the processes run)."""
        k = len(self.records)
        began = time.monotonic()
        self.first_started = began if self.first_started is None else self.first_started
        if progress:
            opts = "" if len(self.settings.variants) > 1 or self.llm.options == "engine defaults" \
                else f" ({self.llm.options})"
            progress(f"{self.name} {self.bundle.precision or ''}{opts} {self.prefill}+{self.decode} tokens "
                     f"(process {k + 1}/{self.settings.repeats})")
        try:
            run = self.runner.run(job_for(self.settings, self.bundle, self.prefill, self.decode, self.cache_dir),
                                  first=(k == 0))
        except EdgebenchError as err:
            self.failed = _failed(self.base, self.llm, str(err), err.exit_code, error_type=type(err).__name__,
                                  repeats=self.records, warnings=tuple(self.warnings))
            return
        verdict = judge(run.measured, prefill=self.prefill, decode=self.decode, context=self.ctx,
                        bundle=self.bundle.name, speculative=self.settings.speculative_one)
        phases = run.facts.get("phases") if isinstance(run.facts.get("phases"), dict) else {}
        if phases.get("error") and not any("memory per phase" in w for w in self.warnings):
            self.warnings.append(f"memory per phase not measured: {phases['error']}")
        self.records.append({"process": k + 1, "started_s": round(began - self.first_started, 3),
                             **run.measured.to_record(), "peak_rss_bytes": run.peak_rss_bytes,
                             "rss_before_engine_bytes": run.rss_before_bytes,
                             **{key: phases[key] for key in PHASE_METRICS if phases.get(key)},
                             "status": "ok" if verdict is None else "failed"})
        self.runs.append(run)
        if verdict is not None:
            self.failed = _failed(self.base, self.llm, verdict.message, verdict.exit_code,
                                  error_type="BadInput" if verdict.exit_code == 2 else "InfraError",
                                  repeats=self.records, warnings=tuple(self.warnings))

    def row(self) -> InferenceRow:
        if self.failed is not None:
            return self.failed
        records, runs = self.records, self.runs
        stats = {k: s for k in (*LLM_METRICS, *PHASE_METRICS) if (s := Spread.of([r.get(k) for r in records]))
                 is not None}
        warm = [r.warmups[0] for r in runs if r.warmups]
        warm_stats = {k: s for k in ("init_ms", "ttft_ms", "prefill_tok_s", "decode_tok_s")
                      if (s := Spread.of([getattr(g, k) for g in warm])) is not None}
        warnings = [*self.warnings, *_spread_warnings(stats, len(records))]
        peaks = [r["peak_rss_bytes"] for r in records if r.get("peak_rss_bytes")]
        befores = [r["rss_before_engine_bytes"] for r in records if r.get("rss_before_engine_bytes")]
        memory = None
        if peaks:
            memory = {"load_and_run_peak_rss_bytes": int(statistics.median(peaks)),
                      "rss_before_engine_bytes": int(statistics.median(befores)) if befores else None,
                      "what": self.runner.memory_note}
        version = next((r.version for r in runs if r.version), None)
        runtime = f"{self.runner.runtime} {version}" if version else self.runner.runtime
        return InferenceRow(**self.base, status="ok", runtime=runtime, threads_effective=self.settings.threads,
                            init_ms=stats["init_ms"].median if "init_ms" in stats else None,
                            peak_rss_bytes=memory["load_and_run_peak_rss_bytes"] if memory else None, memory=memory,
                            repeats=tuple(records), warnings=tuple(warnings),
                            llm=LlmPart(**{**{f.name: getattr(self.llm, f.name) for f in fields(self.llm)},
                                           "stats": stats, "warmup_stats": warm_stats,
                                           "engine_version": version}))


def bench_shape(runs: Sequence[ShapeRun], progress: Callable[[str], None] | None = None) -> list[InferenceRow]:
    """The rows of one shape: process 1 of every bundle, then process 2 of every bundle ... (A/B
    alternated, so a change of the machine's load during the run reaches every bundle alike)."""
    while not all(r.done for r in runs):
        for r in runs:
            if not r.done:
                r.step(progress)
    return [r.row() for r in runs]


def _not_run(settings: LlmBenchSettings, bundle: BundleInfo, prefill: int, decode: int, target: str,
             signal_name: str) -> InferenceRow:
    return InferenceRow(target=target, model=settings.name or model_name(bundle.path), model_path=bundle.path,
                        model_sha256=bundle.sha256, precision=bundle.precision, status="failed",
                        error=f"not run: interrupted ({signal_name}) before this row", exit_code=None,
                        error_type="Interrupted",
                        llm=LlmPart(prefill_tokens=prefill, decode_tokens=decode, context_tokens=bundle.context_tokens,
                                    bundle_context_tokens=bundle.context_tokens, max_num_tokens=settings.max_num_tokens,
                                    backend="cpu", activation=settings.activation, weight_cache=settings.weight_cache,
                                    speculative=settings.speculative_one))


def run_llm_bench(settings: LlmBenchSettings, progress: Callable[[str], None] | None = None) -> Document:
    """Every bundle x shape (see the module docstring); Ctrl-C/SIGTERM keep the rows measured before it."""
    settings.validate()
    bundles = [read_bundle(b) for b in settings.bundles]          # bad files fail up front
    if settings.task_file:
        llm_tasks.load(settings.task_file)                        # a bad task file fails up front too
    runner = resolve_runner(settings.target, settings.binary, deadline_s=settings.deadline_s)
    variants = [settings.with_variant(v) for v in settings.variants]
    if hasattr(progress, "set_total"):
        progress.set_total(len(bundles) * len(settings.shapes) * len(variants))
    rows: list[InferenceRow] = []
    interrupted: str | None = None
    cache_root = tempfile.mkdtemp(prefix="edgebench-llm-cache-") if settings.weight_cache == "disk" else None
    try:
        caches: dict[tuple[int, int], str] = {}
        for i in range(len(bundles)):
            for k in range(len(variants)):       # one cache per bundle and engine options: packed weights differ
                name = f"b{i}" if k == 0 else f"b{i}v{k}"
                caches[i, k] = ":nocache" if cache_root is None else str(Path(cache_root) / name)
                if cache_root is not None:
                    Path(caches[i, k]).mkdir(exist_ok=True)
        for prefill, decode in settings.shapes:
            if interrupted:
                rows.extend(_not_run(v, b, prefill, decode, runner.name, interrupted) for v in variants for b in bundles)
                continue
            try:        # every bundle under every engine option alternates process by process
                rows.extend(bench_shape([ShapeRun(runner, b, prefill, decode, v, caches[i, k])
                                         for k, v in enumerate(variants) for i, b in enumerate(bundles)], progress))
            except KeyboardInterrupt as exc:
                interrupted = interrupt_name(exc)
                rows.extend(_not_run(v, b, prefill, decode, runner.name, interrupted) for v in variants for b in bundles)
        comparison = task_doc = options_doc = None
        if len(bundles) > 1 and not interrupted:
            rows, comparison = llm_compare.compare_precisions(rows, bundles, runner, variants[0], progress)
        if len(variants) > 1 and not interrupted:
            rows, options_doc = llm_compare.compare_options(rows, bundles, runner, variants, progress)
        if settings.wants_task_score and not interrupted:
            for v in variants:                   # a score per bundle and engine options
                rows, part = llm_tasks.score_bundles(rows, bundles, runner, v, progress, label=len(variants) > 1)
                if task_doc is None:
                    task_doc = part
                else:
                    task_doc["scores"].update(part["scores"])
                    task_doc["errors"].update(part["errors"])
    finally:
        runner.close()
        if cache_root is not None:
            shutil.rmtree(cache_root, ignore_errors=True)
    fp = {**host_fingerprint(threads=settings.threads), **runner.fingerprint()}
    return Document.new("llm-bench", rows, fp, settings=settings.to_dict(),
                        bundles=[b.to_dict() for b in bundles], comparison=comparison,
                        **({"task_score": task_doc} if task_doc is not None else {}),
                        **({"engine_options": options_doc} if options_doc is not None else {}),
                        interrupted=interrupted is not None, interrupted_by=interrupted)


def raise_for_failures(doc: Document) -> None:
    """After the results were stored and shown: the worst failed row's error (3 over 2)."""
    failed = [r for r in doc.rows if r.status == "failed" and r.exit_code is not None]
    if not failed:
        return
    worst = max(failed, key=lambda r: r.exit_code or 3)
    msg = worst.error or "llm-bench failed"
    if len(failed) > 1:
        msg += f" (and {len(failed) - 1} more failed row(s))"
    raise (BadInput if worst.exit_code == 2 else InfraError)(msg)
