"""The quantizers: Q4_K's byte conformance with llama.cpp and round-trip error properties; every
other quantizable type byte-identical to gguf-py's and, where ggml made a fixture without an
importance matrix, to ggml's."""

import importlib

import gguf
import mlx.core as mx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from muser_mlx import FORMATS, Embedding
from muser_mlx.quantize import QUANTIZABLE, quantize

from conftest import fixture

Q4_K = gguf.GGMLQuantizationType.Q4_K
GGUF_PY_TYPES = [q for q in QUANTIZABLE if q != "Q4_K"]


@pytest.fixture(scope="module")
def token_embd():
    """(float32 [1003, 512], llama-quantize's Q4_K bytes [2006 blocks, 144])."""
    x = np.load(fixture("tiny-llama.token_embd.f32.npy"))
    reader = gguf.GGUFReader(fixture("tiny-llama-Q4_K_M.gguf"))
    ref = next(t for t in reader.tensors if t.name == "token_embd.weight")
    assert ref.tensor_type == Q4_K
    return x, np.asarray(ref.data).reshape(-1, 144)


def test_matches_llama_quantize_on_every_block(token_embd):
    x, ref = token_embd
    got = quantize(x)
    assert got.shape == (1003, 288) and got.dtype == np.uint8
    same = (got.reshape(-1, 144) == ref).all(axis=1)
    assert same.all(), f"{same.mean():.2%} of blocks identical; first differing: {np.flatnonzero(~same)[:10]}"


def test_matches_llama_quantize_on_edge_rows(token_embd):
    # rows 0-7: zeros, +0.5, -0.25, all negative, all positive, ~1e-6, sparse 8.0, ramp
    x, ref = token_embd
    got = quantize(x[:8]).reshape(8, 2, 144)
    for row in range(8):
        np.testing.assert_array_equal(got[row], ref.reshape(-1, 2, 144)[row], err_msg=f"edge row {row}")


def test_accepts_mlx_array(token_embd):
    x, ref = token_embd
    np.testing.assert_array_equal(quantize(mx.array(x[:16])).reshape(-1, 144), ref[:32])


# ---------------------------------------------------------------- properties


