"""``llm-bench --task-score N``: a small exact-match task set, generated at run time, greedily decoded
by every bundle and scored per bundle (``rows.llm.TaskScore``), so a quantized bundle that keeps its
speed but loses answers is "worse" on quality in ``results compare`` (the registry's ``task_score``).

The items are made here from a seed, so there is nothing to license and every run of one seed asks
the same questions: **copy** ("Repeat exactly: fox lamp river" -> "fox lamp river") and **addition**
("Question: 37 + 45 = ? Answer:" -> "82"), alternating. ``--task-file`` replaces them with the user's
own (JSON lines ``{"prompt": ..., "answer": ...}``). An output is right when, with its whitespace
collapsed, it is the answer or starts with the answer followed by a space or punctuation (a model may
go on talking after the answer; greedy decoding stops at ``TASK_DECODE`` tokens).

On a random-weight test bundle (tests/fixtures/llm) the score checks the machinery -- the prompts,
the greedy decoding, the scoring, its storage and its verdict -- not a model: such a bundle answers
nothing right, and a score there says nothing about any real model's quality.
"""

from __future__ import annotations

import json
import random
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Sequence

from edgebench.core.errors import BadInput, EdgebenchError
from edgebench.model.litertlm_file import BundleInfo
from edgebench.rows import InferenceRow, TaskScore
from edgebench.targets.litert_lm.host import LmJob

TASK_SEED = 47          # the generated set's seed: every run asks the same questions
TASK_DECODE = 16        # greedy tokens per item: an answer of a few words fits
MACHINERY_NOTE = ("on a random-weight test bundle the task score checks the machinery (prompts, greedy decoding, "
                  "scoring, storage, compare), not a model")
# Short, common words: each one or a few tokens in any real tokenizer.
_WORDS = ("fox", "lamp", "river", "stone", "green", "seven", "table", "cloud", "bread", "north", "music", "paper",
          "winter", "apple", "horse", "glass", "light", "sugar", "train", "house")


def generate(n: int, seed: int = TASK_SEED) -> list[dict[str, str]]:
    """``n`` items, copy and addition alternating, deterministic from ``seed``."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        if i % 2 == 0:
            words = " ".join(rng.sample(_WORDS, 3))
            out.append({"kind": "copy", "prompt": f"Repeat exactly: {words}\nOutput:", "answer": words})
        else:
            a, b = rng.randint(10, 59), rng.randint(10, 39)
            out.append({"kind": "addition", "prompt": f"Question: {a} + {b} = ? Answer:", "answer": str(a + b)})
    return out


def load(path: str) -> list[dict[str, str]]:
    """A task file: JSON lines of ``{"prompt": "...", "answer": "..."}`` (``kind`` optional)."""
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise BadInput(f"--task-file {path}: cannot read it ({exc.strerror or exc}); pass a JSON-lines file")
    out = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError as exc:
            raise BadInput(f"--task-file {path} line {n}: not JSON ({exc.msg}); write one "
                           '{"prompt": "...", "answer": "..."} per line')
        if not isinstance(item, dict) or not isinstance(item.get("prompt"), str) or not isinstance(
                item.get("answer"), str) or not item["answer"].strip():
            raise BadInput(f'--task-file {path} line {n}: needs a "prompt" string and a non-empty "answer" string')
        out.append({"kind": str(item.get("kind") or "file"), "prompt": item["prompt"], "answer": item["answer"]})
    if not out:
        raise BadInput(f"--task-file {path}: no items; write one {{\"prompt\": ..., \"answer\": ...}} per line")
    return out


def describe(settings: Any) -> str:
    if settings.task_file:
        return f"file {Path(settings.task_file).name}"
    n = settings.task_score
    return f"generated: {(n + 1) // 2} copy + {n // 2} addition, seed {TASK_SEED}"


def is_correct(output: str, answer: str) -> bool:
    """Exact match, whitespace collapsed: the answer, or the answer followed by a space or punctuation."""
    got, want = " ".join(output.split()), " ".join(answer.split())
    if not got.startswith(want):
        return False
    rest = got[len(want):]
    return not rest or not rest[0].isalnum()


def score(items: Sequence[dict[str, str]], outputs: Sequence[str], task_set: str) -> TaskScore:
    scored = [{**it, "output": out, "correct": is_correct(out, it["answer"])} for it, out in zip(items, outputs)]
    return TaskScore(sum(1 for s in scored if s["correct"]), len(items), task_set, tuple(scored))


def task_items(settings: Any) -> list[dict[str, str]]:
    return load(settings.task_file) if settings.task_file else generate(settings.task_score)


def score_bundles(rows: list[InferenceRow], bundles: Sequence[BundleInfo], runner: Any, settings: Any,
                  progress: Callable[[str], None] | None = None, *, label: bool = False,
                  ) -> tuple[list[InferenceRow], dict[str, Any]]:
    """(rows with ``llm.task_score`` on every ok row of each bundle run with ``settings``' engine
    options, the document's ``task_score`` part; ``label``: name the options beside each bundle)."""
    spec = settings.speculative_one
    tag = "" if not label else " (" + ", ".join(x for x in (
        f"activation {settings.activation}" if settings.activation else "",
        "" if spec is None else f"speculative {'on' if spec else 'off'}") if x) + ")"
    items = task_items(settings)
    task_set = describe(settings)
    scores: dict[str, TaskScore] = {}
    errors: dict[str, str] = {}
    for b in bundles:
        if progress:
            progress(f"task score of {b.name} ({len(items)} items, greedy)")
        try:
            outputs = runner.tasks(LmJob(bundle=b.path, prefill_tokens=0, decode_tokens=TASK_DECODE,
                                         threads=settings.threads, max_num_tokens=settings.max_num_tokens,
                                         activation=settings.activation, warmup=0, speculative=spec,
                                         prompts=tuple(i["prompt"] for i in items)))
        except EdgebenchError as err:
            errors[b.sha256] = str(err)
            continue
        scores[b.sha256] = score(items, outputs, task_set)
    out = [r.replace(llm=replace(r.llm, task_score=scores[r.model_sha256]))
           if r.llm is not None and r.ok and r.model_sha256 in scores and r.llm.activation == settings.activation
           and r.llm.speculative == spec else r for r in rows]
    doc = {"task_set": task_set, "items": len(items), "decode_tokens": TASK_DECODE, "note": MACHINERY_NOTE,
           "scores": {b.name + tag: (scores[b.sha256].to_dict() if b.sha256 in scores else None) for b in bundles},
           "errors": {b.name + tag: errors[b.sha256] for b in bundles if b.sha256 in errors}}
    return out, doc
