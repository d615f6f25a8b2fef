"""as_linear: logits from the quantized table against gguf-py's dequantization in float64.

Error measure: for every logit, |out - ref| <= tol * (|x| @ |W|.T) (+ the dtype's smallest normal).
The right side is the size of the terms the dot product sums: any float32 summation's error is
bounded by it, while |ref| itself can cancel to ~0 (there a relative error means nothing). The
named-case test on the real tiny-llama table also checks the per-row max|err| / max|ref|.
float32 x: tol 1e-5. float16 / bfloat16 x: tol 2 eps of the dtype (weights rounded to it on the
tiled path, the output rounded once).
"""

from __future__ import annotations

import logging

import gguf
import mlx.core as mx
import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import muser_mlx
from muser_mlx import FORMATS, Embedding, Table, as_linear
from muser_mlx.backends import _GPU_BACKEND, head, tuning
from muser_mlx.backends.head import bytedot_launch, mma_operands, x_planes

from conftest import (
    FIXTURES,
    fixture,
    map_float_fields,
    random_table_bytes,
    top_exponent_bit,
    write_out,
    zero_table,
)
from kernel_harness import cpu_bytedot, cpu_matvec, cpu_mma, cpu_tile_mma, cpu_x_runs, metal_matvec

ALL_QTYPES = tuple(sorted(FORMATS))
QUANTIZED = sorted(q for q, f in FORMATS.items() if f.quantized)
MMA_TILES = [(1, 1), (1, 2), (2, 1), (4, 2), (2, 4)]  # (VTILES, XTILES)

X_DTYPES = {mx.float32: 1e-5, mx.float16: 2 * 2.0**-10, mx.bfloat16: 2 * 2.0**-7}
SMALLEST_NORMAL = {mx.float32: 2.0**-126, mx.float16: 2.0**-14, mx.bfloat16: 2.0**-126}
SETTINGS = settings(deadline=None, max_examples=15)


def dequantized(data: np.ndarray, qtype: str) -> np.ndarray:
    """The whole table through gguf-py, float64 [vocab, dims]."""
    return gguf.quants.dequantize(data, gguf.GGMLQuantizationType[qtype]).astype(np.float64)


def moderate(data: np.ndarray, qtype: str) -> np.ndarray:
    """Clear the top exponent bit and exponent bit 2 of every float field (the scales, or the
    values of F32/F16/BF16): exponent <= bias - 4, so |field| < 2^-3 and logits of unit-size x
    stay far inside float16's range (random f16 scales reach 65,504)."""

    def small(field, kind):
        top_bit, bit_2 = top_exponent_bit(kind), (kind.exponent & -kind.exponent) << 2
        return field & field.dtype.type(~(top_bit | bit_2) & np.iinfo(field.dtype).max)

    map_float_fields(data.reshape(-1, FORMATS[qtype].block_bytes), qtype, small)
    return data


def assert_close(out: mx.array, x: mx.array, W: np.ndarray) -> None:
    assert out.dtype == x.dtype and out.shape == (*x.shape[:-1], W.shape[0])
    x64 = np.array(x.astype(mx.float32)).astype(np.float64)
    ref, terms = x64 @ W.T, np.abs(x64) @ np.abs(W).T
    err = np.abs(np.array(out.astype(mx.float32)).astype(np.float64) - ref)
    bound = X_DTYPES[x.dtype] * terms + SMALLEST_NORMAL[x.dtype]
    assert np.all(np.isfinite(ref)) and np.all(err <= bound), f"worst err/bound {np.max(err / bound):.3g}"


@st.composite
def problems(draw, max_vocab=40, max_rows=12, ndims=(1, 2, 3), qtypes=ALL_QTYPES):
    """(table, raw bytes, x): moderate random table of any of ``qtypes``, x of 1 to 3 dims."""
    qtype = draw(st.sampled_from(qtypes))
    block = FORMATS[qtype].block_values
    dims = block * draw(st.integers(1, 3)) if block > 1 else draw(st.sampled_from([1, 3, 8, 24, 64]))
    vocab = draw(st.integers(1, max_vocab))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    data = moderate(random_table_bytes(rng, qtype, vocab, dims), qtype)
    lead = draw(st.sampled_from([s for s in [(), (3,), (2, 2), (max_rows,), (1, max_rows)] if len(s) + 1 in ndims]))
    dtype = draw(st.sampled_from(list(X_DTYPES)))
    x = mx.array(rng.standard_normal((*lead, dims)).astype(np.float32)).astype(dtype)
    return Table.from_bytes(data, qtype, dims), data, x


@SETTINGS
@given(problems())
def test_as_linear_matches_float64_reference(problem):
    table, data, x = problem
    assert_close(as_linear(table, x, backend="ops"), x, dequantized(data, table.qtype))


@SETTINGS
@given(problems(), st.sampled_from([1, 3, 64]))
def test_tiles_of_any_size_give_the_same_logits(problem, tile_rows):
    table, data, x = problem
    flat = x.reshape(-1, table.dims)
    with tuning.fixed(TILE_BYTES=tile_rows * table.dims * x.dtype.size, TILE_ALIGN=1):
        assert_close(head.tiled(table, flat, "ops"), flat, dequantized(data, table.qtype))


@settings(deadline=None, max_examples=10)
@given(problems(max_vocab=12, max_rows=11, ndims=(2,)), st.integers(1, 14), st.sampled_from([None, 32]))
def test_cpu_matvec_kernel(problem, warps, values):
    """The shared kernel source, CPU dialect; warps < vocab grid-stride, warps > vocab idle;
    values 32 (where dims allow): a lane takes two runs per step."""
    table, data, x = problem
    with tuning.fixed(MATVEC_VALUES=values or tuning.MATVEC_VALUES):
        assert_close(cpu_matvec(table, x, warps), x, dequantized(data, table.qtype))


@settings(deadline=None, max_examples=10)
@given(problems(max_vocab=70, max_rows=20, ndims=(2,), qtypes=QUANTIZED), st.integers(1, 3), st.sampled_from(MMA_TILES))
def test_cpu_mma_kernel(problem, warps, tiles):
    """kernels/mma.h, CPU dialect (the warp multiply emulated with PTX's fragment layout); up to
    70 table rows: 1-3 warps of 16-64 rows grid-stride or idle; 1-20 rows of x: 1-3 passes."""
    table, data, x = problem
    with tuning.fixed(MMA_VTILES=tiles[0], MMA_XTILES=tiles[1], MMA_ONE_PASS_FORMATS=frozenset()):
        assert_close(cpu_mma(table, x, warps), x, dequantized(data, table.qtype))


