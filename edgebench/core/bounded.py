"""Every file a user hands edgebench is read within stated bounds, decided from its headers before
its body is read: a crafted file gets one exit-2 line naming what it declares, never a
MemoryError, an OOM kill or minutes of silence.

* ``.npz``/``.npy`` data (``read_npz``, ``read_npy``): each array's ``.npy`` header is read first
  (``numpy.lib.format``), only the rows a command uses are read (``n``: ``--samples`` /
  ``--calibration-samples``), and a file is refused when an array declares more bytes than it holds
  (a huge declared shape), when what is read would exceed ``DATA_MAX_BYTES``, or when it is a
  decompression bomb (more than ``DATA_MAX_BYTES`` declared, stored at more than ``BOMB_RATIO``:1).
* zip archives (``check_archive``, ``read_member``; ``.keras`` files, ``.npz``): the entry count
  from the end-of-central-directory record before the directory is parsed, member names that
  would leave their folder (path traversal), declared totals, bombs.
* text and JSON (``read_text``, ``read_json``): a byte cap checked with ``stat`` and enforced by
  the read itself, and JSON nesting that would exhaust the parser's stack.
* YAML (``read_yaml``, ``load_yaml_text``, ``compose_yaml``: matrix files, ``--gate`` thresholds,
  device profiles, environment locks): the byte cap, then at most ``YAML_MAX_ALIASES`` alias
  references (``*name``) counted while the document is composed, and at most ``YAML_MAX_NODES``
  nodes once every alias is expanded (counted over the composed graph, nothing is expanded), and no
  alias that contains itself -- before a single Python object is built. A "billion laughs" file of
  400 bytes names 10^8 strings; every consumer (a ``repr`` in a message, ``json.dumps`` of the
  matrix hash, a loop over a list) would pay for all of them.

The limits are documented in docs/security.md.
"""

from __future__ import annotations

import json
import math
import os
import re
import zipfile
from pathlib import Path, PurePosixPath
from typing import Any, BinaryIO, Callable

import numpy as np
import yaml

from edgebench.core.errors import BadInput
from edgebench.core.printable import printable_lines

# The most bytes of arrays edgebench loads from one data file (the rows a command uses, summed over
# its arrays) -- the same bound as a synthetic set (data.SYNTHETIC_MAX_BYTES): 2 GiB holds 1000
# samples of a 224x224x3 float32 image (574 MiB) with room to spare.
DATA_MAX_BYTES = 2 * 1024 ** 3
# A zip member (or HDF5 dataset) of at least BOMB_MIN_BYTES that inflates more than BOMB_RATIO times
# is a decompression bomb: trained weights and real images compress 1.0-5x, pruned weights ~10x,
# while deflate of constant bytes reaches its ~1,000:1 ceiling.
BOMB_RATIO = 100
BOMB_MIN_BYTES = 16 * 1024 ** 2
ARCHIVE_MAX_MEMBERS = 10_000
NPZ_MAX_ARRAYS = 1_000
_CHUNK = 64 * 1024 ** 2


def human_bytes(n: float) -> str:
    for unit, div in (("TiB", 1024 ** 4), ("GiB", 1024 ** 3), ("MiB", 1024 ** 2), ("KiB", 1024)):
        if n >= div:
            return f"{n / div:,.1f} {unit}"
    return f"{int(n):,} bytes"


# --------------------------------------------------------------------------- zip archives


def zip_entry_count(path: str | Path) -> int | None:
    """Entries a zip's end-of-central-directory record declares, read before ``ZipFile`` builds one
    object per entry (a crafted directory of millions of entries would take gigabytes)."""
    try:
        with open(path, "rb") as fh:
            end = zipfile._EndRecData(fh)   # noqa: SLF001 -- the stdlib's own EOCD reader (zip64 too)
    except (OSError, AttributeError):
        return None
    return int(end[zipfile._ECD_ENTRIES_TOTAL]) if end else None   # noqa: SLF001


def unsafe_member_name(name: str) -> bool:
    """A member name that would leave the folder it is unpacked into (absolute, ``..``, a drive)."""
    n = name.replace("\\", "/")
    return n.startswith("/") or bool(re.match(r"^[A-Za-z]:", n)) or ".." in PurePosixPath(n).parts


