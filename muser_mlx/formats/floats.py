"""The float formats: each value stored as itself (F32, F16, BF16)."""

from __future__ import annotations

import mlx.core as mx

from .base import Format, gguf_py_quantizer


def _decode_f32(blocks: mx.array) -> mx.array:
    """uint8 [n, 4] -> float32 [n, 1], the same bits (every MLX platform is little-endian)."""
    return mx.view(blocks, mx.float32)


def _decode_f16(blocks: mx.array) -> mx.array:
    """uint8 [n, 2] -> float32 [n, 1]: the bytes viewed as float16, converted (exact)."""
    return mx.view(blocks, mx.float16).astype(mx.float32)


def _decode_bf16(blocks: mx.array) -> mx.array:
    """uint8 [n, 2] -> float32 [n, 1]: the 16 bits as the top half of the float32 (exact, NaN
    payloads included)."""
    return mx.view(mx.view(blocks, mx.uint16).astype(mx.uint32) << 16, mx.float32)


FORMATS = (
    Format("F32", _decode_f32, "f32", (0,), gguf_py_quantizer("F32")),
    Format("F16", _decode_f16, "f16", (0,), gguf_py_quantizer("F16")),
    Format("BF16", _decode_bf16, "bf16", (0,), gguf_py_quantizer("BF16")),
)
