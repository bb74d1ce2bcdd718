"""``--keep-float auto``: the smallest set of ranked int8 tensors kept float that meets an accuracy
goal, proven by measuring every candidate on the host against the TensorFlow reference. Below
``convert`` (which runs it for ``--keep-float auto``): it receives the calibrated model and a typed
``KeepFloatGoal`` and never imports a workflow."""

from __future__ import annotations

import math
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from edgebench.judge import drift as cmp
from edgebench.model.inputs import DEFAULT_PREPROCESS, cast_to_signature
from edgebench.core.errors import BadInput, InfraError
from edgebench.convert.quant.keep_float import keep_float_nodes, quantize_keep_float
from edgebench.convert.quant.layers import rank_layers, run_worker
from edgebench.rows import Latency
from edgebench.model.savedmodel import run_tf
from edgebench.sources.resolve import sample_set
from edgebench.targets.base import DEFAULT_DELEGATE, Job, RunControl
from edgebench.targets.host import HostTarget
from edgebench.model.state_rule import DEFAULT_STATE
from edgebench.model.state_rule import resolve as resolve_state

SEARCH_CANDIDATES = 6          # ranked tensors the keep-float search may keep float
SEARCH_DIAGNOSE_SAMPLES = 100


@dataclass(frozen=True)
class KeepFloatGoal:
    """What ``--keep-float auto`` must reach, and how candidates are measured."""

    max_accuracy_drop_pp: float | None = None
    min_psnr_db: float | None = None
    eval_data: str | None = None          # else the reference model's evaluation split
    eval_samples: int = 1000              # convert-and-compare passes its own --samples
    preprocess: str = DEFAULT_PREPROCESS
    seed: int = 0
    class_output: str | None = None
    threads: int | None = None
    delegate: str = DEFAULT_DELEGATE
    control: RunControl = field(default_factory=RunControl)   # timing of the candidates table
    candidates: int = SEARCH_CANDIDATES
    state: str = DEFAULT_STATE            # --state: the run's state rule (edgebench.model.state_rule)

    def meets(self, cand: dict[str, Any]) -> bool:
        if self.max_accuracy_drop_pp is not None and not (cand.get("top1_drop_pp") is not None
                                                          and cand["top1_drop_pp"] <= self.max_accuracy_drop_pp):
            return False
        if self.min_psnr_db is not None and not (cand.get("psnr_db") is not None
                                                 and cand["psnr_db"] >= self.min_psnr_db):
            return False
        return True

    def describe(self) -> str:
        parts = []
        if self.max_accuracy_drop_pp is not None:
            parts.append(f"top-1 drop <= {self.max_accuracy_drop_pp:g} pp")
        if self.min_psnr_db is not None:
            parts.append(f"PSNR >= {self.min_psnr_db:g} dB")
        return " and ".join(parts)


ACCURACY_ONLY = RunControl(runs=1, min_runs=1, min_time_s=0.0, warmup_runs=1)
SEARCH_METHOD = (f"greedy forward selection over the top-{SEARCH_CANDIDATES} tensors of the diagnose ranking: "
                 "each step keeps float the one candidate that most improves the goal metric (top-1 drop, "
                 "else worst-output PSNR; ties to the smaller model) and stops at the first set that meets the "
                 "goal; each kept tensor's producer and consumers run in float")


SEARCH_STALL_STEPS = 2       # greedy steps in a row that move nothing end the search
SEARCH_MIN_GAIN_DB = 0.5     # ... "moves": at least this much PSNR
SEARCH_MIN_GAIN_PP = 0.5     # ... or this many fewer top-1 points lost
FLOAT_PARITY_DB = 100.0      # a PSNR only float arithmetic reaches (fp32 files score 140+ dB)


def _moved(before: dict[str, Any], after: dict[str, Any], goal: KeepFloatGoal) -> bool:
    """Did keeping one more tensor float move the metric the goal is about?"""
    a, b = before.get("psnr_db"), after.get("psnr_db")
    if goal.min_psnr_db is not None and a is not None and b is not None and (b - a >= SEARCH_MIN_GAIN_DB or
                                                                               math.isinf(b) and not math.isinf(a)):
        return True
    da, db_ = before.get("top1_drop_pp"), after.get("top1_drop_pp")
    return goal.max_accuracy_drop_pp is not None and da is not None and db_ is not None and \
        da - db_ >= SEARCH_MIN_GAIN_PP


