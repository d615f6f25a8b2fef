"""Small valid GGUF files, where their fields lie, how to corrupt them, and the one rule every
corrupted file must obey (shared by tests/test_bad_gguf.py and benchmarks/fuzz_gguf.py)."""

from __future__ import annotations

import struct
from pathlib import Path

import gguf
import mlx.core as mx
import numpy as np

from muser_mlx import GGUFError, Table, embedding
from muser_mlx.gguf import ArrayInfo, GGUFFile, open_gguf

from conftest import random_table_bytes, reference, write_out

TENSOR = "token_embd.weight"


def write_gguf(path: Path, qtype: str = "Q4_K", vocab: int = 4, dims: int = 256, seed: int = 0) -> np.ndarray:
    """A llama-like GGUF: 4 metadata keys (a string, a u32, a string array, an f32 array),
    then ``token_embd.weight`` (``qtype`` [dims, vocab]) and ``output_norm.weight`` (F32 [dims]).
    Returns the table's bytes, uint8 [vocab, row_bytes]."""
    rng = np.random.default_rng(seed)
    table = random_table_bytes(rng, qtype, vocab, dims)
    w = gguf.GGUFWriter(path, "llama")
    w.add_embedding_length(dims)
    w.add_array("tokenizer.ggml.tokens", [f"t{i}" for i in range(vocab)])
    w.add_array("tokenizer.ggml.scores", [float(i) for i in range(vocab)])
    if qtype == "F16":
        w.add_tensor(TENSOR, table.view(np.float16))
    else:
        w.add_tensor(TENSOR, table, raw_dtype=gguf.GGMLQuantizationType[qtype])
    w.add_tensor("output_norm.weight", rng.standard_normal(dims).astype(np.float32))
    write_out(w)
    return table


class RawGGUF:
    """A GGUF written field by field, for files gguf-py's writer will not make: huge counts,
    holes (sparse runs of zero bytes that take no disk), shapes without their bytes.

        with RawGGUF(path, n_kv=1, n_tensors=1) as g:
            g.string("general.architecture", "llama")
            g.tensor_info("token_embd.weight", (8, 4), gguf.GGMLQuantizationType.F16, 0)
            g.data(table_bytes)     # pads to the alignment first
    """

    def __init__(self, path: Path, n_kv: int, n_tensors: int, version: int = 3):
        self.f = open(path, "wb")  # noqa: SIM115 (closed by __exit__)
        self.f.write(b"GGUF" + struct.pack("<IQQ", version, n_tensors, n_kv))

    def key(self, key: str, vtype: int) -> None:
        self.f.write(struct.pack("<Q", len(key.encode())) + key.encode() + struct.pack("<I", vtype))

    def string(self, key: str, value: str) -> None:
        self.key(key, gguf.GGUFValueType.STRING)
        self.f.write(struct.pack("<Q", len(value.encode())) + value.encode())

    def array_header(self, key: str, item_type: int, count: int) -> None:
        """The key and the array's item type and count; its items are written next (or not)."""
        self.key(key, gguf.GGUFValueType.ARRAY)
        self.f.write(struct.pack("<IQ", item_type, count))

    def raw(self, data: bytes) -> None:
        self.f.write(data)

    def hole(self, n: int) -> None:
        """``n`` zero bytes that take no disk."""
        self.f.seek(n, 1)

    def tensor_info(self, name: str, shape, ggml_type: int, offset: int) -> None:
        self.f.write(struct.pack("<Q", len(name.encode())) + name.encode() + struct.pack("<I", len(shape)))
        self.f.write(struct.pack(f"<{len(shape)}QIQ", *shape, ggml_type, offset))

    def data(self, data: bytes = b"", hole: int = 0, alignment: int = gguf.GGUF_DEFAULT_ALIGNMENT) -> None:
        """Pad to ``alignment``, then ``data``, then a ``hole`` of that many zero bytes."""
        self.f.write(b"\0" * (-self.f.tell() % alignment) + data)
        self.hole(hole)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.f.truncate()  # a trailing hole still counts in the size
        self.f.close()


def strings_file(path, count: int):
    """A valid file: ``count`` empty strings in one array, then a small table."""
    table = random_table_bytes(np.random.default_rng(0), "Q4_K", 4, 256)
    with RawGGUF(path, n_kv=1, n_tensors=1) as g:
        g.array_header("tokenizer.ggml.tokens", gguf.GGUFValueType.STRING, count)
        g.raw(bytes(8 * count))  # each a zero u64 length
        g.tensor_info(TENSOR, (256, 4), gguf.GGMLQuantizationType.Q4_K, 0)
        g.data(table.tobytes())
    return table


def kv_offsets(path: Path, key: str) -> dict[str, int]:
    """File offsets of metadata ``key``'s parts: ``key_len``, ``type``, ``value`` (for an
    array: ``item_type``, ``count``, then ``value``, its first item)."""
    field = gguf.GGUFReader(path).fields[key]
    at = {"key_len": field.offset, "type": field.offset + 8 + len(key.encode())}
    at["value"] = at["type"] + 4
    if field.types[0] == gguf.GGUFValueType.ARRAY:
        at["item_type"], at["count"], at["value"] = at["value"], at["value"] + 4, at["value"] + 12
    return at


def tensor_info_offsets(path: Path, name: str = TENSOR) -> dict[str, int]:
    """File offsets of tensor ``name``'s info parts: ``name_len``, ``n_dims``, ``dims`` (the
    first u64), ``type``, ``offset``; plus ``data``, where its bytes start."""
    reader = gguf.GGUFReader(path)
    t = next(t for t in reader.tensors if t.name == name)
    at = {"name_len": t.field.offset, "n_dims": t.field.offset + 8 + len(name.encode())}
    at["dims"] = at["n_dims"] + 4
    at["type"] = at["dims"] + 8 * len(t.shape)
    at["offset"] = at["type"] + 4
    at["data"] = t.data_offset
    return at


