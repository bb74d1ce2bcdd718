"""The diagnose worker: per-tensor error of a quantized .tflite against its float counterpart.

Started by ``convert.quant.layers`` (for ``edgebench diagnose``) in its own process (``python -m edgebench.convert.quant.tensor_worker JOB``,
launched like the benchmark runner by ``edgebench.targets.host.spawn_worker``): LiteRT runs the
user's models here, so a kernel crash or a hang costs this process, never the CLI. ``JOB`` is a
JSON file::

    {"float_model": "m_calibrated.tflite", "quant_model": "m_int8.tflite",
     "inputs_npz": "inputs.npz", "samples": 100, "isolated": true, "out_dir": "...",
     "float_state": null | {...}, "quant_state": null | {...},      # tflite_model.state of each file
     "state_rule": null | {"mode": "independent" | "streams", "starts": [...]}}   # edgebench.model.state_rule

It writes ``result.json`` (``status``, ``error``, ``error_kind``, ``tensors``, ``unmatched``,
``intermediates``, ``memory``) and ``result.npz`` (``out::<name>``: the quantized model's final
outputs per sample, run exactly as the host target runs it: default delegates). Exit status 0 ok,
2 bad input, 3 internal failure (the parent maps crashes/hangs itself).

**Samples are processed one at a time**: each sample's intermediate tensors are reduced to running
sums before the next sample runs, so memory does not grow with ``samples``; the bound it does keep
(model weights, one sample's activations of both models, one small model per op, per-channel
histograms) is computed from the graphs and reported with the measured peak RSS.

**How intermediate tensors are read** (the LiteRT caveat google-ai-edge/LiteRT#413: preserving
intermediates may change final outputs): both models run with the builtin kernels (no default
delegate, whose fused partitions hide intermediates) and ``experimental_preserve_all_tensors``.
Before any statistics, every sample also runs *without* preserving; if any final output differs
bit for bit, preserving is not trusted: the model is rewritten with every intermediate tensor as
an extra graph output (outputs are never reused by the memory planner) and that rewrite is checked
the same way. If that differs too, accumulated errors are omitted and only isolated errors (which
need no intermediates) are reported.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from edgebench.targets.runner import _sibling
from edgebench.model.tflite_rewrite import expose_outputs, graph_id, load_model_t, single_op_model

rt = _sibling("runner_io")  # the worker's runtime and tensor helpers: the same module object the runner uses

# Ops that run other subgraphs or hold state: an isolated single-op model cannot reproduce them.
NO_ISOLATION = {"WHILE", "IF", "CALL", "CALL_ONCE", "VAR_HANDLE", "READ_VARIABLE", "ASSIGN_VARIABLE",
                "STABLEHLO_WHILE", "STABLEHLO_CASE", "STABLEHLO_COMPOSITE", "HASHTABLE", "HASHTABLE_FIND",
                "HASHTABLE_IMPORT", "HASHTABLE_SIZE"}
# Ops that only move a value between number formats: their output carries their input's value.
REQUANTIZE_OPS = {"QUANTIZE", "DEQUANTIZE"}
FLOAT_KINDS = ("f",)

# Outlier histograms: |x| binned by binary exponent, SUB_BINS linear sub-bins per octave, over
# 2^EXP_LO .. 2^EXP_HI (values outside are clamped to the edge bins; bin 0 holds exact zeros).
# A percentile is read as its bin's upper edge, so the outlier ratio is never overstated; the
# bins are at most 1/SUB_BINS of an octave wide (<= 25 % relative).
SUB_BINS = 4
EXP_LO, EXP_HI = -32, 32
N_BINS = (EXP_HI - EXP_LO) * SUB_BINS + 1
OUTLIER_QUANTILE = 0.999
# Memory bound terms: per element of the largest tensor, the float64/int64 temporaries of one
# statistics update (got, ref, diff, squares, |x|, frexp mantissa/exponent, bin indices) stay
# under 128 bytes; the allocator and lazily loaded code add a few MiB regardless of the model
# (measured ~4.5 MiB on this project's machine, independent of the sample count).
TEMP_BYTES_PER_ELEMENT = 128
ALLOCATOR_SLACK_BYTES = 8 << 20


# ---------------------------------------------------------------------------- graphs


@dataclass
class Graph:
    """Subgraph 0 of a model as the interpreter sees it (tensor details, ops, edges)."""

    tensors: dict[int, dict[str, Any]]
    ops: list[dict[str, Any]]
    inputs: list[int]
    outputs: list[int]
    producer: dict[int, int] = field(default_factory=dict)
    consumers: dict[int, list[int]] = field(default_factory=dict)

    @classmethod
    def from_interpreter(cls, it) -> "Graph":
        tensors = {}
        for d in it.get_tensor_details():
            tensors[int(d["index"])] = d
        ops = []
        for o in it._get_ops_details():  # noqa: SLF001 -- the public API has no op list
            ops.append({"index": int(o["index"]), "op": str(o["op_name"]),
                        "inputs": [int(i) for i in o["inputs"]], "outputs": [int(i) for i in o["outputs"]]})
        g = cls(tensors, ops, [int(d["index"]) for d in it.get_input_details()],
                [int(d["index"]) for d in it.get_output_details()])
        for o in ops:
            for t in o["outputs"]:
                g.producer[t] = o["index"]
            for t in o["inputs"]:
                if t >= 0:
                    g.consumers.setdefault(t, []).append(o["index"])
        return g

    def activations(self) -> list[int]:
        """Graph inputs, then op outputs in execution order -- without tensors computed from
        constants only (e.g. fp16 weights' DEQUANTIZE): those are weights, whose error shows in
        the op that uses them."""
        const = self.constant_derived()
        seen, out = set(), []
        for t in self.inputs + [t for o in self.ops for t in o["outputs"]]:
            if t not in seen and t not in const:
                seen.add(t)
                out.append(t)
        return out

    def constant_derived(self) -> set[int]:
        live = set(self.inputs)
        derived: set[int] = set()
        for o in self.ops:   # execution order: producers come first
            ins = [t for t in o["inputs"] if t >= 0]
            if ins and all(t not in live and (t in derived or t not in self.producer) for t in ins):
                derived.update(o["outputs"])
            else:
                live.update(o["outputs"])
        return derived

    def name(self, t: int) -> str:
        return str(self.tensors[t]["name"]) if t in self.tensors else f"#{t}"


def _numeric(d: dict[str, Any]) -> bool:
    """Tensors whose error means something: float, or integer with a quantization scale."""
    dt = np.dtype(d["dtype"])
    if dt.kind in FLOAT_KINDS:
        return True
    qp = d.get("quantization_parameters") or {}
    return dt.kind in "iu" and len(qp.get("scales", [])) > 0 and float(qp["scales"][0]) != 0.0


def _scale_zp(d: dict[str, Any]) -> tuple[float | None, int | None]:
    qp = d.get("quantization_parameters") or {}
    scales, zps = qp.get("scales", []), qp.get("zero_points", [])
    if len(scales) == 0 or np.dtype(d["dtype"]).kind not in "iu":
        return None, None
    return float(scales[0]), int(zps[0]) if len(zps) else 0


def match_tensors(fg: Graph, qg: Graph) -> tuple[dict[int, tuple[int, str]], list[dict[str, Any]]]:
    """Quantized activation tensor -> (float tensor, rule). Unmatched ones are returned, not dropped.

    Rules, in order: (1) ``name``: the same tensor name (the converter keeps an op's output name
    when it quantizes the op); (2) ``requantize``: the output of a QUANTIZE/DEQUANTIZE carries the
    value of its input, so it takes its input's match; (3) ``op order``: the k-th op of a type in the
    quantized graph (QUANTIZE/DEQUANTIZE not counted) is the k-th op of that type in the float graph,
    output j to output j, when the shapes agree.
    """
    by_name: dict[str, int] = {}
    for t in fg.activations():
        by_name.setdefault(fg.name(t), t)
    match: dict[int, tuple[int, str]] = {}
    for t in qg.inputs:
        if qg.name(t) in by_name and list(fg.tensors[by_name[qg.name(t)]]["shape"]) == list(qg.tensors[t]["shape"]):
            match[t] = (by_name[qg.name(t)], "name")
        elif len(qg.inputs) == len(fg.inputs) == 1:
            match[t] = (fg.inputs[0], "op order")

    def kth(g: Graph) -> dict[tuple[str, int], dict[str, Any]]:
        seen: dict[str, int] = {}
        out = {}
        for o in g.ops:
            if o["op"] in REQUANTIZE_OPS:
                continue
            k = seen.get(o["op"], 0)
            seen[o["op"]] = k + 1
            out[(o["op"], k)] = o
        return out

    f_kth = kth(fg)
    q_pos = {o["index"]: key for key, o in kth(qg).items()}
    acts = set(qg.activations())

    def same_shape(ft: int, qt: int) -> bool:
        return list(fg.tensors[ft]["shape"]) == list(qg.tensors[qt]["shape"])

    for o in qg.ops:
        for j, t in enumerate(o["outputs"]):
            if t not in acts:
                continue
            if qg.name(t) in by_name and same_shape(by_name[qg.name(t)], t):
                match[t] = (by_name[qg.name(t)], "name")
            elif o["op"] in REQUANTIZE_OPS and o["inputs"] and o["inputs"][0] in match:
                match[t] = (match[o["inputs"][0]][0], "requantize")
            elif o["index"] in q_pos and q_pos[o["index"]] in f_kth:
                fo = f_kth[q_pos[o["index"]]]
                if j < len(fo["outputs"]) and same_shape(fo["outputs"][j], t):
                    match[t] = (fo["outputs"][j], "op order")
    unmatched = []
    for o in qg.ops:
        for t in o["outputs"]:
            if t in acts and t not in match and _numeric(qg.tensors[t]):
                unmatched.append({"tensor": qg.name(t), "op": o["op"], "node": o["index"],
                                  "reason": "no float tensor with this name, no float op of this type at "
                                            "this position with the same shape"})
    return match, unmatched


# Ops that only move elements (same values, same order): a fake quantization after them applies to
# their input's values too.
SAME_ELEMENTS_OPS = {"RESHAPE", "SQUEEZE", "EXPAND_DIMS"}


def fake_quant_views(fg: Graph) -> dict[int, int]:
    """Float tensor -> the DEQUANTIZE output that holds its fake-quantized value, for a float model
    that keeps its own fake quantization (a QAT model's fp32 file: T -> [RESHAPE ...] -> QUANTIZE ->
    DEQUANTIZE). The int8 tensor T stands for that value, not for T before its fake-quant: compared
    with the latter, a QAT model's layers read 13-29 dB instead of 49-57 and its logits got a false
    "clipping" finding. Element-preserving ops between T and the QUANTIZE are followed (the value is
    the DEQUANTIZE output reshaped to T's shape)."""
    ops = {o["index"]: o for o in fg.ops}
    views: dict[int, int] = {}
    for f in fg.activations():
        if np.dtype(fg.tensors[f]["dtype"]).kind != "f":
            continue
        cur = f
        for _ in range(8):
            cons = [ops[c] for c in fg.consumers.get(cur, []) if c in ops]
            if len(cons) != 1:
                break
            op = cons[0]
            if op["op"] == "QUANTIZE":
                codes = op["outputs"][0]
                deq = [ops[c] for c in fg.consumers.get(codes, []) if c in ops and ops[c]["op"] == "DEQUANTIZE"]
                if deq:
                    views[f] = deq[0]["outputs"][0]
                break
            if op["op"] not in SAME_ELEMENTS_OPS:
                break
            cur = op["outputs"][0]
    return views


# ---------------------------------------------------------------------------- statistics


def channel_view(x: np.ndarray) -> np.ndarray:
    """[elements, channels]: the last axis is the channel axis (NHWC, [batch, features], [.., hidden])."""
    if x.ndim >= 2 and x.shape[-1] > 1:
        return x.reshape(-1, x.shape[-1])
    return x.reshape(-1, 1)


class ErrorStats:
    """Running error of ``got`` against ``ref`` over samples (sums only: O(channels) memory)."""

    def __init__(self) -> None:
        self.n = 0
        self.elements = 0
        self.err2 = 0.0
        self.ref2 = 0.0
        self.max_abs = 0.0
        self.cos_sum = 0.0
        self.ch_err2: np.ndarray | None = None
        self.ch_ref2: np.ndarray | None = None
        self.nonfinite = 0

    def add(self, got: np.ndarray, ref: np.ndarray) -> None:
        g = np.asarray(got, np.float64).reshape(ref.shape)
        r = np.asarray(ref, np.float64)
        bad = ~np.isfinite(g)
        if bad.any():
            self.nonfinite += int(bad.sum())
            g = np.where(bad, 0.0, g)
        d = g - r
        cd, cr = channel_view(d), channel_view(r)
        e2, r2 = (cd * cd).sum(axis=0), (cr * cr).sum(axis=0)
        if self.ch_err2 is None or self.ch_err2.shape != e2.shape:
            self.ch_err2, self.ch_ref2 = np.zeros_like(e2), np.zeros_like(r2)
        self.ch_err2 += e2
        self.ch_ref2 += r2
        self.err2 += float(e2.sum())
        self.ref2 += float(r2.sum())
        self.max_abs = max(self.max_abs, float(np.abs(d).max()) if d.size else 0.0)
        # Plain multiply-and-sum: np.linalg.norm's BLAS dot was 5x slower here on busy cores.
        ng, nr = math.sqrt(float(np.multiply(g, g).sum())), math.sqrt(float(r2.sum()))
        self.cos_sum += 1.0 if ng == nr == 0 else (float(np.multiply(g, r).sum()) / (ng * nr) if ng and nr else 0.0)
        self.n += 1
        self.elements += int(r.size)

    def to_dict(self) -> dict[str, Any]:
        if not self.n:
            return {}
        rmse = math.sqrt(self.err2 / max(self.elements, 1))
        ch = None
        if self.ch_ref2 is not None and len(self.ch_ref2) > 1:
            live = self.ch_ref2 > 0
            if live.any():
                with np.errstate(divide="ignore"):
                    snr = 10 * np.log10(self.ch_ref2[live] / self.ch_err2[live])
                ch = float(np.median(snr))
        return {"rmse": rmse, "snr_db": _snr(self.ref2, self.err2), "cosine": self.cos_sum / self.n,
                "max_abs": self.max_abs, "channel_snr_db": ch, "nonfinite": self.nonfinite, "samples": self.n}


def _snr(ref2: float, err2: float) -> float:
    if err2 == 0:
        return math.inf
    if ref2 == 0:
        return -math.inf
    return 10.0 * math.log10(ref2 / err2)


class RangeStats:
    """Float activation range and per-channel |x| histograms (for the outlier ratio)."""

    def __init__(self) -> None:
        self.lo = math.inf
        self.hi = -math.inf
        self.counts: np.ndarray | None = None
        self.ch_max: np.ndarray | None = None

    def add(self, x: np.ndarray) -> None:
        x = np.asarray(x, np.float32)
        if not x.size:
            return
        finite = x[np.isfinite(x)]
        if finite.size:
            self.lo = min(self.lo, float(finite.min()))
            self.hi = max(self.hi, float(finite.max()))
        a = np.abs(channel_view(np.nan_to_num(x, nan=0.0, posinf=0.0, neginf=0.0)))
        c = a.shape[1]
        m, e = np.frexp(a)
        b = ((np.clip(e, EXP_LO, EXP_HI - 1) - EXP_LO) * SUB_BINS
             + np.minimum(((m - 0.5) * 2 * SUB_BINS).astype(np.int64), SUB_BINS - 1) + 1)
        b[a == 0] = 0
        idx = (b + np.arange(c, dtype=np.int64) * N_BINS).ravel()
        counts = np.bincount(idx, minlength=c * N_BINS).reshape(c, N_BINS).astype(np.int32)
        if self.counts is None or self.counts.shape != counts.shape:
            self.counts = np.zeros_like(counts)
            self.ch_max = np.zeros(c, np.float64)
        self.counts += counts
        self.ch_max = np.maximum(self.ch_max, a.max(axis=0))

    def to_dict(self) -> dict[str, Any]:
        if self.counts is None:
            return {}
        q = _quantiles_upper(self.counts, OUTLIER_QUANTILE)
        top = float(self.ch_max.max())
        live = q > 0
        if live.any():
            ratio = top / float(np.median(q[live]))
        else:   # the bulk is exactly zero (e.g. a mostly-dead ReLU)
            ratio = math.inf if top > 0 else 1.0
        return {"min": self.lo, "max": self.hi, "abs_max": top, "channels": int(len(self.ch_max)),
                "outlier_ratio": ratio, "outlier_channel": int(np.argmax(self.ch_max)) if len(self.ch_max) > 1 else None,
                "p999_median": float(np.median(q[live])) if live.any() else 0.0}


def _quantiles_upper(counts: np.ndarray, q: float) -> np.ndarray:
    """Per row of bin counts: the upper edge of the bin holding the q-quantile (0 for bin 0)."""
    cum = np.cumsum(counts, axis=1, dtype=np.int64)
    total = cum[:, -1]
    k = np.argmax(cum >= (q * total)[:, None], axis=1)
    octave, sub = np.divmod(np.maximum(k - 1, 0), SUB_BINS)
    edge = (0.5 + (sub + 1) / (2 * SUB_BINS)) * np.exp2(octave + EXP_LO)
    return np.where((k == 0) | (total == 0), 0.0, edge)


def outlier_ratio_doc() -> str:
    return (f"max|x| / median over channels of the channel's {OUTLIER_QUANTILE:.1%} quantile of |x| "
            f"(log2 histogram, {SUB_BINS} bins per octave, quantile read at its bin's upper edge)")


# ---------------------------------------------------------------------------- running


def _interpreter(runtime, content: bytes, *, preserve: bool, delegates: bool):
    Interpreter, _load_delegate, OpResolverType, _ = runtime
    kw: dict[str, Any] = {"model_content": content}
    if not delegates:
        if OpResolverType is None:
            raise rt.JobError("this TFLite runtime cannot disable its default delegate; install ai-edge-litert",
                              bad_input=False)
        kw["experimental_op_resolver_type"] = OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES
    if preserve:
        kw["experimental_preserve_all_tensors"] = True
    it = Interpreter(**kw)
    it.allocate_tensors()
    return it


class Feeder:
    """Sets sample i of the InputSet on one interpreter (quantizing int8/int16 inputs). A stateful
    graph (``state``: tflite_model.state of the file) goes back to its initial state where the job's
    state rule says a sample or stream starts (``resets``; every sample without one), in place, or
    through ``rebuild`` (a fresh interpreter) when its variables cannot be reset in place."""

    def __init__(self, it, data: dict[str, np.ndarray], source: str, *, state: dict | None = None,
                 resets=None, rebuild=None) -> None:
        self.it = it
        self.inputs, self.outputs = rt.io_details(it)
        self.data = rt.map_inputs(data, self.inputs, source)
        self.source = source
        self.state, self.resets, self.rebuild = state, resets or rt.StateResets(None), rebuild

    def _start(self, i: int) -> None:
        if not self.resets(i):
            return
        if self.state is None:
            self.it.reset_all_variables()
        elif not rt.reset_state(self.it, self.state):
            if self.rebuild is None:
                raise rt.JobError("this model's variables can be reset only by a new interpreter", bad_input=False)
            self.it = self.rebuild()
            self.inputs, self.outputs = rt.io_details(self.it)

    def run(self, i: int) -> None:
        self._start(i)
        for det in self.inputs:
            arr = self.data[det["name"]][i:i + 1]
            self.it.set_tensor(det["index"], np.ascontiguousarray(rt._coerce(arr, det, self.source)))  # noqa: SLF001
        try:
            self.it.invoke()
        except (RuntimeError, ValueError) as exc:
            raise rt.JobError(f"inference failed on sample {i}: {rt._one_line(exc)}; check the input data "  # noqa: SLF001
                              "(value ranges such as token ids within the vocabulary)") from None

    def final_outputs(self) -> dict[str, np.ndarray]:
        out = {}
        for det in self.outputs:
            v = self.it.get_tensor(det["index"])
            out[det["name"]] = rt.dequantize(v, det) if rt.is_quantized(det) else np.array(v, copy=True)
        return out


def _same(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> float:
    """0.0 when bitwise equal, else the largest absolute difference (inf on shape/NaN mismatch)."""
    worst = 0.0
    for k, v in a.items():
        w = b.get(k)
        if w is None or np.shape(w) != np.shape(v):
            return math.inf
        if not np.array_equal(v, w, equal_nan=True):
            diff = np.abs(np.asarray(v, np.float64) - np.asarray(w, np.float64))
            worst = max(worst, float(np.nanmax(diff)) if np.isfinite(diff).any() else math.inf)
    return worst


def _dequant_value(v: np.ndarray, d: dict[str, Any]) -> np.ndarray | None:
    s, zp = _scale_zp(d)
    if s:
        return (v.astype(np.float64) - zp) * s
    if np.dtype(d["dtype"]).kind == "f":
        return v.astype(np.float64)
    return None


def _real(v: np.ndarray, d: dict[str, Any]) -> np.ndarray:
    """A float-model value as the real number it stands for: a float model may itself hold
    quantized tensors (a QAT model's fake-quant survives as QUANTIZE -> uint8 -> DEQUANTIZE), and
    their raw codes are not values -- comparing with them, or feeding them to an isolated op, made
    a QAT model's first conv read -0.1 dB isolated against 31 dB accumulated."""
    if np.dtype(d["dtype"]).kind in "iu" and _scale_zp(d)[0]:
        return _dequant_value(v, d)
    return v


def _to_input(value: np.ndarray, d: dict[str, Any]) -> np.ndarray:
    """A float-model value in the form a quantized op's input tensor holds."""
    dt = np.dtype(d["dtype"])
    s, zp = _scale_zp(d)
    if s:
        info = np.iinfo(dt)
        return np.clip(np.round(np.asarray(value, np.float64) / s) + zp, info.min, info.max).astype(dt)
    return np.asarray(value).astype(dt)


def _nbytes(d: dict[str, Any]) -> int:
    return int(np.prod([max(int(x), 1) for x in d["shape"]])) * np.dtype(d["dtype"]).itemsize


@dataclass
class OpModel:
    node: int
    it: Any
    inputs: list[int]          # quantized-graph tensor ids, in graph-input order
    outputs: list[int]
    in_dets: list[dict[str, Any]]
    out_dets: list[dict[str, Any]]


def _build_op_models(runtime, qraw: bytes, qg: Graph, match, wanted: set[int]) -> tuple[list[OpModel], dict[int, str]]:
    """One single-op interpreter per op that produces a tensor in ``wanted``; reasons for the rest."""
    model_t = load_model_t(qraw)
    models, skipped = [], {}
    for o in qg.ops:
        outs = [t for t in o["outputs"] if t in wanted]
        if not outs:
            continue
        if o["op"] in NO_ISOLATION:
            for t in outs:
                skipped[t] = f"{o['op']} runs subgraphs or keeps state; no isolated run"
            continue
        try:
            content, ins, full_outs = single_op_model(model_t, qraw, o["index"])
            it = _interpreter(runtime, content, preserve=False, delegates=False)
        except Exception as exc:  # noqa: BLE001 -- a kernel that cannot stand alone is reported, not fatal
            for t in outs:
                skipped[t] = f"the op alone does not load: {rt._one_line(exc)}"  # noqa: SLF001
            continue
        const = qg.constant_derived()   # e.g. fp16 weights' DEQUANTIZE: the quantized graph's own value is exact
        missing = [t for t in ins if t not in match and t not in const and _numeric(qg.tensors[t])]
        if missing:
            for t in outs:
                skipped[t] = f"input {qg.name(missing[0])} has no float counterpart"
            continue
        in_dets = sorted(it.get_input_details(), key=lambda d: d["index"])
        out_dets = sorted(it.get_output_details(), key=lambda d: d["index"])
        models.append(OpModel(o["index"], it, ins, full_outs, in_dets, out_dets))
    return models, skipped


def _load_job(job: dict[str, Any]) -> tuple[Any, int, bytes, bytes, dict[str, np.ndarray], int]:
    """(the runtime, the RSS before anything is loaded, the float and quantized model bytes, the
    inputs, how many samples are compared); a job that lacks a part is a ``JobError``."""
    for key in ("float_model", "quant_model", "inputs_npz"):
        if key not in job:
            raise rt.JobError(f"job has no {key}")
        if key != "inputs_npz":
            rt.check_flatbuffer(job[key])
    runtime = rt.load_runtime()
    base_rss = rt.rss_bytes("VmRSS") or 0
    with open(job["float_model"], "rb") as fh:
        fraw = fh.read()
    with open(job["quant_model"], "rb") as fh:
        qraw = fh.read()
    data = rt.load_npz(job["inputs_npz"])
    n_avail = min((len(v) for v in data.values()), default=0)
    n = min(int(job.get("samples") or n_avail), n_avail)
    if n <= 0:
        raise rt.JobError(f"{job['inputs_npz']} holds no samples; give at least one")
    return runtime, base_rss, fraw, qraw, data, n


def _run_isolated(m: OpModel, fv: dict[int, np.ndarray], q_feed: Feeder | None, match: dict[int, Any],
                  qg: Graph, iso: dict[int, ErrorStats]) -> None:
    """One op alone, fed the float model's values of this sample (an input without a float twin: the
    quantized graph's own value); its outputs' error against the float model goes to ``iso``."""
    for t, d in zip(m.inputs, m.in_dets):
        if t in match:
            value = _to_input(fv[match[t][0]], qg.tensors[t])
        else:   # no float twin: weights computed from constants (fp16 DEQUANTIZE) or integer
            # tensors (shapes, indices): the quantized graph's own value
            value = q_feed.it.get_tensor(t) if q_feed is not None else None
            if value is None:
                return
        if list(value.shape) != list(d["shape"]) and value.size == int(np.prod(d["shape"])):
            value = value.reshape(d["shape"])   # same elements, rank spelled differently (scalars)
        if list(value.shape) != list(d["shape"]):
            m.it.resize_tensor_input(d["index"], list(value.shape))
            m.it.allocate_tensors()
            m.in_dets = sorted(m.it.get_input_details(), key=lambda x: x["index"])
            m.out_dets = sorted(m.it.get_output_details(), key=lambda x: x["index"])
        m.it.set_tensor(d["index"], np.asarray(value, order="C"))   # keeps 0-d scalars 0-d
    m.it.reset_all_variables()
    m.it.invoke()
    for t, d in zip(m.outputs, m.out_dets):
        if t in iso:
            got = _dequant_value(m.it.get_tensor(d["index"]), qg.tensors[t])
            iso[t].add(got, np.asarray(fv[match[t][0]], np.float64))


def _tensor_record(t: int, fg: Graph, qg: Graph, match: dict[int, Any], views: dict[int, int],
                   acc: dict[int, ErrorStats], iso: dict[int, ErrorStats], iso_skipped: dict[int, str],
                   ranges: dict[int, RangeStats]) -> dict[str, Any]:
    """One measured tensor of the quantized graph: where it is, its float match, its errors and range."""
    d = qg.tensors[t]
    s, zp = _scale_zp(d)
    node = qg.producer.get(t)
    f = match[t][0]
    return {
        "tensor": qg.name(t), "index": t, "op": qg.ops[node]["op"] if node is not None else "INPUT",
        "node": node, "shape": [int(x) for x in d["shape"]], "dtype": np.dtype(d["dtype"]).name,
        "scale": s, "zero_point": zp, "float_tensor": fg.name(f),
        "match": match[t][1] + (" + fake-quant" if f in views else ""),
        "consumers": [qg.ops[c]["index"] for c in qg.consumers.get(t, [])],
        "input_indices": [x for x in (qg.ops[node]["inputs"] if node is not None else [])
                          if x >= 0 and (x in qg.producer or x in qg.inputs)],
        "accumulated": acc[t].to_dict() if t in acc else None,
        "isolated": iso[t].to_dict() if t in iso else None,
        "isolated_skipped": iso_skipped.get(t) if t not in iso else None,
        "range": ranges[f].to_dict(),
    }


def _working_set(fg: Graph, ranges: dict[int, RangeStats], needed_f: set[int],
                 deployed: dict[str, list[np.ndarray]], n: int) -> tuple[int, int, int]:
    """(histogram bytes, final outputs' bytes, per-sample working set): what pass 2 adds to the RSS
    after setup."""
    chans = {f: (int(fg.tensors[f]["shape"][-1]) if len(fg.tensors[f]["shape"]) >= 2 and
                 int(fg.tensors[f]["shape"][-1]) > 1 else 1) for f in ranges}
    hist_bytes = sum(c * N_BINS * 4 for c in chans.values())
    max_elems = max((int(np.prod(fg.tensors[f]["shape"])) for f in needed_f), default=0)
    max_chan = max(chans.values(), default=1)
    out_bytes = sum(np.asarray(v[0]).nbytes * n for v in deployed.values())
    per_sample = (hist_bytes + 8 * N_BINS * max_chan * 2         # histograms + one tensor's bincount temporaries
                  + sum(_nbytes(fg.tensors[f]) for f in needed_f)  # this sample's float values (copies)
                  + TEMP_BYTES_PER_ELEMENT * max_elems              # temporaries of the largest tensor
                  + ALLOCATOR_SLACK_BYTES)
    return hist_bytes, out_bytes, per_sample


def _memory(fg: Graph, qg: Graph, fraw: bytes, qraw: bytes, *, base_rss: int, setup_rss: int, setup_peak: int,
            per_sample: int, out_bytes: int, hist_bytes: int) -> dict[str, Any]:
    """The result's ``memory``: the bound the worker's RSS stays under, and what it is made of."""
    act_f = sum(_nbytes(fg.tensors[t]) for t in fg.activations())
    act_q = sum(_nbytes(qg.tensors[t]) for t in qg.activations())
    bound = max(setup_peak, setup_rss + per_sample + out_bytes)
    return {"bound_bytes": int(bound), "baseline_rss_bytes": int(base_rss),
            "setup_rss_bytes": int(setup_rss), "per_sample_bytes": int(per_sample),
            "outputs_bytes": int(out_bytes),
            "activation_bytes": {"float": act_f, "quantized": act_q}, "histogram_bytes": int(hist_bytes),
            "model_bytes": {"float": len(fraw), "quantized": len(qraw)},
            "peak_rss_bytes": rt.rss_bytes("VmHWM"),
            "bound": "max(peak during setup, RSS after setup + per-sample working set + final outputs); "
                     "setup holds both models, one sample's tensors of each, one model per op"}


def run_job(job: dict[str, Any]) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    runtime, base_rss, fraw, qraw, data, n = _load_job(job)
    src = job["inputs_npz"]

    try:
        f_tap = _interpreter(runtime, fraw, preserve=True, delegates=False)
        q_tap = _interpreter(runtime, qraw, preserve=True, delegates=False)
    except (ValueError, RuntimeError) as exc:
        raise rt.JobError(f"cannot load the models: {rt._one_line(exc)}") from None  # noqa: SLF001
    fg, qg = Graph.from_interpreter(f_tap), Graph.from_interpreter(q_tap)
    match, unmatched = match_tensors(fg, qg)
    # The tensors the report is about: numeric activations of the quantized graph with a float match.
    measured = [t for t in qg.activations()
                if t in match and _numeric(qg.tensors[t]) and np.dtype(fg.tensors[match[t][0]]["dtype"]).kind == "f"]

    # Every sample (or every stream's first window) starts from the model's initial state: the job's
    # state rule, as in the LiteRT rows and the TF reference.
    resets = rt.StateResets(job.get("state_rule"))
    states = {"f": job.get("float_state"), "q": job.get("quant_state")}

    def feeder(which: str, raw: bytes, *, preserve: bool, delegates: bool, it=None) -> Feeder:
        make = lambda: _interpreter(runtime, raw, preserve=preserve, delegates=delegates)  # noqa: E731
        return Feeder(it if it is not None else make(), data, src, state=states[which], resets=resets, rebuild=make)

    # Pass 1 -- LiteRT#413: final outputs with and without preserved intermediates must be identical.
    f_feed = feeder("f", fraw, preserve=True, delegates=False, it=f_tap)
    q_feed = feeder("q", qraw, preserve=True, delegates=False, it=q_tap)
    f_plain = feeder("f", fraw, preserve=False, delegates=False)
    q_plain = feeder("q", qraw, preserve=False, delegates=False)
    q_deployed = feeder("q", qraw, preserve=False, delegates=True)
    diff_f = diff_q = delegate_diff = 0.0
    deployed: dict[str, list[np.ndarray]] = {}
    for i in range(n):
        for fd in (f_feed, q_feed, f_plain, q_plain, q_deployed):
            fd.run(i)
        diff_f = max(diff_f, _same(f_feed.final_outputs(), f_plain.final_outputs()))
        plain = q_plain.final_outputs()
        diff_q = max(diff_q, _same(q_feed.final_outputs(), plain))
        dep = q_deployed.final_outputs()
        delegate_diff = max(delegate_diff, _same(dep, plain))
        for k, v in dep.items():
            deployed.setdefault(k, []).append(v)

    def fallback(raw: bytes, g: Graph, plain: Feeder) -> Feeder | None:
        """Intermediates as graph outputs; None when even that changes the final outputs."""
        content = expose_outputs(load_model_t(raw), [t for t in g.activations() if t not in g.outputs])
        fd = feeder("f" if raw is fraw else "q", content, preserve=False, delegates=False)
        for i in range(n):
            fd.run(i)
            plain.run(i)
            if _same(fd.final_outputs(), plain.final_outputs()) != 0.0:
                return None
        return fd

    modes = {}
    if diff_f:
        f_feed = fallback(fraw, fg, f_plain)
    modes["float"] = "preserve_all_tensors" if not diff_f else ("intermediates as outputs" if f_feed else "unavailable")
    if diff_q:
        q_feed = fallback(qraw, qg, q_plain)
    modes["quantized"] = "preserve_all_tensors" if not diff_q else ("intermediates as outputs" if q_feed else "unavailable")
    del f_plain, q_plain, q_deployed
    if f_feed is None:
        raise rt.JobError("the float model's final outputs change whenever its intermediate tensors are read "
                          "(google-ai-edge/LiteRT#413), so no per-layer comparison is possible; report the "
                          "model to LiteRT", bad_input=False)

    op_models, iso_skipped = ([], {}) if not job.get("isolated", True) else \
        _build_op_models(runtime, qraw, qg, match, set(measured))
    needed_f = {match[t][0] for t in measured} | {match[t][0] for m in op_models for t in m.inputs if t in match}
    views = {f: d for f, d in fake_quant_views(fg).items() if f in needed_f}   # a QAT model's own fake-quant
    needed_f |= set(views.values())

    acc = {t: ErrorStats() for t in measured} if q_feed is not None else {}
    iso = {t: ErrorStats() for m in op_models for t in m.outputs if t in match}
    ranges = {match[t][0]: RangeStats() for t in measured}
    # Memory: everything that lives through pass 2 exists now (models, interpreters with one
    # sample's tensors, per-op models); per sample only a bounded working set is added.
    hist_bytes, out_bytes, per_sample = _working_set(fg, ranges, needed_f, deployed, n)
    setup_rss, setup_peak = rt.rss_bytes("VmRSS") or 0, rt.rss_bytes("VmHWM") or 0
    # Pass 2 -- statistics, one sample at a time.
    for i in range(n):
        f_feed.run(i)
        fv = {f: _real(f_feed.it.get_tensor(f), fg.tensors[f]) for f in needed_f}
        for f, d in views.items():
            fv[f] = np.asarray(fv[d]).reshape(np.shape(fv[f]))
        for f, r in ranges.items():
            r.add(fv[f])
        if q_feed is not None:
            q_feed.run(i)
            for t, st in acc.items():
                got = _dequant_value(q_feed.it.get_tensor(t), qg.tensors[t])
                st.add(got, np.asarray(fv[match[t][0]], np.float64))
        for m in op_models:
            _run_isolated(m, fv, q_feed, match, qg, iso)

    tensors = [_tensor_record(t, fg, qg, match, views, acc, iso, iso_skipped, ranges) for t in measured]
    meta = {
        "samples": n,
        "graph_id": graph_id(qraw),
        "tensors": tensors,
        "unmatched": unmatched,
        "float_tensors": len(fg.activations()),
        "quantized_tensors": len(qg.activations()),
        "intermediates": {
            "float": modes["float"], "quantized": modes["quantized"],
            "float_preserve_max_diff": diff_f, "quantized_preserve_max_diff": diff_q,
            "deployed_vs_builtin_max_diff": delegate_diff,
            "caveat": "google-ai-edge/LiteRT#413: preserving intermediates must not change final outputs",
        },
        "memory": _memory(fg, qg, fraw, qraw, base_rss=base_rss, setup_rss=setup_rss, setup_peak=setup_peak,
                          per_sample=per_sample, out_bytes=out_bytes, hist_bytes=hist_bytes),
        "outlier_ratio": outlier_ratio_doc(),
        "runtime": runtime[3],
    }
    arrays = {f"out::{k}": np.concatenate(v, axis=0) for k, v in deployed.items()}
    return meta, arrays


def main(argv: list[str]) -> int:
    return rt.serve_job(argv, lambda job, _path: run_job(job), what="diagnose worker")


if __name__ == "__main__":
    sys.exit(main(sys.argv))
