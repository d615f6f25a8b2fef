"""The non-linear 4-bit formats: each nibble indexes ggml's ``kvalues_iq4nl`` (IQ4_NL, IQ4_XS).

The table is gguf-py's (``gguf.quants.IQ4_NL.kvalues``, ggml-common.h's), the one source of it;
kernels/format_value_tables.h holds the same values, checked against it by the tests.
"""

from __future__ import annotations

import mlx.core as mx
from gguf.quants import IQ4_NL

from .base import Format
from .fields import bit_fields, f16, lookup, split

KVALUES_IQ4NL = mx.array(IQ4_NL.kvalues, mx.float32)  # nibble -> level, -127 .. 113


def _decode_iq4_nl(blocks: mx.array) -> mx.array:
    """IQ4_NL block, 18 bytes -> 32 values: bytes 0-1 d (f16), 2-17 qs (value j < 16 the low
    nibble of qs[j], 16 + j the high one, as Q4_0). value = d * kvalues_iq4nl[q]."""
    d, qs = split(blocks, 2, 16)
    return f16(d)[:, None] * lookup(KVALUES_IQ4NL, bit_fields(qs, 16, 4))


def _decode_iq4_xs(blocks: mx.array) -> mx.array:
    """IQ4_XS super-block, 136 bytes -> 256 values, 8 sub-blocks of 32.

    bytes 0-1 d (f16), 2-3 scales_h (little-endian uint16), 4-7 scales_l, 8-135 qs.
    Sub-block s: 6-bit scale = nibble (s % 2) of scales_l[s // 2] | bits 2s, 2s+1 of scales_h << 4;
    its values are IQ4_NL's block over qs[16s .. 16s+15].
    value = (d * (scale - 32)) * kvalues_iq4nl[q].
    """
    n = blocks.shape[0]
    d, scales_h, scales_l, qs = split(blocks, 2, 2, 4, 128)
    scale = bit_fields(scales_l, 1, 4) | (bit_fields(scales_h, 1, 2) << 4)  # uint8 [n, 8], 0..63
    dl = f16(d)[:, None] * (scale.astype(mx.int8) - 32).astype(mx.float32)
    levels = lookup(KVALUES_IQ4NL, bit_fields(qs, 16, 4)).reshape(n, 8, 32)
    return (dl[:, :, None] * levels).reshape(n, 256)


FORMATS = (
    Format("IQ4_NL", _decode_iq4_nl, "f16", (0,)),
    Format("IQ4_XS", _decode_iq4_xs, "f16", (0,)),
)
