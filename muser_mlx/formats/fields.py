"""Naming a block's fields before any arithmetic: splits, little-endian words, floats, bit fields.

Every decoder in this package is written in these terms (gguf-py's ``np.hsplit`` habit).
"""

from __future__ import annotations

from itertools import accumulate

import mlx.core as mx


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


def bf16(two_bytes: mx.array) -> mx.array:
    """uint8 [..., 2] holding a little-endian bfloat16 -> float32 [...]: the 16 bits become the
    top half of the float32 (exact, NaN payloads included)."""
    bits = u16(two_bytes[..., 0], two_bytes[..., 1]).astype(mx.uint32) << 16
    return mx.view(bits, mx.float32)


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
    shifts = mx.arange(0, 8, bits, dtype=mx.uint8).reshape(1, 1, 8 // bits, 1)
    fields = (packed.reshape(n, runs, 1, run) >> shifts) & ((1 << bits) - 1)
    return fields.reshape(n, runs * (8 // bits) * run)
