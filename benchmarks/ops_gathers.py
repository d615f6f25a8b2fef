"""The MLX-ops grid lookup (formats/iquants.py): ways to fetch one 8-value grid point per group, at
a 512-id lookup of an IQ2 table (dims 6,656: 425,984 groups) from a 32,768-point table, timed
alternating in one process (the medians of --reps evaluations each):
- ``take`` of float32 rows [points, 8];
- ``take`` of one uint64 word per point (the values as int8 bytes);
- ``take_along_axis`` of those words along a 1-D table, the decoders' choice.

    python benchmarks/ops_gathers.py [--reps 30]

Writes benchmarks/results/ops_gathers_<cpu|gpu>.{md,json}.
"""

from __future__ import annotations

import argparse
import statistics
import time

import mlx.core as mx
import numpy as np

from common import markdown, save

GROUPS, POINTS = 512 * 6656 // 8, 32768


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--reps", type=int, default=30)
    args = p.parse_args()
    rng = np.random.default_rng(0)
    levels = rng.integers(-43, 44, (POINTS, 8)).astype(np.int8)
    rows, words = mx.array(levels.astype(np.float32)), mx.array(levels.view("<u8").reshape(-1))
    keys = mx.array(rng.integers(0, POINTS, GROUPS).astype(np.uint16))
    mx.eval(rows, words, keys)
    calls = {
        "take, float32 rows": lambda: mx.take(rows, keys, axis=0),
        "take, uint64 words": lambda: mx.take(words, keys),
        "take_along_axis, uint64 words": lambda: mx.take_along_axis(words, keys, axis=0),
    }
    assert mx.array_equal(calls["take, uint64 words"](), calls["take_along_axis, uint64 words"]()).item()
    times = {name: [] for name in calls}
    for r in range(args.reps):
        for name in list(calls)[:: 1 if r % 2 == 0 else -1]:
            t0 = time.perf_counter()
            mx.eval(calls[name]())
            times[name].append(time.perf_counter() - t0)
    medians = {name: statistics.median(t) for name, t in times.items()}
    fastest = min(medians.values())
    table = markdown(
        ["lookup", "ms", "x fastest"], [[n, f"{s * 1e3:.2f}", f"{s / fastest:.1f}"] for n, s in medians.items()]
    )
    table += f"\n\n{GROUPS:,} keys (uint16) into {POINTS:,} points; median of {args.reps} alternating evaluations."
    print(
        save("ops_gathers", "Grid lookups in MLX ops", table, {"groups": GROUPS, "points": POINTS, "seconds": medians})
    )


if __name__ == "__main__":
    main()
