"""The LiteRT-LM worker: one process per repeat of ``llm-bench`` on this machine.

Run by ``targets.litert_lm.host`` as ``python -m edgebench.targets.litert_lm.worker JOB`` in its own
session, started and killed like the LiteRT runner (``host.spawn_worker``): the engine (a 130 MB
native library) crashes or hangs this process, never the CLI. ``JOB`` is a JSON file::

    {"mode": "bench", "bundle": "m.litertlm", "prefill_tokens": 64, "decode_tokens": 32,
     "threads": null | 2, "max_num_tokens": null | 256, "activation": null | "fp32" | "fp16" | "int16" | "int8",
     "cache_dir": ":nocache" | "<folder>", "warmup": 1, "speculative": null | true | false, "out_dir": "..."}
    {"mode": "greedy", "bundle": ..., "prompt": "text", "decode_tokens": 32, "threads": ..., ...}
    {"mode": "tasks", "bundle": ..., "prompts": ["text", ...], "decode_tokens": 16, "threads": ..., ...}

``bench`` runs ``warmup`` generations and then the measured one, each through the engine's own
benchmark mode (``litert_lm.Benchmark``: a fresh engine and session, exactly ``prefill_tokens`` prompt
tokens, exactly ``decode_tokens`` decode steps unless the engine stops), and writes ``result.json``
with each generation's ``BenchmarkInfo`` (init, TTFT, prefill/decode token counts and tok/s), the
engine's error lines (native ``Failed to ...: CODE: message``, which ``Benchmark.run`` logs but does
not raise), the context the engine says the graph supports, and the process's resident memory before
the first engine and at its peak. It judges nothing: zero tokens and engine errors are the parent's
to turn into a failed row (``targets.litert_lm.judge``), the same judge the device log goes through.

With ``"memory_phases": true`` a bench process first measures resident memory per phase (init,
prefill, decode) through the Engine/Session API (``run_phases``; ``result.json``'s ``phases``), then
resets the peak so the generations' ``peak_rss_bytes`` is theirs alone.

``greedy`` decodes ``prompt`` with greedy sampling (top-k 1) and returns the pieces the engine
streamed, one per decode step, for the precision comparison's token agreement. ``tasks`` does the
same for each of ``prompts`` (one engine, a fresh session per prompt) and returns each output's
text, for the task score (``llm.tasks`` scores it; the worker judges nothing).

Exit status 0 ok, 2 bad input (no litert_lm, a bundle the engine cannot open), 3 internal failure.
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
import time
from importlib import metadata
from typing import Any, Callable

from edgebench.targets.runner import _sibling

rt = _sibling("runner_io")   # the worker contract (serve_job, JobError, rss_bytes), shared with runner.py

ACTIVATIONS = {"fp32": "FLOAT32", "fp16": "FLOAT16", "int16": "INT16", "int8": "INT8"}
_ENGINE_ERROR = re.compile(r"Failed to (generate content|create engine|create session)[^:]*: ([A-Z_]+): ([^\n]*)")
_MODEL_LIMIT = re.compile(r"larger than what the static model supports \((\d+)\)")
_RET_CHECK = re.compile(r"RET_CHECK failure \([^)]*\) ([^\n]*)")


def _engine_options(lm, job: dict[str, Any]) -> dict[str, Any]:
    """The engine options a job sets (activation data type, speculative decoding); unset: the engine's."""
    act, spec = job.get("activation"), job.get("speculative")
    out: dict[str, Any] = {"activation_data_type": getattr(lm.ActivationDataType, ACTIVATIONS[act]) if act else None}
    if spec is not None:
        out["enable_speculative_decoding"] = bool(spec)
    return out


def _litert_lm():
    try:
        import litert_lm
    except ImportError as exc:
        raise rt.JobError(f"the litert_lm Python API is not installed ({exc}); pip install 'edgebench[llm]'")
    return litert_lm


def _version() -> str | None:
    try:
        return metadata.version("litert-lm-api")
    except Exception:  # noqa: BLE001 -- a fact, not a requirement
        return None


def captured(fn: Callable[[], Any]) -> tuple[Any, str, BaseException | None]:
    """``fn()`` with file descriptor 2 redirected to a temporary file: the engine's native log
    lines (what ``Benchmark.run`` does not raise) come back as text, and are still copied to this
    worker's stderr afterwards."""
    sys.stderr.flush()
    saved = os.dup(2)
    result, error = None, None
    with tempfile.TemporaryFile() as tmp:
        os.dup2(tmp.fileno(), 2)
        try:
            result = fn()
        except Exception as exc:  # noqa: BLE001 -- the engine's RuntimeError is data for the judge
            error = exc
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
        tmp.seek(0)
        text = tmp.read().decode("utf-8", "replace")
    sys.stderr.write(text)
    return result, text, error


