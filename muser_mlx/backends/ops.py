"""The portable path: gather + decode in plain MLX ops, on any MLX device (the CPU on Linux)."""

from __future__ import annotations

import mlx.core as mx

from ..ids import clamp


def gather(table, ids: mx.array, dtype: mx.Dtype) -> mx.array:
    """``ids [n]`` -> ``[n, dims]``: take n rows of bytes, decode only those blocks."""
    fmt, n = table.format, ids.shape[0]
    rows = mx.take(table.data, clamp(ids, table.vocab), axis=0)  # uint8 [n, row_bytes]
    blocks = rows.reshape(n * (table.dims // fmt.block_values), fmt.block_bytes)
    return fmt.decode(blocks).reshape(n, table.dims).astype(dtype)
