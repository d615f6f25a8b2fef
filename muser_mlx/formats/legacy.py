"""ggml's original 32-value block formats: one f16 scale per block (Q4_0, Q8_0)."""

from __future__ import annotations

import mlx.core as mx

from .base import Format
from .fields import bit_fields, f16, i8, split


def _decode_q4_0(blocks: mx.array) -> mx.array:
    """Q4_0 block, 18 bytes -> 32 values.

    bytes 0-1 d (f16), 2-17 qs: value j < 16 is the low nibble of qs[j], value 16 + j the high one.
    value = d * (q - 8).
    """
    d, qs = split(blocks, 2, 16)
    level = bit_fields(qs, 16, 4).astype(mx.int8) - 8  # int8 [n, 32], -8..7
    return f16(d)[:, None] * level.astype(mx.float32)


def _decode_q8_0(blocks: mx.array) -> mx.array:
    """Q8_0 block, 34 bytes -> 32 values: bytes 0-1 d (f16), 2-33 qs (int8). value = q * d."""
    d, qs = split(blocks, 2, 32)
    return i8(qs) * f16(d)[:, None]


FORMATS = (
    Format("Q4_0", _decode_q4_0, "f16", (0,)),
    Format("Q8_0", _decode_q8_0, "f16", (0,)),
)
