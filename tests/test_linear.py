"""Linear over a GGUF tensor's bytes, and gradients through the head (Linear and Embedding.as_linear)
against the float reference: gguf-py's dequantized matrix in mlx.nn.Linear."""

import mlx.core as mx
import numpy as np
import pytest
from mlx import nn
from mlx.utils import tree_flatten

import muser_mlx
from muser_mlx import FORMATS, Embedding, Linear, Table
from muser_mlx.backends import KERNEL_BACKENDS, select

from conftest import fixture, map_float_fields, random_table_bytes, reference

ON_GPU = select("auto") in KERNEL_BACKENDS
gpu = pytest.mark.skipif(not ON_GPU, reason="needs MLX's Metal or CUDA backend; this MLX build has neither")
ROWS = [1, 4, 16, 40, 100, 300]
DTYPES = [mx.float32, mx.float16, mx.bfloat16]
# relative L2 error allowed against the float32 reference, by x's dtype (its rounding of x, of
# the dequantized weights on the tiled paths, and of the output)
TOLERANCE = {mx.float32: 1e-5, mx.float16: 4e-3, mx.bfloat16: 3e-2}


def trained_like(rng, qtype, rows, dims):
    """Random blocks of ``qtype`` whose float fields (scales) are in [0.001, 0.01), as a trained
    model's are: float16 x stays in range."""
    blocks = random_table_bytes(rng, qtype, rows, dims).reshape(-1, FORMATS[qtype].block_bytes)

    def scales(bits, _):
        return np.float16(rng.uniform(0.001, 0.01, bits.shape)).view(np.uint16)

    return map_float_fields(blocks, qtype, scales).reshape(rows, -1)


def projection(qtype="Q6_K", outputs=40, inputs=512, seed=3):
    """(Linear over random bytes, the float32 nn.Linear of their dequantization)."""
    raw = trained_like(np.random.default_rng(seed), qtype, outputs, inputs)
    dense = nn.Linear(inputs, outputs, bias=False)
    dense.weight = mx.array(reference(raw, qtype, np.arange(outputs)))
    return Linear.from_table(Table.from_bytes(raw, qtype, inputs)), dense


def relative_error(got, want) -> float:
    got, want = np.array(got.astype(mx.float32), np.float64), np.array(want.astype(mx.float32), np.float64)
    return float(np.linalg.norm(got - want) / np.linalg.norm(want))


def test_drop_in_for_nn_linear():
    linear, dense = projection("Q4_K")
    x = mx.random.normal((2, 3, 512), key=mx.random.key(1))
    assert linear(x).shape == dense(x).shape == (2, 3, 40)
    assert relative_error(linear(x), dense(x)) < 1e-6
    assert (linear.input_dims, linear.output_dims, linear.qtype) == (512, 40, "Q4_K")
    assert repr(linear) == "Linear(input_dims=512, output_dims=40, bias=False, qtype=Q4_K)"
    assert linear.trainable_parameters() == {} and linear.weight.size * 32 // linear.bits == 40 * 512


def test_built_empty_then_filled_and_the_bias():
    linear, dense = projection("Q8_0", outputs=8, inputs=64)
    empty = Linear(64, 8, bias=True, qtype="Q8_0")
    assert empty.weight.shape == (8, 68) and empty.bias.shape == (8,)
    bias = mx.arange(8, dtype=mx.float32)
    empty.load_weights([("weight", linear.weight), ("bias", bias)], strict=True)
    x = mx.random.normal((5, 64), key=mx.random.key(2))
    assert relative_error(empty(x), dense(x) + bias) < 1e-6


@pytest.mark.parametrize(
    "bias, got",
    [
        (mx.zeros((3, 8)), r"float32 \[3, 8\]"),  # unchecked: logits [3, 8] from one row of x
        (mx.zeros((5,)), r"float32 \[5\]"),  # unchecked: a broadcast error at the first call
        (mx.zeros((8,), mx.complex64), r"complex64 \[8\]"),  # unchecked: complex logits
    ],
)
def test_from_table_checks_the_bias(bias, got):
    linear, _ = projection("Q8_0", outputs=8, inputs=64)
    with pytest.raises(ValueError, match=rf"a bias of 8 real floats is needed, got {got}"):
        Linear.from_table(linear.table, bias=bias)


def test_output_is_in_x_dtype():
    linear, _ = projection("Q8_0", inputs=64)
    for dtype in DTYPES:
        assert linear(mx.ones((3, 64), dtype)).dtype == dtype


def test_from_linear_quantizes_like_llama_cpp():
    dense = nn.Linear(256, 6)
    linear = Linear.from_linear(dense, "Q4_K")
    x = mx.random.normal((4, 256), key=mx.random.key(0))
    assert linear(x).shape == (4, 6) and "bias" in linear
    assert relative_error(linear(x), dense(x)) < 0.1


