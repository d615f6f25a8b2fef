"""The head and ``Linear`` at prefill widths: ``x [n, dims] @ W.T`` from the quantized table
against MLX's float16 matmul and 4-bit quantized matmul at the same shape, on a GPU.

Two tables: Muse Glimmer's head (Q4_K, dims 6,656, vocab 202,048: mlx-lm's ``muse_glimmer``) and
Gemma 3 270M's (Q8_0, dims 640, vocab 262,144); random bytes with finite scales. x float16 of
16 to 4,096 rows. Every time is device ms per call queued (common.queued_seconds). Columns:
- ``muser_mlx``: ``as_linear`` as ``backends.head.choose`` picks (``kernel`` names it);
- ``tile_mma``: kernels/tile_mma.h at any row count, multiplied by warpgroups from
  tuning.TILE_WGMMA_MIN_ROWS rows where the GPU has them (CUDA compute capability 9.0);
- ``tile_mma warps``: kernels/tile_mma.h multiplied by warps (mma.sync) at any row count;
- ``x_steps``: the warpgroups' arrangement of x alone (``backends.head.x_steps``), part of
  ``tile_mma``'s time where it multiplies by warpgroups;
- ``mma``: kernels/mma.h at any row count, up to --mma-rows;
- ``tiled@M``: the tiled path, vocab rows dequantized into x's dtype M MiB at a time
  (tuning.TILE_BYTES), each tile multiplied by MLX's matmul;
- ``dequantize@M``: that path's dequantization alone (the tiles chained as there, summed to a
  scalar each): the floor under the tiled path;
- ``mlx f16``: ``x @ W16.T``, W16 the float16 table (``nn.Linear`` holding float16);
- ``mlx q4``: ``mlx.nn.QuantizedLinear`` (4-bit, group 64, scales in float16).
Then every format's head (``as_linear``) at --format-rows rows (512) over vocab 32,768 at dims
6,656, its time per table byte against Q4_K's.

    python benchmarks/prefill.py                  # writes results/prefill_gpu.{md,json}
    python benchmarks/prefill.py --shapes gemma --rows 16 512 --tiles 1024 --no-formats
    python benchmarks/prefill.py --rows 64 512 4096 --tiles 1024 --mma-rows 64 --reps 3 --stem prefill_rows
    python benchmarks/prefill.py --rows 16 32 64 96 128 512 4096 --tiles 1024 --mma-rows 64 --reps 3 \
        --format-rows 64 --stem prefill_tile_mma
"""

from __future__ import annotations

import argparse
import math

import mlx.core as mx
import numpy as np

from muser_mlx import FORMATS, Table, as_linear, backends
from muser_mlx.backends import head, tuning

from common import GLIMMER, copy_bandwidth, markdown, mlx_q4_linear, queued_seconds, random_q_bytes, save

SHAPES = {"glimmer": ("Q4_K", GLIMMER["vocab"], GLIMMER["dims"]), "gemma": ("Q8_0", 262144, 640)}
QUEUED = 4
MIB = 1 << 20


def dequantize(table: Table, x: mx.array) -> mx.array:
    """The tiled path's dequantization of the whole table in x's dtype, tile after tile as
    ``head.tiled`` takes them (``head.over_tiles``), each reduced to a scalar (no matmul)."""

    def step(start: int, stop: int, tile: mx.array, total: mx.array | None) -> mx.array:
        part = tile[:, :1].sum()
        return part if total is None else total + part

    return head.over_tiles(table, x.dtype, backends.select("auto", table), step)[-1]


def contenders(qtype: str, vocab: int, dims: int, tiles: list[int], baselines: bool) -> tuple[Table, dict]:
    """name -> (call of x, the tuning it runs under)."""
    table = Table.from_bytes(random_q_bytes(qtype, vocab, dims), qtype, dims)
    mx.eval(table.data)
    backend = backends.select("auto", table)
    calls = {
        "muser_mlx": (lambda x: as_linear(table, x), {}),
        "tile_mma": (lambda x: head.tile_mma(table, x, backend), {}),
        "tile_mma warps": (lambda x: head.tile_mma(table, x, backend), {"TILE_WGMMA_MIN_ROWS": math.inf}),
        "x_steps": (lambda x: head.x_steps(x, tuning.tile_mma_xrows(x.shape[0], True)), {}),
        "mma": (lambda x: head.mma(table, x, backend), {}),
    }
    calls |= {
        f"tiled@{m}": (lambda x: head.tiled(table, x, backend), {"TILE_BYTES": m * MIB, "TILE_DEVICE_SHARE": 0})
        for m in tiles
    }
    calls |= {
        f"dequantize@{m}": (lambda x: dequantize(table, x), {"TILE_BYTES": m * MIB, "TILE_DEVICE_SHARE": 0})
        for m in tiles
    }
    if baselines:
        dense = backends.bind(table, mx.float16, backend)(mx.arange(vocab))  # the same values in float16
        q4 = mlx_q4_linear(dims, vocab)
        mx.eval(dense)
        calls |= {"mlx f16": (lambda x: x @ dense.T, {}), "mlx q4": (q4, {})}
    return table, calls


