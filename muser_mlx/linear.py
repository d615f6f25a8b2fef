"""The tied LM head: logits ``x @ W.T`` straight from the quantized table ``W``.

Which kernel computes them, for how many rows of x of which dtype, is
:func:`muser_mlx.backends.head.choose`'s decision: streamed kernels for few rows on a GPU (the
table read once per pass, no float copy of it), the tiled matmul otherwise.
"""

from __future__ import annotations

import logging

import mlx.core as mx

from . import backends
from .backends import head
from .table import Table

log = logging.getLogger("muser_mlx")

X_DTYPES = (mx.float32, mx.float16, mx.bfloat16)


def as_linear(table: Table, x: mx.array, *, backend: str = "auto") -> mx.array:
    """Logits ``x @ W.T`` of the quantized ``table`` ``W``: ``x [..., dims]`` -> ``[..., vocab]``.

    Lazy, and traceable by ``mx.compile``. The output dtype is x's dtype (as for
    ``mlx.nn.QuantizedEmbedding.as_linear``); the dot products accumulate in float32 from the
    exact dequantized values on the streamed path, and in MLX's matmul of x's dtype on the tiled
    path (so float16/bfloat16 x sees the weights rounded to its dtype there).

    Args:
        table (Table): the quantized table, ``vocab`` rows of width ``dims``.
        x: ``mx.array`` (or array-like) of float32, float16 or bfloat16, last axis ``dims``.
        backend (str): ``"auto"``, ``"metal"``, ``"cuda"``, ``"cpu"`` or ``"ops"`` (see ``embedding``).
    """
    backend = backends.select(backend, table)
    x = mx.array(x) if not isinstance(x, mx.array) else x
    if x.dtype not in X_DTYPES:
        raise TypeError(f"as_linear takes float32, float16 or bfloat16 x, got {x.dtype}")
    if x.ndim == 0 or x.shape[-1] != table.dims:
        raise ValueError(f"x must have shape [..., {table.dims}] for {table!r}, got {list(x.shape)}")
    flat = x.reshape(-1, table.dims)
    if flat.shape[0] == 0:
        logits = mx.zeros((0, table.vocab), x.dtype)
    else:
        logits = head.logits(table, flat, backend)
    return logits.reshape(*x.shape[:-1], table.vocab)


def tied_head(f, tensor: str) -> bool | None:
    """Whether ``tensor`` of the open GGUF ``f`` (a :class:`muser_mlx.gguf.GGUFFile`) is also
    the model's LM head: the token embedding of a file whose ``tied`` is True (a model without
    ``output.weight``: llama.cpp then uses the embedding); None for a file that holds only tables."""
    tied = f.tied if tensor == "token_embd.weight" or f.tied is None else False
    if tied:
        log.info("%s has no output.weight: the LM head is tied to %s; logits: Embedding.as_linear(x)", f.path, tensor)
    return tied
