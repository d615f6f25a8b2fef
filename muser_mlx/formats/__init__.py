"""GGUF tensor formats: block geometry and the portable (MLX ops) block decoders.

One module per family; each lists its ``FORMATS`` and this registry collects them by name.
The device-side twin of each decoder is ``kernels/format_<name>.h``, ``Format<ggml::NAME>``.
"""

from __future__ import annotations

from . import codebooks, floats, fp4, iquants, kquants, legacy, ternary
from .base import FLOAT_KINDS, FloatKind, Format

FAMILIES = (floats, legacy, kquants, codebooks, iquants, ternary, fp4)
FORMATS: dict[str, Format] = {f.name: f for family in FAMILIES for f in family.FORMATS}


def get_format(name: str) -> Format:
    try:
        return FORMATS[name]
    except KeyError:
        raise ValueError(f"unsupported format {name!r}; supported: {', '.join(FORMATS)}") from None


__all__ = ["FLOAT_KINDS", "FORMATS", "FloatKind", "Format", "get_format"]
