"""The grid (codebook) formats, 256-value super-blocks: IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S,
IQ1_S, IQ1_M. Each group of 8 values (IQ2, IQ1) or 4 (IQ3) is a point of a grid (grids.py: gguf-py's
tables) with a sign per value (IQ2, IQ3) or a delta of +-1/8 for the group (IQ1), times a scale per
16 or 32 values.

A decoder looks each group up once, with its signs or delta, in a table of signed points (built
from the grid on first use): the group's levels as int8, level = +-grid value (IQ2, IQ3) or
8 * grid value +- 1 (IQ1), and multiplies them by the scale. The lookup is a 1-D ``take_along_axis``
of one word per group: on MLX's CPU over 20 times faster than ``take`` of the same words or of float
rows (benchmarks/results/ops_gathers_cpu.md).
value = scale * level is gguf-py's float32 value: IQ2 and IQ3's products are exact (d's 11 bits
times at most 5 and 6), and IQ1's d * (2s + 1) * (grid + delta) is the same real number as
(d * (2s + 1) / 8) * (8 * grid +- 1), two exact factors, rounded once."""

from __future__ import annotations

from functools import cache

import mlx.core as mx
import numpy as np

from .base import Format
from .fields import bit_fields, f16, split
from .grids import GRID_OF_FORMAT, KSIGNS

# Each byte's 8 sign bits as +-1, bit k set: value k is -1 (int8 [256, 8]).
_SIGNS = np.where((np.arange(256)[:, None] >> np.arange(8)) & 1, -1, 1).astype(np.int8)
_KSIGNS = mx.array(KSIGNS)
# A table's patterns [P, values per point]: the group's signs, or for IQ1 the delta's sign.
_PATTERNS = {
    "IQ2_XXS": _SIGNS[KSIGNS],
    "IQ2_XS": _SIGNS[KSIGNS],
    "IQ2_S": _SIGNS,  # ksigns index / sign byte
    "IQ3_XXS": _SIGNS[:16, :4],
    "IQ3_S": _SIGNS[:16, :4],  # the 4 sign bits of a point's values
    "IQ1_S": _SIGNS[[0, 255]],
    "IQ1_M": _SIGNS[[0, 255]],  # delta +1/8, -1/8
}


@cache
def signed_points(qtype: str) -> mx.array:
    """uint64 (8-value points) or uint32 (4-value) [P * entries]: at key p << log2(entries) | e,
    point e of the format's grid with pattern p, its levels as int8."""
    points = GRID_OF_FORMAT[qtype].values.astype(np.int16)[None]  # [1, entries, k]
    patterns = _PATTERNS[qtype][:, None].astype(np.int16)  # [P, 1, k]
    levels = 8 * points + patterns if qtype.startswith("IQ1") else points * patterns
    return mx.array(np.ascontiguousarray(levels.astype(np.int8)).view(f"<u{levels.shape[-1]}").reshape(-1))


def _keys(qtype: str, entries: mx.array, patterns: mx.array) -> mx.array:
    """signed_points' keys of grid entries and their patterns (same shapes): uint16 where they fit."""
    entry_bits = len(GRID_OF_FORMAT[qtype].values).bit_length() - 1
    dtype = mx.uint16 if entry_bits + len(_PATTERNS[qtype]).bit_length() - 1 <= 16 else mx.uint32
    return (patterns.astype(dtype) << entry_bits) | entries.astype(dtype)


def _levels(qtype: str, keys: mx.array) -> mx.array:
    """keys [n, groups] -> float32 [n, groups * values per point]: the signed points' levels."""
    words = mx.take_along_axis(signed_points(qtype), keys.reshape(-1), axis=0)
    return mx.view(words, mx.int8).astype(mx.float32).reshape(keys.shape[0], keys.shape[1] * words.itemsize)


def _u16(two_bytes: mx.array) -> mx.array:
    """uint8 [..., 2k] -> uint16 [..., k], little-endian."""
    return mx.view(mx.contiguous(two_bytes), mx.uint16)


def _u32(four_bytes: mx.array) -> mx.array:
    """uint8 [..., 4k] -> uint32 [..., k], little-endian."""
    return mx.view(mx.contiguous(four_bytes), mx.uint32)


