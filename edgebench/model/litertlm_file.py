"""Read a LiteRT-LM bundle (``.litertlm``) without running it: its sections, the context size its
metadata declares, the model type and the precision of its prefill/decode graph.

The file (LiteRT-LM's ``litertlm_core`` / ``litertlm_header_schema``, format 1.x): the magic
``LITERTLM``, three little-endian uint32 (major, minor, patch version), at byte 24 a uint64 holding
where the header ends, and from byte 32 the header -- a flatbuffer ``LiteRTLMMetaData`` whose
``section_metadata.objects`` list every section (``items`` key/value pairs such as ``model_type``,
``begin_offset``, ``end_offset``, ``data_type``). The ``LlmMetadataProto`` section is a protobuf
``LlmMetadata`` whose field 5, ``max_num_tokens``, is the context the bundle was exported with (the
KV cache size of a static-context model: LiteRT-LM's engine enforces it whatever larger
``max_num_tokens`` it is given, and logs "Using model limit"). The ``TFLiteModel`` section whose
``model_type`` is ``tf_lite_prefill_decode`` is the LLM itself; its precision is read like any
``.tflite`` (``tflite_model.precision``: fp32, dynamic for int8 weights with float activations ...).

Only these few fields are decoded, by hand, so reading a bundle needs neither litert-lm nor its
builder. Untrusted files: every offset is bounds-checked against the header, the header is at most
``MAX_HEADER_BYTES``, at most ``MAX_SECTIONS`` sections are read, and a section must lie inside the
file; anything else is ``BadInput`` naming the file.
"""

from __future__ import annotations

import mmap
import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from edgebench.core.errors import BadInput
from edgebench.core.fingerprint import sha256_file
from edgebench.model import tflite_model

MAGIC = b"LITERTLM"
HEADER_BEGIN = 32
HEADER_END_AT = 24
MAX_HEADER_BYTES = 16 << 20
MAX_SECTIONS = 4096
MAX_METADATA_BYTES = 16 << 20
# AnySectionDataType (litertlm_header_schema): the section kinds a reader may meet
SECTION_TYPES = {0: "NONE", 1: "GenericBinaryData", 2: "Deprecated", 3: "TFLiteModel", 4: "SP_Tokenizer",
                 5: "LlmMetadataProto", 6: "HF_Tokenizer_Zlib", 7: "TFLiteWeights", 8: "EmbeddingMetadataProto",
                 9: "ExecutorMetadataProto", 10: "TtsMetadataProto", 11: "AsrMetadataProto"}
# LlmModelType's oneof (llm_model_type.proto): field number -> name
MODEL_TYPES = {1: "generic", 2: "gemma3n", 3: "function_gemma", 4: "gemma3", 5: "qwen3", 7: "qwen2p5", 8: "gemma4",
               9: "fast_vlm", 11: "lfm2", 12: "minicpm5", 13: "minicpmv4"}
LLM_GRAPH = "tf_lite_prefill_decode"
_FIX = ("give a .litertlm bundle written by litert-lm-builder (or litert-torch's converter with "
        "output_format='litertlm')")


class _Corrupt(ValueError):
    """A read outside the header or a malformed field."""


@dataclass(frozen=True)
class Section:
    kind: str                    # AnySectionDataType name
    begin: int
    end: int
    model_type: str | None       # the ``model_type`` item of a TFLiteModel section

    @property
    def size_bytes(self) -> int:
        return self.end - self.begin


@dataclass(frozen=True)
class BundleInfo:
    """What edgebench needs to know about a bundle before it runs it."""
    path: str
    size_bytes: int
    sha256: str
    version: str                          # the file format's, e.g. "1.7.0"
    sections: tuple[Section, ...]
    context_tokens: int | None            # LlmMetadata.max_num_tokens (None: not declared)
    model_type: str | None                # "generic", "gemma3", "qwen3" ... (None: not declared)
    precision: str | None                 # of the prefill/decode graph (tflite_model.precision)
    precision_detail: str | None = None
    precision_note: str | None = None     # why the precision could not be read, when it could not

    @property
    def name(self) -> str:
        return Path(self.path).stem

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "size_bytes": self.size_bytes, "sha256": self.sha256, "version": self.version,
                "context_tokens": self.context_tokens, "model_type": self.model_type, "precision": self.precision,
                "precision_detail": self.precision_detail, "precision_note": self.precision_note,
                "sections": [{"kind": s.kind, "model_type": s.model_type, "size_bytes": s.size_bytes}
                             for s in self.sections]}


