"""Embedding as an mlx.nn module: drop-in shape and API, frozen table, lazy, compiled, nested."""

import mlx.core as mx
import numpy as np
import pytest
from mlx import nn
from mlx.utils import tree_flatten

from muser_mlx import FORMATS, Embedding, Linear, Table, embedding, memory

from conftest import assert_bits_equal, random_table_bytes, reference


def test_drop_in_for_nn_embedding(q4k_table):
    table, raw = q4k_table
    emb = Embedding.from_table(table)
    dense = nn.Embedding(table.vocab, table.dims)
    dense.weight = mx.array(reference(raw, "Q4_K", np.arange(table.vocab)))
    ids = mx.array([[1, 2, 3], [10, 0, 4]])
    assert emb(ids).shape == dense(ids).shape == (2, 3, table.dims)
    assert mx.array_equal(emb(ids), dense(ids)).item()
    assert (emb.num_embeddings, emb.dims, emb.qtype) == (table.vocab, table.dims, "Q4_K")
    assert repr(emb) == f"Embedding({table.vocab}, {table.dims}, qtype=Q4_K, dtype=mlx.core.float32)"


def test_table_is_frozen_and_the_dtype_rides_along(q4k_table):
    emb = Embedding.from_table(q4k_table[0])
    assert emb.trainable_parameters() == {}
    assert set(emb.parameters()) == {"weight", "dtype"} and emb.weight.dtype == mx.uint8
    assert emb["dtype"].size == 0 and emb.dtype == mx.float32


def test_built_empty_then_filled_by_load_weights(q4k_table):
    """A model's __init__ builds Embedding(num_embeddings, dims, qtype); load_weights(strict=True)
    fills it with the GGUF bytes under the module's name."""
    table, raw = q4k_table

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = Embedding(table.vocab, table.dims, "Q4_K")

    model = Model()
    assert model.embed.weight.shape == (table.vocab, table.row_bytes)
    model.load_weights([("embed.weight", mx.array(raw)), ("embed.dtype", mx.zeros((0,)))], strict=True)
    assert_bits_equal(model.embed(mx.array([3, 9])), reference(raw, "Q4_K", [3, 9]))


def test_sizes_follow_the_weight(q4k_table):
    table, raw = q4k_table
    emb = Embedding(8, table.dims, "Q4_K")
    emb.update({"weight": mx.array(np.concatenate([raw, raw[:9]]))})
    assert (emb.num_embeddings, emb.dims, emb.table.vocab) == (20, table.dims, 20)
    assert_bits_equal(emb(mx.array([19])), reference(raw, "Q4_K", [8]))


@pytest.mark.parametrize("strict", [True, False])
def test_a_float_table_is_a_clear_error(q4k_table, strict):
    table, _ = q4k_table
    model = nn.Sequential(Embedding(table.vocab, table.dims, "Q4_K"))
    with pytest.raises(ValueError, match=r"shape|Embedding\(11, 512, qtype=Q4_K.*uint8 \[rows, k \* 144\]"):
        model.load_weights(
            [("layers.0.weight", mx.zeros((table.vocab, table.dims))), ("layers.0.dtype", mx.zeros((0,)))],
            strict=strict,
        )
    with pytest.raises(ValueError, match=r"Embedding\(11, 512.*got float32 \[11, 144\].*from_embedding"):
        model.layers[0].update({"weight": mx.zeros((table.vocab, 144))})
    # set as an attribute, as anything but an array (nn.Module keeps those as plain attributes)
    weight = model.layers[0].weight
    for value, name in ((np.zeros((11, 288), np.uint8), "ndarray"), (5, "int"), (None, "NoneType")):
        with pytest.raises(ValueError, match=rf"Embedding\(11, 512.*got {name}$"):
            model.layers[0].weight = value
        assert model.layers[0]["weight"] is weight  # the table stays


