"""The grid (codebook) formats, IQ2_XXS IQ2_XS IQ2_S IQ3_XXS IQ3_S IQ1_S IQ1_M, against gguf-py on
every path: llama.cpp's tables (fixtures types/<TYPE>.gguf) and random bytes with finite scales
through the MLX-ops decoders, the CPU dialect of the kernel source (every run width N of the
device contract) and the Metal source MLX generates, bit for bit; the head within 1e-5 of a
float64 reference; the kernels' grids, generated from gguf-py's tables, element by element.
(test_formats.py, test_kernel_source.py and test_as_linear.py take these formats too, among all.)"""

from __future__ import annotations

import ctypes
import re

import gguf
import mlx.core as mx
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_as_linear import X_DTYPES, assert_close, dequantized, moderate

from muser_mlx import (
    FORMATS,
    Table,
    as_linear,
    backends,
    check_table,
    embedding,
)
from muser_mlx.backends import head
from muser_mlx.backends.device import CUDA, METAL
from muser_mlx.backends.tuning import KERNEL_SOURCES as KERNELS
from muser_mlx.formats.grids import GRID_OF_FORMAT, GRIDS, KSIGNS, SIGNED_POINTS, arrays_of, shared_bytes
from muser_mlx.formats.write_grids import write_headers

from conftest import assert_bits_equal, fixture, random_table_bytes, reference
from kernel_harness import (
    CXX,
    _compile,
    _ptr,
    cpu_bytedot,
    cpu_gather,
    cpu_matvec,
    cpu_mma,
    metal_gather,
    metal_matvec,
)

IQ = ("IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ3_XXS", "IQ3_S", "IQ1_S", "IQ1_M")
DTYPES = (mx.float32, mx.float16, mx.bfloat16)
RUN_WIDTHS = (1, 2, 4, 8, 16)  # N of level_bytes<N> / decode<F, N> (kernels/formats.h)
needs_cxx = pytest.mark.skipif(CXX is None, reason="no C++ compiler (g++ or clang++) on PATH")
GPU = backends._GPU_BACKEND
needs_gpu = pytest.mark.skipif(GPU is None, reason="needs MLX's Metal or CUDA backend; this MLX build has neither")


def test_the_formats_are_registered():
    assert set(IQ) <= set(FORMATS) and set(GRID_OF_FORMAT) == set(IQ)
    assert {FORMATS[q].kernel_file for q in IQ} <= {p.name for p in KERNELS.iterdir()}


# ---- the grids: one source, gguf-py's tables


def test_grid_headers_are_what_the_generator_writes(tmp_path):
    """kernels/<grid>.h and ksigns_selectors.h are what `python -m muser_mlx.formats.write_grids`
    writes from gguf-py's tables."""
    written = write_headers(tmp_path)
    assert sorted(p.name for p in written) == sorted([g.kernel_file for g in GRIDS.values()] + ["ksigns_selectors.h"])
    for path in written:
        assert (KERNELS / path.name).read_text() == path.read_text(), f"kernels/{path.name} is stale"


def checked_in_words(name: str) -> tuple[np.ndarray, int]:
    """The words of kernels/<grid>.h's array, read from the file's text, and its _largest."""
    text = (KERNELS / GRIDS[name].kernel_file).read_text()
    size, body = re.search(rf"MUSER_CONSTANT uint32_t {name}\[(\d+)\] = \{{(.*?)\}};", text, re.DOTALL).groups()
    words = np.array([int(w, 16) for w in re.findall(r"0x([0-9a-f]{8})", body)], dtype="<u4")
    assert words.size == int(size)
    return words, int(re.search(rf"{name}_largest = (\d+)", text).group(1))


def checked_in_levels(name: str) -> np.ndarray:
    """A selector grid's levels, read from kernels/<grid>.h's _levels word."""
    text = (KERNELS / GRIDS[name].kernel_file).read_text()
    word = int(re.search(rf"{name}_levels = 0x([0-9a-f]{{8}})", text).group(1), 16)
    return np.frombuffer(word.to_bytes(4, "little"), np.uint8)


