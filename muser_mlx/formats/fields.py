"""Naming a block's fields before any arithmetic: splits, little-endian words, floats, bit fields.

Every decoder in this package is written in these terms (gguf-py's ``np.hsplit`` habit).
"""

from __future__ import annotations

from itertools import accumulate

import mlx.core as mx
import numpy as np

# Runs shorter than this unpack field by field: on MLX's CPU a shift broadcast over runs of 8 bytes
# took nearly twice as long as the fields shifted apart and joined, over runs of 16 and 32 bytes about
# half as long (benchmarks/results/ops_primitives_cpu.md).
SHORT_RUN = 16


def split(blocks: mx.array, *widths: int) -> list[mx.array]:
    """Name a block's fields: uint8 [n, sum(widths)] -> one uint8 [n, width] per field, in order."""
    return mx.split(blocks, list(accumulate(widths))[:-1], axis=1)


def u16(lo: mx.array, hi: mx.array) -> mx.array:
    """Little-endian uint16 from two uint8 arrays of the same shape."""
    return lo.astype(mx.uint16) | (hi.astype(mx.uint16) << 8)


def f16(two_bytes: mx.array) -> mx.array:
    """uint8 [..., 2] holding a little-endian f16 -> float32 [...] (exact)."""
    bits = u16(two_bytes[..., 0], two_bytes[..., 1])
    return mx.view(bits, mx.float16).astype(mx.float32)


def i8(bytes_: mx.array) -> mx.array:
    """uint8 bytes read as two's-complement int8, as float32 (exact)."""
    return mx.view(bytes_, mx.int8).astype(mx.float32)


def bit_fields(packed: mx.array, run: int, bits: int) -> mx.array:
    """Unpack ``bits``-wide fields: uint8 [n, k * run] -> uint8 [n, k * (8 // bits) * run].

    Every ggml layout packs runs the same way: a run of ``run`` bytes holds 8 // bits runs of
    values, first each byte's bits 0..bits-1, then its next ``bits`` bits, and so on:
        bytes  b[0] .. b[run-1]  ->  values  b[0..run-1] & mask,  (b[0..run-1] >> bits) & mask, ...
    """
    n, runs = packed.shape[0], packed.shape[1] // run
    mask, grouped = (1 << bits) - 1, packed.reshape(n, runs, 1, run)
    if run < SHORT_RUN:  # each field apart, then joined (shifts broadcast over short runs are slow)
        fields = mx.concatenate([(grouped >> shift) & mask for shift in range(0, 8, bits)], axis=2)
    else:
        fields = (grouped >> mx.arange(0, 8, bits, dtype=mx.uint8).reshape(1, 1, 8 // bits, 1)) & mask
    return fields.reshape(n, runs * (8 // bits) * run)


def lookup(table: mx.array, indices: mx.array) -> mx.array:
    """``table[indices]`` for a 1-D ``table``: values of the same shape as ``indices``. Taken along
    the axis of a flat view: on MLX's CPU ``take`` took 12 times as long
    (benchmarks/results/ops_primitives_cpu.md)."""
    return mx.take_along_axis(table[None], indices.reshape(1, -1), axis=1).reshape(indices.shape)


_EVERY_BYTE = mx.array(np.array([0x0101010101010101, 0x8040201008040201], np.uint64))


def little_endian_bits(packed: mx.array) -> mx.array:
    """uint8 [n, m] -> uint8 [n, 8m] of 0 and 1: value j is bit j % 8 of byte j // 8, bit j of
    the little-endian integer. A byte times 0x0101010101010101 is itself in all 8 bytes of a
    uint64; & 0x8040201008040201 keeps bit k of byte k: two operations a byte where
    ``bit_fields(packed, 1, 1)`` shifts and masks each bit, 7 times as long on MLX's CPU
    (benchmarks/results/ops_primitives_cpu.md)."""
    spread = (packed.astype(mx.uint64) * _EVERY_BYTE[0]) & _EVERY_BYTE[1]
    return mx.minimum(mx.view(spread, mx.uint8), 1).reshape(packed.shape[0], 8 * packed.shape[1])
