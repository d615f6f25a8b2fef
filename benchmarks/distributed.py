"""The vocab-parallel head and lookup against the unsharded ones, on every member of a group.

Each member holds the whole table (the unsharded module, what mlx-lm replicates today) and its
share of it, and times both side by side in one run: the head for ``--rows`` rows of x (full
logits, gathered) and, for the tied head, the lookup of ``--ids`` ids. ``--head tied``: an
:class:`Embedding` and :func:`muser_mlx.shard_embedding` (its ``as_linear``); ``--head linear``:
an untied head, a :class:`Linear` and :meth:`muser_mlx.ShardedLinear.from_linear`. Default shape: Gemma 3
270M's token table (262,144 x 640, Q8_0). Rank 0 writes
``results/distributed[_linear]_<cpu|gpu>.{md,json}``.

    mlx.launch -n 2 --backend ring -- python benchmarks/distributed.py
    mlx.launch -n 2 --backend nccl -- python benchmarks/distributed.py --backend nccl \\
        --vocab 202048 --dims 6656 --qtype Q4_K --rows 1,16,512 --ids 1,64,4096 --timer queued
    mlx.launch -n 2 --backend nccl -- python benchmarks/distributed.py --backend nccl --head linear \\
        --vocab 202048 --dims 6656 --qtype Q6_K --rows 1,16,512 --timer queued

``--timer alternating`` (default): the median wall time of one evaluation per call, sharded and
unsharded alternating in blocks (:func:`common.alternating_medians`); ``queued``: device time per
call of calls queued in one evaluation (:func:`common.queued_seconds`).
"""

from __future__ import annotations

import argparse
import gc
import os

import mlx.core as mx

from muser_mlx import Embedding, Linear, ShardedLinear, Table, shard_embedding

from common import alternating_medians, fresh_ids, markdown, queued_seconds, random_q_bytes, save

GEMMA3_270M = {"vocab": 262144, "dims": 640, "qtype": "Q8_0"}


def fresh_x(n: int, dims: int):
    """``make_args``: ``i`` -> (x ``[n, dims]`` float32, the same on every member for one ``i``)."""
    return lambda i: (mx.random.normal((n, dims), key=mx.random.key(i)),)


def timed(calls: dict, args) -> dict:
    """{name: seconds per call}; every member runs the same calls in the same order."""
    if args.timer == "queued":
        return {
            name: queued_seconds(make, fn, args.reps, calls=args.queued_calls)[0] for name, (make, fn) in calls.items()
        }
    return alternating_medians(calls, reps=args.reps, rounds=args.reps, warmup=1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--vocab", type=int, default=GEMMA3_270M["vocab"])
    ap.add_argument("--dims", type=int, default=GEMMA3_270M["dims"])
    ap.add_argument("--qtype", default=GEMMA3_270M["qtype"])
    ap.add_argument("--rows", default="1,16", help="rows of x for the head, comma-separated")
    ap.add_argument("--ids", default="1,64", help="ids per lookup, comma-separated")
    ap.add_argument("--reps", type=int, default=6, help="timed calls per module and case")
    ap.add_argument("--timer", choices=("alternating", "queued"), default="alternating")
    ap.add_argument("--queued-calls", type=int, default=4)
    ap.add_argument("--head", choices=("tied", "linear"), default="tied")
    ap.add_argument("--backend", default="ring", help="mx.distributed backend")
    args = ap.parse_args()
    group = mx.distributed.init(strict=True, backend=args.backend)
    n = group.size()
    load_before = os.getloadavg()[0]

    gc.collect()
    base = mx.get_active_memory()
    table = Table.from_bytes(random_q_bytes(args.qtype, args.vocab, args.dims), args.qtype, args.dims)
    tied = args.head == "tied"
    full = Embedding.from_table(table) if tied else Linear.from_table(table)
    del table
    mx.eval(full.weight)
    full_active = mx.get_active_memory() - base
    sharded = shard_embedding(full, group) if tied else ShardedLinear.from_linear(full, group)
    mx.eval(sharded.weight)
    both_active = mx.get_active_memory() - base
    heads = (full.as_linear, sharded.as_linear) if tied else (full, sharded)

    rows = []
    for r in map(int, args.rows.split(",")):
        t = timed({"unsharded": (fresh_x(r, args.dims), heads[0]), "sharded": (fresh_x(r, args.dims), heads[1])}, args)
        rows.append([f"head, {r} rows of x", t["unsharded"] * 1e3, t["sharded"] * 1e3])
    for k in map(int, args.ids.split(",")) if tied else ():
        t = timed({"unsharded": (fresh_ids(args.vocab, k), full), "sharded": (fresh_ids(args.vocab, k), sharded)}, args)
        rows.append([f"lookup, {k} ids", t["unsharded"] * 1e3, t["sharded"] * 1e3])

    if group.rank() == 0:
        mib = 2**20
        cells = [[name, f"{u:.3f}", f"{s:.3f}", f"{s / u:.2f}"] for name, u, s in rows]
        cells += [
            [
                "table bytes held per member (MiB)",
                f"{full.weight.nbytes / mib:.1f}",
                f"{sharded.weight.nbytes / mib:.1f}",
                f"{sharded.weight.nbytes / full.weight.nbytes:.2f}",
            ],
            [
                "MLX active memory, whole table / + this member's share (MiB)",
                f"{full_active / mib:.1f}",
                f"{(both_active - full_active) / mib:.1f}",
                f"{(both_active - full_active) / full_active:.2f}",
            ],
        ]
        header = ["per call", "unsharded (ms)", f"sharded over {n} (ms)", "sharded / unsharded"]
        table_md = markdown(header, cells)
        command = (
            f"mlx.launch -n {n} --backend {args.backend} -- python benchmarks/distributed.py --vocab {args.vocab} "
            f"--dims {args.dims} --qtype {args.qtype} --rows {args.rows} --ids {args.ids} --reps {args.reps} "
            f"--timer {args.timer} --head {args.head} --backend {args.backend}"
        )
        what = "tied head and lookup" if tied else "untied head (Linear)"
        title = f"Vocab-parallel {what}, {args.qtype} {args.vocab} x {args.dims}, {n} members ({args.backend})"
        load = f"load average (1 min) {load_before:.1f} before, {os.getloadavg()[0]:.1f} after"
        print(table_md)
        print(
            save(
                "distributed" if tied else "distributed_linear",
                title,
                f"`{command}`\n\n{args.timer} timer; {load}\n\n{table_md}",
                {
                    "args": vars(args),
                    "members": n,
                    "rows": rows,
                    "full_active": full_active,
                    "both_active": both_active,
                    "command": command,
                    "load": load,
                },
            )
        )


if __name__ == "__main__":
    main()
