"""``muser-mlx`` (also ``python -m muser_mlx``): inspect a GGUF, embed ids, run the demo."""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import mlx.core as mx
import numpy as np

from .embedding import Embedding
from .errors import GGUFError
from .gguf import gatherable_tensors, open_gguf, table_tensor
from .lm.architectures import ARCHITECTURES

DTYPES = {"float32": mx.float32, "float16": mx.float16, "bfloat16": mx.bfloat16}


def _mib(n: int) -> str:
    return f"{n / 2**20:,.1f} MiB"


def _shown(text: str) -> str:
    """A name from the file as printed: characters a terminal would act on (escape sequences,
    carriage returns) written as Python escapes."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def temperature(text: str) -> float:
    """--temp: a finite number >= 0 (0: greedy)."""
    value = float(text)
    if not (math.isfinite(value) and value >= 0):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number >= 0")
    return value


def positive_int(text: str) -> int:
    """--max-tokens: at least 1 (mlx-lm reads 0 as an error and a negative count as no limit)."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer >= 1")
    return value


def inspect(args) -> None:
    with open_gguf(args.file) as f:
        t, fmt = table_tensor(f, args.tensor)
        dims, vocab = t.shape
        values = dims * vocab
        print(f"{f.path}")
        print(f"  architecture   {_shown(f.architecture) if f.architecture else '(not set)'}")
        print(f"  tensor         {_shown(t.name)}: {t.qtype}, ggml shape [{dims}, {vocab}] (dims, vocab)")
        print(
            f"  row            {t.row_bytes:,} bytes = {dims // fmt.block_values} blocks "
            f"of {fmt.block_bytes} bytes ({fmt.block_values} values each)"
        )
        print(f"  held as        {_mib(t.nbytes)} ({8 * t.nbytes / values:.2f} bits per value)")
        print(f"  float16 copy   {_mib(2 * values)}  ({2 * values / t.nbytes:.1f}x)")
        print(f"  float32 copy   {_mib(4 * values)}  ({4 * values / t.nbytes:.1f}x)")
        tied = {
            True: "yes: no output.weight, the LM head is token_embd.weight",
            False: "no: the file has output.weight",
            None: "(not a model file: no blocks)",
        }[f.tied]
        print(f"  tied head      {tied}")
        print("tensors muser_mlx can gather (Table.from_gguf(path, name)):")
        tensors = gatherable_tensors(f)
        width = max((len(g.qtype) for g in tensors), default=0)  # IQ2_XXS: 7
        for g in tensors:
            print(f"  {_shown(g.name):<32} {g.qtype:<{width}} [{g.dims}, {g.vocab}]  {_mib(g.nbytes)}")


def embed(args) -> None:
    emb = Embedding.from_gguf(args.file, args.tensor, DTYPES[args.dtype])
    rows = emb(args.ids)  # host ids: an id out of range (or past 64 bits) raises IndexError
    if args.out is not None:
        try:
            out = open(args.out, "wb")  # np.save given a name would append .npy to it
        except OSError as e:  # an existing folder, a missing parent folder, no permission
            raise OSError(f"--out {args.out}: {e.strerror}") from None
        with out:
            np.save(out, np.array(rows.astype(mx.float32)))
        print(f"saved {list(rows.shape)} {args.dtype} rows (as float32) to {args.out}")
    else:
        np.set_printoptions(precision=6, threshold=64, edgeitems=4, linewidth=100)
        for i, row in zip(args.ids, np.array(rows.astype(mx.float32)), strict=True):
            print(f"{i}: {row}")


def demo(args) -> None:
    from .demo import run

    run(args.file, args.tensor, print)


def generate(args) -> None:
    try:
        from mlx_lm.generate import stream_generate
        from mlx_lm.sample_utils import make_sampler
    except ImportError:
        raise SystemExit("muser-mlx generate needs the lm extra: pip install 'muser_mlx[lm]'") from None
    from .lm import load

    model, tokenizer = load(args.file, dtype=DTYPES.get(args.dtype))
    prompt = args.prompt
    if tokenizer.has_chat_template and not args.ignore_chat_template:  # as mlx_lm.generate does
        messages = [{"role": "system", "content": args.system_prompt}] if args.system_prompt is not None else []
        messages.append({"role": "user", "content": prompt})
        try:
            text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        except Exception as e:  # the template is code from the file: anything it raises is the file's failure
            raise GGUFError(
                f"{args.file}: its tokenizer.chat_template fails ({type(e).__name__}: {_shown(str(e))}); "
                "--ignore-chat-template gives the prompt as it is"
            ) from e
        prompt = tokenizer.encode(text, add_special_tokens=False)  # the template writes its own BOS
    response = None
    for response in stream_generate(
        model, tokenizer, prompt, max_tokens=args.max_tokens, sampler=make_sampler(args.temp)
    ):
        print(response.text, end="", flush=True)
    print()
    if response is not None:
        print(
            f"prompt: {response.prompt_tokens} tokens, {response.prompt_tps:.1f} tokens/s; "
            f"generation: {response.generation_tokens} tokens, {response.generation_tps:.1f} tokens/s; "
            f"peak memory {response.peak_memory:.3f} GB"
        )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="muser-mlx", description="GGUF quantized token embeddings for MLX.")
    sub = ap.add_subparsers(dest="command", required=True)
    p = sub.add_parser("inspect", help="the embedding tensor: type, shape, bytes, float copy costs")
    p.add_argument("file", type=Path)
    p.add_argument("--tensor", default="token_embd.weight")
    p.set_defaults(run=inspect)
    p = sub.add_parser("embed", help="look up token ids; print the rows or save them as .npy")
    p.add_argument("file", type=Path)
    p.add_argument("--ids", type=int, nargs="+", required=True)
    p.add_argument("--tensor", default="token_embd.weight")
    p.add_argument("--dtype", choices=DTYPES, default="float32")
    p.add_argument("--out", help="save to this .npy file (the path as given) instead of printing")
    p.set_defaults(run=embed)
    p = sub.add_parser("demo", help="quantize, write, read back, look up and check a Q4_K table")
    p.add_argument("file", type=Path, nargs="?", help="a GGUF to use instead of the generated one")
    p.add_argument("--tensor", default="token_embd.weight")
    p.set_defaults(run=demo)
    p = sub.add_parser(
        "generate",
        help=f"run a GGUF model ({', '.join(ARCHITECTURES)}) in mlx-lm: text, tokens per second",
    )
    p.add_argument("file", type=Path)
    p.add_argument("--prompt", required=True)
    p.add_argument("--max-tokens", type=positive_int, default=100)
    p.add_argument("--temp", type=temperature, default=0.0, help="sampling temperature (0: greedy)")
    p.add_argument("--dtype", choices=DTYPES, help="compute dtype (default: the model family's)")
    p.add_argument("--system-prompt", help="a system message before the prompt, where the chat template is used")
    p.add_argument(
        "--ignore-chat-template",
        action="store_true",
        help="the prompt as it is, not in the file's tokenizer.chat_template (used where the file has one)",
    )
    p.set_defaults(run=generate)
    args = ap.parse_args(argv)
    try:
        args.run(args)
    except (GGUFError, OSError, IndexError) as e:
        print(f"muser-mlx: {e}", file=sys.stderr)
        return 1
    return 0
