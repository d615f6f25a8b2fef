"""The GPU kernel as MLX runs it (CUDA on NVIDIA, Metal on Apple silicon) against gguf-py and
against the portable path. Skipped where MLX has no GPU backend, e.g. CI's CPU-only machines."""

import mlx.core as mx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from muser_mlx import FORMATS, Embedding, Table, backends, embedding
from muser_mlx.backends.tuning import COMPILED_IDS

from conftest import FIXTURES, OUTPUT_DTYPES, assert_bits_equal, fixture, random_table_bytes, reference, tables

GPU = backends._GPU_BACKEND
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(GPU is None, reason="MLX here has neither a Metal nor a CUDA backend (CPU-only build)"),
]


def test_auto_selects_the_kernel():
    assert backends.select("auto") == GPU
    with mx.stream(mx.cpu):
        assert backends.select("auto") == "ops"


@settings(max_examples=60, deadline=None)
@given(st.data(), tables(), OUTPUT_DTYPES)
def test_kernel_matches_gguf_py_and_the_portable_path(data, table_and_bytes, dtype):
    table, raw = table_and_bytes
    ids = np.array(data.draw(st.lists(st.integers(-(2**31), 2**31 - 1), min_size=1, max_size=40)), np.int32)
    ids = np.where(np.arange(ids.size) % 2 == 0, np.abs(ids) % table.vocab, ids).astype(np.int32)
    out = embedding(table, mx.array(ids), dtype, backend=GPU)
    assert_bits_equal(out, reference(raw, table.qtype, ids), dtype)
    portable = embedding(table, mx.array(ids), dtype, backend="ops")
    assert mx.array_equal(
        mx.view(out, mx.uint16 if dtype != mx.float32 else mx.uint32),
        mx.view(portable, mx.uint16 if dtype != mx.float32 else mx.uint32),
    ).item()


@pytest.mark.parametrize("n", [1, 64, 512, 4096, 32768])
def test_batch_widths(n):
    data = random_table_bytes(np.random.default_rng(n), "Q4_K", 1000, 6656)
    table = Table.from_bytes(data, "Q4_K", 6656)
    ids = np.random.default_rng(0).integers(0, 1000, n, dtype=np.int64)
    assert_bits_equal(embedding(table, mx.array(ids)), reference(data, "Q4_K", ids))


def test_more_ids_than_a_cuda_grid_is_high():
    """70,000 ids: past 65,535, CUDA's limit on a grid's height, so threads loop over rows."""
    data = random_table_bytes(np.random.default_rng(5), "Q6_K", 300, 256)
    table = Table.from_bytes(data, "Q6_K", 256)
    ids = np.random.default_rng(1).integers(0, 300, 70_000, dtype=np.int32)
    assert_bits_equal(embedding(table, mx.array(ids)), reference(data, "Q6_K", ids))


def test_int64_ids_past_2_32_clamp_in_the_kernel():
    data = random_table_bytes(np.random.default_rng(3), "Q4_K", 9, 256)
    table = Table.from_bytes(data, "Q4_K", 256)
    ids = np.array([2**32 + 1, -1, 2**40, 3], np.int64)
    assert_bits_equal(embedding(table, mx.array(ids)), reference(data, "Q4_K", ids))


def test_non_contiguous_ids_and_compile():
    data = random_table_bytes(np.random.default_rng(4), "Q4_K", 50, 512)
    emb = Embedding.from_table(Table.from_bytes(data, "Q4_K", 512))
    ids = mx.arange(40).reshape(5, 8).T[:, ::2]
    expected = reference(data, "Q4_K", np.array(ids))
    assert_bits_equal(emb(ids), expected)
    assert_bits_equal(mx.compile(lambda i: emb(i) * 1.0)(ids), expected)
    first_call_compiled = Embedding.from_table(Table.from_bytes(data, "Q4_K", 512))  # binds its kernel inside the trace
    assert_bits_equal(mx.compile(lambda i: first_call_compiled(i) * 1.0)(ids), expected)


