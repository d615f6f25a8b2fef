"""The CPU extension's head of a quantized table on byte dot products (kernels/bytedot_cpu.h: x as
integers per run of 16 values) against the same head from the dequantized values
(kernels/matvec.h, ``tuning.CPU_BYTE_DOTS`` False), side by side in one run: Gemma 3 270M's tied
Q8_0 head and its projections' shapes and types (Q5_0 640 -> 2,048 and 640 -> 1,024, Q6_K 2,048 ->
640, Q4_K 1,024 -> 640), a Q4_K 32,000 x 4,096 head, then every quantized format at one shape; one
row of x (a decode step) and more (a prompt), float32 and bfloat16 x.

Random tables with trained-like scales (common.random_q_bytes); wall ms per evaluation, the two
alternating in blocks (common.alternating_medians).

    python benchmarks/cpu_byte_dots.py             # writes results/cpu_byte_dots_cpu.{md,json}
    python benchmarks/cpu_byte_dots.py --quick     # fewer repetitions, no every-format run
"""

from __future__ import annotations

import argparse

import mlx.core as mx
import numpy as np

from muser_mlx import FORMATS, Table, as_linear
from muser_mlx.backends import tuning

from common import alternating_medians, markdown, random_q_bytes, save

# (qtype, vocab, dims): out features x in features
TABLES = (
    ("Q8_0", 262144, 640),
    ("Q5_0", 2048, 640),
    ("Q5_0", 1024, 640),
    ("Q6_K", 640, 2048),
    ("Q4_K", 640, 1024),
    ("Q4_K", 32000, 4096),
)
EVERY_FORMAT_SHAPE = (8192, 2048)  # vocab, dims
DTYPES = {"float32": mx.float32, "bfloat16": mx.bfloat16}


def timed(table: Table, x: mx.array, reps: int) -> dict:
    """{"byte dots": s, "values": s} for the extension's head of ``x``."""

    def head(byte_dots: bool):
        def call(x):
            with tuning.fixed(CPU_BYTE_DOTS=byte_dots):
                return as_linear(table, x, backend="cpu")

        return lambda i: (x,), call

    return alternating_medians({"byte dots": head(True), "values": head(False)}, reps=reps, rounds=4, warmup=2)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rows", type=int, nargs="+", default=[1, 4, 64])
    p.add_argument("--reps", type=int, default=24, help="timed evaluations per contender and case")
    p.add_argument("--quick", action="store_true", help="a third of the repetitions, no every-format run")
    p.add_argument("--stem", default="cpu_byte_dots", help="result file name, before _cpu")
    args = p.parse_args()
    mx.set_default_device(mx.cpu)
    reps = args.reps // 3 if args.quick else args.reps
    rng = np.random.default_rng(1)
    cases = [(q, v, d, args.rows, list(DTYPES)) for q, v, d in TABLES]
    if not args.quick:
        vocab, dims = EVERY_FORMAT_SHAPE
        cases += [(q, vocab, dims, [1], ["bfloat16"]) for q in sorted(FORMATS) if FORMATS[q].quantized]
    results, rows_md = {"runs": []}, []
    for qtype, vocab, dims, rows, dtypes in cases:
        table = Table.from_bytes(random_q_bytes(qtype, vocab, dims), qtype, dims)
        mx.eval(table.data)
        for dtype in dtypes:
            for n in rows:
                x = mx.array(rng.standard_normal((n, dims)).astype(np.float32)).astype(DTYPES[dtype])
                mx.eval(x)
                times = timed(table, x, reps)
                ratio = times["values"] / times["byte dots"]
                results["runs"].append(
                    {"format": qtype, "vocab": vocab, "dims": dims, "dtype": dtype, "rows": n, "seconds": times}
                )
                rows_md.append(
                    [
                        f"{qtype} {vocab:,} x {dims:,}",
                        dtype,
                        n,
                        f"{1e3 * times['byte dots']:.3f}",
                        f"{1e3 * times['values']:.3f}",
                        f"{ratio:.2f}",
                    ]
                )
                print(*rows_md[-1], sep="\t", flush=True)
    table_md = markdown(["table", "x", "rows", "byte dots ms", "values ms", "speedup"], rows_md)
    table_md += (
        f"\n\nwall ms per evaluation, the median of {reps} in 4 alternating blocks; speedup = values / byte dots."
    )
    print(save(args.stem, "The CPU head: byte dot products against the dequantized values", table_md, results))


if __name__ == "__main__":
    main()
