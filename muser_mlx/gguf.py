"""Reading one embedding-shaped tensor out of a GGUF file (through gguf-py's reader).

The file is memory-mapped read-only; nothing here copies or dequantizes the tensor's bytes.

A malformed file raises ``GGUFError``, never a crash, a hang or a huge allocation. gguf-py's
reader trusts the file's counts and lengths (a bogus array count makes it loop for ever, a
length past the end is silently cut short), so :func:`scan_header` first walks the header's
framing, checking every count, length and offset against the bytes that are left, before
gguf-py reads it. Whatever gguf-py still raises is translated; :func:`read_tensor` then checks
the chosen tensor's place in the file (inside it, aligned, not overlapping another tensor).
"""

from __future__ import annotations

import math
import mmap
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np
from gguf import GGML_QUANT_SIZES, GGUFReader, GGUFValueType

from .errors import GGUFError
from .formats import FORMATS, Format

MAGIC = b"GGUF"
VERSIONS = (2, 3)  # the versions gguf-py reads (64-bit counts)
MAX_DIMS = 4  # ggml's GGML_MAX_DIMS
MAX_ARRAY_NESTING = 4
# Bytes of each fixed-size metadata value type, as gguf-py reads them.
SCALAR_BYTES = {t: np.dtype(np_type).itemsize for t, np_type in GGUFReader.gguf_scalar_to_np.items()}


@dataclass(frozen=True)
class GGUFTensor:
    """A validated embedding-shaped tensor: ``data`` is a read-only memory-mapped
    ``uint8 [vocab, row_bytes]`` view into the file."""

    path: Path
    name: str
    format: Format
    dims: int
    vocab: int
    data: np.ndarray
    architecture: str | None


def unreadable(path: Path, reason: str) -> GGUFError:
    return GGUFError(f"{path}: not a readable GGUF file: {reason}")


class _Cursor:
    """Little-endian reads over the file's bytes; each read first checks the bytes left."""

    def __init__(self, buf: mmap.mmap, path: Path):
        self.buf, self.pos, self.path = buf, 0, path

    def need(self, n: int, what: str) -> None:
        if n > len(self.buf) - self.pos:
            raise unreadable(
                self.path, f"{what} at byte {self.pos} needs {n} bytes, "
                f"but the file ends at byte {len(self.buf)}"
            )

    def take(self, n: int, what: str) -> int:
        """Skip ``n`` bytes of ``what``; returns where they start."""
        self.need(n, what)
        self.pos += n
        return self.pos - n

    def u32(self, what: str) -> int:
        return struct.unpack_from("<I", self.buf, self.take(4, what))[0]

    def u64(self, what: str) -> int:
        return struct.unpack_from("<Q", self.buf, self.take(8, what))[0]

    def string(self, what: str) -> bytes:
        n = self.u64(f"{what}'s length")
        start = self.take(n, what)
        return bytes(self.buf[start:start + n])

    def value(self, vtype: int, what: str, depth: int = 0) -> None:
        """Skip one metadata value of type ``vtype``."""
        if vtype in SCALAR_BYTES:
            self.take(SCALAR_BYTES[vtype], what)
        elif vtype == GGUFValueType.STRING:
            self.string(what)
        elif vtype == GGUFValueType.ARRAY:
            if depth >= MAX_ARRAY_NESTING:
                raise unreadable(self.path, f"{what} nests arrays more than {MAX_ARRAY_NESTING} deep")
            item_type, count = self.u32(f"{what}'s item type"), self.u64(f"{what}'s count")
            if item_type in SCALAR_BYTES:
                self.take(count * SCALAR_BYTES[item_type], f"{what} ({count} items)")
                return
            self.need(8 * count, f"{what} ({count} items of at least 8 bytes each)")
            for i in range(count):
                self.value(item_type, f"{what}[{i}]", depth + 1)
        else:
            raise unreadable(self.path, f"{what} has unknown value type {vtype}")


def _first_time(seen: set[bytes], name: bytes, what: str, path: Path) -> bytes:
    """``name``, added to ``seen``; ``GGUFError`` if it is already there (ggml keeps one)."""
    if name in seen:
        raise unreadable(path, f"{what} {name!r} appears twice")
    seen.add(name)
    return name


