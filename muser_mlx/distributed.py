"""Vocab-parallel embedding and LM head over ``mx.distributed``.

Member ``r`` of a group of ``N`` keeps rows ``[r * R, min((r + 1) * R, vocab))`` of the table,
``R = ceil(vocab / N)``, as the GGUF bytes they are (a slice of the ``uint8`` rows: nothing
dequantized, nothing padded). Every member is given the same ids and the same x.

- A lookup gathers the ids that fall in the member's rows, ``-0.0`` for the others, and sums
  over the group: each row comes from exactly one member, and ``-0.0`` is the exact additive
  identity (``-0.0 + -0.0 = -0.0``, ``-0.0 + v = v``), so the rows are bit-identical to the
  unsharded lookup's, negative zeros included (``+0.0`` would turn them positive).
- The head computes the member's ``R`` columns of the logits and gathers them (padded to ``R``
  columns in the logits, not the bytes); the gradient with respect to x is the sum over the
  group of each member's ``g[:, rows] @ W[rows]``.
"""

from __future__ import annotations

import mlx.core as mx
from mlx import nn
from mlx.nn.layers.distributed import sum_gradients
from mlx.utils import tree_map_with_path

from . import backends
from .embedding import Embedding, _check_dtype, embedding
from .formats import get_format
from .ids import check_device_ids, check_dtype, clamp, count_out_of_range, host_ids
from .linear import as_linear
from .table import Table


