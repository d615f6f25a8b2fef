"""GGUF tensor formats: block geometry and the portable (MLX ops) block decoders.

A format stores a row of ``dims`` values as ``dims / block_values`` blocks of ``block_bytes``
bytes each. Its decoder turns ``uint8 [n_blocks, block_bytes]`` into
``float32 [n_blocks, block_values]`` with the same float32 arithmetic as gguf-py's
``dequantize_blocks`` (and so as ggml's C code). The device-side twin of each decoder is
``kernels/format_<name>.h`` (:attr:`Format.kernel_file`), ``Format<ggml type number>``.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import accumulate
from typing import Callable

import mlx.core as mx


# A float field's kind -> (its little-endian word, its exponent bits: all ones is NaN or Inf).
FLOAT_KINDS = {"f16": (mx.uint16, 0x7C00), "bf16": (mx.uint16, 0x7F80), "f32": (mx.uint32, 0x7F800000)}


@dataclass(frozen=True)
class Format:
    name: str  # ggml's name, e.g. "Q4_K"
    ggml_type: int  # ggml's type number; also the kernels' FORMAT constant
    block_values: int
    block_bytes: int
    decode: Callable[[mx.array], mx.array]  # uint8 [n, block_bytes] -> float32 [n, block_values]
    float_kind: str  # "f16", "bf16" or "f32": the type of the block's float fields ...
    float_offsets: tuple[int, ...]  # ... at these byte offsets (scales, or the value itself)

    @property
    def kernel_file(self) -> str:
        """The device-side decoder in ``kernels/``, e.g. ``format_q4_k.h``."""
        return f"format_{self.name.lower()}.h"

    def row_bytes(self, dims: int) -> int:
        return dims // self.block_values * self.block_bytes

    @property
    def quantized(self) -> bool:
        """Blocks of levels (small integers, kernels/formats.h: level_bytes) with a scale and
        offset per run; the float formats (F32, F16, BF16) store each value itself."""
        return self.block_values > 1


# ---------------------------------------------------------------- fields of a block

def _split(blocks: mx.array, *widths: int) -> list[mx.array]:
    """Name a block's fields: uint8 [n, sum(widths)] -> one uint8 [n, width] per field, in order."""
    assert sum(widths) == blocks.shape[1], (widths, blocks.shape)
    return mx.split(blocks, list(accumulate(widths))[:-1], axis=1)


def _u16(lo: mx.array, hi: mx.array) -> mx.array:
    """Little-endian uint16 from two uint8 arrays of the same shape."""
    return lo.astype(mx.uint16) | (hi.astype(mx.uint16) << 8)


def _f16(two_bytes: mx.array) -> mx.array:
    """uint8 [..., 2] holding a little-endian f16 -> float32 [...] (exact)."""
    bits = _u16(two_bytes[..., 0], two_bytes[..., 1])
    return mx.view(bits, mx.float16).astype(mx.float32)


def _bf16(two_bytes: mx.array) -> mx.array:
    """uint8 [..., 2] holding a little-endian bfloat16 -> float32 [...]: the 16 bits become the
    top half of the float32 (exact, NaN payloads included)."""
    bits = _u16(two_bytes[..., 0], two_bytes[..., 1]).astype(mx.uint32) << 16
    return mx.view(bits, mx.float32)


def _i8(bytes_: mx.array) -> mx.array:
    """uint8 bytes read as two's-complement int8, as float32 (exact)."""
    return mx.view(bytes_, mx.int8).astype(mx.float32)


