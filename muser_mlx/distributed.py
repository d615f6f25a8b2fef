"""Vocab-parallel embedding and LM head over ``mx.distributed``.

Member ``r`` of a group of ``N`` keeps rows ``[r * R, min((r + 1) * R, rows))`` of the table
(of an embedding: tokens; of a projection: output features), ``R = ceil(rows / N)``, as the GGUF
bytes they are (a slice of the ``uint8`` rows: nothing dequantized, nothing padded). Every member
is given the same ids and the same x.

- A lookup gathers the ids that fall in the member's rows, ``-0.0`` for the others, and sums
  over the group: each row comes from exactly one member, and ``-0.0`` is the exact additive
  identity (``-0.0 + -0.0 = -0.0``, ``-0.0 + v = v``), so the rows are bit-identical to the
  unsharded lookup's, negative zeros included (``+0.0`` would turn them positive).
- A head computes the member's ``R`` columns of the logits and gathers them (padded to ``R``
  columns in the logits, not the bytes); the gradient with respect to x is the sum over the
  group of each member's ``g[:, rows] @ W[rows]``.
"""

from __future__ import annotations

from pathlib import Path

import mlx.core as mx
from mlx import nn

from . import member_bytes
from .embedding import Embedding, LookupOptions
from .gguf import GGUFFile, matrix_tensor, opened, table_tensor
from .ids import check_device_ids, check_dtype, clamp, count_out_of_range, host_ids
from .linear import Linear, member_projection
from .quantized import TableModule


