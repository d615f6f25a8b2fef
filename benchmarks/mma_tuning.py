"""Tuning the LM head on matrix units (kernels/mma.h): table rows per warp (VTILES tiles of 16)
and rows of x per pass (XTILES tiles of 8), timed on a CUDA GPU at Muse Glimmer's shape (dims 6,656,
vocab 202,048; or --dims, --vocab), beside the lane-wise matvec (kernels/matvec.h, its own tuned
layout) and the kernel the package picks at that width (backends/head.py: choose).

For each format, x dtype and row count n of x: the median time of one call per evaluation (with
--queued, per call of 8 and 16 queued calls: common.queued_seconds) for each (VTILES, XTILES), with
the GB/s of the table bytes it streams (ceil(n / (8 * XTILES)) passes) against the copy bandwidth
of the same run. Each tiling is set through backends/tuning.py's ``fixed``; its MMA_VTILES,
MMA_XTILES and MMA_MIN_ROWS take the fastest, MMA_ONE_PASS_TILES and MMA_ONE_PASS_FORMATS the
formats whose one pass over the table beyond 16 rows is faster than passes of 16.

    python benchmarks/mma_tuning.py [--rows 1 2 8 16] [--formats Q4_K Q6_K] [--dtypes float16]
    python benchmarks/mma_tuning.py --rows 32 64 --tiles 4x2 2x4 1x8 --dims 640 --vocab 262144 --queued
    python benchmarks/mma_tuning.py --rows 32 --tiles 4x2 2x4 --vocab 32768 --queued --no-matvec --formats ...
"""

from __future__ import annotations

import argparse

import mlx.core as mx
import numpy as np

from muser_mlx import Table
from muser_mlx.backends import head, tuning
from muser_mlx.backends.head import MMA_COLS

from common import GLIMMER, copy_bandwidth, markdown, median_seconds, queued_seconds, random_q_bytes, save

TILES = [f"{v}x{x}" for v in (1, 2, 4) for x in (1, 2)]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rows", type=int, nargs="+", default=[1, 2, 8, 16])
    p.add_argument("--formats", nargs="+", default=["Q4_K", "Q6_K"])
    p.add_argument("--dtypes", nargs="+", default=["float16", "bfloat16", "float32"])
    p.add_argument("--tiles", nargs="+", default=TILES, help="VTILESxXTILES")
    p.add_argument("--dims", type=int, default=GLIMMER["dims"])
    p.add_argument("--vocab", type=int, default=GLIMMER["vocab"])
    p.add_argument("--queued", action="store_true", help="time queued calls, not one per evaluation")
    p.add_argument("--no-matvec", action="store_true", help="leave the matvec out (slow at many rows)")
    p.add_argument("--reps", type=int, default=10)
    p.add_argument("--stem", default="mma_tuning")
    args = p.parse_args()
    dims, vocab = args.dims, args.vocab
    tiles = [tuple(int(t) for t in tiling.split("x")) for tiling in args.tiles]
    copy = copy_bandwidth()
    rng = np.random.default_rng(0)
    rows, runs = [], []
    for qtype in args.formats:
        table = Table.from_bytes(random_q_bytes(qtype, vocab, dims), qtype, dims)
        mx.eval(table.data)
        for dtype in args.dtypes:
            for n in args.rows:
                x = mx.array(rng.standard_normal((n, dims)).astype(np.float32)).astype(getattr(mx, dtype))
                # name -> (kernel, its tuning, passes over the table)
                layouts = {
                    f"{v} x {k}": (
                        head.mma,
                        {"MMA_VTILES": v, "MMA_XTILES": k, "MMA_ONE_PASS_FORMATS": frozenset()},
                        -(-n // (MMA_COLS * k)),
                    )
                    for v, k in tiles
                    if k == 1 or n > MMA_COLS
                }
                if not args.no_matvec:
                    layouts["matvec"] = (head.matvec, {}, -(-n // tuning.pass_rows(n)))
                chosen = head.choose(table, n, x.dtype, "cuda")
                layouts[f"chosen: {chosen}"] = (head.HEADS[chosen], {}, 1)
                ref = head.HEADS[chosen](table, x, "cuda").astype(mx.float32)
                for name, (kernel, layout, passes) in layouts.items():
                    with tuning.fixed(**layout):
                        call = lambda x, kernel=kernel, table=table: kernel(table, x, "cuda")  # noqa: E731
                        gap = mx.abs(call(x).astype(mx.float32) - ref).max() / mx.abs(ref).max()
                        if gap.item() > 1e-2:  # every layout computes the same logits (x's dtype rounds them)
                            raise SystemExit(f"{qtype} {dtype} n {n} {name}: logits off by {gap.item():.3g}")
                        if args.queued:
                            seconds = queued_seconds(lambda i, x=x: (x,), call, args.reps, calls=8)[0]
                        else:
                            seconds = median_seconds(lambda i, x=x: (x,), call, args.reps)
                    runs.append(dict(format=qtype, x=dtype, n=n, layout=name, seconds=seconds))
                    rows.append(
                        [
                            qtype,
                            dtype,
                            n,
                            name,
                            f"{seconds * 1e3:.3f}",
                            f"{100 * table.nbytes * passes / seconds / copy:.0f}%",
                        ]
                    )
                    print(*rows[-1], sep="\t", flush=True)
    md = markdown(["format", "x", "n", "VTILES x XTILES", "ms", "of copy"], rows)
    md += (
        f"\n\nCopy bandwidth {copy / 1e9:.0f} GB/s; 'of copy' = table bytes streamed / time / copy "
        "(matvec: ceil(n / ROWS) passes; the chosen kernel: one). "
        + ("Per call of 8 and 16 queued calls" if args.queued else "One call per evaluation")
        + f", median of {args.reps}; vocab {vocab:,} x dims {dims:,}."
    )
    print(save(args.stem, "LM head on matrix units: VTILES x XTILES", md, {"copy_bytes_per_s": copy, "runs": runs}))


if __name__ == "__main__":
    main()
