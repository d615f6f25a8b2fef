"""The gather on a GPU dialect: rows ``ids`` of the table, dequantized (kernels/gather.h).

Grid: x = the DIMS / VALUES groups of a row, a thread per group; y = rows in flight, one id each
(more ids loop over rows). One compiled kernel per (format, dims, vocab, values, dtypes): the
number of ids is read from their shape at run time, so one kernel serves every batch width.
"""

from __future__ import annotations

import math
from functools import cache, lru_cache

import mlx.core as mx

from ..formats import Format
from ..ids import check_dtype
from . import tuning
from .source import DeviceKernel, Launch

MAX_ROWS_IN_FLIGHT = 65535  # the grid's height: CUDA's limit on a grid's y


def table_words(data: mx.array) -> mx.array:
    """The gather's table input: the bytes ``data [vocab, row_bytes]`` viewed (not copied) as the
    widest unsigned words, of 8, 4 or 2 bytes, that tile them. MLX's CUDA encoder ends a graph
    once the element counts of its kernels' inputs pass a budget; as words a lookup spends an
    eighth of it (docs/performance.md, "Table words")."""
    vocab, row_bytes = data.shape
    for size, dtype in ((8, mx.uint64), (4, mx.uint32), (2, mx.uint16)):
        rows = size // math.gcd(row_bytes, size)  # table rows per line of whole words
        if vocab % rows == 0:
            return data.reshape(vocab // rows, rows * row_bytes).view(dtype)
    return data


def gather_launch(fmt: Format, dims: int, vocab: int, ids_shape: tuple[int, ...], dtype: mx.Dtype) -> Launch:
    """The launch for ``ids`` of ``ids_shape`` (at least one) into a table of ``fmt``, ``dims``
    and ``vocab``: out ``ids_shape + (dims,)`` in ``dtype``."""
    values = tuning.gather_values(dims)
    n = math.prod(ids_shape)
    return Launch(
        format=fmt,
        defines=(("DIMS", dims), ("VOCAB", vocab), ("VALUES", values)),
        grid=(dims // values, min(n, MAX_ROWS_IN_FLIGHT), 1),
        threadgroup=(tuning.THREADGROUP, 1, 1),
        output_shape=(*ids_shape, dims),
        output_dtype=dtype,
    )


@cache
def gather_calls(kernel: DeviceKernel, fmt: Format, dims: int, vocab: int, dtype: mx.Dtype) -> tuple:
    """``(words, ids [...]) -> [..., dims]`` by ``kernel``, built each call, and the same call
    under ``mx.compile``, which replays it per ids shape and dtype. Kept for the process, as MLX
    keeps the kernel, and shared by every bind of the same table shape: the table's words are an
    input, so MLX's compile cache holds no table. The launches of recent ids shapes are kept:
    building one is host time on every uncompiled call."""

    @lru_cache(maxsize=256)
    def launch_for(ids_shape: tuple[int, ...]) -> Launch:
        return gather_launch(fmt, dims, vocab, ids_shape, dtype)

    def call(words: mx.array, ids: mx.array) -> mx.array:
        if not ids.size:
            return mx.zeros((*ids.shape, dims), dtype)
        launch = launch_for(ids.shape)
        # MLX passes a kernel its input's shape for 1 or more dimensions only
        return kernel(launch, [words, ids if ids.ndim else ids.reshape(1)])

    return call, mx.compile(call)


def bind(kernel: DeviceKernel, words: mx.array, fmt: Format, dims: int, dtype: mx.Dtype):
    """``ids [...] -> [..., dims]`` (ids of any integer dtype and shape; the first call with a
    dtype checks it) from the table's :func:`table_words` ``words`` by ``kernel``. Ids of at most
    ``tuning.COMPILED_IDS`` replay the call's ``mx.compile``."""
    vocab = words.nbytes // fmt.row_bytes(dims)
    call, compiled = gather_calls(kernel, fmt, dims, vocab, dtype)
    checked: set[mx.Dtype] = set()
    limit = tuning.COMPILED_IDS

    def gather(ids: mx.array) -> mx.array:
        if ids.dtype not in checked:
            check_dtype(ids.dtype)
            checked.add(ids.dtype)
        return (compiled if ids.size <= limit else call)(words, ids)

    return gather
