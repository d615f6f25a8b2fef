"""Compile the package's kernel source with the host C++ compiler and run it over every thread.

Two builds of the same ``kernels/`` source, for each kernel (gather, matvec):
- ``cpu_gather`` / ``cpu_matvec``: prelude_cpu.h + formats.h + the kernel's template, the shared
  source in its CPU dialect;
- ``metal_gather`` / ``metal_matvec``: the complete Metal source that ``mx.fast.metal_kernel``
  generates from the package's registration (captured from MLX itself), compiled against a
  Metal-language shim.
Warps (matvec's cross-lane sums) run as 32 concurrent threads (kernels/cpu_runtime.h).
"""

from __future__ import annotations

import ctypes
import hashlib
import re
import shutil
import subprocess
import tempfile
from functools import lru_cache
from pathlib import Path

import mlx.core as mx
import numpy as np

from muser_mlx.backends.kernel import (
    METAL,
    WARP,
    gather_template,
    kernel_source,
    matvec_template,
    rows_per_pass,
    values_per_thread,
)

KERNELS = Path(kernel_source.__globals__["files"]("muser_mlx.kernels"))
SHIM = Path(__file__).parent / "metal_on_cpu"
CXX = shutil.which("g++") or shutil.which("clang++")
BUILD = Path(tempfile.gettempdir()) / "muser_mlx_kernel_harness"

C_TYPES = {  # mx dtype -> (C++ type in the CPU dialect, NumPy dtype of the bytes)
    mx.float32: ("float", np.float32),
    mx.float16: ("_Float16", np.float16),
    mx.bfloat16: ("muser_bfloat16", np.uint16),
    mx.int8: ("int8_t", np.int8),
    mx.uint8: ("uint8_t", np.uint8),
    mx.int16: ("int16_t", np.int16),
    mx.uint16: ("uint16_t", np.uint16),
    mx.int32: ("int32_t", np.int32),
    mx.uint32: ("uint32_t", np.uint32),
    mx.int64: ("int64_t", np.int64),
    mx.uint64: ("uint64_t", np.uint64),
}


def _compile(source: str, include: list[Path]) -> ctypes.CDLL:
    BUILD.mkdir(exist_ok=True)
    digest = hashlib.sha256(source.encode())
    for header in sorted(f for p in include for f in p.iterdir() if f.is_file()):  # edits rebuild
        digest.update(header.read_bytes())
    key = digest.hexdigest()[:20]
    lib = BUILD / f"{key}.so"
    if not lib.exists():
        src = BUILD / f"{key}.cpp"
        src.write_text(source)
        flags = ["-std=c++17", "-O1", "-shared", "-fPIC", "-pthread", "-Wno-attributes"]
        cmd = [CXX, *flags, *[f"-I{p}" for p in include], str(src), "-o", str(lib) + ".tmp"]
        subprocess.run(cmd, check=True, capture_output=True, text=True)
        Path(str(lib) + ".tmp").rename(lib)
    return ctypes.CDLL(str(lib))


