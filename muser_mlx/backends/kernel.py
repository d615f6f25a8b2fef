"""The gather and matvec kernels on MLX's GPU backends, built from the shared source in ``kernels/``.

One compiled kernel per (kernel, table constants, layout, dtypes): the constants (format, dims,
vocab, layout) are compiled in, the number of ids (or rows of x) is read from the input's shape
at run time, so one kernel serves every batch width.
"""

from __future__ import annotations

import hashlib
import math
import re
from functools import cache
from importlib.resources import files
from pathlib import Path

import mlx.core as mx

from ..formats import FORMATS
from ..ids import check_dtype

FORMAT_OF_TYPE = {f.ggml_type: f for f in FORMATS.values()}  # the kernels' FORMAT constant -> Format
THREADGROUP = 256  # threads along a row; a threadgroup is one row high
MAX_ROWS_IN_FLIGHT = 65535  # the gather grid's height (CUDA's limit); more ids loop over rows
# Ids of at most this many go through mx.compile: one id per evaluation is mostly host time, and
# MLX replays a compiled call in 3.6-4.3 us where building it takes 6.7-14 (two H200 hosts;
# README, "One id per evaluation"). Each new ids shape costs a trace (34-78 us) and a
# compile-cache entry, so batches beyond a decode step's, whose shapes vary more and whose time
# is the kernel's, are built each call.
COMPILED_IDS = 64
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


KERNELS = Path(str(files("muser_mlx.kernels"))).absolute()  # the kernel source files


def kernel_source(name: str) -> str:
    return (KERNELS / name).read_text()


def values_per_thread(dims: int) -> int:
    """Values per decode call (the gather's outputs per thread, the matvec's per lane and step):
    8 (two 16-byte float32 stores), or the largest of 4, 2, 1 that divides ``dims``. On an H100
    the gather's 2-D grid with 8 values and 256-thread rows measured best among 4/8 values,
    128/256 threads and row-per-threadgroup variants."""
    return next(v for v in (8, 4, 2, 1) if dims % v == 0)


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


_INCLUDE = re.compile(r'#include "(\w+\.h)"')


def kernel_header(names, read=kernel_source) -> str:
    """The kernel source files ``names`` as one header, in order, each ``#include "x.h"`` replaced
    by x.h's text where it first appears (once, as ``#pragma once`` has it), minus ``//``
    comments, blank lines and ``#pragma once``: what a kernel compiles, so it is what names it,
    and Metal's header (its runtime compiler reads no files)."""
    done, lines = set(), []

    def add(name: str) -> None:
        if name in done:
            return
        done.add(name)
        for line in read(name).splitlines():
            line = re.sub(r"\s*//.*", "", line)
            if include := _INCLUDE.fullmatch(line.strip()):
                add(include.group(1))
            elif line.strip() and line.strip() != "#pragma once":
                lines.append(line)

    for name in names:
        add(name)
    return "\n".join(lines)


def _spelled(value) -> str:
    return str(value).rsplit(".", 1)[-1]  # 12 -> "12", mx.float32 -> "float32"