def check_archive(path: str | Path, what: str, *, max_members: int = ARCHIVE_MAX_MEMBERS,
                  max_total: int | None = None, bombs: bool = True, where: str | None = None
                  ) -> list[zipfile.ZipInfo]:
    """The members of a zip, after refusing one with too many entries, a member that escapes its
    folder, more than ``max_total`` declared bytes, or (``bombs``) a member that inflates more than
    ``BOMB_RATIO`` times (BadInput naming the member and its declared size). ``where``: how messages
    name the file (default its path)."""
    label = where or str(path)
    count = zip_entry_count(path)
    if count is not None and count > max_members:
        raise BadInput(f"{label}: the {what} declares {count:,} entries (edgebench reads at most {max_members:,}); "
                       "a crafted archive: ask its author for a fresh copy")
    try:
        with zipfile.ZipFile(path) as zf:
            infos = zf.infolist()
    except (OSError, zipfile.BadZipFile, ValueError, EOFError) as exc:
        raise BadInput(f"{label}: not a readable {what} ({exc}); copy or download it again") from None
    total = 0
    for info in infos:
        if unsafe_member_name(info.filename):
            raise BadInput(f"{label}: the {what} holds a member named {info.filename!r}, which points outside the "
                           "folder it would be unpacked to (path traversal); a crafted archive: do not use it")
        total += info.file_size
        if bombs and info.file_size >= BOMB_MIN_BYTES and info.file_size > BOMB_RATIO * max(info.compress_size, 1):
            raise BadInput(f"{label}: member {info.filename!r} of the {what} inflates "
                           f"{human_bytes(info.compress_size)} to {human_bytes(info.file_size)} (more than "
                           f"{BOMB_RATIO}:1, a decompression bomb); edgebench does not unpack it")
    if max_total is not None and total > max_total:
        raise BadInput(f"{label}: the {what}'s members declare {human_bytes(total)} together, more than the "
                       f"{human_bytes(max_total)} edgebench reads from one file; a crafted archive")
    return infos


def read_member(zf: zipfile.ZipFile, name: str, limit: int, path: str | Path) -> bytes:
    """A zip member's bytes, at most ``limit`` of them (its declared size is checked first, and the
    read stops at ``limit`` + 1 whatever the header says)."""
    info = zf.getinfo(name)
    if info.file_size > limit:
        raise BadInput(f"{path}: {name} declares {human_bytes(info.file_size)} (edgebench reads at most "
                       f"{human_bytes(limit)} of it); a crafted file")
    with zf.open(info) as fh:
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise BadInput(f"{path}: {name} is larger than {human_bytes(limit)}; a crafted file")
    return data


# --------------------------------------------------------------------------- .npy / .npz


def _header(fh: BinaryIO, where: str) -> tuple[tuple[int, ...], bool, np.dtype]:
    fmt = np.lib.format
    try:
        version = fmt.read_magic(fh)
        shape, fortran, dtype = (fmt.read_array_header_1_0(fh) if version == (1, 0)
                                 else fmt.read_array_header_2_0(fh))
    except (ValueError, OSError, EOFError, SyntaxError) as exc:
        raise BadInput(f"{where}: not a readable .npy array header ({str(exc)[:160]}); save the arrays with "
                       "np.savez") from None
    if dtype.hasobject:
        raise BadInput(f"{where}: holds pickled object arrays, which edgebench refuses to load; save plain numeric "
                       "arrays with np.savez")
    return tuple(int(d) for d in shape), bool(fortran), dtype


def _describe(shape: tuple[int, ...], dtype: np.dtype) -> str:
    return f"{list(shape)} {dtype.name}"


def _plan(name: str, where: str, shape: tuple[int, ...], fortran: bool, dtype: np.dtype, stored: int,
          n: int | None) -> tuple[int, int]:
    """(rows to read (-1: the whole array), bytes to read); refuses an array that declares more than
    it holds."""
    declared = math.prod(shape) * dtype.itemsize
    if declared > stored:
        raise BadInput(f"{where}: array {name!r} declares {_describe(shape, dtype)} ({human_bytes(declared)}) but "
                       f"holds {human_bytes(stored)}: a truncated or crafted file; save the arrays again with "
                       "np.savez")
    if n is None or not shape or fortran:
        return -1, declared
    rows = min(n, shape[0])
    return rows, rows * math.prod(shape[1:]) * dtype.itemsize