def scan_header(buf: mmap.mmap, path: Path) -> None:
    """Walk the header (magic, version, counts, metadata, tensor infos) without building
    anything, so that gguf-py only ever reads a header whose framing fits in the file.

    Layout (little-endian): "GGUF", u32 version, u64 n_tensors, u64 n_kv; n_kv times
    {string key, u32 type, value}; n_tensors times {string name, u32 n_dims, u64 dims[n_dims],
    u32 ggml type, u64 offset into the data section}. A string is a u64 length + its bytes.
    """
    cur = _Cursor(buf, path)
    if len(buf) < 4 or bytes(buf[:4]) != MAGIC:
        raise unreadable(path, f"it starts with {bytes(buf[:4])!r}, not {MAGIC!r}")
    cur.take(4, "magic")
    version = cur.u32("version")
    if version & 0xFFFF == 0 and version:
        raise unreadable(path, "a big-endian GGUF file; only little-endian files are supported")
    if version not in VERSIONS:
        raise unreadable(path, f"GGUF version {version}; supported versions: {', '.join(map(str, VERSIONS))}")
    n_tensors, n_kv = cur.u64("tensor count"), cur.u64("metadata count")
    keys: set[bytes] = set()
    for i in range(n_kv):
        key = _first_time(keys, cur.string(f"metadata key {i} of {n_kv}"), "metadata key", path)
        cur.value(cur.u32(f"type of metadata {key!r}"), f"metadata {key!r}")
    names: set[bytes] = set()
    for i in range(n_tensors):
        name = _first_time(names, cur.string(f"name of tensor {i} of {n_tensors}"), "tensor name", path)
        n_dims = cur.u32(f"tensor {name!r}'s number of dimensions")
        if n_dims > MAX_DIMS:
            raise unreadable(path, f"tensor {name!r} has {n_dims} dimensions; ggml allows at most {MAX_DIMS}")
        cur.take(8 * n_dims, f"tensor {name!r}'s dimensions")
        cur.u32(f"tensor {name!r}'s type")
        offset = cur.u64(f"tensor {name!r}'s data offset")
        if offset > len(buf):
            raise unreadable(path, f"tensor {name!r} has data offset {offset}, past the end of the file ({len(buf)} bytes)")


def open_gguf(path: str | Path) -> GGUFReader:
    """gguf-py's reader over ``path`` once its header has passed :func:`scan_header`.

    Raises ``FileNotFoundError`` where nothing is at ``path``, else ``GGUFError``.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such GGUF file")
    if not path.is_file():  # a folder, a FIFO (opening it would block) or a device
        raise GGUFError(f"{path}: not a regular file")
    try:
        with open(path, "rb") as f:
            if path.stat().st_size == 0:
                raise unreadable(path, "it is empty")
            with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
                scan_header(buf, path)
    except OSError as e:
        raise GGUFError(f"{path}: cannot be read ({e})") from e
    try:
        return GGUFReader(path, "r")
    except Exception as e:  # gguf-py raises ValueError, KeyError, IndexError, ... on bad files
        raise unreadable(path, f"gguf-py: {type(e).__name__}: {e}") from e


def field_value(reader: GGUFReader, key: str):
    """A scalar or string metadata value, or None where the key is absent."""
    field = reader.fields.get(key)
    if field is None or not field.data:
        return None
    value = field.parts[field.data[0]]
    if field.types and field.types[0].name == "STRING":
        return bytes(value).decode("utf-8", errors="replace")
    return value.tolist()[0]


def embedding_like(reader: GGUFReader) -> list[str]:
    """Names of the 2-D tensors that could be a token-embedding table."""
    names = [t.name for t in reader.tensors if len(t.shape) == 2]
    hinted = [n for n in names if "embd" in n or "embed" in n or n == "output.weight"]
    return hinted or names


class Gatherable(NamedTuple):
    """A tensor that can serve as a table: ``dims`` values per row, ``vocab`` rows, ``nbytes`` in all."""

    name: str
    qtype: str
    dims: int
    vocab: int
    nbytes: int


def gatherable_tensors(source: GGUFReader | str | Path) -> list[Gatherable]:
    """Every 2-D tensor (in file order) whose type is a supported format and whose dims is a
    multiple of that format's block: the tensors a Table can be made from."""
    reader = source if isinstance(source, GGUFReader) else open_gguf(source)
    found = []
    for t in reader.tensors:
        fmt = FORMATS.get(t.tensor_type.name)
        if fmt is None or len(t.shape) != 2 or int(t.shape[0]) % fmt.block_values:
            continue
        dims, vocab = (int(n) for n in t.shape)
        found.append(Gatherable(t.name, fmt.name, dims, vocab, tensor_nbytes(t)))
    return found


