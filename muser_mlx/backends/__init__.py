"""Where a lookup runs: a GPU kernel (Metal or CUDA) or the portable MLX-ops path.

Every backend binds a table and an output dtype, ``bind(table, dtype)``, into a function from
integer ``ids`` of any shape to a lazy ``ids.shape + (dims,)`` array in ``dtype``
(ids of another dtype raise ``TypeError``).
"""

from __future__ import annotations

import mlx.core as mx

from . import ops
from .kernel import CUDA, METAL

BACKENDS = {"metal": METAL, "cuda": CUDA, "ops": ops}
KERNEL_BACKENDS = ("metal", "cuda")  # those that also have matvec(table, x): the streamed LM head
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


def bind(table, dtype: mx.Dtype, backend: str):
    return BACKENDS[backend].bind(table, dtype)
