"""The tied LM head: logits ``x @ W.T`` straight from the quantized table ``W``.

Two paths, one result (float32 accumulation either way, up to summation order):
- streamed (GPU kernels, few rows of x: decode): the quantized table is read once per pass and
  dequantized on the fly; no float copy of any part of the table exists. On CUDA a quantized
  table takes ``kernels/bytedot.h`` (byte dot products of levels and x in integers) for one row
  of x and ``kernels/mma.h`` (warp matrix multiplies) from ``MMA_MIN_ROWS`` rows; every other
  case takes ``kernels/matvec.h``, a lane's float multiply-adds.
- tiled (long x on the GPU: prefill; every x on the ``ops`` backend): ``TILE_ROWS`` vocab rows at
  a time are dequantized with the backend's gather into x's dtype and multiplied with MLX's
  matmul, and the logits concatenated; at most one tile of floats is alive at a time.
"""

from __future__ import annotations

import logging
from functools import cache
from pathlib import Path

import mlx.core as mx
import numpy as np

from . import backends
from .formats import FORMATS
from .gguf import open_gguf
from .quantized import TableModule
from .table import Table

log = logging.getLogger("muser_mlx")

# Rows of x up to which a GPU backend streams the table rather than tiling it: by matvec, or for a
# quantized table on a backend with matrix units (CUDA) by mma from MMA_MIN_ROWS (by x's dtype:
# float32 x costs three multiplies) to MMA_MAX_ROWS. Set from the H200 measurements of
# benchmarks/as_linear.py and benchmarks/mma_tuning.py (float32 x: matvec faster at 2 rows, mma
# at 8; 4 is between them, not measured).
MATVEC_MAX_ROWS = 16
MMA_MIN_ROWS = {mx.float16: 2, mx.bfloat16: 2, mx.float32: 4}
MMA_MAX_ROWS = 128
# Rows of x the byte dot products take: one row measured (H200, benchmarks/matvec_tuning.py
# --kernel bytedot, and benchmarks/as_linear.py); at 2-3 rows of float32 x (below MMA_MIN_ROWS)
# they would need 96-162 registers, not measured.
BYTEDOT_MAX_ROWS = 1
# Vocab rows per tile of the tiled path: TILE_ROWS * dims floats alive at a time (4096 * 6,656
# * 2 B = 52 MiB for float16 at Glimmer's width). benchmarks/as_linear.py measures it.
TILE_ROWS = 4096

X_DTYPES = (mx.float32, mx.float16, mx.bfloat16)


def as_linear(table: Table, x, *, backend: str = "auto") -> mx.array:
    """Logits ``x @ W.T`` of the quantized ``table`` ``W``: ``x [..., dims]`` -> ``[..., vocab]``.

    Lazy, and traceable by ``mx.compile``. The output dtype is x's dtype (as for
    ``mlx.nn.QuantizedEmbedding.as_linear``); the dot products accumulate in float32 from the
    exact dequantized values on the streamed path, and in MLX's matmul of x's dtype on the tiled
    path (so float16/bfloat16 x sees the weights rounded to its dtype there).

    Args:
        table (Table): the quantized table, ``vocab`` rows of width ``dims``.
        x: ``mx.array`` (or array-like) of float32, float16 or bfloat16, last axis ``dims``.
        backend (str): ``"auto"``, ``"metal"``, ``"cuda"`` or ``"ops"`` (see ``embedding``).
    """
    backend = backends.select(backend)
    x = mx.array(x) if not isinstance(x, mx.array) else x
    if x.dtype not in X_DTYPES:
        raise TypeError(f"as_linear takes float32, float16 or bfloat16 x, got {x.dtype}")
    if x.ndim == 0 or x.shape[-1] != table.dims:
        raise ValueError(f"x must have shape [..., {table.dims}] for {table!r}, got {list(x.shape)}")
    flat = x.reshape(-1, table.dims)
    if flat.shape[0] == 0:
        logits = mx.zeros((0, table.vocab), x.dtype)
    else:
        logits = differentiable_head(table.qtype, table.vocab, table.row_bytes, backend)(table.data, flat)
    return logits.reshape(*x.shape[:-1], table.vocab)


