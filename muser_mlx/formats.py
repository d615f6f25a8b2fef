"""GGUF tensor formats: block geometry and the portable (MLX ops) block decoders.

A format stores a row of ``dims`` values as ``dims / block_values`` blocks of ``block_bytes``
bytes each. Its decoder turns ``uint8 [n_blocks, block_bytes]`` into
``float32 [n_blocks, block_values]`` with the same float32 arithmetic as gguf-py's
``dequantize_blocks`` (and so as ggml's C code). The device-side twin of each decoder lives in
``kernels/formats.h`` under the same ggml type number.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import mlx.core as mx


@dataclass(frozen=True)
class Format:
    name: str  # ggml's name, e.g. "Q4_K"
    ggml_type: int  # ggml's type number; also the kernel's FORMAT template argument
    block_values: int
    block_bytes: int
    decode: Callable[[mx.array], mx.array]  # uint8 [n, block_bytes] -> float32 [n, block_values]

    def row_bytes(self, dims: int) -> int:
        return dims // self.block_values * self.block_bytes


def _u16(lo: mx.array, hi: mx.array) -> mx.array:
    """Little-endian uint16 from two uint8 arrays of the same shape."""
    return lo.astype(mx.uint16) | (hi.astype(mx.uint16) << 8)


def _f16(two_bytes: mx.array) -> mx.array:
    """uint8 [..., 2] holding a little-endian f16 -> float32 [...] (exact)."""
    bits = _u16(two_bytes[..., 0], two_bytes[..., 1])
    return mx.view(bits, mx.float16).astype(mx.float32)


def _decode_f16(blocks: mx.array) -> mx.array:
    return _f16(blocks)[:, None]


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


def _decode_q4_k(blocks: mx.array) -> mx.array:
    """Q4_K super-block, 144 bytes -> 256 values.

    bytes 0-1 d (f16), 2-3 dmin (f16), 4-15 packed 6-bit scales/mins, 16-143 qs:
    values 64p..64p+31 are the low nibbles of qs[32p..32p+31], 64p+32..64p+63 the high ones.
    value = (d * scale[s]) * q - dmin * min[s], s = value index // 32.
    """
    n = blocks.shape[0]
    d, dmin = _f16(blocks[:, 0:2]), _f16(blocks[:, 2:4])
    sc, mn = _q4_k_scales_mins(blocks[:, 4:16])
    qs = blocks[:, 16:144].reshape(n, 4, 1, 32)
    q = mx.concatenate([qs & 15, qs >> 4], axis=2).reshape(n, 8, 32).astype(mx.float32)
    scale = (d[:, None] * sc)[:, :, None]
    offset = (dmin[:, None] * mn)[:, :, None]
    return (scale * q - offset).reshape(n, 256)


FORMATS: dict[str, Format] = {
    f.name: f
    for f in (
        Format("F16", 1, 1, 2, _decode_f16),
        Format("Q4_K", 12, 256, 144, _decode_q4_k),
    )
}


def get_format(name: str) -> Format:
    try:
        return FORMATS[name]
    except KeyError:
        raise ValueError(f"unsupported format {name!r}; supported: {', '.join(FORMATS)}") from None