def _read_into(fh: BinaryIO, shape: tuple[int, ...], dtype: np.dtype, fortran: bool, rows: int,
               name: str, where: str) -> np.ndarray:
    want = shape if rows < 0 else (rows, *shape[1:])
    out = np.empty(want, dtype=dtype, order="F" if fortran and rows < 0 else "C")
    view = memoryview(out.reshape(-1, order="A")).cast("B") if out.size else memoryview(b"")
    got = 0
    while got < len(view):
        k = fh.readinto(view[got:got + _CHUNK])     # chunks: a zip member's read() would copy it whole
        if not k:
            raise BadInput(f"{where}: array {name!r} ends after {human_bytes(got)} of the "
                           f"{human_bytes(len(view))} its header declares: a truncated file; copy it again")
        got += k
    return out


# What a reader is told about a data file before any array body is read: {array name: (declared
# shape, dtype)}, from the ``.npy`` headers; it raises BadInput to refuse the file (the model's inputs
# cannot take these arrays) and returns nothing otherwise.
HeaderCheck = Callable[[dict[str, tuple[tuple[int, ...], np.dtype]]], None]


def read_npz(path: str | Path, n: int | None = None, *, what: str = "--data", expect: HeaderCheck | None = None
             ) -> tuple[dict[str, np.ndarray], dict[str, int | None]]:
    """(arrays, declared rows) of an ``.npz``: the first ``n`` rows of every array (all with None),
    and each array's declared leading dimension (None for a scalar) so callers can check counts of
    the whole file. Raises BadInput naming the array and its declared size (module docstring).
    ``expect``: called with every array's declared shape and dtype once all headers are read and
    before anything else is inflated -- where a caller checks them against the model's inputs."""
    p = Path(path)
    where = f"{what} {path}" if what else str(path)
    # no per-member ratio rule: a large all-ones attention mask is as compressible as a bomb; the
    # file-wide rule below and reading only n rows bound what a real one can cost
    infos = [i for i in check_archive(p, ".npz file", max_members=NPZ_MAX_ARRAYS, bombs=False, where=where)
             if i.filename.endswith(".npy")]
    plans = []
    try:
        with zipfile.ZipFile(p) as zf:
            for info in infos:
                name = info.filename[:-4]
                with zf.open(info) as fh:
                    shape, fortran, dtype = _header(fh, f"{where} (array {name!r})")
                    offset = fh.tell()
                rows, need = _plan(name, where, shape, fortran, dtype, info.file_size - offset, n)
                plans.append((info, name, shape, fortran, dtype, rows, need))
            if expect is not None:
                expect({name: (shape, dtype) for _, name, shape, _f, dtype, _r, _n in plans})
            declared = sum(math.prod(s) * d.itemsize for _, _, s, _, d, _, _ in plans)
            stored = sum(i.compress_size for i, *_ in plans)
            if declared > DATA_MAX_BYTES and declared > BOMB_RATIO * max(stored, 1):
                info, name, shape, _f, dtype, _r, _n = max(plans, key=lambda x: math.prod(x[2]) * x[4].itemsize)
                raise BadInput(f"{where}: array {name!r} declares {_describe(shape, dtype)} "
                               f"({human_bytes(math.prod(shape) * dtype.itemsize)}) and the file inflates "
                               f"{human_bytes(stored)} to {human_bytes(declared)} (more than {BOMB_RATIO}:1): a "
                               "decompression bomb; save real data with np.savez")
            _check_need(where, [(x[1], x[2], x[4], x[6]) for x in plans], n)
            arrays = {}
            for info, name, shape, fortran, dtype, rows, _need in plans:
                with zf.open(info) as fh:
                    _header(fh, where)
                    arrays[name] = _read_into(fh, shape, dtype, fortran, rows, name, where)
    except (zipfile.BadZipFile, OSError, EOFError, NotImplementedError, RuntimeError) as exc:
        raise BadInput(f"{where}: not a readable .npz file ({exc}); save arrays with np.savez") from None
    return arrays, {name: (shape[0] if shape else None) for _, name, shape, *_ in plans}


