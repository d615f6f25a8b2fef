"""Every supported GGUF format on every path: the portable MLX-ops decoder, the CPU build of the
kernel source and the generated Metal source, each bit-identical to gguf-py; the llama.cpp-made
fixtures; tables written with gguf-py's GGUFWriter and read back; the load-time type gate."""

import gguf
import mlx.core as mx
import numpy as np
import pytest
from gguf import GGMLQuantizationType
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from muser_mlx import FORMATS, GGUFError, Table, embedding
from muser_mlx.gguf import Gatherable, gatherable_tensors, open_gguf
from muser_mlx.writer import save_gguf

from conftest import OUTPUT_DTYPES, assert_bits_equal, fixture, random_table_bytes, reference, tables, write_gguf
from kernel_harness import CXX, cpu_gather, metal_gather

QTYPES = list(FORMATS)
needs_cxx = pytest.mark.skipif(CXX is None, reason="no C++ compiler (g++ or clang++) on PATH")


@st.composite
def ids_for(draw, vocab):
    """int32 ids [1..10], some outside [0, vocab) (the kernels clamp them; so does reference())."""
    values = draw(st.lists(st.integers(-3, vocab + 3), min_size=1, max_size=10))
    return np.array(values, np.int32)


def test_registry_matches_ggml():
    for name, fmt in FORMATS.items():
        qtype = GGMLQuantizationType[name]
        assert fmt.ggml_type == qtype.value
        assert (fmt.block_values, fmt.block_bytes) == gguf.GGML_QUANT_SIZES[qtype]


@pytest.mark.parametrize("qtype", QTYPES)
def test_random_tables_are_finite(qtype):
    """The float fields of every test table are finite, so every comparison is of finite values."""
    raw = random_table_bytes(np.random.default_rng(0), qtype, 4096, FORMATS[qtype].block_values)
    assert np.isfinite(reference(raw, qtype, np.arange(4096))).all()


@pytest.mark.parametrize("qtype", QTYPES)
@settings(max_examples=15, deadline=None)
@given(data=st.data(), dtype=OUTPUT_DTYPES)
def test_ops_path(qtype, data, dtype):
    table, raw = data.draw(tables(qtypes=(qtype,)))
    ids = data.draw(st.lists(st.integers(0, table.vocab - 1), min_size=1, max_size=12))
    out = embedding(table, np.array(ids), dtype, backend="ops")
    assert_bits_equal(out, reference(raw, qtype, ids), dtype)


@pytest.mark.parametrize("qtype", QTYPES)
def test_ops_path_with_no_ids(qtype):
    fmt = FORMATS[qtype]
    table = Table.from_bytes(np.zeros((3, fmt.block_bytes), np.uint8), qtype, fmt.block_values)
    assert embedding(table, np.zeros((2, 0), np.int32), backend="ops").shape == (2, 0, fmt.block_values)


@needs_cxx
@pytest.mark.parametrize("qtype", QTYPES)
@settings(max_examples=6, deadline=None)
@given(data=st.data(), dtype=OUTPUT_DTYPES)
def test_cpu_build_of_the_kernel(qtype, data, dtype):
    table, raw = data.draw(tables(qtypes=(qtype,), max_vocab=6))
    ids = data.draw(ids_for(table.vocab))
    assert_bits_equal(cpu_gather(table, ids, dtype), reference(raw, qtype, ids), dtype)


@needs_cxx
@pytest.mark.parametrize("qtype", QTYPES)
@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), dtype=OUTPUT_DTYPES)
def test_generated_metal_source(capfd, qtype, data, dtype):
    table, raw = data.draw(tables(qtypes=(qtype,), max_vocab=6))
    ids = data.draw(ids_for(table.vocab))
    assert_bits_equal(metal_gather(table, ids, dtype, capfd), reference(raw, qtype, ids), dtype)