def timed(call, constants: dict, x: mx.array, reps: int) -> float:
    with tuning.fixed(**constants):
        return queued_seconds(lambda i: (x,), call, reps, QUEUED)[0]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rows", type=int, nargs="+", default=[16, 64, 128, 256, 512, 1024, 4096])
    p.add_argument("--shapes", nargs="+", choices=list(SHAPES), default=list(SHAPES))
    p.add_argument("--tiles", type=int, nargs="+", default=[256, 1024], help="MiB of floats per tile")
    p.add_argument("--mma-rows", type=int, default=512, help="time kernels/mma.h up to this many rows")
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--no-formats", action="store_true", help="skip the every-format run")
    p.add_argument("--format-rows", type=int, default=512, help="rows of x in the every-format run")
    p.add_argument("--no-baselines", action="store_true", help="skip MLX's float16 and 4-bit matmuls")
    p.add_argument("--stem", default="prefill", help="result file name, before _gpu / _cpu")
    args = p.parse_args()
    copy = copy_bandwidth(1.0)
    rng = np.random.default_rng(1)
    results = {"copy_bytes_per_s": copy, "x_dtype": "float16", "shapes": [], "formats": []}
    rows_md = []
    for qtype, vocab, dims in (SHAPES[name] for name in args.shapes):
        table, calls = contenders(qtype, vocab, dims, args.tiles, not args.no_baselines)
        shape = {"qtype": qtype, "vocab": vocab, "dims": dims, "table_bytes": table.nbytes, "runs": []}
        for n in args.rows:
            x = mx.array(rng.standard_normal((n, dims)).astype(np.float32)).astype(mx.float16)
            ms = {}
            for name, (call, constants) in calls.items():
                if name == "mma" and n > args.mma_rows or name.startswith("dequantize") and n != args.rows[0]:
                    continue
                ms[name] = 1e3 * timed(call, constants, x, args.reps)
            kernel = head.choose(table, n, mx.float16, backends.select("auto", table))
            shape["runs"].append({"rows": n, "kernel": kernel, "ms": ms})
            line = " ".join(f"{k}={v:.3f}" for k, v in ms.items())
            print(f"{qtype} {vocab}x{dims} n={n} [{kernel}] {line}", flush=True)
            best_ours = min(v for k, v in ms.items() if k == "muser_mlx" or k.startswith(("tiled", "mma", "tile_mma")))
            rows_md.append(
                [
                    f"{qtype} {vocab:,} x {dims:,}",
                    n,
                    kernel,
                    *(f"{ms[k]:.3f}" if k in ms else "-" for k in calls),
                    *(
                        (f"{ms['muser_mlx'] / ms['mlx f16']:.2f}", f"{ms['muser_mlx'] / ms['mlx q4']:.2f}")
                        if "mlx f16" in ms
                        else ("-", "-")
                    ),
                    f"{best_ours:.3f}",
                ]
            )
        results["shapes"].append(shape)
        header = ["table", "rows", "kernel", *(f"{k} ms" for k in calls), "x f16", "x q4", "best of ours ms"]
        del table, calls
    table_md = markdown(header, rows_md)

    if not args.no_formats:
        x = mx.array(rng.standard_normal((args.format_rows, GLIMMER["dims"])).astype(np.float32)).astype(mx.float16)
        per_byte = {}
        for qtype in sorted(FORMATS):
            table = Table.from_bytes(random_q_bytes(qtype, 32768, GLIMMER["dims"]), qtype, GLIMMER["dims"])
            mx.eval(table.data)
            seconds = timed(lambda x, table=table: as_linear(table, x), {}, x, args.reps)
            per_byte[qtype] = seconds / table.nbytes
            results["formats"].append({"format": qtype, "table_bytes": table.nbytes, "seconds": seconds})
            print(qtype, f"{1e3 * seconds:.3f} ms", flush=True)
        fmt_rows = [
            [r["format"], f"{1e3 * r['seconds']:.3f}", f"{per_byte[r['format']] / per_byte['Q4_K']:.2f}"]
            for r in results["formats"]
        ]
        table_md += f"\n\nEvery format, {args.format_rows} rows of float16 x, vocab 32,768 x dims 6,656 (`as_linear`: {head.choose(table, args.format_rows, mx.float16, backends.select('auto', table))}):\n\n"
        table_md += markdown(["format", "ms", "per table byte x Q4_K"], fmt_rows)
    table_md += (
        f"\n\nx float16; device ms per call, {QUEUED} and {2 * QUEUED} calls queued, median of {args.reps}. "
        f"Copy bandwidth (float32 elementwise, read + write): {copy / 1e9:.0f} GB/s. "
        f"x f16, x q4: muser_mlx against MLX's float16 and 4-bit matmuls. MMA_MAX_ROWS = {tuning.MMA_MAX_ROWS}, "
        f"TILE_BYTES = {tuning.TILE_BYTES // MIB} MiB."
    )
    print(save(args.stem, "The head at prefill widths against MLX's matmuls", table_md, results))


if __name__ == "__main__":
    main()
