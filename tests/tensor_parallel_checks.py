"""The tensor-parallel half of a distributed run (tests/distributed_worker.py calls it on every
member): ``shard_linear``'s two shardings of a ``muser_mlx.Linear`` against the unsharded
module, the sharded modules read from a file against those sliced in memory, and whole models
(embedding, head and every layer) sharded by ``muser_mlx.shard`` against the unsharded ones."""

from __future__ import annotations

import gc
from pathlib import Path

import mlx.core as mx
import numpy as np
from mlx import nn
from mlx.utils import tree_map_with_path

from muser_mlx import (
    AllToShardedLinear,
    Linear,
    ShardedEmbedding,
    ShardedLinear,
    ShardedToAllLinear,
    Table,
    load,
    quantize_embeddings,
    save_gguf,
    shard,
    shard_linear,
)
from muser_mlx.member_bytes import split_pieces

from conftest import FIXTURES, random_table_bytes

FIXTURE = FIXTURES / "tiny-llama-Q4_K_M.gguf"  # 4 heads of 128; ffn_down Q6_K 1024 -> 512
# (qtype, outputs, inputs, bias): inputs split into whole blocks over 2 and 3 members
LINEAR_CASES = [("Q8_0", 12, 192, True), ("Q6_K", 6, 1536, False), ("Q4_K", 18, 1536, True)]
FILE_CASE = ("Q8_0", 20001, 192)  # 4.1 MB: allocations of a few KB are noise beside it


def relative(got: mx.array, want: mx.array) -> float:
    """max |got - want| / max |want| over each row (last axis), the worst row."""
    got, want = (np.array(a.astype(mx.float32)).astype(np.float64) for a in (got, want))
    assert got.shape == want.shape, (got.shape, want.shape)
    scale = np.abs(want).max(axis=-1, keepdims=True)
    return float((np.abs(got - want) / np.where(scale > 0, scale, 1)).max())


def error_of(fn) -> str | None:
    try:
        mx.eval(fn())
    except (IndexError, TypeError, ValueError) as e:
        return f"{type(e).__name__}: {e}"
    return None


def indices(pieces) -> np.ndarray:
    return np.concatenate([np.arange(a, b) for a, b in pieces])


def linear_case(qtype: str, outputs: int, inputs: int, bias: bool, group) -> dict:
    """Both shardings of one Linear, eager and compiled, and x's gradient through each."""
    rng = np.random.default_rng(outputs * 11 + inputs)
    b = mx.array(rng.standard_normal(outputs).astype(np.float32)) if bias else None
    full = Linear.from_table(Table.from_bytes(random_table_bytes(rng, qtype, outputs, inputs), qtype, inputs), b)
    x = mx.array(rng.standard_normal((2, 3, inputs)).astype(np.float32))
    c = mx.array(rng.standard_normal((2, 3, outputs)).astype(np.float32))
    want, want_grad = full(x), mx.grad(lambda x: (full(x) * c).sum())(x)

    rows = indices(split_pieces(outputs, 1, group, "rows"))
    cols = indices(split_pieces(inputs, 1, group, "columns"))
    mine, cs = mx.array(rows), c[..., mx.array(rows)]
    to_sharded = shard_linear(full, "all-to-sharded", group=group)
    to_all = shard_linear(full, "sharded-to-all", group=group)
    xs = x[..., mx.array(cols)]  # this member's input features
    return {
        "case": f"{qtype} {outputs}x{inputs}" + (" + bias" if bias else ""),
        "types": [type(to_sharded).__name__, type(to_all).__name__],
        "sizes": [to_sharded.input_dims, to_sharded.output_dims, to_all.input_dims, to_all.output_dims],
        "to_sharded_rel": relative(to_sharded(x), want[..., mine]),
        "to_sharded_compiled_rel": relative(mx.compile(to_sharded)(x), want[..., mine]),
        # each member's loss over its outputs; their sum's gradient, all_sum'd in the backward pass
        "to_sharded_grad_rel": relative(mx.grad(lambda x: (to_sharded(x) * cs).sum())(x), want_grad),
        "to_all_rel": relative(to_all(xs), want),
        "to_all_compiled_rel": relative(mx.compile(to_all)(xs), want),
        "to_all_grad_rel": relative(mx.grad(lambda x: (to_all(x) * c).sum())(xs), want_grad[..., mx.array(cols)]),
    }