def tensor_nbytes(t) -> int:
    """Bytes of a gguf-py ``ReaderTensor`` from its shape, in Python ints (gguf-py's own
    ``n_bytes`` is a product of uint64s, which wraps for absurd shapes)."""
    block_values, block_bytes = GGML_QUANT_SIZES[t.tensor_type]
    return math.prod(int(n) for n in t.shape) // block_values * block_bytes


def check_placement(reader: GGUFReader, t, nbytes: int, where: str) -> None:
    """``t``'s ``nbytes`` lie in the data section, at an aligned offset, and no other tensor's
    bytes overlap them (ggml lays tensors out one after another)."""
    offset = t.data_offset - reader.data_offset
    if offset % reader.alignment:
        raise GGUFError(f"{where}: data offset {offset} is not a multiple of the file's alignment {reader.alignment}")
    end, size = t.data_offset + nbytes, reader.data.size
    if end > size:
        raise GGUFError(f"{where}: its {nbytes} bytes end at byte {end}, past the end of the file ({size} bytes)")
    for other in reader.tensors:
        other_end = other.data_offset + tensor_nbytes(other)
        if other is t or other_end == other.data_offset:  # itself, or an empty tensor
            continue
        if other.data_offset < end and t.data_offset < other_end:
            raise GGUFError(
                f"{where}: its bytes {t.data_offset}..{end} overlap tensor {other.name!r}'s "
                f"bytes {other.data_offset}..{other_end}"
            )


def read_tensor(path: str | Path, tensor: str = "token_embd.weight") -> GGUFTensor:
    """Find ``tensor`` in the GGUF at ``path`` and check that it is a gatherable table."""
    path = Path(path)
    reader = open_gguf(path)
    where = f"{path}: tensor {tensor!r}"
    found = [t for t in reader.tensors if t.name == tensor]
    if not found:
        candidates = ", ".join(embedding_like(reader)) or "none"
        raise GGUFError(f"{where} is not in the file; embedding-like tensors: {candidates}")
    t = found[0]
    qtype = t.tensor_type.name
    if qtype not in FORMATS:
        raise GGUFError(f"{where} has type {qtype}, not supported yet; supported: {', '.join(FORMATS)}")
    fmt = FORMATS[qtype]
    shape = [int(n) for n in t.shape]
    if len(shape) != 2:
        raise GGUFError(f"{where} has shape {shape}; an embedding table is [dims, vocab] in ggml order")
    dims, vocab = shape
    if dims < 1 or vocab < 1:
        raise GGUFError(f"{where} has shape {shape}; dims and vocab must both be at least 1")
    if dims % fmt.block_values:
        raise GGUFError(f"{where}: dims {dims} is not a multiple of the {qtype} block of {fmt.block_values} values")
    row_bytes = fmt.row_bytes(dims)
    if t.data.nbytes != vocab * row_bytes:
        raise GGUFError(
            f"{where} holds {t.data.nbytes} bytes, but [{dims}, {vocab}] {qtype} needs "
            f"vocab * row_bytes = {vocab} * {row_bytes} = {vocab * row_bytes}"
        )
    check_placement(reader, t, vocab * row_bytes, where)
    arch = field_value(reader, "general.architecture")
    width = field_value(reader, f"{arch}.embedding_length") if arch else None
    if width is not None and width != dims:
        raise GGUFError(f"{where} has dims {dims} but the metadata {arch}.embedding_length is {width}")
    data = t.data.view(np.uint8).reshape(vocab, row_bytes)
    return GGUFTensor(path, tensor, fmt, dims, vocab, data, arch)
