"""YAML test matrix -> cells -> stored runs (resume, shard, skip with reasons).

Two kinds of matrix, told apart by their keys (or an explicit ``kind: edge|train``):

* **train** -- the guide's format, accepted unmodified::

      model: resnet50
      backbone: keras.applications
      batch_sizes: [32, 64, 128, 256]
      devices: ['gpu', 'tpu']
      precision: ['fp32', 'mixed_float16']
      strategies: ['none', 'mirrored']
      metrics: [throughput, memory_usage, step_time]

  One cell per model x batch size x device x precision x strategy (x xla x input pipeline),
  run by ``edgebench.train.run_train_baseline``.
* **edge** -- ``models`` (reference model names, ``all``, SavedModel / .keras paths or .tflite
  files) x ``targets`` (host, tf, adb:SERIAL, adb:all) x ``threads`` x ``delegates`` x ``data``.
  ``precisions`` (fp32/fp16/int8/dynamic/int16x8) run together inside a cell: one conversion and one TF
  reference per cell, one stored row per precision. Source models go through
  ``edgebench.convert_and_compare.pipeline.convert_and_compare``; ``.tflite`` files through
  ``edgebench.bench.run.run_bench`` (as-is: ``precisions`` does not apply to them).

Every cell has a stable key (``model=digits,target=host,threads=default,...``); the matrix hash
(sha256 of the normalised matrix, overrides included) names the matrix in the store, so
``--resume`` skips cells already stored *ok* for the same hash, and ``--shard K/N`` takes cells
``K-1, K-1+N, K-1+2N, ...`` of the expanded order (deterministic: same file, same slice).
Cells that cannot run here (no GPU, no TPU, a producer missing from this build, a delegate the
host lacks) are reported ``skipped`` with the reason, never dropped silently. Each finished cell
is saved in its own transaction before the next starts, so a Ctrl-C or SIGKILL loses only the
cell in flight.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
from collections import Counter
from dataclasses import dataclass, field
from dataclasses import fields as dc_fields
from pathlib import Path
from typing import Any, Callable, Protocol

import yaml

from edgebench.bench.run import BenchSettings, run_bench
from edgebench.convert.run import DEFAULT_PRECISIONS, PRECISION_NAMES, ConvertSettings
from edgebench.convert_and_compare.pipeline import CompareSettings, convert_and_compare
from edgebench.core.bounded import compose_yaml, construct_yaml, load_yaml_text, read_bytes
from edgebench.core.errors import BadInput, EdgebenchError, InfraError, Interrupted
from edgebench.core.fingerprint import host_fingerprint
from edgebench.core.printable import shown
from edgebench.core.ranges import RANGES
from edgebench.matrix.probe import Probe
from edgebench.model.catalog import MODELS
from edgebench.report.publish import save_or_keep
from edgebench.rows import Document, InferenceRow, TrainRow
from edgebench.rows.identity import headline
from edgebench.sources.resolve import SourceOptions
from edgebench.targets.base import DELEGATES, HOST_DELEGATES, RunControl, RunOptions  # noqa: F401 -- HOST_DELEGATES: read as matrix.run.HOST_DELEGATES
from edgebench.train.settings import TrainSettings
from edgebench.train.sweep import run_train_baseline

KINDS = ("edge", "train")
# The most cells one matrix file may expand to, counted from its axes before anything is expanded
# (a 2 KB file can name 2,000,000 cells: expanding it took 150 s and 2.8 GB before a line was shown).
# The matrices in matrices/ have 2-32 cells; 4 batch sizes x every device, precision, strategy, XLA and
# input-pipeline value is 432;
# even at a second per cell 10,000 is most of a day -- split a larger campaign into several files.
# The file itself is read up to 1 MiB.
MAX_CELLS = 10_000
MAX_FILE_BYTES = 1024 ** 2
SIZES = ("tiny", "full")

EDGE_PRECISIONS = PRECISION_NAMES        # fp32, fp16, int8, dynamic, int16x8
TRAIN_PRECISIONS = ("fp32", "mixed_float16", "mixed_bfloat16")
DEVICES = ("cpu", "gpu", "tpu")
STRATEGIES = ("none", "mirrored", "multiworker")
TRAIN_METRICS = ("throughput", "memory_usage", "step_time")
BACKBONES = ("keras.applications", "edgebench")
INPUT_PIPELINES = ("naive", "optimized")


# ------------------------------------------------------------------------------------------
# schema


@dataclass(frozen=True)
class Key:
    """One matrix key: list-valued (an axis) or scalar, with a validator."""
    name: str
    kinds: tuple[str, ...]
    axis: bool                                  # list-valued (a scalar is accepted as a 1-list)
    check: Callable[[Any], str | None]          # value -> None (ok) or what is wrong
    allowed: str                                # shown in errors
    aliases: tuple[str, ...] = ()
    flag: str | None = None                     # the CLI option whose range (edgebench.core.ranges) applies


def _one_of(values: tuple[str, ...]) -> Callable[[Any], str | None]:
    return lambda v: None if isinstance(v, str) and v in values else "not allowed"


def _pos_int(v: Any) -> str | None:
    return None if isinstance(v, int) and not isinstance(v, bool) and v > 0 else "not a positive integer"


def _nonneg_num(v: Any) -> str | None:
    return None if isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0 else "not a number >= 0"


def _threads(v: Any) -> str | None:
    return None if v is None or v == "default" or _pos_int(v) is None else "not a positive integer or default"


def _onoff(v: Any) -> str | None:
    return None if isinstance(v, bool) or v in ("on", "off", "true", "false") else "not on/off"


def _str(v: Any) -> str | None:
    return None if isinstance(v, str) and v.strip() else "not a non-empty string"


def _data(v: Any) -> str | None:
    return None if v is None or (isinstance(v, str) and v.strip()) else "not a path, 'synthetic' or default"


def _target(v: Any) -> str | None:
    if not isinstance(v, str):
        return "not a target name"
    return None if v in ("host", "tf") or (v.startswith("adb:") and len(v) > 4) else "not allowed"


_KEYS: tuple[Key, ...] = (
    Key("kind", KINDS, False, _one_of(KINDS), "edge, train"),
    Key("models", KINDS, True, _str, "reference model names, 'all', or model paths", ("model",)),
    Key("precisions", ("edge",), True, _one_of(EDGE_PRECISIONS), ", ".join(EDGE_PRECISIONS), ("precision",)),
    Key("targets", ("edge",), True, _target, "host, tf, adb:SERIAL, adb:all", ("target",)),
    Key("threads", ("edge",), True, _threads, "positive integers or default", flag="--threads"),
    Key("delegates", ("edge",), True, _one_of(DELEGATES), ", ".join(DELEGATES), ("delegate",)),
    Key("data", KINDS, True, _data, "a data path, 'synthetic', or default (the model's own split)"),
    Key("runs", ("edge",), False, _pos_int, "a positive integer (timed runs per model)", flag="--runs"),
    Key("min_runs", ("edge",), False, _pos_int, "a positive integer", flag="--min-runs"),
    Key("min_time_s", ("edge",), False, _nonneg_num, "seconds >= 0", flag="--min-time"),
    Key("max_time_s", ("edge",), False, _nonneg_num, "seconds > 0", flag="--max-time"),
    Key("samples", ("edge",), False, _pos_int, "a positive integer (evaluation samples)", flag="--samples"),
    Key("calibration_samples", ("edge",), False, _pos_int, "a positive integer", flag="--calibration-samples"),
    Key("size", KINDS, False, _one_of(SIZES), "tiny, full"),
    Key("seed", KINDS, False, lambda v: None if isinstance(v, int) and not isinstance(v, bool) else "not an integer",
        "an integer", flag="--seed"),
    # training (the guide's keys)
    Key("backbone", ("train",), False, _one_of(BACKBONES), ", ".join(BACKBONES)),
    Key("batch_sizes", ("train",), True, _pos_int, "positive integers", ("batch_size",), flag="--batch-sizes"),
    Key("devices", ("train",), True, _one_of(DEVICES), ", ".join(DEVICES), ("device",)),
    Key("train_precisions", ("train",), True, _one_of(TRAIN_PRECISIONS), ", ".join(TRAIN_PRECISIONS)),
    Key("strategies", ("train",), True, _one_of(STRATEGIES), ", ".join(STRATEGIES), ("strategy",)),
    Key("metrics", ("train",), True, _one_of(TRAIN_METRICS), ", ".join(TRAIN_METRICS)),
    Key("xla", ("train",), True, _onoff, "on, off"),
    Key("input_pipelines", ("train",), True, _one_of(INPUT_PIPELINES), ", ".join(INPUT_PIPELINES),
        ("input_pipeline",)),
    Key("steps", ("train",), False, _pos_int, "a positive integer (timed steps)", flag="--steps"),
    Key("warmup_steps", ("train",), False, lambda v: None if isinstance(v, int) and not isinstance(v, bool)
        and v >= 0 else "not an integer >= 0", "an integer >= 0", flag="--warmup-steps"),
)
KEYS = {k.name: k for k in _KEYS}
_ALIAS = {a: k.name for k in _KEYS for a in k.aliases}
TRAIN_ONLY = {"backbone", "batch_sizes", "devices", "strategies", "metrics", "xla", "input_pipelines",
              "steps", "warmup_steps"}
EDGE_ONLY = {"targets", "threads", "delegates", "runs", "min_runs", "min_time_s", "max_time_s", "samples",
             "calibration_samples"}

# Axis defaults when a key is absent (each written once).
EDGE_DEFAULTS: dict[str, list[Any]] = {"precisions": list(DEFAULT_PRECISIONS), "targets": ["host"],
                                       "threads": [None], "delegates": ["xnnpack"], "data": [None]}
TRAIN_DEFAULTS: dict[str, list[Any]] = {"batch_sizes": [32], "devices": ["cpu"], "train_precisions": ["fp32"],
                                        "strategies": ["none"], "metrics": list(TRAIN_METRICS),
                                        "xla": ["off"], "input_pipelines": ["optimized"], "data": ["synthetic"]}
EDGE_AXES = ("models", "targets", "threads", "delegates", "data")          # cell axes, in key order
TRAIN_AXES = ("models", "batch_sizes", "devices", "train_precisions", "strategies", "xla",
              "input_pipelines", "data")
_CELL_NAME = {"models": "model", "targets": "target", "threads": "threads", "delegates": "delegate",
              "data": "data", "batch_sizes": "batch_size", "devices": "device", "train_precisions": "precision",
              "strategies": "strategy", "xla": "xla", "input_pipelines": "input_pipeline"}


# ------------------------------------------------------------------------------------------
# loading and validation


@dataclass(frozen=True)
class MatrixSpec:
    """A validated matrix: ``axes`` (list values) and ``settings`` (scalars), normalised."""
    path: str
    kind: str
    axes: dict[str, list[Any]]
    settings: dict[str, Any]
    lines: dict[str, int | str] = field(default_factory=dict)   # key -> line number (or the option)
    given: tuple[str, ...] = ()      # axes named in the file or overrides (others took defaults)

    @property
    def hash(self) -> str:
        canon = json.dumps({"kind": self.kind, "axes": self.axes, "settings": self.settings},
                           sort_keys=True, default=str)
        return hashlib.sha256(canon.encode()).hexdigest()[:16]


def _where(path: str, lines: dict[str, Any], key: str) -> str:
    ln = lines.get(key)
    if isinstance(ln, str):
        return ln          # an override: the option it came from
    return f"{path}:{ln}" if ln else path


def _compose(path: str, text: str) -> tuple[yaml.MappingNode, dict[str, int]]:
    """(the document's node graph, top-level key -> 1-based line), read within the bounded YAML
    loader's limits (``edgebench.core.bounded.compose_yaml``: aliases, expansion); duplicate keys are
    errors."""
    try:
        node = compose_yaml(text, path, "write the values out (no &anchors/*aliases) or split the matrix")
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else path
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise BadInput(f"{where}: invalid YAML ({shown(problem, quote=False)}); fix the syntax") from None
    if node is None:
        raise BadInput(f"{path}: the matrix file is empty; see matrices/ for examples")
    if not isinstance(node, yaml.MappingNode):
        raise BadInput(f"{path}:{node.start_mark.line + 1}: a matrix must be a mapping of keys "
                       "(model:, precisions:, ...), not a list or a scalar")
    lines: dict[str, int] = {}
    for k, _v in node.value:
        name = k.value
        if not isinstance(name, str):
            continue                   # a list or mapping as a key: refused by name below
        if name in lines:
            raise BadInput(f"{path}:{k.start_mark.line + 1}: key {shown(name)} appears twice (first on line "
                           f"{lines[name]}); keep one")
        lines[name] = k.start_mark.line + 1
    return node, lines


def parse_overrides(items: list[str] | tuple[str, ...]) -> dict[str, Any]:
    """['devices=[cpu, gpu]', 'steps=20'] -> {'devices': ['cpu', 'gpu'], 'steps': 20} (YAML values;
    a plain comma-separated value such as ``devices=cpu,gpu`` is a list too)."""
    out: dict[str, Any] = {}
    for item in items or ():
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise BadInput(f"--set {shown(item)}: use KEY=VALUE, e.g. --set devices=cpu,gpu or --set steps=20")
        where, fix = f"--set {shown(item)}", "write the values out"
        try:
            parsed = load_yaml_text(value, where, fix)
            if isinstance(parsed, str) and "," in parsed:   # devices=cpu,gpu -> a list
                parsed = [load_yaml_text(v.strip(), where, fix) for v in parsed.split(",") if v.strip()]
            out[key.strip()] = parsed
        except yaml.YAMLError as exc:
            raise BadInput(f"{where}: value is not valid YAML ({shown(str(exc).splitlines()[0], quote=False)})") from None
    return out


def _infer_kind(path: str, data: dict[str, Any], lines: dict[str, Any]) -> str:
    if "kind" in data:
        return data["kind"]
    train = sorted(k for k in data if k in TRAIN_ONLY)
    edge = sorted(k for k in data if k in EDGE_ONLY)
    precs = data.get("precisions")
    precs = precs if isinstance(precs, list) else [precs]
    if not train and any(isinstance(p, str) and p.startswith("mixed_") for p in precs):
        train = ["precisions"]
    if train and edge:
        raise BadInput(f"{path}: mixes training keys ({', '.join(train)}, line {lines.get(train[0])}) and edge "
                       f"keys ({', '.join(edge)}, line {lines.get(edge[0])}); split it into two files or add "
                       "kind: edge|train")
    return "train" if train else "edge"


def load_matrix(path: str, overrides: dict[str, Any] | None = None,
                override_labels: dict[str, str] | None = None) -> MatrixSpec:
    """Read, validate and normalise a matrix file (BadInput naming file, line, key, allowed values).

    ``overrides`` replace keys of the file (``--set KEY=VALUE``, ``--size``, ``--steps``) and are
    validated the same way; ``override_labels`` names the option each came from, for errors.
    """
    p = Path(path)
    try:
        text = read_bytes(p, MAX_FILE_BYTES, "a matrix file", "split it into several files").decode()
    except FileNotFoundError:
        raise BadInput(f"{path}: no such matrix file; see matrices/ for examples") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInput(f"{path}: cannot read the matrix file ({exc})") from None
    node, marks = _compose(path, text)
    lines: dict[str, Any] = dict(marks)
    try:
        raw = construct_yaml(node)
    except yaml.YAMLError as exc:       # a list or mapping as a key ("found unhashable key")
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else path
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise BadInput(f"{where}: {shown(problem, quote=False)}; keys are words such as models, precisions") from None
    # normalise aliases (model -> models, precision -> precisions, ...)
    data: dict[str, Any] = {}
    for k, v in raw.items():
        if not isinstance(k, str):
            raise BadInput(f"{path}: key {shown(k)} is not a name; keys are words such as models, precisions")
        name = _ALIAS.get(k, k)
        if name in data:
            raise BadInput(f"{path}:{lines.get(k)}: {shown(k)} and {shown(name)} both given; keep one")
        data[name] = v
        if k != name:
            lines[name] = lines.pop(k)
    # The file decides the kind; overrides (--steps on an edge matrix, say) are then checked against it.
    kind = _infer_kind(path, data, lines)
    for k, v in (overrides or {}).items():
        name = _ALIAS.get(k, k)
        data[name] = v
        lines[name] = (override_labels or {}).get(k, f"--set {k}")
    if "kind" in (overrides or {}):
        kind = data["kind"]
    if kind not in KINDS:
        raise BadInput(f"{_where(path, lines, 'kind')}: kind {shown(kind)} is not allowed; use edge or train")
    # the guide writes training precisions under 'precision'
    if kind == "train" and "precisions" in data:
        data["train_precisions"] = data.pop("precisions")
        lines["train_precisions"] = lines.pop("precisions", lines.get("train_precisions"))
    axes: dict[str, list[Any]] = {}
    settings: dict[str, Any] = {}
    for name, value in data.items():
        key = KEYS.get(name)
        if key is None or kind not in key.kinds or name == "kind":
            if name == "kind":
                continue
            allowed = sorted({_public(k.name, kind) for k in _KEYS if kind in k.kinds and k.name != "kind"})
            article = "an" if kind == "edge" else "a"
            raise BadInput(f"{_where(path, lines, name)}: unknown key {shown(name)} for {article} {kind} matrix; "
                           f"allowed keys: {', '.join(allowed)}")
        label = _public(name, kind)
        if key.axis:
            values = value if isinstance(value, list) else [value]
            if len(values) > MAX_CELLS:
                raise BadInput(f"{_where(path, lines, name)}: {label} lists {len(values):,} values, more than the "
                               f"{MAX_CELLS:,} cells a matrix may have; split it into several files")
            if not values:
                raise BadInput(f"{_where(path, lines, name)}: {label} is empty, so the matrix has no cells; "
                               f"give at least one of: {key.allowed}")
            for v in values:
                bad = key.check(v)
                if bad:
                    raise BadInput(f"{_where(path, lines, name)}: {label}: {shown(v)} is {bad}; allowed: {key.allowed}")
                _check_range(key, v, f"{_where(path, lines, name)}: {label}")
            norm = [_norm(name, v) for v in values]
            dupes = sorted({str(v) for v, k in Counter(map(str, norm)).items() if k > 1})
            if dupes:
                raise BadInput(f"{_where(path, lines, name)}: {label} lists {shown(', '.join(dupes), quote=False)} more than "
                               "once")
            axes[name] = norm
        else:
            if isinstance(value, (list, dict)):
                raise BadInput(f"{_where(path, lines, name)}: {label} takes one value ({key.allowed}), not a list")
            bad = key.check(value)
            if bad:
                raise BadInput(f"{_where(path, lines, name)}: {label}: {shown(value)} is {bad}; allowed: {key.allowed}")
            _check_range(key, value, f"{_where(path, lines, name)}: {label}")
            settings[name] = value
    if "models" not in axes:
        raise BadInput(f"{path}: no model; add 'model: NAME' or a 'models:' list (reference names: "
                       f"{', '.join(_reference_models()) or 'see edgebench models list'})")
    axes["models"] = _expand_models(path, lines, axes["models"], kind)
    given = tuple(a for a in axes if a in data)
    for name, default in (EDGE_DEFAULTS if kind == "edge" else TRAIN_DEFAULTS).items():
        axes.setdefault(name, list(default))
    spec = MatrixSpec(str(path), kind, axes, settings, lines, given)
    check_cells(spec)
    return spec


def check_cells(spec: MatrixSpec) -> int:
    """The number of cells ``spec`` expands to, counted from its axes (nothing is expanded);
    BadInput above ``MAX_CELLS``, naming the axes that multiply up."""
    axes = EDGE_AXES if spec.kind == "edge" else TRAIN_AXES
    n = math.prod(len(spec.axes[a]) for a in axes)
    if n > MAX_CELLS:
        sizes = " x ".join(f"{len(spec.axes[a])} {_public(a, spec.kind)}" for a in axes if len(spec.axes[a]) > 1)
        raise BadInput(f"{spec.path}: the matrix expands to {n:,} cells ({sizes}), more than the {MAX_CELLS:,} "
                       "one matrix may have; split it into several files")
    return n


def _check_range(key: Key, v: Any, where: str) -> None:
    """A number in a matrix is held to the range of the CLI option it stands for (``--runs`` for
    ``runs:``; ``edgebench.core.ranges``, written once): an infinite ``min_time_s`` or a seed of -1 is
    refused before any cell runs, as the option would be."""
    rng = RANGES.get(key.flag) if key.flag else None
    if rng is not None and isinstance(v, (int, float)) and not isinstance(v, bool) and not rng.ok(v):
        raise BadInput(f"{where}: {shown(v)} must be {rng.text()} (the range of {key.flag})")


def _public(name: str, kind: str) -> str:
    return "precision" if name == "train_precisions" else name


def _norm(name: str, v: Any) -> Any:
    if name == "threads":
        return None if v in (None, "default") else int(v)
    if name == "xla":
        return "on" if v in (True, "on", "true") else "off"
    if name == "data":
        return None if v in (None, "default") else str(v)
    return v


def _reference_models() -> list[str]:
    return list(MODELS)


def _expand_models(path: str, lines: dict[str, Any], names: list[str], kind: str) -> list[str]:
    refs = _reference_models()
    out: list[str] = []
    for n in names:
        if n == "all":
            out += [r for r in refs if r not in out]
            continue
        if n in refs:
            out.append(n)
            continue
        if kind == "edge" and Path(n).exists():
            out.append(n)
            continue
        raise BadInput(f"{_where(path, lines, 'models')}: model {shown(n)} is neither a reference model "
                       f"({', '.join(refs) or 'none registered'}{', all' if refs else ''})"
                       + (" nor an existing SavedModel/.keras/.tflite path" if kind == "edge" else "")
                       + "; fix the name or the path")
    if not out:
        raise BadInput(f"{_where(path, lines, 'models')}: models expand to nothing; name at least one model")
    return out


# ------------------------------------------------------------------------------------------
# cells


@dataclass(frozen=True)
class Cell:
    kind: str
    index: int                       # position in the full expansion (stable for a given hash)
    params: dict[str, Any]
    key: str
    skip: str | None = None          # reason it cannot run here

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, "kind": self.kind, "index": self.index, **self.params}


def cell_key(params: dict[str, Any]) -> str:
    return ",".join(f"{k}={'default' if v is None else v}" for k, v in params.items())


def expand(spec: MatrixSpec, *, probe: "Probe | None" = None) -> list[Cell]:
    """Every cell of the matrix in a stable order, with skip reasons filled in."""
    check_cells(spec)
    probe = probe or Probe()
    axes = EDGE_AXES if spec.kind == "edge" else TRAIN_AXES
    cells = []
    for i, combo in enumerate(itertools.product(*[spec.axes[a] for a in axes])):
        params = {_CELL_NAME[a]: v for a, v in zip(axes, combo)}
        if spec.kind == "edge":
            params["precisions"] = ",".join(spec.axes["precisions"])
            skip = probe.edge_skip(params)
        else:
            skip = probe.train_skip(params)
        # The key names the model and every axis the matrix sets or varies (defaults stay implicit;
        # the matrix hash covers them).
        shown = {_CELL_NAME[a] for a in axes if a == "models" or a in spec.given or len(spec.axes[a]) > 1}
        key = cell_key({k: v for k, v in params.items() if k in shown})
        cells.append(Cell(spec.kind, i, params, key, skip))
    return cells


def shard(cells: list[Cell], spec: str | None) -> list[Cell]:
    """'K/N' -> cells K-1, K-1+N, ... (1-based K); None -> all."""
    if not spec:
        return cells
    try:
        k_s, n_s = spec.split("/")
        k, n = int(k_s), int(n_s)
    except ValueError:
        raise BadInput(f"--shard {shown(spec)}: use K/N with integers, e.g. --shard 1/4") from None
    if n < 1 or not 1 <= k <= n:
        raise BadInput(f"--shard {spec}: need 1 <= K <= N, e.g. --shard 2/4")
    return [c for c in cells if c.index % n == k - 1]


# ------------------------------------------------------------------------------------------
# running


@dataclass(frozen=True)
class MatrixOptions:
    """How `matrix run` runs: the store, resume, shard, dry run, consent."""
    db: str | None = None
    resume: bool = False
    shard: str | None = None
    dry_run: bool = False
    trust_model: bool = False      # --trust-model (a command-line consent; a matrix file cannot give it)


def _control(s: dict[str, Any]) -> RunControl:
    """The matrix's run-control keys over RunControl's defaults (written once, in RunControl)."""
    timed = {"answer_width": None} if "min_time_s" in s else {}   # an explicit min_time: measure that long
    return RunControl(**{k: s[k] for k in ("runs", "min_runs", "min_time_s", "max_time_s") if k in s},
                      **timed).validate()


class _LanesOnly:
    """What a matrix cell's measuring call gets as ``progress``: the cell's own stage messages stay
    off the matrix's bar (one step per cell), its device lanes still get their lines."""

    def __init__(self, say: Any) -> None:
        self.lane = say.lane

    def __call__(self, msg: str) -> None:
        pass


def _edge_doc(spec: MatrixSpec, cell: Cell, progress: Any = None, trust_model: bool = False) -> "Document":
    s, p = spec.settings, cell.params
    sub = _LanesOnly(progress) if hasattr(progress, "lane") else None
    if str(p["model"]).endswith(".tflite"):

        kw: dict[str, Any] = {k: s[k] for k in ("seed",) if k in s}
        if p["data"] not in (None, "synthetic"):
            kw["data"] = p["data"]
        run = RunOptions(threads=p["threads"], delegate=p["delegate"], control=_control(s))
        return run_bench(BenchSettings(models=(p["model"],), targets=p["target"], run=run, **kw), progress=sub)

    conv = {k: s[k] for k in ("seed", "size", "calibration_samples") if k in s}
    kw = {"eval_samples": s["samples"]} if "samples" in s else {}
    precisions = tuple(p["precisions"].split(","))
    if p["target"] == "tf":
        precisions = precisions[:1]     # the reference is what this cell measures
    # Each cell converts into its own folder: shards running side by side never share files.
    out_dir = str(Path("edgebench-out") / f"matrix-{spec.hash}" / f"cell{cell.index:04d}")
    settings = CompareSettings(
        convert=ConvertSettings(src=p["model"], precisions=precisions, data=p["data"], out_dir=out_dir,
                                source=SourceOptions(trust_model=trust_model), **conv),
        run=RunOptions(threads=p["threads"], delegate=p["delegate"], control=_control(s)),
        targets=(p["target"],), data=p["data"], **kw)
    doc = convert_and_compare(settings, progress=sub)
    if p["target"] == "tf" and doc.reference is not None:
        doc = doc.with_rows([doc.reference])   # the TF reference is this cell's result row
    return doc


def _train_doc(spec: MatrixSpec, cell: Cell) -> "Document":
    """One training cell through ``edgebench.train.run_train_baseline(settings)``."""


    s, p = spec.settings, cell.params
    wanted = {"model": p["model"], "batch_sizes": (p["batch_size"],), "precisions": (p["precision"],),
              "strategies": (p["strategy"],), "xla": (p["xla"],), "input_pipelines": (p["input_pipeline"],),
              "data": p["data"] or "synthetic",
              **{k: s[k] for k in ("steps", "warmup_steps", "size", "seed") if k in s}}
    names = {f.name for f in dc_fields(TrainSettings)}
    doc = run_train_baseline(TrainSettings(**{k: v for k, v in wanted.items() if k in names}))
    if not isinstance(doc, Document):
        doc = Document.from_dict(doc)
    rows = []
    for row in doc.rows:
        facts = dict(row.facts)
        if s.get("backbone"):
            facts.setdefault("backbone", s["backbone"])
        rows.append(row.replace(device=row.device or p["device"], facts=facts))
    doc = doc.with_rows(rows)
    if spec.axes.get("metrics"):
        doc = doc.with_meta(metrics_requested=list(spec.axes.get("metrics", [])))
    return doc


def failure_doc(cell: Cell, err: EdgebenchError) -> "Document":
    p = cell.params
    known = dict(model=p.get("model"), target=p.get("target") or p.get("device"), status="failed", error=str(err),
                 exit_code=err.exit_code, error_type=type(err).__name__)
    if cell.kind == "train":
        row = TrainRow(**known, batch_size=p["batch_size"], precision=p["precision"])
        return Document.new("train", [row], host_fingerprint())
    return Document.new("compare", [InferenceRow(**known)], host_fingerprint())


def _headline(doc: "Document") -> str:
    parts = []
    for r in doc.rows[:4]:
        h = headline(r)
        if h["status"] != "ok":
            parts.append(f"{h['precision'] or ''} FAILED".strip())
        elif h["p99_ms"] is not None:
            parts.append(f"{h['precision'] or ''} p99 {h['p99_ms']:.3g} ms".strip())
        elif h["examples_per_s"] is not None:
            parts.append(f"{h['examples_per_s']:.4g} ex/s")
    more = len(doc.rows) - 4
    return "; ".join(parts) + (f"; +{more} rows" if more > 0 else "")


class CellExecutor(Protocol):
    """Where a matrix's cells run when not one after another in this process (the local default):
    ``edgebench.matrix.ray_executor.RayExecutor`` runs each cell as a Ray task. ``skip_reason(cell)``
    says why a cell cannot run there (None: it can); ``run(spec, cells, finish, trust_model)`` runs the
    cells, calls ``finish(cell, doc, status, reason, **facts)`` once per cell as each one ends
    (``doc`` None with status "interrupted" for a cell stopped by Ctrl-C/SIGTERM) and returns the
    interruption's name or None."""
    name: str

    def skip_reason(self, cell: Cell) -> str | None: ...

    def run(self, spec: MatrixSpec, cells: list[Cell], finish: Callable[..., None], trust_model: bool) -> str | None: ...


def run_cell(spec: MatrixSpec, cell: Cell, progress: Any = None,
             trust_model: bool = False) -> tuple["Document", str, str | None]:
    """Run one cell here: (its document, status ok/failed/skipped, reason). The unit of work of every
    executor; an EdgebenchError becomes the cell's failed document."""
    try:
        doc = (_edge_doc(spec, cell, progress, trust_model) if cell.kind == "edge" else _train_doc(spec, cell))
    except EdgebenchError as err:
        return failure_doc(cell, err), "failed", str(err)
    failed = [r for r in doc.rows if r.status == "failed"]
    if doc.rows and all(r.status == "skipped" for r in doc.rows):
        # the producer found it cannot run here: report, store nothing
        return doc, "skipped", getattr(doc.rows[0], "reason", None) or doc.rows[0].error or "skipped by producer"
    return doc, ("failed" if failed else "ok"), (failed[0].error if failed else None)


def run_matrix(spec: MatrixSpec, opts: MatrixOptions,
               on_cell: Callable[[str, Cell, dict[str, Any] | None], None] | None = None,
               progress: Any = None, executor: CellExecutor | None = None) -> dict[str, Any]:
    """Run (or list, with ``dry_run``) this shard's cells; each finished cell is stored at once.

    ``progress``: a reporter with device lanes (``cli._common.progress_reporter``): a cell's device
    lanes show their own lines under the matrix's bar.

    ``on_cell(event, cell, outcome)`` is called once with "plan" (cell None, outcome {"total": n}),
    then with "start" before a cell runs and "done" after every cell (also skipped/resumed ones)
    so a CLI can draw progress. ``executor`` (None: here, one cell after another) runs the cells
    elsewhere (:class:`CellExecutor`; "start" then comes as each cell ends); the store, resume and
    the report are the same. Returns the report
    ``{"matrix", "matrix_hash", "kind", "total_cells", "shard", "cells": [{key, status, run_id,
    reason, headline, index, params}], "counts": {...}}``.
    """
    cb = on_cell or (lambda *_a: None)
    cells = shard(expand(spec), opts.shard)
    if not cells:
        raise BadInput(f"{spec.path}: shard {opts.shard} has no cells (the matrix has fewer cells than shards)")
    store = None
    done: set[str] = set()
    if not opts.dry_run:
        from edgebench.store.db import Store

        store = Store(opts.db)
        if opts.resume:
            done = store.cell_keys(spec.hash)
    out: list[dict[str, Any]] = []
    interrupted: str | None = None
    cb("plan", None, {"total": len(cells)})
    elsewhere: list[Cell] = []
    recs: dict[int, dict[str, Any]] = {}

    def finish(cell: Cell, doc: "Document | None", status: str, reason: str | None, **facts: Any) -> None:
        rec = recs[cell.index]
        rec.update(facts)
        if doc is not None and status not in ("skipped", "interrupted"):
            rec["run_id"] = save_or_keep(store, doc, matrix_hash=spec.hash, cell=cell.to_dict())
            rec["headline"] = _headline(doc)
        rec.update(status=status, reason=reason)
        if executor is not None and status != "interrupted":
            cb("start", cell, None)
        cb("done", cell, rec)

    for cell in cells:
        rec = recs[cell.index] = {"index": cell.index, "key": cell.key, "params": cell.params,
                                  "status": None, "run_id": None, "reason": None, "headline": ""}
        out.append(rec)
        skip = cell.skip or (executor.skip_reason(cell) if executor is not None and not opts.dry_run else None)
        if skip:
            rec.update(status="skipped", reason=skip)
        elif opts.dry_run:
            rec.update(status="planned")
        elif cell.key in done:
            rec.update(status="resumed", reason="already stored for this matrix hash")
        elif executor is not None:
            elsewhere.append(cell)
            continue
        else:
            cb("start", cell, None)
            doc, status, reason = run_cell(spec, cell, progress, opts.trust_model)
            if doc.get("interrupted"):
                # Ctrl-C/SIGTERM inside the cell: the matrix stops here; the cell is not stored, so
                # --resume runs it again whole (a partial cell would pass for a finished one)
                interrupted = doc.get("interrupted_by") or "Ctrl-C"
                finish(cell, None, "interrupted", f"interrupted ({interrupted}); not stored, --resume reruns it")
                break
            finish(cell, doc, status, reason)
            continue
        cb("done", cell, rec)
    if elsewhere:
        interrupted = executor.run(spec, elsewhere, finish, opts.trust_model)
    out = [r for r in out if r["status"] is not None]
    counts: dict[str, int] = {}
    for r in out:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    return {"matrix": spec.path, "matrix_hash": spec.hash, "kind": spec.kind,
            "total_cells": len(expand(spec)), "shard": opts.shard, "db": None if store is None else store.where,
            "settings": spec.settings, "cells": out, "counts": counts, "interrupted_by": interrupted,
            **({} if executor is None else {"executor": executor.name})}


def raise_for_failures(report: dict[str, Any]) -> None:
    """After rendering: an interruption -> Interrupted (130/143/129); failed cells -> InfraError
    (exit 3); their rows are already stored."""
    if report.get("interrupted_by"):

        stored = sum(1 for c in report["cells"] if c["status"] in ("ok", "failed") and c.get("run_id"))
        raise Interrupted(f"interrupted ({report['interrupted_by']}): {stored} cell(s) stored before it; rerun "
                          "with --resume to run the rest", signal_name=report["interrupted_by"])
    failed = [c for c in report["cells"] if c["status"] == "failed"]
    if failed:
        raise InfraError(f"{len(failed)} of {len(report['cells'])} cells failed (first: {failed[0]['key']}: "
                         f"{failed[0]['reason']}); the other cells were stored; rerun with --resume to retry "
                         "only the failed ones")
