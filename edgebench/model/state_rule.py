"""The state rule: one decision about what a stateful model remembers between samples, made once
per run and read by every place that computes a model's outputs.

A model can keep state from one call to the next: a Keras ``stateful=True`` layer, a streaming
model's ring buffers in ``tf.Variable``s (in a ``.tflite``: resource variables, ``VAR_HANDLE`` /
``ASSIGN_VARIABLE``), a fused LSTM's variable tensors. Its outputs then depend on what ran before,
so the TensorFlow reference, the FP32 parity check, every LiteRT row and ``diagnose`` must follow
the *same* rule, or they compare different computations:

- ``independent``: every sample starts from the model's initial state -- the state it has right
  after loading (TensorFlow: the variables' loaded values; LiteRT: what the init subgraph assigns).
  What a user scoring a set of separate examples (sequences, clips, images) expects.
- ``streams``: the samples are consecutive windows of streams; state is carried from window to
  window within a stream and reset to the initial state where a new stream starts. What a user of a
  streaming model (a wake-word or keyword spotter fed audio frames) expects. The data says where
  streams start: an integer ``stream_id`` array (one id per sample; a stream's windows together, in
  order) or a stream axis (every input ``[streams, windows, *sample shape]``).

``--state auto`` (the default) takes ``streams`` when the data defines streams, else
``independent``. The rule is serialised into each worker's job (``to_job``), where the standalone
LiteRT worker (``targets/runner_io``) and the diagnose worker read it; the TF reference and the parity
check read it in process. The timed latency loops are not affected: they keep state as a deployed
model does (state does not change the work a step does).

Per-stream decisions (``stream_decisions``): one class-score output per window; a single score per
window is a detector -- the stream is *detected* when any window scores at least the threshold
(``--stream-threshold``, default 0.5); with several classes the stream's decision is the arg-max of
its last window (what a stateful classifier answers once it has seen the whole stream).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from edgebench.core.errors import BadInput

STATE_OPTIONS = ("auto", "independent", "streams")
DEFAULT_STATE = "auto"
STREAM_KEY = "stream_id"              # .npz: one integer stream id per sample
STREAM_LABELS_KEY = "stream_labels"   # .npz: one label per stream (in the order streams first appear)
DEFAULT_STREAM_THRESHOLD = 0.5        # a detector's score at which a window fires (probabilities)
MAX_LISTED_STREAMS = 200              # per-stream entries kept in a row (the summary counts them all)


@dataclass(frozen=True)
class StateRule:
    """``mode`` independent | streams; ``starts`` the first sample of every stream (streams mode);
    ``how`` where the streams came from; ``why`` what chose the mode."""

    mode: str = "independent"
    starts: tuple[int, ...] = ()
    samples: int = 0
    how: str | None = None
    why: str = "default: every sample scored from the model's initial state"

    def __post_init__(self) -> None:
        if self.mode not in ("independent", "streams"):
            raise ValueError(f"state rule mode {self.mode!r}")

    @property
    def streams(self) -> bool:
        return self.mode == "streams"

    def resets_before(self, i: int) -> bool:
        """Does sample ``i`` start from the initial state?"""
        return i == 0 or not self.streams or i in self._start_set

    @property
    def _start_set(self) -> frozenset[int]:
        got = self.__dict__.get("_starts_cache")
        if got is None:
            got = frozenset(self.starts)
            object.__setattr__(self, "_starts_cache", got)
        return got

    def spans(self, n: int | None = None) -> list[tuple[int, int]]:
        """(first, end) sample indices of every stream (one span per sample when independent)."""
        n = self.samples if n is None else n
        if not self.streams:
            return [(i, i + 1) for i in range(n)]
        starts = [s for s in self.starts if s < n]
        return [(s, e) for s, e in zip(starts, starts[1:] + [n])]

    def take(self, n: int) -> "StateRule":
        """The rule for the first ``n`` samples."""
        if n >= self.samples:
            return self
        return StateRule(self.mode, tuple(s for s in self.starts if s < n), n, self.how, self.why)

    def to_job(self) -> dict[str, Any]:
        """What a worker reads (``runner_io.state_resets``)."""
        return {"mode": self.mode, "starts": list(self.starts) if self.streams else None}

    def to_dict(self) -> dict[str, Any]:
        """The result document's ``state_rule``."""
        lengths = [e - s for s, e in self.spans()] if self.streams else []
        return {"mode": self.mode, "why": self.why, "how": self.how, "samples": self.samples,
                "streams": len(lengths) if self.streams else None,
                "windows_per_stream": [min(lengths), max(lengths)] if lengths else None,
                "line": self.describe()}

    def describe(self) -> str:
        """The one line every output prints."""
        if not self.streams:
            return (f"state rule: independent samples -- each of the {self.samples} samples starts from the "
                    f"model's initial state, for the reference and every row alike ({self.why}; --state streams "
                    "to carry state through a stream)")
        lengths = [e - s for s, e in self.spans()]
        lo, hi = min(lengths), max(lengths)
        per = f"{lo}" if lo == hi else f"{lo}-{hi}"
        return (f"state rule: streams -- {len(lengths)} stream(s) of {per} windows ({self.how}); state carried "
                f"within a stream and reset between streams, for the reference and every row alike ({self.why})")

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None) -> "StateRule | None":
        if not isinstance(d, Mapping) or d.get("mode") not in ("independent", "streams"):
            return None
        return cls(str(d["mode"]), tuple(int(s) for s in d.get("starts") or ()), int(d.get("samples") or 0),
                   d.get("how"), str(d.get("why") or ""))


