"""The measured constants of the GPU kernels' launches, and the layouts they imply.

Each constant names the decision in docs/performance.md that measured it against its
alternatives. Benchmarks and tests reach the tuning through :func:`fixed` alone: it sets any of
these constants (or :data:`KERNEL_SOURCES`, the folder the kernels are compiled from) for the
duration of a ``with`` block; the package's entry points take no layout arguments.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from importlib.resources import files
from pathlib import Path

import mlx.core as mx

# The kernel source files MLX compiles (kernels/); benchmarks/kernel_ab.py compiles another
# revision's through fixed(KERNEL_SOURCES=...).
KERNEL_SOURCES = Path(str(files("muser_mlx.kernels"))).absolute()

# The gather ("Gather grid"): threads along a row per threadgroup (a threadgroup is one row
# high), and values per thread: the largest of GATHER_VALUES that divides dims (8: two 16-byte
# float32 stores).
THREADGROUP = 256
GATHER_VALUES = (8, 4, 2, 1)
# Ids of at most this many go through mx.compile ("Compiled small batches"): a replay costs
# less host time than building the call; each new ids shape costs a trace.
COMPILED_IDS = 64

# Which LM head kernel runs ("Head kernel by row count"): streamed up to MATVEC_MAX_ROWS rows of
# x; a quantized table on matrix units from MMA_MIN_ROWS (by x's dtype: float32 x costs three
# multiplies) to MMA_MAX_ROWS; byte dot products up to BYTEDOT_MAX_ROWS; else the tiled matmul
# ("Tiled prefill"): as many vocab rows at a time as TILE_BYTES of floats in x's dtype hold
# (tile_rows), the floats alive at once; on CUDA as many as 1 / TILE_DEVICE_SHARE of the device's
# memory holds where that is more (0: never), so that a large head on a large GPU is one tile, no
# concatenation of the tiles' logits ("One tile on a large GPU": 4-16% faster at 1,024-4,096 rows).
MATVEC_MAX_ROWS = 16
MMA_MIN_ROWS = {mx.float16: 2, mx.bfloat16: 2, mx.float32: 4}
MMA_MAX_ROWS = 32
BYTEDOT_MAX_ROWS = 1
TILE_BYTES = 1 << 30
TILE_DEVICE_SHARE = 16
TILE_ALIGN = 256  # rows: cuBLAS runs an output of a width off a multiple of 8 at a fraction of the rate
# A float table whose values are x's dtype ("Float tables"): MLX's matmul on its bytes from
# FLOAT_MATMUL_MIN_ROWS rows of 16-bit x on CUDA (measured as fast as the matvec at one row, 4-9x
# faster at 8-16); float32 x and Metal keep the matvec up to MATVEC_MAX_ROWS.
FLOAT_MATMUL_MIN_ROWS = 1
# The CPU extension's matvec ("CPU"): at every row count off macOS, where MLX's wheels bring netlib's
# reference BLAS for its CPU matmul (measured 5-8x slower than the matvec at 17-256 rows, every
# table); up to MATVEC_MAX_ROWS on macOS, where that matmul is Accelerate's (not measured).
CPU_MATVEC_MAX_ROWS = MATVEC_MAX_ROWS if sys.platform == "darwin" else 1 << 62
# The extension's head of a quantized table on byte dot products, x as integers per run of 16
# values (kernels/bytedot_cpu.h, AVX2 builds), rather than from the dequantized values ("CPU").
CPU_BYTE_DOTS = True
# A table of fewer bytes than this (a small model's projection) takes the matvec's one launch
# rather than the byte dot products' two (x's run records, then the products): in a decode step
# the launches, not the bytes, are the cost ("Head kernel by row count").
BYTEDOT_MIN_BYTES = 1 << 24
# Rows of x up to which a GPU backend's head call goes through mx.compile, which replays it per
# x shape ("Compiled small batches", as COMPILED_IDS for the gather): a decode step calls every
# projection with one row, and building the call is host time spent once per projection per token.
COMPILED_ROWS = MATVEC_MAX_ROWS

# Threads per threadgroup of the streamed heads (matvec, bytedot, mma; "What bounds the heads"):
# by format, else HEAD_THREADGROUP. An SM holds whole threadgroups, so at R registers a thread it
# holds 65,536 / (R * threads) of them, rounded down: 64 measured 4-15% faster for Q2_K, Q3_K and
# TQ2_0 at one row of x and for Q2_K, Q3_K and Q6_K at 16, within 2% for Q4_K, Q6_K and TQ1_0 at
# one row and TQ2_0 at 16, 3% slower for IQ2_XXS at one row.
HEAD_THREADGROUP = 256
HEAD_THREADGROUP_BY_FORMAT = {"Q2_K": 64, "Q3_K": 64, "Q6_K": 64, "TQ2_0": 64}
# Passes of VROWS table rows per warp of the streamed heads (matvec, bytedot, mma): the grid holds
# vocab / (VROWS * passes) warps, each striding over the rest, so a threadgroup's fill of its
# shared grids (share_grid) and its first loads are paid once per passes * VROWS rows a warp. The
# grid formats' one-row heads took 1-8% less at 4-8 passes on an H100, most where the threadgroups
# made one whole wave of its SMs, which a launch cannot see ("Threadgroups of more rows"): so 1.
# Warps that claim their rows from a counter instead were slower but for TQ1_0 ("Rows claimed by
# the warps").
HEAD_STREAM_PASSES = 1

# The lane-wise matvec's layout ("Matvec layout"): rows of x per pass (ROWS, the first of
# MATVEC_ROWS that holds them, else the last), table rows per warp by ROWS (VROWS), and values per
# lane and step (VALUES, a whole run of 16 where dims allow).
MATVEC_ROWS = (1, 2, 4, 8)
MATVEC_VROWS = {1: 4, 2: 8, 4: 4, 8: 4}
MATVEC_VALUES = 16
# A table of fewer rows than MATVEC_MIN_WARPS * VROWS takes one row per warp ("Matvec layout"): a
# decode step's projections (640-2,048 rows in Gemma 3 270M) are bound by a warp's latency, not
# by the bytes, and four times the warps finish sooner.
MATVEC_MIN_WARPS = 2048
# The byte dot products' layout ("Byte dot products"): table rows per warp (by format, else
# BYTEDOT_VROWS; at most 32 / ROWS) and runs of 16 values per lane and step (by format, else
# BYTEDOT_RUNS: 1, 2 or 4, halved where dims are not whole units of them, multiples of 32 RUNS;
# TQ1_0's one run: "Launch bounds").
BYTEDOT_VROWS = 8
BYTEDOT_VROWS_BY_FORMAT = {"Q6_K": 2, "Q8_0": 4, "TQ1_0": 4, "IQ3_XXS": 4}
BYTEDOT_RUNS = 2
BYTEDOT_RUNS_BY_FORMAT = {"Q6_K": 1, "IQ3_XXS": 1, "IQ2_S": 1, "TQ1_0": 1, "Q3_K": 4}
# Threadgroups an SM is to hold at once, by format, for the byte dot products of 16-bit x on CUDA
# (__launch_bounds__: a thread's registers capped at 65,536 / (threads * that), spilling beyond;
# absent, and for float32 x's three planes, not timed with them: the compiler's choice): 4 measured
# faster for TQ1_0 (one run a lane: 64 registers against 56) and IQ2_XXS (64 against 72), level or
# slower for the other grid formats ("Launch bounds").
BYTEDOT_MIN_THREADGROUPS = {"TQ1_0": 4, "IQ2_XXS": 4}
# The same for the matrix units (kernels/mma.h), by layout (VTILES, XTILES) and format, for 16-bit
# x and for float32 x (MMA_FLOAT32_MIN_THREADGROUPS: three multiplies, more registers): 2
# threadgroups of 256 threads (128 registers) or 6 of 64 (168) where measured faster, at 8 rows of
# x for (4, 1) and 16 for (4, 2); Q4_K, Q5_K and IQ2_XXS were slower, spilling ("Launch bounds").
_MMA_BOUNDED = {"IQ3_XXS": 2, "NVFP4": 2, "TQ2_0": 6, "Q6_K": 6}
MMA_MIN_THREADGROUPS = {
    (4, 1): {
        **_MMA_BOUNDED,
        "IQ1_S": 2,
        "Q2_K": 6,
        "IQ1_M": 2,
        "IQ2_S": 2,
        "IQ2_XS": 2,
        "IQ3_S": 2,
        "IQ4_XS": 2,
        "TQ1_0": 2,
    },
    (4, 2): {**_MMA_BOUNDED, "IQ1_S": 2, "Q2_K": 6},
}
MMA_FLOAT32_MIN_THREADGROUPS = {(4, 1): {**_MMA_BOUNDED, "IQ1_S": 2}, (4, 2): {**_MMA_BOUNDED, "Q2_K": 6}}
# The tiled matrix multiply on matrix units (kernels/tile_mma.h, "Tiled matrix multiply"), for
# float16 and bfloat16 x from TILE_MMA_MIN_ROWS rows (beyond a pass of the matrix units; for the
# formats of MMA_KEPT_FORMATS beyond MMA_MAX_ROWS, their matrix units measured faster to there) to
# TILE_MMA_MAX_ROWS, for the formats of TILE_MMA_WIDE_FORMATS to TILE_MMA_WIDE_MAX_ROWS (measured
# faster there than the tiled matmul, which the others take beyond TILE_MMA_MAX_ROWS): rows of x
# per threadgroup, the first of TILE_MMA_XROWS that holds x's rows, else the last.
TILE_MMA_MIN_ROWS = 17
MMA_KEPT_FORMATS = frozenset({"Q5_0", "Q3_K", "TQ1_0"})
TILE_MMA_MAX_ROWS = 64
TILE_MMA_WIDE_MAX_ROWS = 128
TILE_MMA_WIDE_FORMATS = frozenset(
    "Q4_K Q4_0 Q4_1 Q2_K Q3_K NVFP4 IQ4_NL IQ4_XS IQ3_S IQ3_XXS IQ2_S IQ2_XS IQ2_XXS IQ1_S IQ1_M".split()
)
TILE_MMA_XROWS = (32, 64, 128)
# The warpgroup form of the tiled matrix multiply (kernels/tile_mma.h's WARPGROUP: wgmma, CUDA
# compute capability 9.0) for float16 and bfloat16 x from TILE_WGMMA_MIN_ROWS to
# TILE_WGMMA_MAX_ROWS rows (TILE_WGMMA_SHORT_MAX_ROWS for rows of fewer than TILE_WGMMA_LONG_DIMS
# values, TILE_WGMMA_MID_MAX_ROWS for the formats of TILE_WGMMA_MID_FORMATS), every format but
# those of TILE_WGMMA_TILED_FORMATS, where it was measured faster than the warps' form and than the
# tiled matmul (below 65 rows the warps' form is as fast or faster; beyond 512 rows, beyond 256 for
# BF16 and IQ3_S, and beyond 128 at Gemma 3 270M's 640 values a row, the tiled matmul; F32's
# tiled matmul at 128 rows); rows of x per threadgroup: the first of TILE_WGMMA_XROWS that holds
# x's rows, else the last; TILE_WGMMA_X_STAGES steps of x in shared memory ("Warpgroup matrix
# multiplies", "Two groups of x rows").
TILE_WGMMA_MIN_ROWS = 65
TILE_WGMMA_MAX_ROWS = 512
TILE_WGMMA_LONG_DIMS = 2048
TILE_WGMMA_SHORT_MAX_ROWS = 128
TILE_WGMMA_MID_MAX_ROWS = 256
TILE_WGMMA_MID_FORMATS = frozenset({"BF16", "IQ3_S"})
TILE_WGMMA_TILED_FORMATS = frozenset({"F32"})
# Tables of fewer rows than TILE_WGMMA_MIN_VOCAB take no warpgroup form: kernels/tile_mma.h to
# TILE_MMA_MAX_ROWS rows (its warps), the tiled matmul beyond (Gemma 3 270M's projections, 256 to
# 2,048 rows, took 1.7-3x the tiled matmul's time in it at 128 and 512 rows of x; "Warpgroup matrix
# multiplies", "Small tables"). Tables between 2,048 and 202,048 rows were not timed.
TILE_WGMMA_MIN_VOCAB = 4096
TILE_WGMMA_XROWS = (64, 128, 256)
TILE_WGMMA_X_STAGES = 3
# Steps of two tiles of TILE_K values where the warpgroups' threadgroup is 512 threads (more than
# 128 rows of x a threadgroup; backends/head.py: tile_mma_step_k) ("Two groups of x rows").
TILE_WGMMA_WIDE_STEPS = True
# The 512-thread form's step loop (more than 128 rows of x a threadgroup) unrolled by a chunk's
# steps for the formats of TILE_WGMMA_UNROLLED, with TILE_WGMMA_UNROLLED_X_STAGES steps of x (a
# power of two that divides a chunk's steps, so that every stage and buffer index is a constant)
# ("The 512-thread loop unrolled"). Not the others: Q3_K, Q5_1 and IQ3_S would take more than
# 128 registers a thread, which 512 threads cannot have, and Q8_0's four stages more shared memory
# than a threadgroup has.
TILE_WGMMA_UNROLLED = frozenset(
    "Q4_0 Q4_1 Q5_0 Q4_K Q5_K Q6_K Q2_K IQ4_NL IQ4_XS IQ3_XXS IQ2_S IQ2_XS IQ2_XXS IQ1_M IQ1_S TQ1_0 TQ2_0 "
    "MXFP4 NVFP4 F16 BF16".split()
)
TILE_WGMMA_UNROLLED_X_STAGES = 4
# The tiled matrix multiply's step loop unrolled by a chunk's steps (kernels/tile_mma.h's UNROLL),
# by rows of x per threadgroup, for the formats listed there: measured 3-16% faster for them at 64
# rows, up to 46% slower for others, and 1.2-4.1x slower at 128 rows ("The step loop unrolled");
# at 32 rows 1-20% faster for those (BF16: 4% slower at 6,656 dims, 12% faster at 640) and for
# IQ1_S, IQ2_S and IQ2_XS, up to 12% slower for Q2_K, Q4_0, IQ4_NL and TQ2_0 ("32 rows of x a
# threadgroup").
_UNROLLED_AT_64 = frozenset("Q8_0 Q5_0 Q4_1 Q5_1 Q4_K Q5_K Q6_K IQ4_XS IQ3_S TQ1_0 F16 BF16".split())
TILE_MMA_UNROLLED = {32: _UNROLLED_AT_64 | {"IQ1_S", "IQ2_S", "IQ2_XS"}, 64: _UNROLLED_AT_64}
# Steps of x (TILE_K values of XROWS rows) in shared memory, copied asynchronously AHEAD = XSTAGES - 1
# steps before the step that multiplies them ("Tiled matrix multiply").
TILE_MMA_X_STAGES = 4
# The matrix units' layout ("Matrix units"): tiles of 16 table rows per warp, and tiles of 8 rows
# of x per pass beyond 8 rows of x; beyond one such pass (16 rows), the formats of
# MMA_ONE_PASS_FORMATS take MMA_ONE_PASS_TILES for float16 and bfloat16 x, 32 rows of x in one
# pass over the table rather than two of 16 (measured faster for them, slower for the others).
MMA_VTILES = 4
MMA_XTILES = 2
MMA_ONE_PASS_TILES = (2, 4)
MMA_ONE_PASS_FORMATS = frozenset({"Q8_0", "Q5_0", "Q6_K", "Q4_1", "Q5_1", "Q3_K", "NVFP4", "IQ2_S"})
# Table rows as whole words (kernels/mma.h's WORD_ROWS: the prelude's muser_row, where a format's
# rows are whole words and its blocks are not) for 16-bit x in the layouts of MMA_WORD_ROWS_TILES
# but for the formats of MMA_BYTE_ROWS_FORMATS: measured faster there, slower in the other layouts
# and for those formats, not timed for float32 x ("Matrix units").
MMA_WORD_ROWS_TILES = frozenset({(4, 2)})
MMA_BYTE_ROWS_FORMATS = frozenset({"TQ2_0", "IQ2_XXS", "IQ3_XXS"})
# Runs a lane of the matrix units decodes at a time, by layout (VTILES, XTILES) and format, else 1:
# 2 (kernels/mma.h's PAIRS: lanes decode two runs' values and exchange halves, half the decodes,
# each of twice the values; blocks of at least two runs, 64 values) for 16-bit x where measured
# faster ("Run pairs"; IQ2_XS and IQ1_M were slower at 16 rows); for float32 x none, not timed.
MMA_RUN_PAIRS = {(4, 1): dict.fromkeys(("IQ2_S", "IQ2_XS", "IQ1_M"), 2), (4, 2): {"IQ2_S": 2}}
MMA_FLOAT32_RUN_PAIRS: dict[tuple[int, int], dict[str, int]] = {}
# Threads per threadgroup of the matrix units by layout (VTILES, XTILES) and format, for 16-bit x:
# 64 measured 4-10% faster than 256 at 16 rows of float16 x for these six, level or slower for the
# other formats ("Threadgroups of the matrix units"); float32 x, the 2-8-row layout and the formats
# not named take head_threadgroup's. Their launch bounds (MMA_MIN_THREADGROUPS) count threadgroups
# of these threads.
MMA_THREADGROUP = {(4, 2): dict.fromkeys(("IQ3_XXS", "IQ2_XXS", "NVFP4", "Q4_1", "Q4_K", "Q5_1"), 64)}


# The caches that hold what was decided from these constants, emptied by fixed() on entry and exit
# (their clear functions): the compiled head's traces (linear.differentiable_head) and the
# gather's compiled calls and launches (gather.gather_calls, and embedding.gather_for, which holds
# them for the Embedding modules). A trace replays the kernels chosen
# when it was made, so a constant set after it would otherwise not reach a call of up to
# COMPILED_ROWS rows of x or COMPILED_IDS ids.
_DECISIONS: list[Callable[[], None]] = []


def keeps_decisions(clear: Callable[[], None]) -> None:
    """Register ``clear``, which empties a cache of decisions made from these constants."""
    _DECISIONS.append(clear)


@contextmanager
def fixed(**constants) -> Iterator[None]:
    """Set the named constants of this module inside a ``with`` block, e.g.
    ``with fixed(MATVEC_ROWS=(16,), MATVEC_VROWS={16: 2}):`` times the matvec at 16 rows per pass;
    the caches of decisions made from them are emptied as the block starts and ends.
    Raises ``ValueError`` for a name that is not one of them."""
    names = {name for name in globals() if name.isupper()}
    unknown = sorted(set(constants) - names)
    if unknown:
        raise ValueError(f"tuning has no constant {', '.join(unknown)}; it has {', '.join(sorted(names))}")
    before = {name: globals()[name] for name in constants}
    globals().update(constants)
    for clear in _DECISIONS:
        clear()
    try:
        yield
    finally:
        globals().update(before)
        for clear in _DECISIONS:
            clear()


def tile_rows(dims: int, dtype: mx.Dtype, device_memory: int = 0) -> int:
    """Vocab rows of ``dims`` values per tile of the tiled head and of the gradient: TILE_BYTES
    of ``dtype``, or 1 / TILE_DEVICE_SHARE of ``device_memory`` (bytes; 0 where the backend takes
    no share) where that is more, rounded down to whole TILE_ALIGN rows (at least TILE_ALIGN)."""
    tile_bytes = max(TILE_BYTES, device_memory // TILE_DEVICE_SHARE if TILE_DEVICE_SHARE else 0)
    return max(1, tile_bytes // (dims * dtype.size) // TILE_ALIGN) * TILE_ALIGN


def head_threadgroup(qtype: str) -> int:
    """Threads per threadgroup of the streamed heads for a table of ``qtype``."""
    return HEAD_THREADGROUP_BY_FORMAT.get(qtype, HEAD_THREADGROUP)


def gather_values(dims: int) -> int:
    """Values per thread of the gather (and of the matvec where dims are not whole runs)."""
    return next(v for v in GATHER_VALUES if dims % v == 0)


def _holding(sizes: tuple[int, ...], n: int) -> int:
    """The first of ``sizes`` (ascending) that holds ``n`` rows, else the last."""
    return next(r for r in sizes if n <= r or r == sizes[-1])


def pass_rows(n: int) -> int:
    """Rows of x per pass over the table of the streamed kernels (ROWS) for ``n`` rows: the
    first of MATVEC_ROWS that holds them, else the last."""
    return _holding(MATVEC_ROWS, n)


def matvec_layout(n: int, dims: int, vocab: int) -> tuple[int, int, int]:
    """(ROWS, VROWS, VALUES) of kernels/matvec.h for ``n`` rows of x and a table of ``vocab`` rows."""
    rows = pass_rows(n)
    values = MATVEC_VALUES if dims % MATVEC_VALUES == 0 else gather_values(dims)
    vrows = MATVEC_VROWS[rows]
    return rows, vrows if vocab >= MATVEC_MIN_WARPS * vrows else 1, values


def bytedot_layout(n: int, dims: int, qtype: str) -> tuple[int, int, int]:
    """(ROWS, VROWS, RUNS) of kernels/bytedot.h for ``n`` rows of x of a ``qtype`` table."""
    rows = pass_rows(n)
    vrows = min(BYTEDOT_VROWS_BY_FORMAT.get(qtype, BYTEDOT_VROWS), 32 // rows)  # a lane per logit of a warp's 32
    runs = BYTEDOT_RUNS_BY_FORMAT.get(qtype, BYTEDOT_RUNS)
    while runs > 1 and dims % (32 * runs):  # halved until dims are whole units of RUNS runs a lane
        runs //= 2
    return rows, vrows, runs


def tile_mma_min_rows(qtype: str) -> int:
    """The fewest rows of x kernels/tile_mma.h takes for a ``qtype`` table."""
    return MMA_MAX_ROWS + 1 if qtype in MMA_KEPT_FORMATS else TILE_MMA_MIN_ROWS


def tile_mma_max_rows(qtype: str, dims: int, vocab: int, warpgroups: bool = False) -> int:
    """The most rows of x kernels/tile_mma.h takes for a ``qtype`` table of ``vocab`` rows of
    ``dims`` values (``warpgroups``: on a device with warpgroup multiplies, which take the formats
    not in TILE_WGMMA_TILED_FORMATS to TILE_WGMMA_MAX_ROWS, or to TILE_WGMMA_SHORT_MAX_ROWS for rows
    of fewer than TILE_WGMMA_LONG_DIMS values, or TILE_WGMMA_MID_FORMATS to TILE_WGMMA_MID_MAX_ROWS;
    a table of fewer than TILE_WGMMA_MIN_VOCAB rows to TILE_MMA_MAX_ROWS)."""
    warps = TILE_MMA_WIDE_MAX_ROWS if qtype in TILE_MMA_WIDE_FORMATS else TILE_MMA_MAX_ROWS
    if not warpgroups or qtype in TILE_WGMMA_TILED_FORMATS:
        return warps
    if vocab < TILE_WGMMA_MIN_VOCAB:
        return TILE_MMA_MAX_ROWS
    if dims < TILE_WGMMA_LONG_DIMS:
        return max(warps, TILE_WGMMA_SHORT_MAX_ROWS)
    return max(warps, TILE_WGMMA_MID_MAX_ROWS if qtype in TILE_WGMMA_MID_FORMATS else TILE_WGMMA_MAX_ROWS)


def tile_mma_warpgroup(n: int, warpgroups: bool) -> bool:
    """Whether kernels/tile_mma.h multiplies ``n`` rows of x by warpgroups (WARPGROUP), on a device
    that has them (``warpgroups``): from TILE_WGMMA_MIN_ROWS rows, however many (a call by name
    beyond TILE_WGMMA_MAX_ROWS)."""
    return warpgroups and n >= TILE_WGMMA_MIN_ROWS


def tile_mma_xrows(n: int, warpgroup: bool) -> int:
    """Rows of x per threadgroup of kernels/tile_mma.h (XROWS) for ``n`` rows, multiplied by
    warpgroups or by warps."""
    return _holding(TILE_WGMMA_XROWS if warpgroup else TILE_MMA_XROWS, n)


def float_matmul_min_rows(backend: str, dtype: mx.Dtype) -> int:
    """Rows of x of ``dtype`` from which a float table of that dtype takes MLX's matmul on the
    GPU ``backend``, where the streamed kernels would run before (backends/head.py: ``choose``)."""
    return FLOAT_MATMUL_MIN_ROWS if backend == "cuda" and dtype != mx.float32 else MATVEC_MAX_ROWS + 1


def tile_mma_unrolled(qtype: str, xrows: int, warpgroup: bool) -> bool:
    """Whether kernels/tile_mma.h unrolls its step loop for ``qtype`` at ``xrows`` rows of x (by
    warpgroups: only in the 512-thread form, beyond 128 rows of x)."""
    if warpgroup:
        return xrows > 128 and qtype in TILE_WGMMA_UNROLLED
    return qtype in TILE_MMA_UNROLLED.get(xrows, ())


def mma_layout(n: int, qtype: str, dtype: mx.Dtype) -> tuple[int, int]:
    """(VTILES, XTILES) of kernels/mma.h for ``n`` rows of x of ``dtype`` against a table of
    ``qtype`` (the one pass for float16 and bfloat16 x, where it was measured)."""
    if n > 8 * MMA_XTILES and dtype != mx.float32 and qtype in MMA_ONE_PASS_FORMATS:
        return MMA_ONE_PASS_TILES
    return MMA_VTILES, 1 if n <= 8 else MMA_XTILES


def bytedot_min_threadgroups(qtype: str, dtype: mx.Dtype) -> int:
    """Threadgroups an SM is to hold of kernels/bytedot.h for x of ``dtype`` and a ``qtype`` table
    (0: the compiler's choice of registers, as for float32 x)."""
    return 0 if dtype == mx.float32 else BYTEDOT_MIN_THREADGROUPS.get(qtype, 0)


def _mma_setting(sixteen: dict, float32: dict, qtype: str, tiles: tuple[int, int], dtype: mx.Dtype) -> int:
    """What a table of the matrix units' settings by layout and format gives a ``qtype`` table in
    layout ``tiles`` (VTILES, XTILES): ``float32``'s for float32 x, else ``sixteen``'s; 0 if it
    names neither."""
    return (float32 if dtype == mx.float32 else sixteen).get(tiles, {}).get(qtype, 0)


def mma_min_threadgroups(qtype: str, tiles: tuple[int, int], dtype: mx.Dtype) -> int:
    """Threadgroups an SM is to hold of kernels/mma.h in layout ``tiles`` (VTILES, XTILES) for x of
    ``dtype`` and a ``qtype`` table (0: the compiler's choice of registers)."""
    return _mma_setting(MMA_MIN_THREADGROUPS, MMA_FLOAT32_MIN_THREADGROUPS, qtype, tiles, dtype)


def mma_threadgroup(qtype: str, tiles: tuple[int, int], dtype: mx.Dtype) -> int:
    """Threads per threadgroup of kernels/mma.h in layout ``tiles`` (VTILES, XTILES) for x of
    ``dtype`` and a ``qtype`` table."""
    return _mma_setting(MMA_THREADGROUP, {}, qtype, tiles, dtype) or head_threadgroup(qtype)


def mma_pairs(qtype: str, tiles: tuple[int, int], dtype: mx.Dtype) -> int:
    """Runs a lane of kernels/mma.h in layout ``tiles`` (VTILES, XTILES) decodes at a time for x of
    ``dtype`` and a ``qtype`` table (PAIRS)."""
    return _mma_setting(MMA_RUN_PAIRS, MMA_FLOAT32_RUN_PAIRS, qtype, tiles, dtype) or 1


def mma_word_rows(qtype: str, tiles: tuple[int, int], dtype: mx.Dtype) -> bool:
    """Whether kernels/mma.h in layout ``tiles`` (VTILES, XTILES) for x of ``dtype`` reads a
    ``qtype`` table's rows as whole words where they are (WORD_ROWS)."""
    return dtype != mx.float32 and tiles in MMA_WORD_ROWS_TILES and qtype not in MMA_BYTE_ROWS_FORMATS
