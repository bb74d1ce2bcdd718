"""Crafted inputs for the untrusted-input tests (issue 39), built in milliseconds at test time.

* ``deflate_npz(path, arrays)``: an ``.npz`` whose members are deflate streams of zeros of any
  declared size -- a 2 GiB array in ~2 MB, written without compressing 2 GiB: after a full flush
  deflate's state is reset, so every 1 MiB block of zeros compresses to the same bytes, which are
  repeated. The CRC is computed only when ``crc=True`` (it costs ~0.8 s per GiB); readers that
  refuse from the headers never reach it.
* ``huge_shape_npz(path, name, shape)``: a few hundred bytes declaring an enormous array.
* ``zip_with(path, members)``: a zip with arbitrary member names (``../../x``) and stored bytes.
"""

from __future__ import annotations

import io
import struct
import zipfile
import zlib
from pathlib import Path

import numpy as np

_BLOCK = 1 << 20


def npy_header(shape: tuple[int, ...], dtype: str = "<f4") -> bytes:
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": dtype, "fortran_order": False, "shape": tuple(shape)})
    return buf.getvalue()


def _zeros_deflate(header: bytes, n_zero: int) -> bytes:
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    parts = [c.compress(header), c.flush(zlib.Z_FULL_FLUSH)]
    full, rest = divmod(n_zero, _BLOCK)
    if full:
        block = c.compress(bytes(_BLOCK)) + c.flush(zlib.Z_FULL_FLUSH)
        parts.append(block * full)      # the compressor's state repeats with its input (full flush)
    parts.append(c.compress(bytes(rest)) + c.flush(zlib.Z_FINISH))
    return b"".join(parts)


def _crc_zeros(header: bytes, n_zero: int) -> int:
    crc = zlib.crc32(header)
    block = bytes(_BLOCK)
    full, rest = divmod(n_zero, _BLOCK)
    for _ in range(full):
        crc = zlib.crc32(block, crc)
    return zlib.crc32(bytes(rest), crc)


def _write_zip(path: Path, members: list[tuple[str, bytes, int, int, int]]) -> None:
    """members: (name, stored bytes, method, uncompressed size, crc) -> a plain (non-zip64) zip."""
    out = bytearray()
    central = bytearray()
    for name, data, method, size, crc in members:
        raw = name.encode()
        offset = len(out)
        out += struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, method, 0, 0x21, crc, len(data), size, len(raw), 0)
        out += raw + data
        central += struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 20, 20, 0, method, 0, 0x21, crc, len(data), size,
                               len(raw), 0, 0, 0, 0, 0o644 << 16, offset)
        central += raw
    out += central
    out += struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, len(members), len(members), len(central),
                       len(out) - len(central), 0)
    path.write_bytes(bytes(out))


def deflate_npz(path: Path, arrays: dict[str, tuple[tuple[int, ...], str]], *, crc: bool = False) -> Path:
    """``{name: (shape, dtype)}`` of zeros, deflated, as an .npz (see the module docstring)."""
    members = []
    for name, (shape, dtype) in arrays.items():
        header = npy_header(shape, dtype)
        n = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
        members.append((f"{name}.npy", _zeros_deflate(header, n), zipfile.ZIP_DEFLATED, len(header) + n,
                        _crc_zeros(header, n) if crc else 0))
    _write_zip(path, members)
    return path


def huge_shape_npz(path: Path, name: str, shape: tuple[int, ...], dtype: str = "<f4") -> Path:
    """An .npz whose one member declares ``shape`` but holds 16 bytes of data."""
    data = npy_header(shape, dtype) + bytes(16)
    _write_zip(path, [(f"{name}.npy", data, zipfile.ZIP_STORED, len(data), zlib.crc32(data))])
    return path


def zip_with(path: Path, members: dict[str, bytes]) -> Path:
    """A zip of stored members with any names (path traversal included)."""
    _write_zip(path, [(n, d, zipfile.ZIP_STORED, len(d), zlib.crc32(d)) for n, d in members.items()])
    return path


def zip_bomb_member(path: Path, members: dict[str, bytes], bomb: str, size: int) -> Path:
    """A zip of stored ``members`` plus ``bomb``: ``size`` zero bytes, deflated."""
    entries = [(n, d, zipfile.ZIP_STORED, len(d), zlib.crc32(d)) for n, d in members.items()]
    entries.append((bomb, _zeros_deflate(b"", size), zipfile.ZIP_DEFLATED, size, _crc_zeros(b"", size)))
    _write_zip(path, entries)
    return path
