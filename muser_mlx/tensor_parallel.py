"""Tensor-parallel projections over GGUF bytes: MLX's ``AllToShardedLinear`` and
``ShardedToAllLinear`` (``mlx.nn.layers.distributed``) for a :class:`~muser_mlx.Linear`, and
mlx-lm's own ``Model.shard`` run with them.

Member ``r`` of ``N`` keeps, of each of ``segments`` parts of the weight (a fused QKV: 3), its
``r``-th of ``N`` equal pieces, as MLX's ``shard_linear`` does:

- ``"all-to-sharded"``: pieces of the output features, whole rows of the GGUF tensor. Every
  member is given the same x and returns its features; x's gradient is summed over the group.
- ``"sharded-to-all"``: pieces of the input features, of every row the bytes of those blocks
  (``input_dims / N`` must be whole blocks of the format). Each member is given its features of
  x; the outputs are summed over the group (``all_sum``), then the bias, held whole, is added.
"""

from __future__ import annotations

import sys
from contextlib import contextmanager
from pathlib import Path

import mlx.core as mx
from mlx import nn

from . import member_bytes
from .formats import get_format
from .gguf import GGUFFile, matrix_tensor, opened
from .linear import Linear, as_linear, member_projection
from .quantized import TableModule

SHARDINGS = ("all-to-sharded", "sharded-to-all")


def _check_sharding(sharding: str) -> None:
    if sharding not in SHARDINGS:
        raise ValueError(f"sharding must be 'all-to-sharded' or 'sharded-to-all', got {sharding!r}")


def _check_linear(module) -> None:
    if type(module) is not Linear:
        raise TypeError(f"expected a muser_mlx.Linear, got {type(module).__name__}")


class _TensorParallel(TableModule):
    """This member's part of a projection: ``weight`` ``uint8 [rows, row_bytes]``, frozen. A
    subclass's ``part`` names it: ``(rows, byte columns)`` of the whole weight
    (:mod:`muser_mlx.member_bytes`), None for all; ``segments`` as MLX's (default 1)."""

    def __init__(self, rows: int, dims: int, qtype: str, backend: str, group: mx.distributed.Group):
        super().__init__(rows, dims, qtype, backend)
        self.group, self._segments = group, 1

    @classmethod
    def from_linear(
        cls, linear: Linear, *, segments: int | list = 1, group: mx.distributed.Group | None = None
    ) -> _TensorParallel:
        """This member's part of ``linear``'s weight (and bias), copied."""
        _check_linear(linear)
        module = cls(linear.input_dims, linear.output_dims, "bias" in linear, linear.qtype, linear.backend, group)
        module._segments = segments
        rows, columns = module.part
        module.weight = member_bytes.take(linear["weight"], rows, columns)
        if "bias" in linear:
            module.bias = member_bytes.take(linear["bias"], rows)
        return module

    @classmethod
    def from_gguf(
        cls,
        path: str | Path | GGUFFile,
        tensor: str,
        *,
        segments: int | list = 1,
        group: mx.distributed.Group | None = None,
        backend: str = "auto",
    ) -> _TensorParallel:
        """This member's part of the 2-D ``tensor`` of the GGUF at ``path``, read from the file
        (no other byte of the tensor held beyond a few MiB of whole rows at a time)."""
        with opened(path) as f:
            info = matrix_tensor(f, tensor, "a sharded module's tensor is [in, out]")
            dims, outputs = info.shape
            module = cls(dims, outputs, False, info.qtype, backend, group)
            module._segments = segments
            module.weight = member_bytes.read(f, info, *module.part)
            module._source = f"{f.path}:{tensor}"
        return module