def _search_set(src, goal: KeepFloatGoal):
    """The search's evaluation samples (the goal's data, else the source's split), cast to the signature."""
    ds = sample_set(src, goal.eval_data, preprocess=goal.preprocess, seed=goal.seed, split="evaluation",
                    samples=max(goal.eval_samples, 1))
    if ds is None:
        raise BadInput("--keep-float auto needs evaluation data: pass --data (convert-and-compare) or --eval-data "
                       "(convert) with real samples, and a 'labels' array for --max-accuracy-drop")
    ds = cast_to_signature(ds, src.signature).take(goal.eval_samples)
    if goal.max_accuracy_drop_pp is not None and ds.labels is None:
        raise BadInput(f"--keep-float auto with --max-accuracy-drop needs labels, but {ds.source} has none; pass "
                       "data with a 'labels' array or search with --min-psnr")
    return ds


def _ranked_tensors(layers: list[dict[str, Any]], graph: dict[str, dict[str, Any]]) -> list[str]:
    """The float tensors of the ranked layers, worst first, that keeping float can change."""
    ranked: list[str] = []
    for l in layers:
        ft = l.get("float_tensor")
        if l.get("scale") and ft in graph and ft not in ranked and not l.get("already_float"):
            ranked.append(ft)
    return ranked


def _stalled(nxt: dict[str, Any], steps: int, stall: int) -> str:
    """Why the search stopped after ``steps`` steps, the last ``stall`` of which moved nothing."""
    psnr = nxt.get("psnr_db")
    why = (f"the goal is out of reach: with these layers float the model already matches float (PSNR "
           f"{psnr:.1f} dB), so no int8 model can do better; relax the goal"
           if psnr is not None and psnr >= FLOAT_PARITY_DB else
           "the error is not in a few layers' int8 activations. Compare the 'dynamic' row (int8 weights, "
           "float activations): if it is as far off, the 8-bit weights are the cause (quantization-aware "
           "training, or keep the model fp16)")
    return (f"stopped after {steps} step(s): the last {stall} moved the metric by less than "
            f"{SEARCH_MIN_GAIN_DB:g} dB PSNR / {SEARCH_MIN_GAIN_PP:g} pp top-1, so keeping more of these "
            f"layers float will not meet the goal: {why}")