@pytest.mark.parametrize("qtype", QUANTIZED)
def test_cpu_mma_reads_x_sums_where_the_decoder_has_offsets(qtype):
    """kernels/mma.h, CPU dialect, every quantized format: x's run sums are made only for the
    formats whose header declares offsets (head.run_offsets), one zero in their place for the
    others, and the logits are right either way (a format with offsets given the zero would not
    be)."""
    rng = np.random.default_rng(8)
    dims = 2 * FORMATS[qtype].block_values
    data = moderate(random_table_bytes(rng, qtype, 40, dims), qtype)
    table = Table.from_bytes(data, qtype, dims)
    x = mx.array(rng.standard_normal((16, dims)).astype(np.float32)).astype(mx.float16)
    offsets = head.run_offsets(table)
    assert mma_operands(x, 16, offsets)[1].shape == ((dims // 16, 16) if offsets else (1, 1))
    assert_close(cpu_mma(table, x, 2), x, dequantized(data, qtype))


PAIRED = [q for q in QUANTIZED if FORMATS[q].block_values >= 64]  # blocks of at least two runs


@pytest.mark.parametrize("qtype", PAIRED)
def test_cpu_mma_run_pairs_are_the_same_sums(qtype):
    """kernels/mma.h, CPU dialect, with its lanes decoding two runs at a time and exchanging halves
    (PAIRS 2) for every format whose blocks hold pairs of runs: the same logits, bit for bit, as a
    decode of each run (PAIRS 1), since each lane multiplies the same values in the same order; and
    within the float64 bound. Float16, bfloat16 and float32 x, one and two passes of x."""
    rng = np.random.default_rng(7)
    fmt = FORMATS[qtype]
    dims = 2 * fmt.block_values
    data = moderate(random_table_bytes(rng, qtype, 37, dims), qtype)
    table = Table.from_bytes(data, qtype, dims)
    every = {tiles: {qtype: 2} for tiles in {*MMA_TILES, (4, 1)}}
    for dtype, rows in ((mx.float16, 11), (mx.bfloat16, 20), (mx.float32, 5)):
        x = mx.array(rng.standard_normal((rows, dims)).astype(np.float32)).astype(dtype)
        with tuning.fixed(MMA_RUN_PAIRS=every, MMA_FLOAT32_RUN_PAIRS=every):
            assert head.mma_launch(table, x).define("PAIRS") == 2
            paired = cpu_mma(table, x, 2)
        with tuning.fixed(MMA_RUN_PAIRS={}, MMA_FLOAT32_RUN_PAIRS={}):
            single = cpu_mma(table, x, 2)
        assert np.array_equal(np.array(paired.astype(mx.float32)), np.array(single.astype(mx.float32)))
        assert_close(paired, x, dequantized(data, qtype))


@settings(deadline=None, max_examples=10)
@given(
    problems(max_vocab=40, max_rows=11, ndims=(2,), qtypes=QUANTIZED),
    st.integers(1, 3),
    st.sampled_from([2, 4, 8]),
    st.sampled_from([1, 2, 4]),
)
def test_cpu_bytedot_kernel(problem, warps, vrows, runs):
    """kernels/bytedot.h, CPU dialect (dp4a emulated): grid-stride and idle warps, every pass
    width, every lane layout (RUNS 2 or 4 where dims allow, else fewer), VROWS capped at 32 / ROWS."""
    table, data, x = problem
    with tuning.fixed(BYTEDOT_VROWS=vrows, BYTEDOT_VROWS_BY_FORMAT={}, BYTEDOT_RUNS=runs, BYTEDOT_RUNS_BY_FORMAT={}):
        assert_close(cpu_bytedot(table, x, warps), x, dequantized(data, table.qtype))


def assert_bytedot_at_runs(qtype: str, runs: int, shape: tuple[int, int, int], warps: int, seed: int) -> None:
    """kernels/bytedot.h, CPU dialect, at RUNS runs a lane: a random moderate table of vocab x dims
    against rows of float16 x, shape (vocab, dims, rows)."""
    vocab, dims, rows = shape
    rng = np.random.default_rng(seed)
    data = moderate(random_table_bytes(rng, qtype, vocab, dims), qtype)
    table = Table.from_bytes(data, qtype, dims)
    x = mx.array(rng.standard_normal((rows, dims)).astype(np.float32)).astype(mx.float16)
    with tuning.fixed(BYTEDOT_VROWS_BY_FORMAT={}, BYTEDOT_RUNS=runs, BYTEDOT_RUNS_BY_FORMAT={}):
        assert bytedot_launch(table, x).define("RUNS") == runs
        assert_close(cpu_bytedot(table, x, warps=warps), x, dequantized(data, qtype))


@pytest.mark.parametrize("runs", [1, 2, 4])
@pytest.mark.parametrize("qtype", ["Q2_K", "TQ2_0", "Q3_K", "IQ1_M", "Q4_0", "IQ2_XXS", "IQ3_S", "Q4_K"])
def test_cpu_bytedot_run_levels(qtype, runs):
    """Each way a lane of kernels/bytedot.h decodes its runs: one run; two runs as 32 values from
    i (Q4_0; IQ2_XXS and IQ3_S, a sub-block's), twice at four runs; runs i + 32 q one level_bytes
    each (Q4_K), and together from one load of their shared bytes (Q2_K, TQ2_0: run_levels,
    format_two_bits.h; Q3_K's hmask too; IQ1_M's scales and d). 40 rows x 768 values: 12 lanes of
    64 values, or 6 of 128 at four runs."""
    assert_bytedot_at_runs(qtype, runs, (40, 768, 3), warps=3, seed=5)


@pytest.mark.parametrize("runs", [1, 2, 4])
@pytest.mark.parametrize("qtype", ["Q4_0", "Q2_K", "Q3_K", "Q4_K", "Q6_K", "IQ3_S", "IQ1_S", "IQ4_XS", "TQ1_0"])
def test_cpu_bytedot_lanes_take_several_steps(qtype, runs):
    """A lane of kernels/bytedot.h over 2-8 steps (4,096 values: 512 RUNS a step): the formats
    that take step offsets (formats.h: TQ1_0, IQ1_S, IQ4_XS; blocks of 54, 50 and 136 bytes) and
    others (32-value blocks; Q2_K's and Q3_K's run_levels)."""
    assert_bytedot_at_runs(qtype, runs, (5, 4096, 2), warps=2, seed=6)


def run_maxima(x: np.ndarray) -> np.ndarray:
    """Each value of x [n, dims] replaced by the largest |x| of its run of 16."""
    m = np.abs(x).reshape(x.shape[0], -1, 16).max(axis=-1)
    return np.repeat(m, 16, axis=-1)


def spread_within_runs(problem, seed: int) -> tuple[Table, np.ndarray, mx.array]:
    """problems()'s (table, W, x) with x spread over 2^+-30 (float16: 2^+-6) within each run of 16
    values, its float16 logits finite (else hypothesis draws again)."""
    table, data, x = problem
    rng = np.random.default_rng(seed)
    spread = 6 if x.dtype == mx.float16 else 30
    wide = np.array(x.astype(mx.float32)) * np.exp2(rng.integers(-spread, spread + 1, x.shape)).astype(np.float32)
    x = mx.array(wide).astype(x.dtype)
    W = dequantized(data, table.qtype)
    assume(x.dtype != mx.float16 or np.abs(np.array(x.astype(mx.float32)) @ W.T).max() < 2.0**14)
    return table, W, x


def assert_within_run_rounding(out: mx.array, x: mx.array, W: np.ndarray, planes: int) -> None:
    """The byte dot products' bound: x's integers keep 7 * PLANES bits below each run's largest |x|
    (kernels/xruns.h), so the error is dtype rounding plus 2^-(7 * PLANES) of the run maxima against
    |W|, not bounded by the small values' own size."""
    x64 = np.array(x.astype(mx.float32)).astype(np.float64)
    out64 = np.array(out.astype(mx.float32)).astype(np.float64)
    bound = X_DTYPES[x.dtype] * (np.abs(x64) @ np.abs(W).T) + 2.0 ** -(7 * planes) * (run_maxima(x64) @ np.abs(W).T)
    assert np.all(np.abs(out64 - x64 @ W.T) <= bound + SMALLEST_NORMAL[x.dtype])


@settings(deadline=None, max_examples=10)
@given(problems(max_vocab=12, max_rows=3, ndims=(2,), qtypes=QUANTIZED), st.integers(0, 2**32 - 1))
def test_bytedot_error_is_bounded_by_each_runs_largest_x(problem, seed):
    """x spread within each run (spread_within_runs): bytedot's error within the byte dot products'
    bound (assert_within_run_rounding), not the small values' own size."""
    table, W, x = spread_within_runs(problem, seed)
    assert_within_run_rounding(cpu_bytedot(table, x), x, W, bytedot_launch(table, x).define("PLANES"))


def decoded_records(records: np.ndarray, planes: int) -> tuple[np.ndarray, ...]:
    """kernels/xruns.h's records [n, runs, words] -> (X [n, runs, 16] from the byte planes, the
    stored plane sums and the sums of the planes' bytes [n, runs, planes], the stored unit and
    sum(X) [n, runs] as float32, the padding words)."""
    words = records.reshape(*records.shape[:2], -1)
    plane_bytes = words[..., : 4 * planes].copy().view(np.uint8).reshape(*words.shape[:2], planes, 16).astype(np.int64)
    plane_bytes[..., -1, :] = plane_bytes[..., -1, :].astype(np.uint8).view(np.int8)  # the top plane is signed
    X = sum(plane_bytes[..., p, :] * 256**p for p in range(planes))
    sums = words[..., 4 * planes : 5 * planes].view(np.int32)
    unit, total = (words[..., 5 * planes + k].view(np.float32) for k in (0, 1))
    return X, sums, plane_bytes.sum(axis=-1), unit, total, words[..., 5 * planes + 2 :]


@settings(deadline=None, max_examples=30)
@given(
    st.integers(1, 3),
    st.integers(1, 3),
    st.sampled_from(list(X_DTYPES)),
    st.integers(-20, 20),
    st.integers(0, 2**32 - 1),
)
def test_x_runs_hold_each_run_as_integers_of_a_power_of_two_unit(n, blocks, dtype, scale, seed):
    """kernels/xruns.h (CPU dialect), x spread over 2^+-30 (float16: 2^+-6) within runs: per run
    of 16 values, unit is a power of two, X = rint(x / unit) exactly, so each x is off by at most
    2^-(7 * PLANES) of its run's largest |x|; the byte planes, their sums and sum(X) agree; the
    padding is zeros."""
    rng = np.random.default_rng(seed)
    dims, spread = 32 * blocks, 6 if dtype == mx.float16 else 30
    scale = max(-6, min(scale, 6)) if dtype == mx.float16 else scale
    values = rng.standard_normal((n, dims)) * np.exp2(scale + rng.integers(-spread, spread + 1, (n, dims)))
    x = mx.array(values.astype(np.float32)).astype(dtype)
    table = Table.from_bytes(random_table_bytes(rng, "Q8_0", 1, dims), "Q8_0", dims)  # x_runs reads its dims
    planes = x_planes(x.dtype)
    X, sums, plane_sums, unit, total, padding = decoded_records(np.array(cpu_x_runs(table, x)), planes)
    xf = np.array(x.astype(mx.float32)).astype(np.float64).reshape(n, -1, 16)
    assert np.all(np.frexp(unit)[0] == 0.5)  # powers of two
    assert np.array_equal(X, np.rint(xf / unit[..., None]))
    largest = run_maxima(xf.reshape(n, dims)).reshape(xf.shape)
    assert np.all(np.abs(xf - unit[..., None] * X) <= np.maximum(2.0 ** -(7 * planes) * largest, 2.0**-127))
    assert np.array_equal(sums, plane_sums) and np.array_equal(total, X.sum(axis=-1).astype(np.float32))
    assert not padding.any()


def test_bytedot_non_finite_x_gives_nan_logits():
    """A NaN or an infinity in a row of x makes that row's logits NaN; the other rows are untouched."""
    rng = np.random.default_rng(3)
    data = moderate(random_table_bytes(rng, "Q4_K", 20, 256), "Q4_K")
    table, W = Table.from_bytes(data, "Q4_K", 256), dequantized(data, "Q4_K")
    x = rng.standard_normal((3, 256)).astype(np.float32)
    x[0, 5], x[2, 200] = np.inf, np.nan
    for dtype in X_DTYPES:
        out = np.array(cpu_bytedot(table, mx.array(x).astype(dtype)).astype(mx.float32))
        assert np.isnan(out[[0, 2]]).all()
        assert_close(mx.array(out[1:2]).astype(dtype), mx.array(x[1:2]).astype(dtype), W)


@settings(deadline=None, max_examples=50)
@given(
    st.lists(
        st.floats(-(2.0**100), 2.0**100, width=32).filter(lambda v: v == 0 or abs(v) > 2.0**-100),
        min_size=16,
        max_size=16,
    )
)
def test_float32_x_is_three_exact_bfloat16_terms(values):
    """The matrix units take float32 x as bfloat16 terms that sum to it exactly."""
    x = mx.array(np.array(values, np.float32).reshape(1, 16))
    xh, x_sums = mma_operands(x, 8)
    assert xh.shape == (3, 8, 16) and xh.dtype == mx.bfloat16
    terms = np.array(xh.astype(mx.float32)).astype(np.float64)
    assert np.array_equal(terms[:, 0].sum(axis=0), np.array(values, np.float64))
    assert not terms[:, 1:].any()  # the padding rows
    v = np.array(values, np.float64)
    assert x_sums.shape == (1, 8) and abs(np.array(x_sums)[0, 0] - v.sum()) <= 16 * 2.0**-24 * np.abs(v).sum()


@settings(deadline=None, max_examples=6, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(problems(max_vocab=12, max_rows=11, ndims=(2,)), st.integers(1, 14))
def test_generated_metal_matvec_kernel(capfd, problem, warps):
    """The Metal source MLX generates from the package's registration, run on the CPU (capfd:
    each example's source is read back from MLX's printout)."""
    table, data, x = problem
    assert_close(metal_matvec(table, x, capfd, warps), x, dequantized(data, table.qtype))


@pytest.mark.parametrize("rows", [1, 5, 8, 9, 40])
def test_real_table_relative_error(rows):
    """tiny-llama's Q4_K token_embd (1,003 x 512, edge-case rows 0-7): per row of logits,
    max|err| / max|ref| < 1e-5 for float32 x, on the ops path and the CPU-run kernels."""
    table = Table.from_gguf(fixture("tiny-llama-Q4_K_M.gguf"))
    W = dequantized(np.array(table.data), table.qtype)
    x = mx.array(np.random.default_rng(rows).standard_normal((rows, table.dims)).astype(np.float32))
    ref = np.array(x).astype(np.float64) @ W.T
    for out in (
        as_linear(table, x),
        cpu_matvec(table, x, warps=4),
        cpu_mma(table, x, warps=4),
        cpu_bytedot(table, x, warps=4),
    ):
        err = np.abs(np.array(out).astype(np.float64) - ref).max(axis=1)
        assert np.all(err / np.abs(ref).max(axis=1) < 1e-5)


@pytest.mark.parametrize("qtype", sorted(FORMATS))
def test_every_format_on_every_head_path(capfd, qtype):
    """Per format, a moderate random table (40 x 512) and, for the quantized ones, the first 40 rows
    of its llama.cpp-quantized table (types/, edge-case rows 0-8 included): the ops path, the CPU
    dialect's matvec, byte dot products and matrix units, and the generated Metal matvec."""
    rng = np.random.default_rng(11)
    tables = [moderate(random_table_bytes(rng, qtype, 40, 512), qtype)]
    if FORMATS[qtype].quantized and (FIXTURES / "types" / f"{qtype}.gguf").is_file():
        tables.append(np.array(Table.from_gguf(FIXTURES / "types" / f"{qtype}.gguf").data)[:40])
    for data in tables:
        table, W = Table.from_bytes(data, qtype, 512), dequantized(data, qtype)
        for rows, dtype in ((1, mx.float16), (9, mx.float32)):
            x = mx.array(rng.standard_normal((rows, 512)).astype(np.float32)).astype(dtype)
            heads = [
                as_linear(table, x, backend="ops"),
                cpu_matvec(table, x, warps=2),
                metal_matvec(table, x, capfd, 2),
            ]
            if table.format.quantized:
                heads += [cpu_bytedot(table, x, warps=2), cpu_mma(table, x, warps=1)]
            for out in heads:
                assert_close(out, x, W)


@pytest.mark.parametrize("qtype", ["Q4_K", "Q8_0", "IQ2_XXS", "MXFP4", "F32"])
def test_cpu_tile_mma_kernel(qtype):
    """kernels/tile_mma.h, CPU dialect (threadgroups of 256 threads; ldmatrix and the matrix unit
    emulated with PTX's fragment layouts): a table of two tiles of 128 rows, the last short and its
    length off a multiple of 8, and 16-byte stores on a vocab of a multiple of 8; each XROWS with
    partial x tiles; a raw chunk split by the end of a row (Q8_0: dims 320 are a chunk and a
    half); x off a 16-byte boundary."""
    rng = np.random.default_rng(11)
    dims = 320 if qtype == "Q8_0" else 256
    for vocab in (133, 136):
        data = moderate(random_table_bytes(rng, qtype, vocab, dims), qtype)
        table, W = Table.from_bytes(data, qtype, dims), dequantized(data, qtype)
        for dtype, n in ((mx.float16, 20), (mx.float16, 40), (mx.bfloat16, 70)):
            x = mx.array(rng.standard_normal((n, dims)).astype(np.float32)).astype(dtype)
            assert_close(cpu_tile_mma(table, x), x, W)
    x = mx.array(rng.standard_normal((1, 3, dims)).astype(np.float32)).astype(mx.float16)
    assert_close(cpu_tile_mma(table, x, offset=1), x, W)


@pytest.mark.parametrize("dtype", [mx.float16, mx.bfloat16])
@pytest.mark.parametrize("lead", [(2, 35), (4, 32)])
def test_x_steps_is_x_in_the_stages_layout(dtype, lead):
    """head.x_steps, what the warpgroups' bulk copies read, against the layout stated in NumPy:
    x tile t, step s, row q holds x row t * XROWS + q (zeros past x's rows), values s * 32 ..,
    value k at (k / 8 ^ q / 2 % 4) * 8 + k % 8 (kernels/tile_mma.h: tile_at). x of 3 dims, its rows
    not a multiple of XROWS (70: padded) and a multiple (128: not)."""
    rng = np.random.default_rng(3)
    xrows, dims = 64, 96
    x = mx.array(rng.standard_normal((*lead, dims)).astype(np.float32)).astype(dtype)
    n = lead[0] * lead[1]
    tiles = -(-n // xrows)
    padded = np.zeros((tiles * xrows, dims), np.float32)
    padded[:n] = np.array(x.astype(mx.float32)).reshape(n, dims)
    want = np.zeros((tiles, dims // 32, xrows, 32), np.float32)
    for q in range(xrows):
        at = np.array([(k // 8 ^ q // 2 % 4) * 8 + k % 8 for k in range(32)])
        for t in range(tiles):
            for s in range(dims // 32):
                want[t, s, q, at] = padded[t * xrows + q, 32 * s : 32 * s + 32]
    steps = head.x_steps(x, xrows)
    assert steps.dtype == dtype and steps.shape == want.shape
    assert np.array_equal(np.array(steps.astype(mx.float32)), want)


@pytest.mark.parametrize("qtype", ["Q4_K", "Q8_0", "IQ2_XXS", "F32"])
def test_cpu_tile_mma_by_warpgroups(qtype):
    """kernels/tile_mma.h multiplied by warpgroups (WARPGROUP), CPU dialect: each warp's share of
    wgmma emulated with B read through the 64-byte swizzle of its shared addresses, so x's tiles
    as tile_at lays them out must be what wgmma reads. XROWS 64 (from one row, as tuning allows),
    128 and 256 (512 threads in two groups of x rows, steps of 64 values but for F32, whose chunk of
    64 values is one such step), partial x tiles, a vocab off a multiple of 128 and of 8, x off a
    16-byte boundary (x_steps, its own array, is what the bulk copies read); F32's chunks of two
    steps leave fewer x stages than the output tile of 256 rows needs. A bulk copy's bytes land only when a thread
    waits on its stage's barrier (cpu_runtime.h: BulkCopies), so the test fails without the wait."""
    rng = np.random.default_rng(13)
    data = moderate(random_table_bytes(rng, qtype, 133, 256), qtype)
    table, W = Table.from_bytes(data, qtype, 256), dequantized(data, qtype)
    with tuning.fixed(TILE_WGMMA_MIN_ROWS=1):
        for dtype, n in ((mx.float16, 40), (mx.bfloat16, 70), (mx.float16, 130)):
            x = mx.array(rng.standard_normal((n, 256)).astype(np.float32)).astype(dtype)
            launch = head.tile_mma_launch(table, x, warpgroups=True)
            assert launch.define("WARPGROUP") == 1 and launch.define("XROWS") == {40: 64, 70: 128, 130: 256}[n]
            assert launch.define("THREADS") == (512 if n == 130 else 256)
            assert launch.define("STEP_K") == (64 if n == 130 and qtype != "F32" else 32)
            assert_close(cpu_tile_mma(table, x, warpgroups=True), x, W)
        x = mx.array(rng.standard_normal((1, 70, 256)).astype(np.float32)).astype(mx.float16)
        assert_close(cpu_tile_mma(table, x, offset=1, warpgroups=True), x, W)


def test_warpgroups_take_the_rows_measured(monkeypatch):
    """On a GPU with warpgroup multiplies (CUDA compute capability 9.0 alone) the tiled matrix
    multiply takes 16-bit x from TILE_WGMMA_MIN_ROWS to TILE_WGMMA_MAX_ROWS rows by warpgroups
    (to TILE_WGMMA_SHORT_MAX_ROWS for rows of fewer than TILE_WGMMA_LONG_DIMS values, to
    TILE_WGMMA_MID_MAX_ROWS for TILE_WGMMA_MID_FORMATS; its XSTAGES TILE_WGMMA_X_STAGES, or where
    512 threads unroll the loop TILE_WGMMA_UNROLLED_X_STAGES) for every format but F32's
    (TILE_WGMMA_TILED_FORMATS), fewer rows by warps as before, and more the tiled matmul; a GPU without them keeps the warps' ranges."""
    device = muser_mlx.backends.device
    monkeypatch.setattr(mx.cuda, "is_available", lambda: True)
    for capability, has in (((9, 0), True), ((8, 0), False), ((10, 0), False), ((12, 1), False)):
        info = {"compute_capability_major": capability[0], "compute_capability_minor": capability[1]}
        monkeypatch.setattr(mx, "device_info", lambda info=info: info)
        device.cuda_capability.cache_clear()
        assert device.cuda_warpgroups() is has, capability
    device.cuda_capability.cache_clear()
    monkeypatch.setattr(device, "cuda_compute_capability", lambda: 9)
    monkeypatch.setattr(device, "cuda_group_shared", lambda: 227 << 10)
    monkeypatch.setattr(device, "cuda_warpgroups", lambda: True)
    rng = np.random.default_rng(7)
    first = tuning.TILE_WGMMA_MIN_ROWS
    long_dims = tuning.TILE_WGMMA_LONG_DIMS
    assert tuning.TILE_WGMMA_SHORT_MAX_ROWS < tuning.TILE_WGMMA_MAX_ROWS
    assert tuning.TILE_WGMMA_MID_MAX_ROWS < tuning.TILE_WGMMA_MAX_ROWS
    cases = (
        ("Q4_K", 256),
        ("Q8_0", 256),
        ("Q6_K", long_dims),
        ("BF16", 256),
        ("Q4_K", long_dims),
        ("IQ3_S", long_dims),
        ("Q4_0", long_dims + 64),  # 33 steps of 64: not whole chunks of them, so not unrolled
    )
    for qtype, dims in cases:  # tables of TILE_WGMMA_MIN_VOCAB rows (fewer: test_small_tables_take_no_warpgroup_form)
        table = zero_table(qtype, tuning.TILE_WGMMA_MIN_VOCAB, dims)
        if dims < long_dims:
            last = tuning.TILE_WGMMA_SHORT_MAX_ROWS
        else:
            mid = qtype in tuning.TILE_WGMMA_MID_FORMATS
            last = tuning.TILE_WGMMA_MID_MAX_ROWS if mid else tuning.TILE_WGMMA_MAX_ROWS
        for dtype in (mx.float16, mx.bfloat16):
            if qtype == "BF16" and dtype == mx.bfloat16:
                continue  # MLX's matmul on its bytes
            for n, warpgroup in ((first - 1, False), (first, True), (last, True)):
                assert head.choose(table, n, dtype, "cuda") == "tile_mma", (qtype, n)
                launch = head.tile_mma_launch(table, mx.zeros((n, dims), dtype), warpgroups=True)
                assert launch.define("WARPGROUP") == int(warpgroup), (qtype, n)
                if warpgroup:  # unrolled, with a power of two of stages, in the 512-thread form
                    steps = launch.define("CHUNK") // launch.define("STEP_K")
                    whole = dims // launch.define("STEP_K") % steps == 0
                    unrolled = launch.define("THREADS") == 512 and whole and qtype in tuning.TILE_WGMMA_UNROLLED
                    stages = tuning.TILE_WGMMA_UNROLLED_X_STAGES if unrolled else tuning.TILE_WGMMA_X_STAGES
                    assert launch.define("XSTAGES") == min(stages, steps), (qtype, n)
                    assert launch.define("UNROLL") == (steps if unrolled else 1), (qtype, n)
            assert head.choose(table, last + 1, dtype, "cuda") == "tiled"
    f32 = Table.from_bytes(random_table_bytes(rng, "F32", 3, 256), "F32", 256)
    assert head.choose(f32, tuning.TILE_MMA_MAX_ROWS, mx.float16, "cuda") == "tile_mma"
    assert head.choose(f32, tuning.TILE_MMA_MAX_ROWS + 1, mx.float16, "cuda") == "tiled"
    monkeypatch.setattr(device, "cuda_warpgroups", lambda: False)
    q8 = Table.from_bytes(random_table_bytes(rng, "Q8_0", 3, 256), "Q8_0", 256)  # not in TILE_MMA_WIDE_FORMATS
    assert head.choose(q8, tuning.TILE_MMA_MAX_ROWS + 1, mx.float16, "cuda") == "tiled"


def one_hot_logits(table: Table, dtype: mx.Dtype, tile_mma) -> tuple[mx.array, mx.array]:
    """(tile_mma's logits of the rows of the identity [dims, dims] in ``dtype``, the transposed
    gather of every row into ``dtype`` by the MLX-ops decoders): logit (m, r) is value m of row r
    times 1 plus zeros, exact in float32 and in ``dtype``, so the two are equal exactly where the
    kernel's decoded values are the gather's."""
    eye = mx.eye(table.dims, dtype=dtype)
    gathered = muser_mlx.backends.bind(table, dtype, "ops")(mx.arange(table.vocab))
    return tile_mma(table, eye), gathered.T


@pytest.mark.parametrize("qtype", ["Q8_0", "Q5_0", "TQ1_0", "NVFP4", "Q4_K"])
def test_cpu_tile_mma_values_are_the_gathers(qtype):
    """kernels/tile_mma.h's decoded values, CPU dialect, equal the gather's in float16 and bfloat16
    for random bytes with finite scales, subnormal ones among them: the formats whose values the
    dialects multiply as float16 numbers (formats.h: half_scale), and two that go through float32."""
    rng = np.random.default_rng(12)
    table = Table.from_bytes(moderate(random_table_bytes(rng, qtype, 120, 256), qtype), qtype, 256)
    for dtype in (mx.float16, mx.bfloat16):
        out, gathered = one_hot_logits(table, dtype, cpu_tile_mma)
        assert mx.array_equal(out, gathered).item()


@pytest.mark.parametrize("stages", [2, 3])
def test_cpu_tile_mma_at_any_depth_of_x(stages):
    """kernels/tile_mma.h, CPU dialect, with x copied 1 or 2 steps ahead (tuning.TILE_MMA_X_STAGES; the
    test above takes the tuned depth): the dialect's copies land only at their group's wait, so a
    step that read an x stage or a chunk before its copies were waited for would fail here."""
    rng = np.random.default_rng(stages)
    data = moderate(random_table_bytes(rng, "Q4_K", 133, 512), "Q4_K")
    table, W = Table.from_bytes(data, "Q4_K", 512), dequantized(data, "Q4_K")
    x = mx.array(rng.standard_normal((40, 512)).astype(np.float32)).astype(mx.float16)
    with tuning.fixed(TILE_MMA_X_STAGES=stages):
        assert_close(cpu_tile_mma(table, x), x, W)


def test_which_head_kernel(monkeypatch):
    """The matrix units take quantized tables on CUDA (compute capability 8+) from MMA_MIN_ROWS
    rows of x (float32 x later: three multiplies per product) to MMA_MAX_ROWS, but 16-bit x from
    TILE_MMA_MIN_ROWS (beyond MMA_MAX_ROWS for the formats of MMA_KEPT_FORMATS) takes any table
    to the tiled matrix multiply, to TILE_MMA_MAX_ROWS (TILE_MMA_WIDE_MAX_ROWS for the
    formats of TILE_MMA_WIDE_FORMATS); byte dot products one row of a
    table of BYTEDOT_MIN_BYTES or more; float tables, smaller tables, float32 x below
    MMA_MIN_ROWS and Metal keep the lane-wise matvec up to MATVEC_MAX_ROWS; beyond, and on the ops
    backend, the tiled matmul, but for a float table of x's own dtype: MLX's matmul on its bytes."""
    monkeypatch.setattr(muser_mlx.backends.device, "cuda_compute_capability", lambda: 9)
    monkeypatch.setattr(muser_mlx.backends.device, "cuda_group_shared", lambda: 227 << 10)
    rng = np.random.default_rng(4)
    q4k = Table.from_bytes(random_table_bytes(rng, "Q4_K", 3, 256), "Q4_K", 256)
    q5_0 = Table.from_bytes(random_table_bytes(rng, "Q5_0", 3, 256), "Q5_0", 256)  # one of MMA_KEPT_FORMATS
    f16 = Table.from_bytes(random_table_bytes(rng, "F16", 3, 256), "F16", 256)
    big = Table.from_bytes(np.zeros((-(-tuning.BYTEDOT_MIN_BYTES // 144), 144), np.uint8), "Q4_K", 256)
    assert head.choose(big, 1, mx.float16, "cuda") == "bytedot"
    assert head.choose(q4k, 1, mx.float16, "cuda") == "matvec"
    with tuning.fixed(BYTEDOT_MIN_BYTES=0):
        assert head.choose(q4k, 1, mx.float16, "cuda") == "bytedot"
    for dtype, first in tuning.MMA_MIN_ROWS.items():
        assert head.choose(q4k, first - 1, dtype, "cuda") in ("bytedot", "matvec")
        assert head.choose(q4k, first, dtype, "cuda") == "mma"
        above = "tile_mma" if dtype != mx.float32 else "tiled"  # float16 and bfloat16 x, any format
        same = dtype == mx.float16  # F16's values are float16 x's dtype: MLX's matmul on its bytes
        for table in (q4k, q5_0):
            start = tuning.tile_mma_min_rows(table.qtype) if dtype != mx.float32 else tuning.MMA_MAX_ROWS + 1
            assert head.choose(table, start - 1, dtype, "cuda") == "mma"
            assert head.choose(table, start, dtype, "cuda") == above
        assert head.choose(q5_0, tuning.MMA_MAX_ROWS, dtype, "cuda") == "mma"
        assert head.choose(f16, tuning.TILE_MMA_MIN_ROWS, dtype, "cuda") == ("float_matmul" if same else above)
        for table in (q4k, f16):  # Q4_K one of TILE_MMA_WIDE_FORMATS, F16 not
            last = tuning.tile_mma_max_rows(table.qtype, table.dims, table.vocab)
            matmul = same and table is f16
            assert head.choose(table, last, dtype, "cuda") == ("float_matmul" if matmul else above)
            assert head.choose(table, last + 1, dtype, "cuda") == ("float_matmul" if matmul else "tiled")
        with tuning.fixed(TILE_MMA_WIDE_FORMATS=frozenset()):
            assert head.choose(q4k, tuning.TILE_MMA_MAX_ROWS + 1, dtype, "cuda") == "tiled"
        assert head.choose(q4k, tuning.TILE_MMA_MIN_ROWS, dtype, "metal") == "tiled"
        assert head.choose(f16, first, dtype, "cuda") == ("float_matmul" if same else "matvec")
        assert head.choose(q4k, first, dtype, "metal") == "matvec"
        assert head.choose(q4k, first, dtype, "ops") == "tiled"
        assert head.choose(f16, tuning.MATVEC_MAX_ROWS + 1, dtype, "cuda") == ("float_matmul" if same else above)
    assert tuning.MMA_MIN_ROWS[mx.float32] > tuning.MMA_MIN_ROWS[mx.float16] > 1
    cases = [
        (big, 1, mx.float32, "cuda", "bytedot"),
        (q4k, 2, mx.float16, "cuda", "mma"),
        (q4k, 2, mx.float32, "cuda", "matvec"),
        (f16, 1, mx.float16, "cuda", "float_matmul"),
        (f16, 1, mx.float32, "cuda", "matvec"),
        (q4k, 1, mx.float16, "metal", "matvec"),
        (q4k, 2, mx.float16, "metal", "matvec"),
    ]
    for table, n, dtype, device, kernel in cases:
        assert head.choose(table, n, dtype, device) == kernel, (table, n, dtype, device)
    assert (
        tuning.MMA_MIN_ROWS[mx.float16]
        < tuning.TILE_MMA_MIN_ROWS
        <= tuning.MMA_MAX_ROWS
        < tuning.tile_mma_min_rows("Q5_0")
    )
    assert tuning.tile_mma_min_rows("Q5_0") <= tuning.TILE_MMA_MAX_ROWS < tuning.tile_mma_max_rows("Q4_K", 256, 3)
    odd = Table.from_bytes(random_table_bytes(rng, "BF16", 3, 48), "BF16", 48)  # dims off whole steps of 32
    assert head.choose(odd, tuning.TILE_MMA_MIN_ROWS, mx.float16, "cuda") == "tiled"
    with pytest.raises(ValueError, match="float16 or bfloat16 x"):
        head.tile_mma(q4k, mx.zeros((40, 256)), "cuda")
    monkeypatch.setattr(muser_mlx.backends.device, "cuda_compute_capability", lambda: 7)
    assert head.choose(q4k, 16, mx.float16, "cuda") == "matvec"
    assert head.choose(q4k, tuning.TILE_MMA_MIN_ROWS, mx.float16, "cuda") == "tiled"


def test_small_tables_take_no_warpgroup_form(monkeypatch):
    """On a device with warpgroup multiplies, a table of fewer than TILE_WGMMA_MIN_VOCAB rows (a
    model's projection) takes kernels/tile_mma.h to TILE_MMA_MAX_ROWS rows of x, its warps' form,
    and the tiled matmul beyond, any format; a larger table the warpgroup form to its maximum."""
    monkeypatch.setattr(muser_mlx.backends.device, "cuda_capability", lambda: (9, 0))
    monkeypatch.setattr(muser_mlx.backends.device, "cuda_group_shared", lambda: 227 << 10)
    for qtype, dims, vocab in (("Q6_K", 2048, 640), ("Q4_K", 1024, 640), ("Q5_0", 640, 2048)):
        for rows in (vocab, tuning.TILE_WGMMA_MIN_VOCAB):
            table = zero_table(qtype, rows, dims)
            last = tuning.tile_mma_max_rows(qtype, dims, rows, True)
            assert (last == tuning.TILE_MMA_MAX_ROWS) == (rows < tuning.TILE_WGMMA_MIN_VOCAB), (qtype, rows, last)
            assert head.choose(table, last, mx.bfloat16, "cuda") == "tile_mma"
            assert head.choose(table, last + 1, mx.bfloat16, "cuda") == "tiled"
            if rows >= tuning.TILE_WGMMA_MIN_VOCAB:
                assert head.tile_mma_launch(table, mx.zeros((last, dims), mx.bfloat16), True).define("WARPGROUP") == 1


@pytest.mark.parametrize("qtype", ["F16", "BF16", "F32"])
def test_float_tables_take_mlx_matmul_on_their_bytes(qtype):
    """A float table whose values are x's dtype: beyond the streamed kernels' rows (on the ops
    backend at any row count; on the CPU extension beyond CPU_MATVEC_MAX_ROWS) the logits are
    MLX's matmul on the table's bytes as they are, bit for bit ``x @ W.T`` of the same values in
    a fresh array, no float copy made; its input gradient likewise ``g @ W``. Another dtype of x
    takes the head it took before."""
    rng = np.random.default_rng(11)
    data = moderate(random_table_bytes(rng, qtype, 16384, 512), qtype)
    table = Table.from_bytes(data, qtype, 512)
    dtype = table.format.values_dtype
    weight = mx.array(dequantized(data, qtype).astype(np.float32)).astype(dtype)
    other = mx.float32 if dtype != mx.float32 else mx.float16
    with tuning.fixed(CPU_MATVEC_MAX_ROWS=tuning.MATVEC_MAX_ROWS):  # macOS's: MLX's matmul is Accelerate's
        for device in ("cpu", "cuda", "metal", "ops"):
            assert head.choose(table, tuning.MATVEC_MAX_ROWS + 1, dtype, device) == "float_matmul"
            assert head.choose(table, 512, other, device) != "float_matmul"
    assert head.choose(table, 1, dtype, "ops") == "float_matmul"
    assert head.choose(table, tuning.CPU_MATVEC_MAX_ROWS, dtype, "cpu") == "cpu_matvec"
    assert head.choose(table, tuning.MATVEC_MAX_ROWS, dtype, "metal") == "matvec"
    cuda = "matvec" if dtype == mx.float32 else "float_matmul"  # float32 x: the exact matvec, whatever TF32 says
    assert head.choose(table, 1, dtype, "cuda") == cuda
    x = mx.array(rng.standard_normal((17, 512)).astype(np.float32)).astype(dtype)
    g = mx.array(rng.standard_normal((17, 16384)).astype(np.float32)).astype(dtype)
    mx.eval(table.data, weight, x, g)
    mx.reset_peak_memory()
    before = mx.get_active_memory()
    backend = _GPU_BACKEND or "ops"  # ops: MLX's matmul at any row count, as on macOS's CPU beyond 16
    (out,), (dx,) = mx.vjp(lambda x: [as_linear(table, x, backend=backend)], [x], [g])
    mx.eval(out, dx)
    assert mx.get_peak_memory() - before < table.nbytes // 2  # the logits, dx, a matmul's workspace: no copy
    assert np.array_equal(np.array(out.astype(mx.float32)), np.array((x @ weight.T).astype(mx.float32)))
    assert np.array_equal(np.array(dx.astype(mx.float32)), np.array((g @ weight).astype(mx.float32)))
    compiled = mx.compile(lambda x: as_linear(table, x, backend=backend))  # the view inside a compiled call
    for n in (1, 17):  # the row counts that take MLX's matmul here (not float32 x's one row on CUDA)
        if head.choose(table, n, dtype, backend) == "float_matmul":
            assert np.array_equal(
                np.array(compiled(x[:n]).astype(mx.float32)), np.array((x[:n] @ weight.T).astype(mx.float32))
            )


def test_module_and_function_agree_under_compile():
    rng = np.random.default_rng(7)
    table = Table.from_bytes(random_table_bytes(rng, "Q4_K", 300, 512), "Q4_K", 512)
    emb = Embedding.from_table(table)
    for shape in [(512,), (3, 512), (2, 20, 512)]:
        x = mx.array(rng.standard_normal(shape).astype(np.float32))
        eager = emb.as_linear(x)
        compiled = mx.compile(emb.as_linear)(x)
        assert eager.shape == (*shape[:-1], 300)
        assert np.array_equal(np.array(eager), np.array(compiled))
        assert np.array_equal(np.array(eager), np.array(muser_mlx.as_linear(table, x)))


def test_lazy_and_never_a_full_float_table():
    """Nothing sizeable is computed before eval; evaluating, eagerly or compiled, holds about a
    tile of floats (1,024 rows here: 4 MiB), far below the float32 table (vocab 16,384 x 1,024:
    64 MiB; its Q4_K bytes are 9 MiB)."""
    rng = np.random.default_rng(3)
    table = Table.from_bytes(random_table_bytes(rng, "Q4_K", 16384, 1024), "Q4_K", 1024)
    x = mx.array(rng.standard_normal((2, 1024)).astype(np.float32))
    mx.eval(table.data, x)
    with tuning.fixed(TILE_BYTES=1024 * 1024 * 4, TILE_DEVICE_SHARE=0):
        as_linear(table, x)  # on CUDA the first call makes the table resident: one pass, once per table
        for logits in (lambda x: as_linear(table, x), mx.compile(lambda x: as_linear(table, x))):
            mx.reset_peak_memory()
            before = mx.get_active_memory()
            out = logits(x)
            assert mx.get_peak_memory() - before < 1024  # a few scalars at most, no tile
            mx.eval(out)
            assert mx.get_peak_memory() - before < 16384 * 1024 * 4 // 4


def test_empty_and_bad_x():
    table = Table.from_bytes(random_table_bytes(np.random.default_rng(0), "F16", 5, 8), "F16", 8)
    assert as_linear(table, mx.zeros((0, 8))).shape == (0, 5)
    assert as_linear(table, mx.zeros((2, 0, 8), mx.float16)).dtype == mx.float16
    with pytest.raises(ValueError, match=r"\[\.\.\., 8\]"):
        as_linear(table, mx.zeros((2, 7)))
    with pytest.raises(TypeError, match="int32"):
        as_linear(table, mx.zeros((2, 8), mx.int32))


@pytest.mark.gpu
@pytest.mark.skipif(_GPU_BACKEND is None, reason="needs MLX's Metal or CUDA backend; this MLX build has neither")
@pytest.mark.parametrize("rows", [1, 3, 8, 9, 40, 100])
@pytest.mark.parametrize("dtype", list(X_DTYPES))
def test_gpu_streamed_and_tiled(rows, dtype):
    rng = np.random.default_rng(rows)
    data = moderate(random_table_bytes(rng, "Q4_K", 5000, 768), "Q4_K")
    table = Table.from_bytes(data, "Q4_K", 768)
    x = mx.array(rng.standard_normal((rows, 768)).astype(np.float32)).astype(dtype)
    with mx.stream(mx.gpu):
        W = dequantized(data, "Q4_K")
        with tuning.fixed(MATVEC_MAX_ROWS=128):  # streamed at every row count here
            assert_close(head.logits(table, x, _GPU_BACKEND), x, W)
        assert_close(head.tiled(table, x, _GPU_BACKEND), x, W)
        # 5,000 rows in tiles of 1,024: the last short
        with tuning.fixed(TILE_BYTES=1024 * 768 * x.dtype.size, TILE_DEVICE_SHARE=0):
            assert_close(head.tiled(table, x, _GPU_BACKEND), x, W)
        assert_close(as_linear(table, x, backend=_GPU_BACKEND), x, W)
        assert_close(mx.compile(lambda x: as_linear(table, x, backend=_GPU_BACKEND))(x), x, W)


@pytest.mark.gpu
@pytest.mark.skipif(_GPU_BACKEND is None, reason="needs MLX's Metal or CUDA backend; this MLX build has neither")
@pytest.mark.parametrize("qtype", sorted(FORMATS))
def test_gpu_matvec_every_format_and_pass_width(qtype):
    """Every format at the layouts the package picks for 1-16 rows of x (partial last passes
    included), a vocab no layout divides evenly: the streamed path (the matrix units from 2 rows
    of a quantized table on CUDA), the lane-wise matvec and (CUDA) the byte dot products."""
    rng = np.random.default_rng(7)
    dims = 512
    data = moderate(random_table_bytes(rng, qtype, 1001, dims), qtype)
    table = Table.from_bytes(data, qtype, dims)
    W = dequantized(data, qtype)
    for n in (1, 2, 3, 8, 13, 16):
        x = mx.array(rng.standard_normal((n, dims)).astype(np.float32))
        assert_close(head.logits(table, x, _GPU_BACKEND), x, W)
        assert_close(head.matvec(table, x, _GPU_BACKEND), x, W)
        if table.format.quantized and _GPU_BACKEND == "cuda":
            assert_close(head.bytedot(table, x, _GPU_BACKEND), x, W)


@pytest.mark.gpu
@pytest.mark.skipif(_GPU_BACKEND != "cuda", reason="needs MLX's CUDA backend (the matrix-unit kernel)")
@pytest.mark.parametrize("qtype", QUANTIZED)
def test_gpu_mma_every_format_dtype_and_tiling(qtype):
    """The matrix-unit kernel for every quantized format and x dtype, partial passes and a
    vocab no tiling divides evenly; every tiling with the rows as byte pointers and, for 16-bit x,
    as whole words (WORD_ROWS)."""
    rng = np.random.default_rng(9)
    data = moderate(random_table_bytes(rng, qtype, 1001, 512), qtype)
    table, W = Table.from_bytes(data, qtype, 512), dequantized(data, qtype)
    for dtype in X_DTYPES:
        for n in (1, 3, 9, 16, 17, 40):
            x = mx.array(rng.standard_normal((n, 512)).astype(np.float32)).astype(dtype)
            for vtiles, xtiles in MMA_TILES:
                # float32 x takes byte pointers in every layout (tuning.mma_word_rows): one pass of it
                forms = (frozenset(),) if dtype == mx.float32 else (frozenset(), frozenset({(vtiles, xtiles)}))
                for word_rows in forms:
                    layout = dict(MMA_VTILES=vtiles, MMA_XTILES=xtiles, MMA_ONE_PASS_FORMATS=frozenset())
                    with tuning.fixed(**layout, MMA_WORD_ROWS_TILES=word_rows, MMA_BYTE_ROWS_FORMATS=frozenset()):
                        assert_close(head.mma(table, x, "cuda"), x, W)


@pytest.mark.gpu
@pytest.mark.skipif(_GPU_BACKEND is None, reason="needs MLX's Metal or CUDA backend; this MLX build has neither")
@pytest.mark.parametrize("threadgroup", [32, 64, 128])
def test_gpu_streamed_heads_at_any_threadgroup(threadgroup):
    """tuning.head_threadgroup (and mma_threadgroup) decide which warps share a threadgroup, never
    a logit: the streamed kernels' logits at 32-128 threads are those as tuned (256, or 64 for the
    formats of HEAD_THREADGROUP_BY_FORMAT and MMA_THREADGROUP) bit for bit, a vocab no warp count
    divides, a grid format among them (each threadgroup fills its own shared grid)."""
    rng = np.random.default_rng(threadgroup)
    for qtype in ("Q4_K", "Q5_0", "Q2_K", "IQ2_XXS", "F16"):
        data = moderate(random_table_bytes(rng, qtype, 1001, 512), qtype)
        table = Table.from_bytes(data, qtype, 512)
        kernels = [head.matvec]
        if table.format.quantized and _GPU_BACKEND == "cuda":
            kernels += [head.bytedot, head.mma]
        for n in (1, 16):
            x = mx.array(rng.standard_normal((n, 512)).astype(np.float32)).astype(mx.float16)
            for kernel in kernels:
                expected = kernel(table, x, _GPU_BACKEND)
                with tuning.fixed(HEAD_THREADGROUP=threadgroup, HEAD_THREADGROUP_BY_FORMAT={}, MMA_THREADGROUP={}):
                    got = kernel(table, x, _GPU_BACKEND)
                assert np.array_equal(np.array(got), np.array(expected)), (qtype, n, kernel.__name__)


def test_streamed_heads_threadgroup_by_format():
    """The streamed heads' launches take tuning.head_threadgroup of their table's format: 64
    threads for the formats measured faster there, HEAD_THREADGROUP for the rest."""
    rng = np.random.default_rng(16)
    x = mx.zeros((1, 256), mx.float16)
    for qtype, threads in (("Q2_K", 64), ("Q3_K", 64), ("Q6_K", 64), ("TQ2_0", 64), ("Q4_K", 256), ("TQ1_0", 256)):
        table = Table.from_bytes(random_table_bytes(rng, qtype, 8, 256), qtype, 256)
        for launch in (head.matvec_launch(table, x), head.bytedot_launch(table, x), head.mma_launch(table, x)):
            assert launch.threadgroup == (threads, 1, 1), qtype
    with tuning.fixed(HEAD_THREADGROUP_BY_FORMAT={}):
        assert head.matvec_launch(table, x).threadgroup == (tuning.HEAD_THREADGROUP, 1, 1) == (256, 1, 1)


def test_matrix_units_threadgroup_by_layout():
    """kernels/mma.h's launch takes tuning.MMA_THREADGROUP's threads for its layout and format with
    16-bit x, head_threadgroup's for float32 x and for the layouts and formats not named."""
    table = zero_table("Q4_K", 64, 512)
    with tuning.fixed(MMA_THREADGROUP={(4, 2): {"Q4_K": 64}}, HEAD_THREADGROUP_BY_FORMAT={}):
        got = {
            (n, str(dtype)): head.mma_launch(table, mx.zeros((n, 512), dtype)).threadgroup[0]
            for n in (4, 16)
            for dtype in (mx.bfloat16, mx.float32)
        }
        other = zero_table("IQ3_S", 64, 512)
        assert head.mma_launch(other, mx.zeros((16, 512), mx.float16)).threadgroup[0] == 256
        assert head.bytedot_launch(table, mx.zeros((1, 512), mx.float16)).threadgroup[0] == 256
    assert got == {
        (4, "mlx.core.bfloat16"): 256,
        (4, "mlx.core.float32"): 256,
        (16, "mlx.core.bfloat16"): 64,
        (16, "mlx.core.float32"): 256,
    }, got


def test_tile_mma_within_the_devices_shared_memory(monkeypatch):
    """On a GPU whose threadgroups get 99 KiB of shared memory (compute capability 8.6, 8.9, 12.x),
    the tiled matrix multiply takes only the tables whose buffers fit (Q4_K at 64 and 128 rows,
    not Q8_0's 256-value chunks of 272 bytes a row), the others fall back, and called by name it
    raises rather than fail to launch; on 9.0 the same table takes it. The capabilities' sizes
    are the CUDA programming guide's."""
    device = muser_mlx.backends.device
    monkeypatch.setattr(device, "cuda_compute_capability", lambda: 8)
    monkeypatch.setattr(mx.cuda, "is_available", lambda: True)
    rng = np.random.default_rng(5)
    q4k = Table.from_bytes(random_table_bytes(rng, "Q4_K", 3, 256), "Q4_K", 256)
    q8 = Table.from_bytes(random_table_bytes(rng, "Q8_0", 3, 256), "Q8_0", 256)
    for capability, shared in (((8, 9), 99 << 10), ((8, 0), 163 << 10), ((9, 0), 227 << 10), ((12, 1), 99 << 10)):
        info = {"compute_capability_major": capability[0], "compute_capability_minor": capability[1]}
        monkeypatch.setattr(mx, "device_info", lambda info=info: info)
        device.cuda_capability.cache_clear()
        assert device.cuda_group_shared() == shared, capability
    device.cuda_capability.cache_clear()
    monkeypatch.setattr(device, "cuda_group_shared", lambda: 99 << 10)
    for rows in (64, 128):
        assert head.choose(q4k, rows, mx.float16, "cuda") == "tile_mma"
    assert head.choose(q8, 64, mx.float16, "cuda") == "tiled"
    x = mx.zeros((64, 256), mx.float16)
    with pytest.raises(ValueError, match="106,496 bytes of shared memory .* gives a threadgroup 101,376"):
        head.tile_mma(q8, x, "cuda")
    monkeypatch.setattr(device, "cuda_group_shared", lambda: 227 << 10)
    assert head.choose(q8, 64, mx.float16, "cuda") == "tile_mma"


def test_tile_mma_unrolls_where_measured():
    """kernels/tile_mma.h's step loop is unrolled by a chunk's steps (Q8_0: 8 steps of 32 values)
    for the formats tuning.TILE_MMA_UNROLLED lists at 32 and 64 rows of x per threadgroup, and not
    at 128 rows nor for the other formats."""
    rng = np.random.default_rng(6)
    q8 = Table.from_bytes(random_table_bytes(rng, "Q8_0", 3, 256), "Q8_0", 256)
    q40 = Table.from_bytes(random_table_bytes(rng, "Q4_0", 3, 256), "Q4_0", 256)
    unroll = {
        (t.qtype, n): dict(head.tile_mma_launch(t, mx.zeros((n, 256), mx.float16)).defines)["UNROLL"]
        for t in (q8, q40)
        for n in (20, 33, 64, 65)
    }
    assert unroll == {
        ("Q8_0", 20): 8,
        ("Q4_0", 20): 1,
        ("Q8_0", 33): 8,
        ("Q8_0", 64): 8,
        ("Q8_0", 65): 1,
        ("Q4_0", 33): 1,
        ("Q4_0", 64): 1,
        ("Q4_0", 65): 1,
    }


@pytest.mark.gpu
@pytest.mark.skipif(_GPU_BACKEND != "cuda", reason="needs MLX's CUDA backend (the matrix-unit kernel)")
@pytest.mark.parametrize("qtype", ALL_QTYPES)
def test_gpu_tile_mma_every_format(qtype):
    """The tiled matrix multiply for every format and 16-bit x dtype: row counts either side of
    each XROWS (partial x tiles), vocabs off a multiple of its 128 rows and of 8 (the
    element-wise stores) and on them (the 16-byte stores), x of 3 dims and x off a 16-byte
    boundary (a view one value into a buffer); rows of 640 values where the blocks allow (a chunk
    and a half: the unrolled step loop of tuning.TILE_MMA_UNROLLED ends mid-pass)."""
    rng = np.random.default_rng(10)
    for vocab, dims in ((1001, 640 if 640 % FORMATS[qtype].block_values == 0 else 768), (1024, 512)):
        data = moderate(random_table_bytes(rng, qtype, vocab, dims), qtype)
        table, W = Table.from_bytes(data, qtype, dims), dequantized(data, qtype)
        for dtype in (mx.float16, mx.bfloat16):
            for n in (1, 33, 64, 65, 130):
                x = mx.array(rng.standard_normal((n, dims)).astype(np.float32)).astype(dtype)
                assert_close(head.tile_mma(table, x, "cuda"), x, W)
            flat = mx.array(rng.standard_normal(2 * 40 * dims + 1).astype(np.float32)).astype(dtype)
            for x in (flat[1:].reshape(2, 40, dims), flat[:-1].reshape(2, 40, dims)):
                assert_close(head.tile_mma(table, x, "cuda"), x, W)


@pytest.mark.gpu
@pytest.mark.skipif(_GPU_BACKEND != "cuda", reason="needs MLX's CUDA backend (the matrix-unit kernel)")
@pytest.mark.parametrize("qtype", ALL_QTYPES)
def test_gpu_tile_mma_values_are_the_gathers(qtype):
    """The tiled matrix multiply's decoded values equal the gather's, in float16 (float16
    arithmetic for the formats of formats.h's half_scale) and bfloat16, for random bytes with
    finite scales, subnormal ones among them (one_hot_logits)."""
    rng = np.random.default_rng(13)
    table = Table.from_bytes(moderate(random_table_bytes(rng, qtype, 1001, 512), qtype), qtype, 512)
    for dtype in (mx.float16, mx.bfloat16):
        out, gathered = one_hot_logits(table, dtype, lambda table, x: head.tile_mma(table, x, "cuda"))
        assert mx.array_equal(out, gathered).item()


@pytest.mark.gpu
@pytest.mark.skipif(_GPU_BACKEND is None, reason="needs MLX's Metal or CUDA backend; this MLX build has neither")
@pytest.mark.parametrize("qtype", ["Q4_K", "F32"])
@pytest.mark.parametrize(("n", "rows"), [(1, 1), (3, 4), (13, 8), (16, 16)])
def test_gpu_matvec_every_layout(qtype, n, rows):
    """Every (ROWS, VROWS, VALUES) the tuning may pick, on Q4_K and F32; bytedot's (ROWS, VROWS,
    RUNS) on Q4_K. A case per table and pass width, each a dozen kernels to compile, so that
    pytest-xdist spreads them."""
    rng = np.random.default_rng((8, n))
    data = moderate(random_table_bytes(rng, qtype, 301, 512), qtype)
    table, W = Table.from_bytes(data, qtype, 512), dequantized(data, qtype)
    x = mx.array(rng.standard_normal((n, 512)).astype(np.float32))
    for vrows in (1, 2, 4, 8):
        for values in (8, 16, 32):
            if rows * vrows <= 32:
                layout = dict(MATVEC_ROWS=(rows,), MATVEC_VROWS={rows: vrows}, MATVEC_VALUES=values)
                with tuning.fixed(**layout, MATVEC_MIN_WARPS=0):  # the layout, for 301 rows too
                    assert_close(head.matvec(table, x, _GPU_BACKEND), x, W)
    for vrows in (4, 8, 16):
        for runs in (1, 2, 4):
            if qtype == "Q4_K" and _GPU_BACKEND == "cuda" and rows * vrows <= 32 and rows < 8:
                with tuning.fixed(MATVEC_ROWS=(rows,), BYTEDOT_VROWS=vrows, BYTEDOT_RUNS=runs):
                    assert_close(head.bytedot(table, x, _GPU_BACKEND), x, W)


@pytest.mark.gpu
@pytest.mark.skipif(_GPU_BACKEND != "cuda", reason="needs MLX's CUDA backend (the byte dot products)")
@pytest.mark.parametrize("qtype", QUANTIZED)
def test_gpu_bytedot_lanes_take_several_steps(qtype):
    """Every quantized format's byte dot products at 6,656 values (Muse Glimmer's dims), at each
    RUNS: 3-4, 6-7 and 13 steps a lane at RUNS 4, 2 and 1; 1 and 3 rows of x."""
    rng = np.random.default_rng(11)
    data = moderate(random_table_bytes(rng, qtype, 37, 6656), qtype)
    table, W = Table.from_bytes(data, qtype, 6656), dequantized(data, qtype)
    for runs in (1, 2, 4):
        with tuning.fixed(BYTEDOT_RUNS=runs, BYTEDOT_RUNS_BY_FORMAT={}):
            for n in (1, 3):
                x = mx.array(rng.standard_normal((n, 6656)).astype(np.float32)).astype(mx.float16)
                assert bytedot_launch(table, x).define("RUNS") == runs
                assert_close(head.bytedot(table, x, "cuda"), x, W)


# Launch bounds by kernel: its launch, rows and dtypes of x (the matrix units' both layouts of 16-bit
# x, and float32 x's three multiplies; the byte dot products bound 16-bit x alone), bounds that cap
# the registers of 256 threads at 64 and 48 (the byte dot products) or 128 and 85 (the matrix
# units), spilling, and the tuning that sets a bound for a format
_BOUNDED = {
    "bytedot": (
        head.bytedot_launch,
        ((1, mx.float16), (3, mx.float16)),
        (4, 5),
        lambda q, b: {"BYTEDOT_MIN_THREADGROUPS": {q: b}},
    ),
    "mma": (
        head.mma_launch,
        ((4, mx.float16), (16, mx.float16), (16, mx.float32)),
        (2, 3),
        lambda q, b: {f"MMA{d}_MIN_THREADGROUPS": {(4, 1): {q: b}, (4, 2): {q: b}} for d in ("", "_FLOAT32")},
    ),
}


@pytest.mark.gpu
@pytest.mark.skipif(_GPU_BACKEND != "cuda", reason="needs MLX's CUDA backend (byte dot products, matrix units)")
@pytest.mark.parametrize("kernel", sorted(_BOUNDED))
@pytest.mark.parametrize("qtype", ["IQ2_XXS", "IQ3_S", "Q4_K", "TQ2_0"])
def test_gpu_launch_bounds_keep_logits(kernel, qtype):
    """Launch bounds (tuning.BYTEDOT_MIN_THREADGROUPS, MMA_MIN_THREADGROUPS; the macro
    backends/source.py puts before the name of the function MLX writes) change the registers, never
    a logit: bit for bit the logits without them, at bounds that spill (four times as many
    threadgroups for TQ2_0's, of 64 threads)."""
    launch_of, widths, bounds, bounded = _BOUNDED[kernel]
    if tuning.head_threadgroup(qtype) != 256:
        bounds = tuple(b * 256 // tuning.head_threadgroup(qtype) for b in bounds)
    rng = np.random.default_rng(12)
    data = moderate(random_table_bytes(rng, qtype, 1001, 512), qtype)
    table = Table.from_bytes(data, qtype, 512)
    for n, dtype in widths:
        x = mx.array(rng.standard_normal((n, 512)).astype(np.float32)).astype(dtype)
        with tuning.fixed(**bounded(qtype, 0)):
            expected = np.array(getattr(head, kernel)(table, x, "cuda"))
        for bound in bounds:
            with tuning.fixed(**bounded(qtype, bound)):
                assert launch_of(table, x).min_threadgroups == bound
                got = getattr(head, kernel)(table, x, "cuda")
            assert np.array_equal(np.array(got), expected), (kernel, qtype, n, dtype, bound)


def test_launch_bounds_by_layout_and_dtype():
    """kernels/mma.h's launch takes the bound tuning gives its layout and format (XTILES 1 up to 8
    rows, 2 beyond), float32 x's from MMA_FLOAT32_MIN_THREADGROUPS, none for a format or
    layout not named; the byte dot products' launch its format's for 16-bit x, none for float32."""
    table = Table.from_bytes(np.zeros((64, 2 * 110), np.uint8), "IQ3_S", 512)
    bounds = {(4, 1): {"IQ3_S": 2}, (4, 2): {"IQ3_S": 3}}
    with tuning.fixed(BYTEDOT_MIN_THREADGROUPS={"IQ3_S": 4}):
        bytedot = [bytedot_launch(table, mx.zeros((1, 512), d)).min_threadgroups for d in (mx.bfloat16, mx.float32)]
    assert bytedot == [4, 0], bytedot
    with tuning.fixed(MMA_MIN_THREADGROUPS=bounds, MMA_FLOAT32_MIN_THREADGROUPS={(4, 1): {"IQ3_S": 4}}):
        got = {
            (n, str(dtype)): head.mma_launch(table, mx.zeros((n, 512), dtype)).min_threadgroups
            for n in (4, 16)
            for dtype in (mx.float16, mx.float32)
        }
        other = Table.from_bytes(np.zeros((64, 2 * 144), np.uint8), "Q4_K", 512)
        assert head.mma_launch(other, mx.zeros((16, 512), mx.float16)).min_threadgroups == 0
    assert got == {
        (4, "mlx.core.float16"): 2,
        (4, "mlx.core.float32"): 4,
        (16, "mlx.core.float16"): 3,
        (16, "mlx.core.float32"): 0,
    }, got


@pytest.mark.gpu
@pytest.mark.skipif(_GPU_BACKEND is None, reason="needs MLX's Metal or CUDA backend; this MLX build has neither")
@pytest.mark.parametrize("offset", [1, 2, 8])
def test_gpu_table_from_a_misaligned_view(offset):
    """A table that is a view starting off a 16-byte boundary is copied, not misread."""
    rng = np.random.default_rng(offset)
    data = moderate(random_table_bytes(rng, "Q4_K", 40, 512), "Q4_K")
    flat = mx.array(np.concatenate([np.zeros(offset, np.uint8), data.ravel()]))
    table = Table.from_bytes(flat[offset:].reshape(data.shape), "Q4_K", 512)
    x = mx.array(rng.standard_normal((3, 512)).astype(np.float32))
    assert_close(as_linear(table, x), x, dequantized(data, "Q4_K"))
    ids = np.arange(40)
    assert np.array_equal(
        np.array(Embedding.from_table(table)(mx.array(ids))), dequantized(data, "Q4_K")[ids].astype(np.float32)
    )


def write_gguf(path, with_head: bool):
    data = random_table_bytes(np.random.default_rng(1), "Q4_K", 10, 256)
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_embedding_length(256)
    writer.add_block_count(1)  # a model file: its head is output.weight or, without one, the embedding
    writer.add_tensor("token_embd.weight", data, raw_dtype=gguf.GGMLQuantizationType.Q4_K)
    if with_head:
        writer.add_tensor("output.weight", data, raw_dtype=gguf.GGMLQuantizationType.Q4_K)
    write_out(writer)
    return data


def test_tied_head_is_reported_once_at_info(tmp_path, caplog):
    path = tmp_path / "tied.gguf"
    data = write_gguf(path, with_head=False)
    with caplog.at_level(logging.INFO, logger="muser_mlx"):
        emb = Embedding.from_gguf(path)
    assert emb.tied is True
    assert [r.levelno for r in caplog.records] == [logging.INFO] and "tied" in caplog.text
    x = mx.array(np.random.default_rng(2).standard_normal((2, 256)).astype(np.float32))
    assert_close(emb.as_linear(x), x, dequantized(data, "Q4_K"))


def test_untied_head_reported_quietly(tmp_path, caplog):
    path = tmp_path / "untied.gguf"
    write_gguf(path, with_head=True)
    with caplog.at_level(logging.INFO, logger="muser_mlx"):
        assert Embedding.from_gguf(path).tied is False
        assert Embedding.from_gguf(fixture("tiny-llama-Q4_K_M.gguf")).tied is False
        assert Embedding.from_gguf(path, tensor="output.weight").tied is False
    assert caplog.records == []
    assert Embedding.from_table(Table.from_gguf(path)).tied is None