class AllToShardedLinear(_TensorParallel):
    """MLX's ``AllToShardedLinear`` over GGUF bytes: this member's ``output_dims / N`` output
    features (rows of ``W``, of the bias). The same x on every member -> this member's
    ``[..., output_dims / N]``; differentiable in x (its gradient summed over the group).
    ``AllToShardedLinear(input_dims, output_dims, bias, qtype, backend, group)`` holds zeros of
    this member's shape; :meth:`from_linear` and :meth:`from_gguf` fill them."""

    def __init__(
        self,
        input_dims: int,
        output_dims: int,
        bias: bool = False,
        qtype: str = "Q4_K",
        backend: str = "auto",
        group: mx.distributed.Group | None = None,
    ):
        group = group or mx.distributed.init()
        if output_dims % group.size():
            raise ValueError(f"the output of size {output_dims} cannot be sharded across {group.size()} members")
        super().__init__(output_dims // group.size(), input_dims, qtype, backend, group)
        if bias:
            self.bias = mx.zeros((self.rows,))
        self.freeze()

    @property
    def part(self) -> tuple[member_bytes.Pieces, None]:
        """This member's rows of the whole weight (and bias), all their bytes."""
        return member_bytes.split_pieces(self.output_dims, self._segments, self.group, repr(self)), None

    @property
    def input_dims(self) -> int:
        return self.dims

    @property
    def output_dims(self) -> int:
        """All members' outputs."""
        return self.rows * self.group.size()

    def __call__(self, x) -> mx.array:
        return member_projection(self, x)

    def _extra_repr(self) -> str:
        return (
            f"input_dims={self.input_dims}, output_dims={self.output_dims}, bias={'bias' in self}, "
            f"qtype={self.qtype}, {self.group.size()} members"
        )


class ShardedToAllLinear(_TensorParallel):
    """MLX's ``ShardedToAllLinear`` over GGUF bytes: of every output feature, this member's
    ``input_dims / N`` input features (whole blocks of each row of ``W``); the bias whole. This
    member's features of x ``[..., input_dims / N]`` -> the full ``[..., output_dims]``, the same on
    every member; differentiable in x. Constructor and classmethods as :class:`AllToShardedLinear`'s;
    ``ValueError`` where ``input_dims / N`` is not a whole number of the format's blocks."""

    def __init__(
        self,
        input_dims: int,
        output_dims: int,
        bias: bool = False,
        qtype: str = "Q4_K",
        backend: str = "auto",
        group: mx.distributed.Group | None = None,
    ):
        group = group or mx.distributed.init()
        fmt, size = get_format(qtype), group.size()
        if input_dims % (size * fmt.block_values):
            raise ValueError(
                f"the input of size {input_dims} cannot be sharded across {size} members in {qtype}: "
                f"each member's {input_dims / size:g} features must be a whole number of blocks of {fmt.block_values}"
            )
        super().__init__(output_dims, input_dims // size, qtype, backend, group)
        if bias:
            self.bias = mx.zeros((output_dims,))
        self.freeze()

    @property
    def part(self) -> tuple[None, member_bytes.Pieces]:
        """Every row of the whole weight, this member's byte columns of each (the bias whole)."""
        what = repr(self)
        return None, member_bytes.byte_pieces(
            member_bytes.split_pieces(self.input_dims, self._segments, self.group, what), self.format, what
        )

    @property
    def input_dims(self) -> int:
        """All members' inputs."""
        return self.dims * self.group.size()

    @property
    def output_dims(self) -> int:
        return self.rows

    def __call__(self, x) -> mx.array:
        y = mx.distributed.all_sum(as_linear(self.table, x, backend=self._backend), group=self.group)
        return y + self["bias"] if "bias" in self else y

    _extra_repr = AllToShardedLinear._extra_repr


def shard_linear(
    module: Linear, sharding: str, *, segments: int | list = 1, group: mx.distributed.Group | None = None
) -> nn.Module:
    """MLX's ``shard_linear`` for a :class:`Linear`: an :class:`AllToShardedLinear`
    (``"all-to-sharded"``) or a :class:`ShardedToAllLinear` (``"sharded-to-all"``) holding this
    member's part of ``module`` (``segments`` as MLX's), or ``module`` itself for a group of one
    (default group ``mx.distributed.init()``). ``module`` is left as it was; its type, ``sharding``
    and ``segments`` are checked on a group of one too."""
    _check_linear(module)
    _check_sharding(sharding)
    member_bytes.check_segments(segments)
    group = group or mx.distributed.init()
    if group.size() == 1:
        return module
    cls = AllToShardedLinear if sharding == "all-to-sharded" else ShardedToAllLinear
    return cls.from_linear(module, segments=segments, group=group)


@contextmanager
def gguf_shard_linear(model: nn.Module):
    """While open, the ``shard_linear`` that ``model``'s mlx-lm definition calls (its module's
    global, MLX's) hands a :class:`Linear` to :func:`shard_linear` and anything else to MLX's; so
    the model's own ``shard()`` splits its GGUF projections as it splits float or MLX-quantized
    ones. Not thread-safe: the definition's module is shared by every model of it."""
    definition = sys.modules[type(model).__module__]
    mlx_shard_linear = getattr(definition, "shard_linear", None)
    if mlx_shard_linear is None:
        yield
        return

    def either(module, sharding, *, segments=1, group=None):
        if type(module) is Linear:
            return shard_linear(module, sharding, segments=segments, group=group)
        return mlx_shard_linear(module, sharding, segments=segments, group=group)

    definition.shard_linear = either
    try:
        yield
    finally:
        definition.shard_linear = mlx_shard_linear
