"""The GPU dialects, Metal and CUDA: their kernels, what their devices can run, and the table
bytes as their kernels read them (aligned; on CUDA, resident)."""

from __future__ import annotations

import weakref
from collections.abc import Callable
from functools import cache
from typing import TYPE_CHECKING

import mlx.core as mx
import numpy as np

from . import gather
from .source import DeviceKernel

if TYPE_CHECKING:
    from ..table import Table

KERNEL_ALIGNMENT = 16  # bytes: the kernels' widest table load (kernels/formats.h, bytes_at)


# The most dynamic shared memory a threadgroup may take (the opt-in maximum per block), bytes, by
# CUDA compute capability (CUDA C++ Programming Guide, "Technical Specifications per Compute
# Capability"); the others of 8.0 and later (8.6, 8.9, 12.x: GeForce and workstation GPUs) and any
# not listed are taken at the least of them.
CUDA_GROUP_SHARED = {(8, 0): 163 << 10, (8, 7): 163 << 10, (9, 0): 227 << 10, (10, 0): 227 << 10, (10, 3): 227 << 10}
CUDA_GROUP_SHARED_LEAST = 99 << 10


@cache
def cuda_capability() -> tuple[int, int]:
    """The CUDA device's compute capability (major, minor); (0, 0) without MLX's CUDA backend."""
    if not mx.cuda.is_available():
        return 0, 0
    info = mx.device_info()
    return int(info.get("compute_capability_major", 0)), int(info.get("compute_capability_minor", 0))


def cuda_compute_capability() -> int:
    """The CUDA device's major compute capability; 0 without MLX's CUDA backend."""
    return cuda_capability()[0]


def cuda_warpgroups() -> bool:
    """Whether the CUDA device runs warpgroup matrix multiplies (wgmma): compute capability 9.0,
    for which MLX's NVRTC compiles sm_90a (later ones have other matrix instructions)."""
    return cuda_capability() == (9, 0)


def cuda_group_shared() -> int:
    """The most dynamic shared memory a threadgroup of the CUDA device may take, bytes
    (CUDA_GROUP_SHARED); 0 without MLX's CUDA backend."""
    capability = cuda_capability()
    return 0 if capability == (0, 0) else CUDA_GROUP_SHARED.get(capability, CUDA_GROUP_SHARED_LEAST)