def logits(table, x: mx.array, backend: str) -> mx.array:
    """``x [n, dims]`` (n >= 1) -> ``[n, vocab]`` in x's dtype by the head kernel for n rows."""
    if backend in backends.KERNEL_BACKENDS and x.shape[0] <= (MMA_MAX_ROWS if uses_mma(table, x, backend) else MATVEC_MAX_ROWS):
        return streamed(table, x, backend)
    return tiled(table, x, backend)


def uses_mma(table, x: mx.array, backend: str) -> bool:
    """Whether ``x [n, dims]`` streams through the matrix units (kernels/mma.h)."""
    # levels are exact in 16 bits; the float formats' values are not
    return table.format.quantized and x.shape[0] >= MMA_MIN_ROWS[x.dtype] and backends.BACKENDS[backend].matrix_units()


def streamed(table, x: mx.array, backend: str) -> mx.array:
    """``x [n, dims]`` -> ``[n, vocab]`` by the streaming kernels of GPU ``backend``."""
    device = backends.BACKENDS[backend]
    if uses_mma(table, x, backend):
        return device.mma(table, x)
    if table.format.quantized and device.bytedot_kernel and x.shape[0] <= BYTEDOT_MAX_ROWS:
        return device.bytedot(table, x)
    return device.matvec(table, x)


def tiled(table, x: mx.array, backend: str, tile_rows: int | None = None) -> mx.array:
    """``x [n, dims]`` -> ``[n, vocab]``: dequantize ``tile_rows`` (default ``TILE_ROWS``) vocab
    rows at a time (the backend's gather of ``arange(start, stop)``), ``x @ tile.T``, concatenate.
    Each tile's ids depend on the previous tile's logits, so MLX evaluates the tiles one after
    the other and frees each before the next (left alone it interleaves them)."""
    tile_rows = tile_rows or TILE_ROWS
    gather = backends.bind(table, x.dtype, backend)
    parts: list[mx.array] = []
    for start in range(0, table.vocab, tile_rows):
        ids = mx.arange(start, min(start + tile_rows, table.vocab), dtype=mx.int32)
        if parts:
            ids = mx.depends(ids, parts[-1])
        tile = gather(ids)  # [rows, dims] in x's dtype
        parts.append(x @ tile.T)
    return parts[0] if len(parts) == 1 else mx.concatenate(parts, axis=1)


def tied_head(path: str | Path, tensor: str) -> bool:
    """Whether ``tensor`` of the GGUF at ``path`` is also the model's LM head: it is the token
    embedding and the file has no ``output.weight`` (llama.cpp then uses the embedding)."""
    if tensor != "token_embd.weight":
        return False
    tied = all(t.name != "output.weight" for t in open_gguf(path).tensors)
    if tied:
        log.info("%s has no output.weight: the LM head is tied to %s; logits: Embedding.as_linear(x)", path, tensor)
    return tied


@cache
def differentiable_head(qtype: str, vocab: int, row_bytes: int, backend: str):
    """``(weight, x [n, dims]) -> logits [n, vocab]`` for a ``uint8 [vocab, row_bytes]`` table of
    ``qtype``, as an ``mx.custom_function`` (one per format, sizes and backend for the process):
    the kernels have no derivative of their own (MLX: "[Primitive::vjp] Not implemented for
    CustomKernel"), so its vjp gives x's cotangent from the same bytes, :func:`input_gradient`.
    The table is frozen: its cotangent is zeros, built lazily and so never allocated."""
    fmt = FORMATS[qtype]
    dims = row_bytes // fmt.block_bytes * fmt.block_values

    @mx.custom_function
    def head(weight: mx.array, x: mx.array) -> mx.array:
        return logits(Table(weight, fmt, dims, vocab), x, backend)

    @head.vjp
    def head_vjp(primals, cotangent, output):
        weight, x = primals
        return mx.zeros_like(weight), input_gradient(Table(weight, fmt, dims, vocab), cotangent, backend)

    return head


