"""The tied LM head: logits ``x @ W.T`` straight from the quantized table ``W``.

Two paths, one result (float32 accumulation either way, up to summation order):
- streamed (GPU kernels, few rows of x: decode): the quantized table is read once per pass and
  dequantized on the fly; no float copy of any part of the table exists. On CUDA a quantized
  table takes ``kernels/bytedot.h`` (byte dot products of levels and x in integers) for one row
  of x and ``kernels/mma.h`` (warp matrix multiplies) from ``MMA_MIN_ROWS`` rows; every other
  case takes ``kernels/matvec.h``, a lane's float multiply-adds.
- tiled (long x on the GPU: prefill; every x on the ``ops`` backend): ``TILE_ROWS`` vocab rows at
  a time are dequantized with the backend's gather into x's dtype and multiplied with MLX's
  matmul, and the logits concatenated; at most one tile of floats is alive at a time.
"""

from __future__ import annotations

import logging
from pathlib import Path

import mlx.core as mx

from . import backends
from .gguf import open_gguf

log = logging.getLogger("muser_mlx")

# Rows of x up to which a GPU backend streams the table rather than tiling it: by matvec, or for a
# quantized table on a backend with matrix units (CUDA) by mma from MMA_MIN_ROWS (by x's dtype:
# float32 x costs three multiplies) to MMA_MAX_ROWS. Set from the H200 measurements of
# benchmarks/as_linear.py and benchmarks/mma_tuning.py (float32 x: matvec faster at 2 rows, mma
# at 8; 4 is between them, not measured).
MATVEC_MAX_ROWS = 16
MMA_MIN_ROWS = {mx.float16: 2, mx.bfloat16: 2, mx.float32: 4}
MMA_MAX_ROWS = 128
# Rows of x the byte dot products take: one row measured (H200, benchmarks/matvec_tuning.py
# --kernel bytedot, and benchmarks/as_linear.py); at 2-3 rows of float32 x (below MMA_MIN_ROWS)
# they would need 96-162 registers, not measured.
BYTEDOT_MAX_ROWS = 1
# Vocab rows per tile of the tiled path: TILE_ROWS * dims floats alive at a time (4096 * 6,656
# * 2 B = 52 MiB for float16 at Glimmer's width). benchmarks/as_linear.py measures it.
TILE_ROWS = 4096

X_DTYPES = (mx.float32, mx.float16, mx.bfloat16)


def as_linear(table, x, *, backend: str = "auto") -> mx.array:
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
    n = flat.shape[0]
    if n == 0:
        logits = mx.zeros((0, table.vocab), x.dtype)
    elif backend in backends.KERNEL_BACKENDS and n <= (MMA_MAX_ROWS if uses_mma(table, flat, backend) else MATVEC_MAX_ROWS):
        logits = streamed(table, flat, backend)
    else:
        logits = tiled(table, flat, backend)
    return logits.reshape(*x.shape[:-1], table.vocab)


def uses_mma(table, x: mx.array, backend: str) -> bool:
    """Whether ``x [n, dims]`` streams through the matrix units (kernels/mma.h)."""
    # levels are exact in 16 bits; the float formats' values are not
    return table.format.quantized and x.shape[0] >= MMA_MIN_ROWS[x.dtype] and backends.BACKENDS[backend].matrix_units()


def streamed(table, x: mx.array, backend: str) -> mx.array:
    """``x [n, dims]`` -> ``[n, vocab]`` by the streaming kernels of GPU ``backend``."""
    device = backends.BACKENDS[backend]
    if uses_mma(table, x, backend):
        return device.mma(table, x)
    if table.format.quantized and device.bytedot_kernel and x.shape[0] <= BYTEDOT_MAX_ROWS:
        return device.bytedot(table, x)
    return device.matvec(table, x)


def tiled(table, x: mx.array, backend: str, tile_rows: int | None = None) -> mx.array:
    """``x [n, dims]`` -> ``[n, vocab]``: dequantize ``tile_rows`` (default ``TILE_ROWS``) vocab
    rows at a time (the backend's gather of ``arange(start, stop)``), ``x @ tile.T``, concatenate.
    Each tile's ids depend on the previous tile's logits, so MLX evaluates the tiles one after
    the other and frees each before the next (left alone it interleaves them)."""
    tile_rows = tile_rows or TILE_ROWS
    gather = backends.bind(table, x.dtype, backend)
    parts: list[mx.array] = []
    for start in range(0, table.vocab, tile_rows):
        ids = mx.arange(start, min(start + tile_rows, table.vocab), dtype=mx.int32)
        if parts:
            ids = mx.depends(ids, parts[-1])
        tile = gather(ids)  # [rows, dims] in x's dtype
        parts.append(x @ tile.T)
    return parts[0] if len(parts) == 1 else mx.concatenate(parts, axis=1)


def tied_head(path: str | Path, tensor: str) -> bool:
    """Whether ``tensor`` of the GGUF at ``path`` is also the model's LM head: it is the token
    embedding and the file has no ``output.weight`` (llama.cpp then uses the embedding)."""
    if tensor != "token_embd.weight":
        return False
    tied = all(t.name != "output.weight" for t in open_gguf(path).tensors)
    if tied:
        log.info("%s has no output.weight: the LM head is tied to %s; logits: Embedding.as_linear(x)", path, tensor)
    return tied