@pytest.mark.parametrize("name", sorted(GRIDS))
def test_grid_words_hold_gguf_pys_values_element_by_element(name):
    """Unpacked by the layout the decoders read (bytes; IQ1: value + 1 in nibbles, values 4-7
    high; the selector grids: value v's index among the levels in nibble v), the checked-in words
    are gguf-py's grid, every point and value."""
    quant = GRIDS[name].quant
    quant.init_grid()
    expected = quant.grid.reshape(quant.grid_shape)
    words, largest = checked_in_words(name)
    as_bytes = words.view(np.uint8)
    if name == "iq1s_grid":
        per_point = as_bytes.reshape(-1, 4)
        values = np.concatenate([per_point & 15, per_point >> 4], axis=1).astype(np.int16) - 1
    elif GRIDS[name].selectors:
        levels = checked_in_levels(name)
        codes = (words[:, None] >> (4 * np.arange(8, dtype=np.uint32))) & 15
        assert codes.max() < 4  # bit 2 is the decoders' sign
        values = levels[codes]
    else:
        values = as_bytes.reshape(expected.shape)
    assert values.shape == expected.shape and np.array_equal(values, expected)
    assert largest == expected.max()


_SIGNS_RUN = """
#include "prelude_cpu.h"
#include "format_iq_selectors.h"
#include "iq2xxs_grid.h"
extern "C" uint32_t ksigns(uint32_t index) { return muser::ksigns(index); }
extern "C" uint32_t sign_masks(int ksigns, uint32_t code, uint32_t h) {
  return ksigns ? muser::SignMasks<true>::mask(code, h) : muser::SignMasks<false>::mask(code, h);
}
extern "C" uint32_t sign_selectors(uint32_t index) { return muser::SignSelectors::select(index); }
extern "C" uint32_t selected_word(uint32_t selector, uint32_t k) {
  return muser::selected_word<43, muser::iq2xxs_grid_levels>(selector, k);
}
"""


@needs_cxx
def test_kernel_sign_masks_are_gguf_pys_ksigns():
    """The kernels compute ksigns_iq2xs (its bit 7 is the index's parity) instead of a table
    lookup, and from it or a sign byte the byte masks of a group's values; the selector grids read
    the bits 2 of their nibbles from ksigns_selectors.h; all 128 indices and 256 sign bytes give
    gguf-py's signs."""
    lib = _compile(_SIGNS_RUN, [KERNELS])
    for f in (lib.ksigns, lib.sign_masks, lib.sign_selectors, lib.selected_word):
        f.restype = ctypes.c_uint32
    assert [lib.ksigns(ctypes.c_uint32(i)) for i in range(128)] == KSIGNS.tolist()
    for ksigns, signs in ((1, KSIGNS), (0, np.arange(256))):
        for code, bits in enumerate(signs.tolist()):
            expected = [sum(255 << 8 * b for b in range(4) if bits >> (4 * h + b) & 1) for h in (0, 1)]
            assert [lib.sign_masks(ksigns, code, h) for h in (0, 1)] == expected, (ksigns, code)
    for index, bits in enumerate(KSIGNS.tolist()):
        assert lib.sign_selectors(index) == sum(4 << 4 * b for b in range(8) if bits >> b & 1), index


