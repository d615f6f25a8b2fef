"""The LM head's kernels, logits ``x @ W.T`` from the quantized table ``W``, and the one function
that chooses among them for a row count and dtype (:func:`choose`).

- streamed (GPU kernels, few rows of x: decode): the table is read once per pass and dequantized
  on the fly; no float copy of any part of it exists. ``matvec`` (kernels/matvec.h): a lane's
  float multiply-adds, any format; ``bytedot`` (kernels/bytedot.h, CUDA, quantized tables): byte
  dot products of levels and x in integers, one row of x; ``mma`` (kernels/mma.h, CUDA compute
  capability 8+, quantized tables): warp matrix multiplies, from MMA_MIN_ROWS rows.
- ``tiled`` (long x on the GPU: prefill; every x on the ``ops`` backend): TILE_ROWS vocab rows at
  a time are dequantized by the backend's gather into x's dtype and multiplied with MLX's matmul.
"""

from __future__ import annotations

import mlx.core as mx

from . import BACKENDS, KERNEL_BACKENDS, bind
from .kernel import THREADGROUP, values_per_thread

# Rows of x up to which a GPU backend streams the table rather than tiling it: by matvec, or for a
# quantized table on a backend with matrix units (CUDA) by mma from MMA_MIN_ROWS (by x's dtype:
# float32 x costs three multiplies) to MMA_MAX_ROWS. Set from the H200 measurements of
# benchmarks/as_linear.py and benchmarks/mma_tuning.py (float32 x: matvec faster at 2 rows, mma
# at 8; 4 is between them, not measured).
MATVEC_MAX_ROWS = 16
MMA_MIN_ROWS = {mx.float16: 2, mx.bfloat16: 2, mx.float32: 4}
MMA_MAX_ROWS = 128
# Rows of x the byte dot products take: one row measured (H200, benchmarks/matvec_tuning.py
# --kernel bytedot, and benchmarks/as_linear.py); at 2-3 rows of float32 x (below MMA_MIN_ROWS)
# they would need 96-162 registers, not measured.
BYTEDOT_MAX_ROWS = 1
# Vocab rows per tile of the tiled path: TILE_ROWS * dims floats alive at a time (4096 * 6,656
# * 2 B = 52 MiB for float16 at Glimmer's width). benchmarks/as_linear.py measures it.
TILE_ROWS = 4096

MAX_THREADS = 1 << 30  # matvec's 1-D grid: grid-stride beyond this (MLX's grid is a 32-bit int)
MMA_ROWS, MMA_COLS = 16, 8  # a warp multiply's table rows and x rows (kernels/mma.h: mma_rows, mma_cols)
FLOAT32_PARTS = 3  # bfloat16 terms of float32 x on the matrix units (kernels/mma.h: PARTS)
# Tiles of MMA_ROWS table rows per warp: of 1, 2 and 4 the fastest at 16 rows of x for every
# format and dtype measured, and in 7 of the 12 cases at 2-16 rows (H200,
# benchmarks/results/mma_tuning_gpu.md).
MMA_VTILES = 4
WARP = 32  # lanes of a Metal simdgroup / CUDA warp (kernels/matvec.h: warp_lanes)
# Table rows per matvec warp by ROWS: the fastest in benchmarks/results/matvec_tuning_gpu.md (H100;
# an H200 sweep of the previous decoders picked the same).
VOCAB_ROWS_PER_WARP = {1: 4, 2: 8, 4: 4, 8: 4}
# Table rows per warp of kernels/bytedot.h at one row of x, by format (default BYTEDOT_VROWS): the
# fastest of 2-16 (x float16; Q4_K float32 x too: 8; H200, benchmarks/results/experiments_gpu.log,
# "sweep"): Q4_K 4 and 8 tied, Q5_K 8, Q6_K and Q8_0 4.
BYTEDOT_VROWS = 8
BYTEDOT_VROWS_BY_FORMAT = {"Q6_K": 4, "Q8_0": 4}


