"""The head and ``Linear`` on the CPU at prefill widths: the extension's matvec (kernels/matvec.h,
``head.cpu_matvec``) against the tiled path (vocab rows dequantized into x's dtype, then MLX's
matmul) and, for a float table, MLX's matmul on its bytes (``head.float_matmul``), side by side in
one run, float32 x. For scale, the same product of the dequantized float32 values by NumPy's
matmul (its BLAS) and by MLX's (``nn.Linear`` holding them).

Random tables with trained-like scales (common.random_q_bytes); wall ms per evaluation, the
contenders alternating in blocks (common.alternating_medians).

    python benchmarks/cpu_prefill.py                        # writes results/cpu_prefill_cpu.{md,json}
    python benchmarks/cpu_prefill.py --formats Q8_0 --rows 17 64 --dims 640 --vocab 65536
"""

from __future__ import annotations

import argparse

import mlx.core as mx
import numpy as np

from muser_mlx import Table, backends
from muser_mlx.backends import head

from common import alternating_medians, markdown, random_q_bytes, save

NAMES = ("cpu_matvec", "tiled", "float_matmul", "MLX matmul", "NumPy matmul")  # the columns


def contenders(table: Table) -> dict:
    """name -> f(x) for float32 x ``[rows, dims]``."""
    dense = backends.bind(table, mx.float32, "cpu")(mx.arange(table.vocab))  # the same values
    mx.eval(dense)
    dense_np = np.array(dense)
    calls = {name: (lambda x, k=head.HEADS[name]: k(table, x, "cpu")) for name in ("cpu_matvec", "tiled")}
    if head.values_of(table, mx.float32):
        calls["float_matmul"] = lambda x: head.float_matmul(table, x, "cpu")
    calls["MLX matmul"] = lambda x: x @ dense.T
    calls["NumPy matmul"] = lambda x: mx.array(np.array(x) @ dense_np.T)
    return calls


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--formats", nargs="+", default=["Q4_K", "Q8_0", "F32"])
    p.add_argument("--rows", type=int, nargs="+", default=[16, 17, 64, 256])
    p.add_argument("--dims", type=int, default=2048)
    p.add_argument("--vocab", type=int, default=8192)
    p.add_argument("--reps", type=int, default=4, help="timed evaluations per contender")
    p.add_argument("--stem", default="cpu_prefill", help="result file name, before _cpu")
    args = p.parse_args()
    mx.set_default_device(mx.cpu)
    rng = np.random.default_rng(1)
    results = {"dims": args.dims, "vocab": args.vocab, "runs": []}
    rows_md = []
    for qtype in args.formats:
        table = Table.from_bytes(random_q_bytes(qtype, args.vocab, args.dims), qtype, args.dims)
        mx.eval(table.data)
        calls = contenders(table)
        for rows in args.rows:
            x = mx.array(rng.standard_normal((rows, args.dims)).astype(np.float32))
            chosen = head.choose(table, rows, mx.float32, "cpu")
            times = alternating_medians(
                {name: (lambda i, x=x: (x,), call) for name, call in calls.items()},
                reps=args.reps,
                rounds=2,
                warmup=1,
            )
            results["runs"].append({"format": qtype, "rows": rows, "chosen": chosen, "seconds": times})
            rows_md.append([qtype, rows, chosen, *(f"{1e3 * times.get(name, float('nan')):.1f}" for name in NAMES)])
            print(*rows_md[-1], sep="\t", flush=True)
    table_md = markdown(["table", "rows", "chosen", *NAMES], rows_md)
    table_md += (
        f"\n\nfloat32 x; wall ms per evaluation, the median of {args.reps} in 2 alternating blocks; "
        "`float_matmul` for a float table only (nan otherwise)."
    )
    print(
        save(
            args.stem, f"Heads on the CPU at prefill widths, dims {args.dims:,} vocab {args.vocab:,}", table_md, results
        )
    )


if __name__ == "__main__":
    main()