def engine_errors(text: str) -> list[dict[str, str]]:
    """The native ``Failed to <what>: <CODE>: <message>`` lines, in order, without repeats."""
    out: list[dict[str, str]] = []
    for what, code, msg in _ENGINE_ERROR.findall(text):
        item = {"what": what, "code": code, "message": msg.strip()}
        if item not in out:
            out.append(item)
    return out


def _bench_once(lm, job: dict[str, Any]) -> dict[str, Any]:
    backend = lm.interfaces.CPU(thread_count=job.get("threads"))
    bench = lm.Benchmark(job["bundle"], backend=backend, prefill_tokens=int(job["prefill_tokens"]),
                         decode_tokens=int(job["decode_tokens"]), max_num_tokens=job.get("max_num_tokens"),
                         cache_dir=job.get("cache_dir") or ":nocache", **_engine_options(lm, job))
    t0 = time.perf_counter()
    info, text, error = captured(bench.run)
    wall = time.perf_counter() - t0
    limits = [int(x) for x in _MODEL_LIMIT.findall(text)]
    checks = _RET_CHECK.findall(text)
    out: dict[str, Any] = {"wall_s": wall, "engine_errors": engine_errors(text),
                           "engine_context_limit": limits[0] if limits else None,
                           "engine_check": checks[0].strip() if checks else None,
                           "exception": None if error is None else f"{type(error).__name__}: {error}"}
    if info is not None:
        out.update(init_s=float(info.init_time_in_second), ttft_s=float(info.time_to_first_token_in_second),
                   prefill_tokens=int(info.last_prefill_token_count),
                   prefill_tok_s=float(info.last_prefill_tokens_per_second),
                   decode_tokens=int(info.last_decode_token_count),
                   decode_tok_s=float(info.last_decode_tokens_per_second))
    return out


def _hwm_and_rss() -> tuple[int | None, int | None]:
    """(VmHWM, VmRSS) from one read of /proc/self/status, so the peak is never below the current."""
    got: dict[str, int] = {}
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                key = line.split(":", 1)[0]
                if key in ("VmHWM", "VmRSS"):
                    got[key] = int(line.split()[1]) * 1024
    except OSError:
        return rt.rss_bytes("VmHWM"), rt.rss_bytes("VmRSS")
    return got.get("VmHWM"), got.get("VmRSS")