def _shifted(words: mx.array, *shifts: int) -> mx.array:
    """words [n, k] -> [n, k * len(shifts)]: each word shifted right by each of ``shifts``."""
    return (words[..., None] >> mx.array(shifts, dtype=words.dtype)).reshape(
        words.shape[0], words.shape[1] * len(shifts)
    )


def _scaled(scale: mx.array, levels: mx.array) -> mx.array:
    """scale [n, runs] * levels [n, 256], a scale per run of 256 / runs values."""
    n, runs = scale.shape
    return (scale[:, :, None] * levels.reshape(n, runs, 256 // runs)).reshape(n, 256)


def _iq2_scale(d: mx.array, scales: mx.array) -> mx.array:
    """IQ2: d (f16) * (0.5 + scale) * 0.25, a scale per 16 values from 4-bit ones (low nibble first)."""
    return f16(d)[:, None] * (0.5 + bit_fields(scales, 1, 4).astype(mx.float32)) * 0.25


def _decode_iq2_xxs(blocks: mx.array) -> mx.array:
    """IQ2_XXS super-block, 66 bytes -> 256 values.

    bytes 0-1 d (f16), 2-65 per sub-block of 32 values 8 bytes: its 4 groups' grid entries, then a
    uint32 of their 7-bit ksigns indices (bits 7l) and the scale ls (bits 28-31).
    value = d * (0.5 + ls) * 0.25 * (+-grid value).
    """
    n = blocks.shape[0]
    d, qs = split(blocks, 2, 64)
    sub = qs.reshape(n, 8, 8)
    aux = _u32(sub[:, :, 4:]).reshape(n, 8)
    db = f16(d)[:, None] * (0.5 + (aux >> 28).astype(mx.float32)) * 0.25
    levels = _levels("IQ2_XXS", _keys("IQ2_XXS", sub[:, :, :4].reshape(n, 32), _shifted(aux, 0, 7, 14, 21) & 0x7F))
    return _scaled(db, levels)


def _decode_iq2_xs(blocks: mx.array) -> mx.array:
    """IQ2_XS super-block, 74 bytes -> 256 values.

    bytes 0-1 d (f16), 2-65 a uint16 per group of 8 values (bits 0-8 grid entry, 9-15 ksigns
    index), 66-73 a 4-bit scale per 16 values. value = d * (0.5 + scale) * 0.25 * (+-grid value).
    """
    d, qs, scales = split(blocks, 2, 64, 8)
    q = _u16(qs)  # [n, 32]: entry | ksigns index << 9, signed_points' key
    return _scaled(_iq2_scale(d, scales), _levels("IQ2_XS", q))


def _decode_iq2_s(blocks: mx.array) -> mx.array:
    """IQ2_S super-block, 82 bytes -> 256 values.

    bytes 0-1 d (f16), 2-33 bits 0-7 of each group's grid entry, 34-65 each group's sign bits,
    66-73 bits 8-9 of the entries (2 bits per group, low first), 74-81 a 4-bit scale per 16 values.
    value = d * (0.5 + scale) * 0.25 * (+-grid value).
    """
    d, qs, signs, qh, scales = split(blocks, 2, 32, 32, 8, 8)
    entries = qs.astype(mx.uint16) | (bit_fields(qh, 1, 2).astype(mx.uint16) << 8)
    return _scaled(_iq2_scale(d, scales), _levels("IQ2_S", _keys("IQ2_S", entries, signs)))


def _decode_iq3_xxs(blocks: mx.array) -> mx.array:
    """IQ3_XXS super-block, 98 bytes -> 256 values.

    bytes 0-1 d (f16), 2-65 a grid entry per 4 values, 66-97 a uint32 per sub-block of 32 values:
    the 7-bit ksigns index of each group of 8 (bits 7l) and the scale ls (bits 28-31).
    value = d * (0.5 + ls) * 0.5 * (+-grid value).
    """
    n = blocks.shape[0]
    d, qs, aux_bytes = split(blocks, 2, 64, 32)
    aux = _u32(aux_bytes)  # [n, 8]
    db = f16(d)[:, None] * (0.5 + (aux >> 28).astype(mx.float32)) * 0.5
    signs = mx.take_along_axis(_KSIGNS, (_shifted(aux, 0, 7, 14, 21) & 0x7F).reshape(-1), axis=0)
    return _scaled(db, _levels("IQ3_XXS", _keys("IQ3_XXS", qs, bit_fields(signs.reshape(n, 32), 1, 4))))


def _decode_iq3_s(blocks: mx.array) -> mx.array:
    """IQ3_S super-block, 110 bytes -> 256 values.

    bytes 0-1 d (f16), 2-65 bits 0-7 of a grid entry per 4 values, 66-73 their bit 8 (one bit
    each, low first), 74-105 each group of 8 values' sign bits, 106-109 a 4-bit scale per 32 values.
    value = d * (1 + 2 * scale) * (+-grid value).
    """
    d, qs, qh, signs, scales = split(blocks, 2, 64, 8, 32, 4)
    db = f16(d)[:, None] * (1 + 2 * bit_fields(scales, 1, 4).astype(mx.float32))  # [n, 8]
    entries = qs.astype(mx.uint16) | (bit_fields(qh, 1, 1).astype(mx.uint16) << 8)
    return _scaled(db, _levels("IQ3_S", _keys("IQ3_S", entries, bit_fields(signs, 1, 4))))


def _decode_iq1_s(blocks: mx.array) -> mx.array:
    """IQ1_S super-block, 50 bytes -> 256 values.

    bytes 0-1 d (f16), 2-33 bits 0-7 of each group of 8 values' grid entry, 34-49 a uint16 per
    sub-block of 32 values: bits 8-10 of its 4 groups' entries (bits 3l), the scale (bits 12-14),
    the sign of delta (bit 15). value = d * (2 * scale + 1) * (grid value + delta), delta = +-1/8.
    """
    d, qs, qh_bytes = split(blocks, 2, 32, 16)
    qh = _u16(qh_bytes)  # [n, 8]
    scale = f16(d)[:, None] * (2 * ((qh >> 12) & 7) + 1).astype(mx.float32) * 0.125
    entries = qs.astype(mx.uint16) | ((_shifted(qh, 0, 3, 6, 9) & 7) << 8)
    minus = mx.repeat(qh >> 15, 4, axis=1)  # [n, 32]
    return _scaled(scale, _levels("IQ1_S", _keys("IQ1_S", entries, minus)))


def _decode_iq1_m(blocks: mx.array) -> mx.array:
    """IQ1_M super-block, 56 bytes -> 256 values.

    bytes 0-31 bits 0-7 of each group of 8 values' grid entry, 32-47 a nibble per group (low
    first): bits 0-2 bits 8-10 of the entry, bit 3 the sign of delta; 48-55 four uint16: their
    bits 3t .. 3t+2 a 3-bit scale per 16 values, their top nibbles the bits of d (f16), low first.
    value = d * (2 * scale + 1) * (grid value + delta), delta = +-1/8.
    """
    qs, qh, scale_bytes = split(blocks, 32, 16, 8)
    w = _u16(scale_bytes)  # [n, 4]
    d_bits = (w[:, 0] >> 12) | ((w[:, 1] >> 8) & 0xF0) | ((w[:, 2] >> 4) & 0xF00) | (w[:, 3] & 0xF000)
    d = mx.view(d_bits, mx.float16).astype(mx.float32)
    scale = d[:, None] * (2 * (_shifted(w, 0, 3, 6, 9) & 7) + 1).astype(mx.float32) * 0.125  # [n, 16]
    high = bit_fields(qh, 1, 4)  # [n, 32]
    entries = qs.astype(mx.uint16) | ((high & 7).astype(mx.uint16) << 8)
    return _scaled(scale, _levels("IQ1_M", _keys("IQ1_M", entries, high >> 3)))


FORMATS = (
    Format("IQ2_XXS", _decode_iq2_xxs, "f16", (0,)),
    Format("IQ2_XS", _decode_iq2_xs, "f16", (0,)),
    Format("IQ2_S", _decode_iq2_s, "f16", (0,)),
    Format("IQ3_XXS", _decode_iq3_xxs, "f16", (0,)),
    Format("IQ3_S", _decode_iq3_s, "f16", (0,)),
    Format("IQ1_S", _decode_iq1_s, "f16", (0,)),
    Format("IQ1_M", _decode_iq1_m, "f16", (48, 50, 52, 54), float_spread=0xF000),
)
