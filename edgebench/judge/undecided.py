"""The three outcomes of a change and the gate that reads them: better / same / worse / cannot judge.

``decide`` turns a noisy metric's ratio, p and interval into a verdict (``stats.classify`` and the
per-process rule call it); ``comparison_gate`` turns a comparison into passed / failed / undecided
for ``results compare --fail-on-regression`` (exit 0 / 1 / ``--undecided``). A gate never passes
what it could not judge: "same" needs an interval inside the threshold, and every "cannot judge"
carries its reason (REASONS) with what rerun would decide it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

MIN_REPEATS = 3          # worker processes per side for a replicate-based test
HISTORY_MIN_RUNS = 5     # earlier runs of the same configuration for a history-based noise estimate
CI_LEVEL = 0.95          # the interval every latency change shows (bootstrap of the ratio)

# Verdicts of a change: better / same / worse / "cannot judge" -- never a "same" the data cannot
# support. "same" only when the interval of the ratio lies wholly inside (1/min_ratio, min_ratio);
# "worse"/"better" when the ratio is beyond min_ratio, significant, and its interval clears the
# run-to-run spread; anything else is "cannot judge" with its reason (REASONS), which a gate treats
# by ``--undecided``. "within threshold": an accuracy/drift change that is not zero but does not
# reach its threshold ("same" means no change at all). "n/a": not comparable (missing on one side,
# different sample methods, a percentile from too few samples to be valid).
VERDICTS = ("better", "worse", "same", "within threshold", "cannot judge", "n/a")
# Why a change cannot be judged, and what rerun would decide it.
REASONS = {
    "load on A": "stalls from other work on the baseline (A), the slower side: A's true figure can only be better "
                 "than measured -- rerun A on a quiet machine",
    "load on B": "stalls from other work on the candidate (B), the slower side -- rerun B on a quiet machine",
    "load on both": "stalls from other work on both sides -- rerun both on a quiet machine",
    "load on A, the faster side": "A ran under load, so its true figure is better than measured and the change "
                                  "may be larger than the threshold -- rerun A on a quiet machine",
    "load on B, the faster side": "B ran under load, so its true figure is better than measured -- rerun B on a "
                                  "quiet machine",
    "too few processes": "the processes disagree too much for the change to be significant -- rerun both with "
                         "more processes (--repeats 5 or more)",
    "within-run only": f"one run a side and no stored history: the run-to-run noise is unknown and the change is "
                       f"near the threshold -- measure with --repeats {MIN_REPEATS} --round-gap 5 (processes "
                       f"spread in time) or store >= {HISTORY_MIN_RUNS} runs of this configuration",
    "spread wider than the threshold": "the interval reaches across the threshold (or into the run-to-run "
                                       "spread) -- more processes, runs spread in time or longer runs narrow it",
    "tests disagree": "the ratio and the within-run test point opposite ways (a tail or outliers) -- rerun "
                      "with more samples",
}
# What a change's ``ci`` is an interval for: "processes" (a hierarchical bootstrap over each side's
# worker processes, spread in time over >= SPREAD_MIN_S: an interval for a rerun), "history" (the
# ratio widened by the stored run-to-run noise of this configuration), "processes+history" (the
# hull of both), "within-run" (one run a side: its samples, or processes run back to back, which
# see none of the between-run shifts; judged widened by ASSUMED_RUN_NOISE and printed as "within-run
# only"), "loaded" (a mean/QPS/tail that stalls from other work shaped: an interval of these runs'
# load, printed apart).
CI_BASES = ("processes", "history", "processes+history", "within-run", "loaded")
# Processes spread over fewer seconds than this are one run, not runs: measured here, the 3 processes
# of one `bench` agreed to ~1 % on p50 while the next command 13 s later sat ~3 % lower
# (scripts/stats_power.py), so a rerun interval must come from processes at least this far apart.
SPREAD_MIN_S = 10.0
# The run-to-run noise (sd of one run's log value) assumed where none is measured: the within-run
# interval is widened by it before it is judged, so a change near the threshold is "cannot judge"
# (measured here: whole runs shift by 2-3 % on p50, scripts/stats_power.py).
ASSUMED_RUN_NOISE = 0.02
Z_CI = 1.959964          # the normal quantile of CI_LEVEL (0.95): the noise band's width


def within_run_band() -> float:
    """The factor a within-run interval is widened by before it is judged: a rerun's ratio moves
    within it in CI_LEVEL of reruns when each run's log value has sd ASSUMED_RUN_NOISE."""
    return math.exp(Z_CI * ASSUMED_RUN_NOISE * math.sqrt(2.0))


