"""The K-quants: 256-value super-blocks of 16 or 32-value sub-blocks with their own scales."""

from __future__ import annotations

import mlx.core as mx

from .base import Format
from .fields import bit_fields, f16, i8, split
from .q4_k_quantizer import quantize_q4_k


def _q4_k_scales_mins(scales: mx.array) -> tuple[mx.array, mx.array]:
    """uint8 [n, 12] -> 6-bit sub-block scales and mins, each float32 [n, 8].

    Byte k of the 12 (capitals: bits 4-5 of a value in 0-3, small: bits 0-3 of values 4-7):
       0-3  SSssssss   s: scale j (j=0..3),   SS: bits 4-5 of scale j+4
       4-7  MMmmmmmm   m: min j,              MM: bits 4-5 of min j+4
       8-11 mmmmssss   low 4 bits of min j+4 (high nibble) and scale j+4 (low nibble)
    """
    lo, mid, hi = scales[:, 0:4], scales[:, 4:8], scales[:, 8:12]
    sc = mx.concatenate([lo & 63, (hi & 15) | ((lo >> 6) << 4)], axis=1)
    mn = mx.concatenate([mid & 63, (hi >> 4) | ((mid >> 6) << 4)], axis=1)
    return sc.astype(mx.float32), mn.astype(mx.float32)


def _k_scaled_minus_min(d: mx.array, dmin: mx.array, scales: mx.array, q: mx.array) -> mx.array:
    """Q4_K and Q5_K: 8 sub-blocks of 32 values. d, dmin uint8 [n, 2] (f16), scales uint8 [n, 12],
    q uint8 [n, 256] levels -> float32 [n, 256], value = (d * scale[s]) * q - dmin * min[s]."""
    n = q.shape[0]
    sc, mn = _q4_k_scales_mins(scales)
    scale = (f16(d)[:, None] * sc)[:, :, None]
    offset = (f16(dmin)[:, None] * mn)[:, :, None]
    return (scale * q.reshape(n, 8, 32).astype(mx.float32) - offset).reshape(n, 256)


def _decode_q2_k(blocks: mx.array) -> mx.array:
    """Q2_K super-block, 84 bytes -> 256 values, 16 sub-blocks of 16.

    bytes 0-15 scales (sub-block t: scale = low nibble of scales[t], min = high nibble), 16-79 qs,
    80-81 d (f16), 82-83 dmin (f16). Level of value 128p + 32s + l (p = 0, 1; s = 0..3): bits
    2s, 2s+1 of qs[32p + l]. value = (d * scale[t]) * q - dmin * min[t], t = value index // 16.
    """
    n = blocks.shape[0]
    scales, qs, d, dmin = split(blocks, 16, 64, 2, 2)
    scale = (f16(d)[:, None] * (scales & 15).astype(mx.float32))[:, :, None]
    offset = (f16(dmin)[:, None] * (scales >> 4).astype(mx.float32))[:, :, None]
    q = bit_fields(qs, 32, 2).reshape(n, 16, 16).astype(mx.float32)
    return (scale * q - offset).reshape(n, 256)


def _decode_q3_k(blocks: mx.array) -> mx.array:
    """Q3_K super-block, 110 bytes -> 256 values, 16 sub-blocks of 16.

    bytes 0-31 hmask, 32-95 qs, 96-107 sixteen 6-bit scales, 108-109 d (f16).
    Level of value v = 128p + 32s + l (l = 0..31), 3 bits:
        bit 2     = bit v // 32 of hmask[l]
        bits 0-1  = bits 2s, 2s+1 of qs[32p + l]   (as Q2_K)
    Scale t, 6 bits: bits 0-3 = nibble t // 8 of byte t % 8, bits 4-5 = bits 2 (t // 4), +1 of
    byte 8 + t % 4 (of the 12).
    value = (d * (scale[t] - 32)) * (q - 4), t = v // 16.
    """
    n = blocks.shape[0]
    hmask, qs, scales, d = split(blocks, 32, 64, 12, 2)
    q = bit_fields(qs, 32, 2) | (bit_fields(hmask, 32, 1) << 2)  # uint8 [n, 256], 0..7
    level = (q.astype(mx.int8) - 4).astype(mx.float32).reshape(n, 16, 16)
    sc = bit_fields(scales[:, :8], 8, 4) | (bit_fields(scales[:, 8:], 4, 2) << 4)  # uint8 [n, 16], 0..63
    scale = f16(d)[:, None] * (sc.astype(mx.int8) - 32).astype(mx.float32)
    return (scale[:, :, None] * level).reshape(n, 256)


def _decode_q4_k(blocks: mx.array) -> mx.array:
    """Q4_K super-block, 144 bytes -> 256 values.

    bytes 0-1 d (f16), 2-3 dmin (f16), 4-15 packed 6-bit scales/mins, 16-143 qs:
    values 64p..64p+31 are the low nibbles of qs[32p..32p+31], 64p+32..64p+63 the high ones.
    value = (d * scale[s]) * q - dmin * min[s], s = value index // 32.
    """
    d, dmin, scales, qs = split(blocks, 2, 2, 12, 128)
    return _k_scaled_minus_min(d, dmin, scales, bit_fields(qs, 32, 4))


def _decode_q5_k(blocks: mx.array) -> mx.array:
    """Q5_K super-block, 176 bytes -> 256 values.

    bytes 0-1 d (f16), 2-3 dmin (f16), 4-15 packed 6-bit scales/mins (as Q4_K), 16-47 qh, 48-175 qs.
    Level of value v = 32s + l (sub-block s, l = 0..31): 5 bits,
        bit 4     = bit s of qh[l]
        bits 0-3  = nibble (s & 1) of qs[32 * (s // 2) + l]   (as Q4_K)
    value = (d * scale[s]) * q - dmin * min[s].
    """
    d, dmin, scales, qh, qs = split(blocks, 2, 2, 12, 32, 128)
    q = bit_fields(qs, 32, 4) | (bit_fields(qh, 32, 1) << 4)
    return _k_scaled_minus_min(d, dmin, scales, q)


def _decode_q6_k(blocks: mx.array) -> mx.array:
    """Q6_K super-block, 210 bytes -> 256 values; d comes last.

    bytes 0-127 ql, 128-191 qh, 192-207 sixteen int8 scales (one per 16 values), 208-209 d (f16).
    Level of value v = 128h + r (half h = 0, 1; r = 0..127): 6 bits,
        bits 0-3  = nibble (r // 64) of ql[64h + r % 64]
        bits 4-5  = bits 2 * (r // 32) .. +1 of qh[32h + r % 32]
    value = (d * scale[v // 16]) * (q - 32).
    """
    n = blocks.shape[0]
    ql, qh, scales, d = split(blocks, 128, 64, 16, 2)
    q = bit_fields(ql, 64, 4) | (bit_fields(qh, 32, 2) << 4)  # uint8 [n, 256], 0..63
    level = (q.astype(mx.int8) - 32).astype(mx.float32).reshape(n, 16, 16)
    scale = f16(d)[:, None] * i8(scales)  # [n, 16]
    return (scale[:, :, None] * level).reshape(n, 256)


FORMATS = (
    Format("Q2_K", _decode_q2_k, "f16", (80, 82)),
    Format("Q3_K", _decode_q3_k, "f16", (108,)),
    Format("Q4_K", _decode_q4_k, "f16", (0, 2), quantize_q4_k),
    Format("Q5_K", _decode_q5_k, "f16", (0, 2)),
    Format("Q6_K", _decode_q6_k, "f16", (208,)),
)
