"""The GGUF header, walked once through the file's one descriptor: metadata and tensor infos.

Layout (little-endian): "GGUF", u32 version, u64 n_tensors, u64 n_kv; n_kv times {string key,
u32 value type, value}; n_tensors times {string name, u32 n_dims, u64 ne[n_dims], u32 ggml type,
u64 offset into the data section}; padding to the alignment; the data section. A string is a u64
length and that many UTF-8 bytes; an array is a u32 item type, a u64 count and the items.

Every count and length is compared with the bytes left in the file before it is believed, so a
bogus one costs a comparison, not a loop or an allocation. Arrays are not read while walking: an
``ArrayInfo`` records where one lies (a string array stepped over length by length, no object per
item; ``gguf_values.parse_array`` reads it when asked), a string over ``MAX_INLINE_STRING`` too
(a ``StringInfo``). The rules for tensor infos are llama.cpp's ``gguf_init_from_file``: a known
type, at most ``GGML_MAX_DIMS`` dimensions, an element count that fits in int64, whole blocks per
row, aligned offsets, bytes in the file, and (ggml lays tensors out one after another) no overlap.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import NamedTuple

from gguf import (
    GGML_QUANT_SIZES,
    GGUF_DEFAULT_ALIGNMENT,
    GGMLQuantizationType,
    GGUFValueType,
)

from .errors import GGUFError
from .gguf_io import FileBytes
from .gguf_values import (
    MAX_ARRAY_NESTING,
    MAX_INLINE_STRING,
    MIN_ITEM_BYTES,
    SCALARS,
    U32,
    U64,
    ArrayInfo,
    StringInfo,
)

MAGIC = b"GGUF"
VERSIONS = (2, 3)  # the versions with 64-bit counts (gguf-py reads the same)
MAX_DIMS = 4  # ggml's GGML_MAX_DIMS
MAX_NAME = 1 << 16  # bytes of a key or tensor name (ggml's tensor names: 64)
INT64_MAX = 2**63 - 1  # ggml counts elements in int64
ALIGNMENT_KEY = "general.alignment"
WINDOW = 1 << 20  # bytes read ahead at a time while walking the header
# ggml type number -> (name, values per block, bytes per block), from gguf-py
GGML_TYPES = {t.value: (t.name, *GGML_QUANT_SIZES[t]) for t in GGMLQuantizationType if t in GGML_QUANT_SIZES}
TENSOR_INFO_TAILS = [struct.Struct(f"<{n}QIQ") for n in range(MAX_DIMS + 1)]  # ne[n_dims], type, offset
MIN_KV_BYTES = 8 + 4 + 1  # key length, value type, the smallest value
MIN_TENSOR_INFO_BYTES = 8 + 4 + 4 + 8  # name length, n_dims, type, offset


def unreadable(path: Path, reason: str) -> GGUFError:
    return GGUFError(f"{path}: not a readable GGUF file: {reason}")


class TensorInfo(NamedTuple):
    """One tensor's header entry. ``shape`` is in ggml order (``ne0``, the values of a row, first);
    ``offset`` is the absolute byte offset of its ``nbytes`` in the file; its bytes are ``rows``
    rows of ``row_bytes`` (``rows`` the product of the other dimensions)."""

    name: str
    qtype: str
    ggml_type: int
    shape: tuple[int, ...]
    offset: int
    nbytes: int
    rows: int
    row_bytes: int


@dataclass(frozen=True)
class Header:
    version: int
    metadata: dict
    tensors: dict[str, TensorInfo]
    alignment: int
    data_offset: int


class _Cursor:
    """Little-endian reads at a position of the file through a window of bytes read ahead; each
    read first checks the bytes left in the file."""

    def __init__(self, src: FileBytes):
        self.src, self.pos = src, 0
        self.buf, self.base = bytearray(), 0  # the file's bytes [base, base + len(buf))

    def need(self, n: int, what: str) -> None:
        if n > self.src.size - self.pos:
            raise unreadable(
                self.src.path, f"{what} at byte {self.pos} needs {n} bytes, but the file ends at byte {self.src.size}"
            )

    def _window(self, n: int, what: str) -> int:
        """Index in ``buf`` of the ``n`` bytes at ``pos``, reading a new window if needed."""
        self.need(n, what)
        i = self.pos - self.base
        if i + n > len(self.buf):
            self.base, i = self.pos, 0
            self.buf = self.src.read(self.pos, min(max(n, WINDOW), self.src.size - self.pos), what)
        return i

    def take(self, n: int, what: str) -> int:
        """Index in ``buf`` of the next ``n`` bytes, which the cursor then moves past."""
        i = self._window(n, what)
        self.pos += n
        return i

    def skip(self, n: int, what: str) -> int:
        """Move past ``n`` bytes without reading them; returns where they start."""
        self.need(n, what)
        self.pos += n
        return self.pos - n

    def u32(self, what: str) -> int:
        i = self.take(4, what)  # first: it may read a new window
        return U32.unpack_from(self.buf, i)[0]

    def u64(self, what: str) -> int:
        i = self.take(8, what)
        return U64.unpack_from(self.buf, i)[0]

    def name(self, what: str) -> str:
        """A key or a tensor name: strict UTF-8 of at most MAX_NAME bytes."""
        n = self.u64(f"{what}'s length")
        if n > MAX_NAME:
            raise unreadable(
                self.src.path, f"{what} at byte {self.pos} is {n} bytes long; at most {MAX_NAME} are allowed"
            )
        i = self.take(n, what)
        try:
            return self.buf[i : i + n].decode("utf-8")
        except UnicodeDecodeError as e:
            raise unreadable(self.src.path, f"{what} at byte {self.pos - n} is not UTF-8 ({e})") from e

    def string(self, what: str) -> str | StringInfo:
        n = self.u64(f"{what}'s length")
        if n > MAX_INLINE_STRING:
            return StringInfo(self.skip(n, what), n)
        i = self.take(n, what)
        return self.buf[i : i + n].decode("utf-8", errors="replace")

    def skip_strings(self, count: int, what: str) -> None:
        """Step over ``count`` strings, reading only their lengths."""
        self.need(8 * count, f"{what} ({count} strings of at least 8 bytes each)")
        unpack, left = U64.unpack_from, count
        while left:
            i = self._window(8, f"{what}[{count - left}]'s length")
            buf, last = self.buf, len(self.buf) - 8
            while left and i <= last:
                i += 8 + unpack(buf, i)[0]
                left -= 1
            self.pos = self.base + i
            if self.pos > self.src.size:
                raise unreadable(
                    self.src.path,
                    f"{what}[{count - left - 1}] ends at byte {self.pos}, past the end of the file "
                    f"({self.src.size} bytes)",
                )

    def value(self, vtype: int, what: str):
        """One metadata value: a number or bool, a str (or StringInfo), an ArrayInfo."""
        scalar = SCALARS.get(vtype)
        if scalar is not None:
            i = self.take(scalar.size, what)
            return scalar.unpack_from(self.buf, i)[0]
        if vtype == GGUFValueType.STRING:
            return self.string(what)
        if vtype == GGUFValueType.ARRAY:
            return self.array(what, 0)
        raise unreadable(self.src.path, f"{what} has unknown value type {vtype}")

    def array(self, what: str, depth: int) -> ArrayInfo:
        if depth >= MAX_ARRAY_NESTING:
            raise unreadable(self.src.path, f"{what} nests arrays more than {MAX_ARRAY_NESTING} deep")
        item_type, count = self.u32(f"{what}'s item type"), self.u64(f"{what}'s count")
        start = self.pos
        if item_type in SCALARS:
            self.skip(count * SCALARS[item_type].size, f"{what} ({count} items)")
        elif item_type == GGUFValueType.STRING:
            self.skip_strings(count, what)
        elif item_type == GGUFValueType.ARRAY:
            self.need(MIN_ITEM_BYTES[item_type] * count, f"{what} ({count} arrays of at least 12 bytes each)")
            for i in range(count):
                self.array(f"{what}[{i}]", depth + 1)
        else:
            raise unreadable(self.src.path, f"{what} has unknown item type {item_type}")
        return ArrayInfo(GGUFValueType(item_type), count, start, self.pos - start)


def _first_time(seen: dict, name: str, what: str, path: Path) -> str:
    if name in seen:
        raise unreadable(path, f"{what} {name!r} appears twice")
    return name


def _tensor_info(cur: _Cursor, index: int, seen: dict) -> tuple[str, tuple[int, ...], int, int]:
    """(name, shape, ggml type, offset in the data section) of the next tensor info."""
    path = cur.src.path
    name = _first_time(seen, cur.name(f"the name of tensor {index}"), "tensor name", path)
    what = f"tensor {name!r}'s info"
    n_dims = cur.u32(what)
    if n_dims > MAX_DIMS:
        raise unreadable(path, f"tensor {name!r} has {n_dims} dimensions; ggml allows at most {MAX_DIMS}")
    tail = TENSOR_INFO_TAILS[n_dims]
    at = cur.take(tail.size, what)  # first: it may read a new window into cur.buf
    *shape, ggml_type, offset = tail.unpack_from(cur.buf, at)
    if ggml_type not in GGML_TYPES:
        raise unreadable(path, f"tensor {name!r} has unknown ggml type {ggml_type}")
    if max(shape, default=0) > INT64_MAX or math.prod(shape) > INT64_MAX:
        raise unreadable(path, f"tensor {name!r} has shape {shape}, more than 2**63 - 1 elements")
    return name, tuple(shape), ggml_type, offset


def _placed(
    name: str,
    shape: tuple[int, ...],
    ggml_type: int,
    offset: int,
    header_end: int,
    alignment: int,
    size: int,
    path: Path,
) -> TensorInfo:
    """The TensorInfo, once its rows are whole blocks and its bytes lie aligned inside the file."""
    qtype, block_values, block_bytes = GGML_TYPES[ggml_type]
    ne0 = shape[0] if shape else 1
    if ne0 % block_values:
        raise GGUFError(
            f"{path}: tensor {name!r}: ne0 {ne0} is not a multiple of the {qtype} block of {block_values} values"
        )
    if offset % alignment:
        raise GGUFError(
            f"{path}: tensor {name!r}: data offset {offset} is not a multiple of the file's alignment {alignment}"
        )
    rows, row_bytes = math.prod(shape[1:]), ne0 // block_values * block_bytes
    start, nbytes = header_end + offset, rows * row_bytes
    if start + nbytes > size:
        raise GGUFError(
            f"{path}: tensor {name!r}: its {nbytes} bytes from byte {start} end at byte {start + nbytes}, past the "
            f"end of the file ({size} bytes)"
        )
    return TensorInfo(name, qtype, ggml_type, shape, start, nbytes, rows, row_bytes)


def _check_no_overlap(tensors: dict[str, TensorInfo], path: Path) -> None:
    placed = sorted((t for t in tensors.values() if t.nbytes), key=lambda t: t.offset)
    for a, b in pairwise(placed):
        if b.offset < a.offset + a.nbytes:
            raise GGUFError(
                f"{path}: tensor {b.name!r}'s bytes {b.offset}..{b.offset + b.nbytes} overlap tensor "
                f"{a.name!r}'s bytes {a.offset}..{a.offset + a.nbytes}"
            )


def read_header(src: FileBytes) -> Header:
    """Walk the header of the file behind ``src`` once; ``GGUFError`` for anything malformed."""
    path, cur = src.path, _Cursor(src)
    if src.size == 0:
        raise unreadable(path, "it is empty")
    i = cur.take(min(4, src.size), "magic")
    magic = bytes(cur.buf[i : i + 4])
    if magic != MAGIC:
        raise unreadable(path, f"it starts with {magic!r}, not {MAGIC!r}")
    version = cur.u32("version")
    if version & 0xFFFF == 0 and version:
        raise unreadable(path, "a big-endian GGUF file; only little-endian files are supported")
    if version not in VERSIONS:
        raise unreadable(path, f"GGUF version {version}; supported versions: {', '.join(map(str, VERSIONS))}")
    n_tensors, n_kv = cur.u64("tensor count"), cur.u64("metadata count")
    cur.need(
        MIN_KV_BYTES * n_kv + MIN_TENSOR_INFO_BYTES * n_tensors, f"{n_kv} metadata entries and {n_tensors} tensor infos"
    )
    metadata: dict = {}
    alignment = GGUF_DEFAULT_ALIGNMENT
    for i in range(n_kv):
        key = _first_time(metadata, cur.name(f"metadata key {i} of {n_kv}"), "metadata key", path)
        what = f"metadata {key!r}"
        vtype = cur.u32(f"{what}'s type")
        metadata[key] = cur.value(vtype, what)
        if key == ALIGNMENT_KEY:
            alignment = metadata[key]
            if vtype != GGUFValueType.UINT32 or alignment == 0 or alignment & (alignment - 1):
                raise unreadable(path, f"{ALIGNMENT_KEY} must be a uint32 power of two, got {alignment!r}")
    infos: dict = {}
    for i in range(n_tensors):
        name, *rest = _tensor_info(cur, i, infos)
        infos[name] = rest
    header_end = -(-cur.pos // alignment) * alignment
    tensors = {name: _placed(name, *rest, header_end, alignment, src.size, path) for name, rest in infos.items()}
    _check_no_overlap(tensors, path)
    return Header(version, metadata, tensors, alignment, header_end)
