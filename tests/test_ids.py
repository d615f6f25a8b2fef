"""Every kind of id, on the host path (checked: IndexError / TypeError) and the lazy mx.array
path (clamped to min(unsigned(id), vocab - 1), counted on request), row for row vs gguf-py."""

from __future__ import annotations

import mlx.core as mx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from muser_mlx import Embedding, Table, embedding
from muser_mlx.backends import ops
from muser_mlx.backends.device import DeviceBackend
from muser_mlx.backends.tuning import COMPILED_IDS

from conftest import assert_bits_equal, random_table_bytes, reference, tables

VOCAB = 10


@pytest.fixture(params=["Q4_K", "F16"])
def table(request):
    dims = 256 if request.param == "Q4_K" else 8
    data = random_table_bytes(np.random.default_rng(7), request.param, VOCAB, dims)
    return Table.from_bytes(data, request.param, dims), data


def unsigned_out_of_range(ids) -> int:
    return int((np.asarray(ids).astype(np.int64).astype(np.uint64) >= VOCAB).sum())


# (name, ids); each is looked up as given (host) and as mx.array (lazy). On the host the
# out-of-range ones raise IndexError; as mx.array they read row min(unsigned(id), VOCAB - 1).
OUT_OF_RANGE = [
    ("negative", [-1, 3, -(2**31)]),
    ("equal to vocab", [VOCAB]),
    ("int32 max", np.array([2**31 - 1], np.int32)),
    ("int64 past 2**32", np.array([2**32 + 1, 2**40, -(2**40)], np.int64)),
    ("uint64 max", np.array([2**64 - 1], np.uint64)),
    ("uint8 past vocab", np.array([200, 3], np.uint8)),
]
IN_RANGE = [
    ("uint8", np.array([0, 9, 3], np.uint8)),
    ("int8", np.array([[1, 2], [3, 4]], np.int8)),
    ("python int, 0-d", 3),
    ("numpy scalar, 0-d", np.int64(9)),
    ("0-d array", np.array(5, np.uint16)),
    ("empty list", []),
    ("empty int array", np.zeros((0, 3), np.int64)),
    ("strided view", np.arange(10)[::2]),
    ("reversed view", np.arange(10)[::-3]),
    ("transposed 2-D", np.arange(10).reshape(2, 5).T),
]


@pytest.mark.parametrize("name, ids", OUT_OF_RANGE, ids=[n for n, _ in OUT_OF_RANGE])
def test_out_of_range_host_ids_raise(table, name, ids):
    t, _ = table
    with pytest.raises(IndexError, match=f"vocabulary of {VOCAB}"):
        embedding(t, ids)


@pytest.mark.parametrize("name, ids", OUT_OF_RANGE, ids=[n for n, _ in OUT_OF_RANGE])
def test_out_of_range_mx_ids_clamp_and_are_counted(table, name, ids):
    t, data = table
    x = mx.array(ids)
    rows, count = embedding(t, x, return_out_of_range=True)
    assert_bits_equal(rows, reference(data, t.qtype, np.array(x)))
    assert count.dtype == mx.uint32 and count.shape == () and count.item() == unsigned_out_of_range(np.array(x)) > 0
    with pytest.raises(IndexError):
        embedding(t, x, check_ids=True)
    with pytest.raises(IndexError):
        Embedding.from_table(t, on_out_of_range="raise")(x)


@pytest.mark.parametrize("name, ids", IN_RANGE, ids=[n for n, _ in IN_RANGE])
def test_in_range_ids_host_and_mx(table, name, ids):
    t, data = table
    ids64 = np.asarray(ids, dtype=np.int64)
    want = reference(data, t.qtype, ids64) if ids64.size else np.zeros((*ids64.shape, t.dims), np.float32)
    assert_bits_equal(embedding(t, ids), want)
    # MLX refuses NumPy arrays with negative strides (the host path copies them)
    x = mx.array(np.array(ids, dtype=np.asarray(ids).dtype if np.size(ids) else np.int32, order="C"))
    rows, count = embedding(t, x, return_out_of_range=True)
    assert_bits_equal(rows, want)
    assert count.item() == 0


