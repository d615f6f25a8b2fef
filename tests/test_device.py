"""The GPU backends' plumbing, on the CPU: the table bytes as kernels read them, a launch's checks,
the head kernels' launches on a stand-in for MLX's kernel registration, and tuning.fixed."""

import mlx.core as mx
import numpy as np
import pytest

from muser_mlx import Table, linear
from muser_mlx.backends import BACKENDS, head, tuning
from muser_mlx.backends.device import KERNEL_ALIGNMENT, DeviceBackend
from muser_mlx.backends.gather import gather_calls
from muser_mlx.backends.source import Launch
from muser_mlx.embedding import gather_for

from conftest import random_table_bytes


def _address(a: mx.array) -> int:
    return np.asarray(a).ctypes.data


def _stand_in(calls: list):
    """MLX's kernel registration, standing in: each built kernel records its calls (name, inputs,
    grid, output) and returns zeros of the output's shape and dtype."""

    def register():
        def build(name, **_):
            def kernel(inputs, grid, threadgroup, output_shapes, output_dtypes):
                calls.append(dict(name=name, inputs=inputs, grid=grid, shape=output_shapes[0], dtype=output_dtypes[0]))
                return [mx.zeros(output_shapes[0], output_dtypes[0])]

            return kernel

        return build

    return register


@pytest.mark.parametrize("offset", [0, 1, 8])
def test_kernel_data_copies_a_misaligned_view_once(offset):
    """A view off a KERNEL_ALIGNMENT boundary is copied (a fresh GPU allocation is aligned; the
    CPU's need not be, so its address is not checked here), an aligned array is used as it is."""
    backend = DeviceBackend("metal", _stand_in([]))
    raw = np.random.default_rng(offset).integers(0, 256, 16 * 288 + offset, dtype=np.uint8)
    data = mx.array(raw)[offset:].reshape(16, 288)
    ready = backend.kernel_data(data)
    assert np.array_equal(np.array(ready), raw[offset:].reshape(16, 288))
    assert (ready is data) == (_address(data) % KERNEL_ALIGNMENT == 0) and (offset != 1 or ready is not data)
    assert backend.kernel_data(data) is ready  # prepared once per array
    words = backend.kernel_words(data)  # the gather's input, kept with it
    assert backend.kernel_words(data) is words and words.dtype == mx.uint64  # rows of 288 B: 8-byte words
    assert np.array_equal(np.array(words.view(mx.uint8)).reshape(16, 288), raw[offset:].reshape(16, 288))
    del data, ready, words
    assert backend._ready == {}  # forgotten with the array


def test_kernel_data_takes_a_tracer_as_it_is():
    """Inside mx.compile an input has no address: it stands for every array the compiled
    function is called with, so it is neither evaluated nor copied."""
    backend = DeviceBackend("cuda", _stand_in([]), resident=True)
    seen = []
    step = mx.compile(lambda a: seen.append(backend.kernel_data(a) is a) or a + 1)
    assert np.array_equal(np.array(step(mx.arange(4))), [1, 2, 3, 4]) and seen == [True]


def test_a_launch_checks_its_grid_and_a_kernel_its_constants():
    def launch(defines=(("DIMS", 8),), grid=(32, 1, 1)):
        return Launch(None, defines, grid, (32, 1, 1), (1, 8), mx.float32)

    assert launch().define("DIMS") == 8
    with pytest.raises(KeyError, match="VOCAB.*it has DIMS"):
        launch().define("VOCAB")
    for grid in ((0, 1, 1), (32, 1)):
        with pytest.raises(ValueError, match="3 positive sizes"):
            launch(grid=grid)
    kernel = DeviceBackend("cuda", _stand_in([]), byte_dots=True).xruns_kernel
    for defines in ((("dims", 8),), (("DIMS", 8.0),), (("DIMS", True),)):
        with pytest.raises(ValueError, match="upper-case name and an int"):
            kernel(launch(defines), [mx.zeros((1, 8))])
    with pytest.raises(ValueError, match=r"takes 1 inputs \(x\), got 2"):
        kernel(launch(), [mx.zeros((1, 8)), mx.zeros((1, 8))])


@pytest.fixture
def stand_in_cuda(monkeypatch):
    """A CUDA backend with matrix units and byte dot products whose kernels are stand-ins."""
    calls = []
    monkeypatch.setitem(
        BACKENDS,
        "cuda",
        DeviceBackend("cuda", _stand_in(calls), includes=True, matrix_units=lambda: True, byte_dots=True),
    )
    return calls


