"""Opening real GGUF files: Gemma 3 270M's token_embd (Q8_0 [640, 262144], 170 MiB) loaded by
``Embedding.from_gguf`` against copying the same bytes out of a memory map, side by side, each
in a fresh process; peak RSS growth; ``muser-mlx inspect``; a file of a million empty strings.

    PYTHONPATH=$PWD python benchmarks/open_gguf.py [--reps 5] [--skip-gguf-py]

Ways of getting the table into MLX memory, each timed from just before the call until the MLX
array is evaluated (imports done, the file in the page cache):
- ``from_gguf``: ``Embedding.from_gguf(path)``: the package's reader (one open, the header walked
  once, the bytes read with ``readinto`` straight into the evaluated MLX array);
- ``mmap copy``: ``mx.array(np.memmap(...))`` of the table's bytes, its offset known beforehand
  (no header read at all): the floor the figure is measured against;
- ``numpy, then mx.array``: the same reader, the bytes read into a NumPy array and copied into
  MLX (the alternative to reading into MLX's memory);
- ``gguf-py GGUFReader``: ``GGUFReader(path)`` and ``mx.array`` of its tensor's data, once (the
  package's path before its own reader: twice per ``from_gguf``);
and the header alone: ``open_gguf: header only``, ``open_gguf + array(tokens)`` (the 262,144
tokenizer strings read as a list). Peak RSS growth is the process's high-water mark (reset
first, Linux ``clear_refs``) less its RSS before the call. Figures demanded: from_gguf at most 3x the mmap copy; peak growth at most the
table's bytes + 25% + 64 MiB; inspect under 1 s; the strings file under 1 s and 100 MB.
Results: ``benchmarks/results/open_gguf_cpu.md`` and ``.json``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import machine, markdown, save

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

PROBE = r"""
import json, sys, time
import mlx.core as mx
import numpy as np
from muser_mlx import Embedding, Table
from muser_mlx.gguf import open_gguf

def status(key):
    for line in open("/proc/self/status"):
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024

how, path, offset, rows, row_bytes = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:])
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")  # resets VmHWM to the current RSS
before = status("VmRSS")
t0 = time.perf_counter()
if how == "from_gguf":
    data = Embedding.from_gguf(path).weight
elif how == "mmap copy":
    data = mx.array(np.memmap(path, np.uint8, "r", offset, (rows, row_bytes)))
elif how == "numpy, then mx.array":
    with open_gguf(path) as f:
        data = mx.array(f.read("token_embd.weight"))
elif how == "gguf-py GGUFReader":
    import gguf
    t = next(t for t in gguf.GGUFReader(path).tensors if t.name == "token_embd.weight")
    data = mx.array(np.asarray(t.data).view(np.uint8).reshape(rows, row_bytes))
elif how == "open_gguf: header only":
    with open_gguf(path) as f:
        data = mx.array(len(f.tensors))
elif how == "open_gguf + array(tokens)":
    with open_gguf(path) as f:
        data = mx.array(len(f.array("tokenizer.ggml.tokens")))
elif how == "strings":
    data = Table.from_gguf(path).data
