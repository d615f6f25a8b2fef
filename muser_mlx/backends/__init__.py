"""Where a lookup runs: a GPU kernel (Metal or CUDA) or the portable MLX-ops path.

Every backend binds a table and an output dtype, ``bind(table, dtype)``, into a function from
integer ``ids`` of any shape to a lazy ``ids.shape + (dims,)`` array in ``dtype``
(ids of another dtype raise ``TypeError``). The GPU backends also run the LM head's streaming
kernels (``head.py``).

    source.py   a kernel's header from kernels/, its name, a Launch of it
    tuning.py   the measured launch constants; benchmarks set them through tuning.fixed
    gather.py   the gather's launch and its compiled small-batch call
    head.py     the LM head's kernels and the choice among them
    device.py   Metal and CUDA: their kernels, capabilities, the table bytes as kernels read them
    ops.py      the portable path in MLX ops
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import mlx.core as mx

from . import ops
from .device import CUDA, METAL

if TYPE_CHECKING:
    from ..table import Table

BACKENDS = {"metal": METAL, "cuda": CUDA, "ops": ops}
KERNEL_BACKENDS = ("metal", "cuda")  # those that also run the streamed LM head (head.py)
_GPU_BACKEND = "metal" if mx.metal.is_available() else "cuda" if mx.cuda.is_available() else None
_GPU = mx.DeviceType.gpu


def on_gpu() -> bool:
    """Whether the default device is a GPU (by identity of its type: the cheap test, per lookup)."""
    return mx.default_device().type is _GPU


def select(backend: str = "auto") -> str:
    """``"auto"``: the GPU kernel when the default device is a GPU that has one, else ``"ops"``."""
    if backend == "auto":
        return _GPU_BACKEND if _GPU_BACKEND and on_gpu() else "ops"
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; choose from auto, {', '.join(BACKENDS)}")
    if backend != "ops" and backend != _GPU_BACKEND:
        raise ValueError(f"backend {backend!r} is not available with this MLX build")
    return backend


def bind(table: Table, dtype: mx.Dtype, backend: str) -> Callable[[mx.array], mx.array]:
    """``backend``'s gather of ``table`` into ``dtype``: ``ids [...] -> [..., dims]``."""
    return BACKENDS[backend].bind(table, dtype)
