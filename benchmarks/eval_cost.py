"""The cost of one lookup of one id per evaluation (build, mx.eval, sync), next to MLX's own
lookups and a custom kernel that does nothing, measured alternately in one process: ROUNDS
rounds, each timing every contender over 50 fresh ids (median); reported: the median of the
rounds' medians, and each round's. Glimmer shape, Q4_K.

    python benchmarks/eval_cost.py
"""

from __future__ import annotations

import statistics

import mlx.core as mx
import mlx.nn as nn

from common import GLIMMER, fresh_ids, median_seconds, random_q_bytes
from muser_mlx import Embedding, Table

ROUNDS = 6


def main() -> None:
    dims, vocab = GLIMMER["dims"], GLIMMER["vocab"]
    table = Table.from_bytes(random_q_bytes("Q4_K", vocab, dims), "Q4_K", dims)
    small = Table.from_bytes(random_q_bytes("Q4_K", 64, dims), "Q4_K", dims)
    dense = nn.Embedding(vocab, dims)
    dense.weight = (mx.random.normal((vocab, dims)) * 0.02).astype(mx.float16)
    f32 = nn.Embedding(vocab, dims)
    f32.weight = mx.random.normal((vocab, dims)) * 0.02
    mx.eval(table.data, small.data, dense.parameters(), f32.parameters())
    nothing = mx.fast.cuda_kernel(name="nothing", input_names=["ids"], output_names=["out"],
                                  source="out[threadIdx.x] = float(ids[0]);")

    def trivial(ids):
        return nothing(inputs=[ids], grid=(32, 1, 1), threadgroup=(32, 1, 1), output_shapes=[(32,)],
                       output_dtypes=[mx.float32])[0]

    contenders = {"ours": Embedding(table), "ours small table": Embedding(small), "nn.Embedding f16": dense,
                  "nn.Embedding f32": f32, "trivial custom kernel": trivial,
                  "take raw bytes": lambda ids: mx.take(table.data, ids, axis=0),
                  "ours f16 out": Embedding(table, dtype=mx.float16)}
    times = {name: [] for name in contenders}
    for _ in range(ROUNDS):
        for name, fn in contenders.items():
            times[name].append(median_seconds(fresh_ids(64 if "small" in name else vocab, 1), fn, 50))
    for name, t in times.items():
        print(f"1 id single eval {name}: median {statistics.median(t) * 1e6:.1f} us "
              f"(runs {' '.join(f'{x * 1e6:.0f}' for x in t)})", flush=True)


if __name__ == "__main__":
    main()