# ------------------------------------------------------------------------------ flatbuffer reads
class _Buf:
    """Bounds-checked little-endian reads of the header flatbuffer."""
    def __init__(self, data: bytes) -> None:
        self.data = data

    def _get(self, fmt: str, pos: int) -> int:
        size = struct.calcsize(fmt)
        if pos < 0 or pos + size > len(self.data):
            raise _Corrupt(f"offset {pos} outside the {len(self.data)}-byte header")
        return struct.unpack_from(fmt, self.data, pos)[0]

    def ref(self, pos: int) -> int:
        return pos + self._get("<I", pos)

    def field(self, table: int, index: int) -> int | None:
        """Absolute position of field ``index`` of the table at ``table`` (None: absent)."""
        vtable = table - self._get("<i", table)
        vt_len = self._get("<H", vtable)
        slot = 4 + 2 * index
        if slot + 2 > vt_len:
            return None
        off = self._get("<H", vtable + slot)
        return table + off if off else None

    def table(self, table: int, index: int) -> int | None:
        pos = self.field(table, index)
        return None if pos is None else self.ref(pos)

    def vector(self, table: int, index: int) -> list[int]:
        """Positions of the elements of a vector of tables."""
        pos = self.field(table, index)
        if pos is None:
            return []
        start = self.ref(pos)
        n = self._get("<I", start)
        if n > MAX_SECTIONS or start + 4 + 4 * n > len(self.data):
            raise _Corrupt(f"a vector of {n} entries does not fit the header")
        return [self.ref(start + 4 + 4 * i) for i in range(n)]

    def scalar(self, table: int, index: int, fmt: str, default: int = 0) -> int:
        pos = self.field(table, index)
        return default if pos is None else self._get(fmt, pos)

    def string(self, table: int, index: int) -> str | None:
        pos = self.field(table, index)
        if pos is None:
            return None
        start = self.ref(pos)
        n = self._get("<I", start)
        if start + 4 + n > len(self.data):
            raise _Corrupt("a string runs past the header")
        return self.data[start + 4:start + 4 + n].decode("utf-8", "replace")


def _string_item(buf: _Buf, items: list[int], key: str) -> str | None:
    """The string value of the KeyValuePair ``key`` (VData.StringValue = 9) among ``items``."""
    for kv in items:
        if buf.string(kv, 0) == key and buf.scalar(kv, 1, "<B") == 9:
            value = buf.table(kv, 2)
            return None if value is None else buf.string(value, 0)
    return None


# ------------------------------------------------------------------------------ protobuf reads
def _varint(data: bytes, pos: int) -> tuple[int, int]:
    out, shift = 0, 0
    while True:
        if pos >= len(data) or shift > 63:
            raise _Corrupt("a truncated protobuf varint")
        b = data[pos]
        pos += 1
        out |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return out, pos


def _proto_fields(data: bytes) -> list[tuple[int, int, Any]]:
    """(field number, wire type, value) of one protobuf message's top level."""
    out, pos = [], 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        num, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(data, pos)
        elif wire == 1:
            value, pos = data[pos:pos + 8], pos + 8
        elif wire == 2:
            n, pos = _varint(data, pos)
            value, pos = data[pos:pos + n], pos + n
        elif wire == 5:
            value, pos = data[pos:pos + 4], pos + 4
        else:
            raise _Corrupt(f"protobuf wire type {wire} is not one LlmMetadata uses")
        if pos > len(data):
            raise _Corrupt("a protobuf field runs past its section")
        out.append((num, wire, value))
    return out


def _llm_metadata(data: bytes) -> tuple[int | None, str | None]:
    """(max_num_tokens, model type name) of an LlmMetadata message."""
    context, model_type = None, None
    for num, wire, value in _proto_fields(data):
        if num == 5 and wire == 0:
            context = int(value) or None
        elif num == 6 and wire == 2:
            inner = _proto_fields(value)
            if inner:
                model_type = MODEL_TYPES.get(inner[0][0], f"model type {inner[0][0]}")
    return context, model_type


