"""Tuning the streamed LM head (kernels/matvec.h): rows of x per pass (ROWS), table rows per
warp (VROWS) and values per lane and step (VALUES), timed on the GPU at Muse Glimmer's shape
(dims 6,656, vocab 202,048; Q4_K, or --format). ``--kernel bytedot`` tunes kernels/bytedot.h
instead: its VROWS and RUNS (runs of 16 values per lane and step) in place of VALUES.

For each row count n of x and each layout with ROWS * VROWS <= 32: the median time of
one call per evaluation, and queued (common.queued_seconds: device time per call, from 4 and 8), with
the GB/s of the table bytes it streams (n / ROWS passes) against the copy bandwidth of the same
run. (The recorded H100 sweep, results/matvec_tuning_gpu.md, predates queued_seconds: its "in
flight" column timed 4 calls built and evaluated inside one timing.)
Each layout is set through backends/tuning.py's ``fixed``; its MATVEC_ROWS, MATVEC_VROWS and
MATVEC_VALUES (BYTEDOT_VROWS, BYTEDOT_RUNS and their _BY_FORMAT tables) take the fastest
(benchmarks/as_linear.py's streamed column sets MATVEC_MAX_ROWS).

    python benchmarks/matvec_tuning.py [--rows 1 2 4 8 16] [--dtype float16] [--kernel bytedot] [--format Q6_K]
"""

from __future__ import annotations

import argparse

import mlx.core as mx
import numpy as np

from muser_mlx import Table, backends
from muser_mlx.backends import head, tuning

from common import GLIMMER, copy_bandwidth, markdown, median_seconds, queued_seconds, random_q_bytes, save

QUEUED = 4


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rows", type=int, nargs="+", default=[1, 2, 4, 8, 16])
    p.add_argument("--dtype", default="float16", choices=["float16", "bfloat16", "float32"])
    p.add_argument("--reps", type=int, default=15)
    p.add_argument("--kernel", default="matvec", choices=["matvec", "bytedot"])
    p.add_argument("--format", default="Q4_K", help="the table's format (bytedot: a quantized one)")
    args = p.parse_args()
    # the layouts beside ROWS: (VROWS, VALUES) or (VROWS, RUNS)
    layouts = {
        "matvec": [(v, k) for v in (1, 2, 4, 8) for k in (8, 16, 32)],
        "bytedot": [(v, r) for v in (2, 4, 8, 16) for r in (1, 2)],
    }[args.kernel]
    third = {"matvec": "VALUES", "bytedot": "RUNS"}[args.kernel]
    dims, vocab = GLIMMER["dims"], GLIMMER["vocab"]
    backend = backends.select("auto")
    table = Table.from_bytes(random_q_bytes(args.format, vocab, dims), args.format, dims)
    copy = copy_bandwidth()
    rng = np.random.default_rng(0)
    rows, records = [], []
    for n in args.rows:
        x = mx.array(rng.standard_normal((n, dims)).astype(np.float32)).astype(getattr(mx, args.dtype))
        for per_pass in sorted({min(n, 8), min(n, 16)}):
            for vrows, values in layouts:
                if per_pass * vrows > 32:
                    continue
                layout = {"MATVEC_ROWS": (per_pass,)}
                layout |= (
                    {"MATVEC_VROWS": {per_pass: vrows}, "MATVEC_VALUES": values}
                    if args.kernel == "matvec"
                    else {
                        "BYTEDOT_VROWS": vrows,
                        "BYTEDOT_VROWS_BY_FORMAT": {},
                        "BYTEDOT_RUNS": values,
                        "BYTEDOT_RUNS_BY_FORMAT": {},
                    }
                )
                call = lambda x: head.HEADS[args.kernel](table, x, backend)  # noqa: E731
                with tuning.fixed(**layout):
                    one = median_seconds(lambda i, x=x: (x,), call, args.reps)
                    many = queued_seconds(lambda i, x=x: (x,), call, args.reps, QUEUED)[0]
                streamed = table.nbytes * -(-n // per_pass)
                records.append(
                    {
                        "n": n,
                        "rows": per_pass,
                        "vrows": vrows,
                        third.lower(): values,
                        "seconds": one,
                        "queued_seconds": many,
                    }
                )
                rows.append(
                    [
                        n,
                        per_pass,
                        vrows,
                        values,
                        f"{one * 1e3:.3f}",
                        f"{100 * streamed / one / copy:.0f}%",
                        f"{many * 1e3:.3f}",
                        f"{100 * streamed / many / copy:.0f}%",
                    ]
                )
                print(*rows[-1], sep="\t", flush=True)
    md = markdown(["n", "ROWS", "VROWS", third, "ms", "of copy", f"ms, {QUEUED} queued", "of copy"], rows)
    md += f"\n\nx {args.dtype}; copy bandwidth {copy / 1e9:.0f} GB/s; 'of copy' = table bytes streamed / time / copy."
    stem = f"{args.kernel}_tuning" + ("" if args.format == "Q4_K" else f"_{args.format.lower()}")
    print(
        save(
            stem,
            f"Streamed LM head ({args.kernel}, {args.format}): ROWS x VROWS x {third}",
            md,
            {"copy_bytes_per_s": copy, "x": args.dtype, "format": args.format, "runs": records},
        )
    )


if __name__ == "__main__":
    main()