class DeviceKernel:
    """One kernel of one dialect: its header is the dialect's prelude, for an LM head (``lanes``)
    the dialect's lane operations (``lanes_<dialect>.h``), the table's block decoder
    (``format_<name>.h``) and the kernel's template (``<name>.h``), with what they include;
    ``source`` is the dialect's few-line body (``<name>.metal`` / ``<name>.cu``) that calls the
    template with its thread index.

    The header MLX gets is the files' text (:func:`kernel_header`), or, where the dialect's
    compiler reads files (``includes``: NVRTC), ``#include`` lines naming them in ``directory``:
    MLX's CUDA backend spends host time on every evaluation of a kernel in proportion to its
    source's length, about 0.3 us per KB on an H200, and 7 KB of decoder cost a one-id lookup
    4 us (README, "One id per evaluation").

    ``for_constants(constants)`` is the MLX kernel object for one table, layout and dtypes, built
    on first use and cached: the integer constants are ``#define``d after the header, so a call
    passes no template arguments (MLX spends host time on each, every call); the dtypes only
    name the kernel (they are in its generated signature). The name ends in a digest of the text
    compiled: MLX keeps a compiled kernel under its name for the life of the process, and the
    #include lines it sees stay the same when the files change, so changed source must be a new
    name. benchmarks/kernel_ab.py points ``directory`` at a revision's files."""

    def __init__(self, dialect: str, name: str, inputs: list[str], outputs: list[str], register,
                 lanes: bool = True, includes: bool = False):
        self.dialect, self.name, self.template = dialect, name, f"{name}.h"
        self.lanes, self.includes = lanes, includes
        self.source = kernel_source(f"{name}.{'metal' if dialect == 'metal' else 'cu'}")
        self.inputs, self.outputs = inputs, outputs
        self.directory = KERNELS
        self._register = register
        self._kernels = {}

    def read(self, name: str) -> str:
        return (self.directory / name).read_text()

    def files(self, ggml_type: int | None = None) -> tuple[str, ...]:
        """The header's files before their includes: prelude, lane operations, the decoder of the
        format of ggml type ``ggml_type`` (none for a kernel without a table), template."""
        lanes = (f"lanes_{self.dialect}.h",) if self.lanes else ()
        decoder = () if ggml_type is None else (FORMAT_OF_TYPE[ggml_type].kernel_file,)
        return (f"prelude_{self.dialect}.h", *lanes, *decoder, self.template)

    def header(self, ggml_type: int | None = None) -> str:
        return kernel_header(self.files(ggml_type), self.read)

    def registered_header(self, ggml_type: int | None = None, text: str | None = None) -> str:
        """The header MLX gets: :meth:`header` (``text``, where the caller has read it), or with
        ``includes`` an ``#include`` by absolute path of each of :meth:`files` (the text again
        where ``directory``'s path cannot be spelled inside ``#include "..."``: it holds a quote
        or a line break)."""
        if not self.includes or any(c in str(self.directory) for c in '"\n'):
            return self.header(ggml_type) if text is None else text
        return "\n".join(f'#include "{self.directory / name}"' for name in self.files(ggml_type))

    def for_constants(self, constants: tuple[tuple[str, object], ...]):
        kernel = self._kernels.get(constants)
        if kernel is None:
            ggml_type = dict(constants).get("FORMAT")
            text = self.header(ggml_type)
            defines = "".join(f"\n#define {k} {v}" for k, v in constants if isinstance(v, int)) + "\n"
            digest = hashlib.sha256((text + defines + self.source).encode()).hexdigest()[:12]
            kernel = self._kernels[constants] = self._register()(
                name="_".join(["muser", self.name, *(_spelled(v) for _, v in constants), digest]),
                input_names=self.inputs,
                output_names=self.outputs,
                source=self.source,
                header=self.registered_header(ggml_type, text) + defines,
            )
        return kernel


