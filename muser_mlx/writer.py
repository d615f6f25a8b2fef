"""Writing tables to a GGUF file (through gguf-py's ``GGUFWriter``)."""

from __future__ import annotations

import os
import reprlib
from pathlib import Path

import gguf
import numpy as np

from .table import Table

_ADDERS = {bool: "add_bool", int: "add_int64", float: "add_float32", str: "add_string"}
# Keys the writer sets itself: the architecture from its argument, the alignment its layout keeps.
_WRITER_KEYS = ("general.architecture", "general.alignment")
_FLOAT32_MAX = float(np.finfo(np.float32).max)
_SHOWN = reprlib.Repr()  # a bad key, name or value as a message shows it: its ends, not all of it
_SHOWN.maxstring = _SHOWN.maxother = 60


def _check_text(what: str, text) -> None:
    """A key, tensor name, architecture or string value: a ``str`` that UTF-8 can hold, else
    ``TypeError`` / ``ValueError`` naming ``what`` (gguf-py's own errors named nothing)."""
    if not isinstance(text, str):
        raise TypeError(f"{what} must be a str, got {type(text).__name__} {_SHOWN.repr(text)}")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        raise ValueError(f"{what} {_SHOWN.repr(text)} is not valid as UTF-8 ({e.reason})") from None


def _adder(key: str, value) -> str:
    """The GGUFWriter method that writes ``value`` (non-negative ints below 2**32 as uint32, as
    llama.cpp reads counts and sizes); ``TypeError`` or ``ValueError`` for a value the file
    cannot hold, before anything is written."""
    _check_text("a metadata key", key)
    if key in _WRITER_KEYS:
        raise ValueError(f"metadata {_SHOWN.repr(key)} is set by save_gguf itself (the architecture by its argument)")
    kind = type(value)
    if kind not in _ADDERS:
        raise TypeError(
            f"metadata {_SHOWN.repr(key)}: {kind.__name__} values are not supported (bool, int, float, str)"
        )
    if kind is int and not -(2**63) <= value < 2**63:
        raise ValueError(f"metadata {_SHOWN.repr(key)}: {value} does not fit a 64-bit integer")
    if kind is float and abs(value) > _FLOAT32_MAX and abs(value) != float("inf"):
        raise ValueError(f"metadata {_SHOWN.repr(key)}: {value} is beyond float32's range")
    if kind is str:
        _check_text(f"metadata {_SHOWN.repr(key)}:", value)
    return "add_uint32" if kind is int and 0 <= value < 2**32 else _ADDERS[kind]


def save_gguf(
    path: str | Path, tables: dict[str, Table], metadata: dict | None = None, architecture: str = "llama"
) -> Path:
    """Write ``{tensor name: Table}`` and ``metadata`` (``{key: bool | int | float | str}``) to a
    GGUF at ``path``, readable by ``gguf.GGUFReader``, llama.cpp and ``Table.from_gguf``.

    The tables' bytes are written as they are (no re-quantization); a table's ggml shape is
    ``[dims, vocab]``. ``general.architecture`` is ``architecture``. A value the file cannot hold
    (an int beyond 64 bits, a float beyond float32, a string that is not UTF-8) or a key the
    writer sets (``general.architecture``, ``general.alignment``) raises before anything is
    written; the file is written beside ``path`` and moved there whole, so a file already at
    ``path`` stays as it was until then.
    """
    path = Path(path)
    _check_text("the architecture", architecture)
    adders = {key: _adder(key, value) for key, value in (metadata or {}).items()}
    for name, table in tables.items():
        _check_text("a tensor name", name)
        if not isinstance(table, Table):
            raise TypeError(f"tensor {_SHOWN.repr(name)} must be a muser_mlx.Table, got {type(table).__name__}")
    partial = path.with_name(f".{path.name}.{os.getpid()}.partial")  # made as the file is, by the umask
    writer = gguf.GGUFWriter(partial, architecture)
    try:
        for key, adder in adders.items():
            getattr(writer, adder)(key, metadata[key])
        for name, table in tables.items():
            writer.add_tensor(name, np.array(table.data), raw_dtype=gguf.GGMLQuantizationType[table.qtype])
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()
        os.replace(partial, path)
    except BaseException:
        writer.close()
        partial.unlink(missing_ok=True)
        raise
    return path
