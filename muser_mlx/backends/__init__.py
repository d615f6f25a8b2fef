"""Where a lookup runs: a GPU kernel (Metal or CUDA), the same kernels on the CPU (the C++
extension, ``cpu``) or the portable MLX-ops path.

Every backend binds a table and an output dtype, ``bind(table, dtype)``, into a function from
integer ``ids`` of any shape to a lazy ``ids.shape + (dims,)`` array in ``dtype``
(ids of another dtype raise ``TypeError``). The GPU backends also run the LM head's streaming
kernels (``head.py``).

    source.py   a kernel's header from kernels/, its name, a Launch of it
    tuning.py   the measured launch constants; benchmarks set them through tuning.fixed
    gather.py   the gather's launch and its compiled small-batch call
    head.py     the LM head's kernels and the choice among them
    device.py   Metal and CUDA: their kernels, capabilities, the table bytes as kernels read them
    cpu.py      the CPU extension muser_mlx._cpu: the gather and the head as MLX primitives
    ops.py      the portable path in MLX ops
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from functools import cache
from typing import TYPE_CHECKING

import mlx.core as mx

from . import cpu, ops
from .device import CUDA, METAL

if TYPE_CHECKING:
    from ..table import Table

BACKENDS = {"metal": METAL, "cuda": CUDA, "cpu": cpu, "ops": ops}
KERNEL_BACKENDS = ("metal", "cuda")  # those that also run the streamed LM head (head.py)
_GPU_BACKEND = "metal" if mx.metal.is_available() else "cuda" if mx.cuda.is_available() else None
_GPU = mx.DeviceType.gpu


def on_gpu() -> bool:
    """Whether the default device is a GPU (by identity of its type: the cheap test, per lookup)."""
    return mx.default_device().type is _GPU


def select(backend: str = "auto", table: Table | None = None) -> str:
    """``"auto"``: the GPU kernel when the default device is a GPU that has one, else the CPU
    extension (``"cpu"``), else ``"ops"`` (warning once why). With a ``table``, a format the
    extension was built without takes ``"ops"`` (``"auto"``, warning once) or raises (``"cpu"``)."""
    return chosen(backend, None if table is None else table.qtype, on_gpu())


@cache
def chosen(backend: str, qtype: str | None, gpu: bool) -> str:
    """:func:`select` for a table of ``qtype`` (None: no table in particular) while the default
    device is (``gpu``) or is not a GPU: what the extension and MLX's build have is fixed for the
    process, so the answer is kept, and a module's call asks at the cost of a cache hit (a
    backend that cannot serve raises, and a raise is not kept)."""
    if backend == "auto":
        if _GPU_BACKEND and gpu:
            return _GPU_BACKEND
        return "cpu" if _cpu_serves(qtype) else "ops"
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; choose from auto, {', '.join(BACKENDS)}")
    if backend == "cpu":
        if reason := cpu.unavailable():
            raise ValueError(f"backend 'cpu' is not available: {reason}")
        if qtype is not None and not cpu.has_format(qtype):
            raise ValueError(f"backend 'cpu' has no {qtype} kernels: rebuild muser_mlx._cpu (pip install .)")
    elif backend != "ops" and backend != _GPU_BACKEND:
        raise ValueError(f"backend {backend!r} is not available with this MLX build")
    return backend


def _cpu_serves(qtype: str | None) -> bool:
    if _cpu_reason() is not None:
        return False
    return qtype is None or cpu.has_format(qtype) or _warn_missing_format(qtype)


@cache
def _cpu_reason() -> str | None:
    """Why the CPU extension cannot serve, warned once (None: it can)."""
    reason = cpu.unavailable()
    if reason is not None:
        warnings.warn(f"{reason}: muser_mlx runs MLX ops on the CPU", RuntimeWarning, stacklevel=5)
    return reason


@cache
def _warn_missing_format(qtype: str) -> bool:
    warnings.warn(
        f"muser_mlx._cpu was built without {qtype} kernels: {qtype} runs MLX ops on the CPU (rebuild it: pip install .)",
        RuntimeWarning,
        stacklevel=5,
    )
    return False


def bind(table: Table, dtype: mx.Dtype, backend: str, prepared: bool = False) -> Callable[[mx.array], mx.array]:
    """``backend``'s gather of ``table`` into ``dtype`` (a backend :func:`select` gave for the
    table): ``ids [...] -> [..., dims]``. On a GPU backend ``prepared`` says that ``table.data`` is
    the kernels' data already (``DeviceBackend.kernel_data``)."""
    if backend in KERNEL_BACKENDS:
        return BACKENDS[backend].bind(table, dtype, prepared)
    return BACKENDS[backend].bind(table, dtype)
