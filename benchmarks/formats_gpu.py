"""Every format's gather and one-row head on the GPU, as fractions of the copy bandwidth measured in
the same run: the figures of the formats' acceptance (the Glimmer shape, dims 6,656 and vocab
202,048, by default).

Per format, a random table (common.random_q_bytes: finite scales) and, queued
(common.queued_seconds: the evaluation's fixed cost cancelled):
- the gather of 4,096 and 32,768 random ids (float32 out): (rows read + output written) / time;
- the head ``as_linear`` of one row of float16 x: table bytes / time;
and one id per evaluation against ``nn.Embedding``'s (float16 table), alternating
(common.alternating_medians). The copy bandwidth is measured before each format's timings; the
fractions are against the median of those measurements.

    python benchmarks/formats_gpu.py                         # every format
    python benchmarks/formats_gpu.py --formats Q4_K Q5_0 --vocab 50000
    python benchmarks/formats_gpu.py --small                 # dims 1,024, vocab 8,192 (also on a CPU)
"""

from __future__ import annotations

import argparse
import statistics

import mlx.core as mx
import mlx.nn as nn
import numpy as np

from muser_mlx import FORMATS, Embedding, Table, as_linear

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

QUEUED = 8
GATHER_IDS = (4096, 32768)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--formats", nargs="+", default=list(FORMATS))
    ap.add_argument("--dims", type=int, default=GLIMMER["dims"])
    ap.add_argument("--vocab", type=int, default=GLIMMER["vocab"])
    ap.add_argument("--small", action="store_true", help="dims 1,024, vocab 8,192")
    ap.add_argument("--reps", type=int, default=20)
    args = ap.parse_args()
    dims, vocab = (1024, 8192) if args.small else (args.dims, args.vocab)
    dense = nn.Embedding(vocab, dims)
    dense.weight = (mx.random.normal((vocab, dims)) * 0.02).astype(mx.float16)
    mx.eval(dense.parameters())
    x = mx.array(np.random.default_rng(1).standard_normal((1, dims)).astype(np.float16))
    copies, measured = [], {}
    for qtype in args.formats:
        table = Table.from_bytes(random_q_bytes(qtype, vocab, dims), qtype, dims)
        emb = Embedding.from_table(table)
        mx.eval(table.data)
        copies.append(copy_bandwidth())
        gather = {n: queued_seconds(fresh_ids(vocab, n), emb, args.reps, QUEUED)[0] for n in GATHER_IDS}
        head = queued_seconds(lambda i: (x,), lambda x, t=table: as_linear(t, x), args.reps, QUEUED)[0]
        one = alternating_medians(
            {"muser": (fresh_ids(vocab, 1), emb), "dense": (fresh_ids(vocab, 1), dense)}, 10 * args.reps
        )
        measured[qtype] = (table.row_bytes, table.nbytes, gather, head, one)
        print(qtype, {n: f"{t * 1e6:.1f} us" for n, t in gather.items()}, f"head {head * 1e6:.1f} us", flush=True)
        del emb, table
    copy = statistics.median(copies)
    rows, runs = [], []
    for qtype, (row_bytes, nbytes, gather, head, one) in measured.items():
        of_copy = {n: n * (row_bytes + 4 * dims) / t / copy for n, t in gather.items()}
        rows.append(
            [
                qtype,
                *(f"{100 * of_copy[n]:.0f}%" for n in GATHER_IDS),
                f"{100 * nbytes / head / copy:.0f}%",
                f"{one['muser'] * 1e6:.1f}",
                f"{one['dense'] * 1e6:.1f}",
            ]
        )
        runs.append(
            dict(
                name=qtype,
                gather_seconds=gather,
                gather_of_copy=of_copy,
                head_seconds=head,
                head_of_copy=nbytes / head / copy,
                one_id_seconds=one["muser"],
                one_id_dense_seconds=one["dense"],
            )
        )
        print(*rows[-1], sep="\t", flush=True)
    table_md = markdown(
        [
            "format",
            *(f"gather {n} ids, of copy" for n in GATHER_IDS),
            "head 1 row f16, of copy",
            "1 id us",
            "nn.Embedding 1 id us",
        ],
        rows,
    )
    table_md += (
        f"\n\ndims {dims}, vocab {vocab}; queued: {QUEUED} and {2 * QUEUED} calls per evaluation, the "
        f"difference / {QUEUED}; copy bandwidth {copy / 1e9:.0f} GB/s, the median of {len(copies)} measurements "
        f"({min(copies) / 1e9:.0f}-{max(copies) / 1e9:.0f}).\nCommand: `python benchmarks/formats_gpu.py`"
    )
    results = dict(dims=dims, vocab=vocab, copy_bytes_per_s=copy, copy_measurements=copies, runs=runs)
    print(save("formats", f"Every format's gather and head, dims {dims}, vocab {vocab}", table_md, results))


if __name__ == "__main__":
    main()
