"""GGUF tensor formats: block geometry and the portable (MLX ops) block decoders.

One module per family; each lists its ``FORMATS`` and this registry collects them by name.
The device-side twin of each decoder is ``kernels/format_<name>.h``, ``Format<ggml::NAME>``.
"""

from __future__ import annotations

from . import floats, iquants, kquants, legacy
from .base import FLOAT_KINDS, Format

FORMATS: dict[str, Format] = {f.name: f for family in (floats, legacy, kquants, iquants) for f in family.FORMATS}


def get_format(name: str) -> Format:
    try:
        return FORMATS[name]
    except KeyError:
        raise ValueError(f"unsupported format {name!r}; supported: {', '.join(FORMATS)}") from None


__all__ = ["FLOAT_KINDS", "FORMATS", "Format", "get_format"]
