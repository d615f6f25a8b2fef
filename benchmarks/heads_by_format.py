"""The LM head of every format, against the copy bandwidth of the same run.

Per format: ``muser_mlx.as_linear`` of one row of x (``--rows``; float16 by default) over a random table at
Muse Glimmer's shape (dims 6,656, vocab 202,048: mlx-lm's ``muse_glimmer``), queued in one
evaluation (common.queued_seconds: device time per call), the kernel that
``backends.head.choose`` picks for it, and the table's bytes over that time as a share of the
copy bandwidth (a float32 elementwise copy, read + write, measured before every format).

    python benchmarks/heads_by_format.py                       # every format
    python benchmarks/heads_by_format.py --formats Q4_K Q5_0 --stem heads_some   # some
    python benchmarks/heads_by_format.py --formats Q5_0 --rows 16 --settings HEAD_THREADGROUP=64

Prints a table and writes benchmarks/results/heads_by_format_<cpu|gpu>.{md,json}.
"""

from __future__ import annotations

import argparse
import statistics

import mlx.core as mx
import numpy as np

from muser_mlx import FORMATS, Table, as_linear, backends
from muser_mlx.backends import head, tuning

from common import GLIMMER, copy_bandwidth, markdown, queued_seconds, random_q_bytes, save, tuning_constants

QUEUED = 8


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--formats", nargs="+", default=sorted(FORMATS))
    p.add_argument("--reps", type=int, default=10)
    p.add_argument("--rows", type=int, default=1, help="rows of x")
    p.add_argument("--rounds", type=int, default=1, help="rounds, the settings alternating in each; median of them")
    p.add_argument("--dtype", default="float16", choices=["float16", "bfloat16", "float32"], help="x's dtype")
    p.add_argument("--dims", type=int, default=GLIMMER["dims"])
    p.add_argument("--vocab", type=int, default=GLIMMER["vocab"])
    p.add_argument(
        "--settings",
        nargs="*",
        default=[],
        metavar="NAME=VALUE[;NAME=VALUE]",
        help="also time each format under these tuning constants (Python literals), e.g. HEAD_THREADGROUP=64",
    )
    p.add_argument("--stem", default="heads_by_format", help="result file name, before _gpu / _cpu")
    args = p.parse_args()
    dtype, backend = getattr(mx, args.dtype), backends.select("auto")
    x = mx.array(np.random.default_rng(1).standard_normal((args.rows, args.dims)).astype(np.float32)).astype(dtype)

    rows = []
    results = {
        "dims": args.dims,
        "vocab": args.vocab,
        "x_dtype": args.dtype,
        "rows": args.rows,
        "backend": backend,
        "runs": [],
    }
    settings = ["", *args.settings]
    for qtype in args.formats:
        table = Table.from_bytes(random_q_bytes(qtype, args.vocab, args.dims), qtype, args.dims)
        mx.eval(table.data)
        copy = copy_bandwidth(1.0)
        rounds: dict[str, list[float]] = {setting: [] for setting in settings}
        for _ in range(args.rounds):  # the settings alternate within each round
            for setting in settings:
                with tuning.fixed(**tuning_constants(setting)):
                    call = lambda x, t=table: as_linear(t, x)  # noqa: E731
                    rounds[setting].append(queued_seconds(lambda i: (x,), call, args.reps, QUEUED)[0])
        for setting in settings:
            with tuning.fixed(**tuning_constants(setting)):
                kernel = head.choose(table, args.rows, dtype, backend)
            seconds = statistics.median(rounds[setting])
            share = table.nbytes / seconds / copy
            results["runs"].append(
                {
                    "format": qtype,
                    "kernel": kernel,
                    "setting": setting,
                    "table_bytes": table.nbytes,
                    "seconds": seconds,
                    "rounds": rounds[setting],
                    "copy_bytes_per_s": copy,
                }
            )
            rows.append(
                [
                    qtype,
                    kernel,
                    setting or "as tuned",
                    f"{table.nbytes / 2**20:.0f}",
                    f"{1e3 * seconds:.3f}",
                    f"{table.nbytes / seconds / 1e9:.0f}",
                    f"{copy / 1e9:.0f}",
                    f"{100 * share:.0f}%",
                ]
            )
            print(*rows[-1], sep="\t", flush=True)

    table_md = markdown(
        ["format", "kernel", "tuning", "table MiB", "ms per call", "GB/s", "copy GB/s", "of copy"], rows
    )
    table_md += (
        f"\n\n{args.rows} row(s) of {args.dtype} x, backend `{backend}`; device time per call from {QUEUED} and "
        f"{2 * QUEUED} queued calls, median of {args.reps}, then of {args.rounds} round(s), the settings alternating in each."
    )
    print(
        save(
            args.stem,
            f"Head by format, {args.rows} row(s) of x, dims {args.dims:,} vocab {args.vocab:,}",
            table_md,
            results,
        )
    )


if __name__ == "__main__":
    main()
