"""The LM head's kernels, logits ``x @ W.T`` from the quantized table ``W``, and the one function
that chooses among them for a row count and dtype (:func:`choose`).

- streamed (GPU kernels, few rows of x: decode): the table is read once per pass and dequantized
  on the fly; no float copy of any part of it exists. ``matvec`` (kernels/matvec.h): a lane's
  float multiply-adds, any format; ``bytedot`` (kernels/bytedot.h, CUDA, quantized tables): byte
  dot products of levels and x in integers; ``mma`` (kernels/mma.h, CUDA compute capability 8+,
  quantized tables): warp matrix multiplies.
- ``tile_mma`` (GPU kernel, kernels/tile_mma.h, CUDA compute capability 8+, float16 and bfloat16
  x of many rows: prefill): a tiled matrix multiply on the matrix units, the table dequantized a
  tile at a time into shared memory (the gather's values in x's dtype) and read once per
  threadgroup of x rows; no float copy of the table in device memory. On compute capability 9.0
  its multiplies are warpgroups' (wgmma) from tuning.TILE_WGMMA_MIN_ROWS rows.
- ``cpu_matvec`` (the ``cpu`` backend; beyond few rows of x only where MLX's CPU matmul is not
  Accelerate's, ``tuning.CPU_MATVEC_MAX_ROWS``): kernels/matvec.h in the CPU extension.
- ``tiled`` (long x on the GPU or macOS's CPU: prefill; every x on the ``ops`` backend): vocab rows
  are dequantized by the backend's gather into x's dtype, ``tuning.TILE_BYTES`` of them at a
  time (on CUDA up to a share of the device's memory, ``tuning.TILE_DEVICE_SHARE``), and
  multiplied with MLX's matmul; at most one tile of floats is alive at a time.
- ``float_matmul`` (a float table whose values are x's dtype: where ``tiled`` would run, and on
  CUDA for 16-bit x at any row count): MLX's matmul on the table's bytes viewed as its values; no
  copy at all.

Every kernel takes ``x [..., dims]`` (at least one row) and gives ``[..., vocab]`` in x's dtype,
accumulating in float32; the layouts are tuning.py's. The streamed kernels read x's rows
whatever its leading shape: a decode step's ``[1, 1, dims]`` needs no reshape, in the graph or
in the compiled call. The table's bytes are the GPU kernels' data already
(``DeviceBackend.kernel_data``: ``linear.differentiable_head`` prepares them before its
``mx.custom_function``, inside which the same buffers come as new Python arrays).
"""

from __future__ import annotations

import functools
import re
from typing import TYPE_CHECKING, NamedTuple

import mlx.core as mx
import numpy as np

from ..formats.grids import shared_bytes as grid_shared_bytes
from ..memory import device_memory
from . import BACKENDS, KERNEL_BACKENDS, bind, tuning
from .gather import table_words
from .source import Launch

if TYPE_CHECKING:
    from ..table import Table
    from .device import DeviceBackend

MAX_THREADS = 1 << 30  # the streaming kernels' 1-D grid: grid-stride beyond this (MLX's grid is a 32-bit int)
WARP = 32  # lanes of a Metal simdgroup / CUDA warp (kernels/matvec.h: warp_lanes)
MMA_ROWS, MMA_COLS = 16, 8  # a warp multiply's table rows and x rows (kernels/mma.h: mma_rows, mma_cols)
FLOAT32_PARTS = 3  # bfloat16 terms of float32 x on the matrix units (kernels/mma.h: PARTS)
RUN = 16  # values of x per run record (kernels/xruns.h)
TILE_ROWS, TILE_K, TILE_THREADS = 128, 32, 256  # kernels/tile_mma.h: tile_rows, tile_k, tile_threads
TILE_MIN_SHARED = 48 << 10  # bytes
TILE_MMA_DTYPES = (mx.float16, mx.bfloat16)  # x of kernels/tile_mma.h: its multiplies' 16-bit types
WGMMA_ALIGN = 512  # bytes: kernels/tile_mma.h's B_ALIGN, the alignment of wgmma's 64-byte swizzle
WGMMA_GROUP_XROWS = 128  # x rows a warpgroup multiplies at most: beyond, two groups of x rows (tile_mma_threads)


