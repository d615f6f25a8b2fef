"""Resident memory of a loaded table against its byte size (measured, in a fresh process).

Writes a Q4_K GGUF of the given shape (default: the Glimmer table, 6,656 x 202,048, 756 MB),
then in a new Python process: RSS before, after ``Table.from_gguf`` and after a lookup,
MLX's active and peak memory, and whether the memory map is released.

    python benchmarks/memory.py [--dims 6656 --vocab 202048]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from muser_mlx import Table, save_gguf

from common import GLIMMER, markdown, random_q_bytes, save

PROBE = r"""
import gc, json, sys
import mlx.core as mx
from muser_mlx import Embedding

def rss():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    import resource
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss

base = rss()
emb = Embedding.from_gguf(sys.argv[1])
mx.eval(emb.weight)
gc.collect()
loaded = rss()
mx.eval(emb(mx.arange(64)))
looked = rss()
print(json.dumps(dict(table_bytes=emb.table.nbytes, base=base, loaded=loaded, after_lookup=looked,
                      mlx_active=mx.get_active_memory(), mlx_peak=mx.get_peak_memory())))
"""


def mib(n: int) -> str:
    return f"{n / 2**20:,.1f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dims", type=int, default=GLIMMER["dims"])
    ap.add_argument("--vocab", type=int, default=GLIMMER["vocab"])
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        data = random_q_bytes("Q4_K", args.vocab, args.dims)
        path = save_gguf(Path(folder) / "m.gguf", {"token_embd.weight": Table.from_bytes(data, "Q4_K", args.dims)})
        del data
        out = subprocess.run([sys.executable, "-c", PROBE, str(path)], capture_output=True, text=True, check=True)
    m = json.loads(out.stdout.strip().splitlines()[-1])
    rows = [
        ["table bytes (Q4_K)", mib(m["table_bytes"])],
        ["RSS growth: load", mib(m["loaded"] - m["base"])],
        ["RSS growth: load + 64-id lookup", mib(m["after_lookup"] - m["base"])],
        ["MLX active memory", mib(m["mlx_active"])],
        ["MLX peak memory", mib(m["mlx_peak"])],
        ["float16 table would be", mib(2 * args.dims * args.vocab)],
        ["float32 table would be", mib(4 * args.dims * args.vocab)],
    ]
    table_md = markdown(["", "MiB"], rows)
    print(table_md)
    print(
        save(
            "memory",
            f"Resident memory of a loaded Q4_K table, dims {args.dims}, vocab {args.vocab}",
            table_md,
            {"dims": args.dims, "vocab": args.vocab, **m},
        )
    )


if __name__ == "__main__":
    main()