def test_set_dtype_sets_the_output_dtype(q4k_table):
    table, raw = q4k_table
    model = nn.Sequential(Embedding.from_table(table))
    model.set_dtype(mx.bfloat16)
    assert model.layers[0].dtype == mx.bfloat16 and model.layers[0].weight.dtype == mx.uint8
    assert_bits_equal(model(mx.array([2])), reference(raw, "Q4_K", [2]), mx.bfloat16)


def test_parameter_count_is_rows_times_dims(q4k_table):
    """mlx-lm counts a module with ``bits`` as weight.size * 32 // bits values."""
    table, _ = q4k_table
    emb = Embedding.from_table(table)
    assert emb.weight.size * 32 // emb.bits == table.vocab * table.dims
    assert emb.bits / 4 == 4.5  # Q4_K: 144 bytes per 256 values


def test_gradients_flow_to_layers_after_it(q4k_table):
    table, _ = q4k_table

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = Embedding.from_table(table)
            self.head = nn.Linear(table.dims, 3)

        def __call__(self, ids):
            return self.head(self.embed(ids))

    model = Model()
    loss_and_grad = nn.value_and_grad(model, lambda m, ids: m(ids).sum())
    _, grads = loss_and_grad(model, mx.array([1, 2]))
    assert tree_flatten(grads["embed"]) == [] and grads["head"]["weight"].shape == (3, table.dims)


def test_lookup_is_lazy_and_compiles(q4k_table):
    table, raw = q4k_table
    emb = Embedding.from_table(table)
    ids = mx.array([3, 1, 4])
    out = emb(ids)  # nothing evaluated yet: the graph holds the lookup
    assert_bits_equal(out, reference(raw, "Q4_K", [3, 1, 4]))
    step = mx.compile(lambda i: mx.tanh(emb(i)).sum(axis=-1))
    expected = np.tanh(reference(raw, "Q4_K", [[1, 5]])).sum(axis=-1)
    # the lookup is exact (above); tanh and the sum may differ by ulps between devices and fusions
    np.testing.assert_allclose(np.array(step(mx.array([[1, 5]]))), expected, rtol=1e-5)


@pytest.mark.parametrize("dtype", [mx.float16, mx.bfloat16])
def test_output_dtypes(q4k_table, dtype):
    table, raw = q4k_table
    assert_bits_equal(Embedding.from_table(table, dtype)([0, 7]), reference(raw, "Q4_K", [0, 7]), dtype)
    assert_bits_equal(Embedding.from_table(table, dtype)(mx.array([0, 7])), reference(raw, "Q4_K", [0, 7]), dtype)


def test_updated_weight_is_used(q4k_table):
    table, raw = q4k_table
    emb = Embedding.from_table(table)
    emb(mx.array([0]))
    emb.update({"weight": mx.array(raw[::-1].copy())})
    assert_bits_equal(emb(mx.array([0])), reference(raw, "Q4_K", [table.vocab - 1]))


def test_compiles_with_its_state_as_an_input(q4k_table):
    """mx.compile(step, inputs=model.state), as a training step is compiled: while traced the
    weight is a tracer, which the table takes as it is (tests/test_device.py: and a GPU
    backend's kernel_data)."""
    table, raw = q4k_table
    emb = Embedding.from_table(table)
    step = mx.compile(lambda i: emb(i) * 1.0, inputs=emb.state)
    for ids in ([1, 2], [3, 4], [5]):
        for call in (step, emb):
            assert_bits_equal(call(mx.array(ids)), reference(raw, "Q4_K", ids))


def test_settings_are_fixed_at_construction(q4k_table):
    """dtype, backend and on_out_of_range pick the bound gather and the checks; they read, not write."""
    emb = Embedding.from_table(q4k_table[0], mx.float16, on_out_of_range="raise", backend="ops")
    assert (emb.dtype, emb.backend, emb.on_out_of_range) == (mx.float16, "ops", "raise")
    for name, value in (("dtype", mx.float32), ("backend", "auto"), ("on_out_of_range", "clamp")):
        with pytest.raises(AttributeError, match="no setter"):
            setattr(emb, name, value)
    emb(mx.array([0]))  # binds the gather
    with pytest.raises(IndexError, match="out of range"):
        emb(mx.array([q4k_table[0].vocab]))  # a 1-D mx.array, gather bound: "raise" still checks