def decide(ratio: float, p: float | None, ci: tuple[float, float] | None, ci_basis: str, band: float | None, *,
           big: bool, agrees: bool, alpha: float, min_ratio: float, higher_is_better: bool, replicates: bool,
           runs_note: str, p_samples: float | None = None) -> tuple[str, str, str]:
    """(verdict, reason, note) of a noisy metric from its ratio, p and interval (the rule above
    VERDICTS). A within-run interval (``ci_basis``) is widened by ``within_run_band`` first, and a
    within-run "worse"/"better" needs that widened interval wholly beyond ``min_ratio``: with no
    measured run-to-run noise only a change far from the threshold is called."""
    up = ratio > 1
    within = ci_basis == "within-run"
    spread = max(band or 1.0, within_run_band() if within else 1.0)
    judged = None if ci is None else (ci[0] / within_run_band(), ci[1] * within_run_band()) if within else ci
    # a rerun interval is printed beside the verdict; a within-run one is named here, widened as judged
    shown = "" if judged is None or not within else (
        f"within-run only: {CI_LEVEL:.0%} interval [{judged[0]:.3f}x, {judged[1]:.3f}x] (the samples' "
        f"[{ci[0]:.3f}x, {ci[1]:.3f}x] widened by an assumed {ASSUMED_RUN_NOISE:.0%} run-to-run noise)")

    def undecided(why: str, detail: str) -> tuple[str, str, str]:
        return "cannot judge", why, "; ".join(x for x in (detail, shown, runs_note, REASONS[why]) if x)

    if big and not agrees:
        return undecided("tests disagree", f"ratio {ratio:.3g}x")
    if big:
        significant = p is not None and p < alpha
        if not significant:
            why = ("too few processes" if replicates else "within-run only" if p is None or within
                   else "spread wider than the threshold")
            return undecided(why, f"ratio {ratio:.3g}x but p = {p:.3g} >= {alpha}" if p is not None
                             else f"ratio {ratio:.3g}x")
        if within and judged is not None and not beyond(judged, min_ratio, up):
            # no measured run-to-run noise: a change counts only when it clears the threshold itself
            return undecided("within-run only", f"ratio {ratio:.3g}x, p = {p:.2g}, but the interval reaches "
                                                f"past the {min_ratio:g}x threshold")
        if ci is not None and not beyond(ci, spread, up):
            return undecided("within-run only" if within else "spread wider than the threshold",
                             f"ratio {ratio:.3g}x, p = {p:.2g}, but the interval reaches into the run-to-run "
                             f"spread [{1 / spread:.3f}x, {spread:.3f}x]")
        return ("better" if up == higher_is_better else "worse"), "", "; ".join(
            x for x in (runs_note, shown) if x)
    if judged is None:
        return undecided("spread wider than the threshold", "no interval (too few samples)")
    if 1.0 / min_ratio < judged[0] and judged[1] < min_ratio:
        return "same", "", "; ".join(x for x in (shown, f"inside [{1 / min_ratio:.3f}x, {min_ratio:.3f}x]") if x)
    return undecided("within-run only" if within else "spread wider than the threshold",
                     f"ratio {ratio:.3g}x, but the interval reaches past the {min_ratio:g}x threshold")


def beyond(ci: tuple[float, float], band: float, up: bool) -> bool:
    """Whether an interval of a ratio lies wholly beyond the noise band [1/band, band] on the side
    the ratio moved (``up``: above ``band``)."""
    return ci[0] > band if up else ci[1] < 1.0 / band


@dataclass(frozen=True)
class ComparisonGate:
    """What ``results compare --fail-on-regression`` decides: "passed", "failed" (a metric worse) or
    "undecided" (none worse, some cannot be judged); ``text`` says which and, when undecided, what
    rerun would decide each (the reasons of REASONS)."""

    state: str
    text: str
    worse: tuple[str, ...] = ()
    undecided: tuple[str, ...] = ()


def comparison_gate(rep: dict[str, Any], *, shown: int = 3) -> ComparisonGate:
    """The gate of a comparison (``compare_runs``' report): worse beats cannot judge beats passed."""
    worse, open_ = [], []
    for pair in rep.get("pairs") or ():
        key = "/".join(str(k) for k in pair.get("key") or ())
        for c in pair.get("changes") or ():
            if c.verdict == "worse":
                worse.append(f"{c.metric} of {key} {c.ratio:.3g}x" if c.ratio is not None and c.change is None
                             else f"{c.metric} of {key} {c.change:+.4g} {c.unit}" if c.change is not None
                             else f"{c.metric} of {key}")
            elif c.verdict == "cannot judge":
                open_.append((f"{c.metric} of {key}", c.reason))
    a, b = str(rep.get("a") or "")[:12], str(rep.get("b") or "")[:12]
    rule = rep.get("rule") or {}
    if worse:
        more = f" and {len(worse) - shown} more" if len(worse) > shown else ""
        return ComparisonGate("failed", f"{len(worse)} metric(s) worse in {b} than {a}: {'; '.join(worse[:shown])}"
                                        f"{more} (latency: >= {rule.get('min_ratio')}x, p < {rule.get('alpha')}, "
                                        "the interval clear of the run-to-run spread; accuracy/drift: the absolute "
                                        "change)", tuple(worse), tuple(m for m, _ in open_))
    if open_:
        by_reason: dict[str, list[str]] = {}
        for m, why in open_:
            by_reason.setdefault(why or "spread wider than the threshold", []).append(m)
        parts = [f"{', '.join(ms[:shown])}{f' and {len(ms) - shown} more' if len(ms) > shown else ''} "
                 f"({why}: {REASONS.get(why, why).split(' -- ')[-1]})" for why, ms in by_reason.items()]
        return ComparisonGate("undecided", f"nothing worse, but {len(open_)} metric(s) of {b} vs {a} cannot be "
                                           f"judged: {'; '.join(parts)}", (), tuple(m for m, _ in open_))
    return ComparisonGate("passed", f"nothing worse in {b} than {a}")
