"""What a fix gains, measured: diagnose's ranking by a real keep-float trial per candidate layer.

A layer's own numbers (isolated median-channel SNR, rmse/scale) say how much error it *adds*, not
how much of the *output's* error goes away when it is fixed: on a MobileNetV1 the final FC ranked
first (low channel SNR, +0.2 dB when kept float) while keeping ``Conv2d_1_depthwise`` float gained
+9.1 dB (ranked 6th). So diagnose re-quantizes the model once per candidate with that tensor kept
float -- the same mechanism as ``--keep-float`` (``quant.keep_float``) -- runs it on the InputSet
(host worker, one untimed pass, under the run's state rule) and measures the worst-output PSNR
against the reference. Candidates: up to ``TRIAL_CANDIDATES`` layers taken in turn from three
orders (isolated median-channel SNR, isolated rmse/scale, isolated tensor SNR, each worst first),
so a layer bad by any one measure is tried. Layers then rank by measured gain (``fix_gain_db``,
largest first; a gain below ``GAIN_MATTERS_DB`` does not move a layer up), the untried ones after, in
their previous order. The best trial is also what the proof goal may ask for (``diagnose.proof_goal``).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from edgebench.judge import drift as cmp
from edgebench.convert.quant.keep_float import keep_float_nodes, quantize_keep_float
from edgebench.targets.base import Job, RunControl
from edgebench.targets.host import HostTarget
from edgebench.judge.verdicts import COSINE_DIFFERS

TRIAL_CANDIDATES = 6
COSINE_MATTERS = 0.05    # a fix that moves the worst output's cosine by less is not a fix
GAIN_MATTERS_DB = 1.0     # a fix that moves the worst-output PSNR by less is not a fix (0.5 dB: run noise of int8)
# Trials run when the ranking has something to check: a finding, or an output PSNR below this
# (below ~40 dB an 8-bit model loses visibly; above it a model without findings is rounding-limited).
TRIAL_BELOW_PSNR_DB = 40.0
TRIAL_CONTROL = RunControl(runs=1, min_runs=1, min_time_s=0.0, warmup_runs=1)   # outputs only, one pass


def worth_trying(layers: list[dict[str, Any]], psnr_db: float | None) -> bool:
    """Trials check a ranking: when some layer is a finding, or the output lost visibly."""
    return any(l.get("finding") for l in layers) or (psnr_db is not None and psnr_db < TRIAL_BELOW_PSNR_DB)


def candidates(layers: list[dict[str, Any]], graph: dict[str, Any], limit: int = TRIAL_CANDIDATES) -> list[str]:
    """Float tensors to try, in turn from three worst-first orders (see the module docstring)."""
    # never a layer the quantized file already computes in float (layers._already_float): not a culprit
    usable = [l for l in layers if l.get("scale") and l.get("float_tensor") in graph and not l.get("already_float")]

    def key(name: str, sign: float):
        return lambda l: (math.inf if l.get(name) is None else sign * l[name])

    orders = [sorted(usable, key=key("isolated_channel_snr_db", 1.0)),
              sorted(usable, key=key("isolated_rmse_over_scale", -1.0)),
              sorted(usable, key=key("isolated_snr_db", 1.0))]
    out: list[str] = []
    for rank in range(len(usable)):
        for order in orders:
            ft = order[rank]["float_tensor"]
            if ft not in out:
                out.append(ft)
            if len(out) >= limit:
                return out
    return out


def run_trials(tensors: list[str], *, calibrated: bytes, graph: dict[str, Any], out_dir: Path, inputs_npz: str,
               ref_out: dict[str, np.ndarray], labels, class_out: str | None, ref_acc, int8_io: str = "float",
               state_rule=None, kind: cmp.OutputKind | None = None) -> dict[str, dict[str, Any]]:
    """float tensor -> {psnr_db, top1_drop_pp, path} of the int8 model with that tensor kept float
    (a trial that fails to build or run records its ``error``)."""
    host = HostTarget(delegate="xnnpack")
    out: dict[str, dict[str, Any]] = {}
    work = Path(out_dir) / "fix_trials"
    work.mkdir(parents=True, exist_ok=True)
    for k, ft in enumerate(tensors):
        try:
            data, _ = quantize_keep_float(calibrated, keep_float_nodes([ft], graph), int8_io)
        except Exception as e:  # noqa: BLE001 -- the quantizer refused this denylist: no trial
            out[ft] = {"error": f"could not re-quantize with it float: {str(e).splitlines()[0][:200]}"}
            continue
        path = work / f"trial_{k}.tflite"
        path.write_bytes(data)
        run = host.run(Job(model_path=str(path), inputs_npz=inputs_npz, control=TRIAL_CONTROL, save_outputs=True,
                           state_rule=state_rule))
        if run.status != "ok" or not run.outputs:
            out[ft] = {"error": run.error or "no outputs"}
            continue
        got, _ = cmp.align_outputs(ref_out, run.outputs)
        worst = cmp.worst(cmp.compare_outputs(ref_out, got))
        acc = cmp.accuracy_vs_reference(ref_out, got, labels, class_out, ref_acc, kind) if class_out else None
        out[ft] = {"psnr_db": _finite(worst.get("psnr_db")), "cosine": _finite(worst.get("cosine")),
                   "top1_drop_pp": acc.top1_drop_pp if acc else None, "path": str(path)}
    return out


def _finite(v: Any) -> float | None:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if not math.isnan(f) else None


def by_cosine(base_psnr: float | None, base_cosine: float | None) -> bool:
    """Judge fixes by cosine when the output points elsewhere (cosine below COSINE_DIFFERS -- e.g. an
    int8 sigmoid rounded to exactly 0 on most samples): its PSNR, set by a few large values, may read
    fine (34 dB) and not move when the zeros are fixed. ``base_psnr`` is not needed to decide."""
    return base_cosine is not None and base_cosine < COSINE_DIFFERS


def helped(layer: dict[str, Any], base_psnr: float | None, base_cosine: float | None) -> bool:
    """Did keeping this layer float fix the output, by the finding's own metric?"""
    if by_cosine(base_psnr, base_cosine) and layer.get("fix_cosine") is not None:
        return layer["fix_cosine"] - base_cosine >= COSINE_MATTERS
    return (layer.get("fix_gain_db") or 0.0) >= GAIN_MATTERS_DB