FIXTURE_TABLES = [  # (file, tensor, its type, dims, vocab)
    ("tiny-llama-Q4_K_M.gguf", "token_embd.weight", "Q4_K", 512, 1003),
    ("tiny-llama-Q4_K_M.gguf", "output.weight", "Q6_K", 512, 1003),
    ("tiny-llama-Q8_0.gguf", "token_embd.weight", "Q8_0", 512, 1003),
    ("tiny-llama-f16.gguf", "token_embd.weight", "F16", 512, 1003),
    ("ollama-llama-2-tiny-random.gguf", "token_embd.weight", "F16", 8, 32000),
]


@pytest.mark.parametrize("name, tensor, qtype, dims, vocab", FIXTURE_TABLES)
def test_fixture_rows_match_gguf_py(name, tensor, qtype, dims, vocab):
    path = fixture(name)
    table = Table.from_gguf(path, tensor)
    assert (table.qtype, table.dims, table.vocab) == (qtype, dims, vocab)
    stored = next(t for t in gguf.GGUFReader(path).tensors if t.name == tensor)
    expected = gguf.quants.dequantize(stored.data, stored.tensor_type).reshape(vocab, dims)
    all_ids = np.arange(vocab, dtype=np.int32)
    assert_bits_equal(embedding(table, all_ids, backend="ops"), expected)
    if CXX is not None:
        assert_bits_equal(cpu_gather(table, all_ids), expected)


@pytest.mark.parametrize("qtype", [q for q in QTYPES if FORMATS[q].quantized])
def test_llama_cpp_quantized_table_of_every_type(capfd, qtype):
    """types/<TYPE>.gguf (ggml-quantized, 300 x 512, edge-case rows 0-8): listed as gatherable
    (``muser-mlx inspect``'s list); every row on the ops path, the CPU build of the kernel and
    the generated Metal source equals gguf-py's, which equals ggml's own to_float on these files."""
    path = fixture(f"types/{qtype}.gguf")
    table = Table.from_gguf(path)
    assert (table.qtype, table.dims, table.vocab) == (qtype, 512, 300)
    assert gatherable_tensors(path) == [Gatherable("token_embd.weight", qtype, 512, 300, table.nbytes)]
    expected = gguf.quants.dequantize(np.array(table.data), GGMLQuantizationType[qtype])
    all_ids = np.arange(table.vocab, dtype=np.int32)
    for dtype in (mx.float32, mx.float16, mx.bfloat16):
        assert_bits_equal(embedding(table, all_ids, dtype, backend="ops"), expected, dtype)
    if CXX is not None:
        assert_bits_equal(cpu_gather(table, all_ids), expected)
        assert_bits_equal(metal_gather(table, all_ids[:40], mx.bfloat16, capfd), expected[:40], mx.bfloat16)


@pytest.mark.parametrize("qtype", QTYPES)
def test_tables_saved_through_gguf_writer_load_back(tmp_path, qtype):
    block = FORMATS[qtype].block_values
    dims, vocab = (block * 2, 9) if block > 1 else (12, 9)
    raw = random_table_bytes(np.random.default_rng(3), qtype, vocab, dims)
    saved = {"token_embd.weight": Table.from_bytes(raw, qtype, dims)}
    path = save_gguf(tmp_path / f"{qtype}.gguf", saved, {"llama.embedding_length": dims})
    table = Table.from_gguf(path)
    assert (table.qtype, table.dims, table.vocab) == (qtype, dims, vocab)
    assert np.array_equal(np.array(table.data), raw)
    ids = np.array([8, 0, 3, 3, 7], np.int32)
    assert_bits_equal(embedding(table, ids, backend="ops"), reference(raw, qtype, ids))


# Types gguf-py names that the package does not read: Q8_1 and Q8_K are ggml's dot-product
# operands, not storage types; the integer types and F64 are no tables of weights.
UNSUPPORTED = [t.name for t in GGMLQuantizationType if t.name not in FORMATS]