@pytest.mark.parametrize("rows", ROWS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_input_gradient_of_linear(rows, dtype):
    linear, dense = projection()
    x = mx.random.normal((rows, 512), key=mx.random.key(rows)).astype(dtype)
    cotangent = mx.random.normal((rows, 40), key=mx.random.key(7)).astype(dtype)
    (out,), (dx,) = mx.vjp(lambda x: [linear(x)], [x], [cotangent])
    (want_out,), (want_dx,) = mx.vjp(lambda x: [dense(x)], [x.astype(mx.float32)], [cotangent.astype(mx.float32)])
    assert dx.dtype == dtype and dx.shape == x.shape
    assert relative_error(out, want_out) < TOLERANCE[dtype]
    assert relative_error(dx, want_dx) < TOLERANCE[dtype]


@pytest.mark.parametrize("rows", ROWS)
def test_grad_through_the_tied_head_compiled(rows):
    raw = random_table_bytes(np.random.default_rng(5), "Q8_0", 70, 64)
    emb = Embedding.from_table(Table.from_bytes(raw, "Q8_0", 64))
    weight = mx.array(reference(raw, "Q8_0", np.arange(70)))

    def loss(x, head):
        return (head(mx.tanh(x)) ** 2).sum()

    x = mx.random.normal((rows, 64), key=mx.random.key(rows))
    grad = mx.compile(mx.grad(lambda x: loss(x, emb.as_linear)))
    want = mx.grad(lambda x: loss(x, lambda h: h @ weight.T))(x)
    assert relative_error(grad(x), want) < 1e-5


def test_gradient_tiles_the_table():
    """The vjp dequantizes a few rows at a time: with tiles of 16 rows (of 512 float32 values)
    the result is the same."""
    from muser_mlx.backends import tuning

    linear, dense = projection(outputs=40)
    x = mx.random.normal((3, 512), key=mx.random.key(4))
    whole = mx.grad(lambda x: linear(x).sum())(x)
    with tuning.fixed(TILE_BYTES=16 * 512 * 4, TILE_ALIGN=1, TILE_DEVICE_SHARE=0):
        tiled = mx.grad(lambda x: linear(x).sum())(x)
    assert relative_error(tiled, whole) < 1e-6
    assert relative_error(tiled, mx.grad(lambda x: dense(x).sum())(x)) < 1e-5


def test_lora_style_training_moves_only_the_adapter():
    """A frozen Linear under a trainable low-rank update: value_and_grad reaches the update
    through the kernels' vjp, and the bytes stay as they were."""
    linear, _ = projection("Q4_K", outputs=32, inputs=256)

    class Adapted(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = mx.zeros((256, 4))
            self.base = linear
            self.head = projection("Q8_0", outputs=10, inputs=32)[0]

        def __call__(self, x):
            return self.head(self.base(x + x @ self.a @ mx.ones((4, 256))))

    model = Adapted()
    before = np.array(linear.weight)
    x = mx.random.normal((4, 256), key=mx.random.key(9))
    _, grads = nn.value_and_grad(model, lambda m, x: (m(x) ** 2).mean())(model, x)
    assert [k for k, _ in tree_flatten(grads)] == ["a"] and float(mx.abs(grads["a"]).sum()) > 0
    assert np.array_equal(np.array(model.base.weight), before)


@gpu
@pytest.mark.gpu
@pytest.mark.parametrize("rows", ROWS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_input_gradient_through_the_gpu_kernels(rows, dtype):
    """1, 4 and 16 rows take the streamed kernels (matvec, bytedot, mma), 40 and 100 of 16-bit x
    the tiled matrix multiply (Q4_K: one of tuning.TILE_MMA_WIDE_FORMATS; float32 x the tiled
    path), 300 the tiled path."""
    linear, dense = projection("Q4_K")
    x = mx.random.normal((rows, 512), key=mx.random.key(rows)).astype(dtype)
    grad = mx.compile(mx.grad(lambda x: (linear(x).astype(mx.float32) ** 2).sum()))
    want = mx.grad(lambda x: (dense(x) ** 2).sum())(x.astype(mx.float32))
    assert relative_error(grad(x), want) < 10 * TOLERANCE[dtype]


def test_compiled_head_calls_match_and_differentiate(monkeypatch):
    """The head call a GPU backend replays under mx.compile for few rows, taken here on the CPU's
    ops backend: the same logits and gradients as the call built each time."""
    from types import SimpleNamespace

    from muser_mlx import backends
    from muser_mlx.backends import ops
    from muser_mlx.linear import differentiable_head

    linear, dense = projection("Q5_0", inputs=64)
    linear = Linear.from_table(linear.table, backend="ops")
    x = mx.random.normal((2, 64), key=mx.random.key(3))
    stand_in = SimpleNamespace(
        kernel_data=lambda data: data, bind=lambda table, dtype, prepared: ops.bind(table, dtype)
    )
    monkeypatch.setattr(backends, "KERNEL_BACKENDS", ("metal", "cuda", "ops"))
    monkeypatch.setitem(backends.BACKENDS, "ops", stand_in)
    differentiable_head.cache_clear()
    out, grad = linear(x), mx.grad(lambda x: (linear(x) ** 2).sum())(x)
    compiled = differentiable_head("Q5_0", 40, linear.weight.shape[1], "ops")
    monkeypatch.undo()
    differentiable_head.cache_clear()
    assert compiled.__name__ == "kernel_call"
    assert relative_error(out, linear(x)) == 0  # the same logits built each call, without the stand-in
    assert relative_error(grad, mx.grad(lambda x: (dense(x) ** 2).sum())(x)) < 1e-5


def test_the_table_is_prepared_once_outside_the_custom_function(monkeypatch):
    """A GPU backend's head call prepares the module's weight (alignment, residency) before its
    mx.custom_function, once; inside it, where MLX hands the function new Python arrays for the
    same buffers, the tiles' gathers take the bytes as prepared, for the call built each time, the
    compiled call and the gradient. Taken on the CPU with ops as a stand-in kernel backend."""
    from types import SimpleNamespace

    from muser_mlx import backends
    from muser_mlx.backends import ops
    from muser_mlx.linear import differentiable_head

    prepared, binds = [], []

    def bind(table, dtype, prepared=False):
        binds.append(prepared)
        return ops.bind(table, dtype)

    device = SimpleNamespace(kernel_data=lambda data: prepared.append(data) or data, bind=bind)
    monkeypatch.setattr(backends, "KERNEL_BACKENDS", ("metal", "cuda", "ops"))
    monkeypatch.setitem(backends.BACKENDS, "ops", device)
    differentiable_head.cache_clear()
    try:
        linear, dense = projection("Q5_0", inputs=64)
        linear = Linear.from_table(linear.table, backend="ops")
        for rows in (300, 300, 2, 2):  # built each call; replayed under mx.compile
            x = mx.random.normal((rows, 64), key=mx.random.key(rows))
            assert relative_error(linear(x), dense(x)) < 1e-5
        grad = mx.grad(lambda x: (linear(x) ** 2).sum())(x)
        assert relative_error(grad, mx.grad(lambda x: (dense(x) ** 2).sum())(x)) < 1e-5
    finally:
        differentiable_head.cache_clear()
    assert len(prepared) == 5 and all(p is linear.weight for p in prepared)
    assert binds and all(binds)  # every gather inside took the prepared bytes


def test_from_gguf_is_the_files_projection():
    path = fixture("tiny-llama-Q4_K_M.gguf")
    head = Linear.from_gguf(path, "output.weight")
    down = Linear.from_gguf(path, "blk.0.ffn_down.weight")
    assert (head.qtype, head.input_dims, head.output_dims) == ("Q6_K", 512, 1003)
    assert (down.qtype, down.input_dims, down.output_dims) == ("Q6_K", 1024, 512)
    import gguf

    raw = next(t for t in gguf.GGUFReader(path).tensors if t.name == "blk.0.ffn_down.weight")
    dense = nn.Linear(1024, 512, bias=False)
    dense.weight = mx.array(reference(np.asarray(raw.data), "Q6_K", np.arange(512)))
    x = mx.random.normal((3, 1024), key=mx.random.key(0))
    assert relative_error(down(x), dense(x)) < 1e-6
    with pytest.raises(muser_mlx.GGUFError, match="'nope' is not in the file"):
        Linear.from_gguf(path, "nope")
    with pytest.raises(muser_mlx.GGUFError, match=r"has shape \[512\]; a Linear is \[in, out\] in ggml order"):
        Linear.from_gguf(path, "output_norm.weight")


def test_x_the_fast_path_refuses_gets_as_linears_errors():
    linear, _ = projection("Q8_0", inputs=64)
    with pytest.raises(ValueError, match=r"x must have shape \[\.\.\., 64\]"):
        linear(mx.ones((2, 32)))
    with pytest.raises(ValueError, match="x must have shape"):
        linear(mx.array(1.0))
    with pytest.raises(TypeError, match="float32, float16 or bfloat16 x"):
        linear(mx.ones((2, 64), mx.int32))
    assert linear(mx.zeros((0, 64))).shape == (0, 40) and linear([[0.0] * 64]).shape == (1, 40)
