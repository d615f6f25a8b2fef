"""The CPU extension (muser_mlx._cpu) against the MLX-ops path and mlx.nn.Embedding (float32), side
by side in one run on the CPU: 1-id and 512-id lookups and the one-row LM head (``as_linear``,
float32 x), at the two tables of issue 28 (Gemma 3 270M's Q8_0 262,144 x 640, Q4_K 32,000 x
4,096); every format's 512-id lookup at one shape; and a float32 copy's bandwidth, against which
the head's rate of reading the table is stated. Random tables with trained-like scales
(common.random_q_bytes); fresh random ids each repetition; contenders alternate in blocks
(common.alternating_medians).

    python benchmarks/cpu_extension.py            # writes results/cpu_extension_cpu.{md,json}
    python benchmarks/cpu_extension.py --quick    # fewer repetitions
"""

from __future__ import annotations

import argparse

import mlx.core as mx
import mlx.nn as nn

from muser_mlx import FORMATS, Embedding, Table

from common import alternating_medians, copy_bandwidth, fresh_ids, markdown, random_q_bytes, save

TABLES = (("Q8_0", 262144, 640), ("Q4_K", 32000, 4096))
EVERY_FORMAT_SHAPE = (8192, 4096)  # vocab, dims of the every-format lookups


def contenders(qtype: str, vocab: int, dims: int) -> dict:
    """name -> (lookup module, head function of x)."""
    table = Table.from_bytes(random_q_bytes(qtype, vocab, dims), qtype, dims)
    dense = nn.Embedding(vocab, dims)
    dense.weight = Embedding.from_table(table, backend="ops")(mx.arange(vocab)).astype(mx.float32)  # the same values
    mx.eval(dense.weight)
    out = {"nn.Embedding float32": (dense, dense.as_linear)}
    for backend in ("cpu", "ops"):
        module = Embedding.from_table(table, backend=backend)
        out[f"muser_mlx {qtype} {backend}"] = (module, module.as_linear)
    return out, table.nbytes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    args = parser.parse_args()
    lookup_reps, head_reps = (40, 6) if args.quick else (200, 20)
    mx.set_default_device(mx.cpu)
    copy = copy_bandwidth(0.5, reps=4 if args.quick else 10)
    rows, data = [], {"copy_bytes_per_s": copy, "tables": {}}
    for qtype, vocab, dims in TABLES:
        calls, table_bytes = contenders(qtype, vocab, dims)
        results = {}
        for n in (1, 512):
            timed = alternating_medians(
                {k: (fresh_ids(vocab, n), m) for k, (m, _) in calls.items()}, lookup_reps, rounds=10
            )
            results[f"{n} ids"] = timed
        x = lambda i, dims=dims: (mx.random.normal((1, dims), key=mx.random.key(i)),)  # noqa: E731
        results["head"] = alternating_medians(
            {k: (x, h) for k, (_, h) in calls.items()}, head_reps, rounds=max(1, head_reps // 2), warmup=1
        )
        base = {k: v["nn.Embedding float32"] for k, v in results.items()}
        for name in calls:
            cells = [f"{results[k][name] * 1e6:.0f} ({results[k][name] / base[k]:.2f}x)" for k in ("1 ids", "512 ids")]
            head = results["head"][name]
            read = (table_bytes if name.startswith("muser") else vocab * dims * 4) / head
            cells.append(f"{head * 1e3:.1f} ({head / base['head']:.2f}x)")
            cells.append(f"{read / 1e9:.1f} ({read / copy:.0%})")
            rows.append([f"{qtype} {vocab:,} x {dims:,}", name, *cells])
        data["tables"][qtype] = {"vocab": vocab, "dims": dims, "table_bytes": table_bytes, "seconds": results}
        del calls

    vocab, dims = EVERY_FORMAT_SHAPE
    every = {}
    for qtype in sorted(FORMATS):
        table = Table.from_bytes(random_q_bytes(qtype, vocab, dims), qtype, dims)
        every[qtype] = (fresh_ids(vocab, 512), Embedding.from_table(table, backend="cpu"))
    formats = alternating_medians(every, lookup_reps, rounds=10)
    data["every_format_512_ids"] = {"vocab": vocab, "dims": dims, "seconds": formats}
    format_rows = [[q, f"{t * 1e6:.0f}", f"{t / formats['Q4_K']:.2f}x"] for q, t in formats.items()]

    header = [
        "table",
        "lookup",
        "1 id: us (x nn)",
        "512 ids: us (x nn)",
        "head, 1 row: ms (x nn)",
        "head reads table: GB/s (of copy)",
    ]
    text = (
        markdown(header, rows) + f"\n\nCopy bandwidth (float32 elementwise, read + write): {copy / 1e9:.1f} GB/s."
        "\nnn.Embedding holds the same values as float32; its head reads 4 B per value.\n\n"
        f"Every format through the extension, 512 ids, vocab {vocab:,} x dims {dims:,}, float32 out:\n\n"
        + markdown(["format", "us", "x Q4_K"], format_rows)
    )
    print(text)
    print(save("cpu_extension", "The CPU extension against MLX ops and nn.Embedding", text, data))


if __name__ == "__main__":
    main()
