"""Silent-failure verdicts: outputs that run without error and are still wrong.

Accelerators fail quietly: a GPU that returns all-zero vectors unless forced to FP32, an NPU
that falls back to the CPU for most of the graph. Every compare row gets these findings per
output (JSON ``verdicts``), and they fail the gate:

* ``zero_output``: the output's norm collapsed (``||got|| <= ZERO_RATIO * ||ref||`` per sample)
  on at least half of the samples whose reference is non-zero.
* ``constant_output``: the output does not change across samples (spread over samples
  ``<= CONSTANT_RATIO`` of the reference's) while the reference does.
* ``nonfinite``: NaN/Inf values in the output.
* ``low_cosine``: mean cosine similarity to the reference below ``--min-cosine``.
* ``low_delegation``: the delegate/accelerator took fewer than ``--min-delegated`` percent of
  the nodes.

The first three always fail a gate; the last two are thresholds and fail only when set.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from edgebench.rows import Delegation, Drift, Verdict

ZERO_RATIO = 1e-3       # ||got|| below 0.1 % of ||ref||: nothing left of the signal
CONSTANT_RATIO = 1e-3   # spread across samples below 0.1 % of the reference's: the input is ignored
MIN_SHARE = 0.5         # zero_output: on at least half of the samples with a non-zero reference
GRID_VALUES = 65536     # distinct values a quantized (16-bit at most) output can take

ADVICE = {
    "zero_output": "the runtime returned (near-)zero vectors: on a GPU force FP32 (--gpu-precision fp32); "
                   "check the delegate with --delegate none / --accelerator cpu; check INT8 calibration data",
    "constant_output": "the output ignores its input: a wrong input binding, a quantization scale that "
                       "rounds everything to one value, or a broken delegate; compare with --accelerator cpu",
    "nonfinite": "NaN/Inf: an overflow (FP16 on a GPU, activations out of range) or broken weights; try "
                 "--gpu-precision fp32 and check the data range",
    "low_cosine": "the output direction differs from the reference: look at the per-op drift (edgebench "
                  "diagnose) and keep the worst layers float",
    "low_delegation": "the accelerator fell back to the CPU for part of the graph: the row's warning names "
                      "the ops; replace them or keep them float",
}


def output_verdicts(ref: Mapping[str, np.ndarray], got: Mapping[str, np.ndarray],
                    drift: Mapping[str, Drift] | None, min_cosine: float | None = None,
                    steps: Mapping[str, float] | None = None) -> list[Verdict]:
    """Findings per output (outputs present in both). ``steps``: the quantization step of an
    output (``tflite_model`` ``output_steps``), which names the cause of a zero output."""
    out: list[Verdict] = []
    for name in ref:
        if name not in got:
            continue
        r = np.asarray(ref[name], np.float64)
        g = np.asarray(got[name], np.float64)
        if g.size != r.size or r.ndim == 0:
            continue
        g = g.reshape(r.shape)
        n = r.shape[0]
        rf, gf = r.reshape(n, -1), g.reshape(n, -1)
        finite = np.isfinite(gf).all(axis=1) & np.isfinite(rf).all(axis=1)
        d = (drift or {}).get(name)
        bad = d.nonfinite if d is not None else int(g.size - np.isfinite(g).sum())
        if bad:
            out.append(Verdict("nonfinite", name, True, f"{name}: {bad} NaN/Inf values", ADVICE["nonfinite"],
                               value=float(bad), threshold=0.0))
        out.extend(_zero(name, rf[finite], gf[finite], (steps or {}).get(name)))
        out.extend(_constant(name, rf[finite], gf[finite]))
        if min_cosine is not None and d is not None and d.cosine is not None:
            failed = d.cosine < min_cosine
            if failed:
                worst = f", worst sample {d.cosine_min:.4f}" if d.cosine_min is not None else ""
                out.append(Verdict("low_cosine", name, True,
                                   f"{name}: cosine {d.cosine:.4f} < min {min_cosine:g}{worst}", ADVICE["low_cosine"],
                                   value=d.cosine, threshold=min_cosine))
    return out


def grid_step(g: np.ndarray) -> float | None:
    """The step of the grid an output's values lie on (a quantized output dequantized: multiples of
    its scale), or None when they do not lie on one (a float output). At most GRID_VALUES distinct
    values are looked at; every gap between them must be a whole number of the smallest gap."""
    v = np.unique(np.asarray(g, np.float64)[np.isfinite(g)])
    if v.size < 2 or v.size > GRID_VALUES:
        return None
    gaps = np.diff(v)
    step = float(gaps.min())
    if step <= 0:
        return None
    k = gaps / step
    return step if np.all(np.abs(k - np.round(k)) <= 1e-3 * np.maximum(k, 1)) else None


def _zero(name: str, r: np.ndarray, g: np.ndarray, step: float | None = None) -> list[Verdict]:
    if r.shape[0] == 0:
        return []
    rn, gn = np.linalg.norm(r, axis=1), np.linalg.norm(g, axis=1)
    live = rn > 0
    if not live.any():
        return []
    dead = live & (gn <= ZERO_RATIO * rn)
    collapsed = int(dead.sum())
    share = collapsed / int(live.sum())
    if share < MIN_SHARE:
        return []
    advice = ADVICE["zero_output"]
    step = step or grid_step(g)
    peak = float(np.median(np.abs(r[dead]).max(axis=1)))
    if step is not None and peak < step:
        # not a delegate or calibration problem: the values are below one step of the output's own grid
        advice = (f"the output is quantized with a step of {step:.3g} ({1 / step:,.0f} levels per unit; a sigmoid or "
                  f"softmax in int8 gets 1/256) and the reference's values on those samples are below it (median "
                  f"peak {peak:.3g}), so they round to exactly 0: keep the output layer float (--keep-float, edgebench "
                  "diagnose names it) or use int16x8 (a 256x finer step); judge the fix by cosine (--min-cosine), "
                  "which sees the zeros, not by PSNR, which a few large values set")
    return [Verdict("zero_output", name, True,
                    f"{name}: output is ~zero on {collapsed} of {int(live.sum())} samples where the reference "
                    f"is not (norm <= {ZERO_RATIO:g} x the reference's)", advice,
                    value=share, threshold=MIN_SHARE)]


def _constant(name: str, r: np.ndarray, g: np.ndarray) -> list[Verdict]:
    if r.shape[0] < 2:
        return []
    r_spread = float((r.max(axis=0) - r.min(axis=0)).max())
    g_spread = float((g.max(axis=0) - g.min(axis=0)).max())
    if r_spread <= 0 or g_spread > CONSTANT_RATIO * r_spread:
        return []
    # a zero output is also constant: say it once, as the more specific finding
    if float(np.abs(g).max()) <= ZERO_RATIO * float(np.abs(r).max()):
        return []
    return [Verdict("constant_output", name, True,
                    f"{name}: output is the same for all {r.shape[0]} samples (spread {g_spread:.3g} vs the "
                    f"reference's {r_spread:.3g})", ADVICE["constant_output"], value=g_spread, threshold=r_spread)]


PSNR_LOOKS_FINE_DB = 25.0    # a PSNR a reader takes for "close enough"
COSINE_DIFFERS = 0.9         # ... beside a cosine that says the outputs point elsewhere
AGREEMENT_DIFFERS = 0.5      # ... or a top-1 agreement that says the predictions differ


def metric_disagreement(drift: Mapping[str, Drift] | None, accuracy: Any = None) -> list[str]:
    """Warnings for outputs whose PSNR reads fine while cosine or agreement say otherwise.

    PSNR is relative to the reference's peak: one large value (an outlier logit, a wide range)
    keeps it high while most of the output is wrong. Those rows must not look good."""
    out: list[str] = []
    agree = getattr(accuracy, "top1_agreement", None)
    agree_out = getattr(accuracy, "output", None)
    for name, d in (drift or {}).items():
        if d.psnr_db is None or d.psnr_db < PSNR_LOOKS_FINE_DB:
            continue
        bad = []
        if d.cosine is not None and d.cosine < COSINE_DIFFERS:
            bad.append(f"cosine {d.cosine:.2f}")
        if agree is not None and agree < AGREEMENT_DIFFERS and (agree_out in (None, name)):
            bad.append(f"top-1 agreement {100 * agree:.0f} %")
        if bad:
            out.append(f"output '{name}': PSNR {d.psnr_db:.1f} dB looks fine, but {' and '.join(bad)} say the "
                       "outputs differ (PSNR is relative to the reference's peak, which a few large values set): "
                       "judge this output by cosine and agreement")
    return out


def delegation_verdict(d: Delegation | None, min_delegated_pct: float | None) -> list[Verdict]:
    """``low_delegation`` when a threshold is set and the share of delegated nodes is below it."""
    if min_delegated_pct is None:
        return []
    if d is None or d.fraction is None:
        return [Verdict("low_delegation", None, True,
                        f"--min-delegated {min_delegated_pct:g}% needs the delegated node count, which this "
                        "row does not have", ADVICE["low_delegation"], threshold=min_delegated_pct)]
    pct = 100.0 * d.fraction
    if pct >= min_delegated_pct:
        return []
    return [Verdict("low_delegation", None, True,
                    f"{d.delegate} took {d.nodes_delegated}/{d.nodes_total} nodes ({pct:.1f}%) < min "
                    f"{min_delegated_pct:g}%", ADVICE["low_delegation"], value=pct, threshold=min_delegated_pct)]


def describe(verdicts: Any) -> str:
    """Short table cell: 'zero_output(y), low_cosine(y)'."""
    items = [f"{v.kind}({v.output})" if v.output else v.kind for v in verdicts if v.failed]
    return ", ".join(items)