@pytest.mark.parametrize(
    "x",
    [
        mx.arange(10)[::2],
        mx.arange(10)[::-1][1::3],
        mx.arange(10).reshape(2, 5).T,
        mx.arange(20).reshape(4, 5)[1:3, ::2],
        mx.broadcast_to(mx.array([4]), (3, 2)),
    ],
    ids=["strided", "reversed", "transposed", "2-D slice", "broadcast"],
)
def test_non_contiguous_mx_ids(table, x):
    t, data = table
    assert_bits_equal(embedding(t, x), reference(data, t.qtype, np.array(x)))


def test_python_ints_beyond_64_bits_are_out_of_range(table):
    t, _ = table
    # NumPy makes [0, 2**63] float64 and [0, 2**64] objects
    for ids in (2**70, [1, 2**64], -(2**63) - 1, [0, 2**63], [-1, 2**63], [[1], [2**63]]):
        with pytest.raises(IndexError, match="out of range"):
            embedding(t, ids)


@pytest.mark.parametrize(
    "ids",
    [[True, False], np.array([1.0]), 1.5, [0.0], np.array([], np.float32), ["1"], [None]],
    ids=["bool", "float array", "float", "float list", "empty float", "str", "None"],
)
def test_non_integer_host_ids_raise_type_error(table, ids):
    with pytest.raises(TypeError, match="must be integers"):
        embedding(table[0], ids)


@pytest.mark.parametrize(
    "x",
    [mx.array([True]), mx.array([1.0]), mx.array([]), mx.array([1], mx.float16)],
    ids=["bool", "float32", "empty (float32 by default)", "float16"],
)
def test_non_integer_mx_ids_raise_type_error(table, x):
    with pytest.raises(TypeError, match="must be integers"):
        embedding(table[0], x)


def _stand_in(built: list, calls: list):
    """A stand-in for MLX's kernel registration: it records the names of the kernels it is asked
    to build and the calls of each, which return the shape and dtype asked for, every row filled
    with its id."""

    def kernel(**call):
        calls.append(call)
        shape, ids = call["output_shapes"][0], call["inputs"][1]
        return [mx.zeros(shape, call["output_dtypes"][0]) + ids.reshape(*shape[:-1], 1)]

    def register():
        return lambda **kw: built.append(kw["name"]) or kernel

    return register


@pytest.mark.parametrize("backend", ["ops", "kernel"])
def test_every_gather_checks_its_ids_dtype(table, backend):
    """The gathers check an mx.array's dtype themselves (Embedding leaves it to them); the kernel
    backend before it builds a kernel for that dtype."""
    built, calls = [], []
    gather = (ops if backend == "ops" else DeviceBackend("cuda", _stand_in(built, calls))).bind(table[0], mx.float32)
    for x in (mx.array([1.0]), mx.array([True]), mx.array([], mx.float16)):
        with pytest.raises(TypeError, match="must be integers"):
            gather(x)
    assert built == []
    if backend == "kernel":
        mx.eval(gather(mx.array([3], mx.uint16)))
        assert calls[-1]["inputs"][1].dtype == mx.uint16
        assert len(built) == 1 and "_uint16_" in built[0]


def test_kernel_gather_takes_ids_of_any_shape(table):
    """The kernel gather passes ids of one or more dimensions to its kernel as they are, a 0-d id
    as one of one dimension (MLX gives a kernel its input's shape for 1 or more dimensions only),
    and makes no kernel call for no ids."""
    built, calls = [], []
    t = table[0]
    gather = DeviceBackend("cuda", _stand_in(built, calls)).bind(t, mx.float32)
    assert gather(mx.array(3)).shape == (t.dims,)
    assert calls[-1]["inputs"][1].shape == (1,) and calls[-1]["grid"][1] == 1
    assert gather(mx.array([[1, 2, 3]])).shape == (1, 3, t.dims)
    assert calls[-1]["inputs"][1].shape == (1, 3) and calls[-1]["grid"][1] == 3
    assert gather(mx.zeros((2, 0), mx.int32)).shape == (2, 0, t.dims) and len(calls) == 2


