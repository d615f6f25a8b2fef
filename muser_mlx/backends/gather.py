"""The gather on a GPU dialect: rows ``ids`` of the table, dequantized (kernels/gather.h).

Grid: x = the DIMS / VALUES groups of a row, a thread per group; y = rows in flight, one id each
(more ids loop over rows). One compiled kernel per (format, dims, vocab, values, dtypes): the
number of ids is read from their shape at run time, so one kernel serves every batch width.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import cache, lru_cache

import mlx.core as mx

from ..formats import Format
from ..ids import check_dtype
from . import tuning
from .source import DeviceKernel, Launch

MAX_ROWS_IN_FLIGHT = 65535  # the grid's height: CUDA's limit on a grid's y


def word_layout(vocab: int, row_bytes: int) -> tuple[tuple[int, int], mx.Dtype]:
    """The shape and dtype of :func:`table_words` of a ``uint8 [vocab, row_bytes]`` table."""
    for size, dtype in ((8, mx.uint64), (4, mx.uint32), (2, mx.uint16)):
        rows = size // math.gcd(row_bytes, size)  # table rows per line of whole words
        if vocab % rows == 0:
            return (vocab // rows, rows * row_bytes), dtype
    return (vocab, row_bytes), mx.uint8


def table_words(data: mx.array) -> mx.array:
    """The gather's table input: the bytes ``data [vocab, row_bytes]`` viewed (not copied) as the
    widest unsigned words, of 8, 4 or 2 bytes, that tile them. MLX's CUDA encoder ends a graph
    once the element counts of its kernels' inputs pass a budget; as words a lookup spends an
    eighth of it (docs/performance.md, "Table words")."""
    shape, dtype = word_layout(*data.shape)
    return data if dtype == mx.uint8 else data.reshape(shape).view(dtype)


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
    """``(words, ids [...]) -> [..., dims]`` by ``kernel`` from the table's :func:`table_words`,
    built each call, and the same call under ``mx.compile``, which replays it per ids shape and
    dtype. Kept for the process, as MLX keeps the kernel, and shared by every bind of the same
    table shape: the table's words are an input, so MLX's compile cache holds no table. Ids of a
    dtype that is not an integer raise ``TypeError``. The launches of recent ids shapes and
    dtypes are kept, ready to run: building one is host time on every uncompiled call."""
    words_dtype = word_layout(vocab, fmt.row_bytes(dims))[1]

    @lru_cache(maxsize=256)
    def launch_for(ids_shape: tuple[int, ...], ids_dtype: mx.Dtype) -> Callable[[list[mx.array]], mx.array]:
        check_dtype(ids_dtype)
        return kernel.runner(gather_launch(fmt, dims, vocab, ids_shape, dtype), (words_dtype, ids_dtype))

    def call(words: mx.array, ids: mx.array) -> mx.array:
        if not ids.size:
            check_dtype(ids.dtype)
            return mx.zeros((*ids.shape, dims), dtype)
        # MLX passes a kernel its input's shape for 1 or more dimensions only
        return launch_for(ids.shape, ids.dtype)([words, ids if ids.ndim else ids.reshape(1)])

    return call, mx.compile(call)


tuning.keeps_decisions(gather_calls.cache_clear)


def bind(kernel: DeviceKernel, words: mx.array, fmt: Format, dims: int, dtype: mx.Dtype):
    """``ids [...] -> [..., dims]`` (ids of any integer dtype and shape) from the table's
    :func:`table_words` ``words`` by ``kernel``. Ids of at most ``tuning.COMPILED_IDS`` replay
    the call's ``mx.compile``."""
    vocab = words.nbytes // fmt.row_bytes(dims)
    call, compiled = gather_calls(kernel, fmt, dims, vocab, dtype)
    limit = tuning.COMPILED_IDS

    def gather(ids: mx.array) -> mx.array:
        return (compiled if ids.size <= limit else call)(words, ids)

    return gather
