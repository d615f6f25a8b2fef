"""The matrix units' operands of x, what a call builds in MLX operations before its kernel:

- ``head.mma_operands`` (kernels/mma.h, --rows rows) as ``head.mma`` makes them for a format whose
  runs have offsets (x's run sums) and for one without (no sums), against the same with x padded
  and its sums made every time whatever the format;
- ``head.x_steps`` (kernels/tile_mma.h's warpgroups, --steps-rows rows) with its chunks' order
  made once and x padded only where short, against that order computed in MLX operations each
  call and x always padded.

Queued calls (common.queued_seconds: device time per call, the host's graph building apart), the
alternatives alternating in each of --rounds rounds, the median of them; x float16 at --dims values.

    python benchmarks/x_operands.py
    python benchmarks/x_operands.py --dims 640 --rows 16 --steps-rows 512 --rounds 9

Prints a table and writes benchmarks/results/x_operands_<cpu|gpu>.{md,json}.
"""

from __future__ import annotations

import argparse
import statistics
import sys

import mlx.core as mx

from muser_mlx.backends import head, tuning

from common import markdown, queued_seconds, save, zero_table

QUEUED, FRESH = 8, 64


def padded_with_sums(x: mx.array, rows: int) -> tuple[mx.array, mx.array]:
    """The alternative: x padded to ``rows`` even where it has them, and its run sums made for
    every format."""
    n, dims = x.shape
    x = mx.pad(x, [(0, rows - n), (0, 0)])
    return x[None], x.astype(mx.float32).reshape(-1, dims // 16, 16).sum(axis=-1).T


def computed_order(xrows: int) -> mx.array:
    """The alternative's order of a row's chunks, c ^ (q / 2 % 4), from ``mx.arange`` each call."""
    q = mx.arange(xrows).reshape(1, xrows, 1, 1, 1)
    return mx.arange(head.TILE_K // 8).reshape(1, 1, 1, -1, 1) ^ (q // 2 % 4)


def steps_as_before(x: mx.array, xrows: int) -> mx.array:
    """The alternative: ``head.x_steps`` with :func:`computed_order` in place of its order made
    once, and x padded by no rows where its rows are whole tiles (a copy, as it was)."""
    dims = x.shape[-1]
    n = x.size // dims
    if n % xrows == 0:
        x = mx.pad(x.reshape(n, dims), [(0, 0), (0, 0)])
    made, head._chunk_order = head._chunk_order, computed_order
    try:
        return head.x_steps(x, xrows)
    finally:
        head._chunk_order = made


def timed(calls: dict, xs: list[mx.array], arg: int, reps: int, rounds: int) -> dict[str, float]:
    """{name: us per call}: each of ``calls`` on fresh x of ``xs`` and ``arg``, the median of
    ``rounds`` rounds alternating."""
    times = {name: [] for name in calls}
    for _ in range(rounds):
        for name, call in calls.items():
            device, _ = queued_seconds(
                lambda j, xs=xs: (xs[j % FRESH],), lambda x, c=call, a=arg: c(x, a), reps, QUEUED
            )
            times[name].append(device)
    return {name: statistics.median(t) * 1e6 for name, t in times.items()}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--dims", nargs="+", type=int, default=[640, 6656])
    p.add_argument("--rows", nargs="+", type=int, default=[4, 12, 16])
    p.add_argument("--steps-rows", nargs="+", type=int, default=[128, 512])
    p.add_argument("--reps", type=int, default=21)
    p.add_argument("--rounds", type=int, default=5)
    args = p.parse_args()
    calls = {
        "offsets": lambda x, rows: head.mma_operands(x, rows, True),
        "no offsets": lambda x, rows: head.mma_operands(x, rows, False),
        "padded, with sums": padded_with_sums,
    }
    rows_md, runs = [], []
    for dims in args.dims:
        for n in args.rows:
            launch = head.mma_launch(zero_table("Q4_0", 64, dims), mx.zeros((n, dims), mx.float16))
            rows = launch.output_shape[0]  # whole passes
            xs = [mx.random.normal((n, dims)).astype(mx.float16) for _ in range(FRESH)]
            mx.eval(xs)
            us = timed(calls, xs, rows, args.reps, args.rounds)
            base = us["padded, with sums"]
            ratios = (f"{us[k] / base:.2f}" for k in ("offsets", "no offsets"))
            rows_md.append([f"{n} x {dims:,}", rows, *(f"{us[k]:.1f}" for k in calls), *ratios])
            runs.append(dict(dims=dims, rows=n, launch_rows=rows, us=us))
            print(*rows_md[-1], sep="\t", flush=True)
    steps = {"x_steps": head.x_steps, "as before": steps_as_before}
    steps_md = []
    for dims in args.dims:
        for n in args.steps_rows:
            xrows = tuning.tile_mma_xrows(n, True)
            xs = [mx.random.normal((n, dims)).astype(mx.float16) for _ in range(FRESH)]
            mx.eval(xs)
            us = timed(steps, xs, xrows, args.reps, args.rounds)
            steps_md.append(
                [
                    f"{n} x {dims:,}",
                    xrows,
                    *(f"{us[k]:.1f}" for k in steps),
                    f"{us['x_steps'] / us['as before']:.2f}",
                ]
            )
            runs.append(dict(dims=dims, rows=n, xrows=xrows, us=us))
            print(*steps_md[-1], sep="\t", flush=True)
    table_md = markdown(
        ["x", "launch rows", *(f"{k} us" for k in calls), "offsets / padded", "no offsets / padded"], rows_md
    )
    table_md += "\n\n" + markdown(["x", "XROWS", *(f"{k} us" for k in steps), "x_steps / before"], steps_md)
    table_md += (
        f"\n\nx float16; device us per call, {QUEUED} and {2 * QUEUED} calls queued, median of {args.reps}, "
        f"then of {args.rounds} rounds alternating.\nCommand: `python benchmarks/x_operands.py{''.join(' ' + a for a in sys.argv[1:])}`"
    )
    print(save("x_operands", "The matrix units' operands of x", table_md, dict(runs=runs)))


if __name__ == "__main__":
    main()