def test_functional_form_and_backend_choice(q4k_table):
    table, raw = q4k_table
    assert_bits_equal(embedding(table, [2], backend="ops"), reference(raw, "Q4_K", [2]))
    with pytest.raises(ValueError, match="unknown backend"):
        embedding(table, [2], backend="tpu")
    if not (mx.metal.is_available() or mx.cuda.is_available()):
        with pytest.raises(ValueError, match="not available"):
            Embedding.from_table(table, backend="metal")


@pytest.mark.parametrize(
    "make, error, message",
    [
        # unchecked: MLX's std::bad_cast
        (lambda: Embedding(10.5, 32, "Q8_0"), ValueError, "both integers, got rows=10.5"),
        (lambda: Embedding(10, True, "F32"), ValueError, "dims=True"),  # unchecked: a table of dims 1
        (lambda: Embedding(2**31, 32, "Q8_0"), ValueError, r"dimensions stop at 2\*\*31 - 1"),
        # a zero table past the host's memory: read before a load, MLX died with SIGSEGV
        (lambda: Embedding(2**28, 1024, "Q8_0"), MemoryError, "more than the host's available memory"),
        (lambda: Linear(2**20, 2**20, qtype="Q8_0"), MemoryError, "Linear's table of 1048576 rows"),
    ],
)
def test_constructor_sizes_are_checked(make, error, message, monkeypatch):
    monkeypatch.setattr(memory, "available_memory", lambda: 2**34)  # 16 GiB, whatever the host has
    with pytest.raises(error, match=message):
        make()


@pytest.mark.parametrize("cls", [Embedding, Linear])
def test_a_module_around_bytes_already_read_takes_no_room_of_its_own(cls, monkeypatch):
    # The bytes are in memory, so less is left than they take: the module built around them is no
    # new allocation (its zero table is replaced unread), where one built empty would be.
    table = Table.from_bytes(np.zeros((64, 34), np.uint8), "Q8_0", 32)
    monkeypatch.setattr(memory, "available_memory", lambda: table.data.nbytes - 1)
    module = cls.from_table(table)
    assert module.weight is table.data
    with pytest.raises(MemoryError, match="more than the host's available memory"):
        cls(64, 32, qtype="Q8_0") if cls is Embedding else cls(32, 64, qtype="Q8_0")


def test_from_bytes_rejects_wrong_shapes():
    with pytest.raises(ValueError, match=r"uint8 \[vocab >= 1, 144\]"):
        Table.from_bytes(np.zeros((3, 100), np.uint8), "Q4_K", 256)
    with pytest.raises(ValueError, match="multiple of the Q4_K block"):
        Table.from_bytes(np.zeros((3, 144), np.uint8), "Q4_K", 100)
    with pytest.raises(ValueError, match="unsupported format"):
        Table.from_bytes(np.zeros((3, 144), np.uint8), "Q9_9", 256)
    # bytes of another dtype are not reinterpreted, NumPy's no more than MLX's
    with pytest.raises(
        ValueError, match=r"F16 table of dims 128 must be uint8 \[vocab >= 1, 256\], got float32 \[4, 64\]"
    ):
        Table.from_bytes(np.zeros((4, 64), np.float32), "F16", 128)
    with pytest.raises(ValueError, match=r"got list"):
        Table.from_bytes([[0] * 34], "Q8_0", 32)
    with pytest.raises(ValueError, match=r"dims 32.0 is not"):
        Table.from_bytes(np.zeros((1, 34), np.uint8), "Q8_0", 32.0)
    for shape in ((0, 34), (4, 34, 1), (34,)):  # no rows; not 2-D
        with pytest.raises(
            ValueError, match=rf"must be uint8 \[vocab >= 1, 34\], got uint8 \[{', '.join(map(str, shape))}\]"
        ):
            Table.from_bytes(np.zeros(shape, np.uint8), "Q8_0", 32)


