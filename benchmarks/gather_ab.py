"""A/B of the gather kernel: this tree's kernel source against a git revision's, alternating in one
process (so both see the same machine state), queued timings at the Glimmer shape.

    python benchmarks/gather_ab.py --against e01bd59 --formats Q6_K Q8_0 Q4_0 Q4_K

Each round builds the revision's header (its prelude_cuda.h and formats.h, this tree's gather.h),
checks that both give the same rows, and times 16 queued lookups of 4,096 and 32,768 ids
(common.queued_seconds), against the copy bandwidth of the same run. CUDA only.
"""

from __future__ import annotations

import argparse
import subprocess

import mlx.core as mx

from common import GLIMMER, copy_bandwidth, fresh_ids, queued_seconds, random_q_bytes
from muser_mlx import Embedding, Table
from muser_mlx.backends import kernel as K


def header_at(revision: str) -> str:
    def source(name: str) -> str:
        return subprocess.run(["git", "show", f"{revision}:kernels/{name}"], check=True, capture_output=True,
                              text=True).stdout

    return K.kernel_header((source("prelude_cuda.h"), source("formats.h"), K.kernel_source("gather.h")))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--against", required=True, help="git revision of the other kernel source")
    p.add_argument("--formats", nargs="+", default=["Q6_K", "Q8_0", "Q4_0", "Q4_K"])
    p.add_argument("--rounds", type=int, default=2)
    args = p.parse_args()
    dims, vocab = GLIMMER["dims"], GLIMMER["vocab"]
    copy = copy_bandwidth()
    print(f"copy {copy / 1e9:.0f} GB/s", flush=True)
    kernel = K.CUDA.gather_kernel
    variants = {"new": kernel.header, "old": header_at(args.against)}
    for qtype in args.formats:
        table = Table.from_bytes(random_q_bytes(qtype, vocab, dims), qtype, dims)
        mx.eval(table.data)
        ref = None
        for _ in range(args.rounds):
            for name, header in variants.items():
                kernel.header, kernel._kernels = header, {}
                emb = Embedding(table)
                out = emb(mx.arange(0, vocab, 997))
                ref = out if ref is None else ref
                line = [f"{qtype} {name} same={bool(mx.array_equal(out, ref))}"]
                for n in (4096, 32768):
                    q = queued_seconds(fresh_ids(vocab, n), emb, 20, 16)[0]
                    line.append(f"n={n}: {q * 1e6:.1f} us ({100 * n * (table.row_bytes + 4 * dims) / q / copy:.0f}%)")
                print(" | ".join(line), flush=True)
    kernel.header, kernel._kernels = variants["new"], {}


if __name__ == "__main__":
    main()