def input_gradient(table, g: mx.array, backend: str, tile_rows: int | None = None) -> mx.array:
    """``dL/dx = g @ W``: ``g [n, vocab]`` -> ``[n, dims]`` in g's dtype, ``tile_rows`` (default
    ``TILE_ROWS``) rows of ``W`` dequantized at a time into g's dtype by the backend's gather, the
    products summed in float32. As in :func:`tiled`, each tile waits for the sum before it, so at
    most one tile of floats is alive: no float copy of the table."""
    tile_rows = tile_rows or TILE_ROWS
    gather = backends.bind(table, g.dtype, backend)
    total = None
    for start in range(0, table.vocab, tile_rows):
        stop = min(start + tile_rows, table.vocab)
        ids = mx.arange(start, stop, dtype=mx.int32)
        if total is not None:
            ids = mx.depends(ids, total)
        part = (g[:, start:stop] @ gather(ids)).astype(mx.float32)  # [n, dims]
        total = part if total is None else total + part
    return total.astype(g.dtype)


class Linear(TableModule):
    """A drop-in for ``mlx.nn.Linear`` over a GGUF tensor's bytes: ``y = x @ W.T (+ bias)``.

    ``W`` is ``output_dims`` rows of ``input_dims`` values of ``qtype``, ``weight`` their bytes
    ``uint8 [output_dims, row_bytes]`` (a GGUF 2-D tensor exactly: ggml's ``ne0`` is
    ``input_dims``), frozen like ``nn.QuantizedLinear``'s; ``bias`` an optional float
    ``[output_dims]``. ``Linear(input_dims, output_dims, bias, qtype)`` holds a zero table for a
    model's ``__init__`` and ``load_weights`` to fill; :meth:`from_gguf`, :meth:`from_table` and
    :meth:`from_linear` build a filled one.

    The output is in x's dtype (float32, float16 or bfloat16) plus the bias's promotion, as
    ``nn.Linear``; computed by :func:`as_linear` (streamed kernels for few rows of x on a GPU,
    tiles of dequantized rows and MLX's matmul otherwise), differentiable in x.
    """

    def __init__(self, input_dims: int, output_dims: int, bias: bool = False, qtype: str = "Q4_K", backend: str = "auto"):
        backends.select(backend)
        super().__init__(output_dims, input_dims, qtype)
        self._backend = backend
        if bias:
            self.bias = mx.zeros((output_dims,))
        self.freeze()

    @classmethod
    def from_table(cls, table: Table, bias: mx.array | None = None, **kwargs) -> "Linear":
        """A projection holding ``table``'s bytes (not copied): ``table.vocab`` outputs of
        ``table.dims`` inputs, and ``bias`` if given."""
        module = cls(table.dims, table.vocab, bias is not None, table.qtype, **kwargs)._from_table(table)
        if bias is not None:
            module.bias = mx.array(bias)
            module.freeze()
        return module

    @classmethod
    def from_gguf(cls, path: str | Path, tensor: str = "output.weight", **kwargs) -> "Linear":
        """Load the 2-D ``tensor`` of the GGUF at ``path`` (``GGUFError`` on a bad file or tensor)."""
        return cls.from_table(Table.from_gguf(path, tensor), **kwargs)

    @classmethod
    def from_linear(cls, linear, qtype: str = "Q4_K", **kwargs) -> "Linear":
        """Quantize an ``mlx.nn.Linear`` (its float weight ``[output_dims, input_dims]``; the
        bias is kept as it is) to ``qtype`` with :func:`muser_mlx.quantize`."""
        from .quantize import quantize

        weight = linear.weight
        table = Table.from_bytes(quantize(np.array(weight.astype(mx.float32)), qtype), qtype, weight.shape[1])
        return cls.from_table(table, linear["bias"] if "bias" in linear else None, **kwargs)

    @property
    def input_dims(self) -> int:
        return self.dims

    @property
    def output_dims(self) -> int:
        return self["weight"].shape[0]

    @property
    def backend(self) -> str:
        return self._backend

    def __call__(self, x: mx.array) -> mx.array:
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
        return f"input_dims={self.input_dims}, output_dims={self.output_dims}, bias={'bias' in self}, qtype={self.qtype}"
