"""The head of a float table (F16, BF16, F32) with x of the table's own dtype: MLX's matmul on the
table's bytes viewed as its values (``head.float_matmul``) against the kernels the table took
before it (the streamed matvec, the tiled matrix multiply, the tiled path, which copies the table
into tiles of floats first), at each row count, in one run.

Random values at Muse Glimmer's shape (dims 6,656, vocab 202,048) or --dims / --vocab; device
time per call queued (common.queued_seconds); the table's bytes over it as a share of the copy
bandwidth measured in the same run. A kernel that does not take a row count or dtype (the GPU
matvec beyond 16 rows, the tiled matrix multiply outside its range) is left out.

    python benchmarks/float_heads.py                                  # GPU: Glimmer's shape
    python benchmarks/float_heads.py --dims 640 --vocab 262144 --stem float_heads_gemma
    python benchmarks/float_heads.py --dims 2048 --vocab 8192 --rows 1 16 17 64 --reps 3   # CPU

Writes benchmarks/results/<stem>_<cpu|gpu>.{md,json}.
"""

from __future__ import annotations

import argparse

import mlx.core as mx
import numpy as np

from muser_mlx import FORMATS, Table, as_linear, backends
from muser_mlx.backends import head, tuning

from common import GLIMMER, copy_bandwidth, markdown, queued_seconds, random_q_bytes, save

QUEUED = 4
FLOAT_FORMATS = ["F16", "BF16", "F32"]  # x of each one's Format.values_dtype


def contenders(table: Table, rows: int, dtype: mx.Dtype, backend: str) -> list[str]:
    """The heads that take ``rows`` rows of ``dtype`` x for ``table`` on ``backend``."""
    names = ["float_matmul", "tiled"]
    if backend == "cpu":
        names.append("cpu_matvec")
    if backend in backends.KERNEL_BACKENDS:
        if rows <= tuning.MATVEC_MAX_ROWS:
            names.append("matvec")
        device = backends.BACKENDS[backend]
        if device.matrix_units() and head.tile_mma_fits(table, rows, dtype, device.group_shared()):
            names.append("tile_mma")
    return names


def timings(table: Table, x: mx.array, backend: str, reps: int) -> dict[str, float]:
    """Seconds per call queued: ``as_linear`` (the chosen head) and each of :func:`contenders`."""
    calls = {"as_linear": lambda x: as_linear(table, x)}
    for name in contenders(table, x.shape[0], x.dtype, backend):
        calls[name] = lambda x, kernel=head.HEADS[name]: kernel(table, x, backend)
    return {name: queued_seconds(lambda i: (x,), call, reps, QUEUED)[0] for name, call in calls.items()}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--formats", nargs="+", default=FLOAT_FORMATS, choices=FLOAT_FORMATS)
    p.add_argument("--rows", type=int, nargs="+", default=[1, 2, 4, 8, 16, 32, 64, 512])
    p.add_argument("--dims", type=int, default=GLIMMER["dims"])
    p.add_argument("--vocab", type=int, default=GLIMMER["vocab"])
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--stem", default="float_heads", help="result file name, before _gpu / _cpu")
    args = p.parse_args()
    rng = np.random.default_rng(1)
    results = {"dims": args.dims, "vocab": args.vocab, "runs": []}
    rows_md = []
    for qtype in args.formats:
        dtype = FORMATS[qtype].values_dtype
        table = Table.from_bytes(random_q_bytes(qtype, args.vocab, args.dims), qtype, args.dims)
        mx.eval(table.data)
        backend = backends.select("auto", table)
        copy = copy_bandwidth(1.0)
        for rows in args.rows:
            x = mx.array(rng.standard_normal((rows, args.dims)).astype(np.float32)).astype(dtype)
            chosen = head.choose(table, rows, dtype, backend)
            times = timings(table, x, backend, args.reps)
            results["runs"].append(
                {
                    "format": qtype,
                    "rows": rows,
                    "backend": backend,
                    "chosen": chosen,
                    "seconds": times,
                    "copy_bytes_per_s": copy,
                }
            )
            cells = " / ".join(f"{name} {1e3 * s:.3f}" for name, s in times.items())
            share = table.nbytes / times["as_linear"] / copy
            rows_md.append([qtype, rows, chosen, cells, f"{100 * share:.0f}%"])
            print(*rows_md[-1], sep="\t", flush=True)
    table_md = markdown(["table", "rows", "chosen", "ms per call", "as_linear of copy"], rows_md)
    table_md += (
        f"\n\nx of the table's dtype; device ms per call, {QUEUED} and {2 * QUEUED} calls queued, median of "
        f"{args.reps}; `as_linear` runs the chosen head."
    )
    print(save(args.stem, f"Float tables' heads, dims {args.dims:,} vocab {args.vocab:,}", table_md, results))


if __name__ == "__main__":
    main()