def test_kernel_gather_compiles_small_batches(table):
    """Ids of at most COMPILED_IDS are gathered by a compiled call: the kernel call is built once
    per ids shape (the trace) and replayed, by every bind of the same kernel; more ids build it
    every call."""
    built, calls = [], []
    t = table[0]
    backend = DeviceBackend("cuda", _stand_in(built, calls))
    gather = backend.bind(t, mx.float32)
    for n, builds in ((1, 1), (COMPILED_IDS, 1), (COMPILED_IDS + 1, 3)):
        before = len(calls)
        for seed in range(3):
            ids = mx.random.randint(0, t.vocab, (n,), key=mx.random.key(seed))
            out = gather(ids)
            assert out.shape == (n, t.dims) and mx.array_equal(out[:, 0], ids)  # a replay reads its own ids
        assert len(calls) - before == builds, n
    before = len(calls)
    for seed in range(2):
        assert gather(mx.array([[seed]])).shape == (1, 1, t.dims)
    assert len(calls) == before + 1  # a new shape: one trace
    again = backend.bind(t, mx.float32)  # as the functional embedding does on every call
    assert mx.array_equal(again(mx.array([[7]]))[..., 0], mx.array([[7]])) and len(calls) == before + 1


def test_embedding_counts_clamped_ids_lazily(table):
    t, data = table
    emb = Embedding.from_table(t)
    x = mx.array([[0, -1], [VOCAB, 4]])
    rows, count = emb.lookup_with_count(x)
    assert_bits_equal(rows, reference(data, t.qtype, np.array(x)))
    assert count.item() == 2
    assert_bits_equal(emb(x), reference(data, t.qtype, np.array(x)))  # "clamp" is the default
    with pytest.raises(ValueError, match="on_out_of_range"):
        Embedding.from_table(t, on_out_of_range="ignore")


@settings(max_examples=60, deadline=None)
@given(
    tables(max_vocab=12),
    st.sampled_from([mx.int8, mx.uint8, mx.int16, mx.uint16, mx.int32, mx.uint32, mx.int64, mx.uint64]),
    st.lists(st.integers(-(2**63), 2**64 - 1), min_size=1, max_size=12),
    st.booleans(),
)
def test_any_integer_mx_ids_clamp(table_and_bytes, dtype, values, reverse):
    t, data = table_and_bytes
    bits = 8 * dtype.size
    signed = mx.issubdtype(dtype, mx.signedinteger)
    wrapped = [((v + 2 ** (bits - 1)) % 2**bits - 2 ** (bits - 1)) if signed else v % 2**bits for v in values]
    x = mx.array(np.array(wrapped, dtype=np.dtype(str(dtype).split(".")[-1])))
    if reverse:
        x = x[::-1]
    rows, count = embedding(t, x, return_out_of_range=True)
    ids = np.array(x).astype(np.int64).astype(np.uint64)
    assert_bits_equal(rows, reference(data, t.qtype, np.array(x)))
    assert count.item() == int((ids >= t.vocab).sum())


@pytest.mark.parametrize(
    "ids", [[True, 5], [5, False], [[1, 2], [3, True]], (2, np.True_), [np.array([True]), np.array([2])]], ids=str
)
def test_bools_among_host_ids(table, ids):
    """NumPy makes [True, 5] an int64 array, so True read row 1 while [True] raised TypeError."""
    t, _ = table
    with pytest.raises(TypeError, match="token ids must be integers, got a bool among them"):
        embedding(t, ids)
    with pytest.raises(TypeError, match="got a bool"):
        Embedding.from_table(t)(ids)


def test_raise_under_compile_says_to_clamp_and_count(table):
    """Inside mx.compile the ids are tracers: checking them would evaluate them on the host."""
    t, data = table
    emb = Embedding.from_table(t, on_out_of_range="raise")
    x = mx.array([1, 3])
    for fn in (mx.compile(emb), mx.compile(lambda ids: embedding(t, ids, check_ids=True))):
        with pytest.raises(ValueError, match="cannot be range-checked inside mx.compile.*lookup_with_count"):
            fn(x)
    rows, count = mx.compile(Embedding.from_table(t).lookup_with_count)(mx.array([1, VOCAB]))
    assert_bits_equal(rows, reference(data, t.qtype, [1, VOCAB]))
    assert count.item() == 1