@needs_cxx
def test_selected_words_are_the_signed_levels_of_every_point():
    """Every point of iq2xxs_grid and iq2xs_grid, under all 128 ksigns patterns, selects the bytes
    43 +- gguf-py's values, four at a time from any value k of the group (the CPU prelude's
    muser_select_bytes: CUDA's prmt as the preludes spell it)."""
    lib = _compile(_SIGNS_RUN, [KERNELS])
    lib.sign_selectors.restype = lib.selected_word.restype = ctypes.c_uint32
    signs = ((KSIGNS[:, None] >> np.arange(8)) & 1).astype(np.int16)  # [128, 8]
    for name in ("iq2xxs_grid", "iq2xs_grid"):
        words, largest = checked_in_words(name)
        assert largest == 43 and np.array_equal(checked_in_levels(name)[:3], [8, 25, 43])
        values = GRIDS[name].values.astype(np.int16)
        for e in range(words.size):
            for index in range(0, 128, 11 if e else 1):  # every pattern on point 0, a spread on the rest
                selector = int(words[e]) | lib.sign_selectors(index)
                levels = 43 + values[e] * (1 - 2 * signs[index])
                for k in range(8):
                    got = lib.selected_word(ctypes.c_uint32(selector), ctypes.c_uint32(k))
                    expected = levels[k : k + 4]
                    assert list(got.to_bytes(4, "little"))[: expected.size] == expected.tolist(), (name, e, index, k)


_SIGNED_POINTS_RUN = """
#include "prelude_cpu.h"
#include "format_iq3_xxs.h"
extern "C" uint32_t signed_point(uint32_t i) { return muser::SignedPoints<muser::Format<muser::ggml::IQ3_XXS>>::word(i); }
"""


