"""The 4-bit float formats: E2M1 values (ggml's ``kvalues_mxfp4``: doubled, so small integers)
times a block scale, E8M0 per 32 values (MXFP4) or unsigned E4M3 per 16 (NVFP4).

The table is gguf-py's (``gguf.quants.MXFP4.kvalues``, ggml-common.h's), the one source of it;
kernels/format_value_tables.h holds the same values, checked against it by the tests. Both scales
come halved for the doubled values, as ggml's ``ggml_e8m0_to_fp32_half`` and
``ggml_ue4m3_to_fp32`` give them: every scale is finite and every product of a scale and a value
exact (or, for MXFP4 exponents from 253, past float32's range: infinite, in ggml too).
"""

from __future__ import annotations

import mlx.core as mx
from gguf.quants import MXFP4

from .base import Format, gguf_py_quantizer
from .fields import bit_fields, lookup, split

KVALUES_E2M1 = mx.array(MXFP4.kvalues, mx.float32)  # nibble -> 2 * E2M1 value, -12 .. 12


def e8m0_half(e: mx.array) -> mx.array:
    """E8M0 bytes -> float32 2^(e - 128): for e >= 2 the float32 of exponent e - 1, for e = 0, 1
    the subnormals 2^-128, 2^-127."""
    e = e.astype(mx.uint32)
    return mx.view(mx.where(e < 2, mx.array(0x00200000, mx.uint32) << e, (e - 1) << 23), mx.float32)


def ue4m3_half(x: mx.array) -> mx.array:
    """UE4M3 bytes (bit 7 unused) -> float32 half their value: exponent e = bits 3-6, mantissa
    m = bits 0-2, (8 + m) * 2^(e - 11), or m * 2^-10 for e = 0; 0x7F (E4M3's NaN) is 0."""
    x = x.astype(mx.uint32)
    e, m = (x >> 3) & 15, x & 7
    significand = mx.where(e > 0, m + 8, m).astype(mx.float32)
    power = mx.view((mx.maximum(e, 1) + 116) << 23, mx.float32)  # 2^(max(e, 1) - 11)
    return mx.where(x == 0x7F, mx.array(0.0, mx.float32), significand * power)


def _decode_mxfp4(blocks: mx.array) -> mx.array:
    """MXFP4 block, 17 bytes -> 32 values: byte 0 e (E8M0), 1-16 qs (value j < 16 the low nibble
    of qs[j], 16 + j the high one). value = 2^(e - 128) * kvalues_mxfp4[q]."""
    e, qs = split(blocks, 1, 16)
    return e8m0_half(e) * lookup(KVALUES_E2M1, bit_fields(qs, 16, 4))


def _decode_nvfp4(blocks: mx.array) -> mx.array:
    """NVFP4 block, 36 bytes -> 64 values, 4 sub-blocks of 16: bytes 0-3 d (UE4M3, one per
    sub-block), 4-35 qs; sub-block s reads qs[8s .. 8s+7], value 16s + l (l < 8) the low nibble of
    qs[8s + l], 16s + 8 + l the high one. value = ue4m3_half(d[s]) * kvalues_mxfp4[q]."""
    n = blocks.shape[0]
    d, qs = split(blocks, 4, 32)
    levels = lookup(KVALUES_E2M1, bit_fields(qs, 8, 4)).reshape(n, 4, 16)
    return (ue4m3_half(d)[:, :, None] * levels).reshape(n, 64)


FORMATS = (
    Format("MXFP4", _decode_mxfp4, "e8m0", (0,), gguf_py_quantizer("MXFP4")),
    Format("NVFP4", _decode_nvfp4, "ue4m3", (0, 1, 2, 3)),
)