def _bit_fields(packed: mx.array, run: int, bits: int) -> mx.array:
    """Unpack ``bits``-wide fields: uint8 [n, k * run] -> uint8 [n, k * (8 // bits) * run].

    Every ggml layout packs runs the same way: a run of ``run`` bytes holds 8 // bits runs of
    values, first each byte's bits 0..bits-1, then its next ``bits`` bits, and so on:
        bytes  b[0] .. b[run-1]  ->  values  b[0..run-1] & mask,  (b[0..run-1] >> bits) & mask, ...
    """
    n, runs = packed.shape[0], packed.shape[1] // run
    shifts = mx.arange(0, 8, bits, dtype=mx.uint8).reshape(1, 1, 8 // bits, 1)
    fields = (packed.reshape(n, runs, 1, run) >> shifts) & ((1 << bits) - 1)
    return fields.reshape(n, runs * (8 // bits) * run)


# ---------------------------------------------------------------- decoders

def _decode_f32(blocks: mx.array) -> mx.array:
    """uint8 [n, 4] -> float32 [n, 1], the same bits (every MLX platform is little-endian)."""
    return mx.view(blocks, mx.float32)


def _decode_f16(blocks: mx.array) -> mx.array:
    return _f16(blocks)[:, None]


def _decode_bf16(blocks: mx.array) -> mx.array:
    return _bf16(blocks)[:, None]


def _decode_q4_0(blocks: mx.array) -> mx.array:
    """Q4_0 block, 18 bytes -> 32 values.

    bytes 0-1 d (f16), 2-17 qs: value j < 16 is the low nibble of qs[j], value 16 + j the high one.
    value = d * (q - 8).
    """
    d, qs = _split(blocks, 2, 16)
    level = _bit_fields(qs, 16, 4).astype(mx.int8) - 8  # int8 [n, 32], -8..7
    return _f16(d)[:, None] * level.astype(mx.float32)


def _decode_q8_0(blocks: mx.array) -> mx.array:
    """Q8_0 block, 34 bytes -> 32 values: bytes 0-1 d (f16), 2-33 qs (int8). value = q * d."""
    d, qs = _split(blocks, 2, 32)
    return _i8(qs) * _f16(d)[:, None]


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
    scale = (_f16(d)[:, None] * sc)[:, :, None]
    offset = (_f16(dmin)[:, None] * mn)[:, :, None]
    return (scale * q.reshape(n, 8, 32).astype(mx.float32) - offset).reshape(n, 256)


def _decode_q4_k(blocks: mx.array) -> mx.array:
    """Q4_K super-block, 144 bytes -> 256 values.

    bytes 0-1 d (f16), 2-3 dmin (f16), 4-15 packed 6-bit scales/mins, 16-143 qs:
    values 64p..64p+31 are the low nibbles of qs[32p..32p+31], 64p+32..64p+63 the high ones.
    value = (d * scale[s]) * q - dmin * min[s], s = value index // 32.
    """
    d, dmin, scales, qs = _split(blocks, 2, 2, 12, 128)
    return _k_scaled_minus_min(d, dmin, scales, _bit_fields(qs, 32, 4))


def _decode_q5_k(blocks: mx.array) -> mx.array:
    """Q5_K super-block, 176 bytes -> 256 values.

    bytes 0-1 d (f16), 2-3 dmin (f16), 4-15 packed 6-bit scales/mins (as Q4_K), 16-47 qh, 48-175 qs.
    Level of value v = 32s + l (sub-block s, l = 0..31): 5 bits,
        bit 4     = bit s of qh[l]
        bits 0-3  = nibble (s & 1) of qs[32 * (s // 2) + l]   (as Q4_K)
    value = (d * scale[s]) * q - dmin * min[s].
    """
    d, dmin, scales, qh, qs = _split(blocks, 2, 2, 12, 32, 128)
    q = _bit_fields(qs, 32, 4) | (_bit_fields(qh, 32, 1) << 4)
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
    ql, qh, scales, d = _split(blocks, 128, 64, 16, 2)
    q = _bit_fields(ql, 64, 4) | (_bit_fields(qh, 32, 2) << 4)  # uint8 [n, 256], 0..63
    level = (q.astype(mx.int8) - 32).astype(mx.float32).reshape(n, 16, 16)
    scale = _f16(d)[:, None] * _i8(scales)  # [n, 16]
    return (scale[:, :, None] * level).reshape(n, 256)


FORMATS: dict[str, Format] = {
    f.name: f
    for f in (
        Format("F32", 0, 1, 4, _decode_f32, "f32", (0,)),
        Format("F16", 1, 1, 2, _decode_f16, "f16", (0,)),
        Format("BF16", 30, 1, 2, _decode_bf16, "bf16", (0,)),
        Format("Q4_0", 2, 32, 18, _decode_q4_0, "f16", (0,)),
        Format("Q8_0", 8, 32, 34, _decode_q8_0, "f16", (0,)),
        Format("Q4_K", 12, 256, 144, _decode_q4_k, "f16", (0, 2)),
        Format("Q5_K", 13, 256, 176, _decode_q5_k, "f16", (0, 2)),
        Format("Q6_K", 14, 256, 210, _decode_q6_k, "f16", (208,)),
    )
}


def get_format(name: str) -> Format:
    try:
        return FORMATS[name]
    except KeyError:
        raise ValueError(f"unsupported format {name!r}; supported: {', '.join(FORMATS)}") from None