def choose(table, rows: int, dtype: mx.Dtype, backend: str) -> str:
    """The head kernel for ``rows`` rows of x of ``dtype`` on ``backend``: ``"mma"``,
    ``"bytedot"``, ``"matvec"`` or ``"tiled"`` (a key of :data:`HEADS`)."""
    if backend not in KERNEL_BACKENDS:
        return "tiled"
    device = BACKENDS[backend]
    quantized = table.format.quantized  # levels are exact in 16 bits; the float formats' values are not
    if quantized and rows >= MMA_MIN_ROWS[dtype] and device.matrix_units():
        return "mma" if rows <= MMA_MAX_ROWS else "tiled"
    if rows > MATVEC_MAX_ROWS:
        return "tiled"
    if quantized and device.bytedot_kernel and rows <= BYTEDOT_MAX_ROWS:
        return "bytedot"
    return "matvec"


def logits(table, x: mx.array, backend: str) -> mx.array:
    """``x [n, dims]`` (n >= 1) -> ``[n, vocab]`` in x's dtype by the head :func:`choose` picks."""
    return HEADS[choose(table, x.shape[0], x.dtype, backend)](table, x, backend)


def tiled(table, x: mx.array, backend: str, tile_rows: int | None = None) -> mx.array:
    """``x [n, dims]`` -> ``[n, vocab]``: dequantize ``tile_rows`` (default ``TILE_ROWS``) vocab
    rows at a time (the backend's gather of ``arange(start, stop)``), ``x @ tile.T``, concatenate.
    Each tile's ids depend on the previous tile's logits, so MLX evaluates the tiles one after
    the other and frees each before the next (left alone it interleaves them)."""
    tile_rows = tile_rows or TILE_ROWS
    gather = bind(table, x.dtype, backend)
    parts: list[mx.array] = []
    for start in range(0, table.vocab, tile_rows):
        ids = mx.arange(start, min(start + tile_rows, table.vocab), dtype=mx.int32)
        if parts:
            ids = mx.depends(ids, parts[-1])
        tile = gather(ids)  # [rows, dims] in x's dtype
        parts.append(x @ tile.T)
    return parts[0] if len(parts) == 1 else mx.concatenate(parts, axis=1)


def matvec_values(dims: int) -> int:
    """Values per lane and step of the matvec (VALUES): a whole run of 16 (kernels/formats.h:
    one scale and offset per step; for Q4_K measured faster than 8 at every ROWS, and than 32,
    two runs per step, at the best VROWS of every ROWS), else values_per_thread."""
    return 16 if dims % 16 == 0 else values_per_thread(dims)


def rows_per_pass(n: int) -> int:
    """Rows of x per streaming pass over the table (matvec's ROWS): 1, 2, 4 or 8."""
    return next(r for r in (1, 2, 4, 8) if n <= r or r == 8)


def vocab_rows_per_warp(rows: int) -> int:
    """Table rows a matvec warp decodes per step (VROWS), each reusing the step's x values."""
    return VOCAB_ROWS_PER_WARP[rows]


def table_constants(table) -> tuple[tuple[str, int], ...]:
    """The constants every head kernel takes from the table."""
    return (("FORMAT", table.format.ggml_type), ("DIMS", table.dims), ("VOCAB", table.vocab))


def matvec_constants(table, x: mx.array, rows: int | None = None, vrows: int | None = None,
                     values: int | None = None) -> tuple[tuple[str, object], ...]:
    """The matvec's per-table constants and its layout: ``rows`` (ROWS, default
    ``rows_per_pass(n)``), ``vrows`` (VROWS, default ``vocab_rows_per_warp(rows)``) and
    ``values`` (VALUES, default ``matvec_values(dims)``); benchmarks/matvec_tuning.py sets them.
    x's dtype (also out's) names the kernel, as the gather's dtypes do."""
    rows = rows or rows_per_pass(x.shape[0])
    return (
        *table_constants(table),
        ("VALUES", values or matvec_values(table.dims)),
        ("ROWS", rows),
        ("VROWS", vrows or vocab_rows_per_warp(rows)),
        ("X", x.dtype),
    )


