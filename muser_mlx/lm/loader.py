"""``load(path) -> (model, tokenizer)``: a GGUF file as mlx-lm's own model, every weight in its GGUF
bytes, and its tokenizer."""

from __future__ import annotations

import importlib
from pathlib import Path

import mlx.core as mx
import numpy as np
from mlx import nn
from mlx.utils import tree_flatten, tree_unflatten

from .. import member_bytes
from ..embedding import Embedding
from ..errors import GGUFError
from ..gguf import open_gguf
from ..linear import Linear
from ..sharding import member_parts, shard
from .architectures import BLOCK_TENSOR, MODEL_TENSORS, Architecture, Metadata, architecture, unpermute_rows
from .tokenizer import Vocab, tokenizer_wrapper
from .vectors import decoded


def load(
    path: str | Path,
    dtype: mx.Dtype | None = None,
    adapter_path: str | None = None,
    *,
    backend: str = "auto",
    group: mx.distributed.Group | None = None,
) -> tuple[nn.Module, object]:
    """The GGUF model at ``path`` as mlx-lm's model of its architecture and its tokenizer, as
    ``mlx_lm.load`` returns them: ``mlx_lm.generate(*muser_mlx.load(path), prompt=...)`` works.

    Every 2-D weight stays in its GGUF bytes: the token embedding an :class:`Embedding` (also the
    LM head where the file has no ``output.weight``: ``embed_tokens.as_linear``), each projection
    and an untied head a :class:`Linear`. Norms are float arrays with llama.cpp's conventions undone
    (see ``architectures``).

    Args:
        path: a GGUF file of architecture llama, granite, smollm3, qwen2, qwen3, olmo2, phi3, gemma2 or gemma3 (else
            ``GGUFError``).
        dtype: the compute dtype (the embedding's output, norms, biases); default the family's
            (float16 for llama, bfloat16 for the others: ``Architecture.dtype``).
        adapter_path: mlx-lm LoRA adapters to apply (``mlx_lm.tuner.utils.load_adapters``).
        backend: for every Embedding and Linear: ``"auto"``, ``"metal"``, ``"cuda"``, ``"cpu"`` or
            ``"ops"``.
        group: an ``mx.distributed`` group to shard the model over as :func:`muser_mlx.shard`
            does (embedding, head and layers), before any weight is read: each member reads
            its part of every 2-D tensor from the file, never the whole.
    """
    with open_gguf(path) as f:
        arch = architecture(f)
        args = {"model_type": arch.model_type, **arch.args(Metadata(f, arch.gguf))}  # args may name another
        tokenizer = tokenizer_wrapper(Vocab.from_gguf(f))  # its errors before any weight is read
        if group is not None:
            _check_heads(f.path, args, group.size())
        dtype = dtype or getattr(mx, arch.dtype)
        models = importlib.import_module(f"mlx_lm.models.{args['model_type']}")
        model = models.Model(models.ModelArgs.from_dict(args))
        rope = arch.rope(f, args) if arch.rope else None  # of the file's tensors, where mlx-lm's cannot be
        if rope is not None:
            for layer in model.layers:
                layer.self_attn.rope = rope
        places = _places(f, arch, args["model_type"])
        use_gguf_modules(model, gguf_tensors(places), dtype, backend, f.path)
        if group is not None:
            shard(model, group)
        parts = member_parts(model)
        _check_places(f, args["model_type"], places, model, parts)
        weights = gguf_weights(f, arch, args, places, parts)
        if hasattr(model, "sanitize"):  # as mlx_lm.utils.load_model (gemma2 has none)
            weights = model.sanitize(weights)
        weights["model.embed_tokens.dtype"] = mx.zeros((0,), dtype)
        try:
            model.load_weights(list(weights.items()), strict=True)
        except ValueError as e:  # a parameter the file does not hold
            raise GGUFError(f"{f.path}: its tensors do not fill mlx-lm's {args['model_type']} model: {e}") from e
        del weights
        model.set_dtype(dtype)
        model.model.embed_tokens.tied = f.tied
    if adapter_path is not None:
        from mlx_lm.utils import load_adapters

        load_adapters(model, adapter_path)
    model.eval()
    mx.eval(model.parameters())
    return model, tokenizer


def _places(f, arch: Architecture, model_type: str):
    """``(name, info, kind, module path, "weight" | "bias")`` of each tensor of ``f``, in file
    order; ``GGUFError`` naming those with no place in the model."""
    names, places, unused = arch.tensor_names(), [], []
    for name, info in f.tensors.items():
        if name in arch.rope_tensors:  # no parameter: the rope's (ropes.py)
            continue
        block = BLOCK_TENSOR.fullmatch(name)
        if block:
            layer, kind, what = block.groups()
            module = names.get(kind)
            path = f"model.layers.{layer}.{module}"
        else:
            kind, _, what = name.rpartition(".")
            module = path = MODEL_TENSORS.get(kind)
        if module is None:
            unused.append(name)
        places.append((name, info, kind, path, what))
    if unused:
        raise GGUFError(f"{f.path}: tensors {', '.join(unused)} have no place in mlx-lm's {model_type} model")
    return places


