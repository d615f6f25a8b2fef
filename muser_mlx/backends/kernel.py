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


KERNELS = Path(str(files("muser_mlx.kernels"))).absolute()  # the kernel source files


def kernel_source(name: str) -> str:
    return (KERNELS / name).read_text()


def values_per_thread(dims: int) -> int:
    """Values per decode call (the gather's outputs per thread, the matvec's per lane and step):
    8 (two 16-byte float32 stores), or the largest of 4, 2, 1 that divides ``dims``. On an H100
    the gather's 2-D grid with 8 values and 256-thread rows measured best among 4/8 values,
    128/256 threads and row-per-threadgroup variants."""
    return next(v for v in (8, 4, 2, 1) if dims % v == 0)


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


def gather_constants(table, dtype: mx.Dtype, id_dtype: mx.Dtype) -> tuple[tuple[str, object], ...]:
    """The gather's compiled-in constants, and out's and ids' dtypes (which name the kernel:
    they are in its generated signature, so each pair is a kernel of its own)."""
    return (
        ("FORMAT", table.format.ggml_type),
        ("DIMS", table.dims),
        ("VOCAB", table.vocab),
        ("VALUES", values_per_thread(table.dims)),
        ("T", dtype),
        ("I", id_dtype),
    )


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


METAL = DeviceBackend("metal", lambda: mx.fast.metal_kernel)  # no muser_mma in its prelude
# NVRTC compiles MLX's CUDA kernels and opens their #include "/absolute/path" files.
# mma.sync m16n8k16 in float16 and bfloat16: compute capability 8.0 (Ampere) and later.
# dp4a (kernels/bytedot.h's muser_dot4): every GPU MLX's CUDA backend runs on.
CUDA = DeviceBackend("cuda", lambda: mx.fast.cuda_kernel, includes=True,
                     matrix_units=lambda: cuda_compute_capability() >= 8, byte_dots=True)
