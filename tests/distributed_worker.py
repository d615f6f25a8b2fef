"""One member of a vocab-parallel run (tests/test_distributed.py launches it with ``mlx.launch``):
measures the sharded modules against the unsharded ones and gguf-py, and writes its report,
``OUT/rank<r>.json``. Every member builds the same tables and inputs from the same seeds.

    mlx.launch -n 2 --backend ring -- python tests/distributed_worker.py --out OUT
    mlx.launch -n 2 --backend nccl -- python tests/distributed_worker.py --out OUT --device gpu --backend nccl
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
from pathlib import Path

import mlx.core as mx
import numpy as np
import tensor_parallel_checks
from tensor_parallel_checks import error_of, relative

from muser_mlx import (
    Embedding,
    Linear,
    ShardedEmbedding,
    ShardedLinear,
    Table,
    shard,
    shard_embedding,
)

from conftest import FIXTURES, random_table_bytes, reference

# (qtype, vocab, dims): vocabularies not divisible by 2 or 3 (1003, 1001, 301, 257), by 3 only
# (100) and by both (300)
CASES = [
    ("Q4_K", 1003, 256),
    ("Q6_K", 301, 256),
    ("Q8_0", 1001, 64),
    ("Q5_K", 257, 256),
    ("Q4_0", 300, 64),
    ("F16", 100, 32),
]
LINEAR_CASES = [("Q6_K", 1003, 256, False), ("Q8_0", 301, 64, True)]  # (qtype, outputs, inputs, bias)
MEMORY_CASE = ("Q4_K", 20003, 512)  # 5.8 MB of bytes: allocations of a few KB are noise beside it
FIXTURE = FIXTURES / "tiny-llama-Q4_K_M.gguf"  # vocab 1003, Q4_K token_embd, Q6_K output.weight
DTYPES = {"float32": mx.float32, "float16": mx.float16, "bfloat16": mx.bfloat16}


def bits(a: mx.array) -> np.ndarray:
    return np.array(mx.view(a, mx.uint32 if a.dtype == mx.float32 else mx.uint16))


def same_bits(a: mx.array, b: mx.array) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(bits(a), bits(b))


def memory(group) -> dict:
    """MLX's active memory held by the unsharded module and, after it is dropped, the sharded one."""
    qtype, vocab, dims = MEMORY_CASE
    data = random_table_bytes(np.random.default_rng(1), qtype, vocab, dims)
    gc.collect()
    base = mx.get_active_memory()
    full = Embedding.from_table(Table.from_bytes(data, qtype, dims))
    mx.eval(full.weight)
    full_bytes = mx.get_active_memory() - base
    sharded = shard_embedding(full, group)
    mx.eval(sharded.weight)
    del full
    gc.collect()
    return {
        "table_bytes": int(data.nbytes),
        "full_active": full_bytes,
        "sharded_active": mx.get_active_memory() - base,
        "sharded_weight_bytes": int(sharded.weight.nbytes),
        "rows": [sharded.start, sharded.stop],
    }


