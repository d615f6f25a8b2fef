"""kernels/tile_mma.h as NVRTC compiles it on a GPU with warpgroup multiplies, compiled here by nvcc
for sm_90a (no GPU needed): its warpgroup form must keep the matrix unit asynchronous (ptxas says
when it serializes wgmma: its note C7514), spill no registers and fit its threadgroup's registers
in an SM's 65,536 (the launch fails otherwise: MLX's kernels carry no launch bounds), both forms
for every format. Skipped where nvcc is not on PATH."""

import re
import shutil
import subprocess

import mlx.core as mx
import pytest

from muser_mlx import FORMATS
from muser_mlx.backends import device, head, tuning
from muser_mlx.formats.grids import shared_bytes as grid_shared_bytes

from conftest import zero_table

NVCC = shutil.which("nvcc")
pytestmark = pytest.mark.skipif(NVCC is None, reason="no nvcc (CUDA's compiler) on PATH")


def ptxas_report(launch, c_types: dict[str, str], tmp_path, kernel=device.CUDA.tile_mma_kernel, arch="sm_90a") -> str:
    """ptxas's resource report for ``launch`` of ``kernel`` (default kernels/tile_mma.h) with its
    inputs and outputs of C types ``c_types``, for ``arch``: the kernel as MLX compiles it
    (backends/source.py: DeviceKernel.translation_unit)."""
    source = tmp_path / f"{kernel.name}.cu"
    source.write_text(kernel.translation_unit(launch, c_types))
    done = subprocess.run(
        [NVCC, "-gencode", f"arch={arch.replace('sm', 'compute')},code={arch}", "-c", "-o", str(tmp_path / "k.o")]
        + ["-Xptxas", "-v", source],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return done.stdout + done.stderr


@pytest.mark.parametrize("qtype", sorted(FORMATS))
def test_tile_mma_compiles_for_sm90a_without_serialized_wgmma(qtype, tmp_path):
    """Both forms of the tiled matrix multiply (warps at 40 rows of x, warpgroups at 100 and 300:
    XROWS 128 and 256, 256 and 512 threads; and 300 rows of 640 or 768 values, whose steps are not
    whole chunks of them, so the 512-thread loop stays rolled) compile for sm_90a with no spilled registers, at most
    65,536 registers a threadgroup (a thread's in granules of 8), and the warpgroup form
    without ptxas's note that it serialized the wgmma instructions (as it does for the form that
    leaves a step's multiplies in flight through the barrier into the next step, docs/performance.md:
    this test fails on it); their static shared memory is what tile_mma_fits counts beside the
    buffers (grids.shared_bytes)."""
    fmt = FORMATS[qtype]
    short = 640 if 640 % fmt.block_values == 0 else 768  # 10 or 12 steps of 64: not whole chunks of them
    for rows, dims, warpgroup, dtype, c_type in (
        (40, 6656, 0, mx.float16, "__half"),
        (100, 6656, 1, mx.bfloat16, "__nv_bfloat16"),
        (300, 6656, 1, mx.float16, "__half"),
        (300, short, 1, mx.bfloat16, "__nv_bfloat16"),
    ):
        table = zero_table(qtype, 256, dims)
        launch = head.tile_mma_launch(table, mx.zeros((rows, dims), dtype), warpgroups=True)
        assert launch.define("WARPGROUP") == warpgroup
        report = ptxas_report(launch, {"table": "uint64_t", "x": c_type, "x_steps": c_type, "out": c_type}, tmp_path)
        assert "C7514" not in report and "serialized" not in report, (qtype, rows, dtype, report[-2000:])
        spills = re.findall(r"(\d+) bytes spill stores, (\d+) bytes spill loads", report)
        assert spills and all(s == ("0", "0") for s in spills), (qtype, rows, dtype, report[-2000:])
        static = [int(s) for s in re.findall(r"(\d+) bytes smem", report)] or [0]
        assert static == [grid_shared_bytes(qtype)], (qtype, rows, static)  # tile_mma_fits counts it
        registers = [int(r) for r in re.findall(r"Used (\d+) registers", report)]
        threads = launch.threadgroup[0]
        assert registers and all(-(-r // 8) * 8 * threads <= 65536 for r in registers), (
            qtype,
            rows,
            threads,
            registers,
        )


@pytest.mark.parametrize("kernel", ["bytedot", "mma"])
def test_launch_bounds_cap_the_registers(kernel, tmp_path):
    """A launch with launch bounds compiles to the registers that let that many threadgroups share
    an SM's 65,536: the one-row byte dot products of IQ3_S (tuning.BYTEDOT_MIN_THREADGROUPS) take
    more than 64 without them and at most 64 at 4 threadgroups of 256 threads; the matrix units of
    IQ3_XXS at 16 rows of x (MMA_MIN_THREADGROUPS, at 256 threads: MMA_THREADGROUP emptied) more
    than 128, and at most 128 at 2."""
    qtype, rows, bound, cap = ("IQ3_S", 1, 4, 64) if kernel == "bytedot" else ("IQ3_XXS", 16, 2, 128)
    table = zero_table(qtype, 256, 6656)
    x = mx.zeros((rows, 6656), mx.float16)
    counts = []
    for b in (0, bound):
        bounds = {"BYTEDOT_MIN_THREADGROUPS": {qtype: b}, "MMA_MIN_THREADGROUPS": {(4, 2): {qtype: b}}}
        with tuning.fixed(**bounds, MMA_THREADGROUP={}):
            launch = getattr(head, f"{kernel}_launch")(table, x)
        assert launch.min_threadgroups == b
        c_types = {"table": "uint64_t", "out": "__half"}
        c_types.update({"x": "uint32_t"} if kernel == "bytedot" else {"xh": "__half", "x_sums": "float"})
        report = ptxas_report(launch, c_types, tmp_path, getattr(device.CUDA, f"{kernel}_kernel"), "sm_90")
        counts.append(int(re.search(r"Used (\d+) registers", report).group(1)))
    assert launch.threadgroup == (256, 1, 1) and counts[0] > cap >= counts[1], counts
