"""Compile the package's kernel source with the host C++ compiler and run it over every thread.

Two builds of the same ``kernels/`` source, for each kernel (gather, matvec; xruns, bytedot, mma
and tile_mma, which only CUDA registers, in the CPU dialect alone):
- ``cpu_gather`` / ``cpu_matvec``: prelude_cpu.h + lanes_cpu.h + every block decoder
  (format_*.h) + the kernel's template, the shared source in its CPU dialect;
- ``metal_gather`` / ``metal_matvec``: the complete Metal source that ``mx.fast.metal_kernel``
  generates from the package's registration (captured from MLX itself), compiled against a
  Metal-language shim that runs it (metal_on_cpu/; tests/metal_check.py checks the same source
  as Metal's compiler would: address spaces, no standard library).
Warps (matvec's cross-lane sums) run as 32 concurrent threads, tile_mma's threadgroups as 256
(kernels/cpu_runtime.h).
"""

from __future__ import annotations

import ctypes
import dataclasses
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

import mlx.core as mx
import numpy as np

from muser_mlx import FORMATS
from muser_mlx.backends import tuning
from muser_mlx.backends.device import METAL
from muser_mlx.backends.gather import gather_launch, table_words
from muser_mlx.backends.head import (
    WARP,
    bytedot_launch,
    matvec_launch,
    mma_launch,
    mma_operands,
    run_offsets,
    tile_mma_launch,
    x_planes,
    x_run_words,
    x_steps,
)
from muser_mlx.backends.source import Launch

KERNELS = tuning.KERNEL_SOURCES

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


def built(source: str, include: list[Path], name: str, compile: Callable[[Path, Path], None]) -> Path:
    """BUILD's file ``name`` (a pattern of one ``{}``: the key) for ``source`` and the files of the
    ``include`` folders (a changed prelude or shim is a new key), made where it is missing by
    ``compile(cpp, out)`` from ``source`` written to ``cpp``, both under this process's own names,
    and moved in whole: test runs side by side share BUILD."""
    BUILD.mkdir(exist_ok=True)
    digest = hashlib.sha256(source.encode())
    for header in sorted(f for d in include for f in d.iterdir() if f.is_file()):
        digest.update(header.read_bytes())
    target = BUILD / name.format(digest.hexdigest()[:20])
    if not target.exists():
        own = f"{BUILD / target.stem}.{os.getpid()}"
        cpp, out = Path(f"{own}.cpp"), Path(f"{own}{target.suffix}")
        cpp.write_text(source)
        compile(cpp, out)
        os.replace(out, target)
    return target


def _compile(source: str, include: list[Path]) -> ctypes.CDLL:
    flags = ["-std=c++17", "-O1", "-shared", "-fPIC", "-pthread", "-Wno-attributes", *[f"-I{p}" for p in include]]

    def cxx(cpp: Path, out: Path) -> None:
        subprocess.run([CXX, *flags, str(cpp), "-o", str(out)], check=True, capture_output=True, text=True)

    return ctypes.CDLL(str(built(source, include, "{}.so", cxx)))


def _cpu_lib(template_header: str, run: str) -> ctypes.CDLL:
    """prelude_cpu.h + lanes_cpu.h + every block decoder + the kernel's template (their includes
    follow, as in DeviceKernel's header), and the ``run`` driver."""
    decoders = tuple(f.kernel_file for f in FORMATS.values())
    includes = "".join(f'#include "{f}"\n' for f in ("prelude_cpu.h", "lanes_cpu.h", *decoders, template_header))
    return _compile(includes + run, [KERNELS])


# A generated Metal kernel, one thread at a time: its buffers (the matvec's table, x, x's shape
# and ndim, out; the gather's table, ids, their shape and ndim, out), then the thread's position and the
# grid's size, each argument cast to the parameter's type.
_METAL_DRIVE = """
template <typename... Params, typename... Args>
void drive(void (*kernel)(Params...), Args... args) {
  kernel((Params)args...);
}
"""