def test_head_kernel_launches(stand_in_cuda):
    """Each streaming kernel's inputs, grid (a warp per VROWS table rows) and output, as
    kernels/matvec.h, bytedot.h, xruns.h and mma.h take them."""
    calls = stand_in_cuda
    table = Table.from_bytes(random_table_bytes(np.random.default_rng(0), "Q4_K", 1001, 512), "Q4_K", 512)
    x = mx.zeros((3, 512), mx.float16)
    rows, vrows, values = tuning.matvec_layout(3, 512, 1001)
    assert head.matvec(table, x, "cuda").shape == (3, 1001)
    (call,) = calls
    assert call["grid"] == (-(-1001 // vrows) * 32, 1, 1) and (call["shape"], call["dtype"]) == ((3, 1001), mx.float16)
    assert [a.dtype for a in call["inputs"]] == [
        mx.uint64,
        mx.float16,
    ]  # the table as 8-byte words (gather.table_words)
    assert call["name"].startswith(f"muser_matvec_Q4_K_512_1001_{values}_{rows}_{vrows}_float16_uint64_float16_")
    calls.clear()
    assert head.bytedot(table, x, "cuda").shape == (3, 1001)
    runs, logits = calls
    assert runs["name"].startswith("muser_xruns_512_2_uint32_float16_") and runs["shape"] == (3, 32, 12)
    assert logits["inputs"][1].shape == (3, 32, 12) and logits["shape"] == (3, 1001)
    calls.clear()
    out = head.mma(table, mx.zeros((9, 512), mx.float32), "cuda")
    (call,) = calls
    vtiles, xtiles = tuning.mma_layout(9, table.qtype, mx.float32)
    assert out.shape == (9, 1001) and call["shape"] == (8 * xtiles, 1001)  # whole passes, sliced to n
    assert [a.shape for a in call["inputs"][1:]] == [(3, 8 * xtiles, 512), (32, 8 * xtiles)]  # 3 bfloat16 parts
    assert call["grid"] == (-(-1001 // (16 * vtiles)) * 32, 1, 1)


@pytest.mark.parametrize("qtype", ["Q8_0", "Q4_K"])
def test_mma_one_pass_beyond_16_rows_by_format(stand_in_cuda, qtype):
    """From 17 rows of 16-bit x the formats of MMA_ONE_PASS_FORMATS take 32 rows of x in one
    pass (MMA_ONE_PASS_TILES), the others, and float32 x, passes of 16; up to 16 rows all take the
    same layout."""
    calls = stand_in_cuda
    table = Table.from_bytes(random_table_bytes(np.random.default_rng(0), qtype, 1001, 512), qtype, 512)
    one_pass = (2, 4) if qtype == "Q8_0" else (4, 2)
    for n, dtype, (vtiles, xtiles) in ((16, mx.float16, (4, 2)), (20, mx.bfloat16, one_pass), (20, mx.float32, (4, 2))):
        calls.clear()
        head.mma(table, mx.zeros((n, 512), dtype), "cuda")
        (call,) = calls
        assert call["shape"] == (-(-n // (8 * xtiles)) * 8 * xtiles, 1001)
        assert call["grid"] == (-(-1001 // (16 * vtiles)) * 32, 1, 1)


def test_mma_word_rows_by_layout_format_and_dtype():
    """kernels/mma.h takes its rows as whole words (WORD_ROWS) in the layouts of
    MMA_WORD_ROWS_TILES (4 x 2: 9-16 rows, and 17-32 for the formats outside MMA_ONE_PASS_FORMATS)
    of 16-bit x, never for MMA_BYTE_ROWS_FORMATS or float32 x."""
    rng = np.random.default_rng(0)
    tables = {q: Table.from_bytes(random_table_bytes(rng, q, 64, 512), q, 512) for q in ("Q8_0", "Q4_0", "IQ2_XXS")}
    for qtype, n, dtype, word_rows in (
        ("Q8_0", 16, mx.float16, 1),
        ("Q8_0", 4, mx.float16, 0),  # 4 x 1
        ("Q8_0", 20, mx.bfloat16, 0),  # the one pass, 2 x 4
        ("Q4_0", 20, mx.bfloat16, 1),  # two passes of 4 x 2
        ("IQ2_XXS", 16, mx.float16, 0),
        ("Q8_0", 16, mx.float32, 0),
    ):
        assert head.mma_launch(tables[qtype], mx.zeros((n, 512), dtype)).define("WORD_ROWS") == word_rows, (qtype, n)


def test_head_kernels_refuse_what_they_cannot_run(stand_in_cuda):
    rng = np.random.default_rng(1)
    q4k = Table.from_bytes(random_table_bytes(rng, "Q4_K", 5, 256), "Q4_K", 256)
    f16 = Table.from_bytes(random_table_bytes(rng, "F16", 5, 256), "F16", 256)
    for shape in ((2, 255), (0, 256), (1, 0, 256), ()):
        with pytest.raises(ValueError, match=r"x \[\.\.\., 256\], at least one row"):
            head.matvec(q4k, mx.zeros(shape), "cuda")
    for kernel in (head.bytedot, head.mma):
        with pytest.raises(TypeError, match="quantized table"):
            kernel(f16, mx.zeros((2, 256)), "cuda")
    with pytest.raises(ValueError, match="GPU backend"):
        head.matvec(q4k, mx.zeros((2, 256)), "ops")
    with pytest.raises(ValueError, match="warp matrix multiplies"):
        head.mma(q4k, mx.zeros((2, 256)), "metal")
    assert stand_in_cuda == []


def test_tuning_fixed_sets_and_restores():
    before = tuning.TILE_BYTES
    with pytest.raises(RuntimeError):
        with tuning.fixed(TILE_BYTES=3 * 64 * 2, TILE_ALIGN=1, MATVEC_VALUES=8):
            assert (tuning.tile_rows(64, mx.float16), tuning.matvec_layout(1, 64, 3)[2]) == (3, 8)
            raise RuntimeError
    assert tuning.tile_rows(64, mx.float16) % tuning.TILE_ALIGN == 0
    # a share of the device's memory where that is more than TILE_BYTES, else TILE_BYTES; 0: no share
    with tuning.fixed(TILE_BYTES=4 * 64 * 2, TILE_ALIGN=1, TILE_DEVICE_SHARE=16):
        assert tuning.tile_rows(64, mx.float16, 16 * 10 * 64 * 2) == 10
        assert tuning.tile_rows(64, mx.float16, 16 * 3 * 64 * 2) == 4
        assert tuning.tile_rows(64, mx.float16) == 4
    with tuning.fixed(TILE_BYTES=4 * 64 * 2, TILE_ALIGN=1, TILE_DEVICE_SHARE=0):
        assert tuning.tile_rows(64, mx.float16, 1 << 40) == 4
    assert tuning.TILE_BYTES == before and tuning.MATVEC_VALUES == 16
    with pytest.raises(ValueError, match="no constant TILE_ROW;"):
        with tuning.fixed(TILE_ROW=3):
            pass


def test_tuning_fixed_reaches_a_compiled_head(monkeypatch):
    """A head call of up to COMPILED_ROWS rows replays an mx.compile trace
    (linear.differentiable_head), which keeps what the constants decided when it was made; a
    constant that tuning.fixed sets later still reaches the call, and the one restored after it:
    fixed() empties those traces as it starts and ends. (A stand-in head whose logits read a
    constant, and a stand-in for CUDA's table preparation, so that it runs on any machine.)"""
    monkeypatch.setattr(BACKENDS["cuda"], "kernel_data", lambda data: data)
    monkeypatch.setattr(head, "logits", lambda table, x, backend: x * tuning.MATVEC_VALUES)
    weight = mx.array(random_table_bytes(np.random.default_rng(0), "Q8_0", 3, 32))
    x = mx.ones((1, 32))

    def call() -> float:
        return linear.differentiable_head("Q8_0", 3, weight.shape[1], "cuda")(weight, x)[0, 0].item()

    assert call() == tuning.MATVEC_VALUES == 16
    with tuning.fixed(MATVEC_VALUES=8):
        assert call() == 8
    assert call() == 16


def test_tuning_fixed_empties_every_cache_of_decisions():
    """The caches that hold calls made under the constants (the compiled heads, the gather's
    calls, and the Embedding modules' hold on those) are empty inside a tuning.fixed block and
    after it, so the next call is made under the constants then in force."""
    rng = np.random.default_rng(1)
    weight = mx.array(random_table_bytes(rng, "Q8_0", 3, 32))
    gather_for("Q8_0", tuple(weight.shape), mx.float32, "ops", False)
    linear.differentiable_head("Q8_0", 3, weight.shape[1], "ops")
    caches = (gather_for, linear.differentiable_head, gather_calls)
    with tuning.fixed(MATVEC_VALUES=8):
        assert [c.cache_info().currsize for c in caches] == [0, 0, 0]
        gather_for("Q8_0", tuple(weight.shape), mx.float32, "ops", False)
    assert [c.cache_info().currsize for c in caches] == [0, 0, 0]


def test_a_small_table_takes_a_row_per_warp():
    """The matvec's VROWS for one row of x: the tuned 4 at Muse Glimmer's 202,048 rows, 1 for a
    decode step's projections (Gemma 3 270M: 640 and 2,048 rows), 2 rows of x likewise."""
    assert tuning.matvec_layout(1, 6656, 202048) == (1, tuning.MATVEC_VROWS[1], 16)
    assert tuning.matvec_layout(1, 2048, 640) == tuning.matvec_layout(1, 640, 2048) == (1, 1, 16)
    assert tuning.matvec_layout(2, 640, tuning.MATVEC_MIN_WARPS * tuning.MATVEC_VROWS[2]) == (2, 8, 16)
    assert tuning.matvec_layout(2, 640, tuning.MATVEC_MIN_WARPS * tuning.MATVEC_VROWS[2] - 1) == (2, 1, 16)
