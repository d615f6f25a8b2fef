"""Tuning the tiled matrix multiply (kernels/tile_mma.h) on a CUDA GPU: variants of
backends/tuning.py's constants (x's stages, the unrolled step loop, rows of x a threadgroup) timed
side by side, each as ``tuning.fixed`` sets it, at Gemma 3 270M's head (262,144 x 640) and Muse
Glimmer's (202,048 x 6,656), random bytes with finite scales, float16 x, beside MLX's 4-bit
``QuantizedLinear`` at the same shape. Device ms per call queued (common.queued_seconds); the
variants alternate within each of --rounds rounds, and each figure is the median over rounds.

    python benchmarks/tile_mma_tuning.py --rows 24 32 \\
        --variant "stages 3:TILE_MMA_X_STAGES=3" --variant "not unrolled:TILE_MMA_UNROLLED={}"
"""

from __future__ import annotations

import argparse
import statistics
from functools import partial

import mlx.core as mx

from muser_mlx import Table, backends
from muser_mlx.backends import head, tuning

from common import markdown, mlx_q4_linear, queued_seconds, random_q_bytes, save, tuning_constants
from prefill import QUEUED, SHAPES


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--shapes", nargs="+", choices=list(SHAPES), default=list(SHAPES))
    p.add_argument("--formats", nargs="*", default=[], help="formats at each shape (default: the shape's own)")
    p.add_argument("--rows", type=int, nargs="+", default=[24, 32])
    p.add_argument("--variant", action="append", default=[], help='"name:NAME=VALUE;NAME=VALUE" (Python literals)')
    p.add_argument("--vocab", type=int, help="table rows at every shape (default: the shape's own)")
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--stem", default="tile_mma_tuning")
    args = p.parse_args()

    variants = {"as tuned": {}}
    for text in args.variant:
        name, _, constants = text.partition(":")
        variants[name] = tuning_constants(constants)
    rows_md, results = [], []
    for shape in args.shapes:
        own, vocab, dims = SHAPES[shape]
        vocab = args.vocab or vocab
        q4 = mlx_q4_linear(dims, vocab)
        for qtype in args.formats or [own]:
            table = Table.from_bytes(random_q_bytes(qtype, vocab, dims), qtype, dims)
            mx.eval(table.data)
            backend = backends.select("auto", table)
            kernel = partial(head.tile_mma, table, backend=backend)
            calls = {name: (kernel, c) for name, c in variants.items()}
            calls["mlx q4"] = (q4, {})
            for n in args.rows:
                x = mx.random.normal((n, dims)).astype(mx.float16)
                mx.eval(x)
                times = {name: [] for name in calls}
                for _ in range(args.rounds):
                    for name, (call, constants) in calls.items():
                        with tuning.fixed(**constants):
                            times[name].append(queued_seconds(lambda i, x=x: (x,), call, args.reps, QUEUED)[0])
                ms = {name: 1e3 * statistics.median(t) for name, t in times.items()}
                results.append({"shape": shape, "format": qtype, "rows": n, "ms": ms})
                rows_md.append([f"{qtype} {vocab:,} x {dims:,}", n] + [f"{ms[name]:.3f}" for name in calls])
                print(*rows_md[-1], sep="\t", flush=True)
    header = ["table", "rows"] + list(calls)
    table_md = (
        markdown(header, rows_md)
        + "\n\nVariants: "
        + "; ".join(f"{name}: {c or 'backends/tuning.py as it is'}" for name, c in variants.items())
    )
    table_md += f"\n\ndevice ms per call, {QUEUED} and {2 * QUEUED} calls queued, median of {args.reps} reps, then of {args.rounds} rounds."
    print(
        save(
            args.stem,
            "The tiled matrix multiply's tuning",
            table_md,
            {"results": results, "variants": {name: repr(c) for name, c in variants.items()}},
        )
    )


if __name__ == "__main__":
    main()