def _check_need(where: str, plans: list[tuple[str, tuple[int, ...], np.dtype, int]], n: int | None) -> None:
    total = sum(need for *_, need in plans)
    if total <= DATA_MAX_BYTES:
        return
    name, shape, dtype, _need = max(plans, key=lambda x: x[3])
    rows = f"{n} samples of it" if n is not None else "all of it"
    raise BadInput(f"{where}: array {name!r} declares {_describe(shape, dtype)} "
                   f"({human_bytes(math.prod(shape) * dtype.itemsize)}); {rows} would take {human_bytes(total)} "
                   f"with the other arrays, more than the {human_bytes(DATA_MAX_BYTES)} edgebench loads from one "
                   "data file: lower --samples/--calibration-samples or split the file")


def read_npy(path: str | Path, n: int | None = None, *, what: str = "--data", expect: HeaderCheck | None = None
             ) -> np.ndarray:
    """The first ``n`` rows of a ``.npy`` array (all with None), bounded like ``read_npz``; ``expect``
    sees ``{file stem: (shape, dtype)}`` from the header before the body is read."""
    p = Path(path)
    where = f"{what} {path}" if what else str(path)
    name = p.stem
    try:
        size = os.stat(p).st_size
        with open(p, "rb") as fh:
            shape, fortran, dtype = _header(fh, where)
            rows, need = _plan(name, where, shape, fortran, dtype, size - fh.tell(), n)
            if expect is not None:
                expect({name: (shape, dtype)})
            _check_need(where, [(name, shape, dtype, need)], n)
            return _read_into(fh, shape, dtype, fortran, rows, name, where)
    except OSError as exc:
        raise BadInput(f"{where}: cannot read it ({exc.strerror or exc}); check the path") from None


# --------------------------------------------------------------------------- text and JSON

def printable(text: str) -> str:
    """``text`` from a device or a file, put through the one escaping helper (``edgebench.core.printable``:
    every terminal control character shown as an escape such as ``\\x1b``, never acted on) with its
    line structure kept: tabs and newlines stay (log parsers read them), CRLF becomes a newline."""
    return "\t".join(printable_lines(part) for part in text.replace("\r\n", "\n").split("\t"))


def printable_data(obj: Any) -> Any:
    """``printable`` applied to every string (keys too) of parsed JSON from an untrusted source."""
    if isinstance(obj, str):
        return printable(obj)
    if isinstance(obj, list):
        return [printable_data(x) for x in obj]
    if isinstance(obj, dict):
        return {printable(k) if isinstance(k, str) else k: printable_data(v) for k, v in obj.items()}
    return obj



def read_bytes(path: str | Path, limit: int, what: str, fix: str) -> bytes:
    """A file's bytes, refused (BadInput) when larger than ``limit`` -- by ``stat`` first and by the
    read itself (a file that grows while it is read)."""
    p = Path(path)
    size = p.stat().st_size
    if size > limit:
        raise BadInput(f"{path}: {human_bytes(size)}, more than the {human_bytes(limit)} edgebench reads as {what}; "
                       f"{fix}")
    with open(p, "rb") as fh:
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise BadInput(f"{path}: more than the {human_bytes(limit)} edgebench reads as {what}; {fix}")
    return data


def read_json(path: str | Path, limit: int, what: str, fix: str) -> Any:
    """``json.loads`` of a file of at most ``limit`` bytes; nesting too deep for the parser is a
    BadInput like any other malformed JSON (RecursionError otherwise escapes as an internal error)."""
    data = read_bytes(path, limit, what, fix)
    try:
        return json.loads(data.decode("utf-8"))
    except RecursionError:
        raise BadInput(f"{path}: JSON nested too deeply to be {what}; {fix}") from None


# --------------------------------------------------------------------------- YAML

# Real matrix, gate, profile and lock files use no aliases at all; a few (a shared list of targets
# referenced in several places) stay far below these. 100,000 nodes is ~50x the largest matrix in
# matrices/ and ~1,000x a device profile.
YAML_MAX_ALIASES = 100
YAML_MAX_NODES = 100_000