def x_planes(x: mx.array) -> int:
    """Byte planes of x's integers in the byte dot products (kernels/xruns.h): 3 for float32 x,
    2 for float16 and bfloat16."""
    return 3 if x.dtype == mx.float32 else 2


def x_run_words(planes: int) -> int:
    """32-bit words of one run's record (kernels/xruns.h: XRunRecord<PLANES>::words)."""
    return (5 * planes + 5) // 4 * 4


def xruns_constants(table, x: mx.array) -> tuple[tuple[str, object], ...]:
    """kernels/xruns.h's constants: DIMS and PLANES; x's dtype names it."""
    return (("DIMS", table.dims), ("PLANES", x_planes(x)), ("X", x.dtype))


def bytedot_constants(table, x: mx.array, rows: int | None = None, vrows: int | None = None,
                      runs: int | None = None) -> tuple[tuple[str, object], ...]:
    """The byte-dot matvec's constants (kernels/bytedot.h): ROWS as the matvec's, VROWS (default
    the format's in BYTEDOT_VROWS_BY_FORMAT, else BYTEDOT_VROWS; at most 32 / ROWS), RUNS (runs of
    16 values per lane and step: 2 where dims allow, else 1) and PLANES (:func:`x_planes`); x's
    dtype (out's) names it."""
    rows = rows or rows_per_pass(x.shape[0])
    return (
        *table_constants(table),
        ("ROWS", rows),
        ("VROWS", vrows or min(BYTEDOT_VROWS_BY_FORMAT.get(table.qtype, BYTEDOT_VROWS), WARP // rows)),
        ("RUNS", runs or (2 if table.dims % 64 == 0 else 1)),
        ("PLANES", x_planes(x)),
        ("X", x.dtype),
    )


def mma_tiles(n: int) -> tuple[int, int]:
    """Tiles of the matrix-unit matvec (kernels/mma.h): VTILES of 16 table rows per warp and
    XTILES of 8 rows of x per pass."""
    return MMA_VTILES, 1 if n <= MMA_COLS else 2


def mma_operands(x: mx.array, xtiles: int) -> tuple[mx.array, mx.array]:
    """x [n, dims] -> kernels/mma.h's inputs: xh [parts, n', dims] in the multiply's 16-bit
    type and x_sums [dims / 16, n'] float32 (x's sums over each 16 values), n' = n rounded up to
    whole passes of ``8 * xtiles`` rows with zero rows. float16 and bfloat16 x are their own single
    part; float32 x is FLOAT32_PARTS bfloat16 terms, each the rounding of what the ones before leave
    (exact differences: the terms sum to x exactly, barring underflow)."""
    n, dims = x.shape
    x = mx.pad(x, [(0, -n % (MMA_COLS * xtiles)), (0, 0)])
    if x.dtype == mx.float32:
        parts, rest = [], x
        for _ in range(FLOAT32_PARTS):
            parts.append(rest.astype(mx.bfloat16))
            rest = rest - parts[-1].astype(mx.float32)
        xh = mx.stack(parts)
    else:
        xh = x[None]
    return xh, x.astype(mx.float32).reshape(-1, dims // 16, 16).sum(axis=-1).T


def mma_constants(table, x: mx.array, tiles: tuple[int, int] | None = None) -> tuple[tuple[str, object], ...]:
    """The matrix-unit matvec's constants: PARTS (FLOAT32_PARTS bfloat16 terms for float32 x, else
    1) and (VTILES, XTILES) = ``tiles`` (default ``mma_tiles(n)``); x's dtype names the kernel."""
    parts = FLOAT32_PARTS if x.dtype == mx.float32 else 1
    vtiles, xtiles = tiles or mma_tiles(x.shape[0])
    return (*table_constants(table), ("PARTS", parts), ("VTILES", vtiles), ("XTILES", xtiles), ("X", x.dtype))


def matvec_threads(vocab: int, vrows: int) -> int:
    """One warp per ``vrows`` vocab rows, grid-striding beyond MAX_THREADS."""
    return min(-(-vocab // vrows), MAX_THREADS // WARP) * WARP


def _check_x(table, x: mx.array, head: str) -> None:
    if x.ndim != 2 or x.shape[0] < 1 or x.shape[1] != table.dims:
        raise ValueError(f"{head} takes x [n >= 1, {table.dims}] for {table!r}, got {list(x.shape)}")


def _check_quantized(table, head: str) -> None:
    if not table.format.quantized:
        raise TypeError(f"{head} takes a quantized table (levels exact in integers), got {table!r}")


def matvec(table, x: mx.array, backend: str, rows: int | None = None, vrows: int | None = None,
           values: int | None = None) -> mx.array:
    """``x [n, dims]`` (n >= 1, floating) -> logits ``[n, vocab]`` in x's dtype on GPU
    ``backend``, streaming the table once per ``rows`` rows of x; the layout as in
    :func:`matvec_constants`."""
    _check_x(table, x, "matvec")
    return _stream(BACKENDS[backend].matvec_kernel, table, x, x, matvec_constants(table, x, rows, vrows, values))


def bytedot(table, x: mx.array, backend: str, rows: int | None = None, vrows: int | None = None,
            runs: int | None = None) -> mx.array:
    """As :func:`matvec`, by byte dot products (quantized tables only) on :func:`x_runs` of x,
    the layout as in :func:`bytedot_constants`."""
    _check_x(table, x, "bytedot")
    _check_quantized(table, "bytedot")
    return _stream(BACKENDS[backend].bytedot_kernel, table, x_runs(table, x, backend), x,
                   bytedot_constants(table, x, rows, vrows, runs))


def x_runs(table, x: mx.array, backend: str) -> mx.array:
    """``x [n, dims]`` -> its runs' records ``[n, dims / 16, x_run_words] uint32`` for
    :func:`bytedot` (kernels/xruns.h), a thread per run."""
    _check_x(table, x, "x_runs")
    if table.dims % 16:
        raise ValueError(f"x_runs takes dims in whole runs of 16, got {table!r}")
    n_runs = x.shape[0] * table.dims // 16
    return BACKENDS[backend].xruns_kernel.for_constants(xruns_constants(table, x))(
        inputs=[x],
        grid=(-(-n_runs // THREADGROUP) * THREADGROUP, 1, 1),
        threadgroup=(THREADGROUP, 1, 1),
        output_shapes=[(x.shape[0], table.dims // 16, x_run_words(x_planes(x)))],
        output_dtypes=[mx.uint32],
    )[0]


def _stream(kernel, table, operand: mx.array, x: mx.array, constants) -> mx.array:
    """A warp per VROWS table rows (kernels/matvec.h's grid): logits ``[n, vocab]`` in x's
    dtype of ``x [n, dims]``, which the kernel reads as ``operand`` (x itself, or its runs)."""
    return kernel.for_constants(constants)(
        inputs=[table.data, operand],
        grid=(matvec_threads(table.vocab, dict(constants)["VROWS"]), 1, 1),
        threadgroup=(THREADGROUP, 1, 1),
        output_shapes=[(x.shape[0], table.vocab)],
        output_dtypes=[x.dtype],
    )[0]


def mma(table, x: mx.array, backend: str, tiles: tuple[int, int] | None = None) -> mx.array:
    """As :func:`matvec`, on the matrix units (quantized tables only), with ``tiles`` =
    (VTILES, XTILES) as in :func:`mma_constants`."""
    _check_x(table, x, "mma")
    _check_quantized(table, "mma")
    constants = mma_constants(table, x, tiles)
    k = dict(constants)
    xh, x_sums = mma_operands(x, k["XTILES"])
    return BACKENDS[backend].mma_kernel.for_constants(constants)(
        inputs=[table.data, xh, x_sums],
        grid=(matvec_threads(table.vocab, MMA_ROWS * k["VTILES"]), 1, 1),
        threadgroup=(THREADGROUP, 1, 1),
        output_shapes=[(xh.shape[1], table.vocab)],
        output_dtypes=[x.dtype],
    )[0][: x.shape[0]]


HEADS = {"mma": mma, "bytedot": bytedot, "matvec": matvec, "tiled": tiled}