def apply_gains(layers: list[dict[str, Any]], trials: dict[str, dict[str, Any]], base_psnr: float | None,
                base_cosine: float | None = None) -> list[dict[str, Any]]:
    """Layers re-ranked by measured gain (module docstring): worst-output PSNR, or cosine when that
    is the finding (``by_cosine``); each tried layer gets ``fix_gain_db`` and ``fix_psnr_db`` (and
    ``fix_cosine``) and its advice says what keeping it float gained."""
    cosine = by_cosine(base_psnr, base_cosine)
    gains: dict[str, float] = {}
    for l in layers:
        t = trials.get(l.get("float_tensor") or "")
        if not t or t.get("psnr_db") is None or base_psnr is None:
            l["fix_gain_db"] = None
            continue
        g = t["psnr_db"] - base_psnr
        l["fix_gain_db"], l["fix_psnr_db"] = round(g, 2), round(t["psnr_db"], 2)
        if cosine and t.get("cosine") is not None:
            l["fix_cosine"] = round(t["cosine"], 4)
            gc = t["cosine"] - base_cosine
            gains[l["tensor"]] = gc * 100          # a cosine gain of 0.01 counts as 1 "dB" of the PSNR rule
            text = f"cosine {base_cosine:.3f} -> {t['cosine']:.3f}"
            helped = gc >= COSINE_MATTERS
        else:
            gains[l["tensor"]] = g
            text = f"{g:+.1f} dB worst-output PSNR ({base_psnr:.1f} -> {t['psnr_db']:.1f} dB)"
            helped = g >= GAIN_MATTERS_DB
        if helped:
            l["finding"] = True
            l["advice"] = f"{l['advice']}; measured: keeping it float gains {text}"
        elif l.get("finding"):
            l["advice"] = (f"{l['advice']}; measured: keeping it float does not help ({text}), so this layer is not "
                           "where the output's error comes from")
    threshold = COSINE_MATTERS * 100 if cosine else GAIN_MATTERS_DB
    first = sorted((l for l in layers if gains.get(l["tensor"], -math.inf) >= threshold),
                   key=lambda l: -gains[l["tensor"]])
    rest = [l for l in layers if l not in first]
    out = first + rest
    for i, l in enumerate(out, 1):
        l["rank"] = i
    return out
