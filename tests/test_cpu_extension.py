"""The CPU extension (muser_mlx._cpu, csrc/): the kernels of kernels/ as MLX primitives.

Against gguf-py: every format and output dtype bit for bit (float32 exact, float16/bfloat16 the
reference rounded by MLX), the LM head within test_as_linear's bound of float64 (1e-5 of the
terms' size for float32 x), under mx.compile, and its vjp. The fallback: an extension that cannot
be imported leaves the MLX-ops path with one warning naming why, and a failed build leaves an
install without it.
"""

from __future__ import annotations

import importlib.util
import os
import platform
import subprocess
import sys
import textwrap
from pathlib import Path

import mlx.core as mx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_as_linear import (
    QUANTIZED,
    assert_close,
    assert_within_run_rounding,
    dequantized,
    moderate,
    problems,
    spread_within_runs,
)

from muser_mlx import FORMATS, Embedding, Table, as_linear, backends, embedding
from muser_mlx.backends import cpu, head, tuning
from muser_mlx.backends.head import x_planes

from conftest import assert_bits_equal, random_table_bytes, reference, subprocess_env

ROOT = Path(__file__).resolve().parents[1]
DTYPES = (mx.float32, mx.float16, mx.bfloat16)
needs_extension = pytest.mark.skipif(cpu.unavailable() is not None, reason=f"{cpu.unavailable()}")


@pytest.mark.skipif(os.environ.get("MUSER_MLX_CPU_EXTENSION") == "0", reason="built without it on purpose")
def test_extension_is_built_and_serves_the_cpu():
    assert cpu.unavailable() is None
    assert set(FORMATS) <= set(cpu._module()[0].formats), "a format in muser_mlx.formats has no CPU kernels"
    if not backends.on_gpu():
        assert backends.select() == "cpu"
    assert backends.select("ops") == "ops"


def table_of(rng, qtype: str, vocab: int, dims: int) -> tuple[Table, np.ndarray]:
    data = random_table_bytes(rng, qtype, vocab, dims)
    return Table.from_bytes(data, qtype, dims), data


@needs_extension
@pytest.mark.parametrize("qtype", sorted(FORMATS))
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_gather_is_gguf_py_bit_for_bit(qtype, dtype):
    rng = np.random.default_rng(len(qtype))
    dims = 2 * FORMATS[qtype].block_values if FORMATS[qtype].quantized else 48
    table, data = table_of(rng, qtype, 37, dims)
    ids = np.array([[0, 36, 5], [-1, 37, 2**31 - 1]], np.int32)  # out of range: clamped
    assert_bits_equal(embedding(table, mx.array(ids), dtype, backend="cpu"), reference(data, qtype, ids), dtype)
    many = rng.integers(0, 37, 700)  # 700 rows: split over the threads
    assert_bits_equal(embedding(table, many, dtype, backend="cpu"), reference(data, qtype, many), dtype)


@needs_extension
@pytest.mark.parametrize("id_dtype", [mx.int8, mx.uint8, mx.int16, mx.uint16, mx.uint32, mx.int64, mx.uint64], ids=str)
def test_every_integer_id_dtype_and_layout(id_dtype):
    rng = np.random.default_rng(1)
    table, data = table_of(rng, "Q4_K", 20, 256)
    ids = mx.array(np.array([[3, 7], [19, 0]])).astype(id_dtype)
    out = embedding(table, ids.T, backend="cpu")  # a transposed view: strided ids
    assert_bits_equal(out, reference(data, "Q4_K", np.array(ids.T).astype(np.int64)))
    assert_bits_equal(embedding(table, mx.array(5, id_dtype), backend="cpu"), reference(data, "Q4_K", 5))
    assert embedding(table, mx.zeros((0, 3), id_dtype), backend="cpu").shape == (0, 3, 256)


@needs_extension
def test_a_strided_table_view_reads_its_own_rows():
    rng = np.random.default_rng(2)
    full = random_table_bytes(rng, "Q8_0", 12, 64)
    view = mx.array(full)[::2]  # every other row: not row-contiguous
    table = Table.from_bytes(view, "Q8_0", 64)
    assert_bits_equal(embedding(table, [0, 5], backend="cpu"), reference(full[::2], "Q8_0", [0, 5]))


@needs_extension
def test_bad_input_raises_at_the_call():
    table, _ = table_of(np.random.default_rng(3), "Q4_0", 8, 64)
    with pytest.raises(TypeError, match="integers"):
        embedding(table, mx.array([1.0]), backend="cpu")
    module = cpu._module()[0]
    with pytest.raises(ValueError, match="uint8"):
        module.gather(table.data, mx.array([0]), table.format.ggml_type, 32, mx.float32)  # dims 32: 18 B rows
    with pytest.raises(ValueError, match="no kernels for ggml type 77"):
        module.gather(table.data, mx.array([0]), 77, 64, mx.float32)
    with pytest.raises(ValueError, match="float32, float16 or bfloat16"):
        module.gather(table.data, mx.array([0]), table.format.ggml_type, 64, mx.int32)


