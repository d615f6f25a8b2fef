"""The grid (codebook) formats, 256-value super-blocks: IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S,
IQ1_S, IQ1_M. Groups of 8 (IQ2, IQ1) or 4 (IQ3) values are one point of a grid (grids.py, gguf-py's
tables), with signs per value (IQ2, IQ3) or a delta of +-1/8 per group (IQ1), times a scale per
16 or 32 values. Each decoder computes gguf-py's float32 expression, in its order."""

from __future__ import annotations

import mlx.core as mx
import numpy as np

from .base import Format
from .fields import bit_fields, f16, split
from .grids import GRID_OF_FORMAT, KSIGNS

# Each byte's 8 sign bits as +-1 (bit k set: value k is -1), float32 [256, 8]; ksigns' rows [128, 8].
_SIGNS = np.where((np.arange(256)[:, None] >> np.arange(8)) & 1, -1.0, 1.0).astype(np.float32)
SIGN_VALUES = mx.array(_SIGNS)
KSIGN_VALUES = mx.array(_SIGNS[KSIGNS])
GRID_VALUES = {name: mx.array(grid.values.astype(np.float32)) for name, grid in GRID_OF_FORMAT.items()}
DELTA = 0.125  # IQ1_S, IQ1_M: gguf-py's IQ1_S.delta


def _u16(two_bytes: mx.array) -> mx.array:
    """uint8 [..., 2k] -> uint16 [..., k], little-endian."""
    return mx.view(mx.contiguous(two_bytes), mx.uint16)


def _u32(four_bytes: mx.array) -> mx.array:
    """uint8 [..., 4k] -> uint32 [..., k], little-endian."""
    return mx.view(mx.contiguous(four_bytes), mx.uint32)


def _shifted(words: mx.array, *shifts: int) -> mx.array:
    """words [...] -> [..., len(shifts)]: each word shifted right by each of ``shifts``."""
    return words[..., None] >> mx.array(shifts, dtype=words.dtype)


def _grid(qtype: str, entries: mx.array) -> mx.array:
    """Grid points: entries [...] -> float32 [..., 8 or 4]."""
    return mx.take(GRID_VALUES[qtype], entries.astype(mx.uint32), axis=0)


def _nibbles(scales: mx.array) -> mx.array:
    """uint8 [n, k] -> float32 [n, 2k]: low nibble of byte b at 2b, high at 2b + 1."""
    return bit_fields(scales, 1, 4).astype(mx.float32)


def _decode_iq2_xxs(blocks: mx.array) -> mx.array:
    """IQ2_XXS super-block, 66 bytes -> 256 values.

    bytes 0-1 d (f16), 2-65 per sub-block s of 32 values (8 bytes): 4 grid entries (one per group
    of 8 values), then a uint32 of 4 7-bit ksigns indices (bits 7l) and the scale ls (bits 28-31).
    value = d * (0.5 + ls) * 0.25 * grid * sign.
    """
    n = blocks.shape[0]
    d, qs = split(blocks, 2, 64)
    sub = qs.reshape(n, 8, 8)
    aux = _u32(sub[:, :, 4:]).reshape(n, 8)
    db = f16(d)[:, None] * (0.5 + (aux >> 28).astype(mx.float32)) * 0.25
    signs = mx.take(KSIGN_VALUES, (_shifted(aux, 0, 7, 14, 21) & 0x7F), axis=0)  # [n, 8, 4, 8]
    grid = _grid("IQ2_XXS", sub[:, :, :4])  # [n, 8, 4, 8]
    return (db[:, :, None, None] * grid * signs).reshape(n, 256)


def _decode_iq2_xs(blocks: mx.array) -> mx.array:
    """IQ2_XS super-block, 74 bytes -> 256 values.

    bytes 0-1 d (f16), 2-65 a uint16 per group of 8 values (bits 0-8 grid entry, 9-15 ksigns
    index), 66-73 a 4-bit scale per 16 values (low nibble first).
    value = d * (0.5 + scale) * 0.25 * grid * sign.
    """
    n = blocks.shape[0]
    d, qs, scales = split(blocks, 2, 64, 8)
    q = _u16(qs)  # [n, 32]
    db = f16(d)[:, None] * (0.5 + _nibbles(scales)) * 0.25  # [n, 16]
    signs = mx.take(KSIGN_VALUES, q >> 9, axis=0).reshape(n, 16, 2, 8)
    grid = _grid("IQ2_XS", q & 511).reshape(n, 16, 2, 8)
    return (db[:, :, None, None] * grid * signs).reshape(n, 256)


def _decode_iq2_s(blocks: mx.array) -> mx.array:
    """IQ2_S super-block, 82 bytes -> 256 values.

    bytes 0-1 d (f16), 2-33 bits 0-7 of each group's grid entry, 34-65 each group's sign bits,
    66-73 bits 8-9 of the entries (2 bits per group, low first), 74-81 a 4-bit scale per 16 values.
    value = d * (0.5 + scale) * 0.25 * grid * sign.
    """
    n = blocks.shape[0]
    d, qs, sign_bytes, qh, scales = split(blocks, 2, 32, 32, 8, 8)
    db = f16(d)[:, None] * (0.5 + _nibbles(scales)) * 0.25  # [n, 16]
    signs = mx.take(SIGN_VALUES, sign_bytes, axis=0).reshape(n, 16, 2, 8)
    entries = qs.astype(mx.uint16) | (bit_fields(qh, 1, 2).astype(mx.uint16) << 8)
    grid = _grid("IQ2_S", entries).reshape(n, 16, 2, 8)
    return (db[:, :, None, None] * grid * signs).reshape(n, 256)


