"""A/B of source trees of muser_mlx: this one's Embedding against other checkouts' (a previous
revision, say), all imported into one process and timed alternating (so all see the same machine
state), with mlx.nn.Embedding (float16 table) beside them, at Muse Glimmer's shape (dims 6,656,
vocab 202,048; Q4_K, float32 out). A copy of this tree among the others shows the noise: what
the same code measures under another name in the same run.

    git worktree add /tmp/before main            # or: git archive main | tar -x -C /tmp/before
    python benchmarks/tree_ab.py --against /tmp/before
    git archive HEAD | tar -x -C /tmp/same && python benchmarks/tree_ab.py --against /tmp/same /tmp/before
    python benchmarks/tree_ab.py --against /tmp/before --dims 1024 --vocab 8192 --batches 1 64 --reps 100  # a CPU
    python benchmarks/tree_ab.py --against /tmp/before --batches --head-rows 128 512  # the LM head too

Per batch of ids: the median time of one lookup per evaluation (common.alternating_medians: the
host's cost, which is most of a one-id lookup's time) and of lookups queued in one evaluation
(common.queued_seconds: device time per lookup; its host column, graph building per lookup).
With --head-rows, each tree's ``as_linear`` of the same table at those rows of float16 x:
device time per call queued (common.queued_seconds, 4 and 8 calls), the trees alternating in
each of --head-rounds rounds, the median of them.
Prints a table and writes benchmarks/results/<stem>_<cpu|gpu>.{md,json} (stem: tree_ab).
"""

from __future__ import annotations

import argparse
import importlib
import statistics
import sys
from pathlib import Path

import mlx.core as mx
import mlx.nn as nn

import muser_mlx

from common import GLIMMER, alternating_medians, fresh_ids, markdown, queued_seconds, random_q_bytes, save

QUEUED = 16


def import_tree(root: Path):
    """The ``muser_mlx`` package of the checkout at ``root``, imported beside this tree's (each
    module keeps its own submodules and kernel files; ``sys.modules`` is restored after)."""
    ours = {k: sys.modules.pop(k) for k in list(sys.modules) if k == "muser_mlx" or k.startswith("muser_mlx.")}
    sys.path.insert(0, str(root))
    try:
        other = importlib.import_module("muser_mlx")
    finally:
        sys.path.remove(str(root))
        for k in [k for k in sys.modules if k == "muser_mlx" or k.startswith("muser_mlx.")]:
            del sys.modules[k]
        sys.modules.update(ours)
    if Path(other.__file__).resolve().parent != (root / "muser_mlx").resolve():
        raise SystemExit(f"{root} holds no muser_mlx package (imported {other.__file__})")
    return other


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--against", required=True, type=Path, nargs="+", help="roots of the other checkouts")
    p.add_argument("--format", default="Q4_K")
    p.add_argument("--batches", nargs="*", type=int, default=[1, 4096, 32768])
    p.add_argument("--reps", type=int, default=400, help="one-per-evaluation repetitions; queued: a tenth")
    p.add_argument("--dims", type=int, default=GLIMMER["dims"])
    p.add_argument("--vocab", type=int, default=GLIMMER["vocab"])
    p.add_argument("--head-rows", nargs="*", type=int, default=[], help="also the LM head at these rows of x")
    p.add_argument("--head-rounds", type=int, default=3)
    p.add_argument("--stem", default="tree_ab", help="result file name, before _gpu / _cpu")
    args = p.parse_args()
    dims, vocab = args.dims, args.vocab
    others = {root.name: import_tree(root.resolve()) for root in args.against}
    if len(others) < len(args.against):
        raise SystemExit("the other checkouts' folders need distinct names (they name the rows)")
    data = mx.array(random_q_bytes(args.format, vocab, dims))
    dense = nn.Embedding(vocab, dims)
    dense.weight = (mx.random.normal((vocab, dims)) * 0.02).astype(mx.float16)
    mx.eval(data, dense.parameters())
    contenders = {"this tree": muser_mlx.Embedding.from_table(muser_mlx.Table.from_bytes(data, args.format, dims))}
    for name, other in others.items():
        # a revision before Embedding.from_table took the table in its constructor
        make = getattr(other.Embedding, "from_table", other.Embedding)
        contenders[name] = make(other.Table.from_bytes(data, args.format, dims))
    contenders["nn.Embedding f16"] = dense
    probe = mx.arange(0, vocab, 997)
    ours = contenders["this tree"](probe)
    for name in others:
        print(f"same output as {name}:", bool(mx.array_equal(ours, contenders[name](probe))), flush=True)
    rows, runs = [], []
    for n in args.batches:
        latency = alternating_medians({name: (fresh_ids(vocab, n), emb) for name, emb in contenders.items()}, args.reps)
        for name, emb in contenders.items():
            device, host = queued_seconds(fresh_ids(vocab, n), emb, max(args.reps // 10, 5), QUEUED)
            runs.append(dict(name=name, ids=n, seconds=latency[name], queued_seconds=device, host_seconds=host))
            rows.append([name, n, f"{latency[name] * 1e6:.1f}", f"{device * 1e6:.1f}", f"{host * 1e6:.1f}"])
            print(*rows[-1], sep="\t", flush=True)
    trees = {"this tree": muser_mlx, **others}
    tables = {name: tree.Table.from_bytes(data, args.format, dims) for name, tree in trees.items()}
    for n in args.head_rows:
        x = mx.random.normal((n, dims)).astype(mx.float16)
        ours = muser_mlx.as_linear(tables["this tree"], x)
        for name in others:
            print(
                f"same logits as {name} at {n} rows:",
                bool(mx.array_equal(ours, trees[name].as_linear(tables[name], x))),
            )
        times = {name: [] for name in trees}
        for _ in range(args.head_rounds):
            for name, tree in trees.items():
                head = lambda x, tree=tree, table=tables[name]: tree.as_linear(table, x)  # noqa: E731
                xs = lambda i, n=n: (mx.random.normal((n, dims), key=mx.random.key(i)).astype(mx.float16),)  # noqa: E731
                times[name].append(queued_seconds(xs, head, 5, 4)[0])
        for name in trees:
            device = statistics.median(times[name])
            runs.append(dict(name=name, head_rows=n, queued_seconds=device, rounds=times[name]))
            rows.append([f"{name} as_linear", n, "-", f"{device * 1e6:.1f}", "-"])
            print(*rows[-1], sep="\t", flush=True)
    md = markdown(["lookup", "ids or rows", "us, 1 per eval", "us, queued", "host us, queued"], rows)
    md += (
        f"\n\n{args.format}, float32 out (nn.Embedding: float16). The other trees: "
        + ", ".join(f"{name} ({other.__file__})" for name, other in others.items())
        + f". Queued: {QUEUED} and {2 * QUEUED} lookups per evaluation."
        + (
            f" as_linear: float16 x, 4 and 8 calls queued, median of {args.head_rounds} rounds (the trees alternating)."
            if args.head_rows
            else ""
        )
    )
    print(
        save(
            args.stem,
            f"muser_mlx trees A/B, dims {dims}, vocab {vocab}",
            md,
            {"against": [str(root) for root in args.against], "format": args.format, "runs": runs},
        )
    )


if __name__ == "__main__":
    main()
