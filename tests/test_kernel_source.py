"""The device kernel source, executed on the CPU thread by thread (no Mac or GPU needed):
the shared source through prelude_cpu.h, and the complete Metal source as MLX generates it from
the package's registration. Both must equal gguf-py bit for bit."""

import re

import gguf
import mlx.core as mx
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from muser_mlx import Table
from muser_mlx.backends.tuning import KERNEL_SOURCES as KERNELS

from conftest import OUTPUT_DTYPES, assert_bits_equal, random_table_bytes, reference, tables
from kernel_harness import CXX, cpu_gather, cpu_value_table, metal_gather

pytestmark = pytest.mark.skipif(CXX is None, reason="no C++ compiler (g++ or clang++) on PATH")

ID_DTYPES = st.sampled_from([np.int32, np.int64, np.uint32, np.int16, np.uint8])
KERNEL_TABLES = tables(max_vocab=6)


@st.composite
def ids_with_out_of_range(draw, vocab):
    id_dtype = draw(ID_DTYPES)
    info = np.iinfo(id_dtype)
    values = draw(st.lists(st.integers(info.min, info.max), min_size=1, max_size=7))
    values += draw(st.lists(st.integers(0, min(vocab - 1, info.max)), min_size=1, max_size=7))
    n = len(values)  # in one to three dimensions: the kernels count ids from their shape
    shapes = [(n,), (1, n), (n, 1), (1, n, 1)] + [(d, n // d) for d in (2, 3) if n % d == 0]
    return np.array(values, dtype=id_dtype).reshape(draw(st.sampled_from(shapes)))


@settings(max_examples=25, deadline=None)
@given(st.data(), KERNEL_TABLES, OUTPUT_DTYPES)
def test_cpu_build_of_the_shared_source(data, table_and_bytes, dtype):
    table, raw = table_and_bytes
    ids = data.draw(ids_with_out_of_range(table.vocab))
    rows_in_flight = data.draw(st.one_of(st.none(), st.integers(1, 5)))  # None: one per id
    assert_bits_equal(cpu_gather(table, ids, dtype, rows_in_flight), reference(raw, table.qtype, ids), dtype)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data(), KERNEL_TABLES, OUTPUT_DTYPES)
def test_generated_metal_source(capfd, data, table_and_bytes, dtype):
    table, raw = table_and_bytes
    ids = data.draw(ids_with_out_of_range(table.vocab))
    rows_in_flight = data.draw(st.one_of(st.none(), st.integers(1, 5)))
    assert_bits_equal(metal_gather(table, ids, dtype, capfd, rows_in_flight), reference(raw, table.qtype, ids), dtype)


def test_metal_source_is_what_the_package_registers(capfd, q4k_table):
    from muser_mlx.backends.device import METAL

    from kernel_harness import gather_metal_source

    source = gather_metal_source(q4k_table[0], mx.array([1, 2, 3, 4, 5, 6, 7, 8]), mx.float32, capfd)
    assert METAL.gather_kernel.header(q4k_table[0].format) in source and METAL.gather_kernel.body() in source
    assert "#define FORMAT 12\n" in source and "#define VALUES 8\n" in source
    assert re.findall(r"struct Format<ggml::(\w+)>", source) == ["Q4_K"]
    assert "const device uint64_t* table" in source and "device float* out" in source  # table_words


def test_one_kernel_serves_every_batch_width(capfd, q4k_table):
    """The generated source depends on neither the number of ids nor their shape. (MLX's Metal
    backend passes an input of one element in constant memory, a kernel of its own.)"""
    from kernel_harness import gather_metal_source

    table, _ = q4k_table
    shapes = [(8,), (64,), (512,), (32768,), (1, 8), (4, 16), (2, 3, 5)]
    sources = {gather_metal_source(table, mx.zeros(shape, mx.int32), mx.float32, capfd) for shape in shapes}
    assert len(sources) == 1


@pytest.mark.parametrize(
    "qtype, vocab, dims, words",
    [
        ("Q4_K", 11, 512, mx.uint64),  # 288-byte rows: whole 8-byte words
        ("Q6_K", 8, 256, mx.uint64),  # 210-byte rows: 4 of them make whole 8-byte words
        ("Q6_K", 6, 256, mx.uint32),  # 2 of them make whole 4-byte words
        ("Q6_K", 5, 256, mx.uint16),
        ("Q8_0", 7, 32, mx.uint16),  # 34-byte rows
        ("F32", 3, 32, mx.uint64),
    ],
)
def test_the_gather_reads_the_table_as_the_widest_words_of_the_same_buffer(qtype, vocab, dims, words):
    from muser_mlx.backends.gather import table_words

    table = Table.from_bytes(random_table_bytes(np.random.default_rng(1), qtype, vocab, dims), qtype, dims)
    view = table_words(table.data)
    mx.eval(view)
    assert view.dtype == words and view.size == table.nbytes // view.itemsize
    as_bytes, data = np.asarray(view), np.asarray(table.data)
    assert as_bytes.ctypes.data == data.ctypes.data  # a view: no copy of the table
    assert np.array_equal(as_bytes.view(np.uint8).reshape(-1), data.reshape(-1))


# kernels/format_value_tables.h's tables -> gguf-py's (ggml-common.h's), and the formats that use them
VALUE_TABLES = {"iq4nl_values": (gguf.quants.IQ4_NL.kvalues, ["IQ4_NL", "IQ4_XS"]),
                "e2m1_values": (gguf.quants.MXFP4.kvalues, ["MXFP4", "NVFP4"])}


@pytest.mark.parametrize("name", sorted(VALUE_TABLES))
def test_value_tables_are_gguf_pys_element_by_element(name):
    """The header's text lists gguf-py's values, in order, and the kernels' lookups of every
    nibble, less each format's zero, give them."""
    values, qtypes = VALUE_TABLES[name]
    text = (KERNELS / "format_value_tables.h").read_text()
    body = re.search(rf"ByteTable {name}\(\) {{\s*return ByteTable{{(.*?)}};", text, re.DOTALL).group(1)
    words = re.findall(r"table_word\((-?\d+), ([-\d, ]+)\)", body)
    assert len(words) == 2 and [int(v) for _, vs in words for v in vs.split(",")] == list(values)
    for qtype in qtypes:
        assert cpu_value_table(name, qtype).tolist() == list(values), qtype