class _CountingLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that refuses a document at its ``YAML_MAX_ALIASES + 1``-th alias event,
    while composing (before anything is constructed)."""

    def __init__(self, stream: str, max_aliases: int) -> None:
        super().__init__(stream)
        self.aliases = 0
        self.max_aliases = max_aliases

    def compose_node(self, parent, index):  # noqa: ANN001 -- PyYAML's own signature
        if self.check_event(yaml.AliasEvent):
            self.aliases += 1
            if self.aliases > self.max_aliases:
                raise _TooManyAliases(self.peek_event().start_mark)
        return super().compose_node(parent, index)


class _TooManyAliases(Exception):
    def __init__(self, mark) -> None:  # noqa: ANN001
        super().__init__()
        self.mark = mark


def _expanded_nodes(root: yaml.Node, limit: int) -> int | None:
    """Nodes of ``root`` with every alias expanded (a shared node counts each time it is used),
    counted once per distinct node over the composed graph; None when an alias contains itself
    (a recursive document). Stops counting past ``limit``."""
    sizes: dict[int, int] = {}
    busy: set[int] = set()
    # iterative post-order: a deeply nested document must not exhaust Python's stack
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        if done:
            children = _children(node)
            sizes[key] = min(limit + 1, 1 + sum(sizes[id(c)] for c in children))
            busy.discard(key)
            continue
        if key in sizes:
            continue
        if key in busy:
            return None
        busy.add(key)
        stack.append((node, True))
        for child in _children(node):
            if id(child) in busy:
                return None
            if id(child) not in sizes:
                stack.append((child, False))
    return sizes[id(root)]


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    return []


def compose_yaml(text: str, where: str, fix: str, *, max_aliases: int = YAML_MAX_ALIASES,
                 max_nodes: int = YAML_MAX_NODES) -> yaml.Node | None:
    """The node graph of one YAML document (``yaml.compose`` with ``SafeLoader``), refused
    (BadInput naming ``where``, the count and ``fix``) when it uses more than ``max_aliases``
    aliases, expands to more than ``max_nodes`` nodes or holds an alias to itself. A syntax error
    is ``yaml.YAMLError`` as from PyYAML, for the caller to place (file:line)."""
    loader = _CountingLoader(text, max_aliases)
    try:
        node = loader.get_single_node()
    except _TooManyAliases as exc:
        line = f":{exc.mark.line + 1}" if exc.mark is not None else ""
        raise BadInput(f"{where}{line}: uses more than {max_aliases} YAML aliases (*name), which edgebench does "
                       f"not expand (a crafted 'billion laughs' file); {fix}") from None
    except RecursionError:
        raise BadInput(f"{where}: YAML nested too deeply to read; {fix}") from None
    finally:
        loader.dispose()
    if node is None:
        return None
    total = _expanded_nodes(node, max_nodes)
    if total is None:
        raise BadInput(f"{where}: a YAML alias refers to a node that contains it (a recursive document); {fix}")
    if total > max_nodes:
        raise BadInput(f"{where}: its {loader.aliases} YAML aliases expand to more than {max_nodes:,} values (a "
                       f"crafted 'billion laughs' file); {fix}")
    return node


def construct_yaml(node: yaml.Node | None) -> Any:
    """The Python value (SafeLoader types) of a node from :func:`compose_yaml`."""
    if node is None:
        return None
    return yaml.SafeLoader("").construct_document(node)


def load_yaml_text(text: str, where: str, fix: str, **limits: int) -> Any:
    """``yaml.safe_load(text)`` within :func:`compose_yaml`'s bounds."""
    return construct_yaml(compose_yaml(text, where, fix, **limits))


def read_yaml(path: str | Path, limit: int, what: str, fix: str, *, where: str | None = None) -> Any:
    """``yaml.safe_load`` of a file of at most ``limit`` bytes, within :func:`compose_yaml`'s bounds
    (BadInput naming the file: too large, not UTF-8, too many aliases; ``yaml.YAMLError`` for
    syntax)."""
    data = read_bytes(path, limit, what, fix)
    label = where or str(path)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise BadInput(f"{label}: not a UTF-8 text file, so not {what}; {fix}") from None
    return load_yaml_text(text, label, fix)


__all__ = ["HeaderCheck", "YAML_MAX_ALIASES", "YAML_MAX_NODES", "compose_yaml", "construct_yaml", "load_yaml_text", "read_yaml",
           "ARCHIVE_MAX_MEMBERS", "BOMB_MIN_BYTES", "BOMB_RATIO", "DATA_MAX_BYTES", "NPZ_MAX_ARRAYS",
           "check_archive", "human_bytes", "printable", "printable_data", "read_bytes", "read_json", "read_member",
           "read_npy", "read_npz",
           "unsafe_member_name", "zip_entry_count"]