def _metal_lib(source: str, run: str) -> ctypes.CDLL:
    """The generated Metal ``source`` against the shim; ``run`` calls ``drive(&KERNEL, ...)``."""
    kernel = re.search(r"\[\[kernel\]\] void (\w+)\(", source).group(1)
    return _compile(source + _METAL_DRIVE + run.replace("KERNEL", kernel), [SHIM, KERNELS])


def _host(a) -> np.ndarray:
    """Contiguous host bytes of an mx array (bfloat16 as uint16) or NumPy array."""
    a = mx.view(a, mx.uint16) if isinstance(a, mx.array) and a.dtype == mx.bfloat16 else a
    return np.ascontiguousarray(np.array(a))


def _ptr(a: np.ndarray) -> ctypes.c_void_p:
    return a.ctypes.data_as(ctypes.c_void_p)


def _result(out: np.ndarray, dtype: mx.Dtype) -> mx.array:
    result = mx.array(out)
    return mx.view(result, mx.bfloat16) if dtype == mx.bfloat16 else result


def generated_metal_source(kernel, inputs: list[mx.array], launch: Launch, capfd) -> str:
    """The full Metal source MLX builds for ``launch`` of ``kernel`` (a DeviceKernel), printed
    by MLX while tracing an export (MLX records metal_kernel calls without a Metal device only
    then)."""
    one_thread = dataclasses.replace(launch, grid=(1, 1, 1), threadgroup=(1, 1, 1))

    def call(*args):
        return kernel(one_thread, list(args), verbose=True)

    capfd.readouterr()
    with tempfile.TemporaryDirectory() as d:
        mx.export_function(str(Path(d) / f"{kernel.name}.mlxfn"), call, *inputs)
    printed = capfd.readouterr().out
    return printed.split("```\n", 1)[1].rsplit("```", 1)[0]


# ---- value tables (kernels/format_value_tables.h): a ByteTable's 16 entries less a format's zero

_TABLE_RUN = """
extern "C" void run(int* out) {{
  const muser::ByteTable t = muser::{table}();
  for (uint32_t q = 0; q < 16; ++q) out[q] = int(muser::table_bytes(t, q) & 255u) - muser::Format<{ggml_type}>::zero;
}}
"""


def cpu_value_table(table: str, qtype: str) -> np.ndarray:
    """The levels of nibbles 0..15 by ``muser::<table>()`` and format ``qtype``'s zero, int32 [16]."""
    out = np.zeros(16, np.int32)
    run = _TABLE_RUN.format(table=table, ggml_type=FORMATS[qtype].ggml_type)
    _cpu_lib("format_value_tables.h", run).run(_ptr(out))
    return out


# ---- gather: ids [...] -> out [..., dims], every thread of the 2-D grid in turn

_GATHER_RUN = """
extern "C" void run(const void* table, const void* ids, const int* shape, int ndim, void* out, uint32_t width,
                    uint32_t height) {{
  uint32_t n = muser::element_count(shape, ndim);
  for (uint32_t y = 0; y < height; ++y)
    for (uint32_t x = 0; x < width; ++x) {call};
}}
"""


