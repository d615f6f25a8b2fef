"""Where the IQ grids live on CUDA: global memory read through the read-only data cache
(``__device__``, prelude_cuda.h's MUSER_CONSTANT), constant memory (``__constant__``), and for the
LM heads a copy in each threadgroup's shared memory (lanes_cuda.h's MUSER_SHARED_GRIDS, the
tree's choice), the same decoders alternating in one process at the Glimmer shape (dims 6,656,
vocab 202,048) against the copy bandwidth of the same run. CUDA only.

The 32 lanes of a warp read 32 unrelated grid points: constant memory serves one address at a
time, global memory a cache line, shared memory a bank. Per grid format: lookups of 4,096 and
32,768 ids queued (common.queued_seconds; table rows read + float32 written; the gather reads
global memory under "shared" too: it has no entry hook to fill a copy, and a threadgroup of it
reads a few rows), and the LM head on the table's bytes: byte dot products at 1 row of float16
x, the matrix units at 16 (backends/head.py's kernels). Each round checks that all give the same
output.

    python benchmarks/grid_memory.py                        # every grid format
    python benchmarks/grid_memory.py --formats IQ2_XXS IQ1_S --rounds 3
    python benchmarks/grid_memory.py --heads-only

Prints each round and writes benchmarks/results/grid_memory_gpu.{md,json} (medians over rounds).
"""

from __future__ import annotations

import argparse
import re
import statistics
import tempfile
from pathlib import Path

import mlx.core as mx

from muser_mlx import Embedding, Table
from muser_mlx.backends import head, tuning
from muser_mlx.formats.grids import GRID_OF_FORMAT

from common import (
    GLIMMER,
    copy_bandwidth,
    fresh_ids,
    markdown,
    queued_seconds,
    random_q_bytes,
    save,
)

# variant -> (MUSER_CONSTANT's spelling, whether the heads copy the grid to shared memory)
SPACES = {
    "constant": ("__constant__ const", False),
    "global": ("__device__ const", False),
    "shared": ("__device__ const", True),
}
CONSTANT = re.compile(r"^#define MUSER_CONSTANT .*$", re.MULTILINE)
SHARED = re.compile(r"^#define MUSER_SHARED_GRIDS$", re.MULTILINE)


def folder(spelling: str, shared: bool) -> Path:
    """A copy of the kernel files with prelude_cuda.h's MUSER_CONSTANT spelled ``spelling`` and,
    unless ``shared``, lanes_cuda.h's MUSER_SHARED_GRIDS left out."""
    out = Path(tempfile.mkdtemp(prefix="grid_memory_"))
    for path in (p for p in tuning.KERNEL_SOURCES.iterdir() if p.is_file()):
        text = path.read_text()
        if path.name == "prelude_cuda.h":
            text, count = CONSTANT.subn(f"#define MUSER_CONSTANT {spelling}", text)
            assert count == 1, "prelude_cuda.h defines MUSER_CONSTANT once"
        if path.name == "lanes_cuda.h" and not shared:
            text, count = SHARED.subn("", text)
            assert count == 1, "lanes_cuda.h defines MUSER_SHARED_GRIDS once"
        (out / path.name).write_text(text)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--formats", nargs="+", default=list(GRID_OF_FORMAT))
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--heads-only", action="store_true", help="no gathers (they read global memory under shared too)")
    p.add_argument("--reps", type=int, default=12)
    args = p.parse_args()
    dims, vocab = GLIMMER["dims"], GLIMMER["vocab"]
    folders = {name: folder(*variant) for name, variant in SPACES.items()}
    copy = copy_bandwidth()
    print(f"copy {copy / 1e9:.0f} GB/s", flush=True)
    times: dict[tuple[str, str, str], list[float]] = {}
    moved: dict[tuple[str, str], int] = {}
    for qtype in args.formats:
        table = Table.from_bytes(random_q_bytes(qtype, vocab, dims), qtype, dims)
        mx.eval(table.data)
        cases = {
            f"gather n={n}": (
                lambda table=table: Embedding.from_table(table),
                fresh_ids(vocab, n),
                n * (table.row_bytes + 4 * dims),
            )
            for n in (() if args.heads_only else (4096, 32768))
        }
        for kernel, rows in (("bytedot", 1), ("mma", 16)):

            def make_x(i, rows=rows):
                return (mx.random.normal((rows, dims), key=mx.random.key(i)).astype(mx.float16),)

            cases[f"{kernel} rows={rows}"] = (
                lambda kernel=kernel, table=table: lambda x: head.HEADS[kernel](table, x, "cuda"),
                make_x,
                table.nbytes,
            )
        for case, (make_call, make_args, nbytes) in cases.items():
            moved[qtype, case] = nbytes
            ref = None
            for _ in range(args.rounds):
                for space, directory in folders.items():
                    with tuning.fixed(KERNEL_SOURCES=directory):
                        call = make_call()
                        out = call(*make_args(0))
                        same = ref is None or bool(mx.array_equal(out, ref))
                        ref = out if ref is None else ref
                        seconds = queued_seconds(make_args, call, args.reps, 16)[0]
                    times.setdefault((qtype, case, space), []).append(seconds)
                    print(
                        f"{qtype} {case} {space}: {seconds * 1e6:.1f} us "
                        f"({100 * nbytes / seconds / copy:.0f}% of copy) same={same}",
                        flush=True,
                    )
    rows, runs = [], []
    for (qtype, case), nbytes in moved.items():
        medians = {space: statistics.median(times[qtype, case, space]) for space in SPACES}
        runs.append({"format": qtype, "case": case, "bytes": nbytes, "seconds": medians})
        rows.append(
            [
                qtype,
                case,
                *(f"{medians[s] * 1e6:.1f} ({100 * nbytes / medians[s] / copy:.0f}%)" for s in SPACES),
                f"{medians['shared'] / medians['global']:.2f}",
            ]
        )
    md = markdown(["format", "call", *(f"{s} us (of copy)" for s in SPACES), "shared / global"], rows)
    md += (
        f"\n\nCopy bandwidth {copy / 1e9:.0f} GB/s. Queued calls (common.queued_seconds, 16 and 32 per "
        f"evaluation), the median of {args.rounds} alternating rounds; constant = `{SPACES['constant'][0]}`, "
        f"global = `{SPACES['global'][0]}`, shared = global with the heads' copy in shared memory."
    )
    print(
        save(
            "grid_memory",
            "IQ grids in CUDA constant, global or shared memory",
            md,
            {"copy_bytes_per_s": copy, "runs": runs},
        )
    )


if __name__ == "__main__":
    main()