def _decode_iq3_xxs(blocks: mx.array) -> mx.array:
    """IQ3_XXS super-block, 98 bytes -> 256 values.

    bytes 0-1 d (f16), 2-65 a grid entry per 4 values, 66-97 a uint32 per sub-block of 32 values:
    4 7-bit ksigns indices (bits 7l, one per group of 8) and the scale ls (bits 28-31).
    value = d * (0.5 + ls) * 0.5 * grid * sign.
    """
    n = blocks.shape[0]
    d, qs, aux_bytes = split(blocks, 2, 64, 32)
    aux = _u32(aux_bytes)  # [n, 8]
    db = f16(d)[:, None] * (0.5 + (aux >> 28).astype(mx.float32)) * 0.5
    signs = mx.take(KSIGN_VALUES, (_shifted(aux, 0, 7, 14, 21) & 0x7F), axis=0).reshape(n, 8, 32)
    grid = _grid("IQ3_XXS", qs).reshape(n, 8, 32)
    return (db[:, :, None] * grid * signs).reshape(n, 256)


def _decode_iq3_s(blocks: mx.array) -> mx.array:
    """IQ3_S super-block, 110 bytes -> 256 values.

    bytes 0-1 d (f16), 2-65 bits 0-7 of a grid entry per 4 values, 66-73 their bit 8 (one bit
    each, low first), 74-105 each group of 8 values' sign bits, 106-109 a 4-bit scale per 32 values.
    value = d * (1 + 2 * scale) * grid * sign.
    """
    n = blocks.shape[0]
    d, qs, qh, sign_bytes, scales = split(blocks, 2, 64, 8, 32, 4)
    db = f16(d)[:, None] * (1 + 2 * _nibbles(scales))  # [n, 8]
    signs = mx.take(SIGN_VALUES, sign_bytes, axis=0).reshape(n, 8, 32)
    entries = qs.astype(mx.uint16) | (bit_fields(qh, 1, 1).astype(mx.uint16) << 8)
    grid = _grid("IQ3_S", entries).reshape(n, 8, 32)
    return (db[:, :, None] * grid * signs).reshape(n, 256)


def _decode_iq1_s(blocks: mx.array) -> mx.array:
    """IQ1_S super-block, 50 bytes -> 256 values.

    bytes 0-1 d (f16), 2-33 bits 0-7 of each group of 8 values' grid entry, 34-49 a uint16 per
    sub-block of 32 values: bits 8-10 of its 4 groups' entries (bits 3l), the scale (bits 12-14),
    the sign of delta (bit 15). value = d * (2 * scale + 1) * (grid + delta), delta = +-1/8.
    """
    n = blocks.shape[0]
    d, qs, qh_bytes = split(blocks, 2, 32, 16)
    qh = _u16(qh_bytes)  # [n, 8]
    dl = f16(d)[:, None] * (2 * ((qh >> 12) & 7) + 1).astype(mx.float32)
    delta = mx.where((qh & 0x8000) == 0, DELTA, -DELTA)
    entries = qs.reshape(n, 8, 4).astype(mx.uint16) | ((_shifted(qh, 0, 3, 6, 9) & 7) << 8)
    grid = _grid("IQ1_S", entries)  # [n, 8, 4, 8]
    return (dl[:, :, None, None] * (grid + delta[:, :, None, None])).reshape(n, 256)


def _decode_iq1_m(blocks: mx.array) -> mx.array:
    """IQ1_M super-block, 56 bytes -> 256 values.

    bytes 0-31 bits 0-7 of each group of 8 values' grid entry, 32-47 a nibble per group (low
    first): bits 0-2 bits 8-10 of the entry, bit 3 the sign of delta; 48-55 four uint16: their
    bits 3t .. 3t+2 a 3-bit scale per 16 values, their top nibbles the bits of d (f16), low first.
    value = d * (2 * scale + 1) * (grid + delta), delta = +-1/8.
    """
    n = blocks.shape[0]
    qs, qh, scale_bytes = split(blocks, 32, 16, 8)
    w = _u16(scale_bytes)  # [n, 4]
    d_bits = (w[:, 0] >> 12) | ((w[:, 1] >> 8) & 0xF0) | ((w[:, 2] >> 4) & 0xF00) | (w[:, 3] & 0xF000)
    d = mx.view(d_bits, mx.float16).astype(mx.float32)
    scales = (_shifted(w, 0, 3, 6, 9) & 7).reshape(n, 16)
    dl = d[:, None] * (2 * scales + 1).astype(mx.float32)
    high = bit_fields(qh, 1, 4)  # [n, 32]
    delta = mx.where((high & 8) == 0, DELTA, -DELTA)
    grid = _grid("IQ1_M", qs.astype(mx.uint16) | ((high & 7).astype(mx.uint16) << 8))  # [n, 32, 8]
    values = dl.reshape(n, 16, 1, 1) * (grid.reshape(n, 16, 2, 8) + delta.reshape(n, 16, 2, 1))
    return values.reshape(n, 256)


FORMATS = (
    Format("IQ2_XXS", _decode_iq2_xxs, "f16", (0,)),
    Format("IQ2_XS", _decode_iq2_xs, "f16", (0,)),
    Format("IQ2_S", _decode_iq2_s, "f16", (0,)),
    Format("IQ3_XXS", _decode_iq3_xxs, "f16", (0,)),
    Format("IQ3_S", _decode_iq3_s, "f16", (0,)),
    Format("IQ1_S", _decode_iq1_s, "f16", (0,)),
    Format("IQ1_M", _decode_iq1_m, "f16", (48, 50, 52, 54), float_spread=0xF000),
)