def stream_starts(ids: np.ndarray, source: str) -> tuple[int, ...]:
    """First sample of every stream from one id per sample (BadInput when a stream is split)."""
    ids = np.asarray(ids).reshape(-1)
    if ids.size == 0:
        return ()
    change = np.flatnonzero(ids[1:] != ids[:-1]) + 1
    starts = (0, *(int(i) for i in change))
    if len(starts) != len(np.unique(ids)):
        seen: set = set()
        for s in starts:
            if ids[s].item() in seen:
                raise BadInput(f"--data {source}: stream {ids[s].item()} of '{STREAM_KEY}' appears again at sample "
                               f"{s} after other streams; keep each stream's windows together and in order "
                               "(sort the arrays by stream, stably)")
            seen.add(ids[s].item())
    return starts


def split_stream_data(arrays: dict[str, np.ndarray], sample_shapes: Mapping[str, tuple], source: str
                      ) -> tuple[dict[str, np.ndarray], np.ndarray | None, np.ndarray | None, str | None]:
    """Take the streams out of a data file's arrays (keyed by model input, plus ``labels``,
    ``stream_id``, ``stream_labels``): (arrays with windows as samples, stream id per sample or None,
    labels per stream or None, how the streams were given or None).

    A ``stream_id`` array gives them directly. Else, when every input has exactly one more leading
    axis than the model's sample (``[streams, windows, *sample]``), that axis is the streams:
    windows become samples, ``labels`` of shape ``[streams]`` become stream labels and
    ``[streams, windows]`` window labels."""
    arrays = dict(arrays)
    ids = arrays.pop(STREAM_KEY, None)
    stream_labels = arrays.pop(STREAM_LABELS_KEY, None)
    inputs = [k for k in sample_shapes if k in arrays]
    if ids is not None:
        ids = np.asarray(ids)
        if ids.ndim != 1 or not np.issubdtype(ids.dtype, np.integer):
            raise BadInput(f"--data {source}: '{STREAM_KEY}' must be a 1-D integer array (one stream id per sample), "
                           f"got {ids.dtype} {list(ids.shape)}")
        return arrays, ids, stream_labels, f"'{STREAM_KEY}' array"
    axis = inputs and len(inputs) == len(sample_shapes) and all(
        np.ndim(arrays[k]) == len(sample_shapes[k]) + 2 for k in inputs)
    if not axis:
        return arrays, None, stream_labels, None
    shapes = {np.shape(arrays[k])[:2] for k in inputs}
    if len(shapes) != 1:
        raise BadInput(f"--data {source}: inputs with a stream axis must share [streams, windows]; got "
                       + ", ".join(f"{k} {list(np.shape(arrays[k])[:2])}" for k in inputs))
    (s, w), = shapes
    for k in inputs:
        arrays[k] = np.asarray(arrays[k]).reshape((s * w, *np.shape(arrays[k])[2:]))
    labels = arrays.get("labels")
    if labels is not None:
        labels = np.asarray(labels)
        if labels.shape[:2] == (s, w):
            arrays["labels"] = labels.reshape((s * w, *labels.shape[2:]))
        elif labels.shape[:1] == (s,) and stream_labels is None:
            stream_labels = arrays.pop("labels")
    return arrays, np.repeat(np.arange(s), w), stream_labels, f"stream axis: {s} x {w} windows"


