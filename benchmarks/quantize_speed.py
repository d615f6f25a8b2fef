"""Time muser_mlx.quantize (Q4_K) on a random normal*0.02 float32 table.

    python benchmarks/quantize_speed.py [--rows 202048] [--cols 6656]

The table is generated and quantized in slices of --chunk rows so memory stays bounded
(only quantize() is timed). Prints a markdown table and writes it, with the machine,
date and NumPy version, to benchmarks/results/quantize_speed.md. Nothing is extrapolated:
the figures are for the rows actually run.
"""

import argparse
import datetime
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout, uninstalled
from muser_mlx.quantize import quantize  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "quantize_speed.md"


def cpu_name() -> str:
    """platform.processor(), or /proc/cpuinfo's model name where that is empty (Linux)."""
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
        model = next((line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")), "")
    except OSError:
        model = ""
    return platform.processor() or model or platform.machine()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=202_048)
    ap.add_argument("--cols", type=int, default=6_656)
    ap.add_argument("--chunk", type=int, default=8_192, help="rows generated and quantized per slice")
    ap.add_argument("--note", default="", help="extra line for the results file")
    args = ap.parse_args()

    rng = np.random.default_rng(0)
    seconds, out_bytes = 0.0, 0
    for r0 in range(0, args.rows, args.chunk):
        n = min(args.chunk, args.rows - r0)
        x = rng.standard_normal((n, args.cols), dtype=np.float32)
        x *= np.float32(0.02)
        t0 = time.perf_counter()
        out_bytes += quantize(x, "Q4_K", progress=False).nbytes
        seconds += time.perf_counter() - t0
        print(f"{r0 + n}/{args.rows} rows, {seconds:.1f} s", file=sys.stderr, flush=True)

    mb = args.rows * args.cols * 4 / 1e6
    table = "\n".join(
        [
            "| qtype | rows | cols | seconds | MB/s (float32 in) | rows/s |",
            "| --- | ---: | ---: | ---: | ---: | ---: |",
            f"| Q4_K | {args.rows:,} | {args.cols:,} | {seconds:.1f} | {mb / seconds:.1f} | {args.rows / seconds:,.0f} |",
        ]
    )
    print(table)
    lines = [
        "# Q4_K quantization speed (muser_mlx.quantize, NumPy, CPU)",
        "",
        table,
        "",
        f"- machine: {cpu_name()} ({platform.machine()}), os.cpu_count() = {os.cpu_count()}"
        f" (quantize runs one NumPy thread per CPU)",
        f"- date: {datetime.date.today().isoformat()}; Python {platform.python_version()}, NumPy {np.__version__}",
        f"- input: standard normal * 0.02, float32, generated in slices of {args.chunk} rows (not timed);"
        f" output {out_bytes / 1e6:.1f} MB of Q4_K blocks",
        f"- command: `python benchmarks/quantize_speed.py --rows {args.rows} --cols {args.cols}`",
    ]
    if args.note:
        lines.append(f"- {args.note}")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text("\n".join(lines) + "\n")
    print(f"wrote {RESULTS}", file=sys.stderr)


if __name__ == "__main__":
    main()
