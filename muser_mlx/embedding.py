"""The lookup: ``embedding(table, ids)`` and ``Embedding``, a drop-in for ``mlx.nn.Embedding``."""

from __future__ import annotations

from pathlib import Path

import mlx.core as mx
import mlx.nn as nn

from . import backends
from .ids import device_ids, host_ids
from .linear import as_linear, tied_head
from .table import Table

OUTPUT_DTYPES = (mx.float32, mx.float16, mx.bfloat16)


def embedding(
    table: Table,
    ids,
    dtype: mx.Dtype = mx.float32,
    *,
    check_ids: bool = False,
    backend: str = "auto",
) -> mx.array:
    """Rows ``ids`` of ``table``, dequantized: a lazy ``ids.shape + (dims,)`` array in ``dtype``.

    Args:
        table (Table): the quantized table.
        ids: integer token ids of any shape: a Python int or (nested) list, a NumPy array, or an
            ``mx.array``. Float or bool ids raise ``TypeError``.
        dtype (mx.Dtype): ``float32`` (default; bit-identical to gguf-py's dequantization),
            ``float16`` or ``bfloat16``.
        check_ids (bool): host ids (ints, lists, NumPy) are always range-checked before the graph
            is built, raising ``IndexError`` that names the id, its position and the vocabulary.
            An ``mx.array`` is not evaluated unless ``check_ids=True``: by default its ids are
            clamped to ``min(unsigned(id), vocab - 1)``, as the kernels do.
        backend (str): ``"auto"`` (the Metal or CUDA kernel on a GPU default device, else
            ``"ops"``), ``"metal"``, ``"cuda"`` or ``"ops"`` (plain MLX ops, any device).
    """
    if dtype not in OUTPUT_DTYPES:
        raise ValueError(f"output dtype must be float32, float16 or bfloat16, got {dtype}")
    if isinstance(ids, mx.array):
        ids = device_ids(ids, table.vocab, check_ids)
    else:
        ids = host_ids(ids, table.vocab)
    out = backends.gather(table, ids.reshape(-1), dtype, backends.select(backend))
    return out.reshape(*ids.shape, table.dims)


class Embedding(nn.Module):
    """A token embedding whose table stays quantized: a drop-in for ``mlx.nn.Embedding``.

    ``weight`` is the table's bytes, ``uint8 [num_embeddings, row_bytes]``, and is frozen.

    Args:
        table (Table): the quantized table, e.g. ``Table.from_gguf(path)``.
        dtype (mx.Dtype): output dtype, ``float32`` (default), ``float16`` or ``bfloat16``.
        check_ids (bool): evaluate and range-check ``mx.array`` ids (see :func:`embedding`).
        backend (str): ``"auto"``, ``"metal"``, ``"cuda"`` or ``"ops"``.

    ``tied`` is True when loaded by ``from_gguf`` from a file whose LM head is this table (no
    ``output.weight``; logged once at INFO on the ``muser_mlx`` logger), False when the file has
    its own head, None when not loaded from a file.
    """

    tied: bool | None = None

    def __init__(self, table: Table, dtype: mx.Dtype = mx.float32, check_ids: bool = False, backend: str = "auto"):
        super().__init__()
        if dtype not in OUTPUT_DTYPES:
            raise ValueError(f"output dtype must be float32, float16 or bfloat16, got {dtype}")
        backends.select(backend)
        self.weight = table.data
        self._table = table
        self.dtype = dtype
        self.check_ids = check_ids
        self.backend = backend
        self.freeze()

    @classmethod
    def from_gguf(cls, path: str | Path, tensor: str = "token_embd.weight", dtype: mx.Dtype = mx.float32, **kwargs):
        """Load ``tensor`` of the GGUF at ``path``; raises ``GGUFError`` on a bad file or tensor."""
        module = cls(Table.from_gguf(path, tensor), dtype, **kwargs)
        module.tied = tied_head(path, tensor)
        return module

    @property
    def table(self) -> Table:
        t = self._table
        if self.weight is not t.data:  # e.g. after load_weights / update
            t = Table.from_bytes(self.weight, t.qtype, t.dims)
            self._table = t
        return t

    @property
    def num_embeddings(self) -> int:
        return self._table.vocab

    @property
    def dims(self) -> int:
        return self._table.dims

    @property
    def qtype(self) -> str:
        return self._table.qtype

    def __call__(self, x) -> mx.array:
        return embedding(self.table, x, self.dtype, check_ids=self.check_ids, backend=self.backend)

    def as_linear(self, x) -> mx.array:
        """The tied LM head: logits ``x @ W.T`` from the quantized table, ``[..., dims]`` ->
        ``[..., num_embeddings]`` in x's dtype (float32, float16 or bfloat16); see
        :func:`muser_mlx.as_linear`."""
        return as_linear(self.table, x, backend=self.backend)

    def _extra_repr(self) -> str:
        return f"{self.num_embeddings}, {self.dims}, qtype={self.qtype}, dtype={self.dtype}"
