"""The one-row head on lookup tables of x (kernels/lut.h) against the byte dot products, alternating.

Per format and shape: ``head.bytedot`` and ``head.lut`` at each ``--group-rows`` (tuning.LUT_GROUP_ROWS),
float16 x, device ms per call queued (common.queued_seconds), ``--rounds`` rounds in one process.

    python benchmarks/lut_head.py --formats TQ1_0 TQ2_0 --group-rows 4096 8192 16384 --rounds 2

Writes benchmarks/results/lut_head_gpu.{md,json}.
"""

from __future__ import annotations

import argparse

import mlx.core as mx
import numpy as np

from muser_mlx import Table
from muser_mlx.backends import BACKENDS, head, tuning

from common import GLIMMER, markdown, queued_seconds, random_q_bytes, save


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--formats", nargs="+", default=["TQ1_0", "TQ2_0"])
    p.add_argument("--shapes", nargs="+", default=[f"{GLIMMER['dims']}x{GLIMMER['vocab']}"], help="DIMSxVOCAB")
    p.add_argument("--group-rows", nargs="+", type=int, default=[4096, 8192, 16384])
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--stem", default="lut_head")
    args = p.parse_args()
    x_rng = np.random.default_rng(1)
    rows, runs = [], []
    for shape in args.shapes:
        dims, vocab = (int(v) for v in shape.split("x"))
        x = mx.array(x_rng.standard_normal((1, dims)).astype(np.float32)).astype(mx.float16)
        for qtype in args.formats:
            table = Table.from_bytes(random_q_bytes(qtype, vocab, dims), qtype, dims)
            table = Table.from_bytes(BACKENDS["cuda"].kernel_data(table.data), qtype, dims)
            variants = [("bytedot", {}, head.bytedot)]
            variants += [(f"lut, {g:,} rows a threadgroup", {"LUT_GROUP_ROWS": g}, head.lut) for g in args.group_rows]
            times: dict[str, list[float]] = {name: [] for name, _, _ in variants}
            for _ in range(args.rounds):
                for name, fixed, kernel in variants:
                    with tuning.fixed(**fixed):
                        call = lambda x, k=kernel: k(table, x, "cuda")  # noqa: E731
                        times[name].append(queued_seconds(lambda i: (x,), call, args.reps, 8)[0])
            for name, seconds in times.items():
                runs.append({"format": qtype, "dims": dims, "vocab": vocab, "kernel": name, "seconds": seconds})
                rows.append([qtype, f"{vocab:,} x {dims:,}", name, " / ".join(f"{1e3 * s:.3f}" for s in seconds)])
                print(*rows[-1], sep="\t", flush=True)
    table_md = markdown(["format", "table", "kernel", "ms per call, each round"], rows)
    table_md += "\n\nOne row of float16 x, backend `cuda`; device time per call from 8 and 16 queued calls, median of "
    table_md += f"{args.reps}; the kernels alternate within each round."
    print(save(args.stem, "One-row head: lookup tables of x against byte dot products", table_md, {"runs": runs}))


if __name__ == "__main__":
    main()
