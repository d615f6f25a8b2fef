"""Writing tables to a GGUF file (through gguf-py's ``GGUFWriter``)."""

from __future__ import annotations

from pathlib import Path

import gguf
import numpy as np

from .table import Table

_ADDERS = {bool: "add_bool", int: "add_int64", float: "add_float32", str: "add_string"}


def _adder(value) -> str | None:
    """Non-negative ints below 2**32 go as uint32, as llama.cpp reads counts and sizes."""
    if type(value) is int and 0 <= value < 2**32:
        return "add_uint32"
    return _ADDERS.get(type(value))


def save_gguf(
    path: str | Path, tables: dict[str, Table], metadata: dict | None = None, architecture: str = "llama"
) -> Path:
    """Write ``{tensor name: Table}`` and ``metadata`` (``{key: bool | int | float | str}``) to a
    GGUF at ``path``, readable by ``gguf.GGUFReader``, llama.cpp and ``Table.from_gguf``.

    The tables' bytes are written as they are (no re-quantization); a table's ggml shape is
    ``[dims, vocab]``. ``general.architecture`` is ``architecture``.
    """
    path = Path(path)
    writer = gguf.GGUFWriter(path, architecture)
    for key, value in (metadata or {}).items():
        adder = _adder(value)
        if adder is None:
            raise TypeError(
                f"metadata {key!r}: {type(value).__name__} values are not supported (bool, int, float, str)"
            )
        getattr(writer, adder)(key, value)
    for name, table in tables.items():
        writer.add_tensor(name, np.array(table.data), raw_dtype=gguf.GGMLQuantizationType[table.qtype])
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path