mx.eval(data)
seconds = time.perf_counter() - t0
print(json.dumps(dict(seconds=seconds, peak_growth=status("VmHWM") - before, nbytes=data.nbytes)))
"""


def probe(how: str, path: Path, offset: int = 0, rows: int = 0, row_bytes: int = 0) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", PROBE, how, str(path), str(offset), str(rows), str(row_bytes)],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def wall(cmd: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, capture_output=True, check=True)
    return time.perf_counter() - t0


def mib(n: float) -> str:
    return f"{n / 2**20:,.1f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=5, help="fresh processes per way (gguf-py: one)")
    ap.add_argument("--skip-gguf-py", action="store_true", help="leave out gguf-py's GGUFReader (15-90 s a run)")
    args = ap.parse_args()

    from muser_mlx.gguf import open_gguf

    from conftest import gemma_file
    from gguf_files import strings_file

    gemma = gemma_file()
    with open_gguf(gemma) as f:
        t = f.tensors["token_embd.weight"]
    place = (t.offset, t.rows, t.row_bytes)
    gemma.read_bytes()  # into the page cache, for every way alike

    ways = ["from_gguf", "mmap copy", "numpy, then mx.array"]
    runs = {w: [] for w in ways}
    for r in range(args.reps):  # interleaved, the order reversed every other round: drift falls on all alike
        for w in ways[:: 1 if r % 2 == 0 else -1]:
            runs[w].append(probe(w, gemma, *place))
            print(
                f"{w:<22} {runs[w][-1]['seconds'] * 1e3:8.1f} ms  peak +{mib(runs[w][-1]['peak_growth'])} MiB",
                flush=True,
            )
    for w in ("open_gguf: header only", "open_gguf + array(tokens)"):
        runs[w] = [probe(w, gemma) for _ in range(args.reps)]
    if not args.skip_gguf_py:
        runs["gguf-py GGUFReader"] = [probe("gguf-py GGUFReader", gemma, *place)]
    inspect = [wall([sys.executable, "-m", "muser_mlx", "inspect", str(gemma)]) for _ in range(args.reps)]
    imports = [wall([sys.executable, "-c", "import muser_mlx.cli"]) for _ in range(args.reps)]

    with tempfile.TemporaryDirectory() as folder:
        strings_path = Path(folder) / "strings.gguf"
        strings_file(strings_path, 10**6)
        strings_bytes = strings_path.stat().st_size
        strings = [probe("strings", strings_path) for _ in range(args.reps)]
        if not args.skip_gguf_py:
            strings_gguf_py = wall([sys.executable, "-c", f"import gguf; gguf.GGUFReader({str(strings_path)!r})"])

    med = {w: statistics.median(x["seconds"] for x in v) for w, v in runs.items()}
    peak = {w: max(x["peak_growth"] for x in v) for w, v in runs.items()}
    bound = t.nbytes * 1.25 + 64 * 2**20
    rows = [[w, f"{med[w] * 1e3:,.0f}", f"{med[w] / med['mmap copy']:.2f}x", mib(peak[w]), len(runs[w])] for w in runs]
    table_md = markdown(
        ["Gemma 3 270M (token_embd: 170 MiB)", "median ms", "vs mmap copy", "peak RSS growth, MiB (max)", "processes"],
        rows,
    )
    ratio = med["from_gguf"] / med["mmap copy"]
    s_med, s_peak = statistics.median(x["seconds"] for x in strings), max(x["peak_growth"] for x in strings)
    figures = [
        ["from_gguf / mmap copy", f"{ratio:.2f}x", "at most 3x", "yes" if ratio <= 3 else "NO"],
        [
            "from_gguf peak RSS growth",
            f"{mib(peak['from_gguf'])} MiB",
            f"at most {mib(bound)} MiB (table + 25% + 64 MiB)",
            "yes" if peak["from_gguf"] <= bound else "NO",
        ],
        [
            "`muser-mlx inspect` (a process: Python, imports, header)",
            f"{statistics.median(inspect) * 1e3:,.0f} ms",
            "under 1 s",
            "yes" if statistics.median(inspect) < 1 else "NO",
        ],
        ["  of which `import muser_mlx.cli` alone", f"{statistics.median(imports) * 1e3:,.0f} ms", "", ""],
        [
            f"1 M empty strings ({mib(strings_bytes)} MiB file): Table.from_gguf",
            f"{s_med * 1e3:,.0f} ms",
            "under 1 s",
            "yes" if s_med < 1 else "NO",
        ],
        ["  its peak RSS growth", f"{mib(s_peak)} MiB", "under 100 MB", "yes" if s_peak < 100e6 else "NO"],
    ]
    if not args.skip_gguf_py:
        figures.append(["  gguf-py GGUFReader of it (a process)", f"{strings_gguf_py * 1e3:,.0f} ms", "", ""])
    figures_md = markdown(["figure", "measured", "demanded", "holds"], figures)
    command = "PYTHONPATH=$PWD python benchmarks/open_gguf.py" + (" --skip-gguf-py" if args.skip_gguf_py else "")
    body = f"`{command}` (--reps {args.reps}; page cache warm)\n\n{table_md}\n\n{figures_md}"
    print(body)
    print(
        save(
            "open_gguf",
            "Opening Gemma 3 270M's token_embd, inspect, a million strings",
            body,
            {
                "machine": machine(),
                "reps": args.reps,
                "table_bytes": t.nbytes,
                "runs": runs,
                "inspect_s": inspect,
                "import_s": imports,
                "strings": strings,
                "strings_file_bytes": strings_bytes,
                **({} if args.skip_gguf_py else {"strings_gguf_py_s": strings_gguf_py}),
            },
        )
    )


if __name__ == "__main__":
    main()
