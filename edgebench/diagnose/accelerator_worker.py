"""The accelerator bisect worker: the first op an accelerator computes differently from the CPU.

Started by ``edgebench.diagnose.accelerator`` in its own process (``python -m
edgebench.diagnose.accelerator_worker JOB``, through ``edgebench.targets.host.spawn_worker``): a GPU
driver that crashes or hangs costs this process, never the CLI. ``JOB`` is a JSON file::

    {"model": "m.tflite", "inputs_npz": "inputs.npz", "samples": 8, "accelerator": "gpu",
     "gpu_precision": "fp16" | "fp32" | null, "min_psnr_db": 40.0, "out_dir": "...",
     "keep_probe": "culprit.tflite" | null}

**A probe** is the model cut after op ``k`` of subgraph 0 (execution order = file order): ops
``0..k``, the same inputs, and every tensor alive after op ``k`` as an output
(``edgebench.model.tflite_rewrite.prefix_model``). It is compiled twice -- once for the accelerator
(LiteRT's CompiledModel with ``accelerator|CPU``, one *compile* counted) and once on the CPU (the
Interpreter, XNNPACK: the reference) -- and both run the same inputs. A tensor **departs** when it
has more NaN/Inf on the accelerator than on the CPU, or its PSNR against the CPU
(``edgebench.judge.drift``: peak = the CPU's range) is below ``min_psnr_db``; a probe departs when
any tensor it exposes does.

**Bisection**: the whole model first (cut after the last op: its outputs). If it does not depart,
that is the answer ("no divergence"), in one compile. Otherwise ``lo = -1`` (the inputs: equal
by construction) and ``hi = last``; probe ``mid = (lo + hi) // 2`` and keep the half whose ends
disagree, until ``hi = lo + 1``: ``1 + ceil(log2(ops))`` compiles. Op ``hi`` is then *a* culprit
whatever the graph does later: at cut ``hi - 1`` every tensor alive (among them all of op ``hi``'s
inputs) agreed, and at cut ``hi`` something departs -- op ``hi``'s outputs are the only tensors
new at that cut. When a departure is masked later (a saturating op) the bisect may find a later
culprit than the first one; every probe's numbers are reported. Cutting changes what the
accelerator fuses, which is why the culprit's own probe, not the whole model, is the evidence.

Writes ``result.json`` (``status``, ``error``, ``error_kind``, ``ops``, ``probes`` in the order run,
``culprit``, ``compiles``, ``accelerator`` facts) and, with ``keep_probe``, the culprit's probe
``.tflite``. Exit status 0 ok, 2 bad input (the accelerator is not there, the model cannot compile
for it), 3 internal failure.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from edgebench.judge.drift import drift
from edgebench.model.tflite_rewrite import load_model_t, op_names, prefix_model, tensor_name
from edgebench.targets.runner_profile import CompiledModelAdapter, Unavailable

FP16_MAX = 65504.0          # IEEE 754 half precision's largest finite value


def _interpreter_cls():
    try:
        from ai_edge_litert.interpreter import Interpreter  # noqa: PLC0415 -- heavy, the worker's own runtime
    except ImportError:  # pragma: no cover - TF-only installs
        from tensorflow.lite.python.interpreter import Interpreter  # noqa: PLC0415
    return Interpreter


def _cpu_outputs(path: str, feeds: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """The probe on the CPU (the Interpreter's default kernels, XNNPACK): outputs stacked over samples."""
    it = _interpreter_cls()(model_path=path)
    runner = it.get_signature_runner()
    outs: dict[str, list[np.ndarray]] = {}
    for f in feeds:
        for k, v in runner(**f).items():
            outs.setdefault(k, []).append(np.array(v))
    return {k: np.stack(v) for k, v in outs.items()}


def _accelerator_outputs(path: str, feeds: list[dict[str, np.ndarray]], job: dict) -> tuple[dict, dict]:
    """The probe compiled for the accelerator (one compile) and run on every sample."""
    t0 = time.perf_counter()
    ad = CompiledModelAdapter(path, 1, job["accelerator"], job.get("gpu_precision"), _interpreter_cls())
    compile_s = time.perf_counter() - t0
    outs: dict[str, list[np.ndarray]] = {}
    for f in feeds:
        for d in ad.get_input_details():
            ad.set_tensor(d["index"], np.asarray(f[d["name"]], d["dtype"]))
        ad.invoke()
        for d in ad.get_output_details():
            outs.setdefault(d["name"], []).append(np.array(ad.get_tensor(d["index"])))
    facts = {**ad.facts(), "compile_s": round(compile_s, 4)}
    return {k: np.stack(v) for k, v in outs.items()}, facts


def _departs(d: dict[str, Any], min_psnr_db: float) -> bool:
    bad = (d.get("nan") or 0) + (d.get("inf") or 0)
    if bad > (d.get("ref_nonfinite") or 0):
        return True
    p = d.get("psnr_db")
    return p is not None and p < min_psnr_db


def _range(a: np.ndarray) -> tuple[float | None, float | None]:
    f = np.asarray(a, np.float64)
    f = f[np.isfinite(f)]
    return (float(f.min()), float(f.max())) if f.size else (None, None)


def _tensor_record(mt, t: int, ref: np.ndarray, got: np.ndarray) -> dict[str, Any]:
    d = drift(ref, got)
    fin = np.isfinite(np.asarray(got, np.float64)) & np.isfinite(np.asarray(ref, np.float64))
    err = np.abs(np.asarray(got, np.float64) - np.asarray(ref, np.float64))[fin]
    lo, hi = _range(ref)
    glo, ghi = _range(got)
    return {"tensor_id": t, "tensor": tensor_name(mt, t), "shape": [int(x) for x in ref.shape[1:]],
            "dtype": str(ref.dtype), "max_abs": d["max_abs"], "finite_max_abs": float(err.max()) if err.size else None,
            "psnr_db": d["psnr_db"], "cosine": d["cosine"], "nan": d["nan"], "inf": d["inf"],
            "ref_nonfinite": d["ref_nonfinite"], "ref_min": lo, "ref_max": hi, "acc_min": glo, "acc_max": ghi}


class Bisect:
    def __init__(self, job: dict) -> None:
        self.job = job
        self.raw = Path(job["model"]).read_bytes()
        self.mt = load_model_t(self.raw)
        self.ops = op_names(self.mt)
        if not self.ops:
            raise Unavailable(f"{job['model']}: subgraph 0 has no ops, so there is nothing to bisect")
        sg = self.mt.subgraphs[0]
        self.outputs = [[int(t) for t in (op.outputs if op.outputs is not None else [])] for op in sg.operators]
        with np.load(job["inputs_npz"], allow_pickle=False) as z:
            data = {k: z[k] for k in z.files if k != "labels"}
        n = min(int(job["samples"]), min(len(v) for v in data.values()))
        self.feeds = [{k: v[i:i + 1] if v.ndim else v for k, v in data.items()} for i in range(n)]
        self.work = Path(job["out_dir"])
        self.min_psnr = float(job["min_psnr_db"])
        self.probes: list[dict[str, Any]] = []
        self.facts: dict[str, Any] = {}
        self._kept: dict[int, bytes] = {}

    def probe(self, k: int) -> dict[str, Any]:
        data, live = prefix_model(self.mt, k)
        path = self.work / f"probe_{k}.tflite"
        path.write_bytes(data)
        cpu = _cpu_outputs(str(path), self.feeds)
        acc, facts = _accelerator_outputs(str(path), self.feeds, self.job)
        self.facts = {k2: v for k2, v in facts.items() if k2 != "compile_s"}
        tensors = [_tensor_record(self.mt, t, cpu[f"t{t}"], acc[f"t{t}"]) for t in live]
        for r in tensors:
            r["departs"] = _departs(r, self.min_psnr)
        own = [r for r in tensors if r["tensor_id"] in self.outputs[k]]
        worst = min(tensors, key=_badness)
        rec = {"probe": len(self.probes) + 1, "node": k, "op": self.ops[k], "tensor": own[0]["tensor"] if own else None,
               "exposed": len(live), "departs": any(r["departs"] for r in tensors),
               "fully_accelerated": facts.get("fully_accelerated"), "compile_s": facts["compile_s"],
               "output": own[0] if own else None, "worst": worst, "departed": [r["tensor"] for r in tensors if r["departs"]]}
        self.probes.append(rec)
        self._kept[k] = data
        path.unlink()
        return rec

    def run(self) -> dict[str, Any]:
        n = len(self.ops)
        t0 = time.perf_counter()
        whole = self.probe(n - 1)
        culprit = None
        if whole["departs"]:
            lo, hi = -1, n - 1
            while hi - lo > 1:
                mid = (lo + hi) // 2
                try:
                    rec = self.probe(mid)
                except Unavailable as exc:      # the whole model compiled, this cut does not
                    raise Unavailable(f"the probe cut after {self.ops[mid]}#{mid} does not compile for the accelerator "
                                      f"({exc}); so far the first departure lies in ops {lo + 1}..{hi} "
                                      f"({self.ops[hi]}#{hi} departs)") from None
                if rec["departs"]:
                    hi = mid
                else:
                    lo = mid
            culprit = self._culprit(hi)
            if self.job.get("keep_probe"):
                Path(self.job["keep_probe"]).write_bytes(self._kept[hi])
                culprit["probe_model"] = str(self.job["keep_probe"])
        return {"status": "ok", "error": None, "ops": n, "op_types": self.ops, "samples": len(self.feeds),
                "probes": self.probes, "compiles": len(self.probes), "compile_bound": 1 + math.ceil(math.log2(n)) if n > 1 else 1,
                "culprit": culprit, "min_psnr_db": self.min_psnr, "seconds": round(time.perf_counter() - t0, 3),
                "accelerator_facts": self.facts}

    def _culprit(self, k: int) -> dict[str, Any]:
        rec = next(p for p in self.probes if p["node"] == k)
        out = rec["output"] or rec["worst"]
        sg = self.mt.subgraphs[0]
        inputs = [int(t) for t in (sg.operators[k].inputs if sg.operators[k].inputs is not None else []) if t >= 0]
        culprit = {"node": k, "op": self.ops[k], "tensor": out["tensor"], "shape": out["shape"],
                   "inputs": [tensor_name(self.mt, t) for t in inputs], **{key: out[key] for key in (
                       "max_abs", "finite_max_abs", "psnr_db", "cosine", "nan", "inf", "ref_min", "ref_max",
                       "acc_min", "acc_max")}}
        culprit["why"] = _why(culprit, self.job)
        return culprit


def _badness(r: dict[str, Any]) -> tuple:
    """Worst first: more non-finite values, then lower PSNR."""
    p = r.get("psnr_db")
    return (-((r.get("nan") or 0) + (r.get("inf") or 0)), math.inf if p is None else p)


def _why(c: dict[str, Any], job: dict) -> str:
    """One sentence: what the culprit's numbers say (a range fp16 cannot hold, NaN/Inf, or plain drift)."""
    peak = max(abs(c["ref_min"] or 0.0), abs(c["ref_max"] or 0.0))
    acc = f"{job['accelerator'].upper()}{' ' + job['gpu_precision'] if job.get('gpu_precision') else ''}"
    bad = (c.get("nan") or 0) + (c.get("inf") or 0)
    if job.get("gpu_precision") == "fp16" and peak > FP16_MAX:
        top = "-" if c.get("acc_max") is None else f"{max(abs(c['acc_min'] or 0.0), abs(c['acc_max'])):.6g}"
        return (f"its CPU values reach {peak:.6g}, beyond fp16's largest finite value {FP16_MAX:g}: the {acc} run's values "
                f"top out at {top} there ({c.get('inf') or 0} Inf, {c.get('nan') or 0} NaN); rescale the values before "
                "this op (or fold the scale into a later one), or run it with --gpu-precision fp32")
    if bad:
        return (f"the {acc} run gives {c.get('nan') or 0} NaN and {c.get('inf') or 0} Inf where the CPU has finite "
                f"values (CPU range [{c['ref_min']:.6g}, {c['ref_max']:.6g}])")
    return (f"its output departs from the CPU's (PSNR {c['psnr_db']:.1f} dB, max abs {c['max_abs']:.3g}) while "
            "every input it reads agreed: the accelerator's kernel or its precision for this op")


def main(argv: list[str]) -> int:
    job = json.loads(Path(argv[1]).read_text())
    out_dir = Path(job.get("out_dir") or os.path.dirname(os.path.abspath(argv[1])))
    try:
        result, code = Bisect(job).run(), 0
    except Unavailable as exc:
        result, code = {"status": "error", "error": str(exc), "error_kind": "bad_input"}, 2
    except (RuntimeError, ValueError, OSError, KeyError) as exc:
        result, code = {"status": "error", "error": f"{type(exc).__name__}: {' '.join(str(exc).split())[:400]}"}, 3
    tmp = out_dir / "result.json.tmp"
    tmp.write_text(json.dumps(result, default=_json_default))
    os.replace(tmp, out_dir / "result.json")
    return code


def _json_default(v: Any) -> Any:
    if isinstance(v, np.generic):
        return v.item()
    raise TypeError(type(v).__name__)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