def vocab_rows(vocab: int, group: mx.distributed.Group) -> tuple[int, int]:
    """``(start, stop)``: the rows member ``group.rank()`` keeps of a ``vocab``-row table.

    Raises ``ValueError`` when the split leaves some member no rows (``vocab`` at most
    ``ceil(vocab / N) * (N - 1)``)."""
    size, rank = group.size(), group.rank()
    per_member = -(-vocab // size)
    if per_member * (size - 1) >= vocab:
        raise ValueError(
            f"a vocabulary of {vocab} rows cannot be split over {size} members: "
            f"{per_member} rows each leave the last member none"
        )
    return rank * per_member, min((rank + 1) * per_member, vocab)


def gather_columns(local: mx.array, vocab: int, group: mx.distributed.Group) -> mx.array:
    """Every member's ``local [..., rows]`` columns (``rows`` from :func:`vocab_rows`), in rank
    order: ``[..., vocab]``. ``all_gather`` stacks along the first axis, so each member sends its
    columns padded to ``ceil(vocab / N)`` as one row, and the stack is reordered."""
    size = group.size()
    width = -(-vocab // size)
    lead = local.shape[:-1]
    flat = local.reshape(-1, local.shape[-1])  # [n, rows]
    if flat.shape[1] < width:
        flat = mx.pad(flat, [(0, 0), (0, width - flat.shape[1])])
    n = flat.shape[0]
    stacked = mx.distributed.all_gather(flat.reshape(1, n * width), group=group)  # [N, n * width]
    full = stacked.reshape(size, n, width).swapaxes(0, 1).reshape(n, size * width)
    return full[:, :vocab].reshape(*lead, vocab)


def negative_zero(dtype: mx.Dtype) -> mx.array:
    """0-d ``-0.0`` in ``dtype`` (float32, float16 or bfloat16), made from its sign bit:
    ``mx.compile`` turns a ``-0.0`` constant into ``+0.0`` (MLX 0.32.4)."""
    sign = mx.array(0x80000000, mx.uint32) if dtype == mx.float32 else mx.array(0x8000, mx.uint16)
    return sign.view(dtype)


class ShardedEmbedding(nn.Module):
    """An :class:`Embedding` split by vocabulary over ``group``: ``weight`` is this member's rows
    ``[start, stop)`` of the table's bytes, ``uint8 [stop - start, row_bytes]``, and is frozen.

    Called on ids of the whole vocabulary, it returns the rows of the unsharded module bit for
    bit, on every member. ``as_linear`` is the tied head. Make one with :func:`shard_embedding`;
    the constructor builds a zero table of this member's byte shape (for a model's ``__init__``).

    Args:
        num_embeddings (int): the whole vocabulary.
        dims (int): the row width.
        qtype (str): the GGUF type of the rows, e.g. ``"Q4_K"``.
        dtype (mx.Dtype): output dtype, as for :class:`Embedding`.
        on_out_of_range (str): ``"clamp"`` or ``"raise"``, as for :class:`Embedding`, against the
            whole vocabulary.
        backend (str): ``"auto"``, ``"metal"``, ``"cuda"`` or ``"ops"``.
        group (mx.distributed.Group): the members; ``None`` is ``mx.distributed.init()``.
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
        super().__init__()
        if on_out_of_range not in ("clamp", "raise"):
            raise ValueError(f"on_out_of_range must be 'clamp' or 'raise', got {on_out_of_range!r}")
        self.group = group or mx.distributed.init()
        self._start, self._stop = vocab_rows(num_embeddings, self.group)
        self._vocab, self._dims, self._qtype = num_embeddings, dims, qtype
        self._dtype, self._backend, self._clamp = dtype, backend, on_out_of_range == "clamp"
        _check_dtype(dtype)
        backends.select(backend)
        zeros = mx.zeros((self._stop - self._start, get_format(qtype).row_bytes(dims)), mx.uint8)
        table = Table.from_bytes(zeros, qtype, dims)
        object.__setattr__(self, "_table", table)  # a plain attribute, not a child
        self.weight = table.data
        self.freeze()

    @classmethod
    def from_embedding(cls, module: Embedding, group: mx.distributed.Group | None = None) -> ShardedEmbedding:
        """This member's rows of ``module``'s table, copied (the whole table can then be freed)."""
        if not isinstance(module, Embedding):
            raise TypeError(f"from_embedding takes a muser_mlx.Embedding, got {type(module).__name__}")
        table = module.table
        sharded = cls(table.vocab, table.dims, table.qtype, module.dtype, module.on_out_of_range, module.backend, group)
        sharded.weight = mx.contiguous(table.data[sharded.start : sharded.stop])  # a copy, not a view
        return sharded

    @property
    def table(self) -> Table:
        """This member's rows as a :class:`Table` (``vocab`` = ``stop - start``), remade when
        ``weight`` is replaced."""
        t = self._table
        if self["weight"] is not t.data:
            t = Table.from_bytes(self.weight, self._qtype, self._dims)
            if t.vocab != self._stop - self._start:
                raise ValueError(
                    f"member {self.group.rank()} holds rows [{self._start}, {self._stop}) of the table: "
                    f"weight must have {self._stop - self._start} rows, got {t.vocab}"
                )
            object.__setattr__(self, "_table", t)
            self.weight = t.data
        return t

    @property
    def start(self) -> int:
        """The first row (token id) this member holds."""
        return self._start

    @property
    def stop(self) -> int:
        """One past the last row this member holds."""
        return self._stop

    @property
    def num_embeddings(self) -> int:
        return self._vocab

    @property
    def dims(self) -> int:
        return self._dims

    @property
    def qtype(self) -> str:
        return self._qtype

    @property
    def dtype(self) -> mx.Dtype:
        return self._dtype

    @property
    def on_out_of_range(self) -> str:
        return "clamp" if self._clamp else "raise"

    @property
    def backend(self) -> str:
        return self._backend

    def _ids(self, x) -> mx.array:
        """Ids of the whole vocabulary as ``uint32``: host ids checked, an ``mx.array`` checked
        (``"raise"``) or clamped, as the unsharded module does."""
        if not isinstance(x, mx.array):
            x = host_ids(x, self._vocab)
        elif self._clamp:
            check_dtype(x.dtype)
        else:
            check_device_ids(x, self._vocab)
        return clamp(x, self._vocab)

    def __call__(self, x) -> mx.array:
        local = self._ids(x) - self._start  # uint32: ids below start wrap high
        owned = local < self._stop - self._start
        rows = embedding(self.table, local, self._dtype, backend=self._backend)  # clamps local
        mine = mx.where(owned[..., None], rows, negative_zero(self._dtype))
        return mx.distributed.all_sum(mine, group=self.group)

    def lookup_with_count(self, x) -> tuple[mx.array, mx.array]:
        """``(self(x), count)``: ``count`` is a lazy 0-d ``uint32`` of the ids that were clamped."""
        ids = x if isinstance(x, mx.array) else host_ids(x, self._vocab)
        return self(ids), count_out_of_range(ids, self._vocab)

    def as_linear(self, x, sharded: bool = False) -> mx.array:
        """The tied LM head: ``[..., dims]`` -> logits ``[..., num_embeddings]`` in x's dtype, the
        unsharded module's up to summation order. ``sharded=True`` returns this member's columns
        ``[..., stop - start]`` only (token ids ``start`` to ``stop - 1``), for a softmax or argmax
        computed over the group; no communication then in the forward pass."""
        x = mx.array(x) if not isinstance(x, mx.array) else x
        local = as_linear(self.table, sum_gradients(self.group)(x), backend=self._backend)
        return local if sharded else gather_columns(local, self._vocab, self.group)

    def _extra_repr(self) -> str:
        return (
            f"{self.num_embeddings}, {self.dims}, qtype={self.qtype}, dtype={self.dtype}, "
            f"rows=[{self.start}, {self.stop}) of {self.group.size()} members"
        )


def shard_embedding(module: Embedding, group: mx.distributed.Group | None = None) -> nn.Module:
    """``module`` split by vocabulary over ``group`` (default ``mx.distributed.init()``): a
    :class:`ShardedEmbedding` holding this member's rows, or ``module`` itself for a group of
    one. ``module`` is left as it was."""
    group = group or mx.distributed.init()
    if group.size() == 1:
        return module
    return ShardedEmbedding.from_embedding(module, group)


def shard(model: nn.Module, group: mx.distributed.Group | None = None) -> nn.Module:
    """Split ``model``'s quantized token embeddings (every :class:`Embedding`, and with it a tied
    head: ``embed_tokens.as_linear``) by vocabulary over ``group``, in place, and return it.

    Only those modules change, so this composes with mlx-lm's own layer sharding
    (``model.shard(group)``), before or after. A group of one leaves ``model`` as it is."""
    group = group or mx.distributed.init()
    if group.size() == 1:
        return model

    def split(_, module):
        return ShardedEmbedding.from_embedding(module, group) if type(module) is Embedding else module

    model.update_modules(tree_map_with_path(split, model.leaf_modules(), is_leaf=nn.Module.is_module))
    return model
