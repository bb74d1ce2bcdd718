"""``edgebench llm-bench``: TTFT, prefill/decode tok/s, init and peak memory of LiteRT-LM bundles."""

from __future__ import annotations

from typing import Annotated, List, Optional

import typer

from edgebench.cli._common import console, deliver, progress_reporter, split_csv, split_ints
from edgebench.cli._options import DbOpt, JsonOpt, MarkdownOpt, NoStoreOpt, PushgatewayOpt, WideOpt, publish_options
from edgebench.core.errors import BadInput
from edgebench.llm.bench import (
    DEFAULT_DECODE,
    DEFAULT_PREFILL,
    DEFAULT_REPEATS,
    LlmBenchSettings,
    raise_for_failures,
    run_llm_bench,
)
from edgebench.report.publish import check_store
from edgebench.report.terminal.llm import render_llm_bench


def _csv(values: tuple[int, ...]) -> str:
    return ",".join(str(v) for v in values)


def _on_off(value: str | None) -> tuple[bool, ...]:
    words = {"on": True, "off": False}
    items = split_csv(value, option="--speculative") if value else []
    bad = [v for v in items if v not in words]
    if bad:
        raise BadInput(f"--speculative {value!r}: use on, off or off,on")
    return tuple(words[v] for v in items)


def register(app: typer.Typer) -> None:
    @app.command("llm-bench")
    def llm_bench_cmd(
        bundles: Annotated[List[str], typer.Argument(
            help="One or more .litertlm bundles (the fp32 and int8 bundles of one model: compared side by side).")],
        prefill: Annotated[str, typer.Option(
            "--prefill", help="Prompt lengths in tokens, comma-separated (one row each).")] = _csv(DEFAULT_PREFILL),
        context: Annotated[Optional[str], typer.Option(
            "--context", help="A context curve: prefill depths in tokens, comma-separated (e.g. 32,64,128,224; "
                              "replaces --prefill): one row per depth, each with intervals, and a curve table.")] = None,
        decode: Annotated[str, typer.Option(
            "--decode", help="Tokens to decode, comma-separated.")] = _csv(DEFAULT_DECODE),
        repeats: Annotated[int, typer.Option(
            "--repeats", help="Processes per row, one after another: the medians' intervals and `results compare` "
                              "come from them (>= 3).")] = DEFAULT_REPEATS,
        warmup: Annotated[int, typer.Option(
            "--warmup", help="Warm-up generations before the measured one (per process on the host; invocations "
                             "before the repeats on a device).")] = 1,
        threads: Annotated[Optional[int], typer.Option(
            "--threads", help="CPU threads of the engine (default: the engine's).")] = None,
        max_num_tokens: Annotated[Optional[int], typer.Option(
            "--max-num-tokens", help="Context the engine may allocate (default and maximum: the bundle's).")] = None,
        activation: Annotated[Optional[str], typer.Option(
            "--activation", help="Activation data type: fp32, fp16, int16, int8 (default: the engine's); a "
                                 "comma list (fp32,fp16) is an axis: rows per value, token agreement with the "
                                 "first.")] = None,
        speculative: Annotated[Optional[str], typer.Option(
            "--speculative", help="Speculative decoding: on, off, or off,on (an axis like --activation; default: "
                                  "the engine's). A bundle without a drafter fails its 'on' rows, saying so.")] = None,
        weight_cache: Annotated[str, typer.Option(
            "--weight-cache", help="disk: XNNPACK's packed weights cached in a private folder for the run (the "
                                   "warm-up fills it); none: every engine packs them again.")] = "disk",
        target: Annotated[str, typer.Option(
            "--target", help="host (litert_lm Python API) or adb:SERIAL (LiteRT-LM's benchmark binary).")] = "host",
        llm_binary: Annotated[Optional[str], typer.Option(
            "--llm-binary", help="LiteRT-LM's benchmark binary for an adb target (litert_lm_advanced_main or "
                                 "litert_lm_main), or $EDGEBENCH_LITERT_LM_BINARY.")] = None,
        name: Annotated[Optional[str], typer.Option(
            "--name", help="Model name for the rows (default: the file name without its precision tag).")] = None,
        agreement: Annotated[bool, typer.Option(
            "--agreement/--no-agreement", help="Greedy token agreement between the bundles (host).")] = True,
        memory_phases: Annotated[bool, typer.Option(
            "--memory-phases", help="Also measure peak and steady memory of init, prefill and decode per process "
                                    "(Engine/Session API, before the benchmark generations; host).")] = False,
        task_score: Annotated[int, typer.Option(
            "--task-score", help="Score each bundle on N generated exact-match items (copy and addition, seed 47, "
                                 "greedy; host). On a random-weight test bundle it checks the machinery, not a "
                                 "model.")] = 0,
        task_file: Annotated[Optional[str], typer.Option(
            "--task-file", help="Your own task items instead: JSON lines of {\"prompt\": ..., \"answer\": ...} "
                                "(exact match).")] = None,
        json_path: JsonOpt = None,
        markdown: MarkdownOpt = None,
        db: DbOpt = None,
        no_store: NoStoreOpt = False,
        pushgateway: PushgatewayOpt = None,
        wide: WideOpt = False,
    ) -> None:
        """Benchmark LiteRT-LM bundles: TTFT, prefill/decode tok/s, init, peak memory, with repeats and intervals."""
        acts = split_csv(activation, option="--activation") if activation else []
        settings = LlmBenchSettings(
            bundles=tuple(bundles), prefill=tuple(split_ints(prefill, option="--prefill")),
            decode=tuple(split_ints(decode, option="--decode")), repeats=repeats, warmup=warmup, threads=threads,
            max_num_tokens=max_num_tokens, activation=acts[0] if len(acts) == 1 else None,
            activations=tuple(acts) if len(acts) > 1 else (), speculative=_on_off(speculative),
            weight_cache=weight_cache, target=target,
            binary=llm_binary, name=name, agreement=agreement,
            context=tuple(split_ints(context, option="--context")) if context else (),
            task_score=task_score, task_file=task_file, memory_phases=memory_phases)
        settings.validate()
        opts = publish_options(json_path=json_path, db=db, no_store=no_store, pushgateway=pushgateway,
                               markdown=markdown)
        check_store(opts)
        with progress_reporter("llm-bench") as say:
            doc = run_llm_bench(settings, progress=say)
        width = console().width
        doc = deliver(doc, opts, lambda d: render_llm_bench(d, width=width, wide=wide), json_path=json_path)
        raise_for_failures(doc)
