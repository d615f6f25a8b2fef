"""Logits ``x @ W.T`` straight from a quantized table ``W``: :func:`as_linear` (an embedding's
tied LM head) and :class:`Linear` (a projection holding a GGUF tensor's bytes).

Which kernel computes them, for how many rows of x of which dtype, is
:func:`muser_mlx.backends.head.choose`'s decision: streamed kernels for few rows on a GPU (the
table read once per pass, no float copy of it), on CUDA a tiled matrix multiply through shared
memory for some more rows of 16-bit x, the tiled matmul otherwise; a float table whose values are
x's dtype goes, where the tiled matmul would, straight to MLX's matmul on its bytes.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import mlx.core as mx
from mlx.nn.layers.distributed import sum_gradients

from . import backends, member_bytes
from .backends import head, tuning
from .formats import FORMATS
from .gguf import GGUFFile, matrix_tensor, opened
from .quantized import TableModule
from .table import Table

X_DTYPES = (mx.float32, mx.float16, mx.bfloat16)


def as_linear(table: Table, x: mx.array, *, backend: str = "auto") -> mx.array:
    """Logits ``x @ W.T`` of the quantized ``table`` ``W``: ``x [..., dims]`` -> ``[..., vocab]``.

    Lazy, and traceable by ``mx.compile``. The output dtype is x's dtype (as for
    ``mlx.nn.QuantizedEmbedding.as_linear``); the dot products accumulate in float32 from the
    exact dequantized values on the streamed path (but where it takes the byte dot products: one
    row of a large quantized table on CUDA, every quantized table on the CPU extension off
    macOS, with x as integers per run of 16 values, each logit within 2^-21 of the run's largest
    |x| against |W| for float32 x, 2^-14 for 16-bit x), and from the weights rounded to x's dtype
    on the tiled matrix multiply (float16/bfloat16 x only) and in MLX's matmul of x's dtype on the
    tiled path (so float16/bfloat16 x sees the weights rounded to its dtype there).

    Args:
        table (Table): the quantized table, ``vocab`` rows of width ``dims``.
        x: ``mx.array`` (or array-like) of float32, float16 or bfloat16, last axis ``dims``.
        backend (str): ``"auto"``, ``"metal"``, ``"cuda"``, ``"cpu"`` or ``"ops"`` (see ``embedding``).
    """
    backend = backends.select(backend, table)
    x = mx.array(x) if not isinstance(x, mx.array) else x
    if x.dtype not in X_DTYPES:
        raise TypeError(f"as_linear takes float32, float16 or bfloat16 x, got {x.dtype}")
    if x.ndim == 0 or x.shape[-1] != table.dims:
        raise ValueError(f"x must have shape [..., {table.dims}] for {table!r}, got {list(x.shape)}")
    if x.size == 0:
        return mx.zeros((*x.shape[:-1], table.vocab), x.dtype)
    return differentiable_head(table.qtype, table.vocab, table.row_bytes, backend)(table.data, x)


def member_projection(module: TableModule, x) -> mx.array:
    """``x [..., dims]`` -> ``x @ W.T`` (plus the module's ``bias``) for a member's rows ``W`` of a
    projection split by output rows over ``module.group``; x's gradient summed over the group."""
    x = mx.array(x) if not isinstance(x, mx.array) else x
    y = as_linear(module.table, sum_gradients(module.group)(x), backend=module.backend)
    return y + module["bias"] if "bias" in module else y


@cache
def differentiable_head(qtype: str, vocab: int, row_bytes: int, backend: str):
    """``(weight, x [..., dims]) -> logits [..., vocab]`` (x not empty) for a ``uint8 [vocab,
    row_bytes]`` table of ``qtype``, one for the process per format, sizes and backend.

    The logits are an ``mx.custom_function`` of ``x [..., dims]`` as it is (the kernels read its
    rows whatever its leading shape): the kernels have no derivative of
    their own (MLX: "[Primitive::vjp] Not implemented for CustomKernel"), so its vjp gives x's
    cotangent from the same bytes, :func:`input_gradient`; the table is frozen, its cotangent
    zeros, built lazily and so never allocated. On a GPU backend, x of at most ``tuning.COMPILED_ROWS``
    rows goes through ``mx.compile`` of the whole call, replayed per x shape."""
    fmt = FORMATS[qtype]
    dims = row_bytes // fmt.block_bytes * fmt.block_values

    @mx.custom_function
    def logits(weight: mx.array, x: mx.array) -> mx.array:
        return head.logits(Table(weight, fmt, dims, vocab), x, backend)

    @logits.vjp
    def logits_vjp(primals, cotangent, output):
        weight = primals[0]
        return mx.zeros_like(weight), input_gradient(Table(weight, fmt, dims, vocab), cotangent, backend)

    if backend not in backends.KERNEL_BACKENDS:
        return logits
    compiled, device = mx.compile(logits), backends.BACKENDS[backend]

    def kernel_call(weight: mx.array, x: mx.array) -> mx.array:
        # the bytes as the kernels read them (aligned, resident) before a trace, which sees a tracer
        weight = device.kernel_data(weight)
        return (compiled if x.size <= tuning.COMPILED_ROWS * dims else logits)(weight, x)

    return kernel_call


tuning.keeps_decisions(differentiable_head.cache_clear)


def input_gradient(table: Table, g: mx.array, backend: str) -> mx.array:
    """``dL/dx = g @ W``: ``g [..., vocab]`` -> ``[..., dims]`` in g's dtype, the tiles of ``W``
    (:func:`head.over_tiles`, in g's dtype) multiplied and summed in float32, each tile after the
    sum before it; for a float table whose values are g's dtype one matmul on them as they are
    (:func:`head.float_values`)."""
    if head.values_of(table, g.dtype):
        return g @ head.float_values(table)

    def step(start: int, stop: int, tile: mx.array, total: mx.array | None) -> mx.array:
        part = (g[..., start:stop] @ tile).astype(mx.float32)  # [..., dims]
        return part if total is None else total + part

    return head.over_tiles(table, g.dtype, backend, step)[-1].astype(g.dtype)


class Linear(TableModule):
    """A drop-in for ``mlx.nn.Linear`` over a GGUF tensor's bytes: ``y = x @ W.T (+ bias)``.

    ``W`` is ``output_dims`` rows of ``input_dims`` values of ``qtype``, ``weight`` their bytes
    ``uint8 [output_dims, row_bytes]`` (a GGUF 2-D tensor exactly: ggml's ``ne0`` is
    ``input_dims``), frozen like ``nn.QuantizedLinear``'s; ``bias`` an optional float
    ``[output_dims]``. ``Linear(input_dims, output_dims, bias, qtype)`` holds a zero table for a
    model's ``__init__`` and ``load_weights`` to fill; :meth:`from_gguf`, :meth:`from_table` and
    :meth:`from_linear` build a filled one.

    The output is in x's dtype (float32, float16 or bfloat16) plus the bias's promotion, as
    ``nn.Linear``; computed by :func:`as_linear` (the kernel ``backends.head.choose`` picks by
    rows of x: streamed kernels for few rows on a GPU, the tiled matrix multiply on CUDA for more,
    the CPU extension's head at every row count off macOS, else tiles of dequantized rows into MLX's
    matmul; for a float table of x's dtype, MLX's matmul on its bytes as they are),
    differentiable in x.
    """

    def __init__(
        self, input_dims: int, output_dims: int, bias: bool = False, qtype: str = "Q4_K", backend: str = "auto"
    ):
        super().__init__(output_dims, input_dims, qtype, backend)
        if bias:
            self.bias = mx.zeros((output_dims,))
        self.freeze()

    @classmethod
    def from_table(cls, table: Table, bias: mx.array | None = None, **kwargs) -> Linear:
        """A projection holding ``table``'s bytes (not copied): ``table.vocab`` outputs of
        ``table.dims`` inputs, and ``bias`` if given (real floats ``[table.vocab]``, else
        ``ValueError``)."""
        module = cls._around(table, table.dims, table.vocab, bias is not None, table.qtype, **kwargs)
        if bias is not None:
            bias = mx.array(bias)
            if bias.shape != (table.vocab,) or not mx.issubdtype(bias.dtype, mx.floating):
                raise ValueError(
                    f"a bias of {table.vocab} real floats is needed, got {str(bias.dtype).rsplit('.', 1)[-1]} "
                    f"{list(bias.shape)}"
                )
            module.bias = bias
            module.freeze()
        return module

    @classmethod
    def from_gguf(cls, path: str | Path | GGUFFile, tensor: str = "output.weight", **kwargs) -> Linear:
        """Load the 2-D ``tensor`` of the GGUF at ``path`` (or of a file already open), ``[out, in]``
        (ggml's shape ``[in, out]``); ``GGUFError`` on a bad file or a tensor that is not such."""
        with opened(path) as f:
            info = matrix_tensor(f, tensor, "a Linear is [in, out]")
            table = Table(member_bytes.read(f, info), FORMATS[info.qtype], *info.shape, f"{f.path}:{tensor}")
        return cls.from_table(table, **kwargs)

    @classmethod
    def from_linear(cls, linear, qtype: str = "Q4_K", **kwargs) -> Linear:
        """Quantize an ``mlx.nn.Linear`` (its float weight ``[output_dims, input_dims]``; the
        bias is kept as it is) to ``qtype`` with :func:`muser_mlx.quantize`."""
        from .quantize import quantize

        weight = linear.weight
        table = Table.from_bytes(quantize(weight, qtype), qtype, weight.shape[1])
        return cls.from_table(table, linear.get("bias"), **kwargs)

    @property
    def input_dims(self) -> int:
        return self.dims

    @property
    def output_dims(self) -> int:
        return self["weight"].shape[0]

    def __call__(self, x: mx.array) -> mx.array:
        # every projection of a model, once per token in a decode step: the checks of as_linear
        # in a few Python operations, then the cached call (on a GPU a compiled replay)
        weight = self["weight"]
        if type(x) is mx.array and x.dtype in X_DTYPES and x.ndim and x.size and x.shape[-1] == self.dims:
            y = differentiable_head(self._format.name, *weight.shape, self._resolved_backend(self._backend))(weight, x)
        else:
            y = as_linear(self.table, x, backend=self._backend)
        return y + self["bias"] if "bias" in self else y

    def to_lora(self, r: int = 8, scale: float = 20.0, dropout: float = 0.0):
        """mlx-lm's ``LoRALinear`` around this projection (``mlx_lm.tuner.utils.linear_to_lora_layers``
        calls it): the low-rank update is trained, the bytes stay frozen. Its ``fuse`` needs a
        float weight and does not apply."""
        from mlx_lm.tuner.lora import LoRALinear

        lora = LoRALinear(self.input_dims, self.output_dims, r=r, dropout=dropout, scale=scale)
        lora.linear = self
        return lora

    def _extra_repr(self) -> str:
        return (
            f"input_dims={self.input_dims}, output_dims={self.output_dims}, bias={'bias' in self}, qtype={self.qtype}"
        )
