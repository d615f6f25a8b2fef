"""The Format record: a GGUF tensor type's block geometry (from gguf-py) and its MLX-ops decoder."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple

import mlx.core as mx
import numpy as np
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType
from gguf.quants import quantize as gguf_quantize


class FloatKind(NamedTuple):
    """How a block's float field is stored: as the little-endian unsigned ``word``, with these
    ``exponent`` bits; ``special``: an all-ones exponent is NaN or Inf (for E8M0, 0xFF is NaN in
    OCP MX and a block ggml's loader refuses; ggml's CPU decodes it as 2^127)."""

    word: mx.Dtype
    exponent: int
    special: bool


FLOAT_KINDS = {
    "f16": FloatKind(mx.uint16, 0x7C00, True),
    "bf16": FloatKind(mx.uint16, 0x7F80, True),
    "f32": FloatKind(mx.uint32, 0x7F800000, True),
    "e8m0": FloatKind(mx.uint8, 0xFF, True),  # MXFP4's scale: a power of two, all 8 bits exponent
    # NVFP4's scales: unsigned E4M3, bit 7 unused; ggml decodes every byte to a finite scale (0x7F,
    # E4M3's NaN, to 0)
    "ue4m3": FloatKind(mx.uint8, 0x78, False),
}

VALUE_DTYPES = {"f16": mx.float16, "bf16": mx.bfloat16, "f32": mx.float32}  # a float format's float_kind


@dataclass(frozen=True)
class Format:
    """One GGUF tensor type. ``name`` is ggml's (e.g. ``"Q4_K"``); the type number and the block
    geometry are gguf-py's (``GGMLQuantizationType``, ``GGML_QUANT_SIZES``), never restated.

    A row of ``dims`` values is ``dims / block_values`` blocks of ``block_bytes`` bytes each.
    ``decode`` turns ``uint8 [n, block_bytes]`` into ``float32 [n, block_values]`` with the same
    float32 arithmetic as gguf-py's ``dequantize_blocks`` (and so as ggml's C code). The
    device-side twin is ``kernels/format_<name>.h`` (:attr:`kernel_file`). ``quantizer``, where
    there is one, is what :func:`muser_mlx.quantize` runs: gguf-py's (:func:`gguf_py_quantizer`)
    or, for Q4_K, ggml's reference quantizer (q4_k_quantizer.py).
    """

    name: str
    decode: Callable[[mx.array], mx.array]  # uint8 [n, block_bytes] -> float32 [n, block_values]
    float_kind: str  # a FLOAT_KINDS key ("f16", "bf16", "f32", "e8m0", "ue4m3"): the block's float fields ...
    float_offsets: tuple[int, ...]  # ... at these byte offsets (scales, or the value itself)
    # float32 [rows, cols] (cols whole blocks) -> uint8 [rows, row_bytes]; None: no quantizer
    quantizer: Callable[[np.ndarray], np.ndarray] | None = None
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

    @property
    def values_dtype(self) -> mx.Dtype | None:
        """The MLX dtype a float format stores each value as (F32 float32, F16 float16, BF16
        bfloat16), so that its bytes viewed as it are the values; None for a quantized format."""
        return None if self.quantized else VALUE_DTYPES[self.float_kind]


def _spread(mask: int) -> tuple[int, int]:
    """A contiguous bit mask's (lowest bit, width)."""
    shift = (mask & -mask).bit_length() - 1
    return shift, (mask >> shift).bit_length()


def gguf_py_quantizer(name: str) -> Callable[[np.ndarray], np.ndarray]:
    """gguf-py's quantizer of type ``name`` (``gguf.quants.quantize``, after ggml's
    ``quantize_row_*_ref``): float32 [rows, cols] -> uint8 [rows, row_bytes]."""
    qtype = GGMLQuantizationType[name]
    return lambda rows: np.ascontiguousarray(gguf_quantize(rows, qtype)).view(np.uint8)