def table_words(table) -> mx.array:
    """The gather's table input: ``table.data``'s bytes viewed (not copied) as the widest unsigned
    words, of 8, 4 or 2 bytes, that tile them. MLX's CUDA encoder ends a graph once the element
    counts of its kernels' inputs pass a budget (1,000 Mi elements on an H100 or H200): as uint8 a
    756 MB table spends 756 Mi of it on every lookup, though a lookup reads only its rows, so a
    graph ended every lookup or two; as uint64 a lookup spends 94 Mi (README, "Graphs")."""
    data = table.data
    vocab, row_bytes = data.shape
    for size, dtype in ((8, mx.uint64), (4, mx.uint32), (2, mx.uint16)):
        rows = size // math.gcd(row_bytes, size)  # table rows per line of whole words
        if vocab % rows == 0:
            return data.reshape(vocab // rows, rows * row_bytes).view(dtype)
    return data


def table_constants(table) -> tuple[tuple[str, int], ...]:
    """The constants every kernel takes from the table."""
    return (("FORMAT", table.format.ggml_type), ("DIMS", table.dims), ("VOCAB", table.vocab))


def gather_constants(table, dtype: mx.Dtype, id_dtype: mx.Dtype) -> tuple[tuple[str, object], ...]:
    """The gather's compiled-in constants, and out's and ids' dtypes (which name the kernel:
    they are in its generated signature, so each pair is a kernel of its own)."""
    return (*table_constants(table), ("VALUES", values_per_thread(table.dims)), ("T", dtype), ("I", id_dtype))


@cache
def gather_calls(kernel, dims: int, dtype: mx.Dtype) -> tuple:
    """``(words, ids [...]) -> [..., dims]`` by ``kernel`` (of :meth:`DeviceBackend.bind`), built
    each call, and the same call under ``mx.compile``, which replays it per ids shape. Kept for
    the process, as the kernel is, and shared by every bind of it (the functional
    ``embedding`` binds on each call): the table's words are an input, so MLX's compile cache
    holds no table. Grid: x = the DIMS / VALUES groups of a row, y = rows in flight
    (kernels/gather.h)."""
    groups, threadgroup = dims // values_per_thread(dims), (THREADGROUP, 1, 1)

    def call(words: mx.array, ids: mx.array) -> mx.array:
        n = ids.size
        if not n:
            return mx.zeros((*ids.shape, dims), dtype)
        return kernel(
            inputs=[words, ids if ids.ndim else ids.reshape(1)],  # MLX passes a kernel its
            # input's shape for 1 or more dimensions only
            grid=(groups, min(n, MAX_ROWS_IN_FLIGHT), 1),
            threadgroup=threadgroup,
            output_shapes=[(*ids.shape, dims)],
            output_dtypes=[dtype],
        )[0]

    return call, mx.compile(call)


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


@cache
def cuda_compute_capability() -> int:
    """The CUDA device's major compute capability; 0 without MLX's CUDA backend."""
    return int(mx.device_info().get("compute_capability_major", 0)) if mx.cuda.is_available() else 0


class DeviceBackend:
    """A GPU dialect's kernels: the gather (rows of the table, ``bind``), the matvec (logits), for
    a dialect whose prelude has 4-way byte dot products (``byte_dots``) the matvec on them
    (``bytedot``), and for one with a warp matrix multiply the matvec on that (``mma``), where
    ``matrix_units()`` says the device runs it. ``includes``: its compiler reads the kernel
    files from disk (see :class:`DeviceKernel`)."""

    def __init__(self, dialect: str, register, includes: bool = False, matrix_units=None, byte_dots: bool = False):
        def kernel(name: str, inputs: list[str], outputs: list[str], lanes: bool = True) -> DeviceKernel:
            return DeviceKernel(dialect, name, inputs, outputs, register, lanes, includes)

        self.gather_kernel = kernel("gather", ["table", "ids"], ["out"], lanes=False)
        self.matvec_kernel = kernel("matvec", ["table", "x"], ["out"])
        self.xruns_kernel = byte_dots and kernel("xruns", ["x"], ["runs"])
        self.bytedot_kernel = byte_dots and kernel("bytedot", ["table", "x"], ["out"])
        self.mma_kernel = matrix_units and kernel("mma", ["table", "xh", "x_sums"], ["out"])
        self.matrix_units = matrix_units or (lambda: False)

    def bind(self, table, dtype: mx.Dtype):
        """``ids [...] -> [..., dims]`` (ids of any shape) for this table and output dtype, a
        kernel built once per ids dtype (the first call with a dtype checks it is an integer
        one). Ids of at most COMPILED_IDS go through the kernel call's ``mx.compile``."""
        words = table_words(table)
        calls = {}  # ids dtype -> (kernel call, its mx.compile)

        def gather(ids: mx.array) -> mx.array:
            pair = calls.get(ids.dtype)
            if pair is None:
                check_dtype(ids.dtype)
                kernel = self.gather_kernel.for_constants(gather_constants(table, dtype, ids.dtype))
                pair = calls[ids.dtype] = gather_calls(kernel, table.dims, dtype)
            return pair[ids.size <= COMPILED_IDS](words, ids)

        return gather

    def matvec(self, table, x: mx.array, rows: int | None = None, vrows: int | None = None,
               values: int | None = None) -> mx.array:
        """``x [n, dims]`` (n >= 1, floating) -> logits ``[n, vocab]`` in x's dtype, streaming
        the table once per ``rows`` rows of x; the layout as in :func:`matvec_constants`."""
        return self._stream(self.matvec_kernel, table, x, x, matvec_constants(table, x, rows, vrows, values))

    def bytedot(self, table, x: mx.array, rows: int | None = None, vrows: int | None = None,
                runs: int | None = None) -> mx.array:
        """As :meth:`matvec`, by byte dot products (``bytedot_kernel``; quantized tables only) on
        :meth:`x_runs` of x, the layout as in :func:`bytedot_constants`."""
        assert table.format.quantized
        return self._stream(self.bytedot_kernel, table, self.x_runs(table, x), x,
                            bytedot_constants(table, x, rows, vrows, runs))

    def x_runs(self, table, x: mx.array) -> mx.array:
        """``x [n, dims]`` -> its runs' records ``[n, dims / 16, x_run_words] uint32`` for
        ``bytedot`` (kernels/xruns.h), a thread per run."""
        assert x.ndim == 2 and x.shape[1] == table.dims and table.dims % 16 == 0, (x.shape, table.dims)
        constants = xruns_constants(table, x)
        n_runs = x.shape[0] * table.dims // 16
        return self.xruns_kernel.for_constants(constants)(
            inputs=[x],
            grid=(-(-n_runs // THREADGROUP) * THREADGROUP, 1, 1),
            threadgroup=(THREADGROUP, 1, 1),
            output_shapes=[(x.shape[0], table.dims // 16, x_run_words(dict(constants)["PLANES"]))],
            output_dtypes=[mx.uint32],
        )[0]

    @staticmethod
    def _stream(kernel: DeviceKernel, table, operand: mx.array, x: mx.array, constants) -> mx.array:
        """A warp per VROWS table rows (kernels/matvec.h's grid): logits ``[n, vocab]`` in x's
        dtype of ``x [n, dims]``, which the kernel reads as ``operand`` (x itself, or its runs)."""
        assert x.ndim == 2 and x.shape[0] >= 1 and x.shape[1] == table.dims, (x.shape, table.dims)
        return kernel.for_constants(constants)(
            inputs=[table.data, operand],
            grid=(matvec_threads(table.vocab, dict(constants)["VROWS"]), 1, 1),
            threadgroup=(THREADGROUP, 1, 1),
            output_shapes=[(x.shape[0], table.vocab)],
            output_dtypes=[x.dtype],
        )[0]

    def mma(self, table, x: mx.array, tiles: tuple[int, int] | None = None) -> mx.array:
        """As :meth:`matvec`, on the matrix units (``matrix_units()``; quantized tables only), with
        ``tiles`` = (VTILES, XTILES) as in :func:`mma_constants`."""
        assert x.ndim == 2 and x.shape[0] >= 1 and x.shape[1] == table.dims and table.format.quantized
        constants = mma_constants(table, x, tiles)
        k = dict(constants)
        xh, x_sums = mma_operands(x, k["XTILES"])
        return self.mma_kernel.for_constants(constants)(
            inputs=[table.data, xh, x_sums],
            grid=(matvec_threads(table.vocab, MMA_ROWS * k["VTILES"]), 1, 1),
            threadgroup=(THREADGROUP, 1, 1),
            output_shapes=[(xh.shape[1], table.vocab)],
            output_dtypes=[x.dtype],
        )[0][: x.shape[0]]


METAL = DeviceBackend("metal", lambda: mx.fast.metal_kernel)  # no muser_mma in its prelude
# NVRTC compiles MLX's CUDA kernels and opens their #include "/absolute/path" files.
# mma.sync m16n8k16 in float16 and bfloat16: compute capability 8.0 (Ampere) and later.
# dp4a (kernels/bytedot.h's muser_dot4): every GPU MLX's CUDA backend runs on.
CUDA = DeviceBackend("cuda", lambda: mx.fast.cuda_kernel, includes=True,
                     matrix_units=lambda: cuda_compute_capability() >= 8, byte_dots=True)
