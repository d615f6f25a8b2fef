"""Four calls of kernels/tile_mma.h (``backends.head.HEADS["tile_mma"]``) on a random table, for a
profiler to catch one: Q4_K at Muse Glimmer's shape (202,048 x 6,656), or Q8_0 at Gemma 3 270M's
(262,144 x 640), ROWS rows of float16 x. Nsight Compute's counters per SASS instruction
(benchmarks/results/ncu_tile_wgmma_Q4_K_512_source_gpu.txt summarizes such a run):

    ncu --clock-control none -k regex:tile_mma --launch-skip 2 --launch-count 1 --set full \\
        --import-source yes -o rep python3 benchmarks/profile_tile_mma.py Q4_K 512
    ncu -i rep.ncu-rep --page source --csv --print-source sass > source.csv
"""

import sys

import mlx.core as mx
import numpy as np

from muser_mlx import Table
from muser_mlx.backends import head

from common import GLIMMER, random_q_bytes

qtype, rows = sys.argv[1], int(sys.argv[2])
vocab, dims = (262144, 640) if qtype == "Q8_0" else (GLIMMER["vocab"], GLIMMER["dims"])
x = mx.array(np.random.default_rng(1).standard_normal((rows, dims)).astype(np.float32)).astype(mx.float16)
table = Table.from_bytes(random_q_bytes(qtype, vocab, dims), qtype, dims)
mx.eval(table.data)
for _ in range(4):
    mx.eval(head.HEADS["tile_mma"](table, x, "cuda"))