@st.composite
def weight_matrices(draw):
    """float32 [1..4, 256*k], k in 1..3: adversarial element mixes or scaled normal data
    with outliers, magnitudes from ~1e-9 up to 6e4."""
    shape = (draw(st.integers(1, 4)), 256 * draw(st.integers(1, 3)))
    if draw(st.booleans()):
        mag = float(np.float32(draw(st.sampled_from([1e-6, 1e-2, 1.0, 6e4]))))
        return draw(hnp.arrays(np.float32, shape, elements=st.floats(-mag, mag, width=32)))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    scale = 10.0 ** rng.uniform(-9, 4, size=(shape[0], shape[1] // 32, 1))  # per sub-block
    x = rng.normal(size=(shape[0], shape[1] // 32, 32)) * scale
    x += rng.choice([0, 8], p=[0.98, 0.02], size=x.shape) * scale  # sparse outliers
    x += draw(st.sampled_from([0.0, 1.0, -1.0])) * scale  # all-positive / all-negative rows
    return np.clip(x, -6e4, 6e4).reshape(shape).astype(np.float32)


def _decode(blocks):
    """uint8 [nb, 144] -> per sub-block step S = d*sc and offset M = dmin*m [nb, 8], and d, dmin [nb, 1]."""
    d = blocks[:, 0:2].copy().view(np.float16).astype(np.float32)
    dmin = blocks[:, 2:4].copy().view(np.float16).astype(np.float32)
    sc, m = gguf.quants.Q4_K.get_scale_min(blocks[:, 4:16].copy())
    return d * sc.astype(np.float32), dmin * m.astype(np.float32), d, dmin


@settings(max_examples=60, deadline=None)
@given(weight_matrices())
def test_round_trip_error_is_bounded(x):
    blocks = quantize(x)
    y = gguf.quants.dequantize(blocks, Q4_K)
    assert np.isfinite(y).all()
    S, M, d, dmin = _decode(blocks.reshape(-1, 144))
    xs, ys = x.reshape(-1, 8, 32).astype(np.float64), y.reshape(-1, 8, 32).astype(np.float64)
    err = np.abs(ys - xs)
    S, M = S[..., None].astype(np.float64), M[..., None].astype(np.float64)

    # (1) Exact: wherever S > 0 every value is re-derived as the nearest of the 16 levels
    # S*q - M (a wrong nibble order, level or clamp fails this). Slack: (x + M)/S is
    # rounded twice in float32, so a near-tie may go either way.
    levels = S[..., None] * np.arange(16) - M[..., None]  # [nb, 8, 1, 16]
    nearest = np.abs(levels - xs[..., None]).min(axis=-1)
    tie_slack = 2.0**-20 * (np.abs(xs) + M + 15 * S)
    assert ((err <= nearest + tie_slack) | (S == 0)).all()

    # (2) Sound bound per sub-block j with range R = max(x) - min(min(x), 0).
    # make_qkx2_quants keeps the fit (s, m) with the least weighted squared error,
    # sum_i w_i e_i^2, never above that of its first grid step R/15 whose errors are <= R/30.
    # With w_i = av_x + |x_i| >= av_x and sum w <= 32 av_x + sqrt(32 sum x^2) = 64 av_x,
    # each e_i <= R/30 * sqrt(sum w / w_i) <= R/30 * 8 = 4R/15. Rounding s to d*sc with
    # 6-bit sc = round(63 s / max_scale) and d = f16(max_scale/63) moves s by at most
    # d/2 + 64*dd (dd: f16 rounding of d, <= 2^-11 d + 2^-25 counting subnormals), which
    # moves the level 15 by 15x that; the min likewise by dmin/2 + 64*ddmin. Re-deriving q
    # as the nearest level (or keeping the fitted levels where d*sc == 0) can only lower it.
    R = np.maximum(xs.max(-1), 0) - np.minimum(xs.min(-1), 0)  # [nb, 8]
    dd, ddmin = 2.0**-11 * d + 2.0**-25, 2.0**-11 * dmin + 2.0**-25
    bound = 1.001 * 4 * R / 15 + 15 * (d / 2 + 64 * dd) + dmin / 2 + 64 * ddmin
    assert (err.max(-1) <= bound).all()

    # (3) Exact: the sub-block with the largest scale (min) gets sc = 63 (m = 63), since
    # sc = nearest(63/max_scale * scale); d > 0 implies max_scale >= 63 * 2^-25, so 63/max_scale
    # is finite. This pins d to the data's largest scale, which (2) relies on.
    sc, m = gguf.quants.Q4_K.get_scale_min(blocks.reshape(-1, 144)[:, 4:16].copy())
    assert ((sc.max(-1) == 63) | (d[:, 0] == 0)).all()
    assert ((m.max(-1) == 63) | (dmin[:, 0] == 0)).all()


@settings(max_examples=20, deadline=None)
@given(st.integers(1, 4), st.integers(1, 3), st.sampled_from([1e-30, 1e-6, 1.0, 6e4]))
def test_no_nan_or_inf_for_finite_input(rows, k, mag):
    x = (np.random.default_rng(rows * 10 + k).uniform(-1, 1, (rows, 256 * k)) * mag).astype(np.float32)
    x[0, :32] = np.float32(mag)  # a constant sub-block
    assert np.isfinite(gguf.quants.dequantize(quantize(x), Q4_K)).all()


def test_all_zero_row_round_trips_to_zero():
    x = np.zeros((2, 512), np.float32)
    x[1] = np.linspace(-1, 1, 512)
    blocks = quantize(x)
    assert not blocks[0].any()  # d = dmin = 0, scales and levels 0
    y = gguf.quants.dequantize(blocks, Q4_K)
    assert (y[0] == 0).all()


@pytest.mark.parametrize(
    "x, qtype, message",
    [
        (np.zeros(256, np.float32), "Q4_K", "2-D"),
        (np.zeros((2, 100), np.float32), "Q4_K", "multiple of 256"),
        (np.zeros((2, 48), np.float32), "Q8_0", "cols \\(48\\) must be a positive multiple of 32 for Q8_0"),
        (np.zeros((2, 0), np.float32), "Q8_0", "cols \\(0\\) must be a positive multiple"),
        (np.zeros((1, 32), np.complex64), "Q8_0", "real numbers, got dtype complex64"),
        ([["a"] * 32], "Q8_0", "real numbers, got dtype <U1"),  # a list, unchecked: NumPy's "could not convert"
        (np.full((1, 32), 1e300), "Q8_0", "value beyond float32's range in row 0"),
        ([[1e300] * 32], "Q8_0", "value beyond float32's range in row 0"),  # a list, unchecked: "non-finite"
        # finite, but past what the format's float16 scales (or values) hold
        (np.full((2, 32), 1e7, np.float32), "Q8_0", "values too large for Q8_0: 2 blocks in 2 rows"),
        (
            np.where(np.arange(4)[:, None] % 2, 1e6, 0.0) * np.ones((4, 32)),
            "Q4_0",
            "2 blocks in 2 rows .* first row 1$",
        ),
        (np.full((1, 32), 7e4, np.float32), "F16", "values too large for F16"),
        (np.where(np.arange(512) == 300, np.nan, 0).astype(np.float32).reshape(2, 256), "Q4_K", "row 1"),
        (np.full((1, 256), np.inf, np.float32), "Q4_K", "row 0"),
        (np.full((1, 32), np.inf, np.float32), "BF16", "row 0"),
        (np.zeros((1, 256), np.float32), "Q9_9", "Q4_K"),
        (np.zeros((1, 256), np.float32), "NVFP4", "unsupported qtype 'NVFP4'; supported: F32, F16, BF16, Q4_0"),
    ],
)
def test_rejects_bad_input(x, qtype, message):
    with pytest.raises(ValueError, match=message):
        quantize(x, qtype)


def test_mlx_arrays_complex_refused_bfloat16_taken():
    """MLX's astype(float32) dropped the imaginary parts (quantize warned, from_embedding said
    nothing); NumPy has no bfloat16, so np.array of one failed in the buffer protocol."""
    complex_weights = mx.array(np.full((4, 32), 1 + 5j, np.complex64))
    for make in (lambda: quantize(complex_weights, "Q8_0"), lambda: Embedding.from_embedding(complex_weights, "Q8_0")):
        with pytest.raises(ValueError, match="expected real numbers, got dtype mlx.core.complex64"):
            make()
    w = np.random.default_rng(0).standard_normal((4, 32)).astype(np.float32)
    as_bf16 = mx.array(w).astype(mx.bfloat16)
    assert np.array_equal(quantize(as_bf16, "Q8_0"), quantize(np.array(as_bf16.astype(mx.float32)), "Q8_0"))


def test_no_rows_quantize_to_no_blocks():
    assert quantize(np.zeros((0, 256), np.float32)).shape == (0, 144)
    assert quantize(np.zeros((0, 32), np.float32), "Q8_0").dtype == np.uint8


# ---------------------------------------------------------------- the other types


def test_every_type_gguf_py_quantizes_is_quantizable():
    """gguf-py's quantizers (its F32 and F16 are casts) and ours, Q4_K."""
    can = {t.name for t in gguf.quants._type_traits if _gguf_py_quantizes(t.name)}
    assert can | {"F32", "F16", "Q4_K"} == set(QUANTIZABLE)


def _gguf_py_quantizes(name: str) -> bool:
    try:
        gguf.quants.quantize(np.zeros((1, 256), np.float32), gguf.GGMLQuantizationType[name])
    except NotImplementedError:
        return False
    return True


# ggml_quantize_chunk made types/<TYPE>.gguf from types/f32.npy, with an importance matrix where it
# was given one: these four came out as ggml's reference quantizers (gguf-py's) make them; Q4_0,
# Q4_1, Q5_0 and Q5_1 differ (their importance-matrix path), so gguf-py is their only reference.
GGML_REFERENCE_FIXTURES = ["Q8_0", "TQ1_0", "TQ2_0", "MXFP4"]


@pytest.mark.parametrize("qtype", GGML_REFERENCE_FIXTURES)
def test_matches_ggml_on_its_fixture(qtype):
    x = np.load(fixture("types/f32.npy"))
    ref = next(t for t in gguf.GGUFReader(fixture(f"types/{qtype}.gguf")).tensors if t.name == "token_embd.weight")
    assert ref.tensor_type.name == qtype
    got = quantize(x, qtype)
    same = (got == np.asarray(ref.data)).all(axis=1)
    assert same.all(), f"rows differing: {np.flatnonzero(~same)[:10]}"


@pytest.mark.parametrize("qtype, name", [("Q8_0", "tiny-llama-Q8_0.gguf"), ("F16", "tiny-llama-f16.gguf")])
def test_matches_llama_quantize_token_embd(qtype, name):
    x = np.load(fixture("tiny-llama.token_embd.f32.npy"))
    ref = next(t for t in gguf.GGUFReader(fixture(name)).tensors if t.name == "token_embd.weight")
    assert np.array_equal(quantize(x, qtype), np.asarray(ref.data).view(np.uint8).reshape(x.shape[0], -1))


@st.composite
def any_weights(draw, block: int):
    """float32 [1..40, block * k]: rows of mixed magnitudes (zeros, constants, ~1e-30 .. 6e4)."""
    shape = (draw(st.integers(1, 40)), block * draw(st.integers(1, 3)))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    x = rng.standard_normal(shape) * 10.0 ** rng.uniform(-30, 4.5, (shape[0], 1))
    x[rng.random(shape[0]) < 0.2] = draw(st.sampled_from([0.0, 0.5, -0.25]))
    return np.clip(x, -6e4, 6e4).astype(np.float32)


@pytest.mark.parametrize("qtype", GGUF_PY_TYPES)
@settings(max_examples=10, deadline=None)
@given(data=st.data())
def test_matches_gguf_py(qtype, data):
    """The driver (chunks of rows over threads) leaves gguf-py's bytes as they are, and they
    dequantize to finite values."""
    x = data.draw(any_weights(max(FORMATS[qtype].block_values, 32)))
    got = quantize(x, qtype)
    assert np.array_equal(got, np.asarray(gguf.quants.quantize(x, gguf.GGMLQuantizationType[qtype])).view(np.uint8))
    assert np.isfinite(gguf.quants.dequantize(got, gguf.GGMLQuantizationType[qtype])).all()


def test_chunks_of_rows_assemble_in_order(monkeypatch):
    """Many work items (a chunk of one row each) give the bytes one chunk does."""
    module = importlib.import_module("muser_mlx.quantize")  # (muser_mlx.quantize is the function)
    x = np.random.default_rng(1).standard_normal((37, 256)).astype(np.float32)
    whole = {q: quantize(x, q) for q in QUANTIZABLE}
    monkeypatch.setattr(module, "_CHUNK_VALUES", 256)
    for qtype, expected in whole.items():
        assert np.array_equal(quantize(x, qtype), expected), qtype


@pytest.mark.parametrize("qtype", QUANTIZABLE)
def test_from_embedding_of_every_type(qtype):
    weight = (mx.random.normal((20, 256), key=mx.random.key(3)) * 0.02).astype(mx.float32)
    emb = Embedding.from_embedding(weight, qtype)
    data = quantize(np.array(weight), qtype)
    assert emb.qtype == qtype and np.array_equal(np.array(emb.weight), data)
    expected = gguf.quants.dequantize(data, gguf.GGMLQuantizationType[qtype]).reshape(20, 256)
    assert np.array_equal(np.array(emb(mx.arange(20))), expected)