def search_keep_float(src, calibrated: bytes, calibrated_path: Path, graph: dict[str, dict[str, Any]], *,
                      goal: KeepFloatGoal | None, out_dir: Path, int8_io: str = "float",
                      fp32_bytes: int | None = None, progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """``--keep-float auto``: the smallest set of ranked tensors kept float that meets ``goal``.
    Returns the search record (``chosen``, ``candidates`` table rows, ``met``, ``method``)."""
    say = progress or (lambda _m: None)
    if goal is None or (goal.max_accuracy_drop_pp is None and goal.min_psnr_db is None):
        raise BadInput("--keep-float auto needs a goal to search for: --max-accuracy-drop PP and/or --min-psnr DB "
                       "(or int8 thresholds in --gate FILE)")
    t0 = time.perf_counter()
    ds = _search_set(src, goal)
    work = Path(out_dir) / "keep_float_search"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    inputs = work / "inputs.npz"
    inputs_sha = ds.save(inputs)
    rule = resolve_state(goal.state, ds.streams, ds.n, how=ds.stream_how, source=ds.source)
    say("keep-float search: TensorFlow reference")
    ref = run_tf(src.saved_model_dir, src.signature, ds, signature_key=src.signature_key, loader=src.loader,
                 tags=src.tags, rule=rule)
    class_out = None
    if goal.max_accuracy_drop_pp is not None:
        class_out = cmp.pick_class_output(ref, goal.class_output or (src.info or {}).get("class_output"))
        if class_out is None:
            raise BadInput("--keep-float auto with --max-accuracy-drop needs class scores [samples, classes]; pass "
                           "--class-output NAME or search with --min-psnr")
    ref_acc = cmp.classification(ref[class_out], ref[class_out], ds.labels) if class_out else None
    host = HostTarget(threads=goal.threads, delegate=goal.delegate)
    cache: dict[tuple[str, ...], dict[str, Any]] = {}

    def measure(tensors: list[str], timed: bool) -> dict[str, Any]:
        key = tuple(sorted(tensors))
        cand = cache.get(key)
        if cand is None:
            nodes = keep_float_nodes(list(tensors), graph)
            data, _ = quantize_keep_float(calibrated, nodes, int8_io)
            path = work / f"candidate_{len(cache)}.tflite"
            path.write_bytes(data)
            cand = {"keep_float": list(tensors), "ops": nodes, "bytes": len(data), "path": str(path),
                    "size_reduction_pct": round(100 * (1 - len(data) / fp32_bytes), 2) if fp32_bytes else None}
            cache[key] = cand
        if timed and "p50_ms" in cand or not timed and "top1_drop_pp" in cand:
            return cand
        control = goal.control if timed else ACCURACY_ONLY   # accuracy: one untimed pass over the samples
        run = host.run(Job(model_path=cand["path"], inputs_npz=str(inputs), threads=goal.threads,
                           delegate=goal.delegate, control=control, save_outputs=True, seed=goal.seed,
                           state_rule=rule))
        if run.status != "ok":
            raise InfraError(f"--keep-float auto: candidate {cand['keep_float']} failed on the host: {run.error}")
        drift = cmp.compare_outputs(ref, run.outputs or {})
        acc = cmp.accuracy_vs_reference(ref, run.outputs, ds.labels, class_out, ref_acc) if class_out else None
        cand.update(psnr_db=cmp.worst(drift)["psnr_db"], top1=acc.top1 if acc else None,
                    top1_drop_pp=acc.top1_drop_pp if acc else None)
        if timed:
            lat = Latency.from_samples(run.samples_ns)
            cand.update(p50_ms=lat.p50, p99_ms=lat.p99, p99_valid=lat.p99_valid)
        cand["meets_goal"] = goal.meets(cand)
        return cand

    def badness(c: dict[str, Any]) -> tuple:
        drop = c.get("top1_drop_pp")
        psnr = c.get("psnr_db") if c.get("psnr_db") is not None else -math.inf
        return ((drop if drop is not None else 0.0) if goal.max_accuracy_drop_pp is not None else 0.0, -psnr, c["bytes"])

    say("keep-float search: int8 baseline")
    base = measure([], timed=False)
    say("keep-float search: ranking layers (diagnose)")
    meta, _ = run_worker(calibrated_path, base["path"], inputs, samples=min(SEARCH_DIAGNOSE_SAMPLES, ds.n),
                         state_rule=rule.take(min(SEARCH_DIAGNOSE_SAMPLES, ds.n)))
    layers = rank_layers(meta["tensors"], "int8")
    pool = _ranked_tensors(layers, graph)[:goal.candidates]
    current, path = [], [base]
    stall, stopped = 0, None
    while not goal.meets(path[-1]) and len(current) < len(pool):
        say(f"keep-float search: step {len(current) + 1}")
        options = [measure(current + [c], timed=False) for c in pool if c not in current]
        nxt = min(options, key=badness)
        current = list(nxt["keep_float"])
        stall = 0 if _moved(path[-1], nxt, goal) else stall + 1
        path.append(nxt)
        if stall >= SEARCH_STALL_STEPS:
            stopped = _stalled(nxt, len(current), stall)
            say("keep-float search: " + stopped.split(":")[0])
            break
    say("keep-float search: timing the candidates")
    rows = [measure(c["keep_float"], timed=True) for c in path]
    winner = next((c for c in rows if c["meets_goal"]), min(rows, key=badness))
    table = [{k: v for k, v in c.items() if k != "path"} | {"chosen": c is winner} for c in rows]
    shutil.rmtree(work, ignore_errors=True)
    return {
        "method": SEARCH_METHOD, "goal": goal.describe(), "met": bool(winner["meets_goal"]), "stopped_early": stopped,
        "chosen": list(winner["keep_float"]), "candidates": table, "evaluated": len(cache),
        "ranking": [{"rank": l["rank"], "tensor": l["tensor"], "float_tensor": l.get("float_tensor"), "op": l["op"],
                     "ranking_snr_db": l["ranking_snr_db"], "finding": l["finding"]} for l in layers[:goal.candidates]],
        "reference_top1": (ref_acc or {}).get("top1"),
        "inputs": {"source": ds.source, "samples": ds.n, "sha256": inputs_sha},
        "seconds": round(time.perf_counter() - t0, 3),
    }