def test_a_table_built_directly_holds_the_rows_it_claims():
    """Table(data, format, dims, vocab) checks the bytes' shape against its sizes: a vocab past the
    rows would pass ids the bytes do not hold to the kernels."""
    q8 = FORMATS["Q8_0"]
    data = mx.zeros((4, 34), mx.uint8)
    assert Table(data, q8, 32, 4).vocab == 4
    with pytest.raises(
        ValueError, match=r"Q8_0 table of dims 32 must be uint8 \[1000000000, 34\], got uint8 \[4, 34\]"
    ):
        Table(data, q8, 32, 10**9)
    with pytest.raises(ValueError, match=r"must be uint8 \[4, 68\]"):
        Table(data, q8, 64, 4)
    with pytest.raises(TypeError, match="Format"):
        Table(data, "Q8_0", 32, 4)
    with pytest.raises(ValueError, match=r"got NumPy uint8 \[4, 34\], not an mx.array \(Table.from_bytes takes"):
        Table(np.zeros((4, 34), np.uint8), q8, 32, 4)  # it said "must be uint8 [4, 34], got uint8 [4, 34]"


@pytest.mark.gpu
@pytest.mark.skipif(
    not (mx.metal.is_available() or mx.cuda.is_available()),
    reason="needs MLX's Metal or CUDA backend; this MLX build has neither",
)
@pytest.mark.parametrize("n", [1, 100])
def test_a_weight_off_the_kernels_alignment_is_read_right(n):
    """A weight that is a view 34 bytes into a larger array (Q8_0 rows of 32 values): the bytes are
    made kernel-ready before the compiled few-id call and the one built per call alike."""
    raw = random_table_bytes(np.random.default_rng(2), "Q8_0", 200, 32)
    big = mx.array(np.concatenate([raw[:1], raw]))
    emb = Embedding(200, 32, "Q8_0")
    emb.weight = big[1:]
    ids = mx.array(np.arange(n) % 200)
    assert_bits_equal(emb(ids), reference(raw, "Q8_0", np.arange(n) % 200))


def test_the_kernel_gather_path_on_a_stand_in_kernel(q4k_table, monkeypatch):
    """gather_for's GPU branch, with a stand-in for the device's gather kernel that reads the
    words it is given with MLX ops: few ids replay the compiled call, many build it, both on the
    weight passed in (not a copy bound earlier), as the device's kernel_words."""
    from types import SimpleNamespace

    from muser_mlx import backends
    from muser_mlx.backends import ops
    from muser_mlx.backends.gather import table_words
    from muser_mlx.embedding import gather_for

    table, raw = q4k_table
    seen = []

    class Kernel:  # DeviceKernel's runner
        def runner(self, launch, dtypes):
            def run(inputs):
                words, ids = inputs
                data = words.view(mx.uint8).reshape(table.vocab, table.row_bytes)
                return ops.bind(Table(data, table.format, table.dims, table.vocab), launch.output_dtype)(ids)

            return run

    def kernel_words(data):
        seen.append(data.shape)
        return table_words(data)

    device = SimpleNamespace(gather_kernel=Kernel(), kernel_words=kernel_words)
    monkeypatch.setattr(backends, "KERNEL_BACKENDS", ("ops",))
    monkeypatch.setitem(backends.BACKENDS, "ops", device)
    gather_for.cache_clear()
    try:
        emb = Embedding.from_table(table, backend="ops")
        for ids in ([3, 1], list(range(11)) * 7):  # 2 ids: compiled; 77: built
            assert_bits_equal(emb(mx.array(ids)), reference(raw, "Q4_K", ids))
        emb.update({"weight": mx.array(raw[::-1].copy())})
        assert_bits_equal(emb(mx.array([0])), reference(raw, "Q4_K", [table.vocab - 1]))
        with pytest.raises(TypeError):
            emb(mx.array([1.0]))
    finally:
        gather_for.cache_clear()
    assert seen == [(table.vocab, table.row_bytes)] * 4  # the float ids' call too, refused by the call