def _run(lib: ctypes.CDLL, table, ids: np.ndarray, dtype: mx.Dtype, grid: int | None) -> mx.array:
    data = np.ascontiguousarray(np.array(table.data))
    ids = np.ascontiguousarray(ids)
    out = np.empty((ids.size, table.dims), C_TYPES[dtype][1])
    threads = grid or ids.size * (table.dims // values_per_thread(table.dims))
    lib.run(
        data.ctypes.data_as(ctypes.c_void_p),
        ids.ctypes.data_as(ctypes.c_void_p),
        ctypes.c_uint32(ids.size),
        out.ctypes.data_as(ctypes.c_void_p),
        ctypes.c_uint32(threads),
    )
    result = mx.array(out)
    return mx.view(result, mx.bfloat16) if dtype == mx.bfloat16 else result


def cpu_gather(table, ids: np.ndarray, dtype=mx.float32, grid: int | None = None) -> mx.array:
    """The shared source through prelude_cpu.h; thread t of ``grid`` (default: one per group)."""
    id_type, out_type = C_TYPES[mx.array(ids).dtype][0], C_TYPES[dtype][0]
    args = f"muser::Format<{table.format.ggml_type}>, {table.dims}, {table.vocab}, {values_per_thread(table.dims)}"
    driver = f"""
extern "C" void run(const uint8_t* table, const {id_type}* ids, uint32_t n, {out_type}* out, uint32_t grid) {{
  for (uint32_t t = 0; t < grid; ++t) muser::gather<{args}>(table, ids, n, out, t, grid);
}}
"""
    source = "".join(f'#include "{f}"\n' for f in ("prelude_cpu.h", "formats.h", "gather.h")) + driver
    return _run(_compile(source, [KERNELS]), table, ids, dtype, grid)


def generated_metal_source(kernel, inputs: list[mx.array], template, output_shape, dtype: mx.Dtype, capfd) -> str:
    """The full Metal source MLX builds for this call of ``kernel`` (a DeviceKernel), printed by
    MLX while tracing an export (MLX records metal_kernel calls without a Metal device only then)."""

    def call(*args):
        return kernel.kernel(
            inputs=list(args),
            template=template,
            grid=(1, 1, 1),
            threadgroup=(1, 1, 1),
            output_shapes=[output_shape],
            output_dtypes=[dtype],
            verbose=True,
        )[0]

    capfd.readouterr()
    with tempfile.TemporaryDirectory() as d:
        mx.export_function(str(Path(d) / f"{kernel.name}.mlxfn"), call, *inputs)
    printed = capfd.readouterr().out
    return printed.split("```\n", 1)[1].rsplit("```", 1)[0]


@lru_cache(maxsize=None)
def _metal_lib(source: str) -> ctypes.CDLL:
    instance = re.search(r"decltype\((\w+<[^>]*>)\)", source).group(1)
    driver = f"""
template <typename A, typename B, typename C, typename D>
void drive(void (*kernel)(A, B, C, D, uint3, uint3), const void* table, const void* ids, uint32_t n,
           void* out, uint32_t grid) {{
  int shape[1] = {{int(n)}};
  for (uint32_t t = 0; t < grid; ++t)
    kernel((A)table, (B)ids, (C)shape, (D)out, uint3{{t, 0, 0}}, uint3{{grid, 1, 1}});
}}
extern "C" void run(const void* table, const void* ids, uint32_t n, void* out, uint32_t grid) {{
  drive(&{instance}, table, ids, n, out, grid);
}}
"""
    return _compile(source + driver, [SHIM, KERNELS])


def metal_gather(table, ids: np.ndarray, dtype, capfd, grid: int | None = None) -> mx.array:
    """Execute the generated Metal source on the CPU, thread by thread."""
    i = mx.array(ids)
    template = gather_template(table, i, dtype)
    source = generated_metal_source(METAL.gather_kernel, [table.data, i], template, (i.shape[0], table.dims), dtype, capfd)
    return _run(_metal_lib(source), table, ids, dtype, grid)


# matvec: x [n, dims] -> logits [n, vocab] in x's dtype; run(...) returns 0 if a warp diverged.
_MATVEC_RUN = """
extern "C" int run(const void* table, const void* x, uint32_t n, void* out, uint32_t grid) {{
  return muser_cpu::run_warps(grid, [&](uint32_t t) {{ {call}; }}) ? 1 : 0;
}}
"""


def _run_matvec(lib: ctypes.CDLL, table, x: mx.array, warps: int | None) -> mx.array:
    n = x.shape[0]
    x_bytes = np.ascontiguousarray(np.array(mx.view(x, mx.uint16) if x.dtype == mx.bfloat16 else x))
    data = np.ascontiguousarray(np.array(table.data))
    out = np.empty((n, table.vocab), C_TYPES[x.dtype][1])
    threads = (warps or table.vocab) * WARP
    ok = lib.run(
        data.ctypes.data_as(ctypes.c_void_p),
        x_bytes.ctypes.data_as(ctypes.c_void_p),
        ctypes.c_uint32(n),
        out.ctypes.data_as(ctypes.c_void_p),
        ctypes.c_uint32(threads),
    )
    assert ok == 1, "a warp's lanes diverged: they did not all reach the same muser_sum calls"
    result = mx.array(out)
    return mx.view(result, mx.bfloat16) if x.dtype == mx.bfloat16 else result


def cpu_matvec(table, x: mx.array, warps: int | None = None) -> mx.array:
    """The shared matvec source through prelude_cpu.h, ``warps`` warps of 32 threads (default:
    one per vocab row; fewer grid-stride)."""
    x_type = C_TYPES[x.dtype][0]
    args = (
        f"muser::Format<{table.format.ggml_type}>, {table.dims}, {table.vocab}, "
        f"{values_per_thread(table.dims)}, {rows_per_pass(x.shape[0])}"
    )
    call = f"muser::matvec<{args}>((const uint8_t*)table, (const {x_type}*)x, n, ({x_type}*)out, t, grid)"
    source = "".join(f'#include "{f}"\n' for f in ("prelude_cpu.h", "formats.h", "matvec.h"))
    return _run_matvec(_compile(source + _MATVEC_RUN.format(call=call), [KERNELS]), table, x, warps)


def metal_matvec(table, x: mx.array, capfd, warps: int | None = None) -> mx.array:
    """Execute the generated Metal matvec source on the CPU, warps as 32 concurrent threads."""
    source = generated_metal_source(
        METAL.matvec_kernel, [table.data, x], matvec_template(table, x), (x.shape[0], table.vocab), x.dtype, capfd
    )
    instance = re.search(r"decltype\((\w+<[^>]*>)\)", source).group(1)
    call = f"drive(&{instance}, table, x, n, out, t, grid)"
    driver = """
template <typename A, typename B, typename C, typename D>
void drive(void (*kernel)(A, B, C, D, uint3, uint3), const void* table, const void* x, uint32_t n,
           void* out, uint32_t t, uint32_t grid) {
  int shape[2] = {int(n), 0};
  kernel((A)table, (B)x, (C)shape, (D)out, uint3{t, 0, 0}, uint3{grid, 1, 1});
}
"""
    lib = _compile(source + driver + _MATVEC_RUN.format(call=call), [SHIM, KERNELS])
    return _run_matvec(lib, table, x, warps)
