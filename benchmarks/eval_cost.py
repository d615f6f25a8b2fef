"""The cost of one lookup of one id per evaluation (build, mx.eval, sync), next to mlx.nn.Embedding
(float16 table) and one-block custom kernels that do nothing: bare; with 16 KB of comment lines as
their header, inline or #included from a file (MLX's CUDA backend spends time per evaluation on a
kernel's source length, so the package's CUDA kernels #include their files); and one shaped like
the gather (the table's words as an input, the gather's grid, a [1, dims] float32 output). At the
Glimmer shape (Q4_K), with the ids made three ways: by mx.random (a GPU graph evaluated before
each lookup, as in gather.py), from NumPy, and one array used every time. Timed in alternating
blocks (common.alternating_medians), twice.

    python benchmarks/eval_cost.py
    MLX_USE_CUDA_GRAPHS=0 python benchmarks/eval_cost.py    # MLX's CUDA graphs off
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import mlx.core as mx
import mlx.nn as nn
import numpy as np

from muser_mlx import Embedding, Table
from muser_mlx.backends import bind, select, tuning
from muser_mlx.backends.gather import table_words

from common import GLIMMER, alternating_medians, fresh_ids, random_q_bytes

REPS = 200


def main() -> None:
    dims, vocab = GLIMMER["dims"], GLIMMER["vocab"]
    print("MLX_USE_CUDA_GRAPHS", os.environ.get("MLX_USE_CUDA_GRAPHS"), flush=True)
    table = Table.from_bytes(random_q_bytes("Q4_K", vocab, dims), "Q4_K", dims)
    dense = nn.Embedding(vocab, dims)
    dense.weight = (mx.random.normal((vocab, dims)) * 0.02).astype(mx.float16)
    mx.eval(table.data, dense.parameters())
    ours = Embedding.from_table(table)
    mx.eval(ours(mx.array([1])))

    def nothing(name: str, header: str = "", table=None):
        """A kernel whose threads write ids[0] (reading nothing of ``table``): 32 of 32 floats,
        or with ``table`` 1,024 of the gather's [1, dims] output, on its grid."""
        inputs = ["ids"] if table is None else ["table", "ids"]
        kernel = mx.fast.cuda_kernel(
            name=f"nothing_{name}",
            input_names=inputs,
            output_names=["out"],
            header=header,
            source="out[blockIdx.x * blockDim.x + threadIdx.x] = float(ids[0]);",
        )
        if table is None:
            return lambda ids: kernel(
                inputs=[ids], grid=(32, 1, 1), threadgroup=(32, 1, 1), output_shapes=[(32,)], output_dtypes=[mx.float32]
            )[0]
        groups = dims // tuning.gather_values(dims)
        return lambda ids: kernel(
            inputs=[table, ids],
            grid=(groups, 1, 1),
            threadgroup=(tuning.THREADGROUP, 1, 1),
            output_shapes=[(1, dims)],
            output_dtypes=[mx.float32],
        )[0]

    comments = ("// " + "x" * 60 + "\n") * 256  # 16 KB
    included = Path(tempfile.mkdtemp()) / "comments.h"
    included.write_text(comments)
    calls = {
        "ours": ours,
        "bound gather": bind(
            table, mx.float32, select("auto", table)
        ),  # the kernel call without Embedding's Python layers
        "nn.Embedding": dense,
        "nothing kernel": nothing("bare"),
        "+ 16 KB header": nothing("inline", comments),
        "+ 16 KB #included": nothing("included", f'#include "{included}"\n'),
        "nothing, gather-shaped": nothing("shaped", table=table_words(table.data)),
    }
    rng = np.random.default_rng(0)
    same = mx.array([12345], dtype=mx.int32)
    mx.eval(same)
    sources = {
        "mx.random ids": fresh_ids(vocab, 1),
        "numpy ids": lambda i: (mx.array(rng.integers(0, vocab, 1).astype(np.int32)),),
        "same ids": lambda i: (same,),
    }
    for _ in range(2):
        for source, make_args in sources.items():
            medians = alternating_medians({name: (make_args, fn) for name, fn in calls.items()}, REPS)
            print(f"{source:14s}", " | ".join(f"{name}: {s * 1e6:.1f}" for name, s in medians.items()), flush=True)


if __name__ == "__main__":
    main()