class DeviceBackend:
    """A GPU dialect's kernels: the gather (``bind``), the LM head's lane-wise matvec, for a
    dialect whose lanes have 4-way byte dot products (``byte_dots``) the matvec on them and
    x's run records it reads (``xruns_kernel``), and for one with a warp matrix multiply the
    matvec on that, where ``matrix_units()`` says the device runs it (and ``warpgroups()``, its
    warpgroup multiplies); ``group_shared()``: the most
    dynamic shared memory a threadgroup may take, bytes (0: the dialect's kernels take none
    beyond what they declare). ``includes``: its compiler
    reads the kernel files from disk (:class:`DeviceKernel`). ``resident``: a table made on the
    host must be moved to the device before random reads (:meth:`kernel_data`)."""

    def __init__(
        self,
        dialect: str,
        register,
        *,
        includes: bool = False,
        matrix_units=None,
        warpgroups=None,
        group_shared=None,
        byte_dots: bool = False,
        resident: bool = False,
    ):
        def kernel(name: str, inputs: list[str], outputs: list[str], lanes: bool = True) -> DeviceKernel:
            return DeviceKernel(dialect, name, inputs, outputs, register, lanes, includes)

        self.gather_kernel = kernel("gather", ["table", "ids"], ["out"], lanes=False)
        self.matvec_kernel = kernel("matvec", ["table", "x"], ["out"])
        self.byte_dots = byte_dots
        self.xruns_kernel = kernel("xruns", ["x"], ["runs"]) if byte_dots else None
        self.bytedot_kernel = kernel("bytedot", ["table", "x"], ["out"]) if byte_dots else None
        self.mma_kernel = kernel("mma", ["table", "xh", "x_sums"], ["out"]) if matrix_units else None
        self.tile_mma_kernel = kernel("tile_mma", ["table", "x", "x_steps"], ["out"]) if matrix_units else None
        self.matrix_units = matrix_units or (lambda: False)
        self.warpgroups = warpgroups or (lambda: False)
        self.group_shared = group_shared or (lambda: 0)
        self.resident = resident
        # id(data) -> (a weak reference to data, its aligned copy or None, the words of the two)
        self._ready: dict[int, tuple[weakref.ref, mx.array | None, mx.array]] = {}

    def bind(self, table: Table, dtype: mx.Dtype, prepared: bool = False) -> Callable[[mx.array], mx.array]:
        """``ids [...] -> [..., dims]`` in ``dtype`` from ``table`` (see :func:`gather.bind`);
        ``prepared``: ``table.data`` is :meth:`kernel_data` already (see :meth:`kernel_words`)."""
        words = gather.table_words(table.data) if prepared else self.kernel_words(table.data)
        return gather.bind(self.gather_kernel, words, table.format, table.dims, dtype)

    def kernel_data(self, data: mx.array) -> mx.array:
        """The table bytes ``data`` as the kernels read them, prepared once per array:

        - aligned: a fresh copy where ``data`` starts off a KERNEL_ALIGNMENT boundary (a view
          into a larger array; fresh allocations are aligned);
        - resident (CUDA): an array made on the host is managed memory that migrates to the GPU
          page by page on first touch, so random row gathers would fault on each new page; one
          sequential pass moves it all (docs/performance.md, "Resident tables").

        A tracer (the weight of a module whose state an ``mx.compile`` takes as an input) has no
        address: it stands for the arrays the compiled function is called with, and is used as
        it is."""
        return self._prepared(data)[0]

    def kernel_words(self, data: mx.array) -> mx.array:
        """The gather's table input, :func:`gather.table_words` of :meth:`kernel_data`, made
        once per array with it: a lookup of one id is mostly host time, and the view is two of
        the three operations it would build (docs/performance.md, "Compiled small batches").

        Prepare at the entry point, on the caller's array: inside an ``mx.custom_function`` with a
        vjp MLX hands the function new Python arrays for the same buffers, which no cache by
        identity knows, so preparing there would evaluate the table and, on CUDA, pass over it on
        every call (docs/performance.md, "Resident tables"). The head's kernels take prepared
        tables (``linear.differentiable_head`` prepares them) and view them with
        :func:`gather.table_words` alone."""
        entry = self._ready.get(id(data))
        if entry is not None and entry[0]() is data:  # the path of every call but the first
            return entry[2]
        ready, words = self._prepared(data)
        return gather.table_words(ready) if words is None else words

    def _prepared(self, data: mx.array) -> tuple[mx.array, mx.array | None]:
        """(kernel data, its words); a tracer as it is, without words."""
        key = id(data)
        entry = self._ready.get(key)
        if entry is not None and entry[0]() is data:
            return (data if entry[1] is None else entry[1]), entry[2]
        try:
            mx.eval(data)
        except ValueError:  # MLX: no evaluation during function transformations
            return data, None
        ready = mx.array(np.array(data)) if np.asarray(data).ctypes.data % KERNEL_ALIGNMENT else data
        if self.resident:
            mx.eval(mx.max(ready, stream=mx.gpu))
        words = gather.table_words(ready)
        mx.eval(words)  # a view of ready's buffer, detached from data's Python object
        self._ready[key] = (
            weakref.ref(data, lambda _: self._ready.pop(key, None)),
            None if ready is data else ready,
            words,
        )
        return ready, words


METAL = DeviceBackend("metal", lambda: mx.fast.metal_kernel)  # no muser_mma or muser_dot4 in its lanes
# NVRTC compiles MLX's CUDA kernels and opens their #include "/absolute/path" files.
# mma.sync m16n8k16 in float16 and bfloat16: compute capability 8.0 (Ampere) and later.
# dp4a (kernels/bytedot.h's muser_dot4): every GPU MLX's CUDA backend runs on.
CUDA = DeviceBackend(
    "cuda",
    lambda: mx.fast.cuda_kernel,
    includes=True,
    matrix_units=lambda: cuda_compute_capability() >= 8,
    warpgroups=lambda: cuda_warpgroups(),
    group_shared=lambda: cuda_group_shared(),
    byte_dots=True,
    resident=True,
)
