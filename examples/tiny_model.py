"""A tiny MLX language model whose token embedding is a quantized GGUF table (muser_mlx.Embedding).

    ids [B, T] -> Embedding (Q4_K bytes, rows dequantized on lookup) -> h [B, T, dims] float32
       -> n_layers x (RMSNorm -> causal attention -> + ; RMSNorm -> SwiGLU MLP -> +)
       -> RMSNorm -> head (nn.Linear, or the embedding itself when tied) -> logits [B, T, vocab]

The table comes from the fixtures' tiny llama (``../shared/fixtures/tiny-llama-Q4_K_M.gguf``,
Q4_K 1003 x 512) when that folder is beside the checkout, else from a GGUF this script writes
(random floats -> ``quantize`` -> ``save_gguf``). Every other weight is random with a fixed seed.

The forward pass and greedy generation run under ``mx.compile``, so the lookup is one more node
in the graph the layers are in. The script checks that the logits and the generated tokens are
exactly those of the same model built with ``mlx.nn.Embedding`` over the dequantized float32
table. Run: ``python examples/tiny_model.py [--tied]``.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

# The model is compared with its float-table twin bit for bit, so float32 matmuls run in full
# precision: MLX's CUDA (and M5 Metal) backends default to TF32 unless this is 0.
os.environ.setdefault("MLX_ENABLE_TF32", "0")

import mlx.core as mx  # noqa: E402
import mlx.nn as nn  # noqa: E402
import numpy as np  # noqa: E402
from mlx.utils import tree_flatten

from muser_mlx import Embedding, Table, embedding
from muser_mlx.quantize import quantize
from muser_mlx.writer import save_gguf

FIXTURE = Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "tiny-llama-Q4_K_M.gguf"
TENSOR = "token_embd.weight"
SEED = 0


class Attention(nn.Module):
    """Causal multi-head self-attention with rotary positions: [B, T, dims] -> [B, T, dims]."""

    def __init__(self, dims: int, n_heads: int):
        super().__init__()
        self.n_heads = n_heads
        self.qkv = nn.Linear(dims, 3 * dims, bias=False)
        self.out = nn.Linear(dims, dims, bias=False)
        self.rope = nn.RoPE(dims // n_heads)

    def __call__(self, x: mx.array) -> mx.array:
        B, T, D = x.shape
        heads = self.qkv(x).reshape(B, T, 3, self.n_heads, D // self.n_heads).transpose(2, 0, 3, 1, 4)
        q, k, v = self.rope(heads[0]), self.rope(heads[1]), heads[2]  # each [B, heads, T, D/heads]
        o = mx.fast.scaled_dot_product_attention(q, k, v, scale=(D // self.n_heads) ** -0.5, mask="causal")
        return self.out(o.transpose(0, 2, 1, 3).reshape(B, T, D))


class Block(nn.Module):
    def __init__(self, dims: int, n_heads: int, hidden: int):
        super().__init__()
        self.attn_norm, self.attn = nn.RMSNorm(dims), Attention(dims, n_heads)
        self.mlp_norm = nn.RMSNorm(dims)
        self.gate = nn.Linear(dims, hidden, bias=False)
        self.up = nn.Linear(dims, hidden, bias=False)
        self.down = nn.Linear(hidden, dims, bias=False)

    def __call__(self, x: mx.array) -> mx.array:
        x = x + self.attn(self.attn_norm(x))
        h = self.mlp_norm(x)
        return x + self.down(nn.silu(self.gate(h)) * self.up(h))


class TinyLM(nn.Module):
    """``embed``: ``muser_mlx.Embedding`` or ``mlx.nn.Embedding`` (anything with ``num_embeddings``,
    ``dims`` or ``weight`` and, for ``tied=True``, ``as_linear``)."""

    def __init__(self, embed: nn.Module, n_layers: int = 2, n_heads: int = 8, tied: bool = False):
        super().__init__()
        vocab, dims = _shape(embed)
        self.tied = tied
        self.embed = embed
        self.layers = [Block(dims, n_heads, 2 * dims) for _ in range(n_layers)]
        self.norm = nn.RMSNorm(dims)
        if not tied:
            self.head = nn.Linear(dims, vocab, bias=False)

    def __call__(self, ids: mx.array) -> mx.array:
        h = self.embed(ids)
        for layer in self.layers:
            h = layer(h)
        h = self.norm(h)
        return self.embed.as_linear(h) if self.tied else self.head(h)


def _shape(embed: nn.Module) -> tuple[int, int]:
    """(vocab, dims) of either embedding class."""
    if isinstance(embed, Embedding):
        return embed.num_embeddings, embed.dims
    return tuple(embed.weight.shape)


def with_float_table(model: TinyLM, table: Table, tied: bool) -> TinyLM:
    """The same model, but with ``mlx.nn.Embedding`` over the dequantized float32 table."""
    float_embed = nn.Embedding(table.vocab, table.dims)
    float_embed.weight = embedding(table, mx.arange(table.vocab))  # float32 [vocab, dims]
    ref = TinyLM(float_embed, len(model.layers), model.layers[0].attn.n_heads, tied)
    ref.load_weights([(k, v) for k, v in tree_flatten(model.parameters()) if not k.startswith("embed.")], strict=False)
    return ref


def greedy(forward, prompt: mx.array, steps: int) -> list[int]:
    """Greedy tokens after ``prompt [1, n]``; ``forward``: ids [1, T] -> logits [1, T, vocab].

    The ids live in one [1, n + steps] buffer, zero-padded at the end: the causal mask keeps the
    padding out of earlier positions, and one fixed shape means one compiled graph for every step.
    """
    n = prompt.shape[1]
    ids = mx.concatenate([prompt, mx.zeros((1, steps), dtype=prompt.dtype)], axis=1)
    for t in range(n, n + steps):
        ids[:, t] = mx.argmax(forward(ids)[:, t - 1], axis=-1).astype(ids.dtype)
    return ids[0, n:].tolist()


def make_gguf(folder: Path, vocab: int = 1000, dims: int = 256) -> Path:
    """A Q4_K token_embd from random floats, written with save_gguf."""
    weights = np.random.default_rng(SEED).normal(0, 0.02, (vocab, dims)).astype(np.float32)
    table = Table.from_bytes(quantize(weights, "Q4_K", progress=False), "Q4_K", dims)
    return save_gguf(folder / "tiny-Q4_K.gguf", {TENSOR: table}, {"general.name": "muser_mlx tiny model"})


def run(path: Path, tied: bool = False, steps: int = 8, say=print) -> None:
    embed = Embedding.from_gguf(path, TENSOR)
    table = embed.table
    say(f"embedding: {table}")
    mx.random.seed(SEED)
    model = TinyLM(embed, tied=tied)
    ref = with_float_table(model, table, tied)
    n_params = sum(v.size for k, v in tree_flatten(model.parameters()) if not k.startswith("embed."))
    say(
        f"model: {len(model.layers)} layers, dims {table.dims}, vocab {table.vocab}, "
        f"{'tied head (embed.as_linear)' if tied else 'separate nn.Linear head'}, {n_params:,} float32 "
        f"parameters besides the table ({table.nbytes / 2**10:,.0f} KiB of {table.qtype}; "
        f"{4 * table.vocab * table.dims / 2**10:,.0f} KiB as float32)"
    )

    forward, forward_ref = mx.compile(model), mx.compile(ref)
    prompt = mx.array([[1, 17, 42, 7, table.vocab - 1]], dtype=mx.int32)
    t0 = time.perf_counter()
    logits = forward(prompt)
    mx.eval(logits)
    say(
        f"forward (compiled) on {mx.default_device()}: ids {list(prompt.shape)} -> logits "
        f"{list(logits.shape)} {logits.dtype} in {(time.perf_counter() - t0) * 1e3:.1f} ms (incl. compile)"
    )
    logits_ref = forward_ref(prompt)
    diff = mx.abs(logits - logits_ref).max().item()
    same = mx.array_equal(logits, logits_ref).item()
    say(f"logits vs nn.Embedding over the dequantized table: max |diff| = {diff:.3g}, bit-identical: {same}")
    # The lookup is bit-identical to the dequantized table, so the untied model must be too; a tied
    # head's matmul over the quantized bytes may sum in another order, so it gets a tolerance.
    assert same or (tied and mx.allclose(logits, logits_ref, rtol=1e-4, atol=1e-5).item()), (
        f"logits differ from the float-table model (max |diff| {diff})"
    )
    # Compiled graphs fuse and reorder float math (on a GPU, differently from eager kernels), so
    # compiled and eager logits agree to float tolerance, not bit for bit.
    eager = model(prompt)
    assert mx.allclose(eager, logits, rtol=1e-3, atol=1e-4).item(), "compiled and eager logits disagree"

    t0 = time.perf_counter()
    tokens = greedy(forward, prompt, steps)
    took = time.perf_counter() - t0
    tokens_ref = greedy(forward_ref, prompt, steps)
    say(f"greedy generation, {steps} steps (compiled) in {took * 1e3:.1f} ms: {tokens}")
    say(f"same tokens as the float-table model: {tokens == tokens_ref}")
    assert tokens == tokens_ref, f"generation differs: {tokens} vs {tokens_ref}"
    say(f"OK: the quantized embedding gives {'exactly ' if same else ''}the float-table model's logits and its tokens")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tied", action="store_true", help="tie the head to the embedding (Embedding.as_linear)")
    parser.add_argument("--steps", type=int, default=8, help="greedy generation steps (default 8)")
    args = parser.parse_args(argv)
    if FIXTURE.is_file():
        print(f"table from the fixture {FIXTURE}")
        run(FIXTURE, args.tied, args.steps)
        return
    with tempfile.TemporaryDirectory() as folder:
        path = make_gguf(Path(folder))
        print(f"fixture absent ({FIXTURE}); wrote {path} from random floats")
        run(path, args.tied, args.steps)


if __name__ == "__main__":
    main()
