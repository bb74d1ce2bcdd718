"""InputSet: the one fixed set of input samples fed byte-identically to every target.

Loading (``.npz``, ``.npy``, a folder of images, explicit ``synthetic``), validation against
the model signature, calibration generators and quantize/dequantize helpers.

Array layout: every input is ``[N, *sample_shape]`` where ``sample_shape`` is the signature
shape without its batch dimension (a leading ``None`` or ``1``). Labels, when present, are a
``[N]`` integer array stored under the key ``labels``.
"""

from __future__ import annotations

import hashlib
import io
import re
import warnings
import zipfile
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from edgebench.core.atomic import temp_path
from edgebench.core.bounded import HeaderCheck, read_npy, read_npz
from edgebench.core.errors import BadInput, SyntheticDataWarning
from edgebench.model.state_rule import STREAM_KEY, STREAM_LABELS_KEY, split_stream_data

LABELS_KEY = "labels"

SYNTHETIC_WARNING = (
    "calibrating/evaluating on SYNTHETIC random data: INT8 scales fitted to noise and accuracy "
    "measured on noise are misleading; pass --data with real samples for numbers you can trust"
)

# --preprocess choices for image folders. Each maps uint8 RGB [0,255] -> model input.
DEFAULT_PREPROCESS = "scale01"   # what every command assumes for image files unless --preprocess says
PREPROCESS = {
    "scale01": lambda x: x / 255.0,                       # [0, 1]
    "mobilenet": lambda x: x / 127.5 - 1.0,                # [-1, 1] (tf.keras mobilenet_v2)
    "imagenet-caffe": lambda x: x[..., ::-1] - np.array([103.939, 116.779, 123.68]),  # BGR, mean-subtracted (resnet50)
    "none": lambda x: x,
}

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp")

# The most bytes edgebench generates for a synthetic InputSet in its own process. The sample
# shape comes from the model, which may be untrusted: a declared 0.8 GB input times 100 samples
# must be refused, not allocated. 2 GiB holds 1000 samples of a 224x224x3 float32 image (574 MiB).
SYNTHETIC_MAX_BYTES = 2 * 1024 ** 3


@dataclass(frozen=True)
class TensorSpec:
    """One signature tensor. ``shape`` keeps the batch dim as None/1 as the model declares it."""
    name: str
    shape: tuple[int | None, ...]
    dtype: str

    @property
    def batched(self) -> bool:
        return len(self.shape) >= 1 and self.shape[0] in (None, 1)

    @property
    def sample_shape(self) -> tuple[int | None, ...]:
        return tuple(self.shape[1:]) if self.batched else tuple(self.shape)

    @property
    def is_integer(self) -> bool:
        return np.issubdtype(np.dtype(self.dtype), np.integer)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "shape": list(self.shape), "dtype": self.dtype}


@dataclass(frozen=True)
class Signature:
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    # Optional declared value ranges per input name, e.g. {"input_ids": (0, 30521)}.
    ranges: dict[str, tuple[float, float]] = field(default_factory=dict)
    # The model's own positional order of its inputs, when the file records one (a Keras model's
    # inputs; a SavedModel's serving function; a .tflite's subgraph inputs). ``inputs`` is sorted
    # by name where the file keeps a map (SignatureDef), so positional data needs this order.
    order: tuple[str, ...] | None = None
    # Inputs a .tflite takes quantized, read as float (name -> (integer dtype, scale, zero point)): data
    # given as those integer codes -- what a vendor's int8 model package feeds -- is dequantized exactly.
    quantized: dict[str, tuple[str, float, int]] = field(default_factory=dict)

    @property
    def input_names(self) -> list[str]:
        return [t.name for t in self.inputs]

    def to_dict(self) -> dict[str, Any]:
        return {"inputs": [t.to_dict() for t in self.inputs], "outputs": [t.to_dict() for t in self.outputs]}

    def to_json(self) -> dict[str, Any]:
        """Everything the signature holds, as JSON (``from_json`` gives it back equal)."""
        return {**self.to_dict(), "ranges": {k: list(v) for k, v in self.ranges.items()},
                "order": None if self.order is None else list(self.order),
                "quantized": {k: list(v) for k, v in self.quantized.items()}}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "Signature":
        def spec(t: dict[str, Any]) -> TensorSpec:
            return TensorSpec(t["name"], tuple(t["shape"]), t["dtype"])
        return cls(tuple(spec(t) for t in d["inputs"]), tuple(spec(t) for t in d["outputs"]),
                   ranges={k: tuple(v) for k, v in d.get("ranges", {}).items()},
                   order=None if d.get("order") is None else tuple(d["order"]),
                   quantized={k: (v[0], float(v[1]), int(v[2])) for k, v in d.get("quantized", {}).items()})


