"""ggml's original 32-value block formats: an f16 scale per block, for Q4_1 and Q5_1 an f16 min.

Their levels share one layout: value j < 16 is the low nibble of qs[j], value 16 + j the high
one (fields.bit_fields(qs, 16, 4)); Q5_0 and Q5_1 add bit 4 of value j's level as bit j of the
little-endian 32-bit qh.
"""

from __future__ import annotations

import mlx.core as mx

from .base import Format, gguf_py_quantizer
from .fields import bit_fields, f16, i8, little_endian_bits, split


def _nibbles(qs: mx.array) -> mx.array:
    """qs uint8 [n, 16] -> the 32 values' low four bits, uint8 [n, 32]."""
    return bit_fields(qs, 16, 4)


def _five_bits(qh: mx.array, qs: mx.array) -> mx.array:
    """qh uint8 [n, 4], qs uint8 [n, 16] -> 5-bit levels uint8 [n, 32]: bit j of qh (byte j // 8,
    bit j % 8) above the nibble."""
    return _nibbles(qs) | (little_endian_bits(qh) * 16)


def _decode_q4_0(blocks: mx.array) -> mx.array:
    """Q4_0 block, 18 bytes -> 32 values: bytes 0-1 d (f16), 2-17 qs. value = d * (q - 8)."""
    d, qs = split(blocks, 2, 16)
    level = _nibbles(qs).astype(mx.int8) - 8  # int8 [n, 32], -8..7
    return f16(d)[:, None] * level.astype(mx.float32)


def _decode_q4_1(blocks: mx.array) -> mx.array:
    """Q4_1 block, 20 bytes -> 32 values: bytes 0-1 d (f16), 2-3 m (f16), 4-19 qs. value = d * q + m."""
    d, m, qs = split(blocks, 2, 2, 16)
    return f16(d)[:, None] * _nibbles(qs).astype(mx.float32) + f16(m)[:, None]


def _decode_q5_0(blocks: mx.array) -> mx.array:
    """Q5_0 block, 22 bytes -> 32 values: bytes 0-1 d (f16), 2-5 qh, 6-21 qs. value = d * (q - 16)."""
    d, qh, qs = split(blocks, 2, 4, 16)
    level = _five_bits(qh, qs).astype(mx.int8) - 16  # int8 [n, 32], -16..15
    return f16(d)[:, None] * level.astype(mx.float32)


def _decode_q5_1(blocks: mx.array) -> mx.array:
    """Q5_1 block, 24 bytes -> 32 values: bytes 0-1 d (f16), 2-3 m (f16), 4-7 qh, 8-23 qs.
    value = d * q + m."""
    d, m, qh, qs = split(blocks, 2, 2, 4, 16)
    return f16(d)[:, None] * _five_bits(qh, qs).astype(mx.float32) + f16(m)[:, None]


def _decode_q8_0(blocks: mx.array) -> mx.array:
    """Q8_0 block, 34 bytes -> 32 values: bytes 0-1 d (f16), 2-33 qs (int8). value = q * d."""
    d, qs = split(blocks, 2, 32)
    return i8(qs) * f16(d)[:, None]


FORMATS = (
    Format("Q4_0", _decode_q4_0, "f16", (0,), gguf_py_quantizer("Q4_0")),
    Format("Q4_1", _decode_q4_1, "f16", (0, 2), gguf_py_quantizer("Q4_1")),
    Format("Q5_0", _decode_q5_0, "f16", (0,), gguf_py_quantizer("Q5_0")),
    Format("Q5_1", _decode_q5_1, "f16", (0, 2), gguf_py_quantizer("Q5_1")),
    Format("Q8_0", _decode_q8_0, "f16", (0,), gguf_py_quantizer("Q8_0")),
)
