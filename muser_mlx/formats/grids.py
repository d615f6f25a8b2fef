"""The IQ formats' codebooks (grids) and sign table, from their one source: gguf-py's tables.

The MLX-ops decoders (iquants.py) take their lookup arrays from here, and the kernels' constant
arrays, ``kernels/<grid>.h``, are generated here:

    python -m muser_mlx.formats.write_grids      # writes kernels/iq2xxs_grid.h ... kernels/iq1s_grid.h

A grid is ``entries`` points of 8 values (IQ2, IQ1) or 4 (IQ3), small integers. The kernels'
words (little-endian uint32):
- IQ2_S and IQ3 grids: the values as bytes, 4 to a word, word ``w * e + h`` holding values
  4h .. 4h + 3 of entry e (w = 2 words an entry for IQ2_S, 1 for IQ3): ggml's own tables;
- ``iq2xxs_grid`` and ``iq2xs_grid`` (``selectors``; values 8, 25, 43): one word an entry, nibble v
  the index of value v among the grid's levels (0, 1, 2), a byte selector: the decoders sign a
  group by setting bit 2 of its minus values' nibbles and pick the 8 level bytes by two byte
  selects (kernels/format_iq_selectors.h, SignSelectors); ``<name>_levels`` the levels as bytes;
  ``ksigns_selectors`` (kernels/ksigns_selectors.h) those bits 2 for each ksigns index;
- ``iq1s_grid`` (values -1, 0, 1): one word an entry, byte b = (value b + 1) | (value b + 4 + 1) << 4,
  so that ``word & 0x0F0F0F0F`` holds values 0-3 plus 1 and ``(word >> 4) & 0x0F0F0F0F`` values
  4-7 (ggml's iq1s_grid_gpu).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from gguf import quants

WORDS_PER_LINE = 8


@dataclass(frozen=True)
class Grid:
    """``name`` is ggml's (``iq2xxs_grid``): the kernels' array, in ``kernels/<name>.h``; ``quant``
    is gguf-py's class that holds the grid; ``selectors``: its words are byte selectors of its
    levels (module docstring)."""

    name: str
    quant: type
    selectors: bool = False

    @property
    def values(self) -> np.ndarray:
        """int8 [entries, 8 or 4]: gguf-py's grid."""
        self.quant.init_grid()
        return self.quant.grid.reshape(self.quant.grid_shape).astype(np.int8)

    @property
    def largest(self) -> int:
        return int(self.values.max())

    @property
    def kernel_file(self) -> str:
        return f"{self.name}.h"

    @property
    def levels(self) -> np.ndarray:
        """uint8 [levels]: the grid's distinct values, ascending; a selector grid's nibble codes
        index them."""
        return np.unique(self.values).astype(np.uint8)

    def words(self) -> np.ndarray:
        """uint32 [words]: the kernels' layout of the grid (module docstring)."""
        values = self.values
        if self.selectors:  # nibble v: value v's index among the levels, bit 2 left for its sign
            codes = np.searchsorted(self.levels, values).astype(np.uint32)
            assert codes.max() < 4 and values.shape[1] == 8
            return (codes << (4 * np.arange(8, dtype=np.uint32))).sum(axis=1, dtype=np.uint32)
        if values.min() < 0:  # iq1s_grid: value + 1 in a nibble, values 4-7 in the high ones
            u = (values + 1).astype(np.uint8)
            return (u[:, :4] | (u[:, 4:] << 4)).view("<u4").reshape(-1)
        return values.astype(np.uint8).view("<u4").reshape(-1)

    def levels_line(self) -> str:
        """A selector grid's levels as one word's bytes, the least in byte 0."""
        word = int.from_bytes(self.levels.tobytes(), "little")
        return f"enum : uint32_t {{ {self.name}_levels = 0x{word:08x} }};  // the levels as bytes, the least first"

    def header(self) -> str:
        """The text of ``kernels/<name>.h``."""
        entries, per_entry = self.values.shape
        constants = [f"enum {{ {self.name}_largest = {self.largest} }};  // the largest value"]
        if self.selectors:
            constants.append(self.levels_line())
        about = f"{self.quant.__name__}'s {entries} grid points of {per_entry} values"
        return constant_header(self.name, self.words(), about, constants)


def shared_tag(name: str) -> int:
    """The tag of the generated array ``name``'s copy in a head kernel's shared memory (``<name>_tag``
    in its header; kernels/format_iq_grid.h: MUSER_GRID), so that no two copies share one array:
    1 + its place among the generated arrays; 0 is IQ3_XXS's signed points' (format_iq3_points.h),
    computed rather than copied."""
    return 1 + [*GRIDS, KSIGNS_SELECTORS].index(name)