def input_mismatch(ref: Signature, other: Signature) -> str | None:
    """Why ``other`` cannot take the inputs made for ``ref`` (None when it can): a different number
    of inputs, or an input whose sample shape no input of ``ref`` has -- two different models, not
    two forms of one. Names are not compared (a .tflite renames a SavedModel's inputs:
    ``serving_default_image:0``), nor types (an int8-I/O variant takes int8 where FP32 takes float)."""
    def show(sig: Signature) -> str:
        return ", ".join(f"{t.name} {[d if d is not None else 'N' for d in t.sample_shape]} {t.dtype}"
                         for t in sig.inputs)

    def fits(t: TensorSpec, u: TensorSpec) -> bool:
        a, b = t.sample_shape, u.sample_shape
        return len(a) == len(b) and all(x is None or y is None or x == y for x, y in zip(a, b))

    if len(ref.inputs) != len(other.inputs) or not all(any(fits(t, u) for u in ref.inputs) for t in other.inputs):
        return f"takes {show(other)} where the reference takes {show(ref)}"
    return None


@dataclass(frozen=True)
class InputSet:
    """A fixed set of samples; ``sha256`` identifies its exact bytes everywhere it is fed."""
    arrays: dict[str, np.ndarray]
    labels: np.ndarray | None = None
    source: str = "unknown"
    synthetic: bool = False
    # How a file's arrays were bound to the model's inputs when not by name: {"how": ..., "pairs":
    # {data key: input name}} (printed and stored by every command that reads --data); None by name.
    binding: dict[str, Any] | None = None
    # Streams (edgebench.model.state_rule): one stream id per sample, one label per stream, and how the
    # data gave them (a 'stream_id' array or a stream axis); None when the data defines no streams.
    streams: np.ndarray | None = None
    stream_labels: np.ndarray | None = None
    stream_how: str | None = None

    @property
    def n(self) -> int:
        return int(next(iter(self.arrays.values())).shape[0]) if self.arrays else 0

    @property
    def sha256(self) -> str:
        h = hashlib.sha256()
        for k in sorted(self.arrays):
            a = np.ascontiguousarray(self.arrays[k])
            h.update(k.encode())
            h.update(str(a.dtype).encode())
            h.update(str(a.shape).encode())
            h.update(a.tobytes())
        if self.labels is not None:
            h.update(b"labels")
            h.update(np.ascontiguousarray(self.labels).tobytes())
        for key, extra in ((STREAM_KEY, self.streams), (STREAM_LABELS_KEY, self.stream_labels)):
            if extra is not None:
                h.update(key.encode())
                h.update(np.ascontiguousarray(extra).tobytes())
        return h.hexdigest()

    def take(self, n: int | None) -> "InputSet":
        """The first ``n`` samples (the set is already shuffled/seeded when built)."""
        if n is None or n >= self.n:
            return self
        streams = None if self.streams is None else self.streams[:n]
        stream_labels = self.stream_labels
        if streams is not None and stream_labels is not None:     # the streams that still have a window
            stream_labels = stream_labels[:len(np.unique(streams))]
        return replace(self, arrays={k: v[:n] for k, v in self.arrays.items()},
                       labels=None if self.labels is None else self.labels[:n], streams=streams,
                       stream_labels=stream_labels)

    def record(self, path: str | Path, file_sha256: str) -> dict[str, Any]:
        """The result document's ``inputs`` object for this set saved at ``path``: where, both
        hashes, how many samples, where they came from, and how arrays were bound to inputs."""
        return {"path": str(path), "sha256": file_sha256, "content_sha256": self.sha256, "samples": self.n,
                "source": self.source, "synthetic": self.synthetic, "labels": self.labels is not None,
                "binding": self.binding,
                "streams": None if self.streams is None else len(np.unique(self.streams))}

    def sample(self, i: int, spec: TensorSpec | None = None) -> dict[str, np.ndarray]:
        """Sample ``i`` as a batch of one (for batched inputs)."""
        return {k: v[i : i + 1] for k, v in self.arrays.items()}

    def save(self, path: str | Path) -> str:
        """Write as .npz (deterministic bytes: fixed zip timestamps); returns the file sha256."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        items = dict(self.arrays)
        if self.labels is not None:
            items[LABELS_KEY] = self.labels
        if self.streams is not None:
            items[STREAM_KEY] = self.streams
        if self.stream_labels is not None:
            items[STREAM_LABELS_KEY] = self.stream_labels

        with temp_path(path) as tmp, zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_STORED) as zf:
            for k in sorted(items):
                buf = io.BytesIO()
                np.lib.format.write_array(buf, np.ascontiguousarray(items[k]), allow_pickle=False)
                info = zipfile.ZipInfo(k + ".npy", date_time=(1980, 1, 1, 0, 0, 0))
                zf.writestr(info, buf.getvalue())
        return hashlib.sha256(path.read_bytes()).hexdigest()

    @staticmethod
    def load(path: str | Path, source: str | None = None) -> "InputSet":
        arrays = _load_npz(Path(path))
        labels = arrays.pop(LABELS_KEY, None)
        streams, stream_labels = arrays.pop(STREAM_KEY, None), arrays.pop(STREAM_LABELS_KEY, None)
        return InputSet(arrays, labels, source or str(path), streams=streams, stream_labels=stream_labels)


def check_npz_inputs(path: str | Path, option: str = "--data", expect: HeaderCheck | None = None) -> None:
    """An .npz of inputs handed to a runner as it is (``bench --data``): readable, its headers passing
    ``expect`` (the models' inputs, checked before any array body is read: ``bounded.read_npz``), and
    every float array finite -- NaN/Inf inputs make the outputs meaningless and may change the timing
    (NaN paths, denormals), so they are refused as ``load_data`` refuses them for the other commands."""
    for name, a in read_npz(Path(path), what=option, expect=expect)[0].items():
        if name != LABELS_KEY and np.issubdtype(a.dtype, np.floating) and a.size and not np.all(np.isfinite(a)):
            bad = ~np.isfinite(a)
            first = np.argwhere(bad)[0]
            raise BadInput(f"{option} {path}: input '{name}' holds {int(bad.sum())} NaN/Inf value(s) (the first in "
                           f"sample {int(first[0]) if first.size else 0}); clean the data")


def _load_npz(path: Path, n: int | None = None, what: str = "") -> dict[str, np.ndarray]:
    """The arrays of an .npz (the first ``n`` rows of each), read within ``edgebench.core.bounded``'s limits."""
    return read_npz(path, n, what=what)[0]


# --------------------------------------------------------------------------- signatures


# --------------------------------------------------------------------------- loading


def load_data(
    spec: str | None,
    signature: Signature,
    *,
    preprocess: str = DEFAULT_PREPROCESS,
    n: int | None = None,
    seed: int = 0,
) -> InputSet:
    """Load ``--data`` for a model: npz / npy / image folder / 'synthetic'. Validates it."""
    if spec is None:
        raise BadInput("no --data given; pass an .npz/.npy file or an image folder "
                       "(or --data synthetic, which gives misleading INT8 accuracy)")
    if spec == "synthetic":
        warnings.warn(SYNTHETIC_WARNING, SyntheticDataWarning, stacklevel=2)   # shown once per run (cli)
        return synthetic(signature, min(n, 100) if n else 100, seed)   # 100 unless fewer are used
    path = Path(spec)
    if not path.exists():
        raise BadInput(f"--data {spec}: no such file or folder; pass an .npz/.npy file, an image folder "
                       "or 'synthetic'")
    if path.is_dir():
        ds = _load_images(path, signature, preprocess, n)
    elif path.suffix == ".npz":
        # headers first, checked against the model's inputs before anything is inflated, then only the
        # first n rows (bounded.py)
        arrays, rows = read_npz(path, n, expect=lambda heads: check_headers(heads, signature, str(path)))
        ds = _from_arrays(arrays, signature, str(path))
        _check_declared_counts(ds, rows, signature)
    elif path.suffix == ".npy":
        if len(signature.inputs) != 1:
            raise BadInput(f"--data {spec}: a .npy holds one array but the model has "
                           f"{len(signature.inputs)} inputs ({', '.join(signature.input_names)}); use an .npz "
                           "keyed by input name")
        first = signature.inputs[0].name
        arr = read_npy(path, n, expect=lambda heads: check_headers(
            {first: next(iter(heads.values()))}, signature, str(path), keys={first: path.stem}))
        ds = _from_arrays({first: arr}, signature, str(path))
    elif path.suffix.lower() in IMAGE_SUFFIXES:
        raise BadInput(f"--data {spec}: a single image is not a data set; pass the folder that holds the images")
    else:
        raise BadInput(f"--data {spec}: unsupported format '{path.suffix}'; use .npz, .npy, an image folder "
                       "or 'synthetic'")
    ds = _dequantize_codes(ds, signature)
    validate(ds, signature)
    return ds.take(n)


def standin(shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """An array of the declared ``shape`` and ``dtype`` that takes no memory (every stride 0): what the
    binding code sees of a file's array before its bytes are read."""
    return np.lib.stride_tricks.as_strided(np.zeros(1, dtype=dtype), shape=shape, strides=(0,) * len(shape),
                                           writeable=False)


def _model_shape(t: TensorSpec) -> str:
    return "[" + ", ".join("N" if d is None else str(d) for d in t.shape) + "]"


def check_headers(headers: dict[str, tuple[tuple[int, ...], np.dtype]], signature: Signature, source: str, *,
                  keys: dict[str, str] | None = None) -> None:
    """A data file's arrays, as their ``.npy`` headers declare them (``{name: (shape, dtype)}``),
    checked against the model's inputs before any array body is read (``bounded.read_npz``'s
    ``expect``): the same binding as the loaded file gets (by name, by position, a single array),
    then every bound array's per-sample shape and dtype and the sample counts. BadInput names the
    array, its declared shape and the model's input shape. ``keys``: input name -> the name messages
    use for its array (a .npy's file name)."""
    arrays = {k: standin(shape, dtype) for k, (shape, dtype) in headers.items()
              if k not in (LABELS_KEY, STREAM_LABELS_KEY)
              and not (k == "y" and LABELS_KEY not in headers and "y" not in signature.input_names)}
    ds = _from_arrays(arrays, signature, source)      # labels are left out: only their count matters, checked later
    pairs = {name: key for key, name in ((ds.binding or {}).get("pairs") or {}).items()}
    for t in signature.inputs:
        key = (keys or {}).get(t.name) or pairs.get(t.name, t.name)
        declared, dtype = headers.get(key, headers.get(t.name, ((), np.dtype("float32"))))
        a = ds.arrays[t.name]
        want, got = t.sample_shape, a.shape[1:]
        stream = f" (its first two axes read as [streams, windows]: {ds.stream_how})" if ds.stream_how else ""
        if a.ndim == 0 or len(got) != len(want) or any(w is not None and w != g for w, g in zip(want, got)):
            raise BadInput(f"--data {source}: array {key!r} declares shape {list(declared)} {dtype.name}{stream}, "
                           f"so one sample is {list(got)}, but the model's input '{t.name}' is "
                           f"{_model_shape(t)} (one sample [{', '.join('any' if d is None else str(d) for d in want)}]); "
                           "nothing was read: save the data as [N, ...sample shape] or resize it")
        if not (np.issubdtype(dtype, np.floating) or np.issubdtype(dtype, np.integer) or dtype == np.bool_):
            raise BadInput(f"--data {source}: array {key!r} declares dtype {dtype} (shape {list(declared)}), but the "
                           f"model's input '{t.name}' is {t.dtype} {_model_shape(t)}; save a numeric array")
    counts = {t.name: ds.arrays[t.name].shape[0] for t in signature.inputs}
    if len(set(counts.values())) > 1:
        raise BadInput(f"--data {source}: inputs have different sample counts {counts}; give every input the "
                       "same number of samples")
    if counts and not next(iter(counts.values())):
        raise BadInput(f"--data {source}: holds no samples; provide at least one")


def _check_declared_counts(ds: InputSet, rows: dict[str, int | None], signature: Signature) -> None:
    """Sample counts of the whole file, from its headers (only the first rows were read): the inputs
    and labels a run uses must agree however many of them it reads."""
    keys = dict((ds.binding or {}).get("pairs") or {k: k for k in ds.arrays})
    counts = {name: rows.get(key) for key, name in keys.items()}
    if len(set(counts.values())) > 1:
        raise BadInput(f"--data {ds.source}: inputs have different sample counts {counts}; give every input the "
                       "same number of samples")
    label = LABELS_KEY if LABELS_KEY in rows else "y" if "y" in rows and "y" not in signature.input_names else None
    n = next(iter(counts.values()), None)
    if ds.labels is not None and label is not None and None not in (rows[label], n) and rows[label] != n:
        raise BadInput(f"--data {ds.source}: {rows[label]} labels for {n} samples; give one label per sample")


def _dequantize_codes(ds: InputSet, signature: Signature) -> InputSet:
    """Integer codes for a quantized .tflite input (``Signature.quantized``, data of exactly that
    integer dtype) -> the float values they stand for, with the input's own scale and zero point: the
    int8 file quantizes them back to the same codes, a float file gets the right values."""
    arrays, done = dict(ds.arrays), []
    for name, (dtype, scale, zp) in signature.quantized.items():
        a = arrays.get(name)
        if a is not None and a.dtype == np.dtype(dtype) and scale:
            arrays[name] = dequantize(a, scale, zp)
            done.append(f"{name} ({dtype} codes, scale {scale:.6g}, zero point {zp})")
    if not done:
        return ds
    return replace(ds, arrays=arrays, source=f"{ds.source}; dequantized with the model's own quantization: "
                                              + ", ".join(done))


def _from_arrays(arrays: dict[str, np.ndarray], signature: Signature, source: str) -> InputSet:
    arrays, streams, stream_labels, stream_how = split_stream_data(
        arrays, {t.name: t.sample_shape for t in signature.inputs}, source)
    labels = arrays.pop(LABELS_KEY, None)
    if labels is None and "y" in arrays and "y" not in signature.input_names:
        labels = arrays.pop("y")
    names = signature.input_names
    out: dict[str, np.ndarray] = {}
    binding = None
    if all(n in arrays for n in names):
        out = {n: arrays[n] for n in names}
    else:
        positional = sorted((k for k in arrays if re.fullmatch(r"arr_\d+", k)), key=lambda s: int(s[4:]))
        if len(positional) == len(names) == len(arrays) and len(names) > 1:
            pairs, how = _bind_positional(positional, arrays, signature, source)
            out = {n: arrays[k] for k, n in pairs.items()}
            binding = {"how": how, "pairs": pairs}
        elif len(arrays) == 1 and len(names) == 1:
            key = next(iter(arrays))
            out = {names[0]: arrays[key]}
            binding = None if key == names[0] else {"how": "single input", "pairs": {key: names[0]}}
        else:
            missing = [n for n in names if n not in arrays]
            raise BadInput(f"--data {source}: missing input(s) {', '.join(missing)} (file has "
                           f"{', '.join(sorted(arrays)) or 'no arrays'}); key arrays by input name or "
                           "save them positionally with np.savez(path, *arrays)")
    if labels is not None:
        labels = np.asarray(labels)
        if labels.ndim == 2 and labels.shape[1] > 1:  # one-hot
            labels = labels.argmax(axis=1)
        labels = labels.reshape(-1)
        if not np.issubdtype(labels.dtype, np.integer):
            if np.all(np.mod(labels, 1) == 0):
                labels = labels.astype(np.int64)
            else:
                raise BadInput(f"--data {source}: 'labels' must be integer class ids")
    return InputSet(out, labels, source, binding=binding, streams=streams, stream_labels=stream_labels,
                    stream_how=stream_how)


def _fits(a: np.ndarray, spec: TensorSpec) -> bool:
    """Could array ``a`` (samples first) feed ``spec``: same per-sample rank and fixed dimensions, and
    integer data for an integer input (float data can feed an integer input only by accident)."""
    shape = tuple(np.shape(a)[1:])
    want = spec.sample_shape
    if len(shape) != len(want) or any(w is not None and w != s for w, s in zip(want, shape)):
        return False
    return not spec.is_integer or np.issubdtype(np.asarray(a).dtype, np.integer)


BY_SHAPE = "shape"
BY_POSITION = "position (the model's input order)"


def _bind_positional(keys: list[str], arrays: dict[str, np.ndarray], signature: Signature,
                     source: str) -> tuple[dict[str, str], str]:
    """(``arr_0, arr_1 ...`` -> input names, how): by one sample's shape when that tells every input
    apart -- the same for a SavedModel and every .tflite converted from it, whatever order each file
    lists its inputs in --, else in the model's own input order when the file records it
    (``Signature.order``); refused when two inputs could take the same array and no order is known
    (binding them alphabetically, as the SignatureDef lists them, fed swapped data to TF and TFLite
    alike: drift looked perfect)."""
    specs = {s.name: s for s in signature.inputs}
    options = {k: [n for n, s in specs.items() if _fits(arrays[k], s)] for k in keys}
    if all(len(v) == 1 for v in options.values()) and len({v[0] for v in options.values()}) == len(keys):
        return {k: v[0] for k, v in options.items()}, BY_SHAPE
    if signature.order and set(signature.order) == set(signature.input_names):
        return dict(zip(keys, signature.order)), BY_POSITION
    names = ", ".join(signature.input_names)
    raise BadInput(f"--data {source}: positional arrays ({', '.join(keys)}) but the model records no input "
                   f"order and its inputs ({names}) could take the same array; save the arrays by input "
                   f"name: np.savez(PATH, {'=..., '.join(signature.input_names)}=...)")


def _load_images(folder: Path, signature: Signature, preprocess: str, n: int | None = None) -> InputSet:
    from PIL import Image, UnidentifiedImageError

    if len(signature.inputs) != 1:
        raise BadInput(f"--data {folder}: an image folder feeds one input, but the model has "
                       f"{len(signature.inputs)}; use an .npz keyed by input name")
    if preprocess not in PREPROCESS:
        raise BadInput(f"--preprocess {preprocess}: unknown; use one of {', '.join(PREPROCESS)}")
    spec = signature.inputs[0]
    shp = spec.sample_shape
    if len(shp) != 3 or shp[0] is None or shp[1] is None:
        raise BadInput(f"--data {folder}: input '{spec.name}' has shape {list(spec.shape)}, not an "
                       "[H, W, C] image; use an .npz instead")
    h, w, c = shp
    files = sorted(p for p in folder.rglob("*") if p.suffix.lower() in IMAGE_SUFFIXES)
    if not files:
        raise BadInput(f"--data {folder}: no .jpg/.jpeg/.png/.bmp images found")
    # Labels from sub-folder names (class_a/xxx.jpg) when every image sits in one.
    parents = sorted({p.parent.name for p in files if p.parent != folder})
    use_labels = all(p.parent != folder for p in files) and len(parents) > 1
    label_of = {name: i for i, name in enumerate(parents)}
    imgs, labels = [], []
    for f in files[:n]:     # the first n (what take(n) keeps): a folder of 100,000 images is not decoded whole
        try:
            with Image.open(f) as im:
                im = im.convert("L" if c == 1 else "RGB").resize((w, h), Image.BILINEAR)
                a = np.asarray(im, dtype=np.float32)
        except (UnidentifiedImageError, OSError, Image.DecompressionBombError) as e:
            raise BadInput(f"--data {f}: not a readable image ({e}); remove or fix it") from None
        if c == 1:
            a = a[..., None]
        imgs.append(a)
        if use_labels:
            labels.append(label_of[f.parent.name])
    x = np.stack(imgs).astype(np.float32)
    x = PREPROCESS[preprocess](x).astype(spec.dtype if not spec.is_integer else np.float32)
    return InputSet({spec.name: x}, np.array(labels, np.int64) if use_labels else None,
                    f"{folder} ({len(files)} images, preprocess={preprocess})")


def synthetic(signature: Signature, n: int, seed: int = 0) -> InputSet:
    """Seeded random inputs that respect dtype (and declared ranges). Only on explicit request."""
    need = sum(n * int(np.prod([1 if d is None else d for d in t.sample_shape], dtype=np.float64))
               * np.dtype(t.dtype).itemsize for t in signature.inputs)
    if need > SYNTHETIC_MAX_BYTES:
        shapes = ", ".join(f"{t.name} {list(t.shape)} {t.dtype}" for t in signature.inputs)
        raise BadInput(f"--data synthetic: {n} samples of the model's inputs ({shapes}) need {need / 2**30:.1f} GiB, "
                       f"over the {SYNTHETIC_MAX_BYTES / 2**30:.0f} GiB edgebench generates; lower --samples or "
                       "pass --data with real samples")
    rng = np.random.default_rng(seed)
    arrays = {}
    for t in signature.inputs:
        shp = tuple(1 if d is None else d for d in t.sample_shape)
        lo, hi = signature.ranges.get(t.name, (0, 100) if t.is_integer else (0.0, 1.0))
        if t.is_integer:
            arrays[t.name] = rng.integers(int(lo), int(hi) + 1, size=(n, *shp)).astype(t.dtype)
        else:
            arrays[t.name] = rng.uniform(lo, hi, size=(n, *shp)).astype(t.dtype)
    return InputSet(arrays, None, f"synthetic(seed={seed}, n={n})", synthetic=True)


# --------------------------------------------------------------------------- validation


def validate(ds: InputSet, signature: Signature) -> None:
    """Shape, dtype, count and value range against the signature. Raises BadInput."""
    if ds.n == 0:
        raise BadInput(f"--data {ds.source}: holds no samples; provide at least one")
    counts = {k: v.shape[0] if v.ndim else 0 for k, v in ds.arrays.items()}
    if len(set(counts.values())) != 1:
        raise BadInput(f"--data {ds.source}: inputs have different sample counts {counts}; give every "
                       "input the same number of samples")
    for t in signature.inputs:
        a = ds.arrays[t.name]
        want = t.sample_shape
        got = a.shape[1:]
        if len(got) != len(want) or any(w is not None and w != g for w, g in zip(want, got)):
            raise BadInput(f"--data {ds.source}: input '{t.name}' has sample shape {list(got)} but the "
                           f"model expects {[d if d is not None else 'any' for d in want]} (array shape must be "
                           "[N, ...sample shape]); reshape or resize the data")
        if not (np.issubdtype(a.dtype, np.floating) or np.issubdtype(a.dtype, np.integer) or a.dtype == np.bool_):
            raise BadInput(f"--data {ds.source}: input '{t.name}' has dtype {a.dtype}; use a numeric array")
        if t.is_integer:
            if not (np.issubdtype(a.dtype, np.integer) or (np.issubdtype(a.dtype, np.floating)
                                                            and np.all(np.isfinite(a)) and np.all(np.mod(a, 1) == 0))):
                raise BadInput(f"--data {ds.source}: input '{t.name}' is {t.dtype} (e.g. token ids) but the "
                               f"data is non-integer {a.dtype}; pass valid integer ids")
            if a.size and a.min() < 0:
                raise BadInput(f"--data {ds.source}: input '{t.name}' has negative integer values "
                               f"(min {a.min()}); token ids/indices must be >= 0")
            info = np.iinfo(np.dtype(t.dtype))
            if a.size and a.max() > info.max:
                raise BadInput(f"--data {ds.source}: input '{t.name}' is {t.dtype} but the data holds {a.max()}, "
                               f"beyond its largest value {info.max}; pass ids that fit {t.dtype}")
        elif np.issubdtype(np.dtype(t.dtype), np.floating) and not np.issubdtype(a.dtype, np.floating):
            # not a lossless cast: integer data for a float input nearly always means unscaled values
            # (pixels 0..255 for a model trained on 0..1), which calibrates INT8 scales to the wrong range
            span = f" (values {a.min()}..{a.max()})" if a.size else ""
            raise BadInput(f"--data {ds.source}: input '{t.name}' is {t.dtype} but the data is {a.dtype}{span}; "
                           "edgebench does not guess the scaling: convert it the way the model was trained (e.g. "
                           f"x.astype(np.float32) / 255 for pixels a model sees as 0..1) and save {t.dtype} data")
        elif a.size and not np.all(np.isfinite(a)):
            raise BadInput(f"--data {ds.source}: input '{t.name}' contains NaN/Inf; clean the data")
        if t.name in signature.ranges and a.size:
            lo, hi = signature.ranges[t.name]
            if a.min() < lo or a.max() > hi:
                raise BadInput(f"--data {ds.source}: input '{t.name}' values span [{a.min()}, {a.max()}] "
                               f"outside the model's range [{lo}, {hi}]; preprocess the data to that range")
    if ds.labels is not None and len(ds.labels) != ds.n:
        raise BadInput(f"--data {ds.source}: {len(ds.labels)} labels for {ds.n} samples; give one label per sample")
    if ds.streams is not None and len(ds.streams) != ds.n:
        raise BadInput(f"--data {ds.source}: '{STREAM_KEY}' has {len(ds.streams)} ids for {ds.n} samples; give one "
                       "stream id per sample")


# Calibration vs evaluation value ranges (convert-and-compare): a warning when, for a float input,
# the spans between the 0.1th and 99.9th percentiles differ by more than RANGE_FACTOR, or their
# centres by more than half the larger span. The reference models' own calibration and
# evaluation splits (same preprocessing) agree within 2 %; the usual preprocessing mistakes
# differ by 2x ([-1, 1] vs [0, 1]) up to 255x (0..255 vs 0..1).
RANGE_FACTOR = 1.5
RANGE_PERCENTILES = (0.1, 99.9)
_RANGE_MAX_ELEMENTS = 1_000_000     # a strided subset keeps this cheap for big image sets


def value_ranges(ds: InputSet, signature: Signature) -> dict[str, list[float]]:
    """Robust value range ``[p0.1, p99.9]`` of every float input (JSON-ready)."""
    out: dict[str, list[float]] = {}
    for t in signature.inputs:
        a = ds.arrays.get(t.name)
        if a is None or a.size == 0 or not np.issubdtype(a.dtype, np.floating) or t.is_integer:
            continue
        flat = a.reshape(-1)
        flat = flat[:: max(1, flat.size // _RANGE_MAX_ELEMENTS)]
        lo, hi = np.percentile(flat.astype(np.float64), RANGE_PERCENTILES)
        out[t.name] = [float(lo), float(hi)]
    return out


def range_warnings(calibration: dict[str, list[float]], evaluation: dict[str, list[float]]) -> list[str]:
    """One warning per float input whose calibration and evaluation ranges disagree (see RANGE_FACTOR)."""
    warns = []
    for name, (clo, chi) in sorted(calibration.items()):
        if name not in evaluation:
            continue
        elo, ehi = evaluation[name]
        cs, es = chi - clo, ehi - elo
        big = max(cs, es)
        if big <= 0:
            continue
        ratio = big / max(min(cs, es), 1e-12 * big)
        shift = abs((clo + chi) / 2 - (elo + ehi) / 2)
        if ratio > RANGE_FACTOR or shift > big / 2:
            warns.append(f"input '{name}': calibration values span [{clo:.4g}, {chi:.4g}] but evaluation values "
                         f"[{elo:.4g}, {ehi:.4g}] (0.1-99.9th percentiles; spans differ {ratio:.3g}x, more than "
                         f"{RANGE_FACTOR}x, or are shifted): the two sets are probably preprocessed differently, so "
                         "INT8 scales fit the wrong range; preprocess both the same way")
    return warns


def cast_to_signature(ds: InputSet, signature: Signature) -> InputSet:
    """Cast every input to the signature's dtype (validated data only)."""
    arrays = {t.name: np.ascontiguousarray(ds.arrays[t.name].astype(t.dtype, copy=False)) for t in signature.inputs}
    return replace(ds, arrays=arrays)


def calibration_generator(ds: InputSet, signature: Signature, n: int) -> Iterator[dict[str, np.ndarray]]:
    """Representative dataset for the TFLite converter: dicts keyed by signature input name."""
    ds = cast_to_signature(ds, signature).take(n)
    for i in range(ds.n):
        yield {t.name: ds.arrays[t.name][i : i + 1] if t.batched else ds.arrays[t.name][i] for t in signature.inputs}


# --------------------------------------------------------------------------- (de)quantization


def quantize(x: np.ndarray, scale: float, zero_point: int, dtype: np.dtype) -> np.ndarray:
    """Float -> int with a tensor's own scale/zero point (round half away from zero, clipped)."""
    info = np.iinfo(dtype)
    q = np.round(np.asarray(x, np.float64) / scale) + zero_point
    return np.clip(q, info.min, info.max).astype(dtype)


def dequantize(q: np.ndarray, scale: float, zero_point: int) -> np.ndarray:
    return ((np.asarray(q, np.float32) - np.float32(zero_point)) * np.float32(scale)).astype(np.float32)