def test_compiled_small_batches_read_their_own_ids():
    """Ids of at most COMPILED_IDS replay a compiled kernel call per ids shape and dtype: every
    replay gathers its own ids, also under an outer mx.compile that takes the module's state as
    an input (its weight a tracer while traced), and after it."""
    data = random_table_bytes(np.random.default_rng(9), "Q4_K", 300, 512)
    emb = Embedding.from_table(Table.from_bytes(data, "Q4_K", 512))
    step = mx.compile(lambda i: emb(i) * 1.0, inputs=emb.state)
    rng = np.random.default_rng(2)
    for shape in [(1,), (1, 1), (), (COMPILED_IDS,), (COMPILED_IDS + 1,)]:
        for dtype in (np.int32, np.int64, np.int32):
            for call in (emb, step, emb):
                ids = rng.integers(0, 300, shape).astype(dtype)
                assert_bits_equal(call(mx.array(ids)), reference(data, "Q4_K", ids))


def test_embedding_follows_the_default_device():
    """Embedding's fast path calls the GPU gather only while the default device is a GPU: on the
    CPU the portable gather serves (the kernel would refuse the CPU), then the GPU's again."""
    data = random_table_bytes(np.random.default_rng(8), "Q4_K", 20, 256)
    emb = Embedding.from_table(Table.from_bytes(data, "Q4_K", 256))
    for ids in (mx.array([[3, 19, 40]]), mx.array(7)):
        expected = reference(data, "Q4_K", np.array(ids))
        assert_bits_equal(emb(ids), expected)  # binds the GPU gather, then calls it
        assert_bits_equal(emb(ids), expected)
        with mx.stream(mx.cpu):
            assert_bits_equal(emb(ids), expected)
        assert_bits_equal(emb(ids), expected)


@pytest.mark.parametrize("name", ["tiny-llama-Q4_K_M.gguf", "tiny-llama-f16.gguf"])
def test_fixtures_on_the_gpu(name):
    table = Table.from_gguf(fixture(name))
    ids = np.arange(table.vocab)
    assert_bits_equal(embedding(table, ids), reference(np.array(table.data), table.qtype, ids))


@pytest.mark.parametrize("qtype", sorted(FORMATS))
def test_every_type_on_the_gpu(qtype):
    """Per type: a random table (ids past the vocabulary clamp), its llama.cpp-quantized table
    (types/, where the fixtures have it), and for MXFP4 and NVFP4 each of the 256 scale bytes (E8M0's
    subnormal halves and products past float32's range; UE4M3's 0x7F), in every output dtype."""
    fmt = FORMATS[qtype]
    dims = 512 if fmt.block_values > 1 else 12
    raws = [random_table_bytes(np.random.default_rng(13), qtype, 300, dims)]
    if fmt.quantized and (FIXTURES / "types" / f"{qtype}.gguf").is_file():
        raws.append(np.array(Table.from_gguf(FIXTURES / "types" / f"{qtype}.gguf").data))
    if fmt.float_kind in ("e8m0", "ue4m3"):
        blocks = np.random.default_rng(5).integers(0, 256, (256 // len(fmt.float_offsets), fmt.block_bytes), np.uint8)
        blocks[:, list(fmt.float_offsets)] = np.arange(256, dtype=np.uint8).reshape(len(blocks), -1)
        raws.append(blocks.reshape(-1, fmt.row_bytes(dims)))
    for raw in raws:
        table = Table.from_bytes(raw, qtype, dims)
        ids = np.concatenate([np.arange(table.vocab), [table.vocab, -1]]).astype(np.int32)
        with np.errstate(over="ignore"):
            expected = reference(raw, qtype, ids)
        for dtype in (mx.float32, mx.float16, mx.bfloat16):
            assert_bits_equal(embedding(table, mx.array(ids), dtype, backend=GPU), expected, dtype)
