"""Peak memory per member of a vocab-parallel embedding built from a GGUF file, two ways, in one run:

- whole, then sliced: ``shard_embedding(Embedding.from_gguf(path))``, every member reading the
  whole table before keeping its rows (what a model loaded whole and then sharded does);
- read sliced: ``ShardedEmbedding.from_gguf(path)``, every member reading its rows only.

Each is MLX's peak active memory while it is built (``mx.get_peak_memory`` after
``mx.reset_peak_memory``, less what was active before) and what stays active afterwards, the
whole module dropped. Rank 0 writes a GGUF of random blocks of the shape first (default Gemma 3
270M's token table, 262,144 x 640 Q8_0) to ``--path``, and ``results/distributed_memory_<cpu|gpu>.{md,json}``.

    mlx.launch -n 2 --backend ring -- python benchmarks/distributed_memory.py
"""

from __future__ import annotations

import argparse
import gc
import resource

import mlx.core as mx

from muser_mlx import Embedding, ShardedEmbedding, Table, save_gguf, shard_embedding

from common import markdown, random_q_bytes, save

GEMMA3_270M = {"vocab": 262144, "dims": 640, "qtype": "Q8_0"}


def measured(build) -> tuple[int, int, object]:
    """(peak bytes while ``build()`` runs, bytes active after it, its module), above what was active."""
    gc.collect()
    base = mx.get_active_memory()
    mx.reset_peak_memory()
    module = build()
    mx.eval(module.weight)
    gc.collect()
    return mx.get_peak_memory() - base, mx.get_active_memory() - base, module


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--vocab", type=int, default=GEMMA3_270M["vocab"])
    ap.add_argument("--dims", type=int, default=GEMMA3_270M["dims"])
    ap.add_argument("--qtype", default=GEMMA3_270M["qtype"])
    ap.add_argument("--path", default="/tmp/muser_mlx_distributed_memory.gguf")
    ap.add_argument("--backend", default="ring", help="mx.distributed backend")
    args = ap.parse_args()
    group = mx.distributed.init(strict=True, backend=args.backend)
    if group.rank() == 0:
        data = random_q_bytes(args.qtype, args.vocab, args.dims)
        save_gguf(args.path, {"token_embd.weight": Table.from_bytes(data, args.qtype, args.dims)})
        del data
    mx.eval(mx.distributed.all_sum(mx.array(1.0), group=group, stream=mx.cpu))  # the file is written

    # read sliced first: the process's RSS high-water mark then covers it alone
    sliced_peak, sliced_active, sliced = measured(lambda: ShardedEmbedding.from_gguf(args.path, group=group))
    rss_sliced = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    share = sliced.weight.nbytes
    del sliced

    def whole_then_sliced():
        return shard_embedding(Embedding.from_gguf(args.path), group)  # the whole module dropped on return

    whole_peak, whole_active, module = measured(whole_then_sliced)
    rss_whole = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    table_bytes = args.vocab * module.format.row_bytes(args.dims)
    del module

    mine = [whole_peak, sliced_peak, whole_active, sliced_active, rss_whole, rss_sliced]
    members = mx.distributed.all_gather(mx.array([mine], mx.int64), group=group, stream=mx.cpu).tolist()
    if group.rank() == 0:
        mib = 2**20
        cells = [
            ["table bytes (MiB)", f"{table_bytes / mib:.1f}", f"{table_bytes / mib:.1f}", ""],
            ["member 0's rows (MiB)", f"{share / mib:.1f}", f"{share / mib:.1f}", ""],
        ]
        for r, (wp, sp, wa, sa, wr, sr) in enumerate(members):
            cells += [
                [
                    f"member {r}: MLX peak active memory while building (MiB)",
                    f"{wp / mib:.1f}",
                    f"{sp / mib:.1f}",
                    f"{sp / wp:.2f}",
                ],
                [f"member {r}: MLX active memory after (MiB)", f"{wa / mib:.1f}", f"{sa / mib:.1f}", ""],
            ]
            if r:  # member 0 also wrote the file: its high-water mark holds that
                cells.append(
                    [f"member {r}: process RSS high-water mark (MiB)", f"{wr / mib:.1f}", f"{sr / mib:.1f}", ""]
                )
        header = ["per member", "whole, then sliced", "read sliced (from_gguf)", "read sliced / whole"]
        table_md = markdown(header, cells)
        n = group.size()
        command = (
            f"mlx.launch -n {n} --backend {args.backend} -- python benchmarks/distributed_memory.py --vocab {args.vocab} "
            f"--dims {args.dims} --qtype {args.qtype} --backend {args.backend}"
        )
        title = f"Vocab-parallel embedding from a GGUF file: memory per member, {args.qtype} {args.vocab} x {args.dims}, {n} members ({args.backend})"
        print(table_md)
        print(
            save(
                "distributed_memory",
                title,
                f"`{command}`\n\n{table_md}",
                {"args": vars(args), "members": members, "command": command},
            )
        )


if __name__ == "__main__":
    main()