# ------------------------------------------------------------------------------ the bundle
def read_bundle(path: str | os.PathLike, *, with_sha256: bool = True) -> BundleInfo:
    """Describe a ``.litertlm`` bundle; ``BadInput`` naming it for a missing, foreign or corrupt file."""
    p = Path(path)
    if not p.is_file():
        raise BadInput(f"LiteRT-LM bundle not found: {p}; give the path of an existing .litertlm file")
    size = p.stat().st_size
    with open(p, "rb") as fh:
        head = fh.read(HEADER_BEGIN)
        if len(head) < HEADER_BEGIN or head[:8] != MAGIC:
            raise BadInput(f"{p} is not a LiteRT-LM bundle (no 'LITERTLM' magic at its start); {_FIX}")
        major, minor, patch = struct.unpack_from("<III", head, 8)
        header_end = struct.unpack_from("<Q", head, HEADER_END_AT)[0]
        if not HEADER_BEGIN < header_end <= min(size, HEADER_BEGIN + MAX_HEADER_BYTES):
            raise BadInput(f"{p} is truncated or corrupt (its header claims to end at byte {header_end} of "
                           f"{size}); {_FIX}")
        header = fh.read(header_end - HEADER_BEGIN)
        try:
            sections = _sections(_Buf(header), size)
        except (_Corrupt, struct.error, UnicodeDecodeError) as exc:
            raise BadInput(f"{p} is truncated or corrupt (reading its header failed: {exc}); {_FIX}") from None
        context, model_type = None, None
        meta = next((s for s in sections if s.kind == "LlmMetadataProto"), None)
        if meta is not None:
            if meta.size_bytes > MAX_METADATA_BYTES:
                raise BadInput(f"{p}: its LlmMetadata section is {meta.size_bytes} bytes, more than a bundle's "
                               f"metadata ever is; {_FIX}")
            fh.seek(meta.begin)
            try:
                context, model_type = _llm_metadata(fh.read(meta.size_bytes))
            except _Corrupt as exc:
                raise BadInput(f"{p}: its LlmMetadata section is corrupt ({exc}); {_FIX}") from None
    precision, detail, note = _graph_precision(p, sections)
    return BundleInfo(path=str(p), size_bytes=size, sha256=sha256_file(p) if with_sha256 else "",
                      version=f"{major}.{minor}.{patch}", sections=tuple(sections), context_tokens=context,
                      model_type=model_type, precision=precision, precision_detail=detail, precision_note=note)


def _sections(buf: _Buf, file_size: int) -> list[Section]:
    root = buf.ref(0)
    meta = buf.table(root, 1)
    if meta is None:
        raise _Corrupt("no section metadata")
    out = []
    for obj in buf.vector(meta, 0):
        begin, end = buf.scalar(obj, 1, "<Q"), buf.scalar(obj, 2, "<Q")
        if not 0 <= begin <= end <= file_size:
            raise _Corrupt(f"a section at bytes {begin}-{end} lies outside the {file_size}-byte file")
        kind = SECTION_TYPES.get(buf.scalar(obj, 3, "<B"), "unknown")
        out.append(Section(kind, begin, end, _string_item(buf, buf.vector(obj, 0), "model_type")))
    return out


def _graph_precision(p: Path, sections: list[Section]) -> tuple[str | None, str | None, str | None]:
    """The prefill/decode graph's precision, read from its TFLite section in place (mapped, not
    copied: a phone-sized bundle holds gigabytes)."""

    graphs = [s for s in sections if s.kind == "TFLiteModel"]
    graph = next((s for s in graphs if s.model_type == LLM_GRAPH), graphs[0] if len(graphs) == 1 else None)
    if graph is None:
        return None, None, f"no {LLM_GRAPH} TFLite section in the bundle"
    if any(s.kind == "TFLiteWeights" for s in sections):
        return None, None, "the graph's weights are a separate section; precision not read"
    with open(p, "rb") as fh:
        mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
    view = memoryview(mm)[graph.begin:graph.end]
    try:
        info = tflite_model.inspect_bytes(view, Path(f"{p}#{LLM_GRAPH}"))
        return tflite_model.precision(info), tflite_model.precision_detail(info), None
    except BadInput as exc:
        return None, None, str(exc)
    finally:
        info = None
        try:                      # arrays still viewing the map keep it open until collected
            view.release()
            mm.close()
        except BufferError:
            pass
