"""The portable path: gather + decode in plain MLX ops, on any MLX device (the CPU on Linux)."""

from __future__ import annotations

import mlx.core as mx

from ..ids import check_dtype, clamp


def bind(table, dtype: mx.Dtype):
    """``ids [...] -> [..., dims]``: take the ids' rows of bytes, decode only those blocks."""
    fmt, dims, vocab, data = table.format, table.dims, table.vocab, table.data
    blocks_per_row = dims // fmt.block_values

    def gather(ids: mx.array) -> mx.array:
        check_dtype(ids.dtype)
        if not ids.size:  # no blocks to decode (a decoder's reshape of [0, ...] cannot infer -1)
            return mx.zeros((*ids.shape, dims), dtype)
        rows = mx.take(data, clamp(ids.reshape(-1), vocab), axis=0)  # uint8 [n, row_bytes]
        blocks = rows.reshape(ids.size * blocks_per_row, fmt.block_bytes)
        return fmt.decode(blocks).reshape(*ids.shape, dims).astype(dtype)

    return gather