def _run_gather(lib: ctypes.CDLL, table, ids: np.ndarray, dtype: mx.Dtype, rows_in_flight: int | None) -> mx.array:
    ids = np.ascontiguousarray(ids)
    shape = np.array(ids.shape or (1,), np.int32)  # a 0-d id is looked up as one of one dimension
    out = np.empty((*ids.shape, table.dims), C_TYPES[dtype][1])
    groups = table.dims // tuning.gather_values(table.dims)
    width = -(-groups // 32) * 32  # like CUDA's whole blocks: threads past the last group idle
    height = rows_in_flight or max(ids.size, 1)
    lib.run(
        _ptr(_host(table.data)),
        _ptr(ids),
        _ptr(shape),
        ctypes.c_int(shape.size),
        _ptr(out),
        ctypes.c_uint32(width),
        ctypes.c_uint32(height),
    )
    return _result(out, dtype)


def cpu_gather(table, ids: np.ndarray, dtype=mx.float32, rows_in_flight: int | None = None) -> mx.array:
    """The shared source through prelude_cpu.h, every thread of the grid in turn; the grid's
    height is ``rows_in_flight`` (default: one row per id)."""
    id_type, out_type = C_TYPES[mx.array(ids).dtype][0], C_TYPES[dtype][0]
    args = f"muser::Format<{table.format.ggml_type}>, {tuning.gather_values(table.dims)}"
    sizes = f"{table.dims}u, {table.vocab}u"
    call = f"muser::gather_rows<{args}>((const uint8_t*)table, (const {id_type}*)ids, n, ({out_type}*)out, {sizes}, x, y, height)"
    return _run_gather(_cpu_lib("gather.h", _GATHER_RUN.format(call=call)), table, ids, dtype, rows_in_flight)


def gather_metal_source(table, ids: mx.array, dtype: mx.Dtype, capfd) -> str:
    launch = gather_launch(table.format, table.dims, table.vocab, ids.shape, dtype)
    return generated_metal_source(METAL.gather_kernel, [table_words(table.data), ids], launch, capfd)


def metal_gather(table, ids: np.ndarray, dtype, capfd, rows_in_flight: int | None = None) -> mx.array:
    """Execute the generated Metal source on the CPU, thread by thread (ids of one or more
    dimensions, as the package passes them)."""
    source = gather_metal_source(table, mx.array(ids), dtype, capfd)
    call = "drive(&KERNEL, table, ids, shape, ndim, out, uint3{x, y, 0}, uint3{width, height, 1})"
    return _run_gather(_metal_lib(source, _GATHER_RUN.format(call=call)), table, ids, dtype, rows_in_flight)


# ---- matvec: x [n, dims] -> logits [n, vocab] in x's dtype, warps as 32 concurrent threads;
# run(...) returns 0 if a warp diverged.

_MATVEC_RUN = """
extern "C" int run(const void* table, const void* x, uint32_t n, void* out, uint32_t grid) {{
  int shape[2] = {{int(n), {dims}}};
  return muser_cpu::run_warps(grid, [&](uint32_t t) {{ {call}; }}) ? 1 : 0;
}}
"""


def _run_matvec(
    lib: ctypes.CDLL, table, x: mx.array, warps: int | None, launch: Launch, operand: mx.array | None = None
) -> mx.array:
    """Run a streaming kernel on x (read as ``operand``, default x itself): ``warps`` warps
    (default: the package's grid, ``launch``'s)."""
    out = np.empty((x.shape[0], table.vocab), C_TYPES[x.dtype][1])
    threads = warps * WARP if warps else launch.grid[0]
    operand = x if operand is None else operand
    ok = lib.run(
        _ptr(_host(table.data)), _ptr(_host(operand)), ctypes.c_uint32(x.shape[0]), _ptr(out), ctypes.c_uint32(threads)
    )
    assert ok == 1, "a warp's lanes diverged: they did not all reach the same muser_sum calls"
    return _result(out, x.dtype)


def _template_args(launch: Launch, *names: str) -> str:
    """The launch's Format<> and its constants ``names``, as template arguments."""
    return ", ".join([f"muser::Format<{launch.format.ggml_type}>", *(str(launch.define(n)) for n in names)])


def cpu_matvec(table, x: mx.array, warps: int | None = None) -> mx.array:
    """The shared matvec source through prelude_cpu.h, ``warps`` warps of 32 threads (default:
    the package's grid; fewer grid-stride), the layout tuning's (set it with ``tuning.fixed``)."""
    x_type, launch = C_TYPES[x.dtype][0], matvec_launch(table, x)
    args = _template_args(launch, "DIMS", "VOCAB", "VALUES", "ROWS", "VROWS")
    call = f"muser::matvec<{args}>((const uint8_t*)table, (const {x_type}*)x, n, ({x_type}*)out, t, grid)"
    return _run_matvec(_cpu_lib("matvec.h", _MATVEC_RUN.format(dims=table.dims, call=call)), table, x, warps, launch)


_XRUNS_RUN = """
extern "C" void run(const void* x, uint32_t n_runs, void* runs) {{
  for (uint32_t t = 0; t < n_runs; ++t) {call};
}}
"""


def cpu_x_runs(table, x: mx.array) -> mx.array:
    """kernels/xruns.h through prelude_cpu.h, every thread in turn: x's runs' records."""
    x_type, planes = C_TYPES[x.dtype][0], x_planes(x.dtype)
    runs = np.zeros((x.shape[0], table.dims // 16, x_run_words(planes)), np.uint32)
    call = f"muser::x_runs<{planes}>((const {x_type}*)x, n_runs, (uint32_t*)runs, t)"
    _cpu_lib("xruns.h", _XRUNS_RUN.format(call=call)).run(
        _ptr(_host(x)), ctypes.c_uint32(runs.shape[0] * runs.shape[1]), _ptr(runs)
    )
    return mx.array(runs)


def cpu_bytedot(table, x: mx.array, warps: int | None = None) -> mx.array:
    """kernels/bytedot.h through prelude_cpu.h and lanes_cpu.h (muser_dot4 emulated byte by byte) on
    :func:`cpu_x_runs` of x, ``warps`` warps (default: the package's grid), tuning's layout."""
    x_type, launch = C_TYPES[x.dtype][0], bytedot_launch(table, x)
    args = _template_args(launch, "DIMS", "VOCAB", "ROWS", "VROWS", "RUNS", "PLANES")
    call = f"muser::bytedot<{args}>((const uint8_t*)table, (const uint32_t*)x, n, ({x_type}*)out, t, grid)"
    lib = _cpu_lib("bytedot.h", _MATVEC_RUN.format(dims=table.dims, call=call))
    return _run_matvec(lib, table, x, warps, launch, operand=cpu_x_runs(table, x))


def matvec_metal_source(table, x: mx.array, capfd) -> str:
    return generated_metal_source(METAL.matvec_kernel, [table_words(table.data), x], matvec_launch(table, x), capfd)


def metal_matvec(table, x: mx.array, capfd, warps: int | None = None) -> mx.array:
    """Execute the generated Metal matvec source on the CPU, warps as 32 concurrent threads."""
    source = matvec_metal_source(table, x, capfd)
    call = "drive(&KERNEL, table, x, shape, 2, out, uint3{t, 0, 0}, uint3{grid, 1, 1})"  # x [n, dims]: ndim 2
    lib = _metal_lib(source, _MATVEC_RUN.format(dims=table.dims, call=call))
    return _run_matvec(lib, table, x, warps, matvec_launch(table, x))


# ---- mma: the matvec on the (emulated) matrix unit, lanes_cpu.h's muser_mma

_MMA_RUN = """
extern "C" int run(const void* table, const void* xh, const void* x_sums, uint32_t n, void* out, uint32_t grid) {{
  return muser_cpu::run_warps(grid, [&](uint32_t t) {{ {call}; }}) ? 1 : 0;
}}
"""


def cpu_mma(table, x: mx.array, warps: int | None = None) -> mx.array:
    """kernels/mma.h through prelude_cpu.h on ``mma_operands(x)``, ``warps`` warps of 32 threads
    (default: the package's grid), tuning's (VTILES, XTILES)."""
    launch = mma_launch(table, x)
    xh, x_sums = mma_operands(x, launch.output_shape[0], run_offsets(table))
    h_type, out_type = C_TYPES[xh.dtype][0], C_TYPES[x.dtype][0]
    args = _template_args(launch, "DIMS", "VOCAB", "PARTS", "VTILES", "XTILES", "WORD_ROWS", "PAIRS")
    call = (
        f"muser::mma_matvec<{args}>((const uint8_t*)table, (const {h_type}*)xh, (const float*)x_sums, n, "
        f"({out_type}*)out, t, grid)"
    )
    lib = _cpu_lib("mma.h", _MMA_RUN.format(call=call))
    out = np.empty((xh.shape[1], table.vocab), C_TYPES[x.dtype][1])
    threads = warps * WARP if warps else launch.grid[0]
    ok = lib.run(
        _ptr(_host(table.data)),
        _ptr(_host(xh)),
        _ptr(_host(x_sums)),
        ctypes.c_uint32(xh.shape[1]),
        _ptr(out),
        ctypes.c_uint32(threads),
    )
    assert ok == 1, "a warp's lanes diverged: they did not all reach the same muser_mma calls"
    return _result(out[: x.shape[0]], x.dtype)


# ---- tile_mma: the tiled matrix multiply, a threadgroup (256 or 512 threads) at a time

_TILE_MMA_RUN = """
extern "C" int run(const void* table, const void* x, const void* x_steps, uint32_t n, void* out, uint32_t groups,
                   uint32_t threads, uint32_t shared) {{
  return muser_cpu::run_groups(groups, threads, shared, [&](uint32_t group, uint32_t t) {{ {call}; }}) ? 1 : 0;
}}
"""


def cpu_tile_mma(table, x: mx.array, offset: int = 0, warpgroups: bool = False) -> mx.array:
    """kernels/tile_mma.h through prelude_cpu.h for float16 or bfloat16 x ``[..., dims]``, as
    backends/head.py launches it (tile_mma_launch) on a device with warpgroup multiplies or
    without (``warpgroups``); x's values ``offset`` values into an aligned buffer (1: off a
    16-byte boundary, as a view of MLX's can be), and by warpgroups x_steps as head.tile_mma
    gives it (its own array: aligned)."""
    launch = tile_mma_launch(table, x, warpgroups)
    x_host = _host(x).reshape(-1)
    buffer = np.zeros(x_host.size + offset, x_host.dtype)
    buffer[offset:] = x_host
    steps = _host(x_steps(x, launch.define("XROWS"))) if launch.define("WARPGROUP") else None
    h_type = C_TYPES[x.dtype][0]
    args = _template_args(
        launch,
        "DIMS",
        "VOCAB",
        "XROWS",
        "XSTAGES",
        "CHUNK",
        "RAW",
        "SHARED",
        "UNROLL",
        "WARPGROUP",
        "THREADS",
        "STEP_K",
    )
    call = f"muser::tile_mma<{args}>((const uint8_t*)table, (const {h_type}*)x, (const {h_type}*)x_steps, n, ({h_type}*)out, group, t)"
    lib = _cpu_lib("tile_mma.h", _TILE_MMA_RUN.format(call=call))
    out = np.empty(launch.output_shape, C_TYPES[x.dtype][1])
    threads = launch.threadgroup[0]
    ok = lib.run(
        _ptr(_host(table.data)),
        ctypes.c_void_p(buffer.ctypes.data + offset * buffer.itemsize),
        ctypes.c_void_p(buffer.ctypes.data + offset * buffer.itemsize if steps is None else steps.ctypes.data),
        ctypes.c_uint32(x.size // x.shape[-1]),
        _ptr(out),
        ctypes.c_uint32(launch.grid[0] // threads),
        ctypes.c_uint32(threads),
        ctypes.c_uint32(launch.shared_bytes),
    )
    assert ok == 1, "a threadgroup's threads diverged: they did not all reach the same barriers"
    return _result(out, x.dtype)