@needs_cxx
def test_signed_points_are_gguf_pys_points_under_every_sign_pattern():
    """The table IQ3_XXS's decoder fills in the CUDA matrix units' heads' shared memory
    (SignedPoints): word 16 e + s is zero +- gguf-py's point e, value b minus where bit b of s is
    set."""
    lib = _compile(_SIGNED_POINTS_RUN, [KERNELS])
    lib.signed_point.restype = ctypes.c_uint32
    minus = (np.arange(16)[:, None] >> np.arange(4)) & 1  # [pattern, value]
    grid = GRIDS["iq3xxs_grid"]
    expected = grid.largest + grid.values.astype(np.int16)[:, None, :] * (1 - 2 * minus)  # [point, pattern, value]
    got = [lib.signed_point(ctypes.c_uint32(i)) for i in range(expected.size // 4)]
    assert np.array_equal(np.array(got, "<u4").view(np.uint8).reshape(expected.shape), expected)


def test_the_shared_memory_counted_for_signed_points_is_the_kernels_choice():
    """grids.SIGNED_POINTS (which counts their shared memory for tile_mma_fits) names the decoders
    that read SignedPoints, and the matrix units' heads take them (kernels/matrix_unit_forms.h)."""
    readers = [q for q in IQ if "SignedPoints<" in (KERNELS / FORMATS[q].kernel_file).read_text()]
    assert sorted(readers) == sorted(SIGNED_POINTS)
    assert re.search(r"signed_points = 1\b", (KERNELS / "matrix_unit_forms.h").read_text())
    assert shared_bytes("IQ3_XXS") == 4 * 16 * 256  # 16 KB: a word per point and sign pattern


@pytest.mark.parametrize("qtype", IQ)
@pytest.mark.parametrize("dialect", [CUDA, METAL], ids=["cuda", "metal"])
def test_a_kernel_header_holds_its_own_grid_alone(dialect, qtype):
    fmt = FORMATS[qtype]
    kernels = [dialect.gather_kernel, dialect.matvec_kernel, dialect.bytedot_kernel, dialect.mma_kernel]
    for kernel in filter(None, kernels):
        assert re.findall(r"MUSER_CONSTANT uint32_t (\w+)\[", kernel.header(fmt)) == list(arrays_of(qtype))


# ---- llama.cpp's tables


def fixture_table(qtype: str) -> tuple[Table, np.ndarray]:
    """types/<qtype>.gguf's token_embd (300 x 512) and gguf-py's float32 rows of it."""
    path = fixture(f"types/{qtype}.gguf")
    table = Table.from_gguf(path)
    assert (table.qtype, table.dims, table.vocab) == (qtype, 512, 300)
    stored = next(t for t in gguf.GGUFReader(path).tensors if t.name == "token_embd.weight")
    return table, gguf.quants.dequantize(stored.data, stored.tensor_type).reshape(300, 512)


@pytest.mark.parametrize("qtype", IQ)
def test_fixture_on_the_ops_path(qtype):
    table, expected = fixture_table(qtype)
    for dtype in DTYPES:
        assert_bits_equal(embedding(table, np.arange(300), dtype, backend="ops"), expected, dtype)


@needs_cxx
@pytest.mark.parametrize("qtype", IQ)
def test_fixture_in_the_cpu_dialect(qtype):
    table, expected = fixture_table(qtype)
    for dtype in DTYPES:
        assert_bits_equal(cpu_gather(table, np.arange(300, dtype=np.int32), dtype), expected, dtype)


@needs_cxx
@pytest.mark.parametrize("qtype", IQ)
def test_fixture_in_the_generated_metal_source(capfd, qtype):
    table, expected = fixture_table(qtype)
    for dtype in (mx.float32, mx.bfloat16):
        assert_bits_equal(metal_gather(table, np.arange(300, dtype=np.int32), dtype, capfd), expected, dtype)


@needs_cxx
@pytest.mark.parametrize("qtype", IQ)
def test_fixture_head_on_every_path(capfd, qtype):
    """float32 x: per row of logits max|err| / max|ref| < 1e-5 against float64 on the ops path,
    and the CPU dialect's matvec, byte dot products and matrix-unit kernels, and Metal's matvec."""
    table, expected = fixture_table(qtype)
    W = expected.astype(np.float64)
    x = mx.array(np.random.default_rng(5).standard_normal((3, 512)).astype(np.float32))
    ref = np.array(x).astype(np.float64) @ W.T
    heads = {
        "ops": as_linear(table, x, backend="ops"),
        "matvec": cpu_matvec(table, x, warps=4),
        "bytedot": cpu_bytedot(table, x, warps=4),
        "mma": cpu_mma(table, x, warps=4),
        "metal": metal_matvec(table, x, capfd, warps=4),
    }
    for name, out in heads.items():
        assert_close(out, x, W)
        err = np.abs(np.array(out).astype(np.float64) - ref).max(axis=1)
        assert np.all(err / np.abs(ref).max(axis=1) < 1e-5), name


# ---- random bytes with finite scales


@st.composite
def iq_tables(draw, qtype: str, max_vocab: int = 5):
    blocks = draw(st.integers(1, 3))
    vocab = draw(st.integers(1, max_vocab))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    data = random_table_bytes(rng, qtype, vocab, 256 * blocks)
    return Table.from_bytes(data, qtype, 256 * blocks), data


_RUN_WIDTHS_RUN = """
#include "prelude_cpu.h"
{includes}
template <int T, int N>
void decode_all(const uint8_t* blocks, uint32_t values, float* out) {{
  for (uint32_t i = 0; i < values; i += N) muser::decode<muser::Format<T>, N>(blocks, i, out + i);
}}
template <int T>
void decode_type(const uint8_t* blocks, uint32_t values, int n, float* out) {{
  switch (n) {{
    case 1: return decode_all<T, 1>(blocks, values, out);
    case 2: return decode_all<T, 2>(blocks, values, out);
    case 4: return decode_all<T, 4>(blocks, values, out);
    case 8: return decode_all<T, 8>(blocks, values, out);
    case 16: return decode_all<T, 16>(blocks, values, out);
  }}
}}
extern "C" void run(int type, const uint8_t* blocks, uint32_t values, int n, float* out) {{
  switch (type) {{ {cases} }}
}}
"""


def run_widths_lib() -> ctypes.CDLL:
    includes = "".join(f'#include "{FORMATS[q].kernel_file}"\n' for q in IQ)
    cases = " ".join(
        f"case {FORMATS[q].ggml_type}: return decode_type<{FORMATS[q].ggml_type}>(blocks, values, n, out);" for q in IQ
    )
    return _compile(_RUN_WIDTHS_RUN.format(includes=includes, cases=cases), [KERNELS])


@needs_cxx
@pytest.mark.parametrize("qtype", IQ)
@settings(max_examples=20, deadline=None)
@given(data=st.data())
def test_every_run_width_decodes_as_gguf_py(qtype, data):
    """decode<F, N> (level_bytes<N>) for every N the contract allows, over whole blocks."""
    fmt = FORMATS[qtype]
    n_blocks = data.draw(st.integers(1, 4))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    blocks = np.ascontiguousarray(random_table_bytes(rng, qtype, n_blocks, fmt.block_values))
    expected = gguf.quants.dequantize(blocks, gguf.GGMLQuantizationType[qtype]).reshape(-1)
    lib = run_widths_lib()
    for n in RUN_WIDTHS:
        out = np.full(expected.size, np.nan, np.float32)
        lib.run(ctypes.c_int(fmt.ggml_type), _ptr(blocks), ctypes.c_uint32(expected.size), ctypes.c_int(n), _ptr(out))
        assert np.array_equal(out.view(np.uint32), expected.view(np.uint32)), f"N = {n}"


@pytest.mark.parametrize("qtype", IQ)
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_random_bytes_on_the_ops_path(qtype, data):
    table, raw = data.draw(iq_tables(qtype, max_vocab=20))
    ids = np.array(data.draw(st.lists(st.integers(0, table.vocab - 1), min_size=1, max_size=20)))
    dtype = data.draw(st.sampled_from(DTYPES))
    assert_bits_equal(embedding(table, ids, dtype, backend="ops"), reference(raw, qtype, ids), dtype)


@needs_cxx
@pytest.mark.parametrize("qtype", IQ)
@settings(max_examples=10, deadline=None)
@given(data=st.data())
def test_random_bytes_in_the_cpu_dialect(qtype, data):
    table, raw = data.draw(iq_tables(qtype))
    ids = np.array(data.draw(st.lists(st.integers(-2, table.vocab + 2), min_size=1, max_size=8)), np.int32)
    dtype = data.draw(st.sampled_from(DTYPES))
    assert_bits_equal(cpu_gather(table, ids, dtype), reference(raw, qtype, ids), dtype)


@needs_cxx
@pytest.mark.parametrize("qtype", IQ)
@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_random_bytes_in_the_generated_metal_source(capfd, qtype, data):
    table, raw = data.draw(iq_tables(qtype))
    ids = np.array(data.draw(st.lists(st.integers(0, table.vocab - 1), min_size=1, max_size=8)), np.int32)
    dtype = data.draw(st.sampled_from(DTYPES))
    assert_bits_equal(metal_gather(table, ids, dtype, capfd), reference(raw, qtype, ids), dtype)


@st.composite
def heads(draw, qtype: str, max_vocab: int = 40, max_rows: int = 11):
    """A moderate random table (test_as_linear.moderate) and x [1..max_rows, dims] of any dtype."""
    blocks = draw(st.integers(1, 2))
    vocab = draw(st.integers(1, max_vocab))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    data = moderate(random_table_bytes(rng, qtype, vocab, 256 * blocks), qtype)
    rows = draw(st.integers(1, max_rows))
    x = mx.array(rng.standard_normal((rows, 256 * blocks)).astype(np.float32)).astype(
        draw(st.sampled_from(list(X_DTYPES)))
    )
    return Table.from_bytes(data, qtype, 256 * blocks), dequantized(data, qtype), x


@needs_cxx
@pytest.mark.parametrize("qtype", IQ)
@settings(max_examples=3, deadline=None)
@given(problem=st.data())
def test_random_heads_on_the_ops_path_and_in_the_cpu_dialect(qtype, problem):
    table, W, x = problem.draw(heads(qtype))
    warps = problem.draw(st.integers(1, 3))
    for out in (
        as_linear(table, x, backend="ops"),
        cpu_matvec(table, x, warps),
        cpu_bytedot(table, x, warps),
        cpu_mma(table, x, warps),
    ):
        assert_close(out, x, W)


@needs_cxx
@pytest.mark.parametrize("qtype", IQ)
@settings(max_examples=2, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(problem=st.data())
def test_random_heads_in_the_generated_metal_source(capfd, qtype, problem):
    table, W, x = problem.draw(heads(qtype, max_vocab=12))
    assert_close(metal_matvec(table, x, capfd, problem.draw(st.integers(1, 3))), x, W)


# ---- IQ1_M's d, spread over the top nibbles of its four scale words


def test_iq1_m_spread_scale_is_checked_where_gguf_py_finds_it_non_finite():
    """check_table reads IQ1_M's d from the four nibbles (Format.float_spread): the blocks whose
    d has an all-ones exponent are those gguf-py dequantizes to NaN or Inf, and only they."""
    fmt = FORMATS["IQ1_M"]
    rng = np.random.default_rng(11)
    data = random_table_bytes(rng, "IQ1_M", 40, 512)
    blocks = data.reshape(-1, fmt.block_bytes)
    bad = rng.permutation(blocks.shape[0])[:7]
    words = np.ascontiguousarray(blocks[:, 48:56]).view("<u2")
    d = fmt.float_fields(words)
    d[bad] |= 0x7C00  # exponent all ones: Inf, or NaN where the mantissa is not 0
    blocks[:, 48:56] = fmt.spread_float_fields(words, d).view(np.uint8)
    with np.errstate(invalid="ignore", over="ignore"):
        values = gguf.quants.dequantize(data, gguf.GGMLQuantizationType.IQ1_M).reshape(-1, 256)
    non_finite = ~np.isfinite(values).all(axis=1)
    assert sorted(np.flatnonzero(non_finite)) == sorted(bad)
    report = check_table(Table.from_bytes(data, "IQ1_M", 512))
    assert report.n_bad_blocks == 7 and report.bad_rows == sorted(set((bad // 2).tolist()))


# ---- on the GPU (the lead's H200 run; skipped elsewhere)


@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize("qtype", IQ)
@pytest.mark.parametrize("dtype", DTYPES)
def test_gpu_gather(qtype, dtype):
    """The fixture, and a Glimmer-wide random table (one block per warp: the UNIFORM loads) at
    4,096 ids, bit for bit; also through mx.compile (small batches)."""
    table, expected = fixture_table(qtype)
    ids = np.arange(300)
    assert_bits_equal(embedding(table, mx.array(ids), dtype, backend=GPU), expected, dtype)
    data = random_table_bytes(np.random.default_rng(2), qtype, 500, 6656)
    wide = Table.from_bytes(data, qtype, 6656)
    ids = np.random.default_rng(3).integers(0, 500, 4096)
    assert_bits_equal(embedding(wide, mx.array(ids), dtype, backend=GPU), reference(data, qtype, ids), dtype)
    assert_bits_equal(embedding(wide, mx.array(ids[:3]), dtype, backend=GPU), reference(data, qtype, ids[:3]), dtype)


@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize("qtype", IQ)
def test_gpu_heads(qtype):
    """Every head kernel the package picks, and each kernel alone, on the fixture and a random
    moderate table, 1-17 rows of x in every dtype."""
    table, expected = fixture_table(qtype)
    rng = np.random.default_rng(4)
    data = moderate(random_table_bytes(rng, qtype, 1001, 512), qtype)
    device = backends.BACKENDS[GPU]
    for t, W in ((table, expected.astype(np.float64)), (Table.from_bytes(data, qtype, 512), dequantized(data, qtype))):
        for dtype in X_DTYPES:
            for n in (1, 2, 9, 17):
                x = mx.array(rng.standard_normal((n, 512)).astype(np.float32)).astype(dtype)
                assert_close(as_linear(t, x, backend=GPU), x, W)
                assert_close(head.matvec(t, x, GPU), x, W)
                if device.byte_dots:
                    assert_close(head.bytedot(t, x, GPU), x, W)
                if device.matrix_units():
                    assert_close(head.mma(t, x, GPU), x, W)