def _check_heads(path: Path, args: dict, members: int) -> None:
    """``ValueError`` unless every member of ``members`` can hold whole attention and key-value
    heads (mlx-lm splits attention by heads; llama's Q/K rows are unpermuted head by head)."""
    heads, kv_heads = args["num_attention_heads"], args["num_key_value_heads"]
    if heads % members or kv_heads % members:
        raise ValueError(
            f"{path}: {heads} attention heads and {kv_heads} key-value heads cannot be split over {members} "
            "members: each must hold whole heads"
        )


def _check_places(f, model_type: str, places: list, model: nn.Module, parts: dict) -> None:
    """``GGUFError`` naming each tensor of ``f`` (``places``: :func:`_places`) that is no parameter
    of ``model`` (a block past its block count, say), or a 1-D one whose length is not the
    parameter's, before any is read."""
    params = dict(tree_flatten(model.parameters()))
    unplaced, misfit = [], []
    for name, info, _, path, what in places:
        param = params.get(f"{path}.{what}")
        if param is None:
            unplaced.append(name)
        elif len(info.shape) == 1 and path not in parts and param.shape != tuple(info.shape):
            misfit.append(f"{name} {list(info.shape)} (the model's {path}.{what}: {list(param.shape)})")
    if unplaced:
        raise GGUFError(f"{f.path}: tensors {', '.join(unplaced)} have no place in mlx-lm's {model_type} model")
    if misfit:
        raise GGUFError(f"{f.path}: tensors of another length than the model's: {'; '.join(misfit)}")


def gguf_tensors(places: list) -> dict:
    """Module path -> ``TensorInfo`` of each 2-D tensor of a file's ``places`` (:func:`_places`)."""
    return {path: info for _, info, _, path, _ in places if len(info.shape) == 2}


def gguf_weights(f, arch: Architecture, args: dict, places: list, parts: dict) -> dict[str, mx.array]:
    """mlx-lm parameter name -> array for each of ``f``'s ``places`` (:func:`_places`): 2-D tensors
    as their bytes ``uint8 [rows, row_bytes]``, 1-D ones dequantized to float32; Q/K rows and norms
    with the architecture's quirks undone.
    ``parts`` (module path -> ``(rows, byte columns)``, :func:`member_parts`): of those modules'
    2-D tensors only those bytes are read, their biases sliced to those rows."""
    weights = {}
    for name, info, kind, path, what in places:
        rows, columns = parts.get(path, (None, None))
        heads = {"attn_q": args["num_attention_heads"], "attn_k": args["num_key_value_heads"]}.get(kind)
        permuted = arch.permuted_qk and heads is not None
        if len(info.shape) == 2:
            data = member_bytes.read(f, info, rows, columns)  # uint8 [rows, row_bytes]
            if permuted:  # a member's Q or K rows are whole heads, each permuted within itself
                data = mx.array(unpermute_rows(np.asarray(memoryview(data)), heads * data.shape[0] // info.rows))
            weights[f"{path}.{what}"] = data
        else:
            values = decoded(f, name)
            if permuted:  # a Q or K bias: permuted as the rows are
                values = unpermute_rows(values, heads)
            if rows is not None:
                values = member_bytes.take(values, rows)
            weights[f"{path}.{what}"] = values - arch.norm_offset if kind.endswith("norm") else values
    return weights


def use_gguf_modules(model: nn.Module, tensors: dict, dtype: mx.Dtype, backend: str, path: Path) -> None:
    """Put an empty :class:`Embedding` / :class:`Linear` of the file's type wherever the model has
    an ``nn.Embedding`` / ``nn.Linear`` whose weight is a 2-D tensor of the file (``tensors``:
    module path -> ``TensorInfo``), of the model's sizes, which the tensor's must be."""
    swaps = []
    for name, module in model.named_modules():
        info = tensors.get(name)
        if info is None:
            continue
        qtype, (rows, dims) = info.qtype, module.weight.shape
        if tuple(info.shape) != (dims, rows):
            raise GGUFError(
                f"{path}: tensor {info.name!r} has shape {list(info.shape)}; the model's {name} "
                f"(from the metadata) needs [{dims}, {rows}] (ggml order: inputs, outputs)"
            )
        try:
            if isinstance(module, nn.Embedding):
                swaps.append((name, Embedding(rows, dims, qtype, dtype, backend=backend)))
            elif isinstance(module, nn.Linear):
                swaps.append((name, Linear(dims, rows, "bias" in module, qtype, backend=backend)))
            else:
                raise GGUFError(f"{path}: {name} is a {type(module).__name__}, not an Embedding or Linear")
        except ValueError as e:
            raise GGUFError(f"{path}: the {qtype} tensor for {name} [{rows}, {dims}] cannot be held: {e}") from e
    model.update_modules(tree_unflatten(swaps))
