"""Benchmark: the tied LM head from the quantized table, muser_mlx.as_linear, against MLX's own.

Glimmer's head by default: dims 6,656, vocab 202,048, Q4_K (random bytes with small finite
scales: timing does not depend on the values), x float16 (float32 on a CPU) of 1, 4, 16, 512 and 4,096 rows.
Columns (median ms per call over --reps calls, each call built and mx.eval'd, after a warm-up):
- ``as_linear``: the public call (streamed on a GPU up to tuning.MATVEC_MAX_ROWS rows, or
  MMA_MAX_ROWS where the matrix units take them, else tiled);
- ``streamed``: as_linear with those limits at 256 rows (GPU only, up to 256 rows: matvec, or
  mma from MMA_MIN_ROWS on CUDA), for choosing them;
- ``tiled@M``: the tiled path with tiles of M MiB of floats (tuning.TILE_BYTES), for choosing
  TILE_BYTES;
- ``mlx q4``: ``mlx.nn.QuantizedEmbedding(bits=4, group_size=64).as_linear`` (scales in x's dtype);
- ``mlx f16``: ``mlx.nn.Embedding.as_linear`` with a float16 table;
- ``queued``: as_linear, mlx q4 and mlx f16 again, queued in one evaluation (common.queued_seconds:
  device ms per call from QUEUED and 2 * QUEUED queued calls, the head's cost inside a model's
  evaluation, the eval's fixed cost and sync cancelled; the host's graph building is outside).
Also the bandwidth of a large elementwise copy in the same run, so ``GB/s`` (Q4_K table bytes /
as_linear time) can be read against what the memory delivers.

    python benchmarks/as_linear.py            # Glimmer shape, the default device (the GPU)
    python benchmarks/as_linear.py --small    # dims 1,024, vocab 8,192: quick, also on a CPU

Prints a markdown table and writes benchmarks/results/as_linear[_small]_<cpu|gpu>.{md,json}.
"""

from __future__ import annotations

import argparse

import mlx.core as mx
import mlx.nn as nn
import numpy as np

from muser_mlx import Table, as_linear, backends
from muser_mlx.backends import head, tuning

from common import GLIMMER, copy_bandwidth, markdown, median_seconds, queued_seconds, random_q_bytes, save

TILES = (64, 256, 1024)  # MiB
QUEUED = 8


def mlx_heads(vocab: int, dims: int, dtype: mx.Dtype):
    """MLX's 4-bit QuantizedEmbedding (scales/biases in x's dtype) and a float16 Embedding."""
    q = nn.QuantizedEmbedding(vocab, dims, group_size=64, bits=4)
    q.scales, q.biases = q.scales.astype(dtype), q.biases.astype(dtype)
    f = nn.Embedding(vocab, dims)
    f.weight = f.weight.astype(mx.float16)
    mx.eval(q.parameters(), f.parameters())
    return q, f


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--small", action="store_true", help="dims 1,024, vocab 8,192 (quick, CPU-friendly)")
    p.add_argument("--rows", type=int, nargs="+", default=[1, 2, 4, 16, 64, 128, 256, 512, 4096])
    p.add_argument("--reps", type=int, default=20)
    p.add_argument(
        "--dtype",
        choices=["float16", "bfloat16", "float32"],
        help="x's dtype; default float16 on "
        "a GPU, float32 on the CPU (MLX's CPU float16 matmuls are slow: they would time the CPU, not the head)",
    )
    p.add_argument("--no-mlx", action="store_true", help="skip MLX's own heads (saves their memory)")
    args = p.parse_args()

    dims, vocab = (1024, 8192) if args.small else (GLIMMER["dims"], GLIMMER["vocab"])
    backend = backends.select("auto")
    gpu = backend in backends.KERNEL_BACKENDS
    args.dtype = args.dtype or ("float16" if gpu else "float32")
    dtype = getattr(mx, args.dtype)
    table = Table.from_bytes(random_q_bytes("Q4_K", vocab, dims), "Q4_K", dims)
    mx.eval(table.data)
    heads = None if args.no_mlx else mlx_heads(vocab, dims, dtype)
    copy = copy_bandwidth(1.0 if gpu else 0.25)

    # name -> (call, the tuning it runs under)
    heads_by_name = {"as_linear": (lambda x: as_linear(table, x), {})}
    if gpu:
        heads_by_name["streamed"] = (heads_by_name["as_linear"][0], {"MATVEC_MAX_ROWS": 256, "MMA_MAX_ROWS": 256})
    heads_by_name |= {
        f"tiled@{m}": (lambda x: head.tiled(table, x, backend), {"TILE_BYTES": m << 20, "TILE_DEVICE_SHARE": 0})
        for m in TILES
    }
    if heads is not None:
        heads_by_name |= {"mlx q4": (heads[0].as_linear, {}), "mlx f16": (heads[1].as_linear, {})}

    def timed(name: str, x: mx.array, queued: bool = False) -> float:
        call, constants = heads_by_name[name]
        with tuning.fixed(**constants):
            if queued:
                return queued_seconds(lambda i: (x,), call, args.reps, QUEUED)[0]
            return median_seconds(lambda i: (x,), call, args.reps)

    rows, results = (
        [],
        {
            "dims": dims,
            "vocab": vocab,
            "x_dtype": args.dtype,
            "backend": backend,
            "table_bytes": table.nbytes,
            "copy_bytes_per_s": copy,
            "runs": [],
        },
    )
    rng = np.random.default_rng(1)
    for n in args.rows:
        x = mx.array(rng.standard_normal((n, dims)).astype(np.float32)).astype(dtype)
        ms = {name: 1e3 * timed(name, x) if name != "streamed" or n <= 256 else None for name in heads_by_name}
        ms |= {
            f"{name} queued": 1e3 * timed(name, x, queued=True)
            for name in ("as_linear", "mlx q4", "mlx f16")
            if name in heads_by_name
        }
        results["runs"].append({"rows": n, "ms": ms})
        rows.append(
            [
                n,
                *("-" if t is None else f"{t:.3f}" for t in ms.values()),
                f"{table.nbytes / ms['as_linear'] / 1e6:.3g}",
                f"{table.nbytes / ms['as_linear queued'] / 1e6:.3g}",
            ]
        )
        print(*rows[-1], sep="\t", flush=True)

    table_md = markdown(["rows", *(f"{name} ms" for name in results["runs"][0]["ms"]), "GB/s", "GB/s queued"], rows)
    table_md += (
        f"\n\nBackend `{backend}`, median of {args.reps} calls after a warm-up. Q4_K table: "
        f"{table.nbytes / 2**20:.1f} MiB; GB/s = table bytes / as_linear time (one call per evaluation, "
        f"or queued: the difference of {2 * QUEUED} and {QUEUED} queued calls / {QUEUED}); copy bandwidth "
        f"(float32 elementwise, read + write, queued alike): {copy / 1e9:.1f} GB/s. MATVEC_MAX_ROWS = {tuning.MATVEC_MAX_ROWS}, "
        f"MMA_MIN_ROWS, MMA_MAX_ROWS = {tuning.MMA_MIN_ROWS[dtype]}, {tuning.MMA_MAX_ROWS}, "
        f"TILE_BYTES = {tuning.TILE_BYTES >> 20} MiB."
    )
    stem = "as_linear_small" if args.small else "as_linear"
    print(save(stem, f"as_linear, Q4_K dims {dims:,} vocab {vocab:,}, x {args.dtype}", table_md, results))


if __name__ == "__main__":
    main()
