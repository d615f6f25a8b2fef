"""Lookup time and effective bandwidth at the Glimmer shape (dims 6,656, vocab 202,048).

muser_mlx (float32 out, or --dtype; each format asked for) next to mlx.nn.Embedding (float16 table) and
mlx.nn.QuantizedEmbedding (4-bit), fresh random ids each repetition, plus the device's copy
bandwidth measured in the same run. Effective bandwidth = (rows read + output written) / time.
Two timings per batch: one lookup per evaluation (latency: building the lookup's graph, MLX's
fixed cost of an evaluation and its sync, 30-60 us on an H100/H200; the contenders alternate in
blocks, common.alternating_medians), and lookups queued in one
evaluation (common.queued_seconds: device time per lookup from QUEUED and 2 * QUEUED queued
lookups, the evaluation's fixed cost cancelled; the throughput a model sees when the lookup is
queued with the layers after it; and, apart, the host time per lookup spent building its graph).
The copy bandwidth is measured before the lookups and again before each contender's queued
timings; the ratios are against the median of those measurements (one measurement moves by
10% and more between runs on an H200), and the table gives their range.

    python benchmarks/gather.py                       # GPU: Q4_K, all batches
    python benchmarks/gather.py --formats Q4_K Q6_K   # more formats
    python benchmarks/gather.py --batches 1 64 512    # e.g. on a CPU
    python benchmarks/gather.py --formats Q4_K F16 --dtype float16
    python benchmarks/gather.py --formats Q4_K IQ2_XXS IQ2_XS IQ2_S IQ3_XXS IQ3_S IQ1_S IQ1_M \
        --batches 512 --no-baselines --reps 10 --stem gather_iq     # the grid formats beside Q4_K
"""

from __future__ import annotations

import argparse
import statistics

import mlx.core as mx
import mlx.nn as nn

from muser_mlx import Embedding, Table

from common import (
    GLIMMER,
    alternating_medians,
    copy_bandwidth,
    fresh_ids,
    markdown,
    queued_seconds,
    random_q_bytes,
    save,
)

QUEUED = 16


def single_tokens(vocab: int, tokens: int = 64):
    """``make_args`` for ``tokens`` separate one-id lookups evaluated as one graph (a decode step's worth)."""
    return lambda i: tuple(mx.random.randint(0, vocab, (1,), key=mx.random.key(1000 * i + k)) for k in range(tokens))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--formats", nargs="+", default=["Q4_K"])
    ap.add_argument("--batches", nargs="+", type=int, default=[1, 64, 512, 4096, 32768])
    ap.add_argument(
        "--reps", type=int, default=30, help="queued repetitions; one per evaluation takes 10 times as many"
    )
    ap.add_argument("--dims", type=int, default=GLIMMER["dims"])
    ap.add_argument("--vocab", type=int, default=GLIMMER["vocab"])
    ap.add_argument("--no-baselines", action="store_true", help="skip mlx.nn.Embedding / QuantizedEmbedding")
    ap.add_argument("--dtype", default="float32", choices=["float32", "float16", "bfloat16"], help="muser_mlx's output")
    ap.add_argument("--stem", default="gather", help="writes benchmarks/results/<stem>_<cpu|gpu>.{md,json}")
    args = ap.parse_args()
    dims, vocab = args.dims, args.vocab

    copies = [copy_bandwidth()]
    print(f"copy bandwidth: {copies[0] / 1e9:.0f} GB/s")
    contenders = {}
    dtype = getattr(mx, args.dtype)
    for qtype in args.formats:
        table = Table.from_bytes(random_q_bytes(qtype, vocab, dims), qtype, dims)
        contenders[f"muser_mlx {qtype}"] = (Embedding.from_table(table, dtype), table.row_bytes, dtype.size)
    if not args.no_baselines:
        dense = nn.Embedding(vocab, dims)
        dense.weight = (mx.random.normal((vocab, dims)) * 0.02).astype(mx.float16)
        quantized = nn.QuantizedEmbedding.from_embedding(dense, group_size=64, bits=4)
        mx.eval(dense.parameters(), quantized.parameters())
        contenders["nn.Embedding f16"] = (dense, 2 * dims, 2)
        contenders["nn.QuantizedEmbedding 4-bit"] = (quantized, dims // 2 + 2 * 2 * dims // 64, 2)

    latency = {
        n: alternating_medians({name: (fresh_ids(vocab, n), c[0]) for name, c in contenders.items()}, 10 * args.reps)
        for n in args.batches
    }
    graphs = alternating_medians(
        {name: (single_tokens(vocab), lambda *ids, emb=c[0]: [emb(t) for t in ids]) for name, c in contenders.items()},
        20,
    )
    queued = {}
    for name, (emb, _, _) in contenders.items():
        copies.append(copy_bandwidth())
        for n in args.batches:
            queued[name, n] = queued_seconds(fresh_ids(vocab, n), emb, args.reps, QUEUED)
            print(name, n, f"queued {queued[name, n][0] * 1e6:.1f} us", flush=True)
    copy = statistics.median(copies)
    rows, results = (
        [],
        {"copy_bytes_per_s": copy, "copy_measurements": copies, "dims": dims, "vocab": vocab, "runs": []},
    )
    for name, (_, row_bytes, out_bytes) in contenders.items():
        for n in args.batches:
            s, (q, host) = latency[n][name], queued[name, n]
            bw, qbw = (n * (row_bytes + dims * out_bytes) / t for t in (s, q))
            results["runs"].append(
                dict(
                    name=name,
                    ids=n,
                    seconds=s,
                    bytes_per_s=bw,
                    queued_seconds=q,
                    queued_bytes_per_s=qbw,
                    host_seconds=host,
                )
            )
            rows.append(
                [
                    name,
                    n,
                    f"{s * 1e6:.1f}",
                    f"{bw / 1e9:.0f} ({100 * bw / copy:.0f}%)",
                    f"{q * 1e6:.1f}",
                    f"{qbw / 1e9:.0f} ({100 * qbw / copy:.0f}%)",
                    f"{host * 1e6:.1f}",
                ]
            )
            print(*rows[-1], sep="\t", flush=True)
        s = graphs[name]
        results["runs"].append(dict(name=name, ids="64 x 1 in one graph", seconds=s))
        rows.append([name, "64 x 1 in one graph", f"{s * 1e6:.1f}", "", "", "", ""])
        print(*rows[-1], sep="\t", flush=True)
    table_md = markdown(
        ["lookup", "ids", "us, 1 per eval", "GB/s (of copy)", "us, queued", "GB/s (of copy)", "host us"], rows
    )
    table_md += (
        f"\n\nCopy bandwidth (1 GiB float32 elementwise, read + write, queued): {copy / 1e9:.0f} GB/s, "
        f"the median of {len(copies)} measurements in this run ({min(copies) / 1e9:.0f}-{max(copies) / 1e9:.0f}). "
        f"Queued: {QUEUED} and {2 * QUEUED} lookups' graphs built, each set evaluated by one mx.eval; "
        "device time per lookup = the difference / "
        f"{QUEUED}, and host us = graph building per lookup (outside that time)."
    )
    table_md += f"\nmuser_mlx writes {args.dtype} ({dtype.size} B/value); the MLX layers write float16 (2 B/value)."
    print(save(args.stem, f"Embedding lookup, dims {dims}, vocab {vocab}", table_md, results))


if __name__ == "__main__":
    main()
