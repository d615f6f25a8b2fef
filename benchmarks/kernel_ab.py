"""A/B of the CUDA kernels: this tree's prelude and block decoders (or all its kernel files)
against those of git revisions or folders, alternating in one process (so all see the same machine
state), queued timings at Muse Glimmer's shape (dims 6,656, vocab 202,048; or --dims, --vocab)
against the copy bandwidth of the same run. CUDA only.

    python benchmarks/kernel_ab.py --against main --formats Q4_K Q6_K Q8_0 BF16 --heads
    python benchmarks/kernel_ab.py --against main --whole --formats --head-formats Q4_K IQ2_XXS --head-rows 1 16
    python benchmarks/kernel_ab.py --against <folder> --whole --formats --head-formats IQ3_XXS --settings HEAD_STREAM_PASSES=4

Each round compiles the kernels from a folder holding the revision's prelude_cuda.h, formats.h
and format_*.h block decoders beside this tree's kernel templates (with --whole, the revision's
whole kernels/ folder; tuning.fixed(KERNEL_SOURCES=...), the package's one seam for it), checks
that all give the same output, and times queued calls (common.queued_seconds): lookups of 4,096
and 32,768 ids per format, and with --heads the LM heads of Q4_K (bytedot at 1 row of float16 x,
mma at 16) and of F16 (matvec at 1 row), with --head-formats those formats' heads at --head-rows
rows of float16 x (the kernel backends.head.choose picks, or --head-kernel), each against the table bytes it
streams; every tree under the tuning constants of --settings. (Python code is not compared:
benchmarks/tree_ab.py does.)
"""

from __future__ import annotations

import argparse
import re
import subprocess
import tempfile
from pathlib import Path

import mlx.core as mx

from muser_mlx import Embedding, Table
from muser_mlx.backends import head, tuning

from common import GLIMMER, copy_bandwidth, fresh_ids, queued_seconds, random_q_bytes, tuning_constants

HEADS = (("Q4_K", "bytedot", 1), ("Q4_K", "mma", 16), ("F16", "matvec", 1))
REVISED = re.compile(r"prelude_cuda\.h|formats\.h|format_\w+\.h")  # the files the revision supplies
KERNEL_FILE = re.compile(r"\w+\.(h|cu|metal)")  # kernels/'s sources (not its __init__.py or .clang-format)


def source_at(revision: str, name: str) -> str:
    """kernels/``name`` at a git revision, or in a folder of kernel sources (a machine without
    the repository's history)."""
    if Path(revision).is_dir():
        return (Path(revision) / name).read_text()
    return subprocess.run(
        ["git", "show", f"{revision}:kernels/{name}"], check=True, capture_output=True, text=True
    ).stdout


def variants(revisions: list[str], whole: bool) -> dict[str, Path]:
    """{"new" | revision: folder of kernel files}: a revision's folder is this tree's files with
    the revision's REVISED ones (prelude and decoders), or all of them (``whole``), in their place.
    The kernels' names carry a digest of their text, so no two share an MLX kernel."""
    folders = {"new": tuning.KERNEL_SOURCES}
    for revision in revisions:
        old = folders[revision] = Path(tempfile.mkdtemp(prefix="kernel_ab_"))
        for path in (p for p in tuning.KERNEL_SOURCES.iterdir() if KERNEL_FILE.fullmatch(p.name)):
            text = source_at(revision, path.name) if whole or REVISED.fullmatch(path.name) else path.read_text()
            (old / path.name).write_text(text)
    return folders


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--against", required=True, nargs="+", help="git revisions (or folders) of the other kernel sources")
    p.add_argument("--formats", nargs="*", default=["Q4_K", "Q6_K", "Q8_0", "BF16"], help="gathers")
    p.add_argument("--whole", action="store_true", help="the revision's every kernel file, not its decoders alone")
    p.add_argument("--heads", action="store_true", help="also the LM heads (HEADS)")
    p.add_argument("--head-formats", nargs="*", default=[], help="the heads of these formats")
    p.add_argument("--head-rows", nargs="+", type=int, default=[1], help="rows of x for --head-formats")
    p.add_argument(
        "--head-kernel", choices=list(head.HEADS), help="this head kernel at every row count, not the one chosen"
    )
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--settings", default="", metavar="NAME=VALUE[;NAME=VALUE]", help="tuning constants for every tree")
    p.add_argument("--dims", type=int, default=GLIMMER["dims"])
    p.add_argument("--vocab", type=int, default=GLIMMER["vocab"])
    args = p.parse_args()
    dims, vocab, settings = args.dims, args.vocab, tuning_constants(args.settings)
    copy = copy_bandwidth()
    print(f"copy {copy / 1e9:.0f} GB/s; tables of vocab {vocab:,} x dims {dims:,}", flush=True)
    trees = variants(args.against, args.whole)

    def rounds(label: str, make_call, probe: tuple, sizes: list[tuple[str, object, int]]) -> None:
        """``sizes``: (label, make_args, bytes moved per call); ``make_call()`` after each switch."""
        ref = None
        for _ in range(args.rounds):
            for name, variant in trees.items():
                with tuning.fixed(KERNEL_SOURCES=variant, **settings):
                    call = make_call()
                    out = call(*probe)
                    ref = out if ref is None else ref
                    line = [f"{label} {name} same={bool(mx.array_equal(out, ref))}"]
                    for size, make_args, nbytes in sizes:
                        q = queued_seconds(make_args, call, 12, 16)[0]
                        line.append(f"{size}: {q * 1e6:.1f} us ({100 * nbytes / q / copy:.0f}%)")
                print(" | ".join(line), flush=True)

    for qtype in args.formats:
        table = Table.from_bytes(random_q_bytes(qtype, vocab, dims), qtype, dims)
        mx.eval(table.data)
        sizes = [(f"n={n}", fresh_ids(vocab, n), n * (table.row_bytes + 4 * dims)) for n in (4096, 32768)]
        rounds(f"gather {qtype}", lambda table=table: Embedding.from_table(table), (mx.arange(0, vocab, 997),), sizes)
    heads = list(HEADS if args.heads else ())
    for qtype in args.head_formats:
        table = Table.from_bytes(random_q_bytes(qtype, vocab, dims), qtype, dims)
        heads += [
            (table, args.head_kernel or head.choose(table, rows, mx.float16, "cuda"), rows) for rows in args.head_rows
        ]
    for table, kernel, rows in heads:
        if isinstance(table, str):
            table = Table.from_bytes(random_q_bytes(table, vocab, dims), table, dims)
        qtype = table.qtype
        mx.eval(table.data)

        def make_args(i, rows=rows):
            return (mx.random.normal((rows, dims), key=mx.random.key(i)).astype(mx.float16),)

        rounds(
            f"{kernel} {qtype} rows={rows}",
            lambda table=table, kernel=kernel: lambda x: head.HEADS[kernel](table, x, "cuda"),
            make_args(0),
            [("table", make_args, table.data.nbytes)],
        )


if __name__ == "__main__":
    main()
