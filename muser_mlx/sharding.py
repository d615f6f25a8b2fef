"""A whole model over ``mx.distributed``: its embeddings and head split by vocabulary
(:mod:`muser_mlx.distributed`), its layers by the model's own mlx-lm ``shard()`` with
:func:`muser_mlx.shard_linear` for its GGUF projections (:mod:`muser_mlx.tensor_parallel`)."""

from __future__ import annotations

import logging

import mlx.core as mx
from mlx import nn
from mlx.utils import tree_map_with_path

from . import member_bytes
from .distributed import ShardedEmbedding, ShardedLinear
from .embedding import Embedding
from .linear import Linear
from .tensor_parallel import AllToShardedLinear, ShardedToAllLinear, gguf_shard_linear

log = logging.getLogger("muser_mlx")


def member_parts(model: nn.Module) -> dict[str, tuple[member_bytes.Pieces | None, member_bytes.Pieces | None]]:
    """Module path -> ``(rows, byte columns)`` of the whole tensor that each sharded module of
    ``model`` holds (:mod:`muser_mlx.member_bytes`), as ``muser_mlx.load`` reads them."""
    sharded = (ShardedEmbedding, ShardedLinear, AllToShardedLinear, ShardedToAllLinear)
    return {path: module.part for path, module in model.named_modules() if isinstance(module, sharded)}


def shard(model: nn.Module, group: mx.distributed.Group | None = None, layers: bool = True) -> nn.Module:
    """Split ``model`` over ``group`` (default ``mx.distributed.init()``) in place, and return it:
    its token embeddings (every :class:`Embedding`, and with it a tied head:
    ``embed_tokens.as_linear``) and its untied LM head (a :class:`Linear` named ``lm_head``) by
    vocabulary; with ``layers``, also its layers, by the model's own mlx-lm ``shard()`` (attention
    heads and MLP features, as mlx-lm splits that architecture), its :class:`Linear` projections
    through :func:`muser_mlx.shard_linear` and any others through MLX's. A model without
    ``shard()`` keeps its layers whole on every member. A group of one leaves ``model`` as it is.

    ``layers=False`` touches the embeddings and the head only; mlx-lm's ``model.shard(group)``
    may then follow, where the layers are float or MLX-quantized."""
    group = group or mx.distributed.init()
    if group.size() == 1:
        return model

    def split(path: str, module):
        if type(module) is Embedding:
            return ShardedEmbedding.from_embedding(module, group)
        if type(module) is Linear and path.rsplit(".", 1)[-1] == "lm_head":
            return ShardedLinear.from_linear(module, group)
        return module

    model.update_modules(tree_map_with_path(split, model.leaf_modules(), is_leaf=nn.Module.is_module))
    if layers and hasattr(model, "shard"):
        with gguf_shard_linear(model):
            model.shard(group)
    elif layers:
        log.info("%s has no shard(): its layers stay whole on every member", type(model).__module__)
    return model