def patch(path: Path, at: int, fmt: str, value) -> None:
    """Overwrite the little-endian ``struct`` ``fmt`` at byte ``at`` of ``path``."""
    data = bytearray(path.read_bytes())
    struct.pack_into("<" + fmt, data, at, value)
    path.write_bytes(bytes(data))


# Values worth writing into a count, length, offset or dimension.
INTERESTING_U64 = (0, 1, 2, 3, 31, 32, 255, 256, 2**31 - 1, 2**31, 2**32 - 1, 2**32, 2**62, 2**63, 2**64 - 1)


def mutate(data: bytes, ops) -> bytes:
    """Apply ``ops`` in order: ``("flip", pos, bit)``, ``("byte", pos, value)``,
    ``("u32", pos, value)``, ``("u64", pos, value)``, ``("truncate", length)``; positions are
    taken modulo the current length."""
    buf = bytearray(data)
    for op in ops:
        if not buf:
            break
        kind, pos = op[0], op[1]
        if kind == "truncate":
            del buf[pos % (len(buf) + 1) :]
            continue
        pos %= len(buf)
        if kind == "flip":
            buf[pos] ^= 1 << op[2]
        elif kind == "byte":
            buf[pos] = op[2]
        else:
            width = 4 if kind == "u32" else 8
            value = (op[2] % 2**32) if width == 4 else op[2]
            buf[pos : pos + width] = struct.pack("<I" if width == 4 else "<Q", value)[: len(buf) - pos]
    return bytes(buf)


def same_floats(got: np.ndarray, want: np.ndarray) -> bool:
    """float32 arrays equal bit for bit, except that any NaN matches any NaN."""
    nan = np.isnan(want)
    return bool(
        np.array_equal(np.isnan(got), nan) and np.array_equal(got.view(np.uint32)[~nan], want.view(np.uint32)[~nan])
    )


def gguf_py_value(field):
    """A gguf-py ``ReaderField``'s value as ``GGUFFile`` gives it: a Python scalar or str, or for an
    array a list of str or a NumPy array (bools as ``bool``); for an array of arrays, its count."""
    strings = field.types[-1] == gguf.GGUFValueType.STRING

    def item(i):
        part = field.parts[i]
        if strings:
            return bytes(part).decode("utf-8", errors="replace")
        return part.view(np.uint8) != 0 if part.dtype == np.bool_ else part

    if field.types[0] != gguf.GGUFValueType.ARRAY:
        value = item(field.data[0])
        return value if strings else value.tolist()[0]
    if len(field.types) > 2:
        return int(field.parts[4][0])  # key length, key, type, item type, count
    items = [item(i) for i in field.data]
    return items if strings else np.concatenate(items) if items else np.array([])


def same_value(ours, theirs) -> bool:
    if isinstance(ours, np.ndarray):
        return ours.shape == theirs.shape and np.array_equal(ours, theirs, equal_nan=ours.dtype.kind == "f")
    if isinstance(ours, float):
        return ours == theirs or (np.isnan(ours) and np.isnan(theirs))
    if isinstance(ours, list) and ours and isinstance(ours[0], (list, np.ndarray)):
        return len(ours) == theirs
    return ours == theirs


def assert_same_header(f: GGUFFile, reader: gguf.GGUFReader) -> None:
    """``f`` reads what gguf-py reads: every metadata key in order with its value (arrays read in
    full), every tensor in order with its type, shape, offset and byte count."""
    keys = [k for k in reader.fields if not k.startswith("GGUF.")]
    assert list(f.metadata) == keys
    for key in keys:
        ours = f.array(key) if isinstance(f.metadata[key], ArrayInfo) else f.get(key)
        assert same_value(ours, gguf_py_value(reader.fields[key])), f"metadata {key!r} differs from gguf-py's"
    assert list(f.tensors) == [t.name for t in reader.tensors]
    for t in reader.tensors:
        ours = f.tensors[t.name]
        theirs = (t.tensor_type.name, tuple(int(n) for n in t.shape), int(t.data_offset), int(t.n_bytes))
        assert (ours.qtype, ours.shape, ours.offset, ours.nbytes) == theirs, f"tensor {t.name!r} differs from gguf-py's"


def check_outcome(path: Path) -> str:
    """The rule for any file: ``Table.from_gguf`` raises ``GGUFError``, or returns a table whose
    every row equals gguf-py's dequantization of the bytes gguf-py reads for the tensor, and
    ``open_gguf`` reads the header gguf-py reads (:func:`assert_same_header`).
    Returns ``"error"`` or ``"table"``; any other outcome raises AssertionError (or escapes)."""
    try:
        table = Table.from_gguf(path)
    except GGUFError:
        return "error"
    reader = gguf.GGUFReader(path)
    with open_gguf(path) as f:
        assert_same_header(f, reader)
    t = next(t for t in reader.tensors if t.name == TENSOR)
    assert (table.qtype, table.dims, table.vocab) == (t.tensor_type.name, int(t.shape[0]), int(t.shape[1]))
    raw = np.asarray(t.data).view(np.uint8).reshape(table.vocab, table.row_bytes)
    assert np.array_equal(np.array(table.data), raw), "table bytes differ from the bytes gguf-py reads"
    ids = np.arange(table.vocab)
    got = np.array(embedding(table, mx.array(ids)))
    assert same_floats(got, reference(raw, table.qtype, ids)), "rows differ from gguf-py's dequantization"
    return "table"
