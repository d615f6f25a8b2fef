"""Instructions per value of the CUDA LM head, counted in the machine code, no GPU needed: at one
row of float16 x kernels/bytedot.h, or with ``--rows`` 2-16 the matrix units (kernels/mma.h), as
backends/head.py launches them (their layouts and launch bounds by tuning) at Muse Glimmer's shape
(the table a lazy array of zeros, never made), compiled by nvcc for sm_90 as MLX's NVRTC compiles
the header for an H100 or H200 (backends/source.py: DeviceKernel.translation_unit), disassembled
by cuobjdump. Counted: the byte dot products' longest loop (a lane's step: VROWS table rows by RUNS
runs of 16 values), the matrix units' shortest loop that multiplies (a warp's block of each of its
16 VTILES table rows), with the local-memory loads and stores in it (registers spilled) and the
kernel's registers. A count, not a time; results/heads_one_row_gpu.md and the heads_by_format
records have the times, and docs/performance.md ("What bounds the heads", "Launch bounds") sets
them side by side.

Needs nvcc and cuobjdump on PATH (cuobjdump: CUDA's toolkit, or PyPI's nvidia-cuda-cuobjdump).

    python benchmarks/sass_counts.py                          # every quantized format
    python benchmarks/sass_counts.py --formats TQ1_0 Q4_K --stem sass_tq1_q4k
    python benchmarks/sass_counts.py --settings "BYTEDOT_RUNS=4;BYTEDOT_RUNS_BY_FORMAT={}" --stem sass_bytedot_runs4
    python benchmarks/sass_counts.py --rows 16 --stem sass_mma_16_rows       # the matrix units
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import mlx.core as mx

from muser_mlx import FORMATS
from muser_mlx.backends import device, head, tuning

from common import GLIMMER, markdown, save, tuning_constants, zero_table

# the inputs' and output's C types: the table's words, then x's run records (bytedot) or x and its
# run sums (mma), out
C_TYPES = {
    "bytedot": {"table": "uint64_t", "x": "uint32_t", "out": "__half"},
    "mma": {"table": "uint64_t", "xh": "__half", "x_sums": "float", "out": "__half"},
}
RECORDS = {"bytedot": "sass_bytedot_one_row", "mma": "sass_mma_16_rows"}  # every quantized format as tuned
LINE = re.compile(r"^\s+/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;")


def machine_code(kernel: str, launch, workdir: Path) -> tuple[list[tuple[int, str]], int]:
    """(address, instruction) of ``kernel`` compiled for ``launch``, and its registers a thread."""
    source = getattr(device.CUDA, f"{kernel}_kernel").translation_unit(launch, C_TYPES[kernel])
    (workdir / "k.cu").write_text(source)
    subprocess.run(
        ["nvcc", "-gencode", "arch=compute_90,code=sm_90", "-cubin", "-o", workdir / "k.cubin", workdir / "k.cu"],
        check=True,
        capture_output=True,
    )
    listing = subprocess.run(["cuobjdump", "-sass", workdir / "k.cubin"], check=True, capture_output=True, text=True)
    usage = subprocess.run(["cuobjdump", "-res-usage", workdir / "k.cubin"], check=True, capture_output=True, text=True)
    code = [(int(m.group(1), 16), m.group(2)) for m in map(LINE.match, listing.stdout.splitlines()) if m]
    return code, int(re.search(r"REG:(\d+)", usage.stdout).group(1))


def loops(code: list[tuple[int, str]]) -> list[list[str]]:
    """Every loop: the instructions from the target of a backward branch to the branch."""
    index = {address: i for i, (address, _) in enumerate(code)}
    return [
        [text for _, text in code[index[target] : i + 1]]
        for i, (address, text) in enumerate(code)
        if (m := re.search(r"\bBRA (0x[0-9a-f]+)", text)) and (target := int(m.group(1), 16)) < address
    ]


def counted_loop(kernel: str, code: list[tuple[int, str]]) -> list[str]:
    """The byte dot products' longest loop; the matrix units' shortest loop that multiplies."""
    if kernel == "bytedot":
        return max(loops(code), key=len)
    return min((loop for loop in loops(code) if any("HMMA" in text for text in loop)), key=len)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    every = sorted(q for q, f in FORMATS.items() if f.quantized)
    p.add_argument("--formats", nargs="+", default=every)
    p.add_argument(
        "--rows", type=int, default=1, help="rows of float16 x: 1 (byte dot products) or 2-16 (matrix units)"
    )
    p.add_argument("--stem", help="result file name, before _gpu / _cpu (default: the record of every format)")
    p.add_argument("--settings", default="", help='tuning constants, "NAME=VALUE;NAME=VALUE" (Python literals)')
    args = p.parse_args()
    if not 1 <= args.rows <= 16:
        p.error("--rows: 1 to 16")
    kernel = "bytedot" if args.rows == 1 else "mma"
    record = RECORDS[kernel] if args.rows in (1, 16) else None
    some = sorted(args.formats) != every
    if args.stem is None and (some or args.settings or record is None):
        p.error(
            "--formats, --settings or --rows other than 1 and 16 need --stem: the records are every format as tuned"
        )
    args.stem = args.stem or record
    missing = [tool for tool in ("nvcc", "cuobjdump") if shutil.which(tool) is None]
    if missing:
        raise SystemExit(f"needs {' and '.join(missing)} on PATH")
    dims, vocab = GLIMMER["dims"], GLIMMER["vocab"]
    products = {"bytedot": "IDP", "mma": "HMMA"}[kernel]  # dp4a, the matrix units' multiplies
    rows, runs = [], []
    with tempfile.TemporaryDirectory() as tmp, tuning.fixed(**tuning_constants(args.settings)):
        for qtype in args.formats:
            table = zero_table(qtype, vocab, dims)
            launch = getattr(head, f"{kernel}_launch")(table, mx.zeros((args.rows, dims), mx.float16))
            code, registers = machine_code(kernel, launch, Path(tmp))
            loop = counted_loop(kernel, code)
            if kernel == "bytedot":
                layout = f"{launch.define('VROWS')} x {launch.define('RUNS')}"
                values = launch.define("VROWS") * launch.define("RUNS") * 16  # a lane's values per step
            else:
                layout = f"{launch.define('VTILES')} x {launch.define('XTILES')}"
                # a warp's block of each of its rows, a lane's share
                values = 16 * launch.define("VTILES") * table.format.block_values // 32
            count = {kind: sum(kind in text for text in loop) for kind in (products, "LDG", "LDS", "LDL", "STL")}
            bound = launch.min_threadgroups or "-"
            runs.append(
                {"format": qtype, "layout": layout, "bound": launch.min_threadgroups, "registers": registers}
                | {"loop": len(loop), "values": values, **count}
            )
            rows.append(
                [qtype, layout, bound, registers, len(loop), f"{len(loop) / values:.2f}"]
                + [f"{count[k] / values:.2f}" for k in (products, "LDG", "LDS")]
                + [count["LDL"] + count["STL"]]
            )
            print(*rows[-1], sep="\t", flush=True)
    nvcc = subprocess.run(["nvcc", "--version"], capture_output=True, text=True).stdout.strip().splitlines()[-1]
    header = ["format", "layout", "threadgroups an SM", "registers", "loop", "per value"]
    header += [f"{'dp4a' if kernel == 'bytedot' else 'mma'} / value", "LDG / value", "LDS / value", "LDL + STL"]
    md = markdown(header, rows)
    if kernel == "bytedot":
        what = (
            f"kernels/bytedot.h at one row of float16 x, dims {dims:,}, vocab {vocab:,}: the SASS of its longest loop "
            "(a lane's step; layout VROWS table rows by RUNS runs of 16 values)"
        )
    else:
        what = (
            f"kernels/mma.h at {args.rows} rows of float16 x, dims {dims:,}, vocab {vocab:,}: the SASS of its shortest "
            "loop that multiplies (a warp's block of each of its 16 VTILES table rows, a lane's share of its values; "
            "layout VTILES x XTILES)"
        )
    md += (
        f"\n\n{what}, nvcc -gencode arch=compute_90,code=sm_90 ({nvcc}), cuobjdump -sass and -res-usage. "
        "Threadgroups an SM: the launch bounds (-: none, the compiler's choice of registers); LDL + STL: the "
        "local-memory loads and stores in the loop (spilled registers). A static count: a branch's both sides are "
        "counted.\n"
        + "Command: `python benchmarks/sass_counts.py"
        + (f" --rows {args.rows}" if args.rows != 1 else "")
        + (f" --formats {' '.join(args.formats)}" if some else "")
        + (f' --settings "{args.settings}"' if args.settings else "")
        + (f" --stem {args.stem}`" if args.stem != record else "`")
    )
    title = "one-row head" if kernel == "bytedot" else f"matrix units at {args.rows} rows"
    print(save(args.stem, f"Instructions per value of the {title} (SASS)", md, {"nvcc": nvcc, "runs": runs}))


if __name__ == "__main__":
    main()
