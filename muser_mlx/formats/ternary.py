"""The ternary formats: 256 values of -1, 0 or 1 times one f16 scale (TQ1_0, TQ2_0)."""

from __future__ import annotations

import mlx.core as mx

from .base import Format, gguf_py_quantizer
from .fields import bit_fields, f16, split


def _trits(packed: mx.array, count: int) -> mx.array:
    """Five (count) trits per byte: uint8 [n, m] -> uint8 [n, count * m], trit k of byte b
    (0, 1 or 2) at k * m + b: ((b * 3^k mod 256) * 3) >> 8."""
    powers = mx.array([3**k % 256 for k in range(count)], mx.uint16)[:, None]
    spread = (packed[:, None, :].astype(mx.uint16) * powers) & 255  # uint16 [n, count, m]
    return ((spread * 3) >> 8).astype(mx.uint8).reshape(packed.shape[0], count * packed.shape[1])


def _decode_tq1_0(blocks: mx.array) -> mx.array:
    """TQ1_0 block, 54 bytes -> 256 values: bytes 0-47 qs, 48-51 qh, 52-53 d (f16).

    Value v < 160 is trit v // 32 of qs[v % 32]; 160 <= v < 240 trit (v - 160) // 16 of
    qs[32 + (v - 160) % 16]; v >= 240 trit (v - 240) // 4 of qh[(v - 240) % 4].
    value = d * (trit - 1).
    """
    qs, qh, d = split(blocks, 48, 4, 2)
    trits = mx.concatenate([_trits(qs[:, :32], 5), _trits(qs[:, 32:], 5), _trits(qh, 4)], axis=1)
    return f16(d)[:, None] * (trits.astype(mx.int8) - 1).astype(mx.float32)


def _decode_tq2_0(blocks: mx.array) -> mx.array:
    """TQ2_0 block, 66 bytes -> 256 values: bytes 0-63 qs, 64-65 d (f16). Level of value
    128p + 32s + l (p = 0, 1; s = 0..3): bits 2s, 2s+1 of qs[32p + l]. value = d * (q - 1)."""
    qs, d = split(blocks, 64, 2)
    return f16(d)[:, None] * (bit_fields(qs, 32, 2).astype(mx.int8) - 1).astype(mx.float32)


FORMATS = (
    Format("TQ1_0", _decode_tq1_0, "f16", (52,), gguf_py_quantizer("TQ1_0")),
    Format("TQ2_0", _decode_tq2_0, "f16", (64,), gguf_py_quantizer("TQ2_0")),
)