def gather_columns(local: mx.array, rows: int, group: mx.distributed.Group) -> mx.array:
    """Every member's ``local [..., stop - start]`` columns (from :func:`member_bytes.vocab_rows`),
    in rank order: ``[..., rows]``. ``all_gather`` stacks along the first axis, so each member
    sends its columns padded to ``ceil(rows / N)`` as one row, and the stack is reordered."""
    size = group.size()
    width = -(-rows // size)
    lead = local.shape[:-1]
    flat = local.reshape(-1, local.shape[-1])  # [n, stop - start]
    if flat.shape[1] < width:
        flat = mx.pad(flat, [(0, 0), (0, width - flat.shape[1])])
    n = flat.shape[0]
    stacked = mx.distributed.all_gather(flat.reshape(1, n * width), group=group)  # [N, n * width]
    full = stacked.reshape(size, n, width).swapaxes(0, 1).reshape(n, size * width)
    return full[:, :rows].reshape(*lead, rows)


def negative_zero(dtype: mx.Dtype) -> mx.array:
    """0-d ``-0.0`` in ``dtype`` (float32, float16 or bfloat16), made from its sign bit:
    ``mx.compile`` turns a ``-0.0`` constant into ``+0.0`` (MLX 0.32.4)."""
    sign = mx.array(0x80000000, mx.uint32) if dtype == mx.float32 else mx.array(0x8000, mx.uint16)
    return sign.view(dtype)


def _check_type(module, kind: type) -> None:
    if not isinstance(module, kind):
        raise TypeError(f"expected a muser_mlx.{kind.__name__}, got {type(module).__name__}")


class _MemberRows(TableModule):
    """A :class:`TableModule` holding member ``group.rank()``'s rows ``[start, stop)`` of a table
    of ``total`` rows; a weight put in later (``update``, ``load_weights``) keeps their count."""

    def __init__(self, total: int, dims: int, qtype: str, backend: str, group: mx.distributed.Group | None):
        group = group or mx.distributed.init()
        start, stop = member_bytes.vocab_rows(total, group)
        super().__init__(stop - start, dims, qtype, backend)
        self.group, self._start, self._stop, self._total = group, start, stop, total

    def __setitem__(self, key, value):
        # a weight of other than two dimensions is TableModule's error to raise
        if key == "weight" and "weight" in self and getattr(value, "ndim", 0) == 2 and value.shape[0] != self.rows:
            raise ValueError(
                f"{self!r}: member {self.group.rank()} holds rows [{self._start}, {self._stop}) of "
                f"{self._total}: weight must have {self.rows} rows, got {list(value.shape)}"
            )
        super().__setitem__(key, value)

    def _read_rows(self, f: GGUFFile, tensor: str) -> None:
        """This member's rows of the 2-D ``tensor`` of the open ``f``, read from the file: one
        range of its bytes."""
        self.weight = member_bytes.read(f, f.tensors[tensor], *self.part)
        self._source = f"{f.path}:{tensor}"

    @property
    def part(self) -> tuple[member_bytes.Pieces, None]:
        """This member's rows of the whole table, all their bytes (as the tensor-parallel modules')."""
        return [(self._start, self._stop)], None

    @property
    def start(self) -> int:
        """The first row (token id, output feature) this member holds."""
        return self._start

    @property
    def stop(self) -> int:
        """One past the last row this member holds."""
        return self._stop

    def _logits(self, x, sharded: bool) -> mx.array:
        """``x [..., dims]`` -> this member's columns ``[..., stop - start]``, or with ``sharded``
        False every member's, ``[..., total]``; x's gradient summed over the group."""
        local = member_projection(self, x)
        return local if sharded else gather_columns(local, self._total, self.group)

    def _members(self) -> str:
        return f"rows=[{self._start}, {self._stop}) of {self.group.size()} members"


class ShardedEmbedding(LookupOptions, _MemberRows):
    """An :class:`Embedding` split by vocabulary over ``group``: ``weight`` is this member's rows
    ``[start, stop)`` of the table's bytes, ``uint8 [stop - start, row_bytes]``, frozen.

    Called on ids of the whole vocabulary it returns the unsharded module's rows bit for bit, on
    every member; :meth:`as_linear` is the tied head. :func:`shard_embedding` makes one from an
    :class:`Embedding`; the constructor holds a zero table of this member's byte shape (for a
    model's ``__init__``). The arguments are :class:`Embedding`'s (``num_embeddings`` the whole
    vocabulary, ids checked against it) and ``group`` (default ``mx.distributed.init()``).
    """

    def __init__(
        self,
        num_embeddings: int,
        dims: int,
        qtype: str = "Q4_K",
        dtype: mx.Dtype = mx.float32,
        on_out_of_range: str = "clamp",
        backend: str = "auto",
        group: mx.distributed.Group | None = None,
    ):
        super().__init__(num_embeddings, dims, qtype, backend, group)
        self._set_lookup_options(dtype, on_out_of_range)  # as Embedding's
        self.freeze()

    @classmethod
    def from_embedding(cls, module: Embedding, group: mx.distributed.Group | None = None) -> ShardedEmbedding:
        """This member's rows of ``module``'s table, copied (the whole table can then be freed)."""
        _check_type(module, Embedding)
        sharded = cls(
            module.num_embeddings,
            module.dims,
            module.qtype,
            module.dtype,
            module.on_out_of_range,
            module.backend,
            group,
        )
        sharded.weight = mx.contiguous(module["weight"][sharded.start : sharded.stop])  # a copy, not a view
        return sharded

    @classmethod
    def from_gguf(
        cls,
        path: str | Path | GGUFFile,
        tensor: str = "token_embd.weight",
        dtype: mx.Dtype = mx.float32,
        on_out_of_range: str = "clamp",
        backend: str = "auto",
        group: mx.distributed.Group | None = None,
    ) -> ShardedEmbedding:
        """This member's rows of ``tensor`` of the GGUF at ``path`` (or of a file already open),
        read from the file: the whole table is never held. ``GGUFError`` as
        :meth:`Embedding.from_gguf`."""
        with opened(path) as f:
            info, _ = table_tensor(f, tensor)
            module = cls(info.shape[1], info.shape[0], info.qtype, dtype, on_out_of_range, backend, group)
            module._read_rows(f, tensor)
        return module

    @property
    def num_embeddings(self) -> int:
        """The whole vocabulary."""
        return self._total

    def _ids(self, x) -> mx.array:
        """Ids of the whole vocabulary as ``uint32``: host ids checked, an ``mx.array`` checked
        (``"raise"``) or clamped, as by the unsharded module."""
        if not isinstance(x, mx.array):
            x = host_ids(x, self._total)
        elif self._clamp:
            check_dtype(x.dtype)
        else:
            check_device_ids(x, self._total)
        return clamp(x, self._total)

    def __call__(self, x) -> mx.array:
        local = self._ids(x) - self._start  # uint32: ids below start wrap high
        rows = self._weight_gather()(self["weight"], local)  # clamps
        mine = mx.where((local < self.rows)[..., None], rows, negative_zero(self["dtype"].dtype))
        return mx.distributed.all_sum(mine, group=self.group)

    def lookup_with_count(self, x) -> tuple[mx.array, mx.array]:
        """``(self(x), count)``: ``count`` is a lazy 0-d ``uint32`` of the ids that were clamped."""
        ids = x if isinstance(x, mx.array) else host_ids(x, self._total)
        return self(ids), count_out_of_range(ids, self._total)

    def as_linear(self, x, sharded: bool = False) -> mx.array:
        """The tied LM head: ``[..., dims]`` -> logits ``[..., num_embeddings]`` in x's dtype, the
        unsharded module's up to summation order; differentiable in x. ``sharded=True`` returns
        this member's columns ``[..., stop - start]`` only (token ids ``start`` to ``stop - 1``),
        for a softmax or argmax computed over the group: no communication in the forward pass."""
        return self._logits(x, sharded)

    def _extra_repr(self) -> str:
        return f"{self.num_embeddings}, {self.dims}, qtype={self.qtype}, dtype={self.dtype}, {self._members()}"


class ShardedLinear(_MemberRows):
    """The vocab-parallel head: a :class:`Linear` split by output features over ``group``, this
    member holds rows ``[start, stop)`` of ``W`` and of the bias. Called on the same x on every
    member it returns the unsharded outputs ``[..., output_dims]`` (gathered), or with
    ``sharded=True`` this member's ``[..., stop - start]``; differentiable in x. The untied LM head
    is one. :meth:`from_linear` makes one from a :class:`Linear`; the constructor's arguments are
    :class:`Linear`'s and ``group``.
    """

    def __init__(
        self,
        input_dims: int,
        output_dims: int,
        bias: bool = False,
        qtype: str = "Q4_K",
        backend: str = "auto",
        group: mx.distributed.Group | None = None,
    ):
        super().__init__(output_dims, input_dims, qtype, backend, group)
        if bias:
            self.bias = mx.zeros((self.rows,))
        self.freeze()

    @classmethod
    def from_linear(cls, module: Linear, group: mx.distributed.Group | None = None) -> ShardedLinear:
        """This member's rows of ``module``'s weight and bias, copied."""
        _check_type(module, Linear)
        sharded = cls(module.input_dims, module.output_dims, "bias" in module, module.qtype, module.backend, group)
        rows = slice(sharded.start, sharded.stop)
        sharded.weight = mx.contiguous(module["weight"][rows])
        if "bias" in module:
            sharded.bias = mx.contiguous(module["bias"][rows])
        return sharded

    @classmethod
    def from_gguf(
        cls,
        path: str | Path | GGUFFile,
        tensor: str = "output.weight",
        backend: str = "auto",
        group: mx.distributed.Group | None = None,
    ) -> ShardedLinear:
        """This member's rows of the 2-D ``tensor`` of the GGUF at ``path`` (or of a file already
        open), read from the file: the whole tensor is never held. ``GGUFError`` as
        :meth:`Linear.from_gguf`."""
        with opened(path) as f:
            info = matrix_tensor(f, tensor, "a sharded module's tensor is [in, out]")
            module = cls(info.shape[0], info.shape[1], False, info.qtype, backend, group)
            module._read_rows(f, tensor)
        return module

    @property
    def input_dims(self) -> int:
        return self.dims

    @property
    def output_dims(self) -> int:
        """All members' outputs."""
        return self._total

    def __call__(self, x, sharded: bool = False) -> mx.array:
        return self._logits(x, sharded)

    def _extra_repr(self) -> str:
        return (
            f"input_dims={self.input_dims}, output_dims={self.output_dims}, bias={'bias' in self}, "
            f"qtype={self.qtype}, {self._members()}"
        )


def shard_embedding(module: Embedding, group: mx.distributed.Group | None = None) -> nn.Module:
    """``module`` split by vocabulary over ``group`` (default ``mx.distributed.init()``): a
    :class:`ShardedEmbedding` holding this member's rows, or ``module`` itself for a group of
    one. ``module`` is left as it was."""
    _check_type(module, Embedding)
    group = group or mx.distributed.init()
    return module if group.size() == 1 else ShardedEmbedding.from_embedding(module, group)