@needs_extension
@pytest.mark.parametrize("shapeless", [False, True])
def test_gather_under_compile(shapeless):
    rng = np.random.default_rng(4)
    table, data = table_of(rng, "Q6_K", 30, 512)
    module = Embedding.from_table(table, backend="cpu")

    @mx.compile
    def twice(ids):
        return module(ids) + module(ids)  # one gather after common-subexpression elimination

    f = mx.compile(lambda ids: module(ids) * 2, shapeless=True) if shapeless else twice
    for ids in ([1, 2, 3], [[4, 29]], [0, 0, 1, 2, 3, 4]):
        assert_bits_equal(f(mx.array(ids)), 2 * reference(data, "Q6_K", np.array(ids)))


@needs_extension
@pytest.mark.parametrize("qtype", sorted(FORMATS))
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("byte_dots", [True, False], ids=["byte_dots", "values"])
def test_head_matches_float64(qtype, dtype, byte_dots):
    """The extension's head, a quantized table's by the byte dot products (kernels/bytedot_cpu.h)
    or from its dequantized values (kernels/matvec.h, tuning.CPU_BYTE_DOTS False), within
    test_as_linear's bound of float64 for x of normal values."""
    rng = np.random.default_rng(5)
    dims = (
        FORMATS[qtype].block_values * (1 if FORMATS[qtype].block_values == 256 else 8)
        if FORMATS[qtype].quantized
        else 40
    )
    data = moderate(random_table_bytes(rng, qtype, 45, dims), qtype)
    table, W = Table.from_bytes(data, qtype, dims), dequantized(data, qtype)
    with tuning.fixed(CPU_BYTE_DOTS=byte_dots):
        for n in (1, 2, 3, 6, 40):  # the kernel's passes of 1, 2 and 4 rows of x; 40: beyond MATVEC_MAX_ROWS
            x = mx.array(rng.standard_normal((n, dims)).astype(np.float32)).astype(dtype)
            assert_close(as_linear(table, x, backend="cpu"), x, W)


@needs_extension
@settings(deadline=None, max_examples=15)
@given(problems(max_vocab=12, max_rows=6, ndims=(2,), qtypes=QUANTIZED), st.integers(0, 2**32 - 1))
def test_byte_dots_head_error_is_bounded_by_each_runs_largest_x(problem, seed):
    """The extension's byte dot products take x as the GPUs' do (kernels/xruns.h's records: 2
    planes for 16-bit x, 3 for float32): within their bound for x spread within each run, where
    the head from dequantized values would meet 1e-5 of float64 (test_as_linear's
    assert_within_run_rounding, spread_within_runs)."""
    table, W, x = spread_within_runs(problem, seed)
    assert_within_run_rounding(as_linear(table, x, backend="cpu"), x, W, x_planes(x.dtype))


@pytest.mark.skipif(os.environ.get("MUSER_MLX_CPU_EXTENSION") == "0", reason="built without it on purpose")
def test_the_byte_dot_products_are_built_for_x86_64():
    """The kernel units' target ISA (x86-64-v3 or native on x86-64) has AVX2, which
    kernels/bytedot_cpu.h needs; elsewhere the heads take the dequantized values."""
    module = cpu._module()[0]
    assert module.byte_dots == (platform.machine() in ("x86_64", "AMD64"))


def test_the_extensions_head_takes_every_row_count_off_macos():
    """The CPU extension's matvec serves every row count where MLX's CPU matmul is netlib's
    reference BLAS (its Linux wheels), and up to MATVEC_MAX_ROWS on macOS (Accelerate's): beyond,
    the tiled path, or for a float table of x's dtype MLX's matmul on its bytes."""
    rng = np.random.default_rng(8)
    q4k = Table.from_bytes(random_table_bytes(rng, "Q4_K", 3, 256), "Q4_K", 256)
    f32 = Table.from_bytes(random_table_bytes(rng, "F32", 3, 256), "F32", 256)
    darwin = sys.platform == "darwin"
    assert tuning.CPU_MATVEC_MAX_ROWS == (tuning.MATVEC_MAX_ROWS if darwin else 1 << 62)
    for table, beyond in ((q4k, "tiled"), (f32, "float_matmul")):
        assert head.choose(table, 4096, mx.float32, "cpu") == (beyond if darwin else "cpu_matvec")
        with tuning.fixed(CPU_MATVEC_MAX_ROWS=tuning.MATVEC_MAX_ROWS):
            assert head.choose(table, tuning.MATVEC_MAX_ROWS, mx.float32, "cpu") == "cpu_matvec"
            assert head.choose(table, tuning.MATVEC_MAX_ROWS + 1, mx.float32, "cpu") == beyond