def choose(table: Table, rows: int, dtype: mx.Dtype, backend: str) -> str:
    """The head kernel for ``rows`` rows of x of ``dtype`` on ``backend`` (docs/performance.md,
    "Head kernel by row count"): ``"tile_mma"``, ``"mma"``, ``"bytedot"``, ``"matvec"``,
    ``"cpu_matvec"``, ``"tiled"`` or ``"float_matmul"``, a key of :data:`HEADS`."""
    if backend == "cpu" and rows <= tuning.CPU_MATVEC_MAX_ROWS:  # the extension's kernels/matvec.h (cpu.py)
        return "cpu_matvec"
    if values_of(table, dtype) and (
        backend not in KERNEL_BACKENDS or rows >= tuning.float_matmul_min_rows(backend, dtype)
    ):
        return "float_matmul"
    if backend not in KERNEL_BACKENDS:
        return "tiled"
    device = BACKENDS[backend]
    quantized = table.format.quantized  # levels are exact in 16 bits; the float formats' values are not
    if device.matrix_units() and tile_mma_fits(table, rows, dtype, device.group_shared(), device.warpgroups()):
        return "tile_mma"
    if quantized and rows >= tuning.MMA_MIN_ROWS[dtype] and device.matrix_units():
        return "mma" if rows <= tuning.MMA_MAX_ROWS else "tiled"
    if rows > tuning.MATVEC_MAX_ROWS:
        return "tiled"
    if quantized and device.byte_dots and rows <= tuning.BYTEDOT_MAX_ROWS and table.nbytes >= tuning.BYTEDOT_MIN_BYTES:
        return "bytedot"
    return "matvec"


