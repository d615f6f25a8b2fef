"""Reading one embedding-shaped tensor out of a GGUF file (through gguf-py's reader).

The file is memory-mapped read-only; nothing here copies or dequantizes the tensor's bytes.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np
from gguf import GGUFReader

from .errors import GGUFError
from .formats import FORMATS, Format


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


def open_gguf(path: str | Path) -> GGUFReader:
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such GGUF file")
    try:
        return GGUFReader(path, "r")
    except (ValueError, KeyError, IndexError, OSError) as e:
        raise GGUFError(f"{path}: not a readable GGUF file ({e})") from e


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
        found.append(Gatherable(t.name, fmt.name, dims, vocab, int(t.n_bytes)))
    return found


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
    if dims % fmt.block_values:
        raise GGUFError(f"{where}: dims {dims} is not a multiple of the {qtype} block of {fmt.block_values} values")
    row_bytes = fmt.row_bytes(dims)
    if t.data.nbytes != vocab * row_bytes:
        raise GGUFError(
            f"{where} holds {t.data.nbytes} bytes, but [{dims}, {vocab}] {qtype} needs "
            f"vocab * row_bytes = {vocab} * {row_bytes} = {vocab * row_bytes}"
        )
    arch = field_value(reader, "general.architecture")
    width = field_value(reader, f"{arch}.embedding_length") if arch else None
    if width is not None and width != dims:
        raise GGUFError(f"{where} has dims {dims} but the metadata {arch}.embedding_length is {width}")
    data = t.data.view(np.uint8).reshape(vocab, row_bytes)
    return GGUFTensor(path, tensor, fmt, dims, vocab, data, arch)
