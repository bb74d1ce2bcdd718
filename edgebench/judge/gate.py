"""The CI gate: thresholds -> checks -> verdict -> exit code.

Thresholds apply per precision (``--gate FILE.yaml`` may set them per precision; command-line
values fill in every precision). Any row with NaN/Inf outputs (or a reference that produced
them) fails, with or without thresholds, and so does any silent-failure verdict (``verdicts.py``:
zero or constant output; cosine or delegation below ``--min-cosine`` / ``--min-delegated``). A
FAILED row (its target crashed) is an infrastructure failure, not a gate verdict.

Gate file format::

    default:            # applies to every precision unless overridden
      max_accuracy_drop: 1.0      # percentage points of task top-1 vs the TF reference
      min_psnr: 30                # dB, worst output
    int8:
      max_accuracy_drop: 2.0
      max_p99_ms: 5
      min_size_reduction: 70      # percent vs FP32
      min_cosine: 0.99            # mean cosine to the reference, every output
      min_delegated: 90           # percent of nodes the delegate/accelerator takes
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

import yaml

from edgebench.core.bounded import compose_yaml, read_bytes
from edgebench.core.errors import BadInput
from edgebench.core.latency import MIN_SAMPLES
from edgebench.core.printable import shown
from edgebench.core.ranges import RANGES

P99_MIN_SAMPLES = MIN_SAMPLES["p99"]

if TYPE_CHECKING:
    from edgebench.rows import InferenceRow

GATE_KEYS = {
    "max_accuracy_drop": "max_accuracy_drop_pp",
    "min_psnr": "min_psnr_db",
    "max_p99_ms": "max_p99_ms",
    "min_size_reduction": "min_size_reduction_pct",
    "min_cosine": "min_cosine",
    "min_delegated": "min_delegated_pct",
}
PRECISION_KEYS = ("default", "fp32", "fp16", "int8", "dynamic", "int16x8")


@dataclass(frozen=True)
class Thresholds:
    max_accuracy_drop_pp: float | None = None
    min_psnr_db: float | None = None
    max_p99_ms: float | None = None
    min_size_reduction_pct: float | None = None
    min_cosine: float | None = None
    min_delegated_pct: float | None = None

    def any(self) -> bool:
        return any(getattr(self, f.name) is not None for f in fields(self))

    def merged(self, override: "Thresholds") -> "Thresholds":
        return replace(self, **{f.name: getattr(override, f.name) for f in fields(self)
                                if getattr(override, f.name) is not None})


@dataclass(frozen=True)
class Check:
    precision: str
    target: str
    metric: str
    value: Any
    threshold: Any
    passed: bool
    message: str
    # not passed, and not failed either: the data cannot decide the check (a p99 from too few samples,
    # a tail over the limit measured while the load signal fired); a rerun decides it (exit 4)
    undecided: bool = False

    def to_dict(self) -> dict[str, Any]:
        out = {k: getattr(self, k) for k in ("precision", "target", "metric", "value", "threshold", "passed", "message")}
        if self.undecided:
            out["undecided"] = True
        return out


@dataclass(frozen=True)
class Verdict:
    checks: tuple[Check, ...]

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.checks)

    @property
    def failures(self) -> list[Check]:
        return [c for c in self.checks if not c.passed]

    def to_dict(self) -> dict[str, Any]:
        return {"passed": self.passed, "checks": [c.to_dict() for c in self.checks]}


# each threshold is held to the range of its command-line option (edgebench/core/ranges.py, written once)
# A gate file is a few lines of thresholds; 64 KiB is ~1,000 of them.
GATE_MAX_BYTES = 64 * 1024
GATE_FLAGS = {
    "max_accuracy_drop": "--max-accuracy-drop",
    "min_psnr": "--min-psnr",
    "max_p99_ms": "--max-p99-ms",
    "min_size_reduction": "--min-size-reduction",
    "min_cosine": "--min-cosine",
    "min_delegated": "--min-delegated",
}


def load_gate_file(path: str | Path) -> dict[str, Thresholds]:
    """Per-precision thresholds from YAML (yaml.safe_load's types; unknown keys are errors).

    Every error is BadInput naming the file and line (``gate.yaml:3: ...``): an unknown precision
    or threshold, a value that is not a number, a key given twice, and a number outside the range of
    the command-line option it stands for (``min_psnr: .nan``, ``max_accuracy_drop: -5``:
    ``edgebench.core.ranges``, the same ranges as ``--min-psnr`` and ``--max-accuracy-drop``)."""


    p = Path(path)
    fix = "give a YAML file of thresholds"
    try:
        text = read_bytes(p, GATE_MAX_BYTES, "a gate file", fix).decode("utf-8")
    except BadInput as e:
        raise BadInput(f"--gate {e}") from None
    except OSError as e:
        raise BadInput(f"--gate {p}: cannot read ({e.strerror or type(e).__name__}); {fix}") from None
    except UnicodeDecodeError:
        raise BadInput(f"--gate {p}: not a text file; {fix}") from None
    try:
        root = compose_yaml(text, f"--gate {p}", "write each threshold out (no &anchors/*aliases)")
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"{p}:{mark.line + 1}" if mark is not None else str(p)
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise BadInput(f"--gate {where}: not valid YAML ({shown(problem, quote=False)})") from None

    def at(node) -> str:
        return f"--gate {p}:{node.start_mark.line + 1}"

    if not isinstance(root, yaml.MappingNode):
        raise BadInput(f"--gate {p}: expected a mapping of precision -> thresholds, e.g. 'int8: {{max_accuracy_drop: 1.0}}'")
    loader = yaml.SafeLoader("")
    out: dict[str, Thresholds] = {}
    for key_node, vals_node in root.value:
        if not isinstance(key_node, yaml.ScalarNode):
            raise BadInput(f"{at(key_node)}: a precision key must be a name ({', '.join(PRECISION_KEYS)}), not a "
                           "list or a mapping")
        prec = key_node.value
        if prec not in PRECISION_KEYS:
            raise BadInput(f"{at(key_node)}: unknown precision key {shown(prec)}; use {', '.join(PRECISION_KEYS)}")
        if prec in out:
            raise BadInput(f"{at(key_node)}: precision {shown(prec)} appears twice; keep one")
        if not isinstance(vals_node, yaml.MappingNode):
            raise BadInput(f"{at(key_node)}: '{prec}' must map threshold names to numbers")
        kw: dict[str, float] = {}
        for k_node, v_node in vals_node.value:
            if not isinstance(k_node, yaml.ScalarNode):
                raise BadInput(f"{at(k_node)}: a threshold name must be a word ({', '.join(GATE_KEYS)}), not a list "
                               "or a mapping")
            k = k_node.value
            if k not in GATE_KEYS:
                raise BadInput(f"{at(k_node)}: unknown threshold {prec}.{shown(k, quote=False)}; use "
                               f"{', '.join(GATE_KEYS)}")
            if GATE_KEYS[k] in kw:
                raise BadInput(f"{at(k_node)}: {prec}.{k} appears twice; keep one")
            v = loader.construct_object(v_node, deep=True)
            if not isinstance(v, (int, float)) or isinstance(v, bool):
                raise BadInput(f"{at(v_node)}: {prec}.{k} must be a number, got {shown(v)}")
            flag = GATE_FLAGS[k]
            if not RANGES[flag].ok(v):
                raise BadInput(f"{at(v_node)}: {prec}.{k}: {shown(v)} must be {RANGES[flag].text()} (the range of "
                               f"{flag})")
            kw[GATE_KEYS[k]] = float(v)
        out[prec] = Thresholds(**kw)
    return out


def thresholds_for(precision: str, cli: Thresholds, file: dict[str, Thresholds] | None) -> Thresholds:
    t = Thresholds()
    if file:
        t = t.merged(file.get("default", Thresholds())).merged(file.get(precision, Thresholds()))
    return t.merged(cli) if cli.any() else t


def evaluate(rows: "Sequence[InferenceRow]", cli: Thresholds, file: dict[str, Thresholds] | None = None,
             reference: str = "TF reference") -> Verdict:
    """Check every measured row (precision x target) against its thresholds."""
    checks: list[Check] = []
    for r in rows:
        if not r.ok or r.is_reference:
            continue
        prec, target = r.precision or "?", r.target or "?"
        where = f"{prec} on {target}"
        # Non-finite outputs fail with or without thresholds: every drift number is n/a then, and
        # a run that looks fine while its model emits NaN must not exit 0.
        nonfinite = r.worst.nonfinite if r.worst else 0
        if nonfinite:
            checks.append(Check(prec, target, "nonfinite_outputs", nonfinite, 0, False,
                                f"{where}: {nonfinite} NaN/Inf output values (NaN/Inf outputs always fail; "
                                "every drift metric is n/a); check the conversion and the input range"))
        ref_bad = r.worst.ref_nonfinite if r.worst else 0
        if ref_bad:
            checks.append(Check(prec, target, "reference_nonfinite_outputs", ref_bad, 0, False,
                                f"{where}: the reference produced {ref_bad} NaN/Inf output values, so drift "
                                "cannot be measured; check the source model and the input range"))
        th = thresholds_for(prec, cli, file)
        if not th.any():
            continue
        if th.max_accuracy_drop_pp is not None:
            drop = r.top1_drop_pp
            if drop is None:
                raise BadInput(f"--max-accuracy-drop needs task accuracy, but {where} has none (no labels in "
                               "the data); pass --data with a 'labels' array or drop the accuracy gate")
            ok = drop <= th.max_accuracy_drop_pp
            checks.append(Check(prec, target, "accuracy_drop_pp", drop, th.max_accuracy_drop_pp, ok,
                                f"{where}: top-1 drop {drop:.2f} pp vs {reference} "
                                f"{'<=' if ok else '>'} max {th.max_accuracy_drop_pp:g} pp"))
        if th.min_psnr_db is not None:
            psnr = r.worst.psnr_db if r.worst else None
            if psnr is None and (nonfinite or ref_bad):
                checks.append(Check(prec, target, "psnr_db", None, th.min_psnr_db, False,
                                    f"{where}: worst-output PSNR n/a (NaN/Inf outputs) < min {th.min_psnr_db:g} dB"))
            elif psnr is None:
                raise BadInput(f"--min-psnr needs drift against the reference, but {where} has none")
            else:
                ok = psnr >= th.min_psnr_db
                checks.append(Check(prec, target, "psnr_db", psnr, th.min_psnr_db, ok,
                                    f"{where}: worst-output PSNR {psnr:.2f} dB {'>=' if ok else '<'} min "
                                    f"{th.min_psnr_db:g} dB"))
        if th.max_p99_ms is not None:
            p99 = r.latency.p99 if r.latency else None
            if p99 is None:
                raise BadInput(f"--max-p99-ms needs latency, but {where} has none")
            valid = r.latency.p99_valid
            ok = p99 <= th.max_p99_ms and bool(valid)
            # a p99 from too few samples is not a p99: the gate cannot judge it, so it does not pass
            # (issue 44: a gate never passes what it could not judge)
            why = "" if valid else (f" -- cannot judge: a p99 from {r.latency.samples} samples is not valid (needs "
                                    f"{P99_MIN_SAMPLES}); rerun with --min-runs {P99_MIN_SAMPLES}")
            # load only makes a tail worse: a p99 over the limit while the load signal fired may be the
            # machine's, not the model's, so it is not judged (a p99 under the limit despite load passes)
            loaded = not ok and bool(valid) and bool(getattr(r.latency, "loaded", False))
            load = (" -- cannot judge: the load signal fired on this row, so other work on the machine may have "
                    "made the tail; rerun on a quiet machine" if loaded else "")
            checks.append(Check(prec, target, "p99_ms", p99, th.max_p99_ms, ok,
                                f"{where}: p99 {p99:.3f} ms {'<=' if p99 <= th.max_p99_ms else '>'} max "
                                f"{th.max_p99_ms:g} ms{why}{load}", undecided=not ok and (not valid or loaded)))
        if th.min_cosine is not None:
            cos = r.worst.cosine if r.worst else None
            if cos is None:
                raise BadInput(f"--min-cosine needs outputs compared with the reference, but {where} has none")
            ok = cos >= th.min_cosine and not nonfinite
            checks.append(Check(prec, target, "cosine", cos, th.min_cosine, ok,
                                f"{where}: worst-output cosine {cos:.5f} {'>=' if ok else '<'} min {th.min_cosine:g}"))
        if th.min_delegated_pct is not None:
            d = r.delegation
            pct = None if d is None or d.fraction is None else 100.0 * d.fraction
            ok = pct is not None and pct >= th.min_delegated_pct
            what = (f"{d.delegate} took {d.nodes_delegated}/{d.nodes_total} nodes ({pct:.1f}%)" if pct is not None
                    else "the delegated node count is unknown for this row")
            checks.append(Check(prec, target, "delegated_pct", pct, th.min_delegated_pct, ok,
                                f"{where}: {what} {'>=' if ok else '<'} min {th.min_delegated_pct:g}%"))
        reported = {"nonfinite", "low_cosine", "low_delegation"}   # the checks above say these
        for v in r.verdicts:
            if v.failed and v.kind not in reported:
                checks.append(Check(prec, target, f"verdict:{v.kind}", v.value, v.threshold, False,
                                    f"{where}: {v.message} ({v.advice})"))
        if th.min_size_reduction_pct is not None:
            red = r.size_reduction_pct
            if red is None:
                raise BadInput(f"--min-size-reduction needs an FP32 baseline size, but {where} has none")
            ok = red >= th.min_size_reduction_pct
            checks.append(Check(prec, target, "size_reduction_pct", red, th.min_size_reduction_pct, ok,
                                f"{where}: size reduction {red:.1f}% {'>=' if ok else '<'} min "
                                f"{th.min_size_reduction_pct:g}%"))
    return Verdict(tuple(checks))
