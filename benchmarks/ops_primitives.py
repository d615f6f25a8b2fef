"""The MLX-ops choices in muser_mlx/formats/fields.py, each against its alternative in one run:

- ``lookup`` (a 16-entry table at 3.4 M nibbles, the values of 512 rows of 6,656): ``mx.take``
  against ``mx.take_along_axis`` over a flat view;
- ``bit_fields`` (4-bit fields, 3.4 M values): one shift broadcast over the fields against each
  field shifted apart and joined, for runs of 8 (NVFP4), 16 (Q4_0 ... IQ4_NL) and 32 bytes (Q4_K);
- Q5_0's and Q5_1's high bits (3.4 M): ``bit_fields(qh, 1, 1)`` against ``little_endian_bits``.

    python benchmarks/ops_primitives.py
"""

from __future__ import annotations

import os

import mlx.core as mx
import numpy as np

from muser_mlx.formats.fields import bit_fields, little_endian_bits, lookup

from common import markdown, median_seconds, save

VALUES = 512 * 6656


def broadcast_shifts(packed: mx.array, run: int) -> mx.array:
    n, runs = packed.shape[0], packed.shape[1] // run
    shifts = mx.array([0, 4], mx.uint8).reshape(1, 1, 2, 1)
    return ((packed.reshape(n, runs, 1, run) >> shifts) & 15).reshape(n, -1)


def fields_apart(packed: mx.array, run: int) -> mx.array:
    n, runs = packed.shape[0], packed.shape[1] // run
    grouped = packed.reshape(n, runs, 1, run)
    return mx.concatenate([grouped & 15, grouped >> 4], axis=2).reshape(n, -1)


LOAD = ", ".join(f"{v:.1f}" for v in os.getloadavg())


def main() -> None:
    rng = np.random.default_rng(0)
    table = mx.array(rng.standard_normal(16).astype(np.float32))
    nibbles = mx.array(rng.integers(0, 16, VALUES, dtype=np.uint8))
    mx.eval(table, nibbles)
    cases = [
        (
            "lookup, 16 entries",
            "mx.take",
            lambda: mx.take(table, nibbles),
            "take_along_axis (lookup)",
            lambda: lookup(table, nibbles),
        )
    ]
    for run in (8, 16, 32):
        packed = mx.array(rng.integers(0, 256, (VALUES // (2 * run), run), dtype=np.uint8))
        mx.eval(packed)
        cases.append(
            (
                f"bit_fields, runs of {run} bytes",
                "broadcast shift",
                lambda p=packed, r=run: broadcast_shifts(p, r),
                "fields apart, joined",
                lambda p=packed, r=run: fields_apart(p, r),
            )
        )
    qh = mx.array(rng.integers(0, 256, (VALUES // 32, 4), dtype=np.uint8))
    mx.eval(qh)
    cases.append(
        (
            "bits of 32-bit qh",
            "bit_fields(qh, 1, 1)",
            lambda: bit_fields(qh, 1, 1),
            "little_endian_bits",
            lambda: little_endian_bits(qh),
        )
    )
    rows, runs = [], []
    for name, a_name, a, b_name, b in cases:
        ta, tb = (median_seconds(lambda i: (), lambda f=f: f(), 20) for f in (a, b))
        rows.append([name, a_name, f"{ta * 1e3:.2f}", b_name, f"{tb * 1e3:.2f}", f"{ta / tb:.2f}"])
        runs.append(dict(case=name, a=a_name, a_seconds=ta, b=b_name, b_seconds=tb))
        print(*rows[-1], sep="\t", flush=True)
    table_md = markdown(["case", "A", "ms", "B", "ms", "A / B"], rows)
    table_md += (
        f"\n\n{VALUES:,} values each; median of 20 evaluations.\nCommand: `python benchmarks/ops_primitives.py`\n"
        f"Load average (1, 5, 15 min) at the start: {LOAD}; the CPU is shared"
    )
    print(save("ops_primitives", "MLX-ops primitives of the format decoders", table_md, dict(values=VALUES, runs=runs)))


if __name__ == "__main__":
    main()
