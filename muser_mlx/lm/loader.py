"""``load(path) -> (model, tokenizer)``: a GGUF file as mlx-lm's own model, every weight in its GGUF
bytes, and its tokenizer."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import mlx.core as mx
from mlx import nn
from mlx.utils import tree_unflatten

from ..embedding import Embedding
from ..errors import GGUFError
from ..formats import FORMATS
from ..gguf import open_gguf
from ..linear import Linear
from .architectures import (
    MODEL_TENSORS,
    Architecture,
    Metadata,
    architecture,
    unpermute_rows,
)
from .tokenizer import Vocab, tokenizer_wrapper

_BLOCK = re.compile(r"blk\.(\d+)\.(\w+)\.(weight|bias)")


def load(
    path: str | Path, dtype: mx.Dtype | None = None, adapter_path: str | None = None, *, backend: str = "auto"
) -> tuple[nn.Module, object]:
    """The GGUF model at ``path`` as mlx-lm's model of its architecture and its tokenizer, as
    ``mlx_lm.load`` returns them: ``mlx_lm.generate(*muser_mlx.load(path), prompt=...)`` works.

    Every 2-D weight stays in its GGUF bytes: the token embedding an :class:`Embedding` (also the
    LM head where the file has no ``output.weight``: ``embed_tokens.as_linear``), each projection
    and an untied head a :class:`Linear`. Norms are float arrays with llama.cpp's conventions undone
    (see ``architectures``).

    Args:
        path: a GGUF file of architecture llama, qwen2, qwen3 or gemma3 (else ``GGUFError``).
        dtype: the compute dtype (the embedding's output, norms, biases); default the family's
            (Gemma 3, Qwen: bfloat16; Llama: float16).
        adapter_path: mlx-lm LoRA adapters to apply (``mlx_lm.tuner.utils.load_adapters``).
        backend: for every Embedding and Linear: ``"auto"``, ``"metal"``, ``"cuda"`` or ``"ops"``.
    """
    with open_gguf(path) as f:
        arch = architecture(f)
        args = {**arch.args(Metadata(f, arch.gguf)), "model_type": arch.model_type}
        dtype = dtype or getattr(mx, arch.dtype)
        models = importlib.import_module(f"mlx_lm.models.{arch.model_type}")
        model = models.Model(models.ModelArgs.from_dict(args))
        weights, tensors = gguf_weights(f, arch, args)
        weights = model.sanitize(weights)
        use_gguf_modules(model, tensors, dtype, backend, f.path)
        weights["model.embed_tokens.dtype"] = mx.zeros((0,), dtype)
        model.load_weights(list(weights.items()), strict=True)
        del weights
        model.set_dtype(dtype)
        model.model.embed_tokens.tied = f.tied
        tokenizer = tokenizer_wrapper(Vocab.from_gguf(f))
    if adapter_path is not None:
        from mlx_lm.utils import load_adapters

        load_adapters(model, adapter_path)
    model.eval()
    mx.eval(model.parameters())
    return model, tokenizer


def gguf_weights(f, arch: Architecture, args: dict) -> tuple[dict[str, mx.array], dict]:
    """mlx-lm parameter name -> array, and module path -> ``TensorInfo`` of each 2-D tensor: 2-D
    tensors as their bytes ``uint8 [rows, row_bytes]``, 1-D ones dequantized to float32; Q/K rows
    and norms with the architecture's quirks undone."""
    names = arch.tensor_names()
    weights, tensors, unused = {}, {}, []
    for name, info in f.tensors.items():
        block = _BLOCK.fullmatch(name)
        if block:
            layer, kind, what = block.groups()
            module = names.get(kind)
            path = f"model.layers.{layer}.{module}"
        else:
            kind, _, what = name.rpartition(".")
            module = path = MODEL_TENSORS.get(kind)
        if module is None:
            unused.append(name)
            continue
        data = f.read(name)  # uint8 [rows, row_bytes]
        heads = {"attn_q": args["num_attention_heads"], "attn_k": args["num_key_value_heads"]}.get(kind)
        permuted = arch.permuted_qk and heads is not None
        if len(info.shape) == 2:
            weights[f"{path}.{what}"] = mx.array(unpermute_rows(data, heads) if permuted else data)
            tensors[path] = info
        else:
            values = _dequantized(data, info, f.path)
            if permuted:  # a Q or K bias: permuted as the rows are
                values = unpermute_rows(values, heads)
            weights[f"{path}.{what}"] = values - arch.norm_offset if kind.endswith("norm") else values
    if unused:
        raise GGUFError(f"{f.path}: tensors {', '.join(unused)} have no place in mlx-lm's {arch.model_type} model")
    return weights, tensors


def _dequantized(data, info, path) -> mx.array:
    """A 1-D tensor's bytes -> float32 [n] by the format's decoder."""
    fmt = FORMATS.get(info.qtype)
    if fmt is None:
        raise GGUFError(f"{path}: tensor {info.name!r} has type {info.qtype}; supported: {', '.join(FORMATS)}")
    blocks = mx.array(data.reshape(-1)).reshape(-1, fmt.block_bytes)
    return fmt.decode(blocks).reshape(-1)


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