def from_file(out: Path, group) -> dict:
    """The sharded modules read from a GGUF file: the bytes of those sliced from the whole module
    in memory (``segments=2`` for the projections), and MLX's peak memory while one reads a
    table: this member's share."""
    qtype, rows, dims = FILE_CASE
    rng = np.random.default_rng(2)
    data = random_table_bytes(rng, qtype, rows, dims)
    proj = Table.from_bytes(random_table_bytes(rng, "Q8_0", 12, 384), "Q8_0", 384)
    path = out / f"tables{group.rank()}.gguf"
    save_gguf(path, {"token_embd.weight": Table.from_bytes(data, qtype, dims), "proj.weight": proj})

    def same(a, b) -> bool:
        return a.weight.shape == b.weight.shape and bool(np.array_equal(np.array(a.weight), np.array(b.weight)))

    head, linear = Linear.from_gguf(path, "token_embd.weight"), Linear.from_table(proj)
    report = {
        "ShardedLinear": same(
            ShardedLinear.from_gguf(path, "token_embd.weight", group=group), ShardedLinear.from_linear(head, group)
        ),
        **{
            cls.__name__: same(
                cls.from_gguf(path, "proj.weight", segments=2, group=group),
                cls.from_linear(linear, segments=2, group=group),
            )
            for cls in (AllToShardedLinear, ShardedToAllLinear)
        },
    }
    del head
    gc.collect()
    mx.reset_peak_memory()
    base = mx.get_active_memory()
    sharded = ShardedEmbedding.from_gguf(path, group=group)
    report["peak"] = mx.get_peak_memory() - base
    report["weight_bytes"] = int(sharded.weight.nbytes)
    report["table_bytes"] = int(data.nbytes)
    report["embedding_equal"] = bool(np.array_equal(np.array(sharded.weight), data[sharded.start : sharded.stop]))
    report["errors"] = {
        # Q4_K blocks are 256 values: 1152 inputs are 2.25 blocks over 2 members, 1.5 over 3
        "blocks": error_of(lambda: ShardedToAllLinear(1152, 4, qtype="Q4_K", group=group)),
        "sharding": error_of(lambda: shard_linear(linear, "row", group=group)),
        "segments": error_of(lambda: shard_linear(linear, "all-to-sharded", segments=5, group=group)),
    }
    return report


def small_llama(tied: bool, seed: int) -> nn.Module:
    """A random mlx-lm llama of 2 layers, 6 heads of 32 and a vocabulary of 1,001, its token
    embedding a Q4_K ``muser_mlx.Embedding``, the rest float."""
    from mlx_lm.models import llama

    args = llama.ModelArgs(
        model_type="llama",
        hidden_size=256,
        num_hidden_layers=2,
        intermediate_size=384,
        num_attention_heads=6,
        num_key_value_heads=6,
        head_dim=32,
        rms_norm_eps=1e-5,
        vocab_size=1001,
        tie_word_embeddings=tied,
    )
    mx.random.seed(seed)
    model = llama.Model(args)
    quantize_embeddings(model, "Q4_K")
    return model


def quantized_llama(group) -> nn.Module:
    """A random mlx-lm llama whose every weight is GGUF bytes: the embedding, q/k/v/gate/up and
    the untied head Q4_K (all-to-sharded: whole rows), o Q8_0 and down Q4_0 (sharded-to-all: 192
    and 384 inputs are whole blocks of 32 over 2 and 3 members)."""
    model = small_llama(tied=False, seed=3)

    def quantized(path: str, module):
        if not isinstance(module, nn.Linear):
            return module
        name = path.rsplit(".", 1)[-1]
        return Linear.from_linear(module, {"o_proj": "Q8_0", "down_proj": "Q4_0"}.get(name, "Q4_K"))

    model.update_modules(tree_map_with_path(quantized, model.leaf_modules(), is_leaf=nn.Module.is_module))
    mx.eval(model.parameters())
    return model


def models(group) -> dict:
    """Whole models sharded (embedding, head, every layer) by ``muser_mlx.shard``, and by
    ``muser_mlx.load(..., group=)`` reading each member's part of the file, against the unsharded
    ones: float32 logits of a prompt, and mlx-lm's ``generate_step`` greedy tokens."""
    from mlx_lm.generate import generate_step

    prompt = mx.array([1, 17, 400, 999, 3])

    def tokens(model, n=8):
        return [int(t) for t, _ in generate_step(prompt, model, max_tokens=n)]

    def random_llama():
        return quantized_llama(group)

    def fixture():
        return load(FIXTURE, dtype=mx.float32)[0]

    # (name, the unsharded model, the sharded one)
    builds = [("random llama", random_llama, lambda: shard(random_llama(), group))]
    if FIXTURE.is_file():
        builds.append(("load", fixture, lambda: shard(fixture(), group)))
        builds.append(("load(group=)", fixture, lambda: load(FIXTURE, dtype=mx.float32, group=group)[0]))
    report = {}
    for name, build, build_sharded in builds:
        model = build()
        want_logits, want_tokens = model(prompt[None]), tokens(model)
        try:
            model = build_sharded()
        except ValueError as e:
            report[name] = {"error": f"{type(e).__name__}: {e}"}
            continue
        attn = model.model.layers[0].self_attn
        report[name] = {
            "types": sorted({type(m).__name__ for _, m in model.named_modules() if "Shard" in type(m).__name__}),
            "heads": [attn.n_heads, attn.n_kv_heads],
            "rel": relative(model(prompt[None]), want_logits),
            "tokens_equal": tokens(model) == want_tokens,
        }
    return report


def report(out: Path, group) -> dict:
    return {
        "linear": [linear_case(*c, group) for c in LINEAR_CASES],
        "file": from_file(out, group),
        "models": models(group),
    }
