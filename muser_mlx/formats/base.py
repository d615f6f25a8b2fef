"""The Format record: a GGUF tensor type's block geometry (from gguf-py) and its MLX-ops decoder."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import mlx.core as mx
import numpy as np
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType

# A float field's kind -> (its little-endian word, its exponent bits: all ones is NaN or Inf).
FLOAT_KINDS = {"f16": (mx.uint16, 0x7C00), "bf16": (mx.uint16, 0x7F80), "f32": (mx.uint32, 0x7F800000)}


@dataclass(frozen=True)
class Format:
    """One GGUF tensor type. ``name`` is ggml's (e.g. ``"Q4_K"``); the type number and the block
    geometry are gguf-py's (``GGMLQuantizationType``, ``GGML_QUANT_SIZES``), never restated.

    A row of ``dims`` values is ``dims / block_values`` blocks of ``block_bytes`` bytes each.
    ``decode`` turns ``uint8 [n, block_bytes]`` into ``float32 [n, block_values]`` with the same
    float32 arithmetic as gguf-py's ``dequantize_blocks`` (and so as ggml's C code). The
    device-side twin is ``kernels/format_<name>.h`` (:attr:`kernel_file`).
    """

    name: str
    decode: Callable[[mx.array], mx.array]  # uint8 [n, block_bytes] -> float32 [n, block_values]
    float_kind: str  # "f16", "bf16" or "f32": the type of the block's float fields ...
    float_offsets: tuple[int, ...]  # ... at these byte offsets (scales, or the value itself)
    # Nonzero: the block's one float is spread over the words at float_offsets, these bits of each
    # holding its next bits, lowest first (IQ1_M's d: the top nibbles of four uint16).
    float_spread: int = 0
    ggml_type: int = field(init=False)  # ggml's type number; also the kernels' FORMAT constant
    block_values: int = field(init=False)
    block_bytes: int = field(init=False)

    def __post_init__(self):
        qtype = GGMLQuantizationType[self.name]
        object.__setattr__(self, "ggml_type", qtype.value)
        block_values, block_bytes = GGML_QUANT_SIZES[qtype]
        object.__setattr__(self, "block_values", block_values)
        object.__setattr__(self, "block_bytes", block_bytes)

    def float_fields(self, words):
        """The bits of the block's float fields from its words at ``float_offsets`` (NumPy or MLX):
        ``[..., len(float_offsets)] -> [..., fields]``, the words themselves or, with
        ``float_spread``, the one float they spread over."""
        if not self.float_spread:
            return words
        shift, width = _spread(self.float_spread)
        bits = (words[..., 0:1] & self.float_spread) >> shift
        for k in range(1, len(self.float_offsets)):
            bits = bits | (((words[..., k : k + 1] & self.float_spread) >> shift) << (k * width))
        return bits

    def spread_float_fields(self, words: np.ndarray, fields: np.ndarray) -> np.ndarray:
        """The inverse of :meth:`float_fields` (NumPy): ``words`` with the float fields' bits
        replaced by ``fields``."""
        if not self.float_spread:
            return fields.astype(words.dtype)
        shift, width = _spread(self.float_spread)
        out = words & words.dtype.type(~self.float_spread & np.iinfo(words.dtype).max)
        for k in range(len(self.float_offsets)):
            part = (fields[..., 0].astype(words.dtype) >> (k * width)) & ((1 << width) - 1)
            out[..., k] |= (part << shift).astype(words.dtype)
        return out

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


def _spread(mask: int) -> tuple[int, int]:
    """A contiguous bit mask's (lowest bit, width)."""
    shift = (mask & -mask).bit_length() - 1
    return shift, (mask >> shift).bit_length()