@pytest.mark.parametrize("qtype", UNSUPPORTED)
def test_unsupported_type_names_itself_and_the_supported_ones(tmp_path, qtype):
    _, block_bytes = gguf.GGML_QUANT_SIZES[GGMLQuantizationType[qtype]]
    raw = np.zeros((3, block_bytes), np.uint8)  # vocab 3, dims one block
    path = write_gguf(tmp_path / "unsupported.gguf", {"token_embd.weight": (raw, qtype)})
    with pytest.raises(GGUFError) as e:
        Table.from_gguf(path)
    message = str(e.value)
    assert str(path) in message and "token_embd.weight" in message and f"type {qtype}" in message
    assert all(name in message.split("supported:")[1] for name in FORMATS)


def test_gatherable_tensors_lists_supported_2d_tensors(tmp_path):
    rng = np.random.default_rng(4)
    tensors = {
        "token_embd.weight": (random_table_bytes(rng, "Q5_K", 5, 512), "Q5_K"),
        "output.weight": (random_table_bytes(rng, "BF16", 5, 3), "BF16"),
        "blk.0.attn_q.weight": (np.zeros((4, 292), np.uint8), "Q8_K"),  # unsupported type
        "output_norm.weight": (np.zeros(16, np.uint8), "F32"),  # 1-D
        "blk.0.ffn_gate_exps.weight": (np.zeros((2, 3, 18), np.uint8), "Q4_0"),  # 3-D
    }
    path = write_gguf(tmp_path / "mixed.gguf", tensors)
    expected = [
        Gatherable("token_embd.weight", "Q5_K", 512, 5, 5 * 2 * 176),
        Gatherable("output.weight", "BF16", 3, 5, 5 * 3 * 2),
    ]
    assert gatherable_tensors(path) == expected
    with open_gguf(path) as f:  # an open file is read as it is
        assert gatherable_tensors(f) == expected


def test_gatherable_tensors_of_a_llama_cpp_file():
    found = gatherable_tensors(fixture("tiny-llama-Q4_K_M.gguf"))
    assert found[:2] == [
        Gatherable("output.weight", "Q6_K", 512, 1003, 1003 * 2 * 210),
        Gatherable("token_embd.weight", "Q4_K", 512, 1003, 1003 * 2 * 144),
    ]
    assert len(found) == 9  # the 2-D tensors; the three F32 norms are 1-D


@pytest.mark.parametrize("qtype", ["MXFP4", "NVFP4"])
def test_every_scale_byte_of_the_fp4_formats(capfd, qtype):
    """Each of the 256 scale bytes once, random nibbles: E8M0's subnormal halves (e = 0, 1), its
    products past float32's range (e >= 253: Inf, in gguf-py and ggml too) and 0xFF (2^127, as
    ggml's CPU decodes it); UE4M3's subnormals, bit 7 and 0x7F (read as 0). Every path bit for bit."""
    fmt = FORMATS[qtype]
    rng = np.random.default_rng(5)
    blocks = rng.integers(0, 256, (256 // len(fmt.float_offsets), fmt.block_bytes), dtype=np.uint8)
    blocks[:, list(fmt.float_offsets)] = np.arange(256, dtype=np.uint8).reshape(len(blocks), -1)
    table = Table.from_bytes(blocks, qtype, fmt.block_values)
    ids = np.arange(table.vocab, dtype=np.int32)
    with np.errstate(over="ignore"):
        expected = reference(blocks, qtype, ids)
    assert (np.isinf(expected).any() if qtype == "MXFP4" else np.isfinite(expected).all())
    for dtype in (mx.float32, mx.float16):
        assert_bits_equal(embedding(table, ids, dtype, backend="ops"), expected, dtype)
    if CXX is not None:
        assert_bits_equal(cpu_gather(table, ids), expected)
        assert_bits_equal(metal_gather(table, ids, mx.float32, capfd), expected)
