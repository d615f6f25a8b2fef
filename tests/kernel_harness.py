"""Compile the package's kernel source with the host C++ compiler and run it over every thread.

Two builds of the same ``kernels/`` source:
- ``cpu_gather``: prelude_cpu.h + formats.h + gather.h, the shared source in its CPU dialect;
- ``metal_gather``: the complete Metal source that ``mx.fast.metal_kernel`` generates from the
  package's registration (captured from MLX itself), compiled against a Metal-language shim.
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

from muser_mlx.backends.kernel import METAL, kernel_source, values_per_thread

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
    for header in sorted(f for d in include for f in d.iterdir() if f.is_file()):
        digest.update(header.read_bytes())  # a changed prelude or shim is a new build
    key = digest.hexdigest()[:20]
    lib = BUILD / f"{key}.so"
    if not lib.exists():
        src = BUILD / f"{key}.cpp"
        src.write_text(source)
        flags = ["-std=c++17", "-O1", "-shared", "-fPIC", "-Wno-attributes"]
        cmd = [CXX, *flags, *[f"-I{p}" for p in include], str(src), "-o", str(lib) + ".tmp"]
        subprocess.run(cmd, check=True, capture_output=True, text=True)
        Path(str(lib) + ".tmp").rename(lib)
    return ctypes.CDLL(str(lib))


def _run(lib: ctypes.CDLL, table, ids: np.ndarray, dtype: mx.Dtype, rows_in_flight: int | None) -> mx.array:
    data = np.ascontiguousarray(np.array(table.data))
    ids = np.ascontiguousarray(ids)
    out = np.empty((ids.size, table.dims), C_TYPES[dtype][1])
    groups = table.dims // values_per_thread(table.dims)
    width = -(-groups // 32) * 32  # like CUDA's whole blocks: threads past the last group idle
    height = rows_in_flight or max(ids.size, 1)
    lib.run(
        data.ctypes.data_as(ctypes.c_void_p),
        ids.ctypes.data_as(ctypes.c_void_p),
        ctypes.c_uint32(ids.size),
        out.ctypes.data_as(ctypes.c_void_p),
        ctypes.c_uint32(width),
        ctypes.c_uint32(height),
    )
    result = mx.array(out)
    return mx.view(result, mx.bfloat16) if dtype == mx.bfloat16 else result


def cpu_gather(table, ids: np.ndarray, dtype=mx.float32, rows_in_flight: int | None = None) -> mx.array:
    """The shared source through prelude_cpu.h, every thread of the grid in turn; the grid's
    height is ``rows_in_flight`` (default: one row per id)."""
    id_type, out_type = C_TYPES[mx.array(ids).dtype][0], C_TYPES[dtype][0]
    args = f"muser::Format<{table.format.ggml_type}>, {table.dims}, {table.vocab}, {values_per_thread(table.dims)}"
    driver = f"""
extern "C" void run(const uint8_t* table, const {id_type}* ids, uint32_t n, {out_type}* out, uint32_t width,
                    uint32_t height) {{
  for (uint32_t y = 0; y < height; ++y)
    for (uint32_t x = 0; x < width; ++x) muser::gather<{args}>(table, ids, n, out, x, y, height);
}}
"""
    source = "".join(f'#include "{f}"\n' for f in ("prelude_cpu.h", "formats.h", "gather.h")) + driver
    return _run(_compile(source, [KERNELS]), table, ids, dtype, rows_in_flight)


def generated_metal_source(table, ids: mx.array, dtype: mx.Dtype, capfd) -> str:
    """The full Metal source MLX builds for this call, printed by MLX while tracing an export
    (MLX records metal_kernel calls without a Metal device only then)."""

    def call(i):
        return METAL.kernel(
            inputs=[table.data, i],
            template=METAL.template(table, dtype, i.dtype),
            grid=(1, 1, 1),
            threadgroup=(1, 1, 1),
            output_shapes=[(i.shape[0], table.dims)],
            output_dtypes=[dtype],
            verbose=True,
        )[0]

    capfd.readouterr()
    with tempfile.TemporaryDirectory() as d:
        mx.export_function(str(Path(d) / "gather.mlxfn"), call, ids)
    printed = capfd.readouterr().out
    return printed.split("```\n", 1)[1].rsplit("```", 1)[0]


@lru_cache(maxsize=None)
def _metal_lib(source: str) -> ctypes.CDLL:
    instance = re.search(r"decltype\((\w+<[^>]*>)\)", source).group(1)
    driver = f"""
template <typename A, typename B, typename C, typename D>
void drive(void (*kernel)(A, B, C, D, uint3, uint3), const void* table, const void* ids, uint32_t n,
           void* out, uint32_t width, uint32_t height) {{
  int shape[1] = {{int(n)}};
  for (uint32_t y = 0; y < height; ++y)
    for (uint32_t x = 0; x < width; ++x)
      kernel((A)table, (B)ids, (C)shape, (D)out, uint3{{x, y, 0}}, uint3{{width, height, 1}});
}}
extern "C" void run(const void* table, const void* ids, uint32_t n, void* out, uint32_t width, uint32_t height) {{
  drive(&{instance}, table, ids, n, out, width, height);
}}
"""
    return _compile(source + driver, [SHIM, KERNELS])


def metal_gather(table, ids: np.ndarray, dtype, capfd, rows_in_flight: int | None = None) -> mx.array:
    """Execute the generated Metal source on the CPU, thread by thread."""
    source = generated_metal_source(table, mx.array(ids), dtype, capfd)
    return _run(_metal_lib(source), table, ids, dtype, rows_in_flight)