@needs_extension
def test_head_of_a_strided_x_under_compile_and_its_vjp():
    rng = np.random.default_rng(6)
    data = moderate(random_table_bytes(rng, "Q4_K", 70, 256), "Q4_K")
    table, W = Table.from_bytes(data, "Q4_K", 256), dequantized(data, "Q4_K")
    x = mx.array(rng.standard_normal((2, 3, 256)).astype(np.float32))
    last = x[:, -1, :]  # a strided view, as a decode step's last position
    assert_close(mx.compile(lambda v: as_linear(table, v, backend="cpu"))(last), last, W)
    g = mx.array(rng.standard_normal((2, 70)).astype(np.float32))
    want = np.array(g).astype(np.float64) @ W
    # as_linear's own vjp (linear.differentiable_head) and the primitive's (csrc/primitives.cpp)
    for logits in (lambda v: as_linear(table, v, backend="cpu"), lambda v: cpu.matvec(table, v)):
        grad = mx.grad(lambda v, logits=logits: (logits(v) * g).sum())(last)
        assert np.max(np.abs(np.array(grad) - want)) <= 1e-5 * np.max(np.abs(np.array(g)) @ np.abs(W))


def run_python(code: str, **env) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-W", "always", "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        env=subprocess_env(**env),
        timeout=300,
    )


def test_an_extension_that_cannot_load_leaves_ops_with_one_warning():
    result = run_python("""
        import sys
        sys.modules["muser_mlx._cpu"] = None  # an import that fails, as with no build
        import mlx.core as mx
        mx.set_default_device(mx.cpu)  # where a GPU is the default device too
        import muser_mlx
        from muser_mlx import backends
        import numpy as np
        table = muser_mlx.Table.from_bytes(np.arange(68, dtype=np.uint8).reshape(2, 34), "Q8_0", 32)
        a = muser_mlx.embedding(table, [0, 1])
        b = muser_mlx.embedding(table, [1])
        print(backends.select(), mx.array_equal(a[1], b[0]).item())
    """)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["ops", "True"]
    warnings = [line for line in result.stderr.splitlines() if "RuntimeWarning" in line]
    assert len(warnings) == 1 and "muser_mlx._cpu cannot be imported" in warnings[0]
    assert "runs MLX ops on the CPU" in warnings[0]


def test_an_extension_without_a_format_serves_it_by_ops_or_raises_every_way():
    """An extension built without Q8_0's kernels: "auto" runs MLX ops for it with one warning;
    "cpu", asked for by name, raises the same ValueError from every entry point."""
    result = run_python("""
        import mlx.core as mx
        mx.set_default_device(mx.cpu)
        import muser_mlx
        from muser_mlx import backends
        from muser_mlx.backends import cpu
        import numpy as np
        cpu.has_format = lambda qtype: qtype != "Q8_0"
        table = muser_mlx.Table.from_bytes(np.arange(68, dtype=np.uint8).reshape(2, 34), "Q8_0", 32)
        print(backends.select("auto", table), muser_mlx.embedding(table, [1]).shape)
        for call in (
            lambda: muser_mlx.embedding(table, [1], backend="cpu"),
            lambda: muser_mlx.Embedding.from_table(table, backend="cpu")(mx.array([1])),
            lambda: muser_mlx.as_linear(table, mx.zeros((1, 32)), backend="cpu"),
        ):
            try:
                call()
                print("no error")
            except ValueError as e:
                print(str(e).split(":")[0])
    """)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["ops (1, 32)"] + ["backend 'cpu' has no Q8_0 kernels"] * 3
    warnings = [line for line in result.stderr.splitlines() if "RuntimeWarning" in line]
    assert len(warnings) == 1 and "built without Q8_0 kernels" in warnings[0]


def setup_module_of_repository():
    spec = importlib.util.spec_from_file_location("muser_setup", ROOT / "setup.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # setup() runs only as __main__
    return module


@pytest.mark.parametrize("failure", [subprocess.CalledProcessError(1, ["cmake"]), FileNotFoundError("cmake")])
def test_a_failed_build_warns_and_installs_without_it(failure, monkeypatch):
    monkeypatch.delenv("MUSER_MLX_CPU_EXTENSION", raising=False)  # which skips the build before it can fail
    setup = setup_module_of_repository()

    class Failing:
        def build_extension(self, ext):
            raise failure

    command = setup.optional_build(Failing).__new__(setup.optional_build(Failing))
    messages = []
    command.warn = messages.append
    command.build_extension(setup.cpu_extension())
    assert len(messages) == 1 and "failed to build" in messages[0] and "MLX ops" in messages[0]
    assert setup.cpu_extension().optional  # setuptools then copies no missing module in place