def resolve(option: str, ids: np.ndarray | None, samples: int, *, how: str | None = None,
            source: str = "the data") -> StateRule:
    """The rule a run follows, from ``--state`` and the data's streams (``ids``: one per sample)."""
    if option not in STATE_OPTIONS:
        raise BadInput(f"--state {option!r}: use one of {', '.join(STATE_OPTIONS)}")
    if option == "independent" or (option == "auto" and ids is None):
        why = "--state independent" if option == "independent" else \
            "default: the data defines no streams"
        if ids is not None:
            why += "; the data's streams are ignored"
        return StateRule("independent", (), samples, None, why)
    if ids is None:
        return StateRule("streams", (0,) if samples else (), samples,
                         f"the data defines no streams, so all {samples} samples are one stream in order; add a "
                         f"'{STREAM_KEY}' array or a stream axis for several", "--state streams")
    starts = stream_starts(np.asarray(ids)[:samples], source)
    return StateRule("streams", starts, samples, how or f"'{STREAM_KEY}' array",
                     "--state streams" if option == "streams" else "default: the data defines streams")


# ----------------------------------------------------------------------------- per-stream decisions


def _decisions(scores: np.ndarray, spans: list[tuple[int, int]], threshold: float) -> tuple[list, str]:
    flat = np.asarray(scores, np.float64).reshape(len(scores), -1)
    if flat.shape[1] == 1:
        peak = [float(np.max(flat[s:e, 0])) for s, e in spans]
        return [int(p >= threshold) for p in peak], "detector"
    return [int(np.argmax(flat[e - 1])) for _s, e in spans], "classifier"


def stream_decisions(rule: StateRule, ref: np.ndarray, got: np.ndarray, *, threshold: float = DEFAULT_STREAM_THRESHOLD,
                     stream_labels: np.ndarray | None = None, output: str | None = None) -> dict[str, Any] | None:
    """Per-stream decisions of one class-score output, the reference's and a row's (JSON-ready):
    ``rule`` (how a decision is made), ``streams``, ``agreement`` (share of streams with the same
    decision), ``detected`` / ``reference_detected`` (detector), ``accuracy`` / ``reference_accuracy``
    (with one label per stream) and ``per_stream`` (the first ``MAX_LISTED_STREAMS``)."""
    if not rule.streams or ref is None or got is None or len(ref) != len(got) or not len(ref):
        return None
    spans = rule.spans(len(ref))
    ref_d, kind = _decisions(ref, spans, threshold)
    got_d, _ = _decisions(got, spans, threshold)
    agree = [a == b for a, b in zip(ref_d, got_d)]
    out: dict[str, Any] = {
        "output": output, "kind": kind, "streams": len(spans),
        "rule": (f"detected when any window's score >= {threshold:g}" if kind == "detector"
                 else "the arg-max class of the stream's last window"),
        "threshold": threshold if kind == "detector" else None,
        "agreement": float(np.mean(agree)),
        "detected": sum(got_d) if kind == "detector" else None,
        "reference_detected": sum(ref_d) if kind == "detector" else None,
        "accuracy": None, "reference_accuracy": None,
    }
    labels = None
    if stream_labels is not None and len(np.asarray(stream_labels).reshape(-1)) >= len(spans):
        labels = [int(x) for x in np.asarray(stream_labels).reshape(-1)[:len(spans)]]
        out["accuracy"] = float(np.mean([g == y for g, y in zip(got_d, labels)]))
        out["reference_accuracy"] = float(np.mean([r == y for r, y in zip(ref_d, labels)]))
    out["per_stream"] = [{"stream": k, "windows": e - s, "reference": ref_d[k], "decision": got_d[k],
                          "agree": agree[k], **({"label": labels[k]} if labels else {})}
                         for k, (s, e) in enumerate(spans[:MAX_LISTED_STREAMS])]
    return out
