"""The CPU backend: the package's kernels (``kernels/``) compiled into an MLX C++ extension,
``muser_mlx._cpu`` (``csrc/``, built by ``setup.py``): the gather and the LM head as MLX
primitives, lazy, in the graph, traceable by ``mx.compile``.

:func:`unavailable` says why the extension cannot serve (not built, built for another CPU or
another MLX); the backend choice (``backends.select``) then warns once and runs MLX ops.
"""

from __future__ import annotations

from functools import cache

import mlx.core as mx

from ..ids import check_dtype
from . import tuning


@cache
def _module():
    """(the extension module, None) or (None, why it cannot be used)."""
    try:
        from .. import _cpu
    except ImportError as error:
        return None, f"muser_mlx._cpu cannot be imported ({error})"
    if _cpu.mlx_version != mx.__version__:
        return None, f"muser_mlx._cpu was built against MLX {_cpu.mlx_version}, this is MLX {mx.__version__}"
    return _cpu, None


def unavailable() -> str | None:
    """Why the extension cannot run here, or None when it can."""
    return _module()[1]


def has_format(qtype: str) -> bool:
    """Whether this build of the extension has kernels for ``qtype`` (a format added to
    ``kernels/`` after the build has none until it is rebuilt)."""
    module = _module()[0]
    return module is not None and qtype in module.formats


def bind(table, dtype: mx.Dtype):
    """``ids [...] -> [..., dims]`` in ``dtype`` by the extension's gather (ids of any shape and
    integer dtype, clamped to ``min(unsigned(id), vocab - 1)`` as the GPU kernels do)."""
    gather, data, ggml_type, dims = _module()[0].gather, table.data, table.format.ggml_type, table.dims

    def lookup(ids: mx.array) -> mx.array:
        check_dtype(ids.dtype)
        return gather(data, ids, ggml_type, dims, dtype, stream=mx.cpu)

    return lookup


def matvec(table, x: mx.array) -> mx.array:
    """``x [n, dims]`` (n >= 1) -> logits ``[n, vocab]`` in x's dtype from the table's bytes,
    float32 accumulation: a quantized table's by the byte dot products where the build has them
    and ``tuning.CPU_BYTE_DOTS`` (kernels/bytedot_cpu.h), else from the dequantized values
    (kernels/matvec.h). A plain MLX primitive: its vjp for x is ``g @ W``, W dequantized in g's
    dtype."""
    return _module()[0].head(table.data, x, table.format.ggml_type, byte_dots=tuning.CPU_BYTE_DOTS, stream=mx.cpu)
