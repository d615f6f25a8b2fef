"""Instructions per value of the CUDA LM head at one row, counted in the machine code, no GPU
needed: kernels/bytedot.h as backends/head.py launches it for one row of float16 x (its layout of
tuning.bytedot_layout) at Muse Glimmer's shape (the table a lazy array of zeros, never made),
compiled by nvcc for sm_90 as MLX's NVRTC compiles the header for an H100 or H200
(backends/source.py: DeviceKernel.translation_unit), disassembled by cuobjdump, and its longest
loop (a lane's step: VROWS table rows by RUNS runs of 16 values) counted. A count, not a time; results/heads_one_row_gpu.md has the times, and
docs/performance.md ("What bounds the heads") sets the two side by side.

Needs nvcc and cuobjdump on PATH (cuobjdump: CUDA's toolkit, or PyPI's nvidia-cuda-cuobjdump).

    python benchmarks/sass_counts.py                          # every quantized format
    python benchmarks/sass_counts.py --formats TQ1_0 Q4_K --stem sass_tq1_q4k
    python benchmarks/sass_counts.py --settings "BYTEDOT_RUNS=4;BYTEDOT_RUNS_BY_FORMAT={}" --stem sass_bytedot_runs4
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import mlx.core as mx

from muser_mlx import FORMATS, Table
from muser_mlx.backends import device, head, tuning

from common import GLIMMER, markdown, save, tuning_constants

C_TYPES = {"table": "uint64_t", "x": "uint32_t", "out": "__half"}  # the table's words, x's run records, out
RECORD = "sass_bytedot_one_row"  # the committed record: every quantized format as tuned
LINE = re.compile(r"^\s+/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;")


def machine_code(launch, workdir: Path) -> list[tuple[int, str]]:
    """(address, instruction) of kernels/bytedot.h compiled for ``launch``."""
    (workdir / "k.cu").write_text(device.CUDA.bytedot_kernel.translation_unit(launch, C_TYPES))
    subprocess.run(
        ["nvcc", "-gencode", "arch=compute_90,code=sm_90", "-cubin", "-o", workdir / "k.cubin", workdir / "k.cu"],
        check=True,
        capture_output=True,
    )
    listing = subprocess.run(["cuobjdump", "-sass", workdir / "k.cubin"], check=True, capture_output=True, text=True)
    return [(int(m.group(1), 16), m.group(2)) for m in map(LINE.match, listing.stdout.splitlines()) if m]


def longest_loop(code: list[tuple[int, str]]) -> list[str]:
    """The instructions from the target of the longest backward branch to the branch."""
    index = {address: i for i, (address, _) in enumerate(code)}
    loops = [
        code[index[target] : i + 1]
        for i, (address, text) in enumerate(code)
        if (m := re.search(r"\bBRA (0x[0-9a-f]+)", text)) and (target := int(m.group(1), 16)) < address
    ]
    return [text for _, text in max(loops, key=len)]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    every = sorted(q for q, f in FORMATS.items() if f.quantized)
    p.add_argument("--formats", nargs="+", default=every)
    p.add_argument("--stem", help=f"result file name, before _gpu / _cpu (default: {RECORD}, every format)")
    p.add_argument("--settings", default="", help='tuning constants, "NAME=VALUE;NAME=VALUE" (Python literals)')
    args = p.parse_args()
    some = sorted(args.formats) != every
    if args.stem is None and (some or args.settings):
        p.error(f"--formats or --settings need --stem: results/{RECORD}_cpu.md is every format as tuned")
    args.stem = args.stem or RECORD
    missing = [tool for tool in ("nvcc", "cuobjdump") if shutil.which(tool) is None]
    if missing:
        raise SystemExit(f"needs {' and '.join(missing)} on PATH")
    dims, vocab = GLIMMER["dims"], GLIMMER["vocab"]
    rows, runs = [], []
    with tempfile.TemporaryDirectory() as tmp, tuning.fixed(**tuning_constants(args.settings)):
        for qtype in args.formats:
            fmt = FORMATS[qtype]
            table = Table(mx.zeros((vocab, dims // fmt.block_values * fmt.block_bytes), mx.uint8), fmt, dims, vocab)
            launch = head.bytedot_launch(table, mx.zeros((1, dims), mx.float16))
            layout = {k: launch.define(k) for k in ("VROWS", "RUNS", "PLANES")}
            loop = longest_loop(machine_code(launch, Path(tmp)))
            values = layout["VROWS"] * layout["RUNS"] * 16  # a lane's values per step
            count = {kind: sum(kind in text for text in loop) for kind in ("IDP", "LDG", "LDS")}
            runs.append({"format": qtype, **layout, "loop": len(loop), "values": values, **count})
            rows.append(
                [qtype, f"{layout['VROWS']} x {layout['RUNS']}", len(loop), f"{len(loop) / values:.2f}"]
                + [f"{count[k] / values:.2f}" for k in ("IDP", "LDG", "LDS")]
            )
            print(*rows[-1], sep="\t", flush=True)
    nvcc = subprocess.run(["nvcc", "--version"], capture_output=True, text=True).stdout.strip().splitlines()[-1]
    md = markdown(["format", "VROWS x RUNS", "loop", "per value", "dp4a / value", "LDG / value", "LDS / value"], rows)
    md += (
        f"\n\nkernels/bytedot.h at one row of float16 x, dims {dims:,}, vocab {vocab:,}: the SASS of its longest "
        f"loop (a lane's step: VROWS table rows by RUNS runs of 16 values), nvcc -gencode arch=compute_90,code=sm_90 "
        f"({nvcc}), cuobjdump -sass. A static count: a branch's both sides are counted.\n"
        + "Command: `python benchmarks/sass_counts.py"
        + (f" --formats {' '.join(args.formats)}" if some else "")
        + (f' --settings "{args.settings}"' if args.settings else "")
        + (f" --stem {args.stem}`" if args.stem != RECORD else "`")
    )
    print(save(args.stem, "Instructions per value of the one-row head (SASS)", md, {"nvcc": nvcc, "runs": runs}))


if __name__ == "__main__":
    main()
