"""Every format's lookup on the portable path (MLX ops), side by side with Q4_K's on one shape.

Per format, a random table (benchmarks/common.py: random_q_bytes) of dims 6,656 (the Glimmer
width) and --vocab rows, and the median time of one lookup of --ids random ids (float32 out, a
fresh set of ids each repetition, one lookup per evaluation). The formats take turns in short
blocks, the order reversed every other round (common.alternating_medians), so that the
machine's drift falls on all of them alike; the table gives each time as a multiple of Q4_K's
from the same run.

    python benchmarks/formats_cpu.py                     # every format, 512 ids
    python benchmarks/formats_cpu.py --formats Q4_K Q5_0 --ids 64
"""

from __future__ import annotations

import argparse
import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import mlx.core as mx  # noqa: E402

from muser_mlx import FORMATS, Table, embedding  # noqa: E402

from common import GLIMMER, RESULTS, alternating_medians, fresh_ids, machine, markdown, random_q_bytes, save  # noqa: E402

LOAD = ", ".join(f"{v:.1f}" for v in os.getloadavg())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--formats", nargs="+", default=list(FORMATS))
    ap.add_argument("--ids", type=int, default=512)
    ap.add_argument("--dims", type=int, default=GLIMMER["dims"])
    ap.add_argument("--vocab", type=int, default=16384)
    ap.add_argument("--reps", type=int, default=40, help="timed lookups per format")
    ap.add_argument("--rounds", type=int, default=10)
    args = ap.parse_args()
    names = ["Q4_K", *(q for q in args.formats if q != "Q4_K")]
    tables = {q: Table.from_bytes(random_q_bytes(q, args.vocab, args.dims), q, args.dims) for q in names}
    mx.eval([t.data for t in tables.values()])
    calls = {
        q: (fresh_ids(args.vocab, args.ids), lambda ids, t=t: embedding(t, ids, backend="ops"))
        for q, t in tables.items()
    }
    seconds = alternating_medians(calls, args.reps, args.rounds, warmup=2)
    base = seconds["Q4_K"]
    rows, runs = [], []
    for q in names:
        t, row_bytes = seconds[q], tables[q].row_bytes
        rows.append([q, row_bytes, f"{t * 1e3:.2f}", f"{t / base:.2f}"])
        runs.append(dict(name=q, row_bytes=row_bytes, seconds=t, of_q4_k=t / base))
        print(*rows[-1], sep="\t", flush=True)
    table_md = markdown(["format", "row bytes", f"ms per lookup of {args.ids} ids", "x Q4_K"], rows)
    table_md += (
        f"\n\nbackend ops (MLX ops on the CPU), float32 out, dims {args.dims}, vocab {args.vocab}; median of "
        f"{args.reps} lookups per format in {args.rounds} alternating rounds.\n"
        "Command: `python benchmarks/formats_cpu.py`\n"
        f"Load average (1, 5, 15 min) at the start: {LOAD}; the CPU is shared"
    )
    results = dict(ids=args.ids, dims=args.dims, vocab=args.vocab, runs=runs)
    md = save("formats_lookup", f"Lookup of {args.ids} ids by format, against Q4_K", table_md, results)
    fig, ax = plt.subplots(figsize=(9, 4))
    ax.bar(names, [seconds[q] / base for q in names])
    ax.axhline(2, color="gray", linestyle="--", label="2x Q4_K")
    ax.set(ylabel="time / Q4_K's", title=f"{args.ids} ids, dims {args.dims}: {machine()}")
    ax.title.set_fontsize(8)
    ax.tick_params(axis="x", labelrotation=60, labelsize=8)
    ax.legend(fontsize=8)
    fig.savefig(RESULTS / f"{md.stem}.png", dpi=120, bbox_inches="tight")
    print(md)


if __name__ == "__main__":
    main()