def constant_header(name: str, words: np.ndarray, about: str, constants: list[str]) -> str:
    """A kernel header of one MUSER_CONSTANT array of ``words`` named ``name``, after ``constants``
    and its shared copy's tag."""
    lines = [
        f"    {', '.join(f'0x{w:08x}' for w in words[k : k + WORDS_PER_LINE])},"
        for k in range(0, words.size, WORDS_PER_LINE)
    ]
    return "\n".join(
        [
            f"// {name}: {about}, {words.size} words",
            "// (muser_mlx/formats/grids.py gives the layout). Generated from gguf-py's table by",
            "// `python -m muser_mlx.formats.write_grids`; tests/test_iquants.py checks it element by element.",
            "#pragma once",
            "",
            "namespace muser {",
            "",
            *constants,
            f"enum {{ {name}_tag = {shared_tag(name)} }};  // its shared copy's (format_iq_grid.h: MUSER_GRID)",
            f"MUSER_CONSTANT uint32_t {name}[{words.size}] = {{",
            *lines,
            "};",
            "",
            "}  // namespace muser",
            "",
        ]
    )


GRIDS = {
    g.name: g
    for g in (
        Grid("iq2xxs_grid", quants.IQ2_XXS, selectors=True),
        Grid("iq2xs_grid", quants.IQ2_XS, selectors=True),
        Grid("iq2s_grid", quants.IQ2_S),
        Grid("iq3xxs_grid", quants.IQ3_XXS),
        Grid("iq3s_grid", quants.IQ3_S),
        Grid("iq1s_grid", quants.IQ1_S),
    )
}
GRID_OF_FORMAT = {  # format -> the grid its decoders read
    "IQ2_XXS": GRIDS["iq2xxs_grid"],
    "IQ2_XS": GRIDS["iq2xs_grid"],
    "IQ2_S": GRIDS["iq2s_grid"],
    "IQ3_XXS": GRIDS["iq3xxs_grid"],
    "IQ3_S": GRIDS["iq3s_grid"],
    "IQ1_S": GRIDS["iq1s_grid"],
    "IQ1_M": GRIDS["iq1s_grid"],
}

# ksigns_iq2xs: the 8 signs of a group of 8 values from a 7-bit index; bit 7 is the index's
# parity (a group has an even number of minus signs). Bit k set: value k is negative.
KSIGNS = np.frombuffer(quants.IQ2_XXS.ksigns, dtype=np.uint8)
KSIGNS_SELECTORS = "ksigns_selectors"


def ksigns_selectors() -> np.ndarray:
    """uint32 [128]: each ksigns index's sign bit b at bit 2 of nibble b, which a selector grid's
    word for the group's point takes by an or (module docstring)."""
    bits = (KSIGNS[:, None].astype(np.uint32) >> np.arange(8, dtype=np.uint32)) & 1
    return (bits << (4 * np.arange(8, dtype=np.uint32) + 2)).sum(axis=1, dtype=np.uint32)


def ksigns_selectors_header() -> str:
    """The text of ``kernels/ksigns_selectors.h``."""
    return constant_header(
        KSIGNS_SELECTORS,
        ksigns_selectors(),
        "each ksigns index's sign bits as the selector grids' nibble bits 2",
        [],
    )


def arrays_of(qtype: str) -> tuple[str, ...]:
    """The generated arrays (``kernels/<name>.h``) the decoders of ``qtype`` read, in the order
    its kernel headers hold them: a selector grid's sign bits (ksigns_selectors) before the grid;
    none for a format without a grid."""
    grid = GRID_OF_FORMAT.get(qtype)
    if grid is None:
        return ()
    return (KSIGNS_SELECTORS, grid.name) if grid.selectors else (grid.name,)


def array_words(name: str) -> np.ndarray:
    """uint32: the words of the generated array ``name`` (a grid's, or ksigns_selectors)."""
    return ksigns_selectors() if name == KSIGNS_SELECTORS else GRIDS[name].words()


# The formats whose decoders read their grid's points under each of the 16 sign patterns of a word
# in the matrix units' head kernels (kernels/format_iq3_points.h: a word per point and pattern).
SIGNED_POINTS = ("IQ3_XXS",)
SIGN_PATTERNS = 16


def shared_bytes(qtype: str) -> int:
    """Bytes of shared memory the decoder of ``qtype`` fills for a threadgroup of the CUDA matrix
    units' head kernels: a copy of its grid, and the selector grids' sign table beside it
    (format_iq_grid.h, format_iq_selectors.h), or its signed points (format_iq3_points.h); 0 for
    a format without a grid. The tiled matrix multiply's threadgroups take it beside their buffers
    (backends/head.py: tile_mma_fits); tests/test_cuda_compile.py checks it against ptxas's count."""
    if qtype in SIGNED_POINTS:
        return 4 * SIGN_PATTERNS * GRID_OF_FORMAT[qtype].words().size
    return 4 * sum(array_words(name).size for name in arrays_of(qtype))
