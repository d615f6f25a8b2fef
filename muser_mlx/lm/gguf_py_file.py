"""The header reader's ``GGUFFile`` interface (``open_gguf(path)``: ``metadata``, ``get``, ``array``,
``tensors``, ``read``, ``tied``) over gguf-py's ``GGUFReader``, for the loader until
``muser_mlx.gguf`` provides it."""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

import numpy as np

from ..errors import GGUFError
from ..gguf import field_value, open_gguf as read_header, tensor_nbytes


class TensorInfo(NamedTuple):
    name: str
    qtype: str
    ggml_type: int
    shape: tuple  # ggml order: ne0 (values per row) first
    offset: int
    nbytes: int
    rows: int
    row_bytes: int


class GGUFFile:
    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._reader = read_header(self.path)
        self.metadata = {k: v for k, v in self._reader.fields.items() if not k.startswith("GGUF.")}
        self.tensors = {}
        for t in self._reader.tensors:
            shape = tuple(int(n) for n in t.shape)
            nbytes = tensor_nbytes(t)
            rows = int(np.prod(shape[1:])) if len(shape) > 1 else 1
            self.tensors[t.name] = TensorInfo(t.name, t.tensor_type.name, int(t.tensor_type), shape, int(t.data_offset),
                                              nbytes, rows, nbytes // rows)
        self._data = {t.name: t.data for t in self._reader.tensors}
        self.architecture = self.get("general.architecture")
        self.tied = "output.weight" not in self.tensors if "token_embd.weight" in self.tensors else None

    def get(self, key: str, default=None):
        if key not in self.metadata:
            return default
        field = self.metadata[key]
        if field.types and field.types[0].name == "ARRAY":
            return field
        return field_value(self._reader, key)

    def array(self, key: str):
        field = self.metadata[key]
        if field.types[-1].name == "STRING":
            return [bytes(field.parts[i]).decode("utf-8") for i in field.data]
        return np.concatenate([field.parts[i] for i in field.data]) if field.data else np.zeros(0)

    def read(self, name: str) -> np.ndarray:
        if name not in self.tensors:
            raise GGUFError(f"{self.path}: no tensor {name!r}")
        info = self.tensors[name]
        data = np.ascontiguousarray(self._data[name]).view(np.uint8)
        return data.reshape(info.rows, info.row_bytes) if len(info.shape) == 2 else data.reshape(-1).copy()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def open_gguf(path: str | Path) -> GGUFFile:
    return GGUFFile(path)
