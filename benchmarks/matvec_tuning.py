"""Tuning the streamed LM head (kernels/matvec.h): rows of x per pass (ROWS), table rows per
warp (VROWS) and values per lane and step (VALUES), timed on the GPU at Glimmer's shape (Q4_K,
dims 6,656, vocab 202,048).

For each row count n of x and each (ROWS, VROWS, VALUES) with ROWS * VROWS <= 32: the median time of
one call per evaluation, and of 4 calls queued (common.queued_seconds: device time per call), with
the GB/s of the table bytes it streams (n / ROWS passes) against the copy bandwidth of the same
run. (The recorded H100 sweep, results/matvec_tuning_gpu.md, predates queued_seconds: its "in
flight" column timed 4 calls built and evaluated inside one timing.)
backends/kernel.py's rows_per_pass, VOCAB_ROWS_PER_WARP and matvec_values take the fastest
(benchmarks/as_linear.py's streamed column sets linear.MATVEC_MAX_ROWS).

    python benchmarks/matvec_tuning.py [--rows 1 2 4 8 16] [--dtype float16]
"""

from __future__ import annotations

import argparse

import mlx.core as mx
import numpy as np

from common import GLIMMER, copy_bandwidth, markdown, median_seconds, queued_seconds, random_q_bytes, save
from muser_mlx import Table, backends

QUEUED = 4


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rows", type=int, nargs="+", default=[1, 2, 4, 8, 16])
    p.add_argument("--dtype", default="float16", choices=["float16", "bfloat16", "float32"])
    p.add_argument("--reps", type=int, default=15)
    args = p.parse_args()
    dims, vocab = GLIMMER["dims"], GLIMMER["vocab"]
    device = backends.BACKENDS[backends.select("auto")]
    table = Table.from_bytes(random_q_bytes("Q4_K", vocab, dims), "Q4_K", dims)
    copy = copy_bandwidth()
    rng = np.random.default_rng(0)
    rows, runs = [], []
    for n in args.rows:
        x = mx.array(rng.standard_normal((n, dims)).astype(np.float32)).astype(getattr(mx, args.dtype))
        for per_pass in sorted({min(n, 8), min(n, 16)}):
            for vrows, values in ((v, k) for v in (1, 2, 4, 8) for k in (8, 16, 32)):
                if per_pass * vrows > 32:
                    continue
                call = lambda x, r=per_pass, v=vrows, k=values: device.matvec(table, x, r, v, k)
                one = median_seconds(lambda i: (x,), call, args.reps)
                many = queued_seconds(lambda i: (x,), call, args.reps, QUEUED)[0]
                streamed = table.nbytes * -(-n // per_pass)
                runs.append(dict(n=n, rows=per_pass, vrows=vrows, values=values, seconds=one, queued_seconds=many))
                rows.append([n, per_pass, vrows, values, f"{one * 1e3:.3f}", f"{100 * streamed / one / copy:.0f}%",
                             f"{many * 1e3:.3f}", f"{100 * streamed / many / copy:.0f}%"])
                print(*rows[-1], sep="\t", flush=True)
    md = markdown(["n", "ROWS", "VROWS", "VALUES", "ms", "of copy", f"ms, {QUEUED} queued", "of copy"], rows)
    md += f"\n\nx {args.dtype}; copy bandwidth {copy / 1e9:.0f} GB/s; 'of copy' = table bytes streamed / time / copy."
    print(save("matvec_tuning", "Streamed LM head: ROWS x VROWS", md, {"copy_bytes_per_s": copy, "x": args.dtype, "runs": runs}))


if __name__ == "__main__":
    main()