def lookups(full: Embedding, sharded: ShardedEmbedding, data: np.ndarray, rng) -> dict:
    vocab, qtype = full.num_embeddings, full.qtype
    ids = {
        "all": mx.arange(vocab, dtype=mx.int32),
        "random": mx.array(rng.integers(0, vocab, (3, 17)).astype(np.int64)),
        "clamped": mx.array(np.array([-1, vocab, vocab + 5, 2**31 - 1, 0, vocab - 1], np.int32)),
        "scalar": mx.array(vocab // 2, mx.uint16),
    }
    report = {}
    for name, dtype in DTYPES.items():
        f = Embedding.from_table(full.table, dtype)
        s = shard_embedding(f, sharded.group)
        report[f"bits_{name}"] = all(same_bits(s(i), f(i)) for i in ids.values())
    report["bits_host_ids"] = same_bits(sharded([[1, 2], [vocab - 1, 0]]), full([[1, 2], [vocab - 1, 0]]))
    report["reference_bits"] = all(
        same_bits(sharded(i), mx.array(reference(data, qtype, np.array(i)))) for i in ids.values()
    )
    compiled = mx.compile(lambda i: sharded(i))
    report["compiled_bits"] = all(same_bits(compiled(i), full(i)) for i in ids.values())
    counts = [sharded.lookup_with_count(ids["clamped"])[1].item(), full.lookup_with_count(ids["clamped"])[1].item()]
    report["counts"] = counts
    raising = [Embedding.from_table(full.table, on_out_of_range="raise")]
    raising.append(shard_embedding(raising[0], sharded.group))
    report["errors"] = {
        "host_id": [error_of(lambda m=m: m([0, vocab])) for m in (sharded, full)],
        "device_id_raise": [error_of(lambda m=m: m(mx.array([3, vocab]))) for m in reversed(raising)],
        "float_ids": [error_of(lambda m=m: m(mx.array([1.0]))) for m in (sharded, full)],
    }
    return report


def sharded_argmax(embed: ShardedEmbedding, h: mx.array) -> mx.array:
    """Greedy tokens from each member's slice of the logits, no logits gathered (docs/distributed.md):
    the largest logit over the group, and among the members that hold it the smallest token id."""
    local = embed.as_linear(h, sharded=True)  # [..., stop - start]
    best = local.max(axis=-1)
    token = embed.start + mx.argmax(local, axis=-1).astype(mx.int32)
    top = mx.distributed.all_max(best, group=embed.group)
    return mx.distributed.all_min(mx.where(best == top, token, embed.num_embeddings), group=embed.group)


def head(full, sharded, dims: int, rng) -> dict:
    """``sharded(x, sharded=...)`` (a sharded head) against ``full(x)`` (the unsharded one)."""
    outputs, start, stop = sharded.num_outputs, sharded.start, sharded.stop
    xs = [mx.array(rng.standard_normal(shape).astype(np.float32)) for shape in ((5, dims), (dims,), (2, 3, dims))]
    report = {
        "rel": max(relative(sharded(x), full(x)) for x in xs),
        "slice_rel": max(relative(sharded(x, sharded=True), full(x)[..., start:stop]) for x in xs),
        "compiled_rel": relative(mx.compile(lambda x: sharded(x))(xs[0]), full(xs[0])),
        "shape": list(sharded(xs[2]).shape),
    }
    x, c = xs[0], mx.array(rng.standard_normal((5, outputs)).astype(np.float32))

    def loss(fn, sliced=False):
        if sliced:
            return lambda x: (fn(x, sharded=True) * c[:, start:stop]).sum()
        return lambda x: (fn(x) * c).sum()

    want = mx.grad(loss(full))(x)
    report["grad_rel"] = relative(mx.grad(loss(sharded))(x), want)
    report["grad_slice_rel"] = relative(mx.grad(loss(sharded, sliced=True))(x), want)
    report["compiled_grad_rel"] = relative(mx.compile(mx.grad(loss(sharded)))(x), want)
    y = x.astype(mx.bfloat16)  # (float16 logits of random scales overflow)
    report["rel_bfloat16"] = relative(sharded(y), full(y))
    return report


class TiedHead:
    """A sharded embedding's ``as_linear`` as the callable :func:`head` takes."""

    def __init__(self, embed: ShardedEmbedding):
        self.embed, self.num_outputs, self.start, self.stop = embed, embed.num_embeddings, embed.start, embed.stop

    def __call__(self, x, sharded=False):
        return self.embed.as_linear(x, sharded=sharded)


def case(qtype: str, vocab: int, dims: int, group) -> dict:
    rng = np.random.default_rng(vocab * 7 + dims)
    data = random_table_bytes(rng, qtype, vocab, dims)
    full = Embedding.from_table(Table.from_bytes(data, qtype, dims))
    sharded = shard_embedding(full, group)
    report = {
        "case": f"{qtype} {vocab}x{dims}",
        "vocab": vocab,
        "rows": [sharded.start, sharded.stop],
        "weight_shape": list(sharded.weight.shape),
        "weight_equal": bool(np.array_equal(np.array(sharded.weight), data[sharded.start : sharded.stop])),
        "lookup": lookups(full, sharded, data, rng),
        "head": head(full.as_linear, TiedHead(sharded), dims, rng),
    }
    xs = [mx.array(rng.standard_normal(shape).astype(np.float32)) for shape in ((5, dims), (dims,))]
    report["head"]["argmax_equal"] = all(
        np.array_equal(np.array(sharded_argmax(sharded, x)), np.array(mx.argmax(full.as_linear(x), axis=-1)))
        for x in xs
    )
    return report


class LinearHead:
    """A ShardedLinear as :func:`head` takes it."""

    def __init__(self, linear: ShardedLinear):
        self.linear, self.num_outputs, self.start, self.stop = linear, linear.output_dims, linear.start, linear.stop

    def __call__(self, x, sharded=False):
        return self.linear(x, sharded=sharded)


def linear_case(qtype: str, outputs: int, dims: int, bias: bool, group) -> dict:
    """An untied head (or any projection): ``shard_linear`` against the unsharded ``Linear``."""
    rng = np.random.default_rng(outputs * 5 + dims)
    data = random_table_bytes(rng, qtype, outputs, dims)
    b = mx.array(rng.standard_normal(outputs).astype(np.float32)) if bias else None
    full = Linear.from_table(Table.from_bytes(data, qtype, dims), bias=b)
    sharded = ShardedLinear.from_linear(full, group)
    rows = slice(sharded.start, sharded.stop)
    return {
        "case": f"Linear {qtype} {outputs}x{dims}" + (" + bias" if bias else ""),
        "vocab": outputs,
        "rows": [sharded.start, sharded.stop],
        "weight_equal": bool(np.array_equal(np.array(sharded.weight), data[rows])),
        "bias_equal": not bias or bool(np.array_equal(np.array(sharded.bias), np.array(b)[rows])),
        "type": type(sharded).__name__,
        "head": head(full, LinearHead(sharded), dims, rng),
    }


def mlx_lm_models(group) -> dict | None:
    """mlx-lm models with muser_mlx modules, sharded by ``muser_mlx.shard(model, group, layers=False)``
    (the embedding and the head) and, where their layers are float, also with ``layers=True`` (MLX's
    ``shard_linear`` for them through the model's own ``shard()``): logits and greedy
    tokens against the unsharded model's on this member. A tied and an untied llama of random
    weights (the untied head a Q4_K ``Linear``), and the tiny-llama fixture through
    ``muser_mlx.load`` (every weight GGUF bytes; its head Q6_K) where the fixtures are present."""
    try:
        from mlx_lm.models.cache import make_prompt_cache
    except ImportError:
        return None
    from muser_mlx import load

    def random_llama(tied: bool):
        model = tensor_parallel_checks.small_llama(tied, seed=0)
        if not tied:
            model.lm_head = Linear.from_linear(model.lm_head, "Q4_K")
        mx.eval(model.parameters())
        return model

    def greedy(model, steps=4):
        cache, tokens = make_prompt_cache(model), []
        logits = model(prompt[None], cache=cache)
        for _ in range(steps):
            tokens.append(mx.argmax(logits[0, -1]).item())
            logits = model(mx.array([[tokens[-1]]]), cache=cache)
        return tokens

    builds = {"tied": lambda: random_llama(True), "untied": lambda: random_llama(False)}
    if FIXTURE.is_file():
        builds["load"] = lambda: load(FIXTURE, dtype=mx.float32)[0]
    prompt = mx.array([1, 17, 400, 999, 3])
    report = {}
    for name, build in builds.items():
        model = build()
        want_logits, want_tokens = model(prompt[None]), greedy(model)
        for layers in (False, True) if name != "load" else (False,):
            model = shard(build(), group, layers=layers)
            report[f"{name}, layers sharded" if layers else name] = {
                "sharded": sorted(
                    {type(m).__name__ for _, m in model.named_modules() if "Sharded" in type(m).__name__}
                ),
                "rel": relative(model(prompt[None]), want_logits),
                "greedy_equal": greedy(model) == want_tokens,
            }
    if "load" in builds:
        from mlx_lm import generate
        from mlx_lm.generate import generation_stream

        model, tokenizer = load(FIXTURE, dtype=mx.float32)
        want = generate(model, tokenizer, prompt="Once upon a time", max_tokens=6)
        report["load"]["generate_equal"] = (
            generate(shard(model, group, layers=False), tokenizer, prompt="Once upon a time", max_tokens=6) == want
        )
        # generate returns with its next step still evaluating on generation_stream (on the CPU and
        # CUDA: mlx-lm synchronizes it on Metal only); its collectives would otherwise pair with
        # the next ones sent from another stream
        mx.synchronize(generation_stream)
    return report


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--backend", default="ring")
    parser.add_argument("--device", choices=("cpu", "gpu"), default="cpu")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    mx.set_default_device(mx.cpu if args.device == "cpu" else mx.gpu)
    group = mx.distributed.init(strict=True, backend=args.backend)
    report = {"rank": group.rank(), "size": group.size(), "device": args.device, "memory": memory(group)}
    report["cases"] = [case(*c, group) for c in CASES]
    report["linear_cases"] = [linear_case(*c, group) for c in LINEAR_CASES]
    report["mlx_lm"] = mlx_lm_models(group)
    report["tensor_parallel"] = tensor_parallel_checks.report(args.out, group)
    (args.out / f"rank{group.rank()}.json").write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    sys.exit(main())