def tile_mma_fits(table: Table, rows: int, dtype: mx.Dtype, group_shared: int, warpgroups: bool = False) -> bool:
    """Whether kernels/tile_mma.h takes ``rows`` rows of x of ``dtype`` for ``table``: a 16-bit x,
    rows within tuning's range for its format, row length and vocab (tuning.tile_mma_max_rows; further
    where the device has warpgroup multiplies, ``warpgroups``), dims in whole steps of TILE_K
    values, a grid of at most MAX_THREADS threads (one threadgroup per output tile, no grid
    stride; :func:`tile_mma_threads` a threadgroup) and threadgroups whose buffers the device's
    shared memory holds (``group_shared`` bytes; GeForce GPUs' 99 KiB hold every format's at 32
    rows of x a threadgroup and not Q8_0's, F16's and BF16's beyond) with what the format's
    decoder keeps there (grids.shared_bytes: an IQ grid and its sign table, or IQ3_XXS's signed
    points, up to 16 KiB)."""
    warpgroup = tuning.tile_mma_warpgroup(rows, warpgroups)
    xrows = tuning.tile_mma_xrows(rows, warpgroup)
    return (
        dtype in TILE_MMA_DTYPES
        and tuning.tile_mma_min_rows(table.qtype)
        <= rows
        <= tuning.tile_mma_max_rows(table.qtype, table.dims, table.vocab, warpgroups)
        and table.dims % TILE_K == 0
        and -(-table.vocab // TILE_ROWS) * -(-rows // xrows) * tile_mma_threads(xrows, warpgroup) <= MAX_THREADS
        and tile_mma_buffers(table, xrows, warpgroup).shared + grid_shared_bytes(table.qtype) <= group_shared
    )


def tile_mma_threads(xrows: int, warpgroup: bool) -> int:
    """kernels/tile_mma.h's threads a threadgroup (THREADS): TILE_THREADS, and twice as many where
    warpgroups multiply more than WGMMA_GROUP_XROWS rows of x, two warpgroups (one per 64 table
    rows) per WGMMA_GROUP_XROWS x rows: each holds 64 sums a thread, as at 128 rows, where 256
    threads holding 128 took 167 registers and a threadgroup an SM (docs/performance.md, "Two
    groups of x rows")."""
    return TILE_THREADS * (xrows // WGMMA_GROUP_XROWS if warpgroup and xrows > WGMMA_GROUP_XROWS else 1)


def x_rows(x: mx.array) -> int:
    """Rows of ``x [..., dims]``: the product of its leading dimensions."""
    return x.size // x.shape[-1]


def logits(table: Table, x: mx.array, backend: str) -> mx.array:
    """``x [..., dims]`` -> ``[..., vocab]`` in x's dtype by the head :func:`choose` picks."""
    return HEADS[choose(table, x_rows(x), x.dtype, backend)](table, x, backend)


def over_tiles(table: Table, dtype: mx.Dtype, backend: str, step) -> list[mx.array]:
    """``step(start, stop, tile, last)`` for each tile of ``tuning.tile_rows`` vocab rows in
    order, ``tile [stop - start, dims]`` dequantized into ``dtype`` by the backend's gather of
    ``arange(start, stop)`` and ``last`` what the step before returned (None at first); returns
    what each step returned. Each tile's ids depend on the step before, so MLX evaluates the tiles
    one after the other and frees each before the next (left alone it interleaves them): at most
    one tile of floats is alive, no float copy of the table."""
    tile_rows = tuning.tile_rows(table.dims, dtype, device_memory() if backend == "cuda" else 0)
    gather = bind(table, dtype, backend, prepared=True)
    out: list[mx.array] = []
    for start in range(0, table.vocab, tile_rows):
        stop = min(start + tile_rows, table.vocab)
        ids = _tile_ids(start, stop)
        if out:
            ids = mx.depends(ids, out[-1])
        out.append(step(start, stop, gather(ids), out[-1] if out else None))
    return out


@functools.lru_cache(maxsize=64)
def _tile_ids(start: int, stop: int) -> mx.array:
    """int32 ``[stop - start]``, ids ``start .. stop - 1``: made once a tile, so that a call's
    graph holds no operation that makes them (a kernel launch each on a GPU)."""
    return mx.array(np.arange(start, stop, dtype=np.int32))


def tiled(table: Table, x: mx.array, backend: str) -> mx.array:
    """``x @ tile.T`` for each tile of the table (:func:`over_tiles`), concatenated."""
    parts = over_tiles(table, x.dtype, backend, lambda start, stop, tile, last: x @ tile.T)
    return parts[0] if len(parts) == 1 else mx.concatenate(parts, axis=-1)


def values_of(table: Table, dtype: mx.Dtype) -> bool:
    """Whether ``table``'s bytes are values of ``dtype`` as they are: a float table of it."""
    return not table.format.quantized and table.format.values_dtype == dtype


def float_values(table: Table) -> mx.array:
    """A float table's bytes ``uint8 [vocab, row_bytes]`` viewed, not copied, as its values
    ``[vocab, dims]`` of ``table.format.values_dtype``."""
    return mx.view(table.data, table.format.values_dtype)


def float_matmul(table: Table, x: mx.array, backend: str) -> mx.array:
    """``x @ W.T`` by MLX's matmul, ``W`` the float table's values (:func:`float_values`), x of
    their dtype: the tiled path's products without its copy of the table."""
    return x @ float_values(table).T


def streaming_threads(vocab: int, vrows: int) -> int:
    """One warp per ``tuning.HEAD_STREAM_PASSES`` passes of ``vrows`` vocab rows, grid-striding
    (and beyond MAX_THREADS)."""
    return min(-(-vocab // (vrows * tuning.HEAD_STREAM_PASSES)), MAX_THREADS // WARP) * WARP


def _launch(
    table: Table,
    defines: tuple[tuple[str, int], ...],
    vrows: int,
    lead: tuple,
    dtype: mx.Dtype,
    min_threadgroups: int = 0,
    threadgroup: int = 0,
) -> Launch:
    """A streaming kernel's launch: a warp per ``vrows`` table rows (kernels/matvec.h's grid),
    out ``lead + (vocab,)``; ``min_threadgroups``: :class:`Launch`'s; ``threadgroup``: its threads
    (0: tuning.head_threadgroup's)."""
    return Launch(
        format=table.format,
        defines=(("DIMS", table.dims), ("VOCAB", table.vocab), *defines),
        grid=(streaming_threads(table.vocab, vrows), 1, 1),
        threadgroup=(threadgroup or tuning.head_threadgroup(table.qtype), 1, 1),
        output_shape=(*lead, table.vocab),
        output_dtype=dtype,
        min_threadgroups=min_threadgroups,
    )


def matvec_launch(table: Table, x: mx.array) -> Launch:
    """kernels/matvec.h for x: ROWS rows of x per pass over the table, VROWS table rows per warp,
    VALUES per lane and step (tuning.matvec_layout)."""
    rows, vrows, values = tuning.matvec_layout(x_rows(x), table.dims, table.vocab)
    return _launch(table, (("VALUES", values), ("ROWS", rows), ("VROWS", vrows)), vrows, x.shape[:-1], x.dtype)


def x_planes(dtype: mx.Dtype) -> int:
    """Byte planes of x's integers in the byte dot products (kernels/xruns.h): 3 for float32 x,
    2 for float16 and bfloat16."""
    return 3 if dtype == mx.float32 else 2


def x_run_words(planes: int) -> int:
    """32-bit words of one run's record (kernels/xruns.h: XRunRecord<PLANES>::words)."""
    return (5 * planes + 5) // 4 * 4


def xruns_launch(table: Table, x: mx.array) -> Launch:
    """kernels/xruns.h for x: a thread per run of RUN values; out ``[n, dims / RUN, words]``."""
    planes, n = x_planes(x.dtype), x_rows(x)
    n_runs = n * table.dims // RUN
    return Launch(
        format=None,
        defines=(("DIMS", table.dims), ("PLANES", planes)),
        grid=(-(-n_runs // tuning.THREADGROUP) * tuning.THREADGROUP, 1, 1),
        threadgroup=(tuning.THREADGROUP, 1, 1),
        output_shape=(n, table.dims // RUN, x_run_words(planes)),
        output_dtype=mx.uint32,
    )


def bytedot_launch(table: Table, x: mx.array) -> Launch:
    """kernels/bytedot.h for x: ROWS, VROWS and RUNS (runs per lane and step) from
    tuning.bytedot_layout, PLANES (:func:`x_planes`), threadgroups an SM holds
    (tuning.bytedot_min_threadgroups)."""
    rows, vrows, runs = tuning.bytedot_layout(x_rows(x), table.dims, table.qtype)
    defines = (("ROWS", rows), ("VROWS", vrows), ("RUNS", runs), ("PLANES", x_planes(x.dtype)))
    bound = tuning.bytedot_min_threadgroups(table.qtype, x.dtype)
    return _launch(table, defines, vrows, x.shape[:-1], x.dtype, bound)


def mma_launch(table: Table, x: mx.array) -> Launch:
    """kernels/mma.h for x ``[n, dims]``: PARTS (FLOAT32_PARTS bfloat16 terms of float32 x, else
    1), VTILES tiles of MMA_ROWS table rows per warp and XTILES of MMA_COLS rows of x per pass
    (tuning.mma_layout), WORD_ROWS (tuning.mma_word_rows), runs a lane decodes at a time
    (PAIRS, tuning.mma_pairs), threads a threadgroup (tuning.mma_threadgroup) and threadgroups an SM
    holds (tuning.mma_min_threadgroups); out rows: n rounded up to whole passes."""
    tiles = vtiles, xtiles = tuning.mma_layout(x.shape[0], table.qtype, x.dtype)
    parts = FLOAT32_PARTS if x.dtype == mx.float32 else 1
    out_rows = -(-x.shape[0] // (MMA_COLS * xtiles)) * MMA_COLS * xtiles
    word_rows = tuning.mma_word_rows(table.qtype, tiles, x.dtype)
    defines = (("PARTS", parts), ("VTILES", vtiles), ("XTILES", xtiles), ("WORD_ROWS", int(word_rows)))
    defines += (("PAIRS", tuning.mma_pairs(table.qtype, tiles, x.dtype)),)
    bound = tuning.mma_min_threadgroups(table.qtype, tiles, x.dtype)
    threads = tuning.mma_threadgroup(table.qtype, tiles, x.dtype)
    return _launch(table, defines, MMA_ROWS * vtiles, (out_rows,), x.dtype, bound, threads)


class TileBuffers(NamedTuple):
    """kernels/tile_mma.h's shared memory for a table and XROWS: CHUNK values of a row per copy of
    its bytes (256, or 256 bytes of a float format's values), RAW bytes per row and copy (the
    chunk's bytes rounded to 16-byte pieces, and one piece for their offset from a 16-byte
    boundary), STEP_K values a step (:func:`tile_mma_step_k`), UNROLL steps per pass of the step
    loop as compiled (:func:`tile_mma_unroll`), XSTAGES steps of x (tuning.TILE_MMA_X_STAGES, for
    warpgroup multiplies TILE_WGMMA_X_STAGES, or TILE_WGMMA_UNROLLED_X_STAGES where their loop is
    unrolled; fewer where a chunk is fewer steps), SHARED the threadgroup's bytes: two raw buffers
    of TILE_ROWS rows, two of TILE_ROWS x STEP_K table values and XSTAGES of XROWS x STEP_K values
    of x, 2 bytes each, and for warpgroup
    multiplies WGMMA_ALIGN bytes to start x's on a boundary of them and an 8-byte barrier per
    stage for its bulk copies, or where it is more the output tile of XROWS x TILE_ROWS values
    that reuses them (at least TILE_MIN_SHARED)."""

    chunk: int
    raw: int
    step_k: int
    unroll: int
    stages: int
    shared: int


def tile_mma_buffers(table: Table, xrows: int, warpgroup: bool) -> TileBuffers:
    fmt = table.format
    chunk = 256 if fmt.block_values > 1 else 256 // fmt.block_bytes
    raw = -(-(chunk // fmt.block_values * fmt.block_bytes) // 16) * 16 + 16
    step_k = tile_mma_step_k(table, chunk, tile_mma_threads(xrows, warpgroup))
    unroll = tile_mma_unroll(table, xrows, warpgroup, chunk, step_k)
    if not warpgroup:
        stages = tuning.TILE_MMA_X_STAGES
    elif unroll > 1:
        stages = tuning.TILE_WGMMA_UNROLLED_X_STAGES
    else:
        stages = tuning.TILE_WGMMA_X_STAGES
    stages = min(stages, chunk // step_k)
    # the value buffers, with warpgroups x's stages aligned and their bulk copies' barriers; or the output tile
    warpgroup_bytes = WGMMA_ALIGN + 8 * stages if warpgroup else 0
    values = max(2 * (2 * TILE_ROWS + stages * xrows) * step_k + warpgroup_bytes, 2 * xrows * TILE_ROWS)
    # at least 48 KiB: MLX lifts a kernel's dynamic shared memory limit only above 48,000 bytes, and what
    # an IQ format's decoder keeps in shared memory (grids.shared_bytes) takes up to 16 KiB more, which
    # the default 48 KiB would not hold
    shared = max(2 * TILE_ROWS * raw + values, TILE_MIN_SHARED)
    return TileBuffers(chunk, raw, step_k, unroll, stages, shared)


def tile_mma_unroll(table: Table, xrows: int, warpgroup: bool, chunk: int, step_k: int) -> int:
    """kernels/tile_mma.h's UNROLL: a chunk's steps where tuning.tile_mma_unrolled says so, else 1;
    with warpgroups only where the row is whole chunks of steps. A loop that ends mid-pass takes
    registers for its remainder past the 128 a thread that 512 threads may have (Q4_0 at 640
    values: 137, nvcc 13.0), and a launch over them fails."""
    steps = chunk // step_k
    whole = not warpgroup or table.dims // step_k % steps == 0
    return steps if whole and tuning.tile_mma_unrolled(table.qtype, xrows, warpgroup) else 1


def tile_mma_step_k(table: Table, chunk: int, threads: int) -> int:
    """kernels/tile_mma.h's values a step (STEP_K): TILE_K, and two tiles of it where 512 threads
    decode (:func:`tile_mma_threads`; 16 values each, not 8), tuning.TILE_WGMMA_WIDE_STEPS, and both
    the row and a chunk are whole steps of two (a chunk at least two: x runs a step ahead): the
    threads' fixed work a step (its barrier, the stages' indexes, the multiplies' issue, a decode's
    addresses and scales) is then spread over twice the values (docs/performance.md, "Two groups
    of x rows")."""
    wide = 2 * TILE_K
    fits = table.dims % wide == 0 and chunk % wide == 0 and chunk >= 2 * wide
    return wide if tuning.TILE_WGMMA_WIDE_STEPS and threads > TILE_THREADS and fits else TILE_K


def tile_mma_launch(table: Table, x: mx.array, warpgroups: bool = False) -> Launch:
    """kernels/tile_mma.h for x ``[..., dims]``: a threadgroup per TILE_ROWS table rows and XROWS
    rows of x (tuning.tile_mma_xrows), multiplied by warpgroups where the device has them
    (``warpgroups``) and tuning.tile_mma_warpgroup says so, out ``[..., vocab]``, its shared
    memory and step loop as :func:`tile_mma_buffers` lays them out."""
    n = x_rows(x)
    warpgroup = tuning.tile_mma_warpgroup(n, warpgroups)
    xrows = tuning.tile_mma_xrows(n, warpgroup)
    chunk, raw, step_k, unroll, stages, shared = tile_mma_buffers(table, xrows, warpgroup)
    groups = -(-table.vocab // TILE_ROWS) * -(-n // xrows)
    threads = tile_mma_threads(xrows, warpgroup)
    return Launch(
        format=table.format,
        defines=(
            ("DIMS", table.dims),
            ("VOCAB", table.vocab),
            ("XROWS", xrows),
            ("XSTAGES", stages),
            ("CHUNK", chunk),
            ("RAW", raw),
            ("SHARED", shared),
            ("UNROLL", unroll),
            ("WARPGROUP", int(warpgroup)),
            ("THREADS", threads),
            ("STEP_K", step_k),
        ),
        grid=(groups * threads, 1, 1),
        threadgroup=(threads, 1, 1),
        output_shape=(*x.shape[:-1], table.vocab),
        output_dtype=x.dtype,
        shared_bytes=shared,
    )


def mma_operands(x: mx.array, rows: int, sums: bool = True) -> tuple[mx.array, mx.array]:
    """x [n, dims] -> kernels/mma.h's inputs: xh [parts, rows, dims] in the multiply's 16-bit
    type and x_sums [dims / 16, rows] float32 (x's sums over each 16 values; without ``sums``, for
    a format whose runs have no offset (:func:`run_offsets`), one zero that the kernel never
    reads: three MLX operations fewer a call), x padded with zero rows to ``rows`` (the launch's
    output rows: whole passes). float16 and bfloat16 x are their own single part; float32 x is
    FLOAT32_PARTS bfloat16 terms, each the rounding of what the ones before leave (exact
    differences: the terms sum to x exactly, barring underflow)."""
    n, dims = x.shape
    if rows > n:
        x = mx.pad(x, [(0, rows - n), (0, 0)])
    if x.dtype == mx.float32:
        parts, rest = [], x
        for _ in range(FLOAT32_PARTS):
            parts.append(rest.astype(mx.bfloat16))
            rest = rest - parts[-1].astype(mx.float32)
        xh = mx.stack(parts)
    else:
        xh = x[None]
    if not sums:
        return xh, _NO_SUMS
    return xh, x.astype(mx.float32).reshape(-1, dims // 16, 16).sum(axis=-1).T


_NO_SUMS = mx.array(np.zeros((1, 1), np.float32))  # made, not a lazy zeros: no operation for a call to run


def run_offsets(table: Table) -> bool:
    """Whether ``table``'s decoder declares ``offsets = 1`` (kernels/formats.h: its runs subtract an
    offset times x's sum over the run, ggml's mins) in its header, the one place that says so:
    kernels/mma.h reads x_sums then."""
    return _declares_offsets(table.format.kernel_file)


@functools.cache
def _declares_offsets(kernel_file: str) -> bool:
    """Read once a decoder (and again once tuning.fixed changes KERNEL_SOURCES, say)."""
    return re.search(r"\boffsets = 1\b", (tuning.KERNEL_SOURCES / kernel_file).read_text()) is not None


tuning.keeps_decisions(_declares_offsets.cache_clear)


def _device(table: Table, x: mx.array, backend: str, head: str, quantized: bool = False) -> DeviceBackend:
    """The GPU backend, once the arguments are checked."""
    if backend not in KERNEL_BACKENDS:
        raise ValueError(f"{head} runs on a GPU backend ({', '.join(KERNEL_BACKENDS)}), got {backend!r}")
    if x.ndim < 1 or x.size == 0 or x.shape[-1] != table.dims:
        raise ValueError(f"{head} takes x [..., {table.dims}], at least one row, for {table!r}, got {list(x.shape)}")
    if quantized and not table.format.quantized:
        raise TypeError(f"{head} takes a quantized table (levels exact in integers), got {table!r}")
    return BACKENDS[backend]


def matvec(table: Table, x: mx.array, backend: str) -> mx.array:
    """Logits by kernels/matvec.h, any format."""
    device = _device(table, x, backend, "matvec")
    return device.matvec_kernel(matvec_launch(table, x), [table_words(table.data), x])


def x_runs(table: Table, x: mx.array, backend: str) -> mx.array:
    """x's run records ``[n, dims / RUN, x_run_words] uint32`` for :func:`bytedot`."""
    device = _device(table, x, backend, "x_runs")
    if device.xruns_kernel is None or table.dims % RUN:
        raise ValueError(f"x_runs needs a backend with byte dot products and dims in runs of {RUN}, got {table!r}")
    return device.xruns_kernel(xruns_launch(table, x), [x])


def bytedot(table: Table, x: mx.array, backend: str) -> mx.array:
    """Logits by kernels/bytedot.h (byte dot products; quantized tables) on :func:`x_runs` of x."""
    device = _device(table, x, backend, "bytedot", quantized=True)
    if device.bytedot_kernel is None:
        raise ValueError(f"bytedot needs a backend with byte dot products, got {backend!r}")
    return device.bytedot_kernel(bytedot_launch(table, x), [table_words(table.data), x_runs(table, x, backend)])


def mma(table: Table, x: mx.array, backend: str) -> mx.array:
    """Logits by kernels/mma.h (matrix units; quantized tables)."""
    device = _device(table, x, backend, "mma", quantized=True)
    if device.mma_kernel is None:
        raise ValueError(f"mma needs a backend with warp matrix multiplies, got {backend!r}")
    x2 = x.reshape(-1, table.dims)
    launch = mma_launch(table, x2)
    xh, x_sums = mma_operands(x2, launch.output_shape[0], run_offsets(table))
    out = device.mma_kernel(launch, [table_words(table.data), xh, x_sums])[: x2.shape[0]]
    return out.reshape(*x.shape[:-1], table.vocab)


def tile_mma(table: Table, x: mx.array, backend: str) -> mx.array:
    """Logits by kernels/tile_mma.h (matrix units; any format, float16 or bfloat16 x); where it
    multiplies by warpgroups it reads x as :func:`x_steps` lays it out (its third input; else x
    again)."""
    device = _device(table, x, backend, "tile_mma")
    if device.tile_mma_kernel is None or x.dtype not in TILE_MMA_DTYPES or table.dims % TILE_K:
        raise ValueError(
            f"tile_mma needs a backend with warp matrix multiplies, float16 or bfloat16 x and dims in steps "
            f"of {TILE_K}, got {backend!r}, {x.dtype}, {table!r}"
        )
    launch, group_shared = tile_mma_launch(table, x, device.warpgroups()), device.group_shared()
    if launch.shared_bytes > group_shared:
        raise ValueError(
            f"tile_mma's threadgroups would take {launch.shared_bytes:,} bytes of shared memory for {table!r} and "
            f"{x_rows(x)} rows of x; this GPU gives a threadgroup {group_shared:,}"
        )
    steps = x_steps(x, launch.define("XROWS")) if launch.define("WARPGROUP") else x
    return device.tile_mma_kernel(launch, [table_words(table.data), x, steps])


def x_steps(x: mx.array, xrows: int) -> mx.array:
    """x ``[..., dims]`` as kernels/tile_mma.h's warpgroups copy it, a step (one tile of XROWS x
    TILE_K values, or two next to each other: STEP_K) at a time: ``[x_tiles, dims / TILE_K, xrows,
    TILE_K]`` in x's dtype, tile s of x tile t rows ``t xrows ..`` of x (zeros past its rows),
    values ``s TILE_K ..``, each row's four 16-byte chunks where the kernel's stages keep them
    (tile_at: chunk c of row q at c ^ (q / 2 % 4))."""
    dims = x.shape[-1]
    n = x.size // dims
    tiles = -(-n // xrows)
    x = x.reshape(n, dims)
    if tiles * xrows > n:
        x = mx.pad(x, [(0, tiles * xrows - n), (0, 0)])
    x = x.reshape(tiles, xrows, dims // TILE_K, TILE_K // 8, 8)  # [t, q, s, c, 8]
    x = mx.take_along_axis(x, _chunk_order(xrows), axis=3)
    return x.transpose(0, 2, 1, 3, 4).reshape(tiles, dims // TILE_K, xrows, TILE_K)


@functools.cache
def _chunk_order(xrows: int) -> mx.array:
    """int32 ``[1, xrows, 1, TILE_K / 8, 1]``: for row q of an x tile, the chunk that
    :func:`x_steps` puts at each place c, c ^ (q / 2 % 4); made once, so that a call's graph
    holds no operation that computes it."""
    q = np.arange(xrows).reshape(1, xrows, 1, 1, 1)
    return mx.array((np.arange(TILE_K // 8).reshape(1, 1, 1, -1, 1) ^ (q // 2 % 4)).astype(np.int32))


def cpu_matvec(table: Table, x: mx.array, backend: str) -> mx.array:
    """Logits by kernels/matvec.h in the CPU extension (backends/cpu.py), any format."""
    return BACKENDS["cpu"].matvec(table, x.reshape(-1, table.dims)).reshape(*x.shape[:-1], table.vocab)


HEADS = {
    "tile_mma": tile_mma,
    "mma": mma,
    "bytedot": bytedot,
    "matvec": matvec,
    "cpu_matvec": cpu_matvec,
    "tiled": tiled,
    "float_matmul": float_matmul,
}
