"""A GGUF file's 1-D tensors (norms, biases, rope factors) as float32 MLX arrays."""

from __future__ import annotations

import mlx.core as mx

from ..errors import GGUFError
from ..formats import FORMATS


def decoded(f, name: str) -> mx.array:
    """Tensor ``name`` of ``f``, float32 [n], by its format's decoder (``GGUFError`` for a type
    muser_mlx does not read)."""
    info = f.tensors[name]
    fmt = FORMATS.get(info.qtype)
    if fmt is None:
        raise GGUFError(f"{f.path}: tensor {name!r} has type {info.qtype}; supported: {', '.join(FORMATS)}")
    return fmt.decode(mx.array(f.read(name).reshape(-1)).reshape(-1, fmt.block_bytes)).reshape(-1)