def _phase_prompt(engine, tokens: int) -> tuple[str, int]:
    """Text of about ``tokens`` tokens (the agreement-style sentence repeated, cut by token ids) and its count."""
    base = "edgebench measures how fast a language model reads a prompt and writes its answer "
    ids = engine.tokenize(base * (tokens // 4 + 2))[:tokens]
    text = engine.detokenize(ids)
    return text, len(engine.tokenize(text))


def run_phases(lm, job: dict[str, Any]) -> dict[str, Any]:
    """Resident memory per phase through the Engine/Session API (``Benchmark.run`` runs all three in
    one call): the peak (VmHWM, reset before each phase) and the steady (VmRSS at its end) of init
    (engine and session creation), prefill (a text prompt of about ``prefill_tokens`` tokens) and
    decode (``decode_tokens`` greedy steps)."""
    out: dict[str, Any] = {"hwm_reset": rt.reset_peak_rss()}

    def mark(phase: str) -> None:
        out[f"{phase}_peak_bytes"], out[f"{phase}_steady_bytes"] = _hwm_and_rss()
        rt.reset_peak_rss()

    def measure() -> None:
        engine = lm.Engine(job["bundle"], backend=lm.interfaces.CPU(thread_count=job.get("threads")),
                           max_num_tokens=job.get("max_num_tokens"), cache_dir=job.get("cache_dir") or ":nocache",
                           **_engine_options(lm, job))
        try:
            session = engine.create_session(apply_prompt_template=False,
                                            sampler_config=lm.SamplerConfig(top_k=1, temperature=0.0, seed=0),
                                            max_output_tokens=int(job["decode_tokens"]))
            try:
                mark("init")
                text, n = _phase_prompt(engine, int(job["prefill_tokens"]))
                out["prefill_text_tokens"] = n
                session.run_prefill([text])
                mark("prefill")
                out["decode_steps"] = sum(1 for _ in session.run_decode_async())
                mark("decode")
            finally:
                session.close()
        finally:
            engine.close()

    _got, text, error = captured(measure)
    if error is not None:
        errs = engine_errors(text)
        out = {"error": f"{errs[0]['code']}: {errs[0]['message']}" if errs else f"{type(error).__name__}: {error}"}
    rt.reset_peak_rss()                 # the benchmark generations' peak is their own
    return out


def run_bench(job: dict[str, Any]) -> dict[str, Any]:
    lm = _litert_lm()
    lm.set_min_log_severity(lm.LogSeverity.WARNING)    # the errors and "model limit" warnings, not INFO chatter
    rss_before = rt.rss_bytes("VmRSS")
    phases = run_phases(lm, job) if job.get("memory_phases") else None
    warmups = [_bench_once(lm, job) for _ in range(int(job.get("warmup") or 0))]
    measured = _bench_once(lm, job)
    return {"mode": "bench", "warmups": warmups, "measured": measured, "rss_before_bytes": rss_before, "phases": phases,
            "peak_rss_bytes": rt.rss_bytes("VmHWM"), "litert_lm_version": _version(), "pid": os.getpid()}


def _greedy_pieces(lm, engine, prompt: str, decode_tokens: int) -> list[str]:
    """The pieces a fresh session of ``engine`` streams for ``prompt``, greedy (top-k 1), one per step."""
    session = engine.create_session(apply_prompt_template=False,
                                    sampler_config=lm.SamplerConfig(top_k=1, temperature=0.0, seed=0),
                                    max_output_tokens=int(decode_tokens))
    try:
        session.run_prefill([prompt])
        return [r.texts[0] if r.texts else "" for r in session.run_decode_async()]
    finally:
        session.close()


def _with_engine(lm, job: dict[str, Any], use: Callable[[Any], Any]) -> Any:
    def generate() -> Any:
        engine = lm.Engine(job["bundle"], backend=lm.interfaces.CPU(thread_count=job.get("threads")),
                           max_num_tokens=job.get("max_num_tokens"), cache_dir=job.get("cache_dir") or ":nocache",
                           **_engine_options(lm, job))
        try:
            return use(engine)
        finally:
            engine.close()

    got, text, error = captured(generate)
    if error is not None or got is None:
        errs = engine_errors(text)
        why = f"{errs[0]['code']}: {errs[0]['message']}" if errs else f"{type(error).__name__}: {error}"
        checks = _RET_CHECK.findall(text)
        why += f" (the engine's check: {checks[0].strip()})" if checks else ""
        raise rt.JobError(f"greedy decoding of {job['bundle']} failed: {why}", bad_input=bool(errs))
    return got


def run_greedy(job: dict[str, Any]) -> dict[str, Any]:
    lm = _litert_lm()
    lm.set_min_log_severity(lm.LogSeverity.WARNING)
    pieces, n_prompt = _with_engine(lm, job, lambda engine: (
        _greedy_pieces(lm, engine, job["prompt"], int(job["decode_tokens"])), len(engine.tokenize(job["prompt"]))))
    return {"mode": "greedy", "pieces": pieces, "prompt_tokens": n_prompt, "litert_lm_version": _version()}


def run_tasks(job: dict[str, Any]) -> dict[str, Any]:
    lm = _litert_lm()
    lm.set_min_log_severity(lm.LogSeverity.WARNING)
    prompts = [str(p) for p in job.get("prompts") or ()]
    outputs = _with_engine(lm, job, lambda engine: [
        "".join(_greedy_pieces(lm, engine, p, int(job["decode_tokens"]))) for p in prompts])
    return {"mode": "tasks", "outputs": outputs, "litert_lm_version": _version()}


def run_job(job: dict[str, Any]) -> tuple[dict[str, Any], dict]:
    if not os.path.isfile(str(job.get("bundle") or "")):
        raise rt.JobError(f"bundle not found: {job.get('bundle')}")
    if job.get("activation") not in (None, *ACTIVATIONS):
        raise rt.JobError(f"activation {job.get('activation')!r} is not one of {', '.join(ACTIVATIONS)}")
    run = {"greedy": run_greedy, "tasks": run_tasks}.get(str(job.get("mode")), run_bench)
    return run(job), {}


def main(argv: list[str]) -> int:
    return rt.serve_job(argv, lambda job, _path: run_job(job), what="LiteRT-LM worker")


if __name__ == "__main__":
    sys.exit(main(sys.argv))
