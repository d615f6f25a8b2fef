"""Benchmark: the tied LM head from the quantized table, muser_mlx.as_linear, against MLX's own.

Glimmer's head by default: dims 6,656, vocab 202,048, Q4_K (random bytes with small finite
scales: timing does not depend on the values), x float16 (float32 on a CPU) of 1, 4, 16, 512 and 4,096 rows.
Columns (median ms per call over --reps calls, each call built and mx.eval'd, after a warm-up):
- ``as_linear``: the public call (streamed kernel for rows <= MATVEC_MAX_ROWS on a GPU, else tiled);
- ``streamed``: the matvec kernel alone (GPU only), for choosing MATVEC_MAX_ROWS;
- ``tiled@R``: the tiled path with R vocab rows per tile, for choosing TILE_ROWS;
- ``mlx q4``: ``mlx.nn.QuantizedEmbedding(bits=4, group_size=64).as_linear`` (scales in x's dtype);
- ``mlx f16``: ``mlx.nn.Embedding.as_linear`` with a float16 table.
Also: the Q4_K table's bytes and the bandwidth of a large elementwise copy in the same run, so
``GB/s`` (Q4_K table bytes / as_linear time) can be read against what the memory delivers.

    python benchmarks/as_linear.py            # Glimmer shape, the default device (the GPU)
    python benchmarks/as_linear.py --small    # dims 1,024, vocab 8,192: quick, also on a CPU

Prints a markdown table and writes benchmarks/results/as_linear_<device>[_small].md.
"""

from __future__ import annotations

import argparse
import datetime
import platform
import statistics
import sys
import time
from pathlib import Path

import mlx.core as mx
import mlx.nn as nn
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from muser_mlx import FORMATS, Table, as_linear  # noqa: E402
from muser_mlx import backends, linear  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
TILES = (1024, 4096, 16384)


def q4_k_table(vocab: int, dims: int, seed: int = 0) -> Table:
    """Random Q4_K bytes, d and dmin (bytes 0-1, 2-3 of each 144-byte block) below 2^-3."""
    fmt = FORMATS["Q4_K"]
    rng = np.random.default_rng(seed)
    blocks = rng.integers(0, 256, size=(vocab * dims // fmt.block_values, fmt.block_bytes), dtype=np.uint8)
    blocks[:, 1] &= 0xAF  # f16 high byte: clear exponent bits 4 and 2 -> |d| < 2^-3, finite
    blocks[:, 3] &= 0xAF
    return Table.from_bytes(blocks.reshape(vocab, fmt.row_bytes(dims)), "Q4_K", dims)


def median_ms(fn, reps: int) -> float:
    mx.eval(fn())  # warm-up: compiles kernels, fills caches
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        mx.eval(fn())
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def copy_bandwidth(reps: int, nbytes: int) -> float:
    """GB/s of ``a + 1`` over float32 ``a`` of ``nbytes`` (reads and writes counted)."""
    a = mx.zeros((nbytes // 4,), mx.float32)
    mx.eval(a)
    return 2 * nbytes / median_ms(lambda: a + 1, reps) / 1e6


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
    p.add_argument("--rows", type=int, nargs="+", default=[1, 4, 16, 512, 4096])
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--dtype", choices=["float16", "bfloat16", "float32"], help="x's dtype; default float16 on "
                   "a GPU, float32 on the CPU (MLX's CPU float16 matmuls are slow: they would time the CPU, not the head)")
    p.add_argument("--no-mlx", action="store_true", help="skip MLX's own heads (saves their memory)")
    args = p.parse_args()

    dims, vocab = (1024, 8192) if args.small else (6656, 202048)
    backend = backends.select("auto")
    gpu = backend in backends.KERNEL_BACKENDS
    args.dtype = args.dtype or ("float16" if gpu else "float32")
    dtype = getattr(mx, args.dtype)
    table = q4_k_table(vocab, dims)
    mx.eval(table.data)
    heads = None if args.no_mlx else mlx_heads(vocab, dims, dtype)
    bandwidth = copy_bandwidth(args.reps, 1 << 30 if gpu else 1 << 28)

    cols = ["rows", "as_linear ms", "GB/s"] + (["streamed ms"] if gpu else [])
    cols += [f"tiled@{r} ms" for r in TILES] + ([] if heads is None else ["mlx q4 ms", "mlx f16 ms"])
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    rng = np.random.default_rng(1)
    for n in args.rows:
        x = mx.array(rng.standard_normal((n, dims)).astype(np.float32)).astype(dtype)
        mx.eval(x)
        ms = median_ms(lambda: as_linear(table, x), args.reps)
        row = [str(n), f"{ms:.3f}", f"{table.nbytes / ms / 1e6:.3g}"]
        if gpu:
            row.append(f"{median_ms(lambda: linear.streamed(table, x, backend), args.reps):.3f}")
        row += [f"{median_ms(lambda: linear.tiled(table, x, backend, r), args.reps):.3f}" for r in TILES]
        if heads is not None:
            row += [f"{median_ms(lambda: h.as_linear(x), args.reps):.3f}" for h in heads]
        lines.append("| " + " | ".join(row) + " |")
        print(lines[-1], flush=True)

    device = mx.device_info().get("device_name", "unknown")
    kind = backend if gpu else "cpu"
    header = [
        f"# as_linear, Q4_K dims {dims:,} vocab {vocab:,}, x {args.dtype}",
        "",
        f"- machine: {device} ({platform.machine()}, {platform.system()}), MLX default device {mx.default_device()}, "
        f"backend `{backend}`",
        f"- date: {datetime.date.today().isoformat()}, MLX {mx.__version__}, median of {args.reps} calls after a warm-up",
        f"- Q4_K table: {table.nbytes / 2**20:.1f} MiB; copy bandwidth (float32 a + 1, read + write): {bandwidth:.1f} GB/s",
        f"- MATVEC_MAX_ROWS = {linear.MATVEC_MAX_ROWS}, TILE_ROWS = {linear.TILE_ROWS}; GB/s = table bytes / as_linear time",
        "",
    ]
    text = "\n".join(header + lines) + "\n"
    print("\n" + text)
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / f"as_linear_{kind}{'_small' if args.small else ''}.md"
    out.write_text(text)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
